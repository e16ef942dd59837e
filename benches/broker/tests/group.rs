//! `strom-load group` against an in-process broker: every member of every
//! round gets an assignment in one generation, and commits are acknowledged
//! and read back.

use std::collections::BTreeMap;
use std::time::Duration;

use strom_bench::admin::ensure_topic;
use strom_bench::commit::{run_commit, CommitSettings};
use strom_bench::connection::Connection;
use strom_bench::group::{find_coordinator, run_rebalance, RebalanceSettings};
use strom_broker::BrokerConfig;

fn config(dir: &std::path::Path) -> BrokerConfig {
    let mut map = BTreeMap::new();
    map.insert("listeners".to_owned(), "PLAINTEXT://127.0.0.1:0".to_owned());
    map.insert("log.dirs".to_owned(), dir.display().to_string());
    map.insert(
        "group.initial.rebalance.delay.ms".to_owned(),
        "0".to_owned(),
    );
    BrokerConfig::from_map(&map).expect("valid config").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_of_every_round_is_assigned() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let address = broker.local_addresses()[0].to_string();
    let settings = RebalanceSettings {
        members: 5,
        rounds: 3,
        topic: "group-topic".to_owned(),
        partitions: 12,
        group_prefix: "rebalance-test".to_owned(),
    };
    let report = tokio::time::timeout(Duration::from_secs(60), run_rebalance(&address, &settings))
        .await
        .expect("rebalance timed out")
        .unwrap();
    assert_eq!(report.members, 5);
    assert_eq!(report.rounds.len(), 3);
    for round in &report.rounds {
        assert_eq!(round.members_assigned, 5, "{round:?}");
        assert_eq!(round.partitions_assigned, 12, "{round:?}");
        assert!(round.generation_id >= 1, "{round:?}");
        assert!(round.rebalance < Duration::from_secs(30), "{round:?}");
    }
    let (min, median, max) = report.min_median_max();
    assert!(min <= median && median <= max);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_are_acknowledged_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let address = broker.local_addresses()[0].to_string();
    let run = async {
        let mut connection = Connection::connect(&address).await.unwrap();
        assert_eq!(
            ensure_topic(&mut connection, "commit-topic", 4)
                .await
                .unwrap(),
            4
        );
        let coordinator = find_coordinator(&mut connection, "commit-test")
            .await
            .unwrap();
        assert_eq!(coordinator, address);
        let settings = CommitSettings {
            group: "commit-test".to_owned(),
            topic: "commit-topic".to_owned(),
            partitions: 4,
            in_flight: 4,
            duration: Duration::from_millis(500),
        };
        run_commit(connection, &settings).await.unwrap()
    };
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("commit timed out");
    assert!(report.requests > 0);
    assert_eq!(report.offsets, report.requests * 4);
    assert_eq!(report.latency.count as u64, report.requests);
    // Request n commits offset n: the last one is requests - 1.
    assert_eq!(report.read_back, report.requests as i64 - 1);
    broker.shutdown().await;
}
