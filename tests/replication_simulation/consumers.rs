//! A consumer and the group coordinator in the simulation.
//!
//! Partition [`OFFSETS_PARTITION`] of the simulated topic stands for the
//! `__consumer_offsets` partition of one group: whichever broker leads it
//! hosts the coordinator core (`strom_coordinator::CoordinatorCore`, the
//! type the broker's group service runs), loads the group from its own log
//! when it starts leading at an epoch, and unloads it when it stops.
//! Commits are appended to that partition as the broker appends them and
//! answered once the HW passes them at the epoch they were written at.
//!
//! One consumer reads the data partitions from their leaders (carrying the
//! leader epoch of its newest metadata, as KIP-320 clients do), commits its
//! positions, and from time to time restarts from the committed offsets.
//! Checked on every answer:
//! - a record read at an offset never changes, offsets are read without
//!   gaps, and sequences only grow along a partition;
//! - a leader at the consumer's newest epoch never ends below what the
//!   consumer has read (records below a HW do not vanish);
//! - an OffsetFetch answer is never below a commit acknowledged before the
//!   fetch was sent nor below an earlier answer (committed offsets never go
//!   backwards), and is an offset the consumer committed; the same holds
//!   for an admin client that asks now and then whatever the consumer is
//!   doing (also while a commit is pending);
//!
//! and at the end: the consumer read every acknowledged record, and the
//! final coordinator returns the consumer's final positions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use strom_broker::groups::{collect_batch, offsets_batch, transactional_offsets_batch};
use strom_clock::SeededRandom;
use strom_coordinator::{
    CoordinatorConfig, CoordinatorCore, LogError, LogOperation, LogRecord, OffsetCommitPartition,
    OffsetCommitRequest, OffsetsLog, StoredRecord,
};
use strom_protocol::records::RecordBatches;
use strom_replication::{AckStatus, Partition, RoleView};

use super::{read_batches, Message, Node, Simulation, DATA_PARTITIONS, PRODUCE_TIMEOUT_MS, TOPIC};

/// The partition of the simulated topic that holds the group's offsets.
pub(crate) const OFFSETS_PARTITION: i32 = DATA_PARTITIONS;
/// The group the consumer commits in (a standalone consumer: generation -1).
const GROUP: &str = "sim-group";
/// How long the consumer waits for an answer before it gives up on it.
const CONSUMER_TIMEOUT_MS: i64 = PRODUCE_TIMEOUT_MS * 2;
/// Batches (one record each) a consumer fetch returns at most.
const FETCH_MAX_RECORDS: usize = 5;

/// Messages between the consumer and the brokers.
#[derive(Debug, Clone)]
pub(crate) enum GroupMessage {
    Fetch {
        id: u64,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
    },
    FetchReply {
        id: u64,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
        /// `(offset, sequence)` of the records below the HW, and the
        /// leader's log end offset; `None` when refused.
        answer: Option<(Vec<(i64, i32)>, i64)>,
    },
    Commit {
        id: u64,
        offsets: Vec<(i32, i64)>,
    },
    CommitReply {
        id: u64,
        committed: bool,
    },
    OffsetFetch {
        id: u64,
    },
    OffsetFetchReply {
        id: u64,
        offsets: Option<Vec<(i32, i64)>>,
    },
}

/// A commit waiting for the HW on the coordinator's broker.
struct CommitWait {
    id: u64,
    leader_epoch: i32,
    required_offset: i64,
    deadline_ms: i64,
}

/// The group coordinator a broker hosts while it leads the offsets
/// partition.
pub(crate) struct GroupHost {
    core: CoordinatorCore,
    /// The leader epoch the group was loaded at.
    loaded_at: Option<i32>,
    waits: Vec<CommitWait>,
}

impl GroupHost {
    /// A coordinator drawing member ids from a random source seeded with
    /// `seed`.
    pub(crate) fn new(seed: u64) -> GroupHost {
        GroupHost {
            core: CoordinatorCore::new(
                CoordinatorConfig {
                    offsets_topic_partitions: 1,
                    ..CoordinatorConfig::default()
                },
                Arc::new(SeededRandom::new(seed)),
            ),
            loaded_at: None,
            waits: Vec::new(),
        }
    }
}

