//! The dispatch table: one Kafka API per file.
//!
//! [`Dispatcher`] routes each decoded request to its handler. ApiVersions
//! advertises exactly the APIs in [`HANDLED_APIS`] (intersected with the
//! protocol crate's version table), so the broker never advertises an API it
//! does not serve.

use std::sync::Arc;

use strom_controller::runtime::ControllerClient;
use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::messages::Request;

use crate::config::BrokerConfig;
use crate::network::{Reply, RequestContext, RequestHandler};
use crate::replica_manager::ReplicaManager;

mod api_versions;
mod create_topics;
mod errors;
mod fetch;
mod list_offsets;
mod metadata;
mod produce;

/// The APIs this broker serves, in the order of Kafka's API keys.
pub const HANDLED_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
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
}

impl BrokerContext {
    /// Brings the hosted partitions in line with the controller's latest
    /// image (after a controller write, so the next request sees it).
    pub fn sync_metadata(&self) {
        let image = self.controller.image();
        self.replicas.apply_image(&image);
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
        let broker = &self.context;
        match request {
            Request::ApiVersions(request) => api_versions::handle(&request_context, request),
            Request::Metadata(request) => metadata::handle(broker, &request_context, request).await,
            Request::Produce(request) => produce::handle(broker, &request_context, request),
            Request::Fetch(request) => fetch::handle(broker, &request_context, request),
            Request::ListOffsets(request) => {
                list_offsets::handle(broker, &request_context, request)
            }
            Request::CreateTopics(request) => {
                create_topics::handle(broker, &request_context, request).await
            }
            other => {
                tracing::warn!(api_key = ?other.api_key(), peer = %request_context.peer, "request for an API this broker does not serve");
                Reply::Close
            }
        }
    }

    fn unsupported_api_versions(&self) -> strom_protocol::messages::Response {
        strom_protocol::messages::Response::ApiVersions(api_versions::response(
            strom_protocol::error_code::ErrorCode::UnsupportedVersion,
        ))
    }
}
