//! CreatePartitions: grows topics; the controller validates the new count
//! and any explicit assignments.

use strom_controller::controller::{
    CreatePartitionsRequest as ControllerRequest, PartitionsIncrease,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_partitions_request::CreatePartitionsTopic;
use strom_protocol::kafka::messages::create_partitions_response::CreatePartitionsTopicResult;
use strom_protocol::kafka::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::errors::{controller_error_code, runtime_error_code};
use super::mutation_quota::{split, MutationQuota};
use super::BrokerContext;

/// Handles a CreatePartitions request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: CreatePartitionsRequest,
) -> Reply {
    use super::authorization::authorize;
    let (allowed, denied): (Vec<_>, Vec<_>) = request.topics.iter().partition(|topic| {
        authorize(
            broker,
            context,
            operation::ALTER,
            resource::TOPIC,
            &topic.name,
        )
    });
    let mut quota = MutationQuota::new(broker, context, 3, request.validate_only);
    let image = broker.controller.image();
    let (allowed, throttled) = split(&mut quota, allowed, |topic| {
        let current = image
            .topic_by_name(&topic.name)
            .map_or(0, |found| found.partitions.len());
        u32::try_from(topic.count)
            .unwrap_or(0)
            .saturating_sub(u32::try_from(current).unwrap_or(u32::MAX))
    });
    let results = create(broker, &allowed, request.validate_only).await;
    let refused = denied.into_iter().map(|topic| {
        CreatePartitionsTopicResult::default()
            .with_name(topic.name.clone())
            .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
    });
    let throttled = throttled.into_iter().map(|topic| {
        CreatePartitionsTopicResult::default()
            .with_name(topic.name.clone())
            .with_error_code(ErrorCode::ThrottlingQuotaExceeded.code())
    });
    let results: Vec<_> = results
        .into_iter()
        .chain(refused)
        .chain(throttled)
        .collect();
    let throttle_ms = quota.map_or(0, MutationQuota::finish);
    Reply::Response(Response::CreatePartitions(
        CreatePartitionsResponse::default()
            .with_results(results)
            .with_throttle_time_ms(throttle_ms),
    ))
}

/// Asks the controller to grow `topics`; one result per topic.
async fn create(
    broker: &BrokerContext,
    topics: &[&CreatePartitionsTopic],
    validate_only: bool,
) -> Vec<CreatePartitionsTopicResult> {
    let topics: Vec<PartitionsIncrease> = topics.iter().map(|topic| increase(topic)).collect();
    let names: Vec<String> = topics.iter().map(|topic| topic.topic.clone()).collect();
    let controller_request = ControllerRequest {
        topics,
        validate_only,
    };
    match broker
        .controller
        .create_partitions(controller_request)
        .await
    {
        Ok(outcomes) => {
            broker.sync_metadata();
            outcomes
                .into_iter()
                .map(|outcome| {
                    let result = CreatePartitionsTopicResult::default()
                        .with_name(StrBytes::from_string(outcome.name).into());
                    match outcome.result {
                        Ok(()) => result,
                        Err(error) => result
                            .with_error_code(controller_error_code(&error).code())
                            .with_error_message(Some(StrBytes::from_string(error.to_string()))),
                    }
                })
                .collect()
        }
        Err(error) => names
            .into_iter()
            .map(|name| {
                CreatePartitionsTopicResult::default()
                    .with_name(StrBytes::from_string(name).into())
                    .with_error_code(runtime_error_code(&error).code())
                    .with_error_message(Some(StrBytes::from_string(error.to_string())))
            })
            .collect(),
    }
}

/// The controller's form of one topic's request.
fn increase(topic: &CreatePartitionsTopic) -> PartitionsIncrease {
    PartitionsIncrease {
        topic: topic.name.0.to_string(),
        count: topic.count,
        assignments: topic.assignments.as_ref().map(|assignments| {
            assignments
                .iter()
                .map(|assignment| assignment.broker_ids.iter().map(|id| id.0).collect())
                .collect()
        }),
    }
}
