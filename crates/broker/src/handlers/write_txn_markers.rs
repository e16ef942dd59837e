//! WriteTxnMarkers: a transaction coordinator on another broker asks this
//! partition leader to write commit or abort markers. Needs CLUSTER_ACTION
//! on the cluster (brokers only). Each partition is answered with its own
//! code: not led here, unknown, a fenced producer epoch or coordinator
//! epoch, or not replicated in time.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::write_txn_markers_request::WritableTxnMarker;
use strom_protocol::kafka::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use strom_protocol::kafka::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use strom_protocol::messages::Response;
use strom_storage::marker::{MarkerKind, TransactionMarker};
use strom_storage::TopicPartition;

use super::authorization::authorize;
use super::BrokerContext;
use crate::markers::write_local;

/// Handles a WriteTxnMarkers request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: WriteTxnMarkersRequest,
) -> Reply {
    let allowed = authorize(
        broker,
        context,
        operation::CLUSTER_ACTION,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    let mut results = Vec::with_capacity(request.markers.len());
    for marker in &request.markers {
        results.push(write_marker(broker, marker, allowed).await);
    }
    Reply::Response(Response::WriteTxnMarkers(
        WriteTxnMarkersResponse::default().with_markers(results),
    ))
}

async fn write_marker(
    broker: &BrokerContext,
    request: &WritableTxnMarker,
    allowed: bool,
) -> WritableTxnMarkerResult {
    let marker = TransactionMarker {
        bumps_epoch: false,
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        coordinator_epoch: request.coordinator_epoch,
        kind: if request.transaction_result {
            MarkerKind::Commit
        } else {
            MarkerKind::Abort
        },
    };
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        for index in &topic.partition_indexes {
            let code = if allowed {
                let topic_partition = TopicPartition::new(topic.name.to_string(), *index);
                match write_local(&broker.replicas, &broker.groups, &topic_partition, &marker).await
                {
                    Ok(()) => ErrorCode::None,
                    Err(code) => code,
                }
            } else {
                ErrorCode::ClusterAuthorizationFailed
            };
            partitions.push(
                WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(*index)
                    .with_error_code(code.code()),
            );
        }
        topics.push(
            WritableTxnMarkerTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    WritableTxnMarkerResult::default()
        .with_producer_id(request.producer_id)
        .with_topics(topics)
}
