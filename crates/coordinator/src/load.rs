//! Loading a `__consumer_offsets` partition: replaying its records into
//! groups and offsets.

use crate::coordinator::{CoordinatorCore, PartitionStatus};
use crate::error::LoadError;
use crate::log::OffsetsLog;
use crate::records::OffsetsRecord;

/// How many records a load reads per call to [`OffsetsLog::read`].
const LOAD_BATCH_RECORDS: usize = 1_024;

impl CoordinatorCore {
    /// Replays `partition` from the start of `log`: later records win and
    /// tombstones delete. The partition must have been marked with
    /// [`begin_loading`](Self::begin_loading); it serves requests once this
    /// returns `Ok`. Returns the number of records replayed. On error the
    /// partition stays loading (requests keep getting
    /// COORDINATOR_LOAD_IN_PROGRESS) and its partial state is dropped.
    pub fn load_partition(
        &mut self,
        log: &dyn OffsetsLog,
        partition: i32,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        if self.partition_status(partition) != Some(PartitionStatus::Loading) {
            return Err(LoadError::NotOwned { partition });
        }
        self.clear_partition(partition);
        match self.replay(log, partition, now_ms) {
            Ok(replayed) => {
                self.finish_loading(partition);
                tracing::info!(partition, replayed, "loaded __consumer_offsets partition");
                Ok(replayed)
            }
            Err(error) => {
                self.clear_partition(partition);
                Err(error)
            }
        }
    }

    fn replay(
        &mut self,
        log: &dyn OffsetsLog,
        partition: i32,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        let mut next_offset = 0_i64;
        let mut replayed = 0_u64;
        loop {
            let batch = log
                .read(partition, next_offset, LOAD_BATCH_RECORDS)
                .map_err(|source| LoadError::Read { partition, source })?;
            if batch.is_empty() {
                return Ok(replayed);
            }
            for (offset, record) in batch {
                let decoded = OffsetsRecord::from_log_record(&record).map_err(|source| {
                    LoadError::Malformed {
                        partition,
                        offset,
                        source,
                    }
                })?;
                let belongs_here = decoded
                    .group()
                    .is_some_and(|group| self.partition_for(group) == partition);
                if belongs_here {
                    self.apply_record(decoded, now_ms);
                }
                replayed += 1;
                next_offset = offset + 1;
            }
        }
    }
}
