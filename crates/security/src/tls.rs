//! TLS for SSL and SASL_SSL listeners: a rustls server configuration from
//! PEM material (an encrypted PKCS#8 key decrypted with `ssl.key.password`),
//! `ssl.client.auth`, `ssl.enabled.protocols` and `ssl.cipher.suites`.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};

use crate::config::{ClientAuth, TlsSettings};
use crate::error::TlsSetupError;
use crate::pem::certificates;
use crate::reload::ReloadingCertificate;

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
    server_config_with_certificate(settings).map(|(config, _)| config)
}

/// The rustls configuration of a listener and its certificate, which a
/// dynamic keystore config replaces.
pub fn server_config_with_certificate(
    settings: &TlsSettings,
) -> Result<(Arc<ServerConfig>, Arc<ReloadingCertificate>), TlsSetupError> {
    let provider = Arc::new(provider(&settings.cipher_suites)?);
    let versions = protocol_versions(settings)?;
    let certified = Arc::new(ReloadingCertificate::new(settings, Arc::clone(&provider))?);
    let verifier = match (&settings.truststore, settings.client_auth) {
        (_, ClientAuth::None) | (None, _) => WebPkiClientVerifier::no_client_auth(),
        (Some(truststore), client_auth) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(truststore)? {
                roots.add(certificate).map_err(TlsSetupError::Rustls)?;
            }
            let builder =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let builder = match client_auth {
                ClientAuth::Requested => builder.allow_unauthenticated(),
                _ => builder,
            };
            builder.build().map_err(TlsSetupError::Truststore)?
        }
    };
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(TlsSetupError::Rustls)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::clone(&certified) as Arc<dyn rustls::server::ResolvesServerCert>);
    Ok((Arc::new(config), certified))
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
