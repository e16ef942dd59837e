//! Dynamic broker configs (KIP-226) at the controller: which keys a broker
//! resource accepts, how values are checked, and that a refused resource
//! writes nothing.

use super::*;

fn alter_broker(
    harness: &mut Harness,
    broker: Option<i32>,
    alterations: Vec<(&str, AlterConfigOperation)>,
    validate_only: bool,
) -> (usize, Result<(), ControllerError>) {
    let request = IncrementalAlterConfigsRequest {
        resources: vec![(
            ConfigResource::Broker(broker),
            alterations
                .into_iter()
                .map(|(key, operation)| ConfigAlteration {
                    key: key.into(),
                    operation,
                })
                .collect(),
        )],
        validate_only,
    };
    let result = harness
        .controller
        .incremental_alter_configs(&harness.image, &request)
        .unwrap();
    let records = result.records.len();
    (records, harness.commit(result).remove(0).result)
}

fn set(value: &str) -> AlterConfigOperation {
    AlterConfigOperation::Set(value.into())
}

#[test]
fn dynamic_broker_keys_are_recorded_per_broker_and_as_default() {
    let mut harness = Harness::with_brokers(1);
    let (records, result) = alter_broker(
        &mut harness,
        Some(1),
        vec![
            ("max.connections.per.ip", set(" 5 ")),
            ("listener.name.external.max.connections", set("7")),
            (
                "listener.name.external.ssl.keystore.location",
                set("/k.pem"),
            ),
        ],
        false,
    );
    assert_eq!((records, result), (3, Ok(())));
    let broker = ConfigResource::Broker(Some(1));
    assert_eq!(
        harness.image.config(&broker, "max.connections.per.ip"),
        Some("5")
    );
    let (_, result) = alter_broker(
        &mut harness,
        None,
        vec![
            ("num.replica.fetchers", set("2")),
            ("log.cleaner.threads", set("2")),
            ("message.max.bytes", set("2000000")),
        ],
        false,
    );
    assert_eq!(result, Ok(()));
    assert_eq!(
        harness
            .image
            .config(&ConfigResource::Broker(None), "message.max.bytes"),
        Some("2000000")
    );
    // The per-broker entries are untouched by the default's change.
    assert_eq!(harness.image.configs(&broker).len(), 3);
}

#[test]
fn read_only_keys_are_refused_naming_the_key_and_nothing_is_written() {
    let mut harness = Harness::with_brokers(1);
    for key in [
        "broker.id",
        "log.dirs",
        "listeners",
        "no.such.key",
        "ssl.keystore.location",
    ] {
        let (records, result) = alter_broker(
            &mut harness,
            Some(1),
            vec![("max.connections", set("9")), (key, set("1"))],
            false,
        );
        assert_eq!(records, 0, "{key}");
        assert_eq!(
            result,
            Err(ControllerError::ReadOnlyConfig { key: key.into() }),
            "{key}"
        );
        assert!(result.unwrap_err().to_string().contains(key));
    }
    assert!(harness
        .image
        .configs(&ConfigResource::Broker(Some(1)))
        .is_empty());
}

#[test]
fn keystores_are_per_broker_only() {
    let mut harness = Harness::with_brokers(1);
    let key = "listener.name.external.ssl.keystore.location";
    let (records, result) = alter_broker(&mut harness, None, vec![(key, set("/k.pem"))], false);
    assert_eq!(records, 0);
    assert_eq!(
        result,
        Err(ControllerError::PerBrokerConfig { key: key.into() })
    );
}

#[test]
fn invalid_values_are_refused_as_invalid_config() {
    let mut harness = Harness::with_brokers(1);
    for (key, value) in [
        ("max.connections", "-1"),
        ("num.replica.fetchers", "0"),
        ("max.connections.per.ip.overrides", "127.0.0.1"),
        ("log.retention.ms", "-2"),
        ("log.cleanup.policy", "shred"),
    ] {
        let (records, result) = alter_broker(
            &mut harness,
            None,
            vec![("log.segment.bytes", set("1048576")), (key, set(value))],
            false,
        );
        assert_eq!(records, 0, "{key}");
        assert!(
            matches!(result, Err(ControllerError::InvalidConfig { key: ref bad, .. }) if bad == key),
            "{key}: {result:?}"
        );
    }
    assert!(harness
        .image
        .configs(&ConfigResource::Broker(None))
        .is_empty());
}

#[test]
fn host_count_overrides_take_append_and_subtract() {
    let mut harness = Harness::with_brokers(1);
    let key = "max.connections.per.ip.overrides";
    let operations = [
        AlterConfigOperation::Append("127.0.0.1:2".into()),
        AlterConfigOperation::Append("10.0.0.1:3, 127.0.0.1:2".into()),
        AlterConfigOperation::Subtract("127.0.0.1:2".into()),
    ];
    let expected = ["127.0.0.1:2", "127.0.0.1:2,10.0.0.1:3", "10.0.0.1:3"];
    for (operation, expected) in operations.into_iter().zip(expected) {
        let (_, result) = alter_broker(&mut harness, None, vec![(key, operation)], false);
        assert_eq!(result, Ok(()));
        assert_eq!(
            harness.image.config(&ConfigResource::Broker(None), key),
            Some(expected)
        );
    }
    let (_, result) = alter_broker(
        &mut harness,
        None,
        vec![("max.connections", AlterConfigOperation::Append("1".into()))],
        false,
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::NotAList,
            ..
        })
    ));
}

#[test]
fn validate_only_and_delete() {
    let mut harness = Harness::with_brokers(1);
    let (records, result) = alter_broker(
        &mut harness,
        None,
        vec![("log.retention.ms", set("1000"))],
        true,
    );
    assert_eq!((records, result), (0, Ok(())));
    assert!(harness
        .image
        .configs(&ConfigResource::Broker(None))
        .is_empty());
    alter_broker(
        &mut harness,
        None,
        vec![("log.retention.ms", set("1000"))],
        false,
    )
    .1
    .unwrap();
    let (records, result) = alter_broker(
        &mut harness,
        None,
        vec![("log.retention.ms", AlterConfigOperation::Delete)],
        false,
    );
    assert_eq!((records, result), (1, Ok(())));
    assert!(harness
        .image
        .configs(&ConfigResource::Broker(None))
        .is_empty());
}

#[test]
fn replacing_broker_configs_refuses_read_only_keys() {
    let mut harness = Harness::with_brokers(1);
    let request = AlterConfigsRequest {
        resources: vec![ResourceConfigs {
            resource: ConfigResource::Broker(Some(1)),
            entries: vec![
                ConfigEntry::new("max.connections", "4"),
                ConfigEntry::new("node.id", "3"),
            ],
        }],
        validate_only: false,
    };
    let result = harness
        .controller
        .alter_configs(&harness.image, &request)
        .unwrap();
    assert!(result.records.is_empty());
    assert_eq!(
        harness.commit(result).remove(0).result,
        Err(ControllerError::ReadOnlyConfig {
            key: "node.id".into()
        })
    );
}
