//! Controller commands sent from one node to the active controller.
//!
//! A broker calls its [`ControllerClient`] wherever it is; in a cluster
//! only the active controller (the Raft leader) can run the command, so
//! the call travels there: a [`RemoteCommand`] in, a [`RemoteReply`] out,
//! in the same Kafka framing as the Raft RPCs
//! ([`tcp`](crate::quorum::tcp)) under the Strom-private API key
//! [`COMMAND_API_KEY`]. This is the role of Kafka's forwarding of admin
//! requests (an Envelope to the controller) and of its broker-to-controller
//! APIs (BrokerRegistration, BrokerHeartbeat, AllocateProducerIds,
//! AlterPartition): the broker has already decoded and authorized the
//! client's request, so what travels is the typed command.
//!
//! The body is JSON (`serde_json`): these are control-plane messages, a
//! few per second per broker, and the nodes of one cluster run the same
//! build. A body that does not decode closes the connection unanswered.

use serde::{Deserialize, Serialize};

use crate::controller::{
    AllocateProducerIdsRequest, AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReply,
    AlterPartitionRequest, BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest, CreatePartitionsRequest, CreateTopicsRequest, CreatedTopic,
    DeleteOutcome, ElectLeadersRequest, ElectionOutcome, IncrementalAlterConfigsRequest,
    OngoingReassignment, PartitionReassignment, ProducerIdBlock, ReassignmentOutcome,
    ResourceOutcome, ScramChange, TopicOutcome, TopicReference,
};
use crate::error::{CodecError, ControllerError, RuntimeError};
use crate::quorum::node::QuorumController;
use crate::quorum::status::QuorumStatus;
use crate::quorum::types::NodeId;
use crate::runtime::ControllerClient;
use crate::security_records::AccessControlEntryRecord;
use strom_quotas::QuotaError;

/// The Strom-private API key of a forwarded controller command.
pub const COMMAND_API_KEY: i16 = 32_001;
/// The only version of the forwarded command.
pub const COMMAND_API_VERSION: i16 = 0;

/// A command for the active controller: one per [`ControllerClient`]
/// method, plus the quorum's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RemoteCommand {
    /// CreateTopics.
    CreateTopics(CreateTopicsRequest),
    /// DeleteTopics.
    DeleteTopics(Vec<TopicReference>),
    /// CreatePartitions.
    CreatePartitions(CreatePartitionsRequest),
    /// AlterConfigs.
    AlterConfigs(AlterConfigsRequest),
    /// IncrementalAlterConfigs.
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    /// BrokerRegistration.
    RegisterBroker(BrokerRegistrationRequest),
    /// BrokerHeartbeat.
    BrokerHeartbeat(BrokerHeartbeatRequest),
    /// ElectLeaders.
    ElectLeaders(ElectLeadersRequest),
    /// AlterPartition.
    AlterPartition(AlterPartitionRequest),
    /// AlterPartitionReassignments.
    AlterPartitionReassignments(Vec<PartitionReassignment>),
    /// ListPartitionReassignments (`None`: every partition).
    ListPartitionReassignments(Option<Vec<(String, i32)>>),
    /// AllocateProducerIds.
    AllocateProducerIds(AllocateProducerIdsRequest),
    /// AlterUserScramCredentials.
    AlterScramCredentials(Vec<ScramChange>),
    /// CreateAcls and DeleteAcls.
    AlterAcls {
        /// Bindings to add.
        additions: Vec<AccessControlEntryRecord>,
        /// Bindings to remove.
        removals: Vec<AccessControlEntryRecord>,
    },
    /// AlterClientQuotas.
    AlterClientQuotas(AlterClientQuotasRequest),
    /// DescribeQuorum.
    DescribeQuorum,
    /// Add a node that is not a voter as an observer (an openraft learner)
    /// that receives the committed log at `address`; answered once it has
    /// caught up.
    AddObserver {
        /// The node.
        node_id: NodeId,
        /// Where it serves Raft requests.
        address: String,
    },
}

