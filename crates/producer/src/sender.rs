//! The sender task: drains ready batches per leader into Produce requests,
//! and handles their answers (success, retry, failure, producer id reset).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use strom_client::{ClientError, Cluster};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::{
    ApiKey, InitProducerIdRequest, ProduceRequest, ProduceResponse, ProducerId, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};
use tokio::sync::{mpsc, Notify};

use crate::accumulator::{Accumulator, ProducerBatch, ProducerStamp, TopicPartition};
use crate::config::{Acks, ProducerConfig};
use crate::error::ProduceError;

/// The highest Produce version used: v13 names topics by id only.
const MAX_PRODUCE_VERSION: i16 = 12;

/// The idempotent producer's identity and per-partition sequences.
#[derive(Debug, Default)]
pub struct Idempotence {
    /// Producer id and epoch, once obtained.
    pub producer: Option<(i64, i16)>,
    /// The next sequence per partition.
    pub sequences: HashMap<TopicPartition, i32>,
    /// Set when the broker lost track of us: get a new producer id.
    pub needs_reset: bool,
}

impl Idempotence {
    /// The stamp for a batch about to be sent: reuses its sequence on a plain
    /// retry, assigns the next one otherwise.
    pub fn stamp(&mut self, batch: &ProducerBatch) -> Option<ProducerStamp> {
        let (producer_id, producer_epoch) = self.producer?;
        if let Some(stamp) = batch.stamp.filter(|stamp| {
            stamp.producer_id == producer_id && stamp.producer_epoch == producer_epoch
        }) {
            return Some(stamp);
        }
        let next = self
            .sequences
            .entry(batch.topic_partition.clone())
            .or_insert(0);
        let base_sequence = *next;
        *next =
            next.wrapping_add(i32::try_from(batch.record_count()).unwrap_or(i32::MAX)) & i32::MAX;
        Some(ProducerStamp {
            producer_id,
            producer_epoch,
            base_sequence,
        })
    }
}

/// State shared by the producer handle and the sender task.
pub struct Shared {
    /// The batches.
    pub accumulator: Mutex<Accumulator>,
    /// Producer id and sequences (when idempotent).
    pub idempotence: Mutex<Idempotence>,
    /// Whether idempotence is on.
    pub idempotent: bool,
    /// Wakes the sender.
    pub wake: Notify,
    /// Signalled whenever the accumulator may have become empty.
    pub drained: Notify,
    /// Set by `close`.
    pub closing: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Locks the accumulator.
    pub fn accumulator(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.accumulator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn idempotence(&self) -> std::sync::MutexGuard<'_, Idempotence> {
        self.idempotence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A Produce answer (or failure) for a set of batches sent to one leader.
struct Answer {
    leader: i32,
    batches: Vec<ProducerBatch>,
    result: Result<Option<ProduceResponse>, ClientError>,
}

/// Gets a producer id from any broker.
pub async fn init_producer_id(cluster: &Cluster) -> Result<(i64, i16), ClientError> {
    let connection = cluster.any_connection().await?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let Response::InitProducerId(response) = connection.send(request).await? else {
        return Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::InitProducerId as i16,
        });
    };
    match ErrorCode::from_code(response.error_code) {
        ErrorCode::None => Ok((response.producer_id.0, response.producer_epoch)),
        code => Err(ClientError::Broker { code }),
    }
}

