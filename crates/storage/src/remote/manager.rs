//! [`RemoteLogManager`]: copies closed segments of tiered partitions to the
//! remote store, applies total retention to remote segments, recovers
//! interrupted copies and deletions, and serves reads below the local log.
//!
//! Crash safety rests on the order of writes:
//! 1. the metadata record `COPY_SEGMENT_STARTED` (fresh uuid per attempt),
//! 2. the segment's objects,
//! 3. the record `COPY_SEGMENT_FINISHED`; only now is the segment served
//!    and does the [`Log`] learn that its local copy may go
//!    ([`Log::set_remote_copied_offset`]).
//!
//! Deletion mirrors it: `DELETE_SEGMENT_STARTED`, the objects, then the
//! record itself. When a partition is first used here (after a restart or
//! a leader change) its records are listed: a started copy or deletion is
//! finished by deleting its objects, so an orphan never outlives recovery.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::StreamExt;
use uuid::Uuid;

use super::read::SegmentReader;
use super::{
    ChunkCache, LogSegmentData, RemoteLogMetadataManager, RemoteRead, RemoteSegmentMetadata,
    RemoteSegmentState, RemoteStorageManager,
};
use crate::error::{IoError, RemoteReadError, RemoteStorageError};
use crate::log::Log;
use crate::manager::LogHandle;
use crate::read::TimestampAndOffset;
use crate::topic_partition::TopicPartition;
use crate::txn_index::{AbortedTransaction, AbortedTxnEntry, TXN_INDEX_ENTRY_BYTES};

/// How the manager copies and caches (Kafka's `remote.log.manager.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogManagerConfig {
    /// `remote.log.manager.copy.max.bytes.per.second`: `None` for no limit.
    pub copy_max_bytes_per_second: Option<u64>,
    /// `remote.log.manager.copier.thread.pool.size`: partitions copied at once.
    pub copy_concurrency: usize,
    /// Where the chunk cache of remote reads lives (emptied at open).
    pub cache_dir: PathBuf,
    /// The size of a cached chunk (one remote GET).
    pub chunk_bytes: u64,
    /// `remote.log.index.file.cache.total.size.bytes`-like bound of the chunk cache.
    pub cache_max_bytes: u64,
}

