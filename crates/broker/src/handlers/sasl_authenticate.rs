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
    let result = authenticate(
        &context.session,
        &request.auth_bytes,
        image.as_ref(),
        server_nonce,
    );
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

/// A fresh server nonce: 24 random bytes in base64 (no commas).
fn server_nonce() -> String {
    let mut bytes = [0u8; 24];
    if SystemRandom::new().fill(&mut bytes).is_err() {
        // The system's generator failing is not recoverable; an exchange
        // with a predictable nonce must not proceed.
        warn!("the system random generator failed; SCRAM nonce falls back to time");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        bytes[..16].copy_from_slice(&nanos.to_le_bytes());
    }
    BASE64.encode(bytes)
}
