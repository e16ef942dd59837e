//! What serving a listener needs once the settings are parsed: the TLS
//! acceptor built from the listener's material, its SASL settings and
//! `ssl.principal.mapping.rules`.

use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

use crate::config::{SaslSettings, SecurityConfig, SecurityProtocol, TlsSettings};
use crate::error::SecurityError;
use crate::principal::MappingRules;
use crate::reload::ReloadingCertificate;
use crate::tls;
use crate::tls::ServerTls;
use crate::truststore::ReloadingTruststore;

/// What the network layer needs to serve one listener.
pub struct ListenerRuntime {
    /// The listener name.
    pub name: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// The TLS acceptor, for SSL and SASL_SSL.
    pub acceptor: Option<TlsAcceptor>,
    /// The acceptor's certificate, which a dynamic keystore config
    /// replaces (for SSL and SASL_SSL).
    pub certificate: Option<Arc<ReloadingCertificate>>,
    /// The acceptor's client-certificate verifier, which a dynamic
    /// truststore config replaces (when the listener asks for client
    /// certificates).
    pub truststore: Option<Arc<ReloadingTruststore>>,
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
            certificate: None,
            truststore: None,
            sasl: None,
            principal_mapping: MappingRules::parse("DEFAULT")
                .unwrap_or_else(|_| unreachable!("DEFAULT is a valid rule")),
        }
    }
}

/// The TLS acceptor of `listener` with `settings`, its certificate and its
/// truststore.
pub(crate) fn tls_acceptor(
    listener: &str,
    settings: &TlsSettings,
) -> Result<(TlsAcceptor, ServerTls), SecurityError> {
    tls::server_tls(settings)
        .map(|tls| (TlsAcceptor::from(Arc::clone(&tls.config)), tls))
        .map_err(|source| SecurityError::Tls {
            listener: listener.to_owned(),
            source,
        })
}

/// The runtime of every listener named in `listeners`, in that order.
pub fn listener_runtimes<'a>(
    security: &SecurityConfig,
    listeners: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Arc<ListenerRuntime>>, SecurityError> {
    listeners
        .into_iter()
        .map(|name| {
            let listener =
                security
                    .listener(name)
                    .ok_or_else(|| SecurityError::UnknownListener {
                        listener: name.to_owned(),
                    })?;
            let (acceptor, certificate, truststore) = match &listener.tls {
                Some(settings) => {
                    let (acceptor, tls) = tls_acceptor(name, settings)?;
                    (Some(acceptor), Some(tls.certificate), tls.truststore)
                }
                None => (None, None, None),
            };
            Ok(Arc::new(ListenerRuntime {
                name: name.to_owned(),
                protocol: listener.protocol,
                acceptor,
                certificate,
                truststore,
                sasl: listener.sasl.clone(),
                principal_mapping: security.principal_mapping.clone(),
            }))
        })
        .collect()
}