/// The sender loop; returns when the producer closes and nothing is left.
pub async fn run(shared: Arc<Shared>, cluster: Cluster, config: ProducerConfig) {
    let (answers, mut answer_receiver) = mpsc::unbounded_channel::<Answer>();
    let mut in_flight: HashMap<i32, usize> = HashMap::new();
    loop {
        if shared.idempotent && shared.idempotence().needs_reset {
            reset_producer_id(&shared, &cluster, &config).await;
        }
        if let Err(error) = cluster.refresh_metadata_if_needed().await {
            tracing::debug!(%error, "metadata refresh failed");
        }
        let now = Instant::now();
        expire(&shared, now, config.delivery_timeout);
        let next_check =
            send_ready(&shared, &cluster, &config, &answers, &mut in_flight, now).await;
        if shared.accumulator().is_empty() {
            shared.drained.notify_waiters();
            if shared.closing.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
        }
        let sleep_until = next_check.unwrap_or(now + Duration::from_millis(100));
        tokio::select! {
            () = shared.wake.notified() => {}
            Some(answer) = answer_receiver.recv() => {
                if let Some(count) = in_flight.get_mut(&answer.leader) {
                    *count = count.saturating_sub(1);
                }
                handle_answer(&shared, &cluster, &config, answer);
                while let Ok(answer) = answer_receiver.try_recv() {
                    if let Some(count) = in_flight.get_mut(&answer.leader) {
                        *count = count.saturating_sub(1);
                    }
                    handle_answer(&shared, &cluster, &config, answer);
                }
            }
            () = tokio::time::sleep_until(sleep_until.into()) => {}
        }
    }
}

async fn reset_producer_id(shared: &Shared, cluster: &Cluster, config: &ProducerConfig) {
    match init_producer_id(cluster).await {
        Ok(producer) => {
            let mut idempotence = shared.idempotence();
            idempotence.producer = Some(producer);
            idempotence.sequences.clear();
            idempotence.needs_reset = false;
        }
        Err(error) => {
            tracing::warn!(%error, "InitProducerId failed; retrying");
            tokio::time::sleep(config.client.retry_backoff).await;
        }
    }
}

fn expire(shared: &Shared, now: Instant, delivery_timeout: Duration) {
    let expired = shared.accumulator().expire(now, delivery_timeout);
    for batch in expired {
        let elapsed_ms = millis(now.saturating_duration_since(batch.created_at));
        batch.fail(ProduceError::Timeout { elapsed_ms });
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Drains ready batches grouped by leader and sends them; returns when to
/// look again.
async fn send_ready(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    config: &ProducerConfig,
    answers: &mpsc::UnboundedSender<Answer>,
    in_flight: &mut HashMap<i32, usize>,
    now: Instant,
) -> Option<Instant> {
    let readiness = shared.accumulator().ready(now);
    let metadata = cluster.metadata();
    let mut by_leader: HashMap<i32, Vec<TopicPartition>> = HashMap::new();
    let mut next_check = readiness.next_check;
    for topic_partition in readiness.ready {
        match metadata
            .topics
            .get(&topic_partition.topic)
            .and_then(|topic| {
                topic
                    .partition(topic_partition.partition)
                    .and_then(|partition| partition.leader)
            }) {
            Some(leader) => by_leader.entry(leader).or_default().push(topic_partition),
            None => {
                cluster.request_metadata_refresh();
                let _ = cluster.topic(&topic_partition.topic).await;
                let retry = now + config.client.retry_backoff;
                next_check = Some(next_check.map_or(retry, |next| next.min(retry)));
            }
        }
    }
    for (leader, partitions) in by_leader {
        let count = in_flight.entry(leader).or_insert(0);
        if *count >= config.max_in_flight_requests_per_connection {
            continue;
        }
        let batches = drain_for_leader(shared, &partitions, config.max_request_size);
        if batches.is_empty() {
            continue;
        }
        *count += 1;
        dispatch(shared, cluster, config, answers, leader, batches).await;
    }
    next_check
}

fn drain_for_leader(
    shared: &Shared,
    partitions: &[TopicPartition],
    max_request_size: usize,
) -> Vec<ProducerBatch> {
    let mut accumulator = shared.accumulator();
    let mut batches = Vec::new();
    let mut size = 0;
    for topic_partition in partitions {
        let Some(batch) = accumulator.drain(topic_partition) else {
            continue;
        };
        if !batches.is_empty() && size + batch.size_bytes() > max_request_size {
            accumulator.reenqueue(batch, Instant::now());
            break;
        }
        size += batch.size_bytes();
        batches.push(batch);
    }
    batches
}

/// Seals the batches, builds one Produce request and sends it.
async fn dispatch(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    config: &ProducerConfig,
    answers: &mpsc::UnboundedSender<Answer>,
    leader: i32,
    batches: Vec<ProducerBatch>,
) {
    let mut topics: HashMap<String, Vec<PartitionProduceData>> = HashMap::new();
    let mut sealed = Vec::with_capacity(batches.len());
    for mut batch in batches {
        let stamp = if shared.idempotent {
            shared.idempotence().stamp(&batch)
        } else {
            None
        };
        match batch.seal(stamp) {
            Ok(bytes) => {
                topics
                    .entry(batch.topic_partition.topic.clone())
                    .or_default()
                    .push(
                        PartitionProduceData::default()
                            .with_index(batch.topic_partition.partition)
                            .with_records(Some(bytes)),
                    );
                sealed.push(batch);
            }
            Err(error) => {
                shared.accumulator().unmute(&batch.topic_partition);
                batch.fail(error);
            }
        }
    }
    let request = ProduceRequest::default()
        .with_acks(config.acks.wire())
        .with_timeout_ms(
            i32::try_from(config.client.request_timeout.as_millis()).unwrap_or(i32::MAX),
        )
        .with_topic_data(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic)))
                        .with_partition_data(partitions)
                })
                .collect(),
        );
    let answers = answers.clone();
    let send = async {
        let connection = cluster.broker_connection(leader).await?;
        let version = connection
            .api_version(ApiKey::Produce)?
            .min(MAX_PRODUCE_VERSION);
        if config.acks == Acks::None {
            connection.submit_without_response(request.into())?;
            return Ok(None);
        }
        Ok(Some(connection.submit_at(
            request.into(),
            version,
            config.client.request_timeout,
        )?))
    };
    match send.await {
        Ok(None) => {
            let _ = answers.send(Answer {
                leader,
                batches: sealed,
                result: Ok(None),
            });
        }
        Ok(Some(pending)) => {
            tokio::spawn(async move {
                let result = match pending.await {
                    Ok(Response::Produce(response)) => Ok(Some(response)),
                    Ok(_) => Err(ClientError::UnexpectedResponse {
                        api_key: ApiKey::Produce as i16,
                    }),
                    Err(error) => Err(error),
                };
                let _ = answers.send(Answer {
                    leader,
                    batches: sealed,
                    result,
                });
            });
        }
        Err(error) => {
            let _ = answers.send(Answer {
                leader,
                batches: sealed,
                result: Err(error),
            });
        }
    }
}

