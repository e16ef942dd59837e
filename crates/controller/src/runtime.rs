//! The thin async layer: [`ControllerClient`], the interface brokers use,
//! and [`LocalController`], the embedded single-node implementation.
//!
//! `LocalController` runs each command under one lock on a blocking thread
//! (`spawn_blocking`, so an `fsync` never stalls the reactor): the sans-IO
//! [`Controller`] plans the records, the [`MetadataLog`] appends and syncs
//! them, the image is advanced, and the new `Arc<MetadataImage>` is
//! published on a `tokio::sync::watch` channel. Brokers learn metadata only
//! from that channel, that is, from the log. A background task calls
//! [`LocalController::tick`] to fence brokers whose session expired.
//!
//! A remote quorum (openraft, later) implements the same trait: commands
//! travel to the active controller and images are rebuilt from the
//! replicated log on every node.
//!
//! Failure policy: if appending to the log fails, the controller stops
//! (every later command returns [`RuntimeError::Failed`]); restarting runs
//! recovery, which truncates a torn tail.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::controller::{
    AllocateProducerIdsRequest, AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReply,
    AlterPartitionRequest, BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest, Controller, ControllerConfig, ControllerResult,
    CreatePartitionsRequest, CreateTopicsRequest, CreatedTopic, DeleteOutcome, ElectLeadersRequest,
    ElectionOutcome, IncrementalAlterConfigsRequest, OngoingReassignment, PartitionReassignment,
    ProducerIdBlock, ReassignmentOutcome, ResourceOutcome, ScramChange, TopicOutcome,
    TopicReference,
};
use crate::error::{ApplyError, ControllerError, LogError, RuntimeError};
use crate::image::{BrokerId, MetadataImage};
use crate::log::{MetadataLog, RecoveryReport};
use crate::quorum::{NodeId, QuorumStatus};
use crate::security_records::AccessControlEntryRecord;
use strom_clock::{Clock, Random};
use strom_quotas::QuotaError;

/// The controller as brokers see it: commands in, images out.
#[async_trait]
pub trait ControllerClient: Send + Sync {
    /// The latest committed image.
    fn image(&self) -> Arc<MetadataImage>;

    /// A receiver that sees every newly committed image.
    fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>>;

    /// CreateTopics.
    async fn create_topics(
        &self,
        request: CreateTopicsRequest,
    ) -> Result<Vec<TopicOutcome<CreatedTopic>>, RuntimeError>;

    /// DeleteTopics.
    async fn delete_topics(
        &self,
        topics: Vec<TopicReference>,
    ) -> Result<Vec<DeleteOutcome>, RuntimeError>;

