//! Admin operations on transactions (KIP-664, Kafka's
//! `Admin.listTransactions`, `describeTransactions`, `describeProducers`
//! and `abortTransaction`), the third part of [`AdminClient`].
//!
//! Each request goes where Kafka's admin client sends it:
//! ListTransactions to every broker (each lists the transactional ids it
//! coordinates, so the answers are merged and a broker's failure is
//! reported without failing the others), DescribeTransactions to the
//! coordinator of each id (FindCoordinator key type 1), DescribeProducers
//! and WriteTxnMarkers to the partition's leader. Aborting writes an abort
//! marker directly, as the coordinator would: it is the repair for a
//! hanging transaction whose coordinator no longer knows of it, and needs
//! CLUSTER_ACTION on the cluster.

use std::collections::BTreeMap;
use std::fmt;

use strom_protocol::kafka::messages::describe_producers_request::TopicRequest;
use strom_protocol::kafka::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use strom_protocol::kafka::messages::{
    describe_producers_response, describe_transactions_response, list_transactions_response,
    ApiKey, DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest,
    ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::admin::AdminClient;
use crate::error::{ClientError, TransactionAdminError};

/// FindCoordinator's key type for transactional ids.
const TRANSACTION_KEY_TYPE: i8 = 1;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// Partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    /// Kafka's `topic-partition` form.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}-{}", self.topic, self.partition)
    }
}

/// A transaction's state as the coordinator names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TransactionState {
    /// No transaction open.
    Empty,
    /// A transaction is open.
    Ongoing,
    /// Commit markers are being written.
    PrepareCommit,
    /// Abort markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The transactional id expired.
    Dead,
    /// The producer's epoch is being fenced.
    PrepareEpochFence,
    /// A name this client does not know.
    Other(String),
}

impl TransactionState {
    const KNOWN: [TransactionState; 8] = [
        TransactionState::Empty,
        TransactionState::Ongoing,
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
        TransactionState::Dead,
        TransactionState::PrepareEpochFence,
    ];

    /// The state of Kafka's name `name` (case-sensitive, as on the wire).
    pub fn from_name(name: &str) -> TransactionState {
        TransactionState::KNOWN
            .into_iter()
            .find(|state| state.name() == name)
            .unwrap_or_else(|| TransactionState::Other(name.to_owned()))
    }

    /// Kafka's name of the state.
    pub fn name(&self) -> &str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
            TransactionState::Other(name) => name,
        }
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// What [`AdminClient::list_transactions`] keeps; empty filters keep all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListTransactionsFilter {
    /// Only transactions in one of these states.
    pub states: Vec<TransactionState>,
    /// Only transactions of one of these producer ids.
    pub producer_ids: Vec<i64>,
    /// Only transactions open for at least this long (ListTransactions v1,
    /// KIP-994).
    pub duration_ms: Option<i64>,
}

/// A transactional id as ListTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// The broker coordinating it.
    pub coordinator_id: i32,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TransactionState,
}

/// The merged answers of every broker to ListTransactions.
#[derive(Debug, Default)]
pub struct TransactionListings {
    /// The transactions, by transactional id.
    pub transactions: Vec<TransactionListing>,
    /// State names some broker did not know (echoed from the request).
    pub unknown_state_filters: Vec<String>,
    /// The brokers that failed to answer, and why.
    pub broker_errors: BTreeMap<i32, TransactionAdminError>,
}

/// A transactional id as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// The broker coordinating it.
    pub coordinator_id: i32,
    /// Its state.
    pub state: TransactionState,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its current producer epoch.
    pub producer_epoch: i16,
    /// Its `transaction.timeout.ms`.
    pub transaction_timeout_ms: i32,
    /// When the open transaction started (epoch ms), if one is open.
    pub transaction_start_time_ms: Option<i64>,
    /// The partitions of the open transaction, in order.
    pub partitions: Vec<TopicPartition>,
}

/// An active producer of a partition, as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i32,
    /// The last sequence number it wrote.
    pub last_sequence: i32,
    /// The timestamp of its last write (epoch ms).
    pub last_timestamp_ms: i64,
    /// The coordinator epoch of its last marker, if it had one.
    pub coordinator_epoch: Option<i32>,
    /// The first offset of its open transaction, if one is open.
    pub current_transaction_start_offset: Option<i64>,
}

/// Which transaction [`AdminClient::abort_transaction`] aborts (Kafka's
/// `AbortTransactionSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortTransactionSpec {
    /// The partition holding the open transaction.
    pub topic_partition: TopicPartition,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The coordinator epoch to write the marker with (0 when the
    /// partition never saw a marker of this producer).
    pub coordinator_epoch: i32,
}

