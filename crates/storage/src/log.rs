//! The partition log: an ordered set of segments, appends with offset
//! assignment, roll, flush and truncation.
//!
//! Reads live in [`crate::read`], opening and recovery in
//! [`crate::recovery`], retention in `retention.rs`. A `Log` is used
//! through `&mut self` for changes and `&self` for reads; the log manager
//! wraps each in a lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use strom_clock::Random;

use crate::backend::FileBackend;
use strom_protocol::records::{layout, TimestampType};

use crate::batch::{self, BatchHeader, Batches};
use crate::config::{LogConfig, MessageTimestampType};
use crate::epoch_cache::LeaderEpochCache;
use crate::error::{AppendError, BatchError, IoError, LogError};
use crate::flush_progress::FlushProgress;
use crate::flusher::{Flusher, RollFlush};
use crate::marker::{ControlMarker, MarkerKind, Markers};
use crate::page_cache::{PageCacheSettings, PageCacheTracker, WriteBehind};
use crate::producer_state::{list_snapshots, ProducerStateManager, SequenceCheck};
use crate::segment::{Segment, SegmentSettings, DELETED_SUFFIX};
use crate::topic_partition::TopicPartition;
use crate::txn_index::AbortedTxnEntry;
use crate::validation::{self, Checked};
use crate::verification::{TxnVerification, VerificationGuard, VerificationStates};

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (or of the original, for a duplicate).
    pub first_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// Largest batch max timestamp of the append.
    pub max_timestamp: i64,
    /// Offset of the batch holding `max_timestamp` (its last offset).
    pub offset_of_max_timestamp: i64,
    /// The log append time, when the topic uses `LogAppendTime`.
    pub log_append_time_ms: Option<i64>,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// Records in the append.
    pub record_count: u64,
    /// Bytes written.
    pub valid_bytes: u64,
    /// Whether this was a retried batch already in the log (nothing written).
    pub duplicate: bool,
}

/// A file renamed to `.deleted`, waiting for its deletion time.
#[derive(Debug)]
pub(crate) struct PendingDelete {
    pub(crate) delete_at_ms: i64,
    pub(crate) paths: Vec<PathBuf>,
}

/// The durable log of one partition.
#[derive(Debug)]
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) topic_partition: TopicPartition,
    pub(crate) config: LogConfig,
    pub(crate) segments: BTreeMap<i64, Segment>,
    pub(crate) log_start_offset: i64,
    pub(crate) log_end_offset: i64,
    pub(crate) recovery_point: i64,
    pub(crate) high_watermark: i64,
    pub(crate) epoch_cache: LeaderEpochCache,
    pub(crate) producer_state: ProducerStateManager,
    /// Outstanding transaction verifications (KIP-890 part 1).
    pub(crate) verifications: VerificationStates,
    pub(crate) unflushed_messages: u64,
    pub(crate) last_flush_ms: i64,
    pub(crate) pending_deletes: Vec<PendingDelete>,
    pub(crate) first_dirty_offset: i64,
    /// Earliest KIP-534 delete horizon among retained tombstone batches;
    /// `None` until the cleaner has looked (after open).
    pub(crate) next_delete_horizon_ms: Option<i64>,
    /// `segment.jitter.ms` drawn for the active segment (Kafka draws one per segment).
    pub(crate) roll_jitter_ms: i64,
    /// The broker's source of randomness (the roll jitter draws).
    pub(crate) random: Arc<dyn Random>,
    pub(crate) backend: Arc<dyn FileBackend>,
    /// Write-behind and drop-behind bookkeeping, when the log has them.
    pub(crate) page_cache: Option<PageCacheTracker>,
    /// Where rolls leave their flush; `None`: rolls flush inline.
    pub(crate) flusher: Option<Arc<Flusher>>,
    /// What background flushes made durable, shared with them.
    pub(crate) flush_progress: Arc<FlushProgress>,
    /// Tiered storage: the offset below which every record is in a
    /// remote segment whose copy finished (0: nothing is remote). Local
    /// retention of a `remote.storage.enable` topic deletes only below it.
    pub(crate) remote_copied_offset: i64,
}

impl Drop for Log {
    fn drop(&mut self) {
        // Flushes still queued for this log must not publish snapshots into
        // a directory that a reopened log (or nobody) now owns.
        self.flush_progress.next_generation();
    }
}

/// A random roll jitter in `[0, min(segment.jitter.ms, segment.ms))`, as Kafka
/// draws it for each new segment so that partitions created together do not
/// all roll at the same moment.
pub(crate) fn random_roll_jitter_ms(config: &LogConfig, random: &dyn Random) -> i64 {
    let bound = config.segment_jitter_ms.min(config.segment_ms);
    match u64::try_from(bound) {
        Ok(bound) if bound > 0 => i64::try_from(random.below_u64(bound)).unwrap_or(0),
        _ => 0,
    }
}

