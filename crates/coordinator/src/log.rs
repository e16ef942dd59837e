//! The `__consumer_offsets` log as the coordinator sees it: a trait the
//! broker implements on `strom-storage`, and an in-memory implementation for
//! tests and embedding.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::error::{LogError, RecordError};

/// One record of `__consumer_offsets`: a key and a value, `None` for a
/// tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The encoded key.
    pub key: Bytes,
    /// The encoded value; `None` deletes the key on compaction.
    pub value: Option<Bytes>,
}

/// How the batch holding a record was written: its producer and whether it
/// is transactional or a control batch (a transaction marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchContext {
    /// The producer id of the batch, -1 when it has none.
    pub producer_id: i64,
    /// The producer epoch of the batch, -1 when it has none.
    pub producer_epoch: i16,
    /// Whether the batch belongs to a transaction (its records count only
    /// once a commit marker of the same producer follows them).
    pub transactional: bool,
    /// Whether the batch holds control records (transaction markers), not
    /// `__consumer_offsets` records.
    pub control: bool,
}

impl BatchContext {
    /// A batch of the coordinator's own, outside any transaction.
    pub const PLAIN: BatchContext = BatchContext {
        producer_id: -1,
        producer_epoch: -1,
        transactional: false,
        control: false,
    };

    /// A transactional batch of `producer_id` at `producer_epoch`.
    pub fn transactional(producer_id: i64, producer_epoch: i16) -> BatchContext {
        BatchContext {
            producer_id,
            producer_epoch,
            transactional: true,
            control: false,
        }
    }

    /// The marker batch ending a transaction of `producer_id`.
    pub fn marker(producer_id: i64, producer_epoch: i16) -> BatchContext {
        BatchContext {
            control: true,
            ..BatchContext::transactional(producer_id, producer_epoch)
        }
    }
}

/// A record read back from the log: its offset, its batch and itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// The record's offset.
    pub offset: i64,
    /// How its batch was written.
    pub batch: BatchContext,
    /// The key and value.
    pub record: LogRecord,
}

/// The outcome a transaction marker writes: the type of its control
/// record. A control record's key is an int16 version (0) and an int16
/// type (0 abort, 1 commit); its value an int16 version and the
/// transaction coordinator's int32 epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionMarker {
    /// The transaction aborted: its records never count.
    Abort,
    /// The transaction committed: its records count from here.
    Commit,
}

impl TransactionMarker {
    /// The marker for a commit (`true`) or an abort (`false`).
    pub fn new(commit: bool) -> TransactionMarker {
        if commit {
            TransactionMarker::Commit
        } else {
            TransactionMarker::Abort
        }
    }

    /// Whether the transaction committed.
    pub fn is_commit(self) -> bool {
        self == TransactionMarker::Commit
    }

    /// The control record of this marker, written by a transaction
    /// coordinator at `coordinator_epoch`.
    pub fn to_log_record(self, coordinator_epoch: i32) -> LogRecord {
        let record_type: i16 = match self {
            TransactionMarker::Abort => 0,
            TransactionMarker::Commit => 1,
        };
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&0_i16.to_be_bytes());
        key.extend_from_slice(&record_type.to_be_bytes());
        let mut value = Vec::with_capacity(6);
        value.extend_from_slice(&0_i16.to_be_bytes());
        value.extend_from_slice(&coordinator_epoch.to_be_bytes());
        LogRecord {
            key: Bytes::from(key),
            value: Some(Bytes::from(value)),
        }
    }

    /// Decodes a control record key: `None` for a control record that is
    /// not a transaction marker (a type other than 0 and 1). Versions
    /// above 0 are read the same way, as Kafka does.
    pub fn from_key(key: &[u8]) -> Result<Option<TransactionMarker>, RecordError> {
        let truncated = || RecordError::Truncated {
            field: "control record type",
        };
        let record_type = key.get(2..4).ok_or_else(truncated)?;
        Ok(match i16::from_be_bytes([record_type[0], record_type[1]]) {
            0 => Some(TransactionMarker::Abort),
            1 => Some(TransactionMarker::Commit),
            _ => None,
        })
    }
}

/// Waits until appended records are committed (see
/// [`OffsetsLog::wait_committed`]).
pub type CommitWait = Pin<Box<dyn Future<Output = Result<(), LogError>> + Send + 'static>>;

/// Append and read access to the partitions of `__consumer_offsets`.
///
/// The broker backs it with `strom-storage` partitions (records in batches,
/// compacted) replicated like any other partition; the coordinator only
/// needs ordered appends, a way to wait until they are committed, and reads
/// back.
pub trait OffsetsLog {
    /// Appends records to `partition` in order, as one batch; returns the
    /// offset of the last one. The records are written (and durable per the
    /// broker's policy) when this returns, but not necessarily committed:
    /// see [`wait_committed`](Self::wait_committed).
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError>;

    /// Appends records to `partition` in order, as one transactional batch
    /// of `producer_id` at `producer_epoch` (TxnOffsetCommit); returns the
    /// offset of the last one. The records count only once a commit marker
    /// of that producer follows them in the partition. A backend builds a
    /// v2 batch with the transactional attribute, that producer id and
    /// epoch and a sequence its partition accepts; it is committed like
    /// [`append`](Self::append)'s batches.
    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[LogRecord],
    ) -> Result<i64, LogError>;

    /// A future that resolves once the records of `partition` up to
    /// `last_offset` are committed (with replication: every in-sync replica
    /// has them, Kafka's `acks=-1`), or with why they are not. The
    /// coordinator awaits it without holding its lock before it answers an
    /// OffsetCommit. The default, for a log with no replicas, is ready at
    /// once.
    fn wait_committed(&self, partition: i32, last_offset: i64) -> CommitWait {
        let _ = (partition, last_offset);
        Box::pin(std::future::ready(Ok(())))
    }

    /// The offset below which `partition` is committed (its high
    /// watermark). The coordinator applies offset commits below it and
    /// keeps those at or past it pending, invisible to OffsetFetch, until
    /// it moves past them. The default, for a log with no replicas, commits
    /// everything it holds.
    fn committed_offset(&self, partition: i32) -> Result<i64, LogError> {
        let _ = partition;
        Ok(i64::MAX)
    }

    /// Reads up to `max_records` records of `partition` starting at
    /// `from_offset`, with their offsets and batches, control records
    /// (transaction markers) included. An empty result means the end.
    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<StoredRecord>, LogError>;
}

