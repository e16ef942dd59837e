//! strom-producer against librdkafka's mock cluster (a broker no one here
//! wrote), with injected errors: every record must be acknowledged exactly
//! once and stay in order per partition.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{Message, Offset, TopicPartitionList};
use strom_producer::{Acks, Producer, ProducerConfig, ProducerRecord};

const TOPIC_PARTITIONS: i32 = 3;

fn config(bootstrap: &str) -> ProducerConfig {
    let mut config = ProducerConfig::new([bootstrap.to_owned()]);
    config.linger = Duration::from_millis(2);
    config.batch_size = 2_048;
    config.client.retry_backoff = Duration::from_millis(20);
    config.client.request_timeout = Duration::from_millis(2_000);
    config.client.reconnect_backoff = Duration::from_millis(10);
    config.delivery_timeout = Duration::from_secs(20);
    // One batch per partition in flight: the mock checks no sequences of a
    // non-transactional producer (see `read_back`), so a batch pipelined
    // behind one that fails would be appended before its retry, where a real
    // broker answers OUT_OF_ORDER_SEQUENCE_NUMBER. Pipelining with
    // idempotence is tested against Strom's broker (tests/producer_broker.rs)
    // and against a sequence-checking model (the accumulator's proptests).
    config.max_in_flight_requests_per_connection = 1;
    config
}

/// Sends `count` keyed records whose values are `key:sequence-per-key`, and
/// returns (partition, offset, value) in send order.
async fn produce_all(
    producer: &Producer,
    topic: &str,
    count: usize,
    on_half: impl FnOnce(),
) -> Vec<(i32, i64, String)> {
    let mut pending = Vec::with_capacity(count);
    let mut per_key: HashMap<usize, usize> = HashMap::new();
    let mut on_half = Some(on_half);
    for index in 0..count {
        let key = index % 7;
        let sequence = per_key.entry(key).or_insert(0);
        let value = format!("{key}:{sequence}");
        *sequence += 1;
        let record = ProducerRecord::new(topic, value.clone()).with_key(format!("key-{key}"));
        pending.push((value, producer.send(record).await));
        if index == count / 2 {
            if let Some(on_half) = on_half.take() {
                on_half();
            }
        }
    }
    let mut acknowledged = Vec::with_capacity(count);
    for (value, delivery) in pending {
        let metadata = delivery.await.expect("record acknowledged");
        acknowledged.push((metadata.partition, metadata.offset, value));
    }
    acknowledged
}

/// Offsets per partition increase in send order, with no duplicates.
fn assert_in_order(acknowledged: &[(i32, i64, String)]) {
    let mut last: HashMap<i32, i64> = HashMap::new();
    for (partition, offset, value) in acknowledged {
        let previous = last.insert(*partition, *offset);
        assert!(
            previous.is_none_or(|previous| previous < *offset),
            "{value} at {partition}/{offset} after {previous:?}"
        );
    }
}

