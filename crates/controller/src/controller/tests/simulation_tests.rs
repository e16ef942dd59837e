//! Random command sequences against the controller core, with the image's
//! invariants checked after every step.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::records::MetadataRecord;

#[derive(Debug, Clone)]
enum Step {
    Register {
        broker_id: BrokerId,
        incarnation: u8,
    },
    Heartbeat {
        broker_id: BrokerId,
        want_fence: bool,
        want_shutdown: bool,
    },
    Advance {
        elapsed_ms: u64,
    },
    Tick,
    Create {
        name: u8,
        partitions: i32,
        replication_factor: i16,
    },
    Delete {
        name: u8,
    },
    Grow {
        name: u8,
        extra: i32,
    },
    Elect {
        preferred: bool,
    },
    AllowUnclean {
        name: u8,
    },
    ShrinkIsrToLeader {
        name: u8,
    },
    ExpandIsr {
        name: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..=4, any::<u8>()).prop_map(|(broker_id, incarnation)| Step::Register {
            broker_id,
            incarnation
        }),
        (1..=4, any::<bool>(), prop::bool::weighted(0.1)).prop_map(
            |(broker_id, want_fence, want_shutdown)| {
                Step::Heartbeat {
                    broker_id,
                    want_fence: want_fence && broker_id == 4,
                    want_shutdown,
                }
            }
        ),
        (0..6_000u64).prop_map(|elapsed_ms| Step::Advance { elapsed_ms }),
        Just(Step::Tick),
        (0..5u8, 1..4, 1..4i16).prop_map(|(name, partitions, replication_factor)| Step::Create {
            name,
            partitions,
            replication_factor
        }),
        (0..5u8).prop_map(|name| Step::Delete { name }),
        (0..5u8, 1..3).prop_map(|(name, extra)| Step::Grow { name, extra }),
        any::<bool>().prop_map(|preferred| Step::Elect { preferred }),
        (0..5u8).prop_map(|name| Step::AllowUnclean { name }),
        (0..5u8).prop_map(|name| Step::ShrinkIsrToLeader { name }),
        (0..5u8).prop_map(|name| Step::ExpandIsr { name }),
    ]
}

fn name(index: u8) -> String {
    format!("topic-{index}")
}

/// A harness that also keeps every committed record.
struct Recorder {
    harness: Harness,
    records: Vec<MetadataRecord>,
}

impl Recorder {
    fn commit<T>(&mut self, result: ControllerResult<T>) -> T {
        self.records.extend(result.records.iter().cloned());
        self.harness.commit(result)
    }

    fn run(&mut self, step: &Step) {
        let harness = &mut self.harness;
        let image = harness.image.clone();
        let now_ms = harness.now_ms;
        match step {
            Step::Register {
                broker_id,
                incarnation,
            } => {
                let request = BrokerRegistrationRequest {
                    broker_id: *broker_id,
                    incarnation_id: uuid::Uuid::from_u128(u128::from(*incarnation) + 1),
                    endpoints: Vec::new(),
                    rack: None,
                };
                let result = harness
                    .controller
                    .register_broker(&image, &request, now_ms)
                    .unwrap();
                self.commit(result).ok();
            }
            Step::Heartbeat {
                broker_id,
                want_fence,
                want_shutdown,
            } => {
                let broker_epoch = image.broker(*broker_id).map_or(0, |broker| broker.epoch);
                let request = BrokerHeartbeatRequest {
                    broker_id: *broker_id,
                    broker_epoch,
                    want_fence: *want_fence,
                    want_shutdown: *want_shutdown,
                };
                let result = harness
                    .controller
                    .broker_heartbeat(&image, &request, now_ms)
                    .unwrap();
                self.commit(result).ok();
            }
            Step::Advance { elapsed_ms } => harness.now_ms += elapsed_ms,
            Step::Tick => {
                let result = harness.controller.tick(&image, now_ms).unwrap();
                self.commit(result);
            }
            Step::Create {
                name: index,
                partitions,
                replication_factor,
            } => {
                let request = CreateTopicsRequest {
                    topics: vec![topic(&name(*index), *partitions, *replication_factor)],
                    validate_only: false,
                };
                let result = harness.controller.create_topics(&image, &request).unwrap();
                self.commit(result);
            }
            Step::Delete { name: index } => {
                let result = harness
                    .controller
                    .delete_topics(&image, &[TopicReference::Name(name(*index))])
                    .unwrap();
                self.commit(result);
            }
            Step::Grow { name: index, extra } => {
                let count = image
                    .topic_by_name(&name(*index))
                    .map_or(1, |topic| topic.partitions.len() as i32)
                    + extra;
                let request = CreatePartitionsRequest {
                    topics: vec![PartitionsIncrease {
                        topic: name(*index),
                        count,
                        assignments: None,
                    }],
                    validate_only: false,
                };
                let result = harness
                    .controller
                    .create_partitions(&image, &request)
                    .unwrap();
                self.commit(result);
            }
            Step::Elect { preferred } => {
                let election_type = if *preferred {
                    ElectionType::Preferred
                } else {
                    ElectionType::Unclean
                };
                let request = ElectLeadersRequest {
                    election_type,
                    partitions: None,
                };
                let result = harness.controller.elect_leaders(&image, &request).unwrap();
                self.commit(result);
            }
            Step::AllowUnclean { name: index } => {
                let alteration = ConfigAlteration {
                    key: "unclean.leader.election.enable".into(),
                    operation: AlterConfigOperation::Set("true".into()),
                };
                let request = IncrementalAlterConfigsRequest {
                    resources: vec![(ConfigResource::Topic(name(*index)), vec![alteration])],
                    validate_only: false,
                };
                let result = harness
                    .controller
                    .incremental_alter_configs(&image, &request)
                    .unwrap();
                self.commit(result);
            }
            Step::ShrinkIsrToLeader { name: index } => self.propose_isr(*index, false),
            Step::ExpandIsr { name: index } => self.propose_isr(*index, true),
        }
    }
}

