//! Opening a log: cleaning up interrupted operations, loading segments,
//! and recovering after an unclean shutdown.
//!
//! Rules (see `docs/storage.md`):
//! - `.deleted`, `.cleaned` and `.tmp` files are leftovers of finished or
//!   abandoned operations and are removed; `.swap` files are the output of a
//!   compaction whose swap had started and are completed (see
//!   [`crate::cleaner`]).
//! - An index that is missing or fails its structural check is rebuilt from
//!   its `.log` file.
//! - After an unclean shutdown every segment from the one holding the
//!   recovery point on is re-validated batch by batch (header, size, CRC,
//!   increasing offsets); the first invalid byte and everything after it,
//!   including later segments, is removed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strom_clock::Random;

use crate::backend::{FileBackend, OsBackend};

use crate::config::LogConfig;
use crate::epoch_cache::LeaderEpochCache;
use crate::error::{IoContext, RecoveryError, SnapshotError};
use crate::log::Log;
use crate::producer_state::{list_snapshots, ProducerStateManager};
use crate::segment::{parse_base_offset, remove_segment_files, Segment, LOG_SUFFIX};
use crate::topic_partition::TopicPartition;

/// What the caller knows about a log from its checkpoints, and the
/// broker's time and randomness.
#[derive(Debug, Clone)]
pub struct LogOpenOptions {
    /// Checkpointed log start offset (0 when unknown).
    pub log_start_offset: i64,
    /// Checkpointed recovery point (0 when unknown: everything is re-validated
    /// after an unclean shutdown).
    pub recovery_point: i64,
    /// Whether the log directory carried the clean-shutdown marker.
    pub had_clean_shutdown: bool,
    /// The current wall-clock time.
    pub now_ms: i64,
    /// Where the log draws its `segment.jitter.ms` roll jitter from.
    pub random: Arc<dyn Random>,
}

/// What recovery found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments whose batches were re-validated.
    pub segments_recovered: usize,
    /// Bytes removed at the first invalid byte and after.
    pub bytes_truncated: u64,
    /// Segments removed because they followed invalid data.
    pub segments_removed: usize,
}

