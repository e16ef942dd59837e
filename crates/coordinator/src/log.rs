//! The `__consumer_offsets` log as the coordinator sees it: a trait the
//! broker implements on `strom-storage`, and an in-memory implementation for
//! tests and embedding.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::error::LogError;

/// One record of `__consumer_offsets`: a key and a value, `None` for a
/// tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// The encoded key.
    pub key: Bytes,
    /// The encoded value; `None` deletes the key on compaction.
    pub value: Option<Bytes>,
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
    /// `from_offset`, with their offsets. An empty result means the end.
    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<(i64, LogRecord)>, LogError>;
}

/// An in-memory `__consumer_offsets`, without compaction.
#[derive(Debug, Default, Clone)]
pub struct InMemoryOffsetsLog {
    partitions: BTreeMap<i32, Vec<LogRecord>>,
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
}

impl OffsetsLog for InMemoryOffsetsLog {
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError> {
        let log = self.partitions.entry(partition).or_default();
        log.extend_from_slice(records);
        Ok(i64::try_from(log.len()).unwrap_or(i64::MAX) - 1)
    }

    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<(i64, LogRecord)>, LogError> {
        let Some(log) = self.partitions.get(&partition) else {
            return Ok(Vec::new());
        };
        let start = usize::try_from(from_offset.max(0)).unwrap_or(usize::MAX);
        Ok(log
            .iter()
            .enumerate()
            .skip(start)
            .take(max_records)
            .map(|(offset, record)| (i64::try_from(offset).unwrap_or(i64::MAX), record.clone()))
            .collect())
    }
}