impl AbortTransactionSpec {
    /// The spec that aborts `producer`'s open transaction in
    /// `topic_partition`; `None` when its epoch does not fit a producer
    /// epoch.
    pub fn for_producer(
        topic_partition: TopicPartition,
        producer: &ProducerState,
    ) -> Option<AbortTransactionSpec> {
        Some(AbortTransactionSpec {
            topic_partition,
            producer_id: producer.producer_id,
            producer_epoch: i16::try_from(producer.producer_epoch).ok()?,
            coordinator_epoch: producer.coordinator_epoch.unwrap_or(0).max(0),
        })
    }
}

impl AdminClient {
    /// The transactions of every broker's coordinator, filtered. A broker
    /// that fails is reported in
    /// [`broker_errors`](TransactionListings::broker_errors); the others'
    /// answers are still returned.
    pub async fn list_transactions(
        &self,
        filter: &ListTransactionsFilter,
    ) -> Result<TransactionListings, ClientError> {
        let metadata = self.cluster().refresh_metadata().await?;
        let mut broker_ids: Vec<i32> = metadata.brokers.keys().copied().collect();
        broker_ids.sort_unstable();
        let mut listings = TransactionListings::default();
        for broker_id in broker_ids {
            let answer = self
                .with_coordinator_retries(|| self.list_transactions_at(broker_id, filter))
                .await;
            match answer {
                Ok((transactions, unknown)) => {
                    listings.transactions.extend(transactions);
                    for name in unknown {
                        if !listings.unknown_state_filters.contains(&name) {
                            listings.unknown_state_filters.push(name);
                        }
                    }
                }
                Err(error) => {
                    listings.broker_errors.insert(broker_id, error);
                }
            }
        }
        listings
            .transactions
            .sort_by(|left, right| left.transactional_id.cmp(&right.transactional_id));
        Ok(listings)
    }

    async fn list_transactions_at(
        &self,
        broker_id: i32,
        filter: &ListTransactionsFilter,
    ) -> Result<(Vec<TransactionListing>, Vec<String>), TransactionAdminError> {
        let connection = self.cluster().broker_connection(broker_id).await?;
        let mut request = ListTransactionsRequest::default()
            .with_state_filters(
                filter
                    .states
                    .iter()
                    .map(|state| StrBytes::from_string(state.name().to_owned()))
                    .collect(),
            )
            .with_producer_id_filters(
                filter
                    .producer_ids
                    .iter()
                    .copied()
                    .map(ProducerId)
                    .collect(),
            );
        if let Some(duration_ms) = filter.duration_ms {
            if connection.api_version(ApiKey::ListTransactions)? < 1 {
                return Err(TransactionAdminError::Unsupported {
                    broker_id,
                    feature: "ListTransactions v1 (the duration filter)",
                });
            }
            request.duration_filter = duration_ms;
        }
        let Response::ListTransactions(response) = connection.send(request).await? else {
            return Err(unexpected(ApiKey::ListTransactions).into());
        };
        match ErrorCode::from_code(response.error_code) {
            ErrorCode::None => Ok((
                response
                    .transaction_states
                    .iter()
                    .map(|listed| listing(broker_id, listed))
                    .collect(),
                response
                    .unknown_state_filters
                    .iter()
                    .map(|name| name.to_string())
                    .collect(),
            )),
            code => Err(TransactionAdminError::Broker { code }),
        }
    }

    /// Describes transactional ids, each at its coordinator (retrying
    /// while the coordinator is loading, moving or not yet known, up to
    /// the admin timeout). The result has one entry per id asked for.
    pub async fn describe_transactions(
        &self,
        transactional_ids: &[&str],
    ) -> BTreeMap<String, Result<TransactionDescription, TransactionAdminError>> {
        let mut descriptions = BTreeMap::new();
        for transactional_id in transactional_ids {
            let described = self
                .with_coordinator_retries(|| self.describe_transaction_once(transactional_id))
                .await;
            descriptions.insert((*transactional_id).to_owned(), described);
        }
        descriptions
    }

    /// Describes one transactional id at its coordinator (see
    /// [`describe_transactions`](Self::describe_transactions)).
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, TransactionAdminError> {
        self.with_coordinator_retries(|| self.describe_transaction_once(transactional_id))
            .await
    }

