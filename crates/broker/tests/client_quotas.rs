//! Client quotas over a real socket: AlterClientQuotas and
//! DescribeClientQuotas through the metadata log (kept across a restart),
//! bad input refused whole, and throttling of Produce and Fetch.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use strom_protocol::kafka::messages::describe_client_quotas_request::ComponentData;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common::{config, Client};

fn entry(
    entity: &[(&'static str, Option<&'static str>)],
    ops: &[(&'static str, Option<f64>)],
) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(entity_type, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_static_str(entity_type))
                        .with_entity_name(name.map(StrBytes::from_static_str))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(StrBytes::from_static_str(key))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

/// Sends AlterClientQuotas; the error code of each entry.
pub async fn alter(client: &mut Client, entries: Vec<EntryData>, validate_only: bool) -> Vec<i16> {
    let request = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let Response::AlterClientQuotas(response) =
        client.send(Request::AlterClientQuotas(request), 1).await
    else {
        panic!("not AlterClientQuotas");
    };
    response
        .entries
        .iter()
        .map(|entry| entry.error_code)
        .collect()
}

/// Every quota (entity parts, key, value) of the entities with a user part.
async fn describe_users(client: &mut Client) -> Vec<(Vec<(String, Option<String>)>, String, f64)> {
    let request =
        DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
            .with_entity_type(StrBytes::from_static_str("user"))
            .with_match_type(2)
            .with_match(None)]);
    let Response::DescribeClientQuotas(response) =
        client.send(Request::DescribeClientQuotas(request), 1).await
    else {
        panic!("not DescribeClientQuotas");
    };
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    let mut quotas = Vec::new();
    for entry in response.entries.unwrap_or_default() {
        let entity: Vec<_> = entry
            .entity
            .iter()
            .map(|part| {
                (
                    part.entity_type.to_string(),
                    part.entity_name.as_ref().map(|name| name.to_string()),
                )
            })
            .collect();
        for value in entry.values {
            quotas.push((entity.clone(), value.key.to_string(), value.value));
        }
    }
    quotas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_altered_described_refused_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    let invalid = ErrorCode::InvalidRequest.code();

    // validate_only checks and writes nothing.
    let codes = alter(
        &mut client,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", Some(1024.0))],
        )],
        true,
    )
    .await;
    assert_eq!(codes, vec![0]);
    assert!(describe_users(&mut client).await.is_empty());

    let codes = alter(
        &mut client,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            // A bad value: the whole entity is refused, its good key too.
            entry(
                &[("user", Some("bob"))],
                &[
                    ("consumer_byte_rate", Some(10.0)),
                    ("producer_byte_rate", Some(-5.0)),
                ],
            ),
            entry(
                &[("user", Some("carol"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(&[("user", Some("dave"))], &[("no_such_quota", Some(1.0))]),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
        ],
        false,
    )
    .await;
    assert_eq!(codes, vec![0, invalid, invalid, invalid, invalid, invalid]);
    let expected = vec![(
        vec![("user".to_owned(), Some("alice".to_owned()))],
        "producer_byte_rate".to_owned(),
        1024.0,
    )];
    assert_eq!(describe_users(&mut client).await, expected);

    broker.shutdown().await;
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    assert_eq!(describe_users(&mut client).await, expected);

    // Removal.
    let codes = alter(
        &mut client,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
        false,
    )
    .await;
    assert_eq!(codes, vec![0]);
    assert!(describe_users(&mut client).await.is_empty());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_describe_filter_is_an_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quota-admin").await;
    let request =
        DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
            .with_entity_type(StrBytes::from_static_str("user"))
            .with_match_type(0)
            .with_match(None)]);
    let Response::DescribeClientQuotas(response) =
        client.send(Request::DescribeClientQuotas(request), 1).await
    else {
        panic!("not DescribeClientQuotas");
    };
    assert_eq!(response.error_code, ErrorCode::InvalidRequest.code());
    assert!(response.entries.is_none());
    broker.shutdown().await;
}

fn topic_name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

/// Produces one batch of `count` records of `value_bytes` each to
/// partition 0 of `topic`; the throttle time of the answer.
async fn produce(client: &mut Client, topic: &str, count: usize, value_bytes: usize) -> i32 {
    use strom_protocol::kafka::messages::produce_request::{
        PartitionProduceData, TopicProduceData,
    };
    use strom_protocol::records::{Compression, RecordBatchBuilder};
    let mut builder = RecordBatchBuilder::new(Compression::None);
    let value = vec![b'x'; value_bytes];
    for index in 0..count {
        builder
            .append(1_000 + index as i64, None, Some(&value), &[])
            .expect("append");
    }
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(builder.build().expect("build")))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    response.throttle_time_ms
}

