//! Log compaction (`cleanup.policy=compact`): keep the latest record per key.
//!
//! A pass cleans whole segments below the first uncleanable offset (the
//! active segment, the last stable offset, and `min.compaction.lag.ms`
//! bound it). A pass is due when the dirty share of those bytes reaches
//! `min.cleanable.dirty.ratio`, when a dirty record is older than
//! `max.compaction.lag.ms` (KIP-354), or when a retained tombstone's delete
//! horizon has passed (KIP-534):
//!
//! 1. an offset map `key → latest offset` is built over the dirty segments
//!    (those at or after the first dirty offset);
//! 2. the cleanable segments are grouped so that each group fits one
//!    segment (`segment.bytes`, the index sizes, 32-bit relative offsets),
//!    which merges the small segments cleaning leaves behind, and each group
//!    is rewritten into `<base of its first segment>.log.cleaned`. A record
//!    survives if it has a key, no later offset of that key is in the map,
//!    and it is not a tombstone whose batch's delete horizon has passed;
//! 3. a batch that keeps a tombstone and has no delete horizon yet gets one,
//!    `now + delete.retention.ms`, stored as its base timestamp with
//!    attribute bit 6, exactly as Kafka's cleaner writes it, so tombstones
//!    stay readable for `delete.retention.ms` after the pass that first
//!    cleaned them whatever their own timestamps say. Batches whose records
//!    all survive unchanged are copied byte for byte; others are rebuilt with
//!    the same base offset, producer fields and compression, records keeping
//!    their offsets and timestamps;
//! 4. the output is swapped in crash-safely (see [`crate::cleaner`]):
//!    `.cleaned` → `.swap`, originals → `.deleted`, `.swap` → live.
//!
//! Transactions (see `txn_cleaning.rs`): cleaning stops at the last stable
//! offset, records of aborted transactions are removed and never enter the
//! offset map, markers are never deduplicated by key and go (with a delete
//! horizon, like tombstones) once their transaction has no data left; the
//! output's `.txnindex` keeps the entries of the abort markers it keeps
//! with their data.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use bytes::{Bytes, BytesMut};
use strom_protocol::records::{
    Record, RecordBatch, RecordBatchBuilder, RecordError, TimestampType,
};

use crate::batch::BatchHeader;
use crate::cleaner::{CLEANED_SUFFIX, SWAP_SUFFIX};
use crate::error::{CleanError, IoContext};
use crate::log::Log;
use crate::marker::{marker_of_control_batch, ControlMarker};
use crate::segment::{Segment, DELETED_SUFFIX};
use crate::txn_cleaning::{MarkerVerdict, TransactionCleaning};
use crate::txn_index::AbortedTxnEntry;

/// The swap step after which a pass stops, simulating a crash (fault tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapStep {
    /// All `.cleaned` files are written and flushed.
    CleanedWritten,
    /// The cleaned files are renamed to `.swap`.
    RenamedToSwap,
    /// The original segments are renamed to `.deleted`.
    OriginalsDeleted,
}

/// Tuning of a cleaning pass.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    /// Most keys held in the offset map (bounds memory; a pass that fills
    /// the map cleans only up to the segment where it filled).
    pub max_offset_map_entries: usize,
    /// Stop after this swap step without finishing (fault injection only).
    pub stop_after: Option<SwapStep>,
}

impl Default for CleanOptions {
    fn default() -> Self {
        CleanOptions {
            max_offset_map_entries: 1_000_000,
            stop_after: None,
        }
    }
}

/// What a cleaning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// Segments rewritten.
    pub segments_cleaned: usize,
    /// Bytes of the segments before cleaning.
    pub bytes_before: u64,
    /// Bytes after cleaning.
    pub bytes_after: u64,
    /// Records removed (superseded, keyless or expired tombstones).
    pub records_removed: u64,
    /// The new first dirty offset.
    pub first_dirty_offset: i64,
}

