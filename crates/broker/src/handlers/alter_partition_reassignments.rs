//! AlterPartitionReassignments (v0): starts, replaces or cancels (null
//! replicas) partition reassignments; the controller runs them to
//! completion (see `strom_controller::controller` and docs/replication.md).
//! Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED at the top
//! level).

use std::collections::BTreeMap;

use strom_controller::controller::{PartitionReassignment, ReassignmentOutcome};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use strom_protocol::kafka::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::errors::{controller_error_code, runtime_error_code};
use super::BrokerContext;

/// Handles an AlterPartitionReassignments request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> Reply {
    let respond = |response: AlterPartitionReassignmentsResponse| {
        Reply::Response(Response::AlterPartitionReassignments(response))
    };
    let top_level = |code: ErrorCode, message: String| {
        AlterPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if !authorize(
        broker,
        context,
        operation::ALTER,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return respond(top_level(
            ErrorCode::ClusterAuthorizationFailed,
            "ALTER on the cluster is required".to_owned(),
        ));
    }
    let partitions: Vec<PartitionReassignment> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| PartitionReassignment {
                    topic: topic.name.0.to_string(),
                    partition_index: partition.partition_index,
                    target_replicas: partition
                        .replicas
                        .as_ref()
                        .map(|replicas| replicas.iter().map(|id| id.0).collect()),
                })
        })
        .collect();
    let outcomes = match broker
        .controller
        .alter_partition_reassignments(partitions)
        .await
    {
        Ok(outcomes) => outcomes,
        Err(error) => return respond(top_level(runtime_error_code(&error), error.to_string())),
    };
    broker.sync_metadata();
    respond(AlterPartitionReassignmentsResponse::default().with_responses(responses(outcomes)))
}

/// Per-partition results, by topic.
fn responses(outcomes: Vec<ReassignmentOutcome>) -> Vec<ReassignableTopicResponse> {
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for outcome in outcomes {
        let mut result =
            ReassignablePartitionResponse::default().with_partition_index(outcome.partition_index);
        if let Err(error) = outcome.result {
            result = result
                .with_error_code(controller_error_code(&error).code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())));
        }
        by_topic.entry(outcome.topic).or_default().push(result);
    }
    by_topic
        .into_iter()
        .map(|(name, partitions)| {
            ReassignableTopicResponse::default()
                .with_name(StrBytes::from_string(name).into())
                .with_partitions(partitions)
        })
        .collect()
}