/// Applies one answer to its batches.
fn handle_answer(shared: &Shared, cluster: &Cluster, config: &ProducerConfig, answer: Answer) {
    let Answer {
        batches, result, ..
    } = answer;
    let response = match result {
        Ok(Some(response)) => response,
        Ok(None) => {
            for batch in batches {
                shared.accumulator().unmute(&batch.topic_partition);
                batch.complete(-1, -1);
            }
            return;
        }
        Err(error) => {
            tracing::debug!(%error, "produce request failed; retrying its batches");
            cluster.request_metadata_refresh();
            for batch in batches {
                retry_or_fail(
                    shared,
                    config,
                    batch,
                    ProduceError::Client {
                        reason: error.to_string(),
                    },
                );
            }
            return;
        }
    };
    let mut outcomes: HashMap<(String, i32), (i16, i64, i64)> = HashMap::new();
    for topic in &response.responses {
        for partition in &topic.partition_responses {
            outcomes.insert(
                (topic.name.0.to_string(), partition.index),
                (
                    partition.error_code,
                    partition.base_offset,
                    partition.log_append_time_ms,
                ),
            );
        }
    }
    for batch in batches {
        let key = (
            batch.topic_partition.topic.clone(),
            batch.topic_partition.partition,
        );
        let Some(&(code, base_offset, log_append_time_ms)) = outcomes.get(&key) else {
            retry_or_fail(
                shared,
                config,
                batch,
                ProduceError::Broker {
                    code: ErrorCode::UnknownServerError,
                },
            );
            continue;
        };
        handle_partition(
            shared,
            cluster,
            config,
            batch,
            ErrorCode::from_code(code),
            base_offset,
            log_append_time_ms,
        );
    }
}