/// One batch read back from a segment.
fn read_batch(segment: &Segment, position: u64, header: &BatchHeader) -> Result<Bytes, CleanError> {
    let mut buffer = BytesMut::zeroed(header.size_in_bytes());
    segment
        .file()
        .read_exact_at(&mut buffer, position)
        .at(segment.log_path())?;
    Ok(buffer.freeze())
}

/// Calls `visit` with each batch of `segment` (parsed, records not decoded).
fn for_each_batch(
    segment: &Segment,
    mut visit: impl FnMut(RecordBatch, BatchHeader) -> Result<(), CleanError>,
) -> Result<(), CleanError> {
    let mut position = 0u64;
    while let Ok(Some(location)) = segment.batch_at(position) {
        let bytes = read_batch(segment, position, &location.header)?;
        let batch = RecordBatch::parse(bytes).map_err(|source| CleanError::Record {
            base_offset: location.header.base_offset,
            source,
        })?;
        visit(batch, location.header)?;
        position += location.header.size_in_bytes() as u64;
    }
    Ok(())
}

impl Log {
    /// The first offset not yet cleaned.
    pub fn first_dirty_offset(&self) -> i64 {
        self.first_dirty_offset.max(self.log_start_offset)
    }

    /// Restores the first dirty offset (from `cleaner-offset-checkpoint`).
    pub fn set_first_dirty_offset(&mut self, offset: i64) {
        self.first_dirty_offset = offset.clamp(self.log_start_offset, self.log_end_offset);
    }

    /// The offset below which segments may be cleaned at `now_ms`.
    fn first_uncleanable_offset(&self, now_ms: i64) -> i64 {
        // Records of undecided transactions are not cleaned (Kafka bounds
        // cleaning by the last stable offset).
        let mut limit = self.active().base_offset().min(self.last_stable_offset());
        let lag_ms = self.config.min_compaction_lag_ms;
        if lag_ms > 0 {
            if let Some(young) = self
                .segments
                .values()
                .find(|segment| segment.max_timestamp() > now_ms - lag_ms)
            {
                limit = limit.min(young.base_offset());
            }
        }
        limit
    }

    /// Bases of whole segments below the first uncleanable offset.
    fn cleanable_segments(&self, now_ms: i64) -> Vec<i64> {
        let limit = self.first_uncleanable_offset(now_ms);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        bases
            .windows(2)
            .filter(|pair| pair[1] <= limit)
            .map(|pair| pair[0])
            .collect()
    }

    /// Dirty bytes over cleanable bytes, and the dirty segment bases.
    pub fn dirty_ratio(&self, now_ms: i64) -> f64 {
        self.dirty_split(now_ms).0
    }

    fn dirty_split(&self, now_ms: i64) -> (f64, Vec<i64>, Vec<i64>) {
        let cleanable = self.cleanable_segments(now_ms);
        let first_dirty = self.first_dirty_offset();
        let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
        let mut dirty = Vec::new();
        for base in &cleanable {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            if segment.next_offset() > first_dirty && !segment.is_empty() {
                dirty_bytes += segment.size_bytes();
                dirty.push(*base);
            } else {
                clean_bytes += segment.size_bytes();
            }
        }
        let total = clean_bytes + dirty_bytes;
        let ratio = if total == 0 {
            0.0
        } else {
            dirty_bytes as f64 / total as f64
        };
        (ratio, cleanable, dirty)
    }

