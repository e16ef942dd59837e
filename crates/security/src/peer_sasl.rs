//! The server side of SASL on the controller listener: before a quorum
//! connection carries Raft requests, the connecting node authenticates
//! with PLAIN (SaslHandshake v1, then one SaslAuthenticate) as one of the
//! users of the listener's JAAS entry ([`PlainUsers`]). The password check
//! is the client listeners' PLAIN check ([`crate::sasl`]) against
//! credentials salted here at start-up, so no password is compared in the
//! clear.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{decode_request, encode_response_frame, Request, Response};
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};
use strom_protocol::sasl::PLAIN;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::PeerSaslError;
use crate::peer_config::PlainUsers;
use crate::sasl::{plain, CredentialStore};

/// The largest frame read before authentication (Kafka's
/// `sasl.server.max.receive.size` default).
const MAX_FRAME_BYTES: usize = 512 * 1024;

/// Iterations of the in-memory credentials (never stored or sent).
const ITERATIONS: u32 = 4096;

/// The users of the listener, salted once.
#[derive(Debug)]
pub struct ListenerUsers {
    credentials: BTreeMap<String, ScramCredential>,
}

impl ListenerUsers {
    /// Salts every user's password (the user name is the salt: these
    /// credentials live only in memory).
    pub fn new(users: &PlainUsers) -> ListenerUsers {
        let credentials = users
            .iter()
            .filter_map(|(user, password)| {
                ScramCredential::from_password(
                    ScramMechanism::Sha512,
                    password,
                    user.as_bytes(),
                    ITERATIONS,
                )
                .ok()
                .map(|credential| (user.to_owned(), credential))
            })
            .collect();
        ListenerUsers { credentials }
    }
}

impl CredentialStore for ListenerUsers {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        (mechanism == ScramMechanism::Sha512)
            .then(|| self.credentials.get(user).cloned())
            .flatten()
    }
}

/// Reads one request frame: size, then that many bytes.
async fn read_request<S>(stream: &mut S) -> Result<(i32, i16, Request), PeerSaslError>
where
    S: AsyncRead + Unpin + ?Sized,
{
    let size = stream.read_i32().await?;
    let length = usize::try_from(size)
        .ok()
        .filter(|length| *length <= MAX_FRAME_BYTES)
        .ok_or(PeerSaslError::FrameSize { size })?;
    let mut frame = vec![0; length];
    stream.read_exact(&mut frame).await?;
    let request =
        decode_request(Bytes::from(frame)).map_err(|_| PeerSaslError::UnexpectedRequest)?;
    Ok((
        request.header.correlation_id,
        request.header.request_api_version,
        request.body,
    ))
}

async fn answer<S>(
    stream: &mut S,
    correlation_id: i32,
    api_version: i16,
    response: Response,
) -> Result<(), PeerSaslError>
where
    S: AsyncWrite + Unpin + ?Sized,
{
    let mut frame = BytesMut::new();
    encode_response_frame(correlation_id, api_version, &response, &mut frame)
        .map_err(|_| PeerSaslError::UnexpectedRequest)?;
    stream.write_all(&frame).await?;
    stream.flush().await?;
    Ok(())
}

/// Authenticates a quorum connection as one of `users`; returns the user.
/// A refusal is answered (as Kafka's brokers do) before the error is
/// returned and the connection closed.
pub async fn authenticate<S>(stream: &mut S, users: &ListenerUsers) -> Result<String, PeerSaslError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let (correlation_id, version, request) = read_request(stream).await?;
    let Request::SaslHandshake(handshake) = request else {
        return Err(PeerSaslError::UnexpectedRequest);
    };
    if version < 1 {
        return Err(PeerSaslError::UnexpectedRequest);
    }
    let accepted = handshake.mechanism.as_str() == PLAIN;
    let code = match accepted {
        true => ErrorCode::None,
        false => ErrorCode::UnsupportedSaslMechanism,
    };
    let reply = SaslHandshakeResponse::default()
        .with_error_code(code.code())
        .with_mechanisms(vec![StrBytes::from_static_str(PLAIN)]);
    answer(
        stream,
        correlation_id,
        version,
        Response::SaslHandshake(reply),
    )
    .await?;
    if !accepted {
        return Err(PeerSaslError::Mechanism {
            mechanism: handshake.mechanism.to_string(),
        });
    }
    let (correlation_id, version, request) = read_request(stream).await?;
    let Request::SaslAuthenticate(authenticate) = request else {
        return Err(PeerSaslError::UnexpectedRequest);
    };
    let outcome = plain(&authenticate.auth_bytes, users);
    let reply = match &outcome {
        Ok(_) => SaslAuthenticateResponse::default(),
        Err(_) => SaslAuthenticateResponse::default()
            .with_error_code(ErrorCode::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "authentication failed: invalid credentials with SASL mechanism PLAIN",
            ))),
    };
    answer(
        stream,
        correlation_id,
        version,
        Response::SaslAuthenticate(reply),
    )
    .await?;
    outcome.map_err(PeerSaslError::Refused)
}
