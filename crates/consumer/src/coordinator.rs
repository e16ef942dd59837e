//! Group membership, the consumer side (Kafka's ConsumerCoordinator):
//! FindCoordinator, JoinGroup with the MEMBER_ID_REQUIRED round trip,
//! SyncGroup with the leader computing the assignment, a heartbeat task that
//! runs independently of `poll`, LeaveGroup, and the member identity used for
//! commits.
//!
//! Joining is started by `poll` (as in Java) and runs as a task of its own,
//! so that `poll` keeps its timeout while the group rebalances; the
//! heartbeat task only flags a needed rejoin. It also enforces
//! `max.poll.interval.ms`: a member whose application stopped polling leaves
//! the group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use strom_client::{ClientError, Cluster, Connection};
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::leave_group_request::MemberIdentity;
use strom_protocol::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strom_protocol::kafka::messages::{
    ApiKey, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    SyncGroupRequest,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request, Response};
use tokio::task::JoinHandle;

use crate::assignor::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, Assignment,
    RebalanceProtocol, Subscription, ASSIGNMENT_VERSION, SUBSCRIPTION_VERSION,
};
use crate::config::{AssignmentStrategy, ConsumerConfig};
use crate::error::ConsumerError;
use crate::membership::{HeartbeatTimer, MemberEvent, MemberState};
use crate::offsets::CommitIdentity;
use crate::record::TopicPartition;

/// The member's shared state (the consumer and the heartbeat task).
#[derive(Debug)]
struct Shared {
    state: MemberState,
    member_id: String,
    generation_id: i32,
    coordinator: Option<i32>,
    rejoin_needed: bool,
    /// Set when the member was fenced or timed out: its partitions are lost
    /// rather than revoked.
    lost: bool,
    timer: HeartbeatTimer,
    stopped: bool,
}

impl Shared {
    fn apply(&mut self, event: MemberEvent) {
        match self.state.on(event) {
            Ok(next) => self.state = next,
            Err(error) => {
                debug_assert!(false, "{error}");
                self.state = MemberState::Unjoined;
            }
        }
    }

    fn reset_generation(&mut self, forget_member_id: bool) {
        self.apply(MemberEvent::Reset);
        self.generation_id = -1;
        if forget_member_id {
            self.member_id.clear();
        }
        self.rejoin_needed = true;
    }
}

/// The outcome of a completed rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinOutcome {
    /// The generation joined.
    pub generation_id: i32,
    /// The protocol the group chose.
    pub strategy: AssignmentStrategy,
    /// This member's assignment.
    pub assigned: Vec<TopicPartition>,
}

/// The consumer's group membership.
///
/// Clones share the membership (a join runs on a clone in its own task);
/// the heartbeat task stops when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct GroupCoordinator {
    cluster: Cluster,
    config: ConsumerConfig,
    group_id: String,
    shared: Arc<Mutex<Shared>>,
    heartbeat: Arc<HeartbeatTask>,
}

/// The heartbeat task, aborted when dropped.
#[derive(Debug)]
struct HeartbeatTask(JoinHandle<()>);

impl HeartbeatTask {
    fn abort(&self) {
        self.0.abort();
    }
}

impl Drop for HeartbeatTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The membership. A panic while it was locked may have left state,
/// generation and member id out of step, so it is not reused as it is: it
/// is reset as after a fencing (the partitions count as lost, the member
/// rejoins as a new one), and the error is logged.
fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|poisoned: PoisonError<_>| {
        let mut membership = poisoned.into_inner();
        tracing::error!("a thread panicked holding the consumer's group membership; rejoining");
        membership.reset_generation(true);
        membership.lost = true;
        shared.clear_poison();
        membership
    })
}

