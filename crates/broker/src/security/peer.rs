//! The connections this node opens to its peers and accepts from them,
//! secured as the peer's listener asks ([`PeerClientSecurity`]): TCP, then
//! TLS (presenting this node's keystore certificate), then a SASL login
//! (the exchange of [`SaslClientExchange`] over Kafka requests).
//!
//! [`PeerConnector`] serves the replica fetchers and, through
//! [`QuorumConnector`], the metadata quorum; [`PeerAcceptor`] secures the
//! quorum listener through [`QuorumAcceptor`].

use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::pki_types::ServerName;
use strom_controller::quorum::stream::{BoxedStream, QuorumAcceptor, QuorumConnector};
use strom_protocol::frame::FrameDecoder;
use strom_protocol::messages::{decode_response, encode_request_frame, request_header};
use strom_protocol::messages::{Request, Response};
use strom_protocol::sasl::client::{SaslClientError, SaslClientExchange};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::peer_config::{PeerClientSecurity, SaslLogin};
use super::peer_sasl::{self, ListenerUsers};
use super::tls_client::{client_config, TlsClientError};

/// How long connecting (TCP, TLS and SASL together) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client id of this node's requests to its peers.
pub const PEER_CLIENT_ID: &str = "strom-broker";

/// Why a connection to a peer could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Connecting, the TLS handshake, writing or reading failed.
    #[error("i/o with {address} failed")]
    Io {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed: the peer's certificate did not verify, or
    /// the peer refused this node's certificate.
    #[error("the TLS handshake with {address} failed")]
    Tls {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The system random generator failed (no SCRAM nonce).
    #[error("no random nonce for the SASL login to {address}")]
    Random {
        /// The peer's `host:port`.
        address: String,
    },
    /// The host of the address is no TLS server name.
    #[error("{address} has no host usable as a TLS server name")]
    ServerName {
        /// The peer's `host:port`.
        address: String,
    },
    /// The peer refused this node's SASL login (or its proof did not
    /// verify).
    #[error("SASL authentication with {address} failed")]
    Authentication {
        /// The peer's `host:port`.
        address: String,
        /// Why.
        #[source]
        cause: SaslClientError,
    },
    /// A request or response did not encode or decode.
    #[error("the exchange with {address} is malformed")]
    Codec {
        /// The peer's `host:port`.
        address: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl PeerError {
    /// Whether the peer and this node did not accept each other (TLS
    /// certificates or SASL credentials), as opposed to a network failure:
    /// worth a warning, since retrying will not help until the
    /// certificates, the user or the password are fixed.
    pub fn is_authentication(&self) -> bool {
        matches!(
            self,
            PeerError::Authentication { .. } | PeerError::Tls { .. }
        )
    }
}

/// Opens secured connections to peers. See the module docs.
pub struct PeerConnector {
    listener: String,
    tls: Option<TlsConnector>,
    sasl: Option<SaslLogin>,
    max_frame_bytes: usize,
}

impl std::fmt::Debug for PeerConnector {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PeerConnector")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl PeerConnector {
    /// A connector to peers' `security.listener`, reading responses of at
    /// most `max_frame_bytes`.
    pub fn new(
        security: &PeerClientSecurity,
        max_frame_bytes: usize,
    ) -> Result<PeerConnector, TlsClientError> {
        let tls = match &security.tls {
            Some(settings) => Some(TlsConnector::from(client_config(
                settings,
                security.verify_hostname,
            )?)),
            None => None,
        };
        Ok(PeerConnector {
            listener: security.listener.clone(),
            tls,
            sasl: security.sasl.clone(),
            max_frame_bytes,
        })
    }

    /// The listener this connector reaches on its peers.
    pub fn listener(&self) -> &str {
        &self.listener
    }

    /// Connects to `address` and secures the connection, within
    /// [`CONNECT_TIMEOUT`].
    pub async fn connect(&self, address: &str) -> Result<BoxedStream, PeerError> {
        let io = |source| PeerError::Io {
            address: address.to_owned(),
            source,
        };
        let setup = async {
            let stream = TcpStream::connect(address).await.map_err(io)?;
            stream.set_nodelay(true).map_err(io)?;
            self.secure(stream, address).await
        };
        tokio::time::timeout(CONNECT_TIMEOUT, setup)
            .await
            .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
    }

    /// Secures `stream`, connected to `address`: TLS, then SASL.
    pub async fn secure(&self, stream: TcpStream, address: &str) -> Result<BoxedStream, PeerError> {
        let mut stream: BoxedStream = match &self.tls {
            None => Box::new(stream),
            Some(connector) => {
                let name = server_name(address)?;
                let tls = |source| PeerError::Tls {
                    address: address.to_owned(),
                    source,
                };
                Box::new(connector.connect(name, stream).await.map_err(tls)?)
            }
        };
        if let Some(login) = &self.sasl {
            self.login(&mut stream, address, login).await?;
        }
        Ok(stream)
    }

    async fn login(
        &self,
        stream: &mut BoxedStream,
        address: &str,
        login: &SaslLogin,
    ) -> Result<(), PeerError> {
        let failed = |cause| PeerError::Authentication {
            address: address.to_owned(),
            cause,
        };
        let (mut exchange, mut next) = SaslClientExchange::start(
            &login.mechanism,
            &login.username,
            &login.password,
            &client_nonce().ok_or_else(|| PeerError::Random {
                address: address.to_owned(),
            })?,
        )
        .map_err(failed)?;
        let mut correlation_id = 0;
        loop {
            correlation_id += 1;
            let response = call(
                stream,
                address,
                &next.request,
                next.api_version,
                correlation_id,
                self.max_frame_bytes,
            )
            .await?;
            let Some(request) = exchange.on_response(&response).map_err(failed)? else {
                return Ok(());
            };
            next = request;
        }
    }
}

#[async_trait]
impl QuorumConnector for PeerConnector {
    async fn connect(&self, stream: TcpStream, address: &str) -> std::io::Result<BoxedStream> {
        self.secure(stream, address)
            .await
            .map_err(std::io::Error::other)
    }
}

/// Secures the quorum connections this node accepts: TLS on an SSL or
/// SASL_SSL controller listener (with the listener's `ssl.client.auth`),
/// then, with SASL, a PLAIN login as one of the listener's users.
pub struct PeerAcceptor {
    tls: Option<TlsAcceptor>,
    users: Option<ListenerUsers>,
}

impl std::fmt::Debug for PeerAcceptor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PeerAcceptor")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users)
            .finish()
    }
}

impl PeerAcceptor {
    /// An acceptor with the listener's TLS server configuration (if any)
    /// and SASL users (if any).
    pub fn new(tls: Option<TlsAcceptor>, users: Option<ListenerUsers>) -> PeerAcceptor {
        PeerAcceptor { tls, users }
    }
}

#[async_trait]
impl QuorumAcceptor for PeerAcceptor {
    async fn accept(&self, stream: TcpStream) -> std::io::Result<BoxedStream> {
        let mut stream: BoxedStream = match &self.tls {
            Some(acceptor) => Box::new(acceptor.accept(stream).await?),
            None => Box::new(stream),
        };
        if let Some(users) = &self.users {
            peer_sasl::authenticate(&mut stream, users)
                .await
                .map_err(std::io::Error::other)?;
        }
        Ok(stream)
    }
}

/// The TLS server name of `host:port` (a DNS name or an IP address).
fn server_name(address: &str) -> Result<ServerName<'static>, PeerError> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|_| PeerError::ServerName {
        address: address.to_owned(),
    })
}

