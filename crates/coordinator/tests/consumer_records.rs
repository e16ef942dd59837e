//! The consumer-protocol group records: byte fixtures from Kafka's JSON
//! schemas, proptest round trips, malformed input, and a coordinator that
//! loads what another one wrote.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use proptest::prelude::*;
use strom_coordinator::consumer_records::{
    ConsumerRecord, CurrentAssignmentValue, MemberMetadataValue, SubscribedTopic,
};
use strom_coordinator::records::OffsetsRecord;
use strom_coordinator::{
    Assignment, ConsumerHeartbeat, CoordinatorConfig, CoordinatorCore, InMemoryOffsetsLog,
    LogRecord, OffsetsLog, TopicMetadata,
};
use uuid::Uuid;

use crate::common::{seeded, GROUP};

fn round_trip(record: &ConsumerRecord) -> OffsetsRecord {
    let log_record = OffsetsRecord::Consumer(record.clone()).to_log_record();
    OffsetsRecord::from_log_record(&log_record).expect("decodes")
}

#[test]
fn group_metadata_fixture() {
    let record = ConsumerRecord::GroupMetadata {
        group: "g".into(),
        epoch: Some(7),
    };
    let log_record = OffsetsRecord::Consumer(record.clone()).to_log_record();
    // Key: version 3, then the non-flexible string "g".
    assert_eq!(&log_record.key[..], &[0, 3, 0, 1, b'g']);
    // Value: version 0, epoch 7, no tagged fields.
    assert_eq!(
        log_record.value.as_deref(),
        Some(&[0, 0, 0, 0, 0, 7, 0][..])
    );
    assert_eq!(round_trip(&record), OffsetsRecord::Consumer(record));
}

#[test]
fn target_assignment_member_fixture() {
    let topic = Uuid::from_u128(1);
    let record = ConsumerRecord::TargetAssignmentMember {
        group: "g".into(),
        member: "m".into(),
        partitions: Some([(topic, [2].into_iter().collect())].into()),
    };
    let log_record = OffsetsRecord::Consumer(record.clone()).to_log_record();
    assert_eq!(&log_record.key[..], &[0, 7, 0, 1, b'g', 0, 1, b'm']);
    let mut value = vec![0, 0, 2];
    value.extend_from_slice(topic.as_bytes());
    value.extend_from_slice(&[2, 0, 0, 0, 2, 0, 0]);
    assert_eq!(log_record.value.as_deref(), Some(&value[..]));
}

#[test]
fn tombstones_have_no_value_and_decode_back() {
    let record = ConsumerRecord::CurrentMemberAssignment {
        group: "g".into(),
        member: "m".into(),
        value: None,
    };
    let log_record = OffsetsRecord::Consumer(record.clone()).to_log_record();
    assert!(log_record.value.is_none());
    assert_eq!(round_trip(&record), OffsetsRecord::Consumer(record));
}

#[test]
fn malformed_values_are_errors() {
    let record = ConsumerRecord::CurrentMemberAssignment {
        group: "g".into(),
        member: "m".into(),
        value: Some(CurrentAssignmentValue {
            member_epoch: 3,
            previous_member_epoch: 2,
            state: 0,
            assigned: [(Uuid::from_u128(9), [0, 1].into_iter().collect())].into(),
            pending_revocation: Assignment::new(),
        }),
    };
    let log_record = OffsetsRecord::Consumer(record).to_log_record();
    let value = log_record.value.clone().expect("value");
    for cut in 0..value.len() {
        let truncated = LogRecord {
            key: log_record.key.clone(),
            value: Some(value.slice(..cut)),
        };
        assert!(
            OffsetsRecord::from_log_record(&truncated).is_err(),
            "cut at {cut}"
        );
    }
    let mut trailing = value.to_vec();
    trailing.push(0);
    let with_trailing = LogRecord {
        key: log_record.key.clone(),
        value: Some(Bytes::from(trailing)),
    };
    assert!(OffsetsRecord::from_log_record(&with_trailing).is_err());
    let mut newer = value.to_vec();
    newer[1] = 9;
    let newer_version = LogRecord {
        key: log_record.key,
        value: Some(Bytes::from(newer)),
    };
    assert!(OffsetsRecord::from_log_record(&newer_version).is_err());
    // A huge array length is refused before anything is allocated.
    let huge = LogRecord {
        key: Bytes::from_static(&[0, 7, 0, 1, b'g', 0, 1, b'm']),
        value: Some(Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f])),
    };
    assert!(OffsetsRecord::from_log_record(&huge).is_err());
}

