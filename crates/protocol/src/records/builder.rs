//! [`RecordBatchBuilder`]: writes v2 batches exactly as the Java client does.

use bytes::Bytes;

use super::batch::{
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
};
use super::compression::compress_into;
use super::layout;
use super::varint::{varint_size, varlong_size, write_varint, write_varlong};
use super::{BatchAttributes, Compression, RecordError, RecordField, TimestampType};

/// A record header as given to the builder: key bytes (UTF-8 for Kafka
/// clients) and an optional value.
pub type HeaderInput<'a> = (&'a [u8], Option<&'a [u8]>);

/// Builds one record batch v2.
///
/// For the same input the output is byte-identical to Java's
/// `MemoryRecordsBuilder` for uncompressed batches: the base timestamp is the
/// first record's timestamp, the max timestamp starts at -1 (so a batch of
/// only earlier timestamps reports -1, as Java does), record attributes are
/// 0, the CRC-32C covers attributes..end. Compressed batches have the same
/// header and record encoding; their compressed bytes depend on the codec
/// library (see [`compression`](super::compression)).
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    attributes: BatchAttributes,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    log_append_time: Option<i64>,
    delete_horizon_ms: Option<i64>,
    first_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset_delta: Option<i32>,
    record_count: i32,
    /// A zeroed header followed by the encoded records.
    buffer: Vec<u8>,
}

impl RecordBatchBuilder {
    /// An empty builder: base offset 0, no producer id, CreateTime.
    pub fn new(compression: Compression) -> RecordBatchBuilder {
        RecordBatchBuilder {
            attributes: BatchAttributes::new(compression),
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            log_append_time: None,
            delete_horizon_ms: None,
            first_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            last_offset_delta: None,
            record_count: 0,
            buffer: vec![0; layout::RECORDS],
        }
    }

    /// Sets the base offset (record offsets keep their deltas).
    pub fn with_base_offset(mut self, base_offset: i64) -> RecordBatchBuilder {
        self.base_offset = base_offset;
        self
    }

    /// Sets the partition leader epoch (producers leave it at -1).
    pub fn with_partition_leader_epoch(
        mut self,
        partition_leader_epoch: i32,
    ) -> RecordBatchBuilder {
        self.partition_leader_epoch = partition_leader_epoch;
        self
    }

    /// Sets the idempotent producer's id, epoch and first sequence.
    pub fn with_producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> RecordBatchBuilder {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch transactional.
    pub fn with_transactional(mut self, transactional: bool) -> RecordBatchBuilder {
        self.attributes = self.attributes.with_transactional(transactional);
        self
    }

    /// Marks the batch as holding control records.
    pub fn with_control(mut self, control: bool) -> RecordBatchBuilder {
        self.attributes = self.attributes.with_control(control);
        self
    }

    /// Sets the timestamp type. LogAppendTime without
    /// [`with_log_append_time`](Self::with_log_append_time) keeps the records'
    /// max timestamp as the batch's.
    pub fn with_timestamp_type(mut self, timestamp_type: TimestampType) -> RecordBatchBuilder {
        self.attributes = self.attributes.with_timestamp_type(timestamp_type);
        if timestamp_type == TimestampType::CreateTime {
            self.log_append_time = None;
        }
        self
    }

    /// LogAppendTime with the given append time as the batch's max timestamp.
    pub fn with_log_append_time(mut self, log_append_time_ms: i64) -> RecordBatchBuilder {
        self.attributes = self
            .attributes
            .with_timestamp_type(TimestampType::LogAppendTime);
        self.log_append_time = Some(log_append_time_ms);
        self
    }

    /// Stores `delete_horizon_ms` as the base timestamp and sets attribute bit
    /// 6, as Kafka's log cleaner does (KIP-534). Call before appending.
    pub fn with_delete_horizon_ms(mut self, delete_horizon_ms: i64) -> RecordBatchBuilder {
        self.attributes = self.attributes.with_delete_horizon(true);
        self.delete_horizon_ms = Some(delete_horizon_ms);
        self
    }

    /// Appends a record at the next offset; returns that offset.
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderInput<'_>],
    ) -> Result<i64, RecordError> {
        let offset_delta = match self.last_offset_delta {
            None => 0,
            Some(last) => last.checked_add(1).ok_or(RecordError::OffsetOutOfRange {
                offset: self
                    .base_offset
                    .wrapping_add(i64::from(last))
                    .wrapping_add(1),
                base_offset: self.base_offset,
            })?,
        };
        self.append_delta(offset_delta, timestamp_ms, key, value, headers)
    }

    /// Appends a record with an explicit offset (compaction keeps offsets, so
    /// deltas may have gaps). The offset must be above the previous one and
    /// within `i32::MAX` of the base offset.
    pub fn append_with_offset(
        &mut self,
        offset: i64,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderInput<'_>],
    ) -> Result<i64, RecordError> {
        let out_of_range = RecordError::OffsetOutOfRange {
            offset,
            base_offset: self.base_offset,
        };
        let offset_delta = offset
            .checked_sub(self.base_offset)
            .and_then(|delta| i32::try_from(delta).ok())
            .filter(|delta| *delta >= 0)
            .ok_or(out_of_range)?;
        if let Some(last) = self.last_offset_delta {
            if offset_delta <= last {
                return Err(RecordError::OffsetNotIncreasing {
                    offset,
                    last_offset: self.base_offset.wrapping_add(i64::from(last)),
                });
            }
        }
        self.append_delta(offset_delta, timestamp_ms, key, value, headers)
    }