/// An in-memory `__consumer_offsets`, without compaction. It keeps each
/// record's [`BatchContext`], so that transactional batches and markers
/// replay as a broker's log would.
#[derive(Debug, Default, Clone)]
pub struct InMemoryOffsetsLog {
    partitions: BTreeMap<i32, Vec<(BatchContext, LogRecord)>>,
}

impl InMemoryOffsetsLog {
    /// An empty log.
    pub fn new() -> InMemoryOffsetsLog {
        InMemoryOffsetsLog::default()
    }

    /// The number of records in `partition`.
    pub fn len(&self, partition: i32) -> usize {
        self.partitions.get(&partition).map_or(0, Vec::len)
    }

    /// Whether `partition` holds no records.
    pub fn is_empty(&self, partition: i32) -> bool {
        self.len(partition) == 0
    }

    /// Appends `records` as one batch written as `batch` says; returns the
    /// offset of the last one (-1 for an empty partition and no records).
    pub fn append_batch(
        &mut self,
        partition: i32,
        batch: BatchContext,
        records: &[LogRecord],
    ) -> i64 {
        let log = self.partitions.entry(partition).or_default();
        log.extend(records.iter().map(|record| (batch, record.clone())));
        i64::try_from(log.len()).unwrap_or(i64::MAX) - 1
    }

    /// Writes the marker ending the transaction of `producer_id` in
    /// `partition` (what a partition leader does on WriteTxnMarkers);
    /// returns its offset.
    pub fn append_marker(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: TransactionMarker,
    ) -> i64 {
        self.append_batch(
            partition,
            BatchContext::marker(producer_id, producer_epoch),
            &[marker.to_log_record(0)],
        )
    }
}

impl OffsetsLog for InMemoryOffsetsLog {
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError> {
        Ok(self.append_batch(partition, BatchContext::PLAIN, records))
    }

    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[LogRecord],
    ) -> Result<i64, LogError> {
        let batch = BatchContext::transactional(producer_id, producer_epoch);
        Ok(self.append_batch(partition, batch, records))
    }

    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<StoredRecord>, LogError> {
        let Some(log) = self.partitions.get(&partition) else {
            return Ok(Vec::new());
        };
        let start = usize::try_from(from_offset.max(0)).unwrap_or(usize::MAX);
        Ok(log
            .iter()
            .enumerate()
            .skip(start)
            .take(max_records)
            .map(|(offset, (batch, record))| StoredRecord {
                offset: i64::try_from(offset).unwrap_or(i64::MAX),
                batch: *batch,
                record: record.clone(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_other_control_types_are_not_markers() {
        for marker in [TransactionMarker::Abort, TransactionMarker::Commit] {
            let record = marker.to_log_record(7);
            assert_eq!(TransactionMarker::from_key(&record.key), Ok(Some(marker)));
            assert_eq!(record.value.as_deref(), Some(&[0, 0, 0, 0, 0, 7][..]));
        }
        assert_eq!(
            TransactionMarker::from_key(&[0, 0, 0, 1]),
            Ok(Some(TransactionMarker::Commit))
        );
        assert_eq!(
            TransactionMarker::from_key(&[0, 1, 0, 0]),
            Ok(Some(TransactionMarker::Abort))
        );
        assert_eq!(TransactionMarker::from_key(&[0, 0, 0, 2]), Ok(None));
        assert_eq!(TransactionMarker::from_key(&[0, 0, 0xff, 0xff]), Ok(None));
        for short in [&[][..], &[0][..], &[0, 0, 0][..]] {
            assert!(TransactionMarker::from_key(short).is_err());
        }
        assert!(TransactionMarker::new(true).is_commit());
        assert!(!TransactionMarker::new(false).is_commit());
    }

    #[test]
    fn the_in_memory_log_keeps_each_batch_context() {
        let mut log = InMemoryOffsetsLog::new();
        let record = LogRecord {
            key: Bytes::from_static(b"k"),
            value: None,
        };
        assert_eq!(log.append(3, std::slice::from_ref(&record)), Ok(0));
        assert_eq!(
            log.append_transactional(3, 42, 5, &[record.clone(), record.clone()]),
            Ok(2)
        );
        assert_eq!(log.append_marker(3, 42, 5, TransactionMarker::Commit), 3);
        let read = log.read(3, 1, 10).expect("reads");
        let batches: Vec<(i64, BatchContext)> = read
            .iter()
            .map(|stored| (stored.offset, stored.batch))
            .collect();
        assert_eq!(
            batches,
            vec![
                (1, BatchContext::transactional(42, 5)),
                (2, BatchContext::transactional(42, 5)),
                (3, BatchContext::marker(42, 5)),
            ]
        );
        assert_eq!(
            log.read(3, 0, 1).expect("reads")[0].batch,
            BatchContext::PLAIN
        );
        assert!(log.read(4, 0, 10).expect("reads").is_empty());
    }
}
