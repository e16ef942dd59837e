//! Fetch: read each requested partition up to its high watermark; answer at
//! once when `fetch.min.bytes` are there (or on an error), otherwise long-poll
//! until an append moves a partition's high watermark or `max_wait_ms` passes.
//!
//! Incremental fetch sessions (KIP-227): this broker answers every fetch in
//! full and never creates a session (it replies with session id 0, which the
//! protocol allows), so clients keep sending full requests. A request that
//! names a session id this broker never issued gets FETCH_SESSION_ID_NOT_FOUND.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::fetch_request::FetchPartition;
use strom_protocol::kafka::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use strom_protocol::kafka::messages::{FetchRequest, FetchResponse, TopicName};
use strom_protocol::messages::Response;
use strom_storage::TopicPartition;
use uuid::Uuid;

use super::errors::{read_error_code, replication_error_code};
use super::produce::missing_partition_error;
use super::BrokerContext;
use crate::network::{Reply, RequestContext};
use crate::replica_manager::PartitionReplica;

/// Kafka's isolation level for READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

/// A fetch resolved against the metadata: what to read, where.
struct Plan {
    topics: Vec<PlannedTopic>,
    max_bytes: u64,
    read_committed: bool,
}

struct PlannedTopic {
    name: TopicName,
    topic_id: Uuid,
    partitions: Vec<PlannedPartition>,
}

struct PlannedPartition {
    request: FetchPartition,
    target: Result<Arc<PartitionReplica>, ErrorCode>,
}

/// Handles a Fetch request.
pub fn handle(broker: &BrokerContext, context: &RequestContext, request: FetchRequest) -> Reply {
    if request.session_id != 0 {
        let response = FetchResponse::default()
            .with_error_code(ErrorCode::FetchSessionIdNotFound.code())
            .with_session_id(0);
        return Reply::Response(Response::Fetch(response));
    }
    let plan = Arc::new(plan(broker, context.api_version, &request));
    let (response, bytes, errors) = read(&plan);
    let min_bytes = request.min_bytes.max(0) as u64;
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    if bytes >= min_bytes || errors || max_wait.is_zero() || plan.topics.is_empty() {
        return Reply::Response(Response::Fetch(response));
    }
    Reply::Deferred(Box::pin(long_poll(plan, min_bytes, max_wait)))
}

fn plan(broker: &BrokerContext, api_version: i16, request: &FetchRequest) -> Plan {
    let image = broker.controller.image();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            // Fetch v13+ names topics by id.
            let name = if api_version >= 13 {
                image
                    .topic_by_id(topic.topic_id)
                    .map(|found| found.name.clone())
            } else {
                Some(topic.topic.0.to_string())
            };
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| PlannedPartition {
                    request: partition.clone(),
                    target: match &name {
                        None => Err(ErrorCode::UnknownTopicId),
                        Some(name) => locate(broker, name, partition),
                    },
                })
                .collect();
            PlannedTopic {
                name: topic.topic.clone(),
                topic_id: topic.topic_id,
                partitions,
            }
        })
        .collect();
    Plan {
        topics,
        max_bytes: request.max_bytes.max(0) as u64,
        read_committed: request.isolation_level == READ_COMMITTED,
    }
}

fn locate(
    broker: &BrokerContext,
    topic: &str,
    partition: &FetchPartition,
) -> Result<Arc<PartitionReplica>, ErrorCode> {
    let topic_partition = TopicPartition::new(topic.to_owned(), partition.partition);
    let replica = broker
        .replicas
        .get(&topic_partition)
        .ok_or_else(|| missing_partition_error(broker, topic, partition.partition))?;
    replica
        .validate_leader_epoch(Some(partition.current_leader_epoch))
        .map_err(|error| replication_error_code(&error))?;
    Ok(replica)
}

/// Reads every planned partition once: the response, the record bytes in
/// it, and whether any partition failed.
fn read(plan: &Plan) -> (FetchResponse, u64, bool) {
    let mut remaining = plan.max_bytes;
    let mut total = 0u64;
    let mut errors = false;
    let mut responses = Vec::with_capacity(plan.topics.len());
    for topic in &plan.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for planned in &topic.partitions {
            let mut data = PartitionData::default()
                .with_partition_index(planned.request.partition)
                .with_records(Some(Bytes::new()));
            if plan.read_committed {
                data = data.with_aborted_transactions(Some(Vec::new()));
            }
            match &planned.target {
                Err(code) => {
                    errors = true;
                    data = data.with_error_code(code.code());
                }
                Ok(replica) => {
                    let limit = (planned.request.partition_max_bytes.max(0) as u64).min(remaining);
                    // KIP-74: the first partition with data may return one
                    // batch even beyond the limits, so large records progress.
                    let min_one_batch = total == 0;
                    match replica.read(planned.request.fetch_offset, limit, min_one_batch) {
                        Ok(read) => {
                            let size = read
                                .records
                                .as_ref()
                                .map_or(0, |records| records.len() as u64);
                            total += size;
                            remaining = remaining.saturating_sub(size);
                            data = data
                                .with_high_watermark(read.high_watermark)
                                .with_last_stable_offset(read.high_watermark)
                                .with_log_start_offset(read.log_start_offset)
                                .with_records(Some(read.records.unwrap_or_default()));
                        }
                        Err(error) => {
                            errors = true;
                            let (high_watermark, log_start_offset) = replica
                                .with_log(|log| (log.high_watermark(), log.log_start_offset()));
                            data = data
                                .with_error_code(read_error_code(&error).code())
                                .with_high_watermark(high_watermark)
                                .with_last_stable_offset(high_watermark)
                                .with_log_start_offset(log_start_offset);
                        }
                    }
                }
            }
            partitions.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    (
        FetchResponse::default()
            .with_session_id(0)
            .with_responses(responses),
        total,
        errors,
    )
}

/// Waits for appends until `min_bytes` are readable or `max_wait` passes,
/// then answers with whatever is there.
async fn long_poll(plan: Arc<Plan>, min_bytes: u64, max_wait: Duration) -> Option<Response> {
    let deadline = tokio::time::Instant::now() + max_wait;
    let replicas: Vec<Arc<PartitionReplica>> = plan
        .topics
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .filter_map(|planned| planned.target.as_ref().ok().cloned())
        .collect();
    let mut receivers: Vec<_> = replicas
        .iter()
        .map(|replica| replica.high_watermark.subscribe())
        .collect();
    loop {
        if receivers.is_empty() {
            tokio::time::sleep_until(deadline).await;
        } else {
            let changed = select_all(
                receivers
                    .iter_mut()
                    .map(|receiver| Box::pin(receiver.changed())),
            );
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        let (response, bytes, errors) = read(&plan);
        if bytes >= min_bytes || errors || tokio::time::Instant::now() >= deadline {
            return Some(Response::Fetch(response));
        }
    }
    Some(Response::Fetch(read(&plan).0))
}
