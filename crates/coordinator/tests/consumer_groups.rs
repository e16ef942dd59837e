//! Consumer-protocol groups (KIP-848) through the sans-IO coordinator:
//! joins, reconciliation with revocation before reassignment, timeouts,
//! static membership, errors, and the meeting with the classic protocol.

use std::collections::{BTreeMap, BTreeSet};

use strom_coordinator::{
    Assignment, ConsumerGroupConfig, ConsumerGroupState, ConsumerHeartbeat,
    ConsumerHeartbeatResponse, CoordinatorConfig, CoordinatorCore, GroupError, InMemoryOffsetsLog,
    MemberState, OffsetCommitPartition, OffsetCommitRequest, TopicMetadata, TxnOffsetCommitRequest,
};
use uuid::Uuid;

use crate::common::{join_request, seeded, GROUP};

const TOPIC: Uuid = Uuid::from_u128(0xAB);

fn catalog(partitions: i32) -> BTreeMap<String, TopicMetadata> {
    [(
        "orders".to_string(),
        TopicMetadata {
            topic_id: TOPIC,
            partitions,
        },
    )]
    .into()
}

pub(crate) fn consumer_core(consumer: ConsumerGroupConfig) -> CoordinatorCore {
    let config = CoordinatorConfig {
        offsets_topic_partitions: 1,
        consumer,
        ..CoordinatorConfig::default()
    };
    let mut core = CoordinatorCore::new(config, seeded());
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .expect("empty log loads");
    core
}

fn parts(partitions: impl IntoIterator<Item = i32>) -> Assignment {
    let set: BTreeSet<i32> = partitions.into_iter().collect();
    if set.is_empty() {
        return Assignment::new();
    }
    [(TOPIC, set)].into()
}

fn join(member_id: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member_id.into(),
        member_epoch: 0,
        member_id_required: true,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["orders".into()]),
        owned_partitions: Some(Assignment::new()),
        ..ConsumerHeartbeat::default()
    }
}

fn beat(member_id: &str, epoch: i32, owned: &Assignment) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member_id.into(),
        member_epoch: epoch,
        member_id_required: true,
        rebalance_timeout_ms: -1,
        owned_partitions: Some(owned.clone()),
        ..ConsumerHeartbeat::default()
    }
}

struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
}

impl Client {
    fn new(id: &str) -> Client {
        Client {
            id: id.into(),
            epoch: 0,
            owned: Assignment::new(),
        }
    }

    /// One heartbeat; the client adopts whatever assignment it is given
    /// (revoking what is not in it), as a real consumer does.
    fn heartbeat(&mut self, core: &mut CoordinatorCore, now_ms: i64) -> ConsumerHeartbeatResponse {
        let request = if self.epoch == 0 {
            join(&self.id)
        } else {
            beat(&self.id, self.epoch, &self.owned)
        };
        let response = core
            .consumer_heartbeat(GROUP, &request, &catalog(6), now_ms)
            .expect("heartbeat accepted");
        self.epoch = response.member_epoch;
        if let Some(assignment) = &response.assignment {
            self.owned = assignment.clone();
        }
        response
    }
}

fn owned_twice(clients: &[Client]) -> bool {
    let mut seen = BTreeSet::new();
    clients
        .iter()
        .flat_map(|client| client.owned.values().flatten().copied())
        .any(|partition| !seen.insert(partition))
}

#[test]
fn a_single_member_gets_every_partition_at_epoch_one() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut client = Client::new("a");
    let response = client.heartbeat(&mut core, 0);
    assert_eq!(response.member_epoch, 1);
    assert_eq!(response.heartbeat_interval_ms, 5_000);
    assert_eq!(response.assignment, Some(parts(0..6)));
    let group = core.consumer_group(GROUP).expect("created");
    assert_eq!(group.group_epoch(), 1);
    assert_eq!(group.assignment_epoch(), 1);
    assert_eq!(group.state(), ConsumerGroupState::Stable);
    // A plain heartbeat with an unchanged assignment carries none.
    assert_eq!(client.heartbeat(&mut core, 100).assignment, None);
}

