//! SaslHandshake on a listener without SASL: Kafka's own answer,
//! `ILLEGAL_SASL_STATE` with no mechanisms (Kafka's request handler gives
//! exactly this when the request reaches it outside a SASL exchange).

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use strom_protocol::messages::Response;

use crate::network::{Reply, RequestContext};

/// Handles a SaslHandshake request.
pub fn handle(_context: &RequestContext, _request: SaslHandshakeRequest) -> Reply {
    Reply::Response(Response::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(ErrorCode::IllegalSaslState.code())
            .with_mechanisms(Vec::new()),
    ))
}
