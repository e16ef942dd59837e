//! The group coordinator's home in the broker: `__consumer_offsets` as a
//! compacted internal topic, an [`OffsetsLog`] over its partition logs
//! (replicated like any partition; the coordinator's appends are committed
//! once the high watermark passes them), and the bookkeeping that follows
//! the leadership of its partitions (loading those this broker comes to
//! lead, unloading those it stops leading) and removes the offsets of
//! deleted topics.
//!
//! The coordinator itself (`strom-coordinator`) is sans-IO with a thin async
//! edge; this module only gives it storage and follows the metadata image.
//! Appends do blocking file I/O while the coordinator holds its lock, so
//! [`OffsetsTopicLog::append`] moves them off the reactor with
//! `block_in_place` when it runs on a multi-threaded runtime worker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use strom_controller::error::ControllerError;

use bytes::Bytes;
use strom_clock::Random;
use strom_controller::controller::{ConfigEntry, CreateTopicsRequest, NewTopic};
use strom_controller::image::MetadataImage;
use strom_controller::runtime::ControllerClient;
use strom_coordinator::{
    BatchContext, CommitWait, ConsumerAssignor, ConsumerGroupConfig, CoordinatorConfig,
    GroupConfig, GroupCoordinator, LogError, LogOperation, LogRecord, OffsetConfig, OffsetsLog,
    StoredRecord,
};
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};
use strom_replication::{AckStatus, ReplicationError};
use strom_storage::TopicPartition;
use tracing::{debug, info, warn};

use crate::blocking::blocking;
use crate::claims::{led_partitions, Claims};
use crate::config::BrokerConfig;
use crate::replica_manager::{AppendFailure, PartitionReplica, ReadFailure, ReplicaManager};

/// The internal topic of committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `offsets.topic.segment.bytes` default.
const OFFSETS_TOPIC_SEGMENT_BYTES: &str = "104857600";

/// How many bytes one read of a partition asks the log for while loading.
const LOAD_READ_BYTES: u64 = 1024 * 1024;

/// How often the coordinator's timers (session, rebalance, retention) run.
pub const COORDINATOR_TICK: Duration = Duration::from_millis(100);

/// `__consumer_offsets` over the broker's partition logs: appends go through
/// the replica manager as leader with `acks=all` semantics (refused below
/// `min.insync.replicas`, committed once the high watermark passes them, as
/// Kafka's coordinator appends with required acks -1); loads read up to the
/// log end, as Kafka's coordinator does: a new leader's whole log is what
/// its followers will hold.
pub struct OffsetsTopicLog {
    replicas: Arc<ReplicaManager>,
    /// `offsets.commit.timeout.ms`.
    commit_timeout: Duration,
    /// The leader epoch of each append whose commit is not waited for yet,
    /// by (partition, last offset): a commit is acknowledged only while the
    /// partition is still led at the epoch it was written at.
    append_epochs: Mutex<BTreeMap<(i32, i64), i32>>,
}

impl OffsetsTopicLog {
    /// A log over the partitions `replicas` leads; commits wait at most
    /// `commit_timeout` for the in-sync replicas.
    pub fn new(replicas: Arc<ReplicaManager>, commit_timeout: Duration) -> OffsetsTopicLog {
        OffsetsTopicLog {
            replicas,
            commit_timeout,
            append_epochs: Mutex::new(BTreeMap::new()),
        }
    }

    /// The partition's replica, if this broker leads it.
    fn led(&self, partition: i32) -> Result<Arc<PartitionReplica>, LogError> {
        self.replicas
            .get(&TopicPartition::new(OFFSETS_TOPIC.to_owned(), partition))
            .filter(|replica| !replica.is_deposed())
            .ok_or(LogError::NotLeader { partition })
    }
}

/// The coordinator's view of a refused append.
fn append_error(partition: i32, error: AppendFailure) -> LogError {
    match error {
        AppendFailure::Replication(ReplicationError::NotEnoughReplicas { isr_size, .. }) => {
            LogError::NotEnoughReplicas {
                partition,
                in_sync: isr_size,
                after_append: false,
            }
        }
        AppendFailure::Replication(ReplicationError::NotLeader) => {
            LogError::NotLeader { partition }
        }
        error => LogError::backend(LogOperation::Append, error),
    }
}

