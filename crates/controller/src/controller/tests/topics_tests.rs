use super::*;

#[test]
fn create_with_defaults_on_a_single_node() {
    let mut harness = Harness::with_brokers(1);
    let created = harness
        .create_one(NewTopic {
            name: "orders".into(),
            ..NewTopic::default()
        })
        .unwrap();
    assert_eq!(created.partitions, 1);
    assert_eq!(created.replication_factor, 1);
    assert_eq!(created.topic_id.get_version_num(), 4);
    let topic = harness.image.topic_by_name("orders").unwrap();
    assert_eq!(topic.id, created.topic_id);
    assert_eq!(
        topic.partitions,
        vec![PartitionImage {
            replicas: vec![1],
            isr: vec![1],
            leader: Some(1),
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionImage::default()
        }]
    );
}

#[test]
fn create_spreads_leaders_over_brokers() {
    let mut harness = Harness::with_brokers(3);
    harness.create_one(topic("spread", 6, 2)).unwrap();
    let topic = harness.image.topic_by_name("spread").unwrap();
    for broker in 1..=3 {
        let led = topic
            .partitions
            .iter()
            .filter(|partition| partition.leader == Some(broker))
            .count();
        assert_eq!(led, 2, "broker {broker}");
    }
    for partition in &topic.partitions {
        assert_eq!(partition.replicas.len(), 2);
        assert_eq!(partition.isr, partition.replicas);
        assert_eq!(partition.leader, partition.replicas.first().copied());
    }
}

#[test]
fn brokers_with_racks_get_replicas_spread_over_racks() {
    let mut harness = Harness::new();
    for (broker_id, rack) in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")] {
        harness
            .register_in_rack(broker_id, broker_id as u128, Some(rack))
            .unwrap();
        harness.heartbeat(broker_id, false, false).unwrap();
    }
    harness.create_one(topic("racked", 12, 3)).unwrap();
    let topic = harness.image.topic_by_name("racked").unwrap();
    for partition in &topic.partitions {
        let racks: std::collections::BTreeSet<i32> =
            partition.replicas.iter().map(|id| (id + 1) / 2).collect();
        assert_eq!(racks.len(), 3, "{:?} spans three racks", partition.replicas);
    }
}

#[test]
fn defaults_come_from_the_config() {
    let mut harness = Harness::with_config(ControllerConfig {
        default_partitions: 4,
        default_replication_factor: 2,
        ..ControllerConfig::default()
    });
    harness.start_broker(1);
    harness.start_broker(2);
    let created = harness
        .create_one(NewTopic {
            name: "defaults".into(),
            ..NewTopic::default()
        })
        .unwrap();
    assert_eq!((created.partitions, created.replication_factor), (4, 2));
}

#[test]
fn validate_only_writes_nothing() {
    let mut harness = Harness::with_brokers(1);
    let request = CreateTopicsRequest {
        topics: vec![topic("dry", 3, 1)],
        validate_only: true,
    };
    let result = harness
        .controller
        .create_topics(&harness.image, &request)
        .unwrap();
    assert!(result.records.is_empty());
    assert_eq!(result.response[0].result.as_ref().unwrap().partitions, 3);
    let request = CreateTopicsRequest {
        topics: vec![topic("dry", 0, 1)],
        validate_only: true,
    };
    let result = harness
        .controller
        .create_topics(&harness.image, &request)
        .unwrap();
    assert!(matches!(
        result.response[0].result,
        Err(ControllerError::InvalidPartitions { .. })
    ));
    assert!(harness.image.topic_by_name("dry").is_none());
}

#[test]
fn existing_topic_is_rejected() {
    let mut harness = Harness::with_brokers(1);
    harness.create_one(topic("orders", 1, 1)).unwrap();
    assert_eq!(
        harness.create_one(topic("orders", 1, 1)),
        Err(ControllerError::TopicAlreadyExists {
            name: "orders".into()
        })
    );
}

