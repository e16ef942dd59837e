//! TLS for the connections this node opens to its peers (replica fetchers
//! to leaders, the quorum to controllers): a rustls client configuration
//! from a listener's [`TlsSettings`]. The truststore verifies the peer,
//! the keystore is presented as the client certificate, and the host name
//! is checked only when `ssl.endpoint.identification.algorithm=https`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};

use crate::config::TlsSettings;
use crate::error::{TlsClientError, TlsSetupError};
use crate::pem::{certificates, private_key};
use crate::tls::{protocol_versions, provider};

/// Verifies the peer's chain against the truststore but not its name:
/// `ssl.endpoint.identification.algorithm` set to empty, as Kafka allows.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name last, after the chain, the validity
        // period and the key usage: a name error means all else held.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls client configuration for connecting to a peer's listener
/// with `settings`.
pub fn client_config(
    settings: &TlsSettings,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, TlsClientError> {
    let provider = Arc::new(provider(&settings.cipher_suites)?);
    let versions = protocol_versions(settings)?;
    let truststore = settings
        .truststore
        .as_ref()
        .ok_or(TlsClientError::NoTruststore)?;
    let mut roots = RootCertStore::empty();
    for certificate in certificates(truststore)? {
        roots
            .add(certificate)
            .map_err(|error| TlsClientError::Setup(TlsSetupError::Rustls(error)))?;
    }
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()
            .map_err(TlsClientError::Truststore)?;
    let verifier: Arc<dyn ServerCertVerifier> = match verify_hostname {
        true => verifier,
        false => Arc::new(ChainOnly(verifier)),
    };
    let chain = certificates(&settings.certificate_chain)?;
    let key = private_key(&settings.private_key, settings.key_password.as_deref())?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(TlsSetupError::Rustls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(TlsSetupError::Rustls)?;
    Ok(Arc::new(config))
}

/// The TLS server name to verify for `address` (`host:port`, the host a
/// DNS name or an IP address, an IPv6 address in brackets).
pub fn server_name(address: &str) -> Option<ServerName<'static>> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_owned()).ok()
}