    /// CreatePartitions.
    async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
    ) -> Result<Vec<TopicOutcome<()>>, RuntimeError>;

    /// AlterConfigs (replace each resource's configs).
    async fn alter_configs(
        &self,
        request: AlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError>;

    /// IncrementalAlterConfigs.
    async fn incremental_alter_configs(
        &self,
        request: IncrementalAlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError>;

    /// BrokerRegistration.
    async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<Result<BrokerRegistrationReply, ControllerError>, RuntimeError>;

    /// BrokerHeartbeat.
    async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<Result<BrokerHeartbeatReply, ControllerError>, RuntimeError>;

    /// ElectLeaders.
    async fn elect_leaders(
        &self,
        request: ElectLeadersRequest,
    ) -> Result<Vec<ElectionOutcome>, RuntimeError>;

    /// AlterPartition: an ISR change proposed by a partition's leader.
    async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<Result<AlterPartitionReply, ControllerError>, RuntimeError>;

    /// AlterPartitionReassignments: starts, replaces or cancels partition
    /// reassignments.
    async fn alter_partition_reassignments(
        &self,
        partitions: Vec<PartitionReassignment>,
    ) -> Result<Vec<ReassignmentOutcome>, RuntimeError>;

    /// ListPartitionReassignments: the ongoing reassignments of every
    /// partition (`None`) or of the named ones, as the active controller
    /// knows them.
    async fn list_partition_reassignments(
        &self,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<OngoingReassignment>, RuntimeError>;

    /// AllocateProducerIds: the next block of producer ids for a broker.
    async fn allocate_producer_ids(
        &self,
        request: AllocateProducerIdsRequest,
    ) -> Result<Result<ProducerIdBlock, ControllerError>, RuntimeError>;

    /// AlterUserScramCredentials: whether each change applied.
    async fn alter_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<Vec<bool>, RuntimeError>;

    /// CreateAcls and DeleteAcls: adds and removes ACL bindings.
    async fn alter_acls(
        &self,
        additions: Vec<AccessControlEntryRecord>,
        removals: Vec<AccessControlEntryRecord>,
    ) -> Result<(), RuntimeError>;

    /// AlterClientQuotas: one result per alteration, in order.
    async fn alter_client_quotas(
        &self,
        request: AlterClientQuotasRequest,
    ) -> Result<Vec<Result<(), QuotaError>>, RuntimeError>;

    /// DescribeQuorum: the metadata quorum as the active controller sees
    /// it. `None` for a controller that is not a quorum (the embedded
    /// single-node one).
    async fn describe_quorum(&self) -> Result<Option<QuorumStatus>, RuntimeError> {
        Ok(None)
    }

    /// The metadata quorum as this node sees it (without asking the
    /// active controller): for metrics. `None` for a controller that is not
    /// a quorum.
    fn local_quorum_status(&self) -> Option<QuorumStatus> {
        None
    }

    /// The controller voters (`controller.quorum.voters`): each node id with
    /// the `host:port` of its controller listener. Empty for a controller
    /// that is not a quorum.
    fn quorum_voters(&self) -> BTreeMap<NodeId, String> {
        BTreeMap::new()
    }
}

/// Settings of the embedded controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalControllerConfig {
    /// Directory of the metadata log and snapshot (created if missing).
    pub metadata_dir: PathBuf,
    /// Settings of the controller core.
    pub controller: ControllerConfig,
    /// Write a snapshot (and empty the log) after this many records.
    pub snapshot_interval_records: u64,
    /// How often the liveness task checks broker sessions.
    pub tick_interval_ms: u64,
}

impl LocalControllerConfig {
    /// Defaults for a metadata directory: snapshot every 1,000 records,
    /// check sessions every second.
    pub fn new(metadata_dir: impl Into<PathBuf>) -> Self {
        Self {
            metadata_dir: metadata_dir.into(),
            controller: ControllerConfig::default(),
            snapshot_interval_records: 1_000,
            tick_interval_ms: 1_000,
        }
    }
}

struct State {
    controller: Controller,
    log: MetadataLog,
    image: Arc<MetadataImage>,
    snapshot_interval_records: u64,
    failed: bool,
}

struct Shared {
    state: Mutex<State>,
    publisher: watch::Sender<Arc<MetadataImage>>,
    clock: Arc<dyn Clock>,
}

/// The embedded single-node controller. Dropping it stops its liveness
/// task.
pub struct LocalController {
    shared: Arc<Shared>,
    liveness_task: tokio::task::JoinHandle<()>,
    recovery: RecoveryReport,
}

impl std::fmt::Debug for LocalController {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LocalController")
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl LocalController {
    /// Opens the metadata log (replaying it), and starts the liveness task.
    /// Must be called inside a tokio runtime.
    pub async fn start(
        config: LocalControllerConfig,
        clock: Arc<dyn Clock>,
        random: Arc<dyn Random>,
    ) -> Result<Self, LogError> {
        let directory = config.metadata_dir.clone();
        let opened = tokio::task::spawn_blocking(move || MetadataLog::open(&directory))
            .await
            .map_err(|join_error| LogError::Io {
                path: config.metadata_dir.clone(),
                source: std::io::Error::other(join_error),
            })??;
        let (log, image, recovery) = opened;
        tracing::info!(
            metadata_dir = %config.metadata_dir.display(),
            last_offset = ?image.last_offset(),
            topics = image.topic_count(),
            truncated_bytes = recovery.truncated_bytes,
            "metadata log recovered"
        );
        let image = Arc::new(image);
        let (publisher, _) = watch::channel(Arc::clone(&image));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                controller: Controller::new(config.controller.clone(), random),
                log,
                image,
                snapshot_interval_records: config.snapshot_interval_records.max(1),
                failed: false,
            }),
            publisher,
            clock,
        });
        let interval = Duration::from_millis(config.tick_interval_ms.max(1));
        let liveness_task = tokio::spawn(liveness_loop(Arc::downgrade(&shared), interval));
        Ok(Self {
            shared,
            liveness_task,
            recovery,
        })
    }

    /// What recovery found at start-up.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Checks broker sessions now; returns the brokers fenced.
    pub async fn tick(&self) -> Result<Vec<BrokerId>, RuntimeError> {
        self.run(|controller, image, now_ms| controller.tick(image, now_ms))
            .await
    }
}

