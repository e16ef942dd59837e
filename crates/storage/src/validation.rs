//! The leader's checks of the records it is asked to append, and the
//! conversion to the topic's codec: Kafka's `LogValidator` for record
//! batch v2.
//!
//! [`crate::log`] has already checked each batch's header, size and CRC
//! (`analyze`). For a batch from a client this module then
//!
//! 1. checks the header rules Kafka applies to client batches
//!    ([`ClientBatchRule`]: the record count is the offset range's length,
//!    no control batches, a producer id comes with a sequence);
//! 2. walks the records ([`strom_protocol::records::check_records`]):
//!    lengths and varints, offset deltas `0..n-1`, the record count. An
//!    uncompressed batch is walked in place, without allocating; a compressed
//!    one is decompressed once;
//! 3. applies the topic's policy to every record in the same walk: a key on
//!    compacted topics, `message.timestamp.type` and the timestamp bounds
//!    (`message.timestamp.before.max.ms` / `after.max.ms`). Every refused
//!    record is reported ([`RecordRefusal`]), as KIP-467's per-record errors;
//! 4. computes the batch's max timestamp from its records, as Kafka does for
//!    CreateTime;
//! 5. recompresses the batch when the topic's `compression.type` names a
//!    codec other than the batch's, keeping the records' bytes and
//!    rebuilding length and CRC.
//!
//! A refusal stores nothing: the checks run before any byte is written.
//! A batch that needs no conversion is not copied here.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use strom_protocol::records::compression::decompress;
use strom_protocol::records::{
    check_records, Compression, RecordBatch, RecordSummary, TimestampType,
    DEFAULT_MAX_DECOMPRESSED_BYTES, NO_TIMESTAMP,
};

use crate::batch::{parse_header, BatchHeader, Batches, BATCH_HEADER_BYTES};
use crate::config::{LogConfig, MessageTimestampType};
use crate::error::{AppendError, ClientBatchRule, RecordRefusal, RefusalReason};

/// What the checks decided for an append's bytes.
#[derive(Debug)]
pub(crate) enum Checked {
    /// The bytes are stored as they came (after the leader's stamps).
    /// `max_timestamp_changed` says whether a batch's max timestamp differs
    /// from the one its producer wrote (then its CRC must be rebuilt).
    Unchanged {
        /// Whether a batch's max timestamp was corrected.
        max_timestamp_changed: bool,
    },
    /// Some batch was converted to the topic's codec: these bytes replace
    /// the append's, and `batches` describes them.
    Converted(BytesMut),
}

/// The topic's rules for records, from its configuration and the clock.
#[derive(Debug, Clone, Copy)]
struct RecordRules {
    compacted: bool,
    timestamp_type: MessageTimestampType,
    earliest_timestamp: i64,
    latest_timestamp: i64,
}

impl RecordRules {
    fn new(config: &LogConfig, now_ms: i64) -> RecordRules {
        RecordRules {
            compacted: config.cleanup_policy.compact,
            timestamp_type: config.message_timestamp_type,
            earliest_timestamp: config
                .timestamp_before_max_ms()
                .map_or(i64::MIN, |before| now_ms.saturating_sub(before)),
            latest_timestamp: config
                .timestamp_after_max_ms()
                .map_or(i64::MAX, |after| now_ms.saturating_add(after)),
        }
    }

    /// Kafka's `validateKey` and `validateTimestamp` for one record whose
    /// timestamp (as Kafka reads it) is `timestamp`.
    fn check(
        &self,
        record: &RecordSummary,
        timestamp: i64,
        batch_type: TimestampType,
    ) -> Option<RefusalReason> {
        if self.compacted && !record.has_key {
            return Some(RefusalReason::MissingKey);
        }
        if self.timestamp_type == MessageTimestampType::CreateTime && timestamp != NO_TIMESTAMP {
            if timestamp < self.earliest_timestamp || timestamp > self.latest_timestamp {
                return Some(RefusalReason::TimestampOutOfRange {
                    timestamp,
                    earliest: self.earliest_timestamp,
                    latest: self.latest_timestamp,
                });
            }
        } else if batch_type == TimestampType::LogAppendTime {
            return Some(RefusalReason::LogAppendTimeFromProducer);
        }
        None
    }
}

/// Checks every batch of a client's append (see the module doc), updates
/// each header's max timestamp to its records', and converts batches whose
/// codec is not the topic's.
pub(crate) fn check_client_batches(
    records: &Bytes,
    batches: &mut Batches,
    config: &LogConfig,
    now_ms: i64,
) -> Result<Checked, AppendError> {
    let rules = RecordRules::new(config, now_ms);
    let mut max_timestamp_changed = false;
    // One entry per batch; a produce request carries one, kept inline.
    let mut decompressed: SmallVec<[Option<Bytes>; 1]> = SmallVec::new();
    for (header, position) in batches.iter_mut() {
        check_client_header(header, *position)?;
        let batch = records
            .get(*position..*position + header.size_in_bytes())
            .unwrap_or_default();
        let checked = check_batch_records(batch, header, &rules, *position)?;
        if header.attributes.timestamp_type() == TimestampType::CreateTime
            && checked.max_timestamp != header.max_timestamp
        {
            header.max_timestamp = checked.max_timestamp;
            max_timestamp_changed = true;
        }
        decompressed.push(checked.decompressed);
    }
    let needs_conversion = batches
        .iter()
        .any(|(header, _)| target_codec(config, header) != header.attributes.compression());
    if !needs_conversion {
        return Ok(Checked::Unchanged {
            max_timestamp_changed,
        });
    }
    let converted = convert(records, batches, &decompressed, config)?;
    Ok(Checked::Converted(converted))
}