/// Removes leftovers of interrupted operations and lists segment base offsets.
fn scan_directory(dir: &Path) -> Result<Vec<i64>, RecoveryError> {
    crate::cleaner::complete_interrupted_swaps(dir)?;
    let mut bases = Vec::new();
    let mut stray_indexes = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") {
            std::fs::remove_file(entry.path()).at(entry.path())?;
        } else if let Some(base) = parse_base_offset(name, LOG_SUFFIX) {
            bases.push(base);
        } else if name.ends_with(".index") || name.ends_with(".timeindex") {
            stray_indexes.push(entry.path());
        }
    }
    for path in stray_indexes {
        let stem = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .unwrap_or("");
        if !dir.join(format!("{stem}{LOG_SUFFIX}")).exists() {
            std::fs::remove_file(&path).at(&path)?;
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

impl Log {
    /// Opens (creating if needed) the log in `dir`, named `<topic>-<partition>`.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        options: LogOpenOptions,
    ) -> Result<(Log, RecoveryReport), RecoveryError> {
        Log::open_with_backend(dir, config, options, Arc::new(OsBackend))
    }

    /// [`Log::open`] with segment data going through `backend` (fault injection).
    pub fn open_with_backend(
        dir: &Path,
        config: LogConfig,
        options: LogOpenOptions,
        backend: Arc<dyn FileBackend>,
    ) -> Result<(Log, RecoveryReport), RecoveryError> {
        let topic_partition = dir
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(TopicPartition::from_directory_name)
            .ok_or_else(|| RecoveryError::InvalidDirectoryName {
                path: dir.to_path_buf(),
            })?;
        std::fs::create_dir_all(dir).at(dir)?;
        let bases = scan_directory(dir)?;
        let mut log = Log {
            dir: dir.to_path_buf(),
            topic_partition,
            config,
            segments: BTreeMap::new(),
            log_start_offset: options.log_start_offset.max(0),
            log_end_offset: 0,
            recovery_point: options.recovery_point.max(0),
            high_watermark: 0,
            epoch_cache: LeaderEpochCache::open(dir)?,
            producer_state: ProducerStateManager::new(),
            unflushed_messages: 0,
            last_flush_ms: options.now_ms,
            pending_deletes: Vec::new(),
            first_dirty_offset: 0,
            next_delete_horizon_ms: None,
            roll_jitter_ms: 0,
            random: Arc::clone(&options.random),
            backend,
            page_cache: None,
            flusher: None,
            flush_progress: Arc::default(),
        };
        log.roll_jitter_ms = crate::log::random_roll_jitter_ms(&log.config, &*log.random);
        let report = log.load_segments(&bases, &options)?;
        log.finish_open(options.now_ms)?;
        Ok((log, report))
    }

    /// Opens every segment, rebuilding broken indexes, and recovers the
    /// unflushed tail after an unclean shutdown.
    fn load_segments(
        &mut self,
        bases: &[i64],
        options: &LogOpenOptions,
    ) -> Result<RecoveryReport, RecoveryError> {
        let settings = self.settings();
        let mut report = RecoveryReport::default();
        let recover_from = bases
            .iter()
            .copied()
            .rfind(|base| *base <= self.recovery_point)
            .unwrap_or(i64::MIN);
        let mut expected_offset = i64::MIN;
        let mut truncated = false;
        for base in bases.iter().copied() {
            if truncated {
                remove_segment_files(&self.dir, base)?;
                report.segments_removed += 1;
                continue;
            }
            let (mut segment, needs_rebuild) =
                Segment::open(&self.dir, base, settings.clone(), options.now_ms)?;
            let unflushed = !options.had_clean_shutdown && base >= recover_from;
            if needs_rebuild || unflushed {
                let removed = segment.recover(expected_offset)?;
                report.segments_recovered += 1;
                report.bytes_truncated += removed;
                if removed > 0 {
                    tracing::warn!(
                        segment = %segment.log_path().display(),
                        removed,
                        "truncated invalid bytes during recovery"
                    );
                    truncated = true;
                }
            }
            expected_offset = segment.next_offset();
            self.segments.insert(base, segment);
        }
        Ok(report)
    }

    /// Derives offsets, epoch cache and producer state from the segments.
    fn finish_open(&mut self, now_ms: i64) -> Result<(), RecoveryError> {
        // Drop empty trailing segments left by truncation, keep at least one.
        while self.segments.len() > 1
            && self
                .segments
                .values()
                .next_back()
                .is_some_and(Segment::is_empty)
        {
            if let Some((base, _)) = self.segments.pop_last() {
                remove_segment_files(&self.dir, base)?;
            }
        }
        if self.segments.is_empty() {
            let segment =
                Segment::create(&self.dir, self.log_start_offset, self.settings(), now_ms)?;
            self.segments.insert(self.log_start_offset, segment);
        }
        if let Some(first) = self.segments.keys().next() {
            self.log_start_offset = self.log_start_offset.max(*first);
        }
        let sealed = self.segments.len().saturating_sub(1);
        for segment in self.segments.values_mut().take(sealed) {
            segment.seal()?;
        }
        if let Some(active) = self.segments.values_mut().next_back() {
            active.make_active()?;
            self.log_end_offset = active.next_offset().max(self.log_start_offset);
        }
        self.log_start_offset = self.log_start_offset.min(self.log_end_offset);
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.high_watermark = self.log_start_offset;
        self.epoch_cache.truncate_from_end(self.log_end_offset)?;
        self.epoch_cache
            .truncate_from_start(self.log_start_offset)?;
        self.rebuild_producer_state()?;
        Ok(())
    }

    /// Rebuilds producer state from the latest usable snapshot plus the batch
    /// headers after it.
    pub(crate) fn rebuild_producer_state(&mut self) -> Result<(), SnapshotError> {
        self.producer_state.clear();
        let mut scan_from = self.log_start_offset;
        for (offset, path) in list_snapshots(&self.dir)?.into_iter().rev() {
            if offset > self.log_end_offset || offset < self.log_start_offset {
                continue;
            }
            if self.producer_state.load_snapshot(&path).is_ok() {
                scan_from = offset;
                break;
            }
            self.producer_state.clear();
        }
        let start = self
            .segments
            .range(..=scan_from)
            .next_back()
            .map_or(scan_from, |(base, _)| *base);
        for segment in self.segments.range(start..).map(|(_, segment)| segment) {
            let mut position = 0u64;
            while let Ok(Some(location)) = segment.batch_at(position) {
                if location.header.base_offset >= scan_from {
                    self.producer_state.update(&location.header);
                }
                position += location.header.size_in_bytes() as u64;
            }
        }
        self.producer_state.evict_before(self.log_start_offset);
        Ok(())
    }
}
