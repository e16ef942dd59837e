//! Response frames as a list of byte chunks, for vectored writes.
//!
//! A Fetch response is mostly record bytes that the broker has just read
//! from a segment into a [`Bytes`]. Encoding it into one contiguous buffer
//! would copy those bytes a second time. [`encode_response_frame_chunks`]
//! instead returns the frame as chunks: the encoded fields in small owned
//! buffers and each large record payload as the very `Bytes` the response
//! holds (reference-counted, not copied), ready for `write_vectored`.
//!
//! How the payloads are recognised: the generated encoders write a `bytes`
//! field with one `put_slice` of the field's contents. [`ChunkedBuf`] is
//! told in advance which payloads may be shared, and when a `put_slice`
//! receives exactly one of them (same address, same length) it keeps a
//! reference instead of copying. Anything else is copied as usual, so the
//! output is always byte-for-byte what [`encode_response_frame`] produces.
//!
//! [`encode_response_frame`]: crate::messages::encode_response_frame

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{FrameError, MessageError};
use crate::frame::LENGTH_PREFIX_BYTES;
use crate::kafka::protocol::buf::ByteBufMut;
use crate::messages::{encode_response, Response};

/// Payloads shorter than this are copied: an extra I/O vector entry costs
/// more than copying a few hundred bytes.
pub const MIN_SHARED_PAYLOAD_BYTES: usize = 1024;

/// One piece of a chunked frame.
#[derive(Debug)]
enum Chunk {
    Owned(BytesMut),
    Shared(Bytes),
}

/// A [`ByteBufMut`] that copies small writes into owned buffers and keeps
/// registered payloads by reference.
#[derive(Debug, Default)]
pub struct ChunkedBuf {
    done: Vec<Chunk>,
    done_bytes: usize,
    current: BytesMut,
    shared: Vec<Bytes>,
    next_shared: usize,
}

impl ChunkedBuf {
    /// An empty buffer that will keep any of `shared` by reference when it
    /// is written whole, in the order given.
    pub fn new(shared: Vec<Bytes>) -> ChunkedBuf {
        ChunkedBuf {
            shared,
            ..ChunkedBuf::default()
        }
    }

    /// Total number of bytes written.
    pub fn len(&self) -> usize {
        self.done_bytes + self.current.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the registered payload that `src` is, if any.
    fn find_shared(&self, src: &[u8]) -> Option<usize> {
        if src.len() < MIN_SHARED_PAYLOAD_BYTES {
            return None;
        }
        let rest = self.shared.get(self.next_shared..)?;
        rest.iter()
            .position(|payload| payload.as_ptr() == src.as_ptr() && payload.len() == src.len())
            .map(|position| self.next_shared + position)
    }

    fn push_shared(&mut self, index: usize) {
        let Some(payload) = self.shared.get(index).cloned() else {
            return;
        };
        if !self.current.is_empty() {
            let owned = self.current.split();
            self.done_bytes += owned.len();
            self.done.push(Chunk::Owned(owned));
        }
        self.done_bytes += payload.len();
        self.done.push(Chunk::Shared(payload));
        self.next_shared = index + 1;
    }

    /// The chunks, in order; empty chunks are left out.
    pub fn into_chunks(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.done.push(Chunk::Owned(self.current));
        }
        self.done
            .into_iter()
            .map(|chunk| match chunk {
                Chunk::Owned(owned) => owned.freeze(),
                Chunk::Shared(shared) => shared,
            })
            .filter(|chunk| !chunk.is_empty())
            .collect()
    }

    /// Overwrites the first four bytes written (a frame's size prefix,
    /// written as a placeholder first) with `value`.
    fn patch_prefix(&mut self, value: i32) {
        let target = match self.done.first_mut() {
            Some(Chunk::Owned(owned)) => owned,
            Some(Chunk::Shared(_)) => return,
            None => &mut self.current,
        };
        if let Some(prefix) = target.get_mut(..LENGTH_PREFIX_BYTES) {
            prefix.copy_from_slice(&value.to_be_bytes());
        }
    }
}

// SAFETY: every method delegates to the `BytesMut` being filled, which
// upholds `BufMut`'s contract (`chunk_mut` is writable memory of the
// reported length; `advance_mut` is only called by callers that initialised
// that many bytes, and is passed on unchanged). `put_slice` either delegates
// or records a whole payload without touching `current`.
unsafe impl BufMut for ChunkedBuf {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller guarantees that `cnt` bytes of the slice last
        // returned by `chunk_mut` (which is `current`'s) were initialised.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.find_shared(src) {
            Some(index) => self.push_shared(index),
            None => self.current.put_slice(src),
        }
    }
}

