//! The transaction coordinator's home in the broker: `__transaction_state`
//! as a compacted internal topic replicated like any partition, the
//! [`TransactionLog`] over its partition logs, producer ids from the
//! broker's allocator, the [`MarkerWriter`] that writes commit and abort
//! markers into the partitions of a transaction, and the bookkeeping that
//! follows the leadership of the `__transaction_state` partitions (loading
//! those this broker comes to lead at their leader epoch, which is the
//! coordinator epoch, and unloading those it stops leading).
//!
//! The coordinator itself is `strom-transactions` (sans-IO, with a thin
//! async edge); this module gives it storage and follows the metadata
//! image, as [`crate::groups`] does for the group coordinator.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use strom_controller::controller::{ConfigEntry, CreateTopicsRequest, NewTopic};
use strom_controller::error::ControllerError;
use strom_controller::image::MetadataImage;
use strom_controller::producer_ids::ProducerIdManager;
use strom_controller::runtime::ControllerClient;
use strom_coordinator::LogRecord;
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};
use strom_replication::AckStatus;
use strom_storage::TopicPartition;
use strom_transactions::coordinator::CoordinatorConfig;
use strom_transactions::metadata::TransactionVersion;
use strom_transactions::runtime::{
    AppendFailure, MarkerWriter, ProducerIdSource, TransactionCoordinator, TransactionLog,
};
use tracing::{debug, info, warn};

use crate::blocking::blocking;
use crate::claims::{led_partitions, Claims};
use crate::config::BrokerConfig;
use crate::groups::{collect_batch, read_to_log_end};
use crate::replica_manager::{PartitionReplica, ReplicaManager};

/// The internal topic of transaction state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's `transaction.state.log.segment.bytes` default.
const TRANSACTION_STATE_SEGMENT_BYTES: &str = "104857600";

/// How long a `__transaction_state` append waits for the in-sync replicas
/// (Kafka's `transaction.state.log` writes use the request timeout).
const APPEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The coordinator's settings from the broker's `transaction.*` keys.
pub fn coordinator_config(config: &BrokerConfig) -> CoordinatorConfig {
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    CoordinatorConfig {
        num_partitions: config.transactions.state_log_num_partitions.max(1),
        max_transaction_timeout_ms: i32::try_from(config.transactions.max_timeout.as_millis())
            .unwrap_or(i32::MAX),
        transactional_id_expiration_ms: millis(config.transactions.transactional_id_expiration),
        transaction_version: TransactionVersion::V1,
    }
}

/// `__transaction_state` over the broker's partition logs: one record per
/// append, `acks=all`, refused unless this broker leads the partition at
/// the coordinator epoch the write was decided at.
pub struct TransactionStateLog {
    replicas: Arc<ReplicaManager>,
}

impl TransactionStateLog {
    fn led(
        &self,
        partition: i32,
        coordinator_epoch: i32,
    ) -> Result<Arc<PartitionReplica>, AppendFailure> {
        let topic_partition = TopicPartition::new(TRANSACTION_STATE_TOPIC.to_owned(), partition);
        let replica = self
            .replicas
            .get(&topic_partition)
            .filter(|replica| !replica.is_deposed())
            .ok_or(AppendFailure::NotLeader { partition })?;
        match replica.leader_epoch() {
            Ok(Ok(epoch)) if epoch == coordinator_epoch => Ok(replica),
            _ => Err(AppendFailure::NotLeader { partition }),
        }
    }
}

