//! The zero-copy [`RecordBatch`] view and in-place header edits ([`BatchHeaderMut`]).

use bytes::{Bytes, BytesMut};

use super::layout;
use super::record::{Record, Records};
use super::{compression, BatchAttributes, Compression, RecordError, TimestampType};

/// The largest decompressed records payload [`RecordBatch::records`] accepts.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Producer id, epoch and sequence values meaning "none" (non-idempotent producers).
pub const NO_PRODUCER_ID: i64 = -1;
/// See [`NO_PRODUCER_ID`].
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// See [`NO_PRODUCER_ID`].
pub const NO_SEQUENCE: i32 = -1;
/// The partition leader epoch producers write; the broker stamps the real one.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// The timestamp meaning "none".
pub const NO_TIMESTAMP: i64 = -1;

/// The decoded fixed-size header of a v2 batch (the first 61 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the length field.
    pub batch_length: i32,
    /// Epoch of the leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// Always 2.
    pub magic: i8,
    /// Stored CRC-32C of attributes..end.
    pub crc: u32,
    /// Codec, timestamp type and flags.
    pub attributes: BatchAttributes,
    /// Offset of the last record minus the base offset.
    pub last_offset_delta: i32,
    /// Timestamp the record deltas are relative to.
    pub base_timestamp: i64,
    /// Largest record timestamp, or the log append time.
    pub max_timestamp: i64,
    /// Idempotent/transactional producer id, or -1.
    pub producer_id: i64,
    /// Producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records.
    pub record_count: i32,
}

impl BatchHeader {
    /// Decodes the header at the start of `buf` (only the 61 header bytes
    /// need to be there) with every check that needs no more than the
    /// header, in this order: a whole header, the magic, the record count,
    /// the codec bits, the batch length (at least a header) and the last
    /// offset delta (not negative).
    ///
    /// This is the one parser of the v2 header: [`RecordBatch::parse`] and
    /// the log (appends, recovery, segment scans) all use it.
    #[inline]
    pub fn decode(buf: &[u8]) -> Result<BatchHeader, RecordError> {
        let header = header_array(buf)?;
        check_magic(header[layout::MAGIC] as i8)?;
        let record_count = be_i32(header, layout::RECORD_COUNT);
        if record_count < 0 {
            return Err(RecordError::InvalidRecordCount { record_count });
        }
        let attributes = BatchAttributes::from_bits(be_i16(header, layout::ATTRIBUTES))?;
        let batch_length = be_i32(header, layout::BATCH_LENGTH);
        if batch_length < layout::MIN_BATCH_LENGTH {
            return Err(RecordError::InvalidBatchLength {
                batch_length,
                minimum: layout::MIN_BATCH_LENGTH,
            });
        }
        let last_offset_delta = be_i32(header, layout::LAST_OFFSET_DELTA);
        if last_offset_delta < 0 {
            return Err(RecordError::InvalidLastOffsetDelta { last_offset_delta });
        }
        Ok(BatchHeader {
            base_offset: be_i64(header, layout::BASE_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(header, layout::PARTITION_LEADER_EPOCH),
            magic: header[layout::MAGIC] as i8,
            crc: be_i32(header, layout::CRC) as u32,
            attributes,
            last_offset_delta,
            base_timestamp: be_i64(header, layout::BASE_TIMESTAMP),
            max_timestamp: be_i64(header, layout::MAX_TIMESTAMP),
            producer_id: be_i64(header, layout::PRODUCER_ID),
            producer_epoch: be_i16(header, layout::PRODUCER_EPOCH),
            base_sequence: be_i32(header, layout::BASE_SEQUENCE),
            record_count,
        })
    }

    /// Size of the whole batch in bytes, length field included (the
    /// length was checked by [`decode`](Self::decode), so this cannot overflow).
    pub fn size_in_bytes(&self) -> usize {
        layout::LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// Offset after the last record.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Sequence of the last record, wrapping after `i32::MAX` as Kafka
    /// does; -1 without a sequence.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence;
        if base < 0 {
            return NO_SEQUENCE;
        }
        let increment = self.last_offset_delta;
        if increment >= 0 && base > i32::MAX - increment {
            increment - (i32::MAX - base) - 1
        } else {
            base.wrapping_add(increment)
        }
    }

    /// Whether the batch comes from an idempotent or transactional producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Whether the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes.is_transactional()
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes.is_control()
    }
}

