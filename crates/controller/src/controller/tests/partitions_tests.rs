use super::*;
use crate::controller::partitions::{AlterPartitionReply, AlterPartitionRequest};
use crate::error::PartitionProblem;

fn setup() -> (Harness, AlterPartitionRequest) {
    let mut harness = Harness::with_brokers(3);
    harness
        .create_one(NewTopic {
            name: "a".into(),
            assignments: vec![RequestedAssignment {
                partition_index: 0,
                broker_ids: vec![1, 2, 3],
            }],
            ..NewTopic::default()
        })
        .unwrap();
    let topic = harness.image.topic_by_name("a").unwrap();
    let request = AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: harness.image.broker(1).unwrap().epoch,
        topic_id: topic.id,
        partition_index: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![1, 2],
    };
    (harness, request)
}

fn alter(
    harness: &mut Harness,
    request: &AlterPartitionRequest,
) -> Result<AlterPartitionReply, ControllerError> {
    let result = harness
        .controller
        .alter_partition(&harness.image, request)
        .unwrap();
    harness.commit(result)
}

#[test]
fn leader_shrinks_and_expands_the_isr() {
    let (mut harness, mut request) = setup();
    let reply = alter(&mut harness, &request).unwrap();
    assert_eq!(
        reply,
        AlterPartitionReply {
            leader: Some(1),
            leader_epoch: 0,
            partition_epoch: 1,
            isr: vec![1, 2]
        }
    );
    assert_eq!(harness.partition("a", 0).isr, vec![1, 2]);
    request.partition_epoch = 1;
    request.new_isr = vec![1, 2, 3];
    assert_eq!(alter(&mut harness, &request).unwrap().partition_epoch, 2);
    assert_eq!(harness.partition("a", 0).isr, vec![1, 2, 3]);
}

#[test]
fn unchanged_isr_writes_nothing() {
    let (mut harness, mut request) = setup();
    request.new_isr = vec![1, 2, 3];
    let result = harness
        .controller
        .alter_partition(&harness.image, &request)
        .unwrap();
    assert!(result.records.is_empty());
    assert_eq!(result.response.unwrap().partition_epoch, 0);
}

#[test]
fn stale_requests_are_fenced() {
    let (mut harness, request) = setup();
    let mut stale_leader = request.clone();
    stale_leader.leader_epoch = 5;
    assert_eq!(
        alter(&mut harness, &stale_leader),
        Err(ControllerError::FencedLeaderEpoch {
            current_epoch: 0,
            request_epoch: 5
        })
    );
    alter(&mut harness, &request).unwrap();
    assert_eq!(
        alter(&mut harness, &request),
        Err(ControllerError::InvalidUpdateVersion {
            current_epoch: 1,
            request_epoch: 0
        })
    );
    let mut stale_broker = request.clone();
    stale_broker.broker_epoch -= 1;
    assert!(matches!(
        alter(&mut harness, &stale_broker),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
}

#[test]
fn only_the_leader_may_propose() {
    let (mut harness, mut request) = setup();
    request.broker_id = 2;
    request.broker_epoch = harness.image.broker(2).unwrap().epoch;
    assert_eq!(
        alter(&mut harness, &request),
        Err(ControllerError::NotLeader {
            topic: "a".into(),
            partition_index: 0,
            broker_id: 2
        })
    );
}

#[test]
fn proposed_isr_is_checked() {
    let (mut harness, request) = setup();
    let cases = [
        (
            vec![2, 3],
            ControllerError::InvalidIsr {
                problem: PartitionProblem::LeaderNotInIsr { leader: 1 },
            },
        ),
        (
            vec![1, 1],
            ControllerError::InvalidIsr {
                problem: PartitionProblem::DuplicateIsrMember { broker_id: 1 },
            },
        ),
        (
            vec![1, 4],
            ControllerError::InvalidIsr {
                problem: PartitionProblem::IsrMemberNotReplica { broker_id: 4 },
            },
        ),
    ];
    for (new_isr, expected) in cases {
        let mut proposal = request.clone();
        proposal.new_isr = new_isr;
        assert_eq!(alter(&mut harness, &proposal), Err(expected));
    }
    harness.heartbeat(3, true, false).unwrap();
    let mut proposal = request.clone();
    proposal.partition_epoch = harness.partition("a", 0).partition_epoch;
    proposal.new_isr = vec![1, 3];
    assert_eq!(
        alter(&mut harness, &proposal),
        Err(ControllerError::IneligibleReplica { broker_id: 3 })
    );
}

#[test]
fn unknown_partitions_are_reported() {
    let (mut harness, mut request) = setup();
    request.partition_index = 3;
    assert_eq!(
        alter(&mut harness, &request),
        Err(ControllerError::UnknownPartition {
            topic: "a".into(),
            partition_index: 3
        })
    );
    request.topic_id = Uuid::from_u128(77);
    assert_eq!(
        alter(&mut harness, &request),
        Err(ControllerError::UnknownTopicId {
            topic_id: request.topic_id
        })
    );
}
