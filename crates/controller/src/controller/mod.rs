//! The sans-IO controller core.
//!
//! [`Controller`] takes the current [`MetadataImage`] and a command and
//! returns a [`ControllerResult`]: the records to append to the metadata
//! log (empty for `validate_only` requests and for commands that change
//! nothing) and the per-item results. It performs no I/O: time comes in as
//! `now_ms` arguments and randomness from an injected [`Random`].
//! The caller must append the records atomically, in order, starting at
//! `image.next_offset()`, and apply them to the image before running the
//! next command; [`LocalController`](crate::runtime::LocalController) does
//! exactly that.
//!
//! Items of one command are planned in order against a working image that
//! already includes the earlier items' records, so two items of one request
//! see each other (creating a topic twice in one request fails the second).

mod brokers;
mod configs;
mod partitions;
mod producer_ids;
mod quotas;
mod reassignments;
mod rebalance;
mod security;
mod topics;

use std::collections::BTreeMap;

pub use brokers::{
    BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest, ElectLeadersRequest, ElectionOutcome, ElectionType,
};
pub use configs::{
    AlterConfigOperation, AlterConfigsRequest, ConfigAlteration, IncrementalAlterConfigsRequest,
    ResourceConfigs, ResourceOutcome,
};
pub use partitions::{AlterPartitionReply, AlterPartitionRequest};
pub use producer_ids::{AllocateProducerIdsRequest, ProducerIdBlock, PRODUCER_ID_BLOCK_SIZE};
pub use quotas::{AlterClientQuotasRequest, ClientQuotaAlteration, QuotaOp};
pub use reassignments::{
    ongoing_reassignments, OngoingReassignment, PartitionReassignment, ReassignmentOutcome,
};
pub use security::ScramChange;
pub use topics::{
    CreatePartitionsRequest, CreateTopicsRequest, CreatedTopic, DeleteOutcome, DeletedTopic,
    NewTopic, PartitionsIncrease, TopicOutcome, TopicReference,
};

use crate::error::ApplyError;
use crate::image::{leader_to_record, BrokerId, MetadataImage, TopicImage};
use crate::records::{uuid_to_bytes, MetadataRecord, PartitionChangeRecord, Record, ReplicaList};
use strom_clock::Random;

/// Settings of the controller core, with Kafka's names in the docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `num.partitions`: partitions of a topic created without a count.
    pub default_partitions: i32,
    /// `default.replication.factor`: replication factor when none is given.
    pub default_replication_factor: i16,
    /// `broker.session.timeout.ms`: a broker that has not sent a heartbeat
    /// for this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `unclean.leader.election.enable`: the cluster default; a topic's own
    /// config overrides it.
    pub unclean_leader_election_enable: bool,
    /// Most partitions one topic may have (a guard against requests that
    /// would exhaust memory; Kafka has no such limit).
    pub max_partitions_per_topic: i32,
    /// `auto.leader.rebalance.enable`: move leadership back to preferred
    /// replicas when a broker's leader imbalance is too high.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.per.broker.percentage`: the share (in percent) of
    /// a broker's preferred partitions that another broker may lead before
    /// a rebalance.
    pub leader_imbalance_per_broker_percentage: u32,
    /// `leader.imbalance.check.interval.seconds`, in milliseconds: how
    /// often [`Controller::tick`] checks the imbalance.
    pub leader_imbalance_check_interval_ms: u64,
    /// `strom.controller.fence.unreachable.brokers`: fence a broker at
    /// once on evidence that its process is gone (see
    /// `quorum::liveness`); otherwise only its session expiry fences it.
    pub fence_unreachable_brokers: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            default_partitions: 1,
            default_replication_factor: 1,
            broker_session_timeout_ms: 9_000,
            unclean_leader_election_enable: false,
            max_partitions_per_topic: 100_000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_per_broker_percentage: 10,
            leader_imbalance_check_interval_ms: 300_000,
            fence_unreachable_brokers: true,
        }
    }
}

/// A configuration key and value as given in a request (`None` is a null
/// value).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigEntry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Option<String>,
}

impl ConfigEntry {
    /// A key with a value.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            value: Some(value.into()),
        }
    }
}

/// What a command decided: records to append, and the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerResult<T> {
    /// Records to append, in order, as one batch.
    pub records: Vec<MetadataRecord>,
    /// The reply, with per-item results.
    pub response: T,
}