fn assignment_strategy() -> impl Strategy<Value = Assignment> {
    prop::collection::btree_map(
        any::<u128>().prop_map(Uuid::from_u128),
        prop::collection::btree_set(0..1_000i32, 1..5),
        0..4,
    )
}

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9._-]{0,12}"
}

fn record_strategy() -> impl Strategy<Value = ConsumerRecord> {
    let member_value = (
        proptest::option::of(name()),
        proptest::option::of(name()),
        name(),
        name(),
        prop::collection::vec(name(), 0..4),
        proptest::option::of(name()),
        any::<i32>(),
        proptest::option::of(name()),
    )
        .prop_map(
            |(instance, rack, client, host, topics, regex, timeout, assignor)| {
                MemberMetadataValue {
                    instance_id: instance,
                    rack_id: rack,
                    client_id: client,
                    client_host: host,
                    subscribed_topic_names: topics,
                    subscribed_topic_regex: regex,
                    rebalance_timeout_ms: timeout,
                    server_assignor: assignor,
                }
            },
        );
    let current = (
        any::<i32>(),
        any::<i32>(),
        any::<i8>(),
        assignment_strategy(),
        assignment_strategy(),
    )
        .prop_map(
            |(epoch, previous, state, assigned, revoking)| CurrentAssignmentValue {
                member_epoch: epoch,
                previous_member_epoch: previous,
                state,
                assigned,
                pending_revocation: revoking,
            },
        );
    let topics = prop::collection::vec(
        (any::<u128>(), name(), any::<i32>()).prop_map(|(id, name, partitions)| SubscribedTopic {
            topic_id: Uuid::from_u128(id),
            name,
            partitions,
        }),
        0..4,
    );
    prop_oneof![
        (name(), proptest::option::of(any::<i32>()))
            .prop_map(|(group, epoch)| ConsumerRecord::GroupMetadata { group, epoch }),
        (name(), proptest::option::of(topics))
            .prop_map(|(group, topics)| ConsumerRecord::PartitionMetadata { group, topics }),
        (name(), name(), proptest::option::of(member_value)).prop_map(|(group, member, value)| {
            ConsumerRecord::MemberMetadata {
                group,
                member,
                value,
            }
        }),
        (name(), proptest::option::of(any::<i32>()))
            .prop_map(|(group, epoch)| ConsumerRecord::TargetAssignmentMetadata { group, epoch }),
        (name(), name(), proptest::option::of(assignment_strategy())).prop_map(
            |(group, member, partitions)| ConsumerRecord::TargetAssignmentMember {
                group,
                member,
                partitions
            }
        ),
        (name(), name(), proptest::option::of(current)).prop_map(|(group, member, value)| {
            ConsumerRecord::CurrentMemberAssignment {
                group,
                member,
                value,
            }
        }),
    ]
}

proptest! {
    #[test]
    fn every_consumer_record_round_trips(record in record_strategy()) {
        prop_assert_eq!(round_trip(&record), OffsetsRecord::Consumer(record));
    }

    #[test]
    fn arbitrary_values_never_panic(key_version in 3i16..=8, value in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut key = key_version.to_be_bytes().to_vec();
        key.extend_from_slice(&[0, 1, b'g', 0, 1, b'm']);
        let record = LogRecord { key: Bytes::from(key), value: Some(Bytes::from(value)) };
        let _ = OffsetsRecord::from_log_record(&record);
    }
}

const TOPIC: Uuid = Uuid::from_u128(0xCD);

fn catalog() -> BTreeMap<String, TopicMetadata> {
    [(
        "orders".to_string(),
        TopicMetadata {
            topic_id: TOPIC,
            partitions: 4,
        },
    )]
    .into()
}

fn fresh_core() -> CoordinatorCore {
    CoordinatorCore::new(
        CoordinatorConfig {
            offsets_topic_partitions: 1,
            ..CoordinatorConfig::default()
        },
        seeded(),
    )
}

fn persist(core: &mut CoordinatorCore, log: &mut InMemoryOffsetsLog) {
    for (partition, record) in core.take_records() {
        log.append(partition, &[record]).expect("in-memory append");
    }
}

fn join(member_id: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member_id.into(),
        member_epoch: 0,
        member_id_required: true,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["orders".into()]),
        owned_partitions: Some(Assignment::new()),
        client_id: "client".into(),
        ..ConsumerHeartbeat::default()
    }
}

