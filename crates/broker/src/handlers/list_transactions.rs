//! ListTransactions (KIP-664): the transactional ids this broker
//! coordinates, filtered by state, producer id and (v1) by how long the
//! transaction has been open; only ids the principal may DESCRIBE are
//! listed. Unknown state names are echoed in `unknown_state_filters`.

use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::list_transactions_response::TransactionState as Listed;
use strom_protocol::kafka::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_transactions::state::TransactionState;

use super::authorization::authorize;
use super::errors::{transaction_error_code, FencedCode};
use super::BrokerContext;

/// Handles a ListTransactions request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: ListTransactionsRequest,
) -> Reply {
    let mut states = Vec::new();
    let mut unknown = Vec::new();
    for name in &request.state_filters {
        match TransactionState::from_name(name.as_str()) {
            Some(state) => states.push(state),
            None => unknown.push(name.clone()),
        }
    }
    let listed = match broker.transactions.coordinator.list() {
        Ok(listed) => listed,
        Err(error) => {
            let code = transaction_error_code(&error, FencedCode::ProducerFenced);
            return Reply::Response(Response::ListTransactions(
                ListTransactionsResponse::default().with_error_code(code.code()),
            ));
        }
    };
    let now_ms = broker.replicas.now_ms();
    let listed = listed
        .into_iter()
        .filter(|entry| states.is_empty() || states.contains(&entry.state))
        .filter(|entry| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .iter()
                    .any(|id| id.0 == entry.producer_id)
        })
        .filter(|entry| {
            request.duration_filter < 0
                || (entry.state == TransactionState::Ongoing
                    && now_ms.saturating_sub(entry.start_timestamp_ms) >= request.duration_filter)
        })
        .filter(|entry| {
            authorize(
                broker,
                context,
                operation::DESCRIBE,
                resource::TRANSACTIONAL_ID,
                &entry.transactional_id,
            )
        })
        .map(|entry| {
            Listed::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    entry.transactional_id,
                )))
                .with_producer_id(ProducerId(entry.producer_id))
                .with_transaction_state(StrBytes::from_static_str(entry.state.name()))
        })
        .collect();
    Reply::Response(Response::ListTransactions(
        ListTransactionsResponse::default()
            .with_error_code(ErrorCode::None.code())
            .with_unknown_state_filters(unknown)
            .with_transaction_states(listed),
    ))
}
