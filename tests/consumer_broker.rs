//! strom-consumer against an in-process Strom broker: `poll` keeps its
//! timeout while the group rebalances (the join runs in its own task), and
//! the members end up sharing the partitions once the slow member rejoins;
//! a cooperative member keeps reading the partitions it owns while the group
//! rebalances, and its commits wait for the rebalance (KIP-429).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use strom_client::admin::{AdminClient, NewTopic};
use strom_client::{ClientConfig, Cluster};
use strom_consumer::{
    AssignmentStrategy, Consumer, ConsumerConfig, ConsumerError, OffsetReset, TopicPartition,
};
use strom_producer::{Producer, ProducerConfig, ProducerRecord};

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

/// A broker without the initial rebalance delay, with the 4-partition topic
/// `shared`.
async fn broker_with_shared_topic() -> common::TestBroker {
    let test_broker = common::start_broker(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let cluster = Cluster::connect(ClientConfig::new([test_broker.bootstrap.clone()]))
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
    test_broker
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
    let test_broker = broker_with_shared_topic().await;
    let bootstrap = test_broker.bootstrap.clone();

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

/// Polls every consumer until together they own `partitions` partitions,
/// none of them twice, and none is rebalancing.
async fn poll_until_shared(consumers: &mut [&mut Consumer], partitions: usize) {
    let started = Instant::now();
    loop {
        let mut owned = BTreeSet::new();
        let mut total = 0;
        let mut settled = true;
        for consumer in consumers.iter_mut() {
            consumer
                .poll(Duration::from_millis(100))
                .await
                .expect("poll");
            let mine = consumer.assignment();
            settled &= !mine.is_empty() && !consumer.rebalance_in_progress();
            total += mine.len();
            owned.extend(mine);
        }
        if settled && total == partitions && owned.len() == partitions {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no shared assignment in 30 s: {owned:?}"
        );
    }
}

async fn cooperative_member_reads_and_defers_commits_while_rebalancing() {
    let test_broker = broker_with_shared_topic().await;
    let bootstrap = test_broker.bootstrap.clone();
    let strategy = AssignmentStrategy::CooperativeSticky;
    let mut first = Consumer::new(consumer_config(&bootstrap, strategy))
        .await
        .expect("first consumer");
    first.subscribe(["shared"]).expect("subscribe");
    let mut second = Consumer::new(consumer_config(&bootstrap, strategy))
        .await
        .expect("second consumer");
    second.subscribe(["shared"]).expect("subscribe");
    poll_until_shared(&mut [&mut first, &mut second], 4).await;
    let owned: BTreeSet<TopicPartition> = first.assignment().into_iter().collect();

    // A third member joins. The group then waits for `second`, which does
    // not poll for now, so `first` stays in its rebalance once it has
    // noticed it.
    let mut third = Consumer::new(consumer_config(&bootstrap, strategy))
        .await
        .expect("third consumer");
    third.subscribe(["shared"]).expect("subscribe");
    third.poll(Duration::from_millis(100)).await.expect("poll");
    let started = Instant::now();
    while !first.rebalance_in_progress() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the first member did not notice the rebalance in 10 s"
        );
        first.poll(Duration::from_millis(100)).await.expect("poll");
    }
    let refused = first.commit_sync().await;
    assert!(
        matches!(refused, Err(ConsumerError::RebalanceInProgress)),
        "a commit during the rebalance: {refused:?}"
    );

    // Records for the partitions `first` owns arrive while it rebalances.
    let mut config = ProducerConfig::new([bootstrap.clone()]);
    config.linger = Duration::ZERO;
    let producer = Producer::new(config).await.expect("producer connects");
    for tp in &owned {
        for index in 0..5 {
            let record = ProducerRecord::new("shared", format!("during-{index}"))
                .with_partition(tp.partition);
            producer
                .send(record)
                .await
                .await
                .expect("record acknowledged");
        }
    }
    let mut read: BTreeSet<(i32, i64)> = BTreeSet::new();
    let started = Instant::now();
    while read.len() < owned.len() * 5 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "read {read:?} of 5 records on each of {owned:?} in 10 s"
        );
        for record in first.poll(Duration::from_millis(100)).await.expect("poll") {
            assert!(
                owned.contains(&TopicPartition::new("shared", record.partition)),
                "a record of partition {} that the first member does not own",
                record.partition
            );
            read.insert((record.partition, record.offset));
        }
        assert!(
            first.rebalance_in_progress(),
            "the rebalance finished without the second member"
        );
    }

    // Once `second` polls again the rebalance finishes; commits work again.
    poll_until_shared(&mut [&mut first, &mut second, &mut third], 4).await;
    first
        .commit_sync()
        .await
        .expect("commit after the rebalance");
    producer.close(Duration::from_secs(5)).await;
    for consumer in [&mut first, &mut second, &mut third] {
        consumer.close().await.expect("close");
    }
    test_broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_member_reads_its_partitions_and_defers_commits_while_rebalancing() {
    tokio::time::timeout(
        TEST_TIMEOUT,
        cooperative_member_reads_and_defers_commits_while_rebalancing(),
    )
    .await
    .expect("in time");
}
