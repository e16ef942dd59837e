//! The fetcher's sans-IO core: fetch positions per partition, which Fetch
//! requests to send next, and what a Fetch response means.
//!
//! The async layer in [`crate::consumer`] asks [`Fetcher::prepare_fetches`]
//! for the requests to send, sends them, and hands each answer to
//! [`Fetcher::handle_response`]. Records are decoded there and buffered;
//! [`Fetcher::drain`] hands out at most `max.poll.records` of them and moves
//! the positions.
//!
//! Planning follows Kafka's clients. At most one request is in flight per
//! leader (the limit that protects the broker), and a partition is fetched
//! again only once its buffered records have all been handed out (the limit
//! on the consumer's memory). The next poll's records are prefetched: as
//! soon as a partition's buffer empties, the next request to its leader
//! asks for it.
//!
//! One more rule keeps the two limits from stalling the consumer. A
//! partition whose position has reached the end a fetch reads to (the high
//! watermark, or the last stable offset with read_committed, as the last
//! response said) has nothing to return, so a request holding only such
//! partitions waits on the broker for `fetch.max.wait.ms`. While it waits,
//! it is the leader's one request in flight, and every partition of that
//! leader whose buffer empties meanwhile waits behind it: with uneven
//! partitions, the small ones reach their end first and every later request
//! would be such a long poll. So a leader gets no request while none of its
//! fetchable partitions has records to return and another of its partitions
//! still has records buffered (paused ones aside): that partition becomes
//! fetchable when the application has taken its records, and the request
//! then holds it too and is answered at once. A request that long-polls is
//! sent only when nothing of that leader is left to hand out, which is what
//! the long poll is for. A partition never fetched yet counts as having
//! records.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use strom_protocol::kafka::messages::fetch_response::{AbortedTransaction, PartitionData};
use strom_protocol::kafka::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::records::{RecordBatch, RecordBatches, RecordError};
use strom_protocol::ErrorCode;

use crate::config::{ConsumerConfig, IsolationLevel, OffsetReset};
use crate::error::ConsumerError;
use crate::fetch_session::{FetchSession, PartitionFetch};
use crate::record::{ConsumerRecord, RecordHeader, TopicPartition};

/// Where a partition's next fetch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Waiting for the group's committed offset.
    AwaitingCommitted,
    /// Waiting for a ListOffsets lookup with this strategy.
    AwaitingReset(OffsetReset),
    /// Fetching from this offset.
    At(i64),
}

