//! The metadata image: an immutable view of cluster metadata at one log
//! offset.
//!
//! A [`MetadataImage`] is built by applying [`MetadataRecord`]s to the
//! previous image. Images are values: applying a record returns a new image
//! and leaves the old one untouched, so a broker can hold an
//! `Arc<MetadataImage>` while the controller moves on.
//!
//! # Copy cost
//!
//! The image is four copy-on-write maps behind `Arc`s (brokers, topics by
//! id, topic ids by name, configs), and each topic and broker entry is
//! itself an `Arc`. Cloning an image is four reference-count increments.
//! Applying a record clones only the map it touches (pointer copies, one
//! per entry of that map) and the one entry it changes (for a partition
//! change: that topic's partition vector). [`MetadataImage::apply_all`]
//! applies a batch to one working copy, so a batch pays that copy once per
//! touched map, not once per record: `Arc::make_mut` copies only while the
//! map is still shared with the previous image.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::error::{ApplyError, PartitionProblem};
use crate::records::{
    uuid_from_bytes, uuid_to_bytes, BrokerEndpoint, ConfigRecord, ConfigResourceType,
    MetadataRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, Record,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnregisterBrokerRecord, NO_LEADER,
};
use crate::replica_state::ReplicaState;

/// A broker id (Kafka's `node.id`).
pub type BrokerId = i32;

/// An advertised listener of a registered broker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoint {
    /// Listener name.
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// Security protocol name.
    pub security_protocol: String,
}

/// A registered broker as the image knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerImage {
    /// The broker id.
    pub broker_id: BrokerId,
    /// The id of the process run that registered.
    pub incarnation_id: Uuid,
    /// The epoch of this registration.
    pub epoch: i64,
    /// Advertised listeners.
    pub endpoints: Vec<Endpoint>,
    /// The broker's rack.
    pub rack: Option<String>,
    /// Whether the broker is fenced (may not lead or be in an ISR).
    pub fenced: bool,
}

/// One partition's replica assignment and leadership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionImage {
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// The leader, if any.
    pub leader: Option<BrokerId>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch.
    pub partition_epoch: i32,
    /// Replicas an ongoing reassignment adds (within `replicas`; empty when
    /// no reassignment is ongoing).
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas an ongoing reassignment removes (within `replicas`).
    pub removing_replicas: Vec<BrokerId>,
}

impl PartitionImage {
    /// Whether a reassignment is ongoing.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition will have once its reassignment
    /// completes: `replicas` without the ones being removed, in order.
    pub fn target_replicas(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|id| !self.removing_replicas.contains(id))
            .collect()
    }
}

/// A topic and its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub id: Uuid,
    /// Partitions, indexed by partition index.
    pub partitions: Vec<PartitionImage>,
}

impl TopicImage {
    /// The partition with this index, if it exists.
    pub fn partition(&self, partition_index: i32) -> Option<&PartitionImage> {
        usize::try_from(partition_index)
            .ok()
            .and_then(|index| self.partitions.get(index))
    }
}

/// The resource a configuration belongs to.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ConfigResource {
    /// A topic, by name.
    Topic(String),
    /// A broker by id, or `None` for the cluster-wide default.
    Broker(Option<BrokerId>),
}

impl ConfigResource {
    /// The record encoding: resource type and name.
    pub fn to_record_parts(&self) -> (ConfigResourceType, String) {
        match self {
            Self::Topic(name) => (ConfigResourceType::Topic, name.clone()),
            Self::Broker(None) => (ConfigResourceType::Broker, String::new()),
            Self::Broker(Some(id)) => (ConfigResourceType::Broker, id.to_string()),
        }
    }

    fn from_record(record: &ConfigRecord) -> Result<Self, ApplyError> {
        match ConfigResourceType::try_from(record.resource_type) {
            Ok(ConfigResourceType::Topic) => Ok(Self::Topic(record.resource_name.clone())),
            Ok(ConfigResourceType::Broker) if record.resource_name.is_empty() => {
                Ok(Self::Broker(None))
            }
            Ok(ConfigResourceType::Broker) => record
                .resource_name
                .parse::<BrokerId>()
                .map(|id| Self::Broker(Some(id)))
                .map_err(|_| ApplyError::InvalidBrokerResourceName {
                    name: record.resource_name.clone(),
                }),
            Ok(ConfigResourceType::Unknown) | Err(_) => {
                Err(ApplyError::InvalidConfigResourceType {
                    resource_type: record.resource_type,
                })
            }
        }
    }
}

