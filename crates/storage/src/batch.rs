//! The record batch v2 header as the log uses it, on top of
//! `strom_protocol::records` (which owns the format: decoding, in-place
//! edits, CRC rules).
//!
//! The log never decodes records on the append path: it checks each batch's
//! header and CRC, then rewrites base offset, partition leader epoch and (for
//! `LogAppendTime`) the max timestamp in place. The layout, for reference:
//!
//! ```text
//! 0  baseOffset i64        27 baseTimestamp i64     53 baseSequence i32
//! 8  batchLength i32       35 maxTimestamp i64      57 recordCount i32
//! 12 partitionLeaderEpoch  43 producerId i64        61 records...
//! 16 magic i8              51 producerEpoch i16
//! 17 crc u32 (CRC-32C over bytes 21..end)
//! 21 attributes i16
//! 23 lastOffsetDelta i32
//! ```

use strom_protocol::records::{layout, BatchAttributes, BatchHeaderMut, TimestampType};

use crate::error::BatchError;

/// Size of the v2 batch header in bytes.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before (and including) the batch length field: base offset and length.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// Byte position where the CRC-covered content starts (the attributes).
const CRC_START: usize = 21;
/// Attribute bit 4: the batch is part of a transaction.
const TRANSACTIONAL_BIT: i16 = 0x10;
/// Attribute bit 5: the batch is a control batch.
const CONTROL_BIT: i16 = 0x20;

/// The header fields of one record batch, copied out of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the length field (total size is this plus 12).
    pub batch_length: i32,
    /// Leader epoch stamped by the broker.
    pub partition_leader_epoch: i32,
    /// Format version; 2 for everything the log stores.
    pub magic: i8,
    /// CRC-32C of bytes 21..end.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control bits.
    pub attributes: i16,
    /// Offset of the last record relative to the base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp in the batch (or the log append time).
    pub max_timestamp: i64,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Idempotent producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header at the start of `bytes`, checking only that a whole
    /// header is present and that the length and magic are plausible.
    ///
    /// `position` is used in errors only.
    #[inline]
    pub fn parse(bytes: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
        // One pass over the fixed header, with the checks (and their order)
        // of `strom_protocol::records::BatchHeader::decode`: length, magic,
        // record count, codec bits.
        let fields: &[u8; BATCH_HEADER_BYTES] = bytes
            .get(..BATCH_HEADER_BYTES)
            .and_then(|fields| fields.try_into().ok())
            .ok_or(BatchError::Truncated { position })?;
        let magic = fields[layout::MAGIC] as i8;
        if magic != layout::MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic { position, magic });
        }
        let record_count = be_i32(fields, layout::RECORD_COUNT);
        let attributes = be_i16(fields, layout::ATTRIBUTES);
        if record_count < 0 || BatchAttributes::from_bits(attributes).is_err() {
            return Err(BatchError::InvalidHeader { position });
        }
        let header = BatchHeader {
            base_offset: be_i64(fields, layout::BASE_OFFSET),
            batch_length: be_i32(fields, layout::BATCH_LENGTH),
            partition_leader_epoch: be_i32(fields, layout::PARTITION_LEADER_EPOCH),
            magic,
            crc: be_i32(fields, layout::CRC) as u32,
            attributes,
            last_offset_delta: be_i32(fields, layout::LAST_OFFSET_DELTA),
            base_timestamp: be_i64(fields, layout::BASE_TIMESTAMP),
            max_timestamp: be_i64(fields, layout::MAX_TIMESTAMP),
            producer_id: be_i64(fields, layout::PRODUCER_ID),
            producer_epoch: be_i16(fields, layout::PRODUCER_EPOCH),
            base_sequence: be_i32(fields, layout::BASE_SEQUENCE),
            record_count,
        };
        if header.batch_length < (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 {
            return Err(BatchError::InvalidLength {
                position,
                batch_length: header.batch_length,
            });
        }
        if header.last_offset_delta < 0 {
            return Err(BatchError::InvalidOffsetDelta {
                position,
                last_offset_delta: header.last_offset_delta,
            });
        }
        Ok(header)
    }

    /// Total size of the batch in bytes, length field included.
    pub fn size_in_bytes(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD_BYTES
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset after the last record.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Sequence number of the last record (wrapping at `i32::MAX`).
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }

    /// Whether the batch comes from an idempotent producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Whether the batch is a control batch (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
}

/// The big-endian `i64` at `at` of a header.
fn be_i64(fields: &[u8; BATCH_HEADER_BYTES], at: usize) -> i64 {
    let mut value = [0u8; 8];
    value.copy_from_slice(&fields[at..at + 8]);
    i64::from_be_bytes(value)
}

