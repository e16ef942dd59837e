//! Deterministic tests of the group state machine through the sans-IO core:
//! joins, syncs, heartbeats, leaves and timers, with time advanced by hand.

use crate::common;

use bytes::Bytes;
use common::*;
use strom_coordinator::{GroupConfig, GroupError, GroupState, LeaveMember, Protocol, Reply};

/// The member id a new dynamic member gets from a core seeded with `seed`.
fn first_member_id(seed: u64) -> String {
    let config = strom_coordinator::CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..strom_coordinator::CoordinatorConfig::default()
    };
    let random = std::sync::Arc::new(strom_clock::SeededRandom::new(seed));
    let mut core = strom_coordinator::CoordinatorCore::new(config, random);
    core.begin_loading(0);
    core.load_partition(&strom_coordinator::InMemoryOffsetsLog::new(), 0, 0)
        .expect("empty log loads");
    match core.join_group(GROUP, join_request(1, "", "consumer-1"), 0) {
        Err(GroupError::MemberIdRequired { member_id }) => member_id,
        other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
    }
}

#[test]
fn member_ids_come_from_the_injected_random_source() {
    assert_eq!(first_member_id(5), first_member_id(5));
    assert_ne!(first_member_id(5), first_member_id(6));
}

#[test]
fn new_dynamic_member_gets_member_id_required_with_client_prefixed_id() {
    let mut core = core_with(no_delay());
    let result = core.join_group(GROUP, join_request(1, "", "consumer-1"), 0);
    let Err(GroupError::MemberIdRequired { member_id }) = result else {
        panic!("expected MEMBER_ID_REQUIRED, got {result:?}");
    };
    let suffix = member_id
        .strip_prefix("consumer-1-")
        .expect("client id prefix");
    assert_eq!(
        suffix.len(),
        36,
        "a UUID follows the client id: {member_id}"
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::Empty)
    );
}

#[test]
fn first_join_completes_generation_one_with_leader_and_protocol() {
    let mut core = core_with(no_delay());
    let member_id = join_new(&mut core, 7, "consumer-1", 0);
    let response = joined(&core.take_completions(), 7);
    assert_eq!(response.generation_id, 1);
    assert_eq!(response.leader_id, member_id);
    assert_eq!(response.member_id, member_id);
    assert_eq!(response.protocol_name.as_deref(), Some("range"));
    assert_eq!(response.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(response.members.len(), 1, "the leader gets the member list");
    assert_eq!(response.members[0].metadata, subscription(&["topic-x"]));
    let group = core.group(GROUP).expect("group exists");
    assert_eq!(group.state(), GroupState::CompletingRebalance);
}

#[test]
fn old_join_version_without_member_id_round_trip_is_parked_directly() {
    let mut core = core_with(no_delay());
    let mut request = join_request(3, "", "old-client");
    request.require_known_member_id = false;
    assert_eq!(core.join_group(GROUP, request, 0), Ok(Reply::Pending));
    let response = joined(&core.take_completions(), 3);
    assert!(response.member_id.starts_with("old-client-"));
    assert_eq!(response.generation_id, 1);
}

#[test]
fn initial_rebalance_delay_waits_and_extends_for_new_members() {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..GroupConfig::default()
    };
    let mut core = core_with(config);
    join_new(&mut core, 1, "a", 0);
    assert!(core.take_completions().is_empty());
    core.tick(2_000);
    join_new(&mut core, 2, "b", 2_000);
    core.tick(2_999);
    assert!(
        core.take_completions().is_empty(),
        "still inside the first delay"
    );
    core.tick(3_000);
    assert!(
        core.take_completions().is_empty(),
        "a member joined: the delay is extended"
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
    core.tick(6_000);
    let completions = core.take_completions();
    assert_eq!(join_results(&completions).len(), 2);
    assert_eq!(joined(&completions, 1).generation_id, 1);
    assert_eq!(joined(&completions, 2).generation_id, 1);
}

#[test]
fn initial_delay_is_capped_by_the_rebalance_timeout() {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..GroupConfig::default()
    };
    let mut core = core_with(config);
    let mut request = join_request(1, "", "a");
    request.require_known_member_id = false;
    request.rebalance_timeout_ms = 1_000;
    assert_eq!(core.join_group(GROUP, request, 0), Ok(Reply::Pending));
    core.tick(999);
    assert!(core.take_completions().is_empty());
    core.tick(1_000);
    assert_eq!(joined(&core.take_completions(), 1).generation_id, 1);
}