/// The controller core. See the module docs.
pub struct Controller {
    config: ControllerConfig,
    random: std::sync::Arc<dyn Random>,
    /// Last heartbeat time per broker, in `now_ms` units. Not part of the
    /// image: liveness is the active controller's own observation.
    last_heartbeat_ms: BTreeMap<BrokerId, u64>,
    /// When each broker was last heard from (registration or heartbeat)
    /// since this controller became active: unlike `last_heartbeat_ms`,
    /// never set by the grace a new controller gives, so that it tells
    /// which brokers have really spoken (see `quorum::liveness`).
    last_heard_ms: BTreeMap<BrokerId, u64>,
    /// Brokers that asked to shut down (controlled shutdown), with the
    /// broker epoch they asked at: they stay fenced, and so never lead or
    /// join an ISR, until they register again. Like `last_heartbeat_ms`,
    /// the active controller's own observation (a broker's fence record is
    /// in the image).
    shutting_down: BTreeMap<BrokerId, i64>,
    /// When the leader imbalance was last checked (`None`: not since this
    /// controller became active; the first check is an interval later).
    last_rebalance_check_ms: Option<u64>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Controller")
            .field("config", &self.config)
            .field("last_heartbeat_ms", &self.last_heartbeat_ms)
            .field("shutting_down", &self.shutting_down)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller with `config`, drawing topic ids and assignment start
    /// points from `random`.
    pub fn new(config: ControllerConfig, random: std::sync::Arc<dyn Random>) -> Self {
        Self {
            config,
            random,
            last_heartbeat_ms: BTreeMap::new(),
            last_heard_ms: BTreeMap::new(),
            shutting_down: BTreeMap::new(),
            last_rebalance_check_ms: None,
        }
    }

    /// Forgets every broker's last heartbeat. A controller that becomes
    /// active calls this first: heartbeats it saw in an earlier term say
    /// nothing about the brokers now, and each unfenced broker gets a full
    /// session from the first check on.
    pub fn reset_liveness(&mut self) {
        self.last_heartbeat_ms.clear();
        self.last_heard_ms.clear();
        self.last_rebalance_check_ms = None;
    }

    /// When this controller last heard from `broker_id` (registration or
    /// heartbeat), in the `now_ms` of the calls; `None` before the first
    /// word since it became active, when the broker's session starts at
    /// the next [`Controller::tick`].
    pub fn last_heartbeat_ms(&self, broker_id: BrokerId) -> Option<u64> {
        self.last_heartbeat_ms.get(&broker_id).copied()
    }

    /// Whether `broker_id` asked to shut down at `broker_epoch` (and has
    /// not registered again since).
    pub fn is_shutting_down(&self, broker_id: BrokerId, broker_epoch: i64) -> bool {
        self.shutting_down.get(&broker_id) == Some(&broker_epoch)
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Whether unclean leader election is enabled for `topic` (its own
    /// config, else the cluster default).
    fn unclean_enabled(&self, image: &MetadataImage, topic: &TopicImage) -> bool {
        let resource = crate::image::ConfigResource::Topic(topic.name.clone());
        image
            .config(&resource, "unclean.leader.election.enable")
            .map_or(self.config.unclean_leader_election_enable, |value| {
                value.trim().eq_ignore_ascii_case("true")
            })
    }
}

/// Whether a broker is registered and unfenced.
fn is_live(image: &MetadataImage, broker_id: BrokerId) -> bool {
    image.broker(broker_id).is_some_and(|broker| !broker.fenced)
}

/// A working copy of the image with the records planned so far.
struct Pending {
    image: MetadataImage,
    records: Vec<MetadataRecord>,
}

impl Pending {
    fn new(image: &MetadataImage) -> Self {
        Self {
            image: image.clone(),
            records: Vec::new(),
        }
    }

    /// Applies `records` to the working image and keeps them. An error
    /// means the controller planned an inapplicable record: a bug.
    fn push(&mut self, records: Vec<MetadataRecord>) -> Result<(), ApplyError> {
        let base = self.image.next_offset();
        let image = std::mem::take(&mut self.image);
        self.image = image.into_applied(
            records
                .iter()
                .enumerate()
                .map(|(index, record)| (base + index as u64, record)),
        )?;
        self.records.extend(records);
        Ok(())
    }

    fn finish<T>(self, response: T, validate_only: bool) -> ControllerResult<T> {
        ControllerResult {
            records: if validate_only {
                Vec::new()
            } else {
                self.records
            },
            response,
        }
    }
}

/// A partition change record.
fn partition_change(
    topic: &TopicImage,
    partition_index: usize,
    isr: Option<Vec<BrokerId>>,
    leader: Option<Option<BrokerId>>,
) -> MetadataRecord {
    MetadataRecord::new(Record::PartitionChange(PartitionChangeRecord {
        topic_id: uuid_to_bytes(topic.id),
        partition_index: i32::try_from(partition_index).unwrap_or(i32::MAX),
        isr: isr.map(ReplicaList::from),
        leader: leader.map(leader_to_record),
        ..PartitionChangeRecord::default()
    }))
}

#[cfg(test)]
mod tests;
