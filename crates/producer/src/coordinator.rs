//! Requests of a transactional producer to its transaction coordinator
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and to a
//! consumer group's coordinator (TxnOffsetCommit), with the retries Kafka's
//! clients make: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE look the
//! coordinator up again, CONCURRENT_TRANSACTIONS is retried after 20 ms
//! (the previous transaction is still completing), other retriable codes
//! after `retry.backoff.ms`.
//!
//! The request builders and [`step_for_code`] are plain functions, unit
//! tested without a broker; [`Coordinators`] performs the round trips.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use strom_client::{ClientError, Cluster};
use strom_protocol::kafka::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use strom_protocol::kafka::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey,
    EndTxnRequest, GroupId, InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request, Response};

use crate::accumulator::TopicPartition;
use crate::error::{ErrorContext, TransactionError};
use crate::transaction::TransactionManager;
use crate::transaction_state::TransactionOperation;

/// How long to wait before retrying CONCURRENT_TRANSACTIONS: the
/// coordinator is completing the previous transaction, which takes
/// milliseconds (the Java client waits 20 ms too).
pub const CONCURRENT_TRANSACTIONS_BACKOFF: Duration = Duration::from_millis(20);

/// FindCoordinator's key type of a consumer group.
const GROUP_KEY_TYPE: i8 = 0;
/// FindCoordinator's key type of a transactional id.
const TRANSACTION_KEY_TYPE: i8 = 1;
/// The first TxnOffsetCommit version with the group's generation and
/// member (KIP-447).
const GROUP_METADATA_TXN_OFFSET_COMMIT_VERSION: i16 = 3;
/// The first TxnOffsetCommit version with committed leader epochs.
const LEADER_EPOCH_TXN_OFFSET_COMMIT_VERSION: i16 = 2;
/// The first InitProducerId version that bumps a given producer's epoch
/// (KIP-360).
const EPOCH_BUMP_INIT_PRODUCER_ID_VERSION: i16 = 3;

/// A consumer's group membership, as `send_offsets_to_transaction` needs
/// it (KIP-447): the group coordinator refuses offsets of a member that was
/// rebalanced out, so a zombie cannot commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The group's generation the member joined (-1: unknown, not checked).
    pub generation_id: i32,
    /// The member id ("" when unknown).
    pub member_id: String,
    /// The static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata with the group id only (no generation or member check, as
    /// the Java client's `new ConsumerGroupMetadata(groupId)`).
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }

    /// Sets the generation and member id.
    pub fn with_member(mut self, generation_id: i32, member_id: impl Into<String>) -> Self {
        self.generation_id = generation_id;
        self.member_id = member_id.into();
        self
    }

    /// Sets the `group.instance.id`.
    pub fn with_group_instance_id(mut self, group_instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(group_instance_id.into());
        self
    }
}

/// An offset to commit with the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last record consumed, if known.
    pub leader_epoch: Option<i32>,
    /// Metadata stored with the offset.
    pub metadata: Option<String>,
}

impl OffsetAndMetadata {
    /// An offset without leader epoch or metadata.
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            leader_epoch: None,
            metadata: None,
        }
    }
}

/// Offsets to commit, by (topic, partition).
pub type Offsets = BTreeMap<(String, i32), OffsetAndMetadata>;

fn str_bytes(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn clamp_millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

/// InitProducerId for `transactional_id` at `version`; with `current`
/// (an epoch bump, KIP-360) the producer id and epoch are sent from v3 on
/// (older brokers bump the epoch of a known transactional id anyway).
pub fn init_producer_id_request(
    transactional_id: &str,
    transaction_timeout: Duration,
    current: Option<(i64, i16)>,
    version: i16,
) -> InitProducerIdRequest {
    let (producer_id, producer_epoch) = match current {
        Some(current) if version >= EPOCH_BUMP_INIT_PRODUCER_ID_VERSION => current,
        _ => (-1, -1),
    };
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(str_bytes(transactional_id))))
        .with_transaction_timeout_ms(clamp_millis(transaction_timeout))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
}