/// What the consumer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Asks the coordinator for the committed offsets and starts there.
    Restart,
    Fetch(i32),
    Commit,
}

/// One consumer of the data partitions.
pub(crate) struct Consumer {
    phase: Phase,
    positions: BTreeMap<i32, i64>,
    /// Every record read: `(partition, offset)` to sequence.
    pub(crate) read: BTreeMap<(i32, i64), i32>,
    /// The newest leader epoch seen per partition in metadata.
    newest_epoch: BTreeMap<i32, i32>,
    /// Every offset sent in a commit, per partition.
    sent: BTreeSet<(i32, i64)>,
    /// The highest acknowledged commit per partition.
    pub(crate) acknowledged: BTreeMap<i32, i64>,
    /// The highest offset an OffsetFetch answered per partition.
    fetched: BTreeMap<i32, i64>,
    /// An admin client that asks OffsetFetch now and then, whatever the
    /// consumer is doing (so also while a commit is pending): its request
    /// in flight (id, when sent, the acknowledged commits then), the
    /// highest offsets it was answered, and how many answers it checked.
    observer_in_flight: Option<(u64, i64, BTreeMap<i32, i64>)>,
    observer_fetched: BTreeMap<i32, i64>,
    pub(crate) observer_answers: u32,
    /// The request in flight: its id, when it was sent, and the
    /// acknowledged commits when it was sent.
    in_flight: Option<(u64, i64, BTreeMap<i32, i64>)>,
    next_id: u64,
    next_attempt_ms: i64,
    pub(crate) restarts: u32,
    /// Commits acknowledged, and loads of the group by a new leader.
    pub(crate) commits: u32,
    pub(crate) loads: u32,
}

impl Consumer {
    pub(crate) fn new() -> Consumer {
        Consumer {
            phase: Phase::Restart,
            positions: (0..DATA_PARTITIONS).map(|p| (p, 0)).collect(),
            read: BTreeMap::new(),
            newest_epoch: BTreeMap::new(),
            sent: BTreeSet::new(),
            acknowledged: BTreeMap::new(),
            fetched: BTreeMap::new(),
            observer_in_flight: None,
            observer_fetched: BTreeMap::new(),
            observer_answers: 0,
            in_flight: None,
            next_id: 0,
            next_attempt_ms: 0,
            restarts: 0,
            commits: 0,
            loads: 0,
        }
    }
}

/// The offsets partition as the coordinator core sees it: appends as the
/// leader, reads up to the log end (a new leader's log is the truth its
/// followers truncate to).
struct OffsetsPartitionLog<'a> {
    partition: &'a Partition,
    now_ms: i64,
    /// The leader epoch of the last append.
    appended_at: Option<i32>,
}

impl OffsetsLog for OffsetsPartitionLog<'_> {
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError> {
        let batch = offsets_batch(self.now_ms, records)?;
        let appended = self
            .partition
            .append(batch, true, self.now_ms)
            .map_err(|_| LogError::NotLeader { partition })?;
        self.appended_at = Some(appended.leader_epoch);
        Ok(appended.info.last_offset)
    }

    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[LogRecord],
    ) -> Result<i64, LogError> {
        // The simulation's workload commits no transactional offsets: each
        // producer's first batch starts at sequence 0.
        let batch =
            transactional_offsets_batch(self.now_ms, producer_id, producer_epoch, 0, records)?;
        let appended = self
            .partition
            .append(batch, true, self.now_ms)
            .map_err(|_| LogError::NotLeader { partition })?;
        self.appended_at = Some(appended.leader_epoch);
        Ok(appended.info.last_offset)
    }

    fn committed_offset(&self, _partition: i32) -> Result<i64, LogError> {
        Ok(self.partition.high_watermark.current())
    }

    fn read(
        &self,
        _partition: i32,
        from_offset: i64,
        max_records: usize,
    ) -> Result<Vec<StoredRecord>, LogError> {
        let bytes = self
            .partition
            .with_log(|log| {
                let end = log.log_end_offset();
                log.read(from_offset, 1 << 20, end, true)
                    .ok()
                    .and_then(|read| read.records)
                    .and_then(|slice| slice.to_bytes().ok())
            })
            .ok()
            .flatten();
        let mut records = Vec::new();
        let Some(bytes) = bytes else {
            return Ok(records);
        };
        for batch in RecordBatches::new(bytes) {
            let batch = batch.map_err(|source| LogError::backend(LogOperation::Decode, source))?;
            collect_batch(&batch, from_offset, max_records, &mut records)?;
        }
        Ok(records)
    }
}