impl ByteBufMut for ChunkedBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    /// Gaps (used by record batch encoding, not by message fields) must lie
    /// in the bytes written since the last shared payload.
    fn seek(&mut self, offset: usize) {
        debug_assert!(offset >= self.done_bytes, "seek into a finished chunk");
        self.current
            .resize(offset.saturating_sub(self.done_bytes), 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        debug_assert!(r.start >= self.done_bytes, "range in a finished chunk");
        let start = r.start.saturating_sub(self.done_bytes);
        let end = r.end.saturating_sub(self.done_bytes);
        &mut self.current[start..end]
    }
}

/// The payloads of `body` worth sending by reference: the record bytes of
/// each Fetch partition, in encoding order.
fn shared_payloads(body: &Response) -> Vec<Bytes> {
    match body {
        Response::Fetch(fetch) => fetch
            .responses
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .filter_map(|partition| partition.records.clone())
            .filter(|records| records.len() >= MIN_SHARED_PAYLOAD_BYTES)
            .collect(),
        _ => Vec::new(),
    }
}

/// Encodes a whole response frame (size prefix, header, body) as chunks
/// whose concatenation is exactly what
/// [`encode_response_frame`](crate::messages::encode_response_frame) writes;
/// large Fetch record payloads are shared, not copied.
pub fn encode_response_frame_chunks(
    correlation_id: i32,
    api_version: i16,
    body: &Response,
) -> Result<Vec<Bytes>, MessageError> {
    let mut buf = ChunkedBuf::new(shared_payloads(body));
    buf.put_i32(0);
    encode_response(correlation_id, api_version, body, &mut buf)?;
    let body_bytes = buf.len() - LENGTH_PREFIX_BYTES;
    let length = i32::try_from(body_bytes).map_err(|_| FrameError::TooLarge {
        length_bytes: body_bytes as u64,
        max_frame_bytes: i32::MAX as usize,
    })?;
    buf.patch_prefix(length);
    Ok(buf.into_chunks())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use crate::kafka::messages::{FetchResponse, TopicName};
    use crate::kafka::protocol::StrBytes;
    use crate::messages::encode_response_frame;

    fn fetch_response(payload_sizes: &[usize]) -> (Response, Vec<Bytes>) {
        let payloads: Vec<Bytes> = payload_sizes
            .iter()
            .enumerate()
            .map(|(index, size)| Bytes::from(vec![index as u8 + 1; *size]))
            .collect();
        let partitions = payloads
            .iter()
            .enumerate()
            .map(|(index, payload)| {
                PartitionData::default()
                    .with_partition_index(index as i32)
                    .with_high_watermark(1000)
                    .with_records(Some(payload.clone()))
            })
            .collect();
        let topic = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("events")))
            .with_partitions(partitions);
        let response = FetchResponse::default().with_responses(vec![topic]);
        (Response::Fetch(response), payloads)
    }

    fn contiguous(correlation_id: i32, version: i16, body: &Response) -> Vec<u8> {
        let mut dst = BytesMut::new();
        encode_response_frame(correlation_id, version, body, &mut dst).unwrap();
        dst.to_vec()
    }

    #[test]
    fn chunks_concatenate_to_the_contiguous_encoding_at_every_fetch_version() {
        let (body, _) = fetch_response(&[5000, 10, 2048, 0, 70_000]);
        for version in 4..=18 {
            let chunks = encode_response_frame_chunks(42, version, &body).unwrap();
            let joined: Vec<u8> = chunks.iter().flat_map(|chunk| chunk.to_vec()).collect();
            assert_eq!(joined, contiguous(42, version, &body), "version {version}");
        }
    }

    #[test]
    fn large_payloads_are_shared_not_copied() {
        let (body, payloads) = fetch_response(&[5000, 10, 2048]);
        let chunks = encode_response_frame_chunks(1, 12, &body).unwrap();
        let shares = |payload: &Bytes| {
            chunks
                .iter()
                .any(|chunk| chunk.as_ptr() == payload.as_ptr() && chunk.len() == payload.len())
        };
        assert!(shares(&payloads[0]));
        assert!(!shares(&payloads[1]), "a small payload is copied");
        assert!(shares(&payloads[2]));
        // prefix + fields, payload 0, fields + small payload + fields, payload 2, tail fields.
        assert_eq!(chunks.len(), 5);
    }

    #[test]
    fn other_responses_are_one_chunk() {
        let (fetch, _) = fetch_response(&[]);
        let chunks = encode_response_frame_chunks(3, 12, &fetch).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].to_vec(), contiguous(3, 12, &fetch));
    }

    #[test]
    fn an_unserved_version_is_an_error() {
        let (body, _) = fetch_response(&[4096]);
        assert!(encode_response_frame_chunks(1, 99, &body).is_err());
    }

    #[test]
    fn gaps_inside_the_current_chunk_are_filled() {
        let mut buf = ChunkedBuf::new(Vec::new());
        buf.put_u8(1);
        let gap = buf.put_gap(4);
        buf.put_u8(2);
        buf.gap_buf(gap).copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(
            buf.into_chunks(),
            vec![Bytes::from_static(&[1, 9, 9, 9, 9, 2])]
        );
    }
}