/// One record batch (magic 2) held in [`Bytes`], read without copying.
///
/// [`parse`](Self::parse) checks the length and magic and decodes the header;
/// the CRC is checked separately by [`validate_crc`](Self::validate_crc), so a
/// reader that trusts its source (e.g. its own log) can skip it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    bytes: Bytes,
    header: BatchHeader,
}

impl RecordBatch {
    /// Size of the v2 batch header in bytes.
    pub const HEADER_SIZE: usize = layout::RECORDS;

    /// Reads exactly one batch: `bytes` must end where the batch does.
    pub fn parse(bytes: Bytes) -> Result<RecordBatch, RecordError> {
        let size = batch_extent(&bytes)?;
        if bytes.len() > size {
            return Err(RecordError::TrailingBytes {
                trailing: bytes.len() - size,
            });
        }
        let header = BatchHeader::decode(&bytes)?;
        Ok(RecordBatch { bytes, header })
    }

    /// Checks the stored CRC-32C against attributes..end.
    pub fn validate_crc(&self) -> Result<(), RecordError> {
        let computed = self.compute_crc();
        if computed == self.header.crc {
            Ok(())
        } else {
            Err(RecordError::CrcMismatch {
                expected: self.header.crc,
                computed,
            })
        }
    }

    /// The CRC-32C of attributes..end, as it should be stored.
    pub fn compute_crc(&self) -> u32 {
        crc_of(&self.bytes)
    }

    /// The decoded header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    /// Bytes after the length field.
    pub fn batch_length(&self) -> i32 {
        self.header.batch_length
    }

    /// Epoch of the leader that appended the batch.
    pub fn partition_leader_epoch(&self) -> i32 {
        self.header.partition_leader_epoch
    }

    /// The magic byte (always 2).
    pub fn magic(&self) -> i8 {
        self.header.magic
    }

    /// The stored CRC.
    pub fn crc(&self) -> u32 {
        self.header.crc
    }

    /// Codec, timestamp type and flags.
    pub fn attributes(&self) -> BatchAttributes {
        self.header.attributes
    }

    /// Offset of the last record minus the base offset.
    pub fn last_offset_delta(&self) -> i32 {
        self.header.last_offset_delta
    }

    /// Timestamp the record deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        self.header.base_timestamp
    }

    /// Largest record timestamp (CreateTime) or the log append time.
    pub fn max_timestamp(&self) -> i64 {
        self.header.max_timestamp
    }

    /// Producer id, or -1.
    pub fn producer_id(&self) -> i64 {
        self.header.producer_id
    }

    /// Producer epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        self.header.producer_epoch
    }

    /// Sequence of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        self.header.base_sequence
    }

    /// Sequence of the last record, wrapping after `i32::MAX` as Kafka does; -1 without a sequence.
    pub fn last_sequence(&self) -> i32 {
        self.header.last_sequence()
    }

    /// Number of records.
    pub fn record_count(&self) -> i32 {
        self.header.record_count
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.header
            .base_offset
            .wrapping_add(i64::from(self.header.last_offset_delta))
    }

    /// Offset after the last record.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Size of the whole batch in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The batch's bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Gives the bytes back.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The records payload as stored (compressed when the batch is).
    pub fn records_payload(&self) -> Bytes {
        self.bytes.slice(layout::RECORDS..)
    }

    /// Iterates the records, decompressing up to [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
    pub fn records(&self) -> Result<Records, RecordError> {
        self.records_with_limit(DEFAULT_MAX_DECOMPRESSED_BYTES)
    }

    /// Iterates the records, failing if they decompress to more than `max_decompressed_bytes`.
    pub fn records_with_limit(
        &self,
        max_decompressed_bytes: usize,
    ) -> Result<Records, RecordError> {
        Records::new(
            self.records_payload(),
            self.attributes().compression(),
            self.record_count(),
            max_decompressed_bytes,
        )
    }

    /// The same batch with its records compressed by `compression`
    /// (`Compression::None` stores them uncompressed): the header's fields
    /// are kept except the codec bits, the batch length and the CRC, which
    /// are rebuilt. `records` are the batch's records uncompressed (the
    /// payload of an uncompressed batch, or what
    /// [`check_records`](Self::check_records) decompressed); the records
    /// themselves are not re-encoded, so offsets and timestamps keep their
    /// deltas.
    pub fn recompress(
        &self,
        records: &[u8],
        compression: Compression,
    ) -> Result<BytesMut, RecordError> {
        let header = self.bytes.get(..layout::RECORDS).unwrap_or_default();
        let mut out = compression::compress_into(compression, records, header.to_vec())?;
        let size_bytes = out.len();
        let batch_length = i32::try_from(size_bytes - layout::LOG_OVERHEAD)
            .map_err(|_| RecordError::BatchTooLarge { size_bytes })?;
        let attributes = self.header.attributes.with_compression(compression);
        out[layout::BATCH_LENGTH..layout::BATCH_LENGTH + 4]
            .copy_from_slice(&batch_length.to_be_bytes());
        out[layout::ATTRIBUTES..layout::ATTRIBUTES + 2]
            .copy_from_slice(&attributes.bits().to_be_bytes());
        let crc = crc_of(&out);
        out[layout::CRC..layout::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        // A `Vec` becomes `Bytes` and then `BytesMut` without a copy.
        Ok(BytesMut::from(Bytes::from(out)))
    }

    /// A record's timestamp as Kafka reports it: the batch's max timestamp
    /// for LogAppendTime batches, base timestamp plus delta otherwise.
    pub fn record_timestamp(&self, record: &Record) -> i64 {
        match self.header.attributes.timestamp_type() {
            TimestampType::LogAppendTime => self.header.max_timestamp,
            TimestampType::CreateTime => record.timestamp(self.header.base_timestamp),
        }
    }
}

