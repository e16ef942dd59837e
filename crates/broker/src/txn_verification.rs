//! Transaction verification (KIP-890 part 1): before a partition leader
//! appends a transactional batch that would open a transaction in the
//! partition, it asks the producer's transaction coordinator whether the
//! partition was added to the transaction.
//!
//! The coordinator is this broker when it leads the transactional id's
//! `__transaction_state` partition (the check is then a call into the
//! local coordinator); otherwise the leader sends AddPartitionsToTxn v4
//! with `verify_only` to the coordinator's broker over the inter-broker
//! listener, on a pooled connection ([`crate::peer_pool`]). The answer is one coordinator code
//! per partition that failed; the Produce handler turns them into codes
//! producers know (see `handlers::produce`), and the log refuses the
//! append if a marker landed in between (`strom_storage::verification`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use strom_controller::runtime::ControllerClient;
use strom_coordinator::java_string_hash_code;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use strom_protocol::kafka::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_transactions::coordinator::partition_for;
use strom_transactions::metadata::{ProducerIdAndEpoch, TopicPartition as TxnPartition};
use tracing::debug;

use crate::handlers::errors::{transaction_error_code, FencedCode};
use crate::peer_pool::PeerPool;
use crate::transactions::{TransactionService, TRANSACTION_STATE_TOPIC};

/// The AddPartitionsToTxn version brokers send to verify (the first with
/// `verify_only`).
pub const VERIFY_VERSION: i16 = 4;

/// How long a verification may take before the produce is answered with a
/// retriable error.
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// A partition of a produce request, by topic name and index.
pub type PartitionKey = (String, i32);

/// Verifies transactional produces with their coordinator.
pub struct TxnVerifier {
    enabled: bool,
    node_id: i32,
    controller: Arc<dyn ControllerClient>,
    transactions: Arc<TransactionService>,
    pool: Option<Arc<PeerPool>>,
}

impl TxnVerifier {
    /// A verifier; `enabled` is `transaction.partition.verification.enable`
    /// and `pool` reaches other brokers (`None` on a single node).
    pub fn new(
        enabled: bool,
        node_id: i32,
        controller: Arc<dyn ControllerClient>,
        transactions: Arc<TransactionService>,
        pool: Option<Arc<PeerPool>>,
    ) -> TxnVerifier {
        TxnVerifier {
            enabled,
            node_id,
            controller,
            transactions,
            pool,
        }
    }

    /// Whether produces are verified.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Asks the coordinator of `transactional_id` whether `partitions` are
    /// in `producer`'s ongoing transaction. Returns the coordinator's code
    /// for each partition that is not (or could not be checked); an empty
    /// map means every partition is in the transaction.
    pub async fn verify(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &[PartitionKey],
    ) -> BTreeMap<PartitionKey, ErrorCode> {
        let all = |code: ErrorCode| partitions.iter().map(|key| (key.clone(), code)).collect();
        let hash = java_string_hash_code(transactional_id);
        let image = self.controller.image();
        let Some(topic) = image.topic_by_name(TRANSACTION_STATE_TOPIC) else {
            return all(ErrorCode::CoordinatorNotAvailable);
        };
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let index = partition_for(hash, count.max(1));
        let leader = topic
            .partition(index)
            .and_then(|partition| partition.leader);
        match leader {
            Some(leader) if leader == self.node_id => {
                self.verify_here(transactional_id, hash, producer, partitions)
            }
            Some(leader) => {
                let request = verify_request(transactional_id, producer, partitions);
                match self.remote(leader, request).await {
                    Ok(response) => remote_codes(&response, partitions),
                    Err(code) => all(code),
                }
            }
            None => all(ErrorCode::CoordinatorNotAvailable),
        }
    }

    /// The local coordinator's verdict.
    fn verify_here(
        &self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        partitions: &[PartitionKey],
    ) -> BTreeMap<PartitionKey, ErrorCode> {
        let set: BTreeSet<TxnPartition> = partitions
            .iter()
            .map(|(topic, partition)| TxnPartition {
                topic: topic.clone(),
                partition: *partition,
            })
            .collect();
        match self.transactions.coordinator.verify_partitions(
            transactional_id,
            hash,
            producer,
            &set,
        ) {
            Ok(missing) => missing
                .into_iter()
                .map(|missing| {
                    (
                        (missing.topic, missing.partition),
                        ErrorCode::TransactionAbortable,
                    )
                })
                .collect(),
            Err(error) => {
                let code = transaction_error_code(&error, FencedCode::ProducerFenced);
                partitions.iter().map(|key| (key.clone(), code)).collect()
            }
        }
    }