#[test]
fn sync_followers_wait_for_the_leader_assignment() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    });
    let leader = join_new(&mut core, 1, "a", 0);
    let follower = join_new(&mut core, 2, "b", 0);
    core.tick(100);
    assert!(
        core.take_completions().is_empty(),
        "b joined during the delay: extended"
    );
    core.tick(200);
    let completions = core.take_completions();
    let leader_join = joined(&completions, 1);
    let follower_join = joined(&completions, 2);
    assert_eq!(leader_join.leader_id, leader);
    assert_eq!(follower_join.leader_id, leader);
    assert_eq!(leader_join.members.len(), 2);
    assert!(
        follower_join.members.is_empty(),
        "followers get no member list"
    );
    let generation = leader_join.generation_id;

    let reply = core.sync_group(GROUP, sync_request(10, &follower, generation, vec![]), 50);
    assert_eq!(reply, Ok(Reply::Pending));
    assert!(
        core.take_completions().is_empty(),
        "the follower waits for the leader"
    );
    let assignments = vec![
        (leader.clone(), Bytes::from_static(b"L")),
        (follower.clone(), Bytes::from_static(b"F")),
    ];
    let reply = core.sync_group(
        GROUP,
        sync_request(11, &leader, generation, assignments),
        60,
    );
    assert_eq!(reply, Ok(Reply::Pending));
    let synced = sync_results(&core.take_completions());
    let assignment_of = |request_id| {
        synced
            .iter()
            .find(|(id, _)| *id == request_id)
            .map(|(_, result)| result.clone().expect("sync ok").assignment)
    };
    assert_eq!(assignment_of(10), Some(Bytes::from_static(b"F")));
    assert_eq!(assignment_of(11), Some(Bytes::from_static(b"L")));
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::Stable)
    );

    let again = core.sync_group(GROUP, sync_request(12, &follower, generation, vec![]), 70);
    let Ok(Reply::Done(response)) = again else {
        panic!("a sync in Stable is answered at once: {again:?}");
    };
    assert_eq!(response.assignment, Bytes::from_static(b"F"));
    let records = core.take_records();
    assert_eq!(
        records.len(),
        1,
        "one GroupMetadata record when the group became Stable"
    );
}

#[test]
fn members_left_out_of_the_assignment_get_an_empty_one() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let leader = join_new(&mut core, 1, "a", 0);
    let follower = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    core.sync_group(GROUP, sync_request(3, &follower, generation, vec![]), 20)
        .unwrap();
    let only_leader = vec![(leader.clone(), Bytes::from_static(b"L"))];
    core.sync_group(GROUP, sync_request(4, &leader, generation, only_leader), 20)
        .unwrap();
    let synced = sync_results(&core.take_completions());
    let follower_result = synced
        .iter()
        .find(|(id, _)| *id == 3)
        .expect("follower answered");
    assert_eq!(
        follower_result.1.clone().map(|r| r.assignment),
        Ok(Bytes::new())
    );
}