/// Bytes at the start of a batch that the CRC does not cover and that hold
/// every field a leader assigns without `LogAppendTime`: base offset
/// (0..8), batch length (8..12), partition leader epoch (12..16).
const LEADER_PREFIX_BYTES: usize = layout::MAGIC;

/// Below this average batch size a shared buffer is copied once and written
/// with one `pwrite`: a memory copy of a small batch costs far less than the
/// extra system call per batch that writing the stamped prefix separately
/// takes (a 1 KiB copy is tens of nanoseconds, a `pwrite` about a microsecond).
const COPY_BELOW_AVERAGE_BATCH_BYTES: usize = 64 * 1024;

/// A leader append's batches with their assigned fields written.
enum Stamped {
    /// The whole buffer, edited.
    InPlace(BytesMut),
    /// The caller's (shared) buffer and stamped copies of each batch's
    /// first [`LEADER_PREFIX_BYTES`].
    Prefixes(Bytes, Vec<[u8; LEADER_PREFIX_BYTES]>),
}

/// Writes the already-assigned fields of `batches` (base offset, leader
/// epoch, and with `rewrite_max_timestamp` the timestamp type and max
/// timestamp, which the CRC covers) into `owned`.
fn stamp_in_place(
    owned: &mut [u8],
    batches: &[(BatchHeader, usize)],
    rewrite_max_timestamp: Option<TimestampRewrite>,
) -> Result<(), AppendError> {
    for (header, position) in batches {
        let end = position + header.size_in_bytes();
        let bytes = owned.get_mut(*position..end).ok_or(BatchError::Truncated {
            position: *position,
        })?;
        match rewrite_max_timestamp {
            // Only fields outside the CRC change: no header view needed.
            None => stamp_prefix(bytes, header),
            Some(rewrite) => batch::assign(
                bytes,
                header.base_offset,
                header.partition_leader_epoch,
                Some((rewrite.timestamp_type(header), header.max_timestamp)),
                *position,
            )?,
        }
    }
    Ok(())
}

/// Which timestamp type a max-timestamp rewrite writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimestampRewrite {
    /// `LogAppendTime`: every batch gets the type and the append time.
    LogAppendTime,
    /// A CreateTime max timestamp corrected from the records (or a batch
    /// converted to another codec): each batch keeps its type.
    KeepType,
}

impl TimestampRewrite {
    fn timestamp_type(self, header: &BatchHeader) -> TimestampType {
        match self {
            TimestampRewrite::LogAppendTime => TimestampType::LogAppendTime,
            TimestampRewrite::KeepType => header.attributes.timestamp_type(),
        }
    }
}

/// Writes `header`'s base offset and partition leader epoch into the first
/// [`LEADER_PREFIX_BYTES`] of `bytes` (a batch [`analyze`] accepted, so at
/// least a whole header long).
fn stamp_prefix(bytes: &mut [u8], header: &BatchHeader) {
    if let Some(prefix) = bytes.get_mut(..LEADER_PREFIX_BYTES) {
        prefix[layout::BASE_OFFSET..layout::BASE_OFFSET + 8]
            .copy_from_slice(&header.base_offset.to_be_bytes());
        prefix[layout::PARTITION_LEADER_EPOCH..layout::PARTITION_LEADER_EPOCH + 4]
            .copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
    }
}

/// Whether `batches` are exactly the bytes of `records`, back to back.
fn covers(records: &[u8], batches: &[(BatchHeader, usize)]) -> bool {
    let mut expected = 0;
    for (header, position) in batches {
        if *position != expected || header.size_in_bytes() < LEADER_PREFIX_BYTES {
            return false;
        }
        expected += header.size_in_bytes();
    }
    expected == records.len()
}

/// Copies of each batch's first [`LEADER_PREFIX_BYTES`] with the assigned
/// base offset and leader epoch.
fn stamped_prefixes(
    records: &[u8],
    batches: &[(BatchHeader, usize)],
) -> Vec<[u8; LEADER_PREFIX_BYTES]> {
    batches
        .iter()
        .map(|(header, position)| {
            let mut prefix = [0u8; LEADER_PREFIX_BYTES];
            if let Some(original) = records.get(*position..position + LEADER_PREFIX_BYTES) {
                prefix.copy_from_slice(original);
            }
            stamp_prefix(&mut prefix, header);
            prefix
        })
        .collect()
}

/// The parts to write: each batch's stamped prefix, then the rest of it
/// from the caller's buffer (checked by [`covers`] first).
fn interleave<'a>(
    records: &'a [u8],
    batches: &[(BatchHeader, usize)],
    prefixes: &'a [[u8; LEADER_PREFIX_BYTES]],
) -> Vec<&'a [u8]> {
    let mut parts = Vec::with_capacity(batches.len() * 2);
    for ((header, position), prefix) in batches.iter().zip(prefixes) {
        parts.push(&prefix[..]);
        let rest = records
            .get(position + LEADER_PREFIX_BYTES..position + header.size_in_bytes())
            .unwrap_or_default();
        parts.push(rest);
    }
    parts
}

