//! Starting and stopping a broker: the wiring of storage, controller,
//! replication and the network server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use strom_config::meta_properties;
use strom_controller::producer_ids::ProducerIdManager;
use strom_controller::runtime::{ControllerClient, LocalController, LocalControllerConfig};
use strom_network::{ConnectionQuotas, NetworkConfig, Server, ServerHandle};
use strom_observability::Observability;
use strom_replication::fetch_session::FetchSessionCache;
use strom_storage::manager::Scheduler;
use strom_storage::{LogConfig, LogManager};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::cluster_node::QuorumMember;
use crate::config::BrokerConfig;
use crate::environment::Environment;
use crate::groups::{ensure_offsets_topic, GroupService, COORDINATOR_TICK};
use crate::handlers::{BrokerContext, Dispatcher, HANDLED_APIS};
use crate::peer_pool::PeerPool;
use crate::registration::{announce_shutdown, heartbeat_loop, register};
use crate::replica_manager::{topic_log_config, ReplicaManager};
use crate::settings::{
    controller_settings, create_log_dirs, default_log_config, heartbeat_interval,
    log_manager_config, METADATA_DIR,
};
pub use crate::shutdown::ShutdownReport;
use crate::shutdown::{
    close_logs, stop_background_work, stop_scheduler, wait_for_sole_owner, Holders, HOLDER_WAIT,
};
pub use crate::start_error::{RegistrationStep, StartError};
use crate::transactions::TransactionService;

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
    observability: Observability,
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
    let prepared = prepare(&config)?;
    let observability = Observability::start(
        crate::observe::listener_address(&config)?,
        (
            crate::observe::http_security(&config)?,
            crate::observe::http_tls(&config)?,
        ),
        HANDLED_APIS,
        crate::observe::network_counts,
    )
    .await?;
    let server = bind(&config).await?;
    let controllers = start_controller(&config, &environment).await?;
    let controller = Arc::clone(&controllers.client);
    let broker_epoch = register(
        &config,
        controller.as_ref(),
        controllers.quorum.as_ref(),
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
    let logs = Arc::new(open_logs(&config, controller.as_ref(), &environment).await?);
    observability.logs_loaded();
    let scheduler = Scheduler::start(
        Arc::clone(&logs),
        Arc::clone(&environment.clock),
        Duration::from_millis(200),
    );
    let context = Arc::new(
        broker_context(
            &config,
            &prepared,
            &controller,
            broker_epoch,
            &logs,
            &environment,
            &observability,
        )
        .await?,
    );
    context.replicas.set_broker_epoch(broker_epoch);
    let (server, tasks) = serve(&context, server, prepared.inter_broker, &observability)?;
    let heartbeats = heartbeats.keep();
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

/// Listens on the client and inter-broker listeners (refusing connections
/// until now: see [`strom_network::Server`]), starts what runs beside the
/// request path (follower fetchers, the metadata follower, the
/// coordinator's timer, ISR shrinking) and then accepts.
fn serve(
    context: &Arc<BrokerContext>,
    server: Server,
    inter_broker: Option<Arc<strom_security::peer::PeerConnector>>,
    observability: &Observability,
) -> Result<(ServerHandle, Vec<JoinHandle<()>>), StartError> {
    let quotas = ConnectionQuotas::new(crate::dynamic_config::connection_limits(
        &context.config,
        &context.controller.image(),
    ));
    let listeners = server.listener_runtimes();
    let server = server
        .with_connection_quotas(Arc::clone(&quotas))
        .listen()
        .map_err(|error| StartError::Bind {
            address: error.address,
            source: error.source,
        })?;
    if let Some(connector) = inter_broker {
        start_replica_fetchers(context, connector);
    }
    let mut tasks = spawn_background_tasks(context);
    tasks.push(tokio::spawn(crate::dynamic_config::follow_dynamic_configs(
        context.config.clone(),
        Arc::clone(&context.controller),
        crate::dynamic_config::DynamicTargets {
            quotas,
            listeners,
            logs: Arc::clone(context.replicas.logs()),
        },
    )));
    let server = server.start(Arc::new(Dispatcher::new(Arc::clone(context))));
    observability.serving(context);
    let config = &context.config;
    info!(
        node_id = config.node_id,
        cluster_id = context.cluster_id,
        listeners = ?server.local_addresses(),
        metrics_listener = ?observability.address(),
        log_dirs = ?config.log_dirs,
        partitions = context.replicas.logs().partitions().len(),
        "Strom broker started"
    );
    Ok((server, tasks))
}

/// What is settled before anything starts.
struct Prepared {
    /// The connector to other brokers (a cluster node only).
    inter_broker: Option<Arc<strom_security::peer::PeerConnector>>,
    /// Pooled connections over it, for WriteTxnMarkers and transaction
    /// verification.
    peers: Option<Arc<PeerPool>>,
    /// The cluster id from `meta.properties`.
    cluster_id: String,
}

/// Checks the node is a broker, creates the data directories, builds the
/// inter-broker connector (bad TLS material is a start-up error) and reads
/// or writes `meta.properties`.
fn prepare(config: &BrokerConfig) -> Result<Prepared, StartError> {
    if config
        .cluster
        .as_ref()
        .is_some_and(|cluster| !cluster.roles.broker)
    {
        return Err(StartError::NotABroker);
    }
    create_log_dirs(config)?;
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
    let peers = inter_broker.as_ref().map(|connector| {
        Arc::new(PeerPool::new(
            Arc::clone(connector),
            strom_protocol::frame::DEFAULT_MAX_FRAME_BYTES,
        ))
    });
    Ok(Prepared {
        inter_broker,
        peers,
        cluster_id,
    })
}

/// Binds every client and inter-broker listener, early so that the
/// registration advertises their ports; nothing listens (connections are
/// refused) until [`serve`]. The controller listener of a cluster node is
/// the quorum member's, bound and served at once.
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
                topic_log_config(config.topic_defaults(), &image, config.node_id, &topic.name),
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
    logs.observe_flushes(|took| strom_observability::LOG_FLUSH_TIME.observe(took));
    Ok(logs)
}