#[test]
fn duplicate_in_one_request_fails_every_copy() {
    let mut harness = Harness::with_brokers(1);
    let outcomes = harness.create(vec![
        topic("twice", 1, 1),
        topic("once", 1, 1),
        topic("twice", 1, 1),
    ]);
    assert!(matches!(
        outcomes[0].result,
        Err(ControllerError::DuplicateTopic { .. })
    ));
    assert!(outcomes[1].result.is_ok());
    assert!(matches!(
        outcomes[2].result,
        Err(ControllerError::DuplicateTopic { .. })
    ));
    assert!(harness.image.topic_by_name("twice").is_none());
    assert!(harness.image.topic_by_name("once").is_some());
}

#[test]
fn invalid_names_are_rejected() {
    let mut harness = Harness::with_brokers(1);
    for (name, problem) in [
        ("", TopicNameProblem::Empty),
        ("..", TopicNameProblem::DotOrDotDot),
        ("a b", TopicNameProblem::IllegalCharacter { character: ' ' }),
    ] {
        assert_eq!(
            harness.create_one(topic(name, 1, 1)),
            Err(ControllerError::InvalidTopicName {
                name: name.into(),
                problem
            })
        );
    }
    harness.create_one(topic("metrics.cpu", 1, 1)).unwrap();
    assert_eq!(
        harness.create_one(topic("metrics_cpu", 1, 1)),
        Err(ControllerError::InvalidTopicName {
            name: "metrics_cpu".into(),
            problem: TopicNameProblem::CollidesWith {
                existing: "metrics.cpu".into()
            },
        })
    );
}

#[test]
fn invalid_partition_counts_are_rejected() {
    let mut harness = Harness::with_brokers(1);
    for partitions in [0, -3, 100_001] {
        assert!(
            matches!(
                harness.create_one(topic("p", partitions, 1)),
                Err(ControllerError::InvalidPartitions { .. })
            ),
            "{partitions}"
        );
    }
}

#[test]
fn replication_factor_above_live_brokers_is_rejected() {
    let mut harness = Harness::with_brokers(2);
    assert_eq!(
        harness.create_one(topic("r", 1, 3)),
        Err(ControllerError::InvalidReplicationFactor {
            requested: 3,
            available_brokers: 2
        })
    );
    assert_eq!(
        harness.create_one(topic("r", 1, 0)),
        Err(ControllerError::InvalidReplicationFactor {
            requested: 0,
            available_brokers: 2
        })
    );
    let mut empty = Harness::new();
    assert_eq!(
        empty.create_one(topic("r", 1, 1)),
        Err(ControllerError::InvalidReplicationFactor {
            requested: 1,
            available_brokers: 0
        })
    );
}

#[test]
fn fenced_brokers_get_no_new_replicas() {
    let mut harness = Harness::with_brokers(2);
    harness.heartbeat(2, true, false).unwrap();
    harness.create_one(topic("t", 4, 1)).unwrap();
    let topic = harness.image.topic_by_name("t").unwrap();
    assert!(topic
        .partitions
        .iter()
        .all(|partition| partition.replicas == vec![1]));
}

#[test]
fn configs_are_validated_and_stored() {
    let mut harness = Harness::with_brokers(1);
    let mut new_topic = topic("c", 1, 1);
    new_topic.configs = vec![
        ConfigEntry::new("retention.ms", "1000"),
        ConfigEntry::new("cleanup.policy", "compact"),
    ];
    let created = harness.create_one(new_topic).unwrap();
    assert_eq!(created.configs.len(), 2);
    let resource = ConfigResource::Topic("c".into());
    assert_eq!(
        harness.image.config(&resource, "cleanup.policy"),
        Some("compact")
    );
    let mut spaced = topic("spaced", 1, 1);
    spaced.configs = vec![
        ConfigEntry::new("cleanup.policy", " compact , delete "),
        ConfigEntry::new("retention.ms", " 5 "),
    ];
    harness.create_one(spaced).unwrap();
    let spaced = ConfigResource::Topic("spaced".into());
    assert_eq!(
        harness.image.config(&spaced, "cleanup.policy"),
        Some("compact,delete")
    );
    assert_eq!(harness.image.config(&spaced, "retention.ms"), Some("5"));
    assert_eq!(
        harness.image.config(&resource, "retention.ms"),
        Some("1000")
    );
}

