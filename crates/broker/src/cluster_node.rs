//! A node of a cluster: its member of the metadata quorum (a voter on
//! controller nodes, an observer on nodes that are only brokers), the
//! listener that member answers on, and the steps a broker of a cluster
//! takes that a single node does not (catching up with the metadata log
//! before it is unfenced, controlled shutdown before it stops).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_controller::controller::{BrokerHeartbeatRequest, ControllerConfig};
use strom_controller::quorum::cluster::ClusterController;
use strom_controller::quorum::tcp::{serve_with, TcpTransport};
use strom_controller::quorum::{QuorumConfig, QuorumController};
use strom_controller::ControllerClient;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cluster_config::ClusterConfig;
use crate::config::BrokerConfig;
use crate::environment::Environment;
use crate::settings::{controller_settings, METADATA_QUORUM_DIR};
use crate::start_error::StartError;

/// How long a stopping broker waits for the controller to move its
/// partitions' leadership away (Kafka retries controlled shutdown for as
/// long as it takes; a bound keeps a lost quorum from holding the process).
pub const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// This node's member of the metadata quorum and the listener it answers
/// Raft requests and forwarded commands on.
pub struct QuorumMember {
    client: Arc<ClusterController>,
    server: JoinHandle<()>,
    address: SocketAddr,
}

