//! The group rebalance mode: N raw members, one connection each, join a new
//! consumer group per round; the time from the last member's second
//! JoinGroup being sent to the last SyncGroup answer is the rebalance time.
//!
//! Each round: every member sends JoinGroup with an empty member id and gets
//! MEMBER_ID_REQUIRED with its id; once all have ids, all join again with
//! them. The leader assigns the subscribed topic's partitions in contiguous
//! ranges (members sorted by id) and sends SyncGroup with the assignments;
//! followers send SyncGroup with none. The round ends with one LeaveGroup
//! for every member, outside the measured time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use strom_protocol::kafka::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::leave_group_request::MemberIdentity;
use strom_protocol::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strom_protocol::kafka::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, SyncGroupRequest,
};
use strom_protocol::kafka::protocol::{Decodable, Encodable, StrBytes};
use strom_protocol::{ErrorCode, Request, Response};
use tokio::sync::Barrier;

use crate::admin::topic_name;
use crate::connection::Connection;
use crate::error::LoadError;

/// FindCoordinator version the tool sends (one key, flexible).
pub const FIND_COORDINATOR_VERSION: i16 = 3;
/// JoinGroup version the tool sends (member id required, protocol name in
/// the response).
pub const JOIN_GROUP_VERSION: i16 = 7;
/// SyncGroup version the tool sends (protocol type and name).
pub const SYNC_GROUP_VERSION: i16 = 5;
/// LeaveGroup version the tool sends (a batch of members).
pub const LEAVE_GROUP_VERSION: i16 = 4;
/// Session and rebalance timeout every member asks for.
const GROUP_TIMEOUT_MS: i32 = 30_000;
/// The one protocol every member offers.
const PROTOCOL_NAME: &str = "range";
/// How long to retry FindCoordinator while the coordinator is loading.
const COORDINATOR_WAIT: Duration = Duration::from_secs(10);

/// How to rebalance.
#[derive(Debug, Clone)]
pub struct RebalanceSettings {
    /// Members per group.
    pub members: usize,
    /// Rounds (one new group each).
    pub rounds: usize,
    /// The topic every member subscribes to.
    pub topic: String,
    /// Its partition count, for the leader's assignment.
    pub partitions: i32,
    /// Group ids are this prefix plus the round number.
    pub group_prefix: String,
}

/// What one round measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundResult {
    /// From the last second JoinGroup sent to the last SyncGroup answer.
    pub rebalance: Duration,
    /// The generation every member synced in.
    pub generation_id: i32,
    /// Members whose SyncGroup answer carried a decodable assignment.
    pub members_assigned: usize,
    /// Partitions over all members' assignments.
    pub partitions_assigned: usize,
}

/// What a whole run measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebalanceReport {
    /// Members per group.
    pub members: usize,
    /// Each round, in order.
    pub rounds: Vec<RoundResult>,
}

impl RebalanceReport {
    /// Minimum, median and maximum rebalance time (zero when no rounds).
    pub fn min_median_max(&self) -> (Duration, Duration, Duration) {
        let mut times: Vec<Duration> = self.rounds.iter().map(|round| round.rebalance).collect();
        times.sort_unstable();
        let median = crate::stats::percentile(&times, 0.5).copied();
        (
            times.first().copied().unwrap_or_default(),
            median.unwrap_or_default(),
            times.last().copied().unwrap_or_default(),
        )
    }

    /// A human-readable summary, one line.
    pub fn human(&self) -> String {
        let (min, median, max) = self.min_median_max();
        format!(
            "group rebalance: {} members, {} rounds (new group each, group.initial.rebalance.delay.ms must be 0 on the broker): last JoinGroup sent to all SyncGroup answered min {:.2} ms, median {:.2} ms, max {:.2} ms",
            self.members,
            self.rounds.len(),
            min.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
        )
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let (min, median, max) = self.min_median_max();
        let rounds: Vec<f64> = self
            .rounds
            .iter()
            .map(|round| round.rebalance.as_secs_f64() * 1e3)
            .collect();
        serde_json::json!({
            "mode": "group-rebalance",
            "members": self.members,
            "rounds_ms": rounds,
            "min_ms": min.as_secs_f64() * 1e3,
            "median_ms": median.as_secs_f64() * 1e3,
            "max_ms": max.as_secs_f64() * 1e3,
        })
    }
}

