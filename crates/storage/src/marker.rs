//! Transaction markers (KIP-98): the control batches that commit or abort
//! a producer's transaction in a partition.
//!
//! A marker is a v2 batch with the transactional and control attributes,
//! no compression, the producer's id and epoch, base sequence -1 and one
//! record whose key is `[version i16 = 0, type i16]` (0 abort, 1 commit,
//! Kafka's `ControlRecordType`) and whose value is `[version i16 = 0,
//! coordinator epoch i32]` (Kafka's `EndTransactionMarker`). The leader
//! builds them ([`build_marker_batch`]); followers and recovery read them
//! back ([`marker_of_control_batch`]).

use bytes::Bytes;
use strom_protocol::records::{Compression, RecordBatch, RecordBatchBuilder};

use crate::batch::BatchHeader;
use crate::error::{AppendError, BatchError, ControlRecordError};

/// Control record key version written.
const CONTROL_KEY_VERSION: i16 = 0;
/// Transaction marker value version written.
const MARKER_VALUE_VERSION: i16 = 0;
/// Control record type of an abort marker.
const ABORT_TYPE: i16 = 0;
/// Control record type of a commit marker.
const COMMIT_TYPE: i16 = 1;
/// Largest control batch read back as a marker: a marker batch is about 80
/// bytes; anything far larger is not one (and is not read into memory).
pub const MAX_MARKER_BATCH_BYTES: usize = 4096;

/// The markers of an append's control batches, by base offset.
pub(crate) type Markers = smallvec::SmallVec<[(i64, ControlMarker); 1]>;

/// Whether a marker commits or aborts its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkerKind {
    /// The transaction's records are discarded by read_committed consumers.
    Abort,
    /// The transaction's records become visible to read_committed consumers.
    Commit,
}

impl MarkerKind {
    /// The control record type Kafka writes in the key.
    pub fn type_id(self) -> i16 {
        match self {
            MarkerKind::Abort => ABORT_TYPE,
            MarkerKind::Commit => COMMIT_TYPE,
        }
    }
}

/// A marker the transaction coordinator asks the leader to write
/// (WriteTxnMarkers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionMarker {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// The producer epoch of the transaction.
    pub producer_epoch: i16,
    /// The epoch of the coordinator that decided the outcome.
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub kind: MarkerKind,
    /// Whether the transaction uses transaction version 2 (KIP-890 part 2):
    /// its marker carries an epoch one above its records', so a marker
    /// whose epoch is not above the producer's while a transaction is open
    /// belongs to an earlier transaction (a late or repeated marker) and is
    /// refused instead of ending the open one.
    pub bumps_epoch: bool,
}

/// What a control record says: the outcome and the coordinator's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlMarker {
    /// Commit or abort.
    pub kind: MarkerKind,
    /// The coordinator epoch in the value.
    pub coordinator_epoch: i32,
}

/// Reads a control record's key (version, type) and value (version,
/// coordinator epoch). Later versions are read by their version-0 prefix,
/// as Kafka does; negative versions, short fields and types other than
/// abort and commit are errors.
pub fn parse_control_record(key: &[u8], value: &[u8]) -> Result<ControlMarker, ControlRecordError> {
    let (Some(key_version), Some(type_id)) = (read_i16(key, 0), read_i16(key, 2)) else {
        return Err(ControlRecordError::KeyTooShort { length: key.len() });
    };
    if key_version < 0 {
        return Err(ControlRecordError::InvalidKeyVersion {
            version: key_version,
        });
    }
    let kind = match type_id {
        ABORT_TYPE => MarkerKind::Abort,
        COMMIT_TYPE => MarkerKind::Commit,
        type_id => return Err(ControlRecordError::UnknownType { type_id }),
    };
    let value_version = read_i16(value, 0);
    let coordinator_epoch = value
        .get(2..6)
        .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
        .map(i32::from_be_bytes);
    let (Some(value_version), Some(coordinator_epoch)) = (value_version, coordinator_epoch) else {
        return Err(ControlRecordError::ValueTooShort {
            length: value.len(),
        });
    };
    if value_version < 0 {
        return Err(ControlRecordError::InvalidValueVersion {
            version: value_version,
        });
    }
    Ok(ControlMarker {
        kind,
        coordinator_epoch,
    })
}

fn read_i16(bytes: &[u8], at: usize) -> Option<i16> {
    bytes
        .get(at..at + 2)
        .and_then(|pair| <[u8; 2]>::try_from(pair).ok())
        .map(i16::from_be_bytes)
}

/// The marker in a control batch (`batch` is exactly one batch whose
/// header and CRC were checked): its first record, parsed with
/// [`parse_control_record`].
pub fn marker_of_control_batch(batch: Bytes) -> Result<ControlMarker, ControlRecordError> {
    if batch.len() > MAX_MARKER_BATCH_BYTES {
        return Err(ControlRecordError::TooLarge { size: batch.len() });
    }
    let batch = RecordBatch::parse(batch).map_err(ControlRecordError::Record)?;
    let mut records = batch
        .records_with_limit(MAX_MARKER_BATCH_BYTES)
        .map_err(ControlRecordError::Record)?;
    let record = records
        .next()
        .ok_or(ControlRecordError::NoRecord)?
        .map_err(ControlRecordError::Record)?;
    parse_control_record(
        record.key().unwrap_or_default(),
        record.value().unwrap_or_default(),
    )
}

/// The markers of the control batches (with a producer id) among
/// `batches` of `records`, by base offset; a control batch without a
/// readable marker is [`AppendError::InvalidControlBatch`].
pub(crate) fn control_markers(
    records: &Bytes,
    batches: &[(BatchHeader, usize)],
) -> Result<Markers, AppendError> {
    let mut markers = Markers::new();
    for (header, position) in batches {
        if !header.is_control() || !header.has_producer_id() {
            continue;
        }
        let end = position + header.size_in_bytes();
        if end > records.len() {
            return Err(BatchError::Truncated {
                position: *position,
            }
            .into());
        }
        let marker = marker_of_control_batch(records.slice(*position..end)).map_err(|source| {
            AppendError::InvalidControlBatch {
                position: *position,
                source,
            }
        })?;
        markers.push((header.base_offset, marker));
    }
    Ok(markers)
}

/// The key of `kind`'s control record.
pub fn control_record_key(kind: MarkerKind) -> [u8; 4] {
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&kind.type_id().to_be_bytes());
    key
}

/// The value of a marker written by the coordinator of `coordinator_epoch`.
pub fn marker_value(coordinator_epoch: i32) -> [u8; 6] {
    let mut value = [0u8; 6];
    value[..2].copy_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    value
}

/// Kafka's control batch for `marker` at base offset 0 (the leader assigns
/// offset and leader epoch), timestamped `now_ms`.
pub fn build_marker_batch(
    marker: &TransactionMarker,
    now_ms: i64,
) -> Result<Bytes, strom_protocol::records::RecordError> {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(
            marker.producer_id,
            marker.producer_epoch,
            strom_protocol::records::NO_SEQUENCE,
        )
        .with_transactional(true)
        .with_control(true);
    let key = control_record_key(marker.kind);
    let value = marker_value(marker.coordinator_epoch);
    builder.append(now_ms, Some(&key), Some(&value), &[])?;
    builder.build()
}

#[cfg(test)]
#[path = "marker_tests.rs"]
mod tests;