/// Waits until the high watermark of `replica` passes `last_offset`,
/// written at `leader_epoch`.
async fn wait_committed(
    replica: Arc<PartitionReplica>,
    partition: i32,
    last_offset: i64,
    leader_epoch: i32,
    timeout: Duration,
) -> Result<(), LogError> {
    let required = last_offset.saturating_add(1);
    match replica.wait_for_ack(required, leader_epoch, timeout).await {
        AckStatus::Committed => Ok(()),
        // Leadership moved while the commit waited (the role change woke
        // the wait).
        AckStatus::NotLeader => Err(LogError::NotLeader { partition }),
        AckStatus::Waiting => Err(LogError::ReplicationTimeout {
            partition,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
        AckStatus::NotEnoughReplicasAfterAppend => Err(LogError::NotEnoughReplicas {
            partition,
            in_sync: replica.isr_size(),
            after_append: true,
        }),
    }
}

impl OffsetsTopicLog {
    /// Appends `batch` to `partition` as its leader, `acks=all`, and
    /// remembers the epoch it was written at for its commit wait.
    fn append_batch(
        &mut self,
        partition: i32,
        replica: &PartitionReplica,
        batch: Bytes,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        let appended = blocking(|| replica.append_flushing_here(batch, true, now_ms));
        match appended {
            Ok(appended) => {
                let last_offset = appended.info.last_offset;
                let high_watermark = replica.high_watermark.current();
                let mut epochs = self
                    .append_epochs
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                // Appends nobody waited for and that are committed by now
                // are forgotten (a late wait uses the current epoch).
                epochs
                    .retain(|(other, offset), _| *other != partition || *offset >= high_watermark);
                epochs.insert((partition, last_offset), appended.leader_epoch);
                Ok(last_offset)
            }
            Err(error) => {
                warn!(partition, %error, "append to __consumer_offsets refused");
                Err(append_error(partition, error))
            }
        }
    }
}

impl OffsetsLog for OffsetsTopicLog {
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError> {
        let replica = self.led(partition)?;
        let now_ms = self.replicas.now_ms();
        let batch = offsets_batch(now_ms, records)?;
        self.append_batch(partition, &replica, batch, now_ms)
    }

    /// A transactional batch of the producer, with the sequence the
    /// partition's producer state expects next (0 for a new producer or
    /// epoch), since the leader checks sequences of every batch with a
    /// producer id.
    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[LogRecord],
    ) -> Result<i64, LogError> {
        let replica = self.led(partition)?;
        let now_ms = self.replicas.now_ms();
        let base_sequence = replica
            .with_log(|log| {
                let entry = log.producer_state().entry(producer_id)?;
                let last = entry.batches.back()?;
                (entry.epoch == producer_epoch).then(|| next_sequence(last.last_sequence))
            })
            .map_err(|error| LogError::backend(LogOperation::Append, error))?
            .unwrap_or(0);
        let batch = transactional_offsets_batch(
            now_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            records,
        )?;
        self.append_batch(partition, &replica, batch, now_ms)
    }

    fn committed_offset(&self, partition: i32) -> Result<i64, LogError> {
        Ok(self.led(partition)?.high_watermark.current())
    }

    fn wait_committed(&self, partition: i32, last_offset: i64) -> CommitWait {
        let replica = self.led(partition);
        let timeout = self.commit_timeout;
        let leader_epoch = self
            .append_epochs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&(partition, last_offset));
        Box::pin(async move {
            let replica = replica?;
            // An append not recorded here (none should be) waits at the
            // current epoch.
            let leader_epoch = match leader_epoch {
                Some(epoch) => epoch,
                None => match replica.leader_epoch() {
                    Ok(Ok(epoch)) => epoch,
                    _ => return Err(LogError::NotLeader { partition }),
                },
            };
            wait_committed(replica, partition, last_offset, leader_epoch, timeout).await
        })
    }

    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<StoredRecord>, LogError> {
        let replica = self
            .replicas
            .get(&TopicPartition::new(OFFSETS_TOPIC.to_owned(), partition))
            .ok_or(LogError::UnknownPartition { partition })?;
        let mut next_offset = from_offset;
        let mut records = Vec::new();
        // Compaction may leave batches with no record at or past the offset
        // asked for: keep reading until something is found or the end.
        while records.is_empty() {
            let (bytes, log_end_offset) = read_to_log_end(&replica, next_offset)
                .map_err(|source| LogError::backend(LogOperation::Read, source))?;
            let Some(bytes) = bytes else {
                break;
            };
            let mut last_next_offset = next_offset;
            for batch in RecordBatches::new(bytes) {
                let batch =
                    batch.map_err(|source| LogError::backend(LogOperation::Decode, source))?;
                last_next_offset = last_next_offset.max(batch.next_offset());
                collect_batch(&batch, next_offset, max_records, &mut records)?;
            }
            if last_next_offset <= next_offset || last_next_offset >= log_end_offset {
                break;
            }
            next_offset = last_next_offset;
        }
        Ok(records)
    }
}

