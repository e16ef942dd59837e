//! The thin async layer: a [`GroupCoordinator`] shares a [`CoordinatorCore`]
//! and an [`OffsetsLog`] behind a mutex, persists the records the core
//! produces, turns parked requests into `oneshot` receivers, and runs a timer
//! task that drives [`CoordinatorCore::tick`].
//!
//! A poisoned core lock (a thread panicked while changing group state) takes
//! the coordinator offline: the groups may be half-changed, so every group
//! request then fails with [`GroupError::CoordinatorNotAvailable`] (logged
//! once at error level) until the broker restarts and replays
//! `__consumer_offsets`. The log lock guards no state of its own and is
//! reused.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use strom_clock::{Clock, Random};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::consumer_assignor::ConsumerAssignor;
use crate::consumer_core::ConsumerGroupListing;
use crate::consumer_group::{
    ConsumerGroup, ConsumerHeartbeat, ConsumerHeartbeatResponse, TopicCatalog,
};
use crate::coordinator::{
    CoordinatorConfig, CoordinatorCore, GroupListing, GroupResults, PartitionResults,
};
use crate::error::{GroupError, LoadError};
use crate::group::{
    Completion, GroupDescription, HeartbeatRequest, JoinRequest, JoinResponse, LeaveMember, Reply,
    SyncRequest, SyncResponse,
};
use crate::load::read_partition;
use crate::log::{CommitWait, LogRecord, OffsetsLog};
use crate::member::RequestId;
use crate::offsets::{OffsetCommitRequest, PartitionOffset, TxnOffsetCommitRequest};
use crate::state::GroupState;

type JoinSender = oneshot::Sender<Result<JoinResponse, GroupError>>;
type SyncSender = oneshot::Sender<Result<SyncResponse, GroupError>>;

struct Inner {
    core: CoordinatorCore,
    joins: HashMap<RequestId, JoinSender>,
    syncs: HashMap<RequestId, SyncSender>,
    next_request_id: RequestId,
}

impl Inner {
    fn request_id(&mut self) -> RequestId {
        self.next_request_id += 1;
        self.next_request_id
    }

    /// Appends the core's records (one batch per partition, in order),
    /// then answers resolved parked requests. Returns the last offset
    /// appended to each partition.
    fn flush(&mut self, log: &Mutex<impl OffsetsLog>) -> Result<Vec<(i32, i64)>, GroupError> {
        let appended = self.append(log);
        for delivery in self.take_deliveries() {
            delivery.send(None);
        }
        appended
    }

    /// Appends the core's records (one batch per partition, in order);
    /// returns the last offset appended to each partition.
    fn append(&mut self, log: &Mutex<impl OffsetsLog>) -> Result<Vec<(i32, i64)>, GroupError> {
        let mut appended = Ok(Vec::new());
        let mut by_partition: BTreeMap<i32, Vec<LogRecord>> = BTreeMap::new();
        for (partition, record) in self.core.take_records() {
            by_partition.entry(partition).or_default().push(record);
        }
        if !by_partition.is_empty() {
            let mut log = lock(log);
            for (partition, records) in by_partition {
                match log.append(partition, &records) {
                    Ok(last_offset) => {
                        if let Ok(appended) = &mut appended {
                            appended.push((partition, last_offset));
                        }
                    }
                    Err(source) => {
                        tracing::warn!(partition, %source, "appending to __consumer_offsets failed");
                        appended = Err(GroupError::LogAppendFailed { source });
                    }
                }
            }
        }
        appended
    }

    /// The answers to parked requests resolved since the last call, with
    /// where they go.
    fn take_deliveries(&mut self) -> Vec<Delivery> {
        let mut deliveries = Vec::new();
        for completion in self.core.take_completions() {
            match completion {
                Completion::Join { request_id, result } => {
                    if let Some(sender) = self.joins.remove(&request_id) {
                        deliveries.push(Delivery::Join(sender, result));
                    }
                }
                Completion::Sync { request_id, result } => {
                    if let Some(sender) = self.syncs.remove(&request_id) {
                        deliveries.push(Delivery::Sync(sender, result));
                    }
                }
            }
        }
        deliveries
    }
}