#[test]
fn a_partition_moves_only_after_its_owner_revoked_it() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut a = Client::new("a");
    let mut b = Client::new("b");
    a.heartbeat(&mut core, 0);
    let joined = b.heartbeat(&mut core, 10);
    // b is at the new epoch but a still owns everything: nothing for b yet.
    assert_eq!(joined.member_epoch, 2);
    assert_eq!(joined.assignment, Some(Assignment::new()));
    assert_eq!(
        core.consumer_group(GROUP).expect("group").members()["b"].state,
        MemberState::UnreleasedPartitions
    );
    // a is told to keep three partitions and stays at epoch 1 while revoking.
    let told = a.heartbeat(&mut core, 20);
    assert_eq!(told.member_epoch, 1);
    let kept = told.assignment.expect("a's assignment changed");
    assert_eq!(kept.values().map(BTreeSet::len).sum::<usize>(), 3);
    assert_eq!(
        core.consumer_group(GROUP).expect("group").members()["a"].state,
        MemberState::UnrevokedPartitions
    );
    // b still gets nothing while a has not acknowledged.
    assert_eq!(b.heartbeat(&mut core, 30).assignment, None);
    assert!(b.owned.is_empty());
    // a's next heartbeat shows the revoked partitions gone: it reaches epoch 2.
    assert_eq!(a.heartbeat(&mut core, 40).member_epoch, 2);
    assert_eq!(a.owned, kept);
    let released = b.heartbeat(&mut core, 50);
    assert_eq!(released.member_epoch, 2);
    assert_eq!(b.owned.values().map(BTreeSet::len).sum::<usize>(), 3);
    assert!(!owned_twice(&[a, b]));
    assert_eq!(
        core.consumer_group(GROUP).expect("group").state(),
        ConsumerGroupState::Stable
    );
}

#[test]
fn scaling_up_and_down_never_owns_a_partition_twice() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut clients = vec![Client::new("a")];
    let mut now_ms = 0;
    clients[0].heartbeat(&mut core, now_ms);
    clients.push(Client::new("b"));
    clients.push(Client::new("c"));
    for _ in 0..6 {
        for client in &mut clients {
            now_ms += 10;
            client.heartbeat(&mut core, now_ms);
            // An owner's view may lag; what the coordinator hands out must not overlap.
        }
        let group = core.consumer_group(GROUP).expect("group");
        let mut seen = BTreeSet::new();
        for member in group.members().values() {
            for partition in member
                .assigned
                .values()
                .flatten()
                .chain(member.revoking.values().flatten())
            {
                assert!(seen.insert(*partition), "partition {partition} held twice");
            }
        }
    }
    assert_eq!(
        core.consumer_group(GROUP).expect("group").state(),
        ConsumerGroupState::Stable
    );
    for client in &clients {
        assert_eq!(client.owned.values().map(BTreeSet::len).sum::<usize>(), 2);
    }
    assert!(!owned_twice(&clients));
    // c leaves; the others take its partitions.
    let leave = ConsumerHeartbeat {
        member_epoch: -1,
        ..beat("c", clients[2].epoch, &clients[2].owned)
    };
    let left = core
        .consumer_heartbeat(GROUP, &leave, &catalog(6), now_ms)
        .expect("leave accepted");
    assert_eq!(left.member_epoch, -1);
    clients.pop();
    for _ in 0..3 {
        for client in &mut clients {
            now_ms += 10;
            client.heartbeat(&mut core, now_ms);
        }
    }
    assert_eq!(
        clients
            .iter()
            .map(|c| c.owned.values().map(BTreeSet::len).sum::<usize>())
            .sum::<usize>(),
        6
    );
    assert!(!owned_twice(&clients));
}

#[test]
fn a_silent_member_is_fenced_after_the_session_timeout() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut a = Client::new("a");
    let mut b = Client::new("b");
    a.heartbeat(&mut core, 0);
    b.heartbeat(&mut core, 0);
    for step in 1..5 {
        a.heartbeat(&mut core, step * 10);
        b.heartbeat(&mut core, step * 10);
    }
    assert_eq!(
        core.next_deadline_ms(),
        Some(40 + 45_000).min(core.next_deadline_ms())
    );
    core.tick(40 + 44_999);
    assert_eq!(
        core.consumer_group(GROUP).expect("group").members().len(),
        2
    );
    a.heartbeat(&mut core, 40_000);
    core.tick(40 + 45_000);
    let group = core.consumer_group(GROUP).expect("group");
    assert_eq!(group.members().keys().collect::<Vec<_>>(), vec!["a"]);
    a.heartbeat(&mut core, 45_100);
    assert_eq!(a.owned, parts(0..6));
    // b's next heartbeat is refused: it must rejoin.
    let stale = core.consumer_heartbeat(GROUP, &beat("b", b.epoch, &b.owned), &catalog(6), 45_200);
    assert_eq!(stale, Err(GroupError::UnknownMemberId));
}

