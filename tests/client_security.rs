//! strom-client over TLS and SASL: SCRAM-SHA-512 over TLS with the
//! librdkafka property names, the wrong password refused, and a client
//! certificate on an mTLS listener. Certificates are made by rcgen here;
//! the broker reads them inline (`ssl.keystore.certificate.chain`,
//! `ssl.keystore.key`, `ssl.truststore.certificates`).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use strom_client::admin::{AdminClient, NewTopic};
use strom_client::{ClientConfig, ClientError, Cluster};
use strom_controller::controller::ScramChange;
use strom_controller::security_records::UserScramCredentialRecord;
use strom_protocol::sasl::scram::{ScramCredential, ScramMechanism};

mod common;

struct Pki {
    ca_pem: String,
    server_chain: String,
    server_key: String,
    client_pem: String,
    client_key: String,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test CA");
    let ca_key = KeyPair::generate().expect("key");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let mut server_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    server_params.subject_alt_names = vec![
        SanType::DnsName("localhost".try_into().expect("name")),
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    ];
    let server_key = KeyPair::generate().expect("key");
    let server = server_params
        .signed_by(&server_key, &ca, &ca_key)
        .expect("server certificate");
    let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    client_params
        .distinguished_name
        .push(DnType::CommonName, "app-1");
    let client_key = KeyPair::generate().expect("key");
    let client = client_params
        .signed_by(&client_key, &ca, &ca_key)
        .expect("client certificate");
    Pki {
        ca_pem: ca.pem(),
        server_chain: server.pem(),
        server_key: server_key.serialize_pem(),
        client_pem: client.pem(),
        client_key: client_key.serialize_pem(),
    }
}

async fn add_user(broker: &common::TestBroker, user: &str, password: &str) {
    let mechanism = ScramMechanism::Sha512;
    let credential =
        ScramCredential::from_password(mechanism, password, b"some-salt", 4096).expect("valid");
    let record = UserScramCredentialRecord {
        name: user.to_owned(),
        mechanism: i32::from(mechanism.code()),
        salt: credential.salt,
        stored_key: credential.stored_key,
        server_key: credential.server_key,
        iterations: credential.iterations,
    };
    let applied = broker
        .broker
        .controller()
        .alter_scram_credentials(vec![ScramChange::Upsert(record)])
        .await
        .expect("written");
    assert_eq!(applied, vec![true]);
}

async fn admin(properties: &[(&str, &str)]) -> Result<AdminClient, ClientError> {
    let (config, unknown) = ClientConfig::from_properties(properties.iter().copied()).expect("ok");
    assert!(unknown.is_empty(), "{unknown:?}");
    let cluster = Cluster::connect(config).await?;
    Ok(AdminClient::new(cluster, Duration::from_secs(10)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_512_over_tls_with_librdkafka_property_names() {
    let pki = pki();
    let broker = common::start_broker(&[
        ("listeners", "SASL_SSL://127.0.0.1:0"),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.certificate.chain", &pki.server_chain),
        ("ssl.keystore.key", &pki.server_key),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ])
    .await;
    add_user(&broker, "alice", "alice-secret").await;
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).expect("written");
    let ca = ca.display().to_string();
    let properties = |password: &'static str| {
        vec![
            ("bootstrap.servers", broker.bootstrap.clone()),
            ("security.protocol", "SASL_SSL".to_owned()),
            ("ssl.ca.location", ca.clone()),
            ("sasl.mechanism", "SCRAM-SHA-512".to_owned()),
            ("sasl.username", "alice".to_owned()),
            ("sasl.password", password.to_owned()),
        ]
    };
    let borrowed =
        |owned: &[(&'static str, String)]| -> Vec<(&'static str, String)> { owned.to_vec() };
    let good = borrowed(&properties("alice-secret"));
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let client = admin(&good).await.expect("authenticated");
    let created = client
        .create_topics(&[NewTopic::new("over-tls", 2, 1)], false)
        .await
        .expect("answered");
    assert!(created["over-tls"].is_ok(), "{created:?}");
    let bad = properties("wrong");
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let refused = admin(&bad).await.expect_err("refused");
    assert!(
        format!("{refused:?}").contains("Authentication")
            || format!("{refused:?}").contains("Disconnected"),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_on_an_mtls_listener() {
    let pki = pki();
    let broker = common::start_broker(&[
        ("listeners", "SSL://127.0.0.1:0"),
        ("ssl.keystore.certificate.chain", &pki.server_chain),
        ("ssl.keystore.key", &pki.server_key),
        ("ssl.truststore.certificates", &pki.ca_pem),
        ("ssl.client.auth", "required"),
    ])
    .await;
    let dir = tempfile::tempdir().expect("dir");
    for (name, text) in [
        ("ca.pem", &pki.ca_pem),
        ("client.pem", &pki.client_pem),
        ("client.key", &pki.client_key),
    ] {
        std::fs::write(dir.path().join(name), text).expect("written");
    }
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (ca, certificate, key) = (path("ca.pem"), path("client.pem"), path("client.key"));
    let with_certificate = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("security.protocol", "SSL"),
        ("ssl.ca.location", &ca),
        ("ssl.certificate.location", &certificate),
        ("ssl.key.location", &key),
    ];
    let client = admin(&with_certificate).await.expect("connected");
    assert_eq!(
        client
            .describe_cluster()
            .await
            .expect("described")
            .brokers
            .len(),
        1
    );
    let without = &with_certificate[..3];
    assert!(
        admin(without).await.is_err(),
        "no certificate, no connection"
    );
}