type ConfigMap = BTreeMap<String, String>;

/// Cluster metadata at one log offset. Cheap to clone; see the module docs
/// for the copy cost of applying records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    last_offset: Option<u64>,
    brokers: Arc<BTreeMap<BrokerId, Arc<BrokerImage>>>,
    topics_by_id: Arc<BTreeMap<Uuid, Arc<TopicImage>>>,
    topic_ids_by_name: Arc<BTreeMap<String, Uuid>>,
    configs: Arc<BTreeMap<ConfigResource, Arc<ConfigMap>>>,
    /// The first producer id no broker has been handed yet.
    next_producer_id: i64,
    /// SCRAM credentials and ACLs.
    security: crate::security_image::SecurityImage,
    /// Client quotas.
    client_quotas: crate::quota_image::ClientQuotaImage,
}

impl MetadataImage {
    /// The state of `broker_id`'s replica of `partition`, derived from the
    /// image as KRaft does: no replica there is `NonExistent`; a replica on
    /// a registered, unfenced broker is `Online`; any other is `Offline`.
    pub fn replica_state(&self, partition: &PartitionImage, broker_id: BrokerId) -> ReplicaState {
        if !partition.replicas.contains(&broker_id) {
            return ReplicaState::NonExistent;
        }
        match self.broker(broker_id) {
            Some(broker) if !broker.fenced => ReplicaState::Online,
            _ => ReplicaState::Offline,
        }
    }

    /// The empty image, before any record.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The offset of the last record applied, `None` for the empty image.
    pub fn last_offset(&self) -> Option<u64> {
        self.last_offset
    }

    /// The offset the next record must have (at least).
    pub fn next_offset(&self) -> u64 {
        self.last_offset
            .map_or(0, |offset| offset.saturating_add(1))
    }

    /// A registered broker.
    pub fn broker(&self, broker_id: BrokerId) -> Option<&BrokerImage> {
        self.brokers.get(&broker_id).map(Arc::as_ref)
    }

