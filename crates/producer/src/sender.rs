//! The sender task: drains ready batches per leader into Produce requests,
//! and handles their answers (success, retry, failure, producer id reset).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use strom_client::connection::ResponseFuture;
use strom_client::{ClientError, Cluster};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::{
    ApiKey, InitProducerIdRequest, ProduceRequest, ProduceResponse, ProducerId, TopicName,
    TransactionalId,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};
use tokio::sync::{mpsc, Notify};
use uuid::Uuid;

use crate::accumulator::{Accumulator, ProducerBatch, ProducerStamp, SplitOutcome, TopicPartition};
use crate::config::{Acks, ProducerConfig};
use crate::coordinator::Transactions;
use crate::error::{ProduceError, SharedError, TransactionError};

/// The highest Produce version used.
const MAX_PRODUCE_VERSION: i16 = 13;
/// From this version Produce names topics by id only (KIP-516).
const TOPIC_ID_PRODUCE_VERSION: i16 = 13;

/// The idempotent producer's identity and per-partition sequences.
#[derive(Debug, Default)]
pub struct Idempotence {
    /// Producer id and epoch, once obtained.
    pub producer: Option<(i64, i16)>,
    /// The next sequence per partition.
    pub sequences: HashMap<TopicPartition, i32>,
    /// Set when the broker lost track of us: get a new producer id.
    pub needs_reset: bool,
    /// Per partition, the sequence after the last acknowledged batch: the
    /// one the broker expects next.
    pub acknowledged: HashMap<TopicPartition, i32>,
}

impl Idempotence {
    /// Records that the broker acknowledged a batch stamped with `stamp`.
    pub fn acknowledge(&mut self, batch: &ProducerBatch) {
        let Some(stamp) = batch.stamp else { return };
        if self.producer != Some((stamp.producer_id, stamp.producer_epoch)) {
            return;
        }
        let count = i32::try_from(batch.record_count()).unwrap_or(i32::MAX);
        self.acknowledged.insert(
            batch.topic_partition.clone(),
            stamp.base_sequence.wrapping_add(count) & i32::MAX,
        );
    }

    /// Whether an OUT_OF_ORDER_SEQUENCE_NUMBER for `batch` only means that
    /// an earlier batch of its partition is not written yet (it is being
    /// retried): then the batch is simply retried after it. Otherwise the
    /// broker lost our sequence and the producer needs a new id.
    pub fn is_behind_unacknowledged(&self, batch: &ProducerBatch) -> bool {
        let Some(stamp) = batch.stamp else {
            return false;
        };
        let expected = self
            .acknowledged
            .get(&batch.topic_partition)
            .copied()
            .unwrap_or(0);
        self.producer == Some((stamp.producer_id, stamp.producer_epoch))
            && stamp.base_sequence != expected
    }

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
    /// The transaction state and coordinators, with a `transactional.id`.
    pub transactions: Option<Transactions>,
}

impl Shared {
    /// Locks the accumulator.
    ///
    /// A panic while it was locked may have left a record in a batch
    /// without its delivery result (an append changes the batch in several
    /// steps), so the producer closes itself instead of sending such a
    /// batch: every queued batch fails with [`ProduceError::Poisoned`],
    /// later sends fail with [`ProduceError::Closed`], and the error is
    /// logged. Batches already sent complete as usual.
    pub fn accumulator(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.accumulator.lock().unwrap_or_else(|poisoned| {
            let mut accumulator = poisoned.into_inner();
            tracing::error!(
                "a thread panicked holding the producer's accumulator; closing the producer"
            );
            self.closing
                .store(true, std::sync::atomic::Ordering::Release);
            for batch in accumulator.take_all() {
                batch.fail(ProduceError::Poisoned);
            }
            self.accumulator.clear_poison();
            self.wake.notify_one();
            accumulator
        })
    }

    /// Whether batches of `topic_partition` may be sent now: always without
    /// transactions, else once the partition was added to the transaction.
    fn may_send(&self, topic_partition: &TopicPartition) -> bool {
        self.transactions
            .as_ref()
            .is_none_or(|transactions| transactions.manager().may_send(topic_partition))
    }

