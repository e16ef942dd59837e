//! Metadata: brokers, the cluster id, and topics with their partitions,
//! auto-creating requested topics when allowed.

use std::sync::Arc;

use strom_controller::controller::{CreateTopicsRequest, NewTopic};
use strom_controller::image::{MetadataImage, TopicImage};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use strom_protocol::kafka::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use uuid::Uuid;

use super::authorization::{authorize, may_describe_topic};
use super::{authorized_operations, BrokerContext};

/// Which topics a request names.
enum Wanted {
    All,
    Named(Vec<(Option<String>, Uuid)>),
}

/// Answers a Metadata request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: MetadataRequest,
) -> Reply {
    let wanted = match request.topics {
        None => Wanted::All,
        Some(topics) if topics.is_empty() && context.api_version == 0 => Wanted::All,
        Some(topics) => Wanted::Named(
            topics
                .into_iter()
                .map(|topic| (topic.name.map(|name| name.0.to_string()), topic.topic_id))
                .collect(),
        ),
    };
    let mut image = broker.controller.image();
    if let Wanted::Named(topics) = &wanted {
        // Before v4 there is no flag and clients always allow creation.
        let allowed = context.api_version < 4 || request.allow_auto_topic_creation;
        if allowed && broker.config.auto_create_topics_enable {
            let creatable: Vec<_> = topics
                .iter()
                .filter(|(name, _)| {
                    name.as_ref()
                        .is_some_and(|name| may_create(broker, context, name))
                })
                .cloned()
                .collect();
            image = auto_create(broker, &image, &creatable).await;
        }
    }
    let mut response = response(broker, context, &image, &wanted);
    // KIP-430: the operations the authorizer allows (all without one).
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations =
            authorized_operations::cluster_allowed(|operation| {
                authorize(broker, context, operation, resource::CLUSTER, CLUSTER_NAME)
            });
    }
    if request.include_topic_authorized_operations {
        for topic in response
            .topics
            .iter_mut()
            .filter(|topic| topic.error_code == 0)
        {
            let name = topic
                .name
                .as_ref()
                .map(|name| name.0.to_string())
                .unwrap_or_default();
            topic.topic_authorized_operations = authorized_operations::topic_allowed(|operation| {
                authorize(broker, context, operation, resource::TOPIC, &name)
            });
        }
    }
    Reply::Response(Response::Metadata(response))
}

/// CREATE on the cluster or on the topic (auto-creation, CreateTopics).
pub(crate) fn may_create(broker: &BrokerContext, context: &RequestContext, topic: &str) -> bool {
    authorize(
        broker,
        context,
        operation::CREATE,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) || authorize(broker, context, operation::CREATE, resource::TOPIC, topic)
}

async fn auto_create(
    broker: &BrokerContext,
    image: &Arc<MetadataImage>,
    topics: &[(Option<String>, Uuid)],
) -> Arc<MetadataImage> {
    let missing: Vec<NewTopic> = topics
        .iter()
        .filter_map(|(name, _)| name.as_ref())
        .filter(|name| image.topic_by_name(name).is_none())
        .map(|name| NewTopic {
            name: name.clone(),
            ..NewTopic::default()
        })
        .collect();
    if missing.is_empty() {
        return Arc::clone(image);
    }
    let request = CreateTopicsRequest {
        topics: missing,
        validate_only: false,
    };
    if let Err(error) = broker.controller.create_topics(request).await {
        tracing::warn!(%error, "auto-creating topics failed");
    }
    broker.sync_metadata();
    broker.controller.image()
}

fn response(
    broker: &BrokerContext,
    context: &RequestContext,
    image: &MetadataImage,
    wanted: &Wanted,
) -> MetadataResponse {
    let topics = match wanted {
        Wanted::All => image
            .topics()
            .filter(|topic| may_describe_topic(broker, context, &topic.name))
            .map(|topic| describe_topic(image, topic, topic.name.clone()))
            .collect(),
        Wanted::Named(names) => names
            .iter()
            .map(|(name, topic_id)| match name {
                Some(name) if !may_describe_topic(broker, context, name) => missing_topic(
                    Some(name.clone()),
                    Uuid::nil(),
                    ErrorCode::TopicAuthorizationFailed,
                ),
                Some(name) => match image.topic_by_name(name) {
                    Some(topic) => describe_topic(image, topic, name.clone()),
                    None => {
                        missing_topic(Some(name.clone()), Uuid::nil(), missing_name_error(name))
                    }
                },
                None => match image.topic_by_id(*topic_id) {
                    Some(topic) if !may_describe_topic(broker, context, &topic.name) => {
                        missing_topic(None, *topic_id, ErrorCode::TopicAuthorizationFailed)
                    }
                    Some(topic) => describe_topic(image, topic, topic.name.clone()),
                    None => missing_topic(None, *topic_id, ErrorCode::UnknownTopicId),
                },
            })
            .collect(),
    };
    MetadataResponse::default()
        .with_brokers(brokers(broker, image, &context.session.listener().name))
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.config.node_id))
        .with_topics(topics)
}

fn missing_name_error(name: &str) -> ErrorCode {
    if strom_controller::topic_name::validate_topic_name(name).is_ok() {
        ErrorCode::UnknownTopicOrPartition
    } else {
        ErrorCode::InvalidTopicException
    }
}

fn brokers(
    _broker: &BrokerContext,
    image: &MetadataImage,
    listener: &str,
) -> Vec<MetadataResponseBroker> {
    let listener = Some(listener);
    image
        .brokers()
        .filter(|registered| !registered.fenced)
        .filter_map(|registered| {
            let endpoint = registered
                .endpoints
                .iter()
                .find(|endpoint| Some(endpoint.name.as_str()) == listener)
                .or_else(|| registered.endpoints.first())?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(registered.broker_id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(registered.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect()
}

fn describe_topic(
    image: &MetadataImage,
    topic: &TopicImage,
    name: String,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, partition)| {
            let (error, leader) = match partition.leader {
                Some(leader) => (ErrorCode::None, leader),
                None => (ErrorCode::LeaderNotAvailable, -1),
            };
            let offline = partition
                .replicas
                .iter()
                .copied()
                .filter(|replica| {
                    image
                        .broker(*replica)
                        .is_none_or(|registered| registered.fenced)
                })
                .map(BrokerId)
                .collect();
            MetadataResponsePartition::default()
                .with_error_code(error.code())
                .with_partition_index(index as i32)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(partition.leader_epoch)
                .with_replica_nodes(partition.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(partition.isr.iter().copied().map(BrokerId).collect())
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_is_internal(name == "__consumer_offsets" || name == "__transaction_state")
        .with_name(Some(TopicName(StrBytes::from_string(name))))
        .with_topic_id(topic.id)
        .with_partitions(partitions)
}

fn missing_topic(name: Option<String>, topic_id: Uuid, error: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|name| TopicName(StrBytes::from_string(name))))
        .with_topic_id(topic_id)
}
