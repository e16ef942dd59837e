//! [`QuorumController`]: one controller voter (or observer) of the
//! metadata quorum, a [`CommandRunner`] and so a
//! [`ControllerClient`](crate::runtime::ControllerClient).
//!
//! Commands run on the active controller (the Raft leader) only, one at a
//! time: it confirms its leadership with a quorum round (openraft's
//! `ensure_linearizable`, which also waits until every entry committed
//! before is applied), plans the command against its applied image, and
//! proposes the records as one entry; the reply is returned once that
//! entry is committed and applied. Elsewhere a command fails with
//! [`RuntimeError::NotController`] naming the active controller, which is
//! what a broker forwards to. A command that cannot be committed within
//! the request timeout fails with [`RuntimeError::QuorumTimeout`]; its
//! records are one entry, so it is applied whole or not at all.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use openraft::error::{ChangeMembershipError, CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{BasicNode, Raft, ServerState, SnapshotPolicy};
use tokio::sync::watch;

use crate::controller::{Controller, ControllerConfig, ControllerResult};
use crate::error::{ApplyError, CodecError, LogError, RuntimeError};
use crate::image::MetadataImage;
use crate::quorum::codec::{RaftReply, RaftRequest};
use crate::quorum::log_store::{LogRecovery, QuorumLogStore};
use crate::quorum::network::{QuorumNetwork, QuorumTransport};
use crate::quorum::state_machine::QuorumStateMachine;
use crate::quorum::status::{status_from_metrics, QuorumStatus};
use crate::quorum::types::{ApplyOutcome, NodeId, QuorumTypes};
use crate::records::MetadataBatch;
use crate::runtime::CommandRunner;
use strom_clock::{Clock, Random};

/// Settings of one quorum node, with Kafka's names in the docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumConfig {
    /// `node.id`.
    pub node_id: NodeId,
    /// `controller.quorum.voters`: each voter's id and `host:port` on its
    /// controller listener. A node not listed is an observer: it follows
    /// the log once a voter adds it.
    pub voters: BTreeMap<NodeId, String>,
    /// Directory of the quorum's log, vote and snapshot.
    pub metadata_dir: PathBuf,
    /// Settings of the controller core.
    pub controller: ControllerConfig,
    /// `controller.quorum.election.timeout.ms`: a follower that hears
    /// nothing from the leader for its election timeout, after the
    /// leader's lease (the same time) has run out, starts an election; so a
    /// dead leader is replaced after 2 to 3 times this plus one vote round.
    /// Each node draws its timeout once at start, between this and 1.5
    /// times this, from the injected random source (so a seeded test
    /// decides it).
    pub election_timeout_ms: u64,
    /// How often the leader sends heartbeats (Kafka's followers fetch at
    /// about this interval).
    pub heartbeat_interval_ms: u64,
    /// `controller.quorum.request.timeout.ms`: how long a command may wait
    /// for the quorum.
    pub request_timeout_ms: u64,
    /// Take a snapshot and truncate the log behind it after this many
    /// entries (Kafka counts bytes instead:
    /// `metadata.log.max.record.bytes.between.snapshots`).
    pub snapshot_interval_entries: u64,
    /// How often the active controller checks broker sessions.
    pub tick_interval_ms: u64,
}

impl QuorumConfig {
    /// Defaults for `node_id` among `voters`: election timeout 500 ms
    /// (a dead leader is replaced after about 1.25 to 1.5 s, near Kafka's
    /// fetch timeout of 2 s plus its election timeout of 1 s), heartbeats
    /// every 100 ms, request timeout 2 s (Kafka's).
    pub fn new(
        node_id: NodeId,
        voters: BTreeMap<NodeId, String>,
        metadata_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            node_id,
            voters,
            metadata_dir: metadata_dir.into(),
            controller: ControllerConfig::default(),
            election_timeout_ms: 500,
            heartbeat_interval_ms: 100,
            request_timeout_ms: 2_000,
            snapshot_interval_entries: 1_000,
            tick_interval_ms: 1_000,
        }
    }

    /// openraft's configuration, with this node's election timeout drawn
    /// from `random`. openraft draws a node's timeout once, when the node
    /// starts, from `[min, max)` with its own generator; a range one
    /// millisecond wide leaves it no choice.
    fn raft_config(&self, random: &dyn Random) -> Result<openraft::Config, QuorumStartError> {
        let spread = (self.election_timeout_ms / 2).max(1);
        let election_timeout = self
            .election_timeout_ms
            .saturating_add(random.below_u64(spread));
        let config = openraft::Config {
            cluster_name: "strom-metadata".to_string(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: election_timeout,
            election_timeout_max: election_timeout.saturating_add(1),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_interval_entries.max(1)),
            max_in_snapshot_log_to_keep: 0,
            install_snapshot_timeout: self.request_timeout_ms,
            ..openraft::Config::default()
        };
        config
            .validate()
            .map_err(|source| QuorumStartError::Config {
                source: Box::new(source),
            })
    }
}

