//! ElectLeaders (v0–v2): preferred (0) or unclean (1) leader elections on
//! request, as `kafka-leader-election.sh` asks for them. A null topic list
//! means every partition, and then only the partitions where something
//! happened (or failed for another reason than ELECTION_NOT_NEEDED) are in
//! the answer. Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED
//! for every partition, and at the top level from v1).

use std::collections::BTreeMap;

use strom_controller::controller::{ElectLeadersRequest as ControllerRequest, ElectionType};
use strom_controller::error::ControllerError;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use strom_protocol::kafka::messages::{ElectLeadersRequest, ElectLeadersResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::errors::{controller_error_code, runtime_error_code};
use super::BrokerContext;

/// Per-partition results, by topic.
type Results = BTreeMap<String, Vec<PartitionResult>>;

/// Handles an ElectLeaders request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ElectLeadersRequest,
) -> Reply {
    let requested: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|topic| {
                let name = topic.topic.0.to_string();
                topic
                    .partitions
                    .iter()
                    .map(move |index| (name.clone(), *index))
            })
            .collect()
    });
    let refuse = |code: ErrorCode, message: &str| {
        let results = failed(requested.as_deref().unwrap_or_default(), code, message);
        respond(context.api_version, code, results)
    };
    if !authorize(
        broker,
        context,
        operation::ALTER,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return refuse(
            ErrorCode::ClusterAuthorizationFailed,
            "ALTER on the cluster is required",
        );
    }
    // v0 has no election type: it is a preferred election.
    let election_type = match request.election_type {
        _ if context.api_version == 0 => ElectionType::Preferred,
        0 => ElectionType::Preferred,
        1 => ElectionType::Unclean,
        _ => return refuse(ErrorCode::InvalidRequest, "unknown election type"),
    };
    let controller_request = ControllerRequest {
        election_type,
        partitions: requested.clone(),
    };
    match broker.controller.elect_leaders(controller_request).await {
        Ok(outcomes) => {
            broker.sync_metadata();
            let mut results = Results::new();
            for outcome in outcomes {
                let result = partition_result(outcome.partition_index, outcome.result.err());
                results.entry(outcome.topic).or_default().push(result);
            }
            respond(context.api_version, ErrorCode::None, results)
        }
        Err(error) => refuse(runtime_error_code(&error), &error.to_string()),
    }
}

fn partition_result(partition_id: i32, error: Option<ControllerError>) -> PartitionResult {
    let result = PartitionResult::default().with_partition_id(partition_id);
    match error {
        None => result,
        Some(error) => result
            .with_error_code(controller_error_code(&error).code())
            .with_error_message(Some(StrBytes::from_string(error.to_string()))),
    }
}

/// Every requested partition with `code`.
fn failed(requested: &[(String, i32)], code: ErrorCode, message: &str) -> Results {
    let mut results = Results::new();
    for (topic, partition_id) in requested {
        results.entry(topic.clone()).or_default().push(
            PartitionResult::default()
                .with_partition_id(*partition_id)
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message.to_owned()))),
        );
    }
    results
}

/// The response; the top-level error code exists from v1 on.
fn respond(version: i16, code: ErrorCode, results: Results) -> Reply {
    let code = if version >= 1 { code } else { ErrorCode::None };
    let results = results
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(StrBytes::from_string(topic).into())
                .with_partition_result(partitions)
        })
        .collect();
    Reply::Response(Response::ElectLeaders(
        ElectLeadersResponse::default()
            .with_error_code(code.code())
            .with_replica_election_results(results),
    ))
}
