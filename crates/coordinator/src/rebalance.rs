//! The membership requests of a group: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup, following Kafka's classic group coordinator.

use bytes::Bytes;
use strom_clock::Random;
use uuid::Uuid;

use crate::error::GroupError;
use crate::group::{
    Completion, Group, GroupConfig, HeartbeatRequest, JoinRequest, JoinResponse, LeaveMember,
    Reply, SyncRequest, SyncResponse,
};
use crate::member::Member;
use crate::state::GroupState;

/// The random part of a new member id (Kafka: `clientId-UUID`), drawn
/// from the broker's injected random source.
fn member_uuid(random: &dyn Random) -> Uuid {
    uuid::Builder::from_random_bytes(random.bytes_16()).into_uuid()
}

impl Group {
    /// Handles a JoinGroup.
    ///
    /// A new dynamic member on JoinGroup v4+ gets
    /// [`GroupError::MemberIdRequired`] with its new id. Otherwise the join is
    /// parked until the rebalance completes ([`Reply::Pending`]), or answered
    /// at once when nothing changes (a static member replacing itself in a
    /// Stable group, a follower rejoining with the same protocols).
    pub fn join(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
        random: &dyn Random,
    ) -> Result<Reply<JoinResponse>, GroupError> {
        validate_session_timeout(request.session_timeout_ms, config)?;
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !self.supports_protocols(&request) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if request.member_id.is_empty() {
            self.join_new_member(request, config, now_ms, random)
        } else {
            self.join_known_member(request, config, now_ms)
        }
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty
    /// protocol list; otherwise the type must match and at least one of the
    /// protocols must be supported by every current member.
    fn supports_protocols(&self, request: &JoinRequest) -> bool {
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(request.protocol_type.as_str()) {
            return false;
        }
        request.protocols.iter().any(|protocol| {
            self.members
                .values()
                .filter(|member| member.member_id != request.member_id)
                .all(|member| member.supports(&protocol.name))
        })
    }

    fn join_new_member(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
        random: &dyn Random,
    ) -> Result<Reply<JoinResponse>, GroupError> {
        if let Some(instance_id) = &request.group_instance_id {
            if let Some(old_member_id) = self.static_members.get(instance_id).cloned() {
                let new_member_id = format!("{instance_id}-{}", member_uuid(random));
                return Ok(self.replace_static_member(
                    &old_member_id,
                    new_member_id,
                    request,
                    config,
                    now_ms,
                ));
            }
        }
        if self.members.len() + self.pending_members.len() >= config.max_size {
            return Err(GroupError::GroupMaxSizeReached {
                max_size: config.max_size,
            });
        }
        let prefix = request
            .group_instance_id
            .as_deref()
            .unwrap_or(&request.client_id);
        let member_id = format!("{prefix}-{}", member_uuid(random));
        if request.group_instance_id.is_none() && request.require_known_member_id {
            let deadline_ms = now_ms + i64::from(request.session_timeout_ms);
            self.pending_members.insert(member_id.clone(), deadline_ms);
            return Err(GroupError::MemberIdRequired { member_id });
        }
        Ok(self.add_member_and_rebalance(member_id, request, config, now_ms))
    }

    fn join_known_member(
        &mut self,
        request: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
    ) -> Result<Reply<JoinResponse>, GroupError> {
        let member_id = request.member_id.clone();
        if self.pending_members.remove(&member_id).is_some() {
            return Ok(self.add_member_and_rebalance(member_id, request, config, now_ms));
        }
        self.validate_member(&member_id, request.group_instance_id.as_deref())?;
        let Some(member) = self.members.get(&member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let same_protocols = member.protocols == request.protocols;
        let is_leader = self.leader_id.as_deref() == Some(member_id.as_str());
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member(&request, now_ms);
                self.try_complete_join(now_ms);
                Ok(Reply::Pending)
            }
            GroupState::CompletingRebalance if same_protocols => {
                Ok(Reply::Done(self.join_response_for(&member_id, false)))
            }
            GroupState::Stable if same_protocols && !is_leader => {
                Ok(Reply::Done(self.join_response_for(&member_id, false)))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member(&request, now_ms);
                self.prepare_rebalance(config, now_ms);
                Ok(Reply::Pending)
            }
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
        }
    }