/// The codec a batch is stored with under the topic's `compression.type`.
fn target_codec(config: &LogConfig, header: &BatchHeader) -> Compression {
    config
        .compression_type
        .target(header.attributes.compression())
}

/// Kafka's `validateBatch` for a client's v2 batch.
fn check_client_header(header: &BatchHeader, position: usize) -> Result<(), AppendError> {
    let rule = if i64::from(header.record_count) != i64::from(header.last_offset_delta) + 1 {
        ClientBatchRule::RecordCountMismatch {
            record_count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        }
    } else if header.is_control() {
        ClientBatchRule::ControlBatch
    } else if header.has_producer_id() && header.base_sequence < 0 {
        ClientBatchRule::MissingSequence {
            producer_id: header.producer_id,
            base_sequence: header.base_sequence,
        }
    } else {
        return Ok(());
    };
    Err(AppendError::InvalidClientBatch { position, rule })
}

/// What the walk over one batch's records found.
struct BatchRecords {
    /// The largest record timestamp (-1 when none is larger), Kafka's max
    /// timestamp of a CreateTime batch.
    max_timestamp: i64,
    /// The decompressed records of a compressed batch.
    decompressed: Option<Bytes>,
}

/// Walks the records of `batch` (whose header is `header`): their format,
/// then the topic's rules for each.
fn check_batch_records(
    batch: &[u8],
    header: &BatchHeader,
    rules: &RecordRules,
    position: usize,
) -> Result<BatchRecords, AppendError> {
    let batch_type = header.attributes.timestamp_type();
    let mut max_timestamp = NO_TIMESTAMP;
    let mut refusals = Vec::new();
    let mut visit = |record: &RecordSummary| {
        let timestamp = match batch_type {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => header.base_timestamp.wrapping_add(record.timestamp_delta),
        };
        match rules.check(record, timestamp, batch_type) {
            Some(reason) => refusals.push(RecordRefusal {
                batch_index: record.batch_index,
                reason,
            }),
            None => max_timestamp = max_timestamp.max(timestamp),
        }
    };
    let payload = batch.get(BATCH_HEADER_BYTES..).unwrap_or_default();
    let malformed = |source| AppendError::MalformedRecords { position, source };
    let decompressed = match header.attributes.compression() {
        Compression::None => {
            check_records(payload, header.record_count, &mut visit).map_err(malformed)?;
            None
        }
        codec => {
            let records =
                decompress(codec, payload, DEFAULT_MAX_DECOMPRESSED_BYTES).map_err(malformed)?;
            check_records(&records, header.record_count, &mut visit).map_err(malformed)?;
            Some(records)
        }
    };
    if !refusals.is_empty() {
        return Err(AppendError::RecordsRefused { refusals });
    }
    Ok(BatchRecords {
        max_timestamp,
        decompressed,
    })
}

/// The append's bytes with every batch in the topic's codec; `batches`
/// is updated to describe them.
fn convert(
    records: &Bytes,
    batches: &mut Batches,
    decompressed: &[Option<Bytes>],
    config: &LogConfig,
) -> Result<BytesMut, AppendError> {
    let single = batches.len() == 1;
    let mut out = BytesMut::new();
    for ((header, position), decompressed) in batches.iter_mut().zip(decompressed) {
        let original = records.slice(*position..*position + header.size_in_bytes());
        let target = target_codec(config, header);
        let converted = if target == header.attributes.compression() {
            BytesMut::from(&original[..])
        } else {
            let batch = RecordBatch::parse(original.clone()).map_err(|source| {
                AppendError::MalformedRecords {
                    position: *position,
                    source,
                }
            })?;
            let uncompressed = decompressed
                .as_deref()
                .unwrap_or_else(|| original.get(BATCH_HEADER_BYTES..).unwrap_or_default());
            batch
                .recompress(uncompressed, target)
                .map_err(|source| AppendError::Conversion {
                    position: *position,
                    compression: target,
                    source,
                })?
        };
        if converted.len() > config.max_message_bytes as usize {
            return Err(AppendError::RecordTooLarge {
                size: converted.len(),
                max: config.max_message_bytes,
            });
        }
        let new_position = out.len();
        let mut new_header = parse_header(&converted, new_position)?;
        // Fields the checks or the leader set survive the conversion.
        new_header.max_timestamp = header.max_timestamp;
        *header = new_header;
        *position = new_position;
        if single {
            out = converted;
        } else {
            out.extend_from_slice(&converted);
        }
    }
    Ok(out)
}