/// Why a quorum node did not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumStartError {
    /// The timeouts do not make a valid Raft configuration.
    #[error("invalid quorum timeouts")]
    Config {
        /// openraft's complaint.
        #[source]
        source: Box<openraft::ConfigError>,
    },
    /// The log, vote or snapshot could not be opened.
    #[error("the quorum's metadata directory could not be opened")]
    Storage(#[from] LogError),
    /// openraft refused to start.
    #[error("the Raft node did not start")]
    Raft {
        /// Why.
        #[source]
        source: Box<openraft::error::Fatal<NodeId>>,
    },
}

struct CommandState {
    controller: Controller,
    /// The term in which this node last ran a command as leader.
    leader_term: Option<u64>,
}

/// The pause before an observer's join is tried again when another
/// membership change is in progress.
const MEMBERSHIP_CHANGE_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// One node of the metadata quorum. See the module docs.
pub struct QuorumController {
    node_id: NodeId,
    raft: Raft<QuorumTypes>,
    machine: QuorumStateMachine,
    commands: tokio::sync::Mutex<CommandState>,
    clock: Arc<dyn Clock>,
    request_timeout: Duration,
    recovery: LogRecovery,
    liveness_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `ControllerConfig::fence_unreachable_brokers`.
    fence_unreachable_brokers: bool,
    /// Set to `true` by [`QuorumController::shutdown`]; connections serving
    /// this node close when they see it.
    stopped: watch::Sender<bool>,
}

