//! strom-producer against an in-process Strom broker: acks 0, 1 and all,
//! idempotence with several batches in flight, and batches the broker finds
//! too large (split and retried) next to a record that is too large alone.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use strom_broker::RunningBroker;
use strom_client::admin::{AdminClient, NewTopic, OffsetSpec};
use strom_client::{ClientConfig, Cluster};
use strom_producer::{ProduceError, Producer, ProducerConfig, ProducerRecord, RecordMetadata};

mod common;

/// The limit of every test's whole run.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

struct Harness {
    _dir: tempfile::TempDir,
    broker: RunningBroker,
    bootstrap: String,
}

impl Harness {
    async fn start() -> Harness {
        let common::TestBroker {
            _dir: dir,
            broker,
            bootstrap,
        } = common::start_broker(&[]).await;
        Harness {
            _dir: dir,
            broker,
            bootstrap,
        }
    }

    async fn admin(&self) -> AdminClient {
        let cluster = Cluster::connect(ClientConfig::new([self.bootstrap.clone()]))
            .await
            .expect("admin connects");
        AdminClient::new(cluster, Duration::from_secs(10))
    }

    async fn create_topic(&self, topic: NewTopic) {
        let name = topic.name.clone();
        let mut outcomes = self
            .admin()
            .await
            .create_topics(&[topic], false)
            .await
            .expect("CreateTopics answered");
        outcomes
            .remove(&name)
            .expect("an outcome for the topic")
            .expect("topic created");
    }

    async fn end_offset(&self, topic: &str, partition: i32) -> i64 {
        self.admin()
            .await
            .list_offset(topic, partition, OffsetSpec::Latest)
            .await
            .expect("ListOffsets answered")
            .offset
    }

    async fn producer(&self, properties: &[(&str, &str)]) -> Producer {
        let mut config = ProducerConfig::new([self.bootstrap.clone()]);
        for (key, value) in properties {
            assert!(config.set(key, value).expect("valid property"), "{key}");
        }
        Producer::new(config).await.expect("producer connects")
    }
}

fn keyed(topic: &str, index: usize) -> ProducerRecord {
    ProducerRecord::new(topic, format!("value-{index}"))
        .with_key(format!("key-{}", index % 40))
        .with_header("index", Some(Bytes::from(index.to_string())))
}

/// Sends every record, then awaits every outcome in send order.
async fn send_all(producer: &Producer, records: Vec<ProducerRecord>) -> Vec<RecordMetadata> {
    let mut deliveries = Vec::with_capacity(records.len());
    for record in records {
        deliveries.push(producer.send(record).await);
    }
    let mut acknowledged = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        acknowledged.push(delivery.await.expect("record acknowledged"));
    }
    acknowledged
}

/// Checks that, per partition, the acknowledged offsets in send order are
/// 0, 1, 2, ... (every record written once, in order); returns the counts.
fn assert_consecutive_per_partition(acknowledged: &[RecordMetadata]) -> HashMap<i32, i64> {
    let mut next: HashMap<i32, i64> = HashMap::new();
    for metadata in acknowledged {
        let expected = next.entry(metadata.partition).or_insert(0);
        assert_eq!(
            metadata.offset, *expected,
            "partition {} acknowledged out of order",
            metadata.partition
        );
        *expected += 1;
    }
    next
}

