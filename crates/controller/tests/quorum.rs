//! The metadata quorum with several voters in one process, over the
//! in-process network: elections, failover, catching up, snapshots, loss
//! of the majority, and commands refused where they must be.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strom_controller::controller::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest, NewTopic,
};
use strom_controller::environment::{SeededRandom, SystemClock};
use strom_controller::error::RuntimeError;
use strom_controller::image::Endpoint;
use strom_controller::quorum::memory::MemoryNetwork;
use strom_controller::quorum::{QuorumConfig, QuorumController};
use strom_controller::ControllerClient;

struct Cluster {
    network: MemoryNetwork,
    voters: BTreeMap<u64, String>,
    directory: tempfile::TempDir,
    nodes: BTreeMap<u64, Arc<QuorumController>>,
    snapshot_interval_entries: u64,
}

impl Cluster {
    async fn start(voters: u64) -> Cluster {
        Self::start_with(voters, 1_000).await
    }

    async fn start_with(voters: u64, snapshot_interval_entries: u64) -> Cluster {
        let mut cluster = Cluster {
            network: MemoryNetwork::new(7),
            voters: (1..=voters)
                .map(|id| (id, format!("127.0.0.1:{}", 19_000 + id)))
                .collect(),
            directory: tempfile::tempdir().expect("tempdir"),
            nodes: BTreeMap::new(),
            snapshot_interval_entries,
        };
        for id in 1..=voters {
            cluster.restart(id).await;
        }
        cluster.register_broker(100).await;
        cluster
    }

    /// Registers and unfences a broker, so topics have a replica to use.
    async fn register_broker(&self, broker_id: i32) {
        for _ in 0..40 {
            let leader = self.leader().await;
            let registered = leader
                .register_broker(BrokerRegistrationRequest {
                    broker_id,
                    incarnation_id: uuid::Uuid::from_u128(broker_id as u128),
                    endpoints: vec![Endpoint {
                        name: "PLAINTEXT".into(),
                        host: "127.0.0.1".into(),
                        port: 9092,
                        security_protocol: "PLAINTEXT".into(),
                    }],
                    rack: None,
                })
                .await;
            let Ok(Ok(reply)) = registered else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let heartbeat = leader
                .broker_heartbeat(BrokerHeartbeatRequest {
                    broker_id,
                    broker_epoch: reply.broker_epoch,
                    want_fence: false,
                    want_shutdown: false,
                })
                .await;
            if matches!(heartbeat, Ok(Ok(_))) {
                return;
            }
        }
        panic!("broker {broker_id} could not register");
    }

    fn config(&self, node_id: u64) -> QuorumConfig {
        let mut config = QuorumConfig::new(
            node_id,
            self.voters.clone(),
            self.directory.path().join(format!("node-{node_id}")),
        );
        config.election_timeout_ms = 300;
        config.heartbeat_interval_ms = 60;
        config.request_timeout_ms = 1_500;
        config.tick_interval_ms = 100;
        config.snapshot_interval_entries = self.snapshot_interval_entries;
        config.controller.broker_session_timeout_ms = 120_000;
        config
    }

    async fn restart(&mut self, node_id: u64) {
        let node = QuorumController::start(
            self.config(node_id),
            self.network.transport(node_id),
            Arc::new(SystemClock),
            Box::new(SeededRandom::new(node_id)),
        )
        .await
        .expect("node starts");
        self.network.attach(&node);
        self.nodes.insert(node_id, node);
    }

    /// Stops a node as a crash would: no more messages in or out.
    async fn kill(&mut self, node_id: u64) {
        self.network.detach(node_id);
        if let Some(node) = self.nodes.remove(&node_id) {
            node.shutdown().await;
        }
    }

    async fn leader(&self) -> Arc<QuorumController> {
        for _ in 0..200 {
            let active: Vec<_> = self
                .nodes
                .values()
                .filter(|node| node.is_active())
                .collect();
            if let [node] = active.as_slice() {
                return Arc::clone(node);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no single active controller within 5 s");
    }

    async fn create_topic(&self, name: &str) -> Result<(), RuntimeError> {
        for _ in 0..40 {
            let leader = self.leader().await;
            match leader.create_topics(request(name)).await {
                Ok(outcomes) => {
                    outcomes[0].result.clone().expect("topic created");
                    return Ok(());
                }
                Err(RuntimeError::NotController { .. } | RuntimeError::Stale) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => return Err(error),
            }
        }
        panic!("no controller accepted the command");
    }

    async fn wait_for_topics(&self, node_id: u64, count: usize) {
        let node = &self.nodes[&node_id];
        for _ in 0..200 {
            if node.image().topic_count() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "node {node_id} has {} topics, expected {count}",
            node.image().topic_count()
        );
    }
}

fn request(name: &str) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![NewTopic {
            name: name.to_string(),
            partitions: Some(1),
            ..NewTopic::default()
        }],
        validate_only: false,
    }
}

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
    let mut cluster = Cluster::start_with(3, 10).await;
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