fn commit_request(offsets: &[(i32, i64)]) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.to_owned(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: offsets
            .iter()
            .map(|(partition, offset)| OffsetCommitPartition {
                topic: TOPIC.to_owned(),
                partition: *partition,
                offset: *offset,
                leader_epoch: None,
                metadata: None,
                commit_timestamp_ms: None,
            })
            .collect(),
    }
}

// The brokers' side.
impl Simulation {
    /// Loads the group when the broker starts leading the offsets
    /// partition at an epoch, unloads it when it stops (the broker's group
    /// service on an image).
    pub(crate) fn group_apply_image(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let role = broker
            .partitions
            .get(&OFFSETS_PARTITION)
            .map(|partition| partition.role_view());
        let host = &mut broker.group;
        let note = match role {
            Some(RoleView::Leader { leader_epoch }) if host.loaded_at != Some(leader_epoch) => {
                if host.loaded_at.is_some() {
                    host.core.unload(0);
                }
                host.core.begin_loading(0);
                let log = OffsetsPartitionLog {
                    partition: &broker.partitions[&OFFSETS_PARTITION],
                    now_ms,
                    appended_at: None,
                };
                match host.core.load_partition(&log, 0, now_ms) {
                    Ok(replayed) => {
                        host.loaded_at = Some(leader_epoch);
                        self.consumer.loads += 1;
                        format!("broker {id}: coordinator loaded {replayed} records at epoch {leader_epoch}")
                    }
                    Err(error) => format!("broker {id}: coordinator load failed: {error}"),
                }
            }
            Some(RoleView::Leader { .. }) => return,
            _ if host.loaded_at.is_some() => {
                host.core.unload(0);
                host.loaded_at = None;
                format!("broker {id}: coordinator unloaded")
            }
            _ => return,
        };
        self.note(note);
    }

    pub(crate) fn group_broker_receives(&mut self, id: i32, from: Node, message: GroupMessage) {
        let reply = match message {
            GroupMessage::Fetch {
                id: request,
                partition,
                leader_epoch,
                offset,
            } => GroupMessage::FetchReply {
                id: request,
                partition,
                leader_epoch,
                offset,
                answer: self.serve_consumer_fetch(id, partition, leader_epoch, offset),
            },
            GroupMessage::Commit {
                id: request,
                offsets,
            } => match self.serve_commit(id, request, &offsets) {
                Some(reply) => reply,
                None => return,
            },
            GroupMessage::OffsetFetch { id: request } => {
                let now_ms = self.now_ms;
                let broker = self.brokers.get_mut(&id).expect("broker");
                // As the broker's coordinator does: what the log has
                // committed first.
                if broker.group.loaded_at.is_some() {
                    if let Some(partition) = broker.partitions.get(&OFFSETS_PARTITION) {
                        broker.group.core.advance_committed(
                            0,
                            partition.high_watermark.current(),
                            now_ms,
                        );
                    }
                }
                let core = &broker.group.core;
                let offsets = core
                    .fetch_offsets(
                        GROUP,
                        Some(&[(TOPIC.to_owned(), (0..DATA_PARTITIONS).collect())]),
                        false,
                    )
                    .ok()
                    .map(|offsets| {
                        offsets
                            .iter()
                            .map(|offset| (offset.partition, offset.offset))
                            .collect()
                    });
                GroupMessage::OffsetFetchReply {
                    id: request,
                    offsets,
                }
            }
            _ => return,
        };
        self.send(Node::Broker(id), from, Message::Group(reply));
    }

