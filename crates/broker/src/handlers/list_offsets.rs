//! ListOffsets: earliest, latest, max-timestamp, and by-time offsets.
//! With `isolation_level=1` (READ_COMMITTED, v2+) "latest" is the last
//! stable offset and lookups stop there, as Kafka answers.

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use strom_protocol::kafka::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
use strom_protocol::messages::Response;
use strom_storage::read::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP};
use strom_storage::remote::RemoteLogManager;
use strom_storage::TopicPartition;

use super::errors::{offline_error_code, partition_error_code};
use super::produce::missing_partition_error;
use super::BrokerContext;

/// KIP-405's "earliest local" offset: the local log start (the earliest
/// without tiered storage).
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005's "latest tiered" offset: the last offset in the remote tier
/// (-1 when nothing is tiered).
const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// Handles a ListOffsets request. Lookups that need the remote tier
/// (tiered storage, KIP-405) are answered once it has been read.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListOffsetsRequest,
) -> Reply {
    let read_committed = request.isolation_level == READ_COMMITTED;
    let topics: Vec<(TopicName, Vec<(i32, Found)>)> = request
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
                        false => Found::Ready(Err(ErrorCode::TopicAuthorizationFailed)),
                        true => lookup(
                            broker,
                            &name,
                            partition.partition_index,
                            partition.current_leader_epoch,
                            Target {
                                timestamp: partition.timestamp,
                                read_committed,
                            },
                        ),
                    };
                    (partition.partition_index, found)
                })
                .collect();
            (topic.name.clone(), partitions)
        })
        .collect();
    answer(
        context.api_version,
        topics,
        broker.replicas.remote_log_manager().cloned(),
    )
}

/// The reply: at once, or once the remote tier completed its lookups.
fn answer(
    api_version: i16,
    topics: Vec<(TopicName, Vec<(i32, Found)>)>,
    remote: Option<std::sync::Arc<RemoteLogManager>>,
) -> Reply {
    let needs_remote = topics
        .iter()
        .flat_map(|(_, partitions)| partitions)
        .any(|(_, found)| matches!(found, Found::Remote(_)));
    match (remote, needs_remote) {
        (Some(manager), true) => Reply::Deferred(Box::pin(async move {
            let mut resolved = Vec::with_capacity(topics.len());
            for (name, partitions) in topics {
                let mut answers = Vec::with_capacity(partitions.len());
                for (index, found) in partitions {
                    answers.push((index, resolve(&manager, found).await));
                }
                resolved.push((name, answers));
            }
            Some(strom_network::Answer {
                response: respond(api_version, resolved),
                regions: Vec::new(),
            })
        })),
        _ => {
            let ready = topics
                .into_iter()
                .map(|(name, partitions)| {
                    let answers = partitions
                        .into_iter()
                        .map(|(index, found)| (index, found.local()))
                        .collect();
                    (name, answers)
                })
                .collect();
            Reply::Response(respond(api_version, ready))
        }
    }
}

/// `(timestamp, offset, leader epoch)` or the partition's error.
type Answered = Result<(i64, i64, i32), ErrorCode>;

/// The response from every partition's answer.
fn respond(api_version: i16, topics: Vec<(TopicName, Vec<(i32, Answered)>)>) -> Response {
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, found)| partition_response(api_version, index, found))
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    Response::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}

/// A lookup's outcome: answered from the local log, or to be completed
/// from the remote tier.
enum Found {
    Ready(Answered),
    Remote(RemoteLookup),
}

/// A lookup the remote tier completes.
struct RemoteLookup {
    partition: TopicPartition,
    /// EARLIEST_TIMESTAMP (-2) or a timestamp.
    timestamp: i64,
    leader_epoch: i32,
    /// Answers at or past this offset are not visible to the client.
    high_watermark: i64,
    /// The local answer (used when the remote tier has none).
    local: (i64, i64),
}