/// Whole batches of `replica` from `from_offset` up to its log end (not
/// only its high watermark), and the log end offset.
pub fn read_to_log_end(
    replica: &PartitionReplica,
    from_offset: i64,
) -> Result<(Option<Bytes>, i64), ReadFailure> {
    let read = replica.with_log(|log| {
        let log_end_offset = log.log_end_offset();
        log.read(from_offset, LOAD_READ_BYTES, log_end_offset, true)
            .map(|info| (info.records, log_end_offset))
    })??;
    let (records, log_end_offset) = read;
    let bytes = records
        .filter(|slice| !slice.is_empty())
        .map(|slice| slice.to_bytes())
        .transpose()?;
    Ok((bytes, log_end_offset))
}

/// `records` as one uncompressed batch stamped `now_ms`, as
/// `__consumer_offsets` stores them.
pub fn offsets_batch(now_ms: i64, records: &[LogRecord]) -> Result<Bytes, LogError> {
    build_offsets_batch(RecordBatchBuilder::new(Compression::None), now_ms, records)
}

/// `records` as one uncompressed transactional batch of `producer_id` at
/// `producer_epoch`, its first record at `base_sequence`.
pub fn transactional_offsets_batch(
    now_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: &[LogRecord],
) -> Result<Bytes, LogError> {
    let builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(producer_id, producer_epoch, base_sequence)
        .with_transactional(true);
    build_offsets_batch(builder, now_ms, records)
}

/// The sequence after `sequence`, wrapping after `i32::MAX` as Kafka does.
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

fn build_offsets_batch(
    mut builder: RecordBatchBuilder,
    now_ms: i64,
    records: &[LogRecord],
) -> Result<Bytes, LogError> {
    for record in records {
        builder
            .append(now_ms, Some(&record.key), record.value.as_deref(), &[])
            .map_err(|source| LogError::backend(LogOperation::BuildBatch, source))?;
    }
    builder
        .build()
        .map_err(|source| LogError::backend(LogOperation::BuildBatch, source))
}

/// Adds the keyed records of `batch` at or past `from_offset` to
/// `records`, with their offsets and the batch's producer and flags, until
/// it holds `max_records`.
pub fn collect_batch(
    batch: &strom_protocol::records::RecordBatch,
    from_offset: i64,
    max_records: usize,
    records: &mut Vec<StoredRecord>,
) -> Result<(), LogError> {
    let corrupt = |source| LogError::backend(LogOperation::Decode, source);
    let attributes = batch.attributes();
    let context = BatchContext {
        producer_id: batch.producer_id(),
        producer_epoch: batch.producer_epoch(),
        transactional: attributes.is_transactional(),
        control: attributes.is_control(),
    };
    for record in batch.records().map_err(corrupt)? {
        if records.len() >= max_records {
            break;
        }
        let record = record.map_err(corrupt)?;
        let offset = record.offset(batch.base_offset());
        let Some(key) = record.key_bytes() else {
            continue;
        };
        if offset >= from_offset {
            records.push(StoredRecord {
                offset,
                batch: context,
                record: LogRecord {
                    key,
                    value: record.value_bytes(),
                },
            });
        }
    }
    Ok(())
}

/// The coordinator configuration from the broker's `group.*` and
/// `offsets.*` settings.
pub fn coordinator_config(config: &BrokerConfig) -> CoordinatorConfig {
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    let millis_i32 = |duration: Duration| i32::try_from(duration.as_millis()).unwrap_or(i32::MAX);
    CoordinatorConfig {
        group: GroupConfig {
            min_session_timeout_ms: millis_i32(config.group_min_session_timeout),
            max_session_timeout_ms: millis_i32(config.group_max_session_timeout),
            initial_rebalance_delay_ms: millis(config.group_initial_rebalance_delay),
            max_size: config.group_max_size,
        },
        offsets: OffsetConfig {
            retention_ms: millis(config.offsets_retention),
            ..OffsetConfig::default()
        },
        offsets_topic_partitions: config.offsets_topic_num_partitions.max(1),
        consumer: consumer_group_config(config),
    }
}

