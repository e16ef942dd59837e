//! strom-consumer against librdkafka's mock cluster (three brokers):
//! records produced with librdkafka's producer are all consumed exactly
//! once, by manual assignment and by a group, across injected errors.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use strom_consumer::{
    ApiVersionCaps, Consumer, ConsumerConfig, OffsetAndMetadata, OffsetReset, TopicPartition,
};

const PARTITIONS: i32 = 6;

/// Produces `count` records spread over the partitions; returns
/// (partition, value) of each.
fn produce(bootstrap: &str, topic: &str, count: usize) -> BTreeSet<(i32, String)> {
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("compression.type", "lz4")
        .create()
        .expect("producer");
    let mut produced = BTreeSet::new();
    for index in 0..count {
        let partition = (index % PARTITIONS as usize) as i32;
        let value = format!("{topic}-{index}");
        let key = format!("k{index}");
        loop {
            let record = BaseRecord::to(topic)
                .partition(partition)
                .key(&key)
                .payload(&value);
            match producer.send(record) {
                Ok(()) => break,
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        produced.insert((partition, value));
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    produced
}

fn config(bootstrap: &str, group: Option<&str>) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(bootstrap.split(',').map(str::to_owned));
    config.group_id = group.map(str::to_owned);
    config.auto_offset_reset = OffsetReset::Earliest;
    config.fetch_max_wait = Duration::from_millis(100);
    config.session_timeout = Duration::from_millis(6_000);
    config.heartbeat_interval = Duration::from_millis(500);
    config.max_poll_records = 50;
    config.client.retry_backoff = Duration::from_millis(50);
    // The mock advertises flexible group versions it cannot parse.
    config.api_version_caps = ApiVersionCaps::librdkafka_mock();
    config
}

fn all_partitions(topic: &str) -> Vec<TopicPartition> {
    (0..PARTITIONS)
        .map(|p| TopicPartition::new(topic, p))
        .collect()
}

/// Polls until `wanted` records arrived or `limit` passed; fails on a
/// duplicate (partition, offset).
async fn consume(
    consumer: &mut Consumer,
    wanted: usize,
    limit: Duration,
) -> BTreeSet<(i32, String)> {
    let deadline = Instant::now() + limit;
    let mut seen = BTreeSet::new();
    let mut values = BTreeSet::new();
    while values.len() < wanted && Instant::now() < deadline {
        for record in consumer
            .poll(Duration::from_millis(200))
            .await
            .expect("poll")
        {
            assert!(
                seen.insert((record.partition, record.offset)),
                "duplicate {record:?}"
            );
            let value = String::from_utf8(record.value.expect("value").to_vec()).unwrap();
            values.insert((record.partition, value));
        }
    }
    values
}

#[tokio::test]
async fn manual_assignment_consumes_everything_produced() {
    let cluster = MockCluster::new(3).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("manual", PARTITIONS, 3).unwrap();
    let produced = produce(&bootstrap, "manual", 600);
    let mut consumer = Consumer::new(config(&bootstrap, None)).await.unwrap();
    consumer.assign(all_partitions("manual")).unwrap();
    let consumed = consume(&mut consumer, produced.len(), Duration::from_secs(20)).await;
    assert_eq!(consumed, produced);
    for tp in all_partitions("manual") {
        assert_eq!(consumer.position(&tp).await.unwrap(), 100);
    }
    consumer.close().await.unwrap();
}

#[tokio::test]
async fn fetch_errors_and_an_out_of_range_seek_are_survived() {
    let cluster = MockCluster::new(3).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("errors", PARTITIONS, 3).unwrap();
    let produced = produce(&bootstrap, "errors", 300);
    cluster.request_errors(
        RDKafkaApiKey::Fetch,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        ],
    );
    let mut consumer = Consumer::new(config(&bootstrap, None)).await.unwrap();
    consumer.assign(all_partitions("errors")).unwrap();
    consumer
        .seek(&TopicPartition::new("errors", 0), 1_000_000)
        .unwrap();
    let consumed = consume(&mut consumer, produced.len(), Duration::from_secs(20)).await;
    assert_eq!(consumed, produced);
    consumer.close().await.unwrap();
}

#[tokio::test]
async fn a_group_of_two_shares_the_partitions_and_resumes_from_commits() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let cluster = MockCluster::new(3).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("grouped", PARTITIONS, 3).unwrap();
    let produced = produce(&bootstrap, "grouped", 600);

    let mut first = Consumer::new(config(&bootstrap, Some("g1"))).await.unwrap();
    let mut second = Consumer::new(config(&bootstrap, Some("g1"))).await.unwrap();
    first.subscribe(["grouped"]).unwrap();
    second.subscribe(["grouped"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: BTreeMap<(i32, String), usize> = BTreeMap::new();
    let mut members_with_records = BTreeSet::new();
    while seen.len() < produced.len() && Instant::now() < deadline {
        let (a, b) = tokio::join!(
            first.poll(Duration::from_millis(200)),
            second.poll(Duration::from_millis(200))
        );
        for (member, records) in [(0, a.unwrap()), (1, b.unwrap())] {
            if !records.is_empty() {
                members_with_records.insert(member);
            }
            for record in records {
                let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
                *seen.entry((record.partition, value)).or_default() += 1;
            }
        }
    }
    assert_eq!(seen.keys().cloned().collect::<BTreeSet<_>>(), produced);
    assert_eq!(members_with_records.len(), 2, "both members got partitions");
    let mut assigned: Vec<TopicPartition> = first.assignment();
    assigned.extend(second.assignment());
    assigned.sort();
    assert_eq!(assigned, all_partitions("grouped"));
    first.commit_sync().await.unwrap();
    second.commit_sync().await.unwrap();
    first.close().await.unwrap();
    second.close().await.unwrap();

    // librdkafka's mock rejects generation -1 commits to a group it has
    // seen members in, so this reader does not auto-commit on close.
    let mut resumed_config = config(&bootstrap, Some("g1"));
    resumed_config.enable_auto_commit = false;
    let mut resumed = Consumer::new(resumed_config).await.unwrap();
    let committed = resumed.committed(&all_partitions("grouped")).await.unwrap();
    for tp in all_partitions("grouped") {
        assert_eq!(committed[&tp].as_ref().map(|o| o.offset), Some(100), "{tp}");
    }
    resumed.assign(all_partitions("grouped")).unwrap();
    let tp0 = TopicPartition::new("grouped", 0);
    assert_eq!(resumed.position(&tp0).await.unwrap(), 100);
    resumed.close().await.unwrap();

    // A consumer outside group management commits with metadata.
    let mut standalone = Consumer::new(config(&bootstrap, Some("standalone")))
        .await
        .unwrap();
    standalone.assign(all_partitions("grouped")).unwrap();
    standalone
        .commit_offsets_sync(&BTreeMap::from([(
            tp0.clone(),
            OffsetAndMetadata::new(42).with_metadata("by hand"),
        )]))
        .await
        .unwrap();
    let committed = standalone
        .committed(std::slice::from_ref(&tp0))
        .await
        .unwrap();
    let offset = committed[&tp0].clone().unwrap();
    assert_eq!((offset.offset, offset.metadata.as_str()), (42, "by hand"));
    assert_eq!(standalone.position(&tp0).await.unwrap(), 42);
    standalone.close().await.unwrap();
}
