//! TLS for SSL and SASL_SSL listeners: a rustls server configuration from
//! PEM material (an encrypted PKCS#8 key decrypted with `ssl.key.password`),
//! `ssl.client.auth`, `ssl.enabled.protocols` and `ssl.cipher.suites`.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};

use crate::config::{ClientAuth, TlsSettings};
use crate::error::TlsSetupError;
use crate::reload::ReloadingCertificate;
use crate::truststore::ReloadingTruststore;

pub(crate) fn protocol_versions(
    settings: &TlsSettings,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsSetupError> {
    settings
        .enabled_protocols
        .iter()
        .map(|protocol| match protocol.as_str() {
            "TLSv1.2" => Ok(&rustls::version::TLS12),
            "TLSv1.3" => Ok(&rustls::version::TLS13),
            _ => Err(TlsSetupError::Protocol {
                protocol: protocol.clone(),
            }),
        })
        .collect()
}

/// A suite's names: rustls's (`TLS13_AES_128_GCM_SHA256`) and IANA's
/// (`TLS_AES_128_GCM_SHA256`), which Kafka uses.
fn suite_names(suite: &SupportedCipherSuite) -> (String, String) {
    let rustls_name = suite
        .suite()
        .as_str()
        .map_or_else(|| format!("{:?}", suite.suite()), str::to_owned);
    let iana = rustls_name.replacen("TLS13_", "TLS_", 1);
    (rustls_name, iana)
}

/// The ring provider, limited to `ssl.cipher.suites` when it is set.
pub fn provider(cipher_suites: &[String]) -> Result<CryptoProvider, TlsSetupError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if cipher_suites.is_empty() {
        return Ok(provider);
    }
    let offered = provider.cipher_suites.clone();
    let mut chosen = Vec::new();
    for wanted in cipher_suites {
        let suite = offered
            .iter()
            .find(|suite| {
                let (rustls_name, iana) = suite_names(suite);
                *wanted == rustls_name || *wanted == iana
            })
            .ok_or_else(|| TlsSetupError::CipherSuite {
                suite: wanted.clone(),
                offered: offered
                    .iter()
                    .map(|suite| suite_names(suite).1)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        chosen.push(*suite);
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// The rustls configuration of a listener.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsSetupError> {
    server_tls(settings).map(|tls| tls.config)
}

/// A listener's rustls configuration with the parts a dynamic config
/// replaces.
#[derive(Debug)]
pub struct ServerTls {
    /// The configuration.
    pub config: Arc<ServerConfig>,
    /// Its certificate (the keystore).
    pub certificate: Arc<ReloadingCertificate>,
    /// Its client-certificate verifier, when it asks for client
    /// certificates (the truststore).
    pub truststore: Option<Arc<ReloadingTruststore>>,
}

/// The rustls configuration of a listener, its certificate and its
/// truststore.
pub fn server_tls(settings: &TlsSettings) -> Result<ServerTls, TlsSetupError> {
    let provider = Arc::new(provider(&settings.cipher_suites)?);
    let versions = protocol_versions(settings)?;
    let certificate = Arc::new(ReloadingCertificate::new(settings, Arc::clone(&provider))?);
    let truststore = match (&settings.truststore, settings.client_auth) {
        (_, ClientAuth::None) | (None, _) => None,
        (Some(truststore), client_auth) => Some(Arc::new(ReloadingTruststore::new(
            truststore,
            client_auth,
            Arc::clone(&provider),
        )?)),
    };
    let verifier: Arc<dyn ClientCertVerifier> = match &truststore {
        None => WebPkiClientVerifier::no_client_auth(),
        Some(truststore) => Arc::clone(truststore) as Arc<dyn ClientCertVerifier>,
    };
    let config =
        ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(TlsSetupError::Rustls)?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(
                Arc::clone(&certificate) as Arc<dyn rustls::server::ResolvesServerCert>
            );
    Ok(ServerTls {
        config: Arc::new(config),
        certificate,
        truststore,
    })
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
