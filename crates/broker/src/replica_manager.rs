//! The partitions this broker hosts: each one's log, replication state and
//! offset watches, and the append and read paths that keep them consistent.
//!
//! Kafka's ReplicaManager: it learns which partitions exist and who leads
//! them from the metadata image ([`ReplicaManager::apply_image`]), and it is
//! the one place where a log append is followed by the replication
//! bookkeeping (LEO, HW) that decides what consumers may see.
//!
//! A poisoned lock of a partition (its log or its replication state: a
//! thread panicked while changing them) takes that partition offline, as a
//! failed log directory does in Kafka: it is logged once at error level,
//! and every later request for it gets [`PartitionOffline`]
//! (`KAFKA_STORAGE_ERROR` at the edge) instead of being served from state
//! that may be half-changed. The log manager leaves such a log out of its
//! flushes and checkpoints and of the clean-shutdown marker, so the next
//! start recovers it from scratch. The other partitions keep serving.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, LockResult, Mutex, MutexGuard, OnceLock, RwLock};

use bytes::Bytes;
use strom_controller::image::{ConfigResource, MetadataImage};
use strom_replication::{
    AckStatus, FetcherManager, FollowTarget, IsrChange, LeaderState, OffsetWatch, ReplicationError,
};
use strom_storage::clock::Clock;
use strom_storage::error::{AppendError, LogError, ReadError};
use strom_storage::flush::FlushTicket;
use strom_storage::log::Log;
use strom_storage::manager::LogHandle;
use strom_storage::read::LogSlice;
use strom_storage::{AppendInfo, LogConfig, LogManager, TopicPartition};
use tracing::{debug, info, warn};

use crate::metrics::topics::{TopicMetrics, TopicMetricsTable};
use crate::replica_fetch::{FollowerPartitionLog, TcpFetchTransport};
use uuid::Uuid;

/// A partition hosted here: its log and its replication state.
pub struct PartitionReplica {
    /// Topic and partition.
    pub topic_partition: TopicPartition,
    /// The topic's id.
    pub topic_id: Uuid,
    log: LogHandle,
    leader: Mutex<LeaderState>,
    /// The high watermark; delayed produce and fetch wait on it.
    pub high_watermark: OffsetWatch,
    /// The log end offset; followers' long polls wait on it.
    pub log_end: OffsetWatch,

    /// The topic's counters (resolved once, counted without locks).
    pub metrics: Arc<TopicMetrics>,
    /// Set when a lock of the partition was found poisoned (never cleared).
    offline: AtomicBool,
    /// Set when this broker stopped leading the partition: a request that
    /// found it before is refused instead of appending as leader.
    deposed: AtomicBool,
    /// Set while an ISR change is on its way to the controller.
    isr_change_pending: AtomicBool,
}

/// A partition taken offline because a thread panicked while holding one
/// of its locks: its log or replication state may be half-changed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("partition {topic_partition} is offline: a thread panicked while changing its state")]
pub struct PartitionOffline {
    /// The partition.
    pub topic_partition: TopicPartition,
}

