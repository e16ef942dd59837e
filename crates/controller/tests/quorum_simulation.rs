//! A fault simulation of the metadata quorum: three voters and a broker's
//! observer in one process over the in-process network while a seeded
//! schedule drops, delays and duplicates messages, isolates nodes and
//! crashes and restarts voters, and a client keeps creating topics through
//! whichever node is active.
//!
//! Invariants, checked on everything the nodes report:
//! - at most one active controller per epoch (Raft term);
//! - committed metadata is never lost: every topic whose creation was
//!   acknowledged is in every node's image once the faults stop;
//! - every node's image, the observer's (a broker's) included, is a prefix
//!   of the committed log: two nodes that reached the same metadata offset
//!   hold equal images there, and all converge once the faults stop.
//!
//! The seed decides the schedule, every network fault and each node
//! start's election timeout; openraft's timers run on tokio's clock and
//! tasks interleave as tokio schedules them, so a seed reproduces the same
//! faults and timeouts, not the same interleaving. A failure prints the seed and the recent
//! history. `STROM_QUORUM_SIM_SEEDS=N` runs N seeds (default 4) and
//! `STROM_QUORUM_SIM_FIRST_SEED` picks the first, for longer hunts.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strom_controller::image::MetadataImage;
use strom_controller::quorum::memory::Faults;
use strom_controller::quorum::QuorumController;
use strom_controller::ControllerClient;
use support::{request, Cluster};

const NODES: [u64; 3] = [1, 2, 3];
/// The observer: a broker that is not a voter, following the log.
const OBSERVER: u64 = 100;
const EVERYONE: [u64; 4] = [1, 2, 3, OBSERVER];

/// What the observers saw.
#[derive(Default)]
struct Observations {
    /// Term -> nodes seen active in it.
    leaders: BTreeMap<u64, BTreeSet<u64>>,
    /// Metadata offset -> the image a node held there (first seen).
    images: BTreeMap<u64, (u64, Arc<MetadataImage>)>,
    /// Violations found while observing.
    violations: Vec<String>,
}

struct Simulation {
    seed: u64,
    random: u64,
    cluster: Cluster,
    observations: Arc<Mutex<Observations>>,
    history: Vec<String>,
    acknowledged: Arc<Mutex<BTreeSet<String>>>,
    down: BTreeMap<u64, tokio::time::Instant>,
    created: u64,
}

