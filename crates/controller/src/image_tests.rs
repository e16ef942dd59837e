use super::*;
use crate::records::{FenceBrokerRecord, ReplicaList, UnfenceBrokerRecord};

const T1: Uuid = Uuid::from_u128(0x11);
const T2: Uuid = Uuid::from_u128(0x22);

fn register(broker_id: i32, broker_epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::new(Record::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id: uuid_to_bytes(Uuid::from_u128(broker_epoch as u128)),
        broker_epoch,
        endpoints: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            security_protocol: "PLAINTEXT".into(),
        }],
        rack: None,
        fenced,
    }))
}

fn topic(name: &str, id: Uuid) -> MetadataRecord {
    MetadataRecord::new(Record::Topic(TopicRecord {
        name: name.into(),
        topic_id: uuid_to_bytes(id),
    }))
}

fn partition(id: Uuid, index: i32, replicas: &[i32], isr: &[i32], leader: i32) -> MetadataRecord {
    MetadataRecord::new(Record::Partition(PartitionRecord {
        topic_id: uuid_to_bytes(id),
        partition_index: index,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        ..PartitionRecord::default()
    }))
}

fn change(id: Uuid, index: i32, isr: Option<&[i32]>, leader: Option<i32>) -> MetadataRecord {
    MetadataRecord::new(Record::PartitionChange(PartitionChangeRecord {
        topic_id: uuid_to_bytes(id),
        partition_index: index,
        isr: isr.map(|isr| ReplicaList::from(isr.to_vec())),
        leader,
        ..PartitionChangeRecord::default()
    }))
}