/// The active controller's answer to a [`RemoteCommand`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RemoteReply {
    /// To CreateTopics.
    CreateTopics(Vec<TopicOutcome<CreatedTopic>>),
    /// To DeleteTopics.
    DeleteTopics(Vec<DeleteOutcome>),
    /// To CreatePartitions.
    CreatePartitions(Vec<TopicOutcome<()>>),
    /// To AlterConfigs or IncrementalAlterConfigs.
    Configs(Vec<ResourceOutcome>),
    /// To BrokerRegistration.
    RegisterBroker(Result<BrokerRegistrationReply, ControllerError>),
    /// To BrokerHeartbeat.
    BrokerHeartbeat(Result<BrokerHeartbeatReply, ControllerError>),
    /// To ElectLeaders.
    ElectLeaders(Vec<ElectionOutcome>),
    /// To AlterPartition.
    AlterPartition(Result<AlterPartitionReply, ControllerError>),
    /// To AlterPartitionReassignments.
    AlterPartitionReassignments(Vec<ReassignmentOutcome>),
    /// To ListPartitionReassignments.
    ListPartitionReassignments(Vec<OngoingReassignment>),
    /// To AllocateProducerIds.
    AllocateProducerIds(Result<ProducerIdBlock, ControllerError>),
    /// To AlterUserScramCredentials.
    AlterScramCredentials(Vec<bool>),
    /// To CreateAcls and DeleteAcls.
    AlterAcls,
    /// To AlterClientQuotas.
    AlterClientQuotas(Vec<Result<(), QuotaError>>),
    /// To DescribeQuorum.
    DescribeQuorum(QuorumStatus),
    /// To AddObserver.
    AddObserver,
    /// The command failed as a whole.
    Failed(RemoteFailure),
}

/// A [`RuntimeError`] as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoteFailure {
    /// [`RuntimeError::NotController`].
    NotController {
        /// The active controller the answering node knows of.
        leader: Option<NodeId>,
    },
    /// [`RuntimeError::QuorumTimeout`].
    QuorumTimeout {
        /// The timeout.
        timeout_ms: u64,
    },
    /// [`RuntimeError::NoMajority`].
    NoMajority,
    /// [`RuntimeError::Stale`].
    Stale,
    /// [`RuntimeError::Shutdown`].
    Shutdown,
    /// Any other failure, by its message.
    Other {
        /// What the answering node reported.
        message: String,
    },
}

/// A failure reported by another node, kept as the source of
/// [`RuntimeError::Quorum`].
#[derive(Debug, thiserror::Error)]
#[error("the active controller failed: {message}")]
pub struct RemoteFailed {
    /// What the active controller reported.
    pub message: String,
}

impl From<&RuntimeError> for RemoteFailure {
    fn from(error: &RuntimeError) -> Self {
        match error {
            RuntimeError::NotController { leader } => {
                RemoteFailure::NotController { leader: *leader }
            }
            RuntimeError::QuorumTimeout { timeout_ms } => RemoteFailure::QuorumTimeout {
                timeout_ms: *timeout_ms,
            },
            RuntimeError::NoMajority => RemoteFailure::NoMajority,
            RuntimeError::Stale => RemoteFailure::Stale,
            RuntimeError::Shutdown => RemoteFailure::Shutdown,
            other => RemoteFailure::Other {
                message: strom_config::error_chain(other),
            },
        }
    }
}

impl From<RemoteFailure> for RuntimeError {
    fn from(failure: RemoteFailure) -> Self {
        match failure {
            RemoteFailure::NotController { leader } => RuntimeError::NotController { leader },
            RemoteFailure::QuorumTimeout { timeout_ms } => {
                RuntimeError::QuorumTimeout { timeout_ms }
            }
            RemoteFailure::NoMajority => RuntimeError::NoMajority,
            RemoteFailure::Stale => RuntimeError::Stale,
            RemoteFailure::Shutdown => RuntimeError::Shutdown,
            RemoteFailure::Other { message } => RuntimeError::Quorum {
                source: Box::new(RemoteFailed { message }),
            },
        }
    }
}