    /// A consumer's fetch: records below the HW, from the leader at the
    /// consumer's epoch only.
    fn serve_consumer_fetch(
        &self,
        id: i32,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
    ) -> Option<(Vec<(i64, i32)>, i64)> {
        let replica = self.brokers[&id].partitions.get(&partition)?;
        if replica.role_view() != (RoleView::Leader { leader_epoch }) {
            return None;
        }
        let high_watermark = replica.high_watermark.current();
        let log_end_offset = replica.with_log(|log| log.log_end_offset()).ok()?;
        let records = read_batches(replica, high_watermark)
            .into_iter()
            .filter(|(base_offset, _, _)| *base_offset >= offset)
            .take(FETCH_MAX_RECORDS)
            .map(|(base_offset, sequence, _)| (base_offset, sequence))
            .collect();
        Some((records, log_end_offset))
    }

    /// OffsetCommit: the core's records appended to the offsets partition
    /// and answered once committed; `None` when the answer waits.
    fn serve_commit(
        &mut self,
        id: i32,
        request: u64,
        offsets: &[(i32, i64)],
    ) -> Option<GroupMessage> {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let refused = GroupMessage::CommitReply {
            id: request,
            committed: false,
        };
        let host = &mut broker.group;
        if host
            .core
            .stage_offsets(&commit_request(offsets), now_ms)
            .is_err()
        {
            return Some(refused);
        }
        let records: Vec<LogRecord> = host
            .core
            .take_records()
            .into_iter()
            .map(|(_, record)| record)
            .collect();
        let Some(partition) = broker.partitions.get(&OFFSETS_PARTITION) else {
            host.core.discard_staged();
            return Some(refused);
        };
        let mut log = OffsetsPartitionLog {
            partition,
            now_ms,
            appended_at: None,
        };
        match (log.append(0, &records), log.appended_at) {
            (Ok(last_offset), Some(leader_epoch)) => {
                host.core.place_staged(0, last_offset);
                host.waits.push(CommitWait {
                    id: request,
                    leader_epoch,
                    required_offset: last_offset + 1,
                    deadline_ms: now_ms + PRODUCE_TIMEOUT_MS,
                });
                None
            }
            _ => {
                host.core.discard_staged();
                Some(refused)
            }
        }
    }

    /// Answers the commits the HW has passed (or that can no longer be).
    pub(crate) fn group_broker_tick(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let partition = broker.partitions.get(&OFFSETS_PARTITION);
        let mut answered = Vec::new();
        broker.group.waits.retain(|wait| {
            let status = partition
                .map(|partition| partition.ack_status(wait.required_offset, wait.leader_epoch));
            let committed = match status {
                Some(AckStatus::Committed) => true,
                Some(AckStatus::Waiting) if now_ms < wait.deadline_ms => return true,
                _ => false,
            };
            answered.push(GroupMessage::CommitReply {
                id: wait.id,
                committed,
            });
            false
        });
        for reply in answered {
            self.send(Node::Broker(id), Node::Client, Message::Group(reply));
        }
    }
}

// The consumer's side.
impl Simulation {
    /// The leader and its epoch for `partition` in a random broker's image
    /// (metadata can be stale; an epoch older than one already seen is
    /// ignored, as clients do).
    fn consumer_metadata(&mut self, partition: i32) -> Option<(i32, i32)> {
        let asked = super::BROKERS[self.rng.below(super::BROKERS.len() as u64) as usize];
        let state = self.brokers[&asked]
            .image
            .as_ref()?
            .topic_by_name(TOPIC)?
            .partition(partition)?
            .clone();
        let leader = state.leader?;
        let newest = self
            .consumer
            .newest_epoch
            .entry(partition)
            .or_insert(state.leader_epoch);
        if state.leader_epoch < *newest {
            return None;
        }
        *newest = state.leader_epoch;
        Some((leader, state.leader_epoch))
    }