/// AddPartitionsToTxn (v0-3, the client's versions) for `partitions`,
/// grouped by topic.
pub fn add_partitions_request(
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    partitions: &[TopicPartition],
) -> AddPartitionsToTxnRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for topic_partition in partitions {
        by_topic
            .entry(&topic_partition.topic)
            .or_default()
            .push(topic_partition.partition);
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(partitions)
        })
        .collect();
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(producer_epoch)
        .with_v3_and_below_topics(topics)
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction.
pub fn add_offsets_request(
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    group_id: &str,
) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_group_id(GroupId(str_bytes(group_id)))
}

/// EndTxn: commit (`committed`) or abort.
pub fn end_txn_request(
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    committed: bool,
) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_committed(committed)
}

/// TxnOffsetCommit at `version`: the group's generation, member and
/// instance id from v3 (KIP-447), leader epochs from v2.
pub fn txn_offset_commit_request(
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    group: &ConsumerGroupMetadata,
    offsets: &Offsets,
    version: i16,
) -> TxnOffsetCommitRequest {
    let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        let leader_epoch = match offset.leader_epoch {
            Some(epoch) if version >= LEADER_EPOCH_TXN_OFFSET_COMMIT_VERSION => epoch,
            _ => -1,
        };
        by_topic.entry(topic).or_default().push(
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(offset.offset)
                .with_committed_leader_epoch(leader_epoch)
                .with_committed_metadata(offset.metadata.as_deref().map(str_bytes)),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(partitions)
        })
        .collect();
    let mut request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
        .with_group_id(GroupId(str_bytes(&group.group_id)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_topics(topics);
    if version >= GROUP_METADATA_TXN_OFFSET_COMMIT_VERSION {
        request = request
            .with_generation_id(group.generation_id)
            .with_member_id(str_bytes(&group.member_id))
            .with_group_instance_id(group.group_instance_id.as_deref().map(str_bytes));
    }
    request
}

/// The first error of an AddPartitionsToTxn answer, with its topic:
/// OPERATION_NOT_ATTEMPTED (the partition was fine, another failed) counts
/// only when nothing else failed.
pub fn add_partitions_error(response: &AddPartitionsToTxnResponse) -> (ErrorCode, String) {
    let mut not_attempted = None;
    for topic in &response.results_by_topic_v3_and_below {
        for partition in &topic.results_by_partition {
            match ErrorCode::from_code(partition.partition_error_code) {
                ErrorCode::None => {}
                ErrorCode::OperationNotAttempted => {
                    not_attempted =
                        Some((ErrorCode::OperationNotAttempted, topic.name.0.to_string()));
                }
                code => return (code, topic.name.0.to_string()),
            }
        }
    }
    match ErrorCode::from_code(response.error_code) {
        ErrorCode::None => not_attempted.unwrap_or((ErrorCode::None, String::new())),
        code => (code, String::new()),
    }
}

/// The first per-partition error of a TxnOffsetCommit answer.
pub fn txn_offset_commit_error(response: &TxnOffsetCommitResponse) -> ErrorCode {
    response
        .topics
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| ErrorCode::from_code(partition.error_code))
        .find(|code| *code != ErrorCode::None)
        .unwrap_or(ErrorCode::None)
}

/// What to do after a coordinator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<T> {
    /// It succeeded.
    Done(T),
    /// Send it again after the backoff.
    Retry(Duration),
    /// Look the coordinator up again, then retry.
    FindCoordinator,
    /// It failed for good.
    Fail(TransactionError),
}

impl<T> Step<T> {
    /// Maps the success value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Step<U> {
        match self {
            Step::Done(value) => Step::Done(f(value)),
            Step::Retry(backoff) => Step::Retry(backoff),
            Step::FindCoordinator => Step::FindCoordinator,
            Step::Fail(error) => Step::Fail(error),
        }
    }
}

