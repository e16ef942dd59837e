//! strom-consumer against an in-process Strom broker: `poll` keeps its
//! timeout while the group rebalances (the join runs in its own task), and
//! the members end up sharing the partitions once the slow member rejoins.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use strom_client::admin::{AdminClient, NewTopic};
use strom_client::{ClientConfig, Cluster};
use strom_consumer::{AssignmentStrategy, Consumer, ConsumerConfig, OffsetReset, TopicPartition};

mod common;

/// The limit of the whole test.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

fn consumer_config(bootstrap: &str, strategy: AssignmentStrategy) -> ConsumerConfig {
    let mut config = ConsumerConfig::new([bootstrap.to_owned()]);
    config.group_id = Some("slow-rejoin".to_owned());
    config.auto_offset_reset = OffsetReset::Earliest;
    config.fetch_max_wait = Duration::from_millis(100);
    config.session_timeout = Duration::from_secs(10);
    config.heartbeat_interval = Duration::from_millis(300);
    // The coordinator waits this long for a member that does not rejoin.
    config.max_poll_interval = Duration::from_secs(40);
    config.assignment_strategies = vec![strategy];
    config
}

/// Polls until the consumer owns some partition.
async fn poll_until_assigned(consumer: &mut Consumer) -> Vec<TopicPartition> {
    let started = Instant::now();
    while consumer.assignment().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no assignment in 20 s"
        );
        consumer
            .poll(Duration::from_millis(200))
            .await
            .expect("poll");
    }
    consumer.assignment()
}

async fn poll_keeps_its_timeout_while_the_group_rebalances(strategy: AssignmentStrategy) {
    let test_broker = common::start_broker(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let bootstrap = test_broker.bootstrap.clone();
    let cluster = Cluster::connect(ClientConfig::new([bootstrap.clone()]))
        .await
        .expect("admin connects");
    let admin = AdminClient::new(cluster, Duration::from_secs(10));
    admin
        .create_topics(&[NewTopic::new("shared", 4, 1)], false)
        .await
        .expect("CreateTopics answered")
        .remove("shared")
        .expect("an outcome")
        .expect("created");

    let mut first = Consumer::new(consumer_config(&bootstrap, strategy))
        .await
        .expect("first consumer");
    first.subscribe(["shared"]).expect("subscribe");
    assert_eq!(poll_until_assigned(&mut first).await.len(), 4);

    // The second member's join puts the group in a rebalance that waits for
    // the first member, which does not poll (so does not rejoin) for now.
    let mut second = Consumer::new(consumer_config(&bootstrap, strategy))
        .await
        .expect("second consumer");
    second.subscribe(["shared"]).expect("subscribe");
    for _ in 0..3 {
        let started = Instant::now();
        let records = second.poll(Duration::from_millis(500)).await.expect("poll");
        let took = started.elapsed();
        assert!(records.is_empty());
        assert!(
            took < Duration::from_millis(2_500),
            "poll(500 ms) took {took:?} while the group rebalanced"
        );
    }
    assert!(second.assignment().is_empty());

    // Once the first member polls again, both finish the rebalance and
    // share the four partitions.
    let started = Instant::now();
    loop {
        first.poll(Duration::from_millis(100)).await.expect("poll");
        second.poll(Duration::from_millis(100)).await.expect("poll");
        let mine: BTreeSet<TopicPartition> = first.assignment().into_iter().collect();
        let yours: BTreeSet<TopicPartition> = second.assignment().into_iter().collect();
        if mine.len() + yours.len() == 4 && !mine.is_empty() && !yours.is_empty() {
            assert!(mine.is_disjoint(&yours), "{mine:?} {yours:?}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no shared assignment in 30 s: {mine:?} {yours:?}"
        );
    }
    first.close().await.expect("close");
    second.close().await.expect("close");
    test_broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_keeps_its_timeout_during_an_eager_rebalance() {
    tokio::time::timeout(
        TEST_TIMEOUT,
        poll_keeps_its_timeout_while_the_group_rebalances(AssignmentStrategy::Range),
    )
    .await
    .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_keeps_its_timeout_during_a_cooperative_rebalance() {
    tokio::time::timeout(
        TEST_TIMEOUT,
        poll_keeps_its_timeout_while_the_group_rebalances(AssignmentStrategy::CooperativeSticky),
    )
    .await
    .expect("in time");
}
