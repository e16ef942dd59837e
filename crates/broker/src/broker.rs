//! Starting and stopping a broker: the wiring of storage, controller,
//! replication and the network server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use strom_controller::controller::{
    BrokerHeartbeatRequest, BrokerRegistrationReply, BrokerRegistrationRequest, ControllerConfig,
};
use strom_controller::error::{ControllerError, RuntimeError};
use strom_controller::image::Endpoint;
use strom_controller::runtime::{ControllerClient, LocalController, LocalControllerConfig};
use strom_network::{NetworkConfig, Server, ServerHandle};
use strom_storage::manager::Scheduler;
use strom_storage::page_cache::PageCacheSettings;
use strom_storage::{LogConfig, LogManager, LogManagerConfig};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cluster_node::QuorumMember;
use crate::config::BrokerConfig;
use crate::environment::Environment;
use crate::fetch_session::FetchSessionCache;
use crate::groups::{ensure_offsets_topic, GroupService, COORDINATOR_TICK};
use crate::handlers::{BrokerContext, Dispatcher};
use crate::producer_ids::ProducerIdManager;
use crate::replica_manager::{topic_log_config, ReplicaManager};
use strom_config::meta_properties;

/// The directory (inside the first log directory) of the embedded
/// controller's metadata log. Its name has no `-N` suffix, so the log manager
/// never mistakes it for a partition.
pub const METADATA_DIR: &str = "strom-metadata";

/// The directory (inside the first log directory) of a cluster node's
/// metadata quorum: its Raft log, vote and snapshot.
pub const METADATA_QUORUM_DIR: &str = "strom-metadata-quorum";

/// How often a single-node broker heartbeats to its embedded controller
/// (in a cluster: `broker.heartbeat.interval.ms`).
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);

