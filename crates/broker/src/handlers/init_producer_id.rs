//! InitProducerId for idempotent producers.
//!
//! A request without a producer id gets a fresh id from the durable counter
//! with epoch 0. A request naming an id this broker issued and its current
//! epoch (KIP-360, v3+) gets the same id with the epoch bumped; when the
//! epoch would overflow a fresh id is issued instead.
//!
//! Transactions are not supported: a request with a transactional id is
//! answered `COORDINATOR_NOT_AVAILABLE`, Kafka's answer when no transaction
//! coordinator can serve the id (clients retry, then report a timeout).
//! Authorization codes would be dishonest: nothing is being refused.

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use strom_protocol::messages::Response;

use super::errors::producer_id_error_code;
use super::BrokerContext;

/// "No producer id" in requests and responses.
const NO_PRODUCER_ID: i64 = -1;
/// "No epoch" in requests and responses.
const NO_PRODUCER_EPOCH: i16 = -1;

/// Handles an InitProducerId request.
pub async fn handle(
    broker: &BrokerContext,
    _context: &RequestContext,
    request: InitProducerIdRequest,
) -> Reply {
    let failed = |error: ErrorCode| {
        InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH)
    };
    let response = if request.transactional_id.is_some() {
        failed(ErrorCode::CoordinatorNotAvailable)
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
