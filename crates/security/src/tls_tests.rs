//! Encrypted private keys: keys encrypted by the `openssl` command (PBES2
//! with PBKDF2 and AES-256-CBC, and with scrypt) decrypt with the right
//! `ssl.key.password` to the key openssl decrypts; a wrong or missing
//! password is a start-up error naming the key and the setting.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::*;
use crate::config::{ClientAuth, PemSource, TlsSettings};
use crate::pem::{certificates, private_key, ENCRYPTED_BEGIN};

const PASSWORD: &str = "key-secret";

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(status.status.success(), "openssl {args:?}: {status:?}");
}

/// `enc.pem` (PBKDF2, AES-256-CBC), `scrypt.pem` (scrypt, AES-256-CBC),
/// `plain.pem` (the same key unencrypted, as openssl decrypts it) and
/// `cert.pem` (a self-signed certificate for it).
fn keys(dir: &Path) {
    let pass = format!("pass:{PASSWORD}");
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-aes256",
            "-pass",
            &pass,
            "-out",
            "enc.pem",
        ],
    );
    openssl(
        dir,
        &[
            "pkcs8",
            "-topk8",
            "-nocrypt",
            "-in",
            "enc.pem",
            "-passin",
            &pass,
            "-out",
            "plain.pem",
        ],
    );
    openssl(
        dir,
        &[
            "pkcs8",
            "-topk8",
            "-scrypt",
            "-in",
            "plain.pem",
            "-passout",
            &pass,
            "-out",
            "scrypt.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-key",
            "plain.pem",
            "-out",
            "cert.pem",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ],
    );
}

fn file(dir: &Path, name: &str) -> PemSource {
    PemSource::File(dir.join(name))
}

fn settings(keystore: PemSource, password: Option<&str>) -> TlsSettings {
    TlsSettings {
        certificate_chain: keystore.clone(),
        private_key: keystore,
        key_password: password.map(str::to_owned),
        truststore: None,
        client_auth: ClientAuth::None,
        enabled_protocols: vec!["TLSv1.2".to_owned(), "TLSv1.3".to_owned()],
        cipher_suites: Vec::new(),
    }
}

#[test]
fn encrypted_pkcs8_keys_decrypt_with_the_password_to_the_key_openssl_decrypts() {
    let dir = tempfile::tempdir().expect("tempdir");
    keys(dir.path());
    let plain = private_key(&file(dir.path(), "plain.pem"), None).expect("plain key");
    for encrypted in ["enc.pem", "scrypt.pem"] {
        let text = std::fs::read_to_string(dir.path().join(encrypted)).expect("read");
        assert!(text.contains(ENCRYPTED_BEGIN), "{encrypted} is encrypted");
        let key = private_key(&file(dir.path(), encrypted), Some(PASSWORD)).expect(encrypted);
        assert_eq!(key.secret_der(), plain.secret_der(), "{encrypted}");
    }
    // Inline (`ssl.keystore.key`), after the certificates of a keystore.
    let cert = std::fs::read_to_string(dir.path().join("cert.pem")).expect("read");
    let enc = std::fs::read_to_string(dir.path().join("enc.pem")).expect("read");
    let inline = PemSource::Inline {
        key: "ssl.keystore.key".to_owned(),
        text: format!("{cert}{enc}"),
    };
    let key = private_key(&inline, Some(PASSWORD)).expect("inline key");
    assert_eq!(key.secret_der(), plain.secret_der());
}

#[test]
fn a_keystore_with_an_encrypted_key_serves_tls_with_the_password_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    keys(dir.path());
    let cert = std::fs::read_to_string(dir.path().join("cert.pem")).expect("read");
    let enc = std::fs::read_to_string(dir.path().join("enc.pem")).expect("read");
    std::fs::write(dir.path().join("keystore.pem"), format!("{cert}{enc}")).expect("write");
    let keystore = file(dir.path(), "keystore.pem");
    assert!(server_config(&settings(keystore.clone(), Some(PASSWORD))).is_ok());

    let wrong = server_config(&settings(keystore.clone(), Some("not-the-password")))
        .expect_err("a wrong password is refused");
    assert!(
        matches!(wrong, TlsSetupError::KeyDecryption { .. }),
        "{wrong:?}"
    );
    let message = wrong.to_string();
    assert!(message.contains("ssl.key.password"), "{message}");
    assert!(message.contains("keystore.pem"), "{message}");

    let missing = server_config(&settings(keystore, None)).expect_err("no password");
    assert!(
        matches!(missing, TlsSetupError::EncryptedKey { .. }),
        "{missing:?}"
    );
    assert!(missing.to_string().contains("ssl.key.password"));
}

