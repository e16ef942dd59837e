//! Typed errors of the storage crate, split by what the caller does about them.
//!
//! Appends, reads, opening (recovery) and configuration fail for different
//! reasons and are answered differently at the broker edge (Kafka error codes
//! are chosen there), so each has its own enum.

use std::io;
use std::path::{Path, PathBuf};

use strom_protocol::records::{Compression, RecordError};

/// An I/O error together with the file or directory it happened on.
#[derive(Debug, thiserror::Error)]
#[error("I/O error on {}", path.display())]
pub struct IoError {
    /// The file or directory the operation was on.
    pub path: PathBuf,
    /// The underlying operating-system error.
    #[source]
    pub source: io::Error,
}

/// Attaches a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    /// Maps the error into an [`IoError`] naming `path`.
    fn at(self, path: impl Into<PathBuf>) -> Result<T, IoError>;
}

impl<T> IoContext<T> for Result<T, io::Error> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T, IoError> {
        self.map_err(|source| IoError {
            path: path.into(),
            source,
        })
    }
}

/// Removes the file at `path`; a file that is already gone is fine.
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<(), IoError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(IoError {
            path: path.to_path_buf(),
            source: error,
        }),
        _ => Ok(()),
    }
}

/// A topic-level configuration value that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The value does not fit the key's type or range (as the table of
    /// topic configurations defines them).
    #[error("invalid value '{value}' for config {key}")]
    Invalid {
        /// The Kafka property name.
        key: String,
        /// The rejected text.
        value: String,
        /// What is wrong with it.
        #[source]
        problem: strom_protocol::topic_config::ConfigValueError,
    },
}

/// A checkpoint file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Reading, writing or renaming the file failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The file content does not follow the checkpoint format.
    #[error("malformed checkpoint file {} at line {line}: {reason}", path.display())]
    Malformed {
        /// The checkpoint file.
        path: PathBuf,
        /// One-based line number of the problem.
        line: usize,
        /// What was wrong.
        reason: &'static str,
    },
}

/// An index file that cannot be opened, grown or written.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Opening, resizing, mapping or flushing the file failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The file's content is not a valid index (wrong length, entries out of order).
    #[error("corrupt index {}: {reason}", path.display())]
    Corrupt {
        /// The index file.
        path: PathBuf,
        /// What was wrong.
        reason: &'static str,
    },
}

/// Why a batch in an append was rejected before anything was written.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum BatchError {
    /// Fewer bytes than a batch header, or than the header's length says.
    #[error("batch at byte {position} is truncated")]
    Truncated {
        /// Byte position of the batch in the append.
        position: usize,
    },
    /// The batch length field is below the minimum header size.
    #[error("batch at byte {position} has invalid length {batch_length}")]
    InvalidLength {
        /// Byte position of the batch in the append.
        position: usize,
        /// The length field.
        batch_length: i32,
    },
    /// The magic byte is not 2 (only record batch v2 is stored).
    #[error("batch at byte {position} has unsupported magic {magic}")]
    UnsupportedMagic {
        /// Byte position of the batch in the append.
        position: usize,
        /// The magic byte found.
        magic: i8,
    },
    /// The CRC-32C does not match the batch content.
    #[error("batch at byte {position} fails its CRC check (stored {stored:#010x}, computed {computed:#010x})")]
    CrcMismatch {
        /// Byte position of the batch in the append.
        position: usize,
        /// The CRC in the header.
        stored: u32,
        /// The CRC computed over the content.
        computed: u32,
    },
    /// A header field is invalid (unknown compression codec, negative record count).
    #[error("batch at byte {position} has an invalid header")]
    InvalidHeader {
        /// Byte position of the batch in the append.
        position: usize,
    },
    /// The last offset delta is negative or the record count disagrees with it.
    #[error("batch at byte {position} has an invalid offset delta {last_offset_delta}")]
    InvalidOffsetDelta {
        /// Byte position of the batch in the append.
        position: usize,
        /// The last offset delta field.
        last_offset_delta: i32,
    },
}

/// A header rule for batches from clients (Kafka's `LogValidator.validateBatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientBatchRule {
    /// The record count is not the offset range's length (last offset delta + 1).
    #[error(
        "record count {record_count} does not match the last offset delta {last_offset_delta}"
    )]
    RecordCountMismatch {
        /// The declared record count.
        record_count: i32,
        /// The declared last offset delta.
        last_offset_delta: i32,
    },
    /// Clients may not write control batches (transaction markers).
    #[error("clients are not allowed to write control records")]
    ControlBatch,
    /// A producer id with a negative base sequence.
    #[error("invalid sequence number {base_sequence} for producer {producer_id}")]
    MissingSequence {
        /// The producer id.
        producer_id: i64,
        /// The base sequence.
        base_sequence: i32,
    },
}

