//! SaslHandshake: chooses the SASL mechanism of the connection. On a
//! listener without SASL, or a second time, Kafka's `ILLEGAL_SASL_STATE`;
//! a mechanism the listener does not enable gets
//! `UNSUPPORTED_SASL_MECHANISM` with the enabled ones.

use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_security::sasl::handshake;

use super::errors::sasl_failure_code;

/// Handles a SaslHandshake request.
pub fn handle(context: &RequestContext, request: SaslHandshakeRequest) -> Reply {
    let session = &context.session;
    let mechanisms = session
        .listener()
        .sasl
        .as_ref()
        .map(|sasl| {
            sasl.enabled_mechanisms
                .iter()
                .map(|mechanism| StrBytes::from_string(mechanism.clone()))
                .collect()
        })
        .unwrap_or_default();
    let error_code = match handshake(session, &request.mechanism, context.api_version) {
        Ok(()) => ErrorCode::None,
        Err(failure) => sasl_failure_code(&failure),
    };
    Reply::Response(Response::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(error_code.code())
            .with_mechanisms(mechanisms),
    ))
}
