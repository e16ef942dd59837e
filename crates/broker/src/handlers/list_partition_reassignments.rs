//! ListPartitionReassignments (v0): the ongoing reassignments, of every
//! partition (null topics) or of the named ones (partitions that do not
//! exist or are not being reassigned are left out, as Kafka does), read
//! from the active controller's image (Kafka forwards the request to its
//! controller too), so an answer never lags a reassignment the controller
//! has started or completed. Needs DESCRIBE on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED at the top level); a controller that
//! cannot answer gives the top-level code of any forwarded request.

use std::collections::BTreeMap;

use strom_controller::controller::OngoingReassignment;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use strom_protocol::kafka::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::errors::runtime_error_code;
use super::BrokerContext;

/// Handles a ListPartitionReassignments request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> Reply {
    let respond = |response: ListPartitionReassignmentsResponse| {
        Reply::Response(Response::ListPartitionReassignments(response))
    };
    let refuse = |code: ErrorCode, message: String| {
        respond(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        )
    };
    if !authorize(
        broker,
        context,
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return refuse(
            ErrorCode::ClusterAuthorizationFailed,
            "DESCRIBE on the cluster is required".to_owned(),
        );
    }
    let named: Option<Vec<(String, i32)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|topic| {
                let name = topic.name.0.to_string();
                topic
                    .partition_indexes
                    .iter()
                    .map(move |index| (name.clone(), *index))
            })
            .collect()
    });
    match broker.controller.list_partition_reassignments(named).await {
        Ok(ongoing) => {
            respond(ListPartitionReassignmentsResponse::default().with_topics(topics(ongoing)))
        }
        Err(error) => refuse(runtime_error_code(&error), error.to_string()),
    }
}

/// The ongoing reassignments, by topic.
fn topics(ongoing: Vec<OngoingReassignment>) -> Vec<OngoingTopicReassignment> {
    let brokers = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for reassignment in ongoing {
        by_topic.entry(reassignment.topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(reassignment.partition_index)
                .with_replicas(brokers(reassignment.replicas))
                .with_adding_replicas(brokers(reassignment.adding_replicas))
                .with_removing_replicas(brokers(reassignment.removing_replicas)),
        );
    }
    by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(StrBytes::from_string(name).into())
                .with_partitions(partitions)
        })
        .collect()
}
