//! The dispatch table: one Kafka API per file.
//!
//! [`Dispatcher`] routes each decoded request to its handler. ApiVersions
//! advertises exactly the APIs in [`HANDLED_APIS`] (intersected with the
//! protocol crate's version table), so the broker never advertises an API it
//! does not serve.

use std::sync::Arc;

use strom_controller::producer_ids::ProducerIdManager;
use strom_controller::runtime::ControllerClient;
use strom_network::{Reply, RequestContext, RequestHandler};
use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::messages::Request;
use strom_replication::fetch_session::FetchSessionCache;

use crate::config::BrokerConfig;
use crate::groups::GroupService;
use crate::replica_manager::ReplicaManager;
use crate::transactions::TransactionService;

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_user_scram_credentials;
mod api_versions;
pub(crate) mod authorization;
mod authorize_request;
mod authorized_operations;
mod broker_configs;
mod config_docs;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
pub(crate) mod describe_configs;
mod describe_groups;
mod describe_producers;
mod describe_quorum;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
pub(crate) mod errors;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod mutation_quota;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod partitions;
mod produce;
mod produce_txn;
mod request_quota;
mod sasl_authenticate;
mod sasl_handshake;
mod sync_group;
mod txn_offset_commit;
mod write_txn_markers;

/// The APIs this broker serves, in the order of Kafka's API keys.
pub const HANDLED_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::SaslHandshake,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::InitProducerId,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::WriteTxnMarkers,
    ApiKey::TxnOffsetCommit,
    ApiKey::DescribeAcls,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::SaslAuthenticate,
    ApiKey::CreatePartitions,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::OffsetDelete,
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeProducers,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::ConsumerGroupDescribe,
];

/// What every handler may use.
pub struct BrokerContext {
    /// The broker's configuration.
    pub config: BrokerConfig,
    /// The cluster id (from `meta.properties`).
    pub cluster_id: String,
    /// The controller (embedded for a single node).
    pub controller: Arc<dyn ControllerClient>,
    /// The partitions hosted here.
    pub replicas: Arc<ReplicaManager>,
    /// The durable producer id counter (InitProducerId).
    pub producer_ids: Arc<ProducerIdManager>,
    /// The group coordinator and its `__consumer_offsets` partitions.
    pub groups: Arc<GroupService>,
    /// The transaction coordinator and its `__transaction_state` partitions.
    pub transactions: Arc<TransactionService>,
    /// Asks transaction coordinators whether a transactional produce's
    /// partitions are in its transaction (KIP-890 part 1).
    pub txn_verifier: Arc<crate::txn_verification::TxnVerifier>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: Arc<FetchSessionCache>,
    /// Request metrics and the other broker-wide counters.
    pub metrics: Arc<strom_observability::BrokerMetrics>,
    /// Client quotas (KIP-13, KIP-124, KIP-599).
    pub quotas: Arc<crate::quotas::QuotaService>,
}

impl BrokerContext {
    /// Brings the hosted partitions in line with the controller's latest
    /// image (after a controller write, so the next request sees it).
    /// Creating or deleting partition logs creates files and syncs
    /// directories, so it runs through [`crate::blocking::blocking`].
    pub fn sync_metadata(&self) {
        let image = self.controller.image();
        crate::blocking::blocking(|| self.replicas.apply_image(&image));
    }
}

/// Routes requests to their handlers.
pub struct Dispatcher {
    context: Arc<BrokerContext>,
}

impl Dispatcher {
    /// A dispatcher over the broker's shared context.
    pub fn new(context: Arc<BrokerContext>) -> Dispatcher {
        Dispatcher { context }
    }
}

#[async_trait::async_trait]
impl RequestHandler for Dispatcher {
    async fn handle(&self, request_context: RequestContext, request: Request) -> Reply {
        let api_key = request.api_key();
        let received_at = request_context.received_at;
        // Latency for metrics: measured on the host's clock, not the broker's.
        let started = std::time::Instant::now();
        let request_quota =
            request_quota::RequestTime::start(&self.context, &request_context, &request);
        let reply = self.dispatch(request_context, request).await;
        let reply = request_quota.finish(&self.context, reply);
        crate::metrics::observe(&self.context.metrics, api_key, received_at, started, reply)
    }

