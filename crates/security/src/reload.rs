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
//! changes by itself.
//!
//! [`ReloadingCertificate::replace`] swaps the sources themselves (a
//! dynamic `listener.name.<l>.ssl.keystore.*` config): the new pair is read
//! and checked first, and a pair that cannot be used leaves the old one in
//! place.

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
/// change, and replaced by [`ReloadingCertificate::replace`] (a dynamic
/// keystore config, KIP-226).
#[derive(Debug)]
pub struct ReloadingCertificate {
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

/// Where the pair comes from: the keystore's chain and key, and the key's
/// password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeystoreSources {
    /// The certificate chain.
    pub chain: PemSource,
    /// The private key.
    pub key: PemSource,
    /// `ssl.key.password`.
    pub password: Option<String>,
}

impl KeystoreSources {
    /// The keystore of `settings`.
    pub fn of(settings: &TlsSettings) -> KeystoreSources {
        KeystoreSources {
            chain: settings.certificate_chain.clone(),
            key: settings.private_key.clone(),
            password: settings.key_password.clone(),
        }
    }
}

#[derive(Debug)]
struct Loaded {
    sources: KeystoreSources,
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
        let sources = KeystoreSources::of(settings);
        let loaded = Loaded::read(sources, &provider)?;
        Ok(ReloadingCertificate {
            provider,
            state: Mutex::new(loaded),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        // Each change is one assignment of a whole `Loaded`: a panic while
        // locked cannot leave it half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The sources in use.
    pub fn sources(&self) -> KeystoreSources {
        self.lock().sources.clone()
    }

    /// Reads `sources` and, when the pair is usable, serves it to new
    /// connections from now on (open connections keep theirs); otherwise
    /// the error, and the pair in use stays.
    pub fn replace(&self, sources: KeystoreSources) -> Result<(), TlsSetupError> {
        let loaded = Loaded::read(sources, &self.provider)?;
        *self.lock() = loaded;
        Ok(())
    }

    /// The pair new connections get, re-read first if a file changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.lock();
        // A rate limit on file checks, on the host's clock.
        if state.checked.elapsed() >= CHECK_INTERVAL {
            state.checked = Instant::now();
            let stamps = stamps(&state.sources);
            if stamps != state.stamps {
                match load(&state.sources, &self.provider) {
                    Ok(key) => {
                        let files: Vec<_> = files(&state.sources).collect();
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

impl Loaded {
    fn read(sources: KeystoreSources, provider: &CryptoProvider) -> Result<Loaded, TlsSetupError> {
        let stamps = stamps(&sources);
        let key = load(&sources, provider)?;
        Ok(Loaded {
            sources,
            key,
            stamps,
            checked: Instant::now(),
        })
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn files(sources: &KeystoreSources) -> impl Iterator<Item = &PathBuf> {
    [&sources.chain, &sources.key]
        .into_iter()
        .filter_map(|source| match source {
            PemSource::File(path) => Some(path),
            PemSource::Inline { .. } => None,
        })
}

fn stamps(sources: &KeystoreSources) -> Vec<Option<SystemTime>> {
    files(sources)
        .map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .collect()
}

fn load(
    sources: &KeystoreSources,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsSetupError> {
    let chain = certificates(&sources.chain)?;
    let key = private_key(&sources.key, sources.password.as_deref())?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(TlsSetupError::Rustls)
}