    /// The admin client: one OffsetFetch at a time to the coordinator of
    /// the newest metadata, about every 100 ms.
    pub(crate) fn observer_tick(&mut self) {
        let now_ms = self.now_ms;
        if let Some((_, sent_ms, _)) = self.consumer.observer_in_flight {
            if now_ms - sent_ms < CONSUMER_TIMEOUT_MS {
                return;
            }
            self.consumer.observer_in_flight = None;
        }
        if !self.rng.chance(50) {
            return;
        }
        let Some((coordinator, _)) = self.consumer_metadata(OFFSETS_PARTITION) else {
            return;
        };
        let id = self.consumer.next_id;
        self.consumer.next_id += 1;
        self.consumer.observer_in_flight = Some((id, now_ms, self.consumer.acknowledged.clone()));
        self.send(
            Node::Client,
            Node::Broker(coordinator),
            Message::Group(GroupMessage::OffsetFetch { id }),
        );
    }

    /// An answer to the admin client: never below a commit acknowledged
    /// before it asked, never below an earlier answer, always an offset the
    /// consumer committed.
    fn observer_receives(&mut self, offsets: Option<Vec<(i32, i64)>>) {
        let Some((_, _, acknowledged)) = self.consumer.observer_in_flight.take() else {
            return;
        };
        let Some(offsets) = offsets else {
            return;
        };
        self.consumer.observer_answers += 1;
        for (partition, offset) in &offsets {
            if let Some(floor) = acknowledged.get(partition) {
                if offset < floor {
                    self.fail(&format!(
                        "p{partition}: OffsetFetch answered the admin client {offset} after {floor} was acknowledged"
                    ));
                }
            }
            if let Some(earlier) = self.consumer.observer_fetched.get(partition) {
                if offset < earlier {
                    self.fail(&format!(
                        "p{partition}: OffsetFetch answered the admin client {offset} after it had answered {earlier}"
                    ));
                }
            }
            if *offset >= 0 && !self.consumer.sent.contains(&(*partition, *offset)) {
                self.fail(&format!(
                    "p{partition}: the admin client was answered {offset}, never committed"
                ));
            }
            let highest = self
                .consumer
                .observer_fetched
                .entry(*partition)
                .or_insert(*offset);
            *highest = (*highest).max(*offset);
        }
    }

    pub(crate) fn consumer_tick(&mut self) {
        self.observer_tick();
        let now_ms = self.now_ms;
        if let Some((_, sent_ms, _)) = self.consumer.in_flight {
            if now_ms - sent_ms < CONSUMER_TIMEOUT_MS {
                return;
            }
            self.consumer.in_flight = None;
        }
        if now_ms < self.consumer.next_attempt_ms {
            return;
        }
        let id = self.consumer.next_id;
        let (target, message) = match self.consumer.phase {
            Phase::Restart => {
                let Some((coordinator, _)) = self.consumer_metadata(OFFSETS_PARTITION) else {
                    return;
                };
                (coordinator, GroupMessage::OffsetFetch { id })
            }
            Phase::Fetch(partition) => {
                let Some((leader, leader_epoch)) = self.consumer_metadata(partition) else {
                    return;
                };
                let offset = self.consumer.positions[&partition];
                let message = GroupMessage::Fetch {
                    id,
                    partition,
                    leader_epoch,
                    offset,
                };
                (leader, message)
            }
            Phase::Commit => {
                let Some((coordinator, _)) = self.consumer_metadata(OFFSETS_PARTITION) else {
                    return;
                };
                let offsets: Vec<(i32, i64)> = self
                    .consumer
                    .positions
                    .iter()
                    .map(|(p, o)| (*p, *o))
                    .collect();
                self.consumer.sent.extend(offsets.iter().copied());
                (coordinator, GroupMessage::Commit { id, offsets })
            }
        };
        self.consumer.next_id += 1;
        self.consumer.in_flight = Some((id, now_ms, self.consumer.acknowledged.clone()));
        self.send(Node::Client, Node::Broker(target), Message::Group(message));
    }