#[test]
fn sync_errors() {
    let mut core = core_with(no_delay());
    let member = join_new(&mut core, 1, "a", 0);
    let generation = joined(&core.take_completions(), 1).generation_id;
    assert_eq!(
        core.sync_group(GROUP, sync_request(2, "nobody", generation, vec![]), 0),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        core.sync_group(GROUP, sync_request(2, &member, generation + 1, vec![]), 0),
        Err(GroupError::IllegalGeneration {
            requested: generation + 1,
            current: generation
        })
    );
    let mut wrong_protocol = sync_request(2, &member, generation, vec![]);
    wrong_protocol.protocol_name = Some("roundrobin".into());
    assert_eq!(
        core.sync_group(GROUP, wrong_protocol, 0),
        Err(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(
        core.sync_group(
            "other-group",
            sync_request(2, &member, generation, vec![]),
            0
        ),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn sync_during_preparing_rebalance_is_refused() {
    let mut core = core_with(no_delay());
    let (first, generation) = stable_single(&mut core, 0);
    join_new(&mut core, 5, "b", 10);
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(
        core.sync_group(GROUP, sync_request(6, &first, generation, vec![]), 10),
        Err(GroupError::RebalanceInProgress)
    );
}

#[test]
fn heartbeats_by_state() {
    let mut core = core_with(no_delay());
    let member = join_new(&mut core, 1, "a", 0);
    let generation = joined(&core.take_completions(), 1).generation_id;
    // CompletingRebalance: a heartbeat is fine.
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat(&member, generation), 1),
        Ok(())
    );
    core.sync_group(GROUP, sync_request(2, &member, generation, vec![]), 2)
        .unwrap();
    // Stable.
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat(&member, generation), 3),
        Ok(())
    );
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat(&member, generation - 1), 3),
        Err(GroupError::IllegalGeneration {
            requested: generation - 1,
            current: generation
        })
    );
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat("stranger", generation), 3),
        Err(GroupError::UnknownMemberId)
    );
    // PreparingRebalance: the member must rejoin.
    join_new(&mut core, 3, "b", 4);
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat(&member, generation), 5),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        core.heartbeat("no-such-group", &heartbeat(&member, generation), 5),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn new_member_triggers_rebalance_completed_when_everyone_rejoined() {
    let mut core = core_with(no_delay());
    let (first, generation) = stable_single(&mut core, 0);
    let second = join_new(&mut core, 10, "b", 100);
    assert!(
        core.take_completions().is_empty(),
        "waits for the first member"
    );
    let reply = core.join_group(GROUP, join_request(11, &first, "solo"), 200);
    assert_eq!(reply, Ok(Reply::Pending));
    let completions = core.take_completions();
    let first_join = joined(&completions, 11);
    let second_join = joined(&completions, 10);
    assert_eq!(first_join.generation_id, generation + 1);
    assert_eq!(first_join.leader_id, first, "the leader stays leader");
    assert_eq!(second_join.leader_id, first);
    assert_eq!(second_join.member_id, second);
}

#[test]
fn rebalance_timeout_drops_members_that_did_not_rejoin() {
    let mut core = core_with(no_delay());
    let (first, generation) = stable_single(&mut core, 0);
    let second = join_new(&mut core, 10, "b", 1_000);
    core.heartbeat(GROUP, &heartbeat(&first, generation), 20_000)
        .ok();
    core.heartbeat(GROUP, &heartbeat(&first, generation), 29_000)
        .ok();
    core.tick(30_999);
    assert!(core.take_completions().is_empty());
    core.tick(31_000);
    let response = joined(&core.take_completions(), 10);
    assert_eq!(response.generation_id, generation + 1);
    assert_eq!(response.leader_id, second, "the only rejoined member leads");
    let group = core.group(GROUP).expect("group");
    assert!(group.member(&first).is_none());
    assert_eq!(group.member_count(), 1);
}

#[test]
fn session_timeout_expires_silent_members_and_rebalances() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    core.sync_group(GROUP, sync_request(3, &b, generation, vec![]), 20)
        .unwrap();
    core.sync_group(GROUP, sync_request(4, &a, generation, vec![]), 20)
        .unwrap();
    core.take_completions();
    // `a` heartbeats, `b` stays silent; sessions are 10 s.
    core.heartbeat(GROUP, &heartbeat(&a, generation), 9_000)
        .unwrap();
    core.tick(10_019);
    assert_eq!(core.group(GROUP).map(|g| g.member_count()), Some(2));
    core.tick(10_020);
    let group = core.group(GROUP).expect("group");
    assert!(group.member(&b).is_none(), "b expired");
    assert_eq!(group.state(), GroupState::PreparingRebalance);
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat(&a, generation), 10_030),
        Err(GroupError::RebalanceInProgress)
    );
    core.join_group(GROUP, join_request(5, &a, "a"), 10_040)
        .unwrap();
    assert_eq!(
        joined(&core.take_completions(), 5).generation_id,
        generation + 1
    );
}

#[test]
fn all_members_leaving_empties_the_group_with_a_new_generation() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    core.take_records();
    let leaving = [
        LeaveMember {
            member_id: a.clone(),
            group_instance_id: None,
        },
        LeaveMember {
            member_id: "ghost".into(),
            group_instance_id: None,
        },
        LeaveMember {
            member_id: b.clone(),
            group_instance_id: None,
        },
    ];
    let results = core.leave_group(GROUP, &leaving, 20).expect("group known");
    assert_eq!(
        results,
        vec![Ok(()), Err(GroupError::UnknownMemberId), Ok(())]
    );
    let group = core.group(GROUP).expect("group kept for its offsets");
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(group.generation_id(), generation + 1);
    assert_eq!(
        core.take_records().len(),
        1,
        "the emptied group is persisted"
    );
    // As Kafka: an unknown group is no group-level error; each leaving
    // member is unknown.
    assert_eq!(
        core.leave_group("unknown", &leaving[..2], 20),
        Ok(vec![
            Err(GroupError::UnknownMemberId),
            Err(GroupError::UnknownMemberId)
        ])
    );
}

