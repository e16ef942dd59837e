//! ListPartitionReassignments (v0): the ongoing reassignments, of every
//! partition (null topics) or of the named ones (partitions that do not
//! exist or are not being reassigned are left out, as Kafka does), from
//! this node's metadata image. Needs DESCRIBE on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED at the top level).

use std::collections::BTreeMap;

use strom_controller::controller::ongoing_reassignments;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use strom_protocol::kafka::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::BrokerContext;
use crate::network::{Reply, RequestContext};
use crate::security::authorizer::{authorize, operation, resource, CLUSTER_NAME};

/// Handles a ListPartitionReassignments request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> Reply {
    let respond = |response: ListPartitionReassignmentsResponse| {
        Reply::Response(Response::ListPartitionReassignments(response))
    };
    if !authorize(
        broker,
        context,
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return respond(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "DESCRIBE on the cluster is required",
                ))),
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
    let image = broker.controller.image();
    let brokers = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let mut by_topic: BTreeMap<&str, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for (topic, partition_index, partition) in ongoing_reassignments(&image, named.as_deref()) {
        by_topic.entry(topic).or_default().push(
            OngoingPartitionReassignment::default()
                .with_partition_index(partition_index)
                .with_replicas(brokers(&partition.replicas))
                .with_adding_replicas(brokers(&partition.adding_replicas))
                .with_removing_replicas(brokers(&partition.removing_replicas)),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(StrBytes::from_string(name.to_owned()).into())
                .with_partitions(partitions)
        })
        .collect();
    respond(ListPartitionReassignmentsResponse::default().with_topics(topics))
}