/// What the handlers share: replicas over the logs, producer ids, the group
/// coordinator (with `__consumer_offsets` created if missing) and the
/// fetch session cache.
async fn broker_context(
    config: &BrokerConfig,
    prepared: &Prepared,
    controller: &Arc<dyn ControllerClient>,
    broker_epoch: i64,
    logs: &Arc<LogManager>,
    environment: &Environment,
    observability: &Observability,
) -> Result<BrokerContext, StartError> {
    let producer_ids = Arc::new(if config.cluster.is_some() {
        ProducerIdManager::from_quorum(Arc::clone(controller), config.node_id, broker_epoch)
    } else {
        ProducerIdManager::open(&config.log_dirs[0])?
    });
    let replicas = replica_manager(config, logs, environment, observability)?;
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
    let transactions = transaction_service(
        config,
        prepared,
        (&replicas, &groups, &producer_ids),
        &controller_client,
    );
    let image = controller_client.image();
    if image.topic_by_name(crate::groups::OFFSETS_TOPIC).is_some() {
        replicas.apply_image(&image);
        groups.claim(&image);
    }
    transactions.claim(&image);
    let txn_verifier = txn_verifier(config, prepared, &controller_client, &transactions);
    Ok(BrokerContext {
        config: config.clone(),
        cluster_id: prepared.cluster_id.clone(),
        controller: controller_client,
        replicas,
        producer_ids,
        groups,
        transactions,
        txn_verifier,
        fetch_sessions: Arc::new(FetchSessionCache::new(
            config.max_incremental_fetch_session_cache_slots,
            environment.uuid().as_u64_pair().0,
        )),
        metrics: Arc::clone(observability.metrics()),
        quotas: Arc::new(crate::quotas::QuotaService::from_config(
            config,
            Arc::clone(&environment.clock),
        )),
    })
}

/// The replicas over the logs, with tiered storage when the broker has it.
fn replica_manager(
    config: &BrokerConfig,
    logs: &Arc<LogManager>,
    environment: &Environment,
    observability: &Observability,
) -> Result<Arc<ReplicaManager>, StartError> {
    let replicas = Arc::new(ReplicaManager::new(
        config.node_id,
        Arc::clone(logs),
        Arc::clone(&environment.clock),
        config.topic_defaults().clone(),
    ));
    if let Some(settings) = crate::tiered::settings(config.properties(), &config.log_dirs[0])
        .map_err(StartError::RemoteStorage)?
    {
        let manager = crate::tiered::open(&settings).map_err(StartError::RemoteStorage)?;
        replicas.set_remote_log_manager(manager);
    }
    replicas
        .topic_metrics()
        .set_recording(observability.recording());
    Ok(replicas)
}

