//! OffsetDelete: removes a group's committed offsets for partitions of
//! topics it does not subscribe to.

use strom_protocol::kafka::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use strom_protocol::kafka::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use strom_protocol::messages::Response;

use super::errors::{group_error_code, group_result_code};
use super::BrokerContext;
use crate::network::{Reply, RequestContext};

/// Handles an OffsetDelete request.
pub fn handle(
    broker: &BrokerContext,
    _context: &RequestContext,
    request: OffsetDeleteRequest,
) -> Reply {
    let topics: Vec<(String, Vec<i32>)> = request
        .topics
        .iter()
        .map(|topic| {
            (
                topic.name.0.to_string(),
                topic
                    .partitions
                    .iter()
                    .map(|partition| partition.partition_index)
                    .collect(),
            )
        })
        .collect();
    let response = match broker
        .groups
        .coordinator
        .delete_offsets(&request.group_id.0, &topics)
    {
        Err(error) => {
            OffsetDeleteResponse::default().with_error_code(group_error_code(&error).code())
        }
        Ok(results) => OffsetDeleteResponse::default().with_topics(
            request
                .topics
                .iter()
                .map(|topic| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(topic.name.clone())
                        .with_partitions(
                            topic
                                .partitions
                                .iter()
                                .map(|partition| {
                                    let code = results
                                        .iter()
                                        .find(|(key, _)| {
                                            key.topic == topic.name.0.as_str()
                                                && key.partition == partition.partition_index
                                        })
                                        .map_or(0, |(_, result)| group_result_code(result));
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(partition.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    };
    Reply::Response(Response::OffsetDelete(response))
}
