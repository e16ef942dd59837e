//! ListOffsets: earliest, latest, max-timestamp, and by-time offsets.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strom_protocol::kafka::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strom_protocol::messages::Response;
use strom_storage::read::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use strom_storage::TopicPartition;

use super::errors::replication_error_code;
use super::produce::missing_partition_error;
use super::BrokerContext;
use crate::network::{Reply, RequestContext};

/// KIP-405's "earliest local" offset: without tiered storage, the earliest.
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005's "latest tiered" offset: nothing is tiered here.
const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// Handles a ListOffsets request.
pub fn handle(
    broker: &BrokerContext,
    _context: &RequestContext,
    request: ListOffsetsRequest,
) -> Reply {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .into_iter()
                .map(|partition| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(partition.partition_index);
                    match lookup(
                        broker,
                        &name,
                        partition.partition_index,
                        partition.current_leader_epoch,
                        partition.timestamp,
                    ) {
                        Ok((timestamp, offset, leader_epoch)) => response
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(leader_epoch),
                        Err(code) => response
                            .with_error_code(code.code())
                            .with_timestamp(-1)
                            .with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    Reply::Response(Response::ListOffsets(
        ListOffsetsResponse::default().with_topics(topics),
    ))
}

/// `(timestamp, offset, leader epoch)` for one partition.
fn lookup(
    broker: &BrokerContext,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    timestamp: i64,
) -> Result<(i64, i64, i32), ErrorCode> {
    let topic_partition = TopicPartition::new(topic.to_owned(), partition);
    let replica = broker
        .replicas
        .get(&topic_partition)
        .ok_or_else(|| missing_partition_error(broker, topic, partition))?;
    replica
        .validate_leader_epoch(Some(current_leader_epoch))
        .map_err(|error| replication_error_code(&error))?;
    let leader_epoch = replica.leader_epoch();
    let found = replica.with_log(|log| {
        let high_watermark = log.high_watermark();
        match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Ok((-1, log.log_start_offset())),
            // Consumers never see past the high watermark, so "latest" is it.
            LATEST_TIMESTAMP => Ok((-1, high_watermark)),
            LATEST_TIERED_TIMESTAMP => Ok((-1, -1)),
            MAX_TIMESTAMP => Ok(log
                .offset_for_timestamp(MAX_TIMESTAMP)
                .filter(|found| found.offset < high_watermark)
                .map_or((-1, -1), |found| (found.timestamp, found.offset))),
            time if time < 0 => Err(ErrorCode::InvalidRequest),
            time => Ok(log
                .offset_for_timestamp(time)
                .filter(|found| found.offset < high_watermark)
                .map_or((-1, -1), |found| (found.timestamp, found.offset))),
        }
    })?;
    Ok((found.0, found.1, leader_epoch))
}