/// One record a topic refused, by its place in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRefusal {
    /// Position of the record in its batch, from 0 (KIP-467's `batch_index`).
    pub batch_index: i32,
    /// Why it was refused.
    pub reason: RefusalReason,
}

/// Why a topic refused a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    /// A record without a key on a compacted topic (Kafka: INVALID_RECORD).
    #[error("compacted topic cannot accept message without key")]
    MissingKey,
    /// A CreateTime timestamp outside
    /// `[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]`
    /// (Kafka: INVALID_TIMESTAMP).
    #[error("timestamp {timestamp} is out of range, it should be within [{earliest}, {latest}]")]
    TimestampOutOfRange {
        /// The record's timestamp.
        timestamp: i64,
        /// The earliest accepted timestamp.
        earliest: i64,
        /// The latest accepted timestamp.
        latest: i64,
    },
    /// The producer set the LogAppendTime type (Kafka: INVALID_TIMESTAMP).
    #[error("producer should not set timestamp type to LogAppendTime")]
    LogAppendTimeFromProducer,
}

impl RefusalReason {
    /// Whether Kafka answers INVALID_TIMESTAMP (rather than INVALID_RECORD) for it.
    pub fn is_timestamp(&self) -> bool {
        !matches!(self, RefusalReason::MissingKey)
    }
}

impl std::fmt::Display for RecordRefusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "record {}: {}", self.batch_index, self.reason)
    }
}

/// Displays the first of a list of refusals.
struct FirstRefusal<'a>(&'a [RecordRefusal]);

impl std::fmt::Display for FirstRefusal<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.first() {
            Some(first) => first.fmt(formatter),
            None => formatter.write_str("none"),
        }
    }
}

/// An append that was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The append held no batch.
    #[error("append holds no record batch")]
    Empty,
    /// A batch is malformed (Kafka: CORRUPT_MESSAGE).
    #[error(transparent)]
    Corrupt(#[from] BatchError),
    /// A client's batch breaks a header rule Kafka's broker enforces on
    /// produced batches (Kafka: INVALID_RECORD).
    #[error("batch at byte {position}: {rule}")]
    InvalidClientBatch {
        /// Byte position of the batch in the append.
        position: usize,
        /// The rule it breaks.
        rule: ClientBatchRule,
    },
    /// The records inside a batch are malformed: a length or varint, an
    /// offset delta, the record count, or compressed data that does not
    /// decompress (Kafka: INVALID_RECORD, CORRUPT_MESSAGE for the codec).
    #[error("records of the batch at byte {position} are malformed")]
    MalformedRecords {
        /// Byte position of the batch in the append.
        position: usize,
        /// What the record checks found.
        #[source]
        source: RecordError,
    },
    /// Records the topic does not accept (a missing key on a compacted
    /// topic, a timestamp out of bounds); each is named (Kafka:
    /// INVALID_RECORD or INVALID_TIMESTAMP with per-record errors, KIP-467).
    #[error("{} record(s) refused, the first: {}", refusals.len(), FirstRefusal(refusals))]
    RecordsRefused {
        /// Every refused record, in order.
        refusals: Vec<RecordRefusal>,
    },
    /// Converting a batch to the topic's `compression.type` failed.
    #[error("converting the batch at byte {position} to {compression} failed")]
    Conversion {
        /// Byte position of the batch in the append.
        position: usize,
        /// The codec the topic demands.
        compression: Compression,
        /// What the codec reported.
        #[source]
        source: RecordError,
    },
    /// A batch is larger than `max.message.bytes` (Kafka: MESSAGE_TOO_LARGE).
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge {
        /// The batch size in bytes.
        size: usize,
        /// The configured maximum.
        max: u32,
    },
    /// The whole append is larger than `segment.bytes` (Kafka: RECORD_LIST_TOO_LARGE).
    #[error("append of {size} bytes exceeds segment.bytes {max}")]
    AppendTooLarge {
        /// The append size in bytes.
        size: usize,
        /// The configured segment size.
        max: u32,
    },
    /// A follower append whose offsets do not follow the log end offset.
    #[error("batch base offset {base_offset} is below the log end offset {log_end}")]
    OffsetsNotIncreasing {
        /// The batch's base offset.
        base_offset: i64,
        /// The log end offset before the batch.
        log_end: i64,
    },
    /// An idempotent producer's sequence does not follow its last one
    /// (Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error("out of order sequence for producer {producer_id}: expected {expected_sequence}, got {found_sequence}")]
    OutOfOrderSequence {
        /// The producer id.
        producer_id: i64,
        /// The sequence the log expected next.
        expected_sequence: i32,
        /// The batch's first sequence.
        found_sequence: i32,
    },
    /// A producer epoch older than the one the log knows (Kafka: INVALID_PRODUCER_EPOCH).
    #[error(
        "producer {producer_id} epoch {found_epoch} is older than current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        /// The producer id.
        producer_id: i64,
        /// The epoch the log knows.
        current_epoch: i16,
        /// The batch's epoch.
        found_epoch: i16,
    },
    /// A transaction marker from a coordinator whose epoch is older than
    /// the one the log recorded for the producer (Kafka:
    /// TRANSACTION_COORDINATOR_FENCED).
    #[error("marker for producer {producer_id} has coordinator epoch {found_coordinator_epoch}, older than {current_coordinator_epoch}")]
    TransactionCoordinatorFenced {
        /// The producer id.
        producer_id: i64,
        /// The coordinator epoch the log knows.
        current_coordinator_epoch: i32,
        /// The marker's coordinator epoch.
        found_coordinator_epoch: i32,
    },
    /// A non-transactional batch from a producer whose transaction is
    /// ongoing in this partition (Kafka: INVALID_TXN_STATE).
    #[error("producer {producer_id} wrote a non-transactional batch during its transaction")]
    InvalidTxnState {
        /// The producer id.
        producer_id: i64,
    },
    /// A transactional batch that would open a transaction in this
    /// partition without a verification the transaction coordinator
    /// confirmed, or after a marker cleared it (KIP-890 part 1; Kafka:
    /// INVALID_TXN_STATE).
    #[error("producer {producer_id}'s batch is not part of a verified ongoing transaction")]
    UnverifiedTransaction {
        /// The producer id.
        producer_id: i64,
    },
    /// A replicated control batch whose record is not a transaction marker
    /// (Kafka: CORRUPT_MESSAGE).
    #[error("control batch at byte {position} holds no valid transaction marker")]
    InvalidControlBatch {
        /// Byte position of the batch in the append.
        position: usize,
        /// What is wrong with its record.
        #[source]
        source: ControlRecordError,
    },
    /// Writing to the segment or its indexes failed; the log may need reopening.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Writing an index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The leader epoch checkpoint could not be written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Rolling or flushing around the append failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// A control record that is not a valid transaction marker (Kafka's