#[async_trait]
impl TransactionLog for TransactionStateLog {
    async fn append(
        &self,
        partition: i32,
        coordinator_epoch: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), AppendFailure> {
        let replica = self.led(partition, coordinator_epoch)?;
        let now_ms = self.replicas.now_ms();
        let failed = |reason: String| AppendFailure::Failed { partition, reason };
        let mut builder = RecordBatchBuilder::new(Compression::None);
        builder
            .append(now_ms, Some(&key), value.as_deref(), &[])
            .map_err(|error| failed(error.to_string()))?;
        let batch = builder.build().map_err(|error| failed(error.to_string()))?;
        let appended = blocking(|| replica.append_flushing_here(batch, true, now_ms))
            .map_err(|error| failed(error.to_string()))?;
        let required = appended.info.last_offset.saturating_add(1);
        match replica
            .wait_for_ack(required, appended.leader_epoch, APPEND_TIMEOUT)
            .await
        {
            AckStatus::Committed => Ok(()),
            AckStatus::NotLeader => Err(AppendFailure::NotLeader { partition }),
            AckStatus::Waiting => Err(failed("not replicated in time".to_owned())),
            AckStatus::NotEnoughReplicasAfterAppend => Err(failed(
                "the ISR shrank below min.insync.replicas".to_owned(),
            )),
        }
    }
}

/// Producer ids for the coordinator, from the broker's allocator.
pub struct BrokerProducerIds(pub Arc<ProducerIdManager>);

#[async_trait]
impl ProducerIdSource for BrokerProducerIds {
    async fn allocate(&self) -> Result<i64, String> {
        self.0
            .allocate(|work| crate::blocking::blocking(work))
            .await
            .map_err(|error| error.to_string())
    }
}

/// The coordinator and what the broker knows about its partitions.
pub struct TransactionService {
    /// The transaction coordinator over `__transaction_state`.
    pub coordinator: TransactionCoordinator,
    replicas: Arc<ReplicaManager>,
    node_id: i32,
    /// `__transaction_state` partitions led here, with the leader epoch
    /// (the coordinator epoch) they were claimed at.
    claims: Claims,
}

impl TransactionService {
    /// A service whose coordinator serves no partition yet.
    pub fn new(
        config: &BrokerConfig,
        replicas: Arc<ReplicaManager>,
        producer_ids: Arc<ProducerIdManager>,
        markers: Arc<dyn MarkerWriter>,
    ) -> TransactionService {
        let log = Arc::new(TransactionStateLog {
            replicas: Arc::clone(&replicas),
        });
        let coordinator = TransactionCoordinator::new(
            coordinator_config(config),
            log,
            markers,
            Arc::new(BrokerProducerIds(producer_ids)),
            Arc::clone(replicas.clock()),
        );
        TransactionService {
            coordinator,
            replicas,
            node_id: config.node_id,
            claims: Claims::default(),
        }
    }

    /// Claims the `__transaction_state` partitions led here in `image`
    /// (their ids answer COORDINATOR_LOAD_IN_PROGRESS until loaded) and
    /// gives up those no longer led here, or led at another epoch.
    pub fn claim(&self, image: &MetadataImage) {
        let led = led_partitions(image, TRANSACTION_STATE_TOPIC, self.node_id);
        self.claims.update(
            led,
            |partition, epoch| {
                self.coordinator.unload(partition);
                info!(
                    partition,
                    coordinator_epoch = epoch,
                    "no longer transaction coordinator of __transaction_state partition"
                );
            },
            |partition, epoch| self.coordinator.begin_loading(partition, epoch),
        );
    }

    /// Gives up every `__transaction_state` partition, as when another
    /// broker takes them over: the broker is stopping. The coordinator's
    /// marker tasks see their transactions gone and end (a restarted
    /// coordinator loads the partition again and resumes them).
    pub fn resign_all(&self) {
        self.claims.resign(|partition, epoch| {
            self.coordinator.unload(partition);
            debug!(
                partition,
                coordinator_epoch = epoch,
                "__transaction_state partition given up at shutdown"
            );
        });
    }

    /// Follows a new metadata image (after the replica manager applied
    /// it): claims partitions, then loads every claimed partition not
    /// loaded yet. Blocking: call it from a blocking-tolerant context
    /// inside the runtime (loading resumes markers on tasks).
    pub fn apply_image(&self, image: &MetadataImage) {
        self.claim(image);
        for (partition, epoch) in self.claims.take_unloaded() {
            match self.load(partition, epoch) {
                Ok(summary) => debug!(
                    partition,
                    transactional_ids = summary.transactional_ids,
                    resumed = summary.to_complete.len(),
                    "__transaction_state partition loaded"
                ),
                Err(error) => {
                    warn!(partition, %error, "cannot load __transaction_state partition")
                }
            }
        }
    }

