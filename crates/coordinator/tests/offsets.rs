//! Committed offsets and the group administration APIs through the sans-IO
//! core: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, ListGroups,
//! DescribeGroups, retention and deleted topics.

use crate::common;

use bytes::Bytes;
use common::*;
use strom_coordinator::records::OffsetsRecord;
use strom_coordinator::{
    CoordinatorConfig, CoordinatorCore, GroupError, GroupState, InMemoryOffsetsLog, LeaveMember,
    OffsetCommitPartition, OffsetCommitRequest, OffsetConfig, OffsetsLog, TopicPartition,
};

fn partition(topic: &str, index: i32, offset: i64) -> OffsetCommitPartition {
    OffsetCommitPartition {
        topic: topic.to_owned(),
        partition: index,
        offset,
        leader_epoch: Some(5),
        metadata: Some("meta".to_owned()),
        commit_timestamp_ms: None,
    }
}

fn standalone(group_id: &str, partitions: Vec<OffsetCommitPartition>) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group_id.to_owned(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions,
    }
}

fn member_commit(member_id: &str, generation_id: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.to_owned(),
        generation_id,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![partition("topic-x", 0, offset)],
    }
}

fn decoded_records(core: &mut CoordinatorCore) -> Vec<OffsetsRecord> {
    core.take_records()
        .into_iter()
        .map(|(_, record)| OffsetsRecord::from_log_record(&record).expect("decodes"))
        .collect()
}

#[test]
fn standalone_commit_creates_an_empty_group_and_writes_records() {
    let mut core = core_with(no_delay());
    let results = core
        .commit_offsets(
            &standalone("simple", vec![partition("t", 0, 42), partition("t", 1, 7)]),
            1_000,
        )
        .expect("accepted");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|(_, result)| result.is_ok()));
    assert_eq!(
        core.group("simple").map(|g| g.state()),
        Some(GroupState::Empty)
    );
    let fetched = core.fetch_offsets("simple", None, false).expect("served");
    assert_eq!(
        fetched.iter().map(|p| p.offset).collect::<Vec<_>>(),
        vec![42, 7]
    );
    assert_eq!(fetched[0].leader_epoch, Some(5));
    assert_eq!(fetched[0].metadata, "meta");
    let records = decoded_records(&mut core);
    assert_eq!(records.len(), 2);
    let OffsetsRecord::OffsetCommit {
        value: Some(value), ..
    } = &records[0]
    else {
        panic!("an offset commit record");
    };
    assert_eq!(
        (value.offset, value.leader_epoch, value.commit_timestamp_ms),
        (42, 5, 1_000)
    );
}

#[test]
fn commit_with_generation_to_an_unknown_group_is_refused() {
    let mut core = core_with(no_delay());
    let mut request = standalone("nobody", vec![partition("t", 0, 1)]);
    request.generation_id = 3;
    request.member_id = "m".into();
    assert_eq!(
        core.commit_offsets(&request, 0),
        Err(GroupError::IllegalGeneration {
            requested: 3,
            current: -1
        })
    );
    assert_eq!(
        core.commit_offsets(&standalone("", vec![]), 0),
        Err(GroupError::InvalidGroupId)
    );
}

#[test]
fn member_commits_are_checked_against_member_and_generation() {
    let mut core = core_with(no_delay());
    let (member, generation) = stable_single(&mut core, 0);
    assert!(core
        .commit_offsets(&member_commit(&member, generation, 10), 5)
        .is_ok());
    assert_eq!(
        core.commit_offsets(&member_commit(&member, generation + 1, 10), 5),
        Err(GroupError::IllegalGeneration {
            requested: generation + 1,
            current: generation
        })
    );
    assert_eq!(
        core.commit_offsets(&member_commit("intruder", generation, 10), 5),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        core.commit_offsets(&standalone(GROUP, vec![partition("t", 0, 1)]), 5),
        Err(GroupError::UnknownMemberId),
        "a standalone commit to a group with members is refused"
    );
    let fetched = core
        .fetch_offsets(GROUP, Some(&[("topic-x".to_owned(), vec![0, 1])]), false)
        .expect("served");
    assert_eq!(
        fetched.iter().map(|p| p.offset).collect::<Vec<_>>(),
        vec![10, -1]
    );
}

