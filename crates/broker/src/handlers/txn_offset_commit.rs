//! TxnOffsetCommit: offsets committed inside a transaction. They are
//! written to the group's `__consumer_offsets` partition as the producer's
//! transactional records and stay pending until the transaction's marker
//! lands there: a commit makes them the group's offsets, an abort drops
//! them. v3+ carry the consumer's generation and member id (KIP-447),
//! checked against the group so a zombie consumer cannot commit.
//!
//! As for OffsetCommit, a partition of a topic the principal may not READ
//! is answered `TOPIC_AUTHORIZATION_FAILED` and an unknown partition
//! `UNKNOWN_TOPIC_OR_PARTITION`; the others go to the coordinator. (WRITE
//! on the transactional id and READ on the group are checked before, for
//! the whole request.)

use std::collections::HashMap;

use strom_coordinator::{
    GroupError, OffsetCommitPartition, PartitionResults, TxnOffsetCommitRequest as TxnCommit,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use strom_protocol::kafka::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use strom_protocol::messages::Response;

use super::errors::{group_error_code, group_result_code};
use super::{partitions, BrokerContext};

/// Handles a TxnOffsetCommit request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: TxnOffsetCommitRequest,
) -> Reply {
    let refusal = partitions::offset_refusals(
        broker,
        context,
        request.topics.iter().map(|topic| topic.name.0.as_str()),
    );
    let skipped: HashMap<(String, i32), ErrorCode> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().filter_map(|partition| {
                let index = partition.partition_index;
                refusal(&topic.name.0, index).map(|code| ((topic.name.0.to_string(), index), code))
            })
        })
        .collect();
    let commit = commit_request(context.api_version, &request, &skipped);
    let result = if commit.partitions.is_empty() {
        Ok(PartitionResults::new())
    } else {
        broker
            .groups
            .coordinator
            .commit_transactional_offsets(&commit)
            .await
    };
    Reply::Response(Response::TxnOffsetCommit(response(
        &request, result, &skipped,
    )))
}

fn commit_request(
    version: i16,
    request: &TxnOffsetCommitRequest,
    skipped: &HashMap<(String, i32), ErrorCode>,
) -> TxnCommit {
    let known = |topic: &str, partition: i32| !skipped.contains_key(&(topic.to_owned(), partition));
    TxnCommit {
        group_id: request.group_id.0.to_string(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        generation_id: if version >= 3 {
            request.generation_id
        } else {
            -1
        },
        member_id: if version >= 3 {
            request.member_id.to_string()
        } else {
            String::new()
        },
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
        partitions: request
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .filter(move |partition| known(&topic.name.0, partition.partition_index))
                    .map(move |partition| OffsetCommitPartition {
                        topic: topic.name.0.to_string(),
                        partition: partition.partition_index,
                        offset: partition.committed_offset,
                        leader_epoch: (version >= 2 && partition.committed_leader_epoch >= 0)
                            .then_some(partition.committed_leader_epoch),
                        metadata: partition
                            .committed_metadata
                            .as_ref()
                            .map(ToString::to_string),
                        commit_timestamp_ms: None,
                    })
            })
            .collect(),
    }
}

fn response(
    request: &TxnOffsetCommitRequest,
    result: Result<PartitionResults, GroupError>,
    skipped: &HashMap<(String, i32), ErrorCode>,
) -> TxnOffsetCommitResponse {
    let code_for = |topic: &str, partition: i32| -> i16 {
        if let Some(code) = skipped.get(&(topic.to_owned(), partition)) {
            return code.code();
        }
        match &result {
            Err(error) => group_error_code(error).code(),
            Ok(results) => results
                .iter()
                .find(|(key, _)| key.topic == topic && key.partition == partition)
                .map_or(0, |(_, result)| group_result_code(result)),
        }
    };
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(partition.partition_index)
                        .with_error_code(code_for(&topic.name.0, partition.partition_index))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