/// Why a broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A data directory could not be created.
    #[error("cannot create data directory {path}")]
    CreateDirectory {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `meta.properties` problems.
    #[error(transparent)]
    MetaProperties(#[from] meta_properties::MetaPropertiesError),
    /// The metadata log could not be opened.
    #[error("cannot open the metadata log")]
    Metadata(#[source] strom_controller::error::LogError),
    /// The node's member of the metadata quorum did not start.
    #[error("cannot start the metadata quorum member")]
    Quorum {
        /// Why.
        #[source]
        source: Box<strom_controller::quorum::QuorumStartError>,
    },
    /// `process.roles` has no broker role: such a node is started with
    /// [`crate::cluster_node::RunningController::start`] (the launcher
    /// does so).
    #[error("process.roles has no broker role")]
    NotABroker,
    /// The controller refused a step of the broker's registration.
    #[error("the controller refused the broker's {step}")]
    ControllerRefused {
        /// The step.
        step: RegistrationStep,
        /// The controller's answer.
        #[source]
        source: strom_controller::error::ControllerError,
    },
    /// The controller failed (its log or task) during a step of the
    /// broker's registration.
    #[error("the controller failed during the broker's {step}")]
    ControllerFailed {
        /// The step.
        step: RegistrationStep,
        /// The controller's failure.
        #[source]
        source: strom_controller::error::RuntimeError,
    },
    /// The partition logs could not be opened.
    #[error("cannot open the partition logs")]
    Storage(#[source] strom_storage::error::ManagerError),
    /// Opening the partition logs panicked (or its task was cancelled).
    #[error("opening the partition logs panicked")]
    StoragePanicked(#[source] tokio::task::JoinError),
    /// The configuration is unusable (for example a listener host).
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
    /// The producer id counter could not be loaded.
    #[error(transparent)]
    ProducerIds(#[from] crate::error::ProducerIdError),
    /// A listener's TLS could not be set up.
    #[error(transparent)]
    Security(#[from] strom_security::SecurityError),
    /// Binding a listener failed.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A step of a broker's registration with the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationStep {
    /// The BrokerRegistration request.
    Registration,
    /// Catching up with the metadata log (joining the quorum as an
    /// observer, then applying the log up to the registration).
    CatchUp,
    /// The first heartbeat, which unfences the broker.
    FirstHeartbeat,
}

impl std::fmt::Display for RegistrationStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RegistrationStep::Registration => "registration",
            RegistrationStep::CatchUp => "catch-up with the metadata log",
            RegistrationStep::FirstHeartbeat => "first heartbeat",
        })
    }
}

/// A running broker.
pub struct RunningBroker {
    server: ServerHandle,
    context: Arc<BrokerContext>,
    controller: Arc<dyn ControllerClient>,
    /// In a cluster: this node's member of the metadata quorum.
    quorum: Option<QuorumMember>,
    logs: Arc<LogManager>,
    scheduler: Scheduler,
    heartbeats: Option<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    broker_epoch: i64,
    observability: crate::http::Observability,
}

/// The controller a broker uses: the embedded one, or its member of the
/// cluster's metadata quorum.
struct Controllers {
    client: Arc<dyn ControllerClient>,
    quorum: Option<QuorumMember>,
}

/// Starts a broker: opens storage and the embedded controller (or, in a
/// cluster, this node's member of the metadata quorum), registers, and
/// begins serving. Must run inside a multi-threaded tokio runtime. Time and
/// randomness come from the operating system ([`Environment::system`]).
pub async fn start(config: BrokerConfig) -> Result<RunningBroker, StartError> {
    start_with(config, Environment::system()).await
}

/// [`start`] with the clock and random source of `environment`, which the
/// broker hands to everything it creates (see [`crate::environment`]).
pub async fn start_with(
    config: BrokerConfig,
    environment: Environment,
) -> Result<RunningBroker, StartError> {
    if config
        .cluster
        .as_ref()
        .is_some_and(|cluster| !cluster.roles.broker)
    {
        return Err(StartError::NotABroker);
    }
    create_log_dirs(&config)?;
    // Built before anything starts: bad TLS material is a start-up error.
    let inter_broker = match &config.cluster {
        Some(cluster) => Some(strom_security::peer::peer_connector(
            &cluster.peers.inter_broker,
        )?),
        None => None,
    };
    let cluster_id = meta_properties::ensure_cluster(
        &config.log_dirs,
        config.node_id,
        config
            .cluster
            .as_ref()
            .map(|cluster| cluster.cluster_id.as_str()),
    )?;

    let observability = crate::http::Observability::start(&config).await?;
    let server = bind(&config).await?;
    let controllers = start_controller(&config, &environment).await?;
    let controller = Arc::clone(&controllers.client);
    let broker_epoch = register(
        &config,
        &controllers,
        &server.local_addresses(),
        environment.uuid(),
    )
    .await?;
    // Heartbeats start as soon as the broker is registered: opening the logs
    // and creating `__consumer_offsets` can outlast the session timeout, and
    // a broker fenced meanwhile could not lead the offsets topic it waits for.
    let heartbeats = TaskGuard(Some(tokio::spawn(heartbeat_loop(
        Arc::clone(&controller),
        config.node_id,
        broker_epoch,
        heartbeat_interval(&config),
    ))));
    let clock = Arc::clone(&environment.clock);
    let logs = Arc::new(open_logs(&config, controller.as_ref(), &environment).await?);
    observability.logs_loaded();
    let scheduler = Scheduler::start(
        Arc::clone(&logs),
        Arc::clone(&clock),
        Duration::from_millis(200),
    );
    let producer_ids = if config.cluster.is_some() {
        ProducerIdManager::from_quorum(Arc::clone(&controller), config.node_id, broker_epoch)
    } else {
        ProducerIdManager::open(&config.log_dirs[0])?
    };
    let context = Arc::new(
        broker_context(
            &config,
            cluster_id,
            &controller,
            producer_ids,
            &logs,
            &environment,
            &observability,
        )
        .await?,
    );
    context.replicas.set_broker_epoch(broker_epoch);
    if let Some(connector) = inter_broker {
        start_replica_fetchers(&context, connector);
    }
    let tasks = spawn_background_tasks(&context);
    let heartbeats = heartbeats.keep();
    let server = server.start(Arc::new(Dispatcher::new(Arc::clone(&context))));
    observability.serving(&context);
    info!(
        node_id = config.node_id,
        cluster_id = context.cluster_id,
        listeners = ?server.local_addresses(),
        metrics_listener = ?observability.address(),
        log_dirs = ?config.log_dirs,
        partitions = logs.partitions().len(),
        "Strom broker started"
    );
    Ok(RunningBroker {
        server,
        context,
        controller,
        quorum: controllers.quorum,
        logs,
        scheduler,
        heartbeats,
        tasks,
        broker_epoch,
        observability,
    })
}

fn heartbeat_interval(config: &BrokerConfig) -> Duration {
    config
        .cluster
        .as_ref()
        .map_or(HEARTBEAT_INTERVAL, |cluster| cluster.heartbeat_interval)
}

pub(crate) fn create_log_dirs(config: &BrokerConfig) -> Result<(), StartError> {
    for dir in &config.log_dirs {
        std::fs::create_dir_all(dir).map_err(|source| StartError::CreateDirectory {
            path: dir.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Binds every listener (the server does not accept until started).
async fn bind(config: &BrokerConfig) -> Result<Server, StartError> {
    let addresses = config
        .listeners
        .iter()
        .map(|listener| listener.bind_address())
        .collect::<Result<Vec<_>, _>>()?;
    let network = NetworkConfig {
        max_request_bytes: config.socket_request_max_bytes,
        idle_timeout: config.connections_max_idle,
        max_connections: config.max_connections,
    };
    Server::bind(
        &addresses,
        strom_security::listener_runtimes(
            &config.security,
            config
                .listeners
                .iter()
                .map(|listener| listener.name.as_str()),
        )?,
        network,
    )
    .await
    .map_err(|error| StartError::Bind {
        address: error.address,
        source: error.source,
    })
}

/// Opens (and recovers) every partition log on the blocking pool, each
/// topic with its configuration from the metadata image.
async fn open_logs(
    config: &BrokerConfig,
    controller: &dyn ControllerClient,
    environment: &Environment,
) -> Result<LogManager, StartError> {
    let now_ms = environment.clock.wall_ms();
    let image = controller.image();
    let topic_configs: BTreeMap<String, LogConfig> = image
        .topics()
        .map(|topic| {
            (
                topic.name.clone(),
                topic_log_config(config.topic_defaults(), &image, &topic.name),
            )
        })
        .collect();
    let manager_config = log_manager_config(config, default_log_config(config))
        .with_random(Arc::clone(&environment.random));
    let logs = tokio::task::spawn_blocking(move || {
        LogManager::open(manager_config, topic_configs, now_ms)
    })
    .await
    .map_err(StartError::StoragePanicked)?
    .map_err(StartError::Storage)?;
    // The background `flush.ms` flushes count in LogFlushRateAndTimeMs
    // beside the produce path's.
    logs.observe_flushes(|took| crate::metrics::LOG_FLUSH_TIME.observe(took));
    Ok(logs)
}

/// What the handlers share: replicas over the logs, producer ids, the group
/// coordinator (with `__consumer_offsets` created if missing) and the
/// fetch session cache.
async fn broker_context(
    config: &BrokerConfig,
    cluster_id: String,
    controller: &Arc<dyn ControllerClient>,
    producer_ids: ProducerIdManager,
    logs: &Arc<LogManager>,
    environment: &Environment,
    observability: &crate::http::Observability,
) -> Result<BrokerContext, StartError> {
    let replicas = Arc::new(ReplicaManager::new(
        config.node_id,
        Arc::clone(logs),
        Arc::clone(&environment.clock),
        config.topic_defaults().clone(),
    ));
    replicas
        .topic_metrics()
        .set_recording(observability.recording());
    replicas.apply_image(&controller.image());
    let controller_client = Arc::clone(controller);
    let groups = Arc::new(GroupService::new(
        config,
        Arc::clone(&replicas),
        Arc::clone(&environment.random),
    ));
    // A single node creates `__consumer_offsets` at start-up. In a cluster,
    // as in Kafka, the first FindCoordinator creates it: by then the other
    // brokers have registered and its partitions spread over all of them,
    // not only over the first broker up.
    if config.cluster.is_none() {
        ensure_offsets_topic(controller_client.as_ref(), config).await;
    }
    let image = controller_client.image();
    if image.topic_by_name(crate::groups::OFFSETS_TOPIC).is_some() {
        replicas.apply_image(&image);
        groups.claim(&image);
    }
    Ok(BrokerContext {
        config: config.clone(),
        cluster_id,
        controller: controller_client,
        replicas,
        producer_ids,
        groups,
        fetch_sessions: Arc::new(FetchSessionCache::new(
            config.max_incremental_fetch_session_cache_slots,
            environment.uuid().as_u64_pair().0,
        )),
        metrics: Arc::clone(observability.metrics()),
    })
}

/// The metadata follower and the group coordinator's timer (the heartbeat
/// loop starts right after registration).
fn spawn_background_tasks(context: &Arc<BrokerContext>) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(follow_metadata(Arc::clone(context))),
        context.groups.coordinator.spawn_timer(COORDINATOR_TICK),
        tokio::spawn(crate::isr::shrink_loop(
            Arc::clone(&context.controller),
            Arc::clone(&context.replicas),
            context.config.replica_lag_time_max,
        )),
    ]
}

/// Starts the follower fetchers of a cluster node (`num.replica.fetchers`
/// per source broker) and follows what the current image assigns here.
fn start_replica_fetchers(
    context: &Arc<BrokerContext>,
    connector: Arc<strom_security::peer::PeerConnector>,
) {
    let transport = Arc::new(crate::replica_fetch::TcpFetchTransport::new(
        Arc::clone(&context.controller),
        connector,
        strom_protocol::frame::DEFAULT_MAX_FRAME_BYTES,
    ));
    let config = context.config.replica_fetcher_config();
    let fetchers = Arc::new(strom_replication::FetcherManager::new(
        config,
        transport,
        Arc::clone(context.replicas.clock()),
        context.config.num_replica_fetchers,
    ));
    context.replicas.start_fetching(fetchers);
    context.sync_metadata();
}

/// A task aborted when dropped (a start-up step failed), unless handed on
/// with [`TaskGuard::keep`].
struct TaskGuard(Option<JoinHandle<()>>);

impl TaskGuard {
    fn keep(mut self) -> Option<JoinHandle<()>> {
        self.0.take()
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl RunningBroker {
    /// The addresses the broker listens on.
    pub fn local_addresses(&self) -> &[SocketAddr] {
        self.server.local_addresses()
    }

    /// The address of the metrics, health and console listener, if
    /// `strom.metrics.listener` configures one.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.observability.address()
    }

    /// The controller this broker uses (for administration and tests).
    pub fn controller(&self) -> Arc<dyn ControllerClient> {
        Arc::clone(&self.context.controller)
    }

    /// The partitions hosted here (led and followed).
    pub fn replicas(&self) -> Arc<crate::replica_manager::ReplicaManager> {
        Arc::clone(&self.context.replicas)
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.context.cluster_id
    }

    /// Graceful shutdown: stop accepting, answer in-flight requests, flush
    /// every log, write checkpoints and the clean-shutdown marker.
    pub async fn shutdown(self) {
        let RunningBroker {
            server,
            context,
            controller,
            quorum,
            logs,
            scheduler,
            heartbeats,
            mut tasks,
            broker_epoch,
            observability,
        } = self;
        let node_id = context.config.node_id;
        if let Some(heartbeats) = heartbeats {
            heartbeats.abort();
            let _ = heartbeats.await;
        }
        if quorum.is_some() {
            // In a cluster, leadership moves to other brokers while this one
            // still answers, so clients see NOT_LEADER and a new leader in
            // Metadata, not a broker that went away.
            crate::cluster_node::controlled_shutdown(
                controller.as_ref(),
                node_id,
                broker_epoch,
                heartbeat_interval(&context.config),
            )
            .await;
        }
        observability.shutdown().await;
        server.shutdown().await;
        if let Some(fetchers) = context.replicas.fetchers() {
            fetchers.shutdown().await;
        }
        for task in &tasks {
            task.abort();
        }
        // Wait until the aborted tasks are dropped, so that their handles on
        // the log manager are gone before it is closed.
        for task in tasks.drain(..) {
            let _ = task.await;
        }
        if quorum.is_none() {
            let request = BrokerHeartbeatRequest {
                broker_id: node_id,
                broker_epoch,
                want_fence: false,
                want_shutdown: true,
            };
            if let Err(error) = controller.broker_heartbeat(request).await {
                warn!(%error, "controlled shutdown heartbeat failed");
            }
        }
        let clock = Arc::clone(context.replicas.clock());
        drop(context);
        drop(controller);
        let result = tokio::task::spawn_blocking(move || {
            scheduler.stop();
            let now_ms = clock.wall_ms();
            match Arc::try_unwrap(logs) {
                Ok(logs) => logs.shutdown(now_ms),
                Err(shared) => {
                    // Still referenced by an aborted task that has not been
                    // dropped yet: flush everything and write every
                    // checkpoint through the shared handle (a plain tick
                    // wrote checkpoints only when due, so a DeleteRecords
                    // just before shutdown could be forgotten).
                    warn!("log manager still shared at shutdown: flushing without the clean-shutdown marker");
                    shared.flush_and_checkpoint(now_ms)
                }
            }
        })
        .await;
        if let Some(quorum) = quorum {
            quorum.shutdown().await;
        }
        match result {
            Ok(Ok(())) => info!("Strom broker stopped cleanly"),
            Ok(Err(error)) => warn!(%error, "error while closing logs"),
            Err(error) => warn!(%error, "log shutdown task failed"),
        }
    }
}

async fn start_controller(
    config: &BrokerConfig,
    environment: &Environment,
) -> Result<Controllers, StartError> {
    if let Some(cluster) = &config.cluster {
        let member = QuorumMember::start(config, cluster, environment).await?;
        return Ok(Controllers {
            client: member.client(),
            quorum: Some(member),
        });
    }
    let local = start_local_controller(config, environment).await?;
    let client: Arc<dyn ControllerClient> = Arc::new(local);
    Ok(Controllers {
        client,
        quorum: None,
    })
}

async fn start_local_controller(
    config: &BrokerConfig,
    environment: &Environment,
) -> Result<LocalController, StartError> {
    let metadata_dir = config.log_dirs[0].join(METADATA_DIR);
    let mut controller_config = LocalControllerConfig::new(metadata_dir);
    controller_config.controller = controller_settings(config);
    LocalController::start(
        controller_config,
        Arc::clone(&environment.clock),
        Arc::clone(&environment.random),
    )
    .await
    .map_err(StartError::Metadata)
}

async fn register(
    config: &BrokerConfig,
    controllers: &Controllers,
    bound: &[SocketAddr],
    incarnation_id: uuid::Uuid,
) -> Result<i64, StartError> {
    let controller = controllers.client.as_ref();
    let request = BrokerRegistrationRequest {
        broker_id: config.node_id,
        incarnation_id,
        endpoints: advertised_endpoints(config, bound),
        rack: config.rack.clone(),
    };
    let registration = register_until_answered(config, controller, request).await?;
    info!(
        broker_epoch = registration.broker_epoch,
        "registered with the controller"
    );
    if let (Some(member), Some(cluster)) = (&controllers.quorum, &config.cluster) {
        member
            .catch_up(config, cluster, registration.broker_epoch)
            .await?;
    }
    let heartbeat = BrokerHeartbeatRequest {
        broker_id: config.node_id,
        broker_epoch: registration.broker_epoch,
        want_fence: false,
        want_shutdown: false,
    };
    let step = RegistrationStep::FirstHeartbeat;
    controller
        .broker_heartbeat(heartbeat)
        .await
        .map_err(|source| StartError::ControllerFailed { step, source })?
        .map_err(|source| StartError::ControllerRefused { step, source })?;
    Ok(registration.broker_epoch)
}

/// How long a broker waits between registration attempts.
const REGISTRATION_RETRY: Duration = Duration::from_millis(500);

/// Sends the registration until the controller answers it for good.
///
/// In a cluster, a quorum that cannot take the registration yet (a node
/// started before a majority of the voters, or during an election: Kafka's
/// REQUEST_TIMED_OUT and NOT_CONTROLLER) is waited for, as Kafka's brokers
/// do, instead of stopping the process. A broker restarted right after a
/// crash finds its previous incarnation still registered until that one's
/// session expires; it tries again for a session timeout and two heartbeat
/// intervals from that first refusal. A live broker with the same id keeps
/// its session, so the refusal stands and the process stops.
async fn register_until_answered(
    config: &BrokerConfig,
    controller: &dyn ControllerClient,
    request: BrokerRegistrationRequest,
) -> Result<BrokerRegistrationReply, StartError> {
    let step = RegistrationStep::Registration;
    let patience = config.cluster.as_ref().map_or(Duration::ZERO, |cluster| {
        cluster.session_timeout + 2 * cluster.heartbeat_interval
    });
    // The patience bounds a wait between real sleeps, so it is measured on
    // the host's monotonic clock, not on the broker's injected one.
    let mut first_refusal: Option<std::time::Instant> = None;
    loop {
        let answer = match controller.register_broker(request.clone()).await {
            Ok(answer) => answer,
            Err(source) if config.cluster.is_some() && quorum_not_ready(&source) => {
                info!(error = %source, "the metadata quorum cannot take the registration yet; trying again");
                tokio::time::sleep(REGISTRATION_RETRY).await;
                continue;
            }
            Err(source) => return Err(StartError::ControllerFailed { step, source }),
        };
        match answer {
            Err(ControllerError::DuplicateBrokerRegistration { .. })
                if first_refusal
                    .get_or_insert_with(std::time::Instant::now)
                    .elapsed()
                    < patience =>
            {
                info!("another incarnation of this broker is still registered; waiting for its session to expire");
                tokio::time::sleep(REGISTRATION_RETRY).await;
            }
            answer => {
                return answer.map_err(|source| StartError::ControllerRefused { step, source })
            }
        }
    }
}

/// Failures that mean "the quorum cannot commit right now", not "no".
fn quorum_not_ready(error: &RuntimeError) -> bool {
    matches!(
        error,
        RuntimeError::QuorumTimeout { .. }
            | RuntimeError::NoMajority
            | RuntimeError::NotController { .. }
            | RuntimeError::Stale
    )
}

/// The advertised listeners as registration endpoints: an advertised port
/// of 0 means "the port we were given", an empty host 127.0.0.1.
fn advertised_endpoints(config: &BrokerConfig, bound: &[SocketAddr]) -> Vec<Endpoint> {
    config
        .advertised_listeners
        .iter()
        .map(|listener| {
            let port = match (
                listener.port,
                config
                    .listeners
                    .iter()
                    .position(|l| l.name == listener.name),
            ) {
                (0, Some(index)) => bound.get(index).map_or(0, SocketAddr::port),
                (port, _) => port,
            };
            let host = strom_config::host::reachable_host(&listener.host).to_owned();
            Endpoint {
                name: listener.name.clone(),
                host,
                port,
                security_protocol: crate::security::protocol_name(config, &listener.name),
            }
        })
        .collect()
}

/// Applies the current and every new metadata image to the hosted
/// partitions, then to the group coordinator (which loads the
/// `__consumer_offsets` partitions led here and forgets deleted topics).
async fn follow_metadata(context: Arc<BrokerContext>) {
    let mut images = context.controller.subscribe();
    loop {
        let image = Arc::clone(&images.borrow_and_update());
        let shared = Arc::clone(&context);
        let _ = tokio::task::spawn_blocking(move || {
            shared.replicas.apply_image(&image);
            shared.groups.apply_image(&image);
        })
        .await;
        if images.changed().await.is_err() {
            return;
        }
    }
}

async fn heartbeat_loop(
    controller: Arc<dyn ControllerClient>,
    broker_id: i32,
    broker_epoch: i64,
    every: Duration,
) {
    let mut interval = tokio::time::interval(every);
    loop {
        interval.tick().await;
        let request = BrokerHeartbeatRequest {
            broker_id,
            broker_epoch,
            want_fence: false,
            want_shutdown: false,
        };
        match controller.broker_heartbeat(request).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => warn!(%error, "heartbeat refused"),
            Err(error) => warn!(%error, "heartbeat failed"),
        }
    }
}

/// The controller's settings taken from the broker's: the defaults of new
/// topics and the cluster default of `unclean.leader.election.enable`
/// (a topic's own setting overrides it).
pub(crate) fn controller_settings(config: &BrokerConfig) -> ControllerConfig {
    ControllerConfig {
        default_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        unclean_leader_election_enable: default_log_config(config).unclean_leader_election_enable,
        ..ControllerConfig::default()
    }
}

fn default_log_config(config: &BrokerConfig) -> LogConfig {
    match LogConfig::from_properties(config.topic_defaults()) {
        Ok(parsed) => parsed.config,
        Err(error) => {
            warn!(%error, "invalid broker log defaults; using Kafka's");
            LogConfig::default()
        }
    }
}

fn log_manager_config(config: &BrokerConfig, defaults: LogConfig) -> LogManagerConfig {
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    // Kafka deletes a removed partition's directory after the broker's
    // default `file.delete.delay.ms` (`log.segment.delete.delay.ms`).
    let directory_delete_delay_ms = defaults.file_delete_delay_ms;
    let mut manager = LogManagerConfig::new(config.log_dirs.clone(), defaults);
    manager.retention_check_interval_ms = millis(config.log_retention_check_interval);
    manager.recovery_point_checkpoint_interval_ms =
        millis(config.log_flush_offset_checkpoint_interval);
    manager.log_start_offset_checkpoint_interval_ms =
        millis(config.log_flush_start_offset_checkpoint_interval);
    manager.high_watermark_checkpoint_interval_ms =
        millis(config.replica_high_watermark_checkpoint_interval);
    manager.directory_delete_delay_ms = directory_delete_delay_ms;
    manager.cleaner_enable = config.log_cleaner_enable;
    manager.cleaner_backoff_ms = millis(config.log_cleaner_backoff);
    manager.recovery_threads_per_data_dir = config.num_recovery_threads_per_data_dir;
    manager.page_cache = PageCacheSettings {
        writeback_bytes: config.log_writeback_interval_bytes,
        retain_bytes: config.log_page_cache_retain_bytes,
    };
    manager
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager_config(pairs: &[(&str, &str)]) -> LogManagerConfig {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let (config, _) = BrokerConfig::from_map(&map).expect("valid config");
        let defaults = default_log_config(&config);
        log_manager_config(&config, defaults)
    }

    fn broker_config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        BrokerConfig::from_map(&map).expect("valid config").0
    }

    #[test]
    fn the_controller_takes_the_brokers_unclean_leader_election_setting() {
        let enabled = broker_config(&[("unclean.leader.election.enable", "true")]);
        assert!(controller_settings(&enabled).unclean_leader_election_enable);
        let default = broker_config(&[]);
        assert!(!controller_settings(&default).unclean_leader_election_enable);
        let settings = controller_settings(&broker_config(&[
            ("num.partitions", "7"),
            ("default.replication.factor", "2"),
        ]));
        assert_eq!(
            (
                settings.default_partitions,
                settings.default_replication_factor
            ),
            (7, 2)
        );
    }

    #[test]
    fn the_log_managers_settings_come_from_the_broker_keys() {
        let manager = manager_config(&[
            ("log.cleaner.enable", "false"),
            ("log.cleaner.backoff.ms", "250"),
            ("num.recovery.threads.per.data.dir", "3"),
            ("log.segment.delete.delay.ms", "0"),
            ("log.retention.check.interval.ms", "1000"),
            ("log.flush.offset.checkpoint.interval.ms", "2000"),
            ("log.flush.start.offset.checkpoint.interval.ms", "3000"),
            ("replica.high.watermark.checkpoint.interval.ms", "4000"),
            ("strom.log.writeback.interval.bytes", "1048576"),
            ("strom.log.page.cache.retain.bytes", "67108864"),
        ]);
        assert!(!manager.cleaner_enable);
        assert_eq!(manager.cleaner_backoff_ms, 250);
        assert_eq!(manager.recovery_threads_per_data_dir, 3);
        assert_eq!(manager.directory_delete_delay_ms, 0);
        assert_eq!(manager.default_config.file_delete_delay_ms, 0);
        assert_eq!(manager.retention_check_interval_ms, 1000);
        assert_eq!(manager.recovery_point_checkpoint_interval_ms, 2000);
        assert_eq!(manager.log_start_offset_checkpoint_interval_ms, 3000);
        assert_eq!(manager.high_watermark_checkpoint_interval_ms, 4000);
        assert_eq!(manager.page_cache, PageCacheSettings::BOUNDED);
        let manager = manager_config(&[
            ("strom.log.writeback.interval.bytes", "65536"),
            ("strom.log.page.cache.retain.bytes", "0"),
        ]);
        assert_eq!(manager.page_cache.writeback_bytes, 65_536);
        assert_eq!(manager.page_cache.retain_bytes, Some(0));
    }

    #[test]
    fn the_log_managers_defaults_are_kafkas() {
        let manager = manager_config(&[]);
        assert!(manager.cleaner_enable);
        assert_eq!(manager.cleaner_backoff_ms, 15_000);
        assert_eq!(manager.recovery_threads_per_data_dir, 2);
        assert_eq!(manager.directory_delete_delay_ms, 60_000);
        assert_eq!(manager.log_start_offset_checkpoint_interval_ms, 60_000);
        assert_eq!(manager.high_watermark_checkpoint_interval_ms, 5_000);
        // Strom's own page-cache hints are off by default, as Kafka has none.
        assert_eq!(manager.page_cache, PageCacheSettings::KERNEL);
    }

    #[tokio::test]
    async fn start_errors_name_their_step_and_keep_their_cause() {
        use std::error::Error as _;
        let join = tokio::task::spawn_blocking(|| panic!("segment unreadable"))
            .await
            .unwrap_err();
        let error = StartError::StoragePanicked(join);
        assert_eq!(error.to_string(), "opening the partition logs panicked");
        assert!(error
            .source()
            .is_some_and(|source| source.to_string().contains("panic")));
        let error = StartError::ControllerRefused {
            step: RegistrationStep::FirstHeartbeat,
            source: strom_controller::error::ControllerError::BrokerNotRegistered { broker_id: 3 },
        };
        assert_eq!(
            error.to_string(),
            "the controller refused the broker's first heartbeat"
        );
        assert_eq!(
            error.source().map(ToString::to_string).as_deref(),
            Some("broker 3 is not registered")
        );
    }
}