#[test]
fn commit_during_completing_rebalance_is_refused_but_allowed_while_preparing() {
    let mut core = core_with(no_delay());
    let member = join_new(&mut core, 1, "a", 0);
    let generation = joined(&core.take_completions(), 1).generation_id;
    assert_eq!(
        core.commit_offsets(&member_commit(&member, generation, 1), 1),
        Err(GroupError::RebalanceInProgress)
    );
    core.sync_group(GROUP, sync_request(2, &member, generation, vec![]), 2)
        .unwrap();
    join_new(&mut core, 3, "b", 3);
    assert_eq!(
        core.group(GROUP).map(|g| g.state()),
        Some(GroupState::PreparingRebalance)
    );
    assert!(core
        .commit_offsets(&member_commit(&member, generation, 1), 4)
        .is_ok());
}

#[test]
fn static_member_commit_with_fenced_instance_is_refused() {
    let mut core = core_with(no_delay());
    assert!(core
        .join_group(GROUP, static_join(1, "", "inst"), 0)
        .is_ok());
    let response = joined(&core.take_completions(), 1);
    let mut request = member_commit("old-id", response.generation_id, 1);
    request.group_instance_id = Some("inst".into());
    assert_eq!(
        core.commit_offsets(&request, 1),
        Err(GroupError::FencedInstanceId)
    );
}

#[test]
fn oversized_metadata_is_refused_per_partition() {
    let mut core = core_with(no_delay());
    let mut big = partition("t", 1, 1);
    big.metadata = Some("x".repeat(4_097));
    let results = core
        .commit_offsets(&standalone("g", vec![partition("t", 0, 1), big]), 0)
        .expect("request accepted");
    assert_eq!(results[0].1, Ok(()));
    assert_eq!(
        results[1].1,
        Err(GroupError::OffsetMetadataTooLarge {
            metadata_bytes: 4_097,
            max_bytes: 4_096
        })
    );
    assert_eq!(core.offsets("g").map(|o| o.len()), Some(1));
}

#[test]
fn fetch_of_an_unknown_group_answers_minus_one() {
    let core = core_with(no_delay());
    let fetched = core
        .fetch_offsets("unknown", Some(&[("t".to_owned(), vec![0])]), false)
        .expect("served");
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].offset, -1);
    assert!(core
        .fetch_offsets("unknown", None, false)
        .expect("served")
        .is_empty());
}

#[test]
fn offset_delete_refuses_subscribed_topics_of_a_non_empty_group() {
    let mut core = core_with(no_delay());
    let (member, generation) = stable_single(&mut core, 0);
    let mut request = member_commit(&member, generation, 10);
    request.partitions.push(partition("other", 0, 3));
    core.commit_offsets(&request, 1).unwrap();
    core.take_records();
    let results = core
        .delete_offsets(
            GROUP,
            &[
                ("topic-x".to_owned(), vec![0]),
                ("other".to_owned(), vec![0]),
            ],
            2,
        )
        .expect("group known");
    assert_eq!(
        results[0],
        (
            TopicPartition::new("topic-x", 0),
            Err(GroupError::GroupSubscribedToTopic)
        )
    );
    assert_eq!(results[1], (TopicPartition::new("other", 0), Ok(())));
    let records = decoded_records(&mut core);
    assert!(matches!(
        &records[..],
        [OffsetsRecord::OffsetCommit { value: None, .. }]
    ));
    assert_eq!(
        core.delete_offsets("missing", &[("t".to_owned(), vec![0])], 2),
        Err(GroupError::GroupIdNotFound)
    );
}

