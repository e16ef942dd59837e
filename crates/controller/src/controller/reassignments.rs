//! Partition reassignment, as Kafka's KRaft controller does it (KIP-455).
//!
//! AlterPartitionReassignments names target replicas per partition. The
//! controller then records, in one partition change:
//!
//! - `replicas` = target, followed by the current replicas not in it;
//! - `adding_replicas` = target − current (they start fetching);
//! - `removing_replicas` = current − target.
//!
//! The ISR and the leader are unchanged. When every adding replica has
//! joined the ISR (an AlterPartition from the leader, or at once when
//! nothing is added), the reassignment completes: `replicas` = target, the
//! ISR loses the removed replicas, and a leader being removed hands over
//! with the reassignment election policy. Brokers that no longer hold a
//! replica stop fetching and delete the partition's log.
//!
//! A new target for a partition already being reassigned first reverts
//! the ongoing reassignment; a null target (cancellation) only reverts:
//! the adding replicas leave `replicas` and the ISR, and a leader among
//! them hands back with the offline partition policy.

use super::{is_live, Controller, ControllerResult, Pending};
use crate::election::{offline_partition_leader, reassignment_leader};
use crate::error::{ApplyError, AssignmentError, ControllerError};
use crate::image::{leader_to_record, BrokerId, MetadataImage, PartitionImage, TopicImage};
use crate::records::{uuid_to_bytes, MetadataRecord, PartitionChangeRecord, Record, ReplicaList};

/// The reassignment requested for one partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionReassignment {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition_index: i32,
    /// The target replicas, preferred leader first; `None` cancels the
    /// ongoing reassignment.
    pub target_replicas: Option<Vec<BrokerId>>,
}

/// The result of a reassignment request for one partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReassignmentOutcome {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition_index: i32,
    /// Whether the reassignment was started (or cancelled).
    pub result: Result<(), ControllerError>,
}

/// The state a partition is in after a reassignment's replicas are
/// decided: what one partition change record installs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Installed {
    replicas: Vec<BrokerId>,
    isr: Vec<BrokerId>,
    leader: Option<BrokerId>,
    adding: Vec<BrokerId>,
    removing: Vec<BrokerId>,
}

impl Installed {
    fn of(partition: &PartitionImage) -> Self {
        Self {
            replicas: partition.replicas.clone(),
            isr: partition.isr.clone(),
            leader: partition.leader,
            adding: partition.adding_replicas.clone(),
            removing: partition.removing_replicas.clone(),
        }
    }

    /// The change record from `partition` to `self`, with only the fields
    /// that change.
    fn record(
        &self,
        topic: &TopicImage,
        index: usize,
        partition: &PartitionImage,
    ) -> MetadataRecord {
        let changed = |new: &Vec<BrokerId>, old: &Vec<BrokerId>| {
            (new != old).then(|| ReplicaList::from(new.clone()))
        };
        MetadataRecord::new(Record::PartitionChange(PartitionChangeRecord {
            topic_id: uuid_to_bytes(topic.id),
            partition_index: i32::try_from(index).unwrap_or(i32::MAX),
            isr: changed(&self.isr, &partition.isr),
            leader: (self.leader != partition.leader).then(|| leader_to_record(self.leader)),
            replicas: changed(&self.replicas, &partition.replicas),
            adding_replicas: changed(&self.adding, &partition.adding_replicas),
            removing_replicas: changed(&self.removing, &partition.removing_replicas),
        }))
    }
}

