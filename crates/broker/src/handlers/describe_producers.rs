//! DescribeProducers (KIP-664): the active producers of partitions led
//! here, with their epoch, last sequence, last timestamp, coordinator epoch
//! and the first offset of their open transaction (-1 when none). Needs
//! READ on the topic.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use strom_protocol::kafka::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use strom_protocol::messages::Response;
use strom_storage::TopicPartition;

use super::authorization::authorize;
use super::BrokerContext;

/// Handles a DescribeProducers request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeProducersRequest,
) -> Reply {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.to_string();
            let allowed = authorize(broker, context, operation::READ, resource::TOPIC, &name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|index| {
                    let described = if allowed {
                        producers(broker, &TopicPartition::new(name.clone(), *index))
                    } else {
                        Err(ErrorCode::TopicAuthorizationFailed)
                    };
                    let response = PartitionResponse::default().with_partition_index(*index);
                    match described {
                        Ok(active) => response.with_active_producers(active),
                        Err(code) => response.with_error_code(code.code()),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    Reply::Response(Response::DescribeProducers(
        DescribeProducersResponse::default().with_topics(topics),
    ))
}

fn producers(
    broker: &BrokerContext,
    topic_partition: &TopicPartition,
) -> Result<Vec<ProducerState>, ErrorCode> {
    let replica = broker
        .replicas
        .get(topic_partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    if !replica.is_leader() {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let states = replica
        .with_log(|log| log.producer_states())
        .map_err(|_| ErrorCode::KafkaStorageError)?;
    Ok(states
        .into_iter()
        .map(|state| {
            ProducerState::default()
                .with_producer_id(ProducerId(state.producer_id))
                .with_producer_epoch(i32::from(state.producer_epoch))
                .with_last_sequence(state.last_sequence)
                .with_last_timestamp(state.last_timestamp)
                .with_coordinator_epoch(state.coordinator_epoch)
                .with_current_txn_start_offset(state.current_txn_first_offset.unwrap_or(-1))
        })
        .collect())
}