    /// Number of records appended.
    pub fn len(&self) -> usize {
        self.record_count as usize
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    /// Header plus uncompressed records: the exact size of an uncompressed
    /// batch, an estimate (normally an upper bound) for a compressed one.
    pub fn estimated_size_in_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Compresses the records and writes the batch.
    pub fn build(self) -> Result<Bytes, RecordError> {
        if self.record_count == 0 {
            return Err(RecordError::EmptyBatch);
        }
        let mut batch = match self.attributes.compression() {
            Compression::None => self.buffer,
            codec => {
                let records = self.buffer.get(layout::RECORDS..).unwrap_or_default();
                compress_into(codec, records, vec![0; layout::RECORDS])?
            }
        };
        let size_bytes = batch.len();
        let batch_length = i32::try_from(size_bytes - layout::LOG_OVERHEAD)
            .map_err(|_| RecordError::BatchTooLarge { size_bytes })?;
        let max_timestamp = match (self.attributes.timestamp_type(), self.log_append_time) {
            (TimestampType::LogAppendTime, Some(log_append_time)) => log_append_time,
            _ => self.max_timestamp,
        };
        let base_timestamp = self
            .delete_horizon_ms
            .or(self.first_timestamp)
            .unwrap_or(NO_TIMESTAMP);
        let mut header = Vec::with_capacity(layout::RECORDS);
        header.extend_from_slice(&self.base_offset.to_be_bytes());
        header.extend_from_slice(&batch_length.to_be_bytes());
        header.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        header.push(layout::MAGIC_V2 as u8);
        header.extend_from_slice(&[0; 4]);
        header.extend_from_slice(&self.attributes.bits().to_be_bytes());
        header.extend_from_slice(&self.last_offset_delta.unwrap_or(0).to_be_bytes());
        header.extend_from_slice(&base_timestamp.to_be_bytes());
        header.extend_from_slice(&max_timestamp.to_be_bytes());
        header.extend_from_slice(&self.producer_id.to_be_bytes());
        header.extend_from_slice(&self.producer_epoch.to_be_bytes());
        header.extend_from_slice(&self.base_sequence.to_be_bytes());
        header.extend_from_slice(&self.record_count.to_be_bytes());
        debug_assert_eq!(header.len(), layout::RECORDS);
        batch[..layout::RECORDS].copy_from_slice(&header);
        let crc = crate::crc::crc32c(&batch[layout::ATTRIBUTES..]);
        batch[layout::CRC..layout::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
        Ok(Bytes::from(batch))
    }

    fn append_delta(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderInput<'_>],
    ) -> Result<i64, RecordError> {
        let record_count = self
            .record_count
            .checked_add(1)
            .ok_or(RecordError::BatchTooLarge {
                size_bytes: self.estimated_size_in_bytes(),
            })?;
        let base_timestamp = self
            .delete_horizon_ms
            .or(self.first_timestamp)
            .unwrap_or(timestamp_ms);
        let timestamp_delta = timestamp_ms.wrapping_sub(base_timestamp);
        let body_bytes = body_size(timestamp_delta, offset_delta, key, value, headers)?;
        let total = self.estimated_size_in_bytes() + varint_size(body_bytes) + body_bytes as usize;
        if total - layout::LOG_OVERHEAD > i32::MAX as usize {
            return Err(RecordError::BatchTooLarge { size_bytes: total });
        }
        let records = &mut self.buffer;
        write_varint(records, body_bytes);
        records.push(0);
        write_varlong(records, timestamp_delta);
        write_varint(records, offset_delta);
        write_nullable(records, key);
        write_nullable(records, value);
        write_varint(records, headers.len() as i32);
        for (header_key, header_value) in headers {
            write_nullable(records, Some(*header_key));
            write_nullable(records, *header_value);
        }
        self.first_timestamp.get_or_insert(timestamp_ms);
        self.record_count = record_count;
        self.last_offset_delta = Some(offset_delta);
        if timestamp_ms > self.max_timestamp {
            self.max_timestamp = timestamp_ms;
        }
        Ok(self.base_offset.wrapping_add(i64::from(offset_delta)))
    }
}

/// Size of a record after its length prefix, with every length checked.
fn body_size(
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[HeaderInput<'_>],
) -> Result<i32, RecordError> {
    let header_count = i32::try_from(headers.len()).map_err(|_| RecordError::FieldTooLong {
        field: RecordField::HeaderCount,
        length: headers.len(),
    })?;
    let mut size = 1
        + varlong_size(timestamp_delta)
        + varint_size(offset_delta)
        + nullable_size(RecordField::Key, key)?
        + nullable_size(RecordField::Value, value)?
        + varint_size(header_count);
    for (header_key, header_value) in headers {
        size = size
            .saturating_add(nullable_size(RecordField::HeaderKey, Some(header_key))?)
            .saturating_add(nullable_size(RecordField::HeaderValue, *header_value)?);
    }
    i32::try_from(size).map_err(|_| RecordError::FieldTooLong {
        field: RecordField::RecordLength,
        length: size,
    })
}

fn nullable_size(field: RecordField, bytes: Option<&[u8]>) -> Result<usize, RecordError> {
    match bytes {
        None => Ok(varint_size(-1)),
        Some(bytes) => {
            let length = i32::try_from(bytes.len()).map_err(|_| RecordError::FieldTooLong {
                field,
                length: bytes.len(),
            })?;
            Ok(varint_size(length) + bytes.len())
        }
    }
}

fn write_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(bytes) => {
            write_varint(out, bytes.len() as i32);
            out.extend_from_slice(bytes);
        }
    }
}
