//! Certificate reload without restart: the listener's certificate chain
//! and private key are re-read when their files change, and new TLS
//! connections get the new certificate; connections already open keep the
//! one they were made with.
//!
//! Each handshake looks at the files' modification times at most once per
//! [`CHECK_INTERVAL`]; when one changed, the files are read again and the
//! pair is used if the key decrypts (`ssl.key.password`) and matches the
//! certificate. A pair that does not (for example a file half written) is
//! logged and the previous pair stays in use until the files change again.
//! Inline PEM (`ssl.keystore.certificate.chain`, `ssl.keystore.key`) never
//! changes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::{PemSource, TlsSettings};
use crate::error::TlsSetupError;
use crate::pem::{certificates, private_key};

/// How often a handshake may look at the files' modification times.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The certificate chain and key of a listener, re-read when their files
/// change.
#[derive(Debug)]
pub struct ReloadingCertificate {
    chain: PemSource,
    key: PemSource,
    password: Option<String>,
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    stamps: Vec<Option<SystemTime>>,
    checked: Instant,
}

impl ReloadingCertificate {
    /// Reads the chain and key of `settings` (errors as at start-up).
    pub fn new(
        settings: &TlsSettings,
        provider: Arc<CryptoProvider>,
    ) -> Result<ReloadingCertificate, TlsSetupError> {
        let chain = settings.certificate_chain.clone();
        let key = settings.private_key.clone();
        let password = settings.key_password.clone();
        let stamps = stamps(&chain, &key);
        let loaded = load(&chain, &key, password.as_deref(), &provider)?;
        Ok(ReloadingCertificate {
            chain,
            key,
            password,
            provider,
            state: Mutex::new(Loaded {
                key: loaded,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// The pair new connections get, re-read first if a file changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A rate limit on file checks, on the host's clock.
        if state.checked.elapsed() >= CHECK_INTERVAL {
            state.checked = Instant::now();
            let stamps = stamps(&self.chain, &self.key);
            if stamps != state.stamps {
                match load(
                    &self.chain,
                    &self.key,
                    self.password.as_deref(),
                    &self.provider,
                ) {
                    Ok(key) => {
                        let files: Vec<_> = files(&self.chain, &self.key).collect();
                        tracing::info!(?files, "TLS certificate reloaded");
                        state.key = key;
                        state.stamps = stamps;
                    }
                    Err(error) => tracing::warn!(
                        error = %error,
                        "TLS certificate files changed but cannot be used; the previous certificate stays"
                    ),
                }
            }
        }
        Arc::clone(&state.key)
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn files<'a>(chain: &'a PemSource, key: &'a PemSource) -> impl Iterator<Item = &'a PathBuf> {
    [chain, key].into_iter().filter_map(|source| match source {
        PemSource::File(path) => Some(path),
        PemSource::Inline { .. } => None,
    })
}

fn stamps(chain: &PemSource, key: &PemSource) -> Vec<Option<SystemTime>> {
    files(chain, key)
        .map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .collect()
}

fn load(
    chain: &PemSource,
    key: &PemSource,
    password: Option<&str>,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsSetupError> {
    let chain = certificates(chain)?;
    let key = private_key(key, password)?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(TlsSetupError::Rustls)
}
