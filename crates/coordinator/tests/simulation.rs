//! Randomised simulation of clients against one group, with invariants
//! checked after every step. Proptest generates the action sequences and
//! prints (and shrinks) any failing one; regressions are kept in
//! `proptest-regressions/`.

use crate::common;

use std::collections::BTreeSet;

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use strom_coordinator::{
    Completion, CoordinatorCore, GroupConfig, GroupError, GroupState, HeartbeatRequest,
    JoinResponse, LeaveMember, OffsetCommitPartition, OffsetCommitRequest, Reply, SyncResponse,
};

const CLIENTS: usize = 5;

#[derive(Debug, Clone)]
enum Action {
    Join(usize),
    Sync(usize),
    Heartbeat(usize),
    Leave(usize),
    Commit(usize),
    Advance(i64),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (0..CLIENTS).prop_map(Action::Join),
        3 => (0..CLIENTS).prop_map(Action::Sync),
        3 => (0..CLIENTS).prop_map(Action::Heartbeat),
        1 => (0..CLIENTS).prop_map(Action::Leave),
        1 => (0..CLIENTS).prop_map(Action::Commit),
        3 => (1_i64..15_000).prop_map(Action::Advance),
    ]
}

#[derive(Debug, Default, Clone)]
struct Client {
    member_id: String,
    generation_id: i32,
    /// Clients 0 and 1 are static members.
    instance_id: Option<String>,
    leader: bool,
    members: Vec<String>,
}

struct Simulation {
    core: CoordinatorCore,
    clients: Vec<Client>,
    now_ms: i64,
    next_request_id: u64,
    outstanding_joins: Vec<(u64, usize)>,
    outstanding_syncs: Vec<(u64, usize)>,
    answered: BTreeSet<u64>,
    last_generation: i32,
}

impl Simulation {
    fn new() -> Simulation {
        let config = GroupConfig {
            initial_rebalance_delay_ms: 500,
            max_size: 4,
            ..GroupConfig::default()
        };
        let mut clients = vec![Client::default(); CLIENTS];
        clients[0].instance_id = Some("static-0".into());
        clients[1].instance_id = Some("static-1".into());
        Simulation {
            core: core_with(config),
            clients,
            now_ms: 0,
            next_request_id: 0,
            outstanding_joins: Vec::new(),
            outstanding_syncs: Vec::new(),
            answered: BTreeSet::new(),
            last_generation: 0,
        }
    }

    fn request_id(&mut self) -> u64 {
        self.next_request_id += 1;
        self.next_request_id
    }

    fn step(&mut self, action: &Action) {
        match *action {
            Action::Join(client) => self.join(client),
            Action::Sync(client) => self.sync(client),
            Action::Heartbeat(client) => {
                let request = self.heartbeat_request(client);
                if let Err(error) = self.core.heartbeat(GROUP, &request, self.now_ms) {
                    self.on_error(client, &error);
                }
            }
            Action::Leave(client) => {
                let leaving = [LeaveMember {
                    member_id: self.clients[client].member_id.clone(),
                    group_instance_id: self.clients[client].instance_id.clone(),
                }];
                let _ = self.core.leave_group(GROUP, &leaving, self.now_ms);
                self.clients[client].member_id.clear();
            }
            Action::Commit(client) => self.commit(client),
            Action::Advance(elapsed_ms) => {
                self.now_ms += elapsed_ms;
                self.core.tick(self.now_ms);
            }
        }
        self.drain();
        self.check_invariants();
    }

    fn join(&mut self, client: usize) {
        let request_id = self.request_id();
        let state = &self.clients[client];
        let mut request = join_request(request_id, &state.member_id, &format!("client-{client}"));
        request.group_instance_id = state.instance_id.clone();
        match self.core.join_group(GROUP, request, self.now_ms) {
            Ok(Reply::Pending) => self.outstanding_joins.push((request_id, client)),
            Ok(Reply::Done(response)) => self.on_joined(client, &response),
            Err(GroupError::MemberIdRequired { member_id }) => {
                self.clients[client].member_id = member_id;
            }
            Err(error) => self.on_error(client, &error),
        }
    }

    fn sync(&mut self, client: usize) {
        let request_id = self.request_id();
        let state = &self.clients[client];
        let assignments = if state.leader {
            state
                .members
                .iter()
                .map(|member| (member.clone(), Bytes::from(member.clone().into_bytes())))
                .collect()
        } else {
            Vec::new()
        };
        let mut request = sync_request(
            request_id,
            &state.member_id,
            state.generation_id,
            assignments,
        );
        request.group_instance_id = state.instance_id.clone();
        match self.core.sync_group(GROUP, request, self.now_ms) {
            Ok(Reply::Pending) => self.outstanding_syncs.push((request_id, client)),
            Ok(Reply::Done(response)) => self.on_synced(client, &response),
            Err(error) => self.on_error(client, &error),
        }
    }