#[test]
fn leaving_during_join_phase_completes_the_rebalance() {
    let mut core = core_with(no_delay());
    let (first, generation) = stable_single(&mut core, 0);
    join_new(&mut core, 10, "b", 100);
    let leaving = [LeaveMember {
        member_id: first.clone(),
        group_instance_id: None,
    }];
    core.leave_group(GROUP, &leaving, 200).unwrap();
    let response = joined(&core.take_completions(), 10);
    assert_eq!(response.generation_id, generation + 1);
}

#[test]
fn leaving_member_with_parked_sync_is_answered_unknown_member() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let _a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 2).generation_id;
    core.sync_group(GROUP, sync_request(3, &b, generation, vec![]), 20)
        .unwrap();
    let leaving = [LeaveMember {
        member_id: b.clone(),
        group_instance_id: None,
    }];
    core.leave_group(GROUP, &leaving, 30).unwrap();
    let synced = sync_results(&core.take_completions());
    assert_eq!(synced, vec![(3, Err(GroupError::UnknownMemberId))]);
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
}

#[test]
fn protocol_selection_takes_the_common_protocol_with_most_votes() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let mut requests = Vec::new();
    let preferences: [&[&str]; 3] = [
        &["roundrobin", "range", "sticky"],
        &["range", "roundrobin"],
        &["range", "roundrobin", "sticky"],
    ];
    for (index, names) in preferences.iter().enumerate() {
        let mut request = join_request(index as u64 + 1, "", &format!("c{index}"));
        request.require_known_member_id = false;
        request.protocols = protocols(names);
        requests.push(request);
    }
    for request in requests {
        assert_eq!(core.join_group(GROUP, request, 0), Ok(Reply::Pending));
    }
    settle(&mut core, 10);
    let response = joined(&core.take_completions(), 1);
    assert_eq!(
        response.protocol_name.as_deref(),
        Some("range"),
        "two votes beat one"
    );
}

#[test]
fn incompatible_protocols_and_types_are_refused() {
    let mut core = core_with(no_delay());
    let (_first, _) = stable_single(&mut core, 0);
    let mut other_protocol = join_request(5, "", "b");
    other_protocol.protocols = protocols(&["sticky"]);
    assert_eq!(
        core.join_group(GROUP, other_protocol, 0),
        Err(GroupError::InconsistentGroupProtocol)
    );
    let mut other_type = join_request(6, "", "b");
    other_type.protocol_type = "connect".into();
    assert_eq!(
        core.join_group(GROUP, other_type, 0),
        Err(GroupError::InconsistentGroupProtocol)
    );
    let mut no_protocols = join_request(7, "", "b");
    no_protocols.protocols.clear();
    assert_eq!(
        core.join_group("fresh", no_protocols, 0),
        Err(GroupError::InconsistentGroupProtocol)
    );
    assert!(
        core.group("fresh").is_none(),
        "a refused first join leaves no group behind"
    );
}

#[test]
fn session_timeout_bounds_are_enforced() {
    let mut core = core_with(no_delay());
    for session_timeout_ms in [5_999, 1_800_001] {
        let mut request = join_request(1, "", "a");
        request.session_timeout_ms = session_timeout_ms;
        assert_eq!(
            core.join_group(GROUP, request, 0),
            Err(GroupError::InvalidSessionTimeout {
                session_timeout_ms,
                min_ms: 6_000,
                max_ms: 1_800_000
            })
        );
    }
}

#[test]
fn group_max_size_is_enforced() {
    let mut core = core_with(GroupConfig {
        max_size: 2,
        ..no_delay()
    });
    join_new(&mut core, 1, "a", 0);
    join_new(&mut core, 2, "b", 0);
    assert_eq!(
        core.join_group(GROUP, join_request(3, "", "c"), 0),
        Err(GroupError::GroupMaxSizeReached { max_size: 2 })
    );
}

