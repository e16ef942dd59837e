//! Runs every example against a broker on 127.0.0.1 (one the example starts
//! itself, or one this test starts), each bounded in time, and checks what
//! it reports, so that no example rots.
//!
//! The example files are compiled into this test as modules: the test calls
//! the same functions their `main` calls.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use strom_broker::{BrokerConfig, RunningBroker};
use strom_client::{AdminClient, ClientConfig, Cluster};
use strom_producer::ProduceError;

#[allow(dead_code)]
#[path = "../admin.rs"]
mod admin;
#[allow(dead_code)]
#[path = "../consume.rs"]
mod consume;
#[allow(dead_code)]
#[path = "../embedded_broker.rs"]
mod embedded_broker;
#[allow(dead_code)]
#[path = "../in_process.rs"]
mod in_process;
#[allow(dead_code)]
#[path = "../produce.rs"]
mod produce;

/// The bound of one example's run.
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs an example's future within [`EXAMPLE_TIMEOUT`] and returns its
/// report; a failure or a timeout fails the test with the example's name.
async fn bounded<T>(
    name: &str,
    example: impl std::future::Future<Output = Result<T, Box<dyn std::error::Error>>>,
) -> T {
    match tokio::time::timeout(EXAMPLE_TIMEOUT, example).await {
        Ok(Ok(report)) => report,
        Ok(Err(error)) => panic!("example {name} failed: {error}"),
        Err(_) => panic!("example {name} did not finish within {EXAMPLE_TIMEOUT:?}"),
    }
}

/// A broker for the client examples: three partitions per topic, so keys
/// spread, and no wait before a group's first rebalance.
async fn start_broker(data: &std::path::Path) -> RunningBroker {
    let config = BrokerConfig::builder()
        .listener("127.0.0.1:0")
        .log_dir(data)
        .num_partitions(3)
        .offsets_topic_num_partitions(3)
        .group_initial_rebalance_delay(Duration::ZERO)
        .build()
        .expect("valid configuration");
    strom_broker::start(config).await.expect("broker starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_broker_starts_answers_clients_and_stops() {
    let embedded = bounded("embedded_broker", embedded_broker::start()).await;
    let address = embedded.address().expect("a listener");
    assert!(
        address.ip().is_loopback() && address.port() != 0,
        "{address}"
    );
    let data = embedded.data.path().to_owned();
    let cluster = Cluster::connect(ClientConfig::new([address.to_string()]))
        .await
        .expect("connects");
    let described = AdminClient::new(cluster, Duration::from_secs(5))
        .describe_cluster()
        .await
        .expect("describe cluster");
    assert_eq!(described.brokers.len(), 1, "{described:?}");
    assert_eq!(described.brokers[0].port, address.port());
    bounded("embedded_broker", embedded.stop()).await;
    assert!(!data.exists(), "the data directory is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_admin_examples_against_one_broker() {
    let data = tempfile::tempdir().expect("temporary directory");
    let broker = start_broker(data.path()).await;
    let bootstrap = broker.local_addresses()[0].to_string();

    let deliveries = bounded("produce", produce::run(&bootstrap, 3)).await;
    check_deliveries(&deliveries);

    let stop = consume::StopWhen {
        idle: Duration::from_secs(3),
        total: Duration::from_secs(60),
    };
    let consumed = bounded("consume", consume::run(&bootstrap, stop)).await;
    check_consumed(&consumed, &deliveries);
    // The group committed what it read: a second run reads nothing.
    let again = bounded("consume", consume::run(&bootstrap, stop)).await;
    assert!(again.records.is_empty(), "{:?}", again.records);

    let report = bounded("admin", admin::run(&bootstrap)).await;
    check_admin(&report);
    broker.shutdown().await;
}

/// Nine keyed records delivered, in order per key, each key in one
/// partition; the oversized record refused.
fn check_deliveries(deliveries: &produce::Deliveries) {
    assert_eq!(deliveries.delivered.len(), 9, "{deliveries:?}");
    for customer in produce::CUSTOMERS {
        let placed: Vec<(i32, i64)> = deliveries
            .delivered
            .iter()
            .filter(|(key, _)| key == customer)
            .map(|(_, metadata)| (metadata.partition, metadata.offset))
            .collect();
        assert_eq!(placed.len(), 3, "{customer}: {placed:?}");
        assert!(
            placed
                .windows(2)
                .all(|pair| pair[0].0 == pair[1].0 && pair[0].1 < pair[1].1),
            "{customer}: one partition, increasing offsets: {placed:?}"
        );
    }
    assert!(
        matches!(
            deliveries.failed.as_slice(),
            [(key, ProduceError::RecordTooLarge { .. })] if key == "dave"
        ),
        "{:?}",
        deliveries.failed
    );
}

/// Every delivered record read once, the topic's partitions assigned then
/// revoked on close, and the offsets after the last records committed.
fn check_consumed(consumed: &consume::Consumed, deliveries: &produce::Deliveries) {
    let delivered: BTreeSet<(i32, i64)> = deliveries
        .delivered
        .iter()
        .map(|(_, metadata)| (metadata.partition, metadata.offset))
        .collect();
    let read: BTreeSet<(i32, i64)> = consumed
        .records
        .iter()
        .map(|record| (record.partition, record.offset))
        .collect();
    assert_eq!(read, delivered);
    assert_eq!(consumed.records.len(), delivered.len(), "each record once");
    let all: Vec<strom_consumer::TopicPartition> = (0..3)
        .map(|partition| strom_consumer::TopicPartition::new(consume::TOPIC, partition))
        .collect();
    assert_eq!(
        consumed.rebalances.first(),
        Some(&consume::Rebalance::Assigned(all.clone())),
        "{:?}",
        consumed.rebalances
    );
    assert_eq!(
        consumed.rebalances.last(),
        Some(&consume::Rebalance::Revoked(all)),
        "{:?}",
        consumed.rebalances
    );
    let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset) in delivered {
        ends.insert(partition, offset + 1);
    }
    for (partition, end) in ends {
        let committed = consumed.committed.get(&strom_consumer::TopicPartition::new(
            consume::TOPIC,
            partition,
        ));
        assert_eq!(committed, Some(&end), "partition {partition}");
    }
}

/// The topic created with three led partitions, its setting changed, the
/// consume example's group listed, and the topic deleted.
fn check_admin(report: &admin::AdminReport) {
    assert_eq!(
        report.leaders.len(),
        admin::PARTITIONS as usize,
        "{report:?}"
    );
    assert!(report.leaders.values().all(|leader| *leader == Some(1)));
    assert_eq!(report.retention_ms_created.as_deref(), Some("3600000"));
    assert_eq!(report.retention_ms_altered.as_deref(), Some("7200000"));
    assert!(
        report
            .groups
            .iter()
            .any(|group| group.group_id == consume::GROUP && group.protocol_type == "consumer"),
        "{:?}",
        report.groups
    );
    assert!(report.deleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_example_produces_consumes_and_commits() {
    let summary = bounded("in_process", in_process::run()).await;
    let produced: usize = summary.produced.values().sum();
    assert_eq!(produced, in_process::RECORDS, "{summary:?}");
    assert_eq!(summary.consumed, summary.produced, "{summary:?}");
    // Offsets start at 0 in each partition: the committed offset is the
    // number of records (0, or no commit at all, for a partition no key
    // went to).
    for partition in 0..in_process::PARTITIONS {
        let produced = summary.produced.get(&partition).copied().unwrap_or(0);
        let committed = summary.committed.get(&partition).copied().unwrap_or(-1);
        assert_eq!(committed.max(0), produced as i64, "{summary:?}");
    }
}