/// The step for a coordinator's error code.
pub fn step_for_code(
    code: ErrorCode,
    context: ErrorContext<'_>,
    retry_backoff: Duration,
) -> Step<()> {
    match code {
        ErrorCode::None => Step::Done(()),
        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => Step::FindCoordinator,
        ErrorCode::ConcurrentTransactions => Step::Retry(CONCURRENT_TRANSACTIONS_BACKOFF),
        // OPERATION_NOT_ATTEMPTED alone: nothing failed, send it again.
        ErrorCode::OperationNotAttempted => Step::Retry(retry_backoff),
        code if code.is_retriable() => Step::Retry(retry_backoff),
        code => Step::Fail(TransactionError::from_code(code, context)),
    }
}

/// Which coordinator a request goes to.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The producer's transaction coordinator.
    Transaction,
    /// The coordinator of this consumer group.
    Group(&'a str),
}

/// A transactional producer's state and the round trips to its
/// coordinators, shared by the producer handle and the sender task.
#[derive(Debug)]
pub struct Transactions {
    /// The state machine.
    pub manager: Mutex<TransactionManager>,
    /// The coordinators.
    pub coordinators: Coordinators,
    /// `transaction.timeout.ms`.
    pub transaction_timeout: Duration,
}

impl Transactions {
    /// The state machine, locked (each change is one call: reused after a
    /// panic).
    pub fn manager(&self) -> std::sync::MutexGuard<'_, TransactionManager> {
        self.manager.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The transactional id.
    pub fn transactional_id(&self) -> &str {
        &self.coordinators.transactional_id
    }

    /// The sender's part: sends one AddPartitionsToTxn for the partitions
    /// that got their first record in the transaction (once the previous
    /// add is answered and its backoff passed), and records the outcome.
    /// Returns when the next add may go, if one waits.
    pub async fn add_pending_partitions(
        &self,
        producer: Option<(i64, i16)>,
        now: Instant,
    ) -> Option<Instant> {
        let retry_backoff = self.coordinators.retry_backoff;
        let Some(producer) = producer else {
            return self.manager().next_add_partitions_at();
        };
        let partitions = self.manager().partitions_to_add(now);
        if partitions.is_empty() {
            return self.manager().next_add_partitions_at();
        }
        let transactional_id = self.transactional_id();
        let context = ErrorContext {
            transactional_id,
            operation: TransactionOperation::Send,
            resource: "",
        };
        let build =
            |_version| add_partitions_request(transactional_id, producer, &partitions).into();
        let interpret = |response| match response {
            Response::AddPartitionsToTxn(response) => {
                let (code, topic) = add_partitions_error(&response);
                let context = ErrorContext {
                    resource: &topic,
                    ..context
                };
                step_for_code(code, context, retry_backoff)
            }
            _ => unexpected(ApiKey::AddPartitionsToTxn),
        };
        let step = self
            .coordinators
            .attempt(
                Target::Transaction,
                context,
                ApiKey::AddPartitionsToTxn,
                &build,
                &interpret,
            )
            .await;
        let mut manager = self.manager();
        match step {
            Step::Done(()) => manager.partitions_added(),
            Step::Retry(backoff) => manager.partitions_retry(Instant::now() + backoff),
            Step::FindCoordinator => manager.partitions_retry(Instant::now() + retry_backoff),
            Step::Fail(error) => {
                tracing::warn!(%error, "AddPartitionsToTxn failed");
                manager.partitions_failed(error);
            }
        }
        manager.next_add_partitions_at()
    }
}

/// The step for an answer of the wrong API.
pub fn unexpected<T>(api_key: ApiKey) -> Step<T> {
    Step::Fail(TransactionError::from(ClientError::UnexpectedResponse {
        api_key: api_key as i16,
    }))
}

/// Finds coordinators (the transaction coordinator is cached until it
/// moves) and sends them requests.
#[derive(Debug)]
pub struct Coordinators {
    cluster: Cluster,
    transactional_id: String,
    retry_backoff: Duration,
    transaction_coordinator: Mutex<Option<i32>>,
}

