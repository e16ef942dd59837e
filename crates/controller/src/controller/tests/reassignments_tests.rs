//! Reassignment (KIP-455) and automatic leader rebalancing: every state
//! change the controller makes for them.

use super::*;
use crate::controller::partitions::AlterPartitionRequest;
use crate::error::AssignmentError;

fn pinned(name: &str, partitions: &[&[BrokerId]]) -> NewTopic {
    NewTopic {
        name: name.into(),
        assignments: partitions
            .iter()
            .enumerate()
            .map(|(index, broker_ids)| RequestedAssignment {
                partition_index: index as i32,
                broker_ids: broker_ids.to_vec(),
            })
            .collect(),
        ..NewTopic::default()
    }
}

fn reassign(
    harness: &mut Harness,
    topic: &str,
    partition_index: i32,
    target: Option<&[BrokerId]>,
) -> Result<(), ControllerError> {
    let request = vec![PartitionReassignment {
        topic: topic.into(),
        partition_index,
        target_replicas: target.map(<[BrokerId]>::to_vec),
    }];
    let result = harness
        .controller
        .alter_partition_reassignments(&harness.image, &request)
        .unwrap();
    let mut outcomes = harness.commit(result);
    assert_eq!(outcomes.len(), 1);
    outcomes.remove(0).result
}

/// The partition's leader proposes `new_isr`, as the replication layer
/// does when a follower catches up.
fn leader_proposes(harness: &mut Harness, topic: &str, new_isr: &[BrokerId]) {
    let partition = harness.partition(topic, 0);
    let leader = partition.leader.unwrap();
    let request = AlterPartitionRequest {
        broker_id: leader,
        broker_epoch: harness.image.broker(leader).unwrap().epoch,
        topic_id: harness.image.topic_by_name(topic).unwrap().id,
        partition_index: 0,
        leader_epoch: partition.leader_epoch,
        partition_epoch: partition.partition_epoch,
        new_isr: new_isr.to_vec(),
    };
    let result = harness
        .controller
        .alter_partition(&harness.image, &request)
        .unwrap();
    harness.commit(result).unwrap();
}

/// Replicas, ISR, leader, adding and removing replicas.
type State = (Vec<i32>, Vec<i32>, Option<i32>, Vec<i32>, Vec<i32>);

fn state(partition: &PartitionImage) -> State {
    (
        partition.replicas.clone(),
        partition.isr.clone(),
        partition.leader,
        partition.adding_replicas.clone(),
        partition.removing_replicas.clone(),
    )
}

#[test]
fn reassignment_starts_with_target_then_current_replicas() {
    let mut harness = Harness::with_brokers(4);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[2, 3, 4])).unwrap();
    let partition = harness.partition("r", 0);
    assert_eq!(
        state(&partition),
        (vec![2, 3, 4, 1], vec![1, 2, 3], Some(1), vec![4], vec![1])
    );
    assert!(partition.is_reassigning());
    assert_eq!(partition.target_replicas(), vec![2, 3, 4]);
    // Adding a replica changes neither the leader nor its epoch.
    assert_eq!(partition.leader_epoch, 0);
    assert_eq!(partition.partition_epoch, 1);
}

#[test]
fn reassignment_completes_when_the_adding_replica_joins_the_isr() {
    let mut harness = Harness::with_brokers(4);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[2, 3, 4])).unwrap();
    // A shrink that leaves the adding replica out completes nothing.
    leader_proposes(&mut harness, "r", &[1, 2]);
    assert!(harness.partition("r", 0).is_reassigning());
    leader_proposes(&mut harness, "r", &[1, 2, 4]);
    let partition = harness.partition("r", 0);
    // The leader (1) was removed: the reassignment policy elects the first
    // target replica in the ISR, and 1 leaves the ISR.
    assert_eq!(
        state(&partition),
        (vec![2, 3, 4], vec![2, 4], Some(2), vec![], vec![])
    );
    assert_eq!(partition.leader_epoch, 1);
}

#[test]
fn completion_keeps_a_leader_that_stays() {
    let mut harness = Harness::with_brokers(4);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[4, 1, 2])).unwrap();
    leader_proposes(&mut harness, "r", &[1, 2, 3, 4]);
    let partition = harness.partition("r", 0);
    assert_eq!(
        state(&partition),
        (vec![4, 1, 2], vec![1, 2, 4], Some(1), vec![], vec![])
    );
    assert_eq!(partition.leader_epoch, 0);
}

#[test]
fn shrinking_the_replicas_completes_at_once() {
    let mut harness = Harness::with_brokers(3);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[3, 2])).unwrap();
    // The removed leader hands over to the first target replica in the ISR.
    assert_eq!(
        state(&harness.partition("r", 0)),
        (vec![3, 2], vec![2, 3], Some(3), vec![], vec![])
    );
    // Reordering alone changes the replica order, nothing else.
    reassign(&mut harness, "r", 0, Some(&[2, 3])).unwrap();
    assert_eq!(
        state(&harness.partition("r", 0)),
        (vec![2, 3], vec![2, 3], Some(3), vec![], vec![])
    );
}

#[test]
fn cancellation_reverts_an_ongoing_reassignment() {
    let mut harness = Harness::with_brokers(5);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[3, 4, 5])).unwrap();
    // One adding replica caught up; the other did not.
    leader_proposes(&mut harness, "r", &[1, 2, 3, 4]);
    assert_eq!(harness.partition("r", 0).adding_replicas, vec![4, 5]);
    reassign(&mut harness, "r", 0, None).unwrap();
    // As in Kafka, the adding replicas leave; the others keep the order
    // the reassignment gave them.
    assert_eq!(
        state(&harness.partition("r", 0)),
        (vec![3, 1, 2], vec![1, 2, 3], Some(1), vec![], vec![])
    );
    assert!(matches!(
        reassign(&mut harness, "r", 0, None),
        Err(ControllerError::NoReassignmentInProgress { .. })
    ));
}

