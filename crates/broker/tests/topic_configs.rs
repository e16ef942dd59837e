//! The one table of topic configurations (`strom_protocol::topic_config`)
//! against every layer that uses it, key by key: CreateTopics validation
//! (the controller), the partition log's typed configuration (storage), and
//! DescribeConfigs (the broker) must agree with the table and with each
//! other.

use std::collections::BTreeMap;

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig,
};
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::topic_config::{ConfigDefinition, ConfigKind, TOPIC_CONFIGS};
use strom_storage::LogConfig;

use crate::common;

use common::{config, Client};

/// Values on and beyond each edge of a key's valid range, plus values of
/// the wrong type.
fn samples(definition: &ConfigDefinition) -> Vec<String> {
    let mut samples = vec![
        definition.default.to_owned(),
        "x".to_owned(),
        format!(" {} ", definition.default),
    ];
    let integer_edges = |min: i128, max: i128| {
        [min - 1, min, min + 1, max - 1, max, max + 1].map(|value| value.to_string())
    };
    match definition.kind {
        ConfigKind::Int { min, max } => samples.extend(integer_edges(min.into(), max.into())),
        ConfigKind::Long { min, max } => samples.extend(integer_edges(min.into(), max.into())),
        ConfigKind::Double { min, max } => {
            for value in [min - 0.5, min, max, max + 0.5] {
                samples.push(value.to_string());
            }
            samples.push("NaN".to_owned());
        }
        ConfigKind::Boolean => samples.extend(["true", "FALSE", "yes"].map(str::to_owned)),
        ConfigKind::OneOf(words) | ConfigKind::ListOf(words) => {
            samples.extend(words.iter().map(|word| (*word).to_owned()));
            samples.push(words.join(","));
            samples.push(String::new());
        }
        ConfigKind::ThrottledReplicas => {
            samples.extend(["*", "0:1,1:2", "0-1"].map(str::to_owned));
        }
        ConfigKind::Text => samples.push("anything".to_owned()),
    }
    samples
}

fn storage_accepts(key: &str, value: &str) -> bool {
    let properties = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    match LogConfig::from_properties(&properties) {
        Ok(parsed) => {
            assert!(parsed.unknown_keys.is_empty(), "{key} unknown to storage");
            true
        }
        Err(_) => false,
    }
}

/// Validates one topic config through CreateTopics (validate-only); returns
/// the error code.
async fn create_topic_answer(client: &mut Client, key: &str, value: &str) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_validate_only(true)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("checked")))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(key.to_owned()))
                .with_value(Some(StrBytes::from_string(value.to_owned())))])]);
    let Response::CreateTopics(response) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    response.topics[0].error_code
}

#[test]
fn the_log_knows_every_key_and_its_defaults_are_the_tables() {
    let defaults: BTreeMap<String, String> = TOPIC_CONFIGS
        .iter()
        .map(|definition| (definition.name.to_owned(), definition.default.to_owned()))
        .collect();
    let parsed = LogConfig::from_properties(&defaults).expect("the defaults parse");
    assert!(parsed.unknown_keys.is_empty(), "{:?}", parsed.unknown_keys);
    assert_eq!(parsed.config, LogConfig::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validation_and_the_log_agree_with_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "topic-configs-test").await;
    let mut disagreements = Vec::new();
    for definition in TOPIC_CONFIGS {
        for sample in samples(definition) {
            let table = definition.validate(&sample).is_ok();
            let storage = storage_accepts(definition.name, &definition.normalize(&sample));
            let code = create_topic_answer(&mut client, definition.name, &sample).await;
            let expected = if table {
                0
            } else {
                ErrorCode::InvalidConfig.code()
            };
            if code != expected || (table && !storage) {
                disagreements.push(format!(
                    "{} = {sample:?}: table {table}, CreateTopics {code}, storage {storage}",
                    definition.name
                ));
            }
        }
    }
    broker.shutdown().await;
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_lists_every_key_with_the_tables_default_type_and_docs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "topic-configs-test").await;
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("plain")))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let Response::CreateTopics(created) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0);
    let request = DescribeConfigsRequest::default()
        .with_include_documentation(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("plain"))
            .with_configuration_keys(None)]);
    let Response::DescribeConfigs(response) =
        client.send(Request::DescribeConfigs(request), 4).await
    else {
        panic!("not a DescribeConfigs response");
    };
    broker.shutdown().await;
    let described = &response.results[0].configs;
    assert_eq!(described.len(), TOPIC_CONFIGS.len());
    for (entry, definition) in described.iter().zip(TOPIC_CONFIGS) {
        assert_eq!(entry.name.as_str(), definition.name);
        assert_eq!(entry.value.as_deref(), Some(definition.default));
        assert_eq!(
            entry.config_source, 5,
            "{}: DEFAULT_CONFIG",
            definition.name
        );
        assert_eq!(entry.config_type, definition.kind.config_type());
        assert_eq!(
            entry.documentation.as_deref(),
            Some(definition.documentation)
        );
    }
}
