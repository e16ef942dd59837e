use super::*;

fn resource(name: &str) -> ConfigResource {
    ConfigResource::Topic(name.into())
}

fn alter(
    harness: &mut Harness,
    resource: ConfigResource,
    entries: Vec<ConfigEntry>,
    validate_only: bool,
) -> (usize, Result<(), ControllerError>) {
    let request = AlterConfigsRequest {
        resources: vec![ResourceConfigs { resource, entries }],
        validate_only,
    };
    let result = harness
        .controller
        .alter_configs(&harness.image, &request)
        .unwrap();
    let records = result.records.len();
    (records, harness.commit(result).remove(0).result)
}

fn incremental(
    harness: &mut Harness,
    resource: ConfigResource,
    alterations: Vec<(&str, AlterConfigOperation)>,
) -> (usize, Result<(), ControllerError>) {
    let request = IncrementalAlterConfigsRequest {
        resources: vec![(
            resource,
            alterations
                .into_iter()
                .map(|(key, operation)| ConfigAlteration {
                    key: key.into(),
                    operation,
                })
                .collect(),
        )],
        validate_only: false,
    };
    let result = harness
        .controller
        .incremental_alter_configs(&harness.image, &request)
        .unwrap();
    let records = result.records.len();
    (records, harness.commit(result).remove(0).result)
}

fn harness_with_topic() -> Harness {
    let mut harness = Harness::with_brokers(1);
    let mut new_topic = topic("t", 1, 1);
    new_topic.configs = vec![
        ConfigEntry::new("retention.ms", "1000"),
        ConfigEntry::new("segment.bytes", "1048576"),
    ];
    harness.create_one(new_topic).unwrap();
    harness
}

#[test]
fn full_alter_replaces_every_key() {
    let mut harness = harness_with_topic();
    let (records, result) = alter(
        &mut harness,
        resource("t"),
        vec![
            ConfigEntry::new("retention.ms", "1000"),
            ConfigEntry::new("cleanup.policy", "compact"),
        ],
        false,
    );
    result.unwrap();
    // segment.bytes deleted, cleanup.policy set, retention.ms unchanged.
    assert_eq!(records, 2);
    let configs = harness.image.configs(&resource("t"));
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
    assert!(!configs.contains_key("segment.bytes"));
}

#[test]
fn full_alter_validate_only_changes_nothing() {
    let mut harness = harness_with_topic();
    let (records, result) = alter(&mut harness, resource("t"), vec![], true);
    result.unwrap();
    assert_eq!(records, 0);
    assert_eq!(harness.image.configs(&resource("t")).len(), 2);
}

#[test]
fn full_alter_rejects_bad_entries_and_unknown_topics() {
    let mut harness = harness_with_topic();
    let (_, result) = alter(
        &mut harness,
        resource("t"),
        vec![ConfigEntry::new("retention.ms", "-7")],
        false,
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::Value(ConfigValueError::BelowMinimum { .. }),
            ..
        })
    ));
    let (_, result) = alter(
        &mut harness,
        resource("t"),
        vec![ConfigEntry {
            key: "retention.ms".into(),
            value: None,
        }],
        false,
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::MissingValue,
            ..
        })
    ));
    let (_, result) = alter(&mut harness, resource("nope"), vec![], false);
    assert_eq!(
        result,
        Err(ControllerError::UnknownTopic {
            name: "nope".into()
        })
    );
    assert_eq!(harness.image.configs(&resource("t")).len(), 2);
}

#[test]
fn incremental_set_and_delete() {
    let mut harness = harness_with_topic();
    let (records, result) = incremental(
        &mut harness,
        resource("t"),
        vec![
            ("retention.ms", AlterConfigOperation::Set("5".into())),
            ("segment.bytes", AlterConfigOperation::Delete),
        ],
    );
    result.unwrap();
    assert_eq!(records, 2);
    let configs = harness.image.configs(&resource("t"));
    assert_eq!(configs.get("retention.ms").map(String::as_str), Some("5"));
    assert!(!configs.contains_key("segment.bytes"));
    // Setting the same value again writes nothing.
    let (records, result) = incremental(
        &mut harness,
        resource("t"),
        vec![("retention.ms", AlterConfigOperation::Set("5".into()))],
    );
    result.unwrap();
    assert_eq!(records, 0);
}