/// An Empty (member-less) group `g` with offsets for partitions 0..
/// `partitions` of `t`, from which partition 0's offset was just deleted;
/// the commit's records are taken.
fn after_deleting_partition_zero_of(partitions: i32) -> CoordinatorCore {
    let mut core = core_with(no_delay());
    let committed = (0..partitions)
        .map(|index| partition("t", index, 1))
        .collect();
    core.commit_offsets(&standalone("g", committed), 0).unwrap();
    core.take_records();
    let results = core
        .delete_offsets("g", &[("t".to_owned(), vec![0])], 1)
        .unwrap();
    assert_eq!(results, vec![(TopicPartition::new("t", 0), Ok(()))]);
    core
}

#[test]
fn offset_delete_on_an_empty_group_deletes_anything() {
    let mut core = after_deleting_partition_zero_of(2);
    // One offset left: the group stays.
    assert!(core.offsets("g").is_some_and(|o| o.len() == 1));
    assert!(matches!(
        &decoded_records(&mut core)[..],
        [OffsetsRecord::OffsetCommit { value: None, .. }]
    ));
}

#[test]
fn offset_delete_of_the_last_offset_of_an_empty_group_removes_the_group() {
    let mut core = after_deleting_partition_zero_of(1);
    // As Kafka: the group is gone at once, with an offset tombstone and a
    // group metadata tombstone, not at the next expiry check.
    assert!(core.offsets("g").is_none());
    let records = decoded_records(&mut core);
    assert!(
        matches!(
            &records[..],
            [
                OffsetsRecord::OffsetCommit { value: None, .. },
                OffsetsRecord::GroupMetadata { value: None, .. }
            ]
        ),
        "{records:?}"
    );
    assert_eq!(
        core.delete_offsets("g", &[("t".to_owned(), vec![0])], 2),
        Err(GroupError::GroupIdNotFound)
    );
}

#[test]
fn delete_groups_needs_empty_groups() {
    let mut core = core_with(no_delay());
    let (_member, _) = stable_single(&mut core, 0);
    core.commit_offsets(&standalone("idle", vec![partition("t", 0, 1)]), 0)
        .unwrap();
    core.take_records();
    let results = core.delete_groups(
        &[GROUP.to_owned(), "idle".to_owned(), "ghost".to_owned()],
        10,
    );
    assert_eq!(
        results,
        vec![
            (GROUP.to_owned(), Err(GroupError::NonEmptyGroup)),
            ("idle".to_owned(), Ok(())),
            ("ghost".to_owned(), Err(GroupError::GroupIdNotFound)),
        ]
    );
    assert!(core.group("idle").is_none());
    let records = decoded_records(&mut core);
    assert_eq!(
        records.len(),
        2,
        "an offset tombstone and a group tombstone"
    );
    assert!(matches!(
        records[0],
        OffsetsRecord::OffsetCommit { value: None, .. }
    ));
    assert!(matches!(
        records[1],
        OffsetsRecord::GroupMetadata { value: None, .. }
    ));
}

#[test]
fn list_groups_filters_by_state() {
    let mut core = core_with(no_delay());
    stable_single(&mut core, 0);
    core.commit_offsets(&standalone("idle", vec![partition("t", 0, 1)]), 0)
        .unwrap();
    let all = core.list_groups(&[]);
    assert_eq!(
        all,
        vec![
            (GROUP.to_owned(), "consumer".to_owned(), GroupState::Stable),
            ("idle".to_owned(), String::new(), GroupState::Empty),
        ]
    );
    let stable = core.list_groups(&[GroupState::Stable]);
    assert_eq!(stable.len(), 1);
    assert_eq!(stable[0].0, GROUP);
    assert!(core
        .list_groups(&[GroupState::PreparingRebalance])
        .is_empty());
}

