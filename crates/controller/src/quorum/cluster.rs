//! [`ClusterController`]: the [`ControllerClient`] of a node in a cluster.
//!
//! Every node of a cluster runs a [`QuorumController`]: a voter on the
//! controller nodes, an observer (learner) on nodes that are only brokers.
//! Its image is the node's view of the metadata; commands go to the
//! active controller: run here when this node is active, otherwise sent as
//! a [`RemoteCommand`] to the voter this node believes active (over
//! [`TcpTransport::for_commands`]). A reply of `NotController` naming
//! another node redirects the command there; while no active controller
//! is known (an election), the command waits. A command that finds no
//! active controller within the request timeout fails with
//! [`RuntimeError::QuorumTimeout`] (Kafka's REQUEST_TIMED_OUT), as does one
//! whose connection broke after it was sent (it may or may not have been
//! applied, as with Kafka).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::controller::{
    AllocateProducerIdsRequest, AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReply,
    AlterPartitionRequest, BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest, CreatePartitionsRequest, CreateTopicsRequest, CreatedTopic,
    DeleteOutcome, ElectLeadersRequest, ElectionOutcome, IncrementalAlterConfigsRequest,
    OngoingReassignment, PartitionReassignment, ProducerIdBlock, ReassignmentOutcome,
    ResourceOutcome, ScramChange, TopicOutcome, TopicReference,
};
use crate::error::{ControllerError, RuntimeError};
use crate::image::MetadataImage;
use crate::quorum::network::{QuorumTransport, TransportError};
use crate::quorum::node::QuorumController;
use crate::quorum::remote::{execute, RemoteCommand, RemoteFailed, RemoteFailure, RemoteReply};
use crate::quorum::status::QuorumStatus;
use crate::quorum::tcp::TcpTransport;
use crate::quorum::types::NodeId;
use crate::runtime::{CommandRunner, ControllerClient};
use crate::security_records::AccessControlEntryRecord;
use strom_quotas::QuotaError;

/// How long an observer may take to catch up when it joins.
const OBSERVER_JOIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The pause before asking again while no active controller is known.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A node's controller in a cluster. See the module docs.
pub struct ClusterController {
    node: Arc<QuorumController>,
    voters: BTreeMap<NodeId, String>,
    transport: Arc<dyn QuorumTransport>,
    request_timeout: Duration,
}

impl std::fmt::Debug for ClusterController {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ClusterController")
            .field("node_id", &self.node.node_id())
            .field("voters", &self.voters)
            .finish_non_exhaustive()
    }
}

/// What one attempt to deliver a command gave.
enum Attempt {
    /// The active controller's answer (which may be a failure of the
    /// command as a whole).
    Answered(RemoteReply),
    /// Ask this node next.
    Redirect(NodeId),
    /// Nobody took the command; try again after a pause.
    Retry,
    /// The command was sent but its outcome is unknown.
    Lost,
}

impl ClusterController {
    /// The controller of `node`, whose commands go to the active one among
    /// `voters` (id to `host:port` of the controller listener), each
    /// bounded by `request_timeout`.
    pub fn new(
        node: Arc<QuorumController>,
        voters: BTreeMap<NodeId, String>,
        request_timeout: Duration,
    ) -> Self {
        Self::with_transport(
            node,
            voters,
            request_timeout,
            Arc::new(TcpTransport::for_commands()),
        )
    }

    /// As [`ClusterController::new`], with commands carried by `transport`
    /// (tests use an in-process one).
    pub fn with_transport(
        node: Arc<QuorumController>,
        voters: BTreeMap<NodeId, String>,
        request_timeout: Duration,
        transport: Arc<dyn QuorumTransport>,
    ) -> Self {
        Self {
            node,
            voters,
            transport,
            request_timeout: request_timeout.max(Duration::from_millis(1)),
        }
    }

    /// This node's quorum member.
    pub fn node(&self) -> &Arc<QuorumController> {
        &self.node
    }

