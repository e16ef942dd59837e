//! The sans-IO coordinator: every group of the `__consumer_offsets`
//! partitions this broker owns, their offsets, and the records to persist.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use strom_clock::Random;

use crate::consumer_group::{ConsumerGroup, ConsumerGroupConfig};
use crate::error::GroupError;
use crate::group::{
    Completion, Group, GroupConfig, GroupDescription, HeartbeatRequest, JoinRequest, JoinResponse,
    LeaveMember, Reply, SyncRequest, SyncResponse,
};
use crate::log::{LogRecord, TransactionMarker};
use crate::offsets::{
    subscribed_topics, CommittedOffset, GroupOffsets, OffsetCommitPartition, OffsetCommitRequest,
    OffsetConfig, PartitionOffset, TopicPartition,
};
use crate::pending_txn::{commit_of, PendingTransactions, PositionedRecord, StagedTransaction};
use crate::records::{partition_for_group, OffsetsRecord};
use crate::state::GroupState;

/// Coordinator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// Group membership settings.
    pub group: GroupConfig,
    /// Offset settings.
    pub offsets: OffsetConfig,
    /// `offsets.topic.num.partitions` (default 50).
    pub offsets_topic_partitions: i32,
    /// Consumer-protocol (KIP-848) group settings.
    pub consumer: ConsumerGroupConfig,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            group: GroupConfig::default(),
            offsets: OffsetConfig::default(),
            offsets_topic_partitions: 50,
            consumer: ConsumerGroupConfig::default(),
        }
    }
}

/// Whether an owned `__consumer_offsets` partition can serve requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionStatus {
    /// Being replayed: requests get COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Loaded: requests are served.
    Loaded,
}

/// A group and its committed offsets.
#[derive(Debug, Clone)]
pub(crate) struct GroupEntry {
    pub(crate) group: Group,
    pub(crate) offsets: GroupOffsets,
    /// The consumer-protocol (KIP-848) group when the group id belongs to
    /// one; `group` is then an empty classic group.
    pub(crate) consumer: Option<ConsumerGroup>,
}

/// A group as ListGroups reports it.
pub type GroupListing = (String, String, GroupState);

/// Per-partition results of OffsetCommit and OffsetDelete.
pub type PartitionResults = Vec<(TopicPartition, Result<(), GroupError>)>;

/// Per-group results of DeleteGroups.
pub type GroupResults = Vec<(String, Result<(), GroupError>)>;

/// The coordinator's state for the partitions it owns.
#[derive(Debug)]
pub struct CoordinatorCore {
    pub(crate) config: CoordinatorConfig,
    pub(crate) partitions: HashMap<i32, PartitionStatus>,
    pub(crate) groups: HashMap<String, GroupEntry>,
    records: Vec<(i32, LogRecord)>,
    /// Offset commits written to `__consumer_offsets` but not yet committed
    /// there, by partition and the offset of their batch's last record:
    /// applied in log order once the partition's high watermark passes
    /// them (see [`advance_committed`](Self::advance_committed)), so that
    /// OffsetFetch answers only what the log has committed.
    pending: BTreeMap<(i32, i64), Vec<OffsetsRecord>>,
    /// The commit records of the last [`stage_offsets`](Self::stage_offsets)
    /// until the runtime places them at their offset or drops them.
    staged: Vec<OffsetsRecord>,
    /// The transactional commit of the last TxnOffsetCommit until the
    /// runtime places it at its offset or drops it.
    pub(crate) staged_transaction: Option<StagedTransaction>,
    /// Offsets of open transactions and markers the log has not committed.
    pub(crate) transactions: PendingTransactions,
    /// Per loaded partition whose log was not committed to its end when it
    /// was replayed: that end. OffsetFetch answers
    /// COORDINATOR_LOAD_IN_PROGRESS until the high watermark reaches it,
    /// since the uncommitted tail may hold commits an earlier coordinator
    /// acknowledged (a new leader learns the high watermark from its
    /// followers' next fetches).
    horizons: HashMap<i32, i64>,
    completions: Vec<Completion>,
    next_retention_check_ms: i64,
    /// Where new member ids draw their random part from.
    pub(crate) random: Arc<dyn Random>,
}