fn config(
    resource_type: ConfigResourceType,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> MetadataRecord {
    MetadataRecord::new(Record::Config(ConfigRecord {
        resource_type: resource_type as i32,
        resource_name: name.into(),
        name: key.into(),
        value: value.map(str::to_owned),
    }))
}

fn remove(id: Uuid) -> MetadataRecord {
    MetadataRecord::new(Record::RemoveTopic(RemoveTopicRecord {
        topic_id: uuid_to_bytes(id),
    }))
}

/// Applies records at offsets 0, 1, 2, ...
fn build(records: &[MetadataRecord]) -> MetadataImage {
    MetadataImage::empty()
        .apply_all(
            records
                .iter()
                .enumerate()
                .map(|(offset, record)| (offset as u64, record)),
        )
        .unwrap()
}

fn apply_next(image: &MetadataImage, record: &MetadataRecord) -> Result<MetadataImage, ApplyError> {
    image.apply(image.next_offset(), record)
}

fn base() -> MetadataImage {
    build(&[
        register(1, 10, false),
        register(2, 11, false),
        register(3, 12, true),
        topic("orders", T1),
        partition(T1, 0, &[1, 2, 3], &[1, 2], 1),
        partition(T1, 1, &[2, 3, 1], &[2, 1], 2),
    ])
}

#[test]
fn empty_image_has_nothing() {
    let image = MetadataImage::empty();
    assert_eq!(image.last_offset(), None);
    assert_eq!(image.next_offset(), 0);
    assert_eq!(image.topic_count(), 0);
    assert!(image.brokers().next().is_none());
}

#[test]
fn broker_registration_is_recorded() {
    let image = base();
    let broker = image.broker(1).unwrap();
    assert_eq!(broker.epoch, 10);
    assert_eq!(broker.endpoints[0].port, 9092);
    assert!(!broker.fenced);
    assert!(image.broker(3).unwrap().fenced);
    assert_eq!(image.unfenced_broker_ids(), vec![1, 2]);
    assert_eq!(image.last_offset(), Some(5));
}

#[test]
fn reregistration_needs_a_larger_epoch() {
    let image = base();
    let error = apply_next(&image, &register(1, 10, false)).unwrap_err();
    assert!(matches!(
        error,
        ApplyError::BrokerEpochNotIncreasing { broker_id: 1, .. }
    ));
    let next = apply_next(&image, &register(1, 20, true)).unwrap();
    assert_eq!(next.broker(1).unwrap().epoch, 20);
    assert!(next.broker(1).unwrap().fenced);
}

#[test]
fn registration_with_bad_port_or_incarnation_is_rejected() {
    let mut record = register(4, 1, false);
    if let Some(Record::RegisterBroker(register)) = &mut record.record {
        register.endpoints[0].port = 70_000;
    }
    assert!(matches!(
        apply_next(&base(), &record),
        Err(ApplyError::InvalidPort {
            broker_id: 4,
            port: 70_000
        })
    ));
    let mut record = register(4, 1, false);
    if let Some(Record::RegisterBroker(register)) = &mut record.record {
        register.incarnation_id = vec![1, 2];
    }
    assert!(matches!(
        apply_next(&base(), &record),
        Err(ApplyError::Record(_))
    ));
}

#[test]
fn fence_and_unfence_toggle_the_flag() {
    let fence = MetadataRecord::new(Record::FenceBroker(FenceBrokerRecord {
        broker_id: 1,
        broker_epoch: 10,
    }));
    let fenced = apply_next(&base(), &fence).unwrap();
    assert!(fenced.broker(1).unwrap().fenced);
    let unfence = MetadataRecord::new(Record::UnfenceBroker(UnfenceBrokerRecord {
        broker_id: 1,
        broker_epoch: 10,
    }));
    let unfenced = apply_next(&fenced, &unfence).unwrap();
    assert!(!unfenced.broker(1).unwrap().fenced);
}

#[test]
fn fencing_needs_a_known_broker_and_its_epoch() {
    let unknown = MetadataRecord::new(Record::FenceBroker(FenceBrokerRecord {
        broker_id: 9,
        broker_epoch: 10,
    }));
    assert!(matches!(
        apply_next(&base(), &unknown),
        Err(ApplyError::UnknownBroker { broker_id: 9 })
    ));
    let stale = MetadataRecord::new(Record::UnfenceBroker(UnfenceBrokerRecord {
        broker_id: 1,
        broker_epoch: 9,
    }));
    assert!(matches!(
        apply_next(&base(), &stale),
        Err(ApplyError::BrokerEpochMismatch {
            broker_id: 1,
            current_epoch: 10,
            record_epoch: 9
        })
    ));
}

#[test]
fn unregister_removes_the_broker() {
    let record = MetadataRecord::new(Record::UnregisterBroker(UnregisterBrokerRecord {
        broker_id: 2,
        broker_epoch: 11,
    }));
    let image = apply_next(&base(), &record).unwrap();
    assert!(image.broker(2).is_none());
    assert!(matches!(
        apply_next(&image, &record),
        Err(ApplyError::UnknownBroker { broker_id: 2 })
    ));
}

#[test]
fn topic_is_found_by_name_and_id() {
    let image = base();
    let topic = image.topic_by_name("orders").unwrap();
    assert_eq!(topic.id, T1);
    assert_eq!(image.topic_by_id(T1).unwrap().name, "orders");
    assert_eq!(topic.partitions.len(), 2);
    assert_eq!(topic.partition(1).unwrap().leader, Some(2));
    assert!(topic.partition(2).is_none());
    assert!(topic.partition(-1).is_none());
}

#[test]
fn duplicate_topic_name_or_id_is_rejected() {
    let image = base();
    assert!(matches!(
        apply_next(&image, &topic("orders", T2)),
        Err(ApplyError::TopicNameExists { .. })
    ));
    assert!(matches!(
        apply_next(&image, &topic("payments", T1)),
        Err(ApplyError::TopicIdExists { topic_id }) if topic_id == T1
    ));
}

#[test]
fn partition_of_unknown_topic_is_rejected() {
    assert!(matches!(
        apply_next(&base(), &partition(T2, 0, &[1], &[1], 1)),
        Err(ApplyError::UnknownTopicId { topic_id }) if topic_id == T2
    ));
}

#[test]
fn partitions_must_come_in_order() {
    assert!(matches!(
        apply_next(&base(), &partition(T1, 3, &[1], &[1], 1)),
        Err(ApplyError::PartitionOutOfOrder {
            partition_index: 3,
            expected_index: 2,
            ..
        })
    ));
    assert!(matches!(
        apply_next(&base(), &partition(T1, 1, &[1], &[1], 1)),
        Err(ApplyError::PartitionOutOfOrder {
            partition_index: 1,
            expected_index: 2,
            ..
        })
    ));
}

#[test]
fn inconsistent_partitions_are_rejected() {
    let cases: [(&[i32], &[i32], i32, PartitionProblem); 5] = [
        (&[], &[], NO_LEADER, PartitionProblem::NoReplicas),
        (
            &[1, 1],
            &[1],
            1,
            PartitionProblem::DuplicateReplica { broker_id: 1 },
        ),
        (
            &[1, 2],
            &[2, 2],
            2,
            PartitionProblem::DuplicateIsrMember { broker_id: 2 },
        ),
        (
            &[1, 2],
            &[3],
            3,
            PartitionProblem::IsrMemberNotReplica { broker_id: 3 },
        ),
        (
            &[1, 2],
            &[1],
            2,
            PartitionProblem::LeaderNotInIsr { leader: 2 },
        ),
    ];
    for (replicas, isr, leader, expected) in cases {
        let error = apply_next(&base(), &partition(T1, 2, replicas, isr, leader)).unwrap_err();
        match error {
            ApplyError::InvalidPartition { problem, .. } => assert_eq!(problem, expected),
            other => panic!("expected {expected:?}, got {other:?}"),
        }
    }
}

#[test]
fn leader_change_bumps_both_epochs() {
    let image = apply_next(&base(), &change(T1, 0, Some(&[2]), Some(2))).unwrap();
    let partition = image.topic_by_id(T1).unwrap().partition(0).unwrap();
    assert_eq!(partition.leader, Some(2));
    assert_eq!(partition.isr, vec![2]);
    assert_eq!(partition.leader_epoch, 1);
    assert_eq!(partition.partition_epoch, 1);
}

#[test]
fn isr_change_bumps_only_the_partition_epoch() {
    let image = apply_next(&base(), &change(T1, 0, Some(&[1, 2, 3]), None)).unwrap();
    let partition = image.topic_by_id(T1).unwrap().partition(0).unwrap();
    assert_eq!(partition.leader, Some(1));
    assert_eq!(partition.leader_epoch, 0);
    assert_eq!(partition.partition_epoch, 1);
}

#[test]
fn leaderless_partition_keeps_its_isr() {
    let image = apply_next(&base(), &change(T1, 0, None, Some(NO_LEADER))).unwrap();
    let partition = image.topic_by_id(T1).unwrap().partition(0).unwrap();
    assert_eq!(partition.leader, None);
    assert_eq!(partition.leader_epoch, 1);
}

#[test]
fn illegal_partition_changes_are_rejected() {
    let image = base();
    assert!(matches!(
        apply_next(&image, &change(T1, 0, Some(&[2]), None)),
        Err(ApplyError::InvalidPartition {
            problem: PartitionProblem::LeaderNotInIsr { leader: 1 },
            ..
        })
    ));
    assert!(matches!(
        apply_next(&image, &change(T1, 5, None, Some(1))),
        Err(ApplyError::UnknownPartition {
            partition_index: 5,
            ..
        })
    ));
    assert!(matches!(
        apply_next(&image, &change(T2, 0, None, Some(1))),
        Err(ApplyError::UnknownTopicId { .. })
    ));
}

#[test]
fn config_set_and_delete() {
    let image = apply_next(
        &base(),
        &config(
            ConfigResourceType::Topic,
            "orders",
            "retention.ms",
            Some("1000"),
        ),
    )
    .unwrap();
    let resource = ConfigResource::Topic("orders".into());
    assert_eq!(image.config(&resource, "retention.ms"), Some("1000"));
    let image = apply_next(
        &image,
        &config(ConfigResourceType::Topic, "orders", "retention.ms", None),
    )
    .unwrap();
    assert_eq!(image.config(&resource, "retention.ms"), None);
    assert!(image.configs(&resource).is_empty());
}

#[test]
fn broker_configs_name_a_broker_or_the_cluster() {
    let image = apply_next(
        &base(),
        &config(
            ConfigResourceType::Broker,
            "",
            "log.retention.ms",
            Some("5"),
        ),
    )
    .unwrap();
    let image = apply_next(
        &image,
        &config(
            ConfigResourceType::Broker,
            "2",
            "log.retention.ms",
            Some("6"),
        ),
    )
    .unwrap();
    assert_eq!(
        image.config(&ConfigResource::Broker(None), "log.retention.ms"),
        Some("5")
    );
    assert_eq!(
        image.config(&ConfigResource::Broker(Some(2)), "log.retention.ms"),
        Some("6")
    );
    assert!(matches!(
        apply_next(
            &image,
            &config(ConfigResourceType::Broker, "two", "x", Some("1"))
        ),
        Err(ApplyError::InvalidBrokerResourceName { .. })
    ));
}

#[test]
fn config_of_unknown_topic_or_resource_type_is_rejected() {
    assert!(matches!(
        apply_next(
            &base(),
            &config(ConfigResourceType::Topic, "nope", "retention.ms", Some("1"))
        ),
        Err(ApplyError::UnknownTopicName { .. })
    ));
    assert!(matches!(
        apply_next(
            &base(),
            &config(ConfigResourceType::Unknown, "x", "y", Some("1"))
        ),
        Err(ApplyError::InvalidConfigResourceType { resource_type: 0 })
    ));
}

#[test]
fn removing_a_topic_removes_partitions_and_configs() {
    let image = apply_next(
        &base(),
        &config(
            ConfigResourceType::Topic,
            "orders",
            "retention.ms",
            Some("1"),
        ),
    )
    .unwrap();
    let image = apply_next(&image, &remove(T1)).unwrap();
    assert!(image.topic_by_name("orders").is_none());
    assert!(image.topic_by_id(T1).is_none());
    assert!(image
        .configs(&ConfigResource::Topic("orders".into()))
        .is_empty());
    // The name can be reused with a new id.
    let image = apply_next(&image, &topic("orders", T2)).unwrap();
    assert_eq!(image.topic_by_name("orders").unwrap().partitions.len(), 0);
}

#[test]
fn removing_an_unknown_topic_is_rejected() {
    assert!(matches!(
        apply_next(&base(), &remove(T2)),
        Err(ApplyError::UnknownTopicId { topic_id }) if topic_id == T2
    ));
}

#[test]
fn unknown_record_kind_is_rejected() {
    let record = MetadataRecord {
        version: 1,
        record: None,
    };
    assert!(matches!(
        apply_next(&base(), &record),
        Err(ApplyError::UnknownRecordKind)
    ));
}

#[test]
fn offsets_must_increase() {
    let image = base();
    assert!(matches!(
        image.apply(5, &topic("x", T2)),
        Err(ApplyError::NonIncreasingOffset {
            offset: 5,
            last_offset: 5
        })
    ));
    assert_eq!(
        image.apply(9, &topic("x", T2)).unwrap().last_offset(),
        Some(9)
    );
}

#[test]
fn failed_batch_leaves_the_image_unchanged() {
    let image = base();
    let records = [
        topic("x", T2),
        partition(T2, 0, &[1], &[1], 1),
        remove(Uuid::from_u128(7)),
    ];
    let result = image.apply_all(
        records
            .iter()
            .enumerate()
            .map(|(index, record)| (10 + index as u64, record)),
    );
    assert!(result.is_err());
    assert!(image.topic_by_name("x").is_none());
    assert_eq!(image.last_offset(), Some(5));
}

#[test]
fn old_image_is_unchanged_by_apply() {
    let before = base();
    let after = apply_next(&before, &change(T1, 0, Some(&[2]), Some(2))).unwrap();
    assert_eq!(
        before.topic_by_id(T1).unwrap().partition(0).unwrap().leader,
        Some(1)
    );
    assert_eq!(
        after.topic_by_id(T1).unwrap().partition(0).unwrap().leader,
        Some(2)
    );
    // Untouched maps are shared, not copied.
    assert!(Arc::ptr_eq(&before.brokers, &after.brokers));
    assert!(Arc::ptr_eq(&before.configs, &after.configs));
}

#[test]
fn snapshot_records_rebuild_the_image() {
    let image = build(&[
        register(1, 10, false),
        register(2, 11, true),
        topic("orders", T1),
        config(
            ConfigResourceType::Topic,
            "orders",
            "cleanup.policy",
            Some("compact"),
        ),
        partition(T1, 0, &[1, 2], &[1, 2], 1),
        change(T1, 0, Some(&[1]), None),
        topic("gone", T2),
        remove(T2),
        config(
            ConfigResourceType::Broker,
            "",
            "log.retention.ms",
            Some("5"),
        ),
    ]);
    let rebuilt = MetadataImage::from_snapshot_records(8, &image.to_snapshot_records()).unwrap();
    assert_eq!(rebuilt, image);
}

fn reassignment_change(adding: &[i32], removing: &[i32]) -> MetadataRecord {
    MetadataRecord::new(Record::PartitionChange(PartitionChangeRecord {
        topic_id: uuid_to_bytes(T1),
        partition_index: 0,
        adding_replicas: Some(ReplicaList::from(adding.to_vec())),
        removing_replicas: Some(ReplicaList::from(removing.to_vec())),
        ..PartitionChangeRecord::default()
    }))
}

#[test]
fn reassignment_fields_are_applied_and_checked() {
    let image = apply_next(&base(), &reassignment_change(&[3], &[1])).unwrap();
    let partition = image.topic_by_id(T1).unwrap().partition(0).unwrap();
    assert_eq!(partition.adding_replicas, vec![3]);
    assert_eq!(partition.removing_replicas, vec![1]);
    assert_eq!(partition.target_replicas(), vec![2, 3]);
    assert!(partition.is_reassigning());
    assert!(matches!(
        apply_next(&base(), &reassignment_change(&[4], &[])),
        Err(ApplyError::InvalidPartition {
            problem: PartitionProblem::ReassignedNotReplica { broker_id: 4 },
            ..
        })
    ));
    assert!(matches!(
        apply_next(&base(), &reassignment_change(&[2], &[2])),
        Err(ApplyError::InvalidPartition {
            problem: PartitionProblem::AddedAndRemoved { broker_id: 2 },
            ..
        })
    ));
    // Empty lists end the reassignment.
    let done = apply_next(&image, &reassignment_change(&[], &[])).unwrap();
    assert!(!done.topic_by_id(T1).unwrap().partitions[0].is_reassigning());
}

#[test]
fn a_partition_record_without_reassignment_fields_decodes_as_not_reassigning() {
    // A PartitionRecord as written before the fields existed: tags 1 to 7.
    let old = PartitionRecord {
        topic_id: uuid_to_bytes(T1),
        partition_index: 0,
        replicas: vec![1, 2],
        isr: vec![1],
        leader: 1,
        leader_epoch: 3,
        partition_epoch: 4,
        ..PartitionRecord::default()
    };
    let bytes = prost::Message::encode_to_vec(&old);
    let decoded: PartitionRecord = prost::Message::decode(bytes.as_slice()).unwrap();
    assert!(decoded.adding_replicas.is_empty() && decoded.removing_replicas.is_empty());
    assert_eq!(decoded, old);
}
