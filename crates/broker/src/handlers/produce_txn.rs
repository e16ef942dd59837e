//! The transactional side of Produce: WRITE on the transactional id, and
//! partition verification (KIP-890 part 1). Before a batch
//! opens a transaction in a partition, the leader starts a verification in
//! the partition's log and asks the transaction coordinator whether the
//! partition is in the producer's transaction; the append then carries
//! the verification's guard (see `strom_storage::verification`).
//!
//! The Produce handler awaits this before it appends anything, so the
//! connection reads its next request only afterwards and a producer's
//! batches keep their order (as Kafka, which reads nothing more from the
//! connection until it has answered).
//!
//! A coordinator's refusal becomes a code producers handle: a partition
//! not in the transaction answers `INVALID_TXN_STATE` (Produce v10 and
//! older) or `TRANSACTION_ABORTABLE` (v11+); a fenced producer
//! `INVALID_PRODUCER_EPOCH`; a coordinator that could not answer
//! `NOT_ENOUGH_REPLICAS`, which every producer retries without a metadata
//! refresh (Kafka's choice).

use std::collections::HashMap;

use strom_controller::image::MetadataImage;
use strom_network::RequestContext;
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::produce_request::TopicProduceData;
use strom_protocol::kafka::messages::ProduceRequest;
use strom_protocol::records::BatchHeader;
use strom_storage::verification::{TxnVerification, VerificationGuard};
use strom_storage::TopicPartition;
use strom_transactions::metadata::ProducerIdAndEpoch;

use super::BrokerContext;
use crate::txn_verification::PartitionKey;

/// The first Produce version whose clients handle `TRANSACTION_ABORTABLE`.
const TRANSACTION_ABORTABLE_VERSION: i16 = 11;

/// What verification decided for each partition of a Produce request.
pub struct Verified {
    enabled: bool,
    guards: HashMap<PartitionKey, VerificationGuard>,
    refused: HashMap<PartitionKey, (ErrorCode, String)>,
    /// A code for every partition (the request mixed producers).
    refuse_all: Option<(ErrorCode, String)>,
}

impl Verified {
    fn new(enabled: bool) -> Verified {
        Verified {
            enabled,
            guards: HashMap::new(),
            refused: HashMap::new(),
            refuse_all: None,
        }
    }

    /// The partition's verification for its append, or the code and
    /// message it is refused with.
    pub fn of(&self, topic: &str, index: i32) -> Result<TxnVerification, (ErrorCode, String)> {
        if let Some(refusal) = &self.refuse_all {
            return Err(refusal.clone());
        }
        if !self.enabled {
            return Ok(TxnVerification::Unchecked);
        }
        let key = (topic.to_owned(), index);
        if let Some(refusal) = self.refused.get(&key) {
            return Err(refusal.clone());
        }
        Ok(TxnVerification::Guard(self.guards.get(&key).copied()))
    }
}

/// WRITE on the request's transactional id, if it names one (Kafka
/// refuses the whole request otherwise).
pub fn may_use_transactional_id(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &ProduceRequest,
) -> bool {
    request.transactional_id.as_ref().is_none_or(|id| {
        super::authorization::authorize(
            broker,
            context,
            operation::WRITE,
            resource::TRANSACTIONAL_ID,
            id.0.as_str(),
        )
    })
}

/// The topic's name, by name or (Produce v13) by id.
pub fn topic_name(
    image: &MetadataImage,
    context: &RequestContext,
    topic: &TopicProduceData,
) -> Option<String> {
    if context.api_version >= 13 {
        image
            .topic_by_id(topic.topic_id)
            .map(|found| found.name.clone())
    } else {
        Some(topic.name.0.to_string())
    }
}

/// Verifies the request's batches that would open a transaction; see the
/// module doc.
pub async fn verify(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &ProduceRequest,
) -> Verified {
    let mut verified = Verified::new(broker.txn_verifier.enabled());
    if !verified.enabled {
        return verified;
    }
    let Some(transactional_id) = request
        .transactional_id
        .as_ref()
        .map(|id| id.0.to_string())
        .filter(|id| !id.is_empty())
    else {
        // Without a transactional id nothing can be verified: a
        // transactional batch that opens a transaction is refused.
        return verified;
    };
    let batches = transactional_batches(broker, context, request);
    let mut producers: Vec<(i64, i16)> = batches
        .iter()
        .map(|(_, header)| (header.producer_id, header.producer_epoch))
        .collect();
    producers.sort_unstable();
    producers.dedup();
    let [(producer_id, producer_epoch)] = producers.as_slice() else {
        if producers.len() > 1 {
            verified.refuse_all = Some((
                ErrorCode::InvalidProducerIdMapping,
                "transactional records of more than one producer id".to_owned(),
            ));
        }
        return verified;
    };
    let pending = start_verifications(broker, batches, &mut verified);
    if pending.is_empty() {
        return verified;
    }
    let producer = ProducerIdAndEpoch {
        producer_id: *producer_id,
        producer_epoch: *producer_epoch,
    };
    let failures = broker
        .txn_verifier
        .verify(&transactional_id, producer, &pending)
        .await;
    for (key, code) in failures {
        verified
            .refused
            .insert(key, produce_code(code, context.api_version));
    }
    verified
}