/// The consumer-protocol (KIP-848) settings from `group.consumer.*`.
fn consumer_group_config(config: &BrokerConfig) -> ConsumerGroupConfig {
    let millis_i32 = |duration: Duration| i32::try_from(duration.as_millis()).unwrap_or(i32::MAX);
    let settings = &config.consumer_groups;
    ConsumerGroupConfig {
        session_timeout_ms: millis_i32(settings.session_timeout),
        min_session_timeout_ms: millis_i32(settings.min_session_timeout),
        max_session_timeout_ms: millis_i32(settings.max_session_timeout),
        heartbeat_interval_ms: millis_i32(settings.heartbeat_interval),
        min_heartbeat_interval_ms: millis_i32(settings.min_heartbeat_interval),
        max_heartbeat_interval_ms: millis_i32(settings.max_heartbeat_interval),
        max_size: settings.max_size,
        assignors: settings
            .assignors
            .iter()
            .filter_map(|name| ConsumerAssignor::from_name(name))
            .collect(),
    }
}

/// The coordinator and what the broker knows about its partitions.
pub struct GroupService {
    /// The group coordinator over `__consumer_offsets`.
    pub coordinator: GroupCoordinator<OffsetsTopicLog>,
    node_id: i32,
    /// The offsets partitions led here.
    claims: Claims,
    /// Topic names of the last image seen, to notice deletions.
    topics: Mutex<Option<BTreeSet<String>>>,
}

/// Locks one of the service's sets of partition numbers or topic names:
/// each is changed by single inserts and removes, so a panic cannot leave
/// one half-changed, and they are reused after one.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl GroupService {
    /// A service whose coordinator owns no partition yet, reads the
    /// broker's clock (the one the replica manager holds) and draws member
    /// ids from the broker's `random`.
    pub fn new(
        config: &BrokerConfig,
        replicas: Arc<ReplicaManager>,
        random: Arc<dyn Random>,
    ) -> GroupService {
        let clock = Arc::clone(replicas.clock());
        GroupService {
            coordinator: GroupCoordinator::new(
                coordinator_config(config),
                OffsetsTopicLog::new(replicas, config.offsets_commit_timeout),
                clock,
                random,
            ),
            node_id: config.node_id,
            claims: Claims::default(),
            topics: Mutex::new(None),
        }
    }

    /// Claims the offsets partitions this broker leads in `image` (their
    /// groups answer COORDINATOR_LOAD_IN_PROGRESS until loaded) and gives up
    /// at once those it no longer leads (their groups answer
    /// NOT_COORDINATOR, and members parked in JoinGroup or SyncGroup get it
    /// too). A partition led again at another leader epoch is given up and
    /// claimed again: another leader may have written to it meanwhile.
    /// Fast: reads nothing. The broker calls it before it starts serving, so
    /// no request sees NOT_COORDINATOR for a partition that is about to load.
    pub fn claim(&self, image: &MetadataImage) {
        let led = led_partitions(image, OFFSETS_TOPIC, self.node_id);
        self.claims.update(
            led,
            |partition, epoch| {
                self.coordinator.unload_partition(partition);
                info!(
                    partition,
                    leader_epoch = epoch,
                    "no longer coordinator of __consumer_offsets partition"
                );
            },
            |partition, _| self.coordinator.begin_loading(partition),
        );
    }

    /// Follows a new metadata image (after the replica manager applied it):
    /// claims partitions as [`claim`](Self::claim) does, loads every claimed
    /// partition not loaded yet, and removes the committed offsets of deleted
    /// topics. Blocking: call it from a blocking-tolerant context.
    pub fn apply_image(&self, image: &MetadataImage) {
        self.forget_deleted_topics(image);
        self.claim(image);
        let (mut loaded, mut replayed) = (0u64, 0u64);
        for (partition, _) in self.claims.take_unloaded() {
            match self.coordinator.load_partition(partition) {
                Ok(records) => {
                    debug!(partition, records, "coordinator partition loaded");
                    loaded += 1;
                    replayed += records;
                }
                Err(error) => {
                    warn!(partition, %error, "cannot load __consumer_offsets partition");
                }
            }
        }
        if loaded > 0 {
            info!(
                partitions = loaded,
                records = replayed,
                "__consumer_offsets partitions loaded"
            );
        }
    }

    fn forget_deleted_topics(&self, image: &MetadataImage) {
        let current: BTreeSet<String> = image.topics().map(|topic| topic.name.clone()).collect();
        let previous = lock(&self.topics).replace(current.clone());
        let Some(previous) = previous else {
            return;
        };
        let deleted: Vec<String> = previous.difference(&current).cloned().collect();
        if deleted.is_empty() {
            return;
        }
        info!(topics = ?deleted, "removing committed offsets of deleted topics");
        if let Err(error) = self.coordinator.remove_topic_offsets(&deleted) {
            warn!(%error, "cannot write tombstones for deleted topics' offsets");
        }
    }
}

