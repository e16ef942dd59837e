//! Log compaction (`cleanup.policy=compact`): keep the latest record per key.
//!
//! A pass cleans whole segments below the first uncleanable offset (the
//! active segment, the high watermark, and `min.compaction.lag.ms` bound
//! it) when the dirty share of those bytes reaches
//! `min.cleanable.dirty.ratio`:
//!
//! 1. an offset map `key → latest offset` is built over the dirty segments
//!    (those at or after the first dirty offset);
//! 2. every cleanable segment is rewritten into `<base>.log.cleaned`: a
//!    record survives if it has a key, no later offset of that key is in
//!    the map, and it is not a tombstone older than `delete.retention.ms`
//!    (by its timestamp). Batches whose records all survive are copied
//!    byte for byte; others are rebuilt with the same base offset,
//!    producer fields and compression, records keeping their offsets;
//! 3. the output is swapped in crash-safely (see [`crate::cleaner`]):
//!    `.cleaned` → `.swap`, originals → `.deleted`, `.swap` → live.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use bytes::{Bytes, BytesMut};
use strom_protocol::records::{RecordBatch, RecordBatchBuilder, TimestampType};

use crate::batch::BatchHeader;
use crate::cleaner::{CLEANED_SUFFIX, SWAP_SUFFIX};
use crate::error::{CleanError, IoContext};
use crate::log::Log;
use crate::segment::{Segment, DELETED_SUFFIX};

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
        let mut limit = self.active().base_offset().min(self.high_watermark);
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

    /// Runs one cleaning pass if the log is compacted and dirty enough.
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
        if dirty.is_empty() || ratio < self.config.min_cleanable_dirty_ratio {
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
        let mut cleaned = Vec::new();
        for base in &targets {
            let Some(source) = self.segments.get(base) else {
                continue;
            };
            stats.bytes_before += source.size_bytes();
            let output = self.clean_segment(source, &offset_map, now_ms, &mut stats)?;
            stats.bytes_after += output.size_bytes();
            cleaned.push(output);
        }
        stats.segments_cleaned = cleaned.len();
        if self.swap_in(cleaned, now_ms, options.stop_after)? {
            self.first_dirty_offset = end_dirty;
        }
        Ok(Some(stats))
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
        for base in dirty {
            let Some(segment) = self.segments.get(base) else {
                continue;
            };
            if map.len() >= options.max_offset_map_entries {
                break;
            }
            for_each_batch(segment, |batch, header| {
                if header.is_control() {
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

    /// Writes the retained records of `source` into a `.cleaned` segment.
    fn clean_segment(
        &self,
        source: &Segment,
        offset_map: &HashMap<Bytes, i64>,
        now_ms: i64,
        stats: &mut CleanStats,
    ) -> Result<Segment, CleanError> {
        let mut output = Segment::create_with_suffix(
            &self.dir,
            source.base_offset(),
            self.settings(),
            now_ms,
            CLEANED_SUFFIX,
        )?;
        let tombstone_horizon_ms = now_ms.saturating_sub(self.config.delete_retention_ms);
        for_each_batch(source, |batch, header| {
            let retained = if header.is_control() {
                Some(batch.into_bytes())
            } else {
                filter_batch(&batch, &header, offset_map, tombstone_horizon_ms, stats)?
            };
            if let Some(bytes) = retained {
                let kept = crate::batch::validate_batch_at(&bytes, 0)?;
                output.append(&bytes, &[(kept, 0)])?;
            }
            Ok(())
        })?;
        output.seal()?;
        output.flush()?;
        Ok(output)
    }

    /// Swaps cleaned segments in; returns `false` if stopped early.
    fn swap_in(
        &mut self,
        mut cleaned: Vec<Segment>,
        now_ms: i64,
        stop_after: Option<SwapStep>,
    ) -> Result<bool, CleanError> {
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::CleanedWritten) {
            return Ok(false);
        }
        for segment in &mut cleaned {
            segment.set_suffix(SWAP_SUFFIX)?;
        }
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::RenamedToSwap) {
            return Ok(false);
        }
        let bases: Vec<i64> = cleaned.iter().map(Segment::base_offset).collect();
        let mut doomed = Vec::new();
        for base in &bases {
            if let Some(mut original) = self.segments.remove(base) {
                doomed.extend(original.set_suffix(DELETED_SUFFIX)?);
            }
        }
        self.schedule_delete(doomed, now_ms);
        crate::checkpoint::sync_directory(&self.dir)?;
        if stop_after == Some(SwapStep::OriginalsDeleted) {
            return Ok(false);
        }
        for mut segment in cleaned {
            segment.set_suffix("")?;
            self.segments.insert(segment.base_offset(), segment);
        }
        crate::checkpoint::sync_directory(&self.dir)?;
        Ok(true)
    }
}

/// The batch with only its retained records: `None` if none survive, the
/// original bytes if all do, a rebuilt batch otherwise.
fn filter_batch(
    batch: &RecordBatch,
    header: &BatchHeader,
    offset_map: &HashMap<Bytes, i64>,
    tombstone_horizon_ms: i64,
    stats: &mut CleanStats,
) -> Result<Option<Bytes>, CleanError> {
    let record_error = |source| CleanError::Record {
        base_offset: header.base_offset,
        source,
    };
    let mut retained = Vec::new();
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
        if record.value().is_none() && batch.record_timestamp(&record) < tombstone_horizon_ms {
            continue;
        }
        retained.push(record);
    }
    stats.records_removed += (total - retained.len()) as u64;
    if retained.len() == total {
        return Ok(Some(batch.as_bytes().clone()));
    }
    if retained.is_empty() {
        return Ok(None);
    }
    let attributes = batch.attributes();
    let mut builder = RecordBatchBuilder::new(attributes.compression())
        .with_base_offset(header.base_offset)
        .with_partition_leader_epoch(header.partition_leader_epoch)
        .with_producer(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        )
        .with_transactional(attributes.is_transactional());
    if attributes.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.with_log_append_time(header.max_timestamp);
    }
    for record in &retained {
        let headers = record.headers();
        let header_inputs: Vec<(&[u8], Option<&[u8]>)> =
            headers.iter().map(|item| (item.key, item.value)).collect();
        builder
            .append_with_offset(
                record.offset(header.base_offset),
                batch.record_timestamp(record),
                record.key(),
                record.value(),
                &header_inputs,
            )
            .map_err(record_error)?;
    }
    Ok(Some(builder.build().map_err(record_error)?))
}