    /// All registered brokers, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values().map(Arc::as_ref)
    }

    /// Ids of registered brokers that are not fenced, ascending.
    pub fn unfenced_broker_ids(&self) -> Vec<BrokerId> {
        self.brokers()
            .filter(|broker| !broker.fenced)
            .map(|broker| broker.broker_id)
            .collect()
    }

    /// A topic by name.
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        let id = self.topic_ids_by_name.get(name)?;
        self.topic_by_id(*id)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, topic_id: Uuid) -> Option<&TopicImage> {
        self.topics_by_id.get(&topic_id).map(Arc::as_ref)
    }

    /// All topics, ordered by name.
    pub fn topics(&self) -> impl Iterator<Item = &TopicImage> {
        self.topic_ids_by_name
            .values()
            .filter_map(|id| self.topics_by_id.get(id).map(Arc::as_ref))
    }

    /// The number of topics.
    pub fn topic_count(&self) -> usize {
        self.topics_by_id.len()
    }

    /// The explicitly set configuration of a resource (empty if none).
    pub fn configs(&self, resource: &ConfigResource) -> &BTreeMap<String, String> {
        static EMPTY: ConfigMap = BTreeMap::new();
        self.configs.get(resource).map_or(&EMPTY, Arc::as_ref)
    }

    /// The first producer id not yet handed to any broker.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// One explicitly set configuration value.
    pub fn config(&self, resource: &ConfigResource, key: &str) -> Option<&str> {
        self.configs(resource).get(key).map(String::as_str)
    }

    /// Applies one record at `offset`, returning the new image.
    pub fn apply(&self, offset: u64, record: &MetadataRecord) -> Result<Self, ApplyError> {
        self.apply_all([(offset, record)])
    }

    /// Applies records in order, returning the new image, or the first
    /// error (in which case `self` is unchanged and nothing is applied).
    pub fn apply_all<'a>(
        &self,
        records: impl IntoIterator<Item = (u64, &'a MetadataRecord)>,
    ) -> Result<Self, ApplyError> {
        self.clone().into_applied(records)
    }

    /// Like [`apply_all`](Self::apply_all), but consumes the image, so maps
    /// this image alone holds are changed in place instead of copied. On
    /// error the consumed image is dropped.
    pub fn into_applied<'a>(
        self,
        records: impl IntoIterator<Item = (u64, &'a MetadataRecord)>,
    ) -> Result<Self, ApplyError> {
        let mut next = self;
        for (offset, record) in records {
            if let Some(last_offset) = next.last_offset {
                if offset <= last_offset {
                    return Err(ApplyError::NonIncreasingOffset {
                        offset,
                        last_offset,
                    });
                }
            }
            next.apply_in_place(record)?;
            next.last_offset = Some(offset);
        }
        Ok(next)
    }

    /// Rebuilds an image from snapshot records, at `last_offset`.
    pub fn from_snapshot_records<'a>(
        last_offset: u64,
        records: impl IntoIterator<Item = &'a MetadataRecord>,
    ) -> Result<Self, ApplyError> {
        let mut image = Self::empty();
        for record in records {
            image.apply_in_place(record)?;
        }
        image.last_offset = Some(last_offset);
        Ok(image)
    }

    /// The records that rebuild this image from an empty one: brokers,
    /// then each topic with its configs and partitions, then broker configs.
    pub fn to_snapshot_records(&self) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        for broker in self.brokers() {
            records.push(MetadataRecord::new(Record::RegisterBroker(
                register_record(broker),
            )));
        }
        for topic in self.topics() {
            records.push(MetadataRecord::new(Record::Topic(TopicRecord {
                name: topic.name.clone(),
                topic_id: uuid_to_bytes(topic.id),
            })));
            let resource = ConfigResource::Topic(topic.name.clone());
            records.extend(config_records(&resource, self.configs(&resource)));
            for (index, partition) in topic.partitions.iter().enumerate() {
                records.push(MetadataRecord::new(Record::Partition(partition_record(
                    topic.id, index, partition,
                ))));
            }
        }
        for (resource, configs) in self.configs.iter() {
            if matches!(resource, ConfigResource::Broker(_)) {
                records.extend(config_records(resource, configs));
            }
        }
        if self.next_producer_id > 0 {
            records.push(MetadataRecord::new(Record::ProducerIds(
                ProducerIdsRecord {
                    broker_id: -1,
                    broker_epoch: -1,
                    next_producer_id: self.next_producer_id,
                },
            )));
        }
        records.extend(self.security.snapshot_records());
        records.extend(self.client_quotas.snapshot_records());
        records
    }

    /// Client quotas.
    pub fn client_quotas(&self) -> &crate::quota_image::ClientQuotaImage {
        &self.client_quotas
    }

    /// SCRAM credentials and ACLs.
    pub fn security(&self) -> &crate::security_image::SecurityImage {
        &self.security
    }

    fn take_producer_ids(&mut self, record: &ProducerIdsRecord) -> Result<(), ApplyError> {
        if record.next_producer_id <= self.next_producer_id {
            return Err(ApplyError::ProducerIdNotIncreasing {
                current: self.next_producer_id,
                record: record.next_producer_id,
            });
        }
        self.next_producer_id = record.next_producer_id;
        Ok(())
    }

    fn apply_in_place(&mut self, record: &MetadataRecord) -> Result<(), ApplyError> {
        match &record.record {
            None => Err(ApplyError::UnknownRecordKind),
            Some(Record::RegisterBroker(record)) => self.register_broker(record),
            Some(Record::UnregisterBroker(record)) => self.unregister_broker(record),
            Some(Record::FenceBroker(record)) => {
                self.set_fenced(record.broker_id, record.broker_epoch, true)
            }
            Some(Record::UnfenceBroker(record)) => {
                self.set_fenced(record.broker_id, record.broker_epoch, false)
            }
            Some(Record::Topic(record)) => self.add_topic(record),
            Some(Record::Partition(record)) => self.add_partition(record),
            Some(Record::PartitionChange(record)) => self.change_partition(record),
            Some(Record::Config(record)) => self.set_config(record),
            Some(Record::RemoveTopic(record)) => self.remove_topic(record),
            Some(Record::ProducerIds(record)) => self.take_producer_ids(record),
            Some(Record::UserScramCredential(record)) => self.security.set_scram(record),
            Some(Record::RemoveUserScramCredential(record)) => self.security.remove_scram(record),
            Some(Record::AccessControlEntry(record)) => self.security.add_acl(record),
            Some(Record::RemoveAccessControlEntry(record)) => self.security.remove_acl(record),
            Some(Record::ClientQuota(record)) => self.client_quotas.apply(record),
        }
    }

    fn register_broker(&mut self, record: &RegisterBrokerRecord) -> Result<(), ApplyError> {
        let broker_id = record.broker_id;
        if let Some(current) = self.brokers.get(&broker_id) {
            if record.broker_epoch <= current.epoch {
                return Err(ApplyError::BrokerEpochNotIncreasing {
                    broker_id,
                    current_epoch: current.epoch,
                    record_epoch: record.broker_epoch,
                });
            }
        }
        let endpoints = record
            .endpoints
            .iter()
            .map(|endpoint| endpoint_from_record(broker_id, endpoint))
            .collect::<Result<Vec<_>, _>>()?;
        let broker = BrokerImage {
            broker_id,
            incarnation_id: uuid_from_bytes("incarnation_id", &record.incarnation_id)?,
            epoch: record.broker_epoch,
            endpoints,
            rack: record.rack.clone(),
            fenced: record.fenced,
        };
        Arc::make_mut(&mut self.brokers).insert(broker_id, Arc::new(broker));
        Ok(())
    }

    fn checked_broker(&self, broker_id: BrokerId, epoch: i64) -> Result<(), ApplyError> {
        let broker = self
            .brokers
            .get(&broker_id)
            .ok_or(ApplyError::UnknownBroker { broker_id })?;
        if broker.epoch != epoch {
            return Err(ApplyError::BrokerEpochMismatch {
                broker_id,
                current_epoch: broker.epoch,
                record_epoch: epoch,
            });
        }
        Ok(())
    }

    fn unregister_broker(&mut self, record: &UnregisterBrokerRecord) -> Result<(), ApplyError> {
        self.checked_broker(record.broker_id, record.broker_epoch)?;
        Arc::make_mut(&mut self.brokers).remove(&record.broker_id);
        Ok(())
    }

    fn set_fenced(
        &mut self,
        broker_id: BrokerId,
        epoch: i64,
        fenced: bool,
    ) -> Result<(), ApplyError> {
        self.checked_broker(broker_id, epoch)?;
        if let Some(broker) = Arc::make_mut(&mut self.brokers).get_mut(&broker_id) {
            Arc::make_mut(broker).fenced = fenced;
        }
        Ok(())
    }

    fn add_topic(&mut self, record: &TopicRecord) -> Result<(), ApplyError> {
        let topic_id = uuid_from_bytes("topic_id", &record.topic_id)?;
        if self.topics_by_id.contains_key(&topic_id) {
            return Err(ApplyError::TopicIdExists { topic_id });
        }
        if self.topic_ids_by_name.contains_key(&record.name) {
            return Err(ApplyError::TopicNameExists {
                name: record.name.clone(),
            });
        }
        let topic = TopicImage {
            name: record.name.clone(),
            id: topic_id,
            partitions: Vec::new(),
        };
        Arc::make_mut(&mut self.topics_by_id).insert(topic_id, Arc::new(topic));
        Arc::make_mut(&mut self.topic_ids_by_name).insert(record.name.clone(), topic_id);
        Ok(())
    }

    fn topic_mut(&mut self, topic_id: Uuid) -> Result<&mut TopicImage, ApplyError> {
        Arc::make_mut(&mut self.topics_by_id)
            .get_mut(&topic_id)
            .map(Arc::make_mut)
            .ok_or(ApplyError::UnknownTopicId { topic_id })
    }

    fn add_partition(&mut self, record: &PartitionRecord) -> Result<(), ApplyError> {
        let topic_id = uuid_from_bytes("topic_id", &record.topic_id)?;
        let partition_index = record.partition_index;
        let partition = PartitionImage {
            replicas: record.replicas.clone(),
            isr: record.isr.clone(),
            leader: leader_from_record(record.leader),
            leader_epoch: record.leader_epoch,
            partition_epoch: record.partition_epoch,
            adding_replicas: record.adding_replicas.clone(),
            removing_replicas: record.removing_replicas.clone(),
        };
        validate_partition(&partition, record.leader).map_err(|problem| {
            ApplyError::InvalidPartition {
                topic_id,
                partition_index,
                problem,
            }
        })?;
        let topic = self.topic_mut(topic_id)?;
        let expected_index = topic.partitions.len();
        if usize::try_from(partition_index).ok() != Some(expected_index) {
            return Err(ApplyError::PartitionOutOfOrder {
                topic_id,
                partition_index,
                expected_index,
            });
        }
        topic.partitions.push(partition);
        Ok(())
    }

    fn change_partition(&mut self, record: &PartitionChangeRecord) -> Result<(), ApplyError> {
        let topic_id = uuid_from_bytes("topic_id", &record.topic_id)?;
        let partition_index = record.partition_index;
        let current = self
            .topic_by_id(topic_id)
            .ok_or(ApplyError::UnknownTopicId { topic_id })?
            .partition(partition_index)
            .ok_or(ApplyError::UnknownPartition {
                topic_id,
                partition_index,
            })?;
        let changed =
            changed_partition(current, record).map_err(|problem| ApplyError::InvalidPartition {
                topic_id,
                partition_index,
                problem,
            })?;
        let topic = self.topic_mut(topic_id)?;
        if let Some(slot) = usize::try_from(partition_index)
            .ok()
            .and_then(|index| topic.partitions.get_mut(index))
        {
            *slot = changed;
        }
        Ok(())
    }

    fn set_config(&mut self, record: &ConfigRecord) -> Result<(), ApplyError> {
        let resource = ConfigResource::from_record(record)?;
        if let ConfigResource::Topic(name) = &resource {
            if !self.topic_ids_by_name.contains_key(name) {
                return Err(ApplyError::UnknownTopicName { name: name.clone() });
            }
        }
        let configs = Arc::make_mut(&mut self.configs);
        let entry = configs.entry(resource.clone()).or_default();
        match &record.value {
            Some(value) => {
                Arc::make_mut(entry).insert(record.name.clone(), value.clone());
            }
            None => {
                Arc::make_mut(entry).remove(&record.name);
            }
        }
        if entry.is_empty() {
            configs.remove(&resource);
        }
        Ok(())
    }

    fn remove_topic(&mut self, record: &RemoveTopicRecord) -> Result<(), ApplyError> {
        let topic_id = uuid_from_bytes("topic_id", &record.topic_id)?;
        let topic = Arc::make_mut(&mut self.topics_by_id)
            .remove(&topic_id)
            .ok_or(ApplyError::UnknownTopicId { topic_id })?;
        Arc::make_mut(&mut self.topic_ids_by_name).remove(&topic.name);
        let resource = ConfigResource::Topic(topic.name.clone());
        if self.configs.contains_key(&resource) {
            Arc::make_mut(&mut self.configs).remove(&resource);
        }
        Ok(())
    }
}

