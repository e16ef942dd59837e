//! OffsetCommit: per-partition results; the answer is deferred until every
//! in-sync replica of the group's `__consumer_offsets` partition has the
//! offsets (Kafka's coordinator appends with acks -1), or the wait fails
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT after
//! `offsets.commit.timeout.ms`). v2-v4 carry a retention time, v6+ leader
//! epochs, v7+ the group instance id.
//!
//! As in Kafka, a partition of a topic the principal may not READ is
//! answered `TOPIC_AUTHORIZATION_FAILED`, a partition that does not exist
//! (unknown topic, or an index beyond the topic's partition count)
//! `UNKNOWN_TOPIC_OR_PARTITION`; neither reaches the coordinator, and the
//! others are committed. (READ on the group is checked before, for the
//! whole request.)

use std::collections::HashMap;

use strom_coordinator::{
    GroupError, OffsetCommitPartition, OffsetCommitRequest as CommitRequest, PartitionResults,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strom_protocol::kafka::messages::{OffsetCommitRequest, OffsetCommitResponse};
use strom_protocol::messages::Response;

use super::errors::{group_error_code, group_result_code};
use super::{partitions, BrokerContext};

/// Handles an OffsetCommit request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: OffsetCommitRequest,
) -> Reply {
    let skipped = skipped_partitions(broker, context, &request);
    let commit = commit_request(context.api_version, &request, &skipped);
    // Nothing left to commit: Kafka answers without asking the coordinator.
    if commit.partitions.is_empty() {
        let result = Ok(PartitionResults::new());
        return Reply::Response(Response::OffsetCommit(response(&request, result, &skipped)));
    }
    // Applied and appended now, in the connection's request order (the
    // deferred answers run concurrently); the answer waits until the
    // in-sync replicas of the group's `__consumer_offsets` partition have
    // the commit.
    let committed = broker.groups.coordinator.begin_commit_offsets(&commit);
    Reply::Deferred(Box::pin(async move {
        let result = committed.await;
        Some(Response::OffsetCommit(response(&request, result, &skipped)).into())
    }))
}

/// The refusals of `request`'s partitions, decided now (the answer may be
/// built later).
fn skipped_partitions(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &OffsetCommitRequest,
) -> impl Skipped {
    let refusal = partitions::offset_refusals(
        broker,
        context,
        request.topics.iter().map(|topic| topic.name.0.as_str()),
    );
    let refused: HashMap<(String, i32), ErrorCode> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().filter_map(|partition| {
                let index = partition.partition_index;
                refusal(&topic.name.0, index).map(|code| ((topic.name.0.to_string(), index), code))
            })
        })
        .collect();
    move |topic: &str, partition: i32| refused.get(&(topic.to_owned(), partition)).copied()
}

/// Why a partition does not reach the coordinator, if it does not.
trait Skipped: Fn(&str, i32) -> Option<ErrorCode> + Send + 'static {}

impl<F: Fn(&str, i32) -> Option<ErrorCode> + Send + 'static> Skipped for F {}

/// The coordinator's request: the partitions of `request` not skipped.
fn commit_request(
    version: i16,
    request: &OffsetCommitRequest,
    skipped: &impl Skipped,
) -> CommitRequest {
    CommitRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
        retention_time_ms: (version <= 4 && request.retention_time_ms != -1)
            .then_some(request.retention_time_ms),
        partitions: request
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .filter(|partition| skipped(&topic.name.0, partition.partition_index).is_none())
                    .map(move |partition| OffsetCommitPartition {
                        topic: topic.name.0.to_string(),
                        partition: partition.partition_index,
                        offset: partition.committed_offset,
                        leader_epoch: (version >= 6 && partition.committed_leader_epoch >= 0)
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
    request: &OffsetCommitRequest,
    result: Result<PartitionResults, GroupError>,
    skipped: &impl Skipped,
) -> OffsetCommitResponse {
    let code_for = |topic: &str, partition: i32| -> i16 {
        if let Some(code) = skipped(topic, partition) {
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
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|topic| {
                OffsetCommitResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|partition| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(partition.partition_index)
                                    .with_error_code(code_for(
                                        &topic.name.0,
                                        partition.partition_index,
                                    ))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}