/// The fetch settings, taken from [`ConsumerConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSettings {
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.wait.ms`.
    pub max_wait: Duration,
    /// `fetch.max.bytes`.
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub max_partition_bytes: i32,
    /// `isolation.level`.
    pub isolation_level: IsolationLevel,
    /// `check.crcs`.
    pub check_crcs: bool,
    /// `auto.offset.reset`.
    pub offset_reset: OffsetReset,
    /// `client.rack`.
    pub rack_id: String,
}

impl FetchSettings {
    /// The settings of `config`.
    pub fn from_config(config: &ConsumerConfig) -> FetchSettings {
        FetchSettings {
            min_bytes: config.fetch_min_bytes,
            max_wait: config.fetch_max_wait,
            max_bytes: config.fetch_max_bytes,
            max_partition_bytes: config.max_partition_fetch_bytes,
            isolation_level: config.isolation_level,
            check_crcs: config.check_crcs,
            offset_reset: config.auto_offset_reset,
            rack_id: config.client_rack.clone().unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone)]
struct PartitionState {
    position: Position,
    paused: bool,
    in_flight: bool,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

impl PartitionState {
    fn new(position: Position) -> PartitionState {
        PartitionState {
            position,
            paused: false,
            in_flight: false,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
        }
    }

    /// Whether a fetch from `offset` returns records now, as far as the
    /// last response tells: `offset` is below the end a fetch reads to.
    /// Unknown ends (never fetched) count as yes.
    fn may_have_records(&self, offset: i64, isolation_level: IsolationLevel) -> bool {
        let end = match isolation_level {
            IsolationLevel::ReadCommitted if self.last_stable_offset >= 0 => {
                self.last_stable_offset
            }
            _ => self.high_watermark,
        };
        end < 0 || offset < end
    }
}

/// The partitions of one leader at one planning step.
#[derive(Debug, Default)]
struct LeaderPartitions {
    /// Partitions to fetch: positioned, neither paused, in flight nor
    /// buffered.
    wanted: BTreeMap<TopicPartition, PartitionFetch>,
    /// A request to the leader is in flight.
    busy: bool,
    /// A partition that is not paused has records buffered.
    buffered: bool,
    /// A partition in `wanted` has records to return now.
    has_records: bool,
}

impl LeaderPartitions {
    /// Whether to send the leader a request now: none in flight, something
    /// to ask for, and not a long poll while buffered records of the leader
    /// wait to be handed out (the module doc says why).
    fn should_fetch(&self) -> bool {
        !self.busy && !self.wanted.is_empty() && (self.has_records || !self.buffered)
    }
}

/// Decoded records of one partition from one response.
#[derive(Debug)]
struct CompletedFetch {
    partition: TopicPartition,
    records: VecDeque<ConsumerRecord>,
    next_fetch_offset: i64,
}

/// A Fetch request to send to one broker.
#[derive(Debug, Clone)]
pub struct FetchPlan {
    /// The leader to send it to.
    pub broker_id: i32,
    /// The request (Fetch v12 or lower: topics by name).
    pub request: FetchRequest,
    /// The fetch offset of every partition the request covers (the session
    /// may leave unchanged partitions out of the request itself).
    pub offsets: BTreeMap<TopicPartition, i64>,
}

/// What a response asks the async layer to do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FetchOutcome {
    /// Leadership moved or a topic is unknown: refresh metadata.
    pub refresh_metadata: bool,
    /// Partitions that need a ListOffsets reset.
    pub reset_needed: Vec<TopicPartition>,
}

/// The fetcher's state.
#[derive(Debug)]
pub struct Fetcher {
    settings: FetchSettings,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    sessions: HashMap<i32, FetchSession>,
    completed: VecDeque<CompletedFetch>,
    errors: VecDeque<ConsumerError>,
}

impl Fetcher {
    /// A fetcher with no partitions.
    pub fn new(settings: FetchSettings) -> Fetcher {
        Fetcher {
            settings,
            partitions: BTreeMap::new(),
            sessions: HashMap::new(),
            completed: VecDeque::new(),
            errors: VecDeque::new(),
        }
    }

    /// Replaces the assignment. Kept partitions keep their position; new ones
    /// start at `initial`.
    pub fn assign(
        &mut self,
        partitions: impl IntoIterator<Item = TopicPartition>,
        initial: Position,
    ) {
        let wanted: HashSet<TopicPartition> = partitions.into_iter().collect();
        self.partitions.retain(|tp, _| wanted.contains(tp));
        self.completed
            .retain(|fetch| wanted.contains(&fetch.partition));
        for tp in wanted {
            self.partitions
                .entry(tp)
                .or_insert_with(|| PartitionState::new(initial));
        }
    }

    /// Adds partitions (cooperative rebalancing), starting at `initial`.
    pub fn add(&mut self, partitions: impl IntoIterator<Item = TopicPartition>, initial: Position) {
        for tp in partitions {
            self.partitions
                .entry(tp)
                .or_insert_with(|| PartitionState::new(initial));
        }
    }

    /// Removes partitions (cooperative rebalancing).
    pub fn remove(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.partitions.remove(tp);
        }
        self.completed
            .retain(|fetch| !partitions.contains(&fetch.partition));
    }

    /// The assigned partitions.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// Whether `partition` is assigned.
    pub fn is_assigned(&self, partition: &TopicPartition) -> bool {
        self.partitions.contains_key(partition)
    }

    /// Sets the position of `partition`, dropping its buffered records.
    pub fn seek(
        &mut self,
        partition: &TopicPartition,
        position: Position,
    ) -> Result<(), ConsumerError> {
        let state =
            self.partitions
                .get_mut(partition)
                .ok_or_else(|| ConsumerError::NotAssigned {
                    partition: partition.clone(),
                })?;
        state.position = position;
        self.completed.retain(|fetch| fetch.partition != *partition);
        Ok(())
    }

    /// The position of `partition`.
    pub fn position(&self, partition: &TopicPartition) -> Option<Position> {
        self.partitions.get(partition).map(|state| state.position)
    }

    /// Consumed positions (the offsets to commit) of every partition with one.
    pub fn consumed_offsets(&self) -> BTreeMap<TopicPartition, i64> {
        self.partitions
            .iter()
            .filter_map(|(tp, state)| match state.position {
                Position::At(offset) => Some((tp.clone(), offset)),
                _ => None,
            })
            .collect()
    }

    /// The last high watermark seen for `partition`.
    pub fn high_watermark(&self, partition: &TopicPartition) -> Option<i64> {
        self.partitions
            .get(partition)
            .map(|state| state.high_watermark)
            .filter(|hw| *hw >= 0)
    }

    /// Partitions whose position waits for `wanted` (committed or reset).
    pub fn awaiting(&self, committed: bool) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, state)| match state.position {
                Position::AwaitingCommitted => committed,
                Position::AwaitingReset(_) => !committed,
                Position::At(_) => false,
            })
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Pauses or resumes fetching `partition`.
    pub fn set_paused(
        &mut self,
        partition: &TopicPartition,
        paused: bool,
    ) -> Result<(), ConsumerError> {
        let state =
            self.partitions
                .get_mut(partition)
                .ok_or_else(|| ConsumerError::NotAssigned {
                    partition: partition.clone(),
                })?;
        state.paused = paused;
        Ok(())
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, state)| state.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Whether records are buffered for a partition that is not paused.
    pub fn has_buffered(&self) -> bool {
        self.completed.iter().any(|fetch| {
            !fetch.records.is_empty()
                && self
                    .partitions
                    .get(&fetch.partition)
                    .is_some_and(|state| !state.paused)
        })
    }

    /// Whether any fetch is in flight.
    pub fn in_flight(&self) -> bool {
        self.partitions.values().any(|state| state.in_flight)
    }

    /// An error to report from the next poll.
    pub fn take_error(&mut self) -> Option<ConsumerError> {
        self.errors.pop_front()
    }

    /// The fetch session id held with each broker (0: sessionless, full
    /// fetches every time).
    pub fn session_ids(&self) -> BTreeMap<i32, i32> {
        self.sessions
            .iter()
            .map(|(broker_id, session)| (*broker_id, session.session_id()))
            .collect()
    }

    /// The requests to send now, at most one per leader and none that
    /// would only long-poll while records of its leader are buffered (see
    /// the module doc). `leader_of` gives a partition's leader and leader
    /// epoch; partitions without one are returned separately so the caller
    /// refreshes metadata.
    pub fn prepare_fetches(
        &mut self,
        leader_of: impl Fn(&TopicPartition) -> Option<(i32, i32)>,
    ) -> (Vec<FetchPlan>, Vec<TopicPartition>) {
        let buffered: HashSet<&TopicPartition> = self
            .completed
            .iter()
            .map(|fetch| &fetch.partition)
            .collect();
        let mut leaders: BTreeMap<i32, LeaderPartitions> = BTreeMap::new();
        let mut leaderless = Vec::new();
        for (tp, state) in &self.partitions {
            let Position::At(offset) = state.position else {
                continue;
            };
            let Some((leader, epoch)) = leader_of(tp) else {
                leaderless.push(tp.clone());
                continue;
            };
            let partitions = leaders.entry(leader).or_default();
            if state.in_flight {
                partitions.busy = true;
                continue;
            }
            if state.paused {
                continue;
            }
            if buffered.contains(tp) {
                partitions.buffered = true;
                continue;
            }
            partitions.has_records |= state.may_have_records(offset, self.settings.isolation_level);
            partitions.wanted.insert(
                tp.clone(),
                PartitionFetch {
                    fetch_offset: offset,
                    max_bytes: self.settings.max_partition_bytes,
                    current_leader_epoch: epoch,
                },
            );
        }
        let plans = leaders
            .into_iter()
            .filter(|(_, partitions)| partitions.should_fetch())
            .map(|(leader, partitions)| self.plan(leader, &partitions.wanted))
            .collect();
        (plans, leaderless)
    }

    fn plan(
        &mut self,
        broker_id: i32,
        wanted: &BTreeMap<TopicPartition, PartitionFetch>,
    ) -> FetchPlan {
        let session = self.sessions.entry(broker_id).or_default().build(wanted);
        let mut topics: BTreeMap<Arc<str>, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, fetch) in &session.partitions {
            topics.entry(Arc::clone(&tp.topic)).or_default().push(
                FetchPartition::default()
                    .with_partition(tp.partition)
                    .with_current_leader_epoch(fetch.current_leader_epoch)
                    .with_fetch_offset(fetch.fetch_offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(fetch.max_bytes),
            );
        }
        let mut forgotten: BTreeMap<Arc<str>, Vec<i32>> = BTreeMap::new();
        for tp in &session.forgotten {
            forgotten
                .entry(Arc::clone(&tp.topic))
                .or_default()
                .push(tp.partition);
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(duration_ms_i32(self.settings.max_wait))
            .with_min_bytes(self.settings.min_bytes)
            .with_max_bytes(self.settings.max_bytes)
            .with_isolation_level(self.settings.isolation_level.code())
            .with_session_id(session.session_id)
            .with_session_epoch(session.session_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        FetchTopic::default()
                            .with_topic(topic_name(&topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(topic, partitions)| {
                        ForgottenTopic::default()
                            .with_topic(topic_name(&topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_rack_id(StrBytes::from_string(self.settings.rack_id.clone()));
        let offsets: BTreeMap<TopicPartition, i64> = wanted
            .iter()
            .map(|(tp, fetch)| (tp.clone(), fetch.fetch_offset))
            .collect();
        for tp in offsets.keys() {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.in_flight = true;
            }
        }
        FetchPlan {
            broker_id,
            request,
            offsets,
        }
    }

    /// The request of `plan` failed (connection lost, timeout): the
    /// partitions become fetchable again and the session restarts.
    pub fn handle_failure(&mut self, plan: &FetchPlan) {
        self.clear_in_flight(plan);
        if let Some(session) = self.sessions.get_mut(&plan.broker_id) {
            session.reset();
        }
    }

    fn clear_in_flight(&mut self, plan: &FetchPlan) {
        for tp in plan.offsets.keys() {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.in_flight = false;
            }
        }
    }

    /// Applies the response to `plan`.
    pub fn handle_response(&mut self, plan: &FetchPlan, response: FetchResponse) -> FetchOutcome {
        self.clear_in_flight(plan);
        let top_error = ErrorCode::from_code(response.error_code);
        self.sessions
            .entry(plan.broker_id)
            .or_default()
            .handle_response(top_error, response.session_id);
        let mut outcome = FetchOutcome::default();
        if top_error != ErrorCode::None {
            outcome.refresh_metadata = !matches!(
                top_error,
                ErrorCode::FetchSessionIdNotFound
                    | ErrorCode::InvalidFetchSessionEpoch
                    | ErrorCode::FetchSessionTopicIdError
            );
            return outcome;
        }
        for topic in response.responses {
            let name: Arc<str> = Arc::from(topic.topic.0.as_str());
            for partition in topic.partitions {
                let tp = TopicPartition {
                    topic: Arc::clone(&name),
                    partition: partition.partition_index,
                };
                self.handle_partition(plan, tp, partition, &mut outcome);
            }
        }
        outcome
    }

    fn handle_partition(
        &mut self,
        plan: &FetchPlan,
        tp: TopicPartition,
        data: PartitionData,
        outcome: &mut FetchOutcome,
    ) {
        let Some(&fetch_offset) = plan.offsets.get(&tp) else {
            return;
        };
        let Some(state) = self.partitions.get_mut(&tp) else {
            return;
        };
        if state.position != Position::At(fetch_offset) {
            return; // seeked or reassigned while the fetch was in flight
        }
        match ErrorCode::from_code(data.error_code) {
            ErrorCode::None => {}
            ErrorCode::OffsetOutOfRange => {
                match self.settings.offset_reset {
                    OffsetReset::None => self.errors.push_back(ConsumerError::OffsetOutOfRange {
                        partition: tp,
                        offset: fetch_offset,
                    }),
                    strategy => {
                        state.position = Position::AwaitingReset(strategy);
                        outcome.reset_needed.push(tp);
                    }
                }
                return;
            }
            ErrorCode::NotLeaderOrFollower
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::FencedLeaderEpoch
            | ErrorCode::UnknownLeaderEpoch
            | ErrorCode::KafkaStorageError
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::UnknownTopicId
            | ErrorCode::InconsistentTopicId => {
                outcome.refresh_metadata = true;
                return;
            }
            code => {
                self.errors.push_back(ConsumerError::broker(code));
                return;
            }
        }
        state.high_watermark = data.high_watermark;
        state.last_stable_offset = data.last_stable_offset;
        state.log_start_offset = data.log_start_offset;
        let bytes = data.records.unwrap_or_default();
        if bytes.is_empty() {
            return;
        }
        let aborted = data.aborted_transactions.unwrap_or_default();
        match decode_partition(&tp, fetch_offset, bytes, &aborted, &self.settings) {
            // Only control or aborted batches: nothing to hand out, and a
            // buffered entry with no records would never be drained.
            Ok(completed) if completed.records.is_empty() => {
                state.position = Position::At(completed.next_fetch_offset);
            }
            Ok(completed) => self.completed.push_back(completed),
            Err(error) => self.errors.push_back(error),
        }
    }

    /// Up to `max_records` buffered records of partitions that are not
    /// paused, in arrival order; positions move past them.
    pub fn drain(&mut self, max_records: usize) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        let mut index = 0;
        while index < self.completed.len() && out.len() < max_records {
            let Some(fetch) = self.completed.get_mut(index) else {
                break;
            };
            let Some(state) = self.partitions.get_mut(&fetch.partition) else {
                self.completed.remove(index);
                continue;
            };
            if state.paused {
                index += 1;
                continue;
            }
            let wanted = max_records - out.len();
            let take = wanted.min(fetch.records.len());
            out.extend(fetch.records.drain(..take));
            if fetch.records.is_empty() {
                state.position = Position::At(fetch.next_fetch_offset);
                self.completed.remove(index);
            } else if let Some(last) = out.last() {
                state.position = Position::At(last.offset + 1);
            }
        }
        out
    }
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn duration_ms_i32(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

fn corrupt(tp: &TopicPartition, offset: i64) -> impl Fn(RecordError) -> ConsumerError + '_ {
    move |source| ConsumerError::CorruptRecord {
        partition: tp.clone(),
        offset,
        source,
    }
}

/// Aborted-transaction filtering for read_committed (Java's approach): a
/// producer's transactional batches are skipped from the first offset of an
/// aborted transaction until that producer's next control batch.
struct AbortFilter {
    pending: VecDeque<(i64, i64)>,
    aborting: HashSet<i64>,
}

impl AbortFilter {
    fn new(aborted: &[AbortedTransaction]) -> AbortFilter {
        let mut pending: Vec<(i64, i64)> = aborted
            .iter()
            .map(|txn| (txn.first_offset, txn.producer_id.0))
            .collect();
        pending.sort_unstable();
        AbortFilter {
            pending: pending.into(),
            aborting: HashSet::new(),
        }
    }

    /// Whether `batch` holds aborted records.
    fn skips(&mut self, batch: &RecordBatch) -> bool {
        while let Some(&(first_offset, producer_id)) = self.pending.front() {
            if first_offset > batch.last_offset() {
                break;
            }
            self.aborting.insert(producer_id);
            self.pending.pop_front();
        }
        let attributes = batch.attributes();
        if attributes.is_control() {
            self.aborting.remove(&batch.producer_id());
            return false;
        }
        attributes.is_transactional() && self.aborting.contains(&batch.producer_id())
    }
}

fn decode_partition(
    tp: &TopicPartition,
    fetch_offset: i64,
    bytes: Bytes,
    aborted: &[AbortedTransaction],
    settings: &FetchSettings,
) -> Result<CompletedFetch, ConsumerError> {
    let mut batches = RecordBatches::new(bytes);
    let mut records = VecDeque::new();
    let mut next_fetch_offset = fetch_offset;
    let mut filter = (settings.isolation_level == IsolationLevel::ReadCommitted)
        .then(|| AbortFilter::new(aborted));
    for batch in &mut batches {
        let batch = batch.map_err(corrupt(tp, fetch_offset))?;
        if settings.check_crcs {
            batch.validate_crc().map_err(corrupt(tp, fetch_offset))?;
        }
        if batch.next_offset() <= fetch_offset {
            continue;
        }
        next_fetch_offset = next_fetch_offset.max(batch.next_offset());
        let skipped = filter.as_mut().is_some_and(|filter| filter.skips(&batch));
        if skipped || batch.attributes().is_control() {
            continue;
        }
        append_records(tp, fetch_offset, &batch, &mut records)?;
    }
    if next_fetch_offset == fetch_offset && batches.truncated_tail() > 0 {
        return Err(ConsumerError::RecordTooLarge {
            partition: tp.clone(),
            offset: fetch_offset,
            max_partition_fetch_bytes: settings.max_partition_bytes,
        });
    }
    Ok(CompletedFetch {
        partition: tp.clone(),
        records,
        next_fetch_offset,
    })
}

fn append_records(
    tp: &TopicPartition,
    fetch_offset: i64,
    batch: &RecordBatch,
    out: &mut VecDeque<ConsumerRecord>,
) -> Result<(), ConsumerError> {
    let timestamp_type = batch.attributes().timestamp_type();
    let epoch = batch.partition_leader_epoch();
    let leader_epoch = (epoch >= 0).then_some(epoch);
    for record in batch.records().map_err(corrupt(tp, fetch_offset))? {
        let record = record.map_err(corrupt(tp, fetch_offset))?;
        let offset = record.offset(batch.base_offset());
        if offset < fetch_offset {
            continue;
        }
        out.push_back(ConsumerRecord {
            topic: Arc::clone(&tp.topic),
            partition: tp.partition,
            offset,
            timestamp_ms: batch.record_timestamp(&record),
            timestamp_type,
            leader_epoch,
            key: record.key_bytes(),
            value: record.value_bytes(),
            // Header slices share the record's buffer: no copy.
            headers: record
                .headers()
                .iter()
                .map(|header| RecordHeader {
                    key: record.as_bytes().slice_ref(header.key),
                    value: header.value.map(|value| record.as_bytes().slice_ref(value)),
                })
                .collect(),
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "fetcher_tests.rs"]
mod tests;