fn endpoint_from_record(
    broker_id: BrokerId,
    endpoint: &BrokerEndpoint,
) -> Result<Endpoint, ApplyError> {
    let port = u16::try_from(endpoint.port).map_err(|_| ApplyError::InvalidPort {
        broker_id,
        port: endpoint.port,
    })?;
    Ok(Endpoint {
        name: endpoint.name.clone(),
        host: endpoint.host.clone(),
        port,
        security_protocol: endpoint.security_protocol.clone(),
    })
}

/// Converts a record's leader field to an optional broker id.
pub fn leader_from_record(leader: i32) -> Option<BrokerId> {
    (leader != NO_LEADER).then_some(leader)
}

/// Converts an optional leader to a record's leader field.
pub fn leader_to_record(leader: Option<BrokerId>) -> i32 {
    leader.unwrap_or(NO_LEADER)
}

fn changed_partition(
    current: &PartitionImage,
    record: &PartitionChangeRecord,
) -> Result<PartitionImage, PartitionProblem> {
    let mut next = current.clone();
    if let Some(replicas) = &record.replicas {
        next.replicas = replicas.broker_ids.clone();
    }
    if let Some(isr) = &record.isr {
        next.isr = isr.broker_ids.clone();
    }
    if let Some(adding) = &record.adding_replicas {
        next.adding_replicas = adding.broker_ids.clone();
    }
    if let Some(removing) = &record.removing_replicas {
        next.removing_replicas = removing.broker_ids.clone();
    }
    let mut raw_leader = leader_to_record(current.leader);
    if let Some(leader) = record.leader {
        raw_leader = leader;
        next.leader = leader_from_record(leader);
        if next.leader != current.leader {
            next.leader_epoch = next
                .leader_epoch
                .checked_add(1)
                .ok_or(PartitionProblem::NegativeEpoch)?;
        }
    }
    next.partition_epoch = next
        .partition_epoch
        .checked_add(1)
        .ok_or(PartitionProblem::NegativeEpoch)?;
    validate_partition(&next, raw_leader)?;
    Ok(next)
}