    /// Locks the producer id and sequences.
    pub fn idempotence(&self) -> std::sync::MutexGuard<'_, Idempotence> {
        // Producer id, epoch and next sequence per partition, each set by
        // one assignment: reused after a panic. A sequence that ran ahead
        // of what was sent is refused by the broker
        // (OUT_OF_ORDER_SEQUENCE_NUMBER), never silently accepted.
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
    /// Topic ids the request named topics by (v13), to read the answer.
    topic_ids: HashMap<String, Uuid>,
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
    let mut pipes = AnswerPipes {
        answers,
        by_leader: HashMap::new(),
    };
    let mut in_flight: HashMap<i32, usize> = HashMap::new();
    loop {
        // A new producer id only once every batch stamped with the old one
        // was answered, and nothing is sent until then: batches restamped
        // from sequence 0 must not overtake older ones still in flight.
        let resetting = shared.idempotent && shared.idempotence().needs_reset;
        if resetting && in_flight.values().all(|count| *count == 0) {
            reset_producer_id(&shared, &cluster, &config).await;
        }
        if let Err(error) = cluster.refresh_metadata_if_needed().await {
            tracing::debug!(%error, "metadata refresh failed");
        }
        let now = Instant::now();
        expire(&shared, now, config.delivery_timeout);
        let next_add = transaction_step(&shared, now).await;
        let mut next_check = None;
        if !(shared.idempotent && shared.idempotence().needs_reset) {
            loop {
                let (check, dispatched) =
                    send_ready(&shared, &cluster, &config, &mut pipes, &mut in_flight, now).await;
                next_check = check;
                if !dispatched {
                    break;
                }
            }
        }
        if shared.accumulator().is_empty() {
            shared.drained.notify_waiters();
            if shared.closing.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
        }
        let next_check = match (next_check, next_add) {
            (Some(check), Some(add)) => Some(check.min(add)),
            (check, add) => check.or(add),
        };
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
            idempotence.acknowledged.clear();
            idempotence.needs_reset = false;
        }
        Err(error) => {
            tracing::warn!(%error, "InitProducerId failed; retrying");
            tokio::time::sleep(config.client.retry_backoff).await;
        }
    }
}

/// A transactional producer's work before sending: in an error state the
/// queued batches fail with its error (they cannot commit); else the
/// partitions new to the transaction are added. Returns when to add again.
async fn transaction_step(shared: &Shared, now: Instant) -> Option<Instant> {
    let transactions = shared.transactions.as_ref()?;
    let failing = transactions.manager().error_for_queued_batches();
    if let Some(error) = failing {
        let queued = shared.accumulator().take_all();
        for batch in queued {
            batch.fail(ProduceError::Transaction(error.clone()));
        }
        return None;
    }
    let producer = shared.idempotence().producer;
    transactions.add_pending_partitions(producer, now).await
}

fn expire(shared: &Shared, now: Instant, delivery_timeout: Duration) {
    let expired = shared.accumulator().expire(now, delivery_timeout);
    for batch in expired {
        let elapsed_ms = millis(now.saturating_duration_since(batch.created_at));
        fail_for_good(shared, batch, ProduceError::Timeout { elapsed_ms });
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
    pipes: &mut AnswerPipes,
    in_flight: &mut HashMap<i32, usize>,
    now: Instant,
) -> (Option<Instant>, bool) {
    let readiness = shared.accumulator().ready(now);
    let metadata = cluster.metadata();
    let mut by_leader: HashMap<i32, Vec<TopicPartition>> = HashMap::new();
    let mut next_check = readiness.next_check;
    for topic_partition in readiness.ready {
        if !shared.may_send(&topic_partition) {
            continue;
        }
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
    let mut dispatched = false;
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
        dispatched = true;
        let pipe = pipes.for_leader(leader);
        dispatch(shared, cluster, config, &pipe, leader, batches).await;
    }
    (next_check, dispatched)
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
            accumulator.undrain(batch);
            break;
        }
        size += batch.size_bytes();
        batches.push(batch);
    }
    batches
}

/// Seals `batches` (stamping them when idempotent) into the partition data
/// of one Produce request; a batch that cannot be sealed fails for good.
fn seal_batches(
    shared: &Arc<Shared>,
    batches: Vec<ProducerBatch>,
) -> (
    HashMap<String, Vec<PartitionProduceData>>,
    Vec<ProducerBatch>,
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
                fail_for_good(shared, batch, error);
            }
        }
    }
    (topics, sealed)
}