    /// Checks that `member_id` is a current member and that a static member's
    /// instance id is not held by another member id.
    pub(crate) fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance_id) = group_instance_id {
            if let Some(holder) = self.static_members.get(instance_id) {
                if holder != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        request: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResponse> {
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if let Some(instance_id) = &request.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), member_id.clone());
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            protocols: request.protocols,
            assignment: Bytes::new(),
            pending_join: Some(request.request_id),
            pending_sync: None,
            last_heartbeat_ms: now_ms,
            join_order: self.next_join_order,
        };
        self.next_join_order += 1;
        self.members.insert(member_id, member);
        match self.state {
            GroupState::PreparingRebalance => {
                if let Some(delay) = self
                    .rebalance_timer
                    .as_mut()
                    .and_then(|timer| timer.initial_delay.as_mut())
                {
                    delay.member_joined = true;
                }
                self.try_complete_join(now_ms);
            }
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable => {
                self.prepare_rebalance(config, now_ms);
            }
            GroupState::Dead => {}
        }
        Reply::Pending
    }

    /// Records a rejoin: new protocols and timeouts, and the parked request.
    fn update_member(&mut self, request: &JoinRequest, now_ms: i64) {
        let Some(member) = self.members.get_mut(&request.member_id) else {
            return;
        };
        member.protocols = request.protocols.clone();
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.last_heartbeat_ms = now_ms;
        if let Some(superseded) = member.pending_join.replace(request.request_id) {
            self.completions.push(Completion::Join {
                request_id: superseded,
                result: Err(GroupError::RebalanceInProgress),
            });
        }
    }

    /// A known `group.instance.id` joined with an empty member id: the new
    /// member id takes the old one's place (the old one is fenced). In a
    /// Stable group with unchanged protocols this needs no rebalance.
    fn replace_static_member(
        &mut self,
        old_member_id: &str,
        new_member_id: String,
        request: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResponse> {
        let Some(mut member) = self.members.remove(old_member_id) else {
            return self.add_member_and_rebalance(new_member_id, request, config, now_ms);
        };
        for completion in fence_parked_requests(&mut member) {
            self.completions.push(completion);
        }
        let protocols_changed = member.protocols != request.protocols;
        member.member_id = new_member_id.clone();
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.protocols = request.protocols;
        member.last_heartbeat_ms = now_ms;
        if self.pending_sync_members.remove(old_member_id) {
            self.pending_sync_members.insert(new_member_id.clone());
        }
        if self.leader_id.as_deref() == Some(old_member_id) {
            self.leader_id = Some(new_member_id.clone());
        }
        if let Some(instance_id) = &request.group_instance_id {
            self.static_members
                .insert(instance_id.clone(), new_member_id.clone());
        }
        self.members.insert(new_member_id.clone(), member);
        if self.state == GroupState::Stable && !protocols_changed {
            self.metadata_changed = true;
            let is_leader = self.leader_id.as_deref() == Some(new_member_id.as_str());
            return Reply::Done(self.join_response_for(&new_member_id, is_leader));
        }
        if let Some(member) = self.members.get_mut(&new_member_id) {
            member.pending_join = Some(request.request_id);
        }
        match self.state {
            GroupState::PreparingRebalance => self.try_complete_join(now_ms),
            _ => self.prepare_rebalance(config, now_ms),
        }
        Reply::Pending
    }

    /// Handles a SyncGroup: followers wait for the leader's assignment; the
    /// leader's sync makes the group Stable and answers everyone.
    pub fn sync(
        &mut self,
        request: SyncRequest,
        now_ms: i64,
    ) -> Result<Reply<SyncResponse>, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        self.check_generation(request.generation_id)?;
        let type_matches = request
            .protocol_type
            .as_ref()
            .is_none_or(|kind| Some(kind) == self.protocol_type.as_ref());
        let name_matches = request
            .protocol_name
            .as_ref()
            .is_none_or(|name| Some(name) == self.protocol_name.as_ref());
        if !type_matches || !name_matches {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance => Ok(self.park_sync(request, now_ms)),
            GroupState::Stable => {
                let member = self
                    .members
                    .get_mut(&request.member_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                member.last_heartbeat_ms = now_ms;
                let assignment = member.assignment.clone();
                Ok(Reply::Done(self.sync_response(assignment)))
            }
        }
    }

    fn park_sync(&mut self, request: SyncRequest, now_ms: i64) -> Reply<SyncResponse> {
        if let Some(member) = self.members.get_mut(&request.member_id) {
            member.last_heartbeat_ms = now_ms;
            if let Some(superseded) = member.pending_sync.replace(request.request_id) {
                self.completions.push(Completion::Sync {
                    request_id: superseded,
                    result: Err(GroupError::RebalanceInProgress),
                });
            }
        }
        self.pending_sync_members.remove(&request.member_id);
        if self.leader_id.as_deref() == Some(request.member_id.as_str()) {
            self.apply_assignment(request.assignments, now_ms);
        }
        Reply::Pending
    }

    /// Stores the leader's assignment (members it left out get an empty one),
    /// makes the group Stable and answers every parked SyncGroup.
    fn apply_assignment(&mut self, assignments: Vec<(String, Bytes)>, now_ms: i64) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        for (member_id, assignment) in assignments {
            if let Some(member) = self.members.get_mut(&member_id) {
                member.assignment = assignment;
            }
        }
        self.transition(GroupState::Stable, now_ms);
        self.sync_deadline_ms = None;
        self.pending_sync_members.clear();
        self.metadata_changed = true;
        let parked: Vec<(u64, Bytes)> = self
            .members
            .values_mut()
            .filter_map(|member| {
                member
                    .pending_sync
                    .take()
                    .map(|request_id| (request_id, member.assignment.clone()))
            })
            .collect();
        for (request_id, assignment) in parked {
            let response = self.sync_response(assignment);
            self.completions.push(Completion::Sync {
                request_id,
                result: Ok(response),
            });
        }
    }

    fn sync_response(&self, assignment: Bytes) -> SyncResponse {
        SyncResponse {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }

    pub(crate) fn check_generation(&self, generation_id: i32) -> Result<(), GroupError> {
        if generation_id == self.generation_id {
            Ok(())
        } else {
            Err(GroupError::IllegalGeneration {
                requested: generation_id,
                current: self.generation_id,
            })
        }
    }

    /// Handles a Heartbeat: refreshes the session, and answers
    /// REBALANCE_IN_PROGRESS while the group prepares a rebalance.
    pub fn heartbeat(&mut self, request: &HeartbeatRequest, now_ms: i64) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        self.check_generation(request.generation_id)?;
        if self.state == GroupState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if let Some(member) = self.members.get_mut(&request.member_id) {
            member.last_heartbeat_ms = now_ms;
        }
        if self.state == GroupState::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Handles a (batched) LeaveGroup: one result per leaving member, in
    /// order; the group rebalances once if anyone left.
    pub fn leave(
        &mut self,
        leaving: &[LeaveMember],
        config: &GroupConfig,
        now_ms: i64,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let mut removed_any = false;
        let mut results = Vec::with_capacity(leaving.len());
        for member in leaving {
            let result = self.leave_one(member);
            removed_any |= result.is_ok();
            results.push(result);
        }
        if removed_any {
            self.on_members_removed(config, now_ms);
        }
        Ok(results)
    }

    fn leave_one(&mut self, leaving: &LeaveMember) -> Result<(), GroupError> {
        let member_id = match &leaving.group_instance_id {
            Some(instance_id) => {
                let holder = self
                    .static_members
                    .get(instance_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                if !leaving.member_id.is_empty() && *holder != leaving.member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                holder.clone()
            }
            None => leaving.member_id.clone(),
        };
        if self.pending_members.remove(&member_id).is_some() {
            return Ok(());
        }
        if self.remove_member(&member_id, GroupError::UnknownMemberId) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }
}

/// Answers a replaced static member's parked requests with FENCED_INSTANCE_ID.
fn fence_parked_requests(member: &mut Member) -> Vec<Completion> {
    let mut completions = Vec::new();
    if let Some(request_id) = member.pending_join.take() {
        completions.push(Completion::Join {
            request_id,
            result: Err(GroupError::FencedInstanceId),
        });
    }
    if let Some(request_id) = member.pending_sync.take() {
        completions.push(Completion::Sync {
            request_id,
            result: Err(GroupError::FencedInstanceId),
        });
    }
    completions
}

fn validate_session_timeout(
    session_timeout_ms: i32,
    config: &GroupConfig,
) -> Result<(), GroupError> {
    if session_timeout_ms < config.min_session_timeout_ms
        || session_timeout_ms > config.max_session_timeout_ms
    {
        return Err(GroupError::InvalidSessionTimeout {
            session_timeout_ms,
            min_ms: config.min_session_timeout_ms,
            max_ms: config.max_session_timeout_ms,
        });
    }
    Ok(())
}
