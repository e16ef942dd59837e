//! One partition replica, owned whole: its log, its role (leader, follower
//! or neither), the leader's ISR and follower progress, the high watermark
//! and the offset watches that delayed produce and fetch wait on.
//!
//! The broker hosts a [`Partition`] per replica assigned to it and only
//! moves it between roles as the metadata says; every append, read and
//! high-watermark change goes through it, so the high watermark is
//! published from one place (`Partition::publish_high_watermark`: the
//! log's copy, persisted by the HW checkpoint, and the watch move
//! together). The follower's fetch loop writes through the same object (it
//! is a [`FollowerLog`]), so a replica that changes role keeps one log, one
//! HW and one set of waiters.
//!
//! A poisoned lock (a thread panicked while changing the log or the role)
//! takes the partition offline: it is logged once at error level, and every
//! later request gets [`PartitionOffline`] (KAFKA_STORAGE_ERROR at the
//! broker's edge) instead of state that may be half-changed.
//!
//! Lock order: the log's lock before the role's, never the other way.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LockResult, Mutex, MutexGuard, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use strom_clock::Clock;
use strom_storage::error::{AppendError, LogError, ReadError};
use strom_storage::flush::FlushTicket;
use strom_storage::log::Log;
use strom_storage::manager::LogHandle;
use strom_storage::marker::TransactionMarker;
use strom_storage::read::LogSlice;
use strom_storage::txn_index::AbortedTransaction;
use strom_storage::verification::{TxnVerification, VerificationGuard};
use strom_storage::{AppendInfo, TopicPartition};

use crate::fetcher::{FollowerLog, LogOffsets};
use crate::{AckStatus, BrokerId, IsrChange, LeaderState, OffsetWatch, ReplicationError};

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
    /// Replication refused it (not the leader, ISR too small).
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

/// Why the fetcher's write to a follower replica failed.
#[derive(Debug, thiserror::Error)]
pub enum FollowerWriteError {
    /// The replica is not a follower any more (it leads, or was stopped).
    #[error("partition {topic_partition} is not following a leader")]
    NotFollower {
        /// The partition.
        topic_partition: TopicPartition,
    },
    /// The append was refused.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The truncation failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The partition is offline.
    #[error(transparent)]
    Offline(#[from] PartitionOffline),
}

/// A successful leader append.
#[derive(Debug)]
pub struct Appended {
    /// What the log says about the append.
    pub info: AppendInfo,
    /// The leader epoch the records were appended at; an `acks=all` wait
    /// is only answered while the partition is still led at this epoch.
    pub leader_epoch: i32,
    /// A flush that `flush.messages` made due; the records are not
    /// acknowledged, nor visible, until it is synced and completed.
    pub pending_flush: Option<FlushTicket>,
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
    /// The last stable offset (KIP-98): the high watermark, or the first
    /// offset of the earliest open transaction if that is lower.
    pub last_stable_offset: i64,
    /// For a `read_committed` read, the aborted transactions whose records
    /// the read may hold (the consumer skips them); `None` otherwise.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
}

/// A follower's fetch of one partition, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The follower.
    pub replica: BrokerId,
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
    /// The fetch was refused (not the leader, not a replica).
    Refused(ReplicationError),
}

/// What the metadata says about a partition led here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAssignment {
    /// This broker.
    pub local: BrokerId,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch (quoted in ISR changes).
    pub partition_epoch: i32,
    /// Every replica, the preferred one first.
    pub replicas: Vec<BrokerId>,
    /// The in-sync replicas.
    pub isr: BTreeSet<BrokerId>,
    /// `min.insync.replicas` for the topic.
    pub min_insync_replicas: usize,
}

/// The role of a replica, as the last applied metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleView {
    /// Leads at this epoch.
    Leader {
        /// The leader epoch.
        leader_epoch: i32,
    },
    /// Follows `leader` at this epoch.
    Follower {
        /// The leader.
        leader: BrokerId,
        /// The leader epoch.
        leader_epoch: i32,
    },
    /// Hosted, neither leading nor following (no live leader, or stopped).
    Idle,
}

