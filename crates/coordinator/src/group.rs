//! A classic group: its members, generation, protocol, and timers.
//!
//! [`Group`] is sans-IO. Every method takes the current time in milliseconds.
//! Requests that Kafka parks (a JoinGroup until everyone rejoined, a
//! SyncGroup until the leader's assignment) return [`Reply::Pending`]; their
//! answers appear later in [`Group::take_completions`], after a join, sync,
//! leave or [`Group::tick`] resolved them. The request handlers live in
//! `rebalance.rs`; this file holds the data and the rebalance mechanics.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use crate::error::GroupError;
use crate::member::{Member, Protocol, RequestId};
use crate::records::{GroupMetadataValue, MemberMetadata};
use crate::state::GroupState;

/// Group settings, Kafka's `group.*` broker properties parsed into values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (default 6,000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (default 1,800,000).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (default 3,000): how long the first
    /// rebalance of an empty group waits for more members.
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size` (default unbounded).
    pub max_size: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
        }
    }
}

/// A JoinGroup request as the group sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// Caller's id for the (possibly delayed) answer.
    pub request_id: RequestId,
    /// The member id, empty on the first join.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// Client id from the request header.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// `session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `max.poll.interval.ms` for the Java consumer (v1+; v0 uses the session timeout).
    pub rebalance_timeout_ms: i32,
    /// The protocol type (`consumer`, `connect`, ...).
    pub protocol_type: String,
    /// Supported protocols in preference order.
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+: a new dynamic member must first obtain a member id
    /// (the MEMBER_ID_REQUIRED round trip).
    pub require_known_member_id: bool,
}

/// One member in the leader's JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Its metadata for the selected protocol.
    pub metadata: Bytes,
}

/// A successful JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    /// The new generation.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader_id: String,
    /// This member's id.
    pub member_id: String,
    /// Set when a static leader rejoined without a rebalance: it must not
    /// compute a new assignment (JoinGroup v9's `SkipAssignment`).
    pub skip_assignment: bool,
    /// Every member with its metadata, for the leader only.
    pub members: Vec<JoinedMember>,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    /// Caller's id for the (possibly delayed) answer.
    pub request_id: RequestId,
    /// The member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The generation the member joined.
    pub generation_id: i32,
    /// Protocol type (v5+), checked when present.
    pub protocol_type: Option<String>,
    /// Protocol name (v5+), checked when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment: member id and assignment bytes.
    pub assignments: Vec<(String, Bytes)>,
}

/// A successful SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// This member's assignment.
    pub assignment: Bytes,
}

/// A Heartbeat request (also the member part of an OffsetCommit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// The member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The member's generation.
    pub generation_id: i32,
}

/// One member leaving in a (batched) LeaveGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveMember {
    /// The member id (may be empty for a static member named by instance id).
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

/// The immediate answer to a request that Kafka may park.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    /// Answered now.
    Done(T),
    /// Parked; the answer comes later as a [`Completion`].
    Pending,
}

/// The later answer to a parked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// A parked JoinGroup finished.
    Join {
        /// The request.
        request_id: RequestId,
        /// Its answer.
        result: Result<JoinResponse, GroupError>,
    },
    /// A parked SyncGroup finished.
    Sync {
        /// The request.
        request_id: RequestId,
        /// Its answer.
        result: Result<SyncResponse, GroupError>,
    },
}

/// A member as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata for the selected protocol (empty unless Stable).
    pub metadata: Bytes,
    /// Assignment (empty unless Stable).
    pub assignment: Bytes,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Current state.
    pub state: GroupState,
    /// Protocol type, empty if none.
    pub protocol_type: String,
    /// Selected protocol (empty unless Stable).
    pub protocol_name: String,
    /// Members.
    pub members: Vec<MemberDescription>,
}

/// The PreparingRebalance timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RebalanceTimer {
    pub(crate) deadline_ms: i64,
    /// Set during `group.initial.rebalance.delay.ms` of an empty group's
    /// first rebalance.
    pub(crate) initial_delay: Option<InitialDelay>,
}

