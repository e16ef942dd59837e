//! Record batch construction for tests and benchmarks.
//!
//! Builds uncompressed v2 batches byte by byte, independently of the log
//! code, so tests can feed the log real batches. Not meant for production
//! producers (use `strom-protocol`'s builder there).

use bytes::{BufMut, Bytes, BytesMut};

use crate::batch::{compute_crc, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES};

/// What to put in a test batch.
#[derive(Debug, Clone)]
pub struct BatchSpec {
    /// Base offset written into the header (the leader log overwrites it).
    pub base_offset: i64,
    /// Number of records (at least one).
    pub records: u32,
    /// Timestamp of the first record; record `i` gets `base_timestamp + i`.
    pub base_timestamp: i64,
    /// Idempotent producer id or -1.
    pub producer_id: i64,
    /// Producer epoch or -1.
    pub producer_epoch: i16,
    /// First sequence or -1.
    pub base_sequence: i32,
    /// Partition leader epoch.
    pub partition_leader_epoch: i32,
    /// Bytes of value per record.
    pub value_bytes: usize,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            base_offset: 0,
            records: 1,
            base_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            partition_leader_epoch: 0,
            value_bytes: 8,
        }
    }
}

/// One record of a keyed test batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    /// Key, if any.
    pub key: Option<Vec<u8>>,
    /// Value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Builds a batch of `spec.records` records with filler values and no keys.
pub fn simple_batch(spec: &BatchSpec) -> Bytes {
    let records: Vec<TestRecord> = (0..spec.records.max(1))
        .map(|index| TestRecord {
            key: None,
            value: Some(vec![(index % 251) as u8; spec.value_bytes]),
        })
        .collect();
    keyed_batch(spec, &records)
}

/// Builds a batch holding `records` (the spec's `records` count is ignored).
pub fn keyed_batch(spec: &BatchSpec, records: &[TestRecord]) -> Bytes {
    assert!(!records.is_empty(), "a batch needs at least one record");
    let mut body = BytesMut::new();
    for (index, record) in records.iter().enumerate() {
        encode_record(&mut body, index as i64, record);
    }
    let count = records.len() as i32;
    let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.put_i64(spec.base_offset);
    out.put_i32((BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + body.len()) as i32);
    out.put_i32(spec.partition_leader_epoch);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(0);
    out.put_i32(count - 1);
    out.put_i64(spec.base_timestamp);
    out.put_i64(spec.base_timestamp + i64::from(count - 1));
    out.put_i64(spec.producer_id);
    out.put_i16(spec.producer_epoch);
    out.put_i32(spec.base_sequence);
    out.put_i32(count);
    out.extend_from_slice(&body);
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn encode_record(out: &mut BytesMut, index: i64, record: &TestRecord) {
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varlong(&mut body, index);
    put_varlong(&mut body, index);
    put_optional(&mut body, record.key.as_deref());
    put_optional(&mut body, record.value.as_deref());
    put_varlong(&mut body, 0);
    put_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

fn put_optional(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            put_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        None => put_varlong(out, -1),
    }
}

/// Writes a zig-zag varint.
fn put_varlong(out: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}