/// The answer to a parked request and where it goes.
enum Delivery {
    Join(JoinSender, Result<JoinResponse, GroupError>),
    Sync(SyncSender, Result<SyncResponse, GroupError>),
}

impl Delivery {
    /// Sends the answer. A SyncGroup answer is replaced by `failed` when
    /// the group record it depends on was not committed.
    fn send(self, failed: Option<&GroupError>) {
        match self {
            Delivery::Join(sender, result) => {
                let _receiver_gone = sender.send(result);
            }
            Delivery::Sync(sender, result) => {
                let result = match failed {
                    Some(error) => Err(error.clone()),
                    None => result,
                };
                let _receiver_gone = sender.send(result);
            }
        }
    }
}

/// A SyncGroup handled under the lock: the reply, the receiver of a
/// parked one, what to wait for, and the parked answers it resolved.
struct SyncOutcome {
    reply: Result<Reply<SyncResponse>, GroupError>,
    receiver: oneshot::Receiver<Result<SyncResponse, GroupError>>,
    waits: Vec<CommitWait>,
    deliveries: Vec<Delivery>,
}

/// Waits for every append; the first failure.
async fn committed(waits: Vec<CommitWait>) -> Result<(), GroupError> {
    for wait in waits {
        wait.await
            .map_err(|source| GroupError::LogAppendFailed { source })?;
    }
    Ok(())
}

/// Applies the pending commits of `partition` that its log has committed.
/// A log that does not lead the partition any more answers nothing here:
/// the core then answers NOT_COORDINATOR once the partition is unloaded,
/// and until then what it had applied.
fn catch_up(core: &mut CoordinatorCore, log: &Mutex<impl OffsetsLog>, partition: i32, now_ms: i64) {
    if let Ok(committed) = lock(log).committed_offset(partition) {
        core.advance_committed(partition, committed, now_ms);
    }
}

/// Locks the offsets log: it is a handle to storage with no state of its
/// own for a panic to leave half-changed, so it is reused after one.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The group coordinator as an async service.
///
/// Locks are always taken in the order core, then log; a partition load
/// reads the log without holding the core, so loaded partitions keep being
/// served while another one loads.
pub struct GroupCoordinator<L> {
    inner: Arc<Mutex<Inner>>,
    log: Arc<Mutex<L>>,
    clock: Arc<dyn Clock>,
    /// Whether the poisoned core was reported (see the module docs).
    offline_reported: Arc<AtomicBool>,
}

impl<L> Clone for GroupCoordinator<L> {
    fn clone(&self) -> Self {
        GroupCoordinator {
            inner: Arc::clone(&self.inner),
            log: Arc::clone(&self.log),
            clock: Arc::clone(&self.clock),
            offline_reported: Arc::clone(&self.offline_reported),
        }
    }
}