/// The big-endian `i32` at `at` of a header.
fn be_i32(fields: &[u8; BATCH_HEADER_BYTES], at: usize) -> i32 {
    let mut value = [0u8; 4];
    value.copy_from_slice(&fields[at..at + 4]);
    i32::from_be_bytes(value)
}

/// The big-endian `i16` at `at` of a header.
fn be_i16(fields: &[u8; BATCH_HEADER_BYTES], at: usize) -> i16 {
    i16::from_be_bytes([fields[at], fields[at + 1]])
}

/// Checks the CRC-32C of a whole batch (`bytes` is exactly one batch).
pub fn check_crc(bytes: &[u8], header: &BatchHeader, position: usize) -> Result<(), BatchError> {
    let computed = compute_crc(bytes);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            position,
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Computes the CRC-32C of a batch's covered content (bytes 21..end).
pub fn compute_crc(bytes: &[u8]) -> u32 {
    bytes.get(CRC_START..).map_or(0, crate::crc::crc32c)
}

/// Reads, checks (header and CRC) and returns the batch at `position` of
/// `bytes`, with its size. The batch must lie wholly inside `bytes`.
pub fn validate_batch_at(bytes: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
    let rest = bytes
        .get(position..)
        .ok_or(BatchError::Truncated { position })?;
    let header = BatchHeader::parse(rest, position)?;
    let batch = rest
        .get(..header.size_in_bytes())
        .ok_or(BatchError::Truncated { position })?;
    check_crc(batch, &header, position)?;
    Ok(header)
}

/// Rewrites, in place, the fields the leader owns: base offset, partition
/// leader epoch and, for `LogAppendTime`, the timestamp type and max
/// timestamp (the CRC is recomputed then). `batch` must start with a batch
/// that [`validate_batch_at`] accepted.
pub fn assign(
    batch: &mut [u8],
    base_offset: i64,
    leader_epoch: i32,
    log_append_time_ms: Option<i64>,
    position: usize,
) -> Result<(), BatchError> {
    let mut header = BatchHeaderMut::new(batch).map_err(|_| BatchError::Truncated { position })?;
    header.set_base_offset(base_offset);
    header.set_partition_leader_epoch(leader_epoch);
    if let Some(time) = log_append_time_ms {
        header.set_max_timestamp(TimestampType::LogAppendTime, time);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{simple_batch, BatchSpec};

    #[test]
    fn parses_a_built_batch() {
        let bytes = simple_batch(&BatchSpec {
            base_offset: 7,
            records: 3,
            base_timestamp: 1000,
            ..BatchSpec::default()
        });
        let header = validate_batch_at(&bytes, 0).expect("valid batch");
        assert_eq!(header.base_offset, 7);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.record_count, 3);
        assert_eq!(header.max_timestamp, 1002);
        assert_eq!(header.size_in_bytes(), bytes.len());
        assert_eq!(header.next_offset(), 10);
    }

    #[test]
    fn rejects_flipped_bytes_and_truncation() {
        let bytes = simple_batch(&BatchSpec::default());
        let mut flipped = bytes.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        assert!(matches!(
            validate_batch_at(&flipped, 0),
            Err(BatchError::CrcMismatch { .. })
        ));
        assert!(matches!(
            validate_batch_at(&bytes[..bytes.len() - 1], 0),
            Err(BatchError::Truncated { .. })
        ));
        let mut bad_magic = bytes.to_vec();
        bad_magic[16] = 1;
        assert!(matches!(
            validate_batch_at(&bad_magic, 0),
            Err(BatchError::UnsupportedMagic { magic: 1, .. })
        ));
    }

    #[test]
    fn log_append_time_keeps_the_crc_valid() {
        let mut bytes = simple_batch(&BatchSpec::default()).to_vec();
        assign(&mut bytes, 42, 3, Some(123_456), 0).expect("assign");
        let header = validate_batch_at(&bytes, 0).expect("still valid");
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.partition_leader_epoch, 3);
        assert_eq!(header.max_timestamp, 123_456);
        assert_ne!(header.attributes & 0x08, 0, "LogAppendTime bit");
        let mut create_time = simple_batch(&BatchSpec::default()).to_vec();
        assign(&mut create_time, 7, 1, None, 0).expect("assign");
        let header = validate_batch_at(&create_time, 0).expect("valid");
        assert_eq!((header.base_offset, header.attributes & 0x08), (7, 0));
    }

    #[test]
    fn last_sequence_wraps() {
        let bytes = simple_batch(&BatchSpec {
            records: 3,
            producer_id: 1,
            base_sequence: i32::MAX - 1,
            ..BatchSpec::default()
        });
        let header = validate_batch_at(&bytes, 0).expect("valid");
        assert_eq!(header.last_sequence(), 0);
    }
}