/// The extendable initial delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InitialDelay {
    pub(crate) delay_ms: i64,
    pub(crate) max_deadline_ms: i64,
    pub(crate) member_joined: bool,
}

/// One classic group.
#[derive(Debug, Clone)]
pub struct Group {
    pub(crate) group_id: String,
    pub(crate) state: GroupState,
    pub(crate) state_timestamp_ms: i64,
    pub(crate) generation_id: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader_id: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    pub(crate) static_members: HashMap<String, String>,
    /// Members given an id by MEMBER_ID_REQUIRED, with their expiry time.
    pub(crate) pending_members: BTreeMap<String, i64>,
    pub(crate) rebalance_timer: Option<RebalanceTimer>,
    pub(crate) pending_sync_members: BTreeSet<String>,
    pub(crate) sync_deadline_ms: Option<i64>,
    pub(crate) next_join_order: u64,
    pub(crate) completions: Vec<Completion>,
    pub(crate) metadata_changed: bool,
}

impl Group {
    /// A new, empty group.
    pub fn new(group_id: impl Into<String>, now_ms: i64) -> Group {
        Group {
            group_id: group_id.into(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: BTreeMap::new(),
            rebalance_timer: None,
            pending_sync_members: BTreeSet::new(),
            sync_deadline_ms: None,
            next_join_order: 0,
            completions: Vec::new(),
            metadata_changed: false,
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The current state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// When the group entered its current state.
    pub fn state_timestamp_ms(&self) -> i64 {
        self.state_timestamp_ms
    }

    /// The current generation.
    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    /// The group's protocol type.
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// The protocol selected in the current generation.
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    /// The leader's member id.
    pub fn leader_id(&self) -> Option<&str> {
        self.leader_id.as_deref()
    }

    /// A member by id.
    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.get(member_id)
    }

    /// The members, by member id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// The number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Answers to parked requests resolved since the last call.
    pub fn take_completions(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.completions)
    }

    /// Whether the group's metadata changed in a way that must be written to
    /// `__consumer_offsets` (a generation was completed or emptied, a static
    /// member was replaced); resets the flag.
    pub fn take_metadata_changed(&mut self) -> bool {
        std::mem::take(&mut self.metadata_changed)
    }

    /// Moves to `next`, which must be a legal transition.
    pub(crate) fn transition(&mut self, next: GroupState, now_ms: i64) {
        assert!(
            self.state.can_transition_to(next),
            "illegal group transition {} -> {next}",
            self.state
        );
        self.state = next;
        self.state_timestamp_ms = now_ms;
    }

    /// Marks the group Dead (deleted or expired). Only a group without
    /// members can die this way.
    pub(crate) fn mark_dead(&mut self, now_ms: i64) {
        debug_assert!(self.members.is_empty());
        if self.state != GroupState::Dead {
            self.transition(GroupState::Dead, now_ms);
        }
    }

    /// The largest rebalance timeout among members.
    pub(crate) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|member| i64::from(member.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Starts a rebalance: moves to PreparingRebalance and arms the timer.
    pub(crate) fn prepare_rebalance(&mut self, config: &GroupConfig, now_ms: i64) {
        if self.state == GroupState::CompletingRebalance {
            self.cancel_pending_syncs();
        }
        let rebalance_timeout_ms = self.rebalance_timeout_ms();
        let timer = if self.state == GroupState::Empty && config.initial_rebalance_delay_ms > 0 {
            let delay_ms = config.initial_rebalance_delay_ms.min(rebalance_timeout_ms);
            RebalanceTimer {
                deadline_ms: now_ms + delay_ms,
                initial_delay: Some(InitialDelay {
                    delay_ms: config.initial_rebalance_delay_ms,
                    max_deadline_ms: now_ms + rebalance_timeout_ms,
                    member_joined: false,
                }),
            }
        } else {
            RebalanceTimer {
                deadline_ms: now_ms + rebalance_timeout_ms,
                initial_delay: None,
            }
        };
        self.rebalance_timer = Some(timer);
        self.transition(GroupState::PreparingRebalance, now_ms);
        self.try_complete_join(now_ms);
    }

    /// Clears the assignments of a generation that will not become Stable and
    /// answers its parked SyncGroups with REBALANCE_IN_PROGRESS.
    fn cancel_pending_syncs(&mut self) {
        self.pending_sync_members.clear();
        self.sync_deadline_ms = None;
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
            if let Some(request_id) = member.pending_sync.take() {
                self.completions.push(Completion::Sync {
                    request_id,
                    result: Err(GroupError::RebalanceInProgress),
                });
            }
        }
    }

    /// Completes the join phase if every member rejoined (and no initial delay
    /// is running).
    pub(crate) fn try_complete_join(&mut self, now_ms: i64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let delaying = self
            .rebalance_timer
            .as_ref()
            .is_some_and(|timer| timer.initial_delay.is_some());
        let all_joined =
            self.pending_members.is_empty() && self.members.values().all(Member::is_awaiting_join);
        if !delaying && all_joined {
            self.complete_join(now_ms);
        }
    }

    /// Ends the join phase: drops dynamic members that did not rejoin, bumps
    /// the generation, elects the leader, selects the protocol and answers
    /// every parked JoinGroup.
    pub(crate) fn complete_join(&mut self, now_ms: i64) {
        self.rebalance_timer = None;
        let not_rejoined: Vec<String> = self
            .members
            .values()
            .filter(|member| !member.is_awaiting_join() && member.group_instance_id.is_none())
            .map(|member| member.member_id.clone())
            .collect();
        for member_id in not_rejoined {
            self.remove_member(&member_id, GroupError::UnknownMemberId);
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader_id = None;
            self.transition(GroupState::Empty, now_ms);
            self.metadata_changed = true;
            return;
        }
        self.protocol_name = self.select_protocol();
        self.elect_leader();
        self.transition(GroupState::CompletingRebalance, now_ms);
        self.pending_sync_members = self.members.keys().cloned().collect();
        self.sync_deadline_ms = Some(now_ms + self.rebalance_timeout_ms());
        let waiting: Vec<(String, RequestId)> = self
            .members
            .values_mut()
            .filter_map(|member| {
                member.last_heartbeat_ms = now_ms;
                member
                    .pending_join
                    .take()
                    .map(|request_id| (member.member_id.clone(), request_id))
            })
            .collect();
        for (member_id, request_id) in waiting {
            let response = self.join_response_for(&member_id, false);
            self.completions.push(Completion::Join {
                request_id,
                result: Ok(response),
            });
        }
    }

    /// Keeps the leader if it is still a member; otherwise the oldest member
    /// that rejoined (or the oldest member) leads.
    fn elect_leader(&mut self) {
        let leader_present = self
            .leader_id
            .as_ref()
            .is_some_and(|leader| self.members.contains_key(leader));
        if leader_present {
            return;
        }
        let oldest = |awaiting_only: bool| {
            self.members
                .values()
                .filter(|member| !awaiting_only || member.is_awaiting_join())
                .min_by_key(|member| member.join_order)
                .map(|member| member.member_id.clone())
        };
        self.leader_id = oldest(true).or_else(|| oldest(false));
    }

    /// Kafka's protocol selection: among the protocols every member
    /// supports, each member votes for its most preferred; most votes wins,
    /// ties going to the earlier candidate in the oldest member's order.
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let oldest = self
            .members
            .values()
            .min_by_key(|member| member.join_order)?;
        let candidates: Vec<&str> = oldest
            .protocols
            .iter()
            .map(|protocol| protocol.name.as_str())
            .filter(|name| self.members.values().all(|member| member.supports(name)))
            .collect();
        let mut votes = vec![0_usize; candidates.len()];
        for member in self.members.values() {
            if let Some(choice) = member.vote(&candidates) {
                if let Some(index) = candidates.iter().position(|name| *name == choice) {
                    if let Some(count) = votes.get_mut(index) {
                        *count += 1;
                    }
                }
            }
        }
        let mut best: Option<(usize, usize)> = None;
        for (index, count) in votes.iter().copied().enumerate() {
            if best.is_none_or(|(_, best_count)| count > best_count) {
                best = Some((index, count));
            }
        }
        best.and_then(|(index, _)| candidates.get(index).map(|name| (*name).to_owned()))
    }