impl RemoteLogManagerConfig {
    /// Kafka's defaults (no copy limit, 10 copiers) with the cache in `cache_dir`.
    pub fn new(cache_dir: PathBuf) -> RemoteLogManagerConfig {
        RemoteLogManagerConfig {
            copy_max_bytes_per_second: None,
            copy_concurrency: 10,
            cache_dir,
            chunk_bytes: 1024 * 1024,
            cache_max_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// What one copy pass over a partition did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Segments whose copy finished.
    pub segments: usize,
    /// Their `.log` bytes.
    pub bytes: u64,
}

/// The remote tier of one partition, as the metadata knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemotePartitionView {
    /// The first offset in the remote tier (`None`: nothing remote).
    pub log_start_offset: Option<i64>,
    /// The offset after the last remote record (0 when nothing is remote).
    pub copied_offset: i64,
    /// Bytes of finished remote segments.
    pub size_bytes: u64,
    /// Finished remote segments.
    pub segment_count: usize,
}

/// Counters of remote work, for metrics.
#[derive(Debug, Default)]
pub struct RemoteStats {
    /// Segment bytes whose copy finished.
    pub bytes_copied: AtomicU64,
    /// Record bytes served from the remote tier.
    pub bytes_fetched: AtomicU64,
    /// Copies that failed.
    pub copy_errors: AtomicU64,
    /// Remote reads that failed.
    pub fetch_errors: AtomicU64,
    /// Remote segments deleted (retention, recovery, topic deletion).
    pub segments_deleted: AtomicU64,
}

/// A sleep the copier paces itself with (the broker passes tokio's).
pub type Sleep = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// One partition's remote segments and the lock that serializes its
/// copies, deletions and recovery.
#[derive(Debug, Default)]
struct PartitionTier {
    work: futures::lock::Mutex<bool>,
    /// Finished segments by `(base offset, id)`.
    segments: Mutex<BTreeMap<(i64, Uuid), RemoteSegmentMetadata>>,
}

impl PartitionTier {
    fn segments(&self) -> std::sync::MutexGuard<'_, BTreeMap<(i64, Uuid), RemoteSegmentMetadata>> {
        self.segments
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn view(&self) -> RemotePartitionView {
        let segments = self.segments();
        RemotePartitionView {
            log_start_offset: segments.values().map(|segment| segment.base_offset).min(),
            copied_offset: segments
                .values()
                .map(RemoteSegmentMetadata::next_offset)
                .max()
                .unwrap_or(0),
            size_bytes: segments.values().map(|segment| segment.size_bytes).sum(),
            segment_count: segments.len(),
        }
    }
}

/// Drives tiered storage for the partitions led here.
pub struct RemoteLogManager {
    storage: Arc<dyn RemoteStorageManager>,
    metadata: Arc<dyn RemoteLogMetadataManager>,
    cache: ChunkCache,
    config: RemoteLogManagerConfig,
    sleep: Option<Sleep>,
    partitions: Mutex<HashMap<TopicPartition, Arc<PartitionTier>>>,
    stats: RemoteStats,
}

impl std::fmt::Debug for RemoteLogManager {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RemoteLogManager")
            .field("storage", &self.storage)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RemoteLogManager {
    /// A manager over the two roles, with its chunk cache opened (emptied).
    pub fn new(
        storage: Arc<dyn RemoteStorageManager>,
        metadata: Arc<dyn RemoteLogMetadataManager>,
        config: RemoteLogManagerConfig,
    ) -> Result<RemoteLogManager, IoError> {
        let cache = ChunkCache::open(
            &config.cache_dir,
            config.chunk_bytes,
            config.cache_max_bytes,
        )?;
        Ok(RemoteLogManager {
            storage,
            metadata,
            cache,
            config,
            sleep: None,
            partitions: Mutex::new(HashMap::new()),
            stats: RemoteStats::default(),
        })
    }

    /// Paces copies with `sleep` (needed for `copy_max_bytes_per_second`).
    pub fn with_sleep(mut self, sleep: Sleep) -> RemoteLogManager {
        self.sleep = Some(sleep);
        self
    }

    /// The counters of remote work.
    pub fn stats(&self) -> &RemoteStats {
        &self.stats
    }

    fn tier(&self, partition: &TopicPartition) -> Arc<PartitionTier> {
        let mut partitions = self
            .partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(partitions.entry(partition.clone()).or_default())
    }

    /// The partition's remote tier as far as it is loaded here (`None`
    /// before its first copy, retention or [`RemoteLogManager::load`]).
    pub fn view(&self, partition: &TopicPartition) -> Option<RemotePartitionView> {
        let partitions = self
            .partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        partitions.get(partition).map(|tier| tier.view())
    }

    /// Loads the partition's remote segments (once), finishing interrupted
    /// copies and deletions by deleting their objects.
    pub async fn load(
        &self,
        partition: &TopicPartition,
    ) -> Result<RemotePartitionView, RemoteStorageError> {
        let tier = self.tier(partition);
        let mut loaded = tier.work.lock().await;
        self.load_locked(partition, &tier, &mut loaded).await?;
        Ok(tier.view())
    }

    async fn load_locked(
        &self,
        partition: &TopicPartition,
        tier: &PartitionTier,
        loaded: &mut bool,
    ) -> Result<(), RemoteStorageError> {
        if *loaded {
            return Ok(());
        }
        for segment in self.metadata.list_segments(partition).await? {
            match segment.state {
                RemoteSegmentState::CopySegmentFinished => {
                    tier.segments()
                        .insert((segment.base_offset, segment.id), segment);
                }
                _ => self.delete_segment(partition, segment).await?,
            }
        }
        *loaded = true;
        Ok(())
    }

    /// Deletes a segment's objects and then its record, through
    /// `DELETE_SEGMENT_STARTED`.
    async fn delete_segment(
        &self,
        partition: &TopicPartition,
        mut segment: RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.cache.remove_segment(segment.id);
        if segment.state != RemoteSegmentState::DeleteSegmentFinished {
            if segment.state != RemoteSegmentState::DeleteSegmentStarted {
                segment.state = segment
                    .state
                    .transition(RemoteSegmentState::DeleteSegmentStarted)?;
                self.metadata
                    .put_segment_metadata(partition, &segment)
                    .await?;
            }
            self.storage
                .delete_log_segment_data(partition, &segment)
                .await?;
        }
        self.metadata
            .remove_segment_metadata(partition, &segment)
            .await?;
        self.stats.segments_deleted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Copies every closed segment of a tiered log that lies wholly below
    /// its high watermark and is not remote yet, oldest first.
    ///
    /// Compacted topics are not tiered (Kafka refuses the combination):
    /// nothing of theirs is copied, so nothing is deleted locally either.
    pub async fn copy_log_segments(
        &self,
        log: &LogHandle,
    ) -> Result<CopyReport, RemoteStorageError> {
        let (partition, compacted) = {
            let log = read_log(log);
            (
                log.topic_partition().clone(),
                log.config().cleanup_policy.compact,
            )
        };
        if compacted {
            return Ok(CopyReport::default());
        }
        let tier = self.tier(&partition);
        let mut loaded = tier.work.lock().await;
        self.load_locked(&partition, &tier, &mut loaded).await?;
        let mut report = CopyReport::default();
        loop {
            let copied = tier.view().copied_offset;
            let candidate = {
                let mut log = write_log(log);
                log.set_remote_copied_offset(copied);
                next_copy_candidate(&log, copied)
            };
            let Some((mut segment, data)) = candidate else {
                return Ok(report);
            };
            if let Err(error) = self.copy_segment(&partition, &segment, &data).await {
                self.stats.copy_errors.fetch_add(1, Ordering::Relaxed);
                return Err(error);
            }
            segment.state = RemoteSegmentState::CopySegmentFinished;
            report.segments += 1;
            report.bytes += segment.size_bytes;
            self.stats
                .bytes_copied
                .fetch_add(segment.size_bytes, Ordering::Relaxed);
            let next = segment.next_offset();
            tier.segments()
                .insert((segment.base_offset, segment.id), segment.clone());
            write_log(log).set_remote_copied_offset(next);
            self.pace(segment.size_bytes).await;
        }
    }

    /// One segment's copy: started record, objects, finished record. A
    /// failure leaves the started record for recovery (or cleans up now
    /// when it can).
    async fn copy_segment(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        data: &LogSegmentData,
    ) -> Result<(), RemoteStorageError> {
        self.metadata
            .put_segment_metadata(partition, segment)
            .await?;
        if let Err(error) = self
            .storage
            .copy_log_segment_data(partition, segment, data)
            .await
        {
            self.delete_segment(partition, segment.clone()).await.ok();
            return Err(error);
        }
        let mut finished = segment.clone();
        finished.state = segment
            .state
            .transition(RemoteSegmentState::CopySegmentFinished)?;
        self.metadata
            .put_segment_metadata(partition, &finished)
            .await
    }

    async fn pace(&self, bytes: u64) {
        let (Some(rate), Some(sleep)) = (self.config.copy_max_bytes_per_second, &self.sleep) else {
            return;
        };
        if rate > 0 {
            sleep(Duration::from_secs_f64(bytes as f64 / rate as f64)).await;
        }
    }

    /// Total retention (`retention.ms`, `retention.bytes`) over both tiers:
    /// deletes the oldest remote segments past it. Returns how many went.
    pub async fn apply_retention(
        &self,
        log: &LogHandle,
        now_ms: i64,
    ) -> Result<usize, RemoteStorageError> {
        let (partition, config, local_only_bytes) = {
            let log = read_log(log);
            let copied = log.remote_copied_offset();
            let local_only: u64 = log
                .segments()
                .filter(|segment| segment.base_offset() >= copied)
                .map(|segment| segment.size_bytes())
                .sum();
            (
                log.topic_partition().clone(),
                log.config().clone(),
                local_only,
            )
        };
        let tier = self.tier(&partition);
        let mut loaded = tier.work.lock().await;
        self.load_locked(&partition, &tier, &mut loaded).await?;
        if !config.cleanup_policy.delete {
            return Ok(0);
        }
        let segments: Vec<RemoteSegmentMetadata> = tier.segments().values().cloned().collect();
        let doomed = past_retention(
            &segments,
            config.retention_ms,
            config.retention_bytes,
            local_only_bytes,
            now_ms,
        );
        for segment in &doomed {
            tier.segments().remove(&(segment.base_offset, segment.id));
            self.delete_segment(&partition, segment.clone()).await?;
        }
        Ok(doomed.len())
    }

    /// For a partition followed here: re-reads the metadata the leader
    /// writes and tells the log how far its records are safely remote, so
    /// a follower's local retention follows the leader's copies. The
    /// partition is loaded afresh (with recovery) when it is led here.
    pub async fn follow(&self, log: &LogHandle) -> Result<i64, RemoteStorageError> {
        let partition = read_log(log).topic_partition().clone();
        let tier = self.tier(&partition);
        let mut loaded = tier.work.lock().await;
        *loaded = false;
        let finished: BTreeMap<(i64, Uuid), RemoteSegmentMetadata> = self
            .metadata
            .list_segments(&partition)
            .await?
            .into_iter()
            .filter(|segment| segment.state == RemoteSegmentState::CopySegmentFinished)
            .map(|segment| ((segment.base_offset, segment.id), segment))
            .collect();
        let copied = tier_view(&finished).copied_offset;
        *tier.segments() = finished;
        write_log(log).set_remote_copied_offset(copied);
        Ok(copied)
    }

    /// Whether a remote segment may hold a record with a timestamp of at
    /// least `timestamp` (a timestamp lookup must then ask the remote tier).
    pub fn may_hold_timestamp(&self, partition: &TopicPartition, timestamp: i64) -> bool {
        self.tier(partition)
            .segments()
            .values()
            .any(|segment| segment.max_timestamp_ms >= timestamp)
    }

    /// Deletes every remote segment of a partition (its topic was deleted).
    pub async fn delete_partition(
        &self,
        partition: &TopicPartition,
    ) -> Result<usize, RemoteStorageError> {
        let tier = self.tier(partition);
        let _work = tier.work.lock().await;
        tier.segments().clear();
        let segments = self.metadata.list_segments(partition).await?;
        let count = segments.len();
        for segment in segments {
            self.delete_segment(partition, segment).await?;
        }
        self.partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(partition);
        Ok(count)
    }

    /// Copies and applies remote retention for each tiered log, at most
    /// `copy_concurrency` partitions at once; returns the failures.
    pub async fn run_once(
        &self,
        logs: Vec<LogHandle>,
        now_ms: i64,
    ) -> Vec<(TopicPartition, RemoteStorageError)> {
        let work = logs.into_iter().map(|log| async move {
            let partition = read_log(&log).topic_partition().clone();
            let copied = self.copy_log_segments(&log).await;
            let retained = match copied {
                Ok(_) => self.apply_retention(&log, now_ms).await.map(|_| ()),
                Err(error) => Err(error),
            };
            retained.err().map(|error| (partition, error))
        });
        futures::stream::iter(work)
            .buffer_unordered(self.config.copy_concurrency.max(1))
            .filter_map(|failure| async move { failure })
            .collect()
            .await
    }

    /// The finished segment holding `offset`, or the out-of-range error.
    fn segment_for(
        &self,
        partition: &TopicPartition,
        offset: i64,
    ) -> Result<RemoteSegmentMetadata, RemoteReadError> {
        let tier = self.tier(partition);
        let segments = tier.segments();
        let found = segments
            .values()
            .filter(|segment| segment.contains(offset))
            .max_by_key(|segment| segment.base_offset);
        found.cloned().ok_or_else(|| {
            let view = tier_view(&segments);
            RemoteReadError::OffsetOutOfRange {
                requested: offset,
                remote_start: view.log_start_offset.unwrap_or(-1),
                remote_end: view.copied_offset,
            }
        })
    }

    /// Whole batches from the remote segment that holds `offset`, within
    /// `max_bytes` (at least one batch when `min_one_batch`).
    pub async fn read(
        &self,
        partition: &TopicPartition,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<Option<RemoteRead>, RemoteReadError> {
        let segment = self.segment_for(partition, offset)?;
        let reader = SegmentReader {
            storage: &*self.storage,
            cache: &self.cache,
            partition,
            segment: &segment,
        };
        match reader.read(offset, max_bytes, min_one_batch).await {
            Ok(read) => {
                let bytes = read.as_ref().map_or(0, |read| read.records.len() as u64);
                self.stats.bytes_fetched.fetch_add(bytes, Ordering::Relaxed);
                Ok(read)
            }
            Err(error) => {
                self.stats.fetch_errors.fetch_add(1, Ordering::Relaxed);
                Err(error)
            }
        }
    }

    /// The aborted transactions a read_committed fetch of remote records
    /// `[start_offset, upper_bound_offset)` must be told about, from the
    /// remote segments' transaction indexes (Kafka's rule, as
    /// [`Log::collect_aborted_transactions`] applies it locally). The
    /// second value is whether the scan reached its end (no later segment,
    /// local or remote, can add to it).
    pub async fn aborted_transactions(
        &self,
        partition: &TopicPartition,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<(Vec<AbortedTransaction>, bool), RemoteReadError> {
        let segments: Vec<RemoteSegmentMetadata> = self
            .tier(partition)
            .segments()
            .values()
            .filter(|segment| segment.end_offset >= start_offset)
            .cloned()
            .collect();
        let mut aborted = Vec::new();
        for segment in &segments {
            let index = self
                .storage
                .fetch_index(partition, segment, super::IndexType::Transaction)
                .await?;
            for raw in index.chunks_exact(TXN_INDEX_ENTRY_BYTES) {
                let Some(entry) = raw.try_into().ok().and_then(AbortedTxnEntry::from_bytes) else {
                    continue;
                };
                if entry.last_offset >= start_offset && entry.first_offset < upper_bound_offset {
                    aborted.push(AbortedTransaction {
                        producer_id: entry.producer_id,
                        first_offset: entry.first_offset,
                    });
                }
                if entry.last_stable_offset >= upper_bound_offset {
                    return Ok((aborted, true));
                }
            }
        }
        Ok((aborted, false))
    }

    /// The first remote record whose timestamp is at least `timestamp`.
    pub async fn offset_for_timestamp(
        &self,
        partition: &TopicPartition,
        timestamp: i64,
    ) -> Result<Option<TimestampAndOffset>, RemoteReadError> {
        let candidates: Vec<RemoteSegmentMetadata> = self
            .tier(partition)
            .segments()
            .values()
            .filter(|segment| segment.max_timestamp_ms >= timestamp)
            .cloned()
            .collect();
        for segment in &candidates {
            let reader = SegmentReader {
                storage: &*self.storage,
                cache: &self.cache,
                partition,
                segment,
            };
            if let Some(found) = reader.find_timestamp(timestamp).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

fn tier_view(segments: &BTreeMap<(i64, Uuid), RemoteSegmentMetadata>) -> RemotePartitionView {
    RemotePartitionView {
        log_start_offset: segments.values().map(|segment| segment.base_offset).min(),
        copied_offset: segments
            .values()
            .map(RemoteSegmentMetadata::next_offset)
            .max()
            .unwrap_or(0),
        size_bytes: segments.values().map(|segment| segment.size_bytes).sum(),
        segment_count: segments.len(),
    }
}

/// The oldest remote segments past `retention.ms` or that bring both tiers
/// under `retention.bytes`.
fn past_retention(
    segments: &[RemoteSegmentMetadata],
    retention_ms: Option<i64>,
    retention_bytes: Option<u64>,
    local_only_bytes: u64,
    now_ms: i64,
) -> Vec<RemoteSegmentMetadata> {
    let by_time = segments
        .iter()
        .take_while(|segment| {
            retention_ms.is_some_and(|retention| {
                segment.max_timestamp_ms >= 0 && now_ms - segment.max_timestamp_ms > retention
            })
        })
        .count();
    let mut doomed = by_time;
    if let Some(retention) = retention_bytes {
        let remaining: u64 = segments[by_time..]
            .iter()
            .map(|segment| segment.size_bytes)
            .sum();
        let mut excess = (remaining + local_only_bytes).saturating_sub(retention);
        for segment in &segments[by_time..] {
            if segment.size_bytes > excess {
                break;
            }
            excess -= segment.size_bytes;
            doomed += 1;
        }
    }
    segments[..doomed].to_vec()
}

fn read_log(log: &LogHandle) -> std::sync::RwLockReadGuard<'_, Log> {
    log.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write_log(log: &LogHandle) -> std::sync::RwLockWriteGuard<'_, Log> {
    log.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The oldest closed, non-empty segment wholly below the high watermark
/// that ends past `copied`, with the data to copy.
pub(crate) fn next_copy_candidate(
    log: &Log,
    copied: i64,
) -> Option<(RemoteSegmentMetadata, LogSegmentData)> {
    let closed = log.segments.len().saturating_sub(1);
    let segment = log.segments.values().take(closed).find(|segment| {
        !segment.is_empty()
            && segment.next_offset() > copied
            && segment.next_offset() <= log.high_watermark
    })?;
    let end_offset = segment.next_offset() - 1;
    let epochs: Vec<(i32, i64)> = epochs_of(log, segment.base_offset(), end_offset);
    let snapshot = crate::producer_state::snapshot_path(&log.dir, segment.next_offset());
    let txn_index = segment.txn_index().path().to_path_buf();
    let metadata = RemoteSegmentMetadata {
        id: Uuid::new_v4(),
        base_offset: segment.base_offset(),
        end_offset,
        max_timestamp_ms: segment.max_timestamp(),
        size_bytes: segment.size_bytes(),
        leader_epochs: epochs.clone(),
        state: RemoteSegmentState::CopySegmentStarted,
    };
    let data = LogSegmentData {
        log: segment.log_path().to_path_buf(),
        offset_index: segment.offset_index().path().to_path_buf(),
        time_index: segment.time_index().path().to_path_buf(),
        transaction_index: txn_index.exists().then_some(txn_index),
        producer_snapshot: snapshot.exists().then_some(snapshot),
        leader_epoch_index: epoch_checkpoint(&epochs),
    };
    Some((metadata, data))
}

/// The leader epochs covering `base..=end`: the one in force at `base`
/// (starting there) and those starting inside.
fn epochs_of(log: &Log, base: i64, end: i64) -> Vec<(i32, i64)> {
    let entries = log.epoch_cache().entries();
    let mut epochs: Vec<(i32, i64)> = Vec::new();
    for entry in entries {
        if entry.start_offset > end {
            break;
        }
        if entry.start_offset <= base {
            epochs.clear();
            epochs.push((entry.epoch, base));
        } else {
            epochs.push((entry.epoch, entry.start_offset));
        }
    }
    epochs
}

/// Leader epochs in the `leader-epoch-checkpoint` text format.
fn epoch_checkpoint(epochs: &[(i32, i64)]) -> Bytes {
    let mut text = format!("0\n{}\n", epochs.len());
    for (epoch, start) in epochs {
        text.push_str(&format!("{epoch} {start}\n"));
    }
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(base: i64, end: i64, size: u64, max_timestamp_ms: i64) -> RemoteSegmentMetadata {
        RemoteSegmentMetadata {
            id: Uuid::new_v4(),
            base_offset: base,
            end_offset: end,
            max_timestamp_ms,
            size_bytes: size,
            leader_epochs: vec![(0, base)],
            state: RemoteSegmentState::CopySegmentFinished,
        }
    }

    #[test]
    fn retention_by_time_and_size_takes_the_oldest() {
        let segments = [
            segment(0, 9, 100, 1_000),
            segment(10, 19, 100, 2_000),
            segment(20, 29, 100, 3_000),
        ];
        assert!(past_retention(&segments, None, None, 0, 10_000).is_empty());
        let by_time = past_retention(&segments, Some(7_500), None, 0, 10_000);
        assert_eq!(by_time.len(), 2);
        // 300 remote + 50 local against 200: 150 too many, so only the
        // first (100) goes; the second would take the total below 200.
        let by_size = past_retention(&segments, None, Some(200), 50, 10_000);
        assert_eq!(
            by_size.iter().map(|s| s.base_offset).collect::<Vec<_>>(),
            vec![0]
        );
        let by_size = past_retention(&segments, None, Some(100), 0, 10_000);
        assert_eq!(by_size.len(), 2);
        // Timestamps unknown (-1) never expire by time.
        let unknown = [segment(0, 9, 100, -1)];
        assert!(past_retention(&unknown, Some(0), None, 0, 10_000).is_empty());
    }
}