/// In-place edits of one batch at the start of a mutable buffer (a `BytesMut`
/// before it is frozen, an mmap of a log segment).
///
/// The batch ends where its length field says; bytes after it are untouched.
/// The CRC does not cover base offset and partition leader epoch, so setting
/// them leaves it valid; [`set_max_timestamp`](Self::set_max_timestamp)
/// changes covered bytes and recomputes it (so check the CRC first if the
/// batch came from outside).
#[derive(Debug)]
pub struct BatchHeaderMut<'a>(&'a mut [u8]);

impl BatchHeaderMut<'_> {
    /// Checks magic and length of the batch at the start of `buf`.
    pub fn new(buf: &mut [u8]) -> Result<BatchHeaderMut<'_>, RecordError> {
        let size = batch_extent(buf)?;
        match buf.get_mut(..size) {
            Some(batch) => Ok(BatchHeaderMut(batch)),
            None => Err(RecordError::Truncated {
                needed: size,
                available: 0,
            }),
        }
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        i64::from_be_bytes(self.field::<8>(layout::BASE_OFFSET))
    }

    /// Partition leader epoch.
    pub fn partition_leader_epoch(&self) -> i32 {
        i32::from_be_bytes(self.field::<4>(layout::PARTITION_LEADER_EPOCH))
    }

    /// Max timestamp.
    pub fn max_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.field::<8>(layout::MAX_TIMESTAMP))
    }

    /// Timestamp type from the attributes.
    pub fn timestamp_type(&self) -> TimestampType {
        let attributes = i16::from_be_bytes(self.field::<2>(layout::ATTRIBUTES));
        if attributes & BatchAttributes::TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// The stored CRC.
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(self.field::<4>(layout::CRC))
    }

    /// The CRC-32C the batch's bytes have now.
    pub fn compute_crc(&self) -> u32 {
        crc_of(self.0)
    }

    /// Sets the base offset (not covered by the CRC).
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.set_field(layout::BASE_OFFSET, base_offset.to_be_bytes());
    }

    /// Sets the partition leader epoch (not covered by the CRC).
    pub fn set_partition_leader_epoch(&mut self, partition_leader_epoch: i32) {
        self.set_field(
            layout::PARTITION_LEADER_EPOCH,
            partition_leader_epoch.to_be_bytes(),
        );
    }

    /// Sets the timestamp type bit and the max timestamp, then recomputes the
    /// CRC (nothing is written when both are unchanged, as in Kafka).
    pub fn set_max_timestamp(&mut self, timestamp_type: TimestampType, max_timestamp: i64) {
        if self.timestamp_type() == timestamp_type && self.max_timestamp() == max_timestamp {
            return;
        }
        let mut attributes = i16::from_be_bytes(self.field::<2>(layout::ATTRIBUTES));
        attributes &= !BatchAttributes::TIMESTAMP_TYPE_BIT;
        if timestamp_type == TimestampType::LogAppendTime {
            attributes |= BatchAttributes::TIMESTAMP_TYPE_BIT;
        }
        self.set_field(layout::ATTRIBUTES, attributes.to_be_bytes());
        self.set_field(layout::MAX_TIMESTAMP, max_timestamp.to_be_bytes());
        let crc = self.compute_crc();
        self.set_field(layout::CRC, crc.to_be_bytes());
    }

    /// Sets the idempotent producer's id, epoch and base sequence, then
    /// recomputes the CRC (these fields are covered by it). A producer uses
    /// this to restamp a built batch when its producer id or epoch changes
    /// before the batch was acknowledged.
    pub fn set_producer(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        self.set_field(layout::PRODUCER_ID, producer_id.to_be_bytes());
        self.set_field(layout::PRODUCER_EPOCH, producer_epoch.to_be_bytes());
        self.set_field(layout::BASE_SEQUENCE, base_sequence.to_be_bytes());
        let crc = self.compute_crc();
        self.set_field(layout::CRC, crc.to_be_bytes());
    }

    fn field<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut value = [0u8; N];
        // `new` guaranteed at least a full header.
        value.copy_from_slice(&self.0[at..at + N]);
        value
    }

    fn set_field<const N: usize>(&mut self, at: usize, value: [u8; N]) {
        self.0[at..at + N].copy_from_slice(&value);
    }
}