/// `ControlRecordType` key and `EndTransactionMarker` value).
#[derive(Debug, thiserror::Error)]
pub enum ControlRecordError {
    /// The key is shorter than its 4 bytes (version, type).
    #[error("control record key of {length} bytes is shorter than 4")]
    KeyTooShort {
        /// The key length (0 when there is no key).
        length: usize,
    },
    /// The key version is negative.
    #[error("control record key version {version} is invalid")]
    InvalidKeyVersion {
        /// The version found.
        version: i16,
    },
    /// The key's type is neither abort (0) nor commit (1).
    #[error("control record type {type_id} is not a transaction marker")]
    UnknownType {
        /// The type found.
        type_id: i16,
    },
    /// The value is shorter than its 6 bytes (version, coordinator epoch).
    #[error("transaction marker value of {length} bytes is shorter than 6")]
    ValueTooShort {
        /// The value length (0 when there is no value).
        length: usize,
    },
    /// The value version is negative.
    #[error("transaction marker value version {version} is invalid")]
    InvalidValueVersion {
        /// The version found.
        version: i16,
    },
    /// The control batch holds no record.
    #[error("control batch holds no record")]
    NoRecord,
    /// The control batch is larger than a marker batch can be.
    #[error("control batch of {size} bytes is too large for a transaction marker")]
    TooLarge {
        /// The batch size in bytes.
        size: usize,
    },
    /// The batch or its record could not be decoded.
    #[error("control batch could not be decoded")]
    Record(#[source] RecordError),
}

/// A read that was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The offset is below the log start or above the log end
    /// (Kafka: OFFSET_OUT_OF_RANGE).
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The requested offset.
        requested: i64,
        /// The log start offset.
        log_start: i64,
        /// The log end offset.
        log_end: i64,
    },
    /// Reading a segment failed.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Opening (and recovering) a log failed.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The partition directory name is not `<topic>-<partition>`.
    #[error("directory {} is not named <topic>-<partition>", path.display())]
    InvalidDirectoryName {
        /// The directory.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// An index could not be opened or rebuilt.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A checkpoint file could not be read.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The producer state snapshot could not be read.
    #[error(transparent)]
    ProducerSnapshot(#[from] SnapshotError),
}

/// Changing the log (truncation, roll, retention, flush) failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// An index could not be opened, trimmed or written.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A checkpoint file could not be written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The producer state snapshot could not be written.
    #[error(transparent)]
    ProducerSnapshot(#[from] SnapshotError),
    /// A background flush of the log failed, so what it holds past the
    /// recovery point cannot be shown durable: the log takes no more
    /// appends until it is reopened (and recovered).
    #[error("log {topic_partition} is offline: flushing {} failed ({kind})", path.display())]
    Offline {
        /// The partition.
        topic_partition: crate::topic_partition::TopicPartition,
        /// The file whose flush failed.
        path: PathBuf,
        /// What the operating system said.
        kind: io::ErrorKind,
    },
    /// The requested new log start offset is past the high watermark.
    #[error("log start offset {requested} is beyond the limit {limit}")]
    LogStartBeyondLimit {
        /// The requested start offset.
        requested: i64,
        /// The highest allowed start offset.
        limit: i64,
    },
}

/// A producer state snapshot file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The snapshot is damaged or of an unknown version.
    #[error("corrupt producer snapshot {}: {reason}", path.display())]
    Corrupt {
        /// The snapshot file.
        path: PathBuf,
        /// What was wrong.
        reason: &'static str,
    },
}

