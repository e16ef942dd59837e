//! Security: listeners' protocols (PLAINTEXT, SSL, SASL_PLAINTEXT,
//! SASL_SSL), TLS, SASL authentication, principals, and authorization.
//!
//! The network layer knows only a connection's [`Session`] (its listener
//! and who it is) and the TLS acceptor of its listener; the SASL exchange
//! runs in the SaslHandshake and SaslAuthenticate handlers over the
//! session, and every other handler asks the authorizer about the
//! session's principal. Credentials and ACLs live in the metadata log.

pub mod authorizer;
pub mod config;
pub mod jaas;
pub mod peer;
pub mod peer_config;
pub mod peer_sasl;
pub mod principal;
pub mod reload;
pub mod sasl;
pub mod session;
pub mod tls;
pub mod tls_client;

use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

pub use config::{is_security_key, SecurityConfig, SecurityProtocol};
pub use principal::Principal;
pub use session::Session;

use crate::config::BrokerConfig;
use config::SaslSettings;
use principal::MappingRules;

/// Why the security of a listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A listener's TLS material or options.
    #[error("listener {listener}: TLS cannot be set up")]
    Tls {
        /// The listener.
        listener: String,
        /// The cause.
        #[source]
        source: tls::TlsSetupError,
    },
    /// The TLS client this node connects to its peers' listener with.
    #[error("connections to other nodes' listener {listener}: TLS cannot be set up")]
    PeerTls {
        /// The peers' listener.
        listener: String,
        /// The cause.
        #[source]
        source: tls_client::TlsClientError,
    },
    /// A listener of `listeners` without security settings (not parsed).
    #[error("listener {listener} has no security settings")]
    UnknownListener {
        /// The listener.
        listener: String,
    },
}

/// What the network layer needs to serve one listener.
pub struct ListenerRuntime {
    /// The listener name.
    pub name: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// The TLS acceptor, for SSL and SASL_SSL.
    pub acceptor: Option<TlsAcceptor>,
    /// SASL settings, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslSettings>,
    /// `ssl.principal.mapping.rules`.
    pub principal_mapping: MappingRules,
}

impl std::fmt::Debug for ListenerRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerRuntime")
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .field("tls", &self.acceptor.is_some())
            .field("sasl", &self.sasl)
            .finish_non_exhaustive()
    }
}

impl ListenerRuntime {
    /// A PLAINTEXT listener (for tests and embedded use).
    pub fn plaintext(name: &str) -> ListenerRuntime {
        ListenerRuntime {
            name: name.to_owned(),
            protocol: SecurityProtocol::Plaintext,
            acceptor: None,
            sasl: None,
            principal_mapping: MappingRules::parse("DEFAULT")
                .unwrap_or_else(|_| unreachable!("DEFAULT is a valid rule")),
        }
    }
}

/// The runtime of every listener of `config`, in the order of `listeners`.
pub fn listener_runtimes(
    config: &BrokerConfig,
) -> Result<Vec<Arc<ListenerRuntime>>, SecurityError> {
    config
        .listeners
        .iter()
        .map(|listener| {
            let security = config.security.listener(&listener.name).ok_or_else(|| {
                SecurityError::UnknownListener {
                    listener: listener.name.clone(),
                }
            })?;
            let acceptor = match &security.tls {
                Some(settings) => Some(TlsAcceptor::from(tls::server_config(settings).map_err(
                    |source| SecurityError::Tls {
                        listener: listener.name.clone(),
                        source,
                    },
                )?)),
                None => None,
            };
            Ok(Arc::new(ListenerRuntime {
                name: listener.name.clone(),
                protocol: security.protocol,
                acceptor,
                sasl: security.sasl.clone(),
                principal_mapping: config.security.principal_mapping.clone(),
            }))
        })
        .collect()
}

/// The connector to peers' `security.listener` (replica fetchers, the
/// quorum).
pub fn peer_connector(
    security: &peer_config::PeerClientSecurity,
) -> Result<Arc<peer::PeerConnector>, SecurityError> {
    peer::PeerConnector::new(security, strom_protocol::frame::DEFAULT_MAX_FRAME_BYTES)
        .map(Arc::new)
        .map_err(|source| SecurityError::PeerTls {
            listener: security.listener.clone(),
            source,
        })
}

/// The acceptor of this node's quorum listener: TLS with the controller
/// listener's settings when it is SSL or SASL_SSL, a PLAIN login as one
/// of `users` with SASL, plain TCP otherwise.
pub fn quorum_acceptor(
    security: &peer_config::PeerClientSecurity,
    users: Option<&peer_config::PlainUsers>,
) -> Result<Arc<dyn strom_controller::quorum::stream::QuorumAcceptor>, SecurityError> {
    let tls = match &security.tls {
        Some(settings) => Some(TlsAcceptor::from(tls::server_config(settings).map_err(
            |source| SecurityError::Tls {
                listener: security.listener.clone(),
                source,
            },
        )?)),
        None => None,
    };
    let users = users.map(peer_sasl::ListenerUsers::new);
    if tls.is_none() && users.is_none() {
        return Ok(Arc::new(strom_controller::quorum::stream::Plaintext));
    }
    Ok(Arc::new(peer::PeerAcceptor::new(tls, users)))
}

/// The security protocol name of a listener, for broker registration.
pub fn protocol_name(config: &BrokerConfig, listener: &str) -> String {
    config
        .security
        .listener(listener)
        .map_or(SecurityProtocol::Plaintext, |security| security.protocol)
        .name()
        .to_owned()
}
