//! Size-prefixed frames: the unit of Kafka's wire.
//!
//! Every request and response travels as a frame:
//!
//! ```text
//! +----------------------+---------------------------+
//! | length: i32 (BE)     | body: `length` bytes      |
//! +----------------------+---------------------------+
//! ```
//!
//! [`FrameDecoder`] cuts frames out of a [`BytesMut`] that a connection fills
//! as bytes arrive; it does no I/O and keeps no state, so a frame split across
//! any number of reads comes out whole once its last byte is there. The length
//! is checked against a configurable maximum before anything is allocated
//! for it (Kafka's `socket.request.max.bytes`, 100 MiB by default).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::FrameError;

/// Bytes of the length prefix in front of every frame.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Default maximum frame body size: Kafka's `socket.request.max.bytes`
/// default of 100 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Cuts size-prefixed frames out of a receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder that rejects frames whose body is longer than
    /// `max_frame_bytes`.
    pub const fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder { max_frame_bytes }
    }

    /// The largest frame body this decoder accepts.
    pub const fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Takes the next complete frame body off the front of `src`.
    ///
    /// Returns `Ok(None)` while the frame is incomplete (then `src` is left
    /// as it was, with capacity reserved for the rest of the frame), and an
    /// error for a negative or over-limit length. After an error the stream
    /// cannot be resynchronised: close the connection.
    pub fn decode(&self, src: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(prefix) = src.get(..LENGTH_PREFIX_BYTES) else {
            return Ok(None);
        };
        let length_bytes = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let body_bytes = self.check_length(length_bytes)?;
        let frame_bytes = LENGTH_PREFIX_BYTES + body_bytes;
        if src.len() < frame_bytes {
            // Bounded by `max_frame_bytes`, checked above.
            src.reserve(frame_bytes - src.len());
            return Ok(None);
        }
        src.advance(LENGTH_PREFIX_BYTES);
        Ok(Some(src.split_to(body_bytes).freeze()))
    }

    fn check_length(&self, length_bytes: i32) -> Result<usize, FrameError> {
        let Ok(body_bytes) = usize::try_from(length_bytes) else {
            return Err(FrameError::NegativeLength { length_bytes });
        };
        if body_bytes > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                length_bytes: body_bytes as u64,
                max_frame_bytes: self.max_frame_bytes,
            });
        }
        Ok(body_bytes)
    }
}

/// Appends one frame (length prefix, then `body`) to `dst`.
pub fn encode_frame(body: &[u8], dst: &mut BytesMut) -> Result<(), FrameError> {
    let length_bytes = length_prefix(body.len())?;
    dst.reserve(LENGTH_PREFIX_BYTES + body.len());
    dst.put_i32(length_bytes);
    dst.put_slice(body);
    Ok(())
}

/// Starts a frame whose body is written in place: appends a placeholder
/// length prefix to `dst` and returns its position for [`finish_frame`].
pub fn start_frame(dst: &mut BytesMut) -> usize {
    let start = dst.len();
    dst.put_i32(0);
    start
}

/// Completes a frame started with [`start_frame`] at `start`: writes the
/// length of everything appended since as the frame's size prefix.
pub fn finish_frame(dst: &mut BytesMut, start: usize) -> Result<(), FrameError> {
    let body_start = start + LENGTH_PREFIX_BYTES;
    debug_assert!(body_start <= dst.len(), "finish_frame without start_frame");
    let body_bytes = dst.len().saturating_sub(body_start);
    let length_bytes = length_prefix(body_bytes)?;
    if let Some(prefix) = dst.get_mut(start..body_start) {
        prefix.copy_from_slice(&length_bytes.to_be_bytes());
    }
    Ok(())
}

fn length_prefix(body_bytes: usize) -> Result<i32, FrameError> {
    i32::try_from(body_bytes).map_err(|_| FrameError::TooLarge {
        length_bytes: body_bytes as u64,
        max_frame_bytes: i32::MAX as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_frame_that_arrives_byte_by_byte() {
        let mut wire = BytesMut::new();
        encode_frame(b"hello", &mut wire).unwrap();
        let decoder = FrameDecoder::default();
        let mut src = BytesMut::new();
        let mut frames = Vec::new();
        for byte in wire.iter() {
            src.put_u8(*byte);
            if let Some(frame) = decoder.decode(&mut src).unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, vec![Bytes::from_static(b"hello")]);
        assert!(src.is_empty());
    }

    #[test]
    fn rejects_negative_length() {
        let mut src = BytesMut::from(&[0xff, 0xff, 0xff, 0xfe, 1, 2][..]);
        let error = FrameDecoder::default().decode(&mut src).unwrap_err();
        assert_eq!(error, FrameError::NegativeLength { length_bytes: -2 });
    }

    #[test]
    fn rejects_over_limit_length_before_allocating() {
        let mut src = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        let error = FrameDecoder::new(1024).decode(&mut src).unwrap_err();
        assert_eq!(
            error,
            FrameError::TooLarge {
                length_bytes: i32::MAX as u64,
                max_frame_bytes: 1024
            }
        );
        assert!(src.capacity() < 1024);
    }

    #[test]
    fn accepts_exactly_the_limit_and_empty_frames() {
        let decoder = FrameDecoder::new(3);
        let mut src = BytesMut::new();
        encode_frame(b"abc", &mut src).unwrap();
        encode_frame(b"", &mut src).unwrap();
        assert_eq!(decoder.decode(&mut src).unwrap().unwrap(), &b"abc"[..]);
        assert_eq!(decoder.decode(&mut src).unwrap().unwrap(), &b""[..]);
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
    }

    #[test]
    fn start_and_finish_frame_patch_the_length() {
        let mut dst = BytesMut::from(&b"xy"[..]);
        let start = start_frame(&mut dst);
        dst.put_slice(b"body");
        finish_frame(&mut dst, start).unwrap();
        assert_eq!(&dst[..], &b"xy\x00\x00\x00\x04body"[..]);
    }
}