/// Why a request on a partition was refused before its log was asked.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Replication refused it (a stale or unknown leader epoch).
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    /// The partition is offline.
    #[error(transparent)]
    Offline(#[from] PartitionOffline),
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    /// The log refused it.
    #[error(transparent)]
    Log(#[from] ReadError),
    /// The partition is offline.
    #[error(transparent)]
    Offline(#[from] PartitionOffline),
}

/// Why an append failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendFailure {
    /// Replication refused it (ISR too small).
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    /// The log refused it.
    #[error(transparent)]
    Log(#[from] AppendError),
    /// The records were written but the flush `flush.messages` demands failed.
    #[error(transparent)]
    Flush(#[from] FlushFailure),
    /// The partition is offline.
    #[error(transparent)]
    Offline(#[from] PartitionOffline),
}

/// A successful append.
#[derive(Debug)]
pub struct Appended {
    /// What the log says about the append.
    pub info: AppendInfo,
    /// A flush that `flush.messages` made due; the records are not
    /// acknowledged, nor visible, until it is synced and completed.
    pub pending_flush: Option<FlushTicket>,
}

/// Why a deferred flush failed.
#[derive(Debug, thiserror::Error)]
pub enum FlushFailure {
    /// The fsync failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The blocking task was cancelled (runtime shutting down).
    #[error("the flush task was interrupted")]
    Interrupted,
}

/// A read for a consumer or a follower: the records as `R`, bytes in
/// memory or a [`LogSlice`] of a segment file.
#[derive(Debug, Clone)]
pub struct PartitionRead<R = Bytes> {
    /// Whole batches from the requested offset (may start before it).
    pub records: Option<R>,
    /// The high watermark at the time of the read.
    pub high_watermark: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
}

/// A follower's fetch of one partition, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The follower.
    pub replica: i32,
    /// Its log end offset.
    pub fetch_offset: i64,
    /// The epoch of its last batch (Fetch v12+), if it sent one.
    pub last_fetched_epoch: Option<i32>,
}

/// The leader's answer to a follower's fetch.
#[derive(Debug)]
pub enum FollowerRead {
    /// Records up to the log end.
    Records {
        /// The read.
        read: PartitionRead<LogSlice>,
        /// An ISR expansion to propose to the controller.
        isr_expansion: Option<IsrChange>,
    },
    /// The follower's log diverges: where its last epoch ends here.
    Diverging {
        /// The largest epoch here at or below the follower's last one.
        epoch: i32,
        /// Where it ends here.
        end_offset: i64,
        /// The high watermark.
        high_watermark: i64,
    },
    /// The fetch was refused (not a replica).
    Refused(ReplicationError),
}

impl PartitionReplica {
    fn new(
        topic_partition: TopicPartition,
        topic_id: Uuid,
        log: LogHandle,
        leader: LeaderState,
        high_watermark: i64,
        metrics: Arc<TopicMetrics>,
    ) -> PartitionReplica {
        PartitionReplica {
            topic_partition,
            topic_id,
            log,
            log_end: OffsetWatch::new(leader.log_end_offset()),
            leader: Mutex::new(leader),
            high_watermark: OffsetWatch::new(high_watermark),
            metrics,
            offline: AtomicBool::new(false),
            deposed: AtomicBool::new(false),
            isr_change_pending: AtomicBool::new(false),
        }
    }

    /// `Err` once the partition is offline (see the module docs).
    pub fn check_online(&self) -> Result<(), PartitionOffline> {
        if self.offline.load(Ordering::Acquire) {
            return Err(self.offline_error());
        }
        Ok(())
    }

    fn offline_error(&self) -> PartitionOffline {
        PartitionOffline {
            topic_partition: self.topic_partition.clone(),
        }
    }

    /// The guard of a lock of this partition, or the partition offline if
    /// the lock is poisoned (the first time: logged at error level).
    fn guard<G>(&self, locked: LockResult<G>, what: &'static str) -> Result<G, PartitionOffline> {
        self.check_online()?;
        match locked {
            Ok(guard) => Ok(guard),
            Err(_poisoned) => {
                if !self.offline.swap(true, Ordering::AcqRel) {
                    tracing::error!(topic_partition = %self.topic_partition, lock = what,
                        "a thread panicked holding a lock of this partition; the partition is offline");
                }
                Err(self.offline_error())
            }
        }
    }

    fn log(&self) -> Result<std::sync::RwLockReadGuard<'_, Log>, PartitionOffline> {
        self.guard(self.log.read(), "log")
    }

    fn log_mut(&self) -> Result<std::sync::RwLockWriteGuard<'_, Log>, PartitionOffline> {
        self.guard(self.log.write(), "log")
    }

    fn leader(&self) -> Result<MutexGuard<'_, LeaderState>, PartitionOffline> {
        self.guard(self.leader.lock(), "replication state")
    }

    /// The leader epoch.
    pub fn leader_epoch(&self) -> Result<i32, PartitionOffline> {
        Ok(self.leader()?.leader_epoch())
    }

    /// The number of in-sync replicas (0 if the partition is offline).
    pub fn isr_size(&self) -> usize {
        self.leader().map_or(0, |leader| leader.isr().len())
    }

    /// Checks a request's current leader epoch.
    pub fn validate_leader_epoch(&self, requested: Option<i32>) -> Result<(), PartitionError> {
        Ok(self.leader()?.validate_leader_epoch(requested)?)
    }

    /// Appends a producer's batches as leader and advances LEO and HW.
    ///
    /// The caller holds no lock; this takes the log's write lock for the
    /// append and the replication state's lock after it. It never fsyncs:
    /// when `flush.messages` makes a flush due, the result carries a
    /// [`FlushTicket`] and the HW stays where it is until the caller has
    /// synced it off the async workers and called
    /// [`PartitionReplica::complete_flush`] (so consumers and `acks=all`
    /// only see flushed records, as they would with an inline flush).
    pub fn append(
        &self,
        records: Bytes,
        acks_all: bool,
        now_ms: i64,
    ) -> Result<Appended, AppendFailure> {
        let leader_epoch = {
            let leader = self.leader()?;
            leader.check_append(acks_all)?;
            leader.leader_epoch()
        };
        let mut log = self.log_mut()?;
        if self.deposed.load(Ordering::Acquire) {
            return Err(AppendFailure::Replication(ReplicationError::NotLeader));
        }
        let info = log.append_as_leader_deferring_flush(records, leader_epoch, now_ms)?;
        self.log_end.advance(log.log_end_offset());
        if log.flush_due() {
            let ticket = log.prepare_flush();
            return Ok(Appended {
                info,
                pending_flush: Some(ticket),
            });
        }
        let log_end_offset = log.log_end_offset();
        let advanced = self.leader()?.on_local_append(log_end_offset);
        if let Some(high_watermark) = advanced {
            log.update_high_watermark(high_watermark);
            drop(log);
            self.high_watermark.advance(high_watermark);
        }
        Ok(Appended {
            info,
            pending_flush: None,
        })
    }

    /// Records a synced [`FlushTicket`]: moves the recovery point and lets
    /// the HW follow the flushed records. On an offline partition nothing
    /// moves (the records stay invisible to consumers).
    pub fn complete_flush(&self, ticket: &FlushTicket, now_ms: i64) {
        let Ok(mut log) = self.log_mut() else {
            return;
        };
        log.complete_flush(ticket, now_ms);
        let advanced = {
            let Ok(mut leader) = self.leader() else {
                return;
            };
            let flushed_to = ticket.flushed_to().max(leader.log_end_offset());
            leader.on_local_append(flushed_to.min(log.log_end_offset()))
        };
        if let Some(high_watermark) = advanced {
            log.update_high_watermark(high_watermark);
            drop(log);
            self.high_watermark.advance(high_watermark);
        }
    }

    /// [`PartitionReplica::append`], then the flush it made due, on the
    /// calling thread (for callers already off the async workers).
    pub fn append_flushing_here(
        &self,
        records: Bytes,
        acks_all: bool,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendFailure> {
        let appended = self.append(records, acks_all, now_ms)?;
        if let Some(ticket) = appended.pending_flush {
            ticket.sync().map_err(FlushFailure::from)?;
            self.complete_flush(&ticket, now_ms);
        }
        Ok(appended.info)
    }

    /// Syncs a [`FlushTicket`] on the blocking thread pool, then completes
    /// it. Errors are returned (the records stay unacknowledged).
    pub async fn flush_off_worker(
        self: &Arc<Self>,
        ticket: FlushTicket,
        now_ms: i64,
    ) -> Result<(), FlushFailure> {
        let ticket = tokio::task::spawn_blocking(move || ticket.sync().map(|()| ticket))
            .await
            .map_err(|_| FlushFailure::Interrupted)??;
        self.complete_flush(&ticket, now_ms);
        Ok(())
    }

    /// Whether an `acks=all` write ending before `required_offset` is done.
    /// An offline partition never says it is (the write times out).
    pub fn ack_status(&self, required_offset: i64) -> AckStatus {
        self.leader().map_or(AckStatus::Waiting, |leader| {
            leader.ack_status(required_offset)
        })
    }

    /// Serves a follower's fetch (KIP-320 first): if the follower's last
    /// fetched epoch ends before `fetch_offset` here, or this log never had
    /// it, the answer is where that epoch ends here and nothing is read.
    /// Otherwise the fetch offset is the follower's LEO: the leader records
    /// it (which may advance the HW and wakes `acks=all` writes), and the
    /// read goes up to the log end, not the HW. An ISR expansion to propose
    /// comes back with the read.
    pub fn read_for_follower(
        &self,
        request: &FollowerFetch,
        max_bytes: u64,
        min_one_batch: bool,
        now_ms: i64,
    ) -> Result<FollowerRead, ReadFailure> {
        if let Some(diverging) = self.diverging_epoch(request)? {
            return Ok(diverging);
        }
        let outcome =
            self.leader()?
                .on_follower_fetch(request.replica, request.fetch_offset, now_ms);
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => return Ok(FollowerRead::Refused(error)),
        };
        if let Some(high_watermark) = outcome.high_watermark_advanced_to {
            self.log_mut()?.update_high_watermark(high_watermark);
            self.high_watermark.advance(high_watermark);
        }
        let log = self.log()?;
        let log_end_offset = log.log_end_offset();
        let info = log.read(
            request.fetch_offset,
            max_bytes,
            log_end_offset,
            min_one_batch,
        )?;
        drop(log);
        Ok(FollowerRead::Records {
            read: PartitionRead {
                records: info.records.filter(|slice| !slice.is_empty()),
                high_watermark: info.high_watermark,
                log_start_offset: info.log_start_offset,
                log_end_offset: info.log_end_offset,
            },
            isr_expansion: outcome.isr_expansion,
        })
    }

    fn diverging_epoch(
        &self,
        request: &FollowerFetch,
    ) -> Result<Option<FollowerRead>, ReadFailure> {
        let Some(last_fetched_epoch) = request.last_fetched_epoch.filter(|epoch| *epoch >= 0)
        else {
            return Ok(None);
        };
        let log = self.log()?;
        let (epoch, end_offset) = log
            .epoch_cache()
            .end_offset_for(last_fetched_epoch, log.log_end_offset());
        if epoch < last_fetched_epoch || end_offset < request.fetch_offset {
            return Ok(Some(FollowerRead::Diverging {
                epoch,
                end_offset,
                high_watermark: log.high_watermark(),
            }));
        }
        Ok(None)
    }

    /// The ISR without the followers that lagged longer than
    /// `replica_lag_time_max_ms`, if any must go.
    pub fn isr_shrink(&self, now_ms: i64, replica_lag_time_max_ms: i64) -> Option<IsrChange> {
        self.leader()
            .ok()?
            .isr_shrink(now_ms, replica_lag_time_max_ms)
    }

    /// Whether this broker stopped leading the partition since this
    /// handle was found.
    pub fn is_deposed(&self) -> bool {
        self.deposed.load(Ordering::Acquire)
    }

    /// Marks an ISR change as sent; `false` if one is already on its way.
    pub fn begin_isr_change(&self) -> bool {
        !self.isr_change_pending.swap(true, Ordering::AcqRel)
    }

    /// Marks the ISR change on its way as answered.
    pub fn end_isr_change(&self) {
        self.isr_change_pending.store(false, Ordering::Release);
    }

    /// Reads for a consumer: never at or above the high watermark.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<PartitionRead, ReadFailure> {
        let read = self.read_slice(fetch_offset, max_bytes, min_one_batch)?;
        Ok(PartitionRead {
            records: read
                .records
                .as_ref()
                .map(LogSlice::to_bytes)
                .transpose()
                .map_err(ReadFailure::Log)?,
            high_watermark: read.high_watermark,
            log_start_offset: read.log_start_offset,
            log_end_offset: read.log_end_offset,
        })
    }

    /// Like [`read`](Self::read), but the records stay in their segment
    /// file (to be sent with `sendfile` or read later); never empty.
    pub fn read_slice(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<PartitionRead<LogSlice>, ReadFailure> {
        let log = self.log()?;
        let high_watermark = log.high_watermark();
        let info = log.read(fetch_offset, max_bytes, high_watermark, min_one_batch)?;
        drop(log);
        Ok(PartitionRead {
            records: info.records.filter(|slice| !slice.is_empty()),
            high_watermark: info.high_watermark,
            log_start_offset: info.log_start_offset,
            log_end_offset: info.log_end_offset,
        })
    }

    /// Runs `f` with shared access to the log (offset lookups and the like).
    pub fn with_log<T>(&self, f: impl FnOnce(&Log) -> T) -> Result<T, PartitionOffline> {
        Ok(f(&*self.log()?))
    }

    /// Runs `f` with exclusive access to the log (DeleteRecords and the like).
    pub fn with_log_mut<T>(&self, f: impl FnOnce(&mut Log) -> T) -> Result<T, PartitionOffline> {
        Ok(f(&mut *self.log_mut()?))
    }
}

