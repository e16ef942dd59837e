//! ConsumerGroupHeartbeat (KIP-848): a consumer-protocol member joins,
//! heartbeats and leaves; the coordinator answers its epoch and, when it
//! changed, its assignment. READ on the group is checked before the
//! handler runs ([`super::authorize_request`]); DESCRIBE on every
//! subscribed topic name here (TOPIC_AUTHORIZATION_FAILED otherwise), as
//! Kafka does. Topics a regular-expression subscription matches are not
//! filtered by ACLs (Kafka 4 leaves out those the member may not
//! describe); Fetch still needs READ on them.

use strom_controller::image::MetadataImage;
use strom_coordinator::{
    Assignment, ConsumerHeartbeat, ConsumerHeartbeatResponse, TopicCatalog, TopicMetadata,
};
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions as WireTopicPartitions,
};
use strom_protocol::kafka::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::may_describe_topic;
use super::errors::group_error_code;
use super::BrokerContext;

/// The metadata image as the coordinator's topic catalog.
pub(crate) struct ImageCatalog<'a>(pub(crate) &'a MetadataImage);

impl TopicCatalog for ImageCatalog<'_> {
    fn topic(&self, name: &str) -> Option<TopicMetadata> {
        let topic = self.0.topic_by_name(name)?;
        Some(TopicMetadata {
            topic_id: topic.id,
            partitions: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
        })
    }

    fn topic_names(&self) -> Vec<String> {
        self.0.topics().map(|topic| topic.name.clone()).collect()
    }
}

/// Handles a ConsumerGroupHeartbeat request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ConsumerGroupHeartbeatRequest,
) -> Reply {
    let refused_topic = request
        .subscribed_topic_names
        .iter()
        .flatten()
        .find(|topic| !may_describe_topic(broker, context, &topic.0));
    if let Some(topic) = refused_topic {
        let message = format!("Topic {} is not authorized.", topic.0);
        return error_reply(ErrorCode::TopicAuthorizationFailed, message);
    }
    let heartbeat = coordinator_request(context, &request);
    let image = broker.controller.image();
    let result = broker.groups.coordinator.consumer_heartbeat(
        &request.group_id.0,
        &heartbeat,
        &ImageCatalog(&image),
    );
    match result {
        Ok(response) => Reply::Response(Response::ConsumerGroupHeartbeat(wire_response(response))),
        Err(error) => error_reply(group_error_code(&error), error.to_string()),
    }
}

fn error_reply(code: ErrorCode, message: String) -> Reply {
    Reply::Response(Response::ConsumerGroupHeartbeat(
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    ))
}

fn coordinator_request(
    context: &RequestContext,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerHeartbeat {
    let text = |value: &Option<StrBytes>| value.as_ref().map(ToString::to_string);
    let owned_partitions = request.topic_partitions.as_ref().map(|topics| {
        let mut owned = Assignment::new();
        for topic in topics {
            owned
                .entry(topic.topic_id)
                .or_default()
                .extend(topic.partitions.iter().copied());
        }
        owned
    });
    ConsumerHeartbeat {
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        // v1 (KIP-1082): the client generates its member id.
        member_id_required: context.api_version >= 1,
        instance_id: text(&request.instance_id),
        rack_id: text(&request.rack_id),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|name| name.0.to_string()).collect()),
        subscribed_topic_regex: text(&request.subscribed_topic_regex),
        server_assignor: text(&request.server_assignor),
        owned_partitions,
        client_id: context.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", context.peer.ip()),
    }
}

fn wire_response(response: ConsumerHeartbeatResponse) -> ConsumerGroupHeartbeatResponse {
    let assignment = response.assignment.map(|assignment| {
        WireAssignment::default().with_topic_partitions(
            assignment
                .into_iter()
                .map(|(topic_id, partitions)| {
                    WireTopicPartitions::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions.into_iter().collect())
                })
                .collect(),
        )
    });
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(StrBytes::from_string(response.member_id)))
        .with_member_epoch(response.member_epoch)
        .with_heartbeat_interval_ms(response.heartbeat_interval_ms)
        .with_assignment(assignment)
}
