//! Whether the partitions a request names exist, checked against the
//! metadata image before a request reaches a coordinator or a log: Kafka
//! answers `UNKNOWN_TOPIC_OR_PARTITION` for a partition of a topic that does
//! not exist, or beyond the topic's partition count, and never hands it on.

use std::collections::HashSet;

use strom_controller::image::MetadataImage;
use strom_network::RequestContext;
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;

use super::authorization::authorize;
use super::BrokerContext;

/// Whether partition `index` of `topic` exists.
pub fn exists(image: &MetadataImage, topic: &str, index: i32) -> bool {
    image
        .topic_by_name(topic)
        .and_then(|found| found.partition(index))
        .is_some()
}

/// Why a partition of a group offset request (OffsetCommit, OffsetDelete)
/// is answered without reaching the coordinator, as Kafka checks it: its
/// topic may not be READ (`TOPIC_AUTHORIZATION_FAILED`, checked first), or
/// the partition does not exist (`UNKNOWN_TOPIC_OR_PARTITION`).
pub fn offset_refusals<'a>(
    broker: &BrokerContext,
    context: &RequestContext,
    topics: impl IntoIterator<Item = &'a str>,
) -> impl Fn(&str, i32) -> Option<ErrorCode> {
    let image = broker.controller.image();
    let refused: HashSet<String> = topics
        .into_iter()
        .filter(|topic| !authorize(broker, context, operation::READ, resource::TOPIC, topic))
        .map(str::to_owned)
        .collect();
    move |topic: &str, partition: i32| {
        if refused.contains(topic) {
            Some(ErrorCode::TopicAuthorizationFailed)
        } else if !exists(&image, topic, partition) {
            Some(ErrorCode::UnknownTopicOrPartition)
        } else {
            None
        }
    }
}
