//! Topic commands: create topics, delete topics, create partitions.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::{is_live, ConfigEntry, Controller, ControllerResult, Pending};
use crate::assignment::{assign_replicas, validate_requested_assignment, RequestedAssignment};
use crate::config::validate_topic_config;
use crate::election::offline_partition_leader;
use crate::error::{ApplyError, AssignmentError, ConfigProblem, ControllerError, TopicNameProblem};
use crate::image::{leader_to_record, BrokerId, MetadataImage};
use crate::partition_state::PartitionState;
use crate::rack_assignment::assign_replicas_rack_aware;
use crate::records::{
    uuid_to_bytes, ConfigRecord, MetadataRecord, PartitionRecord, Record, RemoveTopicRecord,
    TopicRecord,
};
use crate::replica_state::{self, ReplicaState};
use crate::topic_name::{collision_key, validate_topic_name};

/// One topic to create.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct NewTopic {
    /// The name.
    pub name: String,
    /// Partition count; `None` (Kafka's -1) takes `num.partitions`.
    pub partitions: Option<i32>,
    /// Replication factor; `None` (Kafka's -1) takes
    /// `default.replication.factor`.
    pub replication_factor: Option<i16>,
    /// A manual assignment; when given, `partitions` and
    /// `replication_factor` must be `None`.
    pub assignments: Vec<RequestedAssignment>,
    /// Topic configs.
    pub configs: Vec<ConfigEntry>,
}

/// A CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CreateTopicsRequest {
    /// Topics to create.
    pub topics: Vec<NewTopic>,
    /// Validate only; write nothing.
    pub validate_only: bool,
}

/// What was (or, with `validate_only`, would be) created.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatedTopic {
    /// The new topic id.
    pub topic_id: Uuid,
    /// Partition count.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
    /// The configs set on the topic.
    pub configs: BTreeMap<String, String>,
}

/// The result for one topic of a request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicOutcome<T> {
    /// The topic name as given in the request.
    pub name: String,
    /// The result.
    pub result: Result<T, ControllerError>,
}

/// A topic named in a DeleteTopics request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TopicReference {
    /// By name.
    Name(String),
    /// By id (DeleteTopics v6+).
    Id(Uuid),
}

/// A deleted topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeletedTopic {
    /// Its name.
    pub name: String,
    /// Its id.
    pub topic_id: Uuid,
}

/// The result for one topic of a DeleteTopics request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteOutcome {
    /// The topic as named in the request.
    pub topic: TopicReference,
    /// The result.
    pub result: Result<DeletedTopic, ControllerError>,
}

/// One topic's partition increase.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionsIncrease {
    /// The topic.
    pub topic: String,
    /// The new total partition count.
    pub count: i32,
    /// Replicas for each new partition, if the client chose them.
    pub assignments: Option<Vec<Vec<BrokerId>>>,
}

/// A CreatePartitions request.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CreatePartitionsRequest {
    /// Topics to grow.
    pub topics: Vec<PartitionsIncrease>,
    /// Validate only; write nothing.
    pub validate_only: bool,
}

type Planned<T> = Result<(T, Vec<MetadataRecord>), ControllerError>;