#[test]
fn invalid_group_id_and_unknown_member_of_missing_group() {
    let mut core = core_with(no_delay());
    assert_eq!(
        core.join_group("", join_request(1, "", "a"), 0),
        Err(GroupError::InvalidGroupId)
    );
    assert_eq!(
        core.join_group(GROUP, join_request(1, "made-up", "a"), 0),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn pending_member_that_never_returns_expires() {
    let mut core = core_with(no_delay());
    let (first, _) = stable_single(&mut core, 0);
    // A new member obtains an id, then disappears.
    assert!(matches!(
        core.join_group(GROUP, join_request(5, "", "ghost"), 100),
        Err(GroupError::MemberIdRequired { .. })
    ));
    // The stable member rejoins (leader rejoin triggers a rebalance).
    core.join_group(GROUP, join_request(6, &first, "solo"), 200)
        .unwrap();
    assert!(
        core.take_completions().is_empty(),
        "blocked by the pending member"
    );
    core.tick(10_100);
    let response = joined(&core.take_completions(), 6);
    assert_eq!(response.members.len(), 1);
}

#[test]
fn members_that_never_sync_are_removed_after_the_rebalance_timeout() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    // `a` keeps heartbeating but neither syncs.
    for now_ms in [5_000, 10_000, 15_000, 20_000, 25_000] {
        core.heartbeat(GROUP, &heartbeat(&a, generation), now_ms)
            .unwrap();
        core.heartbeat(GROUP, &heartbeat(&b, generation), now_ms)
            .unwrap();
    }
    core.tick(30_019);
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::CompletingRebalance)
    );
    core.tick(30_020);
    let group = core.group(GROUP).expect("group");
    assert_eq!(group.member_count(), 0);
    assert_eq!(group.state(), GroupState::Empty);
}

#[test]
fn rejoin_during_completing_rebalance_with_same_protocols_returns_the_generation() {
    let mut core = core_with(no_delay());
    let member = join_new(&mut core, 1, "a", 0);
    let first = joined(&core.take_completions(), 1);
    let again = core.join_group(GROUP, join_request(2, &member, "a"), 10);
    assert_eq!(again, Ok(Reply::Done(first)));
}

#[test]
fn rejoin_during_completing_rebalance_with_new_protocols_restarts_it() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    core.sync_group(GROUP, sync_request(3, &b, generation, vec![]), 20)
        .unwrap();
    let mut changed = join_request(4, &a, "a");
    changed.protocols = protocols(&["range", "sticky"]);
    assert_eq!(core.join_group(GROUP, changed, 30), Ok(Reply::Pending));
    assert_eq!(
        sync_results(&core.take_completions()),
        vec![(3, Err(GroupError::RebalanceInProgress))]
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
    core.join_group(GROUP, join_request(5, &b, "b"), 40)
        .unwrap();
    assert_eq!(
        joined(&core.take_completions(), 4).generation_id,
        generation + 1
    );
}

#[test]
fn follower_rejoin_in_stable_with_same_protocols_needs_no_rebalance() {
    let mut core = core_with(GroupConfig {
        initial_rebalance_delay_ms: 10,
        ..GroupConfig::default()
    });
    let a = join_new(&mut core, 1, "a", 0);
    let b = join_new(&mut core, 2, "b", 0);
    settle(&mut core, 10);
    let generation = joined(&core.take_completions(), 1).generation_id;
    core.sync_group(GROUP, sync_request(3, &b, generation, vec![]), 20)
        .unwrap();
    core.sync_group(GROUP, sync_request(4, &a, generation, vec![]), 20)
        .unwrap();
    let reply = core
        .join_group(GROUP, join_request(5, &b, "b"), 30)
        .unwrap();
    let Reply::Done(response) = reply else {
        panic!("answered at once");
    };
    assert_eq!(response.generation_id, generation);
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::Stable)
    );
    // The leader rejoining forces a rebalance.
    assert_eq!(
        core.join_group(GROUP, join_request(6, &a, "a"), 40),
        Ok(Reply::Pending)
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
}