    fn load(
        &self,
        partition: i32,
        coordinator_epoch: i32,
    ) -> Result<strom_transactions::coordinator::LoadSummary, Box<dyn std::error::Error>> {
        let topic_partition = TopicPartition::new(TRANSACTION_STATE_TOPIC.to_owned(), partition);
        let replica = self
            .replicas
            .get(&topic_partition)
            .ok_or("the partition is not hosted here")?;
        let records = read_all(&replica)?;
        let summary = self.coordinator.complete_load(
            partition,
            coordinator_epoch,
            records
                .iter()
                .map(|record| (record.key.as_ref(), record.value.as_deref())),
        )?;
        Ok(summary)
    }
}

/// Every keyed record of `replica`'s log, in order, up to its log end.
fn read_all(replica: &PartitionReplica) -> Result<Vec<LogRecord>, Box<dyn std::error::Error>> {
    let mut next_offset = replica.with_log(|log| log.log_start_offset())?;
    let mut records = Vec::new();
    loop {
        let (bytes, log_end_offset) = read_to_log_end(replica, next_offset)?;
        let Some(bytes) = bytes else { break };
        let mut last_next_offset = next_offset;
        let mut found = Vec::new();
        for batch in RecordBatches::new(bytes) {
            let batch = batch?;
            last_next_offset = last_next_offset.max(batch.next_offset());
            if batch.attributes().is_control() {
                continue;
            }
            collect_batch(&batch, next_offset, usize::MAX, &mut found)?;
        }
        records.extend(found.into_iter().map(|stored| stored.record));
        if last_next_offset <= next_offset || last_next_offset >= log_end_offset {
            break;
        }
        next_offset = last_next_offset;
    }
    Ok(records)
}

/// Creates `__transaction_state` through the controller if it does not
/// exist: `transaction.state.log.num.partitions` partitions,
/// `transaction.state.log.replication.factor` replicas capped to the live
/// brokers, `min.insync.replicas` from `transaction.state.log.min.isr`
/// (capped to the replication factor), compacted. Returns whether it exists.
pub async fn ensure_transaction_state_topic(
    controller: &dyn ControllerClient,
    config: &BrokerConfig,
) -> bool {
    let image = controller.image();
    if image.topic_by_name(TRANSACTION_STATE_TOPIC).is_some() {
        return true;
    }
    let live = i16::try_from(image.unfenced_broker_ids().len()).unwrap_or(i16::MAX);
    let replication_factor = config
        .transactions
        .state_log_replication_factor
        .min(live)
        .max(1);
    let min_isr = config
        .transactions
        .state_log_min_isr
        .min(i32::from(replication_factor))
        .max(1);
    let entry = |key: &str, value: String| ConfigEntry {
        key: key.to_owned(),
        value: Some(value),
    };
    let request = CreateTopicsRequest {
        topics: vec![NewTopic {
            name: TRANSACTION_STATE_TOPIC.to_owned(),
            partitions: Some(config.transactions.state_log_num_partitions),
            replication_factor: Some(replication_factor),
            assignments: Vec::new(),
            configs: vec![
                entry("cleanup.policy", "compact".to_owned()),
                entry("segment.bytes", TRANSACTION_STATE_SEGMENT_BYTES.to_owned()),
                entry("min.insync.replicas", min_isr.to_string()),
            ],
        }],
        validate_only: false,
    };
    match controller.create_topics(request).await {
        Ok(outcomes) => {
            for outcome in outcomes {
                match outcome.result {
                    Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
                    Err(error) => warn!(%error, "cannot create __transaction_state"),
                }
            }
        }
        Err(error) => warn!(%error, "cannot create __transaction_state"),
    }
    controller
        .image()
        .topic_by_name(TRANSACTION_STATE_TOPIC)
        .is_some()
}