fn handle_partition(
    shared: &Shared,
    cluster: &Cluster,
    config: &ProducerConfig,
    batch: ProducerBatch,
    code: ErrorCode,
    base_offset: i64,
    log_append_time_ms: i64,
) {
    match code {
        ErrorCode::None => {
            shared.accumulator().unmute(&batch.topic_partition);
            batch.complete(base_offset, log_append_time_ms);
        }
        // A retry of a batch the broker already has: it was written once.
        ErrorCode::DuplicateSequenceNumber => {
            shared.accumulator().unmute(&batch.topic_partition);
            batch.complete(-1, log_append_time_ms);
        }
        ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId if shared.idempotent => {
            shared.idempotence().needs_reset = true;
            retry_or_fail(shared, config, batch, ProduceError::Broker { code });
        }
        code if code.is_retriable() => {
            cluster.request_metadata_refresh();
            retry_or_fail(shared, config, batch, ProduceError::Broker { code });
        }
        code => {
            let topic_partition = batch.topic_partition.clone();
            shared.accumulator().unmute(&topic_partition);
            let error = match ProduceError::from_code(
                code,
                &topic_partition.topic,
                topic_partition.partition,
            ) {
                ProduceError::RecordTooLarge { .. } => ProduceError::RecordTooLarge {
                    size_bytes: batch.size_bytes(),
                },
                other => other,
            };
            batch.fail(error);
        }
    }
}

/// Re-enqueues a batch after `retry.backoff.ms`, or fails it when its
/// delivery timeout has passed.
fn retry_or_fail(
    shared: &Shared,
    config: &ProducerConfig,
    batch: ProducerBatch,
    error: ProduceError,
) {
    let now = Instant::now();
    let elapsed = now.saturating_duration_since(batch.created_at);
    if elapsed + config.client.retry_backoff >= config.delivery_timeout {
        shared.accumulator().unmute(&batch.topic_partition);
        let error = match error {
            ProduceError::Broker { code } if code.is_retriable() => ProduceError::Timeout {
                elapsed_ms: millis(elapsed),
            },
            ProduceError::Client { .. } => ProduceError::Timeout {
                elapsed_ms: millis(elapsed),
            },
            other => other,
        };
        batch.fail(error);
        return;
    }
    shared
        .accumulator()
        .reenqueue(batch, now + config.client.retry_backoff);
    shared.wake.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accumulator::AccumulatorConfig;
    use crate::record::ProducerRecord;
    use strom_protocol::records::Compression;
    use tokio::sync::oneshot;

    fn batch_of(records: usize) -> ProducerBatch {
        let mut accumulator = Accumulator::new(AccumulatorConfig {
            batch_size: 1 << 20,
            linger: Duration::ZERO,
            compression: Compression::None,
        });
        let tp = TopicPartition {
            topic: "t".to_owned(),
            partition: 0,
        };
        for _ in 0..records {
            let (sender, _) = oneshot::channel();
            accumulator
                .append(
                    tp.clone(),
                    &ProducerRecord::new("t", "v"),
                    0,
                    sender,
                    None,
                    Instant::now(),
                )
                .map_err(|(error, _)| error)
                .unwrap();
        }
        accumulator.drain(&tp).unwrap()
    }

    #[test]
    fn sequences_advance_per_batch_and_retries_reuse_them() {
        let mut idempotence = Idempotence {
            producer: Some((5, 0)),
            ..Idempotence::default()
        };
        let mut first = batch_of(3);
        let stamp = idempotence.stamp(&first).unwrap();
        assert_eq!(stamp.base_sequence, 0);
        first.seal(Some(stamp)).unwrap();
        // A retry keeps its sequence.
        assert_eq!(idempotence.stamp(&first), Some(stamp));
        let second = batch_of(2);
        assert_eq!(idempotence.stamp(&second).unwrap().base_sequence, 3);
        // After a producer id reset, sequences restart and the batch is restamped.
        idempotence.producer = Some((6, 0));
        idempotence.sequences.clear();
        let restamped = idempotence.stamp(&first).unwrap();
        assert_eq!((restamped.producer_id, restamped.base_sequence), (6, 0));
    }

    #[test]
    fn no_stamp_without_producer_id() {
        let mut idempotence = Idempotence::default();
        assert_eq!(idempotence.stamp(&batch_of(1)), None);
    }
}
