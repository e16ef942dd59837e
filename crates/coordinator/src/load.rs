//! Loading a `__consumer_offsets` partition: replaying its records into
//! groups and offsets.

use crate::coordinator::{CoordinatorCore, PartitionStatus};
use crate::error::LoadError;
use crate::log::{LogRecord, OffsetsLog};
use crate::records::OffsetsRecord;

/// How many records a load reads per call to [`OffsetsLog::read`].
const LOAD_BATCH_RECORDS: usize = 1_024;

/// Reads every record of `partition` from `log`, in order, with its offset.
pub fn read_partition(
    log: &dyn OffsetsLog,
    partition: i32,
) -> Result<Vec<(i64, LogRecord)>, LoadError> {
    let mut records = Vec::new();
    let mut next_offset = 0_i64;
    loop {
        let batch = log
            .read(partition, next_offset, LOAD_BATCH_RECORDS)
            .map_err(|source| LoadError::Read { partition, source })?;
        let Some((last_offset, _)) = batch.last() else {
            return Ok(records);
        };
        // Offsets only grow; a log answering below `next_offset` has nothing
        // new, and asking again would loop forever.
        if *last_offset < next_offset {
            return Ok(records);
        }
        next_offset = last_offset.saturating_add(1);
        records.extend(batch);
    }
}

impl CoordinatorCore {
    /// Replays `partition` from the start of `log`: later records win and
    /// tombstones delete. Offset commits the log has not committed yet
    /// (at or past [`OffsetsLog::committed_offset`]) stay pending until
    /// [`advance_committed`](Self::advance_committed) passes them. The partition must have been marked with
    /// [`begin_loading`](Self::begin_loading); it serves requests once this
    /// returns `Ok`. Returns the number of records replayed. On error the
    /// partition stays loading (requests keep getting
    /// COORDINATOR_LOAD_IN_PROGRESS) and holds no state.
    pub fn load_partition(
        &mut self,
        log: &dyn OffsetsLog,
        partition: i32,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        if self.partition_status(partition) != Some(PartitionStatus::Loading) {
            return Err(LoadError::NotOwned { partition });
        }
        let records = read_partition(log, partition)?;
        let committed = log
            .committed_offset(partition)
            .map_err(|source| LoadError::Read { partition, source })?;
        self.replay_records(partition, records, committed, now_ms)
    }

    /// Replays records already read from `partition` (see
    /// [`read_partition`]), as [`load_partition`](Self::load_partition) does;
    /// `committed` is the partition's high watermark.
    pub fn replay_records(
        &mut self,
        partition: i32,
        records: Vec<(i64, LogRecord)>,
        committed: i64,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        if self.partition_status(partition) != Some(PartitionStatus::Loading) {
            return Err(LoadError::NotOwned { partition });
        }
        self.clear_partition(partition);
        match self.apply_records(partition, records, committed, now_ms) {
            Ok(replayed) => {
                self.finish_loading(partition);
                tracing::debug!(partition, replayed, "loaded __consumer_offsets partition");
                Ok(replayed)
            }
            Err(error) => {
                self.clear_partition(partition);
                Err(error)
            }
        }
    }

    fn apply_records(
        &mut self,
        partition: i32,
        records: Vec<(i64, LogRecord)>,
        committed: i64,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        let mut replayed = 0_u64;
        for (offset, record) in records {
            let decoded =
                OffsetsRecord::from_log_record(&record).map_err(|source| LoadError::Malformed {
                    partition,
                    offset,
                    source,
                })?;
            let belongs_here = decoded
                .group()
                .is_some_and(|group| self.partition_for(group) == partition);
            if belongs_here {
                if offset >= committed && matches!(decoded, OffsetsRecord::OffsetCommit { .. }) {
                    self.stage_record(partition, offset, decoded);
                } else {
                    self.apply_record(decoded, now_ms);
                }
            }
            replayed += 1;
        }
        Ok(replayed)
    }
}