    /// Runs one cleaning pass if the log is compacted and a pass is due
    /// (dirty ratio, maximum compaction lag or a passed delete horizon).
    /// Returns `None` when there was nothing to do.
    pub fn clean(
        &mut self,
        now_ms: i64,
        options: &CleanOptions,
    ) -> Result<Option<CleanStats>, CleanError> {
        if !self.config.cleanup_policy.compact {
            return Ok(None);
        }
        let (ratio, cleanable, dirty) = self.dirty_split(now_ms);
        if cleanable.is_empty() || !self.cleaning_due(ratio, &cleanable, &dirty, now_ms)? {
            return Ok(None);
        }
        let (offset_map, end_dirty) = self.build_offset_map(&dirty, options)?;
        let targets: Vec<i64> = cleanable
            .into_iter()
            .filter(|base| {
                self.segments
                    .get(base)
                    .is_some_and(|segment| segment.next_offset() <= end_dirty)
            })
            .collect();
        let mut stats = CleanStats {
            first_dirty_offset: end_dirty,
            ..CleanStats::default()
        };
        let mut next_horizon: Option<i64> = None;
        let mut cleaned = Vec::new();
        let pass_start = targets.first().copied().unwrap_or(end_dirty);
        let mut txn = TransactionCleaning::new(self.aborted_entries(pass_start, end_dirty));
        for group in self.group_by_size(&targets) {
            let output = self.clean_group(
                &group,
                &offset_map,
                &mut txn,
                now_ms,
                &mut stats,
                &mut next_horizon,
            )?;
            stats.bytes_after += output.size_bytes();
            cleaned.push((output, group));
        }
        stats.segments_cleaned = cleaned.iter().map(|(_, group)| group.len()).sum();
        if self.swap_in(cleaned, now_ms, options.stop_after)? {
            self.first_dirty_offset = end_dirty;
            self.next_delete_horizon_ms = Some(next_horizon.unwrap_or(i64::MAX));
        }
        Ok(Some(stats))
    }

    /// Whether a pass should run now.
    fn cleaning_due(
        &mut self,
        ratio: f64,
        cleanable: &[i64],
        dirty: &[i64],
        now_ms: i64,
    ) -> Result<bool, CleanError> {
        if !dirty.is_empty() && ratio >= self.config.min_cleanable_dirty_ratio {
            return Ok(true);
        }
        if !dirty.is_empty() && self.max_compaction_lag_exceeded(dirty, now_ms)? {
            return Ok(true);
        }
        let horizon = match self.next_delete_horizon_ms {
            Some(horizon) => horizon,
            None => {
                let horizon = self.scan_delete_horizons(cleanable)?;
                self.next_delete_horizon_ms = Some(horizon);
                horizon
            }
        };
        Ok(horizon <= now_ms)
    }