    fn times_sends(&self) -> bool {
        self.context.metrics.recording()
    }

    fn record_send(&self, api_key: i16, elapsed: std::time::Duration) {
        if !self.context.metrics.recording() {
            return;
        }
        if let Some(api) = strom_protocol::kafka::messages::ApiKey::try_from(api_key)
            .ok()
            .and_then(|key| self.context.metrics.requests.api(key))
        {
            api.send.observe(elapsed);
        }
    }

    fn unsupported_api_versions(&self) -> strom_protocol::messages::Response {
        strom_protocol::messages::Response::ApiVersions(api_versions::response(
            strom_protocol::error_code::ErrorCode::UnsupportedVersion,
        ))
    }
}

impl Dispatcher {
    /// Hands a request to its API's handler: the data path, the group
    /// coordinator's APIs and authentication here, administration in
    /// [`Dispatcher::dispatch_admin`].
    async fn dispatch(&self, request_context: RequestContext, request: Request) -> Reply {
        let broker = &self.context;
        if let Some(refusal) = authorize_request::refusal(broker, &request_context, &request) {
            return refusal;
        }
        match request {
            Request::ApiVersions(request) => api_versions::handle(&request_context, request),
            Request::Metadata(request) => metadata::handle(broker, &request_context, request).await,
            Request::Produce(request) => produce::handle(broker, &request_context, request).await,
            Request::Fetch(request) => fetch::handle(broker, &request_context, request),
            Request::ListOffsets(request) => {
                list_offsets::handle(broker, &request_context, request)
            }
            Request::OffsetForLeaderEpoch(request) => {
                offset_for_leader_epoch::handle(broker, &request_context, request)
            }
            Request::InitProducerId(request) => {
                init_producer_id::handle(broker, &request_context, request).await
            }
            Request::SaslHandshake(request) => sasl_handshake::handle(&request_context, request),
            Request::SaslAuthenticate(request) => {
                sasl_authenticate::handle(broker, &request_context, request)
            }
            Request::FindCoordinator(request) => {
                find_coordinator::handle(broker, &request_context, request).await
            }
            Request::JoinGroup(request) => join_group::handle(broker, &request_context, request),
            Request::SyncGroup(request) => sync_group::handle(broker, &request_context, request),
            Request::Heartbeat(request) => heartbeat::handle(broker, &request_context, request),
            Request::LeaveGroup(request) => leave_group::handle(broker, &request_context, request),
            Request::OffsetCommit(request) => {
                offset_commit::handle(broker, &request_context, request)
            }
            Request::OffsetFetch(request) => {
                offset_fetch::handle(broker, &request_context, request)
            }
            Request::ConsumerGroupHeartbeat(request) => {
                consumer_group_heartbeat::handle(broker, &request_context, request)
            }
            Request::ConsumerGroupDescribe(request) => {
                consumer_group_describe::handle(broker, &request_context, request)
            }
            request => self.dispatch_transactions(request_context, request).await,
        }
    }

    /// Hands a transaction request to its handler, others to
    /// [`Dispatcher::dispatch_admin`].
    async fn dispatch_transactions(
        &self,
        request_context: RequestContext,
        request: Request,
    ) -> Reply {
        let broker = &self.context;
        match request {
            Request::AddPartitionsToTxn(request) => {
                add_partitions_to_txn::handle(broker, &request_context, request).await
            }
            Request::AddOffsetsToTxn(request) => {
                add_offsets_to_txn::handle(broker, &request_context, request).await
            }
            Request::EndTxn(request) => end_txn::handle(broker, &request_context, request).await,
            Request::WriteTxnMarkers(request) => {
                write_txn_markers::handle(broker, &request_context, request).await
            }
            Request::TxnOffsetCommit(request) => {
                txn_offset_commit::handle(broker, &request_context, request).await
            }
            Request::DescribeTransactions(request) => {
                describe_transactions::handle(broker, &request_context, request)
            }
            Request::ListTransactions(request) => {
                list_transactions::handle(broker, &request_context, request)
            }
            Request::DescribeProducers(request) => {
                describe_producers::handle(broker, &request_context, request)
            }
            request => self.dispatch_admin(request_context, request).await,
        }
    }