async fn assert_end_offsets(harness: &Harness, topic: &str, counts: &HashMap<i32, i64>) {
    for (&partition, &count) in counts {
        assert_eq!(
            harness.end_offset(topic, partition).await,
            count,
            "{topic}-{partition}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_one_and_all_acknowledge_every_record_once_in_order() {
    let run = async {
        let harness = Harness::start().await;
        for (topic, acks) in [("acks-1", "1"), ("acks-all", "all")] {
            harness.create_topic(NewTopic::new(topic, 3, 1)).await;
            let producer = harness
                .producer(&[("acks", acks), ("enable.idempotence", "false")])
                .await;
            assert!(!producer.is_idempotent());
            let records = (0..3_000).map(|index| keyed(topic, index)).collect();
            let acknowledged = send_all(&producer, records).await;
            let counts = assert_consecutive_per_partition(&acknowledged);
            assert_eq!(counts.len(), 3, "40 keys reach every partition");
            assert_eq!(counts.values().sum::<i64>(), 3_000);
            assert_end_offsets(&harness, topic, &counts).await;
            producer.close(Duration::from_secs(5)).await;
        }
        harness.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_writes_every_record_without_offsets() {
    let run = async {
        let harness = Harness::start().await;
        harness.create_topic(NewTopic::new("acks-0", 2, 1)).await;
        let producer = harness.producer(&[("acks", "0")]).await;
        let records = (0..2_000)
            .map(|index| keyed("acks-0", index).with_partition((index % 2) as i32))
            .collect();
        let acknowledged = send_all(&producer, records).await;
        assert!(acknowledged.iter().all(|metadata| metadata.offset == -1));
        producer.flush().await;
        // Nothing tells an acks=0 producer when the broker appended: poll.
        loop {
            let written =
                harness.end_offset("acks-0", 0).await + harness.end_offset("acks-0", 1).await;
            assert!(written <= 2_000, "{written} records written of 2000");
            if written == 2_000 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        producer.close(Duration::from_secs(5)).await;
        harness.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_with_many_small_batches_writes_each_record_once_in_order() {
    let run = async {
        let harness = Harness::start().await;
        harness
            .create_topic(NewTopic::new("idempotent", 4, 1))
            .await;
        // Small batches and no linger: many requests per connection in flight.
        let producer = harness
            .producer(&[
                ("enable.idempotence", "true"),
                ("max.in.flight.requests.per.connection", "5"),
                ("batch.size", "1024"),
                ("linger.ms", "0"),
                ("compression.type", "lz4"),
            ])
            .await;
        assert!(producer.is_idempotent());
        let records = (0..20_000)
            .map(|index| keyed("idempotent", index))
            .collect();
        let acknowledged = send_all(&producer, records).await;
        let counts = assert_consecutive_per_partition(&acknowledged);
        assert_eq!(counts.values().sum::<i64>(), 20_000);
        assert_end_offsets(&harness, "idempotent", &counts).await;
        producer.close(Duration::from_secs(5)).await;
        harness.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_too_large_for_the_topic_are_split_and_a_lone_large_record_fails() {
    let run = async {
        let harness = Harness::start().await;
        harness
            .create_topic(
                NewTopic::new("small-messages", 1, 1).with_config("max.message.bytes", "2048"),
            )
            .await;
        for idempotence in ["true", "false"] {
            // One 64 KiB batch of 200-byte records: the broker refuses it
            // (MESSAGE_TOO_LARGE) until it is split below 2 KiB.
            let producer = harness
                .producer(&[
                    ("enable.idempotence", idempotence),
                    ("batch.size", "65536"),
                    ("linger.ms", "50"),
                ])
                .await;
            let before = harness.end_offset("small-messages", 0).await;
            let records = (0..300)
                .map(|index| {
                    ProducerRecord::new("small-messages", vec![b'x'; 200]).with_timestamp_ms(index)
                })
                .collect();
            let acknowledged = send_all(&producer, records).await;
            let offsets: Vec<i64> = acknowledged
                .iter()
                .map(|metadata| metadata.offset)
                .collect();
            let expected: Vec<i64> = (before..before + 300).collect();
            assert_eq!(offsets, expected);
            let timestamps: Vec<i64> = acknowledged
                .iter()
                .map(|metadata| metadata.timestamp_ms)
                .collect();
            assert_eq!(timestamps, (0..300).collect::<Vec<i64>>());
            assert_eq!(harness.end_offset("small-messages", 0).await, before + 300);

            // A record above the topic's limit alone is a typed error on
            // its own future; the records around it are written.
            let small = producer
                .send(ProducerRecord::new("small-messages", "a"))
                .await;
            let large = producer
                .send(ProducerRecord::new("small-messages", vec![b'y'; 4_000]))
                .await;
            let after = producer
                .send(ProducerRecord::new("small-messages", "b"))
                .await;
            small.await.expect("small record before");
            assert!(matches!(
                large.await,
                Err(ProduceError::RecordTooLarge { size_bytes }) if size_bytes > 4_000
            ));
            after.await.expect("small record after");
            producer.close(Duration::from_secs(5)).await;
        }
        harness.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_lets_the_broker_create_a_missing_topic_and_admin_does_not() {
    let run = async {
        let harness = Harness::start().await;
        // The admin client's metadata never creates a topic it looks at.
        let admin = harness.admin().await;
        let looked_at = admin.list_offset("looked-at", 0, OffsetSpec::Latest).await;
        assert!(looked_at.is_err(), "{looked_at:?}");
        let producer = harness.producer(&[("max.block.ms", "10000")]).await;
        let acknowledged = send_all(
            &producer,
            (0..10).map(|index| keyed("auto-created", index)).collect(),
        )
        .await;
        assert_eq!(acknowledged.len(), 10);
        let counts = assert_consecutive_per_partition(&acknowledged);
        assert_end_offsets(&harness, "auto-created", &counts).await;
        producer.close(Duration::from_secs(5)).await;
        let again = admin.list_offset("looked-at", 0, OffsetSpec::Latest).await;
        assert!(again.is_err(), "still missing: {again:?}");
        harness.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}
