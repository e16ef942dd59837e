//! Retention: deleting whole segments by time (`retention.ms`), by size
//! (`retention.bytes`) and below the log start offset (DeleteRecords).
//!
//! The active segment is never deleted. Deleted segments are renamed to
//! `.deleted` at once (so readers and recovery no longer see them) and
//! removed from disk after `file.delete.delay.ms` by
//! [`Log::delete_pending_files`](crate::log::Log::delete_pending_files).

use crate::error::LogError;
use crate::log::Log;

impl Log {
    /// Applies retention; returns the number of segments deleted.
    ///
    /// A topic with `remote.storage.enable` (tiered storage, KIP-405) keeps
    /// its segments locally by `local.retention.*` instead, and deletes
    /// only segments wholly below [`Log::remote_copied_offset`]: a segment
    /// whose remote copy is not confirmed is never deleted here.
    pub fn delete_old_segments(&mut self, now_ms: i64) -> Result<usize, LogError> {
        let mut doomed = self.segments_below_log_start();
        let tiered = self.config.remote_storage_enable;
        let (retention_ms, retention_bytes) = match tiered {
            true => (
                self.config.effective_local_retention_ms(),
                self.config.effective_local_retention_bytes(),
            ),
            false => (self.config.retention_ms, self.config.retention_bytes),
        };
        if self.config.cleanup_policy.delete {
            doomed.extend(self.segments_past_retention_time(retention_ms, now_ms, doomed.len()));
            let by_size = self.segments_past_retention_size(retention_bytes, doomed.len());
            doomed.extend(by_size);
        }
        doomed.sort_unstable();
        doomed.dedup();
        if tiered {
            self.keep_copied_prefix(&mut doomed);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        self.remove_segments(&doomed, now_ms)?;
        if let Some(first) = self.segments.keys().next() {
            if *first > self.log_start_offset {
                self.set_log_start_offset(*first)?;
            }
        }
        Ok(doomed.len())
    }

    /// Leaves in `doomed` (sorted) only its leading run of the oldest
    /// segments that are wholly below the remote copied offset, so the
    /// local log stays contiguous and nothing uncopied goes.
    fn keep_copied_prefix(&self, doomed: &mut Vec<i64>) {
        let copied = self.remote_copied_offset;
        let keep = self
            .segments
            .values()
            .zip(doomed.iter())
            .take_while(|(segment, base)| {
                segment.base_offset() == **base && segment.next_offset() <= copied
            })
            .count();
        doomed.truncate(keep);
    }

    /// Candidate segments from the oldest, never the active one.
    fn deletable(&self) -> impl Iterator<Item = (i64, &crate::segment::Segment)> + '_ {
        let count = self.segments.len().saturating_sub(1);
        self.segments
            .iter()
            .take(count)
            .map(|(base, segment)| (*base, segment))
    }

    /// Segments whose every offset is below the log start offset.
    fn segments_below_log_start(&self) -> Vec<i64> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        self.deletable()
            .zip(bases.iter().skip(1))
            .take_while(|(_, next_base)| **next_base <= self.log_start_offset)
            .map(|((base, _), _)| base)
            .collect()
    }

    /// Oldest segments whose largest timestamp is older than `retention.ms`.
    fn segments_past_retention_time(
        &self,
        retention_ms: Option<i64>,
        now_ms: i64,
        skip: usize,
    ) -> Vec<i64> {
        let Some(retention_ms) = retention_ms else {
            return Vec::new();
        };
        self.deletable()
            .skip(skip)
            .take_while(|(_, segment)| {
                let largest = if segment.max_timestamp() >= 0 {
                    segment.max_timestamp()
                } else {
                    segment.created_ms()
                };
                now_ms - largest > retention_ms
            })
            .map(|(base, _)| base)
            .collect()
    }

    /// Oldest segments that bring the log under `retention.bytes`.
    fn segments_past_retention_size(&self, retention_bytes: Option<u64>, skip: usize) -> Vec<i64> {
        let Some(retention_bytes) = retention_bytes else {
            return Vec::new();
        };
        let mut excess = self.size_bytes().saturating_sub(retention_bytes);
        let mut skipped_bytes = 0u64;
        let mut doomed = Vec::new();
        for (index, (base, segment)) in self.deletable().enumerate() {
            if index < skip {
                skipped_bytes += segment.size_bytes();
                continue;
            }
            if index == skip {
                excess = excess.saturating_sub(skipped_bytes);
            }
            if segment.size_bytes() > excess {
                break;
            }
            excess -= segment.size_bytes();
            doomed.push(base);
        }
        doomed
    }

    /// Tiered storage: the offset below which every record is in a remote
    /// segment whose copy finished (0 when nothing is).
    pub fn remote_copied_offset(&self) -> i64 {
        self.remote_copied_offset
    }

    /// Records that every record below `offset` is safely remote (it only
    /// moves forward); local retention may then delete those segments.
    pub fn set_remote_copied_offset(&mut self, offset: i64) {
        self.remote_copied_offset = self.remote_copied_offset.max(offset);
    }

    /// DeleteRecords: moves the log start offset forward to `new_start`
    /// (at most the high watermark). Segments wholly below it go with the next
    /// retention pass.
    pub fn increment_log_start_offset(&mut self, new_start: i64) -> Result<bool, LogError> {
        if new_start > self.high_watermark {
            return Err(LogError::LogStartBeyondLimit {
                requested: new_start,
                limit: self.high_watermark,
            });
        }
        if new_start <= self.log_start_offset {
            return Ok(false);
        }
        self.set_log_start_offset(new_start)?;
        Ok(true)
    }

    fn set_log_start_offset(&mut self, new_start: i64) -> Result<(), LogError> {
        self.log_start_offset = new_start;
        self.high_watermark = self.high_watermark.max(new_start);
        self.recovery_point = self.recovery_point.max(new_start.min(self.log_end_offset));
        self.epoch_cache.truncate_from_start(new_start)?;
        self.producer_state.evict_before(new_start);
        for (offset, path) in crate::producer_state::list_snapshots(&self.dir)? {
            if offset < new_start {
                std::fs::remove_file(&path).ok();
            }
        }
        Ok(())
    }
}
