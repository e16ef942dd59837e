use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::error::{ConfigError, ValueProblem};

fn parse(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    BrokerConfig::from_map(&map).map(|(config, _)| config)
}

const VOTERS: &str = "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194";

fn combined(node: &str) -> Vec<(&'static str, String)> {
    let id: u16 = node.parse().expect("a node id");
    vec![
        ("process.roles", "broker,controller".to_owned()),
        ("node.id", node.to_owned()),
        ("controller.quorum.voters", VOTERS.to_owned()),
        (
            "listeners",
            format!(
                "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                9091 + id,
                9191 + id
            ),
        ),
        ("controller.listener.names", "CONTROLLER".to_owned()),
        ("inter.broker.listener.name", "PLAINTEXT".to_owned()),
        ("strom.cluster.id", "MkU3OEVBNTcwNTJENDM2Qg".to_owned()),
    ]
}

fn with(
    base: Vec<(&'static str, String)>,
    changes: &[(&'static str, &str)],
) -> Result<BrokerConfig, ConfigError> {
    let mut map: BTreeMap<&str, String> = base.into_iter().collect();
    for (key, value) in changes {
        map.insert(key, (*value).to_owned());
    }
    let pairs: Vec<(&str, &str)> = map.iter().map(|(k, v)| (*k, v.as_str())).collect();
    parse(&pairs)
}

fn reason(error: ConfigError) -> (String, String) {
    match error {
        ConfigError::Invalid {
            key,
            problem: ValueProblem::Cluster { reason },
            ..
        } => (key, reason),
        other => panic!("not a cluster problem: {other}"),
    }
}

#[test]
fn without_voters_the_broker_is_the_single_node_one() {
    let config = parse(&[]).expect("defaults");
    assert!(config.cluster.is_none());
    let config = parse(&[("process.roles", "broker,controller")]).expect("explicit roles");
    assert!(config.cluster.is_none());
    let (key, reason) = reason(parse(&[("process.roles", "broker")]).unwrap_err());
    assert_eq!(key, "process.roles");
    assert!(reason.contains("controller.quorum.voters"), "{reason}");
}

#[test]
fn a_combined_node_takes_the_controller_listener_out_of_the_broker_listeners() {
    let config = with(combined("2"), &[("broker.rack", "rack-b")]).expect("valid");
    let cluster = config.cluster.expect("cluster mode");
    assert!(cluster.roles.broker && cluster.roles.controller);
    assert_eq!(cluster.voters.len(), 3);
    assert_eq!(cluster.voters[&3], "127.0.0.1:9194");
    assert_eq!(
        cluster.controller_listener.map(|l| (l.name, l.port)),
        Some(("CONTROLLER".to_owned(), 9193))
    );
    assert_eq!(config.listeners.len(), 1);
    assert_eq!(config.listeners[0].name, "PLAINTEXT");
    assert_eq!(config.advertised_listeners, config.listeners);
    assert_eq!(cluster.inter_broker_listener_name, "PLAINTEXT");
    assert_eq!(cluster.session_timeout.as_millis(), 9_000);
    assert_eq!(cluster.request_timeout.as_millis(), 2_000);
    assert_eq!(config.rack.as_deref(), Some("rack-b"));
}

#[test]
fn broker_only_and_controller_only_nodes() {
    let broker = with(
        combined("4"),
        &[
            ("process.roles", "broker"),
            ("listeners", "PLAINTEXT://127.0.0.1:9095"),
        ],
    )
    .expect("a broker-only node");
    let cluster = broker.cluster.expect("cluster mode");
    assert!(cluster.roles.broker && !cluster.roles.controller);
    assert!(cluster.controller_listener.is_none());
    let controller = with(
        combined("1"),
        &[
            ("process.roles", "controller"),
            ("listeners", "CONTROLLER://127.0.0.1:9192"),
        ],
    )
    .expect("a controller-only node");
    assert!(controller.listeners.is_empty());
    assert!(controller
        .cluster
        .expect("cluster")
        .controller_listener
        .is_some());
}

#[test]
fn inconsistent_cluster_settings_are_refused_with_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("node.id", "7")], "controller.quorum.voters"),
        (&[("process.roles", "broker")], "controller.quorum.voters"),
        (
            &[(
                "controller.quorum.voters",
                "1@127.0.0.1:9192,2@127.0.0.1:9193",
            )],
            "controller.quorum.voters",
        ),
        (
            &[(
                "controller.quorum.voters",
                "1@127.0.0.1:9192,1@127.0.0.1:9193,3@h:1",
            )],
            "controller.quorum.voters",
        ),
        (
            &[("controller.quorum.voters", "x@127.0.0.1:9192")],
            "controller.quorum.voters",
        ),
        (
            &[("controller.quorum.voters", "1@127.0.0.1")],
            "controller.quorum.voters",
        ),
        (&[("listeners", "PLAINTEXT://127.0.0.1:9092")], "listeners"),
        (&[("listeners", "CONTROLLER://127.0.0.1:9192")], "listeners"),
        (
            &[(
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9199",
            )],
            "listeners",
        ),
        (
            &[("controller.listener.names", "")],
            "controller.listener.names",
        ),
        (
            &[("inter.broker.listener.name", "INTERNAL")],
            "inter.broker.listener.name",
        ),
        (&[("strom.cluster.id", "")], "strom.cluster.id"),
        (&[("process.roles", "broker,broker")], "process.roles"),
        (
            &[("security.inter.broker.protocol", "PLAINTEXT")],
            "security.inter.broker.protocol",
        ),
    ];
    for (changes, expected_key) in cases {
        let error = with(combined("1"), changes).expect_err("refused");
        let (key, reason) = reason(error);
        assert_eq!(&key, expected_key, "{changes:?}: {reason}");
        assert!(!reason.is_empty());
    }
}