#[derive(Debug)]
enum Role {
    Leader(LeaderState),
    Follower { leader: BrokerId, leader_epoch: i32 },
    Idle,
}

/// A partition replica on this broker (see the module docs).
pub struct Partition {
    topic_partition: TopicPartition,
    log: LogHandle,
    clock: Arc<dyn Clock>,
    role: Mutex<Role>,
    /// The high watermark; delayed produce and consumer fetches wait on it.
    pub high_watermark: OffsetWatch,
    /// The log end offset; followers' long polls wait on it.
    pub log_end: OffsetWatch,
    offline: AtomicBool,
    isr_change_pending: AtomicBool,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Partition")
            .field("topic_partition", &self.topic_partition)
            .field("role", &self.role_view())
            .field("high_watermark", &self.high_watermark.current())
            .field("log_end", &self.log_end.current())
            .finish()
    }
}

impl Partition {
    /// Hosts `log`, neither leading nor following yet. A log whose lock is
    /// poisoned is hosted offline.
    pub fn open(topic_partition: TopicPartition, log: LogHandle, clock: Arc<dyn Clock>) -> Self {
        let offsets = log
            .read()
            .map(|log| (log.log_end_offset(), log.high_watermark()))
            .ok();
        let (log_end_offset, high_watermark) = offsets.unwrap_or((0, 0));
        let partition = Partition {
            topic_partition,
            log,
            clock,
            role: Mutex::new(Role::Idle),
            high_watermark: OffsetWatch::new(high_watermark),
            log_end: OffsetWatch::new(log_end_offset),
            offline: AtomicBool::new(false),
            isr_change_pending: AtomicBool::new(false),
        };
        if offsets.is_none() {
            partition.offline.store(true, Ordering::Release);
            tracing::error!(topic_partition = %partition.topic_partition,
                "the partition's log lock is poisoned; hosting it offline");
        }
        partition
    }

    /// The partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
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

