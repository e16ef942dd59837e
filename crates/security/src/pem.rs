//! PEM material of a listener's keystore and truststore, from a file or
//! inline in a property: certificates, and a private key that may be an
//! encrypted PKCS#8 key (`ssl.key.password`).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::config::PemSource;
use crate::error::TlsSetupError;

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

pub(crate) const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// The private key of a PEM source: an unencrypted PKCS#8, PKCS#1 or SEC1
/// key, or an encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`) decrypted with
/// `password` (`ssl.key.password`).
pub fn private_key(
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