/// Size of the batch at the start of `buf` after checking magic and length.
///
/// [`RecordError::Truncated`] means `buf` holds only the beginning of a batch.
pub(crate) fn batch_extent(buf: &[u8]) -> Result<usize, RecordError> {
    let available = buf.len();
    let Some(&magic) = buf.get(layout::MAGIC) else {
        return Err(RecordError::Truncated {
            needed: layout::RECORDS,
            available,
        });
    };
    check_magic(magic as i8)?;
    let header = header_array(buf)?;
    let batch_length = be_i32(header, layout::BATCH_LENGTH);
    if batch_length < layout::MIN_BATCH_LENGTH {
        return Err(RecordError::InvalidBatchLength {
            batch_length,
            minimum: layout::MIN_BATCH_LENGTH,
        });
    }
    let size = layout::LOG_OVERHEAD + batch_length as usize;
    if available < size {
        return Err(RecordError::Truncated {
            needed: size,
            available,
        });
    }
    Ok(size)
}

fn check_magic(magic: i8) -> Result<(), RecordError> {
    match magic {
        layout::MAGIC_V2 => Ok(()),
        0 | 1 => Err(RecordError::LegacyMagic { magic }),
        _ => Err(RecordError::UnsupportedMagic { magic }),
    }
}

fn crc_of(batch: &[u8]) -> u32 {
    crate::crc::crc32c(batch.get(layout::ATTRIBUTES..).unwrap_or_default())
}

fn header_array(buf: &[u8]) -> Result<&[u8; layout::RECORDS], RecordError> {
    buf.get(..layout::RECORDS)
        .and_then(|header| header.try_into().ok())
        .ok_or(RecordError::Truncated {
            needed: layout::RECORDS,
            available: buf.len(),
        })
}

fn be_bytes<const N: usize>(header: &[u8; layout::RECORDS], at: usize) -> [u8; N] {
    let mut value = [0u8; N];
    value.copy_from_slice(&header[at..at + N]);
    value
}

fn be_i16(header: &[u8; layout::RECORDS], at: usize) -> i16 {
    i16::from_be_bytes(be_bytes(header, at))
}

fn be_i32(header: &[u8; layout::RECORDS], at: usize) -> i32 {
    i32::from_be_bytes(be_bytes(header, at))
}

fn be_i64(header: &[u8; layout::RECORDS], at: usize) -> i64 {
    i64::from_be_bytes(be_bytes(header, at))
}