    /// Asks the active controller to add this node as an observer that
    /// receives the metadata log at `address` (where this node answers
    /// Raft requests); returns once it has caught up.
    pub async fn join_as_observer(&self, address: String) -> Result<(), RuntimeError> {
        let command = RemoteCommand::AddObserver {
            node_id: self.node.node_id(),
            address,
        };
        match self.call(command, OBSERVER_JOIN_TIMEOUT).await? {
            RemoteReply::AddObserver => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Delivers `command` to the active controller and returns its reply;
    /// see the module docs for the retries.
    async fn call(
        &self,
        command: RemoteCommand,
        timeout: Duration,
    ) -> Result<RemoteReply, RuntimeError> {
        // Bounds a wait on the network: the host's clock, not the injected one.
        let deadline = Instant::now() + timeout;
        let mut next: Option<NodeId> = None;
        // Voters to ask in turn while this node knows no active controller
        // (an observer that has not joined yet, or an election): any voter
        // that knows one redirects there.
        let others: Vec<NodeId> = self
            .voters
            .keys()
            .copied()
            .filter(|id| *id != self.node.node_id())
            .collect();
        let mut turn = 0usize;
        loop {
            let target = next.take().or_else(|| self.node.leader()).or_else(|| {
                turn = turn.wrapping_add(1);
                others.get(turn % others.len().max(1)).copied()
            });
            let attempt = match target {
                Some(id) if id == self.node.node_id() => {
                    redirect_or_answer(execute(&self.node, command.clone()).await, id)
                }
                Some(id) => self.forward(id, &command, deadline).await,
                None => Attempt::Retry,
            };
            let pause = match attempt {
                Attempt::Answered(reply) => return Ok(reply),
                Attempt::Lost => break,
                Attempt::Redirect(id) => {
                    next = Some(id);
                    Duration::from_millis(5)
                }
                Attempt::Retry => RETRY_PAUSE,
            };
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
        }
        Err(RuntimeError::QuorumTimeout {
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })
    }

    async fn forward(&self, target: NodeId, command: &RemoteCommand, deadline: Instant) -> Attempt {
        let Some(address) = self.voters.get(&target) else {
            // Not a voter (a stale hint): only voters lead.
            return Attempt::Retry;
        };
        // The active controller bounds its own work by the request timeout;
        // leave it that long plus a little for the network.
        let remaining = deadline.saturating_duration_since(Instant::now());
        let timeout = remaining.max(self.request_timeout) + Duration::from_millis(500);
        match self
            .transport
            .call(target, address, command.encode(), timeout)
            .await
        {
            Ok(bytes) => match RemoteReply::decode(&bytes) {
                Ok(reply) => redirect_or_answer(reply, target),
                Err(error) => Attempt::Answered(RemoteReply::Failed(RemoteFailure::Other {
                    message: format!("undecodable reply from node {target}: {error}"),
                })),
            },
            // Never delivered: safe to send again (to whoever leads next).
            Err(TransportError::Unreachable { .. }) => Attempt::Retry,
            Err(TransportError::Timeout { .. } | TransportError::Io { .. }) => Attempt::Lost,
        }
    }

    async fn command(&self, command: RemoteCommand) -> Result<RemoteReply, RuntimeError> {
        match self.call(command, self.request_timeout).await? {
            RemoteReply::Failed(failure) => Err(failure.into()),
            reply => Ok(reply),
        }
    }
}

fn redirect_or_answer(reply: RemoteReply, asked: NodeId) -> Attempt {
    match reply {
        RemoteReply::Failed(RemoteFailure::NotController {
            leader: Some(leader),
        }) if leader != asked => Attempt::Redirect(leader),
        RemoteReply::Failed(RemoteFailure::NotController { .. }) => Attempt::Retry,
        reply => Attempt::Answered(reply),
    }
}

fn unexpected(reply: RemoteReply) -> RuntimeError {
    match reply {
        RemoteReply::Failed(failure) => failure.into(),
        other => RuntimeError::Quorum {
            source: Box::new(RemoteFailed {
                message: format!("a reply of the wrong kind: {other:?}"),
            }),
        },
    }
}

/// Sends a command and takes the reply of the expected kind.
macro_rules! forward {
    ($self:ident, $command:expr, $kind:path) => {
        match $self.command($command).await? {
            $kind(value) => Ok(value),
            other => Err(unexpected(other)),
        }
    };
}

#[async_trait]
impl ControllerClient for ClusterController {
    fn image(&self) -> Arc<MetadataImage> {
        self.node.current_image()
    }

    fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.node.image_receiver()
    }

    async fn create_topics(
        &self,
        request: CreateTopicsRequest,
    ) -> Result<Vec<TopicOutcome<CreatedTopic>>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::CreateTopics(request),
            RemoteReply::CreateTopics
        )
    }

    async fn delete_topics(
        &self,
        topics: Vec<TopicReference>,
    ) -> Result<Vec<DeleteOutcome>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::DeleteTopics(topics),
            RemoteReply::DeleteTopics
        )
    }

    async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
    ) -> Result<Vec<TopicOutcome<()>>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::CreatePartitions(request),
            RemoteReply::CreatePartitions
        )
    }

    async fn alter_configs(
        &self,
        request: AlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AlterConfigs(request),
            RemoteReply::Configs
        )
    }

    async fn incremental_alter_configs(
        &self,
        request: IncrementalAlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::IncrementalAlterConfigs(request),
            RemoteReply::Configs
        )
    }

    async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<Result<BrokerRegistrationReply, ControllerError>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::RegisterBroker(request),
            RemoteReply::RegisterBroker
        )
    }

    async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<Result<BrokerHeartbeatReply, ControllerError>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::BrokerHeartbeat(request),
            RemoteReply::BrokerHeartbeat
        )
    }

    async fn elect_leaders(
        &self,
        request: ElectLeadersRequest,
    ) -> Result<Vec<ElectionOutcome>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::ElectLeaders(request),
            RemoteReply::ElectLeaders
        )
    }

    async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<Result<AlterPartitionReply, ControllerError>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AlterPartition(request),
            RemoteReply::AlterPartition
        )
    }

    async fn alter_partition_reassignments(
        &self,
        partitions: Vec<PartitionReassignment>,
    ) -> Result<Vec<ReassignmentOutcome>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AlterPartitionReassignments(partitions),
            RemoteReply::AlterPartitionReassignments
        )
    }

    async fn list_partition_reassignments(
        &self,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<OngoingReassignment>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::ListPartitionReassignments(partitions),
            RemoteReply::ListPartitionReassignments
        )
    }

    async fn allocate_producer_ids(
        &self,
        request: AllocateProducerIdsRequest,
    ) -> Result<Result<ProducerIdBlock, ControllerError>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AllocateProducerIds(request),
            RemoteReply::AllocateProducerIds
        )
    }

    async fn alter_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<Vec<bool>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AlterScramCredentials(changes),
            RemoteReply::AlterScramCredentials
        )
    }

    async fn alter_acls(
        &self,
        additions: Vec<AccessControlEntryRecord>,
        removals: Vec<AccessControlEntryRecord>,
    ) -> Result<(), RuntimeError> {
        match self
            .command(RemoteCommand::AlterAcls {
                additions,
                removals,
            })
            .await?
        {
            RemoteReply::AlterAcls => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    async fn alter_client_quotas(
        &self,
        request: AlterClientQuotasRequest,
    ) -> Result<Vec<Result<(), QuotaError>>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::AlterClientQuotas(request),
            RemoteReply::AlterClientQuotas
        )
    }

    async fn describe_quorum(&self) -> Result<Option<QuorumStatus>, RuntimeError> {
        forward!(
            self,
            RemoteCommand::DescribeQuorum,
            RemoteReply::DescribeQuorum
        )
        .map(Some)
    }

    fn local_quorum_status(&self) -> Option<QuorumStatus> {
        Some(self.node.status())
    }

    fn quorum_voters(&self) -> BTreeMap<NodeId, String> {
        self.voters.clone()
    }
}
