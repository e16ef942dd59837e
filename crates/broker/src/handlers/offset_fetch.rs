//! OffsetFetch: v1-v7 ask about one group (null topics = all, v2+), v8+
//! about several groups at once. Leader epochs from v5.

use strom_coordinator::{GroupError, PartitionOffset};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strom_protocol::kafka::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::group_error_code;
use super::BrokerContext;
use crate::network::{Reply, RequestContext};

/// Topics asked about: `None` for all.
type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// Handles an OffsetFetch request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: OffsetFetchRequest,
) -> Reply {
    let response = if context.api_version >= 8 {
        multi_group(broker, &request)
    } else {
        single_group(broker, context.api_version, &request)
    };
    Reply::Response(Response::OffsetFetch(response))
}

fn fetch(
    broker: &BrokerContext,
    group_id: &str,
    wanted: &Wanted,
) -> Result<Vec<PartitionOffset>, GroupError> {
    broker
        .groups
        .coordinator
        .fetch_offsets(group_id, wanted.as_deref())
}

/// Groups offsets by topic, in order of first appearance.
fn by_topic(offsets: Vec<PartitionOffset>) -> Vec<(String, Vec<PartitionOffset>)> {
    let mut topics: Vec<(String, Vec<PartitionOffset>)> = Vec::new();
    for offset in offsets {
        match topics.iter_mut().find(|(topic, _)| *topic == offset.topic) {
            Some((_, partitions)) => partitions.push(offset),
            None => topics.push((offset.topic.clone(), vec![offset])),
        }
    }
    topics
}

fn single_group(
    broker: &BrokerContext,
    version: i16,
    request: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let wanted: Wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|topic| (topic.name.0.to_string(), topic.partition_indexes.clone()))
            .collect()
    });
    match fetch(broker, &request.group_id.0, &wanted) {
        Ok(offsets) => OffsetFetchResponse::default().with_topics(
            by_topic(offsets)
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|offset| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(offset.partition)
                                        .with_committed_offset(offset.offset)
                                        .with_committed_leader_epoch(
                                            offset.leader_epoch.unwrap_or(-1),
                                        )
                                        .with_metadata(Some(StrBytes::from_string(offset.metadata)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(error) => {
            // The error goes on every partition, and from v2 also on top
            // (v1 has no top-level code).
            let code = group_error_code(&error).code();
            OffsetFetchResponse::default()
                .with_error_code(if version >= 2 { code } else { 0 })
                .with_topics(error_topics(&wanted, code))
        }
    }
}

fn error_topics(wanted: &Wanted, code: i16) -> Vec<OffsetFetchResponseTopic> {
    wanted
        .iter()
        .flatten()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|partition| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(*partition)
                                .with_committed_offset(-1)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(StrBytes::from_static_str("")))
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

fn multi_group(broker: &BrokerContext, request: &OffsetFetchRequest) -> OffsetFetchResponse {
    let groups = request
        .groups
        .iter()
        .map(|group| {
            let wanted: Wanted = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|topic| (topic.name.0.to_string(), topic.partition_indexes.clone()))
                    .collect()
            });
            let answer = OffsetFetchResponseGroup::default().with_group_id(group.group_id.clone());
            match fetch(broker, &group.group_id.0, &wanted) {
                Ok(offsets) => answer.with_topics(group_topics(offsets)),
                Err(error) => answer.with_error_code(group_error_code(&error).code()),
            }
        })
        .collect();
    OffsetFetchResponse::default()
        .with_error_code(ErrorCode::None.code())
        .with_groups(groups)
}

fn group_topics(offsets: Vec<PartitionOffset>) -> Vec<OffsetFetchResponseTopics> {
    by_topic(offsets)
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopics::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|offset| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(offset.partition)
                                .with_committed_offset(offset.offset)
                                .with_committed_leader_epoch(offset.leader_epoch.unwrap_or(-1))
                                .with_metadata(Some(StrBytes::from_string(offset.metadata)))
                        })
                        .collect(),
                )
        })
        .collect()
}