#[test]
fn describe_groups_shows_members_with_metadata_and_assignment() {
    let mut core = core_with(no_delay());
    let (member, _) = stable_single(&mut core, 0);
    let description = core.describe_group(GROUP).expect("served");
    assert_eq!(description.state, GroupState::Stable);
    assert_eq!(description.protocol_type, "consumer");
    assert_eq!(description.protocol_name, "range");
    assert_eq!(description.members.len(), 1);
    let described = &description.members[0];
    assert_eq!(described.member_id, member);
    assert_eq!(described.client_id, "solo");
    assert_eq!(described.client_host, "/127.0.0.1");
    assert_eq!(described.metadata, subscription(&["topic-x"]));
    assert_eq!(described.assignment, Bytes::from_static(b"a"));
    let unknown = core.describe_group("unknown").expect("served");
    assert_eq!(unknown.state, GroupState::Dead);
    assert!(unknown.members.is_empty());
}

fn retention_core() -> CoordinatorCore {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets: OffsetConfig {
            retention_ms: 1_000,
            retention_check_interval_ms: 100,
            ..OffsetConfig::default()
        },
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let mut core = CoordinatorCore::new(config, seeded());
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .unwrap();
    core
}

#[test]
fn offsets_of_empty_groups_expire_after_retention_from_when_they_emptied() {
    let mut core = retention_core();
    let (member, generation) = stable_single(&mut core, 0);
    core.commit_offsets(&member_commit(&member, generation, 5), 10)
        .unwrap();
    core.tick(5_000);
    assert!(
        core.fetch_offsets(GROUP, None, false).unwrap().len() == 1,
        "members keep offsets"
    );
    let leaving = [LeaveMember {
        member_id: member,
        group_instance_id: None,
    }];
    core.leave_group(GROUP, &leaving, 6_000).unwrap();
    core.take_records();
    core.tick(6_999);
    assert_eq!(core.fetch_offsets(GROUP, None, false).unwrap().len(), 1);
    core.tick(7_050);
    assert_eq!(
        core.fetch_offsets(GROUP, None, false).unwrap().len(),
        1,
        "expired, but the next retention check is at 7,099"
    );
    core.tick(7_099);
    assert!(core.fetch_offsets(GROUP, None, false).unwrap().is_empty());
    assert!(
        core.group(GROUP).is_none(),
        "an empty group without offsets is removed"
    );
    let records = decoded_records(&mut core);
    assert!(matches!(
        records[0],
        OffsetsRecord::OffsetCommit { value: None, .. }
    ));
    assert!(matches!(
        records[1],
        OffsetsRecord::GroupMetadata { value: None, .. }
    ));
}

#[test]
fn standalone_offsets_expire_from_their_commit_time() {
    let mut core = retention_core();
    core.commit_offsets(&standalone("simple", vec![partition("t", 0, 1)]), 500)
        .unwrap();
    core.commit_offsets(&standalone("simple", vec![partition("t", 1, 1)]), 900)
        .unwrap();
    core.tick(1_500);
    assert_eq!(core.fetch_offsets("simple", None, false).unwrap().len(), 1);
    core.tick(1_900);
    assert!(core.group("simple").is_none());
}

#[test]
fn explicit_retention_time_sets_an_expiry() {
    let mut core = retention_core();
    let mut request = standalone("old-client", vec![partition("t", 0, 1)]);
    request.retention_time_ms = Some(50);
    core.commit_offsets(&request, 100).unwrap();
    let records = decoded_records(&mut core);
    let OffsetsRecord::OffsetCommit {
        value: Some(value), ..
    } = &records[0]
    else {
        panic!("offset record");
    };
    assert_eq!(value.expire_timestamp_ms, 150);
    core.tick(149);
    assert_eq!(
        core.fetch_offsets("old-client", None, false).unwrap().len(),
        1
    );
    core.tick(250);
    assert!(core
        .fetch_offsets("old-client", None, false)
        .unwrap()
        .is_empty());
}

