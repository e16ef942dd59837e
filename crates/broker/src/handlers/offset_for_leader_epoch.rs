//! OffsetForLeaderEpoch (KIP-101, KIP-320): the end offset of a leader
//! epoch, from the partition's leader-epoch cache. The end offset of the
//! current epoch is the log end offset; of an older epoch, the start offset
//! of the next larger epoch; an unknown epoch answers `(-1, -1)`.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use strom_protocol::kafka::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use strom_protocol::kafka::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use strom_protocol::messages::Response;
use strom_storage::TopicPartition;

use super::authorization::{authorize, may_describe_topic};
use super::errors::{offline_error_code, partition_error_code};
use super::BrokerContext;

/// `current_leader_epoch` meaning "do not check".
const NO_EPOCH: i32 = -1;

/// Handles an OffsetForLeaderEpoch request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> Reply {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let allowed = may_describe_topic(broker, context, &name)
                || authorize(
                    broker,
                    context,
                    operation::CLUSTER_ACTION,
                    resource::CLUSTER,
                    CLUSTER_NAME,
                );
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| match allowed {
                    true => end_offset(broker, &name, partition),
                    false => EpochEndOffset::default()
                        .with_partition(partition.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1)
                        .with_error_code(ErrorCode::TopicAuthorizationFailed.code()),
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    Reply::Response(Response::OffsetForLeaderEpoch(
        OffsetForLeaderEpochResponse::default().with_topics(topics),
    ))
}

fn end_offset(
    broker: &BrokerContext,
    topic: &str,
    partition: &OffsetForLeaderPartition,
) -> EpochEndOffset {
    let result = EpochEndOffset::default()
        .with_partition(partition.partition)
        .with_leader_epoch(-1)
        .with_end_offset(-1);
    let topic_partition = TopicPartition::new(topic.to_owned(), partition.partition);
    let Some(replica) = broker.replicas.get(&topic_partition) else {
        let known = broker
            .controller
            .image()
            .topic_by_name(topic)
            .is_some_and(|image| {
                usize::try_from(partition.partition)
                    .is_ok_and(|index| index < image.partitions.len())
            });
        let error = if known {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::UnknownTopicOrPartition
        };
        return result.with_error_code(error.code());
    };
    let current =
        (partition.current_leader_epoch != NO_EPOCH).then_some(partition.current_leader_epoch);
    if let Err(error) = replica.validate_leader_epoch(current) {
        return result.with_error_code(partition_error_code(&error).code());
    }
    match replica.with_log(|log| {
        log.epoch_cache()
            .end_offset_for(partition.leader_epoch, log.log_end_offset())
    }) {
        Ok((epoch, offset)) => result.with_leader_epoch(epoch).with_end_offset(offset),
        Err(error) => result.with_error_code(offline_error_code(&error).code()),
    }
}
