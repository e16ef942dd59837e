//! Dynamic broker configs (KIP-226) over a real socket: broker resources
//! altered per broker and as the cluster default, described with Kafka's
//! sources and synonyms, applied to topics without an override and to the
//! accept loop's connection limits.

use std::time::Duration;

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::describe_configs_response::DescribeConfigsResult;
use strom_protocol::kafka::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strom_protocol::kafka::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::common::{self, config, create_topic_answer, Client};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

fn string(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// One IncrementalAlterConfigs on one resource: `(key, op, value)`.
async fn alter(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> AlterConfigsResourceResponse {
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(string(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(key, operation, value)| {
                        AlterableConfig::default()
                            .with_name(string(key))
                            .with_config_operation(*operation)
                            .with_value(value.map(string))
                    })
                    .collect(),
            )]);
    let Response::IncrementalAlterConfigs(mut response) = client
        .send(Request::IncrementalAlterConfigs(request), 1)
        .await
    else {
        panic!("not IncrementalAlterConfigs");
    };
    response.responses.remove(0)
}

async fn describe(
    client: &mut Client,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
) -> DescribeConfigsResult {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(string(name))
            .with_configuration_keys(
                keys.map(|keys| keys.iter().map(|key| string(key)).collect()),
            )]);
    let Response::DescribeConfigs(mut response) =
        client.send(Request::DescribeConfigs(request), 4).await
    else {
        panic!("not DescribeConfigs");
    };
    response.results.remove(0)
}

/// `(value, source, synonyms as (name, value, source))` of `key`.
type Described = (Option<String>, i8, Vec<(String, Option<String>, i8)>);

fn described(result: &DescribeConfigsResult, key: &str) -> Described {
    let entry = result
        .configs
        .iter()
        .find(|entry| entry.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} missing"));
    let synonyms = entry
        .synonyms
        .iter()
        .map(|synonym| {
            (
                synonym.name.to_string(),
                synonym.value.as_ref().map(ToString::to_string),
                synonym.source,
            )
        })
        .collect();
    (
        entry.value.as_ref().map(ToString::to_string),
        entry.config_source,
        synonyms,
    )
}

