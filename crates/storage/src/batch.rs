//! The record batch v2 header as the log uses it. The format is
//! `strom_protocol::records`'s: the header is decoded and checked by
//! [`BatchHeader::decode`], the CRC-32C is `strom_protocol::crc`, in-place
//! edits go through `BatchHeaderMut`. This module adds what the log needs
//! on top: errors that carry the batch's byte position, the CRC check of a
//! whole batch, and the leader's rewrite of the fields it owns (base offset,
//! partition leader epoch, and for `LogAppendTime` the max timestamp).
//!
//! Records inside a batch are checked on the leader's append path by
//! the log's `validation` module, not here.

use strom_protocol::records::{layout, BatchHeaderMut, RecordError, TimestampType};

use smallvec::SmallVec;

use crate::error::BatchError;

pub use strom_protocol::records::BatchHeader;

/// The batches of one append, each header with its byte position. A
/// produce request usually carries one batch, which needs no allocation.
pub(crate) type Batches = SmallVec<[(BatchHeader, usize); 1]>;

/// Size of the v2 batch header in bytes.
pub const BATCH_HEADER_BYTES: usize = layout::RECORDS;
/// Bytes before (and including) the batch length field: base offset and length.
pub const LOG_OVERHEAD_BYTES: usize = layout::LOG_OVERHEAD;

/// Reads the header at the start of `bytes` with
/// [`BatchHeader::decode`] (the protocol crate owns the format and its
/// checks); `position` places the batch in the append or segment for the
/// error.
#[inline]
pub fn parse_header(bytes: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
    BatchHeader::decode(bytes).map_err(|error| header_error(error, position))
}

/// The log's error for a header [`BatchHeader::decode`] refused.
fn header_error(error: RecordError, position: usize) -> BatchError {
    match error {
        RecordError::LegacyMagic { magic } | RecordError::UnsupportedMagic { magic } => {
            BatchError::UnsupportedMagic { position, magic }
        }
        RecordError::InvalidBatchLength { batch_length, .. } => BatchError::InvalidLength {
            position,
            batch_length,
        },
        RecordError::InvalidLastOffsetDelta { last_offset_delta } => {
            BatchError::InvalidOffsetDelta {
                position,
                last_offset_delta,
            }
        }
        RecordError::Truncated { .. } => BatchError::Truncated { position },
        _ => BatchError::InvalidHeader { position },
    }
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
    bytes
        .get(layout::ATTRIBUTES..)
        .map_or(0, strom_protocol::crc::crc32c)
}

/// Reads, checks (header and CRC) and returns the batch at `position` of
/// `bytes`, with its size. The batch must lie wholly inside `bytes`.
pub fn validate_batch_at(bytes: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
    let rest = bytes
        .get(position..)
        .ok_or(BatchError::Truncated { position })?;
    let header = parse_header(rest, position)?;
    let batch = rest
        .get(..header.size_in_bytes())
        .ok_or(BatchError::Truncated { position })?;
    check_crc(batch, &header, position)?;
    Ok(header)
}

/// Rewrites, in place, the fields the leader owns: base offset, partition
/// leader epoch and, when given, the timestamp type and max timestamp (for
/// `LogAppendTime`, or a CreateTime max timestamp corrected from the
/// records; the CRC is recomputed then, unless nothing changed). `batch`
/// must start with a batch that [`validate_batch_at`] accepted.
pub fn assign(
    batch: &mut [u8],
    base_offset: i64,
    leader_epoch: i32,
    max_timestamp: Option<(TimestampType, i64)>,
    position: usize,
) -> Result<(), BatchError> {
    let mut header = BatchHeaderMut::new(batch).map_err(|_| BatchError::Truncated { position })?;
    header.set_base_offset(base_offset);
    header.set_partition_leader_epoch(leader_epoch);
    if let Some((timestamp_type, time)) = max_timestamp {
        header.set_max_timestamp(timestamp_type, time);
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
        assign(
            &mut bytes,
            42,
            3,
            Some((TimestampType::LogAppendTime, 123_456)),
            0,
        )
        .expect("assign");
        let header = validate_batch_at(&bytes, 0).expect("still valid");
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.partition_leader_epoch, 3);
        assert_eq!(header.max_timestamp, 123_456);
        assert_eq!(
            header.attributes.timestamp_type(),
            TimestampType::LogAppendTime
        );
        let mut create_time = simple_batch(&BatchSpec::default()).to_vec();
        assign(&mut create_time, 7, 1, None, 0).expect("assign");
        let header = validate_batch_at(&create_time, 0).expect("valid");
        assert_eq!(
            (header.base_offset, header.attributes.timestamp_type()),
            (7, TimestampType::CreateTime)
        );
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