#[test]
fn deleted_topics_lose_their_offsets() {
    let mut core = core_with(no_delay());
    core.commit_offsets(
        &standalone("g1", vec![partition("gone", 0, 1), partition("kept", 0, 1)]),
        0,
    )
    .unwrap();
    core.commit_offsets(&standalone("g2", vec![partition("gone", 3, 1)]), 0)
        .unwrap();
    core.take_records();
    core.remove_topic_offsets(&["gone".to_owned()]);
    assert_eq!(core.fetch_offsets("g1", None, false).unwrap().len(), 1);
    assert!(core.fetch_offsets("g2", None, false).unwrap().is_empty());
    let tombstones = decoded_records(&mut core);
    assert_eq!(tombstones.len(), 2);
    assert!(tombstones
        .iter()
        .all(|record| matches!(record, OffsetsRecord::OffsetCommit { topic, value: None, .. } if topic == "gone")));
}

#[test]
fn offsets_requests_check_ownership() {
    let mut core = CoordinatorCore::new(CoordinatorConfig::default(), seeded());
    let partition = core.partition_for("g");
    assert_eq!(
        core.commit_offsets(&standalone("g", vec![]), 0),
        Err(GroupError::NotCoordinator { partition })
    );
    assert_eq!(
        core.fetch_offsets("g", None, false),
        Err(GroupError::NotCoordinator { partition })
    );
    core.begin_loading(partition);
    assert_eq!(
        core.delete_groups(&["g".to_owned()], 0),
        vec![(
            "g".to_owned(),
            Err(GroupError::CoordinatorLoadInProgress { partition })
        )]
    );
    assert!(core.any_partition_loading());
    let log = InMemoryOffsetsLog::new();
    assert!(log.is_empty(partition));
    assert_eq!(log.read(partition, 0, 10), Ok(vec![]));
}

#[test]
fn negative_generation_commits_to_an_empty_group_are_accepted_whatever_the_member_id() {
    let mut core = core_with(no_delay());
    core.commit_offsets(&standalone("g", vec![partition("t", 0, 1)]), 0)
        .unwrap();
    let mut request = standalone("g", vec![partition("t", 0, 2)]);
    request.member_id = "leftover-member".into();
    assert!(core.commit_offsets(&request, 1).is_ok());
    assert_eq!(core.fetch_offsets("g", None, false).unwrap()[0].offset, 2);
}

#[test]
fn offset_delete_on_a_non_consumer_group_with_members_is_refused() {
    let mut core = core_with(no_delay());
    let mut request = join_request(1, "", "connect-worker");
    request.protocol_type = "connect".into();
    request.require_known_member_id = false;
    core.join_group(GROUP, request, 0).unwrap();
    assert_eq!(
        core.delete_offsets(GROUP, &[("t".to_owned(), vec![0])], 1),
        Err(GroupError::NonEmptyGroup)
    );
}

#[test]
fn offset_delete_protects_every_topic_when_subscriptions_cannot_be_parsed() {
    let mut core = core_with(no_delay());
    let mut request = join_request(1, "", "odd-consumer");
    request.require_known_member_id = false;
    request.protocols[0].metadata = Bytes::from_static(&[0xde, 0xad]);
    core.join_group(GROUP, request, 0).unwrap();
    let results = core
        .delete_offsets(GROUP, &[("anything".to_owned(), vec![0])], 1)
        .unwrap();
    assert_eq!(results[0].1, Err(GroupError::GroupSubscribedToTopic));
}

fn fetched_offset(core: &CoordinatorCore, group_id: &str) -> Result<i64, GroupError> {
    core.fetch_offsets(group_id, Some(&[("t".to_owned(), vec![0])]), false)
        .map(|offsets| offsets[0].offset)
}