impl<L: OffsetsLog + Send + 'static> GroupCoordinator<L> {
    /// A coordinator over `log`, owning no partition yet, reading the time
    /// from `clock` (its wall reading: session and rebalance deadlines,
    /// commit timestamps and offset retention are all in wall-clock
    /// milliseconds, as in Kafka's group coordinator) and drawing new member
    /// ids from `random`.
    pub fn new(
        config: CoordinatorConfig,
        log: L,
        clock: Arc<dyn Clock>,
        random: Arc<dyn Random>,
    ) -> GroupCoordinator<L> {
        GroupCoordinator {
            inner: Arc::new(Mutex::new(Inner {
                core: CoordinatorCore::new(config, random),
                joins: HashMap::new(),
                syncs: HashMap::new(),
                next_request_id: 0,
            })),
            log: Arc::new(Mutex::new(log)),
            clock,
            offline_reported: Arc::default(),
        }
    }

    /// The current time in milliseconds since the Unix epoch, from the
    /// injected clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.wall_ms()
    }

    /// The core, or [`GroupError::CoordinatorNotAvailable`] once a panic
    /// poisoned it (see the module docs).
    fn lock(&self) -> Result<MutexGuard<'_, Inner>, GroupError> {
        self.inner.lock().map_err(|_poisoned| {
            if !self.offline_reported.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    "a thread panicked while changing group state; the group coordinator is offline"
                );
            }
            GroupError::CoordinatorNotAvailable
        })
    }

    /// Whether a panic took the coordinator offline.
    pub fn is_offline(&self) -> bool {
        self.inner.is_poisoned()
    }

    /// Runs `operation` on the core, then flushes records and completions.
    fn with_core<T>(
        &self,
        operation: impl FnOnce(&mut Inner, i64) -> Result<T, GroupError>,
    ) -> Result<T, GroupError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock()?;
        let result = operation(&mut inner, now_ms);
        let flushed = inner.flush(&self.log);
        let value = result?;
        flushed.map(|_appended| value)
    }

    /// Takes ownership of `partition` and replays it from the log. Until it
    /// returns, requests for the partition's groups get
    /// COORDINATOR_LOAD_IN_PROGRESS; other partitions keep being served.
    pub fn load_partition(&self, partition: i32) -> Result<u64, LoadError> {
        let offline = |_| LoadError::Offline { partition };
        self.lock().map_err(offline)?.core.begin_loading(partition);
        let (records, committed) = {
            let log = lock(&self.log);
            let records = read_partition(&*log, partition)?;
            let committed = log
                .committed_offset(partition)
                .map_err(|source| LoadError::Read { partition, source })?;
            (records, committed)
        };
        let now_ms = self.now_ms();
        self.lock()
            .map_err(offline)?
            .core
            .replay_records(partition, records, committed, now_ms)
    }

    /// Takes ownership of `partition` without reading it yet: its groups get
    /// COORDINATOR_LOAD_IN_PROGRESS until [`load_partition`](Self::load_partition)
    /// finishes. Lets a broker claim its partitions before it starts serving
    /// and load them afterwards.
    pub fn begin_loading(&self, partition: i32) {
        if let Ok(mut inner) = self.lock() {
            inner.core.begin_loading(partition);
        }
    }

    /// Gives up `partition`.
    pub fn unload_partition(&self, partition: i32) {
        if let Ok(mut inner) = self.lock() {
            inner.core.unload(partition);
            let _nothing_to_append = inner.flush(&self.log);
        }
    }

    /// Advances timers now, after applying the pending offset commits the
    /// log has committed since (so that expiry sees them, and commits whose
    /// answer timed out do not wait for the next OffsetFetch).
    pub fn tick(&self) {
        let _ = self.with_core(|inner, now_ms| {
            for partition in inner.core.pending_partitions() {
                catch_up(&mut inner.core, &self.log, partition, now_ms);
            }
            inner.core.tick(now_ms);
            Ok(())
        });
    }

    /// How many offset commits wait for the log to commit them.
    pub fn pending_commits(&self) -> usize {
        self.lock().map_or(0, |inner| inner.core.pending_commits())
    }

    /// Spawns the timer task: it calls [`tick`](Self::tick) every `interval`
    /// until the returned handle is aborted.
    pub fn spawn_timer(&self, interval: Duration) -> JoinHandle<()> {
        let coordinator = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                coordinator.tick();
            }
        })
    }

    /// JoinGroup; waits while the join is parked. `request.request_id` is
    /// replaced by the coordinator's own.
    pub async fn join_group(
        &self,
        group_id: &str,
        mut request: JoinRequest,
    ) -> Result<JoinResponse, GroupError> {
        let receiver = self.with_core(|inner, now_ms| {
            request.request_id = inner.request_id();
            let (sender, receiver) = oneshot::channel();
            inner.joins.insert(request.request_id, sender);
            let request_id = request.request_id;
            let reply = inner.core.join_group(group_id, request, now_ms);
            if !matches!(reply, Ok(Reply::Pending)) {
                inner.joins.remove(&request_id);
            }
            Ok((reply, receiver))
        })?;
        match receiver {
            (Ok(Reply::Done(response)), _) => Ok(response),
            (Ok(Reply::Pending), receiver) => receiver
                .await
                .unwrap_or(Err(GroupError::CoordinatorNotAvailable)),
            (Err(error), _) => Err(error),
        }
    }

    /// SyncGroup; waits for the leader's assignment. The answers to the
    /// leader's SyncGroup, which stores the group's assignment, are sent
    /// (without the coordinator's lock) once the log has committed that
    /// record, as Kafka's coordinator answers after its `acks=-1` append;
    /// if it is not committed, every member gets the log's error.
    pub async fn sync_group(
        &self,
        group_id: &str,
        request: SyncRequest,
    ) -> Result<SyncResponse, GroupError> {
        let outcome = self.sync_and_append(group_id, request)?;
        let failed = committed(outcome.waits).await.err();
        for delivery in outcome.deliveries {
            delivery.send(failed.as_ref());
        }
        match outcome.reply {
            Ok(Reply::Done(response)) => failed.map_or(Ok(response), Err),
            Ok(Reply::Pending) => outcome
                .receiver
                .await
                .unwrap_or(Err(GroupError::CoordinatorNotAvailable)),
            Err(error) => Err(error),
        }
    }

    /// The locked part of [`sync_group`](Self::sync_group).
    fn sync_and_append(
        &self,
        group_id: &str,
        mut request: SyncRequest,
    ) -> Result<SyncOutcome, GroupError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock()?;
        request.request_id = inner.request_id();
        let (sender, receiver) = oneshot::channel();
        inner.syncs.insert(request.request_id, sender);
        let request_id = request.request_id;
        let reply = inner.core.sync_group(group_id, request, now_ms);
        if !matches!(reply, Ok(Reply::Pending)) {
            inner.syncs.remove(&request_id);
        }
        let appended = inner.append(&self.log);
        let deliveries = inner.take_deliveries();
        let appended = match appended {
            Ok(appended) => appended,
            Err(error) => {
                for delivery in deliveries {
                    delivery.send(None);
                }
                reply?;
                return Err(error);
            }
        };
        let log = lock(&self.log);
        let waits = appended
            .into_iter()
            .map(|(partition, last_offset)| log.wait_committed(partition, last_offset))
            .collect();
        Ok(SyncOutcome {
            reply,
            receiver,
            waits,
            deliveries,
        })
    }

    /// Heartbeat.
    pub fn heartbeat(&self, group_id: &str, request: &HeartbeatRequest) -> Result<(), GroupError> {
        self.with_core(|inner, now_ms| inner.core.heartbeat(group_id, request, now_ms))
    }

    /// ConsumerGroupHeartbeat (KIP-848); `catalog` resolves the subscribed
    /// topics. Its records are appended before it answers.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        request: &ConsumerHeartbeat,
        catalog: &dyn TopicCatalog,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        self.with_core(|inner, now_ms| {
            inner
                .core
                .consumer_heartbeat(group_id, request, catalog, now_ms)
        })
    }

    /// ConsumerGroupDescribe: per group, the group and its assignor.
    pub fn describe_consumer_groups(
        &self,
        group_ids: &[String],
    ) -> Vec<Result<(ConsumerGroup, ConsumerAssignor), GroupError>> {
        match self.lock() {
            Ok(inner) => group_ids
                .iter()
                .map(|group_id| inner.core.describe_consumer_group(group_id))
                .collect(),
            Err(offline) => group_ids.iter().map(|_| Err(offline.clone())).collect(),
        }
    }

    /// The consumer-protocol groups, for ListGroups.
    pub fn list_consumer_groups(&self) -> Result<Vec<ConsumerGroupListing>, GroupError> {
        Ok(self.lock()?.core.list_consumer_groups())
    }

    /// OffsetFetch v9+'s member check on a consumer-protocol group.
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        self.lock()?
            .core
            .validate_offset_fetch(group_id, member_id, member_epoch)
    }

    /// LeaveGroup.
    pub fn leave_group(
        &self,
        group_id: &str,
        members: &[LeaveMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.with_core(|inner, now_ms| inner.core.leave_group(group_id, members, now_ms))
    }

    /// OffsetCommit: the offsets are appended to the log, then the answer
    /// waits (without the coordinator's lock) until the log has committed
    /// them ([`OffsetsLog::wait_committed`]: with replication, every
    /// in-sync replica has them), as Kafka's coordinator appends with
    /// `acks=-1`. Until the log has committed them they are pending:
    /// OffsetFetch answers the offsets below the high watermark only, so
    /// that an offset it returned is never taken back by a coordinator
    /// failover.
    ///
    /// If the append is refused the commit is forgotten and the request
    /// fails with [`GroupError::LogAppendFailed`]. If the append is written
    /// but not committed in time, the request fails the same way and the
    /// commit stays pending, as it is in the leader's log: it becomes
    /// visible if the high watermark passes it later, and is gone if
    /// leadership moves first and the new leader's log lacks it.
    pub async fn commit_offsets(
        &self,
        request: &OffsetCommitRequest,
    ) -> Result<PartitionResults, GroupError> {
        self.begin_commit_offsets(request).await
    }

    /// [`commit_offsets`](Self::commit_offsets) in two steps: the commit
    /// is applied and appended when this is called, and the returned
    /// future only waits for the log to commit it. A caller that answers
    /// requests concurrently (a connection's pipelined OffsetCommits)
    /// calls this in request order, so that the last commit to arrive is
    /// the one that stays, as Kafka handles a connection's requests one at
    /// a time.
    pub fn begin_commit_offsets(
        &self,
        request: &OffsetCommitRequest,
    ) -> impl std::future::Future<Output = Result<PartitionResults, GroupError>> + Send + 'static
    {
        let appended = self.commit_and_append(request);
        async move {
            let (results, waits) = appended?;
            committed(waits).await?;
            Ok(results)
        }
    }

    /// The locked part of [`commit_offsets`](Self::commit_offsets): the
    /// results and what to wait for before answering.
    fn commit_and_append(
        &self,
        request: &OffsetCommitRequest,
    ) -> Result<(PartitionResults, Vec<CommitWait>), GroupError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock()?;
        // The group's earlier commits are answered by now, so committed:
        // applied here, pending commits stay as many as are in flight.
        let partition = inner.core.partition_for(&request.group_id);
        catch_up(&mut inner.core, &self.log, partition, now_ms);
        let result = inner.core.stage_offsets(request, now_ms);
        let flushed = inner.flush(&self.log);
        match &flushed {
            Ok(appended) => match appended.iter().find(|(other, _)| *other == partition) {
                Some((_, last_offset)) => inner.core.place_staged(partition, *last_offset),
                None => inner.core.discard_staged(),
            },
            // Not written: forget the commit so that reads agree with the log.
            Err(_) => inner.core.discard_staged(),
        }
        let results = result?;
        let appended = flushed?;
        let log = lock(&self.log);
        let waits = appended
            .into_iter()
            .map(|(partition, last_offset)| log.wait_committed(partition, last_offset))
            .collect();
        Ok((results, waits))
    }

    /// OffsetFetch for one group: the offsets the log has committed
    /// (pending commits and transaction markers below its high watermark
    /// are applied first). With `require_stable` (v7+), partitions an open
    /// transaction holds offsets of answer
    /// [`GroupError::UnstableOffsetCommit`] (see
    /// [`CoordinatorCore::fetch_offsets`]).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<Vec<PartitionOffset>, GroupError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock()?;
        let partition = inner.core.partition_for(group_id);
        catch_up(&mut inner.core, &self.log, partition, now_ms);
        inner.core.fetch_offsets(group_id, topics, require_stable)
    }

    /// TxnOffsetCommit: validated as
    /// [`CoordinatorCore::commit_transactional_offsets`] says, appended as
    /// one transactional batch of the producer
    /// ([`OffsetsLog::append_transactional`]), and answered once the log
    /// has committed it, as [`commit_offsets`](Self::commit_offsets) is.
    /// The offsets are then held for the producer's marker
    /// ([`complete_transaction`](Self::complete_transaction)); OffsetFetch
    /// does not answer them before. A refused append forgets them and
    /// fails with [`GroupError::LogAppendFailed`]; an append written but
    /// not committed in time fails the same way and stays held, as it is in
    /// the leader's log.
    pub async fn commit_transactional_offsets(
        &self,
        request: &TxnOffsetCommitRequest,
    ) -> Result<PartitionResults, GroupError> {
        self.begin_commit_transactional_offsets(request).await
    }

    /// [`commit_transactional_offsets`](Self::commit_transactional_offsets)
    /// in two steps, as [`begin_commit_offsets`](Self::begin_commit_offsets):
    /// appended when this is called, committed when the future resolves.
    pub fn begin_commit_transactional_offsets(
        &self,
        request: &TxnOffsetCommitRequest,
    ) -> impl std::future::Future<Output = Result<PartitionResults, GroupError>> + Send + 'static
    {
        let appended = self.commit_transactional_and_append(request);
        async move {
            let (results, waits) = appended?;
            committed(waits).await?;
            Ok(results)
        }
    }

    /// The locked part of
    /// [`commit_transactional_offsets`](Self::commit_transactional_offsets).
    fn commit_transactional_and_append(
        &self,
        request: &TxnOffsetCommitRequest,
    ) -> Result<(PartitionResults, Vec<CommitWait>), GroupError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock()?;
        let partition = inner.core.partition_for(&request.group_id);
        catch_up(&mut inner.core, &self.log, partition, now_ms);
        let result = inner.core.commit_transactional_offsets(request, now_ms);
        // Validation writes no plain record; this answers nothing parked.
        let _nothing_to_append = inner.flush(&self.log);
        let results = match result {
            Ok(results) => results,
            Err(error) => {
                inner.core.discard_staged();
                return Err(error);
            }
        };
        let Some(append) = inner.core.transactional_append() else {
            return Ok((results, Vec::new()));
        };
        let mut log = lock(&self.log);
        let appended = log.append_transactional(
            append.partition,
            append.producer_id,
            append.producer_epoch,
            &append.records,
        );
        match appended {
            Ok(last_offset) => {
                inner.core.place_transactional(last_offset);
                let wait = log.wait_committed(append.partition, last_offset);
                Ok((results, vec![wait]))
            }
            Err(source) => {
                tracing::warn!(partition, %source, "appending a transactional offset commit to __consumer_offsets failed");
                inner.core.discard_staged();
                Err(GroupError::LogAppendFailed { source })
            }
        }
    }

    /// The broker wrote the marker ending the transaction of `producer_id`
    /// at `marker_offset` of `__consumer_offsets` partition `partition`
    /// (WriteTxnMarkers): see [`CoordinatorCore::complete_transaction`].
    /// It takes effect at once if the log has committed the marker (as it
    /// has when the broker calls this after its `acks=-1` append), else
    /// when the high watermark passes it (the next OffsetFetch, commit or
    /// timer tick). Idempotent.
    pub fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: i64,
    ) -> Result<(), GroupError> {
        self.with_core(|inner, now_ms| {
            inner
                .core
                .complete_transaction(partition, producer_id, commit, marker_offset)?;
            catch_up(&mut inner.core, &self.log, partition, now_ms);
            Ok(())
        })
    }

    /// How many transactions hold offsets that wait for their marker.
    pub fn open_transactions(&self) -> usize {
        self.lock()
            .map_or(0, |inner| inner.core.open_transactions())
    }

    /// OffsetDelete.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
    ) -> Result<PartitionResults, GroupError> {
        self.with_core(|inner, now_ms| inner.core.delete_offsets(group_id, topics, now_ms))
    }

    /// DeleteGroups.
    pub fn delete_groups(&self, group_ids: &[String]) -> Result<GroupResults, GroupError> {
        self.with_core(|inner, now_ms| Ok(inner.core.delete_groups(group_ids, now_ms)))
    }

    /// ListGroups.
    pub fn list_groups(&self, states: &[GroupState]) -> Result<Vec<GroupListing>, GroupError> {
        Ok(self.lock()?.core.list_groups(states))
    }

    /// DescribeGroups.
    pub fn describe_groups(
        &self,
        group_ids: &[String],
    ) -> Vec<Result<GroupDescription, GroupError>> {
        let inner = match self.lock() {
            Ok(inner) => inner,
            Err(offline) => {
                return group_ids.iter().map(|_| Err(offline.clone())).collect();
            }
        };
        group_ids
            .iter()
            .map(|group_id| inner.core.describe_group(group_id))
            .collect()
    }

    /// Removes the offsets of deleted topics.
    pub fn remove_topic_offsets(&self, topics: &[String]) -> Result<(), GroupError> {
        self.with_core(|inner, _| {
            inner.core.remove_topic_offsets(topics);
            Ok(())
        })
    }

    /// Runs `change` on the log (for administration and tests).
    pub fn with_log_mut<T>(&self, change: impl FnOnce(&mut L) -> T) -> T {
        change(&mut lock(&self.log))
    }

    /// Runs `read` on the log (for inspection and tests).
    pub fn with_log<T>(&self, read: impl FnOnce(&L) -> T) -> T {
        read(&lock(&self.log))
    }
}