impl CoordinatorCore {
    /// A coordinator that owns no partition yet, drawing new member ids
    /// from `random`.
    pub fn new(config: CoordinatorConfig, random: Arc<dyn Random>) -> CoordinatorCore {
        assert!(config.offsets_topic_partitions > 0);
        CoordinatorCore {
            config,
            partitions: HashMap::new(),
            groups: HashMap::new(),
            records: Vec::new(),
            pending: BTreeMap::new(),
            staged: Vec::new(),
            staged_transaction: None,
            transactions: PendingTransactions::default(),
            horizons: HashMap::new(),
            completions: Vec::new(),
            next_retention_check_ms: i64::MIN,
            random,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for_group(group_id, self.config.offsets_topic_partitions)
    }

    /// The status of an owned partition, `None` if not owned.
    pub fn partition_status(&self, partition: i32) -> Option<PartitionStatus> {
        self.partitions.get(&partition).copied()
    }

    /// Whether any owned partition is still loading.
    pub fn any_partition_loading(&self) -> bool {
        self.partitions
            .values()
            .any(|status| *status == PartitionStatus::Loading)
    }

    /// Takes ownership of `partition`, which loads before it serves.
    pub fn begin_loading(&mut self, partition: i32) {
        self.partitions.insert(partition, PartitionStatus::Loading);
    }

    /// Gives up `partition` (it moved to another broker): its groups are
    /// dropped and their parked requests answered NOT_COORDINATOR.
    pub fn unload(&mut self, partition: i32) {
        self.partitions.remove(&partition);
        self.pending.retain(|(pending, _), _| *pending != partition);
        self.transactions.clear_partition(partition, i64::MAX);
        self.horizons.remove(&partition);
        let owned: Vec<String> = self
            .groups
            .keys()
            .filter(|group_id| self.partition_for(group_id) == partition)
            .cloned()
            .collect();
        for group_id in owned {
            let Some(mut entry) = self.groups.remove(&group_id) else {
                continue;
            };
            let member_ids: Vec<String> = entry.group.members.keys().cloned().collect();
            for member_id in member_ids {
                entry
                    .group
                    .remove_member(&member_id, GroupError::NotCoordinator { partition });
            }
            self.completions.extend(entry.group.take_completions());
        }
    }

    /// Checks that this coordinator serves `group_id` now.
    pub fn check_owner(&self, group_id: &str) -> Result<i32, GroupError> {
        let partition = self.partition_for(group_id);
        match self.partitions.get(&partition) {
            Some(PartitionStatus::Loaded) => Ok(partition),
            Some(PartitionStatus::Loading) => {
                Err(GroupError::CoordinatorLoadInProgress { partition })
            }
            None => Err(GroupError::NotCoordinator { partition }),
        }
    }

    /// A group, if this coordinator holds it.
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id).map(|entry| &entry.group)
    }

    /// The committed offsets of a group.
    pub fn offsets(&self, group_id: &str) -> Option<&GroupOffsets> {
        self.groups.get(group_id).map(|entry| &entry.offsets)
    }

    /// Answers to parked requests resolved since the last call.
    pub fn take_completions(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.completions)
    }

    /// Records to append to `__consumer_offsets`, with their partition, since
    /// the last call, in order.
    pub fn take_records(&mut self) -> Vec<(i32, LogRecord)> {
        std::mem::take(&mut self.records)
    }

    pub(crate) fn push_record(&mut self, record: OffsetsRecord) {
        if let Some(group_id) = record.group() {
            let partition = self.partition_for(group_id);
            self.records.push((partition, record.to_log_record()));
        }
    }

    /// Collects a group's completions and, when its metadata changed, the
    /// GroupMetadata record.
    fn after_group_change(&mut self, group_id: &str) {
        let Some(entry) = self.groups.get_mut(group_id) else {
            return;
        };
        self.completions.extend(entry.group.take_completions());
        if entry.group.take_metadata_changed() {
            let record = OffsetsRecord::GroupMetadata {
                group: group_id.to_owned(),
                value: Some(entry.group.to_metadata_value()),
            };
            self.push_record(record);
        }
    }

    /// JoinGroup.
    pub fn join_group(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        now_ms: i64,
    ) -> Result<Reply<JoinResponse>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.check_owner(group_id)?;
        self.claim_for_classic(group_id)?;
        let created = !self.groups.contains_key(group_id);
        if created && !request.member_id.is_empty() {
            return Err(GroupError::UnknownMemberId);
        }
        let config = self.config.group.clone();
        let entry = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| GroupEntry {
                group: Group::new(group_id, now_ms),
                offsets: GroupOffsets::new(),
                consumer: None,
            });
        let result = entry.group.join(request, &config, now_ms, &*self.random);
        let unused = entry.group.state() == GroupState::Empty
            && entry.group.is_empty()
            && entry.group.pending_members.is_empty()
            && entry.offsets.is_empty();
        if created && unused {
            self.groups.remove(group_id);
        }
        self.after_group_change(group_id);
        result
    }

    fn group_mut(&mut self, group_id: &str) -> Result<&mut Group, GroupError> {
        self.check_owner(group_id)?;
        self.groups
            .get_mut(group_id)
            .map(|entry| &mut entry.group)
            .ok_or(GroupError::UnknownMemberId)
    }

    /// SyncGroup.
    pub fn sync_group(
        &mut self,
        group_id: &str,
        request: SyncRequest,
        now_ms: i64,
    ) -> Result<Reply<SyncResponse>, GroupError> {
        let result = self.group_mut(group_id)?.sync(request, now_ms);
        self.after_group_change(group_id);
        result
    }

    /// Heartbeat.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        request: &HeartbeatRequest,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        let result = self.group_mut(group_id)?.heartbeat(request, now_ms);
        self.after_group_change(group_id);
        result
    }

    /// LeaveGroup: one result per leaving member.
    pub fn leave_group(
        &mut self,
        group_id: &str,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let config = self.config.group.clone();
        self.check_owner(group_id)?;
        if !self.groups.contains_key(group_id) {
            // As Kafka: no group-level error, each leaving member is unknown.
            return Ok(members
                .iter()
                .map(|_| Err(GroupError::UnknownMemberId))
                .collect());
        }
        let result = self.group_mut(group_id)?.leave(members, &config, now_ms);
        self.after_group_change(group_id);
        result
    }

    /// Advances every group's timers, and expires offsets every
    /// `offsets.retention.check.interval.ms`.
    pub fn tick(&mut self, now_ms: i64) {
        let config = self.config.group.clone();
        let group_ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in &group_ids {
            if let Some(entry) = self.groups.get_mut(group_id) {
                entry.group.tick(&config, now_ms);
            }
            self.after_group_change(group_id);
        }
        self.tick_consumer_groups(now_ms);
        if now_ms >= self.next_retention_check_ms {
            self.next_retention_check_ms =
                now_ms.saturating_add(self.config.offsets.retention_check_interval_ms);
            self.expire_offsets(now_ms);
        }
    }

    /// The earliest time at which [`tick`](Self::tick) has something to do,
    /// for a timer task; `None` if nothing is scheduled.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let group_deadlines = self
            .groups
            .values()
            .filter_map(|entry| entry.group.next_deadline_ms())
            .chain(self.next_consumer_deadline_ms());
        group_deadlines
            .chain(std::iter::once(self.next_retention_check_ms))
            .min()
    }

    /// OffsetCommit on a log that commits what it appends at once:
    /// [`stage_offsets`](Self::stage_offsets) with the offsets applied
    /// immediately. A runtime over a replicated log stages, places the
    /// staged commit at its offset and applies it when the log commits it.
    pub fn commit_offsets(
        &mut self,
        request: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Result<PartitionResults, GroupError> {
        let results = self.stage_offsets(request, now_ms)?;
        for record in std::mem::take(&mut self.staged) {
            // Applied at once, so the last record of the log.
            self.apply_record(record, i64::MAX, now_ms);
        }
        Ok(results)
    }

    /// OffsetCommit: validates the member as Kafka does and writes a record
    /// for each partition's offset (see [`take_records`](Self::take_records)).
    /// The offsets are not visible yet: the caller appends the records, then
    /// either [`place_staged`](Self::place_staged) them at the offset they
    /// were appended at (they become visible when
    /// [`advance_committed`](Self::advance_committed) passes it) or
    /// [`discard_staged`](Self::discard_staged) them when the append fails.
    ///
    /// Commits with a negative generation are accepted for groups in the
    /// Empty state (standalone consumers and admin tools), creating the group
    /// if needed. A commit with a generation for a group that does not exist
    /// is refused with [`GroupError::IllegalGeneration`] (`current: -1`);
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for it instead, which the
    /// broker decides by version.
    pub fn stage_offsets(
        &mut self,
        request: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Result<PartitionResults, GroupError> {
        self.staged.clear();
        let group_id = request.group_id.as_str();
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.check_owner(group_id)?;
        if !self.groups.contains_key(group_id) {
            if request.generation_id >= 0 {
                return Err(GroupError::IllegalGeneration {
                    requested: request.generation_id,
                    current: -1,
                });
            }
            self.groups.insert(
                group_id.to_owned(),
                GroupEntry {
                    group: Group::new(group_id, now_ms),
                    offsets: GroupOffsets::new(),
                    consumer: None,
                },
            );
        }
        let entry = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        match &entry.consumer {
            Some(consumer) => {
                consumer.validate_offset_commit(&request.member_id, request.generation_id)?
            }
            None => validate_commit(&mut entry.group, request, now_ms)?,
        }
        let expiry = request
            .retention_time_ms
            .filter(|retention_ms| *retention_ms >= 0);
        let (results, records) = self.offset_records(group_id, &request.partitions, expiry, now_ms);
        for record in records {
            self.staged.push(record.clone());
            self.push_record(record);
        }
        Ok(results)
    }

    /// The records committing `partitions` for `group_id`, and the result of
    /// each partition: OFFSET_METADATA_TOO_LARGE for metadata over
    /// `offset.metadata.max.bytes` (no record), `Ok` otherwise. Offsets
    /// expire `retention_ms` after their commit when it is given.
    pub(crate) fn offset_records(
        &self,
        group_id: &str,
        partitions: &[OffsetCommitPartition],
        retention_ms: Option<i64>,
        now_ms: i64,
    ) -> (PartitionResults, Vec<OffsetsRecord>) {
        let max_bytes = self.config.offsets.metadata_max_bytes;
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for partition in partitions {
            let key = TopicPartition::new(partition.topic.clone(), partition.partition);
            let metadata = partition.metadata.clone().unwrap_or_default();
            if metadata.len() > max_bytes {
                let error = GroupError::OffsetMetadataTooLarge {
                    metadata_bytes: metadata.len(),
                    max_bytes,
                };
                results.push((key, Err(error)));
                continue;
            }
            let commit_timestamp_ms = partition.commit_timestamp_ms.unwrap_or(now_ms);
            let offset = CommittedOffset {
                offset: partition.offset,
                leader_epoch: partition.leader_epoch.filter(|epoch| *epoch >= 0),
                metadata,
                commit_timestamp_ms,
                expire_timestamp_ms: retention_ms
                    .map(|retention_ms| commit_timestamp_ms.saturating_add(retention_ms)),
            };
            records.push(OffsetsRecord::OffsetCommit {
                group: group_id.to_owned(),
                topic: key.topic.clone(),
                partition: key.partition,
                value: Some(offset.to_value()),
            });
            results.push((key, Ok(())));
        }
        (results, records)
    }

    /// The commit of the last [`stage_offsets`](Self::stage_offsets) was
    /// appended to `partition` in a batch ending at `last_offset`: it
    /// becomes visible once the high watermark passes that offset.
    pub fn place_staged(&mut self, partition: i32, last_offset: i64) {
        let staged = std::mem::take(&mut self.staged);
        if !staged.is_empty() {
            self.pending
                .entry((partition, last_offset))
                .or_default()
                .extend(staged);
        }
    }

    /// A replayed commit at `offset`, past the high watermark: pending, and
    /// OffsetFetch waits until the high watermark passes it.
    pub(crate) fn stage_record(&mut self, partition: i32, offset: i64, record: OffsetsRecord) {
        self.pending
            .entry((partition, offset))
            .or_default()
            .push(record);
        self.extend_horizon(partition, offset);
    }

    /// OffsetFetch on `partition` waits until the high watermark passes
    /// `offset`, a replayed record past it.
    pub(crate) fn extend_horizon(&mut self, partition: i32, offset: i64) {
        let horizon = self.horizons.entry(partition).or_insert(0);
        *horizon = (*horizon).max(offset.saturating_add(1));
    }

    /// The commit of the last [`stage_offsets`](Self::stage_offsets) (or
    /// [`commit_transactional_offsets`](Self::commit_transactional_offsets))
    /// was not appended: it is forgotten.
    pub fn discard_staged(&mut self) {
        self.staged.clear();
        self.staged_transaction = None;
    }

    /// The log has committed `partition` below `high_watermark`: the
    /// pending commits and transaction markers there are applied, in log
    /// order (see [`complete_transaction`](Self::complete_transaction)).
    pub fn advance_committed(&mut self, partition: i32, high_watermark: i64, now_ms: i64) {
        if self
            .horizons
            .get(&partition)
            .is_some_and(|horizon| high_watermark >= *horizon)
        {
            self.horizons.remove(&partition);
        }
        let ready: Vec<(i32, i64)> = self
            .pending
            .range((partition, i64::MIN)..(partition, high_watermark))
            .map(|(key, _)| *key)
            .collect();
        let mut markers = self
            .transactions
            .take_markers(partition, high_watermark)
            .into_iter()
            .peekable();
        for key in ready {
            while let Some((marker_offset, producer_id, marker)) =
                markers.next_if(|(marker_offset, _, _)| *marker_offset < key.1)
            {
                self.apply_marker(partition, producer_id, marker, marker_offset, now_ms);
            }
            for record in self.pending.remove(&key).unwrap_or_default() {
                self.apply_record(record, key.1, now_ms);
            }
        }
        for (marker_offset, producer_id, marker) in markers {
            self.apply_marker(partition, producer_id, marker, marker_offset, now_ms);
        }
    }

    /// A transaction marker of `producer_id` at `marker_offset` of
    /// `partition` that the log has committed: on a commit, the offsets
    /// the producer wrote there before it become their groups' committed
    /// offsets, in log order; on an abort they are dropped. A producer with
    /// nothing open there is left alone, so a repeated marker changes
    /// nothing.
    pub(crate) fn apply_marker(
        &mut self,
        partition: i32,
        producer_id: i64,
        marker: TransactionMarker,
        marker_offset: i64,
        now_ms: i64,
    ) {
        let ended: Vec<PositionedRecord> =
            self.transactions
                .take(partition, producer_id, marker_offset);
        tracing::debug!(
            partition,
            producer_id,
            commit = marker.is_commit(),
            offsets = ended.len(),
            "transaction ended in __consumer_offsets"
        );
        if marker.is_commit() {
            for (position, record) in ended {
                self.apply_record(record, position, now_ms);
            }
        }
    }

    /// How many commits wait for the log to commit them (for tests and
    /// metrics).
    pub fn pending_commits(&self) -> usize {
        self.pending.len()
    }

    /// How many transactions (per `__consumer_offsets` partition and
    /// producer) hold offsets that wait for their marker (for tests and
    /// metrics).
    pub fn open_transactions(&self) -> usize {
        self.transactions.open_transactions()
    }

    /// The partitions with commits or transaction markers waiting for the
    /// log.
    pub fn pending_partitions(&self) -> Vec<i32> {
        let partitions: BTreeSet<i32> = self
            .pending
            .keys()
            .map(|(partition, _)| *partition)
            .chain(self.transactions.marker_partitions())
            .collect();
        partitions.into_iter().collect()
    }

    /// Forgets pending commits of `group_id` (of one of its partitions
    /// when `only` is given): its offsets were deleted after them.
    fn drop_pending(&mut self, group_id: &str, only: Option<&TopicPartition>) {
        for records in self.pending.values_mut() {
            records.retain(|record| !commit_of(record, group_id, only));
        }
        self.pending.retain(|_, records| !records.is_empty());
    }

    /// OffsetFetch for one group: the requested partitions, or all
    /// committed ones when `topics` is `None`. An unknown group has no
    /// offsets (every partition answers -1). Only what the log has
    /// committed is answered (see [`advance_committed`](Self::advance_committed));
    /// a partition loaded with an uncommitted tail of commits answers
    /// [`GroupError::CoordinatorLoadInProgress`] until the high watermark
    /// passes that tail.
    ///
    /// Offsets of open transactions are never answered. With
    /// `require_stable` (OffsetFetch v7+, KIP-447) a partition that an open
    /// transaction holds an offset of answers
    /// [`GroupError::UnstableOffsetCommit`] instead of its last committed
    /// offset (for all partitions, each committed one that is held), so
    /// that a consumer does not start from an offset about to change.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<Vec<PartitionOffset>, GroupError> {
        let partition = self.check_owner(group_id)?;
        if self.horizons.contains_key(&partition) {
            return Err(GroupError::CoordinatorLoadInProgress { partition });
        }
        let mut offsets = match self.groups.get(group_id) {
            Some(entry) => entry.offsets.fetch(topics),
            None => GroupOffsets::new().fetch(topics),
        };
        if require_stable {
            for offset in &mut offsets {
                let key = TopicPartition::new(offset.topic.clone(), offset.partition);
                if self.transactions.has_offsets(group_id, Some(&key)) {
                    *offset = PartitionOffset::unstable(&key);
                }
            }
        }
        Ok(offsets)
    }

    /// OffsetDelete: refused per partition with GROUP_SUBSCRIBED_TO_TOPIC for
    /// topics a non-empty consumer group subscribes to. An Empty group left
    /// without offsets is removed at once (its metadata tombstoned), as
    /// Kafka's coordinator does, rather than at the next expiry check.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
        now_ms: i64,
    ) -> Result<PartitionResults, GroupError> {
        self.check_owner(group_id)?;
        let entry = self
            .groups
            .get_mut(group_id)
            .filter(|entry| entry.group.state() != GroupState::Dead)
            .ok_or(GroupError::GroupIdNotFound)?;
        let subscribed = match &entry.consumer {
            Some(consumer) if !consumer.members().is_empty() => {
                Some(Some(consumer.subscribed_topic_names()))
            }
            Some(_) => None,
            None => subscriptions(&entry.group)?,
        };
        let mut results = Vec::new();
        let mut records = Vec::new();
        let mut deleted = Vec::new();
        for (topic, partitions) in topics {
            let refused = subscribed
                .as_ref()
                .is_some_and(|topics| topics.as_ref().is_none_or(|topics| topics.contains(topic)));
            for partition in partitions {
                let key = TopicPartition::new(topic.clone(), *partition);
                if refused {
                    results.push((key, Err(GroupError::GroupSubscribedToTopic)));
                    continue;
                }
                let pending = pending_commit_of(&self.pending, group_id, Some(&key))
                    || self.transactions.has_offsets(group_id, Some(&key));
                if entry.offsets.remove(&key) || pending {
                    deleted.push(key.clone());
                    records.push(OffsetsRecord::OffsetCommit {
                        group: group_id.to_owned(),
                        topic: key.topic.clone(),
                        partition: key.partition,
                        value: None,
                    });
                }
                results.push((key, Ok(())));
            }
        }
        let unused = entry.group.state() == GroupState::Empty
            && entry.group.is_empty()
            && entry.group.pending_members.is_empty()
            && entry.offsets.is_empty();
        for key in &deleted {
            self.drop_pending(group_id, Some(key));
            self.transactions.drop_offsets(group_id, Some(key));
        }
        let unused = unused
            && !pending_commit_of(&self.pending, group_id, None)
            && !self.transactions.has_offsets(group_id, None);
        for record in records {
            self.push_record(record);
        }
        if unused {
            self.remove_group(group_id, now_ms);
        }
        Ok(results)
    }

    /// DeleteGroups: each group must exist and be Empty, and no open
    /// transaction may hold offsets of it (NON_EMPTY_GROUP otherwise, as
    /// Kafka answers); its offsets and metadata are tombstoned.
    pub fn delete_groups(&mut self, group_ids: &[String], now_ms: i64) -> GroupResults {
        group_ids
            .iter()
            .map(|group_id| (group_id.clone(), self.delete_group(group_id, now_ms)))
            .collect()
    }

    fn delete_group(&mut self, group_id: &str, now_ms: i64) -> Result<(), GroupError> {
        self.check_owner(group_id)?;
        let entry = self
            .groups
            .get(group_id)
            .filter(|entry| entry.group.state() != GroupState::Dead)
            .ok_or(GroupError::GroupIdNotFound)?;
        let consumer_members = entry
            .consumer
            .as_ref()
            .is_some_and(|consumer| !consumer.members().is_empty());
        if entry.group.state() != GroupState::Empty
            || !entry.group.is_empty()
            || consumer_members
            || self.transactions.has_offsets(group_id, None)
        {
            return Err(GroupError::NonEmptyGroup);
        }
        self.remove_group(group_id, now_ms);
        Ok(())
    }

    /// Marks a group Dead and writes tombstones for its offsets and metadata.
    fn remove_group(&mut self, group_id: &str, now_ms: i64) {
        self.drop_pending(group_id, None);
        let Some(mut entry) = self.groups.remove(group_id) else {
            return;
        };
        entry.group.mark_dead(now_ms);
        let partitions: Vec<TopicPartition> = entry
            .offsets
            .iter()
            .map(|(partition, _)| partition.clone())
            .collect();
        for partition in partitions {
            self.push_record(OffsetsRecord::OffsetCommit {
                group: group_id.to_owned(),
                topic: partition.topic,
                partition: partition.partition,
                value: None,
            });
        }
        match entry.consumer {
            Some(consumer) => self.write_consumer_group_removal(group_id, &consumer),
            None => self.push_record(OffsetsRecord::GroupMetadata {
                group: group_id.to_owned(),
                value: None,
            }),
        }
    }

    /// ListGroups: group id, protocol type and state of the classic groups
    /// of loaded partitions, filtered by state unless `states` is empty
    /// (consumer-protocol groups: [`list_consumer_groups`](Self::list_consumer_groups)).
    pub fn list_groups(&self, states: &[GroupState]) -> Vec<GroupListing> {
        let mut listings: Vec<GroupListing> = self
            .groups
            .values()
            .filter(|entry| {
                let partition = self.partition_for(entry.group.group_id());
                self.partitions.get(&partition) == Some(&PartitionStatus::Loaded)
            })
            .filter(|entry| entry.consumer.is_none())
            .filter(|entry| states.is_empty() || states.contains(&entry.group.state()))
            .map(|entry| {
                (
                    entry.group.group_id().to_owned(),
                    entry.group.protocol_type().unwrap_or_default().to_owned(),
                    entry.group.state(),
                )
            })
            .collect();
        listings.sort();
        listings
    }

    /// DescribeGroups for one group; an unknown group, or a consumer-protocol
    /// group (not a classic one), is described as Dead with no members, as
    /// Kafka does.
    pub fn describe_group(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        self.check_owner(group_id)?;
        Ok(match self.groups.get(group_id) {
            Some(entry) if entry.consumer.is_none() => entry.group.describe(),
            _ => GroupDescription {
                group_id: group_id.to_owned(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            },
        })
    }

    /// Removes every committed offset of the deleted `topics` and writes
    /// their tombstones; offsets of open transactions for them are dropped.
    pub fn remove_topic_offsets(&mut self, topics: &[String]) {
        self.transactions.drop_topics(topics);
        let mut records = Vec::new();
        for pending in self.pending.values_mut() {
            pending.retain(|record| match record {
                OffsetsRecord::OffsetCommit {
                    group,
                    topic,
                    partition,
                    ..
                } if topics.contains(topic) => {
                    records.push(OffsetsRecord::OffsetCommit {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                        value: None,
                    });
                    false
                }
                _ => true,
            });
        }
        self.pending.retain(|_, pending| !pending.is_empty());
        for (group_id, entry) in &mut self.groups {
            for topic in topics {
                for partition in entry.offsets.remove_topic(topic) {
                    records.push(OffsetsRecord::OffsetCommit {
                        group: group_id.clone(),
                        topic: partition.topic,
                        partition: partition.partition,
                        value: None,
                    });
                }
            }
        }
        for record in records {
            self.push_record(record);
        }
    }

    /// `offsets.retention.minutes`: expires offsets of empty groups (counted
    /// from when the group became empty, or from the commit for groups that
    /// never had members) and offsets with an explicit expiry; removes empty
    /// groups left without offsets. As in Kafka, an offset an open
    /// transaction holds a newer value of does not expire, and a group
    /// with such offsets is not removed.
    pub fn expire_offsets(&mut self, now_ms: i64) {
        let retention_ms = self.config.offsets.retention_ms;
        let mut records = Vec::new();
        let mut dead = Vec::new();
        let transactions = &self.transactions;
        for (group_id, entry) in &mut self.groups {
            let group = &entry.group;
            let held = |key: &TopicPartition| transactions.has_offsets(group_id, Some(key));
            let no_consumer_members = entry
                .consumer
                .as_ref()
                .is_none_or(|consumer| consumer.members().is_empty());
            let empty = group.state() == GroupState::Empty && no_consumer_members;
            let expired = if empty {
                let base_ms = group.protocol_type().map(|_| group.state_timestamp_ms());
                entry
                    .offsets
                    .remove_expired(now_ms, retention_ms, base_ms, held)
            } else {
                entry.offsets.remove_past_explicit_expiry(now_ms, held)
            };
            for partition in expired {
                records.push(OffsetsRecord::OffsetCommit {
                    group: group_id.clone(),
                    topic: partition.topic,
                    partition: partition.partition,
                    value: None,
                });
            }
            let group_unused = empty && group.is_empty() && group.pending_members.is_empty();
            if group_unused
                && entry.offsets.is_empty()
                && !pending_commit_of(&self.pending, group_id, None)
                && !transactions.has_offsets(group_id, None)
            {
                dead.push(group_id.clone());
            }
        }
        for record in records {
            self.push_record(record);
        }
        dead.sort();
        for group_id in dead {
            self.remove_group(&group_id, now_ms);
        }
    }

    /// Applies one record the log has committed, written at `position`
    /// (later records win, tombstones delete): an offset commit or
    /// tombstone also supersedes the transactional offsets of the same
    /// group and partition written before it.
    pub(crate) fn apply_record(&mut self, record: OffsetsRecord, position: i64, now_ms: i64) {
        match record {
            OffsetsRecord::OffsetCommit {
                group,
                topic,
                partition,
                value,
            } => {
                let key = TopicPartition::new(topic, partition);
                self.transactions.supersede(&group, &key, position);
                match value {
                    Some(value) => {
                        let entry =
                            self.groups
                                .entry(group.clone())
                                .or_insert_with(|| GroupEntry {
                                    group: Group::new(group.clone(), now_ms),
                                    offsets: GroupOffsets::new(),
                                    consumer: None,
                                });
                        entry
                            .offsets
                            .commit(key, CommittedOffset::from_value(&value));
                    }
                    None => {
                        if let Some(entry) = self.groups.get_mut(&group) {
                            entry.offsets.remove(&key);
                        }
                    }
                }
            }
            OffsetsRecord::GroupMetadata { group, value } => match value {
                Some(value) => {
                    let offsets = self
                        .groups
                        .remove(&group)
                        .map(|entry| entry.offsets)
                        .unwrap_or_default();
                    let restored = Group::from_metadata_value(&group, &value, now_ms);
                    self.groups.insert(
                        group,
                        GroupEntry {
                            group: restored,
                            offsets,
                            consumer: None,
                        },
                    );
                }
                None => {
                    self.groups.remove(&group);
                }
            },
            OffsetsRecord::Consumer(record) => self.apply_consumer_record(record, now_ms),
            OffsetsRecord::Other { .. } => {}
        }
    }

    /// Marks `partition` loaded.
    pub(crate) fn finish_loading(&mut self, partition: i32) {
        self.partitions.insert(partition, PartitionStatus::Loaded);
    }

    /// Drops groups of `partition` (before a replay), and its transaction
    /// state but the markers queued past `markers_after` (reported while
    /// it loaded, after the records being replayed).
    pub(crate) fn clear_partition(&mut self, partition: i32, markers_after: i64) {
        self.pending.retain(|(pending, _), _| *pending != partition);
        self.transactions.clear_partition(partition, markers_after);
        self.horizons.remove(&partition);
        let config_partitions = self.config.offsets_topic_partitions;
        self.groups
            .retain(|group_id, _| partition_for_group(group_id, config_partitions) != partition);
    }
}