impl Controller {
    /// Creates topics. Each topic succeeds or fails on its own.
    pub fn create_topics(
        &mut self,
        image: &MetadataImage,
        request: &CreateTopicsRequest,
    ) -> Result<ControllerResult<Vec<TopicOutcome<CreatedTopic>>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(request.topics.len());
        for topic in &request.topics {
            let duplicates = request
                .topics
                .iter()
                .filter(|other| other.name == topic.name)
                .count();
            let planned = if duplicates > 1 {
                Err(ControllerError::DuplicateTopic {
                    name: topic.name.clone(),
                })
            } else {
                self.plan_topic(&pending.image, topic)
            };
            let result = match planned {
                Ok((created, records)) => {
                    pending.push(records)?;
                    Ok(created)
                }
                Err(error) => Err(error),
            };
            outcomes.push(TopicOutcome {
                name: topic.name.clone(),
                result,
            });
        }
        Ok(pending.finish(outcomes, request.validate_only))
    }

    fn plan_topic(&mut self, image: &MetadataImage, topic: &NewTopic) -> Planned<CreatedTopic> {
        check_new_topic_name(image, &topic.name)?;
        let configs = checked_topic_configs(&topic.configs)?;
        let assignment = self.new_topic_assignment(image, topic)?;
        let topic_id = self.fresh_topic_id(image);
        let mut records = vec![MetadataRecord::new(Record::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: uuid_to_bytes(topic_id),
        }))];
        records.extend(configs.iter().map(|(key, value)| {
            MetadataRecord::new(Record::Config(ConfigRecord {
                resource_type: crate::records::ConfigResourceType::Topic as i32,
                resource_name: topic.name.clone(),
                name: key.clone(),
                value: Some(value.clone()),
            }))
        }));
        records.extend(new_partition_records(image, topic_id, 0, &assignment)?);
        let created = CreatedTopic {
            topic_id,
            partitions: i32::try_from(assignment.len()).unwrap_or(i32::MAX),
            replication_factor: assignment.first().map_or(0, |replicas| {
                i16::try_from(replicas.len()).unwrap_or(i16::MAX)
            }),
            configs,
        };
        Ok((created, records))
    }

    fn new_topic_assignment(
        &mut self,
        image: &MetadataImage,
        topic: &NewTopic,
    ) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
        if !topic.assignments.is_empty() {
            if topic.partitions.is_some() || topic.replication_factor.is_some() {
                return Err(ControllerError::AssignmentWithCounts {
                    topic: topic.name.clone(),
                });
            }
            self.check_partition_count(&topic.name, topic.assignments.len(), 0)?;
            validate_requested_assignment(
                &topic.assignments,
                0,
                |broker_id| image.broker(broker_id).is_some(),
                None,
            )
            .map_err(|problem| ControllerError::InvalidReplicaAssignment { problem })?;
            return Ok(topic
                .assignments
                .iter()
                .map(|partition| partition.broker_ids.clone())
                .collect());
        }
        let partitions = topic.partitions.unwrap_or(self.config.default_partitions);
        let count = usize::try_from(partitions).unwrap_or(0);
        if partitions <= 0 {
            return Err(ControllerError::InvalidPartitions {
                topic: topic.name.clone(),
                requested: partitions,
                current: 0,
            });
        }
        self.check_partition_count(&topic.name, count, 0)?;
        let factor = topic
            .replication_factor
            .unwrap_or(self.config.default_replication_factor);
        self.assign(image, partitions, i32::from(factor), 0)
    }

    fn check_partition_count(
        &self,
        topic: &str,
        count: usize,
        current: usize,
    ) -> Result<(), ControllerError> {
        let max = usize::try_from(self.config.max_partitions_per_topic).unwrap_or(0);
        if count > max {
            return Err(ControllerError::InvalidPartitions {
                topic: topic.to_owned(),
                requested: i32::try_from(count).unwrap_or(i32::MAX),
                current,
            });
        }
        Ok(())
    }

    /// Assigns replicas over the unfenced brokers.
    fn assign(
        &mut self,
        image: &MetadataImage,
        partitions: i32,
        replication_factor: i32,
        first_partition_index: i32,
    ) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
        let brokers = image.unfenced_broker_ids();
        let racks: Vec<(BrokerId, String)> = brokers
            .iter()
            .filter_map(|id| {
                let rack = image.broker(*id)?.rack.clone()?;
                Some((*id, rack))
            })
            .collect();
        let assigned = if !racks.is_empty() && racks.len() == brokers.len() {
            assign_replicas_rack_aware(
                &racks,
                partitions,
                replication_factor,
                first_partition_index,
                &*self.random,
            )
        } else {
            if !racks.is_empty() {
                tracing::warn!(
                    brokers_with_rack = racks.len(),
                    brokers = brokers.len(),
                    "not every live broker has broker.rack; assigning replicas without racks"
                );
            }
            assign_replicas(
                &brokers,
                partitions,
                replication_factor,
                first_partition_index,
                &*self.random,
            )
        };
        assigned.map_err(|problem| match problem {
            AssignmentError::NonPositiveReplicationFactor { .. }
            | AssignmentError::ReplicationFactorTooLarge { .. } => {
                ControllerError::InvalidReplicationFactor {
                    requested: replication_factor,
                    available_brokers: brokers.len(),
                }
            }
            problem => ControllerError::InvalidReplicaAssignment { problem },
        })
    }

    fn fresh_topic_id(&mut self, image: &MetadataImage) -> Uuid {
        loop {
            let id = uuid::Builder::from_random_bytes(self.random.bytes_16()).into_uuid();
            // Kafka reserves the all-zero id (and the id whose first
            // 64 bits are zero and last is one, the metadata topic's).
            if image.topic_by_id(id).is_none() && id != Uuid::nil() && id.as_u128() != 1 {
                return id;
            }
        }
    }

    /// Deletes topics by name or id.
    pub fn delete_topics(
        &mut self,
        image: &MetadataImage,
        topics: &[TopicReference],
    ) -> Result<ControllerResult<Vec<DeleteOutcome>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(topics.len());
        for reference in topics {
            let found =
                match reference {
                    TopicReference::Name(name) => pending
                        .image
                        .topic_by_name(name)
                        .ok_or_else(|| ControllerError::UnknownTopic { name: name.clone() }),
                    TopicReference::Id(topic_id) => pending.image.topic_by_id(*topic_id).ok_or(
                        ControllerError::UnknownTopicId {
                            topic_id: *topic_id,
                        },
                    ),
                }
                .map(|topic| DeletedTopic {
                    name: topic.name.clone(),
                    topic_id: topic.id,
                });
            if let Ok(deleted) = &found {
                if let Some(topic) = pending.image.topic_by_id(deleted.topic_id) {
                    let replicas: Vec<(BrokerId, ReplicaState)> = topic
                        .partitions
                        .iter()
                        .flat_map(|partition| {
                            partition.replicas.iter().map(|replica| {
                                (*replica, pending.image.replica_state(partition, *replica))
                            })
                        })
                        .collect();
                    replica_state::check(replicas, &replica_state::DELETION_PATH)
                        .map_err(|source| ApplyError::IllegalReplicaTransition { source })?;
                }
                pending.push(vec![MetadataRecord::new(Record::RemoveTopic(
                    RemoveTopicRecord {
                        topic_id: uuid_to_bytes(deleted.topic_id),
                    },
                ))])?;
            }
            outcomes.push(DeleteOutcome {
                topic: reference.clone(),
                result: found,
            });
        }
        Ok(pending.finish(outcomes, false))
    }

    /// Adds partitions to existing topics.
    pub fn create_partitions(
        &mut self,
        image: &MetadataImage,
        request: &CreatePartitionsRequest,
    ) -> Result<ControllerResult<Vec<TopicOutcome<()>>>, ApplyError> {
        let mut pending = Pending::new(image);
        let mut outcomes = Vec::with_capacity(request.topics.len());
        let repeated = repeated_names(
            request
                .topics
                .iter()
                .map(|increase| increase.topic.as_str()),
        );
        for increase in &request.topics {
            let planned = if repeated.contains(increase.topic.as_str()) {
                Err(ControllerError::DuplicateTopic {
                    name: increase.topic.clone(),
                })
            } else {
                self.plan_partitions(&pending.image, increase)
            };
            let result = match planned {
                Ok(((), records)) => pending.push(records).map(|()| Ok(()))?,
                Err(error) => Err(error),
            };
            outcomes.push(TopicOutcome {
                name: increase.topic.clone(),
                result,
            });
        }
        Ok(pending.finish(outcomes, request.validate_only))
    }

    fn plan_partitions(
        &mut self,
        image: &MetadataImage,
        increase: &PartitionsIncrease,
    ) -> Planned<()> {
        let topic =
            image
                .topic_by_name(&increase.topic)
                .ok_or_else(|| ControllerError::UnknownTopic {
                    name: increase.topic.clone(),
                })?;
        let current = topic.partitions.len();
        let requested = usize::try_from(increase.count).unwrap_or(0);
        if requested <= current {
            return Err(ControllerError::InvalidPartitions {
                topic: increase.topic.clone(),
                requested: increase.count,
                current,
            });
        }
        self.check_partition_count(&increase.topic, requested, current)?;
        let factor = topic
            .partitions
            .first()
            .map_or(1, |partition| partition.replicas.len());
        let first_index = i32::try_from(current).unwrap_or(i32::MAX);
        let assignment = match &increase.assignments {
            Some(assignments) => checked_added_assignment(
                image,
                assignments,
                requested - current,
                first_index,
                factor,
            )?,
            None => self.assign(
                image,
                increase.count - first_index,
                i32::try_from(factor).unwrap_or(i32::MAX),
                first_index,
            )?,
        };
        let records = new_partition_records(image, topic.id, current, &assignment)?;
        Ok(((), records))
    }
}