impl Controller {
    /// AlterPartitionReassignments: starts, replaces or cancels
    /// reassignments; see the module docs.
    pub fn alter_partition_reassignments(
        &mut self,
        image: &MetadataImage,
        partitions: &[PartitionReassignment],
    ) -> Result<ControllerResult<Vec<ReassignmentOutcome>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(partitions.len());
        for reassignment in partitions {
            let result = self.reassign_one(&mut pending, reassignment)?;
            outcomes.push(ReassignmentOutcome {
                topic: reassignment.topic.clone(),
                partition_index: reassignment.partition_index,
                result,
            });
        }
        Ok(pending.finish(outcomes, false))
    }

    fn reassign_one(
        &self,
        pending: &mut Pending,
        reassignment: &PartitionReassignment,
    ) -> Result<Result<(), ControllerError>, ApplyError> {
        let image = &pending.image;
        let (topic, index, partition) =
            match find_partition(image, &reassignment.topic, reassignment.partition_index) {
                Ok(found) => found,
                Err(error) => return Ok(Err(error)),
            };
        let live = |id| is_live(image, id);
        let installed = match &reassignment.target_replicas {
            None if !partition.is_reassigning() => {
                return Ok(Err(ControllerError::NoReassignmentInProgress {
                    topic: topic.name.clone(),
                    partition_index: reassignment.partition_index,
                }))
            }
            None => revert(partition, live),
            Some(target) => {
                if let Err(problem) = check_target(image, reassignment.partition_index, target) {
                    return Ok(Err(ControllerError::InvalidReplicaAssignment { problem }));
                }
                let base = if partition.is_reassigning() {
                    revert(partition, live)
                } else {
                    Some(Installed::of(partition))
                };
                base.map(|base| start(base, target))
            }
        };
        let Some(installed) = installed else {
            return Ok(Err(ControllerError::EligibleLeadersNotAvailable {
                topic: topic.name.clone(),
                partition_index: reassignment.partition_index,
            }));
        };
        let topic_id = topic.id;
        if installed != Installed::of(partition) {
            let record = installed.record(topic, index, partition);
            tracing::info!(topic = %topic.name, partition = index, replicas = ?installed.replicas,
                adding = ?installed.adding, removing = ?installed.removing, "partition reassignment changed");
            pending.push(vec![record])?;
        }
        let completion = completion_record(&pending.image, topic_id, index);
        pending.push(completion.into_iter().collect())?;
        Ok(Ok(()))
    }
}

/// The record that completes the reassignment of partition `index` of
/// topic `topic_id`, if every adding replica has joined its ISR.
pub(super) fn completion_record(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    index: usize,
) -> Option<MetadataRecord> {
    let topic = image.topic_by_id(topic_id)?;
    let partition = topic.partitions.get(index)?;
    if !partition.is_reassigning()
        || !partition
            .adding_replicas
            .iter()
            .all(|id| partition.isr.contains(id))
    {
        return None;
    }
    let isr: Vec<BrokerId> = partition
        .isr
        .iter()
        .copied()
        .filter(|id| !partition.removing_replicas.contains(id))
        .collect();
    if isr.is_empty() {
        return None;
    }
    let target = partition.target_replicas();
    let live = |id| is_live(image, id);
    let leader = match partition.leader {
        Some(leader) if target.contains(&leader) && live(leader) => Some(leader),
        _ => reassignment_leader(&target, &isr, live).map(|election| election.leader),
    };
    let installed = Installed {
        replicas: target,
        isr,
        leader,
        adding: Vec::new(),
        removing: Vec::new(),
    };
    tracing::info!(topic = %topic.name, partition = index, replicas = ?installed.replicas,
        leader = ?installed.leader, "partition reassignment completed");
    Some(installed.record(topic, index, partition))
}

/// The partition with its ongoing reassignment undone: the adding replicas
/// leave the replicas and the ISR; a leader among them hands back with the
/// offline partition policy. `None` when no ISR member would remain.
fn revert(partition: &PartitionImage, is_live: impl Fn(BrokerId) -> bool) -> Option<Installed> {
    let adding = &partition.adding_replicas;
    let replicas: Vec<BrokerId> = partition
        .replicas
        .iter()
        .copied()
        .filter(|id| !adding.contains(id))
        .collect();
    let isr: Vec<BrokerId> = partition
        .isr
        .iter()
        .copied()
        .filter(|id| !adding.contains(id))
        .collect();
    if isr.is_empty() {
        return None;
    }
    let leader = match partition.leader {
        Some(leader) if !adding.contains(&leader) => Some(leader),
        _ => offline_partition_leader(&replicas, &isr, &is_live, false)
            .map(|election| election.leader),
    };
    Some(Installed {
        replicas,
        isr,
        leader,
        adding: Vec::new(),
        removing: Vec::new(),
    })
}