fn str_bytes(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

impl GroupCoordinator {
    /// Membership of `group_id`; starts the heartbeat task.
    pub fn new(cluster: Cluster, config: ConsumerConfig, group_id: String) -> GroupCoordinator {
        let shared = Arc::new(Mutex::new(Shared {
            state: MemberState::Unjoined,
            member_id: String::new(),
            generation_id: -1,
            coordinator: None,
            rejoin_needed: true,
            lost: false,
            timer: HeartbeatTimer::new(
                config.session_timeout,
                config.heartbeat_interval,
                config.max_poll_interval,
                Instant::now(),
            ),
            stopped: false,
        }));
        let heartbeat = tokio::spawn(heartbeat_loop(
            cluster.clone(),
            config.clone(),
            group_id.clone(),
            Arc::clone(&shared),
        ));
        GroupCoordinator {
            cluster,
            config,
            group_id,
            shared,
            heartbeat: Arc::new(HeartbeatTask(heartbeat)),
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The member id ("" before the first join).
    pub fn member_id(&self) -> String {
        lock(&self.shared).member_id.clone()
    }

    /// The current generation (-1 outside a generation).
    pub fn generation_id(&self) -> i32 {
        lock(&self.shared).generation_id
    }

    /// Whether the member must (re)join before fetching.
    pub fn needs_rejoin(&self) -> bool {
        let shared = lock(&self.shared);
        shared.rejoin_needed || shared.state != MemberState::Stable
    }

    /// Asks for a rejoin at the next poll (subscription change, cooperative
    /// follow-up).
    pub fn request_rejoin(&self) {
        lock(&self.shared).rejoin_needed = true;
    }

    /// Takes the "partitions lost" flag (fenced or timed out member).
    pub fn take_lost(&self) -> bool {
        std::mem::take(&mut lock(&self.shared).lost)
    }

    /// Records an application poll (for `max.poll.interval.ms`).
    pub fn polled(&self) {
        lock(&self.shared).timer.polled(Instant::now());
    }

    /// The identity sent with commits.
    pub fn identity(&self) -> CommitIdentity {
        let shared = lock(&self.shared);
        CommitIdentity {
            group_id: self.group_id.clone(),
            generation_id: shared.generation_id,
            member_id: shared.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    /// The rebalance protocol: cooperative only if every configured
    /// strategy is cooperative (Java's rule).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        if self
            .config
            .assignment_strategies
            .iter()
            .all(|s| s.rebalance_protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        }
    }

    /// Marks the coordinator unknown (after NOT_COORDINATOR or a lost
    /// connection).
    pub fn coordinator_lost(&self) {
        lock(&self.shared).coordinator = None;
    }

    /// A connection to the group coordinator, looking it up if unknown (a
    /// connection of its own: see [`Cluster::coordinator_connection`]).
    pub async fn coordinator(&self) -> Result<Connection, ConsumerError> {
        let known = lock(&self.shared).coordinator;
        let broker_id = match known {
            Some(broker_id) => broker_id,
            None => {
                let broker_id = self.cluster.find_coordinator(&self.group_id, 0).await?;
                lock(&self.shared).coordinator = Some(broker_id);
                broker_id
            }
        };
        self.cluster
            .coordinator_connection(broker_id)
            .await
            .inspect_err(|_| {
                self.coordinator_lost();
            })
            .map_err(ConsumerError::from)
    }

    /// Joins (or rejoins) the group with `topics`, reporting `owned` as the
    /// partitions held now, and returns the assignment. Retries retriable
    /// errors until `deadline`.
    pub async fn join(
        &self,
        topics: &[String],
        owned: &[TopicPartition],
        deadline: Instant,
    ) -> Result<JoinOutcome, ConsumerError> {
        loop {
            match self.join_once(topics, owned).await {
                Ok(outcome) => return Ok(outcome),
                Err(error) if Instant::now() < deadline && retriable(&error) => {
                    tracing::debug!(group = %self.group_id, %error, "rejoining");
                    tokio::time::sleep(self.config.client.retry_backoff).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn join_once(
        &self,
        topics: &[String],
        owned: &[TopicPartition],
    ) -> Result<JoinOutcome, ConsumerError> {
        let connection = self.coordinator().await?;
        let response = self.send_join(&connection, topics, owned).await?;
        let strategy = response
            .protocol_name
            .as_ref()
            .and_then(|name| AssignmentStrategy::from_name(name.as_str()))
            .ok_or_else(|| ConsumerError::UnknownAssignor {
                name: response
                    .protocol_name
                    .as_ref()
                    .map(|name| name.as_str().to_owned())
                    .unwrap_or_default(),
            })?;
        let member_id = response.member_id.as_str().to_owned();
        let assignments = if response.leader.as_str() == member_id {
            self.leader_assign(strategy, &response).await?
        } else {
            Vec::new()
        };
        let assignment = self
            .send_sync(&connection, response.generation_id, strategy, assignments)
            .await?;
        let mut shared = lock(&self.shared);
        shared.apply(MemberEvent::Synced);
        shared.rejoin_needed = false;
        shared.timer.reset_session(Instant::now());
        Ok(JoinOutcome {
            generation_id: response.generation_id,
            strategy,
            assigned: assignment.partitions,
        })
    }

    async fn send_join(
        &self,
        connection: &Connection,
        topics: &[String],
        owned: &[TopicPartition],
    ) -> Result<JoinGroupResponse, ConsumerError> {
        let version = self
            .config
            .api_version_caps
            .version(connection, ApiKey::JoinGroup)?;
        let timeout = self
            .config
            .client
            .request_timeout
            .max(self.config.max_poll_interval + Duration::from_secs(5));
        loop {
            let (member_id, generation_id) = {
                let mut shared = lock(&self.shared);
                shared.apply(MemberEvent::JoinSent);
                (shared.member_id.clone(), shared.generation_id)
            };
            let request = self.join_request(version, &member_id, generation_id, topics, owned);
            tracing::debug!(group = %self.group_id, version, %member_id, "JoinGroup");
            let response = self
                .exchange(connection, request.into(), version, timeout)
                .await?;
            let Response::JoinGroup(response) = response else {
                return Err(unexpected(ApiKey::JoinGroup));
            };
            let mut shared = lock(&self.shared);
            match ErrorCode::from_code(response.error_code) {
                ErrorCode::None => {
                    shared.apply(MemberEvent::Joined);
                    shared.member_id = response.member_id.as_str().to_owned();
                    shared.generation_id = response.generation_id;
                    return Ok(response);
                }
                ErrorCode::MemberIdRequired => {
                    shared.member_id = response.member_id.as_str().to_owned();
                }
                ErrorCode::UnknownMemberId => shared.reset_generation(true),
                code => {
                    shared.apply(MemberEvent::Reset);
                    if matches!(
                        code,
                        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable
                    ) {
                        shared.coordinator = None;
                    }
                    return Err(self.group_error("JoinGroup", code));
                }
            }
        }
    }

    fn join_request(
        &self,
        version: i16,
        member_id: &str,
        generation_id: i32,
        topics: &[String],
        owned: &[TopicPartition],
    ) -> JoinGroupRequest {
        let subscription = Subscription {
            topics: topics.to_vec(),
            user_data: None,
            owned_partitions: owned.to_vec(),
            generation_id,
            rack_id: self.config.client_rack.clone(),
            group_instance_id: None,
        };
        let metadata = encode_subscription(&subscription, SUBSCRIPTION_VERSION);
        let protocols = self
            .config
            .assignment_strategies
            .iter()
            .map(|strategy| {
                JoinGroupRequestProtocol::default()
                    .with_name(str_bytes(strategy.protocol_name()))
                    .with_metadata(metadata.clone())
            })
            .collect();
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group_id)))
            .with_session_timeout_ms(duration_ms_i32(self.config.session_timeout))
            .with_rebalance_timeout_ms(duration_ms_i32(self.config.max_poll_interval))
            .with_member_id(str_bytes(member_id))
            .with_protocol_type(str_bytes("consumer"))
            .with_protocols(protocols);
        if version >= 5 {
            request.group_instance_id = self.config.group_instance_id.as_deref().map(str_bytes);
        }
        request
    }

    async fn leader_assign(
        &self,
        strategy: AssignmentStrategy,
        response: &JoinGroupResponse,
    ) -> Result<Vec<SyncGroupRequestAssignment>, ConsumerError> {
        let mut members = BTreeMap::new();
        for member in &response.members {
            let mut subscription = decode_subscription(&member.metadata)?;
            subscription.group_instance_id = member
                .group_instance_id
                .as_ref()
                .map(|id| id.as_str().to_owned());
            members.insert(member.member_id.as_str().to_owned(), subscription);
        }
        let topics: BTreeSet<&String> = members.values().flat_map(|s| &s.topics).collect();
        let mut partitions_per_topic = BTreeMap::new();
        for topic in topics {
            match self.cluster.topic(topic).await {
                Ok(info) => {
                    partitions_per_topic.insert(topic.clone(), info.partitions.len() as i32);
                }
                Err(error) => tracing::debug!(%topic, %error, "topic left out of the assignment"),
            }
        }
        let assignment = strategy.assign(&partitions_per_topic, &members);
        tracing::debug!(group = %self.group_id, ?assignment, "leader computed assignment");
        Ok(members
            .keys()
            .map(|member_id| {
                let partitions = assignment.get(member_id).cloned().unwrap_or_default();
                SyncGroupRequestAssignment::default()
                    .with_member_id(str_bytes(member_id))
                    .with_assignment(encode_assignment(
                        &Assignment {
                            partitions,
                            user_data: None,
                        },
                        ASSIGNMENT_VERSION,
                    ))
            })
            .collect())
    }

    async fn send_sync(
        &self,
        connection: &Connection,
        generation_id: i32,
        strategy: AssignmentStrategy,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Assignment, ConsumerError> {
        let version = self
            .config
            .api_version_caps
            .version(connection, ApiKey::SyncGroup)?;
        let member_id = self.member_id();
        let mut request = SyncGroupRequest::default()
            .with_group_id(GroupId(str_bytes(&self.group_id)))
            .with_generation_id(generation_id)
            .with_member_id(str_bytes(&member_id))
            .with_protocol_type(Some(str_bytes("consumer")))
            .with_protocol_name(Some(str_bytes(strategy.protocol_name())))
            .with_assignments(assignments);
        if version >= 3 {
            request.group_instance_id = self.config.group_instance_id.as_deref().map(str_bytes);
        }
        let timeout = self.config.client.request_timeout;
        let response = self
            .exchange(connection, request.into(), version, timeout)
            .await?;
        let Response::SyncGroup(response) = response else {
            return Err(unexpected(ApiKey::SyncGroup));
        };
        match ErrorCode::from_code(response.error_code) {
            ErrorCode::None => decode_assignment(&response.assignment),
            code => {
                let mut shared = lock(&self.shared);
                match code {
                    ErrorCode::UnknownMemberId | ErrorCode::IllegalGeneration => {
                        shared.reset_generation(code == ErrorCode::UnknownMemberId)
                    }
                    ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                        shared.coordinator = None;
                        shared.apply(MemberEvent::Reset);
                    }
                    _ => shared.apply(MemberEvent::Reset),
                }
                Err(self.group_error("SyncGroup", code))
            }
        }
    }

    async fn exchange(
        &self,
        connection: &Connection,
        request: Request,
        version: i16,
        timeout: Duration,
    ) -> Result<Response, ConsumerError> {
        match connection.submit_at(request, version, timeout)?.await {
            Ok(response) => Ok(response),
            Err(error) => {
                let mut shared = lock(&self.shared);
                shared.coordinator = None;
                shared.apply(MemberEvent::Reset);
                Err(error.into())
            }
        }
    }

    fn group_error(&self, api: &'static str, code: ErrorCode) -> ConsumerError {
        ConsumerError::Group {
            group_id: self.group_id.clone(),
            api,
            code,
        }
    }

    /// Leaves the group (dynamic members only; a static member's partitions
    /// stay reserved until its session times out, as in Java) and stops
    /// heartbeating.
    pub async fn leave(&self) -> Result<(), ConsumerError> {
        let (member_id, joined) = {
            let mut shared = lock(&self.shared);
            shared.stopped = true;
            let joined = !shared.member_id.is_empty();
            (shared.member_id.clone(), joined)
        };
        self.heartbeat.abort();
        if !joined || self.config.group_instance_id.is_some() {
            return Ok(());
        }
        let connection = self.coordinator().await?;
        send_leave(&connection, &self.config, &self.group_id, &member_id).await?;
        lock(&self.shared).reset_generation(true);
        Ok(())
    }
}

fn retriable(error: &ConsumerError) -> bool {
    match error {
        // A group answer that does not decode (librdkafka's mock sends a
        // null assignment with REBALANCE_IN_PROGRESS) is retried by
        // rejoining, like a rebalance.
        ConsumerError::Client(ClientError::Protocol { .. }) => true,
        ConsumerError::Client(error) => error.is_retriable(),
        ConsumerError::Group { code, .. } => matches!(
            code,
            ErrorCode::RebalanceInProgress
                | ErrorCode::UnknownMemberId
                | ErrorCode::IllegalGeneration
                | ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
        ),
        _ => false,
    }
}

fn unexpected(api_key: ApiKey) -> ConsumerError {
    ClientError::UnexpectedResponse {
        api_key: api_key as i16,
    }
    .into()
}

fn duration_ms_i32(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

async fn send_leave(
    connection: &Connection,
    config: &ConsumerConfig,
    group_id: &str,
    member_id: &str,
) -> Result<(), ConsumerError> {
    let timeout = config.client.request_timeout;
    let version = config
        .api_version_caps
        .version(connection, ApiKey::LeaveGroup)?;
    let mut request = LeaveGroupRequest::default().with_group_id(GroupId(str_bytes(group_id)));
    if version >= 3 {
        request.members = vec![MemberIdentity::default().with_member_id(str_bytes(member_id))];
    } else {
        request.member_id = str_bytes(member_id);
    }
    let response = connection
        .submit_at(request.into(), version, timeout)?
        .await?;
    let Response::LeaveGroup(response) = response else {
        return Err(unexpected(ApiKey::LeaveGroup));
    };
    match ErrorCode::from_code(response.error_code) {
        ErrorCode::None | ErrorCode::UnknownMemberId => Ok(()),
        code => Err(ConsumerError::Group {
            group_id: group_id.to_owned(),
            api: "LeaveGroup",
            code,
        }),
    }
}

/// What one heartbeat round decided to do.
enum HeartbeatAction {
    Wait(Duration),
    Send {
        coordinator: i32,
        generation_id: i32,
        member_id: String,
    },
    Leave {
        coordinator: Option<i32>,
        member_id: String,
    },
}

fn next_heartbeat_action(
    shared: &mut Shared,
    config: &ConsumerConfig,
    now: Instant,
) -> HeartbeatAction {
    let idle = config.heartbeat_interval.min(Duration::from_millis(100));
    if shared.state != MemberState::Stable {
        shared.timer.reset_session(now);
        return HeartbeatAction::Wait(idle);
    }
    if shared.timer.poll_expired(now) {
        tracing::warn!("max.poll.interval.ms exceeded: leaving the group");
        let member_id = shared.member_id.clone();
        let coordinator = shared.coordinator;
        shared.reset_generation(config.group_instance_id.is_none());
        shared.lost = true;
        return HeartbeatAction::Leave {
            coordinator: coordinator.filter(|_| config.group_instance_id.is_none()),
            member_id,
        };
    }
    if shared.timer.session_expired(now) {
        shared.coordinator = None;
    }
    if !shared.timer.should_heartbeat(now) {
        return HeartbeatAction::Wait(
            shared
                .timer
                .time_to_next_heartbeat(now)
                .max(Duration::from_millis(1)),
        );
    }
    let Some(coordinator) = shared.coordinator else {
        shared.rejoin_needed = true;
        return HeartbeatAction::Wait(idle);
    };
    shared.timer.sent(now);
    HeartbeatAction::Send {
        coordinator,
        generation_id: shared.generation_id,
        member_id: shared.member_id.clone(),
    }
}

fn apply_heartbeat_result(
    shared: &mut Shared,
    sent_generation: i32,
    result: Result<ErrorCode, ConsumerError>,
    now: Instant,
) {
    if shared.generation_id != sent_generation || shared.state != MemberState::Stable {
        // The member rejoined while the heartbeat was in flight: its answer
        // is about a generation that is over.
        shared.timer.failed();
        return;
    }
    match result {
        Ok(code) => {
            shared.timer.received(now);
            match code {
                ErrorCode::None => {}
                ErrorCode::RebalanceInProgress => shared.rejoin_needed = true,
                ErrorCode::IllegalGeneration
                | ErrorCode::UnknownMemberId
                | ErrorCode::FencedInstanceId => {
                    shared.reset_generation(code == ErrorCode::UnknownMemberId);
                    shared.lost = true;
                }
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                    shared.coordinator = None
                }
                code => tracing::debug!(%code, "heartbeat error"),
            }
        }
        Err(error) => {
            tracing::debug!(%error, "heartbeat failed");
            shared.timer.failed();
            shared.coordinator = None;
        }
    }
}

async fn heartbeat_loop(
    cluster: Cluster,
    config: ConsumerConfig,
    group_id: String,
    shared: Arc<Mutex<Shared>>,
) {
    loop {
        let action = {
            let mut guard = lock(&shared);
            if guard.stopped {
                return;
            }
            next_heartbeat_action(&mut guard, &config, Instant::now())
        };
        match action {
            HeartbeatAction::Wait(duration) => tokio::time::sleep(duration).await,
            HeartbeatAction::Leave {
                coordinator,
                member_id,
            } => {
                if let Some(coordinator) = coordinator {
                    if let Ok(connection) = cluster.broker_connection(coordinator).await {
                        if let Err(error) =
                            send_leave(&connection, &config, &group_id, &member_id).await
                        {
                            tracing::debug!(%error, "LeaveGroup after poll timeout failed");
                        }
                    }
                }
            }
            HeartbeatAction::Send {
                coordinator,
                generation_id,
                member_id,
            } => {
                let result = send_heartbeat(
                    &cluster,
                    &config,
                    &group_id,
                    coordinator,
                    generation_id,
                    &member_id,
                )
                .await;
                apply_heartbeat_result(&mut lock(&shared), generation_id, result, Instant::now());
            }
        }
    }
}

async fn send_heartbeat(
    cluster: &Cluster,
    config: &ConsumerConfig,
    group_id: &str,
    coordinator: i32,
    generation_id: i32,
    member_id: &str,
) -> Result<ErrorCode, ConsumerError> {
    let connection = cluster.broker_connection(coordinator).await?;
    let version = config
        .api_version_caps
        .version(&connection, ApiKey::Heartbeat)?;
    let mut request = HeartbeatRequest::default()
        .with_group_id(GroupId(str_bytes(group_id)))
        .with_generation_id(generation_id)
        .with_member_id(str_bytes(member_id));
    if version >= 3 {
        request.group_instance_id = config.group_instance_id.as_deref().map(str_bytes);
    }
    let response = connection
        .submit_at(request.into(), version, config.client.request_timeout)?
        .await?;
    let Response::Heartbeat(response) = response else {
        return Err(unexpected(ApiKey::Heartbeat));
    };
    Ok(ErrorCode::from_code(response.error_code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(now: Instant) -> Shared {
        Shared {
            state: MemberState::Stable,
            member_id: "m".to_owned(),
            generation_id: 4,
            coordinator: Some(1),
            rejoin_needed: false,
            lost: false,
            timer: HeartbeatTimer::new(
                Duration::from_secs(10),
                Duration::from_secs(3),
                Duration::from_secs(60),
                now,
            ),
            stopped: false,
        }
    }

    fn config() -> ConsumerConfig {
        ConsumerConfig {
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(60),
            ..ConsumerConfig::new(["127.0.0.1:1"])
        }
    }

    #[test]
    fn heartbeats_are_sent_when_due_with_the_generation() {
        let start = Instant::now();
        let mut state = shared(start);
        assert!(matches!(
            next_heartbeat_action(&mut state, &config(), start + Duration::from_secs(1)),
            HeartbeatAction::Wait(_)
        ));
        let action = next_heartbeat_action(&mut state, &config(), start + Duration::from_secs(3));
        assert!(matches!(
            action,
            HeartbeatAction::Send { coordinator: 1, generation_id: 4, ref member_id } if member_id == "m"
        ));
    }

    #[test]
    fn heartbeat_errors_flag_rejoin_or_loss() {
        let now = Instant::now();
        let mut state = shared(now);
        apply_heartbeat_result(&mut state, 4, Ok(ErrorCode::RebalanceInProgress), now);
        assert!(state.rejoin_needed && !state.lost);
        assert_eq!(state.state, MemberState::Stable);

        let mut state = shared(now);
        apply_heartbeat_result(&mut state, 4, Ok(ErrorCode::UnknownMemberId), now);
        assert!(state.rejoin_needed && state.lost);
        assert_eq!(
            (state.state, state.generation_id, state.member_id.as_str()),
            (MemberState::Unjoined, -1, "")
        );

        let mut state = shared(now);
        apply_heartbeat_result(&mut state, 4, Ok(ErrorCode::IllegalGeneration), now);
        assert_eq!(
            state.member_id, "m",
            "the member id survives a generation reset"
        );

        let mut state = shared(now);
        apply_heartbeat_result(&mut state, 4, Ok(ErrorCode::NotCoordinator), now);
        assert_eq!(state.coordinator, None);
    }

    #[test]
    fn answers_about_an_earlier_generation_are_ignored() {
        let now = Instant::now();
        let mut state = shared(now);
        apply_heartbeat_result(&mut state, 3, Ok(ErrorCode::RebalanceInProgress), now);
        assert!(!state.rejoin_needed);
        state.state = MemberState::Joining;
        apply_heartbeat_result(&mut state, 4, Ok(ErrorCode::UnknownMemberId), now);
        assert!(!state.lost && state.member_id == "m");
    }

    #[test]
    fn a_member_that_stops_polling_leaves() {
        let start = Instant::now();
        let mut state = shared(start);
        let action = next_heartbeat_action(&mut state, &config(), start + Duration::from_secs(61));
        assert!(matches!(
            action,
            HeartbeatAction::Leave {
                coordinator: Some(1),
                ..
            }
        ));
        assert!(state.lost && state.rejoin_needed);
        assert_eq!(state.state, MemberState::Unjoined);

        let mut state = shared(start);
        let static_config = ConsumerConfig {
            group_instance_id: Some("i".to_owned()),
            ..config()
        };
        let action =
            next_heartbeat_action(&mut state, &static_config, start + Duration::from_secs(61));
        assert!(
            matches!(
                action,
                HeartbeatAction::Leave {
                    coordinator: None,
                    ..
                }
            ),
            "static members do not send LeaveGroup"
        );
        assert_eq!(state.member_id, "m");
    }

    #[test]
    fn no_heartbeats_outside_a_stable_generation() {
        let start = Instant::now();
        let mut state = shared(start);
        state.state = MemberState::Joining;
        assert!(matches!(
            next_heartbeat_action(&mut state, &config(), start + Duration::from_secs(30)),
            HeartbeatAction::Wait(_)
        ));
    }

    #[test]
    fn a_panic_holding_the_membership_resets_it_as_after_a_fencing() {
        let membership = Mutex::new(shared(Instant::now()));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _membership = lock(&membership);
            panic!("injected panic while changing the membership");
        }));
        assert!(panicked.is_err());
        let reset = lock(&membership);
        assert_eq!(reset.state, MemberState::Unjoined);
        assert!(reset.member_id.is_empty());
        assert_eq!(reset.generation_id, -1);
        assert!(reset.rejoin_needed && reset.lost);
        drop(reset);
        assert!(!membership.is_poisoned());
    }
}