#[test]
fn leader_rebalance_keys_have_kafka_defaults_and_are_checked() {
    let config = with(combined("1"), &[]).unwrap();
    let cluster = config.cluster.expect("a cluster node");
    assert!(cluster.auto_leader_rebalance_enable);
    assert_eq!(cluster.leader_imbalance_per_broker_percentage, 10);
    assert_eq!(
        cluster.leader_imbalance_check_interval,
        std::time::Duration::from_secs(300)
    );
    let config = with(
        combined("1"),
        &[
            ("auto.leader.rebalance.enable", "false"),
            ("leader.imbalance.per.broker.percentage", "25"),
            ("leader.imbalance.check.interval.seconds", "5"),
        ],
    )
    .unwrap();
    let cluster = config.cluster.expect("a cluster node");
    assert!(!cluster.auto_leader_rebalance_enable);
    assert_eq!(cluster.leader_imbalance_per_broker_percentage, 25);
    assert_eq!(
        cluster.leader_imbalance_check_interval,
        std::time::Duration::from_secs(5)
    );
    assert!(with(
        combined("1"),
        &[("leader.imbalance.per.broker.percentage", "101")]
    )
    .is_err());
    assert!(with(
        combined("1"),
        &[("leader.imbalance.check.interval.seconds", "0")]
    )
    .is_err());
}

/// A combined node whose INTERNAL listener is SASL_SSL and whose
/// controller listener is SSL, with `changes` applied (an empty value
/// removes the key): how it reaches its peers.
fn peers(
    changes: &[(&str, &str)],
) -> Result<strom_security::peer_config::PeerSecurity, ConfigError> {
    let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                username=\"broker\" password=\"broker-secret\";";
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
            jaas,
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    for (key, value) in changes {
        match value.is_empty() {
            true => map.remove(*key),
            false => map.insert((*key).to_owned(), (*value).to_owned()),
        };
    }
    BrokerConfig::from_map(&map).map(|(config, _)| config.cluster.expect("a cluster").peers)
}

/// The key a refusal of [`peers`] names, and its message.
fn peer_refusal(changes: &[(&str, &str)]) -> (String, String) {
    match peers(changes).expect_err("refused") {
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
fn security_inter_broker_protocol_names_the_listener_and_excludes_the_name_key() {
    let (key, message) = peer_refusal(&[("security.inter.broker.protocol", "SASL_SSL")]);
    assert_eq!(key, "security.inter.broker.protocol");
    assert!(message.contains("only one"), "{message}");
    let (key, _) = peer_refusal(&[
        ("inter.broker.listener.name", ""),
        ("security.inter.broker.protocol", "TLS"),
    ]);
    assert_eq!(key, "security.inter.broker.protocol");
    let peers = peers(&[
        ("inter.broker.listener.name", ""),
        ("security.inter.broker.protocol", "SSL"),
        (
            "listeners",
            "CLIENT://127.0.0.1:9092,SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9193",
        ),
        (
            "listener.security.protocol.map",
            "CLIENT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        ),
    ])
    .expect("valid");
    assert_eq!(peers.inter_broker.listener, "SSL");
    assert_eq!(
        peers.inter_broker.protocol,
        strom_security::SecurityProtocol::Ssl
    );
    assert_eq!(
        peers.controller.protocol,
        strom_security::SecurityProtocol::Plaintext
    );
}
