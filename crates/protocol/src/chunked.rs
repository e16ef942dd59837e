//! Response frames as a list of parts, for vectored writes and `sendfile`.
//!
//! A Fetch response is mostly record bytes from segment files. Encoding it
//! into one contiguous buffer would copy those bytes a second time.
//! [`encode_response_frame_parts`] instead returns the frame as parts: the
//! encoded fields in small owned buffers, each large record payload as the
//! very [`Bytes`] the response holds (reference-counted, not copied), and
//! each *stand-in* payload as the region the caller registered for it, for
//! the writer to send straight from the file (Kafka's zero-copy transfer).
//!
//! How the payloads are recognised: the generated encoders write a `bytes`
//! field with one `put_slice` of the field's contents. [`ChunkedBuf`] is
//! told in advance which payloads may be shared, and when a `put_slice`
//! receives exactly one of them (same address, same length) it keeps a
//! reference instead of copying. Anything else is copied as usual, so the
//! bytes of the output are always what [`encode_response_frame`] produces.
//!
//! A stand-in ([`stand_in`]) is a [`Bytes`] of the payload's length that
//! points into a static area of zeros; each one in a response must be
//! registered with its region. Encoding fails with
//! [`MessageError::StandInNotReplaced`] if a stand-in has no region or its
//! bytes would be copied into the frame, so a frame never carries the zeros.
//!
//! [`encode_response_frame`]: crate::messages::encode_response_frame

use std::ops::Range;
use std::sync::OnceLock;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{FrameError, MessageError};
use crate::frame::LENGTH_PREFIX_BYTES;
use crate::kafka::protocol::buf::ByteBufMut;
use crate::messages::{encode_response, Response};

/// Payloads shorter than this are copied: an extra I/O vector entry costs
/// more than copying a few hundred bytes. (Stand-ins are always replaced.)
pub const MIN_SHARED_PAYLOAD_BYTES: usize = 1024;

/// The longest payload a stand-in can take the place of.
pub const MAX_STAND_IN_BYTES: usize = 64 * 1024 * 1024;

/// How many distinct stand-ins one response can hold.
pub const MAX_STAND_INS: usize = 4096;

/// The zeros stand-ins point into: allocated zeroed on first use and never
/// freed. Pages of it that nothing reads are never made resident, so it
/// costs address space, not memory.
static STAND_IN_AREA: OnceLock<&'static [u8]> = OnceLock::new();

/// A stand-in for `length` record bytes that the writer will send from
/// elsewhere; `slot` (below [`MAX_STAND_INS`]) tells the stand-ins of one
/// response apart, so use a different one for each. `None` when `length`
/// or `slot` is out of range (read the bytes instead).
///
/// Register the stand-in and its region with
/// [`encode_response_frame_parts`]. Its contents are zeros and must never
/// reach a client.
pub fn stand_in(slot: usize, length: usize) -> Option<Bytes> {
    if slot >= MAX_STAND_INS || length > MAX_STAND_IN_BYTES {
        return None;
    }
    let area = STAND_IN_AREA.get_or_init(|| Vec::leak(vec![0; MAX_STAND_IN_BYTES + MAX_STAND_INS]));
    Some(Bytes::from_static(&area[slot..slot + length]))
}

/// Whether `bytes` lies (even partly) in the stand-in area.
fn overlaps_stand_ins(bytes: &[u8]) -> bool {
    // Before the area exists, nothing can point into it.
    let Some(area) = STAND_IN_AREA.get() else {
        return false;
    };
    let area = area.as_ptr_range();
    let range = bytes.as_ptr_range();
    !bytes.is_empty() && range.start < area.end && range.end > area.start
}

/// One part of an encoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramePart<R> {
    /// Bytes to write as they are.
    Bytes(Bytes),
    /// The region registered for a stand-in, to be sent in its place (as
    /// many bytes as the stand-in was long).
    Region(R),
}

/// One piece of a chunked frame.
#[derive(Debug)]
enum Chunk {
    Owned(BytesMut),
    Shared(Bytes),
    /// The index of a registered region.
    Region(usize),
}

/// A payload that may be kept by reference, and the region that replaces
/// it if it is a stand-in.
#[derive(Debug)]
struct SharedPayload {
    bytes: Bytes,
    region: Option<usize>,
}