#[test]
fn a_new_coordinator_resumes_the_group_from_the_log() {
    let mut log = InMemoryOffsetsLog::new();
    let mut core = fresh_core();
    core.begin_loading(0);
    core.load_partition(&log, 0, 0).expect("loads");
    let a = core
        .consumer_heartbeat(GROUP, &join("a"), &catalog(), 0)
        .expect("a joins");
    let b = core
        .consumer_heartbeat(GROUP, &join("b"), &catalog(), 1)
        .expect("b joins");
    let owned = a.assignment.expect("assignment");
    // a is asked to revoke half: it is mid-reconciliation when the coordinator moves.
    let told = core
        .consumer_heartbeat(
            GROUP,
            &ConsumerHeartbeat {
                member_id: "a".into(),
                member_epoch: a.member_epoch,
                rebalance_timeout_ms: -1,
                owned_partitions: Some(owned),
                ..ConsumerHeartbeat::default()
            },
            &catalog(),
            2,
        )
        .expect("a heartbeats");
    assert_eq!(told.member_epoch, 1);
    let leaver = core
        .consumer_heartbeat(GROUP, &join("c"), &catalog(), 3)
        .expect("c joins");
    core.consumer_heartbeat(
        GROUP,
        &ConsumerHeartbeat {
            member_id: "c".into(),
            member_epoch: -1,
            ..ConsumerHeartbeat::default()
        },
        &catalog(),
        4,
    )
    .expect("c leaves");
    assert_eq!(leaver.member_id, "c");
    persist(&mut core, &mut log);

    let mut resumed = fresh_core();
    resumed.begin_loading(0);
    resumed.load_partition(&log, 0, 100).expect("loads");
    let before = core.consumer_group(GROUP).expect("group");
    let after = resumed.consumer_group(GROUP).expect("group loaded");
    assert_eq!(after.group_epoch(), before.group_epoch());
    assert_eq!(after.assignment_epoch(), before.assignment_epoch());
    assert_eq!(after.members(), before.members());
    for member in ["a", "b", "c"] {
        assert_eq!(
            after.target_of(member),
            before.target_of(member),
            "{member}"
        );
    }
    assert!(!after.members().contains_key("c"));
    assert_eq!(b.member_id, "b");
    // Loaded members get a fresh session: silent ones are fenced after it.
    resumed.tick(100 + 44_999);
    assert_eq!(
        resumed
            .consumer_group(GROUP)
            .expect("group")
            .members()
            .len(),
        2
    );
    resumed.tick(100 + 45_000);
    assert!(resumed
        .consumer_group(GROUP)
        .expect("group")
        .members()
        .is_empty());
}

#[test]
fn a_deleted_consumer_group_stays_deleted_after_a_load() {
    let mut log = InMemoryOffsetsLog::new();
    let mut core = fresh_core();
    core.begin_loading(0);
    core.load_partition(&log, 0, 0).expect("loads");
    core.consumer_heartbeat(GROUP, &join("a"), &catalog(), 0)
        .expect("joins");
    core.consumer_heartbeat(
        GROUP,
        &ConsumerHeartbeat {
            member_id: "a".into(),
            member_epoch: -1,
            ..ConsumerHeartbeat::default()
        },
        &catalog(),
        1,
    )
    .expect("leaves");
    let results = core.delete_groups(&[GROUP.to_string()], 2);
    assert_eq!(results[0].1, Ok(()));
    persist(&mut core, &mut log);
    let mut resumed = fresh_core();
    resumed.begin_loading(0);
    resumed.load_partition(&log, 0, 3).expect("loads");
    assert!(resumed.consumer_group(GROUP).is_none());
    let topics: BTreeSet<i16> = (0..log.len(0) as i64)
        .filter_map(|offset| log.read(0, offset, 1).ok())
        .flatten()
        .map(|stored| i16::from_be_bytes([stored.record.key[0], stored.record.key[1]]))
        .collect();
    assert!(topics.is_superset(&[3, 4, 5, 6, 7, 8].into_iter().collect()));
}

#[test]
fn a_plain_heartbeat_writes_nothing() {
    let mut core = fresh_core();
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .expect("loads");
    let joined = core
        .consumer_heartbeat(GROUP, &join("a"), &catalog(), 0)
        .expect("joins");
    assert!(!core.take_records().is_empty());
    let plain = ConsumerHeartbeat {
        member_id: "a".into(),
        member_epoch: joined.member_epoch,
        rebalance_timeout_ms: -1,
        client_id: "client".into(),
        ..ConsumerHeartbeat::default()
    };
    core.consumer_heartbeat(GROUP, &plain, &catalog(), 5_000)
        .expect("heartbeat");
    assert!(core.take_records().is_empty());
    // A new client id is a change of the member's metadata.
    let renamed = ConsumerHeartbeat {
        client_id: "renamed".into(),
        ..plain
    };
    core.consumer_heartbeat(GROUP, &renamed, &catalog(), 10_000)
        .expect("heartbeat");
    assert_eq!(core.take_records().len(), 2);
}
