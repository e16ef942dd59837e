//! The metadata quorum's figures: controller failover, metadata
//! propagation and controller throughput, on three voters in one process
//! talking Raft over TCP on 127.0.0.1 with the default timeouts
//! (`QuorumConfig::new`: election timeout 500 ms, heartbeats every 100 ms).
//!
//! ```sh
//! cargo bench -p strom-bench --bench quorum            # all three
//! cargo bench -p strom-bench --bench quorum -- --trials 5
//! ```
//!
//! Failover: the active controller is stopped at once (its listener
//! closed, its Raft node shut down, no goodbye), and the clock runs until a
//! CreateTopics through the surviving voters is committed. The stopped
//! voter restarts from its directory before the next trial.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_clock::{SeededRandom, SystemClock};
use strom_controller::controller::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest, NewTopic,
};
use strom_controller::error::{ControllerError, RuntimeError};
use strom_controller::image::Endpoint;
use strom_controller::quorum::tcp::{serve, TcpTransport};
use strom_controller::quorum::{QuorumConfig, QuorumController};
use strom_controller::ControllerClient;
use tokio::task::JoinHandle;

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Voter {
    node: Arc<QuorumController>,
    server: JoinHandle<()>,
}

struct Quorum {
    directory: tempfile::TempDir,
    addresses: BTreeMap<u64, String>,
    voters: BTreeMap<u64, Voter>,
}

impl Quorum {
    async fn start() -> BenchResult<Quorum> {
        let mut listeners = Vec::new();
        let mut addresses = BTreeMap::new();
        for id in 1..=3u64 {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            addresses.insert(id, listener.local_addr()?.to_string());
            listeners.push((id, listener));
        }
        let mut quorum = Quorum {
            directory: tempfile::tempdir()?,
            addresses,
            voters: BTreeMap::new(),
        };
        for (id, listener) in listeners {
            quorum.start_voter(id, listener).await?;
        }
        Ok(quorum)
    }

    async fn start_voter(&mut self, id: u64, listener: tokio::net::TcpListener) -> BenchResult<()> {
        let mut config = QuorumConfig::new(
            id,
            self.addresses.clone(),
            self.directory.path().join(id.to_string()),
        );
        config.controller.broker_session_timeout_ms = 3_600_000;
        config.controller.max_partitions_per_topic = 100_000;
        config.snapshot_interval_entries = 10_000;
        let node = QuorumController::start(
            config,
            Arc::new(TcpTransport::new()),
            Arc::new(SystemClock),
            Arc::new(SeededRandom::new(id)),
        )
        .await?;
        let server = tokio::spawn(serve(listener, Arc::clone(&node)));
        self.voters.insert(id, Voter { node, server });
        Ok(())
    }

    async fn restart(&mut self, id: u64) -> BenchResult<()> {
        let address = self.addresses[&id].clone();
        let listener = loop {
            match tokio::net::TcpListener::bind(&address).await {
                Ok(listener) => break listener,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        self.start_voter(id, listener).await
    }

    async fn stop(&mut self, id: u64) {
        if let Some(voter) = self.voters.remove(&id) {
            voter.server.abort();
            voter.node.shutdown().await;
        }
    }

    /// Runs `command` on whichever voter is active, retrying until it is
    /// committed.
    async fn command<T, F, Fut>(&self, command: F) -> BenchResult<T>
    where
        F: Fn(Arc<QuorumController>) -> Fut,
        Fut: std::future::Future<Output = Result<T, RuntimeError>>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last_error = None;
        while Instant::now() < deadline {
            for voter in self.voters.values() {
                if !voter.node.is_active() {
                    continue;
                }
                // A command that fails while leadership moves is retried.
                match command(Arc::clone(&voter.node)).await {
                    Ok(value) => return Ok(value),
                    Err(error) => last_error = Some(error),
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(
            format!("no voter committed the command within 30 s; last error: {last_error:?}")
                .into(),
        )
    }

    async fn register_brokers(&self) -> BenchResult<()> {
        for broker_id in 1..=3 {
            let reply = self
                .command(|node| async move {
                    node.register_broker(registration(broker_id))
                        .await?
                        .map_err(|_| RuntimeError::Failed)
                })
                .await?;
            self.command(|node| async move {
                node.broker_heartbeat(BrokerHeartbeatRequest {
                    broker_id,
                    broker_epoch: reply.broker_epoch,
                    want_fence: false,
                    want_shutdown: false,
                })
                .await?
                .map_err(|_| RuntimeError::Failed)
            })
            .await?;
        }
        Ok(())
    }

    async fn create_topic(&self, name: String, partitions: i32, replicas: i16) -> BenchResult<()> {
        self.command(|node| {
            let name = name.clone();
            async move {
                let outcomes = node
                    .create_topics(CreateTopicsRequest {
                        topics: vec![NewTopic {
                            name,
                            partitions: Some(partitions),
                            replication_factor: Some(replicas),
                            ..NewTopic::default()
                        }],
                        validate_only: false,
                    })
                    .await?;
                match outcomes.into_iter().next().map(|outcome| outcome.result) {
                    // A retry of a create whose first try was committed.
                    Some(Ok(_)) | Some(Err(ControllerError::TopicAlreadyExists { .. })) | None => {
                        Ok(())
                    }
                    Some(Err(error)) => {
                        eprintln!("create refused: {error}");
                        Err(RuntimeError::Failed)
                    }
                }
            }
        })
        .await
    }

    fn active(&self) -> Option<u64> {
        self.voters
            .iter()
            .find(|(_, voter)| voter.node.is_active())
            .map(|(id, _)| *id)
    }
}

fn registration(broker_id: i32) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id,
        incarnation_id: uuid::Uuid::from_u128(broker_id as u128),
        endpoints: vec![Endpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092 + broker_id as u16,
            security_protocol: "PLAINTEXT".into(),
        }],
        rack: None,
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.0} ms p99={:.0} ms max={:.0} ms",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64() * 1000.0,
        percentile(&samples, 0.99).as_secs_f64() * 1000.0,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
    );
}