    /// The JoinGroup answer of the current generation for `member_id`.
    pub(crate) fn join_response_for(&self, member_id: &str, skip_assignment: bool) -> JoinResponse {
        let leader_id = self.leader_id.clone().unwrap_or_default();
        let members = if leader_id == member_id {
            self.joined_members()
        } else {
            Vec::new()
        };
        JoinResponse {
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader_id,
            member_id: member_id.to_owned(),
            skip_assignment,
            members,
        }
    }

    /// The member list the leader receives, oldest first.
    fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|member| member.join_order);
        members
            .into_iter()
            .map(|member| JoinedMember {
                member_id: member.member_id.clone(),
                group_instance_id: member.group_instance_id.clone(),
                metadata: member.metadata_for(protocol).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// Removes a member, answering its parked requests with `error`.
    pub(crate) fn remove_member(&mut self, member_id: &str, error: GroupError) -> bool {
        let Some(member) = self.members.remove(member_id) else {
            return false;
        };
        if let Some(instance_id) = &member.group_instance_id {
            if self.static_members.get(instance_id).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance_id);
            }
        }
        if let Some(request_id) = member.pending_join {
            self.completions.push(Completion::Join {
                request_id,
                result: Err(error.clone()),
            });
        }
        if let Some(request_id) = member.pending_sync {
            self.completions.push(Completion::Sync {
                request_id,
                result: Err(error),
            });
        }
        self.pending_sync_members.remove(member_id);
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = None;
        }
        true
    }

    /// Reacts to members having left or expired.
    pub(crate) fn on_members_removed(&mut self, config: &GroupConfig, now_ms: i64) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(config, now_ms);
            }
            GroupState::PreparingRebalance => self.try_complete_join(now_ms),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Advances the group's timers to `now_ms`: expires sessions and pending
    /// members, ends the join phase at its deadline, and removes members that
    /// did not sync within the rebalance timeout.
    pub fn tick(&mut self, config: &GroupConfig, now_ms: i64) {
        self.expire_pending_members(now_ms);
        self.expire_sessions(config, now_ms);
        self.expire_join_phase(now_ms);
        self.expire_sync_phase(config, now_ms);
    }

    fn expire_pending_members(&mut self, now_ms: i64) {
        let before = self.pending_members.len();
        self.pending_members
            .retain(|_, deadline_ms| *deadline_ms > now_ms);
        if self.pending_members.len() != before {
            self.try_complete_join(now_ms);
        }
    }

    fn expire_sessions(&mut self, config: &GroupConfig, now_ms: i64) {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|member| member.session_expired(now_ms))
            .map(|member| member.member_id.clone())
            .collect();
        if expired.is_empty() {
            return;
        }
        for member_id in &expired {
            tracing::debug!(group = %self.group_id, member = %member_id, "session expired");
            self.remove_member(member_id, GroupError::UnknownMemberId);
        }
        self.on_members_removed(config, now_ms);
    }

    fn expire_join_phase(&mut self, now_ms: i64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let Some(timer) = self.rebalance_timer.as_mut() else {
            return;
        };
        if now_ms < timer.deadline_ms {
            return;
        }
        if let Some(delay) = timer.initial_delay.as_mut() {
            let remaining_ms = delay.max_deadline_ms - now_ms;
            if delay.member_joined && remaining_ms > 0 {
                delay.member_joined = false;
                timer.deadline_ms = now_ms + delay.delay_ms.min(remaining_ms);
                return;
            }
        }
        self.complete_join(now_ms);
    }

    fn expire_sync_phase(&mut self, config: &GroupConfig, now_ms: i64) {
        if self.state != GroupState::CompletingRebalance {
            return;
        }
        if self
            .sync_deadline_ms
            .is_none_or(|deadline_ms| now_ms < deadline_ms)
        {
            return;
        }
        let missing: Vec<String> = self.pending_sync_members.iter().cloned().collect();
        for member_id in &missing {
            self.remove_member(member_id, GroupError::UnknownMemberId);
        }
        self.prepare_rebalance(config, now_ms);
    }

    /// The earliest time at which [`tick`](Self::tick) may change something:
    /// a session, pending member, join or sync deadline.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let sessions = self
            .members
            .values()
            .filter(|member| !member.is_awaiting_join() && !member.is_awaiting_sync())
            .map(|member| member.last_heartbeat_ms + i64::from(member.session_timeout_ms));
        let join = self
            .rebalance_timer
            .as_ref()
            .filter(|_| self.state == GroupState::PreparingRebalance)
            .map(|timer| timer.deadline_ms);
        let sync = self
            .sync_deadline_ms
            .filter(|_| self.state == GroupState::CompletingRebalance);
        sessions
            .chain(self.pending_members.values().copied())
            .chain(join)
            .chain(sync)
            .min()
    }

    /// Describes the group for DescribeGroups.
    pub fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = self
            .members
            .values()
            .map(|member| MemberDescription {
                member_id: member.member_id.clone(),
                group_instance_id: member.group_instance_id.clone(),
                client_id: member.client_id.clone(),
                client_host: member.client_host.clone(),
                metadata: if stable {
                    member.metadata_for(&protocol).cloned().unwrap_or_default()
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    member.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            group_id: self.group_id.clone(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name: if stable { protocol } else { String::new() },
            members,
        }
    }

    /// The group as a `GroupMetadataValue` record.
    pub fn to_metadata_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|member| member.join_order);
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: members
                .into_iter()
                .map(|member| MemberMetadata {
                    member_id: member.member_id.clone(),
                    group_instance_id: member.group_instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    session_timeout_ms: member.session_timeout_ms,
                    subscription: member.metadata_for(&protocol).cloned().unwrap_or_default(),
                    assignment: member.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Rebuilds a group from its last `GroupMetadataValue` record, as Kafka
    /// loads it: Stable with its members if it had any, Empty otherwise.
    /// Sessions restart at `now_ms`.
    pub fn from_metadata_value(group_id: &str, value: &GroupMetadataValue, now_ms: i64) -> Group {
        let mut group = Group::new(group_id, now_ms);
        group.generation_id = value.generation;
        group.protocol_type = Some(value.protocol_type.clone()).filter(|kind| !kind.is_empty());
        group.protocol_name = value.protocol.clone();
        group.leader_id = value.leader.clone();
        if value.current_state_timestamp_ms >= 0 {
            group.state_timestamp_ms = value.current_state_timestamp_ms;
        }
        let protocol = value.protocol.clone().unwrap_or_default();
        for (join_order, member) in (0_u64..).zip(value.members.iter()) {
            if let Some(instance_id) = &member.group_instance_id {
                group
                    .static_members
                    .insert(instance_id.clone(), member.member_id.clone());
            }
            group.members.insert(
                member.member_id.clone(),
                Member {
                    member_id: member.member_id.clone(),
                    group_instance_id: member.group_instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    session_timeout_ms: member.session_timeout_ms,
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    protocols: vec![Protocol {
                        name: protocol.clone(),
                        metadata: member.subscription.clone(),
                    }],
                    assignment: member.assignment.clone(),
                    pending_join: None,
                    pending_sync: None,
                    last_heartbeat_ms: now_ms,
                    join_order,
                },
            );
            group.next_join_order = join_order + 1;
        }
        if !group.members.is_empty() {
            group.state = GroupState::Stable;
        }
        group
    }
}