/// The log manager could not start, create or delete a log.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// Another process holds the lock of a log directory.
    #[error("log directory {} is locked by another process", path.display())]
    DirectoryLocked {
        /// The log directory.
        path: PathBuf,
    },
    /// No log directory was configured.
    #[error("no log directory configured")]
    NoLogDirectory,
    /// A background thread could not be started.
    #[error("failed to start the {name} thread")]
    Thread {
        /// The thread's name.
        name: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A log failed to open.
    #[error("failed to open log {}", path.display())]
    Open {
        /// The partition directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: RecoveryError,
    },
    /// A checkpoint file could not be read or written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A log operation failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A compaction pass failed.
    #[error(transparent)]
    Clean(#[from] CleanError),
    /// The topic name cannot be used as a directory name.
    #[error("invalid topic name {topic:?}")]
    InvalidTopicName {
        /// The rejected name.
        topic: String,
    },
}

/// A compaction pass failed; the log is unchanged or recoverable on reopen.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// An index of the cleaned output could not be written.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A stored batch could not be decoded or rebuilt.
    #[error("cannot compact batch at offset {base_offset}")]
    Record {
        /// Base offset of the batch.
        base_offset: i64,
        /// Why.
        #[source]
        source: strom_protocol::records::RecordError,
    },
    /// A rebuilt batch failed its own check (a bug in the rebuild).
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// A remote storage (tiered storage, KIP-405) operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteStorageError {
    /// The object store refused or failed the operation.
    #[error("remote storage {operation} of {key} failed")]
    Store {
        /// What was attempted (`put`, `get`, `delete`, `list`).
        operation: &'static str,
        /// The object key.
        key: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A remote object that the metadata names is not there
    /// (Kafka: KAFKA_STORAGE_ERROR for the fetch that wanted it).
    #[error("remote object {key} is missing")]
    Missing {
        /// The object key.
        key: String,
    },
    /// Reading a local file to copy it failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A remote segment's metadata record could not be parsed.
    #[error("remote segment metadata {key} is invalid: {problem}")]
    InvalidMetadata {
        /// The object key of the record.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A state change the remote segment lifecycle does not allow.
    #[error("remote segment state cannot go from {from} to {to}")]
    IllegalTransition {
        /// Kafka's name of the current state (`COPY_SEGMENT_STARTED`, ...).
        from: &'static str,
        /// Kafka's name of the requested state.
        to: &'static str,
    },
    /// The remote storage configuration is unusable.
    #[error("remote storage config {key} is invalid: {problem}")]
    Config {
        /// The property name.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A fault injected by a test backend.
    #[error("injected remote storage fault on {operation}")]
    Injected {
        /// The operation that failed.
        operation: &'static str,
    },
}

/// A read from the remote tier failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteReadError {
    /// No remote segment holds the offset.
    #[error("offset {requested} is not in the remote tier [{remote_start}, {remote_end})")]
    OffsetOutOfRange {
        /// The requested offset.
        requested: i64,
        /// The remote log start offset (-1 when nothing is remote).
        remote_start: i64,
        /// The offset after the last remote record.
        remote_end: i64,
    },
    /// The remote store failed or an object is missing (Kafka: KAFKA_STORAGE_ERROR).
    #[error(transparent)]
    Storage(#[from] RemoteStorageError),
    /// A remote segment holds bytes that are not whole record batches.
    #[error("remote segment {segment} is corrupt at position {position}")]
    Corrupt {
        /// The remote segment id.
        segment: uuid::Uuid,
        /// The byte position in the segment.
        position: u64,
    },
}
