//! The metadata quorum with several voters in one process, over the
//! in-process network: elections, failover, catching up, snapshots, loss
//! of the majority, and commands refused where they must be.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use strom_controller::error::RuntimeError;
use strom_controller::ControllerClient;
use support::{request, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_one_active_controller_and_replicate_commands() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    for node in cluster.nodes.values() {
        let status = node.status();
        assert_eq!(status.voters.len(), 3);
    }
    cluster.create_topic("orders").await.expect("committed");
    for id in 1..=3 {
        cluster.wait_for_topics(id, 1).await;
        assert!(cluster.nodes[&id].image().topic_by_name("orders").is_some());
    }
    let status = leader.status();
    assert!(status.is_active);
    assert_eq!(status.leader, Some(leader.node_id()));
    assert!(
        status.high_watermark >= 2,
        "a blank entry and the command: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_commands_and_names_the_active_controller() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    // Give the followers a heartbeat to learn the leader.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let follower = cluster
        .nodes
        .values()
        .find(|node| node.node_id() != leader.node_id())
        .expect("a follower");
    match follower.create_topics(request("refused")).await {
        Err(RuntimeError::NotController { leader: named }) => {
            assert_eq!(named, Some(leader.node_id()));
        }
        other => panic!("expected NotController, got {other:?}"),
    }
    assert!(leader.image().topic_by_name("refused").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_controller_dies_another_takes_over_and_the_dead_one_catches_up() {
    let mut cluster = Cluster::start(3).await;
    cluster.create_topic("before").await.expect("committed");
    let first = cluster.leader().await.node_id();
    cluster.kill(first).await;
    let second = cluster.leader().await;
    assert_ne!(second.node_id(), first);
    // A new active controller applies what was committed before it once
    // its own first entry commits.
    cluster.wait_for_topics(second.node_id(), 1).await;
    assert!(
        second.image().topic_by_name("before").is_some(),
        "committed metadata survives"
    );
    cluster
        .create_topic("after")
        .await
        .expect("committed by the new controller");

    cluster.restart(first).await;
    cluster.wait_for_topics(first, 2).await;
    let image = cluster.nodes[&first].image();
    assert!(image.topic_by_name("before").is_some());
    assert!(image.topic_by_name("after").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_majority_writes_time_out_and_resume_when_a_voter_returns() {
    let mut cluster = Cluster::start(3).await;
    cluster.create_topic("kept").await.expect("committed");
    let leader = cluster.leader().await.node_id();
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for id in &others {
        cluster.kill(*id).await;
    }
    let started = std::time::Instant::now();
    let survivor = Arc::clone(&cluster.nodes[&leader]);
    let result = survivor.create_topics(request("lonely")).await;
    assert!(
        matches!(
            result,
            Err(RuntimeError::QuorumTimeout { .. } | RuntimeError::NoMajority)
        ),
        "got {result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "fails within the request timeout"
    );
    assert!(
        survivor.image().topic_by_name("lonely").is_none(),
        "nothing applied"
    );

    cluster.restart(others[0]).await;
    cluster
        .create_topic("resumed")
        .await
        .expect("a majority again");
    let image = cluster.leader().await.image();
    assert!(image.topic_by_name("kept").is_some());
    assert!(image.topic_by_name("resumed").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_far_behind_installs_a_snapshot() {
    let mut cluster = Cluster::start_with(3, 10, 7).await;
    let leader = cluster.leader().await.node_id();
    let behind = (1..=3).find(|id| *id != leader).expect("a follower");
    cluster.kill(behind).await;
    for index in 0..40 {
        cluster
            .create_topic(&format!("topic-{index}"))
            .await
            .expect("committed");
    }
    let status = cluster.leader().await.status();
    assert!(status.high_watermark > 40);
    cluster.restart(behind).await;
    cluster.wait_for_topics(behind, 40).await;
    assert_eq!(
        *cluster.nodes[&behind].image(),
        *cluster.leader().await.image(),
        "the snapshot and the log after it rebuild the same image"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_quorum_restarts_with_every_committed_topic() {
    let mut cluster = Cluster::start(3).await;
    for index in 0..5 {
        cluster
            .create_topic(&format!("t{index}"))
            .await
            .expect("committed");
    }
    for id in 1..=3 {
        cluster.kill(id).await;
    }
    for id in 1..=3 {
        cluster.restart(id).await;
    }
    cluster
        .create_topic("after-restart")
        .await
        .expect("committed");
    for id in 1..=3 {
        cluster.wait_for_topics(id, 6).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_voter_quorum_commits_alone() {
    let cluster = Cluster::start(1).await;
    cluster.create_topic("solo").await.expect("committed");
    assert!(cluster.nodes[&1].image().topic_by_name("solo").is_some());
}

/// Three voters in one process, talking over TCP on 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_over_tcp_fail_over_and_catch_up() {
    use strom_clock::{SeededRandom, SystemClock};
    use strom_controller::quorum::tcp::{serve, TcpTransport};
    use strom_controller::quorum::{QuorumConfig, QuorumController};

    let directory = tempfile::tempdir().expect("tempdir");
    let mut listeners = Vec::new();
    let mut voters = std::collections::BTreeMap::new();
    for id in 1..=3u64 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        voters.insert(id, listener.local_addr().expect("address").to_string());
        listeners.push((id, listener));
    }
    let mut nodes = std::collections::BTreeMap::new();
    let mut servers = std::collections::BTreeMap::new();
    for (id, listener) in listeners {
        let config = QuorumConfig::new(id, voters.clone(), directory.path().join(id.to_string()));
        let node = QuorumController::start(
            config,
            Arc::new(TcpTransport::new()),
            Arc::new(SystemClock),
            Arc::new(SeededRandom::new(id)),
        )
        .await
        .expect("start");
        servers.insert(id, tokio::spawn(serve(listener, Arc::clone(&node))));
        nodes.insert(id, node);
    }
    let active = |nodes: &std::collections::BTreeMap<u64, Arc<QuorumController>>| {
        nodes.values().find(|node| node.is_active()).cloned()
    };
    let mut leader = None;
    for _ in 0..200 {
        leader = active(&nodes);
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let leader = leader.expect("an active controller over TCP");
    let killed = leader.node_id();
    let killed_epoch = leader.status().epoch;
    servers.remove(&killed).expect("server").abort();
    leader.shutdown().await;
    nodes.remove(&killed);
    // A node may still believe it leads an older term for a moment; the
    // successor is the one active in a later term than the killed one.
    let mut successor = None;
    for _ in 0..1_200 {
        successor = nodes
            .values()
            .find(|node| node.is_active() && node.status().epoch > killed_epoch)
            .cloned();
        if successor.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let successor = successor.expect("another active controller in a later term");
    assert_ne!(successor.node_id(), killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_that_join_at_the_same_time_all_join() {
    // Brokers that are not voters restart together after a crash; each
    // asks the active controller to add it as an observer, and openraft
    // takes one membership change at a time.
    let mut cluster = Cluster::start(3).await;
    cluster.create_topic("before").await.expect("committed");
    let observers = [101u64, 102, 103, 104];
    for id in observers {
        cluster.restart(id).await;
    }
    let leader = cluster.leader().await;
    let joins = observers.map(|id| {
        let leader = Arc::clone(&leader);
        tokio::spawn(async move { leader.add_observer(id, format!("node-{id}")).await })
    });
    for (id, join) in observers.into_iter().zip(joins) {
        let joined = join.await.expect("the join task ran");
        assert!(joined.is_ok(), "observer {id}: {joined:?}");
    }
    for id in observers {
        cluster.wait_for_topics(id, 1).await;
    }
}
