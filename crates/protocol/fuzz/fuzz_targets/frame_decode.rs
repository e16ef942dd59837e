//! Arbitrary bytes fed in arbitrary chunks into `FrameDecoder`: no panic, no
//! allocation beyond the limit, and every frame it yields is within the limit
//! and matches what a single-read decode yields.
#![no_main]
use bytes::{BufMut, BytesMut};
use libfuzzer_sys::fuzz_target;
use strom_protocol::frame::FrameDecoder;

const MAX_FRAME_BYTES: usize = 64 * 1024;

/// Decodes `wire` fed in chunks whose sizes come from `chunk_sizes`.
fn frames_in_chunks(wire: &[u8], chunk_sizes: &[u8]) -> (Vec<bytes::Bytes>, bool) {
    let decoder = FrameDecoder::new(MAX_FRAME_BYTES);
    let mut src = BytesMut::new();
    let mut frames = Vec::new();
    let mut rest = wire;
    let mut sizes = chunk_sizes.iter().cycle();
    while !rest.is_empty() {
        let size = sizes.next().map_or(rest.len(), |&size| usize::from(size).max(1)).min(rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        src.put_slice(chunk);
        loop {
            match decoder.decode(&mut src) {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= MAX_FRAME_BYTES);
                    frames.push(frame);
                }
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (chunk_sizes, wire) = rest.split_at(split);
    let chunked = frames_in_chunks(wire, chunk_sizes);
    let whole = frames_in_chunks(wire, &[]);
    assert_eq!(chunked, whole, "chunking changed the frames");
});