    fn commit(&mut self, client: usize) {
        let state = &self.clients[client];
        let request = OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: state.generation_id,
            member_id: state.member_id.clone(),
            group_instance_id: state.instance_id.clone(),
            retention_time_ms: None,
            partitions: vec![OffsetCommitPartition {
                topic: "topic-x".into(),
                partition: client as i32,
                offset: self.now_ms,
                leader_epoch: None,
                metadata: None,
                commit_timestamp_ms: None,
            }],
        };
        if let Err(error) = self.core.commit_offsets(&request, self.now_ms) {
            self.on_error(client, &error);
        }
    }

    fn heartbeat_request(&self, client: usize) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: self.clients[client].member_id.clone(),
            group_instance_id: self.clients[client].instance_id.clone(),
            generation_id: self.clients[client].generation_id,
        }
    }

    fn on_joined(&mut self, client: usize, response: &JoinResponse) {
        let state = &mut self.clients[client];
        state.member_id.clone_from(&response.member_id);
        state.generation_id = response.generation_id;
        state.leader = response.leader_id == response.member_id;
        state.members = response
            .members
            .iter()
            .map(|m| m.member_id.clone())
            .collect();
    }

    fn on_synced(&mut self, client: usize, response: &SyncResponse) {
        let member_id = &self.clients[client].member_id;
        if !response.assignment.is_empty() {
            assert_eq!(
                response.assignment.as_ref(),
                member_id.as_bytes(),
                "own assignment"
            );
        }
    }

    fn on_error(&mut self, client: usize, error: &GroupError) {
        if matches!(
            error,
            GroupError::UnknownMemberId | GroupError::FencedInstanceId
        ) {
            self.clients[client].member_id.clear();
        }
    }

    fn drain(&mut self) {
        for completion in self.core.take_completions() {
            match completion {
                Completion::Join { request_id, result } => {
                    let client = take_outstanding(&mut self.outstanding_joins, request_id);
                    assert!(
                        self.answered.insert(request_id),
                        "join {request_id} answered twice"
                    );
                    match result {
                        Ok(response) => self.on_joined(client, &response),
                        Err(error) => self.on_error(client, &error),
                    }
                }
                Completion::Sync { request_id, result } => {
                    let client = take_outstanding(&mut self.outstanding_syncs, request_id);
                    assert!(
                        self.answered.insert(request_id),
                        "sync {request_id} answered twice"
                    );
                    match result {
                        Ok(response) => self.on_synced(client, &response),
                        Err(error) => self.on_error(client, &error),
                    }
                }
            }
        }
        self.core.take_records();
    }

    fn check_invariants(&mut self) {
        let Some(group) = self.core.group(GROUP) else {
            assert!(self.outstanding_joins.is_empty() && self.outstanding_syncs.is_empty());
            return;
        };
        assert!(
            group.generation_id() >= self.last_generation,
            "generation went back"
        );
        self.last_generation = group.generation_id();
        assert!(group.member_count() <= 4, "group.max.size");
        let awaiting_join = group.members().filter(|m| m.is_awaiting_join()).count();
        let awaiting_sync = group.members().filter(|m| m.is_awaiting_sync()).count();
        assert_eq!(
            awaiting_join,
            self.outstanding_joins.len(),
            "every parked join is tracked"
        );
        assert_eq!(
            awaiting_sync,
            self.outstanding_syncs.len(),
            "every parked sync is tracked"
        );
        match group.state() {
            GroupState::Empty => assert_eq!(group.member_count(), 0),
            GroupState::PreparingRebalance => assert_eq!(awaiting_sync, 0),
            GroupState::CompletingRebalance | GroupState::Stable => {
                assert_eq!(awaiting_join, 0);
                let leader = group.leader_id().expect("a leader");
                assert!(group.member(leader).is_some(), "the leader is a member");
                if group.state() == GroupState::Stable {
                    assert_eq!(awaiting_sync, 0);
                }
            }
            GroupState::Dead => panic!("a Dead group stays in the coordinator"),
        }
        let mut instances = BTreeSet::new();
        for member in group.members() {
            if let Some(instance) = &member.group_instance_id {
                assert!(
                    instances.insert(instance.clone()),
                    "one member per instance id"
                );
            }
        }
    }
}

fn take_outstanding(outstanding: &mut Vec<(u64, usize)>, request_id: u64) -> usize {
    let index = outstanding
        .iter()
        .position(|(id, _)| *id == request_id)
        .unwrap_or_else(|| panic!("completion for request {request_id} that was not parked"));
    outstanding.remove(index).1
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_client_behaviour_keeps_the_group_consistent(
        actions in proptest::collection::vec(action(), 1..120)
    ) {
        let mut simulation = Simulation::new();
        for action in &actions {
            simulation.step(action);
        }
    }
}

#[test]
fn well_behaved_clients_reach_stable() {
    let mut simulation = Simulation::new();
    for client in 0..3 {
        simulation.step(&Action::Join(client));
        simulation.step(&Action::Join(client));
    }
    simulation.step(&Action::Advance(600));
    simulation.step(&Action::Advance(600));
    for client in (0..3).rev() {
        simulation.step(&Action::Sync(client));
    }
    let group = simulation.core.group(GROUP).expect("group");
    assert_eq!(group.state(), GroupState::Stable);
    assert_eq!(group.member_count(), 3);
}

#[test]
fn random_runs_reach_every_state() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
    );
    let mut seen = BTreeSet::new();
    let mut completions = 0;
    for _ in 0..200 {
        let actions = proptest::collection::vec(action(), 60)
            .new_tree(&mut runner)
            .expect("generates")
            .current();
        let mut simulation = Simulation::new();
        for action in &actions {
            simulation.step(action);
            if let Some(group) = simulation.core.group(GROUP) {
                seen.insert(group.state());
            }
        }
        completions += simulation.answered.len();
    }
    assert!(seen.contains(&GroupState::Stable), "seen {seen:?}");
    assert!(seen.contains(&GroupState::CompletingRebalance));
    assert!(seen.contains(&GroupState::PreparingRebalance));
    assert!(seen.contains(&GroupState::Empty));
    assert!(
        completions > 200,
        "parked requests were answered: {completions}"
    );
}