#[test]
fn incremental_append_and_subtract_work_on_lists() {
    let mut harness = harness_with_topic();
    let (_, result) = incremental(
        &mut harness,
        resource("t"),
        vec![(
            "cleanup.policy",
            AlterConfigOperation::Append("compact".into()),
        )],
    );
    result.unwrap();
    assert_eq!(
        harness.image.config(&resource("t"), "cleanup.policy"),
        Some("delete,compact")
    );
    let (_, result) = incremental(
        &mut harness,
        resource("t"),
        vec![(
            "cleanup.policy",
            AlterConfigOperation::Subtract("delete".into()),
        )],
    );
    result.unwrap();
    assert_eq!(
        harness.image.config(&resource("t"), "cleanup.policy"),
        Some("compact")
    );
    let (_, result) = incremental(
        &mut harness,
        resource("t"),
        vec![(
            "cleanup.policy",
            AlterConfigOperation::Subtract("compact".into()),
        )],
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::Value(ConfigValueError::NotAllowed { .. }),
            ..
        })
    ));
    let (_, result) = incremental(
        &mut harness,
        resource("t"),
        vec![("retention.ms", AlterConfigOperation::Append("1".into()))],
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
fn incremental_rejects_unknown_and_duplicate_keys_atomically() {
    let mut harness = harness_with_topic();
    let (records, result) = incremental(
        &mut harness,
        resource("t"),
        vec![
            ("retention.ms", AlterConfigOperation::Set("7".into())),
            ("retention.hours", AlterConfigOperation::Set("1".into())),
        ],
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::UnknownKey,
            ..
        })
    ));
    assert_eq!(records, 0);
    assert_eq!(
        harness.image.config(&resource("t"), "retention.ms"),
        Some("1000")
    );
    let (_, result) = incremental(
        &mut harness,
        resource("t"),
        vec![
            ("retention.ms", AlterConfigOperation::Set("7".into())),
            ("retention.ms", AlterConfigOperation::Delete),
        ],
    );
    assert!(matches!(
        result,
        Err(ControllerError::InvalidConfig {
            reason: ConfigProblem::DuplicateKey,
            ..
        })
    ));
}

#[test]
fn broker_resources_take_broker_names() {
    let mut harness = harness_with_topic();
    let (_, result) = incremental(
        &mut harness,
        ConfigResource::Broker(None),
        vec![(
            "log.retention.ms",
            AlterConfigOperation::Set("60000".into()),
        )],
    );
    result.unwrap();
    assert_eq!(
        harness
            .image
            .config(&ConfigResource::Broker(None), "log.retention.ms"),
        Some("60000")
    );
    let (_, result) = incremental(
        &mut harness,
        ConfigResource::Broker(Some(1)),
        vec![("retention.ms", AlterConfigOperation::Set("1".into()))],
    );
    assert_eq!(
        result,
        Err(ControllerError::ReadOnlyConfig {
            key: "retention.ms".into()
        })
    );
}

#[test]
fn one_bad_resource_does_not_block_another() {
    let mut harness = harness_with_topic();
    let request = AlterConfigsRequest {
        resources: vec![
            ResourceConfigs {
                resource: resource("nope"),
                entries: vec![],
            },
            ResourceConfigs {
                resource: resource("t"),
                entries: vec![ConfigEntry::new("retention.ms", "9")],
            },
        ],
        validate_only: false,
    };
    let result = harness
        .controller
        .alter_configs(&harness.image, &request)
        .unwrap();
    let outcomes = harness.commit(result);
    assert!(outcomes[0].result.is_err());
    assert!(outcomes[1].result.is_ok());
    assert_eq!(
        harness.image.config(&resource("t"), "retention.ms"),
        Some("9")
    );
}
