//! InitProducerId, for idempotent and transactional producers.
//!
//! Without a transactional id: a request without a producer id gets a
//! fresh id from the durable counter with epoch 0. A request naming an id
//! this broker issued and its current epoch (KIP-360, v3+) gets the same
//! id with the epoch bumped; when the epoch would overflow a fresh id is
//! issued instead.
//!
//! With a transactional id, the transaction coordinator answers (this
//! broker must lead the id's `__transaction_state` partition): the id's
//! producer id with a bumped epoch, fencing older producers and aborting
//! their open transaction first (the request is then answered
//! `CONCURRENT_TRANSACTIONS` and retried by the client).

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use strom_protocol::messages::Response;

use strom_coordinator::java_string_hash_code;
use strom_transactions::coordinator::InitRequest;
use strom_transactions::metadata::ProducerIdAndEpoch;

use super::errors::{producer_id_error_code, transaction_error_code, FencedCode};
use super::BrokerContext;

/// "No producer id" in requests and responses.
const NO_PRODUCER_ID: i64 = -1;
/// "No epoch" in requests and responses.
const NO_PRODUCER_EPOCH: i16 = -1;

/// Handles an InitProducerId request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: InitProducerIdRequest,
) -> Reply {
    let failed = |error: ErrorCode| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH)
    };
    let response = if let Some(transactional_id) = &request.transactional_id {
        match transactional(broker, context, transactional_id, &request).await {
            Ok(producer) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(producer.producer_epoch),
            Err(error) => failed(error),
        }
    } else {
        match decide(broker, request.producer_id.0, request.producer_epoch).await {
            Ok((producer_id, producer_epoch)) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch),
            Err(error) => failed(error),
        }
    };
    Reply::Response(Response::InitProducerId(response))
}

/// The transaction coordinator's answer for `transactional_id`.
async fn transactional(
    broker: &BrokerContext,
    context: &RequestContext,
    transactional_id: &str,
    request: &InitProducerIdRequest,
) -> Result<ProducerIdAndEpoch, ErrorCode> {
    let expected = (request.producer_id.0 != NO_PRODUCER_ID).then_some(ProducerIdAndEpoch {
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
    });
    let init = InitRequest {
        transaction_timeout_ms: request.transaction_timeout_ms,
        expected,
    };
    let hash = java_string_hash_code(transactional_id);
    broker
        .transactions
        .coordinator
        .init_producer_id(transactional_id, hash, init)
        .await
        .map_err(|error| {
            transaction_error_code(&error, FencedCode::for_version(context.api_version, 4))
        })
}

/// The id and epoch to hand out.
async fn decide(
    broker: &BrokerContext,
    producer_id: i64,
    epoch: i16,
) -> Result<(i64, i16), ErrorCode> {
    let fresh = || async {
        broker
            .producer_ids
            .allocate(|work| crate::blocking::blocking(work))
            .await
            .map(|id| (id, 0))
            .map_err(|error| producer_id_error_code(&error))
    };
    match (producer_id, epoch) {
        (NO_PRODUCER_ID, NO_PRODUCER_EPOCH) => fresh().await,
        (NO_PRODUCER_ID, _) | (_, NO_PRODUCER_EPOCH) => Err(ErrorCode::InvalidRequest),
        (id, _) if !broker.producer_ids.was_issued(id) => Err(ErrorCode::InvalidProducerIdMapping),
        (_, epoch) if epoch < 0 => Err(ErrorCode::InvalidProducerEpoch),
        (_, epoch) if epoch >= i16::MAX - 1 => fresh().await,
        (id, epoch) => Ok((id, epoch + 1)),
    }
}
