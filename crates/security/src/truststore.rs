//! A listener's client-certificate verifier whose truststore can be
//! replaced while the listener runs (a dynamic
//! `listener.name.<l>.ssl.truststore.*` config, KIP-226). New handshakes
//! verify against the new trusted certificates; connections already open
//! keep the identity they were verified with.
//!
//! The verifier sends no certificate authority names in its certificate
//! request (TLS allows an empty list: the client then sends the certificate
//! it has), since the list would have to change with the truststore.

use std::sync::{Arc, Mutex, MutexGuard};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::config::{ClientAuth, PemSource};
use crate::error::TlsSetupError;
use crate::pem::certificates;

/// A client-certificate verifier over a replaceable truststore.
#[derive(Debug)]
pub struct ReloadingTruststore {
    provider: Arc<CryptoProvider>,
    client_auth: ClientAuth,
    state: Mutex<Verifier>,
}

#[derive(Debug)]
struct Verifier {
    source: PemSource,
    inner: Arc<dyn ClientCertVerifier>,
}

impl ReloadingTruststore {
    /// A verifier trusting the certificates of `truststore`, asking for
    /// client certificates as `client_auth` says (`Requested` lets a client
    /// without one in as ANONYMOUS).
    pub fn new(
        truststore: &PemSource,
        client_auth: ClientAuth,
        provider: Arc<CryptoProvider>,
    ) -> Result<ReloadingTruststore, TlsSetupError> {
        let inner = build(truststore, client_auth, &provider)?;
        Ok(ReloadingTruststore {
            provider,
            client_auth,
            state: Mutex::new(Verifier {
                source: truststore.clone(),
                inner,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Verifier> {
        // One assignment of a whole `Verifier` per change: never half-set.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The truststore in use.
    pub fn source(&self) -> PemSource {
        self.lock().source.clone()
    }

    /// Trusts the certificates of `truststore` from the next handshake on;
    /// when they cannot be read, the error, and the truststore in use stays.
    pub fn replace(&self, truststore: PemSource) -> Result<(), TlsSetupError> {
        let inner = build(&truststore, self.client_auth, &self.provider)?;
        *self.lock() = Verifier {
            source: truststore,
            inner,
        };
        Ok(())
    }

    fn inner(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.lock().inner)
    }
}

fn build(
    truststore: &PemSource,
    client_auth: ClientAuth,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(truststore)? {
        roots.add(certificate).map_err(TlsSetupError::Rustls)?;
    }
    let builder =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
    let builder = match client_auth {
        ClientAuth::Requested => builder.allow_unauthenticated(),
        _ => builder,
    };
    builder.build().map_err(TlsSetupError::Truststore)
}

impl ClientCertVerifier for ReloadingTruststore {
    fn offer_client_auth(&self) -> bool {
        self.client_auth != ClientAuth::None
    }

    fn client_auth_mandatory(&self) -> bool {
        self.client_auth == ClientAuth::Required
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner().supported_verify_schemes()
    }
}