    fn log(&self) -> Result<RwLockReadGuard<'_, Log>, PartitionOffline> {
        self.guard(self.log.read(), "log")
    }

    fn log_mut(&self) -> Result<RwLockWriteGuard<'_, Log>, PartitionOffline> {
        self.guard(self.log.write(), "log")
    }

    fn role(&self) -> Result<MutexGuard<'_, Role>, PartitionOffline> {
        self.guard(self.role.lock(), "replication state")
    }

    /// Runs `f` on the leader state, or refuses with NotLeader.
    fn leading<T>(
        &self,
        f: impl FnOnce(&mut LeaderState) -> T,
    ) -> Result<Result<T, ReplicationError>, PartitionOffline> {
        Ok(match &mut *self.role()? {
            Role::Leader(leader) => Ok(f(leader)),
            _ => Err(ReplicationError::NotLeader),
        })
    }

    /// Moves the high watermark forward: the log's copy (checkpointed) and
    /// the watch move together, under the log's write lock, and never back
    /// (two leader decisions published out of order keep the larger; only
    /// a follower's truncation lowers it).
    fn publish_high_watermark(&self, log: &mut Log, high_watermark: i64) {
        let high_watermark = high_watermark.max(log.high_watermark());
        log.update_high_watermark(high_watermark);
        self.high_watermark.reset(log.high_watermark());
    }

    /// The role as the last applied metadata set it (`Idle` when offline).
    pub fn role_view(&self) -> RoleView {
        match self.role().as_deref() {
            Ok(Role::Leader(leader)) => RoleView::Leader {
                leader_epoch: leader.leader_epoch(),
            },
            Ok(Role::Follower {
                leader,
                leader_epoch,
            }) => RoleView::Follower {
                leader: *leader,
                leader_epoch: *leader_epoch,
            },
            Ok(Role::Idle) | Err(_) => RoleView::Idle,
        }
    }

    /// Whether this broker leads the partition.
    pub fn is_leader(&self) -> bool {
        matches!(self.role_view(), RoleView::Leader { .. })
    }

    /// Becomes leader (or leader again at a new epoch): the ISR, follower
    /// progress and HW start from the assignment and the log; the new epoch
    /// is recorded at the log end. Waiters of the previous role wake.
    pub fn become_leader(
        &self,
        assignment: &LeaderAssignment,
        now_ms: i64,
    ) -> Result<(), PartitionOffline> {
        let mut log = self.log_mut()?;
        let leader = LeaderState::new(
            assignment.local,
            assignment.leader_epoch,
            assignment.partition_epoch,
            assignment.replicas.clone(),
            assignment.isr.clone(),
            log.log_end_offset(),
            log.high_watermark(),
            assignment.min_insync_replicas,
            now_ms,
        );
        if let Err(error) = log.assign_leader_epoch(assignment.leader_epoch) {
            tracing::warn!(topic_partition = %self.topic_partition, %error,
                "cannot record the new leader epoch");
        }
        let high_watermark = leader.high_watermark();
        *self.role()? = Role::Leader(leader);
        self.isr_change_pending.store(false, Ordering::Release);
        self.publish_high_watermark(&mut log, high_watermark);
        self.log_end.reset(log.log_end_offset());
        Ok(())
    }

    /// Keeps leading at the assignment's epoch: applies a committed change
    /// of the replicas (a reassignment) and of the ISR, and
    /// `min.insync.replicas`. `Ok(false)` when the partition is not led
    /// here at that epoch (it must become leader first).
    pub fn update_leadership(
        &self,
        assignment: &LeaderAssignment,
        now_ms: i64,
    ) -> Result<bool, PartitionOffline> {
        let mut log = self.log_mut()?;
        let advanced = {
            let mut role = self.role()?;
            let Role::Leader(leader) = &mut *role else {
                return Ok(false);
            };
            if leader.leader_epoch() != assignment.leader_epoch {
                return Ok(false);
            }
            leader.set_min_insync_replicas(assignment.min_insync_replicas);
            if leader.partition_epoch() == assignment.partition_epoch {
                return Ok(true);
            }
            if leader.replicas() != assignment.replicas.as_slice() {
                leader.set_replicas(assignment.replicas.clone(), now_ms);
            }
            leader.apply_isr(assignment.isr.clone(), assignment.partition_epoch)
        };
        if let Some(high_watermark) = advanced {
            self.publish_high_watermark(&mut log, high_watermark);
        }
        Ok(true)
    }

    /// Follows `leader` at `leader_epoch`: appends as leader are refused
    /// from now on and their waiters wake (they answer NOT_LEADER). The log
    /// is kept; the fetcher truncates a divergent suffix.
    pub fn become_follower(
        &self,
        leader: BrokerId,
        leader_epoch: i32,
    ) -> Result<(), PartitionOffline> {
        let log = self.log_mut()?;
        *self.role()? = Role::Follower {
            leader,
            leader_epoch,
        };
        let (high_watermark, log_end_offset) = (log.high_watermark(), log.log_end_offset());
        drop(log);
        self.wake_waiters(high_watermark, log_end_offset);
        Ok(())
    }

    /// Neither leads nor follows (no live leader, or the replica is being
    /// removed); waiters wake and find it so.
    pub fn become_idle(&self) -> Result<(), PartitionOffline> {
        let log = self.log_mut()?;
        *self.role()? = Role::Idle;
        let (high_watermark, log_end_offset) = (log.high_watermark(), log.log_end_offset());
        drop(log);
        self.wake_waiters(high_watermark, log_end_offset);
        Ok(())
    }

    /// Wakes everyone waiting on the watches (a reset notifies even when
    /// the value is unchanged); they re-check the role.
    fn wake_waiters(&self, high_watermark: i64, log_end_offset: i64) {
        self.high_watermark.reset(high_watermark);
        self.log_end.reset(log_end_offset);
    }

    /// The leader epoch, if led here.
    pub fn leader_epoch(&self) -> Result<Result<i32, ReplicationError>, PartitionOffline> {
        self.leading(|leader| leader.leader_epoch())
    }

    /// The ISR, if led here (empty otherwise or offline).
    pub fn isr(&self) -> BTreeSet<BrokerId> {
        self.leading(|leader| leader.isr().clone())
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    }

    /// The partition epoch of the ISR the leader knows, if led here.
    pub fn partition_epoch(&self) -> Option<i32> {
        self.leading(|leader| leader.partition_epoch())
            .ok()
            .and_then(Result::ok)
    }

    /// The number of in-sync replicas (0 unless led here and online).
    pub fn isr_size(&self) -> usize {
        self.isr().len()
    }

    /// Each follower's lag as the leader last saw it: the leader's log end
    /// offset minus the follower's (the whole log when it has not fetched).
    pub fn follower_lags(&self) -> Vec<(BrokerId, i64)> {
        self.leading(|leader| {
            let end = leader.log_end_offset();
            leader
                .replicas()
                .iter()
                .filter_map(|replica| leader.progress(*replica).map(|p| (*replica, p)))
                .map(|(replica, progress)| (replica, end - progress.log_end_offset.max(0)))
                .collect()
        })
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
    }

    /// Starts verifying, as leader, that `producer_id`'s transaction
    /// includes this partition before a batch at `sequence` and `epoch`
    /// (KIP-890 part 1): `None` when a transaction of the producer is
    /// ongoing here already, else the guard its append must carry.
    pub fn start_transaction_verification(
        &self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        now_ms: i64,
    ) -> Result<Option<VerificationGuard>, PartitionError> {
        let mut log = self.log_mut()?;
        self.leading(|_| ())??;
        Ok(log.start_transaction_verification(producer_id, sequence, epoch, now_ms))
    }

    /// Checks a request's current leader epoch (NOT_LEADER unless led here).
    pub fn validate_leader_epoch(&self, requested: Option<i32>) -> Result<(), PartitionError> {
        Ok(self.leading(|leader| leader.validate_leader_epoch(requested))???)
    }

    /// Appends a producer's batches as leader and advances LEO and HW.
    ///
    /// It never fsyncs: when `flush.messages` makes a flush due, the result
    /// carries a [`FlushTicket`] and the HW stays where it is until the
    /// caller has synced it off the async workers and called
    /// [`Partition::complete_flush`] (so consumers and `acks=all` only see
    /// flushed records, as they would with an inline flush).
    pub fn append(
        &self,
        records: Bytes,
        acks_all: bool,
        now_ms: i64,
    ) -> Result<Appended, AppendFailure> {
        self.append_verified(records, acks_all, now_ms, TxnVerification::Unchecked)
    }

    /// [`Partition::append`] of a client's batches with KIP-890's
    /// `verification` of a batch that opens a transaction (see
    /// [`strom_storage::verification`]).
    pub fn append_verified(
        &self,
        records: Bytes,
        acks_all: bool,
        now_ms: i64,
        verification: TxnVerification,
    ) -> Result<Appended, AppendFailure> {
        let mut log = self.log_mut()?;
        let leader_epoch = self.append_epoch(acks_all)?;
        let info =
            log.append_as_leader_deferring_flush(records, leader_epoch, now_ms, verification)?;
        self.log_end.advance(log.log_end_offset());
        if log.flush_due() {
            let ticket = log.prepare_flush();
            return Ok(Appended {
                info,
                leader_epoch,
                pending_flush: Some(ticket),
            });
        }
        self.advance_after_local_append(&mut log)?;
        Ok(Appended {
            info,
            leader_epoch,
            pending_flush: None,
        })
    }

    /// The leader epoch a leader append is written at, after the leader's
    /// checks (led here, ISR large enough for `acks_all`).
    fn append_epoch(&self, acks_all: bool) -> Result<i32, AppendFailure> {
        Ok(self.leading(|leader| {
            leader.check_append(acks_all)?;
            Ok::<_, ReplicationError>(leader.leader_epoch())
        })???)
    }

    /// After a leader append that needs no flush first: tells the leader
    /// state the new log end and publishes the HW if it advanced.
    fn advance_after_local_append(&self, log: &mut Log) -> Result<(), PartitionOffline> {
        let log_end_offset = log.log_end_offset();
        let advanced = self
            .leading(|leader| leader.on_local_append(log_end_offset))?
            .ok()
            .flatten();
        if let Some(high_watermark) = advanced {
            self.publish_high_watermark(log, high_watermark);
        }
        Ok(())
    }

    /// Records a synced [`FlushTicket`]: moves the recovery point and lets
    /// the HW follow the flushed records. On an offline partition nothing
    /// moves (the records stay invisible to consumers).
    pub fn complete_flush(&self, ticket: &FlushTicket, now_ms: i64) {
        let Ok(mut log) = self.log_mut() else {
            return;
        };
        log.complete_flush(ticket, now_ms);
        let log_end_offset = log.log_end_offset();
        let advanced = self.leading(|leader| {
            let flushed_to = ticket.flushed_to().max(leader.log_end_offset());
            leader.on_local_append(flushed_to.min(log_end_offset))
        });
        if let Ok(Ok(Some(high_watermark))) = advanced {
            self.publish_high_watermark(&mut log, high_watermark);
        }
    }

    /// [`Partition::append`], then the flush it made due, on the calling
    /// thread (for callers already off the async workers). The result
    /// carries no pending flush.
    pub fn append_flushing_here(
        &self,
        records: Bytes,
        acks_all: bool,
        now_ms: i64,
    ) -> Result<Appended, AppendFailure> {
        let mut appended = self.append(records, acks_all, now_ms)?;
        if let Some(ticket) = appended.pending_flush.take() {
            ticket.sync().map_err(FlushFailure::from)?;
            self.complete_flush(&ticket, now_ms);
        }
        Ok(appended)
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

    /// Whether an `acks=all` write appended at `leader_epoch` and ending
    /// before `required_offset` is done. Once the partition is not led here
    /// at that epoch the answer is [`AckStatus::NotLeader`]: the records may
    /// have been truncated since, so a later HW says nothing about them. An
    /// offline partition never says it is done (the write times out).
    pub fn ack_status(&self, required_offset: i64, leader_epoch: i32) -> AckStatus {
        match self.role().as_deref() {
            Ok(Role::Leader(leader)) if leader.leader_epoch() == leader_epoch => {
                leader.ack_status(required_offset)
            }
            Ok(_) => AckStatus::NotLeader,
            Err(_) => AckStatus::Waiting,
        }
    }

    /// Waits until [`Partition::ack_status`] is no longer
    /// [`AckStatus::Waiting`] or `timeout` passes, and returns it: woken by
    /// every HW move and every role change.
    pub async fn wait_for_ack(
        &self,
        required_offset: i64,
        leader_epoch: i32,
        timeout: std::time::Duration,
    ) -> AckStatus {
        // A timer on tokio's clock, not a decision on the broker's `Clock`:
        // it bounds how long the request handler waits.
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribed before the first look, so no change is missed.
        let mut changes = self.high_watermark.subscribe();
        loop {
            let status = self.ack_status(required_offset, leader_epoch);
            if status != AckStatus::Waiting {
                return status;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return self.ack_status(required_offset, leader_epoch),
            }
        }
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
        let outcome = self.leading(|leader| {
            leader.on_follower_fetch(request.replica, request.fetch_offset, now_ms)
        })?;
        let outcome = match outcome.and_then(|outcome| outcome) {
            Ok(outcome) => outcome,
            Err(error) => return Ok(FollowerRead::Refused(error)),
        };
        if let Some(high_watermark) = outcome.high_watermark_advanced_to {
            self.publish_high_watermark(&mut *self.log_mut()?, high_watermark);
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
                last_stable_offset: info.high_watermark,
                aborted_transactions: None,
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
    /// `replica_lag_time_max_ms`, if any must go (led here only).
    pub fn isr_shrink(&self, now_ms: i64, replica_lag_time_max_ms: i64) -> Option<IsrChange> {
        // A follower proposed into the ISR is not dropped here however long
        // it has stopped fetching: the controller may have committed the
        // expansion (its answer lost), so only the committed ISR or a
        // refusal settles the proposal.
        self.leading(|leader| leader.isr_shrink(now_ms, replica_lag_time_max_ms))
            .ok()?
            .ok()?
    }

    /// The controller refused an ISR expansion: the followers proposed in
    /// it no longer hold the HW back.
    pub fn abandon_isr_expansion(&self) {
        let advanced = self
            .leading(LeaderState::abandon_isr_additions)
            .ok()
            .and_then(Result::ok)
            .flatten();
        self.publish_advanced(advanced);
    }

    /// Publishes a HW that a leader decision advanced, taking the log's
    /// write lock (the caller holds no lock).
    fn publish_advanced(&self, advanced: Option<i64>) {
        if let Some(high_watermark) = advanced {
            if let Ok(mut log) = self.log_mut() {
                self.publish_high_watermark(&mut log, high_watermark);
            }
        }
    }

    /// Whether this broker does not lead the partition now.
    pub fn is_deposed(&self) -> bool {
        !self.is_leader()
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
            last_stable_offset: read.last_stable_offset,
            aborted_transactions: read.aborted_transactions,
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
        self.read_slice_isolated(fetch_offset, max_bytes, min_one_batch, false)
    }

    /// [`read_slice`](Self::read_slice) at an isolation level: with
    /// `read_committed` the read stops at the last stable offset instead of
    /// the high watermark, and lists the aborted transactions in the range
    /// it returns (Kafka's `FetchIsolation.TXN_COMMITTED`). The records
    /// stay in their segment file either way.
    pub fn read_slice_isolated(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
        read_committed: bool,
    ) -> Result<PartitionRead<LogSlice>, ReadFailure> {
        let log = self.log()?;
        let last_stable_offset = log.last_stable_offset();
        let upper_bound = if read_committed {
            last_stable_offset
        } else {
            log.high_watermark()
        };
        let info = log.read(fetch_offset, max_bytes, upper_bound, min_one_batch)?;
        let records = info.records.filter(|slice| !slice.is_empty());
        let aborted_transactions = read_committed.then(|| match &records {
            Some(slice) => log.collect_aborted_transactions(fetch_offset, slice.next_offset()),
            None => Vec::new(),
        });
        drop(log);
        Ok(PartitionRead {
            records,
            high_watermark: info.high_watermark,
            log_start_offset: info.log_start_offset,
            log_end_offset: info.log_end_offset,
            last_stable_offset,
            aborted_transactions,
        })
    }

    /// Writes a transaction marker as leader (for WriteTxnMarkers) and
    /// advances LEO and HW as [`Partition::append`] does. The log flushes
    /// inline when `flush.messages` makes it due, so call it where
    /// blocking is allowed.
    pub fn append_marker_flushing_here(
        &self,
        marker: &TransactionMarker,
        now_ms: i64,
    ) -> Result<Appended, AppendFailure> {
        let mut log = self.log_mut()?;
        let leader_epoch = self.append_epoch(true)?;
        let info = log.append_marker_as_leader(marker, leader_epoch, now_ms)?;
        self.log_end.advance(log.log_end_offset());
        self.advance_after_local_append(&mut log)?;
        Ok(Appended {
            info,
            leader_epoch,
            pending_flush: None,
        })
    }

    /// Runs `f` with shared access to the log (offset lookups and the like).
    pub fn with_log<T>(&self, f: impl FnOnce(&Log) -> T) -> Result<T, PartitionOffline> {
        Ok(f(&*self.log()?))
    }

    /// Runs `f` with exclusive access to the log (DeleteRecords and the
    /// like; not for appends or truncation, which go through the roles).
    pub fn with_log_mut<T>(&self, f: impl FnOnce(&mut Log) -> T) -> Result<T, PartitionOffline> {
        Ok(f(&mut *self.log_mut()?))
    }

    fn check_following(&self) -> Result<(), FollowerWriteError> {
        match &*self.role()? {
            Role::Follower { .. } => Ok(()),
            _ => Err(FollowerWriteError::NotFollower {
                topic_partition: self.topic_partition.clone(),
            }),
        }
    }
}

/// Whether the follower's log is empty and the first fetched batch, at
/// `base_offset`, starts below its end and reaches it.
fn starts_inside_first_batch(log: &Log, records: &Bytes, base_offset: i64, log_end: i64) -> bool {
    let last_offset = strom_protocol::records::BatchHeader::decode(records)
        .map(|header| header.last_offset())
        .unwrap_or(-1);
    log.log_start_offset() == log.log_end_offset()
        && base_offset < log_end
        && last_offset >= log_end
}

impl FollowerLog for Partition {
    type Error = FollowerWriteError;

    fn offsets(&self) -> Result<LogOffsets, FollowerWriteError> {
        let log = self.log()?;
        Ok(LogOffsets {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            latest_epoch: log.epoch_cache().latest_epoch(),
        })
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Result<Option<(i32, i64)>, FollowerWriteError> {
        let log = self.log()?;
        let (found, end) = log
            .epoch_cache()
            .end_offset_for(epoch, log.log_end_offset());
        Ok((found >= 0 && end >= 0).then_some((found, end)))
    }

    fn append(&self, records: Bytes) -> Result<i64, FollowerWriteError> {
        let mut log = self.log_mut()?;
        self.check_following()?;
        let now_ms = self.clock.wall_ms();
        match log.append_as_follower(records.clone(), now_ms) {
            Err(AppendError::OffsetsNotIncreasing {
                base_offset,
                log_end,
            }) if starts_inside_first_batch(&log, &records, base_offset, log_end) => {
                // An empty log started at the leader's log start, which lies
                // inside this batch (DeleteRecords is not batch-aligned):
                // start at the batch instead, as Kafka's follower does.
                log.truncate_fully_and_start_at(base_offset, now_ms)?;
                log.append_as_follower(records, now_ms)?;
            }
            other => {
                other?;
            }
        }
        let log_end_offset = log.log_end_offset();
        self.log_end.advance(log_end_offset);
        Ok(log_end_offset)
    }

    fn truncate_to(&self, offset: i64) -> Result<i64, FollowerWriteError> {
        let mut log = self.log_mut()?;
        self.check_following()?;
        log.truncate_to(offset, self.clock.wall_ms())?;
        let (log_end_offset, high_watermark) = (log.log_end_offset(), log.high_watermark());
        self.log_end.reset(log_end_offset);
        self.high_watermark.reset(high_watermark);
        Ok(log_end_offset)
    }

    fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), FollowerWriteError> {
        let mut log = self.log_mut()?;
        self.check_following()?;
        log.truncate_fully_and_start_at(offset, self.clock.wall_ms())?;
        tracing::info!(topic_partition = %self.topic_partition, log_start_offset = offset,
            "follower log emptied to start at the leader's log start");
        self.log_end.reset(log.log_end_offset());
        // The high watermark is never below the log start.
        self.publish_high_watermark(&mut log, offset);
        Ok(())
    }

    fn set_high_watermark(&self, high_watermark: i64) {
        let Ok(mut log) = self.log_mut() else {
            return;
        };
        if self.check_following().is_ok() {
            self.publish_high_watermark(&mut log, high_watermark);
        }
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