#[test]
fn a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut a = Client::new("a");
    a.heartbeat(&mut core, 0);
    let mut b = Client::new("b");
    b.heartbeat(&mut core, 0);
    // a learns of the revocation but keeps reporting everything as owned.
    let all = parts(0..6);
    core.consumer_heartbeat(GROUP, &beat("a", 1, &all), &catalog(6), 100)
        .expect("heartbeat");
    for now_ms in [10_000, 20_000, 30_000] {
        core.consumer_heartbeat(GROUP, &beat("a", 1, &all), &catalog(6), now_ms)
            .expect("heartbeat");
        b.heartbeat(&mut core, now_ms);
    }
    core.tick(30_099);
    assert!(core
        .consumer_group(GROUP)
        .expect("group")
        .members()
        .contains_key("a"));
    core.tick(30_100);
    assert!(!core
        .consumer_group(GROUP)
        .expect("group")
        .members()
        .contains_key("a"));
    b.heartbeat(&mut core, 30_200);
    b.heartbeat(&mut core, 30_300);
    assert_eq!(b.owned, parts(0..6));
}

#[test]
fn epochs_ahead_or_behind_are_fenced_but_the_previous_epoch_with_a_subset_passes() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let mut a = Client::new("a");
    a.heartbeat(&mut core, 0);
    let ahead = core.consumer_heartbeat(GROUP, &beat("a", 5, &a.owned), &catalog(6), 1);
    assert_eq!(
        ahead,
        Err(GroupError::FencedMemberEpoch {
            received: 5,
            current: 1
        })
    );
    // Grow the topic: a moves to epoch 2 with more partitions.
    let grown = core
        .consumer_heartbeat(GROUP, &beat("a", 1, &a.owned), &catalog(8), 2)
        .expect("heartbeat");
    assert_eq!(grown.member_epoch, 2);
    // The response was lost: the previous epoch with a subset still passes.
    let retried = core.consumer_heartbeat(GROUP, &beat("a", 1, &parts(0..6)), &catalog(8), 3);
    assert_eq!(retried.map(|r| r.member_epoch), Ok(2));
    // The previous epoch with partitions it was never given does not.
    let foreign = core.consumer_heartbeat(GROUP, &beat("a", 1, &parts(0..9)), &catalog(8), 4);
    assert!(matches!(foreign, Err(GroupError::FencedMemberEpoch { .. })));
    let unknown =
        core.consumer_heartbeat(GROUP, &beat("zz", 1, &Assignment::new()), &catalog(8), 5);
    assert_eq!(unknown, Err(GroupError::UnknownMemberId));
    let no_group =
        core.consumer_heartbeat("other", &beat("a", 1, &Assignment::new()), &catalog(8), 5);
    assert_eq!(no_group, Err(GroupError::GroupIdNotFound));
}

#[test]
fn the_group_refuses_members_past_its_max_size() {
    let mut core = consumer_core(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    Client::new("a").heartbeat(&mut core, 0);
    let refused = core.consumer_heartbeat(GROUP, &join("b"), &catalog(6), 1);
    assert_eq!(
        refused,
        Err(GroupError::GroupMaxSizeReached { max_size: 1 })
    );
}

#[test]
fn a_static_member_keeps_its_assignment_across_a_temporary_leave() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let static_join = |member_id: &str| ConsumerHeartbeat {
        instance_id: Some("instance-1".into()),
        ..join(member_id)
    };
    let first = core
        .consumer_heartbeat(GROUP, &static_join("a1"), &catalog(6), 0)
        .expect("joins");
    assert_eq!(first.assignment, Some(parts(0..6)));
    // While a1 holds the instance id, another join with it is refused.
    let unreleased = core.consumer_heartbeat(GROUP, &static_join("a2"), &catalog(6), 1);
    assert!(matches!(
        unreleased,
        Err(GroupError::UnreleasedInstanceId { .. })
    ));
    let leave = ConsumerHeartbeat {
        member_epoch: -2,
        instance_id: Some("instance-1".into()),
        ..beat("a1", 1, &parts(0..6))
    };
    let left = core
        .consumer_heartbeat(GROUP, &leave, &catalog(6), 2)
        .expect("static leave");
    assert_eq!(left.member_epoch, -2);
    let epoch_before = core.consumer_group(GROUP).expect("group").group_epoch();
    // A dynamic member joining now gets nothing: the static member's
    // partitions are kept for it.
    let other = core
        .consumer_heartbeat(GROUP, &join("b"), &catalog(6), 3)
        .expect("joins");
    assert_eq!(other.assignment, Some(Assignment::new()));
    let back = core
        .consumer_heartbeat(GROUP, &static_join("a2"), &catalog(6), 4)
        .expect("rejoins");
    let back_assignment = back.assignment.expect("assignment on join");
    assert!(!back_assignment.is_empty());
    assert!(core.consumer_group(GROUP).expect("group").group_epoch() > epoch_before);
    assert!(!core
        .consumer_group(GROUP)
        .expect("group")
        .members()
        .contains_key("a1"));
}

