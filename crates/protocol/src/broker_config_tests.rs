use super::*;

#[test]
fn names_are_sorted_and_defaults_valid() {
    for pair in DYNAMIC_BROKER_CONFIGS.windows(2) {
        assert!(pair[0].name < pair[1].name, "{} order", pair[1].name);
    }
    for definition in DYNAMIC_BROKER_CONFIGS {
        if let Some(default) = definition.default {
            assert_eq!(definition.validate(default), Ok(()), "{}", definition.name);
        }
        assert!(!definition.documentation.is_empty(), "{}", definition.name);
    }
}

#[test]
fn keys_are_classified() {
    assert!(matches!(
        dynamic_broker_key("log.retention.ms"),
        Some(BrokerKey::TopicDefault(definition)) if definition.name == "retention.ms"
    ));
    assert!(matches!(
        dynamic_broker_key("message.max.bytes"),
        Some(BrokerKey::TopicDefault(_))
    ));
    assert!(matches!(
        dynamic_broker_key("max.connections.per.ip"),
        Some(BrokerKey::Broker(_))
    ));
    let listener = dynamic_broker_key("listener.name.external.ssl.keystore.location");
    assert!(matches!(
        &listener,
        Some(BrokerKey::Listener { listener, .. }) if listener == "external"
    ));
    assert!(listener.is_some_and(|key| key.per_broker_only()));
    assert!(dynamic_broker_key("listener.name.external.max.connections")
        .is_some_and(|key| !key.per_broker_only()));
    // Read-only or unknown.
    for name in [
        "broker.id",
        "log.dirs",
        "listeners",
        "ssl.keystore.location",
        "listener.name.external.max.connections.per.ip",
        "listener.name..max.connections",
        "listener.name.external",
        "no.such.key",
    ] {
        assert_eq!(dynamic_broker_key(name), None, "{name}");
    }
}

#[test]
fn values_are_checked() {
    let key = |name: &str| dynamic_broker_key(name).expect(name);
    assert_eq!(key("max.connections").validate("10"), Ok(()));
    assert_eq!(
        key("max.connections").validate("-1"),
        Err(ConfigValueError::BelowMinimum {
            minimum: "0".into()
        })
    );
    assert_eq!(
        key("num.replica.fetchers").validate("x"),
        Err(ConfigValueError::NotAnInteger)
    );
    assert_eq!(
        key("log.cleaner.io.buffer.load.factor").validate("0.5"),
        Ok(())
    );
    assert!(key("max.connections.per.ip.overrides").is_list());
    assert!(key("listener.name.a.ssl.keystore.password").sensitive());
}

#[test]
fn host_counts_parse_and_refuse_garbage() {
    assert_eq!(
        parse_host_counts(" 127.0.0.1:5, host-a:0 ,[::1]:2"),
        Ok(vec![
            ("127.0.0.1".to_owned(), 5),
            ("host-a".to_owned(), 0),
            ("::1".to_owned(), 2)
        ])
    );
    assert_eq!(parse_host_counts(""), Ok(Vec::new()));
    for bad in [
        "host",
        "host:",
        ":3",
        "host:-1",
        "host:x",
        "host:4294967295",
    ] {
        assert_eq!(
            parse_host_counts(bad),
            Err(ConfigValueError::NotHostCounts),
            "{bad}"
        );
    }
}