/// Writes the leader's fields into an append's bytes: in place when the
/// buffer is not shared; for a shared buffer (a slice of a request frame)
/// of large batches with no CRC to recompute, into copies of each batch's
/// leader-owned prefix only (two writes per batch instead of a copy);
/// otherwise into a copy.
fn stamp(
    records: Bytes,
    batches: &Batches,
    rewrite: Option<TimestampRewrite>,
) -> Result<Stamped, AppendError> {
    match records.try_into_mut() {
        Ok(mut owned) => {
            stamp_in_place(&mut owned, batches, rewrite)?;
            Ok(Stamped::InPlace(owned))
        }
        Err(shared)
            if rewrite.is_none()
                && shared.len() / batches.len().max(1) >= COPY_BELOW_AVERAGE_BATCH_BYTES
                && covers(&shared, batches) =>
        {
            let prefixes = stamped_prefixes(&shared, batches);
            Ok(Stamped::Prefixes(shared, prefixes))
        }
        Err(shared) => {
            let mut owned = BytesMut::from(shared.as_ref());
            stamp_in_place(&mut owned, batches, rewrite)?;
            Ok(Stamped::InPlace(owned))
        }
    }
}

/// Checks every batch of an append (header, size, CRC) and puts each
/// header with its position in `batches` (filled in place: no large return
/// value to move). The records inside a client's batches are checked
/// afterwards by [`validation::check_client_batches`]; a follower's come
/// from a leader that checked them (and compacted batches may have gaps).
pub(crate) fn analyze(
    records: &[u8],
    config: &LogConfig,
    batches: &mut Batches,
) -> Result<(), AppendError> {
    if records.len() > config.segment_bytes as usize {
        return Err(AppendError::AppendTooLarge {
            size: records.len(),
            max: config.segment_bytes,
        });
    }
    batches.clear();
    let mut position = 0usize;
    while position < records.len() {
        let rest = &records[position..];
        let header = batch::parse_header(rest, position)?;
        let size = header.size_in_bytes();
        if size > config.max_message_bytes as usize {
            return Err(AppendError::RecordTooLarge {
                size,
                max: config.max_message_bytes,
            });
        }
        let bytes = rest.get(..size).ok_or(BatchError::Truncated { position })?;
        batch::check_crc(bytes, &header, position)?;
        batches.push((header, position));
        position += size;
    }
    if batches.is_empty() {
        return Err(AppendError::Empty);
    }
    Ok(())
}

impl Log {
    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The partition this log belongs to.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    /// The topic configuration in force.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Hands this log's page-cache hints (write-behind, drop-behind) to
    /// `worker` from the next append on; see [`crate::page_cache`].
    /// [`PageCacheSettings::KERNEL`] turns them off.
    pub fn set_page_cache(&mut self, worker: Arc<WriteBehind>, settings: PageCacheSettings) {
        self.page_cache = settings
            .is_enabled()
            .then(|| PageCacheTracker::new(worker, settings));
    }

    /// Leaves the flush of each roll to `flusher` from the next roll on
    /// (see [`crate::flusher`]); without one a roll flushes inline.
    pub fn set_flusher(&mut self, flusher: Arc<Flusher>) {
        self.flusher = Some(flusher);
    }

    /// Replaces the configuration (takes effect for later appends and rolls).
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
        self.roll_jitter_ms = random_roll_jitter_ms(&self.config, &*self.random);
        self.next_delete_horizon_ms = None;
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// Offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offset up to which everything has been fsynced (including what
    /// background flushes of rolled segments have finished).
    pub fn recovery_point(&self) -> i64 {
        self.flush_progress
            .durable_to()
            .map_or(self.recovery_point, |durable| {
                self.recovery_point.max(durable.min(self.log_end_offset))
            })
    }

    /// Moves what background flushes made durable into `recovery_point`.
    pub(crate) fn fold_flush_progress(&mut self) {
        self.recovery_point = self.recovery_point();
    }

    /// Starts a new flush generation after the log end moved back: queued
    /// background flushes then claim nothing.
    pub(crate) fn invalidate_queued_flushes(&mut self) {
        if let Some(durable) = self.flush_progress.next_generation() {
            self.recovery_point = self.recovery_point.max(durable.min(self.log_end_offset));
        }
    }

    /// `Err` when a background flush of this log failed: nothing written
    /// since can be shown durable, so the log takes no more appends.
    pub fn check_online(&self) -> Result<(), LogError> {
        match self.flush_progress.failure() {
            None => Ok(()),
            Some((path, kind)) => Err(LogError::Offline {
                topic_partition: self.topic_partition.clone(),
                path,
                kind,
            }),
        }
    }