impl Found {
    /// The answer without the remote tier (tiered storage off).
    fn local(self) -> Answered {
        match self {
            Found::Ready(answered) => answered,
            Found::Remote(lookup) => Ok((lookup.local.0, lookup.local.1, lookup.leader_epoch)),
        }
    }
}

/// Completes a lookup from the remote tier: the remote log start for
/// EARLIEST, else the first remote record at or after the timestamp (the
/// local answer when no remote record is that late).
async fn resolve(manager: &RemoteLogManager, found: Found) -> Answered {
    let lookup = match found {
        Found::Ready(answered) => return answered,
        Found::Remote(lookup) => lookup,
    };
    let epoch = lookup.leader_epoch;
    if lookup.timestamp == EARLIEST_TIMESTAMP {
        let view = match manager.view(&lookup.partition) {
            Some(view) => Ok(view),
            None => manager.load(&lookup.partition).await,
        };
        return match view {
            Ok(view) => {
                let start = view
                    .log_start_offset
                    .map_or(lookup.local.1, |start| start.min(lookup.local.1));
                Ok((-1, start, epoch))
            }
            Err(_) => Err(ErrorCode::KafkaStorageError),
        };
    }
    match manager
        .offset_for_timestamp(&lookup.partition, lookup.timestamp)
        .await
    {
        Ok(Some(found)) if found.offset < lookup.high_watermark => {
            Ok((found.timestamp, found.offset, epoch))
        }
        Ok(_) => Ok((lookup.local.0, lookup.local.1, epoch)),
        Err(error) => Err(crate::tiered::read_error_code(&error)),
    }
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

/// One partition's lookup: answered here, or handed to the remote tier
/// when the partition is tiered and the answer may lie there.
fn lookup(
    broker: &BrokerContext,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    target: Target,
) -> Found {
    match lookup_local(broker, topic, partition, current_leader_epoch, target) {
        Ok((answered, tiered)) => {
            let (timestamp, offset, leader_epoch, high_watermark) = answered;
            let topic_partition = TopicPartition::new(topic.to_owned(), partition);
            let remote = broker.replicas.remote_log_manager().filter(|_| tiered);
            let wanted = remote.is_some_and(|manager| match target.timestamp {
                EARLIEST_TIMESTAMP => true,
                LATEST_TIERED_TIMESTAMP => false,
                time => time >= 0 && manager.may_hold_timestamp(&topic_partition, time),
            });
            if let (Some(manager), LATEST_TIERED_TIMESTAMP) = (remote, target.timestamp) {
                let last = manager
                    .view(&topic_partition)
                    .filter(|view| view.segment_count > 0)
                    .map_or(-1, |view| view.copied_offset - 1);
                return Found::Ready(Ok((-1, last, leader_epoch)));
            }
            match wanted {
                true => Found::Remote(RemoteLookup {
                    partition: topic_partition,
                    timestamp: target.timestamp,
                    leader_epoch,
                    high_watermark,
                    local: (timestamp, offset),
                }),
                false => Found::Ready(Ok((timestamp, offset, leader_epoch))),
            }
        }
        Err(code) => Found::Ready(Err(code)),
    }
}

/// A local lookup: `(timestamp, offset, leader epoch, visible end)` and
/// whether the log is tiered.
type LocalAnswer = ((i64, i64, i32, i64), bool);

/// One partition's lookup in its local log.
fn lookup_local(
    broker: &BrokerContext,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    target: Target,
) -> Result<LocalAnswer, ErrorCode> {
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
        let tiered = log.config().remote_storage_enable;
        let found = match timestamp {
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
        };
        found.map(|(timestamp, offset)| ((timestamp, offset, high_watermark), tiered))
    });
    let ((timestamp, offset, high_watermark), tiered) =
        found.map_err(|error| offline_error_code(&error))??;
    Ok(((timestamp, offset, leader_epoch, high_watermark), tiered))
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