/// The replication factor `__consumer_offsets` is created with:
/// `offsets.topic.replication.factor`, capped to the live (registered and
/// unfenced) brokers of `image`, and at least 1 (a single node's embedded
/// controller may list no broker yet).
pub fn offsets_topic_replication_factor(config: &BrokerConfig, image: &MetadataImage) -> i16 {
    let live = i16::try_from(image.unfenced_broker_ids().len()).unwrap_or(i16::MAX);
    config.offsets_topic_replication_factor.min(live).max(1)
}

/// Creates `__consumer_offsets` through the controller if it does not exist:
/// `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`
/// replicas capped to the live brokers ([`offsets_topic_replication_factor`]),
/// compacted, with Kafka's segment size.
pub async fn ensure_offsets_topic(
    controller: &dyn ControllerClient,
    config: &BrokerConfig,
) -> bool {
    let image = controller.image();
    if image.topic_by_name(OFFSETS_TOPIC).is_some() {
        return true;
    }
    let replication_factor = offsets_topic_replication_factor(config, &image);
    if replication_factor < config.offsets_topic_replication_factor {
        warn!(
            replication_factor,
            configured = config.offsets_topic_replication_factor,
            "creating __consumer_offsets with fewer replicas than offsets.topic.replication.factor: only that many brokers are live"
        );
    }
    let request = CreateTopicsRequest {
        topics: vec![NewTopic {
            name: OFFSETS_TOPIC.to_owned(),
            partitions: Some(config.offsets_topic_num_partitions),
            replication_factor: Some(replication_factor),
            assignments: Vec::new(),
            configs: vec![
                ConfigEntry {
                    key: "cleanup.policy".to_owned(),
                    value: Some("compact".to_owned()),
                },
                ConfigEntry {
                    key: "segment.bytes".to_owned(),
                    value: Some(OFFSETS_TOPIC_SEGMENT_BYTES.to_owned()),
                },
            ],
        }],
        validate_only: false,
    };
    match controller.create_topics(request).await {
        Ok(outcomes) => {
            for outcome in outcomes {
                match outcome.result {
                    // Another broker of the cluster created it first.
                    Ok(_) | Err(ControllerError::TopicAlreadyExists { .. }) => {}
                    Err(error) => warn!(%error, "cannot create __consumer_offsets"),
                }
            }
        }
        Err(error) => warn!(%error, "cannot create __consumer_offsets"),
    }
    controller.image().topic_by_name(OFFSETS_TOPIC).is_some()
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod service_tests;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::coordinator_config;
    use crate::config::BrokerConfig;

    #[test]
    fn group_and_offsets_settings_reach_the_coordinator() {
        let map: BTreeMap<String, String> = [
            ("offsets.topic.num.partitions", "7"),
            ("offsets.retention.minutes", "3"),
            ("group.initial.rebalance.delay.ms", "250"),
            ("group.min.session.timeout.ms", "1000"),
            ("group.max.session.timeout.ms", "20000"),
            ("group.max.size", "4"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
        let (config, _warnings) = BrokerConfig::from_map(&map).expect("valid config");
        let coordinator = coordinator_config(&config);
        assert_eq!(coordinator.offsets_topic_partitions, 7);
        assert_eq!(coordinator.offsets.retention_ms, 180_000);
        assert_eq!(coordinator.group.initial_rebalance_delay_ms, 250);
        assert_eq!(coordinator.group.min_session_timeout_ms, 1_000);
        assert_eq!(coordinator.group.max_session_timeout_ms, 20_000);
        assert_eq!(coordinator.group.max_size, 4);
    }
}
