//! SaslAuthenticate: one message of the SASL exchange. A failure answers
//! `SASL_AUTHENTICATION_FAILED` (or `ILLEGAL_SASL_STATE`) and the
//! connection closes after the answer.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use ring::rand::{SecureRandom, SystemRandom};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;
use tracing::warn;

use super::BrokerContext;
use crate::network::{Reply, RequestContext};
use crate::security::sasl::{authenticate, SaslFailure};
use crate::security::session::AuthState;

/// Handles a SaslAuthenticate request.
pub fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: SaslAuthenticateRequest,
) -> Reply {
    let image = broker.controller.image();
    let result = match server_nonce() {
        Some(nonce) => authenticate(
            &context.session,
            &request.auth_bytes,
            image.as_ref(),
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
                .with_error_code(failure.error_code().code())
                .with_error_message(Some(StrBytes::from_string(failure.to_string())))
        }
    };
    Reply::Response(Response::SaslAuthenticate(response))
}

/// A fresh server nonce: 24 random bytes in base64 (no commas); `None`
/// if the system's generator fails (the exchange must not go on with a
/// predictable nonce).
fn server_nonce() -> Option<String> {
    let mut bytes = [0u8; 24];
    SystemRandom::new().fill(&mut bytes).ok()?;
    Some(BASE64.encode(bytes))
}
