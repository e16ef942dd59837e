//! TLS and SASL for client connections, under librdkafka's and Java's
//! property names: `security.protocol`, `ssl.ca.location`,
//! `ssl.certificate.location`, `ssl.key.location`,
//! `ssl.endpoint.identification.algorithm`, `sasl.mechanism` (or
//! librdkafka's `sasl.mechanisms`), `sasl.username`, `sasl.password`.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig as TlsConfig, RootCertStore};
use strom_config::{invalid, ValueProblem};
use strom_protocol::frame::DEFAULT_MAX_FRAME_BYTES;
use strom_protocol::sasl::scram::ScramMechanism;
use strom_protocol::sasl::PLAIN;
use strom_security::error::{ExchangeError, SaslLoginError};
use strom_security::sasl_client::{login, SaslLogin};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::{ClientError, ConfigError};

/// The client id of the requests of a SASL login.
const CLIENT_ID: &str = "strom";

/// `security.protocol`: Kafka's security protocols, the type listeners
/// use too.
pub use strom_security::SecurityProtocol;

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
                let expected = "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL";
                self.protocol = SecurityProtocol::from_name(value)
                    .ok_or_else(|| invalid(key, value, ValueProblem::expected(expected)))?
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
        self.protocol.uses_tls()
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(&self) -> bool {
        self.protocol.uses_sasl()
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
    strom_security::tls_client::server_name(address).ok_or(ClientError::Tls {
        reason: "the broker address is not a valid server name",
    })
}

/// Authenticates a fresh connection: SaslHandshake v1, then the
/// mechanism's messages in SaslAuthenticate requests (see
/// [`strom_security::sasl_client::login`], the exchange a broker's
/// connections to its peers run too).
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    address: &str,
    security: &ClientSecurity,
) -> Result<(), ClientError> {
    let credentials = SaslLogin {
        mechanism: security.sasl_mechanism.clone(),
        username: security.sasl_username.clone(),
        password: security.sasl_password.clone(),
    };
    login(stream, &credentials, CLIENT_ID, DEFAULT_MAX_FRAME_BYTES)
        .await
        .map_err(|error| match error {
            SaslLoginError::Exchange(ExchangeError::Io(_)) => ClientError::Disconnected {
                address: address.to_owned(),
            },
            SaslLoginError::Exchange(ExchangeError::Frame(source)) => ClientError::Frame {
                address: address.to_owned(),
                source,
            },
            SaslLoginError::Exchange(ExchangeError::Message(source)) => ClientError::Protocol {
                address: address.to_owned(),
                source,
            },
            SaslLoginError::Random => ClientError::Tls {
                reason: "the system random generator failed",
            },
            SaslLoginError::Refused(cause) => ClientError::Authentication {
                address: address.to_owned(),
                mechanism: security.sasl_mechanism.clone(),
                cause: Box::new(cause),
            },
        })
}
