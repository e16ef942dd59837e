//! DeleteTopics: by name, or by id from v6; the controller records the
//! deletion and the broker then deletes the partition logs.

use strom_controller::controller::{DeleteOutcome, TopicReference};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::delete_topics_response::DeletableTopicResult;
use strom_protocol::kafka::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use uuid::Uuid;

use super::errors::{controller_error_code, runtime_error_code};
use super::mutation_quota::{split, MutationQuota};
use super::BrokerContext;

/// Handles a DeleteTopics request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DeleteTopicsRequest,
) -> Reply {
    let (references, mut denied) = allowed_topics(
        broker,
        context,
        requested_topics(context.api_version, request),
    );
    let mut quota = MutationQuota::new(broker, context, 5, false);
    let image = broker.controller.image();
    let (references, throttled) = split(&mut quota, references, |reference| {
        let topic = match reference {
            TopicReference::Name(name) => image.topic_by_name(name),
            TopicReference::Id(id) => image.topic_by_id(*id),
        };
        topic.map_or(0, |topic| {
            u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX)
        })
    });
    let mut results: Vec<DeletableTopicResult> = if !broker.config.delete_topic_enable {
        references
            .iter()
            .map(|reference| failed(reference, ErrorCode::TopicDeletionDisabled, None))
            .collect()
    } else {
        match broker.controller.delete_topics(references.clone()).await {
            Ok(outcomes) => {
                broker.sync_metadata();
                outcomes.into_iter().map(result_of).collect()
            }
            Err(error) => references
                .iter()
                .map(|reference| {
                    failed(
                        reference,
                        runtime_error_code(&error),
                        Some(error.to_string()),
                    )
                })
                .collect(),
        }
    };
    results.append(&mut denied);
    results.extend(
        throttled
            .iter()
            .map(|reference| failed(reference, ErrorCode::ThrottlingQuotaExceeded, None)),
    );
    let throttle_ms = quota.map_or(0, MutationQuota::finish);
    Reply::Response(Response::DeleteTopics(
        DeleteTopicsResponse::default()
            .with_responses(results)
            .with_throttle_time_ms(throttle_ms),
    ))
}

/// Splits the references into those the principal may DELETE and the
/// refusals of the others.
fn allowed_topics(
    broker: &BrokerContext,
    context: &RequestContext,
    references: Vec<TopicReference>,
) -> (Vec<TopicReference>, Vec<DeletableTopicResult>) {
    use super::authorization::authorize;
    use strom_protocol::acl::{operation, resource};
    let image = broker.controller.image();
    let mut allowed = Vec::new();
    let mut denied = Vec::new();
    for reference in references {
        let name = match &reference {
            TopicReference::Name(name) => Some(name.clone()),
            TopicReference::Id(id) => image.topic_by_id(*id).map(|topic| topic.name.clone()),
        };
        match name {
            Some(name)
                if !authorize(broker, context, operation::DELETE, resource::TOPIC, &name) =>
            {
                denied.push(failed(
                    &reference,
                    ErrorCode::TopicAuthorizationFailed,
                    None,
                ));
            }
            _ => allowed.push(reference),
        }
    }
    (allowed, denied)
}

/// The topics a request names: `topic_names` before v6, `topics` (name or
/// id) from v6.
fn requested_topics(api_version: i16, request: DeleteTopicsRequest) -> Vec<TopicReference> {
    if api_version < 6 {
        return request
            .topic_names
            .into_iter()
            .map(|name| TopicReference::Name(name.0.to_string()))
            .collect();
    }
    request
        .topics
        .into_iter()
        .map(|topic| match topic.name {
            Some(name) => TopicReference::Name(name.0.to_string()),
            None => TopicReference::Id(topic.topic_id),
        })
        .collect()
}

fn result_of(outcome: DeleteOutcome) -> DeletableTopicResult {
    match outcome.result {
        Ok(deleted) => DeletableTopicResult::default()
            .with_name(Some(TopicName(StrBytes::from_string(deleted.name))))
            .with_topic_id(deleted.topic_id),
        Err(error) => failed(
            &outcome.topic,
            controller_error_code(&error),
            Some(error.to_string()),
        ),
    }
}

fn failed(
    reference: &TopicReference,
    error: ErrorCode,
    message: Option<String>,
) -> DeletableTopicResult {
    let (name, topic_id) = match reference {
        TopicReference::Name(name) => (
            Some(TopicName(StrBytes::from_string(name.clone()))),
            Uuid::nil(),
        ),
        TopicReference::Id(topic_id) => (None, *topic_id),
    };
    DeletableTopicResult::default()
        .with_name(name)
        .with_topic_id(topic_id)
        .with_error_code(error.code())
        .with_error_message(message.map(StrBytes::from_string))
}