    /// The request in flight is over: `advance` says whether to go on to
    /// the next phase or try this one again after a short back-off.
    fn consumer_done(&mut self, advance: bool) {
        self.consumer.in_flight = None;
        if !advance {
            self.consumer.next_attempt_ms = self.now_ms + 50;
            return;
        }
        self.consumer.phase = match self.consumer.phase {
            Phase::Restart => Phase::Fetch(0),
            Phase::Fetch(partition) if partition + 1 < DATA_PARTITIONS => {
                Phase::Fetch(partition + 1)
            }
            Phase::Fetch(_) => Phase::Commit,
            Phase::Commit if self.rng.chance(30) => Phase::Restart,
            Phase::Commit => Phase::Fetch(0),
        };
    }

    pub(crate) fn consumer_receives(&mut self, message: GroupMessage) {
        let (GroupMessage::FetchReply { id, .. }
        | GroupMessage::CommitReply { id, .. }
        | GroupMessage::OffsetFetchReply { id, .. }) = &message
        else {
            return;
        };
        if let GroupMessage::OffsetFetchReply { id, offsets } = &message {
            if self
                .consumer
                .observer_in_flight
                .as_ref()
                .is_some_and(|(observer, _, _)| observer == id)
            {
                return self.observer_receives(offsets.clone());
            }
        }
        let acknowledged_when_sent = match &self.consumer.in_flight {
            Some((in_flight, _, acknowledged)) if in_flight == id => acknowledged.clone(),
            _ => return,
        };
        match message {
            GroupMessage::FetchReply {
                partition,
                leader_epoch,
                offset,
                answer,
                ..
            } => {
                let Some((records, log_end_offset)) = answer else {
                    return self.consumer_done(false);
                };
                self.check_read(partition, leader_epoch, offset, &records, log_end_offset);
                if let Some((last, _)) = records.last() {
                    self.consumer.positions.insert(partition, last + 1);
                }
                self.consumer_done(true);
            }
            GroupMessage::CommitReply { committed, .. } => {
                if committed {
                    self.consumer.commits += 1;
                    for (partition, offset) in self.consumer.positions.clone() {
                        let acknowledged = self
                            .consumer
                            .acknowledged
                            .entry(partition)
                            .or_insert(offset);
                        *acknowledged = (*acknowledged).max(offset);
                    }
                    self.note(format!("consumer: committed {:?}", self.consumer.positions));
                }
                self.consumer_done(committed);
            }
            GroupMessage::OffsetFetchReply { offsets, .. } => {
                let Some(offsets) = offsets else {
                    return self.consumer_done(false);
                };
                self.check_offsets(&offsets, &acknowledged_when_sent);
                for (partition, offset) in &offsets {
                    let highest = self.consumer.fetched.entry(*partition).or_insert(*offset);
                    *highest = (*highest).max(*offset);
                }
                for (partition, offset) in offsets {
                    self.consumer.positions.insert(partition, offset.max(0));
                }
                self.consumer.restarts += 1;
                self.note(format!(
                    "consumer: restarts at {:?}",
                    self.consumer.positions
                ));
                self.consumer_done(true);
            }
            _ => {}
        }
    }

    /// Records read never change, come without gaps in growing sequence,
    /// and a leader at the consumer's newest epoch holds all it read.
    fn check_read(
        &mut self,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
        records: &[(i64, i32)],
        log_end_offset: i64,
    ) {
        let read_end = self
            .consumer
            .read
            .range((partition, 0)..(partition, i64::MAX))
            .next_back()
            .map_or(0, |((_, offset), _)| offset + 1);
        if log_end_offset < read_end
            && self.consumer.newest_epoch.get(&partition) == Some(&leader_epoch)
        {
            self.fail(&format!(
                "p{partition}: the leader at epoch {leader_epoch} ends at {log_end_offset}, below the {read_end} records the consumer read"
            ));
        }
        let mut previous = self.consumer.read.get(&(partition, offset - 1)).copied();
        for (expected, (at, sequence)) in (offset..).zip(records) {
            if *at != expected {
                self.fail(&format!(
                    "p{partition}: the consumer read offset {at} after {}",
                    expected - 1
                ));
            }
            if let Some(earlier) = self.consumer.read.insert((partition, *at), *sequence) {
                if earlier != *sequence {
                    self.fail(&format!(
                        "p{partition}: offset {at} held seq {earlier} and later seq {sequence}"
                    ));
                }
            }
            if previous.is_some_and(|previous| previous >= *sequence) {
                self.fail(&format!(
                    "p{partition}: seq {sequence} at offset {at} follows seq {previous:?}"
                ));
            }
            previous = Some(*sequence);
        }
    }