    /// Sends `request` to broker `leader`; the error is the code every
    /// partition gets when no answer came.
    async fn remote(
        &self,
        leader: i32,
        request: AddPartitionsToTxnRequest,
    ) -> Result<AddPartitionsToTxnResponse, ErrorCode> {
        let pool = self
            .pool
            .as_ref()
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let address = pool
            .address(&self.controller.image(), leader)
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let request = Request::AddPartitionsToTxn(request);
        let answered = tokio::time::timeout(
            VERIFY_TIMEOUT,
            pool.call(&address, &request, VERIFY_VERSION),
        )
        .await;
        match answered {
            Ok(Ok(Response::AddPartitionsToTxn(response))) => Ok(response),
            Ok(Ok(_)) => Err(ErrorCode::NetworkException),
            Ok(Err(error)) => {
                debug!(leader, %error, "transaction verification with the coordinator failed");
                Err(ErrorCode::NetworkException)
            }
            Err(_elapsed) => Err(ErrorCode::RequestTimedOut),
        }
    }
}

/// A verify-only AddPartitionsToTxn for one transaction.
fn verify_request(
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    partitions: &[PartitionKey],
) -> AddPartitionsToTxnRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        topics.entry(topic.as_str()).or_default().push(*partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partitions(partitions)
        })
        .collect();
    AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            )))
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_verify_only(true)
            .with_topics(topics),
    ])
}

/// The failed partitions of a verify-only answer. A top-level error
/// applies to every partition (CLUSTER_AUTHORIZATION_FAILED becomes
/// INVALID_TXN_STATE: the client must not see the brokers' ACLs); a
/// partition the answer does not mention was not verified.
fn remote_codes(
    response: &AddPartitionsToTxnResponse,
    partitions: &[PartitionKey],
) -> BTreeMap<PartitionKey, ErrorCode> {
    let top = ErrorCode::from_code(response.error_code);
    if top != ErrorCode::None {
        let code = match top {
            ErrorCode::ClusterAuthorizationFailed => ErrorCode::InvalidTxnState,
            other => other,
        };
        return partitions.iter().map(|key| (key.clone(), code)).collect();
    }
    let mut answered: HashMap<PartitionKey, ErrorCode> = HashMap::new();
    for result in &response.results_by_transaction {
        for topic in &result.topic_results {
            for partition in &topic.results_by_partition {
                answered.insert(
                    (topic.name.to_string(), partition.partition_index),
                    ErrorCode::from_code(partition.partition_error_code),
                );
            }
        }
    }
    partitions
        .iter()
        .filter_map(|key| match answered.get(key) {
            Some(ErrorCode::None) => None,
            Some(code) => Some((key.clone(), *code)),
            None => Some((key.clone(), ErrorCode::InvalidTxnState)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_protocol::kafka::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
    };

    fn keys() -> Vec<PartitionKey> {
        vec![("orders".to_owned(), 0), ("orders".to_owned(), 1)]
    }

    #[test]
    fn the_request_groups_partitions_by_topic_and_is_verify_only() {
        let producer = ProducerIdAndEpoch {
            producer_id: 7,
            producer_epoch: 2,
        };
        let request = verify_request("app", producer, &keys());
        let [transaction] = request.transactions.as_slice() else {
            panic!("one transaction expected");
        };
        assert!(transaction.verify_only);
        assert_eq!(transaction.producer_id.0, 7);
        assert_eq!(transaction.producer_epoch, 2);
        assert_eq!(transaction.topics.len(), 1);
        assert_eq!(transaction.topics[0].partitions, vec![0, 1]);
    }

    #[test]
    fn answers_map_to_failed_partitions_only() {
        let partition = |index, code: ErrorCode| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(index)
                .with_partition_error_code(code.code())
        };
        let response = AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![
            AddPartitionsToTxnResult::default().with_topic_results(vec![
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_static_str("orders")))
                    .with_results_by_partition(vec![
                        partition(0, ErrorCode::None),
                        partition(1, ErrorCode::TransactionAbortable),
                    ]),
            ]),
        ]);
        let failed = remote_codes(&response, &keys());
        assert_eq!(failed.len(), 1);
        assert_eq!(
            failed.get(&("orders".to_owned(), 1)),
            Some(&ErrorCode::TransactionAbortable)
        );
        // A partition the answer leaves out is not verified.
        let mut more = keys();
        more.push(("payments".to_owned(), 0));
        assert_eq!(
            remote_codes(&response, &more).get(&("payments".to_owned(), 0)),
            Some(&ErrorCode::InvalidTxnState)
        );
        let refused = AddPartitionsToTxnResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
        let failed = remote_codes(&refused, &keys());
        assert!(failed
            .values()
            .all(|code| *code == ErrorCode::InvalidTxnState));
        assert_eq!(failed.len(), 2);
    }
}