impl std::fmt::Debug for QuorumMember {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("QuorumMember")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// The quorum member's settings from the broker's and the cluster's.
fn quorum_config(config: &BrokerConfig, cluster: &ClusterConfig) -> QuorumConfig {
    let node_id = u64::try_from(config.node_id).unwrap_or_default();
    let mut quorum = QuorumConfig::new(
        node_id,
        cluster.voters.clone(),
        config.log_dirs[0].join(METADATA_QUORUM_DIR),
    );
    quorum.controller = ControllerConfig {
        broker_session_timeout_ms: millis(cluster.session_timeout),
        auto_leader_rebalance_enable: cluster.auto_leader_rebalance_enable,
        leader_imbalance_per_broker_percentage: cluster.leader_imbalance_per_broker_percentage,
        leader_imbalance_check_interval_ms: millis(cluster.leader_imbalance_check_interval),
        fence_unreachable_brokers: cluster.fence_unreachable_brokers,
        ..controller_settings(config)
    };
    quorum.election_timeout_ms = millis(cluster.election_timeout);
    quorum.heartbeat_interval_ms = (millis(cluster.election_timeout) / 5).max(10);
    quorum.request_timeout_ms = millis(cluster.request_timeout);
    quorum.snapshot_interval_entries = cluster.snapshot_interval_entries;
    quorum.tick_interval_ms = (millis(cluster.session_timeout) / 8).clamp(50, 1_000);
    quorum
}

impl QuorumMember {
    /// Binds the quorum listener (the controller listener on a voter, an
    /// ephemeral port on the inter-broker listener's host on an observer),
    /// opens the quorum's log under the first log directory and starts the
    /// Raft node.
    pub async fn start(
        config: &BrokerConfig,
        cluster: &ClusterConfig,
        environment: &Environment,
    ) -> Result<Self, StartError> {
        // The controller listener's security applies both ways: to the
        // connections this node opens and to those it accepts.
        let connector = crate::security::quorum_connector(&cluster.peers.controller)?;
        let acceptor = crate::security::quorum_acceptor(
            &cluster.peers.controller,
            cluster.peers.controller_users.as_ref(),
        )?;
        let bind_address = match &cluster.controller_listener {
            Some(listener) => listener.bind_address()?,
            None => observer_bind_address(config, cluster)?,
        };
        let listener = tokio::net::TcpListener::bind(bind_address)
            .await
            .map_err(|source| StartError::Bind {
                address: bind_address,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| StartError::Bind {
            address: bind_address,
            source,
        })?;
        let node_id = u64::try_from(config.node_id).unwrap_or_default();
        let quorum = quorum_config(config, cluster);
        let node = QuorumController::start(
            quorum,
            Arc::new(TcpTransport::new().with_connector(connector.clone())),
            Arc::clone(&environment.clock),
            Arc::clone(&environment.random),
        )
        .await
        .map_err(|source| StartError::Quorum {
            source: Box::new(source),
        })?;
        let server = tokio::spawn(serve_with(listener, Arc::clone(&node), acceptor));
        let client = Arc::new(ClusterController::with_transport(
            node,
            cluster.voters.clone(),
            cluster.request_timeout,
            Arc::new(TcpTransport::for_commands().with_connector(connector)),
        ));
        info!(
            node_id,
            voter = cluster.roles.controller,
            %address,
            voters = ?cluster.voters,
            "metadata quorum member started"
        );
        Ok(Self {
            client,
            server,
            address,
        })
    }

    /// The node's controller client.
    pub fn client(&self) -> Arc<ClusterController> {
        Arc::clone(&self.client)
    }

    /// Where the member answers.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Makes sure the node receives the metadata log (an observer asks the
    /// active controller to add it) and waits until its image holds the
    /// broker's own registration at `broker_epoch`: the node has then
    /// caught up with the log as of its registration, and may be unfenced.
    pub async fn catch_up(
        &self,
        config: &BrokerConfig,
        cluster: &ClusterConfig,
        broker_epoch: i64,
    ) -> Result<(), StartError> {
        if !cluster.roles.controller {
            let host = advertised_host(config, cluster);
            let address = format!("{host}:{}", self.address.port());
            self.client
                .join_as_observer(address)
                .await
                .map_err(|source| StartError::ControllerFailed {
                    step: crate::start_error::RegistrationStep::CatchUp,
                    source,
                })?;
        }
        let mut images = self.client.subscribe();
        // Start-up and shutdown deadlines bound waits on the host's clock.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let caught_up = images
                .borrow_and_update()
                .broker(config.node_id)
                .is_some_and(|broker| broker.epoch >= broker_epoch);
            if caught_up {
                return Ok(());
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero()
                || tokio::time::timeout(remaining, images.changed())
                    .await
                    .map_or(true, |changed| changed.is_err())
            {
                return Err(StartError::ControllerFailed {
                    step: crate::start_error::RegistrationStep::CatchUp,
                    source: strom_controller::error::RuntimeError::QuorumTimeout {
                        timeout_ms: 60_000,
                    },
                });
            }
        }
    }

    /// Stops the Raft node and its listener.
    pub async fn shutdown(self) {
        self.server.abort();
        let _ = self.server.await;
        self.client.node().shutdown().await;
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The inter-broker listener's advertised host (the address other nodes
/// reach this broker at).
fn advertised_host(config: &BrokerConfig, cluster: &ClusterConfig) -> String {
    let name = &cluster.inter_broker_listener_name;
    let host = config
        .advertised_listeners
        .iter()
        .find(|listener| &listener.name == name)
        .or_else(|| {
            config
                .listeners
                .iter()
                .find(|listener| &listener.name == name)
        })
        .map_or("", |listener| listener.host.as_str());
    strom_config::host::reachable_host(host).to_owned()
}

/// An observer answers the active controller on an ephemeral port of the
/// inter-broker listener's interface.
fn observer_bind_address(
    config: &BrokerConfig,
    cluster: &ClusterConfig,
) -> Result<SocketAddr, StartError> {
    let listener = config
        .listeners
        .iter()
        .find(|listener| listener.name == cluster.inter_broker_listener_name)
        .or_else(|| config.listeners.first());
    let mut address = match listener {
        Some(listener) => listener.bind_address()?,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    address.set_port(0);
    Ok(address)
}

/// Controlled shutdown: asks the controller (heartbeats that want to shut
/// down) to move the leadership of every partition this broker leads, and
/// returns once it says the broker may stop, or after
/// [`CONTROLLED_SHUTDOWN_TIMEOUT`].
pub async fn controlled_shutdown(
    controller: &dyn ControllerClient,
    broker_id: i32,
    broker_epoch: i64,
    interval: Duration,
) {
    let deadline = Instant::now() + CONTROLLED_SHUTDOWN_TIMEOUT;
    let request = BrokerHeartbeatRequest {
        broker_id,
        broker_epoch,
        want_fence: false,
        want_shutdown: true,
    };
    // Without a quorum nobody can move leadership: after this many failed
    // attempts in a row (each bounded by the request timeout), stop anyway.
    const MAX_FAILURES: u32 = 2;
    let mut failures = 0;
    loop {
        match controller.broker_heartbeat(request).await {
            Ok(Ok(reply)) if reply.should_shut_down => {
                info!("controlled shutdown complete: this broker leads no partition");
                wait_for_own_fence(controller, broker_id, broker_epoch, deadline).await;
                return;
            }
            Ok(Ok(_)) => failures = 0,
            Ok(Err(error)) => {
                warn!(%error, "controlled shutdown refused; stopping without it");
                return;
            }
            Err(error) => {
                failures += 1;
                warn!(%error, "controlled shutdown heartbeat failed");
                if failures >= MAX_FAILURES {
                    warn!("no controller answers; stopping without controlled shutdown");
                    return;
                }
            }
        }
        if Instant::now() >= deadline {
            warn!("controlled shutdown did not complete in time; stopping without it");
            return;
        }
        tokio::time::sleep(interval.min(Duration::from_millis(200))).await;
    }
}

/// Waits (until `deadline` at the latest) for this node's image to show the
/// broker fenced: the image in which its leaderships moved away has then
/// reached it, and it answers Metadata with the new leaders. As Kafka's
/// controller does before it lets a broker stop (the broker's metadata
/// offset must reach its controlled shutdown).
async fn wait_for_own_fence(
    controller: &dyn ControllerClient,
    broker_id: i32,
    broker_epoch: i64,
    deadline: Instant,
) {
    let mut images = controller.subscribe();
    loop {
        let fenced = images
            .borrow_and_update()
            .broker(broker_id)
            .is_none_or(|broker| broker.fenced || broker.epoch != broker_epoch);
        if fenced {
            return;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        let changed = tokio::time::timeout(remaining, images.changed()).await;
        if !matches!(changed, Ok(Ok(()))) {
            warn!("this node's metadata did not show the controlled shutdown in time");
            return;
        }
    }
}

/// A node that is only a controller: a voter of the metadata quorum that
/// serves no Kafka clients.
#[derive(Debug)]
pub struct RunningController {
    member: QuorumMember,
}

impl RunningController {
    /// Starts a controller-only node on the operating system's clock and
    /// randomness.
    pub async fn start(config: &BrokerConfig, cluster: &ClusterConfig) -> Result<Self, StartError> {
        Self::start_with(config, cluster, &Environment::system()).await
    }

    /// [`RunningController::start`] with an injected clock and random source.
    pub async fn start_with(
        config: &BrokerConfig,
        cluster: &ClusterConfig,
        environment: &Environment,
    ) -> Result<Self, StartError> {
        crate::settings::create_log_dirs(config)?;
        strom_config::meta_properties::ensure_cluster(
            &config.log_dirs,
            config.node_id,
            Some(&cluster.cluster_id),
        )?;
        let member = QuorumMember::start(config, cluster, environment).await?;
        info!(
            node_id = config.node_id,
            controller_listener = %member.address(),
            "Strom controller started"
        );
        Ok(Self { member })
    }

    /// The controller listener's address.
    pub fn address(&self) -> SocketAddr {
        self.member.address()
    }

    /// The node's controller client (its quorum member).
    pub fn controller(&self) -> Arc<ClusterController> {
        self.member.client()
    }

    /// Stops the Raft node.
    pub async fn shutdown(self) {
        self.member.shutdown().await;
        info!("Strom controller stopped");
    }
}