    /// Hands an administrative request (topics, configs, groups, ACLs,
    /// credentials, elections, reassignments, the cluster) to its handler.
    async fn dispatch_admin(&self, request_context: RequestContext, request: Request) -> Reply {
        let broker = &self.context;
        match request {
            Request::CreateTopics(request) => {
                create_topics::handle(broker, &request_context, request).await
            }
            Request::DeleteTopics(request) => {
                delete_topics::handle(broker, &request_context, request).await
            }
            Request::CreatePartitions(request) => {
                create_partitions::handle(broker, &request_context, request).await
            }
            Request::DeleteRecords(request) => {
                delete_records::handle(broker, &request_context, request)
            }
            Request::DescribeConfigs(request) => {
                describe_configs::handle(broker, &request_context, request)
            }
            Request::AlterConfigs(request) => {
                alter_configs::handle(broker, &request_context, request).await
            }
            Request::IncrementalAlterConfigs(request) => {
                incremental_alter_configs::handle(broker, &request_context, request).await
            }
            Request::DescribeCluster(request) => {
                describe_cluster::handle(broker, &request_context, request).await
            }
            Request::DescribeQuorum(request) => {
                describe_quorum::handle(broker, &request_context, request).await
            }
            Request::ListGroups(request) => list_groups::handle(broker, &request_context, request),
            Request::DescribeGroups(request) => {
                describe_groups::handle(broker, &request_context, request)
            }
            Request::DeleteGroups(request) => {
                delete_groups::handle(broker, &request_context, request)
            }
            Request::OffsetDelete(request) => {
                offset_delete::handle(broker, &request_context, request)
            }
            request => self.dispatch_security_admin(request_context, request).await,
        }
    }

    /// Hands an ACL, credential, election or reassignment request to its
    /// handler; a request no dispatcher routes closes the connection.
    async fn dispatch_security_admin(
        &self,
        request_context: RequestContext,
        request: Request,
    ) -> Reply {
        let broker = &self.context;
        match request {
            Request::CreateAcls(request) => {
                create_acls::handle(broker, &request_context, request).await
            }
            Request::DescribeAcls(request) => {
                describe_acls::handle(broker, &request_context, request)
            }
            Request::DeleteAcls(request) => {
                delete_acls::handle(broker, &request_context, request).await
            }
            Request::AlterUserScramCredentials(request) => {
                alter_user_scram_credentials::handle(broker, &request_context, request).await
            }
            Request::DescribeUserScramCredentials(request) => {
                describe_user_scram_credentials::handle(broker, &request_context, request)
            }
            Request::ElectLeaders(request) => {
                elect_leaders::handle(broker, &request_context, request).await
            }
            Request::DescribeClientQuotas(request) => {
                describe_client_quotas::handle(broker, &request_context, request)
            }
            Request::AlterClientQuotas(request) => {
                alter_client_quotas::handle(broker, &request_context, request).await
            }
            Request::AlterPartitionReassignments(request) => {
                alter_partition_reassignments::handle(broker, &request_context, request).await
            }
            Request::ListPartitionReassignments(request) => {
                list_partition_reassignments::handle(broker, &request_context, request).await
            }
            request => unrouted(request.api_key()),
        }
    }
}

/// A request that no dispatcher routes: a Strom bug (every decodable
/// request is in [`HANDLED_APIS`], which a test checks against the
/// dispatchers), answered as Kafka answers a request it cannot serve.
fn unrouted(api_key: ApiKey) -> Reply {
    tracing::error!(
        ?api_key,
        "no handler routes this request; closing the connection"
    );
    Reply::Close
}