impl Drop for LocalController {
    fn drop(&mut self) {
        self.liveness_task.abort();
    }
}

async fn liveness_loop(shared: Weak<Shared>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let result = tokio::task::spawn_blocking(move || {
            shared.execute(|controller, image, now_ms| controller.tick(image, now_ms))
        })
        .await;
        match result {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::error!(error = %error, "liveness check failed; stopping it");
                return;
            }
            Err(_) => return,
        }
    }
}

impl Shared {
    fn execute<T, F>(&self, command: F) -> Result<T, RuntimeError>
    where
        F: FnOnce(&mut Controller, &MetadataImage, u64) -> Result<ControllerResult<T>, ApplyError>,
    {
        let mut guard = self.state.lock().map_err(|_| RuntimeError::Failed)?;
        let state = &mut *guard;
        if state.failed {
            return Err(RuntimeError::Failed);
        }
        let now_ms = self.clock.monotonic_ms();
        let result = command(&mut state.controller, &state.image, now_ms)?;
        if result.records.is_empty() {
            return Ok(result.response);
        }
        if let Err(error) = state.commit(&result) {
            state.failed = true;
            tracing::error!(error = %error, "metadata commit failed; controller stopped");
            return Err(error);
        }
        self.publisher.send_replace(Arc::clone(&state.image));
        state.maybe_snapshot();
        Ok(result.response)
    }
}

impl State {
    fn commit<T>(&mut self, result: &ControllerResult<T>) -> Result<(), RuntimeError> {
        debug_assert_eq!(self.log.next_offset(), self.image.next_offset());
        let base = self.log.append(&result.records)?;
        let image = self.image.apply_all(
            result
                .records
                .iter()
                .enumerate()
                .map(|(index, record)| (base + index as u64, record)),
        )?;
        self.image = Arc::new(image);
        Ok(())
    }

    fn maybe_snapshot(&mut self) {
        if self.log.records_since_snapshot() < self.snapshot_interval_records {
            return;
        }
        if let Err(error) = self.log.write_snapshot(&self.image) {
            // The log still holds every record; the next commit retries.
            tracing::warn!(error = %error, "metadata snapshot failed");
        }
    }
}

/// How a controller runs one planned command: the part in which the
/// embedded controller and the quorum differ. Every [`CommandRunner`] is a
/// [`ControllerClient`].
#[async_trait]
pub trait CommandRunner: Send + Sync {
    /// The latest image.
    fn current_image(&self) -> Arc<MetadataImage>;

    /// A receiver that sees every newly committed image.
    fn image_receiver(&self) -> watch::Receiver<Arc<MetadataImage>>;

    /// Plans `command` against the current image (with the time in ms),
    /// commits its records as one batch, and returns its reply once the
    /// records are in the image.
    async fn run<T, F>(&self, command: F) -> Result<T, RuntimeError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Controller, &MetadataImage, u64) -> Result<ControllerResult<T>, ApplyError>
            + Send
            + 'static;
}

#[async_trait]
impl CommandRunner for LocalController {
    fn current_image(&self) -> Arc<MetadataImage> {
        self.shared.publisher.borrow().clone()
    }

    fn image_receiver(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.shared.publisher.subscribe()
    }