/// Starts a verification in the log of each partition whose batch may
/// open a transaction there; returns those partitions (their guards are
/// in `verified`).
fn start_verifications(
    broker: &BrokerContext,
    batches: Vec<(PartitionKey, BatchHeader)>,
    verified: &mut Verified,
) -> Vec<PartitionKey> {
    let now_ms = broker.replicas.now_ms();
    let mut pending = Vec::new();
    for ((topic, index), header) in batches {
        let topic_partition = TopicPartition::new(topic.clone(), index);
        let Some(replica) = broker.replicas.get(&topic_partition) else {
            continue;
        };
        // Not led here: the append answers NOT_LEADER_OR_FOLLOWER.
        if let Ok(Some(guard)) = replica.start_transaction_verification(
            header.producer_id,
            header.base_sequence,
            header.producer_epoch,
            now_ms,
        ) {
            verified.guards.insert((topic.clone(), index), guard);
            pending.push((topic, index));
        }
    }
    pending
}

/// The partitions whose (first) batch is transactional data, with its
/// header. Batches that do not parse are left to the append's checks.
fn transactional_batches(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &ProduceRequest,
) -> Vec<(PartitionKey, BatchHeader)> {
    let image = broker.controller.image();
    let mut batches = Vec::new();
    for topic in &request.topic_data {
        let Some(name) = topic_name(&image, context, topic) else {
            continue;
        };
        for partition in &topic.partition_data {
            let header = partition
                .records
                .as_ref()
                .and_then(|records| BatchHeader::decode(records).ok());
            if let Some(header) =
                header.filter(|header| header.is_transactional() && !header.is_control())
            {
                batches.push(((name.clone(), partition.index), header));
            }
        }
    }
    batches
}

/// The Produce code (and message) for a coordinator's verification code.
fn produce_code(code: ErrorCode, api_version: i16) -> (ErrorCode, String) {
    match code {
        ErrorCode::InvalidTxnState | ErrorCode::TransactionAbortable => {
            let code = if api_version >= TRANSACTION_ABORTABLE_VERSION {
                ErrorCode::TransactionAbortable
            } else {
                ErrorCode::InvalidTxnState
            };
            (
                code,
                "Partition was not added to the transaction".to_owned(),
            )
        }
        ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => (
            ErrorCode::InvalidProducerEpoch,
            "the producer's epoch is fenced by a newer one".to_owned(),
        ),
        ErrorCode::ConcurrentTransactions
        | ErrorCode::NetworkException
        | ErrorCode::RequestTimedOut
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator => (
            ErrorCode::NotEnoughReplicas,
            format!(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: {}",
                code.name()
            ),
        ),
        other => (
            other,
            format!("transaction verification failed: {}", other.name()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_codes_become_codes_producers_handle() {
        assert_eq!(
            produce_code(ErrorCode::TransactionAbortable, 10).0,
            ErrorCode::InvalidTxnState
        );
        assert_eq!(
            produce_code(ErrorCode::InvalidTxnState, 11).0,
            ErrorCode::TransactionAbortable
        );
        assert_eq!(
            produce_code(ErrorCode::ProducerFenced, 9).0,
            ErrorCode::InvalidProducerEpoch
        );
        for retriable in [
            ErrorCode::ConcurrentTransactions,
            ErrorCode::NotCoordinator,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::NetworkException,
        ] {
            let (code, message) = produce_code(retriable, 9);
            assert_eq!(code, ErrorCode::NotEnoughReplicas);
            assert!(message.contains(retriable.name()), "{message}");
        }
        assert_eq!(
            produce_code(ErrorCode::InvalidProducerIdMapping, 9).0,
            ErrorCode::InvalidProducerIdMapping
        );
    }

    #[test]
    fn without_verification_every_partition_is_unchecked() {
        let verified = Verified::new(false);
        assert_eq!(verified.of("t", 0), Ok(TxnVerification::Unchecked));
        let mut verified = Verified::new(true);
        assert_eq!(verified.of("t", 0), Ok(TxnVerification::Guard(None)));
        verified.refused.insert(
            ("t".to_owned(), 1),
            (ErrorCode::InvalidTxnState, "no".to_owned()),
        );
        assert!(verified.of("t", 1).is_err());
        verified.refuse_all = Some((ErrorCode::InvalidProducerIdMapping, "two".to_owned()));
        assert!(verified.of("t", 0).is_err());
    }
}