#[test]
fn a_static_member_that_left_is_removed_at_its_session_timeout() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let join_static = ConsumerHeartbeat {
        instance_id: Some("i".into()),
        ..join("a")
    };
    core.consumer_heartbeat(GROUP, &join_static, &catalog(6), 0)
        .expect("joins");
    let leave = ConsumerHeartbeat {
        member_epoch: -2,
        instance_id: Some("i".into()),
        ..beat("a", 1, &parts(0..6))
    };
    core.consumer_heartbeat(GROUP, &leave, &catalog(6), 10)
        .expect("leaves");
    core.tick(44_999);
    assert_eq!(
        core.consumer_group(GROUP).expect("group").members().len(),
        1
    );
    core.tick(45_000);
    assert_eq!(
        core.consumer_group(GROUP).expect("group").state(),
        ConsumerGroupState::Empty
    );
}

#[test]
fn the_range_assignor_is_chosen_by_the_client() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let request = |member_id: &str| ConsumerHeartbeat {
        server_assignor: Some("range".into()),
        ..join(member_id)
    };
    core.consumer_heartbeat(GROUP, &request("a"), &catalog(6), 0)
        .expect("joins");
    core.consumer_heartbeat(GROUP, &request("b"), &catalog(6), 0)
        .expect("joins");
    let group = core.consumer_group(GROUP).expect("group");
    assert_eq!(group.target_of("a"), Some(&parts(0..3)));
    assert_eq!(group.target_of("b"), Some(&parts(3..6)));
}

#[test]
fn a_v0_join_without_member_id_gets_one() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let request = ConsumerHeartbeat {
        member_id_required: false,
        ..join("")
    };
    let response = core
        .consumer_heartbeat(GROUP, &request, &catalog(6), 0)
        .expect("joins");
    assert!(!response.member_id.is_empty());
    assert!(core
        .consumer_group(GROUP)
        .expect("group")
        .members()
        .contains_key(&response.member_id));
}

#[test]
fn classic_and_consumer_protocols_do_not_share_a_live_group() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    core.consumer_heartbeat(GROUP, &join("a"), &catalog(6), 0)
        .expect("joins");
    let classic = core.join_group(GROUP, join_request(1, "", "c"), 1);
    assert_eq!(classic.err(), Some(GroupError::InconsistentGroupProtocol));
    let mut classic_core = consumer_core(ConsumerGroupConfig::default());
    let member_id = match classic_core.join_group(GROUP, join_request(1, "", "c"), 0) {
        Err(GroupError::MemberIdRequired { member_id }) => member_id,
        other => panic!("unexpected {other:?}"),
    };
    classic_core
        .join_group(GROUP, join_request(2, &member_id, "c"), 0)
        .expect("joins");
    let consumer = classic_core.consumer_heartbeat(GROUP, &join("c"), &catalog(6), 1);
    assert_eq!(consumer, Err(GroupError::GroupIdNotFound));
    assert!(classic_core.delete_groups(&[GROUP.to_string()], 2)[0]
        .1
        .is_err());
    assert!(core.delete_groups(&[GROUP.to_string()], 2)[0].1 == Err(GroupError::NonEmptyGroup));
}