/// The names that appear more than once.
fn repeated_names<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut repeated = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            repeated.insert(name);
        }
    }
    repeated
}

fn checked_added_assignment(
    image: &MetadataImage,
    assignments: &[Vec<BrokerId>],
    expected: usize,
    first_index: i32,
    factor: usize,
) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
    let invalid = |problem| ControllerError::InvalidReplicaAssignment { problem };
    if assignments.len() != expected {
        return Err(invalid(AssignmentError::WrongPartitionCount {
            expected,
            actual: assignments.len(),
        }));
    }
    let requested: Vec<RequestedAssignment> = assignments
        .iter()
        .zip(first_index..)
        .map(|(broker_ids, partition_index)| RequestedAssignment {
            partition_index,
            broker_ids: broker_ids.clone(),
        })
        .collect();
    validate_requested_assignment(
        &requested,
        first_index,
        |id| image.broker(id).is_some(),
        Some(factor),
    )
    .map_err(invalid)?;
    Ok(assignments.to_vec())
}

fn check_new_topic_name(image: &MetadataImage, name: &str) -> Result<(), ControllerError> {
    let invalid = |problem| ControllerError::InvalidTopicName {
        name: name.to_owned(),
        problem,
    };
    validate_topic_name(name).map_err(invalid)?;
    if image.topic_by_name(name).is_some() {
        return Err(ControllerError::TopicAlreadyExists {
            name: name.to_owned(),
        });
    }
    let key = collision_key(name);
    if let Some(existing) = image
        .topics()
        .find(|topic| collision_key(&topic.name) == key)
    {
        return Err(invalid(TopicNameProblem::CollidesWith {
            existing: existing.name.clone(),
        }));
    }
    Ok(())
}

