//! CreateTopics: validated and recorded by the controller.

use strom_controller::assignment::RequestedAssignment;
use strom_controller::controller::{
    ConfigEntry, CreateTopicsRequest as ControllerRequest, CreatedTopic, NewTopic, TopicOutcome,
};
use strom_network::{Reply, RequestContext};

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use strom_protocol::kafka::messages::{CreateTopicsRequest, CreateTopicsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::{controller_error_code, runtime_error_code};
use super::mutation_quota::{split, MutationQuota};
use super::BrokerContext;

/// Handles a CreateTopics request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: CreateTopicsRequest,
) -> Reply {
    let (allowed, denied): (Vec<_>, Vec<_>) = request
        .topics
        .iter()
        .partition(|topic| super::metadata::may_create(broker, context, &topic.name));
    let mut quota = MutationQuota::new(broker, context, 6, request.validate_only);
    let default_partitions = broker.config.num_partitions;
    let (allowed, throttled) = split(&mut quota, allowed, |topic| {
        partitions_of(topic, default_partitions)
    });
    let topics: Vec<NewTopic> = allowed.into_iter().map(new_topic).collect();
    let names: Vec<String> = topics.iter().map(|topic| topic.name.clone()).collect();
    let controller_request = ControllerRequest {
        topics,
        validate_only: request.validate_only,
    };

    let results: Vec<CreatableTopicResult> =
        match broker.controller.create_topics(controller_request).await {
            Ok(outcomes) => {
                broker.sync_metadata();
                outcomes.into_iter().map(topic_result).collect()
            }
            Err(error) => names
                .into_iter()
                .map(|name| {
                    CreatableTopicResult::default()
                        .with_name(StrBytes::from_string(name).into())
                        .with_error_code(runtime_error_code(&error).code())
                        .with_error_message(Some(StrBytes::from_string(error.to_string())))
                })
                .collect(),
        };
    let refused = denied.into_iter().map(refused_topic);
    let throttled = throttled.into_iter().map(throttled_topic);
    let results: Vec<_> = results
        .into_iter()
        .chain(refused)
        .chain(throttled)
        .collect();
    let throttle_ms = quota.map_or(0, MutationQuota::finish);
    Reply::Response(Response::CreateTopics(
        CreateTopicsResponse::default()
            .with_topics(results)
            .with_throttle_time_ms(throttle_ms),
    ))
}

/// The partitions a topic creates (the broker's default for `-1`).
fn partitions_of(topic: &CreatableTopic, default_partitions: i32) -> u32 {
    let count = match (topic.num_partitions, topic.assignments.len()) {
        (-1, 0) => default_partitions,
        (-1, assigned) => i32::try_from(assigned).unwrap_or(i32::MAX),
        (count, _) => count,
    };
    count.max(0).unsigned_abs()
}

/// The answer for a topic refused by the controller mutation quota.
fn throttled_topic(topic: &CreatableTopic) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_error_code(ErrorCode::ThrottlingQuotaExceeded.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "the controller mutation quota is exceeded",
        )))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
}

/// The controller's view of one requested topic (`-1` counts mean "the
/// broker's default").
fn new_topic(topic: &CreatableTopic) -> NewTopic {
    NewTopic {
        name: topic.name.0.to_string(),
        partitions: (topic.num_partitions != -1).then_some(topic.num_partitions),
        replication_factor: (topic.replication_factor != -1).then_some(topic.replication_factor),
        assignments: topic
            .assignments
            .iter()
            .map(|assignment| RequestedAssignment {
                partition_index: assignment.partition_index,
                broker_ids: assignment.broker_ids.iter().map(|id| id.0).collect(),
            })
            .collect(),
        configs: topic
            .configs
            .iter()
            .map(|config| ConfigEntry {
                key: config.name.to_string(),
                value: config.value.as_ref().map(|value| value.to_string()),
            })
            .collect(),
    }
}

/// The answer for one topic the controller created or refused.
fn topic_result(outcome: TopicOutcome<CreatedTopic>) -> CreatableTopicResult {
    let result =
        CreatableTopicResult::default().with_name(StrBytes::from_string(outcome.name).into());
    match outcome.result {
        Ok(created) => result
            .with_topic_id(created.topic_id)
            .with_num_partitions(created.partitions)
            .with_replication_factor(created.replication_factor)
            .with_configs(Some(
                created
                    .configs
                    .into_iter()
                    .map(|(name, value)| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_string(name))
                            .with_value(Some(StrBytes::from_string(value)))
                            .with_config_source(1)
                    })
                    .collect(),
            )),
        Err(error) => result
            .with_error_code(controller_error_code(&error).code())
            .with_error_message(Some(StrBytes::from_string(error.to_string())))
            .with_num_partitions(-1)
            .with_replication_factor(-1),
    }
}

/// The answer for a topic the principal may not create.
fn refused_topic(topic: &CreatableTopic) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
        .with_num_partitions(-1)
        .with_replication_factor(-1)
}