#[test]
fn offset_commits_carry_the_member_epoch() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    core.consumer_heartbeat(GROUP, &join("a"), &catalog(6), 0)
        .expect("joins");
    let commit = |member_id: &str, epoch: i32| OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: epoch,
        member_id: member_id.into(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "orders".into(),
            partition: 0,
            offset: 5,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    };
    assert!(core.commit_offsets(&commit("a", 1), 1).is_ok());
    assert_eq!(
        core.commit_offsets(&commit("a", 0), 1).err(),
        Some(GroupError::StaleMemberEpoch {
            received: 0,
            current: 1
        })
    );
    assert_eq!(
        core.commit_offsets(&commit("nobody", 1), 1).err(),
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        core.commit_offsets(&commit("", -1), 1).err(),
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        core.validate_offset_fetch(GROUP, Some("a"), 0),
        Err(GroupError::StaleMemberEpoch {
            received: 0,
            current: 1
        })
    );
    assert_eq!(core.validate_offset_fetch(GROUP, None, -1), Ok(()));
}

#[test]
fn a_regex_subscription_follows_matching_topics() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    let other = Uuid::from_u128(0xEF);
    let mut topics = catalog(2);
    topics.insert(
        "payments".into(),
        TopicMetadata {
            topic_id: other,
            partitions: 2,
        },
    );
    let request = ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("ord.*".into()),
        ..join("a")
    };
    let joined = core
        .consumer_heartbeat(GROUP, &request, &topics, 0)
        .expect("joins by pattern");
    assert_eq!(joined.assignment, Some(parts(0..2)));
    // A new topic that matches bumps the group epoch and is assigned.
    let third = Uuid::from_u128(0x11);
    topics.insert(
        "orders-eu".into(),
        TopicMetadata {
            topic_id: third,
            partitions: 1,
        },
    );
    let grown = core
        .consumer_heartbeat(GROUP, &beat("a", 1, &parts(0..2)), &topics, 1)
        .expect("heartbeat");
    assert_eq!(grown.member_epoch, 2);
    let assignment = grown.assignment.expect("assignment changed");
    assert!(assignment.contains_key(&third));
    assert!(!assignment.contains_key(&other));
    let bad = ConsumerHeartbeat {
        subscribed_topic_regex: Some("(".into()),
        ..join("b")
    };
    assert_eq!(
        core.consumer_heartbeat(GROUP, &bad, &topics, 2),
        Err(GroupError::InvalidRegularExpression)
    );
}

#[test]
fn offset_delete_refuses_topics_a_consumer_group_subscribes_to() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    core.consumer_heartbeat(GROUP, &join("a"), &catalog(6), 0)
        .expect("joins");
    let results = core
        .delete_offsets(
            GROUP,
            &[
                ("orders".to_string(), vec![0]),
                ("other".to_string(), vec![0]),
            ],
            1,
        )
        .expect("group exists");
    assert_eq!(results[0].1, Err(GroupError::GroupSubscribedToTopic));
    let other = results.iter().find(|(key, _)| key.topic == "other");
    assert_eq!(other.map(|(_, result)| result.clone()), Some(Ok(())));
}

#[test]
fn transactional_commits_carry_the_member_epoch_too() {
    let mut core = consumer_core(ConsumerGroupConfig::default());
    core.consumer_heartbeat(GROUP, &join("a"), &catalog(6), 0)
        .expect("joins");
    let commit = |member_id: &str, epoch: i32| TxnOffsetCommitRequest {
        group_id: GROUP.into(),
        producer_id: 7,
        producer_epoch: 0,
        generation_id: epoch,
        member_id: member_id.into(),
        group_instance_id: None,
        partitions: vec![OffsetCommitPartition {
            topic: "orders".into(),
            partition: 0,
            offset: 5,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    };
    assert!(core
        .commit_transactional_offsets(&commit("a", 1), 1)
        .is_ok());
    assert!(core
        .commit_transactional_offsets(&commit("", -1), 1)
        .is_ok());
    assert_eq!(
        core.commit_transactional_offsets(&commit("a", 0), 1).err(),
        Some(GroupError::IllegalGeneration {
            requested: 0,
            current: 1
        })
    );
    assert_eq!(
        core.commit_transactional_offsets(&commit("nobody", 1), 1)
            .err(),
        Some(GroupError::UnknownMemberId)
    );
}
