//! The [`Consumer`]: Kafka's poll model over the sans-IO fetcher and the
//! group membership.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use futures::{FutureExt, Stream};
use strom_client::{ClientError, Cluster};
use strom_protocol::kafka::messages::{ApiKey, FetchRequest, FetchResponse};
use strom_protocol::{Request, Response};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::assignor::RebalanceProtocol;
use crate::config::{ConsumerConfig, OffsetReset};
use crate::coordinator::{GroupCoordinator, JoinOutcome};
use crate::error::ConsumerError;
use crate::fetcher::{FetchPlan, FetchSettings, Fetcher, Position};
use crate::offsets::{self, CommitIdentity, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::record::{ConsumerRecord, OffsetAndMetadata, TopicPartition};
use crate::topic_ids::{self, FETCH_TOPIC_ID_VERSION};
use crate::versions::ApiVersionCaps;

/// Callbacks around rebalances, called from inside `poll`.
///
/// `on_partitions_revoked` runs before the partitions are given up and may
/// return offsets, which the consumer commits synchronously before it lets
/// go of the partitions: the place for an application that commits by hand.
pub trait RebalanceListener: Send {
    /// Partitions are about to be revoked; returns offsets to commit first.
    fn on_partitions_revoked(
        &mut self,
        revoked: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        let _ = revoked;
        BTreeMap::new()
    }

    /// Partitions were assigned (with the cooperative protocol: only the
    /// newly added ones).
    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        let _ = assigned;
    }

    /// Partitions were lost without a chance to commit (the member was
    /// fenced or timed out).
    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        let _ = lost;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SubscriptionMode {
    None,
    Topics(Vec<String>),
    Manual,
}

type FetchResult = (FetchPlan, Result<FetchResponse, ClientError>);

type JoinResult = Result<JoinOutcome, ConsumerError>;

/// A JoinGroup/SyncGroup round running in its own task while `poll` goes on
/// (the task is aborted if the consumer drops it).
struct PendingJoin {
    task: JoinHandle<JoinResult>,
    /// The answer, once received while waiting in `poll`.
    ready: Option<JoinResult>,
    /// The partitions owned when the join started.
    owned: Vec<TopicPartition>,
}

impl PendingJoin {
    /// The join's result if it has finished.
    fn take_result(&mut self) -> Option<JoinResult> {
        if let Some(result) = self.ready.take() {
            return Some(result);
        }
        (&mut self.task).now_or_never().map(join_result)
    }

    /// Waits for the join's answer (keeps it for [`PendingJoin::take_result`]).
    async fn finished(&mut self) {
        if self.ready.is_none() {
            self.ready = Some(join_result((&mut self.task).await));
        }
    }
}

/// A join task's answer; a task that panicked or was aborted has none.
fn join_result(joined: Result<JoinResult, tokio::task::JoinError>) -> JoinResult {
    joined.unwrap_or(Err(ConsumerError::Timeout {
        operation: "group join (its task ended without an answer)",
    }))
}

impl Drop for PendingJoin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Kafka consumer.
pub struct Consumer {
    config: ConsumerConfig,
    cluster: Cluster,
    fetcher: Fetcher,
    mode: SubscriptionMode,
    group: Option<GroupCoordinator>,
    listener: Option<Box<dyn RebalanceListener>>,
    results_sender: mpsc::UnboundedSender<FetchResult>,
    results: mpsc::UnboundedReceiver<FetchResult>,
    next_auto_commit: Instant,
    last_metadata_retry: Option<Instant>,
    pending_join: Option<PendingJoin>,
    closed: bool,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Consumer")
            .field("group_id", &self.config.group_id)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Consumer {
    /// Connects to the cluster. Nothing is fetched until `subscribe` or
    /// `assign` and `poll`.
    pub async fn new(config: ConsumerConfig) -> Result<Consumer, ConsumerError> {
        config.validate()?;
        let cluster = Cluster::connect(config.client.clone()).await?;
        let group = config
            .group_id
            .clone()
            .map(|group_id| GroupCoordinator::new(cluster.clone(), config.clone(), group_id));
        let (results_sender, results) = mpsc::unbounded_channel();
        Ok(Consumer {
            fetcher: Fetcher::new(FetchSettings::from_config(&config)),
            next_auto_commit: Instant::now() + config.auto_commit_interval,
            config,
            cluster,
            mode: SubscriptionMode::None,
            group,
            listener: None,
            results_sender,
            results,
            last_metadata_retry: None,
            pending_join: None,
            closed: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The cluster handle (shared with other clients if wanted).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Subscribes to `topics` with group management (needs `group.id`).
    pub fn subscribe<S: Into<String>>(
        &mut self,
        topics: impl IntoIterator<Item = S>,
    ) -> Result<(), ConsumerError> {
        let group = self.group.as_ref().ok_or(ConsumerError::NoGroupId)?;
        if self.mode == SubscriptionMode::Manual {
            return Err(ConsumerError::IllegalSubscriptionState);
        }
        let mut topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        topics.sort();
        topics.dedup();
        group.request_rejoin();
        self.mode = SubscriptionMode::Topics(topics);
        Ok(())
    }

    /// Subscribes with a rebalance listener.
    pub fn subscribe_with_listener<S: Into<String>>(
        &mut self,
        topics: impl IntoIterator<Item = S>,
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), ConsumerError> {
        self.subscribe(topics)?;
        self.listener = Some(Box::new(listener));
        Ok(())
    }

    /// Assigns partitions by hand (no group management). Positions start
    /// at the committed offset when `group.id` is set, else by
    /// `auto.offset.reset`.
    pub fn assign(
        &mut self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<(), ConsumerError> {
        if matches!(self.mode, SubscriptionMode::Topics(_)) {
            return Err(ConsumerError::IllegalSubscriptionState);
        }
        self.mode = SubscriptionMode::Manual;
        let initial = self.initial_position();
        self.fetcher.assign(partitions, initial);
        Ok(())
    }

    fn initial_position(&self) -> Position {
        if self.group.is_some() {
            Position::AwaitingCommitted
        } else {
            Position::AwaitingReset(self.config.auto_offset_reset)
        }
    }

    /// Drops the subscription or manual assignment (revoking and leaving
    /// nothing behind; the group membership is kept for a later subscribe).
    pub async fn unsubscribe(&mut self) -> Result<(), ConsumerError> {
        self.pending_join = None;
        if matches!(self.mode, SubscriptionMode::Topics(_)) {
            let owned = self.fetcher.assignment();
            self.revoke(&owned).await;
        }
        self.fetcher.assign(Vec::new(), Position::AwaitingCommitted);
        self.mode = SubscriptionMode::None;
        Ok(())
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.fetcher.assignment()
    }

    /// Whether this member is in the middle of a group rebalance (its
    /// JoinGroup/SyncGroup round has started and not finished). Meanwhile
    /// `poll` keeps returning records of the partitions the member owns
    /// (none after an eager member's revocation) and commits fail with
    /// [`ConsumerError::RebalanceInProgress`].
    pub fn rebalance_in_progress(&self) -> bool {
        self.pending_join.is_some()
    }

    /// The subscribed topics (empty with a manual assignment).
    pub fn subscription(&self) -> Vec<String> {
        match &self.mode {
            SubscriptionMode::Topics(topics) => topics.clone(),
            _ => Vec::new(),
        }
    }

    /// Fetches records, waiting up to `timeout` for some. Also runs the
    /// group protocol (joins, rebalance callbacks), auto-commits and offset
    /// resets. Returns at most `max.poll.records` records; the next poll's
    /// records are already being fetched when it returns.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, ConsumerError> {
        if self.closed {
            return Err(ConsumerError::Closed);
        }
        if self.mode == SubscriptionMode::None {
            return Err(ConsumerError::IllegalSubscriptionState);
        }
        let deadline = Instant::now() + timeout;
        if let Some(group) = &self.group {
            group.polled();
        }
        loop {
            if let Some(error) = self.fetcher.take_error() {
                return Err(error);
            }
            self.maybe_rejoin().await?;
            // While the group rebalances, the partitions the member owns keep
            // flowing (KIP-429; an eager member has revoked them all before
            // it joined). Commits wait for the rebalance to finish: they
            // would be refused, and what moves is committed through the
            // revocation before it goes.
            if self.pending_join.is_none() {
                self.maybe_auto_commit().await;
            }
            self.update_positions().await?;
            if self.fetcher.has_buffered() {
                let records = self.fetcher.drain(self.config.max_poll_records);
                self.send_fetches().await;
                return Ok(records);
            }
            self.send_fetches().await;
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let wait = (deadline - now).min(Duration::from_millis(100));
            if let Ok(Some(result)) = self.wait_for_fetch_or_join(wait).await {
                self.handle_fetch_result(result).await;
                while let Ok(result) = self.results.try_recv() {
                    self.handle_fetch_result(result).await;
                }
            }
        }
    }

    /// The records as a stream (polling in rounds of up to
    /// `fetch.max.wait.ms`). Errors are yielded and the stream continues.
    pub fn stream(&mut self) -> impl Stream<Item = Result<ConsumerRecord, ConsumerError>> + '_ {
        let round = self.config.fetch_max_wait.max(Duration::from_millis(10));
        futures::stream::unfold(
            (self, VecDeque::new()),
            move |(consumer, mut buffer)| async move {
                loop {
                    if let Some(record) = buffer.pop_front() {
                        return Some((Ok(record), (consumer, buffer)));
                    }
                    match consumer.poll(round).await {
                        Ok(records) => buffer.extend(records),
                        Err(ConsumerError::Closed) => return None,
                        Err(error) => return Some((Err(error), (consumer, buffer))),
                    }
                }
            },
        )
    }

    /// Sets the next fetch offset of `partition`.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), ConsumerError> {
        self.fetcher.seek(partition, Position::At(offset))
    }

    /// Moves `partitions` to their log start (looked up at the next poll).
    pub fn seek_to_beginning(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<(), ConsumerError> {
        for partition in partitions {
            self.fetcher
                .seek(partition, Position::AwaitingReset(OffsetReset::Earliest))?;
        }
        Ok(())
    }

    /// Moves `partitions` to their log end (looked up at the next poll).
    pub fn seek_to_end(&mut self, partitions: &[TopicPartition]) -> Result<(), ConsumerError> {
        for partition in partitions {
            self.fetcher
                .seek(partition, Position::AwaitingReset(OffsetReset::Latest))?;
        }
        Ok(())
    }

    /// The offset of the next record to fetch from `partition`, looking it
    /// up (committed offset or reset) if not known yet.
    pub async fn position(&mut self, partition: &TopicPartition) -> Result<i64, ConsumerError> {
        if !matches!(self.fetcher.position(partition), Some(Position::At(_))) {
            self.update_positions().await?;
        }
        match self.fetcher.position(partition) {
            Some(Position::At(offset)) => Ok(offset),
            Some(_) => Err(ConsumerError::Timeout {
                operation: "position lookup",
            }),
            None => Err(ConsumerError::NotAssigned {
                partition: partition.clone(),
            }),
        }
    }

    /// The committed offsets of `partitions` (`None` where none).
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>, ConsumerError> {
        let group = self.group.as_ref().ok_or(ConsumerError::NoGroupId)?;
        let connection = group.coordinator().await?;
        offsets::fetch_committed(
            &connection,
            &self.config.api_version_caps,
            group.group_id(),
            partitions,
            self.config.client.request_timeout,
        )
        .await
    }

    /// The incremental fetch session (KIP-227) id held with each broker
    /// fetched from; 0 where the broker keeps no session.
    pub fn fetch_session_ids(&self) -> BTreeMap<i32, i32> {
        self.fetcher.session_ids()
    }

    /// Stops fetching `partitions` (positions are kept).
    pub fn pause(&mut self, partitions: &[TopicPartition]) -> Result<(), ConsumerError> {
        for partition in partitions {
            self.fetcher.set_paused(partition, true)?;
        }
        Ok(())
    }

    /// Resumes fetching `partitions`.
    pub fn resume(&mut self, partitions: &[TopicPartition]) -> Result<(), ConsumerError> {
        for partition in partitions {
            self.fetcher.set_paused(partition, false)?;
        }
        Ok(())
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.fetcher.paused()
    }

    /// The last high watermark seen for `partition` (for lag).
    pub fn high_watermark(&self, partition: &TopicPartition) -> Option<i64> {
        self.fetcher.high_watermark(partition)
    }

    fn consumed_offsets(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.fetcher
            .consumed_offsets()
            .into_iter()
            .map(|(tp, offset)| (tp, OffsetAndMetadata::new(offset)))
            .collect()
    }

    fn commit_target(&self) -> Result<(&GroupCoordinator, CommitIdentity), ConsumerError> {
        let group = self.group.as_ref().ok_or(ConsumerError::NoGroupId)?;
        let mut identity = group.identity();
        if !matches!(self.mode, SubscriptionMode::Topics(_)) {
            identity.generation_id = -1;
            identity.member_id.clear();
        } else if self.pending_join.is_some() {
            // As Kafka's consumer: no commit with a generation that is being
            // replaced; the application retries after the rebalance.
            return Err(ConsumerError::RebalanceInProgress);
        }
        Ok((group, identity))
    }

    /// Commits the positions of every assigned partition and waits.
    pub async fn commit_sync(&mut self) -> Result<(), ConsumerError> {
        let offsets = self.consumed_offsets();
        self.commit_offsets_sync(&offsets).await
    }

    /// Commits `offsets` (with their metadata) and waits.
    pub async fn commit_offsets_sync(
        &self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<(), ConsumerError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let (group, identity) = self.commit_target()?;
        let connection = group.coordinator().await?;
        let result = offsets::commit(
            &connection,
            &self.config.api_version_caps,
            &identity,
            offsets,
            self.config.client.request_timeout,
        )
        .await;
        match &result {
            Err(ConsumerError::Group {
                code:
                    strom_protocol::ErrorCode::NotCoordinator
                    | strom_protocol::ErrorCode::CoordinatorNotAvailable,
                ..
            }) => group.coordinator_lost(),
            // The group rebalances without this member so far: join it.
            Err(ConsumerError::RebalanceInProgress) => group.request_rejoin(),
            _ => {}
        }
        result
    }

    /// Commits `offsets` without waiting: the request is queued when this
    /// returns and the handle yields its outcome.
    pub async fn commit_async(
        &self,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<JoinHandle<Result<(), ConsumerError>>, ConsumerError> {
        let (group, identity) = self.commit_target()?;
        let connection = group.coordinator().await?;
        let timeout = self.config.client.request_timeout;
        let caps = self.config.api_version_caps.clone();
        Ok(tokio::spawn(async move {
            offsets::commit(&connection, &caps, &identity, &offsets, timeout).await
        }))
    }

    /// Commits the positions of every assigned partition without waiting.
    pub async fn commit_positions_async(
        &self,
    ) -> Result<JoinHandle<Result<(), ConsumerError>>, ConsumerError> {
        self.commit_async(self.consumed_offsets()).await
    }

    /// Commits (with auto-commit), revokes the partitions through the
    /// listener, leaves the group and closes the connections.
    pub async fn close(&mut self) -> Result<(), ConsumerError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.pending_join = None;
        let mut result = Ok(());
        if matches!(self.mode, SubscriptionMode::Topics(_)) {
            let owned = self.fetcher.assignment();
            self.revoke(&owned).await;
        } else if self.group.is_some() && self.config.enable_auto_commit {
            result = self.commit_sync().await;
        }
        if let Some(group) = &self.group {
            if let Err(error) = group.leave().await {
                tracing::debug!(%error, "LeaveGroup on close failed");
            }
        }
        self.cluster.close();
        result
    }

    /// Commits (auto-commit and the listener's offsets) and calls the
    /// listener before `partitions` are given up.
    async fn revoke(&mut self, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        if self.config.enable_auto_commit {
            let revoked: BTreeSet<&TopicPartition> = partitions.iter().collect();
            let offsets: BTreeMap<_, _> = self
                .consumed_offsets()
                .into_iter()
                .filter(|(tp, _)| revoked.contains(tp))
                .collect();
            if let Err(error) = self.commit_offsets_sync(&offsets).await {
                tracing::warn!(%error, "commit before revocation failed");
            }
        }
        if let Some(listener) = self.listener.as_mut() {
            let offsets = listener.on_partitions_revoked(partitions);
            if let Err(error) = self.commit_offsets_sync(&offsets).await {
                tracing::warn!(%error, "listener commit before revocation failed");
            }
        }
    }

    /// Waits up to `wait` for a fetch answer; `Ok(None)` when a pending
    /// join finished first, `Err(_)` when the time ran out.
    async fn wait_for_fetch_or_join(
        &mut self,
        wait: Duration,
    ) -> Result<Option<FetchResult>, tokio::time::error::Elapsed> {
        let Consumer {
            results,
            pending_join,
            ..
        } = self;
        tokio::time::timeout(wait, async {
            match pending_join.as_mut() {
                Some(pending) => tokio::select! {
                    result = results.recv() => result,
                    () = pending.finished() => None,
                },
                None => results.recv().await,
            }
        })
        .await
    }

    /// Starts a join when the group needs one, and applies a finished join:
    /// `poll` does not wait for the rebalance to end.
    async fn maybe_rejoin(&mut self) -> Result<(), ConsumerError> {
        if let Some(pending) = self.pending_join.as_mut() {
            let Some(result) = pending.take_result() else {
                return Ok(());
            };
            let owned = std::mem::take(&mut pending.owned);
            self.pending_join = None;
            let outcome = result?;
            // A "lost" flag raised by a heartbeat of the old generation while
            // the join ran is about partitions this outcome replaces.
            if let Some(group) = &self.group {
                group.take_lost();
            }
            return self.apply_join(outcome, owned).await;
        }
        let SubscriptionMode::Topics(topics) = &self.mode else {
            return Ok(());
        };
        let topics = topics.clone();
        let Some(group) = &self.group else {
            return Ok(());
        };
        if group.take_lost() {
            let lost = self.fetcher.assignment();
            if let Some(listener) = self.listener.as_mut() {
                listener.on_partitions_lost(&lost);
            }
            self.fetcher.assign(Vec::new(), Position::AwaitingCommitted);
        }
        let Some(group) = &self.group else {
            return Ok(());
        };
        if !group.needs_rejoin() {
            return Ok(());
        }
        let eager = group.rebalance_protocol() == RebalanceProtocol::Eager;
        let owned = self.fetcher.assignment();
        if eager && !owned.is_empty() {
            self.revoke(&owned).await;
            self.fetcher.assign(Vec::new(), Position::AwaitingCommitted);
        }
        let owned = self.fetcher.assignment();
        let Some(group) = &self.group else {
            return Ok(());
        };
        let deadline = Instant::now() + self.config.default_api_timeout;
        let joining = group.clone();
        let joining_owned = owned.clone();
        let task =
            tokio::spawn(async move { joining.join(&topics, &joining_owned, deadline).await });
        self.pending_join = Some(PendingJoin {
            task,
            ready: None,
            owned,
        });
        Ok(())
    }

    /// Applies a finished join: revokes what was lost (and asks for the
    /// cooperative follow-up rejoin), adds what was gained.
    async fn apply_join(
        &mut self,
        outcome: JoinOutcome,
        owned: Vec<TopicPartition>,
    ) -> Result<(), ConsumerError> {
        let assigned: BTreeSet<TopicPartition> = outcome.assigned.into_iter().collect();
        let owned: BTreeSet<TopicPartition> = owned.into_iter().collect();
        let revoked: Vec<TopicPartition> = owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&owned).cloned().collect();
        tracing::debug!(
            generation = outcome.generation_id,
            ?added,
            ?revoked,
            "rebalance done"
        );
        if !revoked.is_empty() {
            self.revoke(&revoked).await;
            self.fetcher.remove(&revoked);
            if let Some(group) = &self.group {
                group.request_rejoin();
            }
        }
        self.fetcher
            .add(added.iter().cloned(), Position::AwaitingCommitted);
        if let Some(listener) = self.listener.as_mut() {
            listener.on_partitions_assigned(&added);
        }
        Ok(())
    }

    /// Commits the consumed offsets when auto-commit is due (`poll` does
    /// not call it while a join is pending: commits wait for the new
    /// generation).
    async fn maybe_auto_commit(&mut self) {
        if !self.config.enable_auto_commit || self.group.is_none() {
            return;
        }
        let now = Instant::now();
        if now < self.next_auto_commit {
            return;
        }
        self.next_auto_commit = now + self.config.auto_commit_interval;
        let offsets = self.consumed_offsets();
        if let Err(error) = self.commit_offsets_sync(&offsets).await {
            tracing::debug!(%error, "auto-commit failed");
        }
    }

    async fn update_positions(&mut self) -> Result<(), ConsumerError> {
        let awaiting_committed = self.fetcher.awaiting(true);
        if !awaiting_committed.is_empty() {
            let committed = match &self.group {
                Some(_) => self.committed(&awaiting_committed).await?,
                None => BTreeMap::new(),
            };
            for tp in awaiting_committed {
                let position = match committed.get(&tp).cloned().flatten() {
                    Some(offset) => Position::At(offset.offset),
                    None => Position::AwaitingReset(self.config.auto_offset_reset),
                };
                self.fetcher.seek(&tp, position)?;
            }
        }
        let mut lookups = Vec::new();
        for tp in self.fetcher.awaiting(false) {
            match self.fetcher.position(&tp) {
                Some(Position::AwaitingReset(OffsetReset::Earliest)) => {
                    lookups.push((tp, EARLIEST_TIMESTAMP))
                }
                Some(Position::AwaitingReset(OffsetReset::Latest)) => {
                    lookups.push((tp, LATEST_TIMESTAMP))
                }
                Some(Position::AwaitingReset(OffsetReset::None)) => {
                    return Err(ConsumerError::NoOffsetForPartition { partition: tp })
                }
                _ => {}
            }
        }
        if lookups.is_empty() {
            return Ok(());
        }
        let found =
            offsets::list_offsets(&self.cluster, &lookups, self.config.isolation_level).await?;
        for (tp, offset) in found {
            if self.fetcher.is_assigned(&tp) {
                self.fetcher.seek(&tp, Position::At(offset))?;
            }
        }
        Ok(())
    }

    async fn send_fetches(&mut self) {
        let metadata = self.cluster.metadata();
        let (plans, leaderless) = self.fetcher.prepare_fetches(|tp| {
            let partition = metadata.topics.get(&*tp.topic)?.partition(tp.partition)?;
            partition
                .leader
                .map(|leader| (leader, partition.leader_epoch))
        });
        if !leaderless.is_empty() {
            self.refresh_metadata_for(&leaderless).await;
        }
        for mut plan in plans {
            let request = std::mem::take(&mut plan.request);
            let cluster = self.cluster.clone();
            let sender = self.results_sender.clone();
            let timeout = self.config.client.request_timeout + self.config.fetch_max_wait;
            let caps = self.config.api_version_caps.clone();
            tokio::spawn(async move {
                let result = send_fetch(&cluster, &caps, plan.broker_id, request, timeout).await;
                // The receiver is gone only when the consumer was dropped.
                let _ = sender.send((plan, result));
            });
        }
    }

    async fn refresh_metadata_for(&mut self, partitions: &[TopicPartition]) {
        let now = Instant::now();
        if self
            .last_metadata_retry
            .is_some_and(|at| now.saturating_duration_since(at) < self.config.client.retry_backoff)
        {
            return;
        }
        self.last_metadata_retry = Some(now);
        let topics: BTreeSet<&str> = partitions.iter().map(|tp| &*tp.topic).collect();
        self.cluster.request_metadata_refresh();
        for topic in topics {
            if let Err(error) = self.cluster.topic(topic).await {
                tracing::debug!(%topic, %error, "no metadata yet");
            }
        }
    }

    async fn handle_fetch_result(&mut self, (plan, result): FetchResult) {
        match result {
            Ok(response) => {
                let outcome = self.fetcher.handle_response(&plan, response);
                if outcome.refresh_metadata {
                    self.cluster.request_metadata_refresh();
                    let partitions: Vec<TopicPartition> = plan.offsets.keys().cloned().collect();
                    self.refresh_metadata_for(&partitions).await;
                }
            }
            Err(error) => {
                tracing::debug!(broker = plan.broker_id, %error, "fetch failed");
                self.fetcher.handle_failure(&plan);
                self.cluster.request_metadata_refresh();
            }
        }
    }
}

async fn send_fetch(
    cluster: &Cluster,
    caps: &ApiVersionCaps,
    broker_id: i32,
    mut request: FetchRequest,
    timeout: Duration,
) -> Result<FetchResponse, ClientError> {
    let connection = cluster.broker_connection(broker_id).await?;
    let mut version = caps.version(&connection, ApiKey::Fetch)?;
    let metadata = cluster.metadata();
    if version >= FETCH_TOPIC_ID_VERSION
        && !topic_ids::assign_topic_ids(&mut request, &topic_ids::ids_by_name(&metadata))
    {
        version = FETCH_TOPIC_ID_VERSION - 1;
    }
    match connection
        .submit_at(Request::Fetch(request), version, timeout)?
        .await?
    {
        Response::Fetch(mut response) => {
            if version >= FETCH_TOPIC_ID_VERSION {
                let metadata = cluster.metadata();
                topic_ids::restore_topic_names(&mut response, &topic_ids::names_by_id(&metadata));
            }
            Ok(response)
        }
        _ => Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::Fetch as i16,
        }),
    }
}