/// A [`ByteBufMut`] that copies small writes into owned buffers and keeps
/// registered payloads by reference.
#[derive(Debug, Default)]
pub struct ChunkedBuf {
    done: Vec<Chunk>,
    done_bytes: usize,
    current: BytesMut,
    shared: Vec<SharedPayload>,
    next_shared: usize,
    /// The length of a stand-in that was written without being replaced.
    stand_in_copied: Option<usize>,
}

impl ChunkedBuf {
    /// An empty buffer that will keep any of `shared` by reference when it
    /// is written whole, in the order given.
    pub fn new(shared: Vec<Bytes>) -> ChunkedBuf {
        ChunkedBuf {
            shared: shared
                .into_iter()
                .map(|bytes| SharedPayload {
                    bytes,
                    region: None,
                })
                .collect(),
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
        // Most writes are small fields: only stand-ins are registered below
        // the threshold.
        if src.len() < MIN_SHARED_PAYLOAD_BYTES && !overlaps_stand_ins(src) {
            return None;
        }
        let rest = self.shared.get(self.next_shared..)?;
        rest.iter()
            .position(|payload| {
                payload.bytes.as_ptr() == src.as_ptr() && payload.bytes.len() == src.len()
            })
            .map(|position| self.next_shared + position)
    }

    fn push_shared(&mut self, index: usize) {
        let Some(payload) = self.shared.get(index) else {
            return;
        };
        let chunk = match payload.region {
            Some(region) => Chunk::Region(region),
            None => Chunk::Shared(payload.bytes.clone()),
        };
        let length = payload.bytes.len();
        if !self.current.is_empty() {
            let owned = self.current.split();
            self.done_bytes += owned.len();
            self.done.push(Chunk::Owned(owned));
        }
        self.done_bytes += length;
        self.done.push(chunk);
        self.next_shared = index + 1;
    }

    /// The parts, in order, with `regions` in place of the stand-ins;
    /// empty byte chunks are left out.
    fn into_parts<R: Clone>(mut self, regions: &[(Bytes, R)]) -> Vec<FramePart<R>> {
        if !self.current.is_empty() {
            self.done.push(Chunk::Owned(self.current));
        }
        self.done
            .into_iter()
            .filter_map(|chunk| match chunk {
                Chunk::Owned(owned) if owned.is_empty() => None,
                Chunk::Shared(shared) if shared.is_empty() => None,
                Chunk::Owned(owned) => Some(FramePart::Bytes(owned.freeze())),
                Chunk::Shared(shared) => Some(FramePart::Bytes(shared)),
                Chunk::Region(index) => regions
                    .get(index)
                    .map(|(_, region)| FramePart::Region(region.clone())),
            })
            .collect()
    }

    /// The chunks, in order; empty chunks are left out. (A buffer holding
    /// stand-ins is turned into parts by [`encode_response_frame_parts`].)
    pub fn into_chunks(self) -> Vec<Bytes> {
        self.into_parts::<()>(&[])
            .into_iter()
            .filter_map(|part| match part {
                FramePart::Bytes(bytes) => Some(bytes),
                FramePart::Region(()) => None,
            })
            .collect()
    }

    /// Overwrites the first four bytes written (a frame's size prefix,
    /// written as a placeholder first) with `value`.
    fn patch_prefix(&mut self, value: i32) {
        let target = match self.done.first_mut() {
            Some(Chunk::Owned(owned)) => owned,
            Some(Chunk::Shared(_) | Chunk::Region(_)) => return,
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
            None => {
                if overlaps_stand_ins(src) {
                    self.stand_in_copied.get_or_insert(src.len());
                }
                self.current.put_slice(src)
            }
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
/// each Fetch partition, in encoding order (stand-ins whatever their size).
fn shared_payloads(body: &Response) -> Vec<Bytes> {
    match body {
        Response::Fetch(fetch) => fetch
            .responses
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .filter_map(|partition| partition.records.clone())
            .filter(|records| {
                records.len() >= MIN_SHARED_PAYLOAD_BYTES || overlaps_stand_ins(records)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Encodes a whole response frame (size prefix, header, body) as chunks
/// whose concatenation is exactly what
/// [`encode_response_frame`](crate::messages::encode_response_frame) writes;
/// large Fetch record payloads are shared, not copied. A body holding
/// stand-ins is an error here: use [`encode_response_frame_parts`].
pub fn encode_response_frame_chunks(
    correlation_id: i32,
    api_version: i16,
    body: &Response,
) -> Result<Vec<Bytes>, MessageError> {
    let parts = encode_response_frame_parts::<()>(correlation_id, api_version, body, &[])?;
    Ok(parts
        .into_iter()
        .filter_map(|part| match part {
            FramePart::Bytes(bytes) => Some(bytes),
            FramePart::Region(()) => None,
        })
        .collect())
}

/// Encodes a whole response frame (size prefix, header, body) as parts:
/// each stand-in in `body` becomes the region it is registered with in
/// `regions` (a stand-in and its region; registered stand-ins that the body
/// does not hold are ignored), large record payloads are shared, and the
/// rest is encoded bytes. Writing the parts in order, each region as
/// exactly its stand-in's length of bytes, gives the frame that
/// [`encode_response_frame`](crate::messages::encode_response_frame) would
/// write with the real bytes in the stand-ins' places.
///
/// # Errors
/// What encoding the body can fail with, and
/// [`MessageError::StandInNotReplaced`] if a stand-in in the body has no
/// region or would be copied.
pub fn encode_response_frame_parts<R: Clone>(
    correlation_id: i32,
    api_version: i16,
    body: &Response,
    regions: &[(Bytes, R)],
) -> Result<Vec<FramePart<R>>, MessageError> {
    let mut buf = ChunkedBuf::new(shared_payloads(body));
    let mut used = vec![false; regions.len()];
    for payload in &mut buf.shared {
        if !overlaps_stand_ins(&payload.bytes) {
            continue;
        }
        let region = regions.iter().position(|(stand_in, _)| {
            stand_in.as_ptr() == payload.bytes.as_ptr() && stand_in.len() == payload.bytes.len()
        });
        // Each region replaces one stand-in: a second stand-in with the same
        // slot and length cannot be told apart from the first.
        match region.filter(|&index| !std::mem::replace(&mut used[index], true)) {
            Some(index) => payload.region = Some(index),
            None => {
                return Err(MessageError::StandInNotReplaced {
                    length_bytes: payload.bytes.len(),
                })
            }
        }
    }
    buf.put_i32(0);
    encode_response(correlation_id, api_version, body, &mut buf)?;
    if let Some(length_bytes) = buf.stand_in_copied {
        return Err(MessageError::StandInNotReplaced { length_bytes });
    }
    let body_bytes = buf.len() - LENGTH_PREFIX_BYTES;
    let length = i32::try_from(body_bytes).map_err(|_| FrameError::TooLarge {
        length_bytes: body_bytes as u64,
        max_frame_bytes: i32::MAX as usize,
    })?;
    buf.patch_prefix(length);
    Ok(buf.into_parts(regions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use crate::kafka::messages::{FetchResponse, TopicName};
    use crate::kafka::protocol::StrBytes;
    use crate::messages::encode_response_frame;

    /// Payloads of `sizes`, each filled with its index plus one.
    fn payloads(sizes: &[usize]) -> Vec<Bytes> {
        sizes
            .iter()
            .enumerate()
            .map(|(index, size)| Bytes::from(vec![index as u8 + 1; *size]))
            .collect()
    }

    fn fetch_response(payload_sizes: &[usize]) -> (Response, Vec<Bytes>) {
        let payloads = payloads(payload_sizes);
        (fetch_with(&payloads), payloads)
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

    /// A Fetch response whose partitions hold `payloads` (real bytes or
    /// stand-ins), one per partition.
    fn fetch_with(payloads: &[Bytes]) -> Response {
        let partitions = payloads
            .iter()
            .enumerate()
            .map(|(index, payload)| {
                PartitionData::default()
                    .with_partition_index(index as i32)
                    .with_high_watermark(7)
                    .with_records(Some(payload.clone()))
            })
            .collect();
        let topic = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("events")))
            .with_partitions(partitions);
        Response::Fetch(FetchResponse::default().with_responses(vec![topic]))
    }

    /// Writes `parts` as a writer would, each region being the real bytes.
    fn written(parts: &[FramePart<Bytes>]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|part| match part {
                FramePart::Bytes(bytes) | FramePart::Region(bytes) => bytes.to_vec(),
            })
            .collect()
    }

    /// Real payloads of `sizes`, their stand-ins (slot = index), and the
    /// registrations of the stand-ins with the real bytes as regions.
    fn stand_ins_for(sizes: &[usize]) -> (Vec<Bytes>, Vec<Bytes>, Vec<(Bytes, Bytes)>) {
        let real = payloads(sizes);
        let stand_ins: Vec<Bytes> = sizes
            .iter()
            .enumerate()
            .map(|(slot, size)| stand_in(slot, *size).unwrap())
            .collect();
        let regions = stand_ins
            .iter()
            .cloned()
            .zip(real.iter().cloned())
            .collect();
        (real, stand_ins, regions)
    }

    #[test]
    fn stand_ins_become_their_regions_at_every_fetch_version() {
        let (real, mut stand_ins, regions) = stand_ins_for(&[5000, 10, 2048, 70_000]);
        // Partition 1 keeps its real (small) bytes, so both kinds mix.
        stand_ins[1] = real[1].clone();
        let body = fetch_with(&stand_ins);
        for version in 4..=18 {
            let parts = encode_response_frame_parts(9, version, &body, &regions).unwrap();
            let region_count = parts
                .iter()
                .filter(|part| matches!(part, FramePart::Region(_)))
                .count();
            assert_eq!(region_count, 3, "version {version}");
            assert_eq!(
                written(&parts),
                contiguous(9, version, &fetch_with(&real)),
                "version {version}"
            );
        }
    }

    #[test]
    fn a_small_stand_in_is_replaced_too() {
        let (real, stand_ins, regions) = stand_ins_for(&[3]);
        let parts = encode_response_frame_parts(1, 12, &fetch_with(&stand_ins), &regions).unwrap();
        assert!(parts.contains(&FramePart::Region(real[0].clone())));
        assert_eq!(written(&parts), contiguous(1, 12, &fetch_with(&real)));
    }

    #[test]
    fn unregistered_registered_twice_or_cut_stand_ins_are_refused() {
        let (_, stand_ins, regions) = stand_ins_for(&[4096, 4096]);
        let refused = |body: &Response, regions: &[(Bytes, Bytes)]| {
            matches!(
                encode_response_frame_parts(1, 12, body, regions),
                Err(MessageError::StandInNotReplaced { .. })
            )
        };
        // No region at all.
        assert!(refused(&fetch_with(&stand_ins), &[]));
        assert!(encode_response_frame_chunks(1, 12, &fetch_with(&stand_ins)).is_err());
        // One of the two has none.
        assert!(refused(&fetch_with(&stand_ins), &regions[..1]));
        // The same stand-in twice: one region cannot stand for both.
        let twice = fetch_with(&[stand_ins[0].clone(), stand_ins[0].clone()]);
        assert!(refused(&twice, &regions));
        // Part of a stand-in is not the stand-in, whether large or small.
        assert!(refused(&fetch_with(&[stand_ins[0].slice(1..)]), &regions));
        assert!(refused(&fetch_with(&[stand_ins[0].slice(..10)]), &regions));
        // Registered but unused stand-ins are fine.
        assert!(encode_response_frame_parts(1, 12, &fetch_with(&[]), &regions).is_ok());
    }

    #[test]
    fn stand_ins_out_of_range_are_not_made() {
        assert!(stand_in(MAX_STAND_INS, 1).is_none());
        assert!(stand_in(0, MAX_STAND_IN_BYTES + 1).is_none());
        assert_eq!(
            stand_in(MAX_STAND_INS - 1, MAX_STAND_IN_BYTES)
                .unwrap()
                .len(),
            MAX_STAND_IN_BYTES
        );
    }

    proptest::proptest! {
        /// Any mix of real payloads and stand-ins of any size, at any
        /// version, writes the same frame as the real bytes encoded whole.
        #[test]
        fn parts_write_the_contiguous_frame(
            payloads in proptest::collection::vec((0usize..6000, proptest::bool::ANY), 0..8),
            version in 4i16..=18,
        ) {
            let sizes: Vec<usize> = payloads.iter().map(|(size, _)| *size).collect();
            let (real, stand_ins, regions) = stand_ins_for(&sizes);
            let body: Vec<Bytes> = payloads
                .iter()
                .enumerate()
                .map(|(index, (size, replace))| {
                    if *replace && *size > 0 { stand_ins[index].clone() } else { real[index].clone() }
                })
                .collect();
            let parts = encode_response_frame_parts(5, version, &fetch_with(&body), &regions).unwrap();
            proptest::prop_assert_eq!(written(&parts), contiguous(5, version, &fetch_with(&real)));
        }
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
