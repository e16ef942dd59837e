//! AlterPartition: ISR changes proposed by a partition's leader.
//!
//! The leader (the replication layer) shrinks the ISR when followers lag
//! and expands it when they catch up; the controller checks that the
//! proposal comes from the current leader at the current leader and
//! partition epochs, then records it. The reply carries the new partition
//! epoch the leader must quote next time.

use uuid::Uuid;

use super::reassignments::completion_record;
use super::{is_live, partition_change, Controller, ControllerResult, Pending};
use crate::error::{ApplyError, ControllerError, PartitionProblem};
use crate::image::{BrokerId, MetadataImage, PartitionImage};

/// An AlterPartition request for one partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionRequest {
    /// The requesting broker (the leader).
    pub broker_id: BrokerId,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The topic.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition_index: i32,
    /// The leader epoch the leader believes current.
    pub leader_epoch: i32,
    /// The partition epoch the leader believes current.
    pub partition_epoch: i32,
    /// The proposed ISR; must contain the leader.
    pub new_isr: Vec<BrokerId>,
}

/// The partition's state after the change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionReply {
    /// The leader.
    pub leader: Option<BrokerId>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch to quote next time.
    pub partition_epoch: i32,
    /// The ISR.
    pub isr: Vec<BrokerId>,
}

impl Controller {
    /// Applies an ISR change proposed by the partition's leader.
    pub fn alter_partition(
        &mut self,
        image: &MetadataImage,
        request: &AlterPartitionRequest,
    ) -> Result<ControllerResult<Result<AlterPartitionReply, ControllerError>>, ApplyError> {
        let mut pending = Pending::new(image);
        let checked = check_alter_partition(image, request);
        let (topic, index, partition) = match checked {
            Ok(found) => found,
            Err(error) => return Ok(pending.finish(Err(error), false)),
        };
        if partition.isr != request.new_isr {
            pending.push(vec![partition_change(
                topic,
                index,
                Some(request.new_isr.clone()),
                None,
            )])?;
            // An adding replica that joined the ISR may complete a
            // reassignment.
            let completion = completion_record(&pending.image, request.topic_id, index);
            pending.push(completion.into_iter().collect())?;
        }
        let reply = pending
            .image
            .topic_by_id(request.topic_id)
            .and_then(|topic| topic.partitions.get(index))
            .map(|partition| AlterPartitionReply {
                leader: partition.leader,
                leader_epoch: partition.leader_epoch,
                partition_epoch: partition.partition_epoch,
                isr: partition.isr.clone(),
            })
            .ok_or(ControllerError::UnknownTopicId {
                topic_id: request.topic_id,
            });
        Ok(pending.finish(reply, false))
    }
}

type Found<'a> = (&'a crate::image::TopicImage, usize, &'a PartitionImage);

fn check_alter_partition<'a>(
    image: &'a MetadataImage,
    request: &AlterPartitionRequest,
) -> Result<Found<'a>, ControllerError> {
    let broker_id = request.broker_id;
    let broker = image
        .broker(broker_id)
        .ok_or(ControllerError::BrokerNotRegistered { broker_id })?;
    if broker.epoch != request.broker_epoch {
        return Err(ControllerError::StaleBrokerEpoch {
            broker_id,
            current_epoch: broker.epoch,
            request_epoch: request.broker_epoch,
        });
    }
    let topic = image
        .topic_by_id(request.topic_id)
        .ok_or(ControllerError::UnknownTopicId {
            topic_id: request.topic_id,
        })?;
    let partition_index = request.partition_index;
    let (Some(partition), Ok(index)) = (
        topic.partition(partition_index),
        usize::try_from(partition_index),
    ) else {
        return Err(ControllerError::UnknownPartition {
            topic: topic.name.clone(),
            partition_index,
        });
    };
    if partition.leader != Some(broker_id) {
        return Err(ControllerError::NotLeader {
            topic: topic.name.clone(),
            partition_index,
            broker_id,
        });
    }
    if partition.leader_epoch != request.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch {
            current_epoch: partition.leader_epoch,
            request_epoch: request.leader_epoch,
        });
    }
    if partition.partition_epoch != request.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion {
            current_epoch: partition.partition_epoch,
            request_epoch: request.partition_epoch,
        });
    }
    check_proposed_isr(image, partition, broker_id, &request.new_isr)?;
    Ok((topic, index, partition))
}

fn check_proposed_isr(
    image: &MetadataImage,
    partition: &PartitionImage,
    leader: BrokerId,
    new_isr: &[BrokerId],
) -> Result<(), ControllerError> {
    let invalid = |problem| ControllerError::InvalidIsr { problem };
    if !new_isr.contains(&leader) {
        return Err(invalid(PartitionProblem::LeaderNotInIsr { leader }));
    }
    for (position, broker_id) in new_isr.iter().enumerate() {
        if new_isr
            .get(..position)
            .is_some_and(|earlier| earlier.contains(broker_id))
        {
            return Err(invalid(PartitionProblem::DuplicateIsrMember {
                broker_id: *broker_id,
            }));
        }
        if !partition.replicas.contains(broker_id) {
            return Err(invalid(PartitionProblem::IsrMemberNotReplica {
                broker_id: *broker_id,
            }));
        }
        if !is_live(image, *broker_id) {
            return Err(ControllerError::IneligibleReplica {
                broker_id: *broker_id,
            });
        }
    }
    Ok(())
}