    /// The high watermark (set by replication; reads for consumers stop here).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Sets the high watermark, clamped to `[log start, log end]`.
    pub fn update_high_watermark(&mut self, high_watermark: i64) -> i64 {
        self.high_watermark = high_watermark.clamp(self.log_start_offset, self.log_end_offset);
        self.producer_state.on_high_watermark(self.high_watermark);
        self.high_watermark
    }

    /// The leader epoch cache.
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// Records that `leader_epoch` starts at the log end offset: a replica
    /// becoming leader (Kafka's `maybeAssignEpochStartOffset`), so that
    /// OffsetForLeaderEpoch and the diverging-epoch answers of Fetch know
    /// where the previous epoch ended before anything is written in the
    /// new one. An epoch not above the latest one changes nothing. An
    /// empty log records it too, as Kafka does: a follower whose log holds
    /// older epochs than any here then learns that its whole log diverges
    /// (the leader lost its records, or never had them) instead of being
    /// told nothing.
    pub fn assign_leader_epoch(&mut self, leader_epoch: i32) -> Result<(), LogError> {
        if self
            .epoch_cache
            .latest_epoch()
            .is_none_or(|latest| leader_epoch > latest)
        {
            self.epoch_cache.assign(leader_epoch, self.log_end_offset)?;
        }
        Ok(())
    }

