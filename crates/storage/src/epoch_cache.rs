//! The leader epoch cache of a partition: epoch → first offset (KIP-101).
//!
//! Kept in memory and written through to the partition's
//! `leader-epoch-checkpoint` on every change. Followers use
//! [`LeaderEpochCache::end_offset_for`] (OffsetForLeaderEpoch) to find where
//! their log diverges from the leader's.

use std::path::Path;

use crate::checkpoint::{EpochEntry, LeaderEpochCheckpointFile, LEADER_EPOCH_CHECKPOINT};
use crate::error::CheckpointError;

/// The epoch returned when nothing is known (Kafka's `UNDEFINED_EPOCH`).
pub const UNDEFINED_EPOCH: i32 = -1;
/// The offset returned when nothing is known (Kafka's `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Epoch → start offset entries of a partition, persisted to its checkpoint.
#[derive(Debug)]
pub struct LeaderEpochCache {
    file: LeaderEpochCheckpointFile,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the cache of the partition directory `partition_dir`.
    pub fn open(partition_dir: &Path) -> Result<Self, CheckpointError> {
        let file = LeaderEpochCheckpointFile::new(partition_dir.join(LEADER_EPOCH_CHECKPOINT));
        let mut entries = file.read()?;
        // Keep only a strictly increasing sequence, as assign() would have.
        entries.dedup_by(|later, earlier| {
            later.epoch <= earlier.epoch || later.start_offset < earlier.start_offset
        });
        Ok(LeaderEpochCache { file, entries })
    }

