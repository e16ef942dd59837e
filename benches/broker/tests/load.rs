//! `strom-load` against an in-process broker: what is produced is read back.

use std::collections::BTreeMap;

use strom_bench::admin::{end_offsets, end_offsets_at, ensure_topic};
use strom_bench::connection::Connection;
use strom_bench::fetch::{run_fetch, FetchSettings};
use strom_bench::produce::{run_produce, ProduceSettings};
use strom_bench::LoadError;
use strom_broker::BrokerConfig;
use strom_protocol::records::Compression;

fn config(dir: &std::path::Path) -> BrokerConfig {
    let mut map = BTreeMap::new();
    map.insert("listeners".to_owned(), "PLAINTEXT://127.0.0.1:0".to_owned());
    map.insert("log.dirs".to_owned(), dir.display().to_string());
    BrokerConfig::from_map(&map).expect("valid config").0
}

fn produce_settings(topic: &str, acks: i16, compression: Compression) -> ProduceSettings {
    ProduceSettings {
        topic: topic.to_owned(),
        partitions: 3,
        record_bytes: 100,
        records_per_batch: 50,
        compression,
        acks,
        in_flight: 4,
        records: Some(1_000),
        duration: None,
        requests_per_second: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produced_records_are_fetched_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let address = broker.local_addresses()[0].to_string();
    let run = async {
        for (topic, acks, compression) in [
            ("load-acks-1", 1, Compression::None),
            ("load-acks-all", -1, Compression::Lz4),
        ] {
            let mut connection = Connection::connect(&address).await.unwrap();
            assert_eq!(ensure_topic(&mut connection, topic, 3).await.unwrap(), 3);
            // Creating it again is not an error.
            assert_eq!(ensure_topic(&mut connection, topic, 3).await.unwrap(), 3);
            let produced = run_produce(connection, &produce_settings(topic, acks, compression))
                .await
                .unwrap();
            // 1,000 records in requests of 150: 7 requests.
            assert_eq!(produced.records, 1_050);
            assert_eq!(produced.latency.count, 7);

            let mut connection = Connection::connect(&address).await.unwrap();
            assert_eq!(
                end_offsets(&mut connection, topic, 3).await.unwrap(),
                vec![350; 3]
            );
            // Without transactions the last stable offset is the high
            // watermark: read_committed reads everything too.
            assert_eq!(
                end_offsets_at(&mut connection, topic, 3, 1).await.unwrap(),
                vec![350; 3]
            );
            for isolation_level in [0, 1] {
                let fetched = run_fetch(
                    &mut connection,
                    &FetchSettings {
                        topic: topic.to_owned(),
                        partitions: 3,
                        max_bytes: 1 << 20,
                        partition_max_bytes: 1_000,
                        max_wait_ms: 100,
                        isolation_level,
                    },
                )
                .await
                .unwrap();
                assert_eq!(fetched.records, 1_050);
                assert!(
                    fetched.latency.count > 1,
                    "small partition_max_bytes needs several fetches"
                );
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .expect("load test timed out");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_a_missing_partition_fails() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let address = broker.local_addresses()[0].to_string();
    let mut connection = Connection::connect(&address).await.unwrap();
    ensure_topic(&mut connection, "one-partition", 1)
        .await
        .unwrap();
    let mut settings = produce_settings("one-partition", 1, Compression::None);
    settings.partitions = 2;
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        run_produce(connection, &settings),
    )
    .await
    .expect("produce timed out");
    assert!(
        matches!(outcome, Err(LoadError::Broker { partition: 1, .. })),
        "{outcome:?}"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_produce_sends_at_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let address = broker.local_addresses()[0].to_string();
    let mut connection = Connection::connect(&address).await.unwrap();
    ensure_topic(&mut connection, "paced", 3).await.unwrap();
    let mut settings = produce_settings("paced", 1, Compression::None);
    // 7 requests at 20 per second: the last is due 300 ms after the first.
    settings.requests_per_second = Some(20);
    let produced = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        run_produce(connection, &settings),
    )
    .await
    .expect("paced produce timed out")
    .unwrap();
    assert_eq!(produced.latency.count, 7);
    assert!(
        produced.elapsed >= std::time::Duration::from_millis(300),
        "7 requests at 20/s took {:?}",
        produced.elapsed
    );
    broker.shutdown().await;
}
