//! TLS and SASL for client connections, under librdkafka's and Java's
//! property names: `security.protocol`, `ssl.ca.location`,
//! `ssl.certificate.location`, `ssl.key.location`,
//! `ssl.endpoint.identification.algorithm`, `sasl.mechanism` (or
//! librdkafka's `sasl.mechanisms`), `sasl.username`, `sasl.password`.

use std::path::PathBuf;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::BytesMut;
use ring::rand::{SecureRandom, SystemRandom};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig as TlsConfig, RootCertStore};
use strom_protocol::messages::{
    decode_response, encode_request_frame, request_header, Request, Response,
};
use strom_protocol::sasl::client::SaslClientExchange;
use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::sasl::PLAIN;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use strom_config::{invalid, ValueProblem};

use crate::error::{ClientError, ConfigError};

/// `security.protocol`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No TLS, no SASL (the default).
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

/// The security settings of a client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSecurity {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// `ssl.ca.location`: PEM certificates of the trusted authorities.
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: a PEM client certificate (mTLS).
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: the PEM key of the client certificate.
    pub key_location: Option<PathBuf>,
    /// `sasl.mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub sasl_mechanism: String,
    /// `sasl.username`.
    pub sasl_username: String,
    /// `sasl.password`.
    pub sasl_password: String,
}

impl ClientSecurity {
    /// Sets one security property; `Ok(false)` for another key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "security.protocol" => {
                self.protocol = match value.to_ascii_uppercase().as_str() {
                    "PLAINTEXT" => SecurityProtocol::Plaintext,
                    "SSL" => SecurityProtocol::Ssl,
                    "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
                    "SASL_SSL" => SecurityProtocol::SaslSsl,
                    _ => {
                        let expected = "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL";
                        return Err(invalid(key, value, ValueProblem::expected(expected)).into());
                    }
                }
            }
            "ssl.ca.location" => self.ca_location = Some(value.into()),
            "ssl.certificate.location" => self.certificate_location = Some(value.into()),
            "ssl.key.location" => self.key_location = Some(value.into()),
            "sasl.mechanism" | "sasl.mechanisms" => {
                if value != PLAIN && ScramMechanism::from_name(value).is_none() {
                    let expected = "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512";
                    return Err(invalid(key, value, ValueProblem::expected(expected)).into());
                }
                self.sasl_mechanism = value.to_owned();
            }
            "sasl.username" => self.sasl_username = value.to_owned(),
            "sasl.password" => self.sasl_password = value.to_owned(),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
        matches!(
            self.protocol,
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
        )
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(&self) -> bool {
        matches!(
            self.protocol,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// The rustls configuration for TLS connections.
    pub fn tls_config(&self) -> Result<Arc<TlsConfig>, ClientError> {
        let mut roots = RootCertStore::empty();
        if let Some(path) = &self.ca_location {
            for certificate in read_certificates(path)? {
                roots.add(certificate).map_err(|_| tls_file(path))?;
            }
        }
        let builder =
            TlsConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|_| ClientError::Tls {
                    reason: "no TLS protocol version available",
                })?
                .with_root_certificates(roots);
        let config = match (&self.certificate_location, &self.key_location) {
            (Some(certificate), Some(key)) => {
                let chain = read_certificates(certificate)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|_| tls_file(key))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|_| ClientError::Tls {
                        reason: "the client certificate and key do not match",
                    })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

fn tls_file(path: &std::path::Path) -> ClientError {
    ClientError::TlsFile {
        path: path.to_owned(),
    }
}

fn read_certificates(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certificates: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|_| tls_file(path))?
        .filter_map(Result::ok)
        .collect();
    if certificates.is_empty() {
        return Err(tls_file(path));
    }
    Ok(certificates)
}

/// The server name to verify for `address` (`host:port`).
pub fn server_name(address: &str) -> Result<ServerName<'static>, ClientError> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|_| ClientError::Tls {
        reason: "the broker address is not a valid server name",
    })
}

/// A fresh SCRAM client nonce.
fn client_nonce() -> Result<String, ClientError> {
    let mut bytes = [0u8; 24];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| ClientError::Tls {
            reason: "the system random generator failed",
        })?;
    Ok(BASE64.encode(bytes))
}

/// One request/response exchange on a stream being set up.
async fn call<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    address: &str,
    request: Request,
    api_version: i16,
    correlation_id: i32,
) -> Result<Response, ClientError> {
    let api_key = request.api_key() as i16;
    let header = request_header(&request, api_version, correlation_id, Some("strom"));
    let mut wire = BytesMut::new();
    encode_request_frame(&header, &request, &mut wire).map_err(|source| ClientError::Protocol {
        address: address.to_owned(),
        source,
    })?;
    stream
        .write_all(&wire)
        .await
        .map_err(|_| crate::connection::disconnected(address))?;
    let frame = crate::connection::read_one_frame(stream, address).await?;
    decode_response(frame, api_key, api_version)
        .map(|(_, response)| response)
        .map_err(|source| ClientError::Protocol {
            address: address.to_owned(),
            source,
        })
}

/// Authenticates a fresh connection: SaslHandshake v1, then the
/// mechanism's messages in SaslAuthenticate requests (see
/// [`SaslClientExchange`]).
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    address: &str,
    security: &ClientSecurity,
) -> Result<(), ClientError> {
    let failed = |cause| ClientError::Authentication {
        address: address.to_owned(),
        mechanism: security.sasl_mechanism.clone(),
        cause: Box::new(cause),
    };
    let (mut exchange, mut next) = SaslClientExchange::start(
        &security.sasl_mechanism,
        &security.sasl_username,
        &security.sasl_password,
        &client_nonce()?,
    )
    .map_err(failed)?;
    // The exchange takes at most three round trips.
    let mut correlation_id = 1;
    loop {
        let response = call(
            stream,
            address,
            next.request,
            next.api_version,
            correlation_id,
        )
        .await?;
        match exchange.on_response(&response).map_err(failed)? {
            Some(request) => next = request,
            None => return Ok(()),
        }
        correlation_id += 1;
    }
}
