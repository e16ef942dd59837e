//! TLS for SSL and SASL_SSL listeners: a rustls server configuration from
//! PEM material (an encrypted PKCS#8 key decrypted with `ssl.key.password`),
//! `ssl.client.auth`, `ssl.enabled.protocols` and `ssl.cipher.suites`.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::config::{ClientAuth, PemSource, TlsSettings};
use super::reload::ReloadingCertificate;

/// Why a listener's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A PEM file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No certificate in the keystore or truststore.
    #[error("no PEM certificate in {origin}")]
    NoCertificate {
        /// The file or property.
        origin: String,
    },
    /// No usable private key in the keystore.
    #[error("no unencrypted PEM private key in {origin}")]
    NoPrivateKey {
        /// The file or property.
        origin: String,
    },
    /// An encrypted private key without `ssl.key.password`.
    #[error("the private key in {origin} is encrypted and ssl.key.password is not set")]
    EncryptedKey {
        /// The file or property.
        origin: String,
    },
    /// `ssl.key.password` does not decrypt the encrypted private key: a
    /// wrong password, or an encryption scheme that is not supported.
    #[error(
        "ssl.key.password does not decrypt the private key in {origin} (a wrong password, or an \
         encryption other than PKCS#8 PBES2 with PBKDF2 or scrypt and AES-CBC)"
    )]
    KeyDecryption {
        /// The file or property.
        origin: String,
        /// What the decryption reported.
        #[source]
        source: pkcs8::Error,
    },
    /// A protocol rustls does not offer.
    #[error("ssl.enabled.protocols: `{protocol}` is not supported (TLSv1.2 and TLSv1.3 are)")]
    Protocol {
        /// The protocol named.
        protocol: String,
    },
    /// A cipher suite rustls does not offer for the enabled protocols.
    #[error("ssl.cipher.suites: `{suite}` is not offered (rustls offers {offered})")]
    CipherSuite {
        /// The suite named.
        suite: String,
        /// The suites that are offered.
        offered: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration refused")]
    Rustls(#[source] rustls::Error),
    /// The client certificate verifier could not be built.
    #[error("ssl.truststore: no usable trust anchor")]
    Truststore(#[source] rustls::server::VerifierBuilderError),
}

fn origin(source: &PemSource) -> String {
    match source {
        PemSource::File(path) => path.display().to_string(),
        PemSource::Inline { key, .. } => key.clone(),
    }
}

fn pem_bytes(source: &PemSource) -> Result<Vec<u8>, TlsSetupError> {
    match source {
        PemSource::File(path) => std::fs::read(path).map_err(|source| TlsSetupError::Read {
            path: path.clone(),
            source,
        }),
        PemSource::Inline { text, .. } => Ok(text.as_bytes().to_vec()),
    }
}

/// The certificates of a PEM source.
pub fn certificates(source: &PemSource) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let bytes = pem_bytes(source)?;
    let certificates: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .filter_map(Result::ok)
        .collect();
    if certificates.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            origin: origin(source),
        });
    }
    Ok(certificates)
}

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The private key of a PEM source: an unencrypted PKCS#8, PKCS#1 or SEC1
/// key, or an encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`) decrypted with
/// `password` (`ssl.key.password`).
pub(crate) fn private_key(
    source: &PemSource,
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    let bytes = pem_bytes(source)?;
    let Some(block) = encrypted_block(&bytes) else {
        return PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| TlsSetupError::NoPrivateKey {
            origin: origin(source),
        });
    };
    let Some(password) = password else {
        return Err(TlsSetupError::EncryptedKey {
            origin: origin(source),
        });
    };
    decrypt(block, password).map_err(|source_error| TlsSetupError::KeyDecryption {
        origin: origin(source),
        source: source_error,
    })
}

/// The first `ENCRYPTED PRIVATE KEY` PEM block of `bytes`, if any.
fn encrypted_block(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    let start = text.find(ENCRYPTED_BEGIN)?;
    let length = text.get(start..)?.find(ENCRYPTED_END)? + ENCRYPTED_END.len();
    text.get(start..start + length)
}

/// Decrypts a PKCS#8 `EncryptedPrivateKeyInfo` (PBES2: PBKDF2 or scrypt,
/// AES-128/192/256-CBC, as `openssl pkcs8 -topk8` and `openssl genpkey
/// -aes256` write it).
fn decrypt(block: &str, password: &str) -> Result<PrivateKeyDer<'static>, pkcs8::Error> {
    let (_label, document) = pkcs8::Document::from_pem(block)?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(document.as_bytes())?;
    let secret = info.decrypt(password)?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        secret.as_bytes().to_vec(),
    )))
}

pub(super) fn protocol_versions(
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
    let provider = Arc::new(provider(&settings.cipher_suites)?);
    let versions = protocol_versions(settings)?;
    let certified = ReloadingCertificate::new(settings, Arc::clone(&provider))?;
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
        .with_cert_resolver(Arc::new(certified));
    Ok(Arc::new(config))
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