/// Checks a partition's invariants: replicas non-empty and distinct, ISR
/// distinct and within the replicas, replicas being added or removed by a
/// reassignment within the replicas and never both, leader (if any) in the
/// ISR, epochs non-negative. `raw_leader` is the record's leader field, so a leader of
/// -2 is reported rather than silently read as a broker.
fn validate_partition(partition: &PartitionImage, raw_leader: i32) -> Result<(), PartitionProblem> {
    if partition.replicas.is_empty() {
        return Err(PartitionProblem::NoReplicas);
    }
    if let Some(broker_id) = first_duplicate(&partition.replicas) {
        return Err(PartitionProblem::DuplicateReplica { broker_id });
    }
    if let Some(broker_id) = first_duplicate(&partition.isr) {
        return Err(PartitionProblem::DuplicateIsrMember { broker_id });
    }
    if let Some(broker_id) = partition
        .isr
        .iter()
        .find(|member| !partition.replicas.contains(member))
    {
        return Err(PartitionProblem::IsrMemberNotReplica {
            broker_id: *broker_id,
        });
    }
    let reassigned = partition.adding_replicas.iter();
    if let Some(broker_id) = reassigned
        .chain(&partition.removing_replicas)
        .find(|member| !partition.replicas.contains(member))
    {
        return Err(PartitionProblem::ReassignedNotReplica {
            broker_id: *broker_id,
        });
    }
    if let Some(broker_id) = partition
        .adding_replicas
        .iter()
        .find(|member| partition.removing_replicas.contains(member))
    {
        return Err(PartitionProblem::AddedAndRemoved {
            broker_id: *broker_id,
        });
    }
    if raw_leader != NO_LEADER && !partition.isr.contains(&raw_leader) {
        return Err(PartitionProblem::LeaderNotInIsr { leader: raw_leader });
    }
    if partition.leader_epoch < 0 || partition.partition_epoch < 0 {
        return Err(PartitionProblem::NegativeEpoch);
    }
    Ok(())
}