impl std::fmt::Debug for QuorumController {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("QuorumController")
            .field("node_id", &self.node_id)
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl QuorumController {
    /// Opens the node's log and snapshot, starts its Raft node, and (on a
    /// voter whose log is empty) proposes the initial membership of
    /// `voters`. Must be called inside a tokio runtime.
    pub async fn start(
        config: QuorumConfig,
        transport: Arc<dyn QuorumTransport>,
        clock: Arc<dyn Clock>,
        random: Arc<dyn Random>,
    ) -> Result<Arc<Self>, QuorumStartError> {
        let raft_config = Arc::new(config.raft_config(random.as_ref())?);
        let directory = config.metadata_dir.clone();
        let (log, recovery, machine) = tokio::task::spawn_blocking(move || {
            let (log, recovery) = QuorumLogStore::open(&directory)?;
            let machine = QuorumStateMachine::open(&directory)?;
            Ok::<_, LogError>((log, recovery, machine))
        })
        .await
        .map_err(|join| {
            QuorumStartError::Storage(LogError::Io {
                path: config.metadata_dir.clone(),
                source: std::io::Error::other(join),
            })
        })??;
        let raft = Raft::new(
            config.node_id,
            raft_config,
            QuorumNetwork::new(transport),
            log,
            machine.clone(),
        )
        .await
        .map_err(|source| QuorumStartError::Raft {
            source: Box::new(source),
        })?;
        let node = Arc::new(Self {
            node_id: config.node_id,
            raft,
            machine,
            commands: tokio::sync::Mutex::new(CommandState {
                controller: Controller::new(config.controller.clone(), random),
                leader_term: None,
            }),
            clock,
            request_timeout: Duration::from_millis(config.request_timeout_ms.max(1)),
            recovery,
            liveness_task: std::sync::Mutex::new(None),
            fence_unreachable_brokers: config.controller.fence_unreachable_brokers,
            stopped: watch::channel(false).0,
        });
        node.initialize_if_new(&config).await?;
        let interval = Duration::from_millis(config.tick_interval_ms.max(1));
        let task = tokio::spawn(liveness_loop(Arc::downgrade(&node), interval));
        *node
            .liveness_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
        tracing::info!(node_id = config.node_id, voters = ?config.voters.keys().collect::<Vec<_>>(), entries = recovery.entries, "metadata quorum node started");
        Ok(node)
    }

    async fn initialize_if_new(&self, config: &QuorumConfig) -> Result<(), QuorumStartError> {
        if !config.voters.contains_key(&config.node_id) {
            return Ok(());
        }
        let initialized =
            self.raft
                .is_initialized()
                .await
                .map_err(|source| QuorumStartError::Raft {
                    source: Box::new(source),
                })?;
        if initialized {
            return Ok(());
        }
        let members: BTreeMap<NodeId, BasicNode> = config
            .voters
            .iter()
            .map(|(id, address)| (*id, BasicNode::new(address.clone())))
            .collect();
        // Every voter proposes the same membership; the ones that already
        // heard from another voter refuse, which is fine.
        if let Err(error) = self.raft.initialize(members).await {
            tracing::debug!(error = %error, "quorum already initialized by another voter");
        }
        Ok(())
    }

    /// A receiver that sees `true` once [`QuorumController::shutdown`] has
    /// begun.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// What recovery found in the quorum log at start-up.
    pub fn recovery(&self) -> LogRecovery {
        self.recovery
    }

    /// The active controller this node knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this node is the active controller.
    pub fn is_active(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// openraft's metrics of this node, updated on every change of role,
    /// term, log or commit point.
    pub fn raft_metrics(&self) -> watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>> {
        self.raft.metrics()
    }

    /// The quorum as this node sees it (DescribeQuorum's answer on the
    /// active controller).
    pub fn status(&self) -> QuorumStatus {
        status_from_metrics(&self.raft.metrics().borrow())
    }

    /// Handles one encoded Raft request from another node and returns the
    /// encoded reply. Bytes that do not decode are an error (the caller
    /// closes that connection); nothing is changed by them.
    pub async fn handle_raft_request(&self, request: &[u8]) -> Result<Vec<u8>, CodecError> {
        let reply = match RaftRequest::decode(request)? {
            RaftRequest::AppendEntries(request) => match self.raft.append_entries(request).await {
                Ok(reply) => RaftReply::AppendEntries(reply),
                Err(error) => RaftReply::Refused(error.to_string()),
            },
            RaftRequest::Vote(request) => match self.raft.vote(request).await {
                Ok(reply) => RaftReply::Vote(reply),
                Err(error) => RaftReply::Refused(error.to_string()),
            },
            RaftRequest::InstallSnapshot(request) => {
                match self.raft.install_snapshot(request).await {
                    Ok(reply) => RaftReply::InstallSnapshot(reply),
                    Err(error) => RaftReply::Refused(error.to_string()),
                }
            }
        };
        Ok(reply.encode())
    }

    /// Adds `node_id` at `address` as an observer (an openraft learner)
    /// that receives the committed log, as brokers that are not voters do.
    /// Returns once the observer has caught up. Only the active controller
    /// can do this.
    ///
    /// openraft runs one membership change at a time, and brokers that
    /// restart together ask at the same time: a request that finds another
    /// change in progress waits for it and tries again, within the request
    /// timeout.
    pub async fn add_observer(&self, node_id: NodeId, address: String) -> Result<(), RuntimeError> {
        // Bounds a wait: a tokio timer, not a controller decision.
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        loop {
            match self.try_add_observer(node_id, &address).await {
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    ChangeMembershipError::InProgress(_),
                ))) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(MEMBERSHIP_CHANGE_RETRY_PAUSE).await;
                }
                result => return result.map_err(write_error),
            }
        }
    }

    async fn try_add_observer(
        &self,
        node_id: NodeId,
        address: &str,
    ) -> Result<(), RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>> {
        let known = {
            let metrics = self.raft.metrics().borrow().clone();
            let membership = metrics.membership_config.membership();
            if membership.voter_ids().any(|voter| voter == node_id) {
                // A voter already receives the log; it cannot become an
                // observer too.
                return Ok(());
            }
            membership.get_node(&node_id).map(|node| node.addr.clone())
        };
        if known.as_deref().is_some_and(|known| known != address) {
            // The observer restarted on another port: point replication
            // there (safe for a learner, which never votes).
            let nodes = BTreeMap::from([(node_id, BasicNode::new(address.to_owned()))]);
            self.raft
                .change_membership(openraft::ChangeMembers::SetNodes(nodes), false)
                .await?;
        }
        self.raft
            .add_learner(node_id, BasicNode::new(address.to_owned()), true)
            .await
            .map(|_| ())
    }

    /// Stops the Raft node and the liveness task. The node answers no
    /// more requests; its files stay as they are.
    pub async fn shutdown(&self) {
        // Connections to this node close, so that peers reconnect (to a
        // restarted node on the same address) instead of hearing "stopped"
        // from this one for as long as the process lives.
        self.stopped.send_replace(true);
        if let Some(task) = self
            .liveness_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        if let Err(error) = self.raft.shutdown().await {
            tracing::warn!(error = %error, "Raft node did not stop cleanly");
        }
    }

    async fn run_as_leader<T, F>(&self, command: F) -> Result<T, RuntimeError>
    where
        F: FnOnce(&mut Controller, &MetadataImage, u64) -> Result<ControllerResult<T>, ApplyError>,
    {
        let mut state = self.commands.lock().await;
        self.raft
            .ensure_linearizable()
            .await
            .map_err(leadership_error)?;
        let term = self.raft.metrics().borrow().current_term;
        if state.leader_term != Some(term) {
            state.controller.reset_liveness();
            state.leader_term = Some(term);
        }
        let image = self.machine.image();
        let result = command(&mut state.controller, &image, self.clock.monotonic_ms())?;
        if result.records.is_empty() {
            return Ok(result.response);
        }
        let batch = MetadataBatch {
            base_offset: image.next_offset(),
            records: result.records,
        };
        let written = self.raft.client_write(batch).await.map_err(write_error)?;
        match written.data {
            ApplyOutcome::Applied { .. } | ApplyOutcome::NoMetadata => Ok(result.response),
            ApplyOutcome::Stale { .. } => Err(RuntimeError::Stale),
            ApplyOutcome::Inapplicable { .. } => Err(RuntimeError::Failed),
        }
    }
}

