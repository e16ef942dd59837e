//! The connections this node opens to its peers and accepts from them,
//! secured as the peer's listener asks ([`PeerClientSecurity`]): TCP, then
//! TLS (presenting this node's keystore certificate), then a SASL login
//! (the exchange of [`crate::sasl_client::login`] over Kafka requests).
//!
//! [`PeerConnector`] serves the replica fetchers and the metadata quorum;
//! [`PeerAcceptor`] secures the quorum listener. The quorum's connector
//! and acceptor traits belong to `strom-controller`, which this crate does
//! not depend on: the node that embeds both implements them over these
//! two types.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use strom_protocol::messages::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::{ExchangeError, PeerError, SaslLoginError, SecurityError, TlsClientError};
use crate::listener::tls_acceptor;
use crate::peer_config::{PeerClientSecurity, PlainUsers};
use crate::peer_sasl::{self, ListenerUsers};
use crate::sasl_client::{self, SaslLogin};
use crate::tls_client::client_config;

/// A byte stream a peer connection runs over: TCP, or TLS over TCP.
pub trait PeerStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin> PeerStream for S {}

/// A secured (or plain) peer connection.
pub type BoxedStream = Box<dyn PeerStream>;

/// How long connecting (TCP, TLS and SASL together) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client id of this node's requests to its peers.
pub const PEER_CLIENT_ID: &str = "strom-broker";

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
        sasl_client::login(stream, login, PEER_CLIENT_ID, self.max_frame_bytes)
            .await
            .map_err(|error| match error {
                SaslLoginError::Exchange(error) => exchange_error(address, error),
                SaslLoginError::Random => PeerError::Random {
                    address: address.to_owned(),
                },
                SaslLoginError::Refused(cause) => PeerError::Authentication {
                    address: address.to_owned(),
                    cause,
                },
            })
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

    /// Secures `stream`, just accepted: the TLS handshake, then the SASL
    /// login.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<BoxedStream> {
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

/// The connector to peers' `security.listener` (replica fetchers, the
/// quorum).
pub fn peer_connector(security: &PeerClientSecurity) -> Result<Arc<PeerConnector>, SecurityError> {
    PeerConnector::new(security, strom_protocol::frame::DEFAULT_MAX_FRAME_BYTES)
        .map(Arc::new)
        .map_err(|source| SecurityError::PeerTls {
            listener: security.listener.clone(),
            source,
        })
}

/// The acceptor of this node's quorum listener: TLS with the controller
/// listener's settings when it is SSL or SASL_SSL, a PLAIN login as one
/// of `users` with SASL; `None` for plain TCP.
pub fn peer_acceptor(
    security: &PeerClientSecurity,
    users: Option<&PlainUsers>,
) -> Result<Option<PeerAcceptor>, SecurityError> {
    let tls = match &security.tls {
        Some(settings) => Some(tls_acceptor(&security.listener, settings)?.0),
        None => None,
    };
    let users = users.map(ListenerUsers::new);
    if tls.is_none() && users.is_none() {
        return Ok(None);
    }
    Ok(Some(PeerAcceptor::new(tls, users)))
}

/// The TLS server name of `host:port` (a DNS name or an IP address).
fn server_name(address: &str) -> Result<ServerName<'static>, PeerError> {
    crate::tls_client::server_name(address).ok_or_else(|| PeerError::ServerName {
        address: address.to_owned(),
    })
}

/// A failed exchange with the peer at `address`.
fn exchange_error(address: &str, error: ExchangeError) -> PeerError {
    match error {
        ExchangeError::Io(source) => PeerError::Io {
            address: address.to_owned(),
            source,
        },
        ExchangeError::Frame(source) => PeerError::Codec {
            address: address.to_owned(),
            source: Box::new(source),
        },
        ExchangeError::Message(source) => PeerError::Codec {
            address: address.to_owned(),
            source: Box::new(source),
        },
    }
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
    sasl_client::call(
        stream,
        request,
        api_version,
        correlation_id,
        PEER_CLIENT_ID,
        max_frame_bytes,
    )
    .await
    .map_err(|error| exchange_error(address, error))
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;
