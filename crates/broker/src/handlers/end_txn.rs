//! EndTxn: commits or aborts the producer's transaction. The answer comes
//! once the coordinator has written PrepareCommit or PrepareAbort; the
//! markers follow in the background, and the producer's next transaction
//! waits for them (`CONCURRENT_TRANSACTIONS`, which clients retry).

use strom_coordinator::java_string_hash_code;
use strom_network::{Reply, RequestContext};
use strom_protocol::kafka::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use strom_protocol::messages::Response;
use strom_transactions::metadata::{ProducerIdAndEpoch, TransactionVersion};
use strom_transactions::state::TransactionResult;

use super::errors::{transaction_error_code, FencedCode};
use super::BrokerContext;

/// Handles an EndTxn request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: EndTxnRequest,
) -> Reply {
    let transactional_id = request.transactional_id.to_string();
    let producer = ProducerIdAndEpoch {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    };
    let result = if request.committed {
        TransactionResult::Commit
    } else {
        TransactionResult::Abort
    };
    let ended = broker
        .transactions
        .coordinator
        .end_transaction(
            &transactional_id,
            java_string_hash_code(&transactional_id),
            producer,
            result,
            TransactionVersion::V0,
        )
        .await;
    let response = match ended {
        Ok(next) => EndTxnResponse::default()
            .with_producer_id(ProducerId(next.producer_id))
            .with_producer_epoch(next.producer_epoch),
        Err(error) => {
            let fenced = FencedCode::for_version(context.api_version, 2);
            EndTxnResponse::default()
                .with_error_code(transaction_error_code(&error, fenced).code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    };
    Reply::Response(Response::EndTxn(response))
}