fn observe(node: &Arc<QuorumController>, observations: &Arc<Mutex<Observations>>) {
    let node_id = node.node_id();
    let mut metrics = node.raft_metrics();
    let seen = Arc::clone(observations);
    tokio::spawn(async move {
        loop {
            let (state, term) = {
                let current = metrics.borrow_and_update();
                (current.state, current.current_term)
            };
            if state == openraft::ServerState::Leader {
                seen.lock()
                    .expect("observations")
                    .leaders
                    .entry(term)
                    .or_default()
                    .insert(node_id);
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
    let mut images = node.subscribe();
    let seen = Arc::clone(observations);
    tokio::spawn(async move {
        loop {
            let image = images.borrow_and_update().clone();
            record_image(&seen, node_id, image);
            if images.changed().await.is_err() {
                return;
            }
        }
    });
}

fn record_image(seen: &Arc<Mutex<Observations>>, node_id: u64, image: Arc<MetadataImage>) {
    let Some(offset) = image.last_offset() else {
        return;
    };
    let mut seen = seen.lock().expect("observations");
    match seen.images.get(&offset) {
        Some((other, earlier)) if **earlier != *image => {
            let violation = format!(
                "nodes {other} and {node_id} hold different images at metadata offset {offset}"
            );
            seen.violations.push(violation);
        }
        Some(_) => {}
        None => {
            seen.images.insert(offset, (node_id, image));
        }
    }
}

impl Simulation {
    async fn new(seed: u64) -> Simulation {
        // Short election timeouts, so that isolations and crashes of a few
        // hundred milliseconds replace the active controller.
        let mut cluster = Cluster::start_timed(3, 25, seed, Some(200)).await;
        cluster.restart(OBSERVER).await;
        let mut joined = false;
        for _ in 0..20 {
            let leader = cluster.leader().await;
            if leader
                .add_observer(OBSERVER, format!("node-{OBSERVER}"))
                .await
                .is_ok()
            {
                joined = true;
                break;
            }
        }
        assert!(joined, "seed {seed}: the observer could not join");
        let observations = Arc::new(Mutex::new(Observations::default()));
        for node in cluster.nodes.values() {
            observe(node, &observations);
        }
        Simulation {
            seed,
            random: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            cluster,
            observations,
            history: Vec::new(),
            acknowledged: Arc::new(Mutex::new(BTreeSet::new())),
            down: BTreeMap::new(),
            created: 0,
        }
    }

    fn next(&mut self, bound: u64) -> u64 {
        let mut x = self.random;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1)
    }

    fn note(&mut self, event: String) {
        self.history.push(event);
    }

    async fn step(&mut self) {
        self.restart_due().await;
        match self.next(100) {
            0..=44 => self.create_topic(),
            45..=54 => {
                let node = EVERYONE[self.next(4) as usize];
                self.cluster.network.isolate(node, &EVERYONE);
                self.note(format!("isolate {node}"));
            }
            55..=60 => {
                self.cluster.network.heal();
                self.note("heal".to_string());
            }
            61..=68 if self.down.is_empty() => self.crash().await,
            75..=84 => {
                let faults = Faults {
                    drop_request: self.next(15) as f64 / 100.0,
                    drop_reply: self.next(15) as f64 / 100.0,
                    duplicate: self.next(10) as f64 / 100.0,
                    max_delay_ms: self.next(40),
                };
                self.cluster.network.set_faults(faults);
                self.note(format!("faults {faults:?}"));
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    fn create_topic(&mut self) {
        let name = format!("s{}-t{}", self.seed, self.created);
        self.created += 1;
        let node_id = NODES[self.next(3) as usize];
        let Some(node) = self.cluster.nodes.get(&node_id).cloned() else {
            return;
        };
        self.note(format!("create {name} via {node_id}"));
        let acknowledged = Arc::clone(&self.acknowledged);
        tokio::spawn(async move {
            if let Ok(outcomes) = node.create_topics(request(&name)).await {
                if outcomes
                    .first()
                    .is_some_and(|outcome| outcome.result.is_ok())
                {
                    acknowledged.lock().expect("acknowledged").insert(name);
                }
            }
        });
    }

    async fn crash(&mut self) {
        let node = NODES[self.next(3) as usize];
        self.cluster.kill(node).await;
        let back_at = tokio::time::Instant::now() + Duration::from_millis(400 + self.next(1_000));
        self.down.insert(node, back_at);
        self.note(format!("crash {node}"));
    }

    async fn restart_due(&mut self) {
        let now = tokio::time::Instant::now();
        let due: Vec<u64> = self
            .down
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(node, _)| *node)
            .collect();
        for node in due {
            self.down.remove(&node);
            self.cluster.restart(node).await;
            observe(&self.cluster.nodes[&node], &self.observations);
            self.note(format!("restart {node}"));
        }
    }

    /// Stops the faults, brings every node back and waits until all hold
    /// the same image.
    async fn settle(&mut self) -> Result<Arc<MetadataImage>, String> {
        self.cluster.network.set_faults(Faults::NONE);
        self.cluster.network.heal();
        for node in std::mem::take(&mut self.down).into_keys() {
            self.cluster.restart(node).await;
            observe(&self.cluster.nodes[&node], &self.observations);
        }
        // Let commands still in flight finish or time out.
        tokio::time::sleep(Duration::from_millis(1_600)).await;
        // A final command through the active controller commits everything
        // before it on every node.
        let _ = self
            .cluster
            .create_topic(&format!("s{}-final", self.seed))
            .await;
        for _ in 0..200 {
            let images: Vec<Arc<MetadataImage>> = self
                .cluster
                .nodes
                .values()
                .map(|node| node.image())
                .collect();
            if images.windows(2).all(|pair| pair[0] == pair[1]) {
                return Ok(Arc::clone(&images[0]));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err("the nodes did not converge on one image after the faults stopped".to_string())
    }

    fn check(&self, image: &MetadataImage) -> Vec<String> {
        let observations = self.observations.lock().expect("observations");
        let mut violations = observations.violations.clone();
        for (term, leaders) in &observations.leaders {
            if leaders.len() > 1 {
                violations.push(format!("term {term} had active controllers {leaders:?}"));
            }
        }
        for name in self.acknowledged.lock().expect("acknowledged").iter() {
            if image.topic_by_name(name).is_none() {
                violations.push(format!("acknowledged topic {name} was lost"));
            }
        }
        violations
    }

    fn report(&self, violations: &[String]) -> String {
        let recent: Vec<&String> = self.history.iter().rev().take(30).rev().collect();
        format!(
            "seed {} violated the quorum's invariants: {violations:?}\nlast events: {recent:#?}\nrerun with STROM_QUORUM_SIM_FIRST_SEED={} STROM_QUORUM_SIM_SEEDS=1",
            self.seed, self.seed
        )
    }
}

async fn run_seed(seed: u64, steps: u32) -> (usize, u64) {
    let mut simulation = Simulation::new(seed).await;
    for _ in 0..steps {
        simulation.step().await;
    }
    let image = match simulation.settle().await {
        Ok(image) => image,
        Err(problem) => panic!("{}", simulation.report(&[problem])),
    };
    let violations = simulation.check(&image);
    assert!(violations.is_empty(), "{}", simulation.report(&violations));
    let acknowledged = simulation.acknowledged.lock().expect("acknowledged").len();
    let terms = simulation
        .observations
        .lock()
        .expect("observations")
        .leaders
        .len() as u64;
    for node in simulation.cluster.nodes.values() {
        node.shutdown().await;
    }
    (acknowledged, terms)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quorum_keeps_its_invariants_under_seeded_faults() {
    let seeds = env_u64("STROM_QUORUM_SIM_SEEDS", 4);
    let first = env_u64("STROM_QUORUM_SIM_FIRST_SEED", 1);
    let mut total_acknowledged = 0;
    let mut total_terms = 0;
    for seed in first..first + seeds {
        let (acknowledged, terms) = run_seed(seed, 200).await;
        total_acknowledged += acknowledged;
        total_terms += terms;
    }
    eprintln!(
        "quorum simulation: {seeds} seeds from {first}, {total_acknowledged} topics acknowledged, {total_terms} terms with an active controller"
    );
    assert!(total_acknowledged > 0, "the workload made progress");
    assert!(total_terms > seeds, "the faults forced elections");
}