/// Seals the batches, builds one Produce request and sends it.
async fn dispatch(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    config: &ProducerConfig,
    pipe: &mpsc::UnboundedSender<Outstanding>,
    leader: i32,
    batches: Vec<ProducerBatch>,
) {
    let (topics, sealed) = seal_batches(shared, batches);
    let send = async {
        let connection = cluster.broker_connection(leader).await?;
        let supported = connection
            .api_version(ApiKey::Produce)?
            .min(MAX_PRODUCE_VERSION);
        let (request, version, topic_ids) = produce_request(cluster, config, topics, supported);
        if config.acks == Acks::None {
            connection.submit_without_response_at(request.into(), version)?;
            return Ok((None, topic_ids));
        }
        let response =
            connection.submit_at(request.into(), version, config.client.request_timeout)?;
        Ok((Some(response), topic_ids))
    };
    let outstanding = match send.await {
        Ok((Some(response), topic_ids)) => Outstanding::Pending {
            leader,
            batches: sealed,
            response,
            topic_ids,
        },
        Ok((None, _)) => Outstanding::Done(Answer {
            leader,
            batches: sealed,
            result: Ok(None),
            topic_ids: HashMap::new(),
        }),
        Err(error) => Outstanding::Done(Answer {
            leader,
            batches: sealed,
            result: Err(error),
            topic_ids: HashMap::new(),
        }),
    };
    // The forwarder only stops when the sender loop dropped its pipes.
    let _ = pipe.send(outstanding);
}

/// The Produce request for `topics` at the highest version both sides
/// support: v13 (KIP-516) names topics by id, so it is used only when the
/// metadata knows every topic's id. Returns the request, its version and
/// the ids used (name to id; empty below v13).
fn produce_request(
    cluster: &Cluster,
    config: &ProducerConfig,
    topics: HashMap<String, Vec<PartitionProduceData>>,
    supported_version: i16,
) -> (ProduceRequest, i16, HashMap<String, Uuid>) {
    let mut topic_ids = HashMap::new();
    let mut version = supported_version;
    if version >= TOPIC_ID_PRODUCE_VERSION {
        let metadata = cluster.metadata();
        for name in topics.keys() {
            match metadata.topics.get(name).map(|topic| topic.topic_id) {
                Some(id) if !id.is_nil() => {
                    topic_ids.insert(name.clone(), id);
                }
                _ => {
                    version = TOPIC_ID_PRODUCE_VERSION - 1;
                    topic_ids.clear();
                    break;
                }
            }
        }
    }
    let topic_data = topics
        .into_iter()
        .map(|(topic, partitions)| {
            let data = TopicProduceData::default().with_partition_data(partitions);
            match topic_ids.get(&topic) {
                Some(id) => data.with_topic_id(*id),
                None => data.with_name(TopicName(StrBytes::from_string(topic))),
            }
        })
        .collect();
    let transactional_id = config
        .transactional_id
        .as_ref()
        .map(|id| TransactionalId(StrBytes::from_string(id.clone())));
    let request = ProduceRequest::default()
        .with_transactional_id(transactional_id)
        .with_acks(config.acks.wire())
        .with_timeout_ms(
            i32::try_from(config.client.request_timeout.as_millis()).unwrap_or(i32::MAX),
        )
        .with_topic_data(topic_data);
    (request, version, topic_ids)
}

/// A request sent to a leader, in the order of sending.
enum Outstanding {
    /// Awaiting its response.
    Pending {
        leader: i32,
        batches: Vec<ProducerBatch>,
        response: ResponseFuture,
        topic_ids: HashMap<String, Uuid>,
    },
    /// Answered already (acks=0, or it could not be sent).
    Done(Answer),
}

/// One forwarder task per leader hands the sender loop the answers of that
/// leader's requests in the order they were sent, whatever order their
/// futures wake up in: the per-partition bookkeeping (sequences
/// acknowledged, retries) relies on it.
struct AnswerPipes {
    answers: mpsc::UnboundedSender<Answer>,
    by_leader: HashMap<i32, mpsc::UnboundedSender<Outstanding>>,
}

impl AnswerPipes {
    fn for_leader(&mut self, leader: i32) -> mpsc::UnboundedSender<Outstanding> {
        let answers = &self.answers;
        self.by_leader
            .entry(leader)
            .or_insert_with(|| {
                let (pipe, requests) = mpsc::unbounded_channel();
                tokio::spawn(forward_in_order(requests, answers.clone()));
                pipe
            })
            .clone()
    }
}

