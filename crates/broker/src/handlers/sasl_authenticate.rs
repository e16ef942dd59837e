//! SaslAuthenticate on a listener without SASL: `ILLEGAL_SASL_STATE`, as
//! Kafka answers it outside a SASL exchange.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use crate::network::{Reply, RequestContext};

/// Handles a SaslAuthenticate request.
pub fn handle(_context: &RequestContext, _request: SaslAuthenticateRequest) -> Reply {
    Reply::Response(Response::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(ErrorCode::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "SASL is not enabled on this listener",
            ))),
    ))
}