/// Fetches partition 0 of `topic` from offset 0 (no session); the record
/// bytes and the throttle time.
async fn fetch(client: &mut Client, topic: &str) -> (usize, i32) {
    use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let Response::Fetch(response) = client.send(Request::Fetch(request), 12).await else {
        panic!("not a Fetch response");
    };
    let bytes = response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| {
            partition
                .records
                .as_ref()
                .map_or(0, |records| records.len())
        })
        .sum();
    (bytes, response.throttle_time_ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_over_its_byte_rate_is_throttled_and_muted_and_others_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut admin = Client::connect(&broker, "quota-admin").await;
    crate::common::create_topic_answer(&mut admin, "quota-produce", 1, &[]).await;
    let codes = alter(
        &mut admin,
        vec![entry(
            &[("client-id", Some("slow-producer"))],
            &[("producer_byte_rate", Some(1_000.0))],
        )],
        false,
    )
    .await;
    assert_eq!(codes, vec![0]);

    let mut slow = Client::connect(&broker, "slow-producer").await;
    let mut fast = Client::connect(&broker, "fast-producer").await;
    // 5 KB is under the 10 KB a 1,000 B/s quota allows over its first 10 s.
    assert_eq!(produce(&mut slow, "quota-produce", 5, 1_000).await, 0);
    // 20 KB more: about 25 KB over 10 s, 2.5 times the quota.
    let throttle_ms = produce(&mut slow, "quota-produce", 20, 1_000).await;
    assert!(
        (10_000..=20_000).contains(&throttle_ms),
        "throttle {throttle_ms} ms"
    );
    // Another client id is not limited.
    assert_eq!(produce(&mut fast, "quota-produce", 40, 1_000).await, 0);
    // The throttled connection reads its next request only after the mute.
    let started = std::time::Instant::now();
    let (_, fetch_throttle) = fetch(&mut slow, "quota-produce").await;
    assert_eq!(fetch_throttle, 0, "no consumer quota");
    let waited = started.elapsed().as_millis();
    assert!(
        waited + 100 >= throttle_ms as u128,
        "answered after {waited} ms"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_over_its_byte_rate_gets_an_empty_throttled_answer() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut admin = Client::connect(&broker, "quota-admin").await;
    crate::common::create_topic_answer(&mut admin, "quota-fetch", 1, &[]).await;
    for _ in 0..3 {
        assert_eq!(produce(&mut admin, "quota-fetch", 10, 1_000).await, 0);
    }
    let codes = alter(
        &mut admin,
        vec![entry(
            &[("user", None), ("client-id", Some("slow-consumer"))],
            &[("consumer_byte_rate", Some(500.0))],
        )],
        false,
    )
    .await;
    assert_eq!(codes, vec![0]);
    // A fetch is capped at one window's worth (5,000 bytes) but returns at
    // least one whole batch (KIP-74): 10 KB, twice the window's worth.
    let mut slow = Client::connect(&broker, "slow-consumer").await;
    let (bytes, throttle_ms) = fetch(&mut slow, "quota-fetch").await;
    assert_eq!(bytes, 0, "a throttled fetch carries no records");
    assert!(throttle_ms > 0);
    // Without a quota the same fetch carries the records.
    let mut other = Client::connect(&broker, "other-consumer").await;
    let (bytes, throttle_ms) = fetch(&mut other, "quota-fetch").await;
    assert!(bytes > 10_000);
    assert_eq!(throttle_ms, 0);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_over_the_mutation_rate_is_refused_with_throttling_quota_exceeded() {
    use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut admin = Client::connect(&broker, "quota-admin").await;
    let codes = alter(
        &mut admin,
        vec![entry(
            &[("user", None)],
            &[("controller_mutation_rate", Some(1.0))],
        )],
        false,
    )
    .await;
    assert_eq!(codes, vec![0]);
    let topic = |name: &str, partitions: i32| {
        CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
    };
    // A burst of 11 tokens: 20 partitions take it below zero (accepted),
    // the next topic is refused.
    let request = CreateTopicsRequest::default().with_topics(vec![topic("m1", 20), topic("m2", 1)]);
    let Response::CreateTopics(response) = admin.send(Request::CreateTopics(request), 7).await
    else {
        panic!("not CreateTopics");
    };
    let codes: Vec<i16> = response
        .topics
        .iter()
        .map(|topic| topic.error_code)
        .collect();
    assert_eq!(codes, vec![0, ErrorCode::ThrottlingQuotaExceeded.code()]);
    assert!(
        (8_000..=10_000).contains(&response.throttle_time_ms),
        "{}",
        response.throttle_time_ms
    );
    broker.shutdown().await;
}
