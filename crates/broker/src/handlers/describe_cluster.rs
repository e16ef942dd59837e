//! DescribeCluster: the cluster id, the controller and the brokers, from
//! the metadata image.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_cluster_response::DescribeClusterBroker;
use strom_protocol::kafka::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::{authorized_operations, BrokerContext};
use crate::network::{Reply, RequestContext};

/// `endpoint_type` asking for brokers (the default before v1).
const ENDPOINT_TYPE_BROKERS: i8 = 1;

/// The `cluster_authorized_operations` value of a response when the client
/// did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Handles a DescribeCluster request.
pub fn handle(
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
                crate::security::authorizer::authorize(
                    broker,
                    context,
                    operation,
                    crate::security::authorizer::resource::CLUSTER,
                    crate::security::authorizer::CLUSTER_NAME,
                )
            })
        } else {
            OPERATIONS_NOT_REQUESTED
        });
    if endpoint_type != ENDPOINT_TYPE_BROKERS {
        // A broker describes brokers; controllers are asked directly.
        return Reply::Response(Response::DescribeCluster(
            response
                .with_error_code(ErrorCode::UnsupportedEndpointType.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "this node serves broker endpoints only",
                ))),
        ));
    }
    let include_fenced = context.api_version >= 2 && request.include_fenced_brokers;
    let listener = Some(context.session.listener().name.as_str());
    let image = broker.controller.image();
    let brokers = image
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
        .collect();
    Reply::Response(Response::DescribeCluster(response.with_brokers(brokers)))
}