/// The partitions hosted by this broker.
pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    clock: Arc<dyn Clock>,
    partitions: RwLock<HashMap<TopicPartition, Arc<PartitionReplica>>>,
    topic_defaults: std::collections::BTreeMap<String, String>,
    /// Serialises [`ReplicaManager::apply_image`] calls and holds the offset
    /// of the last image applied, so that an older image arriving late (the
    /// metadata follower and a handler race) is never applied over a newer
    /// one: that would drop, and delete the logs of, partitions created since.
    applied: Mutex<Option<u64>>,
    /// Per-topic counters, handed to each partition as it is hosted.
    topic_metrics: TopicMetricsTable,
    /// This broker's epoch (quoted in AlterPartition).
    broker_epoch: AtomicI64,
    /// The follower fetchers, once fetching is started (a cluster node).
    fetchers: OnceLock<Arc<ReplicaFetchers>>,
    /// ISR shrinks and expansions of partitions led here that the
    /// controller committed (Kafka's IsrShrinksPerSec / IsrExpandsPerSec).
    isr_shrinks: std::sync::atomic::AtomicU64,
    isr_expands: std::sync::atomic::AtomicU64,
}

/// The follower fetchers of a broker.
pub type ReplicaFetchers = FetcherManager<FollowerPartitionLog, TcpFetchTransport>;

