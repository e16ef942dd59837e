//! Produce: validate and append each partition's batches, then answer at
//! once (`acks=0`/`1`) or when the high watermark passes them (`acks=all`).
//!
//! The log checks each batch (header, CRC, records, the topic's rules for
//! keys and timestamps, its `compression.type`) before anything is written;
//! a refusal answers Kafka's code, and records the topic refused are named
//! in the response's per-record errors (KIP-467, Produce v8+).
//!
//! When `flush.messages` makes an append's flush due, the fsync runs on the
//! blocking pool without the log's lock, and the answer (any `acks`) waits
//! for it: a worker thread never waits for the disk.

use std::sync::Arc;
use std::time::Duration;

use strom_network::{ConnectionMute, Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use strom_protocol::kafka::messages::{ProduceRequest, ProduceResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_protocol::records::RecordBatches;
use strom_quotas::QuotaKey;
use strom_replication::AckStatus;
use strom_storage::error::{AppendError, RecordRefusal, RefusalReason};
use strom_storage::flush::FlushTicket;
use strom_storage::verification::TxnVerification;
use strom_storage::TopicPartition;
use uuid::Uuid;

use super::errors::append_error_code;
use super::produce_txn::{self, Verified};
use super::BrokerContext;
use crate::quotas::{throttle_ms_field, QuotaClient};
use crate::replica_manager::{AppendFailure, Appended, PartitionReplica};

/// One partition's outcome, kept until the response is built.
/// An `acks=all` write waiting for the HW to pass it.
#[derive(Clone)]
struct AckWait {
    replica: Arc<PartitionReplica>,
    /// One past the write's last offset.
    required_offset: i64,
    /// The leader epoch it was appended at.
    leader_epoch: i32,
}

struct Outcome {
    index: i32,
    error: ErrorCode,
    error_message: Option<String>,
    /// KIP-467: the refused records by batch index, with a message each.
    record_errors: Vec<(i32, String)>,
    base_offset: i64,
    log_append_time_ms: i64,
    log_start_offset: i64,
    /// For `acks=all`: the partition and the offset the HW must reach.
    wait_for: Option<AckWait>,
    /// A flush `flush.messages` made due: done off the async workers
    /// before the answer.
    pending_flush: Option<(Arc<PartitionReplica>, FlushTicket)>,
}

struct TopicOutcomes {
    /// Position of the topic in the request (names may repeat).
    position: usize,
    name: TopicName,
    topic_id: Uuid,
    partitions: Vec<Outcome>,
}

/// Handles a Produce request: check `acks`, append each partition's batch,
/// then answer now or once flushes and the high watermark allow.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ProduceRequest,
) -> Reply {
    let acks = request.acks;
    if !matches!(acks, -1..=1) {
        return Reply::Response(Response::Produce(build(refuse_all(
            request,
            ErrorCode::InvalidRequiredAcks,
        ))));
    }
    if !produce_txn::may_use_transactional_id(broker, context, &request) {
        return Reply::Response(Response::Produce(build(refuse_all(
            request,
            ErrorCode::TransactionalIdAuthorizationFailed,
        ))));
    }
    let verified = produce_txn::verify(broker, context, &request).await;
    let now_ms = broker.replicas.now_ms();
    let timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
    let topics = append_all(broker, context, request, &verified, now_ms);
    let throttle = broker.quotas.record(
        &broker.controller.image(),
        QuotaKey::ProducerByteRate,
        &QuotaClient::of(context),
        context.request_bytes as f64,
    );
    answer(
        topics,
        acks,
        timeout,
        now_ms,
        (throttle, context.mute.clone()),
    )
}

/// Every partition of the request refused with `error`.
fn refuse_all(request: ProduceRequest, error: ErrorCode) -> Vec<TopicOutcomes> {
    request
        .topic_data
        .into_iter()
        .enumerate()
        .map(|(position, topic)| TopicOutcomes {
            position,
            name: topic.name,
            topic_id: topic.topic_id,
            partitions: topic
                .partition_data
                .into_iter()
                .map(|partition| failed(partition.index, error, None))
                .collect(),
        })
        .collect()
}

/// Appends every partition's records; one outcome per partition, in
/// request order.
fn append_all(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ProduceRequest,
    verified: &Verified,
    now_ms: i64,
) -> Vec<TopicOutcomes> {
    let image = broker.controller.image();
    let acks = request.acks;
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for (position, topic) in request.topic_data.into_iter().enumerate() {
        // Produce v13 names topics by id (KIP-516).
        let name = produce_txn::topic_name(&image, context, &topic);
        let partitions = topic
            .partition_data
            .into_iter()
            .map(|partition| match &name {
                None => failed(partition.index, ErrorCode::UnknownTopicId, None),
                Some(name) if !super::authorization::may_write(broker, context, name) => {
                    failed(partition.index, ErrorCode::TopicAuthorizationFailed, None)
                }
                Some(name) => match verified.of(name, partition.index) {
                    Ok(verification) => append_partition(
                        broker,
                        (name, partition.index),
                        partition.records,
                        (acks, verification),
                        now_ms,
                    ),
                    Err((code, message)) => failed(partition.index, code, Some(message)),
                },
            })
            .collect();
        topics.push(TopicOutcomes {
            position,
            name: topic.name,
            topic_id: topic.topic_id,
            partitions,
        });
    }
    topics
}

/// The reply once every partition was appended: none for `acks=0`, at
/// once when nothing waits, else deferred until the due flushes ran and
/// the high watermark passed the appended records (or the timeout).
///
/// A throttle (KIP-219) is in the answer's `throttle_time_ms`, and the
/// connection is muted for it when the answer is ready (at once for
/// `acks=0`, which has no answer).
fn answer(
    mut topics: Vec<TopicOutcomes>,
    acks: i16,
    timeout: Duration,
    now_ms: i64,
    (throttle, mute): (Duration, ConnectionMute),
) -> Reply {
    let flushes = take_flushes(&mut topics);
    let throttle_ms = throttle_ms_field(throttle);
    if acks == 0 {
        if !flushes.is_empty() {
            tokio::spawn(flush_all(flushes, now_ms));
        }
        mute.mute_for(throttle);
        return Reply::NoResponse;
    }
    let waits: Vec<AckWait> = topics
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .filter_map(|outcome| outcome.wait_for.clone())
        .collect();
    if waits.is_empty() && flushes.is_empty() {
        mute.mute_for(throttle);
        return Reply::Response(Response::Produce(
            build(topics).with_throttle_time_ms(throttle_ms),
        ));
    }
    Reply::Deferred(Box::pin(async move {
        // `timeout.ms` bounds a wait: a tokio timer, not a broker decision.
        let deadline = tokio::time::Instant::now() + timeout;
        let failed_flushes = flush_all(flushes, now_ms).await;
        mark_failed_flushes(&mut topics, &failed_flushes);
        for wait in &waits {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let _ = wait
                .replica
                .wait_for_ack(wait.required_offset, wait.leader_epoch, remaining)
                .await;
        }
        settle_acks(&mut topics);
        mute.mute_for(throttle);
        Some(Response::Produce(build(topics).with_throttle_time_ms(throttle_ms)).into())
    }))
}

/// Partitions whose flush failed answer KAFKA_STORAGE_ERROR and wait for nothing.
fn mark_failed_flushes(topics: &mut [TopicOutcomes], failed_flushes: &[(usize, i32)]) {
    for topic in topics {
        for outcome in &mut topic.partitions {
            if failed_flushes.contains(&(topic.position, outcome.index)) {
                outcome.wait_for = None;
                outcome.error = ErrorCode::KafkaStorageError;
            }
        }
    }
}

/// The `acks=all` answer of each waiting partition once the wait is over.
fn settle_acks(topics: &mut [TopicOutcomes]) {
    for topic in topics {
        for outcome in &mut topic.partitions {
            if let Some(wait) = outcome.wait_for.take() {
                outcome.error = match wait
                    .replica
                    .ack_status(wait.required_offset, wait.leader_epoch)
                {
                    AckStatus::Committed => ErrorCode::None,
                    // Leadership moved while the write waited: the client
                    // retries on the new leader (Kafka's DelayedProduce).
                    AckStatus::NotLeader => ErrorCode::NotLeaderOrFollower,
                    AckStatus::Waiting => ErrorCode::RequestTimedOut,
                    AckStatus::NotEnoughReplicasAfterAppend => {
                        ErrorCode::NotEnoughReplicasAfterAppend
                    }
                };
                if outcome.error != ErrorCode::None {
                    // Appended but not acknowledged: the client may retry a
                    // record that is stored (and later committed).
                    tracing::debug!(topic_partition = %wait.replica.topic_partition,
                        required_offset = wait.required_offset, leader_epoch = wait.leader_epoch,
                        code = %outcome.error, "acks=all write appended but not acknowledged");
                }
            }
        }
    }
}

fn append_partition(
    broker: &BrokerContext,
    (topic, index): (&str, i32),
    records: Option<bytes::Bytes>,
    (acks, verification): (i16, TxnVerification),
    now_ms: i64,
) -> Outcome {
    let topic_partition = TopicPartition::new(topic.to_owned(), index);
    let Some(replica) = broker.replicas.get(&topic_partition) else {
        return failed(index, missing_partition_error(broker, topic, index), None);
    };
    let Some(records) = records.filter(|records| !records.is_empty()) else {
        return failed(
            index,
            ErrorCode::InvalidRecord,
            Some("no record batches".to_owned()),
        );
    };
    if carries_more_than_one_batch(&records) {
        return failed(
            index,
            ErrorCode::InvalidRecord,
            Some("a produce request carries exactly one record batch per partition".to_owned()),
        );
    }
    let batch_bytes = records.len() as u64;
    match replica.append_verified(records, acks == -1, now_ms, verification) {
        Ok(Appended {
            info,
            leader_epoch,
            pending_flush,
        }) => {
            replica
                .metrics
                .record_produce(info.record_count, batch_bytes);
            let required = info.last_offset + 1;
            let wait_for = (acks == -1
                && replica.ack_status(required, leader_epoch) != AckStatus::Committed)
                .then(|| AckWait {
                    replica: Arc::clone(&replica),
                    required_offset: required,
                    leader_epoch,
                });
            Outcome {
                index,
                error: ErrorCode::None,
                error_message: None,
                record_errors: Vec::new(),
                base_offset: info.first_offset,
                log_append_time_ms: info.log_append_time_ms.unwrap_or(-1),
                log_start_offset: info.log_start_offset,
                wait_for,
                pending_flush: pending_flush.map(|ticket| (Arc::clone(&replica), ticket)),
            }
        }

        Err(error) => {
            replica.metrics.record_failed_produce();
            refused(&topic_partition, &error)
        }
    }
}

/// The outcome of an append the log or replication refused.
fn refused(topic_partition: &TopicPartition, error: &AppendFailure) -> Outcome {
    let code = append_error_code(error);
    tracing::debug!(%topic_partition, %error, %code, "produce refused");
    match error {
        AppendFailure::Log(AppendError::RecordsRefused { refusals }) => {
            let record_errors = refusals
                .iter()
                .map(|refusal| {
                    let message = record_error_message(topic_partition, refusal);
                    (refusal.batch_index, message)
                })
                .collect::<Vec<_>>();
            let message = refused_records_message(code, &record_errors);
            let mut outcome = failed(topic_partition.partition, code, Some(message));
            outcome.record_errors = record_errors;
            outcome
        }
        _ => failed(topic_partition.partition, code, Some(error.to_string())),
    }
}

/// A refused record's message, worded as Kafka's `LogValidator` words it.
fn record_error_message(topic_partition: &TopicPartition, refusal: &RecordRefusal) -> String {
    match refusal.reason {
        RefusalReason::MissingKey => format!(
            "Compacted topic cannot accept message without key in topic partition {topic_partition}."
        ),
        RefusalReason::TimestampOutOfRange {
            timestamp,
            earliest,
            latest,
        } => format!(
            "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{earliest}, {latest}]",
            refusal.batch_index
        ),
        RefusalReason::LogAppendTimeFromProducer => {
            "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.".to_owned()
        }
    }
}

/// The partition's error message for refused records, as Kafka's
/// `processRecordErrors` words it.
fn refused_records_message(code: ErrorCode, record_errors: &[(i32, String)]) -> String {
    if code == ErrorCode::InvalidTimestamp {
        return "One or more records have been rejected due to invalid timestamp".to_owned();
    }
    let shown: Vec<String> = record_errors
        .iter()
        .take(3)
        .map(|(batch_index, message)| {
            format!("RecordError(batchIndex={batch_index}, message='{message}')")
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        record_errors.len(),
        shown.join(", ")
    )
}

/// Whether a partition's records hold a second batch. Kafka refuses those
/// with INVALID_RECORD (Produce v3+ carries exactly one batch per partition):
/// an idempotent producer's sequence check and duplicate detection work per
/// batch. A malformed first batch counts as one; the log rejects it.
fn carries_more_than_one_batch(records: &bytes::Bytes) -> bool {
    RecordBatches::new(records.clone()).take(2).count() > 1
}

/// The error for a partition this broker does not lead.
pub fn missing_partition_error(broker: &BrokerContext, topic: &str, index: i32) -> ErrorCode {
    let image = broker.controller.image();
    match image
        .topic_by_name(topic)
        .and_then(|found| found.partition(index))
    {
        Some(_) => ErrorCode::NotLeaderOrFollower,
        None => ErrorCode::UnknownTopicOrPartition,
    }
}

fn failed(index: i32, error: ErrorCode, error_message: Option<String>) -> Outcome {
    Outcome {
        index,
        error,
        error_message,
        record_errors: Vec::new(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        wait_for: None,
        pending_flush: None,
    }
}

/// A due flush and where its outcome goes: (topic position, partition index).
type PendingFlush = ((usize, i32), Arc<PartitionReplica>, FlushTicket);

fn take_flushes(topics: &mut [TopicOutcomes]) -> Vec<PendingFlush> {
    let mut flushes = Vec::new();
    for topic in topics {
        for outcome in &mut topic.partitions {
            if let Some((replica, ticket)) = outcome.pending_flush.take() {
                flushes.push(((topic.position, outcome.index), replica, ticket));
            }
        }
    }
    flushes
}

/// Syncs every due flush on the blocking pool (one task for all of them)
/// and completes the synced ones; returns where a flush failed.
async fn flush_all(flushes: Vec<PendingFlush>, now_ms: i64) -> Vec<(usize, i32)> {
    if flushes.is_empty() {
        return Vec::new();
    }
    let positions: Vec<(usize, i32)> = flushes.iter().map(|(at, _, _)| *at).collect();
    let synced = tokio::task::spawn_blocking(move || {
        flushes
            .into_iter()
            .map(|(at, replica, ticket)| {
                // Flush latency for metrics, on the host's clock.
                let started = std::time::Instant::now();
                let result = ticket.sync();
                strom_observability::LOG_FLUSH_TIME.observe(started.elapsed());
                (at, replica, ticket, result)
            })
            .collect::<Vec<_>>()
    })
    .await;
    let Ok(synced) = synced else {
        // Interrupted (runtime shutting down): nothing is acknowledged.
        return positions;
    };
    let mut failed = Vec::new();
    for (at, replica, ticket, result) in synced {
        match result {
            Ok(()) => replica.complete_flush(&ticket, now_ms),
            Err(error) => {
                tracing::warn!(topic_partition = %replica.topic_partition, %error, "flush failed");
                failed.push(at);
            }
        }
    }
    failed
}

fn build(topics: Vec<TopicOutcomes>) -> ProduceResponse {
    let responses = topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|outcome| {
                    PartitionProduceResponse::default()
                        .with_index(outcome.index)
                        .with_error_code(outcome.error.code())
                        .with_error_message(outcome.error_message.map(StrBytes::from_string))
                        .with_record_errors(record_errors(outcome.record_errors))
                        .with_base_offset(outcome.base_offset)
                        .with_log_append_time_ms(outcome.log_append_time_ms)
                        .with_log_start_offset(outcome.log_start_offset)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}

/// KIP-467's per-record errors (sent from Produce v8 on; older versions drop them).
fn record_errors(errors: Vec<(i32, String)>) -> Vec<BatchIndexAndErrorMessage> {
    errors
        .into_iter()
        .map(|(batch_index, message)| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(batch_index)
                .with_batch_index_error_message(Some(StrBytes::from_string(message)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use strom_storage::testing::{simple_batch, BatchSpec};

    use strom_protocol::error_code::ErrorCode;
    use strom_storage::error::{RecordRefusal, RefusalReason};
    use strom_storage::TopicPartition;

    use super::{carries_more_than_one_batch, record_error_message, refused_records_message};

    #[test]
    fn refused_records_are_worded_as_kafka_words_them() {
        let topic_partition = TopicPartition::new("events".to_owned(), 3);
        let missing_key = RecordRefusal {
            batch_index: 2,
            reason: RefusalReason::MissingKey,
        };
        let message = record_error_message(&topic_partition, &missing_key);
        assert_eq!(
            message,
            "Compacted topic cannot accept message without key in topic partition events-3."
        );
        let errors: Vec<(i32, String)> = (0..5).map(|index| (index, message.clone())).collect();
        let summary = refused_records_message(ErrorCode::InvalidRecord, &errors);
        assert!(summary.starts_with(
            "One or more records have been rejected due to 5 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=0, message='Compacted topic"
        ));
        assert_eq!(summary.matches("RecordError(").count(), 3);
        let late = RecordRefusal {
            batch_index: 1,
            reason: RefusalReason::TimestampOutOfRange {
                timestamp: 5,
                earliest: 10,
                latest: 20,
            },
        };
        assert_eq!(
            record_error_message(&topic_partition, &late),
            "Timestamp 5 of message with offset 1 is out of range. The timestamp should be within [10, 20]"
        );
        assert_eq!(
            refused_records_message(ErrorCode::InvalidTimestamp, &[(1, String::new())]),
            "One or more records have been rejected due to invalid timestamp"
        );
    }

    #[test]
    fn one_batch_per_partition() {
        let batch = simple_batch(&BatchSpec {
            records: 3,
            ..BatchSpec::default()
        });
        assert!(!carries_more_than_one_batch(&batch));
        let mut two = BytesMut::from(&batch[..]);
        two.extend_from_slice(&batch);
        assert!(carries_more_than_one_batch(&two.freeze()));
        // A batch followed by a cut-off one is one batch (the log refuses the
        // tail as corrupt); so is garbage.
        let mut cut = BytesMut::from(&batch[..]);
        cut.extend_from_slice(&batch[..20]);
        assert!(!carries_more_than_one_batch(&cut.freeze()));
        assert!(!carries_more_than_one_batch(&Bytes::from_static(
            b"garbage"
        )));
    }
}