#[test]
fn invalid_configs_are_rejected() {
    let mut harness = Harness::with_brokers(1);
    let cases = [
        (
            ConfigEntry::new("retention.hours", "1"),
            ConfigProblem::UnknownKey,
        ),
        (
            ConfigEntry::new("retention.ms", "soon"),
            ConfigProblem::Value(ConfigValueError::NotAnInteger),
        ),
        (
            ConfigEntry {
                key: "retention.ms".into(),
                value: None,
            },
            ConfigProblem::MissingValue,
        ),
    ];
    for (entry, reason) in cases {
        let mut new_topic = topic("bad", 1, 1);
        new_topic.configs = vec![entry.clone()];
        assert_eq!(
            harness.create_one(new_topic),
            Err(ControllerError::InvalidConfig {
                key: entry.key,
                value: entry.value,
                reason
            })
        );
    }
    let mut new_topic = topic("bad", 1, 1);
    new_topic.configs = vec![
        ConfigEntry::new("retention.ms", "1"),
        ConfigEntry::new("retention.ms", "2"),
    ];
    assert!(matches!(
        harness.create_one(new_topic),
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::DuplicateKey,
            ..
        })
    ));
    assert!(harness.image.topic_by_name("bad").is_none());
}

fn assigned(name: &str, assignments: &[&[BrokerId]]) -> NewTopic {
    NewTopic {
        name: name.into(),
        assignments: assignments
            .iter()
            .zip(0..)
            .map(|(broker_ids, partition_index)| RequestedAssignment {
                partition_index,
                broker_ids: broker_ids.to_vec(),
            })
            .collect(),
        ..NewTopic::default()
    }
}

#[test]
fn manual_assignment_is_honoured() {
    let mut harness = Harness::with_brokers(3);
    let created = harness
        .create_one(assigned("m", &[&[3, 1], &[2, 3]]))
        .unwrap();
    assert_eq!((created.partitions, created.replication_factor), (2, 2));
    assert_eq!(harness.partition("m", 0).replicas, vec![3, 1]);
    assert_eq!(harness.partition("m", 0).leader, Some(3));
    assert_eq!(harness.partition("m", 1).replicas, vec![2, 3]);
}

#[test]
fn invalid_manual_assignments_are_rejected() {
    let mut harness = Harness::with_brokers(2);
    assert_eq!(
        harness.create_one(assigned("m", &[&[1, 9]])),
        Err(ControllerError::InvalidReplicaAssignment {
            problem: AssignmentError::UnknownBroker {
                partition_index: 0,
                broker_id: 9
            }
        })
    );
    let mut with_counts = assigned("m", &[&[1]]);
    with_counts.partitions = Some(1);
    assert_eq!(
        harness.create_one(with_counts),
        Err(ControllerError::AssignmentWithCounts { topic: "m".into() })
    );
    harness.heartbeat(2, true, false).unwrap();
    assert_eq!(
        harness.create_one(assigned("m", &[&[1], &[2]])),
        Err(ControllerError::InvalidReplicaAssignment {
            problem: AssignmentError::AllReplicasFenced { partition_index: 1 }
        })
    );
    // A fenced broker may be a replica, outside the ISR.
    harness.create_one(assigned("m", &[&[2, 1]])).unwrap();
    assert_eq!(harness.partition("m", 0).isr, vec![1]);
    assert_eq!(harness.partition("m", 0).leader, Some(1));
}

