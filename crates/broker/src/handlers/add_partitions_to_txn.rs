//! AddPartitionsToTxn. Client versions 0-3 add partitions to the
//! producer's transaction, opening it if none is open. Version 4, sent by
//! brokers (CLUSTER_ACTION on the cluster), batches transactions and may
//! only verify that partitions are in a transaction (`verify_only`,
//! KIP-890 part 1; see `crate::txn_verification`): a partition that is
//! not answers `TRANSACTION_ABORTABLE`, as Kafka's coordinator does. Every partition
//! gets the request's outcome; partitions the principal may not WRITE get
//! `TOPIC_AUTHORIZATION_FAILED` and the others `OPERATION_NOT_ATTEMPTED`,
//! as Kafka answers; unknown topics or partitions get
//! `UNKNOWN_TOPIC_OR_PARTITION` likewise. Without WRITE on the
//! transactional id every partition gets
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`.

use std::collections::BTreeSet;

use strom_coordinator::java_string_hash_code;
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
use strom_protocol::kafka::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use strom_protocol::kafka::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use strom_protocol::messages::Response;
use strom_transactions::metadata::{ProducerIdAndEpoch, TopicPartition, TransactionVersion};

use super::authorization::{authorize, may_write};
use super::errors::{transaction_error_code, FencedCode};
use super::BrokerContext;
use strom_protocol::acl::{operation, resource};

/// Handles an AddPartitionsToTxn request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AddPartitionsToTxnRequest,
) -> Reply {
    if context.api_version >= 4 {
        return Reply::Response(Response::AddPartitionsToTxn(
            handle_batched(broker, context, request).await,
        ));
    }
    let partitions: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |partition| (topic.name.to_string(), *partition))
        })
        .collect();
    let transactional_id = request.v3_and_below_transactional_id.0.as_str();
    let refused = if authorize(
        broker,
        context,
        operation::WRITE,
        resource::TRANSACTIONAL_ID,
        transactional_id,
    ) {
        refusal(broker, Some(context), &partitions)
    } else {
        Some(vec![
            ErrorCode::TransactionalIdAuthorizationFailed;
            partitions.len()
        ])
    };
    let outcome = match refused {
        Some(codes) => Err(codes),
        None => add(broker, context, &request, &partitions)
            .await
            .map_err(|code| vec![code; partitions.len()]),
    };
    let codes = match outcome {
        Ok(()) => vec![ErrorCode::None; partitions.len()],
        Err(codes) => codes,
    };
    Reply::Response(Response::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(results(&partitions, &codes)),
    ))
}

/// Per-partition codes when some partition is refused before the
/// coordinator is asked: the refused ones with their code, the others
/// `OPERATION_NOT_ATTEMPTED`.
fn refusal(
    broker: &BrokerContext,
    write_checked_for: Option<&RequestContext>,
    partitions: &[(String, i32)],
) -> Option<Vec<ErrorCode>> {
    let image = broker.controller.image();
    let codes: Vec<ErrorCode> = partitions
        .iter()
        .map(|(topic, partition)| {
            if write_checked_for.is_some_and(|context| !may_write(broker, context, topic)) {
                return ErrorCode::TopicAuthorizationFailed;
            }
            let exists = image.topic_by_name(topic).is_some_and(|found| {
                usize::try_from(*partition).is_ok_and(|index| index < found.partitions.len())
            });
            if exists {
                ErrorCode::OperationNotAttempted
            } else {
                ErrorCode::UnknownTopicOrPartition
            }
        })
        .collect();
    codes
        .iter()
        .any(|code| *code != ErrorCode::OperationNotAttempted)
        .then_some(codes)
}

async fn add(
    broker: &BrokerContext,
    context: &RequestContext,
    request: &AddPartitionsToTxnRequest,
    partitions: &[(String, i32)],
) -> Result<(), ErrorCode> {
    let transactional_id = request.v3_and_below_transactional_id.to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: request.v3_and_below_producer_id.0,
        producer_epoch: request.v3_and_below_producer_epoch,
    };
    let set = partition_set(partitions);
    broker
        .transactions
        .coordinator
        .add_partitions(
            &transactional_id,
            java_string_hash_code(&transactional_id),
            producer,
            &set,
            TransactionVersion::V0,
        )
        .await
        .map_err(|error| {
            transaction_error_code(&error, FencedCode::for_version(context.api_version, 2))
        })
}

/// Version 4: each transaction of the batch verified or added, with one
/// result per transaction.
async fn handle_batched(
    broker: &BrokerContext,
    context: &RequestContext,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if !authorize(
        broker,
        context,
        operation::CLUSTER_ACTION,
        resource::CLUSTER,
        strom_protocol::acl::CLUSTER_NAME,
    ) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    let mut answers = Vec::with_capacity(request.transactions.len());
    for transaction in &request.transactions {
        let partitions: Vec<(String, i32)> = transaction
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(move |partition| (topic.name.to_string(), *partition))
            })
            .collect();
        let codes = match refusal(broker, None, &partitions) {
            Some(codes) => codes,
            None => transaction_codes(broker, transaction, &partitions).await,
        };
        answers.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id.clone())
                .with_topic_results(results(&partitions, &codes)),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(answers)
}

/// One v4 transaction's per-partition codes: verified, or added.
async fn transaction_codes(
    broker: &BrokerContext,
    transaction: &AddPartitionsToTxnTransaction,
    partitions: &[(String, i32)],
) -> Vec<ErrorCode> {
    let transactional_id = transaction.transactional_id.0.as_str();
    let hash = java_string_hash_code(transactional_id);
    let producer = ProducerIdAndEpoch {
        producer_id: transaction.producer_id.0,
        producer_epoch: transaction.producer_epoch,
    };
    let set = partition_set(partitions);
    let coordinator = &broker.transactions.coordinator;
    let fenced = FencedCode::ProducerFenced;
    if transaction.verify_only {
        return match coordinator.verify_partitions(transactional_id, hash, producer, &set) {
            Ok(missing) => partitions
                .iter()
                .map(|(topic, partition)| {
                    let key = TopicPartition {
                        topic: topic.clone(),
                        partition: *partition,
                    };
                    if missing.contains(&key) {
                        ErrorCode::TransactionAbortable
                    } else {
                        ErrorCode::None
                    }
                })
                .collect(),
            Err(error) => vec![transaction_error_code(&error, fenced); partitions.len()],
        };
    }
    let added = coordinator
        .add_partitions(
            transactional_id,
            hash,
            producer,
            &set,
            TransactionVersion::V0,
        )
        .await;
    let code = match added {
        Ok(()) => ErrorCode::None,
        Err(error) => transaction_error_code(&error, fenced),
    };
    vec![code; partitions.len()]
}

/// The partitions of a request as the coordinator takes them.
fn partition_set(partitions: &[(String, i32)]) -> BTreeSet<TopicPartition> {
    partitions
        .iter()
        .map(|(topic, partition)| TopicPartition {
            topic: topic.clone(),
            partition: *partition,
        })
        .collect()
}

/// The v0-v3 results: every partition with its code, grouped by topic in
/// request order.
fn results(
    partitions: &[(String, i32)],
    codes: &[ErrorCode],
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, partition), code) in partitions.iter().zip(codes) {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(*partition)
            .with_partition_error_code(code.code());
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.results_by_partition.push(result),
            _ => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(strom_protocol::kafka::messages::TopicName(
                        strom_protocol::kafka::protocol::StrBytes::from_string(topic.clone()),
                    ))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    topics
}
