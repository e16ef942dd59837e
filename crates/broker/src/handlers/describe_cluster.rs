//! DescribeCluster: the cluster id, the controller and the brokers, from
//! the metadata image; with `endpoint_type` = 2 (v1+, KIP-919), the
//! controller voters instead.
//!
//! Kafka's broker answers `endpoint_type` = 2 with MISMATCHED_ENDPOINT_TYPE
//! (only a controller describes controllers), and any value other than 1
//! or 2 with UNSUPPORTED_ENDPOINT_TYPE. A Strom node of a cluster knows the
//! voters from `controller.quorum.voters`, so it answers them (each at its
//! controller listener, the controller id being the active controller or
//! -1); a client asking for controllers wants exactly that list. A single
//! node has no controller listener to describe (its embedded controller is
//! reached through the broker listener), so it answers as Kafka's broker
//! does: MISMATCHED_ENDPOINT_TYPE, which Kafka's admin client reports as
//! "sent to an endpoint of the wrong type".

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_cluster_response::DescribeClusterBroker;
use strom_protocol::kafka::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::describe_quorum::{voter_endpoints, VoterEndpoint};
use super::{authorized_operations, BrokerContext};

/// `endpoint_type` asking for brokers (the default before v1).
const ENDPOINT_TYPE_BROKERS: i8 = 1;
/// `endpoint_type` asking for the controllers (KIP-919).
const ENDPOINT_TYPE_CONTROLLERS: i8 = 2;

/// The `cluster_authorized_operations` value of a response when the client
/// did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Handles a DescribeCluster request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeClusterRequest,
) -> Reply {
    let endpoint_type = if context.api_version >= 1 {
        request.endpoint_type
    } else {
        ENDPOINT_TYPE_BROKERS
    };
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(endpoint_type)
        .with_cluster_id(StrBytes::from_string(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.config.node_id))
        .with_cluster_authorized_operations(if request.include_cluster_authorized_operations {
            authorized_operations::cluster_allowed(|operation| {
                super::authorization::authorize(
                    broker,
                    context,
                    operation,
                    strom_protocol::acl::resource::CLUSTER,
                    strom_protocol::acl::CLUSTER_NAME,
                )
            })
        } else {
            OPERATIONS_NOT_REQUESTED
        });
    let response = match endpoint_type {
        ENDPOINT_TYPE_BROKERS => {
            let include_fenced = context.api_version >= 2 && request.include_fenced_brokers;
            response.with_brokers(brokers(broker, context, include_fenced))
        }
        ENDPOINT_TYPE_CONTROLLERS => controllers(broker, response).await,
        _ => refused(
            response,
            ErrorCode::UnsupportedEndpointType,
            "unknown endpoint type (1 is brokers, 2 controllers)",
        ),
    };
    Reply::Response(Response::DescribeCluster(response))
}

fn refused(
    response: DescribeClusterResponse,
    code: ErrorCode,
    message: &'static str,
) -> DescribeClusterResponse {
    response
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_static_str(message)))
}

/// The registered brokers, each at the listener the request came in on
/// (else its first).
fn brokers(
    broker: &BrokerContext,
    context: &RequestContext,
    include_fenced: bool,
) -> Vec<DescribeClusterBroker> {
    let listener = Some(context.session.listener().name.as_str());
    let image = broker.controller.image();
    image
        .brokers()
        .filter(|registered| include_fenced || !registered.fenced)
        .filter_map(|registered| {
            let endpoint = registered
                .endpoints
                .iter()
                .find(|endpoint| Some(endpoint.name.as_str()) == listener)
                .or_else(|| registered.endpoints.first())?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(registered.broker_id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(registered.rack.clone().map(StrBytes::from_string))
                    .with_is_fenced(registered.fenced),
            )
        })
        .collect()
}

/// The controller voters, or MISMATCHED_ENDPOINT_TYPE on a single node.
async fn controllers(
    broker: &BrokerContext,
    response: DescribeClusterResponse,
) -> DescribeClusterResponse {
    let voters = voter_endpoints(broker);
    if voters.is_empty() {
        return refused(
            response,
            ErrorCode::MismatchedEndpointType,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        );
    }
    let active_controller = match broker.controller.describe_quorum().await {
        Ok(Some(status)) => status
            .leader
            .and_then(|leader| i32::try_from(leader).ok())
            .unwrap_or(-1),
        Ok(None) | Err(_) => -1,
    };
    response
        .with_controller_id(BrokerId(active_controller))
        .with_brokers(voters.into_iter().map(controller_entry).collect())
}

fn controller_entry(voter: VoterEndpoint) -> DescribeClusterBroker {
    DescribeClusterBroker::default()
        .with_broker_id(BrokerId(voter.node_id))
        .with_host(StrBytes::from_string(voter.host))
        .with_port(i32::from(voter.port))
}