impl Recorder {
    /// What a leader's AlterPartition does: shrink the ISR to the leader
    /// alone when followers lag, or expand it to every live replica.
    fn propose_isr(&mut self, index: u8, expand: bool) {
        let image = self.harness.image.clone();
        let Some(topic) = image.topic_by_name(&name(index)) else {
            return;
        };
        for (partition_index, partition) in topic.partitions.iter().enumerate() {
            let Some(leader) = partition.leader else {
                continue;
            };
            let new_isr = if expand {
                let live = |id: &BrokerId| image.broker(*id).is_some_and(|broker| !broker.fenced);
                partition.replicas.iter().copied().filter(live).collect()
            } else {
                vec![leader]
            };
            let request = AlterPartitionRequest {
                broker_id: leader,
                broker_epoch: image.broker(leader).map_or(0, |broker| broker.epoch),
                topic_id: topic.id,
                partition_index: partition_index as i32,
                leader_epoch: partition.leader_epoch,
                partition_epoch: partition.partition_epoch,
                new_isr,
            };
            let current = self.harness.image.clone();
            let result = self
                .harness
                .controller
                .alter_partition(&current, &request)
                .unwrap();
            let reply = self.commit(result);
            assert!(reply.is_ok(), "{reply:?}");
        }
    }
}

/// (topic id, partition index, leader epoch) → leader, over the whole run.
type LeadersByEpoch = BTreeMap<(uuid::Uuid, usize, i32), Option<BrokerId>>;

fn check_invariants(
    before: &MetadataImage,
    after: &MetadataImage,
    leaders: &mut LeadersByEpoch,
) -> Result<(), TestCaseError> {
    for topic in after.topics() {
        for (index, partition) in topic.partitions.iter().enumerate() {
            prop_assert!(
                !partition.isr.is_empty(),
                "{} {index}: empty ISR",
                topic.name
            );
            if let Some(leader) = partition.leader {
                prop_assert!(partition.isr.contains(&leader));
                let broker = after.broker(leader);
                prop_assert!(
                    broker.is_some_and(|broker| !broker.fenced),
                    "{} {index}: leader {leader} is not live",
                    topic.name
                );
            }
            let recorded = leaders
                .entry((topic.id, index, partition.leader_epoch))
                .or_insert(partition.leader);
            prop_assert_eq!(*recorded, partition.leader, "two leaders in one epoch");
            if let Some(old) = before
                .topic_by_id(topic.id)
                .and_then(|old| old.partitions.get(index))
            {
                prop_assert!(partition.leader_epoch >= old.leader_epoch);
                prop_assert!(partition.partition_epoch >= old.partition_epoch);
                if partition.leader != old.leader {
                    prop_assert!(partition.leader_epoch > old.leader_epoch);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_commands_keep_the_image_consistent(steps in prop::collection::vec(step(), 1..60)) {
        let mut recorder = Recorder { harness: Harness::with_brokers(3), records: Vec::new() };
        recorder.records = recorder.harness.image.to_snapshot_records();
        let mut leaders = LeadersByEpoch::new();
        for step in &steps {
            let before = recorder.harness.image.clone();
            recorder.run(step);
            check_invariants(&before, &recorder.harness.image, &mut leaders)?;
        }
        let image = &recorder.harness.image;
        let last_offset = image.last_offset().unwrap_or(0);
        // The image survives a snapshot round trip...
        let rebuilt = MetadataImage::from_snapshot_records(last_offset, &image.to_snapshot_records()).unwrap();
        prop_assert_eq!(&rebuilt, image);
        // ...and a replay of every record through its encoding.
        let decoded: Vec<MetadataRecord> = recorder
            .records
            .iter()
            .map(|record| MetadataRecord::decode_from(&record.encode_to_bytes()).unwrap())
            .collect();
        let replayed = MetadataImage::from_snapshot_records(last_offset, &decoded).unwrap();
        prop_assert_eq!(&replayed, image);
    }
}
