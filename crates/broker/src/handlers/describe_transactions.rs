//! DescribeTransactions (KIP-664): the state of transactional ids this
//! broker coordinates. Ids the principal may not DESCRIBE get
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`; ids coordinated elsewhere
//! `NOT_COORDINATOR`; unknown ids `TRANSACTIONAL_ID_NOT_FOUND`.

use std::collections::BTreeMap;

use strom_coordinator::java_string_hash_code;
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_transactions_response::{
    TopicData, TransactionState,
};
use strom_protocol::kafka::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    TransactionalId,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_transactions::metadata::TransactionMetadata;

use super::authorization::authorize;
use super::errors::{transaction_error_code, FencedCode};
use super::BrokerContext;

/// Handles a DescribeTransactions request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeTransactionsRequest,
) -> Reply {
    let states = request
        .transactional_ids
        .iter()
        .map(|id| {
            let id = id.to_string();
            let described = if authorize(
                broker,
                context,
                operation::DESCRIBE,
                resource::TRANSACTIONAL_ID,
                &id,
            ) {
                describe(broker, &id)
            } else {
                Err(ErrorCode::TransactionalIdAuthorizationFailed)
            };
            match described {
                Ok(metadata) => state(&metadata),
                Err(code) => TransactionState::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                    .with_error_code(code.code())
                    .with_transaction_state(StrBytes::from_static_str(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
            }
        })
        .collect();
    Reply::Response(Response::DescribeTransactions(
        DescribeTransactionsResponse::default().with_transaction_states(states),
    ))
}

fn describe(broker: &BrokerContext, id: &str) -> Result<TransactionMetadata, ErrorCode> {
    broker
        .transactions
        .coordinator
        .describe(id, java_string_hash_code(id))
        .map_err(|error| transaction_error_code(&error, FencedCode::ProducerFenced))?
        .ok_or(ErrorCode::TransactionalIdNotFound)
}

/// One id's description, with its partitions grouped by topic.
fn state(metadata: &TransactionMetadata) -> TransactionState {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for partition in &metadata.partitions {
        topics
            .entry(partition.topic.as_str())
            .or_default()
            .push(partition.partition);
    }
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            TopicData::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(partitions)
        })
        .collect();
    TransactionState::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            metadata.transactional_id.clone(),
        )))
        .with_transaction_state(StrBytes::from_static_str(metadata.state.name()))
        .with_transaction_timeout_ms(metadata.transaction_timeout_ms)
        .with_transaction_start_time_ms(metadata.transaction_start_timestamp_ms)
        .with_producer_id(ProducerId(metadata.producer_id))
        .with_producer_epoch(metadata.producer_epoch)
        .with_topics(topics)
}