#[test]
fn topic_ids_follow_the_seed() {
    let mut first = Harness::with_brokers(1);
    let mut second = Harness::with_brokers(1);
    let a = first.create_one(topic("x", 1, 1)).unwrap().topic_id;
    let b = second.create_one(topic("x", 1, 1)).unwrap().topic_id;
    assert_eq!(a, b);
    assert_ne!(a, first.create_one(topic("y", 1, 1)).unwrap().topic_id);
}

#[test]
fn delete_by_name_and_by_id() {
    let mut harness = Harness::with_brokers(1);
    harness.create_one(topic("a", 1, 1)).unwrap();
    let b = harness.create_one(topic("b", 1, 1)).unwrap().topic_id;
    let missing = Uuid::from_u128(99);
    let references = vec![
        TopicReference::Name("a".into()),
        TopicReference::Id(b),
        TopicReference::Name("a".into()),
        TopicReference::Id(missing),
    ];
    let result = harness
        .controller
        .delete_topics(&harness.image, &references)
        .unwrap();
    let outcomes = harness.commit(result);
    assert_eq!(outcomes[0].result.as_ref().unwrap().name, "a");
    assert_eq!(outcomes[1].result.as_ref().unwrap().name, "b");
    assert_eq!(
        outcomes[2].result,
        Err(ControllerError::UnknownTopic { name: "a".into() })
    );
    assert_eq!(
        outcomes[3].result,
        Err(ControllerError::UnknownTopicId { topic_id: missing })
    );
    assert_eq!(harness.image.topic_count(), 0);
}

fn grow(
    harness: &mut Harness,
    topic: &str,
    count: i32,
    assignments: Option<Vec<Vec<BrokerId>>>,
    validate_only: bool,
) -> Result<(), ControllerError> {
    let request = CreatePartitionsRequest {
        topics: vec![PartitionsIncrease {
            topic: topic.into(),
            count,
            assignments,
        }],
        validate_only,
    };
    let result = harness
        .controller
        .create_partitions(&harness.image, &request)
        .unwrap();
    harness.commit(result).remove(0).result
}

#[test]
fn create_partitions_adds_to_the_end() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("g", 1, 2)).unwrap();
    grow(&mut harness, "g", 3, None, false).unwrap();
    let topic = harness.image.topic_by_name("g").unwrap();
    assert_eq!(topic.partitions.len(), 3);
    assert!(topic
        .partitions
        .iter()
        .all(|partition| partition.replicas.len() == 2));
    grow(&mut harness, "g", 4, Some(vec![vec![2, 1]]), false).unwrap();
    assert_eq!(harness.partition("g", 3).replicas, vec![2, 1]);
    grow(&mut harness, "g", 9, None, true).unwrap();
    assert_eq!(
        harness.image.topic_by_name("g").unwrap().partitions.len(),
        4
    );
}

#[test]
fn create_partitions_rejects_bad_requests() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("g", 2, 2)).unwrap();
    assert_eq!(
        grow(&mut harness, "g", 2, None, false),
        Err(ControllerError::InvalidPartitions {
            topic: "g".into(),
            requested: 2,
            current: 2
        })
    );
    assert_eq!(
        grow(&mut harness, "nope", 3, None, false),
        Err(ControllerError::UnknownTopic {
            name: "nope".into()
        })
    );
    assert_eq!(
        grow(&mut harness, "g", 4, Some(vec![vec![1, 2]]), false),
        Err(ControllerError::InvalidReplicaAssignment {
            problem: AssignmentError::WrongPartitionCount {
                expected: 2,
                actual: 1
            }
        })
    );
    assert_eq!(
        grow(&mut harness, "g", 3, Some(vec![vec![1]]), false),
        Err(ControllerError::InvalidReplicaAssignment {
            problem: AssignmentError::InconsistentReplicationFactor {
                partition_index: 2,
                expected: 2,
                actual: 1
            }
        })
    );
    assert_eq!(
        harness.image.topic_by_name("g").unwrap().partitions.len(),
        2
    );
}