/// Finds the coordinator of `group` through `bootstrap` and returns its
/// address, retrying while it is not yet available.
pub async fn find_coordinator(
    bootstrap: &mut Connection,
    group: &str,
) -> Result<String, LoadError> {
    let started = Instant::now();
    loop {
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group.to_owned()))
            .with_key_type(0);
        let Response::FindCoordinator(response) = bootstrap
            .round_trip(Request::from(request), FIND_COORDINATOR_VERSION)
            .await?
        else {
            return Err(LoadError::UnexpectedResponse {
                expected: "FindCoordinator",
            });
        };
        let code = ErrorCode::from(response.error_code);
        if code.is_none() {
            return Ok(format!("{}:{}", response.host.as_str(), response.port));
        }
        if code != ErrorCode::CoordinatorNotAvailable || started.elapsed() > COORDINATOR_WAIT {
            return Err(group_error("FindCoordinator", group, code));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects `settings.members` members through `bootstrap` (each asks for
/// the coordinator on its own connection, then connects to it) and runs
/// the rounds.
pub async fn run_rebalance(
    bootstrap: &str,
    settings: &RebalanceSettings,
) -> Result<RebalanceReport, LoadError> {
    if settings.members < 1 || settings.rounds < 1 {
        return Err(LoadError::InvalidSetting {
            name: "members",
            reason: "members and rounds must be at least 1",
        });
    }
    let mut members = Vec::with_capacity(settings.members);
    for _ in 0..settings.members {
        let mut connection = Connection::connect(bootstrap).await?;
        let coordinator = find_coordinator(&mut connection, &settings.group_prefix).await?;
        if coordinator != bootstrap {
            connection = Connection::connect(&coordinator).await?;
        }
        members.push(connection);
    }
    let mut rounds = Vec::with_capacity(settings.rounds);
    for round in 0..settings.rounds {
        let group = format!("{}-{round}", settings.group_prefix);
        let (result, returned) = run_round(members, &group, settings).await?;
        members = returned;
        rounds.push(result);
    }
    Ok(RebalanceReport {
        members: settings.members,
        rounds,
    })
}

/// What one member task hands back.
struct MemberOutcome {
    connection: Connection,
    member_id: String,
    second_join_sent: Instant,
    synced: Instant,
    generation_id: i32,
    assignment: Bytes,
}

async fn run_round(
    members: Vec<Connection>,
    group: &str,
    settings: &RebalanceSettings,
) -> Result<(RoundResult, Vec<Connection>), LoadError> {
    let barrier = Arc::new(Barrier::new(members.len()));
    let metadata = subscription(&settings.topic);
    let tasks: Vec<_> = members
        .into_iter()
        .map(|connection| {
            let member = Member {
                connection,
                group: group.to_owned(),
                metadata: metadata.clone(),
                topic: settings.topic.clone(),
                partitions: settings.partitions,
            };
            tokio::spawn(member.run(Arc::clone(&barrier)))
        })
        .collect();
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        let outcome = task
            .await
            .map_err(|_| LoadError::Closed { outstanding: 0 })??;
        outcomes.push(outcome);
    }
    let result = summarise(&outcomes)?;
    let mut connections: Vec<Connection> = Vec::with_capacity(outcomes.len());
    let mut identities = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        identities.push(
            MemberIdentity::default().with_member_id(StrBytes::from_string(outcome.member_id)),
        );
        connections.push(outcome.connection);
    }
    if let Some(first) = connections.first_mut() {
        leave(first, group, identities).await?;
    }
    Ok((result, connections))
}