    /// Idempotent and transactional producer state.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// Segments, oldest first.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size_bytes).sum()
    }

    pub(crate) fn settings(&self) -> SegmentSettings {
        SegmentSettings {
            index_bytes: self.config.segment_index_bytes,
            index_interval_bytes: self.config.index_interval_bytes,
            backend: Arc::clone(&self.backend),
        }
    }

    pub(crate) fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }

    /// Appends batches from a client: assigns offsets from the log end
    /// offset, stamps `leader_epoch`, applies `LogAppendTime` if configured,
    /// and checks idempotent producer sequences.
    ///
    /// When `flush.messages` says so, the log is flushed before this returns
    /// (holding `&mut self` across the fsync); see
    /// [`Log::append_as_leader_deferring_flush`] for flushing without it.
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let info = self.append_as_leader_deferring_flush(
            records,
            leader_epoch,
            now_ms,
            TxnVerification::Unchecked,
        )?;
        self.flush_if_due(now_ms)?;
        Ok(info)
    }

    /// Like [`Log::append_as_leader`] but never flushes: the caller checks
    /// [`Log::flush_due`] and, if so, syncs a [`FlushTicket`] without
    /// holding the log (see `flush.rs`). `verification` says what a
    /// transactional batch that opens a transaction must carry (see
    /// [`crate::verification`]).
    ///
    /// [`FlushTicket`]: crate::flush::FlushTicket
    pub fn append_as_leader_deferring_flush(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
        verification: TxnVerification,
    ) -> Result<AppendInfo, AppendError> {
        self.check_online()?;
        let mut batches = Batches::new();
        analyze(&records, &self.config, &mut batches)?;
        let checked =
            validation::check_client_batches(&records, &mut batches, &self.config, now_ms)?;
        self.check_verification(&batches, verification)?;
        if let Some(duplicate) = self.check_producers(&batches)? {
            return Ok(duplicate);
        }
        let (records, rewrite) = match checked {
            Checked::Unchanged {
                max_timestamp_changed,
            } => (
                records,
                max_timestamp_changed.then_some(TimestampRewrite::KeepType),
            ),
            Checked::Converted(converted) => (converted.freeze(), Some(TimestampRewrite::KeepType)),
        };
        self.write_as_leader(records, batches, rewrite, None, leader_epoch, now_ms)
    }

    /// Appends one control batch built by the leader (a transaction
    /// marker, `marker` being what its record says) as a leader append:
    /// offset, leader epoch and, for `LogAppendTime`, the append time are
    /// assigned. Never flushes.
    pub(crate) fn append_control_as_leader(
        &mut self,
        records: Bytes,
        marker: ControlMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        self.check_online()?;
        let mut batches = Batches::new();
        analyze(&records, &self.config, &mut batches)?;
        self.write_as_leader(records, batches, None, Some(marker), leader_epoch, now_ms)
    }

    /// The leader's write of checked batches: offsets, leader epoch, the
    /// timestamp rewrite, the epoch cache, then the segment.
    fn write_as_leader(
        &mut self,
        records: Bytes,
        mut batches: Batches,
        rewrite: Option<TimestampRewrite>,
        marker: Option<ControlMarker>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let log_append_time_ms = (self.config.message_timestamp_type
            == MessageTimestampType::LogAppendTime)
            .then_some(now_ms);
        self.assign_offsets(&mut batches, leader_epoch, log_append_time_ms);
        let rewrite = match log_append_time_ms {
            Some(_) => Some(TimestampRewrite::LogAppendTime),
            None => rewrite,
        };
        let markers: Markers = marker
            .zip(batches.first())
            .map(|(marker, (header, _))| (header.base_offset, marker))
            .into_iter()
            .collect();
        let stamped = stamp(records, &batches, rewrite)?;
        self.epoch_cache.assign(leader_epoch, self.log_end_offset)?;
        let mut info = match &stamped {
            Stamped::InPlace(owned) => self.write_batches(&[owned], &batches, &markers, now_ms)?,
            Stamped::Prefixes(shared, prefixes) => {
                let parts = interleave(shared, &batches, prefixes);
                self.write_batches(&parts, &batches, &markers, now_ms)?
            }
        };
        info.log_append_time_ms = log_append_time_ms;
        Ok(info)
    }

    /// Gives `batches` consecutive offsets from the log end offset, the
    /// leader epoch and (for `LogAppendTime`) the append time.
    fn assign_offsets(
        &self,
        batches: &mut Batches,
        leader_epoch: i32,
        log_append_time_ms: Option<i64>,
    ) {
        let mut next_offset = self.log_end_offset;
        for (header, _) in batches.iter_mut() {
            header.base_offset = next_offset;
            header.partition_leader_epoch = leader_epoch;
            if let Some(time) = log_append_time_ms {
                header.max_timestamp = time;
            }
            next_offset = header.next_offset();
        }
    }

    /// Appends batches replicated from the leader, keeping their offsets.
    /// The first batch must start at or after the log end offset and
    /// offsets must increase. Transaction markers are read from their
    /// control batches (one that holds none is refused before anything is
    /// written) and update the producers as on the leader.
    pub fn append_as_follower(
        &mut self,
        records: Bytes,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        self.check_online()?;
        let mut batches = Batches::new();
        analyze(&records, &self.config, &mut batches)?;
        let mut expected = self.log_end_offset;
        for (header, _) in &batches {
            if header.base_offset < expected {
                return Err(AppendError::OffsetsNotIncreasing {
                    base_offset: header.base_offset,
                    log_end: expected,
                });
            }
            expected = header.next_offset();
        }
        let markers = crate::marker::control_markers(&records, &batches)?;
        for (header, _) in &batches {
            if self
                .epoch_cache
                .latest_epoch()
                .is_none_or(|latest| header.partition_leader_epoch > latest)
            {
                self.epoch_cache
                    .assign(header.partition_leader_epoch, header.base_offset)?;
            }
        }
        let info = self.write_batches(&[&records], &batches, &markers, now_ms)?;
        self.flush_if_due(now_ms)?;
        Ok(info)
    }

    /// Starts verifying that `producer_id`'s transaction includes this
    /// partition, before a batch at `sequence` and `epoch` that may open
    /// it (KIP-890 part 1): `None` when the producer has a transaction
    /// ongoing here (nothing to verify), else the guard the append must
    /// carry once the coordinator confirmed.
    pub fn start_transaction_verification(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        let ongoing = self
            .producer_state
            .entry(producer_id)
            .is_some_and(|entry| entry.current_txn_first_offset.is_some());
        (!ongoing).then(|| {
            self.verifications
                .start(producer_id, sequence, epoch, now_ms)
        })
    }

    /// Refuses a transactional data batch that would open a transaction
    /// without the producer's current verification guard, and a batch
    /// whose sequence overtakes an outstanding verification's lowest one.
    fn check_verification(
        &self,
        batches: &[(BatchHeader, usize)],
        verification: TxnVerification,
    ) -> Result<(), AppendError> {
        let TxnVerification::Guard(carried) = verification else {
            return Ok(());
        };
        for (header, _) in batches {
            if !header.is_transactional() || header.is_control() {
                continue;
            }
            let producer_id = header.producer_id;
            if let Some(lowest) = self.verifications.lowest_sequence(producer_id) {
                if header.base_sequence > lowest {
                    return Err(AppendError::OutOfOrderSequence {
                        producer_id,
                        expected_sequence: lowest,
                        found_sequence: header.base_sequence,
                    });
                }
            }
            let ongoing = self
                .producer_state
                .entry(producer_id)
                .is_some_and(|entry| entry.current_txn_first_offset.is_some());
            let current = self.verifications.guard(producer_id);
            if !ongoing && (carried.is_none() || carried != current) {
                return Err(AppendError::UnverifiedTransaction { producer_id });
            }
        }
        Ok(())
    }

    /// Returns the original append for a retried idempotent batch, checks
    /// the sequence of every other one.
    fn check_producers(
        &self,
        batches: &[(BatchHeader, usize)],
    ) -> Result<Option<AppendInfo>, AppendError> {
        let mut pending: BTreeMap<i64, (i16, i32)> = BTreeMap::new();
        for (header, _) in batches {
            if !header.has_producer_id() || header.base_sequence < 0 {
                continue;
            }
            let earlier = pending.get(&header.producer_id).copied();
            match self.producer_state.check(header, earlier)? {
                SequenceCheck::Duplicate(original) if batches.len() == 1 => {
                    return Ok(Some(AppendInfo {
                        first_offset: original.first_offset,
                        last_offset: original.last_offset,
                        max_timestamp: original.timestamp,
                        offset_of_max_timestamp: original.last_offset,
                        log_append_time_ms: None,
                        log_start_offset: self.log_start_offset,
                        record_count: 0,
                        valid_bytes: 0,
                        duplicate: true,
                    }));
                }
                SequenceCheck::Duplicate(_) | SequenceCheck::Append => {}
            }
            pending.insert(
                header.producer_id,
                (header.producer_epoch, header.last_sequence()),
            );
        }
        Ok(None)
    }

    /// Writes batches whose offsets are final, rolling first if needed,
    /// then updates the producers (`markers`: what the control batches say).
    fn write_batches(
        &mut self,
        parts: &[&[u8]],
        batches: &[(BatchHeader, usize)],
        markers: &[(i64, ControlMarker)],
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        let (Some((first, _)), Some((last, _))) = (batches.first(), batches.last()) else {
            return Err(AppendError::Empty);
        };
        let append_bytes: usize = parts.iter().map(|part| part.len()).sum();
        if self.should_roll(append_bytes as u64, last.last_offset(), now_ms) {
            self.roll_at(first.base_offset, now_ms)?;
        }
        let active = self.active_mut();
        let start = active.size_bytes();
        active.append_parts(parts, batches)?;
        if let (Some(tracker), Some(active)) =
            (&mut self.page_cache, self.segments.values().next_back())
        {
            tracker.appended(active.file(), start, active.size_bytes());
        }
        let mut info = AppendInfo {
            first_offset: first.base_offset,
            last_offset: last.last_offset(),
            max_timestamp: -1,
            offset_of_max_timestamp: first.base_offset,
            log_append_time_ms: None,
            log_start_offset: self.log_start_offset,
            record_count: 0,
            valid_bytes: append_bytes as u64,
            duplicate: false,
        };
        for (header, _) in batches {
            if header.max_timestamp > info.max_timestamp {
                info.max_timestamp = header.max_timestamp;
                info.offset_of_max_timestamp = header.last_offset();
            }
            info.record_count += header.record_count.max(0) as u64;
        }
        self.log_end_offset = last.next_offset();
        self.unflushed_messages += info.record_count;
        self.update_producers(batches, markers)?;
        Ok(info)
    }

    /// Records batches now in the active segment in the producer state,
    /// and indexes the transactions their abort markers ended.
    fn update_producers(
        &mut self,
        batches: &[(BatchHeader, usize)],
        markers: &[(i64, ControlMarker)],
    ) -> Result<(), IoError> {
        let mut aborted: smallvec::SmallVec<[AbortedTxnEntry; 1]> = smallvec::SmallVec::new();
        for (header, _) in batches {
            let marker = markers
                .iter()
                .find(|(offset, _)| *offset == header.base_offset)
                .map(|(_, marker)| *marker);
            if header.is_transactional() {
                // The transaction is open (or ended): its verification is done.
                self.verifications.clear(header.producer_id);
            }
            let completed = self.producer_state.update(header, marker);
            if let Some(completed) = completed.filter(|txn| txn.kind == MarkerKind::Abort) {
                aborted.push(AbortedTxnEntry {
                    producer_id: completed.producer_id,
                    first_offset: completed.first_offset,
                    last_offset: completed.last_offset,
                    last_stable_offset: self.producer_state.last_stable_offset_after(&completed),
                });
            }
        }
        for entry in aborted {
            self.active_mut().append_aborted_txn(entry)?;
        }
        Ok(())
    }

    /// Kafka's roll conditions for an append of `append_bytes` ending at
    /// `last_offset`.
    fn should_roll(&self, append_bytes: u64, last_offset: i64, now_ms: i64) -> bool {
        let active = self.active();
        if active.is_empty() {
            return false;
        }
        active.size_bytes() + append_bytes > u64::from(self.config.segment_bytes)
            || now_ms - active.created_ms() >= self.max_segment_ms() - self.roll_jitter_ms
            || active.indexes_full()
            || last_offset - active.base_offset() > i64::from(u32::MAX)
    }

    /// The age at which the active segment rolls before jitter: `segment.ms`,
    /// or `max.compaction.lag.ms` when that is smaller on a compacted topic
    /// (KIP-354: records must become cleanable within the maximum lag, and
    /// the active segment is never cleaned).
    pub(crate) fn max_segment_ms(&self) -> i64 {
        if self.config.cleanup_policy.compact {
            self.config
                .segment_ms
                .min(self.config.max_compaction_lag_ms)
        } else {
            self.config.segment_ms
        }
    }

    /// Starts a new active segment at the log end offset (no-op when the
    /// active segment is empty).
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.roll_at(self.log_end_offset, now_ms)
    }

    /// Seals the active segment and creates a segment at `base_offset`.
    /// The sealed segment's flush, the producer-state snapshot and the
    /// directory sync go to the log's [`Flusher`], which advances the
    /// recovery point when they are done; without a flusher they are done
    /// here, before returning.
    fn roll_at(&mut self, base_offset: i64, now_ms: i64) -> Result<(), LogError> {
        if self.active().is_empty() {
            return Ok(());
        }
        self.fold_flush_progress();
        let settings = self.settings();
        self.active_mut().seal()?;
        let Some(flusher) = self.flusher.clone() else {
            self.active().flush()?;
            self.producer_state.write_snapshot(&self.dir, base_offset)?;
            self.create_active_segment(base_offset, settings, now_ms)?;
            crate::checkpoint::sync_directory(&self.dir)?;
            self.recovery_point = self
                .recovery_point
                .max(base_offset.min(self.log_end_offset));
            return Ok(());
        };
        let job = self.roll_flush(base_offset);
        self.create_active_segment(base_offset, settings, now_ms)?;
        flusher.submit(job);
        Ok(())
    }

    fn create_active_segment(
        &mut self,
        base_offset: i64,
        settings: SegmentSettings,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let segment = Segment::create(&self.dir, base_offset, settings, now_ms)?;
        self.segments.insert(base_offset, segment);
        self.roll_jitter_ms = random_roll_jitter_ms(&self.config, &*self.random);
        Ok(())
    }

    /// The background flush of a roll to `base_offset`: every segment from
    /// the one holding the recovery point up to the new one (a failed or
    /// unfinished earlier roll flush is covered again).
    fn roll_flush(&self, base_offset: i64) -> RollFlush {
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(self.log_start_offset, |(base, _)| *base);
        let sealed = || {
            self.segments
                .range(from..base_offset)
                .map(|(_, segment)| segment)
        };
        RollFlush {
            progress: Arc::clone(&self.flush_progress),
            generation: self.flush_progress.generation(),
            backend: Arc::clone(&self.backend),
            dir: self.dir.clone(),
            logs: sealed()
                .map(|segment| (segment.log_path().to_path_buf(), Arc::clone(segment.file())))
                .collect(),
            indexes: sealed()
                .flat_map(|segment| {
                    [
                        segment.offset_index().path().to_path_buf(),
                        segment.time_index().path().to_path_buf(),
                        segment.txn_index().path().to_path_buf(),
                    ]
                })
                .collect(),
            snapshot: Some((
                crate::producer_state::snapshot_path(&self.dir, base_offset),
                self.producer_state.snapshot_bytes(),
            )),
            flushed_to: base_offset.min(self.log_end_offset),
        }
    }

    /// Fsyncs everything up to the log end offset and advances the recovery point.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.fold_flush_progress();
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(self.log_start_offset, |(base, _)| *base);
        for segment in self.segments.range(from..).map(|(_, segment)| segment) {
            segment.flush()?;
        }
        self.recovery_point = self.log_end_offset;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Background work: flush by `flush.ms` and delete files whose
    /// `file.delete.delay.ms` has passed.
    pub fn tick(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.flush_ms_due(now_ms) {
            self.flush(now_ms)?;
        }
        self.delete_pending_files(now_ms)
    }

    /// Whether `flush.ms` has passed since the last flush with appended
    /// records waiting.
    pub fn flush_ms_due(&self, now_ms: i64) -> bool {
        self.config.flush_ms.is_some_and(|flush_ms| {
            self.unflushed_messages > 0 && now_ms - self.last_flush_ms >= flush_ms
        })
    }

    /// Removes every record at or after `offset` (follower truncation).
    /// Returns whether anything was removed.
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<bool, LogError> {
        if offset >= self.log_end_offset {
            // No record goes, but an epoch entry at the log end does: a
            // replica that became leader (recording its epoch at the log
            // end) and lost leadership before writing anything must not
            // keep announcing that epoch, which the new leader never had
            // (Kafka truncates the epoch cache here for the same reason).
            self.epoch_cache.truncate_from_end(self.log_end_offset)?;
            return Ok(false);
        }
        if offset < self.log_start_offset {
            self.truncate_fully_and_start_at(offset, now_ms)?;
            return Ok(true);
        }
        let doomed: Vec<i64> = self
            .segments
            .range(offset + 1..)
            .map(|(base, _)| *base)
            .filter(|base| *base > self.log_start_offset)
            .collect();
        self.remove_segments(&doomed, now_ms)?;
        let active = self.active_mut();
        active.truncate_to(offset)?;
        active.make_active()?;
        self.after_truncation(now_ms)?;
        Ok(true)
    }

    /// Deletes every segment and starts an empty log at `offset`.
    pub fn truncate_fully_and_start_at(
        &mut self,
        offset: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let all: Vec<i64> = self.segments.keys().copied().collect();
        let settings = self.settings();
        let segment = Segment::create(&self.dir, offset, settings, now_ms)?;
        let mut doomed = Vec::new();
        for base in all {
            if let Some(mut old) = self.segments.remove(&base) {
                if base == offset {
                    // Files were recreated empty by Segment::create.
                    continue;
                }
                doomed.extend(old.set_suffix(DELETED_SUFFIX)?);
            }
        }
        self.schedule_delete(doomed, now_ms);
        self.segments.insert(offset, segment);
        self.log_start_offset = offset;
        self.epoch_cache.clear()?;
        self.producer_state.clear();
        self.after_truncation(now_ms)?;
        Ok(())
    }

    /// Restores derived state after the log end moved backwards.
    fn after_truncation(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.invalidate_queued_flushes();
        self.log_end_offset = self.active().next_offset();
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.high_watermark = self.high_watermark.min(self.log_end_offset);
        self.epoch_cache.truncate_from_end(self.log_end_offset)?;
        for (offset, path) in list_snapshots(&self.dir)? {
            if offset > self.log_end_offset {
                std::fs::remove_file(&path).ok();
            }
        }
        self.rebuild_producer_state(&std::collections::BTreeSet::new())?;
        self.last_flush_ms = self.last_flush_ms.min(now_ms);
        Ok(())
    }

    /// Renames the given segments to `.deleted` and schedules their removal.
    pub(crate) fn remove_segments(&mut self, bases: &[i64], now_ms: i64) -> Result<(), LogError> {
        let mut doomed = Vec::new();
        for base in bases {
            if let Some(mut segment) = self.segments.remove(base) {
                doomed.extend(segment.set_suffix(DELETED_SUFFIX)?);
            }
        }
        self.schedule_delete(doomed, now_ms);
        Ok(())
    }

    pub(crate) fn schedule_delete(&mut self, paths: Vec<PathBuf>, now_ms: i64) {
        if !paths.is_empty() {
            self.pending_deletes.push(PendingDelete {
                delete_at_ms: now_ms + self.config.file_delete_delay_ms,
                paths,
            });
        }
    }

    /// Deletes `.deleted` files whose delay has passed.
    pub fn delete_pending_files(&mut self, now_ms: i64) -> Result<(), LogError> {
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_deletes)
            .into_iter()
            .partition(|pending| pending.delete_at_ms <= now_ms);
        self.pending_deletes = waiting;
        for pending in due {
            for path in pending.paths {
                crate::error::remove_file_if_exists(&path)?;
            }
        }
        Ok(())
    }

    /// Files still waiting for asynchronous deletion.
    pub fn pending_delete_count(&self) -> usize {
        self.pending_deletes
            .iter()
            .map(|pending| pending.paths.len())
            .sum()
    }

    /// Flushes and trims indexes for a clean shutdown.
    pub fn close(mut self, now_ms: i64) -> Result<(), LogError> {
        // Sealed segments were trimmed and fsynced when they were rolled;
        // only the active one (and anything after the recovery point) needs
        // trimming and flushing here.
        self.fold_flush_progress();
        let recovery_segment = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(self.log_start_offset, |(base, _)| *base);
        for segment in self
            .segments
            .range_mut(recovery_segment..)
            .map(|(_, segment)| segment)
        {
            segment.seal()?;
        }
        // A log with nothing past its recovery point has nothing to make
        // durable: its segments were flushed, and the directory synced with
        // them, before the recovery point reached the log end (what the
        // trims above change is checked at the next open, whose index
        // sanity checks rebuild an index left long). Skipping the fsyncs
        // is what keeps stopping many idle partitions quick.
        let unflushed = self.recovery_point < self.log_end_offset || self.unflushed_messages > 0;
        if unflushed {
            self.flush(now_ms)?;
        }
        // A snapshot bounds the header scan at the next open; an empty log
        // has nothing to scan, and an existing snapshot at the log end is current.
        let latest_snapshot = list_snapshots(&self.dir)?.keys().next_back().copied();
        if self.log_end_offset > self.log_start_offset
            && latest_snapshot != Some(self.log_end_offset)
        {
            self.producer_state
                .write_snapshot(&self.dir, self.log_end_offset)?;
        }
        // Background flushes of recent rolls may not have synced the
        // directory yet (the new segments' names), nor has anything synced
        // the renames of segments retention deleted.
        if unflushed || !self.pending_deletes.is_empty() {
            crate::checkpoint::sync_directory(&self.dir)?;
        }
        self.delete_pending_files(i64::MAX)
    }
}
