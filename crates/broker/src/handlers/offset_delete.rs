//! OffsetDelete: removes a group's committed offsets for partitions of
//! topics it does not subscribe to.
//!
//! As in Kafka, a partition of a topic the principal may not READ is
//! answered `TOPIC_AUTHORIZATION_FAILED`, a partition that does not exist
//! `UNKNOWN_TOPIC_OR_PARTITION`; neither reaches the coordinator. A group
//! error (`GROUP_ID_NOT_FOUND`, ...) is the top-level code. (DELETE on the
//! group is checked before, for the whole request.)

use strom_coordinator::{GroupError, PartitionResults};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use strom_protocol::kafka::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use strom_protocol::messages::Response;

use super::errors::{group_error_code, group_result_code};
use super::{partitions, BrokerContext};

/// Handles an OffsetDelete request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: OffsetDeleteRequest,
) -> Reply {
    let skipped = partitions::offset_refusals(
        broker,
        context,
        request.topics.iter().map(|topic| topic.name.0.as_str()),
    );
    // Refused and unknown partitions never reach the coordinator.
    let topics: Vec<(String, Vec<i32>)> = request
        .topics
        .iter()
        .filter_map(|topic| {
            let indexes: Vec<i32> = topic
                .partitions
                .iter()
                .map(|partition| partition.partition_index)
                .filter(|index| skipped(&topic.name.0, *index).is_none())
                .collect();
            (!indexes.is_empty()).then(|| (topic.name.0.to_string(), indexes))
        })
        .collect();
    let result = if topics.is_empty() {
        Ok(PartitionResults::new())
    } else {
        broker
            .groups
            .coordinator
            .delete_offsets(&request.group_id.0, &topics)
    };
    Reply::Response(Response::OffsetDelete(response(&request, result, &skipped)))
}

fn response(
    request: &OffsetDeleteRequest,
    result: Result<PartitionResults, GroupError>,
    skipped: &impl Fn(&str, i32) -> Option<ErrorCode>,
) -> OffsetDeleteResponse {
    let (top_level, results) = match result {
        Ok(results) => (ErrorCode::None.code(), results),
        Err(error) => (group_error_code(&error).code(), PartitionResults::new()),
    };
    let code_for = |topic: &str, partition: i32| {
        if let Some(code) = skipped(topic, partition) {
            return Some(code.code());
        }
        results
            .iter()
            .find(|(key, _)| key.topic == topic && key.partition == partition)
            .map(|(_, result)| group_result_code(result))
    };
    let topics = request
        .topics
        .iter()
        .filter_map(|topic| {
            let partitions: Vec<OffsetDeleteResponsePartition> = topic
                .partitions
                .iter()
                .filter_map(|partition| {
                    // After a group error only the partitions that never
                    // reached the coordinator have an answer of their own.
                    let code = code_for(&topic.name.0, partition.partition_index)
                        .or((top_level == 0).then_some(0))?;
                    Some(
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(partition.partition_index)
                            .with_error_code(code),
                    )
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions)
            })
        })
        .collect();
    OffsetDeleteResponse::default()
        .with_error_code(top_level)
        .with_topics(topics)
}
