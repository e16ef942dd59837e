//! The partitions this broker hosts: each one's log, replication state and
//! offset watches, and the append and read paths that keep them consistent.
//!
//! Kafka's ReplicaManager: it learns which partitions exist and who leads
//! them from the metadata image ([`ReplicaManager::apply_image`]), and it is
//! the one place where a log append is followed by the replication
//! bookkeeping (LEO, HW) that decides what consumers may see.
//!
//! A poisoned lock of a partition (its log or its replication state: a
//! thread panicked while changing them) takes that partition offline, as a
//! failed log directory does in Kafka: it is logged once at error level,
//! and every later request for it gets [`PartitionOffline`]
//! (`KAFKA_STORAGE_ERROR` at the edge) instead of being served from state
//! that may be half-changed. The log manager leaves such a log out of its
//! flushes and checkpoints and of the clean-shutdown marker, so the next
//! start recovers it from scratch. The other partitions keep serving.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use strom_clock::Clock;
use strom_controller::image::{ConfigResource, MetadataImage};
pub use strom_replication::{
    AppendFailure, Appended, FlushFailure, FollowerFetch, FollowerRead, PartitionError,
    PartitionOffline, PartitionRead, ReadFailure,
};
use strom_replication::{FetcherManager, FollowTarget, LeaderAssignment, Partition, RoleView};
use strom_storage::{LogConfig, LogManager, TopicPartition};
use tracing::{debug, info, warn};

use crate::replica_fetch::TcpFetchTransport;
use strom_observability::topics::{TopicMetrics, TopicMetricsTable};
use uuid::Uuid;

/// A partition hosted here: the replication crate's [`Partition`] (its
/// log, role, HW and watches) with the topic's id and counters. It derefs
/// to the [`Partition`], whose methods serve produce, fetch and the
/// follower's writes.
pub struct PartitionReplica {
    /// Topic and partition.
    pub topic_partition: TopicPartition,
    /// The topic's id.
    pub topic_id: Uuid,
    partition: Arc<Partition>,
    /// The topic's counters (resolved once, counted without locks).
    pub metrics: Arc<TopicMetrics>,
}

impl Deref for PartitionReplica {
    type Target = Partition;

    fn deref(&self) -> &Partition {
        &self.partition
    }
}

/// The partitions hosted by this broker.
pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    clock: Arc<dyn Clock>,
    partitions: RwLock<HashMap<TopicPartition, Arc<PartitionReplica>>>,
    topic_defaults: std::collections::BTreeMap<String, String>,
    /// Serialises [`ReplicaManager::apply_image`] calls and holds the offset
    /// of the last image applied, so that an older image arriving late (the
    /// metadata follower and a handler race) is never applied over a newer
    /// one: that would drop, and delete the logs of, partitions created since.
    applied: Mutex<Option<u64>>,
    /// Per-topic counters, handed to each partition as it is hosted.
    topic_metrics: TopicMetricsTable,
    /// This broker's epoch (quoted in AlterPartition).
    broker_epoch: AtomicI64,
    /// The follower fetchers, once fetching is started (a cluster node).
    fetchers: OnceLock<Arc<ReplicaFetchers>>,
    /// ISR shrinks and expansions of partitions led here that the
    /// controller committed (Kafka's IsrShrinksPerSec / IsrExpandsPerSec).
    isr_shrinks: std::sync::atomic::AtomicU64,
    isr_expands: std::sync::atomic::AtomicU64,
    /// Set when the broker begins to stop: from then on it takes no new
    /// leadership (see [`ReplicaManager::stop_taking_leadership`]).
    stopping: std::sync::atomic::AtomicBool,
    /// New leaderships an image offered after `stopping` was set, declined.
    leaderships_declined: std::sync::atomic::AtomicU64,
    /// New leaderships taken after `stopping` was set: none while the
    /// guard in `lead` holds; counted apart from it so tests notice if not.
    leaderships_taken_while_stopping: std::sync::atomic::AtomicU64,
    /// Tiered storage (KIP-405), when `remote.log.storage.system.enable`
    /// is set: see [`crate::tiered`].
    remote: OnceLock<Arc<strom_storage::remote::RemoteLogManager>>,
}

/// The follower fetchers of a broker.
pub type ReplicaFetchers = FetcherManager<Partition, TcpFetchTransport>;

