//! SaslAuthenticate: one message of the SASL exchange. A failure answers
//! `SASL_AUTHENTICATION_FAILED` (or `ILLEGAL_SASL_STATE`) and the
//! connection closes after the answer.

use bytes::Bytes;
use strom_network::{Reply, RequestContext};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use strom_security::error::SaslFailure;
use strom_security::nonce::scram_nonce;
use strom_security::sasl::authenticate;
use strom_security::session::AuthState;
use tracing::warn;

use super::errors::sasl_failure_code;
use super::BrokerContext;
use crate::security::ImageCredentials;

/// Handles a SaslAuthenticate request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: SaslAuthenticateRequest,
) -> Reply {
    let image = broker.controller.image();
    let result = match scram_nonce() {
        Some(nonce) => authenticate(
            &context.session,
            &request.auth_bytes,
            &ImageCredentials(image.as_ref()),
            || nonce,
        ),
        None => Err(SaslFailure::IllegalState {
            reason: "the system random generator failed",
        }),
    };
    let response = match result {
        Ok(bytes) => SaslAuthenticateResponse::default()
            .with_error_code(ErrorCode::None.code())
            .with_auth_bytes(Bytes::from(bytes)),
        Err(failure) => {
            warn!(peer = %context.peer, error = %failure, cause = ?std::error::Error::source(&failure).map(ToString::to_string), "SASL authentication refused");
            if matches!(failure, SaslFailure::IllegalState { .. })
                && context.session.authenticated()
            {
                // A stray SaslAuthenticate after success: refused, still open.
            } else {
                *context.session.state() = AuthState::Failed;
            }
            SaslAuthenticateResponse::default()
                .with_error_code(sasl_failure_code(&failure).code())
                .with_error_message(Some(StrBytes::from_string(failure.to_string())))
        }
    };
    Reply::Response(Response::SaslAuthenticate(response))
}