/// Reads every partition back with librdkafka and checks that each key's
/// values appear exactly once and in order.
///
/// With `tolerate_resent_batches`, a value seen before may appear again (but
/// never one out of order): librdkafka's mock broker checks producer
/// sequences only for transactional producers (`rd_kafka_mock_validate_records`
/// returns early without a TransactionalId), so it appends a resent batch
/// again where a real broker answers DUPLICATE_SEQUENCE_NUMBER.
fn read_back(bootstrap: &str, topic: &str, expected: usize, tolerate_resent_batches: bool) {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strom-verify")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..TOPIC_PARTITIONS {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    consumer.assign(&assignment).expect("assign");
    let mut next_per_key: HashMap<String, usize> = HashMap::new();
    let mut seen = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen < expected && std::time::Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.expect("message");
        let value = std::str::from_utf8(message.payload().expect("value")).expect("utf-8");
        let (key, sequence) = value.split_once(':').expect("key:sequence");
        let next = next_per_key.entry(key.to_owned()).or_insert(0);
        let sequence = sequence.parse::<usize>().expect("number");
        if tolerate_resent_batches && sequence < *next {
            continue;
        }
        assert_eq!(sequence, *next, "key {key} out of order or duplicated");
        *next += 1;
        seen += 1;
    }
    assert_eq!(seen, expected, "records read back");
    if tolerate_resent_batches {
        return;
    }
    match consumer.poll(Duration::from_millis(300)) {
        None => {}
        Some(Ok(extra)) => panic!(
            "extra (duplicate) record {:?} at {}/{}",
            extra.payload().map(String::from_utf8_lossy),
            extra.partition(),
            extra.offset()
        ),
        Some(Err(error)) => panic!("consumer error {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_produce_survives_errors_and_leader_change() {
    let mock = MockCluster::new(3).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    let topic = "orders";
    mock.create_topic(topic, TOPIC_PARTITIONS, 3)
        .expect("topic");
    let producer = Producer::new(config(&bootstrap)).await.expect("producer");
    assert!(producer.is_idempotent(), "the mock supports InitProducerId");
    mock.request_errors(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        ],
    );
    let count = 2_000;
    let acknowledged = tokio::time::timeout(
        Duration::from_secs(30),
        produce_all(&producer, topic, count, || {
            mock.partition_leader(topic, 0, Some(2))
                .expect("leader change");
            mock.partition_leader(topic, 1, Some(3))
                .expect("leader change");
        }),
    )
    .await
    .expect("bounded");
    assert_eq!(acknowledged.len(), count);
    assert_in_order(&acknowledged);
    producer.close(Duration::from_secs(5)).await;
    tokio::task::spawn_blocking(move || read_back(&bootstrap, topic, count, false))
        .await
        .expect("read back");
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeouts_reconnect_and_retry_without_duplicates() {
    let mock = MockCluster::new(3).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    let topic = "slow";
    mock.create_topic(topic, TOPIC_PARTITIONS, 3)
        .expect("topic");
    let mut producer_config = config(&bootstrap);
    producer_config.client.request_timeout = Duration::from_millis(300);
    let producer = Producer::new(producer_config).await.expect("producer");
    // Warm the metadata cache so that only Produce requests are slowed.
    let warm_up = producer
        .send(ProducerRecord::new(topic, "a:0").with_key("key-a"))
        .await;
    tokio::time::timeout(Duration::from_secs(10), warm_up)
        .await
        .expect("bounded")
        .expect("warm-up record");
    for broker in 1..=3 {
        mock.broker_round_trip_time(broker, Duration::from_millis(600))
            .expect("rtt");
    }
    let slow_phase = producer.clone();
    let first = tokio::spawn(async move {
        let mut pending = Vec::new();
        for index in 1..50 {
            let record = ProducerRecord::new("slow", format!("a:{index}")).with_key("key-a");
            pending.push(slow_phase.send(record).await);
        }
        pending
    });
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for broker in 1..=3 {
        mock.broker_round_trip_time(broker, Duration::ZERO)
            .expect("rtt");
    }
    let first = tokio::time::timeout(Duration::from_secs(20), first)
        .await
        .expect("bounded")
        .expect("queued");
    let mut last_offset = -1;
    for delivery in first {
        let metadata = tokio::time::timeout(Duration::from_secs(20), delivery)
            .await
            .expect("bounded")
            .expect("acknowledged after the timeouts");
        assert!(metadata.offset > last_offset || metadata.offset == -1);
        last_offset = last_offset.max(metadata.offset);
    }
    producer.close(Duration::from_secs(5)).await;
    tokio::task::spawn_blocking(move || read_back(&bootstrap, topic, 50, true))
        .await
        .expect("read back");
    drop(mock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_one_and_zero_and_unknown_topic() {
    let mock = MockCluster::new(1).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    mock.create_topic("plain", TOPIC_PARTITIONS, 1)
        .expect("topic");
    for (acks, expect_offsets) in [(Acks::Leader, true), (Acks::None, false)] {
        let mut producer_config = config(&bootstrap);
        producer_config.acks = acks;
        producer_config.max_block = Duration::from_millis(500);
        let producer = Producer::new(producer_config).await.expect("producer");
        assert!(!producer.is_idempotent());
        let delivery = producer
            .send(ProducerRecord::new("plain", "v").with_partition(1))
            .await;
        let metadata = tokio::time::timeout(Duration::from_secs(10), delivery)
            .await
            .expect("bounded")
            .expect("acknowledged");
        assert_eq!(metadata.partition, 1);
        assert_eq!(metadata.offset >= 0, expect_offsets);
        let bad_partition = producer
            .send(ProducerRecord::new("plain", "v").with_partition(99))
            .await
            .await;
        assert!(matches!(
            bad_partition,
            Err(strom_producer::ProduceError::UnknownTopicOrPartition { partition: 99, .. })
        ));
        producer.close(Duration::from_secs(2)).await;
    }
    drop(mock);
}
