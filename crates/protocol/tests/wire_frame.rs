//! Frames survive any split of the byte stream into reads.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use strom_protocol::frame::{encode_frame, FrameDecoder, LENGTH_PREFIX_BYTES};
use strom_protocol::FrameError;

fn bodies() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8)
}

/// Feeds `wire` to a decoder in chunks ending at `cuts`, collecting frames.
fn decode_in_chunks(wire: &[u8], cuts: &[usize]) -> Result<Vec<Bytes>, FrameError> {
    let decoder = FrameDecoder::new(300);
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (wire.len() + 1)).collect();
    cuts.push(wire.len());
    cuts.sort_unstable();
    let mut src = BytesMut::new();
    let mut frames = Vec::new();
    let mut start = 0;
    for cut in cuts {
        src.put_slice(&wire[start..cut]);
        start = cut;
        while let Some(frame) = decoder.decode(&mut src)? {
            frames.push(frame);
        }
    }
    assert!(src.is_empty() || src.len() < LENGTH_PREFIX_BYTES + 300);
    Ok(frames)
}

proptest! {
    #[test]
    fn any_split_yields_the_same_frames(bodies in bodies(), cuts in proptest::collection::vec(any::<usize>(), 0..20)) {
        let mut wire = BytesMut::new();
        for body in &bodies {
            encode_frame(body, &mut wire).unwrap();
        }
        let frames = decode_in_chunks(&wire, &cuts).unwrap();
        let expected: Vec<Bytes> = bodies.into_iter().map(Bytes::from).collect();
        prop_assert_eq!(frames, expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic(wire in proptest::collection::vec(any::<u8>(), 0..600), cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        match decode_in_chunks(&wire, &cuts) {
            Ok(frames) => prop_assert!(frames.iter().all(|frame| frame.len() <= 300)),
            Err(FrameError::NegativeLength { length_bytes }) => prop_assert!(length_bytes < 0),
            Err(FrameError::TooLarge { length_bytes, max_frame_bytes }) => {
                prop_assert!(length_bytes > max_frame_bytes as u64)
            }
        }
    }

    #[test]
    fn lengths_over_the_limit_are_rejected_with_any_body(length in 301i32.., tail in proptest::collection::vec(any::<u8>(), 0..16)) {
        let mut src = BytesMut::new();
        src.put_i32(length);
        src.put_slice(&tail);
        let error = FrameDecoder::new(300).decode(&mut src).unwrap_err();
        prop_assert_eq!(error, FrameError::TooLarge { length_bytes: length as u64, max_frame_bytes: 300 });
    }
}

#[test]
fn an_incomplete_prefix_waits() {
    let decoder = FrameDecoder::default();
    let mut src = BytesMut::from(&[0u8, 0, 0][..]);
    assert_eq!(decoder.decode(&mut src).unwrap(), None);
    assert_eq!(src.len(), 3);
}