#[test]
fn a_changed_keystore_file_is_reloaded_and_a_broken_one_ignored() {
    use crate::reload::{ReloadingCertificate, CHECK_INTERVAL};

    let (first, second) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    keys(first.path());
    keys(second.path());
    let keystore_of = |dir: &Path| {
        let cert = std::fs::read_to_string(dir.join("cert.pem")).expect("read");
        let enc = std::fs::read_to_string(dir.join("enc.pem")).expect("read");
        format!("{cert}{enc}")
    };
    let cert_of = |dir: &Path| certificates(&file(dir, "cert.pem")).expect("cert")[0].clone();
    let keystore = first.path().join("keystore.pem");
    std::fs::write(&keystore, keystore_of(first.path())).expect("write");
    let provider = Arc::new(provider(&[]).expect("provider"));
    let settings = settings(PemSource::File(keystore.clone()), Some(PASSWORD));
    let reloading = ReloadingCertificate::new(&settings, provider).expect("loads");
    assert_eq!(reloading.current().cert[0], cert_of(first.path()));

    std::fs::write(&keystore, keystore_of(second.path())).expect("write");
    std::thread::sleep(CHECK_INTERVAL + Duration::from_millis(100));
    assert_eq!(reloading.current().cert[0], cert_of(second.path()));

    std::fs::write(&keystore, "not PEM\n").expect("write");
    std::thread::sleep(CHECK_INTERVAL + Duration::from_millis(100));
    assert_eq!(reloading.current().cert[0], cert_of(second.path()));
}

#[test]
fn a_replaced_keystore_serves_new_connections_and_a_broken_one_is_refused() {
    use crate::reload::{KeystoreSources, ReloadingCertificate};

    let (first, second) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    keys(first.path());
    keys(second.path());
    let keystore_of = |dir: &Path| {
        let cert = std::fs::read_to_string(dir.join("cert.pem")).expect("read");
        let enc = std::fs::read_to_string(dir.join("enc.pem")).expect("read");
        let keystore = dir.join("keystore.pem");
        std::fs::write(&keystore, format!("{cert}{enc}")).expect("write");
        PemSource::File(keystore)
    };
    let cert_of = |dir: &Path| certificates(&file(dir, "cert.pem")).expect("cert")[0].clone();
    let provider = Arc::new(provider(&[]).expect("provider"));
    let settings = settings(keystore_of(first.path()), Some(PASSWORD));
    let reloading = ReloadingCertificate::new(&settings, provider).expect("loads");
    let before = reloading.current();

    let replacement = KeystoreSources {
        chain: keystore_of(second.path()),
        key: keystore_of(second.path()),
        password: Some(PASSWORD.to_owned()),
    };
    reloading.replace(replacement.clone()).expect("replaced");
    assert_eq!(reloading.current().cert[0], cert_of(second.path()));
    assert_eq!(reloading.sources(), replacement);
    // A connection made before keeps the pair it was given.
    assert_eq!(before.cert[0], cert_of(first.path()));

    let wrong_password = KeystoreSources {
        password: Some("wrong".to_owned()),
        ..KeystoreSources::of(&settings)
    };
    assert!(reloading.replace(wrong_password).is_err());
    let missing = KeystoreSources {
        chain: PemSource::File(first.path().join("absent.pem")),
        key: PemSource::File(first.path().join("absent.pem")),
        password: None,
    };
    assert!(reloading.replace(missing).is_err());
    assert_eq!(reloading.current().cert[0], cert_of(second.path()));
    assert_eq!(reloading.sources(), replacement);
}

#[test]
fn a_replaced_truststore_is_used_and_an_unreadable_one_refused() {
    use crate::truststore::ReloadingTruststore;
    use rustls::server::danger::ClientCertVerifier;

    let (first, second) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    keys(first.path());
    keys(second.path());
    let provider = Arc::new(provider(&[]).expect("provider"));
    let truststore = ReloadingTruststore::new(
        &file(first.path(), "cert.pem"),
        ClientAuth::Required,
        provider,
    )
    .expect("loads");
    assert!(truststore.offer_client_auth() && truststore.client_auth_mandatory());
    assert!(truststore.root_hint_subjects().is_empty());
    truststore
        .replace(file(second.path(), "cert.pem"))
        .expect("replaced");
    assert_eq!(truststore.source(), file(second.path(), "cert.pem"));
    assert!(truststore
        .replace(file(second.path(), "absent.pem"))
        .is_err());
    assert!(
        truststore
            .replace(file(second.path(), "plain.pem"))
            .is_err(),
        "a key is no certificate"
    );
    assert_eq!(truststore.source(), file(second.path(), "cert.pem"));
}