/// The verifier of transactional produces (KIP-890 part 1).
fn txn_verifier(
    config: &BrokerConfig,
    prepared: &Prepared,
    controller: &Arc<dyn ControllerClient>,
    transactions: &Arc<TransactionService>,
) -> Arc<crate::txn_verification::TxnVerifier> {
    Arc::new(crate::txn_verification::TxnVerifier::new(
        config.transactions.partition_verification,
        config.node_id,
        Arc::clone(controller),
        Arc::clone(transactions),
        prepared.peers.clone(),
    ))
}

/// The transaction coordinator over `__transaction_state`, writing its
/// markers through the replicas here and WriteTxnMarkers elsewhere.
fn transaction_service(
    config: &BrokerConfig,
    prepared: &Prepared,
    (replicas, groups, producer_ids): (
        &Arc<ReplicaManager>,
        &Arc<GroupService>,
        &Arc<ProducerIdManager>,
    ),
    controller: &Arc<dyn ControllerClient>,
) -> Arc<TransactionService> {
    let markers = Arc::new(crate::markers::BrokerMarkers::new(
        Arc::clone(replicas),
        Arc::clone(groups),
        Arc::clone(controller),
        prepared.peers.clone(),
    ));
    Arc::new(TransactionService::new(
        config,
        Arc::clone(replicas),
        Arc::clone(producer_ids),
        markers,
    ))
}

/// The metadata follower and the group coordinator's timer (the heartbeat
/// loop starts right after registration).
fn spawn_background_tasks(context: &Arc<BrokerContext>) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(follow_metadata(Arc::clone(context))),
        context.groups.coordinator.spawn_timer(COORDINATOR_TICK),
        context.transactions.coordinator.spawn_timer(
            context
                .config
                .transactions
                .abort_timed_out_transaction_cleanup_interval
                .max(Duration::from_millis(10)),
        ),
        tokio::spawn(crate::isr::shrink_loop(
            Arc::clone(&context.controller),
            Arc::clone(&context.replicas),
            context.config.replica_lag_time_max,
        )),
    ];
    let tiered = crate::tiered::settings(context.config.properties(), &context.config.log_dirs[0]);
    if let (Some(manager), Ok(Some(settings))) = (context.replicas.remote_log_manager(), tiered) {
        tasks.push(tokio::spawn(crate::tiered::run(
            Arc::clone(&context.replicas),
            Arc::clone(manager),
            settings.task_interval,
        )));
    }
    tasks
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
    let config = crate::settings::replica_fetcher_config(&context.config);
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

    /// Graceful shutdown: stop taking leadership, move the leaderships
    /// away (controlled shutdown, in a cluster), stop accepting, answer
    /// in-flight requests, stop every task, and close every log with its
    /// checkpoints and the clean-shutdown marker (see [`crate::shutdown`]).
    pub async fn shutdown(self) -> ShutdownReport {
        let RunningBroker {
            server,
            context,
            controller,
            quorum,
            logs,
            scheduler,
            heartbeats,
            tasks,
            broker_epoch,
            observability,
        } = self;
        let node_id = context.config.node_id;
        let replicas = Arc::clone(&context.replicas);
        let _ = tokio::task::spawn_blocking(move || replicas.stop_taking_leadership()).await;
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
        stop_background_work(&context, tasks).await;
        if quorum.is_none() {
            announce_shutdown(controller.as_ref(), node_id, broker_epoch).await;
        }
        let clock = Arc::clone(context.replicas.clock());
        let leaderships_declined = context.replicas.leaderships_declined();
        let leaderships_taken_while_stopping = context.replicas.leaderships_taken_while_stopping();
        let holders = Holders::of(&context);
        drop(context);
        drop(controller);
        stop_scheduler(scheduler).await;
        wait_for_sole_owner(&logs, &holders, HOLDER_WAIT).await;
        let logs_closed_cleanly = close_logs(logs, clock).await;
        if let Some(quorum) = quorum {
            quorum.shutdown().await;
        }
        if logs_closed_cleanly {
            info!("Strom broker stopped cleanly");
        } else {
            warn!("Strom broker stopped; the next start recovers its logs");
        }
        ShutdownReport {
            logs_closed_cleanly,
            leaderships_declined,
            leaderships_taken_while_stopping,
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
            shared.transactions.apply_image(&image);
        })
        .await;
        if images.changed().await.is_err() {
            return;
        }
    }
}
