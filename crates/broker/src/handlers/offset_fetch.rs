//! OffsetFetch: v1-v7 ask about one group (null topics = all, v2+), v8+
//! about several groups at once. Leader epochs from v5.
//!
//! Authorization as in Kafka: each group needs DESCRIBE on it (v8+: that
//! group alone is answered GROUP_AUTHORIZATION_FAILED; v0-v7 are refused
//! before this handler); each named topic needs DESCRIBE, or its
//! partitions are answered TOPIC_AUTHORIZATION_FAILED without asking the
//! coordinator; when all topics are asked for, those the principal may not
//! DESCRIBE are left out.

use strom_coordinator::{GroupError, PartitionOffset};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::operation;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use strom_protocol::kafka::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::{may_describe_topic, may_on_group};
use super::errors::group_error_code;
use super::BrokerContext;

/// Topics asked about: `None` for all.
type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// One partition's answer, whatever the response version.
struct Answer {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: String,
    error_code: i16,
}

/// Answers by topic, in the order of the response.
type TopicAnswers = Vec<(String, Vec<Answer>)>;

/// Handles an OffsetFetch request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: OffsetFetchRequest,
) -> Reply {
    let response = if context.api_version >= 8 {
        multi_group(broker, context, &request)
    } else {
        single_group(broker, context, &request)
    };
    Reply::Response(Response::OffsetFetch(response))
}

/// The offsets of `group_id` the principal may see (see the module doc);
/// with `require_stable` (v7+), partitions an open transaction holds
/// offsets of answer UNSTABLE_OFFSET_COMMIT.
fn group_offsets(
    broker: &BrokerContext,
    context: &RequestContext,
    group_id: &str,
    wanted: &Wanted,
    require_stable: bool,
) -> Result<TopicAnswers, GroupError> {
    let may_describe = |topic: &str| may_describe_topic(broker, context, topic);
    let (allowed, refused): (Wanted, Vec<(String, Vec<i32>)>) = match wanted {
        None => (None, Vec::new()),
        Some(topics) => {
            let (allowed, refused) = topics
                .iter()
                .cloned()
                .partition(|(topic, _)| may_describe(topic));
            (Some(allowed), refused)
        }
    };
    let offsets =
        broker
            .groups
            .coordinator
            .fetch_offsets(group_id, allowed.as_deref(), require_stable)?;
    let mut answers: TopicAnswers = by_topic(offsets)
        .into_iter()
        .filter(|(topic, _)| wanted.is_some() || may_describe(topic))
        .map(|(topic, offsets)| (topic, offsets.into_iter().map(answer).collect()))
        .collect();
    let code = ErrorCode::TopicAuthorizationFailed.code();
    answers.extend(
        refused
            .into_iter()
            .map(|(topic, partitions)| (topic, error_answers(&partitions, code))),
    );
    Ok(answers)
}

fn answer(offset: PartitionOffset) -> Answer {
    Answer {
        partition: offset.partition,
        offset: offset.offset,
        leader_epoch: offset.leader_epoch.unwrap_or(-1),
        metadata: offset.metadata,
        error_code: offset
            .error
            .as_ref()
            .map_or(ErrorCode::None.code(), |error| {
                group_error_code(error).code()
            }),
    }
}

fn error_answers(partitions: &[i32], error_code: i16) -> Vec<Answer> {
    partitions
        .iter()
        .map(|partition| Answer {
            partition: *partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error_code,
        })
        .collect()
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
    context: &RequestContext,
    request: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let wanted: Wanted = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|topic| (topic.name.0.to_string(), topic.partition_indexes.clone()))
            .collect()
    });
    let (top_level, answers) = match group_offsets(
        broker,
        context,
        &request.group_id.0,
        &wanted,
        request.require_stable,
    ) {
        Ok(answers) => (ErrorCode::None.code(), answers),
        Err(error) => {
            // The error goes on every partition, and from v2 also on top
            // (v1 has no top-level code).
            let code = group_error_code(&error).code();
            let answers = wanted
                .iter()
                .flatten()
                .map(|(topic, partitions)| (topic.clone(), error_answers(partitions, code)))
                .collect();
            let top_level = if context.api_version >= 2 { code } else { 0 };
            (top_level, answers)
        }
    };
    let topics = answers
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|answer| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(answer.partition)
                                .with_committed_offset(answer.offset)
                                .with_committed_leader_epoch(answer.leader_epoch)
                                .with_metadata(Some(StrBytes::from_string(answer.metadata)))
                                .with_error_code(answer.error_code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default()
        .with_error_code(top_level)
        .with_topics(topics)
}

fn multi_group(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let groups = request
        .groups
        .iter()
        .map(|group| {
            let answer = OffsetFetchResponseGroup::default().with_group_id(group.group_id.clone());
            if !may_on_group(broker, context, operation::DESCRIBE, &group.group_id) {
                return answer.with_error_code(ErrorCode::GroupAuthorizationFailed.code());
            }
            let wanted: Wanted = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|topic| (topic.name.0.to_string(), topic.partition_indexes.clone()))
                    .collect()
            });
            // v9+ (KIP-848): a consumer group's member fetches at its epoch.
            let member_checked = broker.groups.coordinator.validate_offset_fetch(
                &group.group_id.0,
                group.member_id.as_deref(),
                group.member_epoch,
            );
            let fetched = member_checked.and_then(|()| {
                group_offsets(
                    broker,
                    context,
                    &group.group_id.0,
                    &wanted,
                    request.require_stable,
                )
            });
            match fetched {
                Ok(answers) => answer.with_topics(group_topics(answers)),
                Err(error) => answer.with_error_code(group_error_code(&error).code()),
            }
        })
        .collect();
    OffsetFetchResponse::default()
        .with_error_code(ErrorCode::None.code())
        .with_groups(groups)
}

fn group_topics(answers: TopicAnswers) -> Vec<OffsetFetchResponseTopics> {
    answers
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopics::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|answer| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(answer.partition)
                                .with_committed_offset(answer.offset)
                                .with_committed_leader_epoch(answer.leader_epoch)
                                .with_metadata(Some(StrBytes::from_string(answer.metadata)))
                                .with_error_code(answer.error_code)
                        })
                        .collect(),
                )
        })
        .collect()
}
