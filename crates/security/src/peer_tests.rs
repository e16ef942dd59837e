//! A peer connection over TLS against a listener with
//! `ssl.client.auth=required`: the node's keystore certificate is
//! presented, the peer is verified against the truststore, and the host
//! name only with `ssl.endpoint.identification.algorithm=https`.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;

use super::*;
use crate::config::{ClientAuth, PemSource, SecurityProtocol, TlsSettings};
use crate::tls::server_config;

/// A CA's PEM and a certificate it signed for 127.0.0.1 (chain, key).
fn authority() -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let key = KeyPair::generate().expect("key");
    let node = params.signed_by(&key, &ca, &ca_key).expect("certificate");
    (ca.pem(), node.pem(), key.serialize_pem())
}

fn inline(key: &str, text: &str) -> PemSource {
    PemSource::Inline {
        key: key.to_owned(),
        text: text.to_owned(),
    }
}

fn settings(ca: &str, chain: &str, key: &str) -> TlsSettings {
    TlsSettings {
        certificate_chain: inline("ssl.keystore.certificate.chain", chain),
        private_key: inline("ssl.keystore.key", key),
        key_password: None,
        truststore: Some(inline("ssl.truststore.certificates", ca)),
        client_auth: ClientAuth::Required,
        enabled_protocols: vec!["TLSv1.2".to_owned(), "TLSv1.3".to_owned()],
        cipher_suites: Vec::new(),
    }
}

/// A listener that secures each connection with `acceptor`, then waits
/// for the client's first byte (TLS 1.3 checks the client's certificate
/// after the client's side of the handshake), and reports whether both
/// worked.
async fn listener(acceptor: PeerAcceptor) -> (u16, tokio::sync::mpsc::UnboundedReceiver<bool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let accepted = match acceptor.accept(stream).await {
                Ok(mut stream) => stream.read_exact(&mut [0; 1]).await.is_ok(),
                Err(_) => false,
            };
            let _ = sender.send(accepted);
        }
    });
    (port, receiver)
}

/// A listener requiring TLS client certificates, with `settings`.
async fn tls_listener(settings: &TlsSettings) -> (u16, tokio::sync::mpsc::UnboundedReceiver<bool>) {
    let tls = TlsAcceptor::from(server_config(settings).expect("server config"));
    listener(PeerAcceptor::new(Some(tls), None)).await
}

fn connector(settings: TlsSettings, verify_hostname: bool) -> PeerConnector {
    let mut security = PeerClientSecurity::plaintext("INTERNAL");
    security.protocol = SecurityProtocol::Ssl;
    security.tls = Some(settings);
    security.verify_hostname = verify_hostname;
    PeerConnector::new(&security, 1 << 20).expect("client config")
}

/// Connects, writes a byte and says whether both sides accepted.
async fn handshake(
    connector: &PeerConnector,
    address: &str,
    accepted: &mut tokio::sync::mpsc::UnboundedReceiver<bool>,
) -> bool {
    let Ok(mut stream) = connector.connect(address).await else {
        return false;
    };
    let written = stream.write_all(b"x").await.is_ok();
    written && accepted.recv().await == Some(true)
}

#[tokio::test]
async fn the_keystore_is_presented_and_the_host_name_checked_only_with_https() {
    let (ca, chain, key) = authority();
    let server = settings(&ca, &chain, &key);
    let (port, mut accepted) = tls_listener(&server).await;
    let by_ip = format!("127.0.0.1:{port}");
    let by_name = format!("localhost:{port}");

    let checking = connector(server.clone(), true);
    assert!(
        handshake(&checking, &by_ip, &mut accepted).await,
        "the IP SAN matches"
    );
    let refused = checking
        .connect(&by_name)
        .await
        .err()
        .expect("no SAN for localhost");
    assert!(refused.is_authentication(), "{refused}");
    assert_eq!(
        accepted.recv().await,
        Some(false),
        "the listener saw it abort"
    );
    let lenient = connector(server.clone(), false);
    assert!(
        handshake(&lenient, &by_name, &mut accepted).await,
        "without https only the chain is verified"
    );
}

#[tokio::test]
async fn an_untrusted_peer_or_a_missing_client_certificate_is_refused() {
    let (ca, chain, key) = authority();
    let (other_ca, other_chain, other_key) = authority();
    let (port, mut accepted) = tls_listener(&settings(&ca, &chain, &key)).await;
    let address = format!("127.0.0.1:{port}");
    // The node trusts another CA: the listener's certificate does not verify.
    let untrusting = connector(settings(&other_ca, &chain, &key), false);
    let refused = untrusting.connect(&address).await.err().expect("refused");
    assert!(refused.is_authentication(), "{refused}");
    assert_eq!(
        accepted.recv().await,
        Some(false),
        "the listener saw it abort"
    );
    // The node presents a certificate the listener's CA did not sign.
    let stranger = connector(settings(&ca, &other_chain, &other_key), false);
    assert!(!handshake(&stranger, &address, &mut accepted).await);
}

/// A quorum listener with SASL PLAIN (no TLS) for `users`.
async fn sasl_listener(
    users: &[(&str, &str)],
) -> (u16, tokio::sync::mpsc::UnboundedReceiver<bool>) {
    let jaas = users
        .iter()
        .map(|(user, password)| format!("user_{user}=\"{password}\""))
        .collect::<Vec<_>>()
        .join(" ");
    let entry = crate::jaas::parse(&format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"n\" password=\"p\" {jaas};"
    ))
    .expect("valid");
    let users = crate::peer_config::PlainUsers::from_entry(&entry);
    listener(PeerAcceptor::new(None, Some(ListenerUsers::new(&users)))).await
}

fn sasl_connector(username: &str, password: &str) -> PeerConnector {
    let mut security = PeerClientSecurity::plaintext("CONTROLLER");
    security.protocol = SecurityProtocol::SaslPlaintext;
    security.sasl = Some(crate::sasl_client::SaslLogin {
        mechanism: "PLAIN".to_owned(),
        username: username.to_owned(),
        password: password.to_owned(),
    });
    PeerConnector::new(&security, 1 << 20).expect("connector")
}

#[tokio::test]
async fn the_controller_listener_accepts_its_users_and_refuses_others() {
    let (port, mut accepted) = sasl_listener(&[("controller", "secret")]).await;
    let address = format!("127.0.0.1:{port}");
    assert!(
        handshake(
            &sasl_connector("controller", "secret"),
            &address,
            &mut accepted
        )
        .await,
        "a user of the listener logs in"
    );
    for (user, password) in [("controller", "wrong"), ("stranger", "secret")] {
        let refused = sasl_connector(user, password)
            .connect(&address)
            .await
            .err()
            .expect("refused");
        assert!(refused.is_authentication(), "{refused}");
        assert_eq!(accepted.recv().await, Some(false));
    }
    // A node that does not log in at all is refused before any Raft frame.
    let mut plain = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    plain
        .write_all(&[0, 0, 0, 12, 0x7d, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 0])
        .await
        .expect("write");
    assert_eq!(accepted.recv().await, Some(false));
}