fn first_duplicate(ids: &[BrokerId]) -> Option<BrokerId> {
    ids.iter()
        .enumerate()
        .find(|(index, id)| ids.get(..*index).is_some_and(|before| before.contains(id)))
        .map(|(_, id)| *id)
}

fn register_record(broker: &BrokerImage) -> RegisterBrokerRecord {
    RegisterBrokerRecord {
        broker_id: broker.broker_id,
        incarnation_id: uuid_to_bytes(broker.incarnation_id),
        broker_epoch: broker.epoch,
        endpoints: broker
            .endpoints
            .iter()
            .map(|endpoint| BrokerEndpoint {
                name: endpoint.name.clone(),
                host: endpoint.host.clone(),
                port: u32::from(endpoint.port),
                security_protocol: endpoint.security_protocol.clone(),
            })
            .collect(),
        rack: broker.rack.clone(),
        fenced: broker.fenced,
    }
}

/// The record that creates `partition` as it is now.
pub fn partition_record(
    topic_id: Uuid,
    index: usize,
    partition: &PartitionImage,
) -> PartitionRecord {
    PartitionRecord {
        topic_id: uuid_to_bytes(topic_id),
        partition_index: i32::try_from(index).unwrap_or(i32::MAX),
        replicas: partition.replicas.clone(),
        isr: partition.isr.clone(),
        leader: leader_to_record(partition.leader),
        leader_epoch: partition.leader_epoch,
        partition_epoch: partition.partition_epoch,
        adding_replicas: partition.adding_replicas.clone(),
        removing_replicas: partition.removing_replicas.clone(),
    }
}

fn config_records<'a>(
    resource: &'a ConfigResource,
    configs: &'a ConfigMap,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    let (resource_type, resource_name) = resource.to_record_parts();
    configs.iter().map(move |(name, value)| {
        MetadataRecord::new(Record::Config(ConfigRecord {
            resource_type: resource_type as i32,
            resource_name: resource_name.clone(),
            name: name.clone(),
            value: Some(value.clone()),
        }))
    })
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