/// Starts a reassignment of `base` (no reassignment ongoing) to `target`.
fn start(base: Installed, target: &[BrokerId]) -> Installed {
    let mut replicas = target.to_vec();
    replicas.extend(
        base.replicas
            .iter()
            .copied()
            .filter(|id| !target.contains(id)),
    );
    Installed {
        adding: target
            .iter()
            .copied()
            .filter(|id| !base.replicas.contains(id))
            .collect(),
        removing: base
            .replicas
            .iter()
            .copied()
            .filter(|id| !target.contains(id))
            .collect(),
        replicas,
        ..base
    }
}

/// Target replicas must be non-empty, distinct and registered brokers.
fn check_target(
    image: &MetadataImage,
    partition_index: i32,
    target: &[BrokerId],
) -> Result<(), AssignmentError> {
    if target.is_empty() {
        return Err(AssignmentError::EmptyReplicas { partition_index });
    }
    for (position, broker_id) in target.iter().enumerate() {
        if target
            .get(..position)
            .is_some_and(|earlier| earlier.contains(broker_id))
        {
            return Err(AssignmentError::DuplicateBroker {
                partition_index,
                broker_id: *broker_id,
            });
        }
        if image.broker(*broker_id).is_none() {
            return Err(AssignmentError::UnknownBroker {
                partition_index,
                broker_id: *broker_id,
            });
        }
    }
    Ok(())
}

type Found<'a> = (&'a TopicImage, usize, &'a PartitionImage);

fn find_partition<'a>(
    image: &'a MetadataImage,
    topic_name: &str,
    partition_index: i32,
) -> Result<Found<'a>, ControllerError> {
    let topic = image
        .topic_by_name(topic_name)
        .ok_or_else(|| ControllerError::UnknownTopic {
            name: topic_name.to_owned(),
        })?;
    match (
        topic.partition(partition_index),
        usize::try_from(partition_index),
    ) {
        (Some(partition), Ok(index)) => Ok((topic, index, partition)),
        _ => Err(ControllerError::UnknownPartition {
            topic: topic_name.to_owned(),
            partition_index,
        }),
    }
}

/// An ongoing reassignment, as ListPartitionReassignments reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OngoingReassignment {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition_index: i32,
    /// The replicas: target, then the current ones being removed.
    pub replicas: Vec<BrokerId>,
    /// The replicas being added.
    pub adding_replicas: Vec<BrokerId>,
    /// The replicas being removed.
    pub removing_replicas: Vec<BrokerId>,
}

impl Controller {
    /// ListPartitionReassignments: the ongoing reassignments of every
    /// partition (`None`) or of the named ones, read from the active
    /// controller's image (no records).
    pub fn list_partition_reassignments(
        &self,
        image: &MetadataImage,
        partitions: Option<&[(String, i32)]>,
    ) -> ControllerResult<Vec<OngoingReassignment>> {
        let ongoing = ongoing_reassignments(image, partitions)
            .into_iter()
            .map(|(topic, partition_index, partition)| OngoingReassignment {
                topic: topic.to_owned(),
                partition_index,
                replicas: partition.replicas.clone(),
                adding_replicas: partition.adding_replicas.clone(),
                removing_replicas: partition.removing_replicas.clone(),
            })
            .collect();
        ControllerResult {
            records: Vec::new(),
            response: ongoing,
        }
    }
}

/// The ongoing reassignments in `image`, or those of the named partitions
/// (unknown ones and ones not being reassigned are left out), as
/// ListPartitionReassignments answers: topic, partition index and the
/// partition (its replicas, adding and removing replicas).
pub fn ongoing_reassignments<'a>(
    image: &'a MetadataImage,
    partitions: Option<&[(String, i32)]>,
) -> Vec<(&'a str, i32, &'a PartitionImage)> {
    let mut ongoing = Vec::new();
    match partitions {
        None => {
            for topic in image.topics() {
                for (index, partition) in topic.partitions.iter().enumerate() {
                    if partition.is_reassigning() {
                        let index = i32::try_from(index).unwrap_or(i32::MAX);
                        ongoing.push((topic.name.as_str(), index, partition));
                    }
                }
            }
        }
        Some(named) => {
            for (topic_name, partition_index) in named {
                if let Ok((topic, _, partition)) =
                    find_partition(image, topic_name, *partition_index)
                {
                    if partition.is_reassigning() {
                        ongoing.push((topic.name.as_str(), *partition_index, partition));
                    }
                }
            }
        }
    }
    ongoing
}