#[test]
fn repeated_join_while_parked_answers_the_superseded_request() {
    let mut core = core_with(no_delay());
    let (_first, _) = stable_single(&mut core, 0);
    let second = join_new(&mut core, 10, "b", 0);
    assert_eq!(
        core.join_group(GROUP, join_request(12, &second, "b"), 1),
        Ok(Reply::Pending)
    );
    assert_eq!(
        join_results(&core.take_completions()),
        vec![(10, Err(GroupError::RebalanceInProgress))]
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
}

/// Ticks past the initial delay of 10 ms and its one extension.
fn settle(core: &mut strom_coordinator::CoordinatorCore, now_ms: i64) {
    core.tick(now_ms);
    core.tick(now_ms + 10);
}

fn stable_static_group(core: &mut strom_coordinator::CoordinatorCore) -> (String, String, i32) {
    assert_eq!(
        core.join_group(GROUP, static_join(1, "", "instance-a"), 0),
        Ok(Reply::Pending)
    );
    assert_eq!(
        core.join_group(GROUP, static_join(2, "", "instance-b"), 0),
        Ok(Reply::Pending)
    );
    core.tick(3_000);
    core.tick(6_000);
    let completions = core.take_completions();
    let a = joined(&completions, 1);
    let b = joined(&completions, 2);
    assert!(
        a.member_id.starts_with("instance-a-"),
        "static ids use the instance id"
    );
    let generation = a.generation_id;
    let mut sync_b = sync_request(3, &b.member_id, generation, vec![]);
    sync_b.group_instance_id = Some("instance-b".into());
    core.sync_group(GROUP, sync_b, 10).unwrap();
    let assignments = vec![
        (a.member_id.clone(), Bytes::from_static(b"A")),
        (b.member_id.clone(), Bytes::from_static(b"B")),
    ];
    let mut sync_a = sync_request(4, &a.member_id, generation, assignments);
    sync_a.group_instance_id = Some("instance-a".into());
    core.sync_group(GROUP, sync_a, 10).unwrap();
    core.take_completions();
    core.take_records();
    (a.member_id, b.member_id, generation)
}

#[test]
fn static_members_skip_member_id_required() {
    let mut core = core_with(GroupConfig::default());
    let (a, b, generation) = stable_static_group(&mut core);
    assert_ne!(a, b);
    assert_eq!(generation, 1);
}

#[test]
fn restarted_static_member_replaces_itself_without_rebalance() {
    let mut core = core_with(GroupConfig::default());
    let (_a, old_b, generation) = stable_static_group(&mut core);
    let reply = core
        .join_group(GROUP, static_join(20, "", "instance-b"), 5_000)
        .unwrap();
    let Reply::Done(response) = reply else {
        panic!("no rebalance expected: {reply:?}");
    };
    assert_ne!(response.member_id, old_b);
    assert_eq!(response.generation_id, generation);
    assert!(!response.skip_assignment, "a follower never assigns");
    let group = core.group(GROUP).expect("group");
    assert_eq!(group.state(), GroupState::Stable);
    assert_eq!(group.generation_id(), generation);
    assert_eq!(core.take_records().len(), 1, "the replacement is persisted");

    // The new member keeps the old assignment.
    let mut sync = sync_request(21, &response.member_id, generation, vec![]);
    sync.group_instance_id = Some("instance-b".into());
    let Ok(Reply::Done(synced)) = core.sync_group(GROUP, sync, 5_001) else {
        panic!("sync in Stable is immediate");
    };
    assert_eq!(synced.assignment, Bytes::from_static(b"B"));

    // The old member id is fenced.
    let mut old_heartbeat = heartbeat(&old_b, generation);
    old_heartbeat.group_instance_id = Some("instance-b".into());
    assert_eq!(
        core.heartbeat(GROUP, &old_heartbeat, 5_002),
        Err(GroupError::FencedInstanceId)
    );
    old_heartbeat.group_instance_id = None;
    assert_eq!(
        core.heartbeat(GROUP, &old_heartbeat, 5_002),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn restarted_static_leader_is_told_to_skip_assignment() {
    let mut core = core_with(GroupConfig::default());
    let (old_a, _b, generation) = stable_static_group(&mut core);
    let reply = core
        .join_group(GROUP, static_join(30, "", "instance-a"), 5_000)
        .unwrap();
    let Reply::Done(response) = reply else {
        panic!("no rebalance expected");
    };
    assert_eq!(response.leader_id, response.member_id);
    assert_ne!(response.member_id, old_a);
    assert!(response.skip_assignment);
    assert_eq!(response.members.len(), 2);
    assert_eq!(response.generation_id, generation);
}

#[test]
fn static_member_with_changed_protocols_triggers_rebalance() {
    let mut core = core_with(GroupConfig::default());
    let (_a, _b, _generation) = stable_static_group(&mut core);
    let mut changed = static_join(40, "", "instance-b");
    changed.protocols = vec![Protocol {
        name: "range".into(),
        metadata: subscription(&["topic-x", "topic-y"]),
    }];
    assert_eq!(core.join_group(GROUP, changed, 5_000), Ok(Reply::Pending));
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
}

#[test]
fn static_member_replaced_while_parked_is_fenced() {
    let mut core = core_with(GroupConfig::default());
    let (_a, old_b, generation) = stable_static_group(&mut core);
    // A rebalance starts; the old b rejoins and is parked.
    join_new(&mut core, 50, "dynamic", 100);
    let mut rejoin = static_join(51, &old_b, "instance-b");
    rejoin.member_id = old_b.clone();
    assert_eq!(core.join_group(GROUP, rejoin, 110), Ok(Reply::Pending));
    // A restarted b replaces it.
    assert_eq!(
        core.join_group(GROUP, static_join(52, "", "instance-b"), 120),
        Ok(Reply::Pending)
    );
    let results = join_results(&core.take_completions());
    assert!(
        results.contains(&(51, Err(GroupError::FencedInstanceId))),
        "{results:?}"
    );
    assert!(generation > 0);
}

#[test]
fn static_leave_by_instance_id() {
    let mut core = core_with(GroupConfig::default());
    let (a, _b, _generation) = stable_static_group(&mut core);
    let fenced = [LeaveMember {
        member_id: "wrong-id".into(),
        group_instance_id: Some("instance-a".into()),
    }];
    assert_eq!(
        core.leave_group(GROUP, &fenced, 100),
        Ok(vec![Err(GroupError::FencedInstanceId)])
    );
    let by_instance = [
        LeaveMember {
            member_id: String::new(),
            group_instance_id: Some("instance-b".into()),
        },
        LeaveMember {
            member_id: a.clone(),
            group_instance_id: Some("instance-a".into()),
        },
        LeaveMember {
            member_id: String::new(),
            group_instance_id: Some("instance-z".into()),
        },
    ];
    assert_eq!(
        core.leave_group(GROUP, &by_instance, 100),
        Ok(vec![Ok(()), Ok(()), Err(GroupError::UnknownMemberId)])
    );
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::Empty)
    );
}

#[test]
fn static_member_not_rejoining_stays_through_the_rebalance_timeout() {
    let mut core = core_with(GroupConfig::default());
    let (a, b, generation) = stable_static_group(&mut core);
    let mut rejoin = static_join(60, &a, "instance-a");
    rejoin.member_id = a.clone();
    assert_eq!(core.join_group(GROUP, rejoin, 100), Ok(Reply::Pending));
    let mut hb = heartbeat(&b, generation);
    hb.group_instance_id = Some("instance-b".into());
    for now_ms in [9_000, 18_000, 27_000] {
        assert_eq!(
            core.heartbeat(GROUP, &hb, now_ms),
            Err(GroupError::RebalanceInProgress)
        );
    }
    core.tick(30_099);
    assert!(core.take_completions().is_empty());
    core.tick(30_100);
    let response = joined(&core.take_completions(), 60);
    assert_eq!(response.generation_id, generation + 1);
    assert!(
        core.group(GROUP).and_then(|g| g.member(&b)).is_some(),
        "static member kept"
    );
}

#[test]
fn requests_for_partitions_not_owned_or_loading() {
    let config = strom_coordinator::CoordinatorConfig {
        offsets_topic_partitions: 50,
        ..Default::default()
    };
    let mut core = strom_coordinator::CoordinatorCore::new(config, seeded());
    let partition = core.partition_for(GROUP);
    assert_eq!(
        core.join_group(GROUP, join_request(1, "", "a"), 0),
        Err(GroupError::NotCoordinator { partition })
    );
    core.begin_loading(partition);
    assert_eq!(
        core.join_group(GROUP, join_request(1, "", "a"), 0),
        Err(GroupError::CoordinatorLoadInProgress { partition })
    );
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat("m", 1), 0),
        Err(GroupError::CoordinatorLoadInProgress { partition })
    );
}