    /// All entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|entry| entry.epoch)
    }

    /// Records that `epoch` starts at `start_offset`. Entries that conflict
    /// (an epoch not below `epoch`, or a start offset not below
    /// `start_offset`) are removed first. Returns whether anything changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, CheckpointError> {
        if epoch < 0 || start_offset < 0 {
            return Ok(false);
        }
        if self.entries.last().is_some_and(|last| last.epoch == epoch) {
            return Ok(false);
        }
        self.entries
            .retain(|entry| entry.epoch < epoch && entry.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.file.write(&self.entries)?;
        Ok(true)
    }

    /// OffsetForLeaderEpoch: the largest epoch `<= requested_epoch` and the
    /// end offset of `requested_epoch` (the start of the next higher epoch, or
    /// `log_end_offset` for the latest epoch). Unknown returns
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        let Some(latest) = self.entries.last() else {
            return undefined;
        };
        if requested_epoch == UNDEFINED_EPOCH {
            return undefined;
        }
        if requested_epoch == latest.epoch {
            return (requested_epoch, log_end_offset);
        }
        let first_higher = self
            .entries
            .iter()
            .position(|entry| entry.epoch > requested_epoch);
        match first_higher {
            None => undefined,
            Some(0) => (requested_epoch, self.entries[0].start_offset),
            Some(index) => (
                self.entries[index - 1].epoch,
                self.entries[index].start_offset,
            ),
        }
    }

    /// Removes entries starting at or after `end_offset` (log truncation).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), CheckpointError> {
        if self.drop_from_end(end_offset) {
            self.file.write(&self.entries)?;
        }
        Ok(())
    }

    /// Drops entries wholly before `start_offset`; the last of them is kept
    /// and moved to start at `start_offset` (log start offset advanced).
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), CheckpointError> {
        if self.drop_before(start_offset) {
            self.file.write(&self.entries)?;
        }
        Ok(())
    }

    /// At open: bounds the entries by the log's start and end offsets in
    /// memory only. The file is not rewritten (two fsyncs a partition, and
    /// a restart reopens every partition): the entries it keeps past the
    /// bounds are dropped the same way at every open, and the file is
    /// rewritten whole at the next change. Returns whether anything went.
    pub(crate) fn bound_at_open(&mut self, start_offset: i64, end_offset: i64) -> bool {
        let from_end = self.drop_from_end(end_offset);
        let before = self.drop_before(start_offset);
        from_end || before
    }

    /// [`Self::truncate_from_end`] in memory; returns whether anything went.
    fn drop_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.start_offset < end_offset);
        self.entries.len() != before
    }

    /// [`Self::truncate_from_start`] in memory; returns whether anything
    /// changed.
    fn drop_before(&mut self, start_offset: i64) -> bool {
        let before_start = self
            .entries
            .iter()
            .take_while(|entry| entry.start_offset < start_offset)
            .count();
        if before_start == 0 {
            return false;
        }
        let mut moved = self.entries[before_start - 1];
        moved.start_offset = start_offset;
        self.entries.drain(..before_start);
        if self
            .entries
            .first()
            .is_none_or(|first| first.start_offset > start_offset)
        {
            self.entries.insert(0, moved);
        }
        true
    }

    /// Removes every entry (the log was deleted or fully truncated).
    pub fn clear(&mut self) -> Result<(), CheckpointError> {
        self.entries.clear();
        self.file.write(&self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn assign_persists_and_removes_conflicts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochCache::open(dir.path()).expect("open");
        assert!(cache.assign(0, 0).expect("assign"));
        assert!(!cache.assign(0, 5).expect("same epoch is a no-op"));
        assert!(cache.assign(2, 10).expect("assign"));
        assert!(cache.assign(3, 20).expect("assign"));
        // A lower epoch at a later offset replaces the conflicting entries.
        assert!(cache.assign(1, 15).expect("assign"));
        assert_eq!(cache.entries(), &[entry(0, 0), entry(1, 15)]);
        let reopened = LeaderEpochCache::open(dir.path()).expect("reopen");
        assert_eq!(reopened.entries(), cache.entries());
    }

    #[test]
    fn end_offset_for_follows_kip_101() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochCache::open(dir.path()).expect("open");
        assert_eq!(
            cache.end_offset_for(0, 10),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        cache.assign(1, 0).expect("assign");
        cache.assign(3, 10).expect("assign");
        cache.assign(5, 30).expect("assign");
        assert_eq!(cache.end_offset_for(5, 42), (5, 42));
        assert_eq!(cache.end_offset_for(3, 42), (3, 30));
        assert_eq!(cache.end_offset_for(4, 42), (3, 30));
        assert_eq!(cache.end_offset_for(0, 42), (0, 0));
        assert_eq!(
            cache.end_offset_for(6, 42),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
    }

    #[test]
    fn truncation_from_both_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochCache::open(dir.path()).expect("open");
        cache.assign(1, 0).expect("assign");
        cache.assign(2, 10).expect("assign");
        cache.assign(3, 20).expect("assign");
        cache.truncate_from_end(20).expect("truncate");
        assert_eq!(cache.entries(), &[entry(1, 0), entry(2, 10)]);
        cache.truncate_from_start(15).expect("truncate");
        assert_eq!(cache.entries(), &[entry(2, 15)]);
        cache.truncate_from_start(15).expect("no-op");
        assert_eq!(cache.entries(), &[entry(2, 15)]);
        let reopened = LeaderEpochCache::open(dir.path()).expect("reopen");
        assert_eq!(reopened.entries(), &[entry(2, 15)]);
    }

    #[test]
    fn bounding_at_open_leaves_the_file_and_a_reopen_bounds_it_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cache = LeaderEpochCache::open(dir.path()).expect("open");
        assert!(cache.assign(1, 0).expect("assign"));
        assert!(cache.assign(2, 10).expect("assign"));
        assert!(cache.assign(3, 20).expect("assign"));
        let on_disk = std::fs::read(dir.path().join(LEADER_EPOCH_CHECKPOINT)).expect("read");
        assert!(cache.bound_at_open(5, 20));
        let bounded = [(1, 5), (2, 10)];
        let entries = |cache: &LeaderEpochCache| {
            cache
                .entries()
                .iter()
                .map(|entry| (entry.epoch, entry.start_offset))
                .collect::<Vec<_>>()
        };
        assert_eq!(entries(&cache), bounded);
        assert_eq!(
            std::fs::read(dir.path().join(LEADER_EPOCH_CHECKPOINT)).expect("read"),
            on_disk,
            "bounding at open writes nothing"
        );
        assert!(!cache.bound_at_open(5, 20), "nothing more to drop");
        let mut reopened = LeaderEpochCache::open(dir.path()).expect("reopen");
        assert!(reopened.bound_at_open(5, 20));
        assert_eq!(entries(&reopened), bounded);
        // The next change writes the bounded entries.
        assert!(reopened.assign(4, 20).expect("assign"));
        let mut third = LeaderEpochCache::open(dir.path()).expect("reopen");
        assert!(!third.bound_at_open(5, 21));
        assert_eq!(entries(&third), [(1, 5), (2, 10), (4, 20)]);
    }
}
