//! A quorum of voters in one process over the in-process network, shared
//! by the quorum tests and the quorum simulation.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strom_clock::{Random, SeededRandom, SystemClock};
use strom_controller::controller::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest, NewTopic,
};
use strom_controller::error::{ControllerError, RuntimeError};
use strom_controller::image::Endpoint;
use strom_controller::quorum::memory::MemoryNetwork;
use strom_controller::quorum::{QuorumConfig, QuorumController};
use strom_controller::ControllerClient;

pub struct Cluster {
    pub network: MemoryNetwork,
    pub voters: BTreeMap<u64, String>,
    directory: tempfile::TempDir,
    pub nodes: BTreeMap<u64, Arc<QuorumController>>,
    snapshot_interval_entries: u64,
    /// The voters' election timeout (`QuorumConfig`'s default unless set).
    election_timeout_ms: Option<u64>,
    /// Seeds each node start's random source (and so its election
    /// timeout) from the cluster's seed.
    random: SeededRandom,
}

impl Cluster {
    pub async fn start(voters: u64) -> Cluster {
        Self::start_with(voters, 1_000, 7).await
    }

    pub async fn start_with(voters: u64, snapshot_interval_entries: u64, seed: u64) -> Cluster {
        Self::start_timed(voters, snapshot_interval_entries, seed, None).await
    }

    /// A cluster whose voters use `election_timeout_ms` (heartbeats at a
    /// fifth of it), for runs that want many elections.
    pub async fn start_timed(
        voters: u64,
        snapshot_interval_entries: u64,
        seed: u64,
        election_timeout_ms: Option<u64>,
    ) -> Cluster {
        let mut cluster = Cluster {
            network: MemoryNetwork::new(seed),
            voters: (1..=voters)
                .map(|id| (id, format!("127.0.0.1:{}", 19_000 + id)))
                .collect(),
            directory: tempfile::tempdir().expect("tempdir"),
            nodes: BTreeMap::new(),
            snapshot_interval_entries,
            election_timeout_ms,
            random: SeededRandom::new(seed),
        };
        for id in 1..=voters {
            cluster.restart(id).await;
        }
        cluster.register_broker(100).await;
        cluster
    }

    /// Registers and unfences a broker, so topics have a replica to use.
    pub async fn register_broker(&self, broker_id: i32) {
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

    pub fn config(&self, node_id: u64) -> QuorumConfig {
        let mut config = QuorumConfig::new(
            node_id,
            self.voters.clone(),
            self.directory.path().join(format!("node-{node_id}")),
        );
        config.request_timeout_ms = 1_500;
        config.tick_interval_ms = 100;
        config.snapshot_interval_entries = self.snapshot_interval_entries;
        if let Some(timeout_ms) = self.election_timeout_ms {
            config.election_timeout_ms = timeout_ms;
            config.heartbeat_interval_ms = (timeout_ms / 5).max(1);
        }
        config.controller.broker_session_timeout_ms = 120_000;
        // The brokers here are registrations without processes: nothing
        // listens at their endpoints, which would read as a dead broker.
        config.controller.fence_unreachable_brokers = false;
        config
    }

    pub async fn restart(&mut self, node_id: u64) {
        let node = QuorumController::start(
            self.config(node_id),
            self.network.transport(node_id),
            Arc::new(SystemClock),
            Arc::new(SeededRandom::new(self.random.next_u64() ^ node_id)),
        )
        .await
        .expect("node starts");
        self.network.attach(&node);
        self.nodes.insert(node_id, node);
    }

    /// Stops a node as a crash would: no more messages in or out.
    pub async fn kill(&mut self, node_id: u64) {
        self.network.detach(node_id);
        if let Some(node) = self.nodes.remove(&node_id) {
            node.shutdown().await;
        }
    }

    pub async fn leader(&self) -> Arc<QuorumController> {
        for _ in 0..1_200 {
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
        panic!("no single active controller within 30 s");
    }

    /// Creates a topic through the active controller, retrying as a client
    /// does on NOT_CONTROLLER and REQUEST_TIMED_OUT answers.
    pub async fn create_topic(&self, name: &str) -> Result<(), RuntimeError> {
        let mut last = None;
        for _ in 0..40 {
            let leader = self.leader().await;
            match leader.create_topics(request(name)).await {
                Ok(outcomes) => match outcomes[0].result.clone() {
                    // A retry of a create whose first try was committed.
                    Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => return Ok(()),
                    Err(error) => panic!("topic {name} refused: {error}"),
                },
                Err(
                    error @ (RuntimeError::NotController { .. }
                    | RuntimeError::Stale
                    | RuntimeError::QuorumTimeout { .. }
                    | RuntimeError::NoMajority),
                ) => {
                    last = Some(error);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => return Err(error),
            }
        }
        Err(last.unwrap_or(RuntimeError::Failed))
    }

    pub async fn wait_for_topics(&self, node_id: u64, count: usize) {
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

pub fn request(name: &str) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![NewTopic {
            name: name.to_string(),
            partitions: Some(1),
            ..NewTopic::default()
        }],
        validate_only: false,
    }
}