#[test]
fn a_new_target_replaces_the_ongoing_reassignment() {
    let mut harness = Harness::with_brokers(5);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[2, 3, 4])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[2, 3, 5])).unwrap();
    assert_eq!(
        state(&harness.partition("r", 0)),
        (vec![2, 3, 5, 1], vec![1, 2, 3], Some(1), vec![5], vec![1])
    );
}

#[test]
fn invalid_reassignments_are_refused() {
    let mut harness = Harness::with_brokers(3);
    harness.create_one(pinned("r", &[&[1, 2]])).unwrap();
    let invalid = |result| match result {
        Err(ControllerError::InvalidReplicaAssignment { problem }) => problem,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        invalid(reassign(&mut harness, "r", 0, Some(&[]))),
        AssignmentError::EmptyReplicas { partition_index: 0 }
    );
    assert_eq!(
        invalid(reassign(&mut harness, "r", 0, Some(&[1, 1]))),
        AssignmentError::DuplicateBroker {
            partition_index: 0,
            broker_id: 1
        }
    );
    assert_eq!(
        invalid(reassign(&mut harness, "r", 0, Some(&[1, 9]))),
        AssignmentError::UnknownBroker {
            partition_index: 0,
            broker_id: 9
        }
    );
    assert!(matches!(
        reassign(&mut harness, "missing", 0, Some(&[1])),
        Err(ControllerError::UnknownTopic { .. })
    ));
    assert!(matches!(
        reassign(&mut harness, "r", 1, Some(&[1])),
        Err(ControllerError::UnknownPartition { .. })
    ));
    assert!(!harness.partition("r", 0).is_reassigning());
}

#[test]
fn ongoing_reassignments_are_listed() {
    let mut harness = Harness::with_brokers(4);
    harness
        .create_one(pinned("r", &[&[1, 2, 3], &[1, 2, 3]]))
        .unwrap();
    reassign(&mut harness, "r", 1, Some(&[2, 3, 4])).unwrap();
    let all = ongoing_reassignments(&harness.image, None);
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].0, all[0].1), ("r", 1));
    assert_eq!(all[0].2.adding_replicas, vec![4]);
    let named = [
        ("r".to_owned(), 0),
        ("r".to_owned(), 1),
        ("x".to_owned(), 0),
    ];
    let listed = ongoing_reassignments(&harness.image, Some(&named));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1, 1);
}

#[test]
fn a_reassignment_survives_a_snapshot() {
    let mut harness = Harness::with_brokers(4);
    harness.create_one(pinned("r", &[&[1, 2, 3]])).unwrap();
    reassign(&mut harness, "r", 0, Some(&[2, 3, 4])).unwrap();
    let records = harness.image.to_snapshot_records();
    let rebuilt = MetadataImage::from_snapshot_records(0, &records).unwrap();
    let topic = rebuilt.topic_by_name("r").unwrap();
    assert_eq!(topic.partitions[0], harness.partition("r", 0));
}

fn rebalancing(percentage: u32) -> Harness {
    let config = ControllerConfig {
        leader_imbalance_per_broker_percentage: percentage,
        leader_imbalance_check_interval_ms: 10_000,
        broker_session_timeout_ms: 1_000_000,
        ..ControllerConfig::default()
    };
    let mut harness = Harness::with_config(config);
    for broker_id in 1..=2 {
        harness.start_broker(broker_id);
    }
    // Broker 1 prefers four partitions; broker 2 leads one of them.
    harness
        .create_one(pinned("b", &[&[1, 2], &[1, 2], &[1, 2], &[1, 2]]))
        .unwrap();
    let topic = harness.image.topic_by_name("b").unwrap().clone();
    let record = partition_change(&topic, 0, None, Some(Some(2)));
    harness.commit(ControllerResult {
        records: vec![record],
        response: (),
    });
    assert_eq!(harness.partition("b", 0).leader, Some(2));
    harness
}

#[test]
fn rebalance_runs_only_once_the_interval_passed() {
    let mut harness = rebalancing(10);
    harness.tick();
    harness.now_ms += 9_999;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(2));
    harness.now_ms += 1;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(1));
}

#[test]
fn rebalance_waits_while_the_imbalance_is_within_the_percentage() {
    // One of four is 25 %: not above 25 %, above 24 %.
    let mut harness = rebalancing(25);
    harness.tick();
    harness.now_ms += 10_000;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(2));
    let mut harness = rebalancing(24);
    harness.tick();
    harness.now_ms += 10_000;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(1));
}

#[test]
fn rebalance_can_be_disabled() {
    let config = ControllerConfig {
        auto_leader_rebalance_enable: false,
        broker_session_timeout_ms: u64::MAX,
        ..ControllerConfig::default()
    };
    let mut harness = rebalancing(0);
    harness.controller = Controller::new(config, std::sync::Arc::new(SeededRandom::new(7)));
    harness.tick();
    harness.now_ms += 10_000_000;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(2));
}

#[test]
fn rebalance_skips_a_preferred_replica_outside_the_isr() {
    let mut harness = rebalancing(0);
    let topic = harness.image.topic_by_name("b").unwrap().clone();
    let record = partition_change(&topic, 0, Some(vec![2]), None);
    harness.commit(ControllerResult {
        records: vec![record],
        response: (),
    });
    harness.tick();
    harness.now_ms += 10_000;
    harness.tick();
    assert_eq!(harness.partition("b", 0).leader, Some(2));
}