impl ReplicaManager {
    /// A manager over opened logs; `topic_defaults` are the broker's
    /// topic-level defaults under topic-level names.
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        clock: Arc<dyn Clock>,
        topic_defaults: std::collections::BTreeMap<String, String>,
    ) -> ReplicaManager {
        ReplicaManager {
            node_id,
            logs,
            clock,
            partitions: RwLock::new(HashMap::new()),
            topic_defaults,
            applied: Mutex::new(None),
            topic_metrics: TopicMetricsTable::default(),
            broker_epoch: AtomicI64::new(-1),
            fetchers: OnceLock::new(),
            isr_shrinks: std::sync::atomic::AtomicU64::new(0),
            isr_expands: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// This broker's id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Records this broker's epoch (after registration).
    pub fn set_broker_epoch(&self, broker_epoch: i64) {
        self.broker_epoch.store(broker_epoch, Ordering::Release);
    }

    /// This broker's epoch.
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    /// Counts an ISR change the controller committed for a partition led
    /// here: a shrink, or else an expansion.
    pub fn count_isr_change(&self, shrink: bool) {
        let counter = if shrink {
            &self.isr_shrinks
        } else {
            &self.isr_expands
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (shrinks, expansions) of ISRs of partitions led here.
    pub fn isr_changes(&self) -> (u64, u64) {
        (
            self.isr_shrinks.load(Ordering::Relaxed),
            self.isr_expands.load(Ordering::Relaxed),
        )
    }

    /// Starts following the partitions the next images assign here but
    /// that another broker leads. Without it (a single node), only led
    /// partitions are hosted.
    pub fn start_fetching(&self, fetchers: Arc<ReplicaFetchers>) {
        let _ = self.fetchers.set(fetchers);
    }

    /// The follower fetchers, if started.
    pub fn fetchers(&self) -> Option<&Arc<ReplicaFetchers>> {
        self.fetchers.get()
    }

    /// The log manager.
    pub fn logs(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// The per-topic counters.
    pub fn topic_metrics(&self) -> &TopicMetricsTable {
        &self.topic_metrics
    }

    /// Every hosted partition.
    pub fn hosted(&self) -> Vec<Arc<PartitionReplica>> {
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The broker's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The current time in milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The hosted partition, if this broker leads it.
    pub fn get(&self, topic_partition: &TopicPartition) -> Option<Arc<PartitionReplica>> {
        // The map is changed by single inserts and removes: a panic while it
        // was locked cannot leave it half-changed, so it is reused.
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(topic_partition)
            .cloned()
    }

    /// The typed log config of a topic (see [`topic_log_config`]).
    pub fn log_config(&self, image: &MetadataImage, topic: &str) -> LogConfig {
        topic_log_config(&self.topic_defaults, image, topic)
    }

    /// A topic's `min.insync.replicas` (its config, else the broker's).
    pub fn min_insync_replicas(&self, image: &MetadataImage, topic: &str) -> usize {
        image
            .config(
                &ConfigResource::Topic(topic.to_owned()),
                "min.insync.replicas",
            )
            .or_else(|| {
                self.topic_defaults
                    .get("min.insync.replicas")
                    .map(String::as_str)
            })
            .and_then(|value| value.parse::<usize>().ok())
            .unwrap_or(1)
    }

    /// Brings the hosted partitions in line with `image`: creates logs and
    /// leader state for partitions this broker leads, applies topic configs,
    /// stops leading the others, and deletes the logs of partitions no
    /// longer assigned to this broker (a topic that is gone). A partition
    /// that merely lost its leader here (this broker fenced, or leadership
    /// moved) keeps its log, to lead again with its records. Idempotent; handlers call
    /// it right after a controller write so the next request sees the result.
    /// An image older than the last one applied is ignored.
    pub fn apply_image(&self, image: &MetadataImage) {
        // One offset, assigned whole: safe to reuse after a panic.
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if image.last_offset() < *applied {
            return;
        }
        *applied = image.last_offset();
        let now_ms = self.now_ms();
        let mut plan = ImagePlan::default();
        for topic in image.topics() {
            let config = self.log_config(image, &topic.name);
            self.logs.set_topic_config(&topic.name, config.clone());
            for (index, partition) in topic.partitions.iter().enumerate() {
                let topic_partition = TopicPartition::new(topic.name.clone(), index as i32);
                if partition.replicas.contains(&self.node_id) {
                    plan.assigned.insert(topic_partition.clone(), topic.id);
                }
                match partition.leader {
                    Some(leader) if leader == self.node_id => {
                        plan.wanted.insert(topic_partition.clone(), topic.id);
                        if !self.keep_leading(image, &topic_partition, topic.id, partition, now_ms)
                        {
                            plan.to_lead
                                .push((topic_partition, topic.id, partition.clone()));
                        }
                    }
                    Some(leader) if partition.replicas.contains(&self.node_id) => {
                        plan.to_follow
                            .push((topic_partition, leader, partition.leader_epoch));
                    }
                    _ => {}
                }
            }
        }
        // Stop leading first, then move the fetchers (which stops fetching
        // what is led here from now on), then lead.
        self.remove_unwanted(&plan.wanted, &plan.assigned, now_ms);
        self.follow(&plan.to_follow, now_ms);
        // Replicas removed from this broker (a topic deleted, or a
        // reassignment moved them away) are deleted once no fetcher
        // writes to them.
        self.delete_unassigned_logs(
            &plan.wanted,
            &plan.assigned,
            image.topic_count() > 0,
            now_ms,
        );
        let mut became_leader = 0usize;
        for (topic_partition, topic_id, partition) in &plan.to_lead {
            match self.become_leader(image, topic_partition, *topic_id, partition, now_ms) {
                Ok(()) => became_leader += 1,
                Err(error) => warn!(%topic_partition, %error, "cannot host partition"),
            }
        }
        if became_leader > 0 {
            info!(
                partitions = became_leader,
                metadata_offset = ?image.last_offset(),
                "leading new partitions"
            );
        }
    }

    /// Keeps leading a partition led here at the image's leader epoch:
    /// applies `min.insync.replicas` and a committed ISR change. `false`
    /// when it must (again) become leader.
    fn keep_leading(
        &self,
        image: &MetadataImage,
        topic_partition: &TopicPartition,
        topic_id: Uuid,
        partition: &strom_controller::image::PartitionImage,
        now_ms: i64,
    ) -> bool {
        let Some(replica) = self.get(topic_partition) else {
            return false;
        };
        if replica.topic_id != topic_id {
            return false;
        }
        let advanced = match replica.leader() {
            Ok(mut leader) if leader.leader_epoch() == partition.leader_epoch => {
                leader.set_min_insync_replicas(
                    self.min_insync_replicas(image, &topic_partition.topic),
                );
                if leader.partition_epoch() == partition.partition_epoch {
                    return true;
                }
                if leader.replicas() != partition.replicas.as_slice() {
                    leader.set_replicas(partition.replicas.clone(), now_ms);
                }
                leader.apply_isr(
                    partition.isr.iter().copied().collect(),
                    partition.partition_epoch,
                )
            }
            // Offline stays offline until the broker restarts.
            Err(_) => return true,
            Ok(_) => return false,
        };
        if let Some(high_watermark) = advanced {
            if let Ok(mut log) = replica.log_mut() {
                log.update_high_watermark(high_watermark);
            }
            replica.high_watermark.advance(high_watermark);
        }
        true
    }

    /// Follows exactly `targets` (partition, leader, leader epoch), if the
    /// fetchers are started.
    fn follow(&self, targets: &[(TopicPartition, i32, i32)], now_ms: i64) {
        let Some(fetchers) = self.fetchers.get() else {
            return;
        };
        let mut wanted = BTreeMap::new();
        for (topic_partition, leader, leader_epoch) in targets {
            match self.logs.get_or_create(topic_partition, now_ms) {
                Ok(log) => {
                    let log = Arc::new(FollowerPartitionLog::new(log, Arc::clone(&self.clock)));
                    let target = FollowTarget {
                        leader: *leader,
                        leader_epoch: *leader_epoch,
                        log,
                    };
                    wanted.insert(topic_partition.clone(), target);
                }
                Err(error) => warn!(%topic_partition, %error, "cannot host follower partition"),
            }
        }
        fetchers.follow(wanted);
    }

    fn become_leader(
        &self,
        image: &MetadataImage,
        topic_partition: &TopicPartition,
        topic_id: Uuid,
        partition: &strom_controller::image::PartitionImage,
        now_ms: i64,
    ) -> Result<(), strom_storage::error::ManagerError> {
        let log = self.logs.get_or_create(topic_partition, now_ms)?;
        // A poisoned log is hosted offline (see the module docs).
        let offsets = log
            .read()
            .map(|log| (log.log_end_offset(), log.high_watermark()));
        let poisoned = offsets.is_err();
        let (log_end_offset, high_watermark) = offsets.unwrap_or((0, 0));
        let leader = LeaderState::new(
            self.node_id,
            partition.leader_epoch,
            partition.partition_epoch,
            partition.replicas.clone(),
            partition.isr.iter().copied().collect(),
            log_end_offset,
            high_watermark,
            self.min_insync_replicas(image, &topic_partition.topic),
            now_ms,
        );
        let high_watermark = leader.high_watermark();
        if let Ok(mut log) = log.write() {
            log.update_high_watermark(high_watermark);
            if let Err(error) = log.assign_leader_epoch(partition.leader_epoch) {
                warn!(%topic_partition, %error, "cannot record the new leader epoch");
            }
        }
        let replica = Arc::new(PartitionReplica::new(
            topic_partition.clone(),
            topic_id,
            log,
            leader,
            high_watermark,
            self.topic_metrics.resolve(&topic_partition.topic),
        ));
        if poisoned {
            replica.offline.store(true, Ordering::Release);
            tracing::error!(%topic_partition, "the partition's log lock is poisoned; hosting it offline");
        }
        debug!(%topic_partition, leader_epoch = partition.leader_epoch, high_watermark, "leading partition");
        // Single insert (see `get`).
        self.partitions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(topic_partition.clone(), replica);
        Ok(())
    }

    /// Stops leading what is not `wanted`; deletes the logs of what is not
    /// `assigned` either.
    fn remove_unwanted(
        &self,
        wanted: &HashMap<TopicPartition, Uuid>,
        assigned: &HashMap<TopicPartition, Uuid>,
        now_ms: i64,
    ) {
        let removed: Vec<(TopicPartition, Arc<PartitionReplica>)> = {
            // Single removes (see `get`).
            let mut partitions = self
                .partitions
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let doomed: Vec<TopicPartition> = partitions
                .iter()
                .filter(|(topic_partition, replica)| {
                    wanted.get(*topic_partition) != Some(&replica.topic_id)
                })
                .map(|(topic_partition, _)| topic_partition.clone())
                .collect();
            doomed
                .into_iter()
                .filter_map(|topic_partition| {
                    partitions
                        .remove(&topic_partition)
                        .map(|replica| (topic_partition, replica))
                })
                .collect()
        };
        for (topic_partition, replica) in removed {
            // Refuse appends that found it before, and wake anyone waiting
            // on the partition; they will find it gone.
            replica.deposed.store(true, Ordering::Release);
            replica.high_watermark.reset(i64::MAX);
            replica.log_end.reset(i64::MAX);
            if assigned.get(&topic_partition) == Some(&replica.topic_id) {
                info!(%topic_partition, "no longer leading partition; its log is kept");
                continue;
            }
            match self.logs.delete(&topic_partition, now_ms) {
                Ok(_) => info!(%topic_partition, "deleted partition"),
                Err(error) => warn!(%topic_partition, %error, "cannot delete partition"),
            }
            if !wanted
                .keys()
                .any(|kept| kept.topic == topic_partition.topic)
            {
                self.topic_metrics.remove(&topic_partition.topic);
            }
        }
    }

    /// Deletes logs on disk for partitions neither led nor assigned here:
    /// deleted topics (also while this broker was down) and replicas a
    /// reassignment removed. An image with no topics at all is more likely
    /// a lost metadata directory than a deliberate deletion of everything,
    /// so data is kept then.
    fn delete_unassigned_logs(
        &self,
        wanted: &HashMap<TopicPartition, Uuid>,
        assigned: &HashMap<TopicPartition, Uuid>,
        any_topics: bool,
        now_ms: i64,
    ) {
        if !any_topics {
            return;
        }
        for topic_partition in self.logs.partitions() {
            if !wanted.contains_key(&topic_partition) && !assigned.contains_key(&topic_partition) {
                match self.logs.delete(&topic_partition, now_ms) {
                    Ok(true) => info!(%topic_partition, "deleted a partition not assigned here"),
                    Ok(false) => {}
                    Err(error) => warn!(%topic_partition, %error, "cannot delete stale partition"),
                }
            }
        }
    }
}

/// What an image asks of this broker.
#[derive(Default)]
struct ImagePlan {
    /// Partitions led here.
    wanted: HashMap<TopicPartition, Uuid>,
    /// Partitions with a replica here.
    assigned: HashMap<TopicPartition, Uuid>,
    /// Partitions to (again) become leader of.
    to_lead: Vec<(
        TopicPartition,
        Uuid,
        strom_controller::image::PartitionImage,
    )>,
    /// Partitions to follow: leader and leader epoch.
    to_follow: Vec<(TopicPartition, i32, i32)>,
}

/// The typed log config of a topic: Kafka's defaults, then the broker's
/// `log.*` settings (`topic_defaults`, under topic-level names), then the
/// topic's own configs from the metadata image.
pub fn topic_log_config(
    topic_defaults: &std::collections::BTreeMap<String, String>,
    image: &MetadataImage,
    topic: &str,
) -> LogConfig {
    let mut properties = topic_defaults.clone();
    for (key, value) in image.configs(&ConfigResource::Topic(topic.to_owned())) {
        properties.insert(key.clone(), value.clone());
    }
    match LogConfig::from_properties(&properties) {
        Ok(parsed) => parsed.config,
        Err(error) => {
            // The controller validated these values; a mismatch between its
            // table and the storage parser must not stop serving.
            warn!(topic, %error, "invalid topic config; using the broker defaults");
            LogConfig::from_properties(topic_defaults)
                .map(|parsed| parsed.config)
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use strom_controller::records::{
        uuid_to_bytes, BrokerEndpoint, MetadataRecord, PartitionRecord, Record,
        RegisterBrokerRecord, TopicRecord,
    };
    use strom_storage::clock::SystemClock;
    use strom_storage::LogManagerConfig;

    use super::*;

    fn records_for_topic(name: &str, id: Uuid) -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::new(Record::Topic(TopicRecord {
                name: name.into(),
                topic_id: uuid_to_bytes(id),
            })),
            MetadataRecord::new(Record::Partition(PartitionRecord {
                topic_id: uuid_to_bytes(id),
                partition_index: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                ..PartitionRecord::default()
            })),
        ]
    }

    fn apply_all(
        image: &MetadataImage,
        first_offset: u64,
        records: &[MetadataRecord],
    ) -> MetadataImage {
        let mut image = image.clone();
        for (index, record) in records.iter().enumerate() {
            image = image
                .apply(first_offset + index as u64, record)
                .expect("valid record");
        }
        image
    }

    #[test]
    fn an_older_image_applied_late_does_not_drop_newer_partitions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager =
            ReplicaManager::new(1, Arc::clone(&logs), Arc::new(SystemClock), BTreeMap::new());
        let register = MetadataRecord::new(Record::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: uuid_to_bytes(Uuid::from_u128(7)),
            broker_epoch: 1,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
            fenced: false,
        }));
        let older = apply_all(&MetadataImage::empty(), 0, &[register]);
        let mut with_topic = records_for_topic("fresh", Uuid::from_u128(1));
        let newer = apply_all(&older, 1, &with_topic);
        manager.apply_image(&newer);
        let topic_partition = TopicPartition::new("fresh".to_owned(), 0);
        assert!(
            manager.get(&topic_partition).is_some(),
            "the new partition is hosted"
        );
        // The metadata follower catches up late with the image from before
        // the topic existed: it must not undo the newer one.
        manager.apply_image(&older);
        assert!(
            manager.get(&topic_partition).is_some(),
            "a stale image is ignored"
        );
        assert!(logs.get(&topic_partition).is_some(), "the log is kept");
        // A genuinely newer image without the topic (a deletion) still applies.
        with_topic.clear();
        let removal = MetadataRecord::new(Record::RemoveTopic(
            strom_controller::records::RemoveTopicRecord {
                topic_id: uuid_to_bytes(Uuid::from_u128(1)),
            },
        ));
        let deleted = apply_all(&newer, 3, &[removal]);
        manager.apply_image(&deleted);
        assert!(
            manager.get(&topic_partition).is_none(),
            "a deletion applies"
        );
    }

    /// A manager on a fresh directory leading `topics` (one partition each).
    fn manager_leading(dir: &std::path::Path, topics: &[&str]) -> ReplicaManager {
        let config = LogManagerConfig::new(vec![dir.to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager = ReplicaManager::new(1, logs, Arc::new(SystemClock), BTreeMap::new());
        let mut image = MetadataImage::empty();
        let mut offset = 0;
        for (index, topic) in topics.iter().enumerate() {
            let records = records_for_topic(topic, Uuid::from_u128(index as u128 + 1));
            image = apply_all(&image, offset, &records);
            offset += records.len() as u64;
        }
        manager.apply_image(&image);
        manager
    }

    fn batch() -> Bytes {
        strom_storage::testing::simple_batch(&strom_storage::testing::BatchSpec::default())
    }

    fn assert_offline(replica: &PartitionReplica) {
        assert!(matches!(
            replica.append(batch(), false, 0),
            Err(AppendFailure::Offline(_))
        ));
        assert!(matches!(
            replica.read(0, 1 << 20, true),
            Err(ReadFailure::Offline(_))
        ));
        assert!(matches!(
            replica.validate_leader_epoch(None),
            Err(PartitionError::Offline(_))
        ));
        assert!(replica.with_log(|log| log.log_end_offset()).is_err());
        assert!(replica.with_log_mut(|log| log.log_end_offset()).is_err());
        assert!(replica.leader_epoch().is_err());
        assert_eq!(replica.ack_status(0), AckStatus::Waiting);
    }

    #[test]
    fn a_panic_holding_a_partitions_log_lock_takes_that_partition_offline() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager = manager_leading(dir.path(), &["broken", "healthy"]);
        let broken = manager
            .get(&TopicPartition::new("broken".to_owned(), 0))
            .expect("hosted");
        broken.append(batch(), false, 0).expect("append before");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            broken.with_log_mut(|_| panic!("injected panic while changing the log"))
        }));
        assert!(panicked.is_err());
        assert_offline(&broken);
        assert!(broken.check_online().is_err());
        // The other partition keeps serving.
        let healthy = manager
            .get(&TopicPartition::new("healthy".to_owned(), 0))
            .expect("hosted");
        healthy.append(batch(), false, 0).expect("append");
        let read = healthy.read(0, 1 << 20, true).expect("read");
        assert!(read.records.is_some());
        // A later image with the same leader epoch keeps it offline.
        manager.apply_image(&two_topic_image());
        assert_offline(&broken);
    }

    #[test]
    fn a_panic_holding_a_partitions_replication_state_takes_it_offline() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager = manager_leading(dir.path(), &["broken"]);
        let broken = manager
            .get(&TopicPartition::new("broken".to_owned(), 0))
            .expect("hosted");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _leader = broken.leader.lock();
            panic!("injected panic while changing the replication state");
        }));
        assert!(panicked.is_err());
        assert_offline(&broken);
        // The log itself was not poisoned, but it is not served either.
        assert!(!broken.log.is_poisoned());
    }

    #[test]
    fn follower_fetches_move_the_hw_and_a_divergent_follower_gets_the_epoch_end() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager = ReplicaManager::new(1, logs, Arc::new(SystemClock), BTreeMap::new());
        let id = Uuid::from_u128(5);
        let mut records = records_for_topic("shared", id);
        if let Some(Record::Partition(partition)) = &mut records[1].record {
            partition.replicas = vec![1, 2];
            partition.isr = vec![1, 2];
        }
        manager.apply_image(&apply_all(&MetadataImage::empty(), 0, &records));
        let replica = manager
            .get(&TopicPartition::new("shared".to_owned(), 0))
            .expect("leading");
        replica.append(batch(), true, 0).expect("append");
        let log_end_offset = replica
            .with_log(|log| log.log_end_offset())
            .expect("online");
        assert!(log_end_offset > 0);
        assert_eq!(
            replica.high_watermark.current(),
            0,
            "replica 2 has not fetched"
        );
        assert_eq!(replica.log_end.current(), log_end_offset);
        let fetch = |replica_id, fetch_offset, last_fetched_epoch| FollowerFetch {
            replica: replica_id,
            fetch_offset,
            last_fetched_epoch,
        };
        // A follower reads past the HW, up to the log end.
        match replica.read_for_follower(&fetch(2, 0, None), 1 << 20, true, 1) {
            Ok(FollowerRead::Records { read, .. }) => {
                assert!(
                    read.records.is_some(),
                    "uncommitted records go to followers"
                );
                assert_eq!(read.high_watermark, 0);
            }
            other => panic!("not records: {other:?}"),
        }
        // Its next fetch says it has them: the HW moves and acks=all is done.
        assert!(matches!(
            replica.read_for_follower(&fetch(2, log_end_offset, Some(0)), 1 << 20, true, 2),
            Ok(FollowerRead::Records { .. })
        ));
        assert_eq!(replica.high_watermark.current(), log_end_offset);
        assert_eq!(replica.ack_status(log_end_offset), AckStatus::Committed);
        // This broker leads epoch 2 from here; a follower that wrote in
        // epoch 1 (never seen here) learns where epoch 0 ended.
        replica
            .with_log_mut(|log| log.assign_leader_epoch(2))
            .expect("online")
            .expect("assigned");
        match replica.read_for_follower(&fetch(2, log_end_offset + 3, Some(1)), 1 << 20, true, 3) {
            Ok(FollowerRead::Diverging {
                epoch, end_offset, ..
            }) => assert_eq!((epoch, end_offset), (0, log_end_offset)),
            other => panic!("not a divergence: {other:?}"),
        }
        // A broker that is not a replica is refused.
        assert!(matches!(
            replica.read_for_follower(&fetch(9, 0, None), 1 << 20, true, 4),
            Ok(FollowerRead::Refused(ReplicationError::UnknownReplica {
                replica: 9
            }))
        ));
    }

    /// The image `manager_leading(_, &["broken", "healthy"])` applied.
    fn two_topic_image() -> MetadataImage {
        let mut image = MetadataImage::empty();
        let mut offset = 0;
        for (index, topic) in ["broken", "healthy"].iter().enumerate() {
            let records = records_for_topic(topic, Uuid::from_u128(index as u128 + 1));
            image = apply_all(&image, offset, &records);
            offset += records.len() as u64;
        }
        image
    }

    #[test]
    fn losing_leadership_keeps_the_log_and_leading_again_serves_its_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager = manager_leading(dir.path(), &["kept"]);
        let topic_partition = TopicPartition::new("kept".to_owned(), 0);
        let replica = manager.get(&topic_partition).expect("hosted");
        replica.append(batch(), false, 0).expect("append");
        let leader_change = |leader| {
            MetadataRecord::new(Record::PartitionChange(
                strom_controller::records::PartitionChangeRecord {
                    topic_id: uuid_to_bytes(Uuid::from_u128(1)),
                    partition_index: 0,
                    isr: None,
                    leader: Some(leader),
                    ..Default::default()
                },
            ))
        };
        let leading = apply_all(
            &MetadataImage::empty(),
            0,
            &records_for_topic("kept", Uuid::from_u128(1)),
        );
        // This broker fenced (its heartbeats were late): no leader.
        let leaderless = apply_all(
            &leading,
            2,
            &[leader_change(strom_controller::records::NO_LEADER)],
        );
        manager.apply_image(&leaderless);
        assert!(manager.get(&topic_partition).is_none(), "not leading");
        // A request that found the partition before is refused.
        assert!(replica.is_deposed());
        assert!(matches!(
            replica.append(batch(), false, 0),
            Err(AppendFailure::Replication(ReplicationError::NotLeader))
        ));
        assert!(
            manager.logs().get(&topic_partition).is_some(),
            "the log of a partition still assigned here is kept"
        );
        let leading_again = apply_all(&leaderless, 3, &[leader_change(1)]);
        manager.apply_image(&leading_again);
        let replica = manager.get(&topic_partition).expect("leading again");
        assert_eq!(
            replica
                .with_log(|log| log.log_end_offset())
                .expect("online"),
            1,
            "the record appended before is still there"
        );
    }
}
