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
//! - A recovered segment's `.txnindex` (and a corrupt one) is rebuilt from
//!   its abort markers while producer state is replayed from a snapshot
//!   taken at or before that segment.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use strom_clock::Random;

use crate::backend::{FileBackend, OsBackend};

use crate::config::LogConfig;
use crate::epoch_cache::LeaderEpochCache;
use crate::error::{IoContext, RecoveryError, SnapshotError};
use crate::log::Log;
use crate::marker::{marker_of_control_batch, ControlMarker, MarkerKind, MAX_MARKER_BATCH_BYTES};
use crate::producer_state::{list_snapshots, ProducerStateManager};
use crate::segment::{parse_base_offset, remove_segment_files, BatchLocation, Segment, LOG_SUFFIX};
use crate::topic_partition::TopicPartition;
use crate::txn_index::AbortedTxnEntry;

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
        } else if name.ends_with(".index")
            || name.ends_with(".timeindex")
            || name.ends_with(crate::txn_index::TXN_INDEX_SUFFIX)
        {
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
            verifications: crate::verification::VerificationStates::default(),
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
            remote_copied_offset: 0,
        };
        log.roll_jitter_ms = crate::log::random_roll_jitter_ms(&log.config, &*log.random);
        let (report, rebuild_txn_index) = log.load_segments(&bases, &options)?;
        log.finish_open(options.now_ms, &rebuild_txn_index)?;
        Ok((log, report))
    }

    /// Opens every segment, rebuilding broken indexes, and recovers the
    /// unflushed tail after an unclean shutdown. Returns the bases of the
    /// recovered segments, whose transaction indexes were emptied for
    /// [`Log::rebuild_producer_state`] to rebuild.
    fn load_segments(
        &mut self,
        bases: &[i64],
        options: &LogOpenOptions,
    ) -> Result<(RecoveryReport, BTreeSet<i64>), RecoveryError> {
        let mut rebuild_txn_index = BTreeSet::new();
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
                segment.reset_txn_index()?;
                rebuild_txn_index.insert(base);
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
        Ok((report, rebuild_txn_index))
    }

    /// Derives offsets, epoch cache and producer state from the segments.
    fn finish_open(
        &mut self,
        now_ms: i64,
        rebuild_txn_index: &BTreeSet<i64>,
    ) -> Result<(), RecoveryError> {
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
        self.epoch_cache
            .bound_at_open(self.log_start_offset, self.log_end_offset);
        self.rebuild_producer_state(rebuild_txn_index)?;
        Ok(())
    }

    /// Rebuilds producer state from the latest usable snapshot plus the batch
    /// headers (and marker records) after it. The transaction indexes of the
    /// segments in `rebuild_txn_index` (emptied) are refilled on the way:
    /// the replay then starts from a snapshot at or before the first of them.
    pub(crate) fn rebuild_producer_state(
        &mut self,
        rebuild_txn_index: &BTreeSet<i64>,
    ) -> Result<(), SnapshotError> {
        let limit = rebuild_txn_index.first().copied().unwrap_or(i64::MAX);
        let scan_from = self.load_latest_snapshot(limit)?;
        let start = self
            .segments
            .range(..=scan_from)
            .next_back()
            .map_or(scan_from, |(base, _)| *base);
        let bases: Vec<i64> = self
            .segments
            .range(start..)
            .map(|(base, _)| *base)
            .collect();
        for base in bases {
            let rebuild = rebuild_txn_index.contains(&base);
            let aborted = self.replay_segment(base, scan_from, rebuild);
            if let Some(segment) = self.segments.get_mut(&base) {
                for entry in aborted {
                    segment.append_aborted_txn(entry)?;
                }
            }
        }
        self.producer_state.evict_before(self.log_start_offset);
        self.producer_state.on_high_watermark(self.high_watermark);
        Ok(())
    }

    /// Loads the latest readable snapshot within the log and at or below
    /// `limit`; returns its offset (the log start offset when none).
    fn load_latest_snapshot(&mut self, limit: i64) -> Result<i64, SnapshotError> {
        self.producer_state.clear();
        for (offset, path) in list_snapshots(&self.dir)?.into_iter().rev() {
            if offset > self.log_end_offset || offset < self.log_start_offset || offset > limit {
                continue;
            }
            if self.producer_state.load_snapshot(&path).is_ok() {
                return Ok(offset);
            }
            self.producer_state.clear();
        }
        Ok(self.log_start_offset)
    }

    /// Replays the batches of the segment at `base` from `scan_from` into
    /// the producer state; with `collect`, returns the index entries of the
    /// transactions its abort markers ended.
    fn replay_segment(&mut self, base: i64, scan_from: i64, collect: bool) -> Vec<AbortedTxnEntry> {
        let mut aborted = Vec::new();
        let Some(segment) = self.segments.get(&base) else {
            return aborted;
        };
        let mut cursor = segment.batches_from(0);
        while let Ok(Some(location)) = cursor.next_batch() {
            let header = location.header;
            if header.base_offset < scan_from {
                continue;
            }
            let marker = (header.is_control() && header.has_producer_id())
                .then(|| read_marker(segment, &location))
                .flatten();
            let Some(completed) = self.producer_state.update(&header, marker) else {
                continue;
            };
            if collect && completed.kind == MarkerKind::Abort {
                aborted.push(AbortedTxnEntry {
                    producer_id: completed.producer_id,
                    first_offset: completed.first_offset,
                    last_offset: completed.last_offset,
                    last_stable_offset: self.producer_state.last_stable_offset_after(&completed),
                });
            }
        }
        aborted
    }
}

/// The marker of the control batch at `location`, or `None` (with a
/// warning) when it cannot be read: its transaction then stays ongoing.
fn read_marker(segment: &Segment, location: &BatchLocation) -> Option<ControlMarker> {
    let size = location.header.size_in_bytes();
    let read = (size <= MAX_MARKER_BATCH_BYTES).then(|| {
        let mut bytes = vec![0u8; size];
        segment
            .file()
            .read_exact_at(&mut bytes, location.position)
            .ok()
            .map(|()| bytes)
    });
    let result = match read.flatten() {
        Some(bytes) => {
            marker_of_control_batch(bytes::Bytes::from(bytes)).map_err(|error| error.to_string())
        }
        None => Err(format!("control batch of {size} bytes could not be read")),
    };
    result
        .inspect_err(|error| {
            tracing::warn!(
                segment = %segment.log_path().display(),
                offset = location.header.base_offset,
                %error,
                "control batch holds no readable transaction marker"
            );
        })
        .ok()
}
