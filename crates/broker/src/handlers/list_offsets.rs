//! ListOffsets: earliest, latest, max-timestamp, and by-time offsets.
//! With `isolation_level=1` (READ_COMMITTED, v2+) "latest" is the last
//! stable offset and lookups stop there, as Kafka answers.

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strom_protocol::kafka::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strom_protocol::messages::Response;
use strom_storage::read::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use strom_storage::TopicPartition;

use super::errors::{offline_error_code, partition_error_code};
use super::produce::missing_partition_error;
use super::BrokerContext;

/// KIP-405's "earliest local" offset: without tiered storage, the earliest.
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005's "latest tiered" offset: nothing is tiered here.
const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// Handles a ListOffsets request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListOffsetsRequest,
) -> Reply {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let allowed = super::authorization::may_describe_topic(broker, context, &name);
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let found = match allowed {
                        false => Err(ErrorCode::TopicAuthorizationFailed),
                        true => lookup(
                            broker,
                            &name,
                            partition.partition_index,
                            partition.current_leader_epoch,
                            Target {
                                timestamp: partition.timestamp,
                                read_committed: request.isolation_level == READ_COMMITTED,
                            },
                        ),
                    };
                    partition_response(context.api_version, partition.partition_index, found)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    Reply::Response(Response::ListOffsets(
        ListOffsetsResponse::default().with_topics(topics),
    ))
}

/// One partition's answer at `api_version`. The leader epoch exists from v4
/// on; earlier versions cannot carry it (the encoder refuses a non-default
/// value), so it is left at its default there.
fn partition_response(
    api_version: i16,
    partition_index: i32,
    found: Result<(i64, i64, i32), ErrorCode>,
) -> ListOffsetsPartitionResponse {
    let response = ListOffsetsPartitionResponse::default().with_partition_index(partition_index);
    match found {
        Ok((timestamp, offset, leader_epoch)) => {
            let response = response.with_timestamp(timestamp).with_offset(offset);
            if api_version >= 4 {
                response.with_leader_epoch(leader_epoch)
            } else {
                response
            }
        }
        Err(code) => response
            .with_error_code(code.code())
            .with_timestamp(-1)
            .with_offset(-1),
    }
}

/// Kafka's isolation level for READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

/// What one partition's lookup asks for.
#[derive(Debug, Clone, Copy)]
struct Target {
    timestamp: i64,
    read_committed: bool,
}

/// `(timestamp, offset, leader epoch)` for one partition.
fn lookup(
    broker: &BrokerContext,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    target: Target,
) -> Result<(i64, i64, i32), ErrorCode> {
    let timestamp = target.timestamp;
    let topic_partition = TopicPartition::new(topic.to_owned(), partition);
    let replica = broker
        .replicas
        .get(&topic_partition)
        .ok_or_else(|| missing_partition_error(broker, topic, partition))?;
    replica
        .validate_leader_epoch(Some(current_leader_epoch))
        .map_err(|error| partition_error_code(&error))?;
    let leader_epoch = replica
        .leader_epoch()
        .map_err(|error| offline_error_code(&error))?
        .map_err(|_| ErrorCode::NotLeaderOrFollower)?;
    let found = replica.with_log(|log| {
        // Consumers never see past the high watermark (read_committed ones
        // past the last stable offset).
        let high_watermark = if target.read_committed {
            log.last_stable_offset()
        } else {
            log.high_watermark()
        };
        match timestamp {
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Ok((-1, log.log_start_offset())),
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
    });
    let found = found.map_err(|error| offline_error_code(&error))??;
    Ok((found.0, found.1, leader_epoch))
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use strom_protocol::kafka::messages::list_offsets_response::ListOffsetsTopicResponse;
    use strom_protocol::messages::encode_response_frame;

    use super::*;

    #[test]
    fn answers_encode_at_every_served_version() {
        for api_version in 1..=10 {
            for found in [
                Ok((1_700_000_000_000, 42, 3)),
                Err(ErrorCode::NotLeaderOrFollower),
            ] {
                let partition = partition_response(api_version, 0, found);
                let expected_epoch = match found {
                    Ok(_) if api_version >= 4 => 3,
                    _ => -1,
                };
                assert_eq!(partition.leader_epoch, expected_epoch);
                let topic = ListOffsetsTopicResponse::default().with_partitions(vec![partition]);
                let response =
                    Response::ListOffsets(ListOffsetsResponse::default().with_topics(vec![topic]));
                let mut buffer = BytesMut::new();
                assert!(
                    encode_response_frame(7, api_version, &response, &mut buffer).is_ok(),
                    "ListOffsets v{api_version} does not encode"
                );
            }
        }
    }
}