async fn forward_in_order(
    mut requests: mpsc::UnboundedReceiver<Outstanding>,
    answers: mpsc::UnboundedSender<Answer>,
) {
    while let Some(outstanding) = requests.recv().await {
        let answer = match outstanding {
            Outstanding::Done(answer) => answer,
            Outstanding::Pending {
                leader,
                batches,
                response,
                topic_ids,
            } => {
                let result = match response.await {
                    Ok(Response::Produce(response)) => Ok(Some(response)),
                    Ok(_) => Err(ClientError::UnexpectedResponse {
                        api_key: ApiKey::Produce as i16,
                    }),
                    Err(error) => Err(error),
                };
                Answer {
                    leader,
                    batches,
                    result,
                    topic_ids,
                }
            }
        };
        if answers.send(answer).is_err() {
            return;
        }
    }
}

/// Each partition's (error code, base offset, log append time) in a
/// Produce response, by topic name (v13 answers name topics by id only).
fn partition_outcomes(
    response: &ProduceResponse,
    topic_ids: &HashMap<String, Uuid>,
) -> HashMap<(String, i32), (i16, i64, i64)> {
    let names_by_id: HashMap<Uuid, &String> =
        topic_ids.iter().map(|(name, id)| (*id, name)).collect();
    let mut outcomes: HashMap<(String, i32), (i16, i64, i64)> = HashMap::new();
    for topic in &response.responses {
        let name = match names_by_id.get(&topic.topic_id) {
            Some(name) if topic.name.0.is_empty() => (*name).clone(),
            _ => topic.name.0.to_string(),
        };
        for partition in &topic.partition_responses {
            outcomes.insert(
                (name.clone(), partition.index),
                (
                    partition.error_code,
                    partition.base_offset,
                    partition.log_append_time_ms,
                ),
            );
        }
    }
    outcomes
}

/// Applies one answer to its batches.
fn handle_answer(shared: &Shared, cluster: &Cluster, config: &ProducerConfig, answer: Answer) {
    let Answer {
        batches,
        result,
        topic_ids,
        ..
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
            let error = ProduceError::Client(SharedError::new(error));
            for batch in batches {
                retry_or_fail(shared, config, batch, error.clone());
            }
            return;
        }
    };
    let outcomes = partition_outcomes(&response, &topic_ids);
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
            if shared.idempotent {
                shared.idempotence().acknowledge(&batch);
            }
            batch.complete(base_offset, log_append_time_ms);
        }
        // A retry of a batch the broker already has: it was written once.
        ErrorCode::DuplicateSequenceNumber => {
            shared.accumulator().unmute(&batch.topic_partition);
            shared.idempotence().acknowledge(&batch);
            batch.complete(-1, log_append_time_ms);
        }
        ErrorCode::OutOfOrderSequenceNumber if shared.idempotent => {
            out_of_order_sequence(shared, config, batch);
        }
        ErrorCode::UnknownProducerId if shared.transactions.is_some() => {
            shared.accumulator().unmute(&batch.topic_partition);
            fail_for_good(shared, batch, ProduceError::Broker { code });
        }
        ErrorCode::UnknownProducerId if shared.idempotent => {
            shared.idempotence().needs_reset = true;
            retry_or_fail(shared, config, batch, ProduceError::Broker { code });
        }
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => {
            split_or_fail(shared, config, batch, code);
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
            fail_for_good(shared, batch, error);
        }
    }
}

/// OUT_OF_ORDER_SEQUENCE_NUMBER: behind an earlier batch not acknowledged
/// yet, the batch is retried after it. Otherwise an idempotent producer
/// gets a new id; in a transaction the batch fails, and so the
/// transaction, whose abort bumps the epoch (KIP-360).
fn out_of_order_sequence(shared: &Shared, config: &ProducerConfig, batch: ProducerBatch) {
    let code = ErrorCode::OutOfOrderSequenceNumber;
    let mut idempotence = shared.idempotence();
    let behind = idempotence.is_behind_unacknowledged(&batch);
    if !behind && shared.transactions.is_none() {
        idempotence.needs_reset = true;
    }
    drop(idempotence);
    if behind || shared.transactions.is_none() {
        retry_or_fail(shared, config, batch, ProduceError::Broker { code });
    } else {
        shared.accumulator().unmute(&batch.topic_partition);
        fail_for_good(shared, batch, ProduceError::Broker { code });
    }
}