/// A fresh SCRAM client nonce: 18 random bytes as hex.
fn client_nonce() -> Option<String> {
    let mut bytes = [0u8; 18];
    SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Sends one request on `stream` and reads its response (one request at a
/// time: the response is the next frame).
pub async fn call(
    stream: &mut BoxedStream,
    address: &str,
    request: &Request,
    api_version: i16,
    correlation_id: i32,
    max_frame_bytes: usize,
) -> Result<Response, PeerError> {
    let codec = |source: Box<dyn std::error::Error + Send + Sync>| PeerError::Codec {
        address: address.to_owned(),
        source,
    };
    let io = |source| PeerError::Io {
        address: address.to_owned(),
        source,
    };
    let header = request_header(request, api_version, correlation_id, Some(PEER_CLIENT_ID));
    let mut frame = BytesMut::new();
    encode_request_frame(&header, request, &mut frame).map_err(|e| codec(Box::new(e)))?;
    stream.write_all(&frame).await.map_err(io)?;
    let decoder = FrameDecoder::new(max_frame_bytes);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let body = loop {
        if let Some(body) = decoder
            .decode(&mut buffer)
            .map_err(|e| codec(Box::new(e)))?
        {
            break body;
        }
        if stream.read_buf(&mut buffer).await.map_err(io)? == 0 {
            return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    };
    let (_, response) = decode_response(body, request.api_key() as i16, api_version)
        .map_err(|e| codec(Box::new(e)))?;
    Ok(response)
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;