async fn failover(quorum: &mut Quorum, trials: usize) -> BenchResult<()> {
    let mut samples = Vec::new();
    for trial in 0..trials {
        quorum.create_topic(format!("warm-{trial}"), 1, 3).await?;
        let Some(active) = quorum.active() else {
            return Err("no active controller before the trial".into());
        };
        let started = Instant::now();
        quorum.stop(active).await;
        quorum.create_topic(format!("after-{trial}"), 1, 3).await?;
        samples.push(started.elapsed());
        quorum.restart(active).await?;
        // Let the restarted voter catch up before the next trial.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    summary("controller failover (stop to next commit)", samples);
    Ok(())
}

async fn propagation(quorum: &Quorum, topics: usize) -> BenchResult<()> {
    let mut samples = Vec::new();
    for index in 0..topics {
        let name = format!("propagate-{index}");
        let started = Instant::now();
        quorum.create_topic(name.clone(), 1, 3).await?;
        loop {
            let everywhere = quorum
                .voters
                .values()
                .all(|voter| voter.node.image().topic_by_name(&name).is_some());
            if everywhere {
                break;
            }
            tokio::task::yield_now().await;
        }
        samples.push(started.elapsed());
    }
    summary(
        "metadata propagation (create to every voter's image)",
        samples,
    );
    Ok(())
}

async fn throughput(quorum: &Quorum, topics: usize) -> BenchResult<()> {
    let started = Instant::now();
    for index in 0..topics {
        quorum.create_topic(format!("rate-{index}"), 1, 3).await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "controller throughput: {topics} topics (1 partition, 3 replicas) one request each in {elapsed:.2} s = {:.0} topics/s",
        topics as f64 / elapsed
    );
    let started = Instant::now();
    for index in 0..100 {
        quorum.create_topic(format!("wide-{index}"), 100, 3).await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "controller throughput: 10,000 partitions (100 topics x 100, 3 replicas over 3 brokers) in {elapsed:.2} s = {:.0} partitions/s",
        10_000.0 / elapsed
    );
    Ok(())
}

fn trials_argument() -> usize {
    let arguments: Vec<String> = std::env::args().collect();
    arguments
        .iter()
        .position(|argument| argument == "--trials")
        .and_then(|at| arguments.get(at + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(20)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> BenchResult<()> {
    let trials = trials_argument();
    let only_failover = std::env::args().any(|argument| argument == "--failover-only");
    let mut quorum = Quorum::start().await?;
    quorum.register_brokers().await?;
    if !only_failover {
        throughput(&quorum, 500).await?;
        propagation(&quorum, 200).await?;
    }
    failover(&mut quorum, trials).await?;
    for id in [1, 2, 3] {
        quorum.stop(id).await;
    }
    Ok(())
}