    async fn run<T, F>(&self, command: F) -> Result<T, RuntimeError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Controller, &MetadataImage, u64) -> Result<ControllerResult<T>, ApplyError>
            + Send
            + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.execute(command))
            .await
            .map_err(|_| RuntimeError::Shutdown)?
    }
}

#[async_trait]
impl<R: CommandRunner> ControllerClient for R {
    fn image(&self) -> Arc<MetadataImage> {
        self.current_image()
    }

    fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image_receiver()
    }

    async fn create_topics(
        &self,
        request: CreateTopicsRequest,
    ) -> Result<Vec<TopicOutcome<CreatedTopic>>, RuntimeError> {
        self.run(move |controller, image, _| controller.create_topics(image, &request))
            .await
    }

    async fn delete_topics(
        &self,
        topics: Vec<TopicReference>,
    ) -> Result<Vec<DeleteOutcome>, RuntimeError> {
        self.run(move |controller, image, _| controller.delete_topics(image, &topics))
            .await
    }

    async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
    ) -> Result<Vec<TopicOutcome<()>>, RuntimeError> {
        self.run(move |controller, image, _| controller.create_partitions(image, &request))
            .await
    }

    async fn alter_configs(
        &self,
        request: AlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError> {
        self.run(move |controller, image, _| controller.alter_configs(image, &request))
            .await
    }

    async fn incremental_alter_configs(
        &self,
        request: IncrementalAlterConfigsRequest,
    ) -> Result<Vec<ResourceOutcome>, RuntimeError> {
        self.run(move |controller, image, _| controller.incremental_alter_configs(image, &request))
            .await
    }

    async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<Result<BrokerRegistrationReply, ControllerError>, RuntimeError> {
        self.run(move |controller, image, now_ms| {
            controller.register_broker(image, &request, now_ms)
        })
        .await
    }

    async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<Result<BrokerHeartbeatReply, ControllerError>, RuntimeError> {
        self.run(move |controller, image, now_ms| {
            controller.broker_heartbeat(image, &request, now_ms)
        })
        .await
    }

    async fn elect_leaders(
        &self,
        request: ElectLeadersRequest,
    ) -> Result<Vec<ElectionOutcome>, RuntimeError> {
        self.run(move |controller, image, _| controller.elect_leaders(image, &request))
            .await
    }

    async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<Result<AlterPartitionReply, ControllerError>, RuntimeError> {
        self.run(move |controller, image, _| controller.alter_partition(image, &request))
            .await
    }

    async fn alter_partition_reassignments(
        &self,
        partitions: Vec<PartitionReassignment>,
    ) -> Result<Vec<ReassignmentOutcome>, RuntimeError> {
        self.run(move |controller, image, _| {
            controller.alter_partition_reassignments(image, &partitions)
        })
        .await
    }

    async fn list_partition_reassignments(
        &self,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<OngoingReassignment>, RuntimeError> {
        self.run(move |controller, image, _| {
            Ok(controller.list_partition_reassignments(image, partitions.as_deref()))
        })
        .await
    }

    async fn allocate_producer_ids(
        &self,
        request: AllocateProducerIdsRequest,
    ) -> Result<Result<ProducerIdBlock, ControllerError>, RuntimeError> {
        self.run(move |controller, image, _| controller.allocate_producer_ids(image, &request))
            .await
    }

    async fn alter_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<Vec<bool>, RuntimeError> {
        self.run(move |controller, image, _| controller.alter_scram_credentials(image, &changes))
            .await
    }

    async fn alter_acls(
        &self,
        additions: Vec<AccessControlEntryRecord>,
        removals: Vec<AccessControlEntryRecord>,
    ) -> Result<(), RuntimeError> {
        self.run(move |controller, image, _| controller.alter_acls(image, &additions, &removals))
            .await
    }

    async fn alter_client_quotas(
        &self,
        request: AlterClientQuotasRequest,
    ) -> Result<Vec<Result<(), QuotaError>>, RuntimeError> {
        self.run(move |controller, image, _| controller.alter_client_quotas(image, &request))
            .await
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
