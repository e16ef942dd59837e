use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use strom_controller::records::{ConfigRecord, ConfigResourceType, MetadataRecord, Record};

use super::*;

fn record(broker: &str, key: &str, value: &str) -> MetadataRecord {
    MetadataRecord::new(Record::Config(ConfigRecord {
        resource_type: ConfigResourceType::Broker as i32,
        resource_name: broker.into(),
        name: key.into(),
        value: Some(value.into()),
    }))
}

fn image(records: &[MetadataRecord]) -> MetadataImage {
    let mut image = MetadataImage::empty();
    for (offset, record) in records.iter().enumerate() {
        image = image.apply(offset as u64, record).expect("applies");
    }
    image
}

fn config(properties: &[(&str, &str)]) -> BrokerConfig {
    let map: BTreeMap<String, String> = properties
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    BrokerConfig::from_map(&map).expect("valid").0
}

#[test]
fn per_broker_wins_over_default_over_static() {
    let config = config(&[("node.id", "1"), ("max.connections", "100")]);
    let none = connection_limits(&config, &MetadataImage::empty());
    assert_eq!(none.max_connections, 100);
    assert_eq!(none.max_connections_per_ip, i32::MAX as usize);
    let image = image(&[
        record("", "max.connections", "50"),
        record("", "max.connections.per.ip", "5"),
        record("1", "max.connections.per.ip", "7"),
        record("2", "max.connections.per.ip", "9"),
    ]);
    let limits = connection_limits(&config, &image);
    assert_eq!(limits.max_connections, 50);
    assert_eq!(limits.max_connections_per_ip, 7);
}

#[test]
fn listener_limits_and_overrides_are_parsed() {
    let config = config(&[("node.id", "1")]);
    let image = image(&[
        record("", "listener.name.EXTERNAL.max.connections", "3"),
        record(
            "1",
            "listener.name.external.max.connection.creation.rate",
            "4",
        ),
        record(
            "",
            "max.connections.per.ip.overrides",
            "127.0.0.9:2,localhost:4",
        ),
        record("", "max.connection.creation.rate", "10"),
    ]);
    let limits = connection_limits(&config, &image);
    let external = limits.listeners.get("external").expect("external");
    assert_eq!(external.max_connections, Some(3));
    assert_eq!(external.max_connection_creation_rate, Some(4));
    assert_eq!(limits.max_connection_creation_rate, 10);
    assert_eq!(
        limits
            .per_ip_overrides
            .get(&"127.0.0.9".parse::<IpAddr>().unwrap()),
        Some(&2)
    );
    assert_eq!(
        limits
            .per_ip_overrides
            .get(&"127.0.0.1".parse::<IpAddr>().unwrap()),
        Some(&4),
        "a host name is resolved"
    );
}

#[test]
fn a_listener_keystore_comes_from_this_brokers_dynamic_config() {
    let config = config(&[
        ("node.id", "1"),
        ("listeners", "SECURE://127.0.0.1:0"),
        ("listener.security.protocol.map", "SECURE:SSL"),
        ("ssl.keystore.location", "/static.pem"),
        ("ssl.key.password", "static"),
    ]);
    let static_keystore =
        listener_keystore(&config, &MetadataImage::empty(), "SECURE").expect("a TLS listener");
    assert_eq!(
        static_keystore.chain,
        PemSource::File(PathBuf::from("/static.pem"))
    );
    assert_eq!(
        listener_keystore(&config, &MetadataImage::empty(), "OTHER"),
        None
    );
    let image = image(&[
        record(
            "1",
            "listener.name.secure.ssl.keystore.location",
            "/new.pem",
        ),
        record("2", "listener.name.secure.ssl.key.password", "not-mine"),
    ]);
    let dynamic = listener_keystore(&config, &image, "SECURE").expect("a TLS listener");
    assert_eq!(dynamic.chain, PemSource::File(PathBuf::from("/new.pem")));
    assert_eq!(dynamic.key, PemSource::File(PathBuf::from("/new.pem")));
    assert_eq!(dynamic.password.as_deref(), Some("static"));
}

#[test]
fn the_cleaner_backoff_is_this_brokers_else_the_defaults() {
    let config = config(&[("node.id", "1"), ("log.cleaner.backoff.ms", "15000")]);
    assert_eq!(
        dynamic_cleaner_backoff_ms(&config, &MetadataImage::empty()),
        None
    );
    let default_only = image(&[record("", "log.cleaner.backoff.ms", "500")]);
    assert_eq!(
        dynamic_cleaner_backoff_ms(&config, &default_only),
        Some(500)
    );
    let both = image(&[
        record("", "log.cleaner.backoff.ms", "500"),
        record("1", "log.cleaner.backoff.ms", "200"),
        record("2", "log.cleaner.backoff.ms", "100"),
    ]);
    assert_eq!(dynamic_cleaner_backoff_ms(&config, &both), Some(200));
}

#[test]
fn a_listener_truststore_comes_from_this_brokers_dynamic_config() {
    let config = config(&[
        ("node.id", "1"),
        ("listeners", "SECURE://127.0.0.1:0"),
        ("listener.security.protocol.map", "SECURE:SSL"),
        ("ssl.keystore.location", "/static.pem"),
        ("ssl.truststore.location", "/ca.pem"),
        ("ssl.client.auth", "required"),
    ]);
    let empty = MetadataImage::empty();
    assert_eq!(
        listener_truststore(&config, &empty, "SECURE"),
        Some(PemSource::File(PathBuf::from("/ca.pem")))
    );
    let image = image(&[
        record(
            "1",
            "listener.name.SECURE.ssl.truststore.location",
            "/new-ca.pem",
        ),
        record(
            "",
            "listener.name.secure.ssl.truststore.location",
            "/ignored.pem",
        ),
    ]);
    assert_eq!(
        listener_truststore(&config, &image, "SECURE"),
        Some(PemSource::File(PathBuf::from("/new-ca.pem")))
    );
    let inline = image_with_inline();
    assert!(matches!(
        listener_truststore(&config, &inline, "secure"),
        Some(PemSource::Inline { text, .. }) if text == "PEM"
    ));
}

fn image_with_inline() -> MetadataImage {
    image(&[record(
        "1",
        "listener.name.secure.ssl.truststore.certificates",
        "PEM",
    )])
}