    async fn describe_transaction_once(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, TransactionAdminError> {
        let coordinator = self
            .cluster()
            .find_coordinator(transactional_id, TRANSACTION_KEY_TYPE)
            .await?;
        let request =
            DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(transactional_id.to_owned()),
            )]);
        let Response::DescribeTransactions(response) =
            self.cluster().send_to(coordinator, request).await?
        else {
            return Err(unexpected(ApiKey::DescribeTransactions).into());
        };
        let state = response
            .transaction_states
            .iter()
            .find(|state| state.transactional_id.as_str() == transactional_id)
            .ok_or_else(|| unexpected(ApiKey::DescribeTransactions))?;
        description(coordinator, state)
    }

    /// The active producers of partitions, each asked of its leader
    /// (retrying while leadership moves, up to the admin timeout). The
    /// result has one entry per partition asked for.
    pub async fn describe_producers(
        &self,
        topic_partitions: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, Result<Vec<ProducerState>, TransactionAdminError>> {
        let mut producers = BTreeMap::new();
        for topic_partition in topic_partitions {
            let described = self
                .with_coordinator_retries(|| self.describe_producers_once(topic_partition))
                .await;
            producers.insert(topic_partition.clone(), described);
        }
        producers
    }

    async fn describe_producers_once(
        &self,
        topic_partition: &TopicPartition,
    ) -> Result<Vec<ProducerState>, TransactionAdminError> {
        let leader = self.partition_leader(topic_partition).await?;
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(topic_name(&topic_partition.topic))
                .with_partition_indexes(vec![topic_partition.partition])]);
        let Response::DescribeProducers(response) = self.cluster().send_to(leader, request).await?
        else {
            return Err(unexpected(ApiKey::DescribeProducers).into());
        };
        let partition = response
            .topics
            .iter()
            .filter(|topic| topic.name.as_str() == topic_partition.topic)
            .flat_map(|topic| topic.partitions.iter())
            .find(|partition| partition.partition_index == topic_partition.partition)
            .ok_or_else(|| unexpected(ApiKey::DescribeProducers))?;
        self.partition_outcome(partition.error_code, topic_partition)?;
        Ok(partition
            .active_producers
            .iter()
            .map(producer_state)
            .collect())
    }

    /// Aborts an open transaction in one partition by writing an abort
    /// marker at its leader (WriteTxnMarkers with `transaction_result`
    /// false), as Kafka's `Admin.abortTransaction` does. Retries while
    /// leadership moves, up to the admin timeout.
    pub async fn abort_transaction(
        &self,
        spec: &AbortTransactionSpec,
    ) -> Result<(), TransactionAdminError> {
        self.with_coordinator_retries(|| self.abort_transaction_once(spec))
            .await
    }

    async fn abort_transaction_once(
        &self,
        spec: &AbortTransactionSpec,
    ) -> Result<(), TransactionAdminError> {
        let topic_partition = &spec.topic_partition;
        let leader = self.partition_leader(topic_partition).await?;
        let request = WriteTxnMarkersRequest::default().with_markers(vec![abort_marker(spec)]);
        let Response::WriteTxnMarkers(response) = self.cluster().send_to(leader, request).await?
        else {
            return Err(unexpected(ApiKey::WriteTxnMarkers).into());
        };
        let code = response
            .markers
            .iter()
            .filter(|marker| marker.producer_id.0 == spec.producer_id)
            .flat_map(|marker| marker.topics.iter())
            .filter(|topic| topic.name.as_str() == topic_partition.topic)
            .flat_map(|topic| topic.partitions.iter())
            .find(|partition| partition.partition_index == topic_partition.partition)
            .ok_or_else(|| unexpected(ApiKey::WriteTxnMarkers))?
            .error_code;
        match ErrorCode::from_code(code) {
            ErrorCode::InvalidProducerEpoch | ErrorCode::ProducerFenced => {
                Err(TransactionAdminError::ProducerFenced {
                    producer_id: spec.producer_id,
                    producer_epoch: spec.producer_epoch,
                })
            }
            ErrorCode::TransactionCoordinatorFenced => {
                Err(TransactionAdminError::CoordinatorFenced {
                    coordinator_epoch: spec.coordinator_epoch,
                })
            }
            _ => self.partition_outcome(code, topic_partition),
        }
    }

    /// The leader of a partition; a topic or partition the metadata does
    /// not know is [`TransactionAdminError::UnknownTopicOrPartition`].
    async fn partition_leader(
        &self,
        topic_partition: &TopicPartition,
    ) -> Result<i32, TransactionAdminError> {
        let info = match self.cluster().topic(&topic_partition.topic).await {
            Err(ClientError::Broker { code }) => {
                return Err(partition_error(code, topic_partition))
            }
            other => other?,
        };
        let partition = info
            .partition(topic_partition.partition)
            .ok_or_else(|| partition_error(ErrorCode::UnknownTopicOrPartition, topic_partition))?;
        partition.leader.ok_or_else(|| {
            ClientError::LeaderNotAvailable {
                topic: topic_partition.topic.clone(),
                partition: topic_partition.partition,
            }
            .into()
        })
    }

    /// A partition's error code as a result; a retriable code also marks
    /// the metadata stale, so the retry looks the leader up again.
    fn partition_outcome(
        &self,
        error_code: i16,
        topic_partition: &TopicPartition,
    ) -> Result<(), TransactionAdminError> {
        match ErrorCode::from_code(error_code) {
            ErrorCode::None => Ok(()),
            code => {
                if code.is_retriable() || code == ErrorCode::UnknownTopicOrPartition {
                    self.cluster().request_metadata_refresh();
                }
                Err(partition_error(code, topic_partition))
            }
        }
    }
}