impl RemoteCommand {
    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing these plain data types to JSON cannot fail (no maps
        // with non-string keys, no custom serializers).
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes a command; bytes that are not one are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        serde_json::from_slice(bytes).map_err(|source| CodecError::Json { source })
    }
}

impl RemoteReply {
    /// The reply's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes a reply; bytes that are not one are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        serde_json::from_slice(bytes).map_err(|source| CodecError::Json { source })
    }
}

fn reply<T>(result: Result<T, RuntimeError>, wrap: impl FnOnce(T) -> RemoteReply) -> RemoteReply {
    match result {
        Ok(value) => wrap(value),
        Err(error) => RemoteReply::Failed(RemoteFailure::from(&error)),
    }
}

/// The quorum's status, from the active controller only.
fn describe_quorum(node: &QuorumController) -> RemoteReply {
    if node.is_active() {
        RemoteReply::DescribeQuorum(node.status())
    } else {
        RemoteReply::Failed(RemoteFailure::NotController {
            leader: node.leader(),
        })
    }
}

/// Runs `command` on `node`, which answers
/// [`RemoteFailure::NotController`] unless it is the active controller.
pub async fn execute(node: &QuorumController, command: RemoteCommand) -> RemoteReply {
    match command {
        RemoteCommand::CreateTopics(request) => {
            reply(node.create_topics(request).await, RemoteReply::CreateTopics)
        }
        RemoteCommand::DeleteTopics(topics) => {
            reply(node.delete_topics(topics).await, RemoteReply::DeleteTopics)
        }
        RemoteCommand::CreatePartitions(request) => reply(
            node.create_partitions(request).await,
            RemoteReply::CreatePartitions,
        ),
        RemoteCommand::AlterConfigs(request) => {
            reply(node.alter_configs(request).await, RemoteReply::Configs)
        }
        RemoteCommand::IncrementalAlterConfigs(request) => reply(
            node.incremental_alter_configs(request).await,
            RemoteReply::Configs,
        ),
        RemoteCommand::RegisterBroker(request) => reply(
            node.register_broker(request).await,
            RemoteReply::RegisterBroker,
        ),
        RemoteCommand::BrokerHeartbeat(request) => reply(
            node.broker_heartbeat(request).await,
            RemoteReply::BrokerHeartbeat,
        ),
        RemoteCommand::ElectLeaders(request) => {
            reply(node.elect_leaders(request).await, RemoteReply::ElectLeaders)
        }
        RemoteCommand::AlterPartition(request) => reply(
            node.alter_partition(request).await,
            RemoteReply::AlterPartition,
        ),
        RemoteCommand::AlterPartitionReassignments(partitions) => reply(
            node.alter_partition_reassignments(partitions).await,
            RemoteReply::AlterPartitionReassignments,
        ),
        RemoteCommand::ListPartitionReassignments(partitions) => reply(
            node.list_partition_reassignments(partitions).await,
            RemoteReply::ListPartitionReassignments,
        ),
        RemoteCommand::AllocateProducerIds(request) => reply(
            node.allocate_producer_ids(request).await,
            RemoteReply::AllocateProducerIds,
        ),
        RemoteCommand::AlterScramCredentials(changes) => reply(
            node.alter_scram_credentials(changes).await,
            RemoteReply::AlterScramCredentials,
        ),
        RemoteCommand::AlterAcls {
            additions,
            removals,
        } => reply(node.alter_acls(additions, removals).await, |()| {
            RemoteReply::AlterAcls
        }),
        RemoteCommand::AlterClientQuotas(request) => reply(
            node.alter_client_quotas(request).await,
            RemoteReply::AlterClientQuotas,
        ),
        RemoteCommand::DescribeQuorum => describe_quorum(node),
        RemoteCommand::AddObserver { node_id, address } => {
            reply(node.add_observer(node_id, address).await, |()| {
                RemoteReply::AddObserver
            })
        }
    }
}