    /// Whether the oldest dirty record is older than `max.compaction.lag.ms`
    /// (judged, as Kafka does, by the first batch of each dirty segment).
    fn max_compaction_lag_exceeded(&self, dirty: &[i64], now_ms: i64) -> Result<bool, CleanError> {
        let max_lag_ms = self.config.max_compaction_lag_ms;
        if max_lag_ms == i64::MAX {
            return Ok(false);
        }
        for base in dirty {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            if let Some(first) = segment.batch_at(0)? {
                let timestamp = first.header.max_timestamp;
                if timestamp >= 0 && now_ms.saturating_sub(timestamp) > max_lag_ms {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The earliest delete horizon among the batches of `bases` that carry
    /// one (`i64::MAX` when none do); reads batch headers only.
    fn scan_delete_horizons(&self, bases: &[i64]) -> Result<i64, CleanError> {
        let mut earliest = i64::MAX;
        for base in bases {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            let mut position = 0u64;
            while let Some(location) = segment.batch_at(position)? {
                if location.header.attributes.has_delete_horizon() {
                    earliest = earliest.min(location.header.base_timestamp);
                }
                position += location.header.size_in_bytes() as u64;
            }
        }
        Ok(earliest)
    }

    /// Splits consecutive segments into groups that each fit in one segment:
    /// at most `segment.bytes` of log, indexes within `segment.index.bytes`,
    /// and offsets within 32 bits of the group's base offset.
    fn group_by_size(&self, bases: &[i64]) -> Vec<Vec<i64>> {
        let max_log_bytes = u64::from(self.config.segment_bytes);
        let max_index_bytes = u64::from(self.config.segment_index_bytes);
        let mut groups: Vec<Vec<i64>> = Vec::new();
        let mut current: Vec<i64> = Vec::new();
        let (mut log_bytes, mut offset_index_bytes, mut time_index_bytes) = (0u64, 0u64, 0u64);
        for base in bases {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            let segment_offset_index_bytes = segment.offset_index().len() as u64 * 8;
            let segment_time_index_bytes = segment.time_index().len() as u64 * 12;
            let fits = current.first().is_some_and(|first| {
                log_bytes + segment.size_bytes() <= max_log_bytes
                    && offset_index_bytes + segment_offset_index_bytes <= max_index_bytes
                    && time_index_bytes + segment_time_index_bytes <= max_index_bytes
                    && segment.next_offset() - 1 - first <= i64::from(i32::MAX)
            });
            if !fits && !current.is_empty() {
                groups.push(std::mem::take(&mut current));
                (log_bytes, offset_index_bytes, time_index_bytes) = (0, 0, 0);
            }
            current.push(*base);
            log_bytes += segment.size_bytes();
            offset_index_bytes += segment_offset_index_bytes;
            time_index_bytes += segment_time_index_bytes;
        }
        if !current.is_empty() {
            groups.push(current);
        }
        groups
    }

    /// `key → latest offset` over the dirty segments, and the offset where
    /// the mapped range ends.
    fn build_offset_map(
        &self,
        dirty: &[i64],
        options: &CleanOptions,
    ) -> Result<(HashMap<Bytes, i64>, i64), CleanError> {
        let mut map: HashMap<Bytes, i64> = HashMap::new();
        let mut end = self.first_dirty_offset();
        let mut txn = TransactionCleaning::new(self.aborted_entries(end, self.log_end_offset));
        for base in dirty {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            if map.len() >= options.max_offset_map_entries {
                break;
            }
            for_each_batch(segment, |batch, header| {
                if header.is_control() {
                    // Markers are not keyed records; they end transactions.
                    txn.on_marker(&header, read_marker(&batch, &header));
                    return Ok(());
                }
                if txn.on_data_batch(&header) {
                    // Aborted records never supersede anything.
                    return Ok(());
                }
                let records = batch.records().map_err(|source| CleanError::Record {
                    base_offset: header.base_offset,
                    source,
                })?;
                for record in records {
                    let record = record.map_err(|source| CleanError::Record {
                        base_offset: header.base_offset,
                        source,
                    })?;
                    if let Some(key) = record.key_bytes() {
                        map.insert(key, record.offset(header.base_offset));
                    }
                }
                Ok(())
            })?;
            end = segment.next_offset();
        }
        Ok((map, end))
    }

    /// Writes the retained records of the segments `group` (consecutive
    /// bases) into one `.cleaned` segment based at the first of them.
    fn clean_group(
        &self,
        group: &[i64],
        offset_map: &HashMap<Bytes, i64>,
        txn: &mut TransactionCleaning,
        now_ms: i64,
        stats: &mut CleanStats,
        next_horizon: &mut Option<i64>,
    ) -> Result<Segment, CleanError> {
        let base = group.first().copied().unwrap_or(self.log_start_offset);
        let mut output =
            Segment::create_with_suffix(&self.dir, base, self.settings(), now_ms, CLEANED_SUFFIX)?;
        let policy = TombstonePolicy {
            now_ms,
            delete_retention_ms: self.config.delete_retention_ms,
        };
        let mut kept_aborts = Vec::new();
        for source_base in group {
            let Some(source) = self.segments.get(source_base) else {
                continue;
            };
            stats.bytes_before += source.size_bytes();
            for_each_batch(source, |batch, header| {
                let retained = if header.is_control() {
                    clean_marker(batch, &header, txn, policy, &mut kept_aborts, stats)?
                } else if txn.on_data_batch(&header) {
                    stats.records_removed += header.record_count.max(0) as u64;
                    None
                } else {
                    filter_batch(&batch, &header, offset_map, policy, stats)?
                };
                if let Some((bytes, horizon)) = retained {
                    if let Some(horizon) = horizon {
                        *next_horizon = Some(next_horizon.map_or(horizon, |h| h.min(horizon)));
                    }
                    let kept = crate::batch::validate_batch_at(&bytes, 0)?;
                    output.append(&bytes, &[(kept, 0)])?;
                }
                Ok(())
            })?;
        }
        // Abort markers kept with their data keep their index entries.
        for entry in kept_aborts {
            output.append_aborted_txn(entry)?;
        }
        output.seal()?;
        output.flush()?;
        Ok(output)
    }

    /// Swaps cleaned segments in; returns `false` if stopped early.
    /// Each cleaned segment replaces the originals of its group.
    fn swap_in(
        &mut self,
        mut cleaned: Vec<(Segment, Vec<i64>)>,
        now_ms: i64,
        stop_after: Option<SwapStep>,
    ) -> Result<bool, CleanError> {
        // Each output may end before its group does (trailing records were
        // removed): record the group's end so that recovery knows every
        // original a `.swap` file replaces.
        for (segment, group) in &cleaned {
            let group_end = group
                .last()
                .and_then(|base| self.segments.get(base))
                .map_or(segment.next_offset(), Segment::next_offset);
            write_cover(&self.dir, segment.base_offset(), group_end)?;
        }
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::CleanedWritten) {
            return Ok(false);
        }
        for (segment, _) in &mut cleaned {
            segment.set_suffix(SWAP_SUFFIX)?;
        }
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::RenamedToSwap) {
            return Ok(false);
        }
        let mut doomed = Vec::new();
        for base in cleaned.iter().flat_map(|(_, group)| group) {
            if let Some(mut original) = self.segments.remove(base) {
                doomed.extend(original.set_suffix(DELETED_SUFFIX)?);
            }
        }
        self.schedule_delete(doomed, now_ms);
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::OriginalsDeleted) {
            return Ok(false);
        }
        for (mut segment, _) in cleaned {
            segment.set_suffix("")?;
            remove_cover(&self.dir, segment.base_offset())?;
            self.segments.insert(segment.base_offset(), segment);
        }
        crate::checkpoint::sync_directory(&self.dir)?;
        Ok(true)
    }
}

/// Writes (and fsyncs) the cover file of the cleaner output at `base`.
fn write_cover(dir: &std::path::Path, base: i64, group_end: i64) -> Result<(), CleanError> {
    let path = crate::cleaner::cover_path(dir, base);
    let mut file = std::fs::File::create(&path).at(&path)?;
    std::io::Write::write_all(&mut file, group_end.to_string().as_bytes()).at(&path)?;
    file.sync_all().at(&path)?;
    Ok(())
}

/// Removes the cover file of the cleaner output at `base` (if any).
fn remove_cover(dir: &std::path::Path, base: i64) -> Result<(), CleanError> {
    crate::error::remove_file_if_exists(&crate::cleaner::cover_path(dir, base))?;
    Ok(())
}

/// The marker in a control batch, if it holds a readable one.
fn read_marker(batch: &RecordBatch, header: &BatchHeader) -> Option<ControlMarker> {
    if !header.has_producer_id() {
        return None;
    }
    marker_of_control_batch(batch.as_bytes().clone()).ok()
}

/// A marker batch as the pass leaves it: kept while its transaction has
/// data (an abort keeps its index entry, pushed to `kept_aborts`);
/// otherwise given a delete horizon (`now + delete.retention.ms`) if it has
/// none, and removed once it has passed. Returns the bytes to write and
/// the horizon they carry, as [`filter_batch`] does.
fn clean_marker(
    batch: RecordBatch,
    header: &BatchHeader,
    txn: &mut TransactionCleaning,
    policy: TombstonePolicy,
    kept_aborts: &mut Vec<AbortedTxnEntry>,
    stats: &mut CleanStats,
) -> Result<Option<(Bytes, Option<i64>)>, CleanError> {
    let horizon = header
        .attributes
        .has_delete_horizon()
        .then_some(header.base_timestamp);
    match txn.on_marker(header, read_marker(&batch, header)) {
        MarkerVerdict::Keep(entry) => {
            kept_aborts.extend(entry);
            Ok(Some((batch.into_bytes(), horizon)))
        }
        MarkerVerdict::Discardable => match horizon {
            Some(horizon) if policy.now_ms >= horizon => {
                stats.records_removed += header.record_count.max(0) as u64;
                Ok(None)
            }
            Some(horizon) => Ok(Some((batch.into_bytes(), Some(horizon)))),
            None => {
                let record_error = |source| CleanError::Record {
                    base_offset: header.base_offset,
                    source,
                };
                let horizon = policy.now_ms.saturating_add(policy.delete_retention_ms);
                let records = batch
                    .records()
                    .map_err(record_error)?
                    .collect::<Result<Vec<Record>, RecordError>>()
                    .map_err(record_error)?;
                let rebuilt =
                    rebuild_batch(&batch, header, &records, Some(horizon)).map_err(record_error)?;
                Ok(Some((rebuilt, Some(horizon))))
            }
        },
    }
}

/// When tombstones may go: the pass's clock and `delete.retention.ms`.
#[derive(Debug, Clone, Copy)]
struct TombstonePolicy {
    now_ms: i64,
    delete_retention_ms: i64,
}

/// The batch with only its retained records and the delete horizon it
/// carries: `None` if no record survives, the original bytes if nothing
/// changes, a rebuilt batch otherwise. Tombstones go once the batch's delete
/// horizon has passed; a batch that keeps a tombstone gets a horizon
/// (`now + delete.retention.ms`) if it has none, and a batch left without
/// tombstones loses its horizon so it is not looked at again.
fn filter_batch(
    batch: &RecordBatch,
    header: &BatchHeader,
    offset_map: &HashMap<Bytes, i64>,
    policy: TombstonePolicy,
    stats: &mut CleanStats,
) -> Result<Option<(Bytes, Option<i64>)>, CleanError> {
    let record_error = |source| CleanError::Record {
        base_offset: header.base_offset,
        source,
    };
    let attributes = batch.attributes();
    let existing_horizon = attributes
        .has_delete_horizon()
        .then_some(header.base_timestamp);
    let horizon_passed = existing_horizon.is_some_and(|horizon| policy.now_ms >= horizon);
    let mut retained = Vec::new();
    let mut keeps_tombstone = false;
    let mut total = 0usize;
    for record in batch.records().map_err(record_error)? {
        let record = record.map_err(record_error)?;
        total += 1;
        let offset = record.offset(header.base_offset);
        let Some(key) = record.key() else {
            continue;
        };
        if offset_map.get(key).is_some_and(|latest| *latest > offset) {
            continue;
        }
        if record.value().is_none() {
            if horizon_passed {
                continue;
            }
            keeps_tombstone = true;
        }
        retained.push(record);
    }
    stats.records_removed += (total - retained.len()) as u64;
    let horizon = keeps_tombstone.then(|| {
        existing_horizon.unwrap_or_else(|| policy.now_ms.saturating_add(policy.delete_retention_ms))
    });
    if retained.len() == total && horizon == existing_horizon {
        return Ok(Some((batch.as_bytes().clone(), horizon)));
    }
    if retained.is_empty() {
        return Ok(None);
    }
    let rebuilt = rebuild_batch(batch, header, &retained, horizon).map_err(record_error)?;
    Ok(Some((rebuilt, horizon)))
}

/// `batch` rebuilt with only the `retained` records (at their offsets) and
/// the delete `horizon`, keeping its producer, epoch and timestamp type.
fn rebuild_batch(
    batch: &RecordBatch,
    header: &BatchHeader,
    retained: &[Record],
    horizon: Option<i64>,
) -> Result<Bytes, RecordError> {
    let attributes = batch.attributes();
    let mut builder = RecordBatchBuilder::new(attributes.compression())
        .with_base_offset(header.base_offset)
        .with_partition_leader_epoch(header.partition_leader_epoch)
        .with_producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        .with_transactional(attributes.is_transactional())
        .with_control(attributes.is_control());
    if attributes.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.with_log_append_time(header.max_timestamp);
    }
    if let Some(horizon) = horizon {
        builder = builder.with_delete_horizon_ms(horizon);
    }
    for record in retained {
        let headers = record.headers();
        let header_inputs: Vec<(&[u8], Option<&[u8]>)> =
            headers.iter().map(|item| (item.key, item.value)).collect();
        builder.append_with_offset(
            record.offset(header.base_offset),
            batch.record_timestamp(record),
            record.key(),
            record.value(),
            &header_inputs,
        )?;
    }
    builder.build()
}