/// The typed error of a partition's error code.
fn partition_error(code: ErrorCode, topic_partition: &TopicPartition) -> TransactionAdminError {
    match code {
        ErrorCode::UnknownTopicOrPartition => TransactionAdminError::UnknownTopicOrPartition {
            topic: topic_partition.topic.clone(),
            partition: topic_partition.partition,
        },
        ErrorCode::TopicAuthorizationFailed => TransactionAdminError::TopicAuthorizationFailed {
            topic: topic_partition.topic.clone(),
        },
        ErrorCode::ClusterAuthorizationFailed => TransactionAdminError::ClusterAuthorizationFailed,
        code => TransactionAdminError::Broker { code },
    }
}

fn listing(
    coordinator_id: i32,
    listed: &list_transactions_response::TransactionState,
) -> TransactionListing {
    TransactionListing {
        transactional_id: listed.transactional_id.to_string(),
        coordinator_id,
        producer_id: listed.producer_id.0,
        state: TransactionState::from_name(listed.transaction_state.as_str()),
    }
}

/// One id of a DescribeTransactions answer, or its typed error.
fn description(
    coordinator_id: i32,
    state: &describe_transactions_response::TransactionState,
) -> Result<TransactionDescription, TransactionAdminError> {
    let transactional_id = state.transactional_id.to_string();
    match ErrorCode::from_code(state.error_code) {
        ErrorCode::None => {}
        ErrorCode::TransactionalIdNotFound => {
            return Err(TransactionAdminError::TransactionalIdNotFound { transactional_id })
        }
        ErrorCode::TransactionalIdAuthorizationFailed => {
            return Err(TransactionAdminError::TransactionalIdAuthorizationFailed {
                transactional_id,
            })
        }
        code => return Err(TransactionAdminError::Broker { code }),
    }
    let partitions = state
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| TopicPartition::new(topic.topic.to_string(), *partition))
        })
        .collect();
    Ok(TransactionDescription {
        transactional_id,
        coordinator_id,
        state: TransactionState::from_name(state.transaction_state.as_str()),
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        transaction_timeout_ms: state.transaction_timeout_ms,
        transaction_start_time_ms: (state.transaction_start_time_ms >= 0)
            .then_some(state.transaction_start_time_ms),
        partitions,
    })
}

fn producer_state(state: &describe_producers_response::ProducerState) -> ProducerState {
    ProducerState {
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        last_sequence: state.last_sequence,
        last_timestamp_ms: state.last_timestamp,
        coordinator_epoch: (state.coordinator_epoch >= 0).then_some(state.coordinator_epoch),
        current_transaction_start_offset: (state.current_txn_start_offset >= 0)
            .then_some(state.current_txn_start_offset),
    }
}

fn abort_marker(spec: &AbortTransactionSpec) -> WritableTxnMarker {
    WritableTxnMarker::default()
        .with_producer_id(ProducerId(spec.producer_id))
        .with_producer_epoch(spec.producer_epoch)
        .with_transaction_result(false)
        .with_coordinator_epoch(spec.coordinator_epoch)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic_name(&spec.topic_partition.topic))
            .with_partition_indexes(vec![spec.topic_partition.partition])])
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn unexpected(api_key: ApiKey) -> ClientError {
    ClientError::UnexpectedResponse {
        api_key: api_key as i16,
    }
}

#[cfg(test)]
#[path = "admin_transactions_tests.rs"]
mod tests;