/// Splits a batch the broker found too large and sends the halves at once
/// in its place; a single record too large fails with
/// [`ProduceError::RecordTooLarge`].
fn split_or_fail(shared: &Shared, config: &ProducerConfig, batch: ProducerBatch, code: ErrorCode) {
    let topic_partition = batch.topic_partition.clone();
    let size_bytes = batch.size_bytes();
    match batch.split(config.compression) {
        SplitOutcome::Halves(halves) => {
            let (first, second) = *halves;
            tracing::debug!(
                topic = %topic_partition.topic,
                partition = topic_partition.partition,
                size_bytes,
                %code,
                "batch too large for the broker; split in two"
            );
            shared.accumulator().reenqueue_split(first, second);
            shared.wake.notify_one();
        }
        SplitOutcome::Single(batch) => {
            shared.accumulator().unmute(&topic_partition);
            fail_for_good(shared, batch, ProduceError::RecordTooLarge { size_bytes });
        }
        SplitOutcome::Failed(batch, error) => {
            tracing::warn!(%error, "could not split a batch that was too large");
            shared.accumulator().unmute(&topic_partition);
            fail_for_good(shared, batch, error);
        }
    }
}

/// Fails a batch's records. A stamped batch of an idempotent producer
/// leaves a hole in its partition's sequence (and may even have been
/// written, when its last attempt timed out): the producer gets a new id,
/// so the batches behind it are restamped from sequence 0, as the Java
/// client bumps its epoch.
fn fail_for_good(shared: &Shared, batch: ProducerBatch, error: ProduceError) {
    if let Some(transactions) = &shared.transactions {
        // The transaction cannot commit: abortable, or fatal when fenced.
        let topic_partition = &batch.topic_partition;
        let failure = TransactionError::record_failed(
            transactions.transactional_id(),
            &topic_partition.topic,
            topic_partition.partition,
            error.clone(),
        );
        transactions.manager().fail(failure);
    } else if shared.idempotent && batch.stamp.is_some() {
        shared.idempotence().needs_reset = true;
    }
    batch.fail(error);
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
            ProduceError::Client(_) => ProduceError::Timeout {
                elapsed_ms: millis(elapsed),
            },
            other => other,
        };
        fail_for_good(shared, batch, error);
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
            max_in_flight_per_partition: 1,
            batch_size: 1 << 20,
            linger: Duration::ZERO,
            compression: Compression::None,
            transactional: false,
        });
        let tp = TopicPartition {
            topic: "t".to_owned(),
            partition: 0,
        };
        for _ in 0..records {
            let (sender, _) = oneshot::channel();
            accumulator
                .append(
                    ("t", 0),
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

    #[test]
    fn a_panic_holding_the_accumulator_closes_the_producer_and_fails_its_queued_batches() {
        let shared = Shared {
            accumulator: Mutex::new(Accumulator::new(AccumulatorConfig {
                max_in_flight_per_partition: 1,
                batch_size: 1 << 20,
                linger: Duration::ZERO,
                compression: Compression::None,
                transactional: false,
            })),
            idempotence: Mutex::new(Idempotence::default()),
            idempotent: false,
            wake: Notify::new(),
            drained: Notify::new(),
            closing: std::sync::atomic::AtomicBool::new(false),
            transactions: None,
        };
        let (sender, mut delivery) = oneshot::channel();
        shared
            .accumulator()
            .append(
                ("t", 0),
                &ProducerRecord::new("t", "v"),
                0,
                sender,
                None,
                Instant::now(),
            )
            .map_err(|(error, _)| error)
            .expect("append");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _accumulator = shared.accumulator();
            panic!("injected panic while changing the accumulator");
        }));
        assert!(panicked.is_err());
        assert!(
            shared.accumulator().is_empty(),
            "queued batches are not sent"
        );
        assert!(shared.closing.load(std::sync::atomic::Ordering::Acquire));
        assert!(matches!(
            delivery.try_recv(),
            Ok(Err(ProduceError::Poisoned))
        ));
        assert!(!shared.accumulator.is_poisoned());
    }
}
