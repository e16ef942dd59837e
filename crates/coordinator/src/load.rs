//! Loading a `__consumer_offsets` partition: replaying its records into
//! groups, offsets and the offsets of open transactions.

use crate::coordinator::{CoordinatorCore, PartitionStatus};
use crate::error::LoadError;
use crate::log::{OffsetsLog, StoredRecord, TransactionMarker};
use crate::records::OffsetsRecord;

/// How many records a load reads per call to [`OffsetsLog::read`].
const LOAD_BATCH_RECORDS: usize = 1_024;

/// Reads every record of `partition` from `log`, in order, with its offset
/// and batch (transaction markers included).
pub fn read_partition(
    log: &dyn OffsetsLog,
    partition: i32,
) -> Result<Vec<StoredRecord>, LoadError> {
    let mut records = Vec::new();
    let mut next_offset = 0_i64;
    loop {
        let batch = log
            .read(partition, next_offset, LOAD_BATCH_RECORDS)
            .map_err(|source| LoadError::Read { partition, source })?;
        let Some(last) = batch.last() else {
            return Ok(records);
        };
        // Offsets only grow; a log answering below `next_offset` has nothing
        // new, and asking again would loop forever.
        if last.offset < next_offset {
            return Ok(records);
        }
        next_offset = last.offset.saturating_add(1);
        records.extend(batch);
    }
}

impl CoordinatorCore {
    /// Replays `partition` from the start of `log`: later records win and
    /// tombstones delete. Offset commits the log has not committed yet
    /// (at or past [`OffsetsLog::committed_offset`]) stay pending until
    /// [`advance_committed`](Self::advance_committed) passes them.
    /// Offset commits of transactional batches are held for their
    /// producer's marker: a commit marker makes them committed offsets, an
    /// abort marker drops them, and those with no marker yet stay held
    /// (their transaction is open). The partition must have been marked
    /// with [`begin_loading`](Self::begin_loading); it serves requests once
    /// this returns `Ok`. Returns the number of records replayed. On error
    /// the partition stays loading (requests keep getting
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
    /// `committed` is the partition's high watermark. Transaction markers
    /// reported while it loaded
    /// ([`complete_transaction`](Self::complete_transaction)) past the last
    /// of `records` are kept.
    pub fn replay_records(
        &mut self,
        partition: i32,
        records: Vec<StoredRecord>,
        committed: i64,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        if self.partition_status(partition) != Some(PartitionStatus::Loading) {
            return Err(LoadError::NotOwned { partition });
        }
        let replayed_to = records.last().map_or(-1, |stored| stored.offset);
        self.clear_partition(partition, replayed_to);
        match self.apply_records(partition, records, committed, now_ms) {
            Ok(replayed) => {
                self.finish_loading(partition);
                self.start_consumer_sessions(partition, now_ms);
                tracing::debug!(partition, replayed, "loaded __consumer_offsets partition");
                Ok(replayed)
            }
            Err(error) => {
                self.clear_partition(partition, replayed_to);
                Err(error)
            }
        }
    }

    fn apply_records(
        &mut self,
        partition: i32,
        records: Vec<StoredRecord>,
        committed: i64,
        now_ms: i64,
    ) -> Result<u64, LoadError> {
        let mut replayed = 0_u64;
        for stored in records {
            let offset = stored.offset;
            let malformed = |source| LoadError::Malformed {
                partition,
                offset,
                source,
            };
            if stored.batch.control {
                let marker = TransactionMarker::from_key(&stored.record.key).map_err(malformed)?;
                if let Some(marker) = marker {
                    self.replay_marker(partition, &stored, marker, committed, now_ms);
                }
            } else {
                let decoded = OffsetsRecord::from_log_record(&stored.record).map_err(malformed)?;
                self.replay_record(partition, &stored, decoded, committed, now_ms);
            }
            replayed += 1;
        }
        Ok(replayed)
    }

    /// Replays one `__consumer_offsets` record of `partition`.
    fn replay_record(
        &mut self,
        partition: i32,
        stored: &StoredRecord,
        decoded: OffsetsRecord,
        committed: i64,
        now_ms: i64,
    ) {
        let belongs_here = decoded
            .group()
            .is_some_and(|group| self.partition_for(group) == partition);
        if !belongs_here {
            return;
        }
        let offset = stored.offset;
        let transactional_commit =
            matches!(decoded, OffsetsRecord::OffsetCommit { value: Some(_), .. })
                && stored.batch.transactional;
        if transactional_commit {
            let producer_id = stored.batch.producer_id;
            self.transactions
                .open(partition, producer_id, offset, [decoded]);
        } else if offset >= committed && matches!(decoded, OffsetsRecord::OffsetCommit { .. }) {
            self.stage_record(partition, offset, decoded);
        } else {
            self.apply_record(decoded, offset, now_ms);
        }
    }

    /// Replays one transaction marker of `partition`: applied when the log
    /// has committed it, queued for the high watermark otherwise.
    fn replay_marker(
        &mut self,
        partition: i32,
        stored: &StoredRecord,
        marker: TransactionMarker,
        committed: i64,
        now_ms: i64,
    ) {
        let producer_id = stored.batch.producer_id;
        let offset = stored.offset;
        if offset < committed {
            self.apply_marker(partition, producer_id, marker, offset, now_ms);
        } else {
            self.transactions
                .queue_marker(partition, offset, producer_id, marker);
            self.extend_horizon(partition, offset);
        }
    }
}