impl ReplicaManager {
    /// A manager over opened logs; `topic_defaults` are the broker's
    /// topic-level defaults under topic-level names.
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        clock: Arc<dyn Clock>,
        topic_defaults: std::collections::BTreeMap<String, String>,
    ) -> ReplicaManager {
        ReplicaManager {
            node_id,
            logs,
            clock,
            partitions: RwLock::new(HashMap::new()),
            topic_defaults,
            applied: Mutex::new(None),
            topic_metrics: TopicMetricsTable::default(),
            broker_epoch: AtomicI64::new(-1),
            fetchers: OnceLock::new(),
            isr_shrinks: std::sync::atomic::AtomicU64::new(0),
            isr_expands: std::sync::atomic::AtomicU64::new(0),
            stopping: std::sync::atomic::AtomicBool::new(false),
            leaderships_declined: std::sync::atomic::AtomicU64::new(0),
            leaderships_taken_while_stopping: std::sync::atomic::AtomicU64::new(0),
            remote: OnceLock::new(),
        }
    }

    /// Turns tiered storage on (once, before the first image is applied:
    /// topics with `remote.storage.enable` are tiered only from then on).
    pub fn set_remote_log_manager(&self, manager: Arc<strom_storage::remote::RemoteLogManager>) {
        let _ = self.remote.set(manager);
    }

    /// The remote tier's manager, when tiered storage is on.
    pub fn remote_log_manager(&self) -> Option<&Arc<strom_storage::remote::RemoteLogManager>> {
        self.remote.get()
    }

    /// Marks the broker as stopping: images applied from now on never make
    /// it the leader of a partition it does not lead already (those it
    /// leads keep their ISR changes until the controller moves them). A
    /// broker whose controlled shutdown is under way may still be named
    /// leader by an image the controller wrote before it heard of the
    /// shutdown (another stopping broker's controlled shutdown, or an image
    /// this broker applies late); taking that leadership would only move
    /// it again a moment later, with clients sent to a broker going away.
    /// Blocking: waits for an image being applied to finish, so that no
    /// image is applied half before and half after.
    pub fn stop_taking_leadership(&self) {
        let _applying = self
            .applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether [`ReplicaManager::stop_taking_leadership`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// New leaderships images offered after the broker began to stop, and
    /// that it declined.
    pub fn leaderships_declined(&self) -> u64 {
        self.leaderships_declined.load(Ordering::Relaxed)
    }

    /// New leaderships taken after the broker began to stop (zero, unless
    /// the guard of [`ReplicaManager::stop_taking_leadership`] fails).
    pub fn leaderships_taken_while_stopping(&self) -> u64 {
        self.leaderships_taken_while_stopping
            .load(Ordering::Relaxed)
    }

    /// This broker's id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Records this broker's epoch (after registration).
    pub fn set_broker_epoch(&self, broker_epoch: i64) {
        self.broker_epoch.store(broker_epoch, Ordering::Release);
    }

    /// This broker's epoch.
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    /// Counts an ISR change the controller committed for a partition led
    /// here: a shrink, or else an expansion.
    pub fn count_isr_change(&self, shrink: bool) {
        let counter = if shrink {
            &self.isr_shrinks
        } else {
            &self.isr_expands
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (shrinks, expansions) of ISRs of partitions led here.
    pub fn isr_changes(&self) -> (u64, u64) {
        (
            self.isr_shrinks.load(Ordering::Relaxed),
            self.isr_expands.load(Ordering::Relaxed),
        )
    }

    /// Starts following the partitions the next images assign here but
    /// that another broker leads. Without it (a single node), only led
    /// partitions are hosted.
    pub fn start_fetching(&self, fetchers: Arc<ReplicaFetchers>) {
        let _ = self.fetchers.set(fetchers);
    }

    /// The follower fetchers, if started.
    pub fn fetchers(&self) -> Option<&Arc<ReplicaFetchers>> {
        self.fetchers.get()
    }

    /// The log manager.
    pub fn logs(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// The per-topic counters.
    pub fn topic_metrics(&self) -> &TopicMetricsTable {
        &self.topic_metrics
    }

    /// Every hosted partition.
    pub fn hosted(&self) -> Vec<Arc<PartitionReplica>> {
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The broker's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The current time in milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock.wall_ms()
    }

    /// The hosted partition, if this broker leads it now (the role may
    /// change right after; every operation checks it again).
    pub fn get(&self, topic_partition: &TopicPartition) -> Option<Arc<PartitionReplica>> {
        self.get_hosted(topic_partition)
            .filter(|replica| replica.is_leader())
    }

    /// The hosted partition in whatever role: leader, follower or idle.
    pub fn get_hosted(&self, topic_partition: &TopicPartition) -> Option<Arc<PartitionReplica>> {
        // The map is changed by single inserts and removes: a panic while it
        // was locked cannot leave it half-changed, so it is reused.
        self.partitions
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(topic_partition)
            .cloned()
    }

    /// The typed log config of a topic (see [`topic_log_config`]).
    /// Without tiered storage on the broker, `remote.storage.enable` is
    /// not acted on (the topic keeps Kafka's plain retention).
    pub fn log_config(&self, image: &MetadataImage, topic: &str) -> LogConfig {
        let mut config = topic_log_config(&self.topic_defaults, image, self.node_id, topic);
        config.remote_storage_enable &= self.remote.get().is_some();
        config
    }

    /// A topic's `min.insync.replicas` (its config, else the broker's
    /// dynamic then static one).
    pub fn min_insync_replicas(&self, image: &MetadataImage, topic: &str) -> usize {
        topic_properties(&self.topic_defaults, image, self.node_id, topic)
            .get("min.insync.replicas")
            .and_then(|value| value.parse::<usize>().ok())
            .unwrap_or(1)
    }

    /// Brings the hosted partitions in line with `image`: hosts a replica
    /// of every partition assigned here and gives it the image's role
    /// (leader, follower of the image's leader, or idle when the partition
    /// has no leader), moves the fetchers, applies topic configs and
    /// committed ISR changes, and deletes the logs of replicas no longer
    /// assigned here (a deleted topic, a reassignment away). A replica that
    /// merely lost its leadership keeps its log. Leaders step down before
    /// the fetchers move and followers step up after, so no log ever has
    /// two writers. Idempotent; handlers call it right after a controller
    /// write so the next request sees the result. An image older than the
    /// last one applied is ignored.
    pub fn apply_image(&self, image: &MetadataImage) {
        // One offset, assigned whole: safe to reuse after a panic.
        let mut applied = self
            .applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if image.last_offset() < *applied {
            return;
        }
        *applied = image.last_offset();
        let now_ms = self.now_ms();
        let plan = self.plan(image);
        let removed = self.remove_unassigned(&plan.assigned);
        let mut follow = BTreeMap::new();
        for (topic_partition, topic_id, wanted) in &plan.roles {
            let Some(replica) = self.host(topic_partition, *topic_id, now_ms) else {
                continue;
            };
            let changed = match wanted {
                WantedRole::Lead(_) => continue,
                WantedRole::Follow {
                    leader,
                    leader_epoch,
                } => {
                    let target = FollowTarget {
                        leader: *leader,
                        leader_epoch: *leader_epoch,
                        log: Arc::clone(&replica.partition),
                    };
                    follow.insert(topic_partition.clone(), target);
                    let view = RoleView::Follower {
                        leader: *leader,
                        leader_epoch: *leader_epoch,
                    };
                    (replica.role_view() != view)
                        .then(|| replica.become_follower(*leader, *leader_epoch))
                }
                WantedRole::Idle => {
                    (replica.role_view() != RoleView::Idle).then(|| replica.become_idle())
                }
            };
            if let Some(Err(error)) = changed {
                warn!(%topic_partition, %error, "cannot change the partition's role");
            }
        }
        if let Some(fetchers) = self.fetchers.get() {
            fetchers.follow(follow);
        }
        // Removed replicas (a topic deleted, or a reassignment moved them
        // away) are deleted once no fetcher writes to them.
        self.delete_remote_data_of_deleted_topics(&removed, image);
        self.delete_unassigned_logs(removed, &plan.assigned, image.topic_count() > 0, now_ms);
        self.lead(&plan, now_ms);
    }

    /// What `image` asks of this broker.
    fn plan(&self, image: &MetadataImage) -> ImagePlan {
        let mut plan = ImagePlan::default();
        for topic in image.topics() {
            let config = self.log_config(image, &topic.name);
            self.logs.set_topic_config(&topic.name, config.clone());
            let min_insync_replicas = self.min_insync_replicas(image, &topic.name);
            for (index, partition) in topic.partitions.iter().enumerate() {
                let leads = partition.leader == Some(self.node_id);
                if !leads && !partition.replicas.contains(&self.node_id) {
                    continue;
                }
                let topic_partition = TopicPartition::new(topic.name.clone(), index as i32);
                plan.assigned.insert(topic_partition.clone(), topic.id);
                let wanted = match partition.leader {
                    Some(_) if leads => WantedRole::Lead(LeaderAssignment {
                        local: self.node_id,
                        leader_epoch: partition.leader_epoch,
                        partition_epoch: partition.partition_epoch,
                        replicas: partition.replicas.clone(),
                        isr: partition.isr.iter().copied().collect(),
                        min_insync_replicas,
                    }),
                    Some(leader) => WantedRole::Follow {
                        leader,
                        leader_epoch: partition.leader_epoch,
                    },
                    None => WantedRole::Idle,
                };
                plan.roles.push((topic_partition, topic.id, wanted));
            }
        }
        plan
    }

    /// Leads what the plan says: keeps leading at the same epoch (applying
    /// ISR changes), or becomes leader at the new one. Becoming leader
    /// writes the partition's leader epoch checkpoint (two fsyncs): when
    /// many partitions change at once (a broker's restart elects it for
    /// all it hosts), several threads write them, since the fsyncs wait
    /// on the device rather than on a core.
    fn lead(&self, plan: &ImagePlan, now_ms: i64) {
        let leads: Vec<(&TopicPartition, Uuid, &LeaderAssignment)> = plan
            .roles
            .iter()
            .filter_map(|(topic_partition, topic_id, wanted)| match wanted {
                WantedRole::Lead(assignment) => Some((topic_partition, *topic_id, assignment)),
                _ => None,
            })
            .collect();
        let (became_leader, declined) = if leads.len() < PARALLEL_LEAD_MIN {
            self.lead_each(&leads, now_ms)
        } else {
            let chunk = leads.len().div_ceil(LEAD_THREADS);
            std::thread::scope(|scope| {
                let workers: Vec<_> = leads
                    .chunks(chunk)
                    .map(|part| scope.spawn(move || self.lead_each(part, now_ms)))
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| {
                        worker
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .fold((0, 0), |(led, refused), (more_led, more_refused)| {
                        (led + more_led, refused + more_refused)
                    })
            })
        };
        if became_leader > 0 {
            info!(partitions = became_leader, "leading new partitions");
        }
        if declined > 0 {
            self.leaderships_declined
                .fetch_add(declined, Ordering::Relaxed);
            info!(
                partitions = declined,
                "not taking the leadership of partitions: this broker is stopping"
            );
        }
    }

    /// [`Self::lead`] for `leads`, one after the other; returns how many
    /// became leader and how many leaderships were declined because the
    /// broker is stopping.
    fn lead_each(
        &self,
        leads: &[(&TopicPartition, Uuid, &LeaderAssignment)],
        now_ms: i64,
    ) -> (usize, u64) {
        let (mut became_leader, mut declined) = (0usize, 0u64);
        for (topic_partition, topic_id, assignment) in leads {
            let Some(replica) = self.host(topic_partition, *topic_id, now_ms) else {
                continue;
            };
            // An offline replica stays offline until the broker restarts.
            let Ok(kept) = replica.update_leadership(assignment, now_ms) else {
                continue;
            };
            if kept {
                continue;
            }
            // `apply_image` holds `applied`, so the flag cannot change
            // while an image is applied.
            if self.is_stopping() {
                declined += 1;
                continue;
            }
            match replica.become_leader(assignment, now_ms) {
                Ok(()) => {
                    became_leader += 1;
                    if self.is_stopping() {
                        self.leaderships_taken_while_stopping
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    debug!(%topic_partition, leader_epoch = assignment.leader_epoch,
                        high_watermark = replica.high_watermark.current(), "leading partition");
                }
                Err(error) => warn!(%topic_partition, %error, "cannot lead partition"),
            }
        }
        (became_leader, declined)
    }

    /// The hosted replica of `topic_partition` for topic `topic_id`,
    /// opened (idle) if it is not hosted yet.
    fn host(
        &self,
        topic_partition: &TopicPartition,
        topic_id: Uuid,
        now_ms: i64,
    ) -> Option<Arc<PartitionReplica>> {
        if let Some(replica) = self.get_hosted(topic_partition) {
            if replica.topic_id == topic_id {
                return Some(replica);
            }
        }
        let log = match self.logs.get_or_create(topic_partition, now_ms) {
            Ok(log) => log,
            Err(error) => {
                warn!(%topic_partition, %error, "cannot host partition");
                return None;
            }
        };
        let replica = Arc::new(PartitionReplica {
            topic_partition: topic_partition.clone(),
            topic_id,
            partition: Arc::new(Partition::open(
                topic_partition.clone(),
                log,
                Arc::clone(&self.clock),
            )),
            metrics: self.topic_metrics.resolve(&topic_partition.topic),
        });
        // Single insert (see `get_hosted`).
        self.partitions
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(topic_partition.clone(), Arc::clone(&replica));
        Some(replica)
    }

    /// Stops hosting the replicas not in `assigned` (or assigned for
    /// another topic id: a topic deleted and created again under its name)
    /// and returns them: idle, so appends that found them are refused and
    /// their waiters wake.
    fn remove_unassigned(
        &self,
        assigned: &HashMap<TopicPartition, Uuid>,
    ) -> Vec<Arc<PartitionReplica>> {
        let removed: Vec<Arc<PartitionReplica>> = {
            // Single removes (see `get_hosted`).
            let mut partitions = self
                .partitions
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let doomed: Vec<TopicPartition> = partitions
                .iter()
                .filter(|(topic_partition, replica)| {
                    assigned.get(*topic_partition) != Some(&replica.topic_id)
                })
                .map(|(topic_partition, _)| topic_partition.clone())
                .collect();
            doomed
                .iter()
                .filter_map(|topic_partition| partitions.remove(topic_partition))
                .collect()
        };
        for replica in &removed {
            if let Err(error) = replica.become_idle() {
                let topic_partition = &replica.topic_partition;
                debug!(%topic_partition, %error, "removing an offline partition");
            }
        }
        removed
    }

    /// Tiered storage: the remote segments of removed replicas whose topic
    /// is gone from the cluster (not moved elsewhere) are deleted too, in
    /// the background (every replica asks; deletion is idempotent).
    fn delete_remote_data_of_deleted_topics(
        &self,
        removed: &[Arc<PartitionReplica>],
        image: &MetadataImage,
    ) {
        let Some(remote) = self.remote.get() else {
            return;
        };
        for replica in removed {
            let partition = &replica.topic_partition;
            if image.topic_by_name(&partition.topic).is_none() {
                delete_remote_partition(remote, partition.clone());
            }
        }
    }

    /// Deletes the logs of the `removed` replicas and of partitions on disk
    /// that are not assigned here (deleted while this broker was down). An
    /// image with no topics at all is more likely a lost metadata directory
    /// than a deliberate deletion of everything, so data on disk is kept
    /// then.
    fn delete_unassigned_logs(
        &self,
        removed: Vec<Arc<PartitionReplica>>,
        assigned: &HashMap<TopicPartition, Uuid>,
        any_topics: bool,
        now_ms: i64,
    ) {
        let kept_topics: std::collections::HashSet<&str> = if removed.is_empty() {
            std::collections::HashSet::new()
        } else {
            assigned.keys().map(|kept| kept.topic.as_str()).collect()
        };
        for replica in removed {
            let topic_partition = &replica.topic_partition;
            match self.logs.delete(topic_partition, now_ms) {
                Ok(_) => info!(%topic_partition, "deleted a partition no longer assigned here"),
                Err(error) => warn!(%topic_partition, %error, "cannot delete partition"),
            }
            if !kept_topics.contains(topic_partition.topic.as_str()) {
                self.topic_metrics.remove(&topic_partition.topic);
            }
        }
        if !any_topics {
            return;
        }
        for topic_partition in self.logs.partitions() {
            if !assigned.contains_key(&topic_partition) {
                match self.logs.delete(&topic_partition, now_ms) {
                    Ok(true) => info!(%topic_partition, "deleted a partition not assigned here"),
                    Ok(false) => {}
                    Err(error) => warn!(%topic_partition, %error, "cannot delete stale partition"),
                }
            }
        }
    }
}

/// Deletes the remote data of a deleted topic's partition in the background.
fn delete_remote_partition(
    manager: &Arc<strom_storage::remote::RemoteLogManager>,
    partition: TopicPartition,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!(%partition, "tiered storage: no runtime to delete remote data");
        return;
    };
    let manager = Arc::clone(manager);
    runtime.spawn(async move {
        match manager.delete_partition(&partition).await {
            Ok(count) => debug!(%partition, count, "tiered storage: deleted remote segments"),
            Err(error) => warn!(%partition, %error, "tiered storage: cannot delete remote data"),
        }
    });
}

/// Partitions becoming leader in one image from which [`ReplicaManager`]
/// leads them with several threads.
const PARALLEL_LEAD_MIN: usize = 64;

/// The threads that lead many partitions at once (their work is mostly
/// waiting for fsyncs).
const LEAD_THREADS: usize = 8;

/// The role an image gives a replica hosted here.
enum WantedRole {
    /// Lead it.
    Lead(LeaderAssignment),
    /// Follow `leader` at `leader_epoch`.
    Follow { leader: i32, leader_epoch: i32 },
    /// Neither (no leader).
    Idle,
}

/// What an image asks of this broker.
#[derive(Default)]
struct ImagePlan {
    /// Partitions with a replica here.
    assigned: HashMap<TopicPartition, Uuid>,
    /// The role of each.
    roles: Vec<(TopicPartition, Uuid, WantedRole)>,
}

/// A topic's configs under topic-level names, lowest precedence first:
/// the broker's `log.*` settings (`topic_defaults`), the cluster-wide
/// dynamic broker defaults, this broker's dynamic configs (both under
/// broker names in the image, KIP-226), then the topic's own configs.
pub fn topic_properties(
    topic_defaults: &std::collections::BTreeMap<String, String>,
    image: &MetadataImage,
    node_id: i32,
    topic: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut properties = topic_defaults.clone();
    for broker in [None, Some(node_id)] {
        for (key, value) in image.configs(&ConfigResource::Broker(broker)) {
            if let Some(definition) = strom_protocol::topic_config::topic_config_by_broker_name(key)
            {
                properties.insert(definition.name.to_owned(), value.clone());
            }
        }
    }
    for (key, value) in image.configs(&ConfigResource::Topic(topic.to_owned())) {
        properties.insert(key.clone(), value.clone());
    }
    properties
}

/// The typed log config of a topic, from [`topic_properties`].
pub fn topic_log_config(
    topic_defaults: &std::collections::BTreeMap<String, String>,
    image: &MetadataImage,
    node_id: i32,
    topic: &str,
) -> LogConfig {
    let properties = topic_properties(topic_defaults, image, node_id, topic);
    match LogConfig::from_properties(&properties) {
        Ok(parsed) => parsed.config,
        Err(error) => {
            // The controller validated these values; a mismatch between its
            // table and the storage parser must not stop serving.
            warn!(topic, %error, "invalid topic config; using the broker defaults");
            LogConfig::from_properties(topic_defaults)
                .map(|parsed| parsed.config)
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;
    use strom_clock::SystemClock;
    use strom_controller::records::{
        uuid_to_bytes, BrokerEndpoint, MetadataRecord, PartitionRecord, Record,
        RegisterBrokerRecord, TopicRecord,
    };
    use strom_replication::{AckStatus, ReplicationError};
    use strom_storage::LogManagerConfig;

    use super::*;

    fn records_for_topic(name: &str, id: Uuid) -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::new(Record::Topic(TopicRecord {
                name: name.into(),
                topic_id: uuid_to_bytes(id),
            })),
            MetadataRecord::new(Record::Partition(PartitionRecord {
                topic_id: uuid_to_bytes(id),
                partition_index: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                ..PartitionRecord::default()
            })),
        ]
    }

    fn apply_all(
        image: &MetadataImage,
        first_offset: u64,
        records: &[MetadataRecord],
    ) -> MetadataImage {
        let mut image = image.clone();
        for (index, record) in records.iter().enumerate() {
            image = image
                .apply(first_offset + index as u64, record)
                .expect("valid record");
        }
        image
    }

    #[test]
    fn an_older_image_applied_late_does_not_drop_newer_partitions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager =
            ReplicaManager::new(1, Arc::clone(&logs), Arc::new(SystemClock), BTreeMap::new());
        let register = MetadataRecord::new(Record::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: uuid_to_bytes(Uuid::from_u128(7)),
            broker_epoch: 1,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
            fenced: false,
        }));
        let older = apply_all(&MetadataImage::empty(), 0, &[register]);
        let mut with_topic = records_for_topic("fresh", Uuid::from_u128(1));
        let newer = apply_all(&older, 1, &with_topic);
        manager.apply_image(&newer);
        let topic_partition = TopicPartition::new("fresh".to_owned(), 0);
        assert!(
            manager.get(&topic_partition).is_some(),
            "the new partition is hosted"
        );
        // The metadata follower catches up late with the image from before
        // the topic existed: it must not undo the newer one.
        manager.apply_image(&older);
        assert!(
            manager.get(&topic_partition).is_some(),
            "a stale image is ignored"
        );
        assert!(logs.get(&topic_partition).is_some(), "the log is kept");
        // A genuinely newer image without the topic (a deletion) still applies.
        with_topic.clear();
        let removal = MetadataRecord::new(Record::RemoveTopic(
            strom_controller::records::RemoveTopicRecord {
                topic_id: uuid_to_bytes(Uuid::from_u128(1)),
            },
        ));
        let deleted = apply_all(&newer, 3, &[removal]);
        manager.apply_image(&deleted);
        assert!(
            manager.get(&topic_partition).is_none(),
            "a deletion applies"
        );
    }

    /// A manager on a fresh directory leading `topics` (one partition each).
    fn manager_leading(dir: &std::path::Path, topics: &[&str]) -> ReplicaManager {
        let config = LogManagerConfig::new(vec![dir.to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager = ReplicaManager::new(1, logs, Arc::new(SystemClock), BTreeMap::new());
        let mut image = MetadataImage::empty();
        let mut offset = 0;
        for (index, topic) in topics.iter().enumerate() {
            let records = records_for_topic(topic, Uuid::from_u128(index as u128 + 1));
            image = apply_all(&image, offset, &records);
            offset += records.len() as u64;
        }
        manager.apply_image(&image);
        manager
    }

    fn batch() -> Bytes {
        strom_storage::testing::simple_batch(&strom_storage::testing::BatchSpec::default())
    }

    fn assert_offline(replica: &PartitionReplica) {
        assert!(matches!(
            replica.append(batch(), false, 0),
            Err(AppendFailure::Offline(_))
        ));
        assert!(matches!(
            replica.read(0, 1 << 20, true),
            Err(ReadFailure::Offline(_))
        ));
        assert!(matches!(
            replica.validate_leader_epoch(None),
            Err(PartitionError::Offline(_))
        ));
        assert!(replica.with_log(|log| log.log_end_offset()).is_err());
        assert!(replica.with_log_mut(|log| log.log_end_offset()).is_err());
        assert!(replica.leader_epoch().is_err());
        assert_eq!(replica.ack_status(0, 0), AckStatus::Waiting);
    }

    #[test]
    fn a_panic_holding_a_partitions_log_lock_takes_that_partition_offline() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager = manager_leading(dir.path(), &["broken", "healthy"]);
        let broken = manager
            .get(&TopicPartition::new("broken".to_owned(), 0))
            .expect("hosted");
        broken.append(batch(), false, 0).expect("append before");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            broken.with_log_mut(|_| panic!("injected panic while changing the log"))
        }));
        assert!(panicked.is_err());
        assert_offline(&broken);
        assert!(broken.check_online().is_err());
        // The other partition keeps serving.
        let healthy = manager
            .get(&TopicPartition::new("healthy".to_owned(), 0))
            .expect("hosted");
        healthy.append(batch(), false, 0).expect("append");
        let read = healthy.read(0, 1 << 20, true).expect("read");
        assert!(read.records.is_some());
        // A later image with the same leader epoch keeps it offline.
        manager.apply_image(&two_topic_image());
        assert_offline(&broken);
    }

    #[test]
    fn follower_fetches_move_the_hw_and_a_divergent_follower_gets_the_epoch_end() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
        let logs = Arc::new(LogManager::open(config, BTreeMap::new(), 0).expect("log manager"));
        let manager = ReplicaManager::new(1, logs, Arc::new(SystemClock), BTreeMap::new());
        let id = Uuid::from_u128(5);
        let mut records = records_for_topic("shared", id);
        if let Some(Record::Partition(partition)) = &mut records[1].record {
            partition.replicas = vec![1, 2];
            partition.isr = vec![1, 2];
        }
        manager.apply_image(&apply_all(&MetadataImage::empty(), 0, &records));
        let replica = manager
            .get(&TopicPartition::new("shared".to_owned(), 0))
            .expect("leading");
        replica.append(batch(), true, 0).expect("append");
        let log_end_offset = replica
            .with_log(|log| log.log_end_offset())
            .expect("online");
        assert!(log_end_offset > 0);
        assert_eq!(
            replica.high_watermark.current(),
            0,
            "replica 2 has not fetched"
        );
        assert_eq!(replica.log_end.current(), log_end_offset);
        let fetch = |replica_id, fetch_offset, last_fetched_epoch| FollowerFetch {
            replica: replica_id,
            fetch_offset,
            last_fetched_epoch,
        };
        // A follower reads past the HW, up to the log end.
        match replica.read_for_follower(&fetch(2, 0, None), 1 << 20, true, 1) {
            Ok(FollowerRead::Records { read, .. }) => {
                assert!(
                    read.records.is_some(),
                    "uncommitted records go to followers"
                );
                assert_eq!(read.high_watermark, 0);
            }
            other => panic!("not records: {other:?}"),
        }
        // Its next fetch says it has them: the HW moves and acks=all is done.
        assert!(matches!(
            replica.read_for_follower(&fetch(2, log_end_offset, Some(0)), 1 << 20, true, 2),
            Ok(FollowerRead::Records { .. })
        ));
        assert_eq!(replica.high_watermark.current(), log_end_offset);
        assert_eq!(replica.ack_status(log_end_offset, 0), AckStatus::Committed);
        // This broker leads epoch 2 from here; a follower that wrote in
        // epoch 1 (never seen here) learns where epoch 0 ended.
        replica
            .with_log_mut(|log| log.assign_leader_epoch(2))
            .expect("online")
            .expect("assigned");
        match replica.read_for_follower(&fetch(2, log_end_offset + 3, Some(1)), 1 << 20, true, 3) {
            Ok(FollowerRead::Diverging {
                epoch, end_offset, ..
            }) => assert_eq!((epoch, end_offset), (0, log_end_offset)),
            other => panic!("not a divergence: {other:?}"),
        }
        // A broker that is not a replica is refused.
        assert!(matches!(
            replica.read_for_follower(&fetch(9, 0, None), 1 << 20, true, 4),
            Ok(FollowerRead::Refused(ReplicationError::UnknownReplica {
                replica: 9
            }))
        ));
    }

    /// The image `manager_leading(_, &["broken", "healthy"])` applied.
    fn two_topic_image() -> MetadataImage {
        let mut image = MetadataImage::empty();
        let mut offset = 0;
        for (index, topic) in ["broken", "healthy"].iter().enumerate() {
            let records = records_for_topic(topic, Uuid::from_u128(index as u128 + 1));
            image = apply_all(&image, offset, &records);
            offset += records.len() as u64;
        }
        image
    }

    #[test]
    fn losing_leadership_keeps_the_log_and_leading_again_serves_its_records() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager = manager_leading(dir.path(), &["kept"]);
        let topic_partition = TopicPartition::new("kept".to_owned(), 0);
        let replica = manager.get(&topic_partition).expect("hosted");
        replica.append(batch(), false, 0).expect("append");
        let leader_change = |leader| {
            MetadataRecord::new(Record::PartitionChange(
                strom_controller::records::PartitionChangeRecord {
                    topic_id: uuid_to_bytes(Uuid::from_u128(1)),
                    partition_index: 0,
                    isr: None,
                    leader: Some(leader),
                    ..Default::default()
                },
            ))
        };
        let leading = apply_all(
            &MetadataImage::empty(),
            0,
            &records_for_topic("kept", Uuid::from_u128(1)),
        );
        // This broker fenced (its heartbeats were late): no leader.
        let leaderless = apply_all(
            &leading,
            2,
            &[leader_change(strom_controller::records::NO_LEADER)],
        );
        manager.apply_image(&leaderless);
        assert!(manager.get(&topic_partition).is_none(), "not leading");
        // A request that found the partition before is refused.
        assert!(replica.is_deposed());
        assert!(matches!(
            replica.append(batch(), false, 0),
            Err(AppendFailure::Replication(ReplicationError::NotLeader))
        ));
        assert!(
            manager.logs().get(&topic_partition).is_some(),
            "the log of a partition still assigned here is kept"
        );
        let leading_again = apply_all(&leaderless, 3, &[leader_change(1)]);
        manager.apply_image(&leading_again);
        let replica = manager.get(&topic_partition).expect("leading again");
        assert_eq!(
            replica
                .with_log(|log| log.log_end_offset())
                .expect("online"),
            1,
            "the record appended before is still there"
        );
    }
}
