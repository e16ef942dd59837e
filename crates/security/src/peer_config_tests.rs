use std::collections::BTreeMap;

use strom_config::ConfigError;

use super::{parse as parse_peers, PeerSecurity};
use crate::config::SecurityProtocol;

const JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=\"broker\" password=\"broker-secret\";";

/// A combined node whose INTERNAL listener is SASL_SSL and whose
/// controller listener is SSL, with `changes` applied (an empty value
/// removes the key): how it reaches `inter.broker.listener.name` and the
/// first of `controller.listener.names`.
fn parse(changes: &[(&str, &str)]) -> Result<PeerSecurity, ConfigError> {
    let mut map: BTreeMap<String, String> = [
        ("process.roles", "broker,controller"),
        ("node.id", "1"),
        ("controller.quorum.voters", "1@127.0.0.1:9193"),
        (
            "listeners",
            "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9193",
        ),
        (
            "listener.security.protocol.map",
            "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        ),
        ("controller.listener.names", "CONTROLLER"),
        ("inter.broker.listener.name", "INTERNAL"),
        ("strom.cluster.id", "MkU3OEVBNTcwNTJENDM2Qg"),
        ("ssl.keystore.location", "/etc/strom/node.pem"),
        ("ssl.truststore.location", "/etc/strom/ca.pem"),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
        (
            "listener.name.internal.scram-sha-512.sasl.jaas.config",
            JAAS,
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    for (key, value) in changes {
        match value.is_empty() && !key.contains("identification") {
            true => map.remove(*key),
            false => map.insert((*key).to_owned(), (*value).to_owned()),
        };
    }
    let named = |key: &str| {
        map.get(key)
            .and_then(|names| names.split(',').next())
            .map(|name| name.trim().to_owned())
            .unwrap_or_default()
    };
    let inter_broker = named("inter.broker.listener.name");
    let controller = named("controller.listener.names");
    parse_peers(&map, &inter_broker, &controller)
}

/// The key an error names, and its message.
fn refused(changes: &[(&str, &str)]) -> (String, String) {
    match parse(changes).expect_err("refused") {
        error @ ConfigError::Invalid { .. } => {
            let ConfigError::Invalid { ref key, .. } = error else {
                unreachable!()
            };
            (key.clone(), error.to_string())
        }
        other => panic!("not an invalid value: {other}"),
    }
}

#[test]
fn a_sasl_ssl_inter_broker_listener_logs_in_with_the_jaas_credentials() {
    let peers = parse(&[]).expect("valid");
    let inter_broker = peers.inter_broker;
    assert_eq!(inter_broker.listener, "INTERNAL");
    assert_eq!(inter_broker.protocol, SecurityProtocol::SaslSsl);
    assert!(inter_broker.verify_hostname, "Kafka's default is https");
    let tls = inter_broker.tls.expect("TLS");
    assert!(tls.truststore.is_some());
    let login = inter_broker.sasl.expect("a SASL login");
    assert_eq!(
        (login.mechanism.as_str(), login.username.as_str()),
        ("SCRAM-SHA-512", "broker")
    );
    assert_eq!(login.password, "broker-secret");
    assert!(!format!("{login:?}").contains("broker-secret"));
    assert_eq!(peers.controller.protocol, SecurityProtocol::Ssl);
    assert!(peers.controller.sasl.is_none());
}

#[test]
fn an_empty_endpoint_identification_algorithm_skips_the_host_name_check() {
    let peers = parse(&[("ssl.endpoint.identification.algorithm", "")]).expect("valid");
    assert!(!peers.inter_broker.verify_hostname);
    assert!(!peers.controller.verify_hostname);
    let peers = parse(&[(
        "listener.name.controller.ssl.endpoint.identification.algorithm",
        "",
    )])
    .expect("valid");
    assert!(peers.inter_broker.verify_hostname);
    assert!(!peers.controller.verify_hostname);
    let (key, _) = refused(&[("ssl.endpoint.identification.algorithm", "http")]);
    assert_eq!(key, "ssl.endpoint.identification.algorithm");
}

#[test]
fn the_inter_broker_mechanism_defaults_to_plain_and_needs_its_own_jaas_entry() {
    let (key, message) = refused(&[
        ("sasl.mechanism.inter.broker.protocol", ""),
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
    ]);
    assert_eq!(key, "listener.name.internal.plain.sasl.jaas.config");
    assert!(message.contains("PLAIN"), "{message}");
    let plain = JAAS.replace("scram.ScramLoginModule", "plain.PlainLoginModule");
    let peers = parse(&[
        ("sasl.mechanism.inter.broker.protocol", ""),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.internal.plain.sasl.jaas.config", &plain),
    ])
    .expect("valid");
    assert_eq!(peers.inter_broker.sasl.expect("login").mechanism, "PLAIN");
}

#[test]
fn missing_or_broken_jaas_is_a_start_up_error_naming_the_key_not_the_password() {
    let key = "listener.name.internal.scram-sha-512.sasl.jaas.config";
    assert_eq!(refused(&[(key, "")]).0, key);
    let broken = "ScramLoginModule required username=\"broker\" password=\"hunter2\"";
    let (named, message) = refused(&[(key, broken)]);
    assert_eq!(named, key);
    assert!(message.contains(";"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    let (named, message) = refused(&[(key, "ScramLoginModule required username=broker;")]);
    assert_eq!(named, key);
    assert!(message.contains("password"), "{message}");
}

#[test]
fn gssapi_oauthbearer_and_disabled_mechanisms_are_refused() {
    for mechanism in ["GSSAPI", "OAUTHBEARER"] {
        let (key, message) = refused(&[("sasl.mechanism.inter.broker.protocol", mechanism)]);
        assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
        assert!(message.contains("not supported between nodes"), "{message}");
    }
    let (key, message) = refused(&[("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256")]);
    assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
    assert!(message.contains("sasl.enabled.mechanisms"), "{message}");
}

const CONTROLLER_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                               username=\"controller\" password=\"controller-secret\" \
                               user_controller=\"controller-secret\" user_other=\"other-secret\";";

/// The controller listener on SASL_SSL with PLAIN, plus `changes`.
fn sasl_controller(changes: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut pairs = vec![
        (
            "listener.security.protocol.map",
            "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        ),
        ("listener.name.controller.sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.controller.plain.sasl.jaas.config",
            CONTROLLER_JAAS,
        ),
    ];
    pairs.extend_from_slice(changes);
    pairs
}

#[test]
fn a_sasl_controller_listener_logs_in_with_plain_and_accepts_the_jaas_users() {
    let peers = parse(&sasl_controller(&[])).expect("valid");
    assert_eq!(peers.controller.protocol, SecurityProtocol::SaslSsl);
    let login = peers.controller.sasl.expect("a login");
    assert_eq!(
        (
            login.mechanism.as_str(),
            login.username.as_str(),
            login.password.as_str()
        ),
        ("PLAIN", "controller", "controller-secret")
    );
    let users = peers.controller_users.expect("users");
    let listed: Vec<_> = users.iter().collect();
    assert_eq!(
        listed,
        vec![
            ("controller", "controller-secret"),
            ("other", "other-secret")
        ]
    );
    assert!(!format!("{users:?}").contains("secret"));
    assert!(parse(&[]).expect("valid").controller_users.is_none());
}

#[test]
fn a_sasl_controller_listener_needs_plain_a_jaas_entry_and_users() {
    let key = "listener.name.controller.plain.sasl.jaas.config";
    assert_eq!(refused(&sasl_controller(&[(key, "")])).0, key);
    let no_users = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    username=\"controller\" password=\"controller-secret\";";
    let (named, message) = refused(&sasl_controller(&[(key, no_users)]));
    assert_eq!(named, key);
    assert!(message.contains("user_<name>"), "{message}");
    for mechanism in ["SCRAM-SHA-512", "GSSAPI"] {
        let (named, message) = refused(&sasl_controller(&[
            ("sasl.mechanism.controller.protocol", mechanism),
            (
                "listener.name.controller.sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-512",
            ),
        ]));
        assert_eq!(named, "sasl.mechanism.controller.protocol");
        assert!(message.contains(mechanism), "{message}");
    }
    let (named, message) = refused(&sasl_controller(&[(
        "listener.name.controller.sasl.enabled.mechanisms",
        "SCRAM-SHA-512",
    )]));
    assert_eq!(named, "sasl.mechanism.controller.protocol");
    assert!(message.contains("sasl.enabled.mechanisms"), "{message}");
}

#[test]
fn the_controller_listener_needs_a_truststore_and_a_known_protocol() {
    let (key, _) = refused(&[
        ("ssl.truststore.location", ""),
        (
            "listener.name.internal.ssl.truststore.location",
            "/etc/strom/ca.pem",
        ),
    ]);
    assert_eq!(key, "listener.name.controller.ssl.truststore.location");
    let (key, _) = refused(&[(
        "listener.security.protocol.map",
        "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:KERBEROS",
    )]);
    assert_eq!(key, "listener.security.protocol.map");
}

#[test]
fn an_unmapped_controller_listener_stays_plaintext() {
    let peers = parse(&[(
        "listener.security.protocol.map",
        "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
    )])
    .expect("valid");
    assert_eq!(peers.controller.protocol, SecurityProtocol::Plaintext);
    assert!(peers.controller.tls.is_none());
}