/// Whether a pending commit of `group_id` (of `only`, when given) waits.
fn pending_commit_of(
    pending: &BTreeMap<(i32, i64), Vec<OffsetsRecord>>,
    group_id: &str,
    only: Option<&TopicPartition>,
) -> bool {
    pending
        .values()
        .flatten()
        .any(|record| commit_of(record, group_id, only))
}

/// Kafka's OffsetCommit member checks.
fn validate_commit(
    group: &mut Group,
    request: &OffsetCommitRequest,
    now_ms: i64,
) -> Result<(), GroupError> {
    if group.state() == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if request.generation_id < 0 && group.state() == GroupState::Empty {
        return Ok(());
    }
    // A standalone commit (no generation, member or instance) to a group with
    // members fails the member check: the empty member id is unknown.
    group.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
    group.check_generation(request.generation_id)?;
    if group.state() == GroupState::CompletingRebalance {
        return Err(GroupError::RebalanceInProgress);
    }
    if let Some(member) = group.members.get_mut(&request.member_id) {
        member.last_heartbeat_ms = now_ms;
    }
    Ok(())
}

/// The topics a group's members subscribe to, as Kafka's OffsetDelete sees
/// them: `None` for an Empty group (nothing is protected), `Some(None)` when
/// a consumer group's subscriptions cannot be parsed (every topic is
/// protected), `Some(Some(topics))` otherwise. A group that is not Empty and
/// not a consumer group refuses OffsetDelete with NON_EMPTY_GROUP.
fn subscriptions(group: &Group) -> Result<Option<Option<BTreeSet<String>>>, GroupError> {
    if group.state() == GroupState::Empty {
        return Ok(None);
    }
    if group.protocol_type() != Some("consumer") {
        return Err(GroupError::NonEmptyGroup);
    }
    let protocol = group.protocol_name().unwrap_or_default();
    let mut topics = BTreeSet::new();
    for member in group.members() {
        let parsed = member
            .metadata_for(protocol)
            .map(subscribed_topics)
            .and_then(Result::ok);
        match parsed {
            Some(member_topics) => topics.extend(member_topics),
            None => return Ok(Some(None)),
        }
    }
    Ok(Some(Some(topics)))
}
