//! The `__consumer_offsets` log as the coordinator sees it: a trait the
//! broker implements on `strom-storage`, and an in-memory implementation for
//! tests and embedding.

use std::collections::BTreeMap;

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

/// Append and read access to the partitions of `__consumer_offsets`.
///
/// The broker backs it with `strom-storage` partitions (records in batches,
/// compacted); the coordinator only needs ordered appends and reads back.
pub trait OffsetsLog {
    /// Appends records to `partition` in order; returns the offset of the
    /// last one. The records are durable (per the broker's policy) when this
    /// returns.
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError>;

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
