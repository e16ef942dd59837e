//! The client side of a SASL login, over a connection being set up: the
//! requests of [`SaslClientExchange`] (SaslHandshake v1, then the
//! mechanism's messages in SaslAuthenticate requests) sent one at a time,
//! each answer read before the next request. Strom's clients and the
//! broker's connections to its peers both log in through [`login`].

use bytes::BytesMut;
use strom_protocol::frame::FrameDecoder;
use strom_protocol::messages::{decode_response, encode_request_frame, request_header};
use strom_protocol::messages::{Request, Response};
use strom_protocol::sasl::client::SaslClientExchange;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{ExchangeError, SaslLoginError};
use crate::nonce::scram_nonce;

/// A SASL login: the mechanism and the credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: String,
    /// The user to authenticate as.
    pub username: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Sends one request on `stream` (with `client_id` in its header) and
/// reads its response, at most `max_frame_bytes` long (one request at a
/// time: the response is the next frame).
pub async fn call<S>(
    stream: &mut S,
    request: &Request,
    api_version: i16,
    correlation_id: i32,
    client_id: &str,
    max_frame_bytes: usize,
) -> Result<Response, ExchangeError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let header = request_header(request, api_version, correlation_id, Some(client_id));
    let mut frame = BytesMut::new();
    encode_request_frame(&header, request, &mut frame).map_err(ExchangeError::Message)?;
    stream.write_all(&frame).await.map_err(ExchangeError::Io)?;
    let decoder = FrameDecoder::new(max_frame_bytes);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let body = loop {
        if let Some(body) = decoder.decode(&mut buffer).map_err(ExchangeError::Frame)? {
            break body;
        }
        if stream
            .read_buf(&mut buffer)
            .await
            .map_err(ExchangeError::Io)?
            == 0
        {
            return Err(ExchangeError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    };
    let (_, response) = decode_response(body, request.api_key() as i16, api_version)
        .map_err(ExchangeError::Message)?;
    Ok(response)
}

/// Logs in on a fresh connection as `login` says (the exchange takes at
/// most three round trips), with `client_id` in the requests' headers and
/// answers of at most `max_frame_bytes`.
pub async fn login<S>(
    stream: &mut S,
    login: &SaslLogin,
    client_id: &str,
    max_frame_bytes: usize,
) -> Result<(), SaslLoginError>
where
    S: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let nonce = scram_nonce().ok_or(SaslLoginError::Random)?;
    let (mut exchange, mut next) =
        SaslClientExchange::start(&login.mechanism, &login.username, &login.password, &nonce)
            .map_err(SaslLoginError::Refused)?;
    let mut correlation_id = 0;
    loop {
        correlation_id += 1;
        let response = call(
            stream,
            &next.request,
            next.api_version,
            correlation_id,
            client_id,
            max_frame_bytes,
        )
        .await
        .map_err(SaslLoginError::Exchange)?;
        let Some(request) = exchange
            .on_response(&response)
            .map_err(SaslLoginError::Refused)?
        else {
            return Ok(());
        };
        next = request;
    }
}