#[test]
fn a_staged_commit_is_answered_only_once_the_high_watermark_passes_it() {
    let mut core = core_with(no_delay());
    core.stage_offsets(&standalone("g", vec![partition("t", 0, 42)]), 1_000)
        .expect("accepted");
    assert_eq!(decoded_records(&mut core).len(), 1);
    core.place_staged(0, 10);
    core.stage_offsets(&standalone("g", vec![partition("t", 0, 50)]), 1_001)
        .expect("accepted");
    core.place_staged(0, 11);
    assert_eq!(core.pending_commits(), 2);
    // Written, not committed: OffsetFetch answers what the log committed.
    assert_eq!(fetched_offset(&core, "g"), Ok(-1));
    core.advance_committed(0, 10, 1_002);
    assert_eq!(fetched_offset(&core, "g"), Ok(-1));
    core.advance_committed(0, 11, 1_002);
    assert_eq!(fetched_offset(&core, "g"), Ok(42));
    // Both at once would apply in log order: the later commit stays.
    core.advance_committed(0, 100, 1_003);
    assert_eq!(fetched_offset(&core, "g"), Ok(50));
    assert_eq!(core.pending_commits(), 0);
}

#[test]
fn a_commit_that_was_not_appended_is_forgotten() {
    let mut core = core_with(no_delay());
    core.commit_offsets(&standalone("g", vec![partition("t", 0, 5)]), 1_000)
        .expect("accepted");
    core.stage_offsets(&standalone("g", vec![partition("t", 0, 9)]), 1_001)
        .expect("accepted");
    core.discard_staged();
    // A later commit does not pick up the dropped one.
    core.stage_offsets(&standalone("other", vec![partition("t", 0, 1)]), 1_002)
        .expect("accepted");
    core.place_staged(0, 3);
    core.advance_committed(0, 100, 1_003);
    assert_eq!(fetched_offset(&core, "g"), Ok(5));
    assert_eq!(fetched_offset(&core, "other"), Ok(1));
}

#[test]
fn offset_delete_drops_a_pending_commit_of_that_partition() {
    let mut core = core_with(no_delay());
    core.stage_offsets(
        &standalone("g", vec![partition("t", 0, 42), partition("t", 1, 7)]),
        1_000,
    )
    .expect("accepted");
    core.place_staged(0, 4);
    core.take_records();
    let deleted = core
        .delete_offsets("g", &[("t".to_owned(), vec![0])], 1_001)
        .expect("deleted");
    assert!(deleted.iter().all(|(_, result)| result.is_ok()));
    // The tombstone is written even though only a pending commit had it.
    assert_eq!(decoded_records(&mut core).len(), 1);
    core.advance_committed(0, 100, 1_002);
    let fetched = core
        .fetch_offsets("g", Some(&[("t".to_owned(), vec![0, 1])]), false)
        .expect("served");
    assert_eq!(
        fetched.iter().map(|p| p.offset).collect::<Vec<_>>(),
        vec![-1, 7]
    );
}

#[test]
fn a_coordinator_loaded_with_an_uncommitted_tail_waits_for_it_before_answering_offset_fetch() {
    let mut first = core_with(no_delay());
    let mut log = ControlledLog::default();
    for offset in [3, 8, 13] {
        first
            .commit_offsets(&standalone("g", vec![partition("t", 0, offset)]), 1_000)
            .expect("accepted");
        let records: Vec<_> = first.take_records().into_iter().map(|(_, r)| r).collect();
        log.append(0, &records).expect("appended");
    }
    // The new leader's high watermark covers the first commit only: the
    // others may be commits an earlier coordinator acknowledged.
    log.committed = Some(1);
    let mut second = CoordinatorCore::new(first.config().clone(), seeded());
    second.begin_loading(0);
    assert_eq!(second.load_partition(&log, 0, 2_000), Ok(3));
    assert_eq!(
        fetched_offset(&second, "g"),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    second.advance_committed(0, 2, 2_001);
    assert_eq!(
        fetched_offset(&second, "g"),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    second.advance_committed(0, 3, 2_002);
    assert_eq!(fetched_offset(&second, "g"), Ok(13));
}