fn summarise(outcomes: &[MemberOutcome]) -> Result<RoundResult, LoadError> {
    let lowest = outcomes.iter().map(|o| o.generation_id).min().unwrap_or(0);
    let highest = outcomes.iter().map(|o| o.generation_id).max().unwrap_or(0);
    if lowest != highest {
        return Err(LoadError::GenerationMismatch { lowest, highest });
    }
    let last_sent = outcomes.iter().map(|o| o.second_join_sent).max();
    let last_synced = outcomes.iter().map(|o| o.synced).max();
    let rebalance = match (last_sent, last_synced) {
        (Some(sent), Some(synced)) => synced.saturating_duration_since(sent),
        _ => Duration::ZERO,
    };
    let mut members_assigned = 0;
    let mut partitions_assigned = 0;
    for outcome in outcomes {
        if let Some(count) = assigned_partitions(&outcome.assignment) {
            members_assigned += 1;
            partitions_assigned += count;
        }
    }
    Ok(RoundResult {
        rebalance,
        generation_id: highest,
        members_assigned,
        partitions_assigned,
    })
}

/// One member of one round.
struct Member {
    connection: Connection,
    group: String,
    metadata: Bytes,
    topic: String,
    partitions: i32,
}

impl Member {
    async fn run(mut self, barrier: Arc<Barrier>) -> Result<MemberOutcome, LoadError> {
        let first = self.join("").await;
        let member_id = match first {
            Ok(response) if ErrorCode::from(response.error_code) == ErrorCode::MemberIdRequired => {
                response.member_id.to_string()
            }
            Ok(response) => {
                barrier.wait().await;
                return Err(group_error(
                    "JoinGroup",
                    &self.group,
                    ErrorCode::from(response.error_code),
                ));
            }
            Err(error) => {
                barrier.wait().await;
                return Err(error);
            }
        };
        // Every member holds its id before any joins with it, so the join
        // phase completes only when the last one has joined.
        barrier.wait().await;
        let second_join_sent = Instant::now();
        let joined = self.join(&member_id).await?;
        let code = ErrorCode::from(joined.error_code);
        if !code.is_none() {
            return Err(group_error("JoinGroup", &self.group, code));
        }
        let assignments = if joined.leader == joined.member_id {
            self.assign(&joined)
        } else {
            Vec::new()
        };
        let assignment = self
            .sync(&member_id, joined.generation_id, assignments)
            .await?;
        Ok(MemberOutcome {
            synced: Instant::now(),
            connection: self.connection,
            member_id,
            second_join_sent,
            generation_id: joined.generation_id,
            assignment,
        })
    }

    async fn join(&mut self, member_id: &str) -> Result<JoinGroupResponse, LoadError> {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_session_timeout_ms(GROUP_TIMEOUT_MS)
            .with_rebalance_timeout_ms(GROUP_TIMEOUT_MS)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(PROTOCOL_NAME))
                .with_metadata(self.metadata.clone())]);
        match self
            .connection
            .round_trip(Request::from(request), JOIN_GROUP_VERSION)
            .await?
        {
            Response::JoinGroup(response) => Ok(response),
            _ => Err(LoadError::UnexpectedResponse {
                expected: "JoinGroup",
            }),
        }
    }

    /// The leader's range assignment: members sorted by id, partitions in
    /// contiguous runs, the first `partitions % members` one longer.
    fn assign(&self, joined: &JoinGroupResponse) -> Vec<SyncGroupRequestAssignment> {
        let mut ids: Vec<String> = joined
            .members
            .iter()
            .map(|member| member.member_id.to_string())
            .collect();
        ids.sort_unstable();
        range_assignment(&ids, self.partitions)
            .into_iter()
            .zip(ids)
            .map(|(partitions, id)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(id))
                    .with_assignment(assignment_bytes(&self.topic, partitions))
            })
            .collect()
    }

    async fn sync(
        &mut self,
        member_id: &str,
        generation_id: i32,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Bytes, LoadError> {
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_generation_id(generation_id)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_static_str(PROTOCOL_NAME)))
            .with_assignments(assignments);
        let Response::SyncGroup(response) = self
            .connection
            .round_trip(Request::from(request), SYNC_GROUP_VERSION)
            .await?
        else {
            return Err(LoadError::UnexpectedResponse {
                expected: "SyncGroup",
            });
        };
        let code = ErrorCode::from(response.error_code);
        if !code.is_none() {
            return Err(group_error("SyncGroup", &self.group, code));
        }
        Ok(response.assignment)
    }
}