    /// An OffsetFetch answer is at or above every commit acknowledged
    /// before it was asked and every earlier answer (the consumer only
    /// commits growing offsets, so a committed offset never goes back), and
    /// is an offset the consumer committed.
    fn check_offsets(&self, offsets: &[(i32, i64)], acknowledged: &BTreeMap<i32, i64>) {
        for (partition, offset) in offsets {
            if let Some(earlier) = self.consumer.fetched.get(partition) {
                if offset < earlier {
                    self.fail(&format!(
                        "p{partition}: OffsetFetch answered {offset} after it had answered {earlier}"
                    ));
                }
            }
            if let Some(floor) = acknowledged.get(partition) {
                if offset < floor {
                    self.fail(&format!(
                        "p{partition}: the committed offset went back to {offset} after {floor} was acknowledged"
                    ));
                }
            }
            if *offset >= 0 && !self.consumer.sent.contains(&(*partition, *offset)) {
                self.fail(&format!(
                    "p{partition}: committed offset {offset} was never sent"
                ));
            }
        }
    }

    /// Whether the consumer has read and committed everything up to each
    /// data partition's HW.
    pub(crate) fn consumer_finished(&self) -> bool {
        let Some(topic) = self.image.topic_by_name(TOPIC) else {
            return false;
        };
        (0..DATA_PARTITIONS).all(|partition| {
            let Some(leader) = topic.partition(partition).and_then(|state| state.leader) else {
                return false;
            };
            let Some(replica) = self.brokers[&leader].partitions.get(&partition) else {
                return false;
            };
            let high_watermark = replica.high_watermark.current();
            self.consumer.positions[&partition] == high_watermark
                && self.consumer.acknowledged.get(&partition) == Some(&high_watermark)
        })
    }

    /// At the end: every acknowledged record was read at its offset, and
    /// the coordinator returns the final positions.
    pub(crate) fn check_consumer_final(&mut self) {
        for (partition, producer) in &self.producers {
            for (sequence, offset) in &producer.acknowledged {
                if self.consumer.read.get(&(*partition, *offset)) != Some(sequence) {
                    self.fail(&format!(
                        "p{partition}: the consumer did not read acknowledged seq {sequence} at {offset}"
                    ));
                }
            }
        }
        let topic = self.image.topic_by_name(TOPIC).expect("the topic");
        let coordinator = topic
            .partition(OFFSETS_PARTITION)
            .and_then(|state| state.leader)
            .unwrap_or_else(|| self.fail("the offsets partition has no leader at the end"));
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&coordinator).expect("broker");
        if let Some(partition) = broker.partitions.get(&OFFSETS_PARTITION) {
            let high_watermark = partition.high_watermark.current();
            broker
                .group
                .core
                .advance_committed(0, high_watermark, now_ms);
        }
        let fetched = self.brokers[&coordinator]
            .group
            .core
            .fetch_offsets(
                GROUP,
                Some(&[(TOPIC.to_owned(), (0..DATA_PARTITIONS).collect())]),
                false,
            )
            .unwrap_or_else(|error| {
                self.fail(&format!("the final coordinator {coordinator}: {error}"))
            });
        for offset in fetched {
            if Some(&offset.offset) != self.consumer.positions.get(&offset.partition) {
                self.fail(&format!(
                    "p{}: the final committed offset is {}, the consumer is at {:?}",
                    offset.partition,
                    offset.offset,
                    self.consumer.positions.get(&offset.partition)
                ));
            }
        }
    }
}
