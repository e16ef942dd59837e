//! The broker's side of security: what `strom-security` leaves to the
//! node that embeds it. The quorum's connector and acceptor traits (of
//! `strom-controller`) over the security crate's peer connector and
//! acceptor, SCRAM credentials looked up in the metadata image, and the
//! security protocol a listener registers with.
//!
//! Everything else (TLS, SASL, principals, the authorizer's decision) is
//! in `strom-security`; the handlers ask the authorizer through
//! `handlers::authorization`.

use std::sync::Arc;

use async_trait::async_trait;
use strom_controller::image::MetadataImage;
use strom_controller::quorum::stream::{BoxedStream, QuorumAcceptor, QuorumConnector};
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};
use strom_security::peer::{peer_acceptor, peer_connector, PeerAcceptor, PeerConnector};
use strom_security::peer_config::{PeerClientSecurity, PlainUsers};
use strom_security::sasl::CredentialStore;
use strom_security::{SecurityError, SecurityProtocol};
use tokio::net::TcpStream;

use crate::config::BrokerConfig;

/// The quorum's connections to other quorum members, secured by the
/// controller listener's [`PeerConnector`].
#[derive(Debug)]
pub struct QuorumPeerConnector(pub Arc<PeerConnector>);

#[async_trait]
impl QuorumConnector for QuorumPeerConnector {
    async fn connect(&self, stream: TcpStream, address: &str) -> std::io::Result<BoxedStream> {
        let stream = self
            .0
            .secure(stream, address)
            .await
            .map_err(std::io::Error::other)?;
        Ok(Box::new(stream))
    }
}

/// The quorum listener's connections, secured by a [`PeerAcceptor`].
#[derive(Debug)]
pub struct QuorumPeerAcceptor(pub PeerAcceptor);

#[async_trait]
impl QuorumAcceptor for QuorumPeerAcceptor {
    async fn accept(&self, stream: TcpStream) -> std::io::Result<BoxedStream> {
        Ok(Box::new(self.0.accept(stream).await?))
    }
}

/// The connector of this node's quorum to the controllers' controller
/// listener.
pub fn quorum_connector(
    security: &PeerClientSecurity,
) -> Result<Arc<dyn QuorumConnector>, SecurityError> {
    Ok(Arc::new(QuorumPeerConnector(peer_connector(security)?)))
}

/// The acceptor of this node's quorum listener: TLS with the controller
/// listener's settings when it is SSL or SASL_SSL, a PLAIN login as one
/// of `users` with SASL, plain TCP otherwise.
pub fn quorum_acceptor(
    security: &PeerClientSecurity,
    users: Option<&PlainUsers>,
) -> Result<Arc<dyn QuorumAcceptor>, SecurityError> {
    Ok(match peer_acceptor(security, users)? {
        Some(acceptor) => Arc::new(QuorumPeerAcceptor(acceptor)),
        None => Arc::new(strom_controller::quorum::stream::Plaintext),
    })
}

/// The SCRAM credentials of the metadata image, for SASL logins.
#[derive(Debug, Clone, Copy)]
pub struct ImageCredentials<'a>(pub &'a MetadataImage);

impl CredentialStore for ImageCredentials<'_> {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0
            .security()
            .scram_credential(user, i32::from(mechanism.code()))
            .map(|record| ScramCredential {
                salt: record.salt.clone(),
                stored_key: record.stored_key.clone(),
                server_key: record.server_key.clone(),
                iterations: record.iterations,
            })
    }
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