/// Validates CreateTopics configs: no nulls, no duplicates, known keys,
/// valid values.
fn checked_topic_configs(
    entries: &[ConfigEntry],
) -> Result<BTreeMap<String, String>, ControllerError> {
    let mut configs = BTreeMap::new();
    for entry in entries {
        let invalid = |reason| ControllerError::InvalidConfig {
            key: entry.key.clone(),
            value: entry.value.clone(),
            reason,
        };
        let value = entry
            .value
            .as_ref()
            .ok_or_else(|| invalid(ConfigProblem::MissingValue))?;
        let normalized = validate_topic_config(&entry.key, value).map_err(invalid)?;
        if configs.insert(entry.key.clone(), normalized).is_some() {
            return Err(invalid(ConfigProblem::DuplicateKey));
        }
    }
    Ok(configs)
}

/// Partition records for new partitions: the ISR is the unfenced replicas
/// and the leader is elected by the offline partition policy, taking each
/// partition from NonExistent through New to Online.
fn new_partition_records(
    image: &MetadataImage,
    topic_id: Uuid,
    first_index: usize,
    assignment: &[Vec<BrokerId>],
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let mut records = Vec::with_capacity(assignment.len());
    for (offset, replicas) in assignment.iter().enumerate() {
        let index = first_index + offset;
        let partition_index = i32::try_from(index).unwrap_or(i32::MAX);
        let isr: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|id| is_live(image, *id))
            .collect();
        let election = offline_partition_leader(replicas, &isr, |id| is_live(image, id), false)
            .ok_or(ControllerError::InvalidReplicaAssignment {
                problem: AssignmentError::AllReplicasFenced { partition_index },
            })?;
        let state = PartitionState::NonExistent.transition(PartitionState::New);
        debug_assert!(state
            .and_then(|new| new.transition(PartitionState::Online))
            .is_ok());
        for replica in replicas {
            let started = if is_live(image, *replica) {
                ReplicaState::Online
            } else {
                ReplicaState::Offline
            };
            // NonExistent -> New -> Online (or Offline on a fenced
            // broker): legal by the table, checked in test builds.
            debug_assert!(replica_state::check(
                [(*replica, ReplicaState::NonExistent)],
                &[ReplicaState::New, started],
            )
            .is_ok());
        }
        records.push(MetadataRecord::new(Record::Partition(PartitionRecord {
            topic_id: uuid_to_bytes(topic_id),
            partition_index,
            replicas: replicas.clone(),
            isr: election.isr,
            leader: leader_to_record(Some(election.leader)),
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionRecord::default()
        })));
    }
    Ok(records)
}