async fn leave(
    connection: &mut Connection,
    group: &str,
    members: Vec<MemberIdentity>,
) -> Result<(), LoadError> {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_members(members);
    let Response::LeaveGroup(response) = connection
        .round_trip(Request::from(request), LEAVE_GROUP_VERSION)
        .await?
    else {
        return Err(LoadError::UnexpectedResponse {
            expected: "LeaveGroup",
        });
    };
    let code = ErrorCode::from(response.error_code);
    if !code.is_none() {
        return Err(group_error("LeaveGroup", group, code));
    }
    Ok(())
}

/// Partition indexes per member for `partitions` partitions over
/// `members.len()` members, in contiguous runs.
pub fn range_assignment<T>(members: &[T], partitions: i32) -> Vec<Vec<i32>> {
    let count = members.len();
    let partitions = partitions.max(0) as usize;
    if count == 0 {
        return Vec::new();
    }
    let base = partitions / count;
    let extra = partitions % count;
    let mut next = 0;
    (0..count)
        .map(|index| {
            let length = base + usize::from(index < extra);
            let run = (next..next + length).map(|p| p as i32).collect();
            next += length;
            run
        })
        .collect()
}

/// A ConsumerProtocol subscription, version 0: the topic, null user data.
pub fn subscription(topic: &str) -> Bytes {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_string(topic.to_owned())])
        .with_user_data(None);
    versioned(&message)
}

/// A ConsumerProtocol assignment, version 0 (empty when `partitions` is).
pub fn assignment_bytes(topic: &str, partitions: Vec<i32>) -> Bytes {
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![AssignedTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions)]
    };
    let message = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(topics)
        .with_user_data(None);
    versioned(&message)
}

/// The partition count of an encoded assignment, if it decodes.
pub fn assigned_partitions(bytes: &Bytes) -> Option<usize> {
    let mut bytes = bytes.clone();
    if bytes.len() < 2 {
        return None;
    }
    let version = i16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]);
    let _ = bytes.split_to(2);
    let message = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3)).ok()?;
    Some(
        message
            .assigned_partitions
            .iter()
            .map(|topic| topic.partitions.len())
            .sum(),
    )
}

fn versioned(message: &impl Encodable) -> Bytes {
    let mut buffer = BytesMut::new();
    buffer.put_i16(0);
    // Version 0 carries every field set here; an encode error would be a
    // bug in the schema, and the broker would then reject the group.
    if message.encode(&mut buffer, 0).is_err() {
        buffer.truncate(2);
    }
    buffer.freeze()
}

/// A [`LoadError::Group`].
pub fn group_error(api: &'static str, group: &str, code: ErrorCode) -> LoadError {
    LoadError::Group {
        api,
        group: group.to_owned(),
        code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignment_covers_every_partition_once() {
        let runs = range_assignment(&["a", "b", "c"], 8);
        assert_eq!(runs, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        let runs = range_assignment(&["a", "b", "c"], 2);
        assert_eq!(runs, vec![vec![0], vec![1], vec![]]);
        assert!(range_assignment::<&str>(&[], 4).is_empty());
    }

    #[test]
    fn assignment_round_trips() {
        let bytes = assignment_bytes("t", vec![3, 4]);
        assert_eq!(assigned_partitions(&bytes), Some(2));
        assert_eq!(assigned_partitions(&assignment_bytes("t", vec![])), Some(0));
        assert_eq!(assigned_partitions(&Bytes::from_static(&[0])), None);
    }

    #[test]
    fn subscription_is_version_zero_with_null_user_data() {
        let bytes = subscription("topic");
        // version 0, one topic, "topic", user data length -1.
        let mut expected = vec![0, 0, 0, 0, 0, 1, 0, 5];
        expected.extend_from_slice(b"topic");
        expected.extend_from_slice(&(-1_i32).to_be_bytes());
        assert_eq!(bytes.as_ref(), expected.as_slice());
    }
}