fn leadership_error(
    error: RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>,
) -> RuntimeError {
    match error {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(forward)) => {
            RuntimeError::NotController {
                leader: forward.leader_id,
            }
        }
        RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)) => RuntimeError::NoMajority,
        RaftError::Fatal(source) => RuntimeError::Quorum {
            source: Box::new(source),
        },
    }
}

fn write_error(error: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> RuntimeError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            RuntimeError::NotController {
                leader: forward.leader_id,
            }
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(source)) => {
            RuntimeError::Quorum {
                source: Box::new(source),
            }
        }
        RaftError::Fatal(source) => RuntimeError::Quorum {
            source: Box::new(source),
        },
    }
}

#[async_trait]
impl CommandRunner for QuorumController {
    fn current_image(&self) -> Arc<MetadataImage> {
        self.machine.image()
    }

    fn image_receiver(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.machine.subscribe()
    }

    async fn run<T, F>(&self, command: F) -> Result<T, RuntimeError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Controller, &MetadataImage, u64) -> Result<ControllerResult<T>, ApplyError>
            + Send
            + 'static,
    {
        let timeout_ms = u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX);
        tokio::time::timeout(self.request_timeout, self.run_as_leader(command))
            .await
            .map_err(|_| RuntimeError::QuorumTimeout { timeout_ms })?
    }
}

impl crate::quorum::liveness::ActiveController for QuorumController {
    fn is_active(&self) -> bool {
        QuorumController::is_active(self)
    }

    fn fences_unreachable_brokers(&self) -> bool {
        self.fence_unreachable_brokers
    }
}

impl QuorumController {
    /// The controller clock's milliseconds (the clock heartbeats are
    /// recorded with).
    pub fn now_ms(&self) -> u64 {
        self.clock.monotonic_ms()
    }
}

async fn liveness_loop(weak: Weak<QuorumController>, interval: Duration) {
    let mut was_active = false;
    loop {
        tokio::time::sleep(interval).await;
        let Some(node) = weak.upgrade() else {
            return;
        };
        let active = node.is_active();
        if active && !was_active {
            // Brokers that died with the previous active controller left
            // it no evidence here: look for them.
            crate::quorum::liveness::check_silent_brokers(weak.clone(), node.now_ms());
        }
        was_active = active;
        if !active {
            continue;
        }
        match node
            .run(|controller, image, now_ms| controller.tick(image, now_ms))
            .await
        {
            Ok(fenced) if !fenced.is_empty() => {
                tracing::warn!(?fenced, "fenced brokers whose sessions expired");
            }
            Ok(_) | Err(RuntimeError::NotController { .. }) => {}
            Err(error) => tracing::warn!(error = %error, "broker session check failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_clock::SeededRandom;

    fn config() -> QuorumConfig {
        QuorumConfig::new(
            1,
            BTreeMap::from([(1, "127.0.0.1:1".to_string())]),
            "unused",
        )
    }

    fn timeout(seed: u64) -> (u64, u64) {
        let raft = config()
            .raft_config(&SeededRandom::new(seed))
            .expect("valid timeouts");
        (raft.election_timeout_min, raft.election_timeout_max)
    }

    #[test]
    fn the_election_timeout_comes_from_the_injected_random_source() {
        let drawn: Vec<u64> = (0..64).map(|seed| timeout(seed).0).collect();
        for seed in 0..64 {
            let (min, max) = timeout(seed);
            // openraft draws from [min, max): one value is left.
            assert_eq!(max, min + 1);
            assert!((500..750).contains(&min), "{min}");
            // The same seed, the same timeout.
            assert_eq!(timeout(seed), (min, max));
        }
        let distinct: std::collections::BTreeSet<u64> = drawn.iter().copied().collect();
        assert!(distinct.len() > 32, "{distinct:?}");
    }
}