fn synonym(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_owned(), Some(value.to_owned()), source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_defaults_follow_the_broker_layers_in_kafka_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[("node.id", "1")]))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "dynamic-test").await;
    let created = create_topic_answer(&mut client, "plain", 1, &[]).await;
    assert_eq!(created.topics[0].error_code, 0);

    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("log.retention.ms", 0, Some("3600000"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    let topic = describe(&mut client, TOPIC, "plain", Some(&["retention.ms"])).await;
    let (value, source, synonyms) = described(&topic, "retention.ms");
    assert_eq!((value.as_deref(), source), (Some("3600000"), 3));
    assert_eq!(
        synonyms,
        vec![
            synonym("log.retention.ms", "3600000", 3),
            synonym("log.retention.ms", "604800000", 5),
        ]
    );

    let answer = alter(
        &mut client,
        BROKER,
        "1",
        &[("log.retention.ms", 0, Some("60000"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    let topic = describe(&mut client, TOPIC, "plain", Some(&["retention.ms"])).await;
    let (value, source, synonyms) = described(&topic, "retention.ms");
    assert_eq!((value.as_deref(), source), (Some("60000"), 2));
    assert_eq!(synonyms[0], synonym("log.retention.ms", "60000", 2));
    assert_eq!(synonyms[1], synonym("log.retention.ms", "3600000", 3));

    // The broker resource shows the same layers.
    let own = describe(&mut client, BROKER, "1", Some(&["log.retention.ms"])).await;
    assert_eq!(own.error_code, 0);
    let (value, source, synonyms) = described(&own, "log.retention.ms");
    assert_eq!((value.as_deref(), source), (Some("60000"), 2));
    assert_eq!(synonyms.len(), 3, "{synonyms:?}");
    assert!(!own.configs[0].read_only);
    let default = describe(&mut client, BROKER, "", None).await;
    assert_eq!(default.configs.len(), 1);
    assert_eq!(
        described(&default, "log.retention.ms").1,
        3,
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );

    // Deleting the broker's value falls back to the cluster default.
    let answer = alter(
        &mut client,
        BROKER,
        "1",
        &[("log.retention.ms", 1, None)],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    let topic = describe(&mut client, TOPIC, "plain", Some(&["retention.ms"])).await;
    assert_eq!(described(&topic, "retention.ms").1, 3);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_and_invalid_keys_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "dynamic-test").await;
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[
            ("max.connections", 0, Some("9")),
            ("log.dirs", 0, Some("/x")),
        ],
        false,
    )
    .await;
    assert_eq!(answer.error_code, ErrorCode::InvalidRequest.code());
    assert!(answer
        .error_message
        .as_deref()
        .is_some_and(|message| message.contains("log.dirs")));
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("max.connections", 0, Some("many"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, ErrorCode::InvalidConfig.code());
    let answer = alter(
        &mut client,
        BROKER,
        "x",
        &[("max.connections", 0, Some("9"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, ErrorCode::InvalidRequest.code());
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("max.connections", 0, Some("9"))],
        true,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    let default = describe(&mut client, BROKER, "", None).await;
    assert!(default.configs.is_empty(), "nothing was written");
    broker.shutdown().await;
}

/// Whether the broker keeps a new connection open (a refused one is
/// closed at once: the read sees the end of the stream).
async fn stays_open(address: std::net::SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte)).await {
        Err(_) => Some(stream),
        Ok(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_per_ip_applies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let address = broker.local_addresses()[0];
    let mut client = Client::connect(&broker, "dynamic-test").await;
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("max.connections.per.ip", 0, Some("3"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    // The image reaches the accept loop's follower right after the answer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The admin connection is one of the three.
    let second = stays_open(address).await.expect("the second connection");
    let third = stays_open(address).await.expect("the third connection");
    assert!(stays_open(address).await.is_none(), "over the limit");
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("max.connections.per.ip", 1, None)],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    common::wait_until("the limit is lifted", || async move {
        stays_open(address).await.is_some()
    })
    .await;
    drop((second, third));
    broker.shutdown().await;
}

/// Produces `count` records in one batch to partition 0; returns the error
/// code.
async fn produce(client: &mut Client, topic: &str, count: usize) -> i16 {
    use strom_protocol::kafka::messages::produce_request::{
        PartitionProduceData, TopicProduceData,
    };
    use strom_protocol::records::{Compression, RecordBatchBuilder};
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for index in 0..count {
        builder
            .append(
                1_000 + index as i64,
                None,
                Some(format!("v{index}").as_bytes()),
                &[],
            )
            .expect("append");
    }
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(string(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(builder.build().expect("build")))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_default_message_max_bytes_applies_to_topics_without_an_override() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "dynamic-test").await;
    for (topic, configs) in [
        ("plain", &[][..]),
        ("own", &[("max.message.bytes", "100000")][..]),
    ] {
        let created = create_topic_answer(&mut client, topic, 1, configs).await;
        assert_eq!(created.topics[0].error_code, 0);
    }
    assert_eq!(produce(&mut client, "plain", 5).await, 0);
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("message.max.bytes", 0, Some("20"))],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        produce(&mut client, "plain", 5).await,
        ErrorCode::MessageTooLarge.code()
    );
    assert_eq!(
        produce(&mut client, "own", 5).await,
        0,
        "its own override wins"
    );
    let answer = alter(
        &mut client,
        BROKER,
        "",
        &[("message.max.bytes", 1, None)],
        false,
    )
    .await;
    assert_eq!(answer.error_code, 0);
    assert_eq!(produce(&mut client, "plain", 5).await, 0);
    broker.shutdown().await;
}