impl Coordinators {
    /// Coordinators of `transactional_id` in `cluster`.
    pub fn new(cluster: Cluster, transactional_id: String, retry_backoff: Duration) -> Self {
        Coordinators {
            cluster,
            transactional_id,
            retry_backoff,
            transaction_coordinator: Mutex::new(None),
        }
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<i32>> {
        self.transaction_coordinator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn node(&self, target: Target<'_>) -> Result<i32, ClientError> {
        match target {
            Target::Group(group_id) => {
                self.cluster
                    .find_coordinator(group_id, GROUP_KEY_TYPE)
                    .await
            }
            Target::Transaction => {
                if let Some(node) = *self.cached() {
                    return Ok(node);
                }
                let node = self
                    .cluster
                    .find_coordinator(&self.transactional_id, TRANSACTION_KEY_TYPE)
                    .await?;
                *self.cached() = Some(node);
                Ok(node)
            }
        }
    }

    fn forget(&self, target: Target<'_>) {
        if let Target::Transaction = target {
            *self.cached() = None;
        }
    }

    /// One round trip: finds the coordinator, sends the request `build`
    /// makes for the negotiated version, and reads the answer with
    /// `interpret`.
    pub async fn attempt<T>(
        &self,
        target: Target<'_>,
        context: ErrorContext<'_>,
        api_key: ApiKey,
        build: &impl Fn(i16) -> Request,
        interpret: &impl Fn(Response) -> Step<T>,
    ) -> Step<T> {
        let round_trip = async {
            let node = self.node(target).await?;
            let connection = self.cluster.coordinator_connection(node).await?;
            let version = connection.api_version(api_key)?;
            let timeout = self.cluster.config().request_timeout;
            connection
                .submit_at(build(version), version, timeout)?
                .await
        };
        let step = match round_trip.await {
            Ok(response) => interpret(response),
            Err(ClientError::Broker { code }) => {
                lookup_failure(step_for_code(code, context, self.retry_backoff))
            }
            Err(error) if error.is_retriable() => Step::FindCoordinator,
            Err(error) => Step::Fail(error.into()),
        };
        if matches!(step, Step::FindCoordinator) {
            self.forget(target);
        }
        step
    }

    /// Round trips until the answer is final or `deadline` passes
    /// ([`TransactionError::Timeout`]).
    pub async fn call<T>(
        &self,
        target: Target<'_>,
        context: ErrorContext<'_>,
        api_key: ApiKey,
        deadline: Instant,
        build: impl Fn(i16) -> Request,
        interpret: impl Fn(Response) -> Step<T>,
    ) -> Result<T, TransactionError> {
        let started = Instant::now();
        let timed_out = || TransactionError::Timeout {
            operation: context.operation,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        loop {
            let attempt = self.attempt(target, context, api_key, &build, &interpret);
            let backoff = match tokio::time::timeout_at(deadline.into(), attempt).await {
                Err(_) => return Err(timed_out()),
                Ok(Step::Done(value)) => return Ok(value),
                Ok(Step::Fail(error)) => return Err(error),
                Ok(Step::Retry(backoff)) => backoff,
                Ok(Step::FindCoordinator) => self.retry_backoff,
            };
            if Instant::now() + backoff >= deadline {
                return Err(timed_out());
            }
            tokio::time::sleep(backoff).await;
        }
    }

    /// The client's `retry.backoff.ms`.
    pub fn retry_backoff(&self) -> Duration {
        self.retry_backoff
    }
}

/// The step after FindCoordinator failed with a code: a NONE there (which
/// [`Cluster::find_coordinator`] never reports as an error) looks up again.
fn lookup_failure<T>(step: Step<()>) -> Step<T> {
    match step {
        Step::Done(()) | Step::FindCoordinator => Step::FindCoordinator,
        Step::Retry(backoff) => Step::Retry(backoff),
        Step::Fail(error) => Step::Fail(error),
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
