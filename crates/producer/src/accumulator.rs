//! The record accumulator: per-partition queues of batches under
//! construction, and the sans-IO decision of which are ready to send.
//!
//! Every method that depends on time takes `now`, so tests drive it with an
//! injected clock. It counts each partition's batches in flight (at most
//! `max_in_flight_per_partition`) and keeps records in order across
//! retries: a batch to retry goes back before every batch created after it,
//! and is drained only when nothing else of its partition is in flight.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strom_protocol::records::{BatchHeaderMut, Compression, RecordBatch, RecordBatchBuilder};
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::error::ProduceError;
use crate::record::{ProducerRecord, RecordMetadata};

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// Where a record's outcome is delivered.
pub type Completion = oneshot::Sender<Result<RecordMetadata, ProduceError>>;

/// The idempotent producer's id, epoch and a batch's first sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The batch's base sequence.
    pub base_sequence: i32,
}

/// One batch of records for one partition.
#[derive(Debug)]
pub struct ProducerBatch {
    /// Its partition.
    pub topic_partition: TopicPartition,
    builder: Option<RecordBatchBuilder>,
    bytes: Option<Bytes>,
    completions: Vec<(Completion, i64)>,
    /// When the first record was appended.
    pub created_at: Instant,
    /// How many times it was sent.
    pub attempts: u32,
    /// Not before this instant (retry backoff).
    pub retry_at: Option<Instant>,
    /// The producer stamp it was sealed with.
    pub stamp: Option<ProducerStamp>,
    /// Whether it belongs to a transaction (its attributes say so).
    transactional: bool,
    /// Where its records stand in the partition's order: the batch's
    /// creation number in the accumulator, then the index of its first
    /// record in the batch it was split from (0 if never split). A batch to
    /// retry goes back in front of every batch with a greater position.
    order: (u64, usize),
    size_bytes: usize,
    /// Buffer memory held by its records (one permit per byte), merged
    /// into one permit: released when the batch is dropped.
    _permits: Option<OwnedSemaphorePermit>,
}

impl ProducerBatch {
    /// A batch without records, created at `now` as the `order`th.
    fn empty(
        topic: &str,
        partition: i32,
        config: &AccumulatorConfig,
        order: u64,
        now: Instant,
    ) -> Self {
        let builder =
            RecordBatchBuilder::new(config.compression).with_transactional(config.transactional);
        ProducerBatch {
            topic_partition: TopicPartition {
                topic: topic.to_owned(),
                partition,
            },
            builder: Some(builder),
            bytes: None,
            completions: Vec::new(),
            created_at: now,
            attempts: 0,
            retry_at: None,
            stamp: None,
            transactional: config.transactional,
            order: (order, 0),
            size_bytes: 0,
            _permits: None,
        }
    }

    /// Records in the batch.
    pub fn record_count(&self) -> usize {
        self.completions.len()
    }

    /// Its (estimated, until sealed) size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.bytes.as_ref().map_or(self.size_bytes, Bytes::len)
    }

    /// Builds the wire bytes (first time) or restamps them when the producer
    /// stamp changed (after a producer id reset).
    pub fn seal(&mut self, stamp: Option<ProducerStamp>) -> Result<Bytes, ProduceError> {
        if let Some(builder) = self.builder.take() {
            let builder = match stamp {
                Some(stamp) => builder.with_producer(
                    stamp.producer_id,
                    stamp.producer_epoch,
                    stamp.base_sequence,
                ),
                None => builder,
            };
            self.bytes = Some(builder.build()?);
            self.stamp = stamp;
        } else if stamp != self.stamp {
            if let (Some(stamp), Some(bytes)) = (stamp, self.bytes.as_ref()) {
                let mut edited = BytesMut::from(&bytes[..]);
                BatchHeaderMut::new(&mut edited)?.set_producer(
                    stamp.producer_id,
                    stamp.producer_epoch,
                    stamp.base_sequence,
                );
                self.bytes = Some(edited.freeze());
            }
            self.stamp = stamp;
        }
        self.bytes.clone().ok_or(ProduceError::BatchMismatch)
    }

    /// Splits a batch the broker rejected as too large (MESSAGE_TOO_LARGE)
    /// into two batches of the first and second half of its records, as the
    /// Java client does. The halves keep the records' order, completions
    /// and timestamps, and, for an idempotent producer, take the original's
    /// sequences (`base_sequence` and `base_sequence + first half`), so they
    /// take its place in the partition's sequence.
    pub fn split(mut self, compression: Compression) -> SplitOutcome {
        if self.record_count() < 2 {
            return SplitOutcome::Single(self);
        }
        let first_count = self.record_count() / 2;
        let [first_builder, second_builder] = match self.split_records(compression, first_count) {
            Ok(halves) => halves,
            Err(error) => return SplitOutcome::Failed(self, error),
        };
        // The halves share the buffer memory in proportion to their records.
        let second_permits = self.second_half_permits(first_count);
        let second_completions = self.completions.split_off(first_count);
        let second_stamp = self.stamp.map(|stamp| ProducerStamp {
            base_sequence: stamp
                .base_sequence
                .wrapping_add(i32::try_from(first_count).unwrap_or(i32::MAX))
                & i32::MAX,
            ..stamp
        });
        let mut second = self.rebuilt(
            second_builder,
            second_completions,
            second_stamp,
            second_permits,
        );
        second.order.1 = self.order.1 + first_count;
        let first_completions = std::mem::take(&mut self.completions);
        let first_permits = self._permits.take();
        let first = self.rebuilt(first_builder, first_completions, self.stamp, first_permits);
        SplitOutcome::Halves(Box::new((first, second)))
    }

    /// Re-encodes the records into two builders, `first_count` in the first.
    fn split_records(
        &self,
        compression: Compression,
        first_count: usize,
    ) -> Result<[RecordBatchBuilder; 2], ProduceError> {
        let bytes = match (&self.bytes, &self.builder) {
            (Some(bytes), _) => bytes.clone(),
            (None, Some(builder)) => builder.clone().build()?,
            (None, None) => return Err(ProduceError::BatchMismatch),
        };
        let parsed = RecordBatch::parse(bytes)?;
        let mut halves = [
            RecordBatchBuilder::new(compression).with_transactional(self.transactional),
            RecordBatchBuilder::new(compression).with_transactional(self.transactional),
        ];
        let mut timestamps = self
            .completions
            .iter()
            .map(|(_, timestamp_ms)| *timestamp_ms);
        for (index, record) in parsed.records()?.enumerate() {
            let record = record?;
            let timestamp_ms = timestamps
                .next()
                .unwrap_or_else(|| parsed.record_timestamp(&record));
            let headers: Vec<(&[u8], Option<&[u8]>)> = record
                .headers()
                .iter()
                .map(|header| (header.key, header.value))
                .collect();
            let half = usize::from(index >= first_count);
            if let Some(builder) = halves.get_mut(half) {
                builder.append(timestamp_ms, record.key(), record.value(), &headers)?;
            }
        }
        let [first, second] = &halves;
        if first.len() != first_count || first.len() + second.len() != self.record_count() {
            return Err(ProduceError::BatchMismatch);
        }
        Ok(halves)
    }

    fn second_half_permits(&mut self, first_count: usize) -> Option<OwnedSemaphorePermit> {
        let held = self._permits.as_mut()?;
        let total = self.completions.len().max(1);
        let second_count = total.saturating_sub(first_count);
        held.split(held.num_permits() * second_count / total)
    }

    fn rebuilt(
        &self,
        builder: RecordBatchBuilder,
        completions: Vec<(Completion, i64)>,
        stamp: Option<ProducerStamp>,
        permits: Option<OwnedSemaphorePermit>,
    ) -> ProducerBatch {
        ProducerBatch {
            topic_partition: self.topic_partition.clone(),
            size_bytes: builder.estimated_size_in_bytes(),
            builder: Some(builder),
            bytes: None,
            completions,
            created_at: self.created_at,
            attempts: self.attempts,
            retry_at: None,
            stamp,
            transactional: self.transactional,
            order: self.order,
            _permits: permits,
        }
    }

    /// Resolves every record as written at `base_offset`.
    pub fn complete(self, base_offset: i64, log_append_time_ms: i64) {
        let TopicPartition { topic, partition } = self.topic_partition;
        let topic: Arc<str> = topic.into();
        for (index, (completion, timestamp_ms)) in self.completions.into_iter().enumerate() {
            let offset = if base_offset < 0 {
                -1
            } else {
                base_offset + index as i64
            };
            let timestamp_ms = if log_append_time_ms >= 0 {
                log_append_time_ms
            } else {
                timestamp_ms
            };
            let _ = completion.send(Ok(RecordMetadata {
                topic: Arc::clone(&topic),
                partition,
                offset,
                timestamp_ms,
            }));
        }
    }

    /// Fails every record with `error`.
    pub fn fail(self, error: ProduceError) {
        for (completion, _) in self.completions {
            let _ = completion.send(Err(error.clone()));
        }
    }
}

/// What [`ProducerBatch::split`] made of a batch.
#[derive(Debug)]
pub enum SplitOutcome {
    /// The batch holds one record: it cannot be split.
    Single(ProducerBatch),
    /// The first and the second half of its records, in order (boxed: a
    /// rare path, and two batches are large).
    Halves(Box<(ProducerBatch, ProducerBatch)>),
    /// Its bytes could not be re-read (a bug of the producer's own
    /// encoding): the batch, unchanged, and why.
    Failed(ProducerBatch, ProduceError),
}

/// Batching settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccumulatorConfig {
    /// `batch.size`: a batch at this size is sent without waiting.
    pub batch_size: usize,
    /// `linger.ms`: how long a batch waits for more records.
    pub linger: Duration,
    /// `compression.type`.
    pub compression: Compression,
    /// Batches of one partition in flight at once (at least 1): the
    /// producer's `max.in.flight.requests.per.connection`.
    pub max_in_flight_per_partition: usize,
    /// Whether batches are written in transactions (the transactional
    /// attribute is set on each).
    pub transactional: bool,
}

#[derive(Debug, Default)]
struct PartitionQueue {
    batches: VecDeque<ProducerBatch>,
    in_flight: usize,
}

impl PartitionQueue {
    /// Inserts a batch to retry before every batch created after it.
    fn insert_in_order(&mut self, batch: ProducerBatch) {
        let position = self
            .batches
            .iter()
            .position(|queued| queued.order > batch.order)
            .unwrap_or(self.batches.len());
        self.batches.insert(position, batch);
    }
}

/// What [`Accumulator::ready`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Partitions whose front batch may be drained now.
    pub ready: Vec<TopicPartition>,
    /// The earliest instant another partition becomes ready.
    pub next_check: Option<Instant>,
}

/// Per-partition batch queues.
#[derive(Debug)]
pub struct Accumulator {
    config: AccumulatorConfig,
    /// Queues by topic, then partition: looked up by `&str` on every
    /// append, without allocating a key.
    queues: BTreeMap<String, BTreeMap<i32, PartitionQueue>>,
    flushing: bool,
    next_order: u64,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new(config: AccumulatorConfig) -> Self {
        Accumulator {
            config,
            queues: BTreeMap::new(),
            flushing: false,
            next_order: 0,
        }
    }

    fn queue(&self, topic_partition: &TopicPartition) -> Option<&PartitionQueue> {
        self.queues
            .get(topic_partition.topic.as_str())?
            .get(&topic_partition.partition)
    }

    fn queue_mut(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        if !self.queues.contains_key(topic) {
            self.queues.insert(topic.to_owned(), BTreeMap::new());
        }
        self.queues
            .get_mut(topic)
            .map(|partitions| partitions.entry(partition).or_default())
            // Invariant: the topic's map was inserted just above.
            .unwrap_or_else(|| unreachable!("the topic's map was just inserted"))
    }

    fn queues(&self) -> impl Iterator<Item = (&String, i32, &PartitionQueue)> {
        self.queues.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(partition, queue)| (topic, *partition, queue))
        })
    }

    fn queues_mut(&mut self) -> impl Iterator<Item = &mut PartitionQueue> {
        self.queues.values_mut().flat_map(BTreeMap::values_mut)
    }

    /// Appends a record to `(topic, partition)`; returns whether it started
    /// a new batch.
    pub fn append(
        &mut self,
        (topic, partition): (&str, i32),
        record: &ProducerRecord,
        timestamp_ms: i64,
        completion: Completion,
        permits: Option<OwnedSemaphorePermit>,
        now: Instant,
    ) -> Result<bool, (ProduceError, Completion)> {
        let size = record.estimated_size_bytes();
        let config = self.config;
        let order = self.next_order + 1;
        let queue = self.queue_mut(topic, partition);
        let fits = queue.batches.back().is_some_and(|batch| {
            batch.builder.as_ref().is_some_and(|builder| {
                builder.estimated_size_in_bytes() + size <= config.batch_size
            })
        });
        let new_batch = !fits;
        if new_batch {
            queue
                .batches
                .push_back(ProducerBatch::empty(topic, partition, &config, order, now));
        }
        let Some(batch) = queue.batches.back_mut() else {
            return Err((ProduceError::Closed, completion));
        };
        let Some(builder) = batch.builder.as_mut() else {
            return Err((ProduceError::Closed, completion));
        };
        let headers: Vec<(&[u8], Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(key, value)| (key.as_bytes(), value.as_deref()))
            .collect();
        if let Err(error) = builder.append(
            timestamp_ms,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        ) {
            return Err((error.into(), completion));
        }
        batch.size_bytes = builder.estimated_size_in_bytes();
        batch.completions.push((completion, timestamp_ms));
        match (batch._permits.as_mut(), permits) {
            (Some(held), Some(more)) => held.merge(more),
            (None, more) => batch._permits = more,
            (Some(_), None) => {}
        }
        if new_batch {
            self.next_order = order;
        }
        Ok(new_batch)
    }

    /// Which partitions have a batch to send at `now`: the front batch is
    /// full, has lingered long enough, is a retry whose backoff passed, or a
    /// flush is in progress. A partition with
    /// `max_in_flight_per_partition` batches in flight is skipped, and so is
    /// one whose front batch is a retry while any batch is in flight: a
    /// retry goes out alone, after every earlier answer, so order holds.
    pub fn ready(&self, now: Instant) -> Readiness {
        let mut readiness = Readiness::default();
        for (topic, partition, queue) in self.queues() {
            let Some(front) = queue.batches.front() else {
                continue;
            };
            if !self.may_drain(queue) {
                continue;
            }
            let at = match front.retry_at {
                Some(retry_at) => retry_at,
                None if queue.batches.len() > 1
                    || front.size_bytes >= self.config.batch_size
                    || self.flushing =>
                {
                    now
                }
                None => front.created_at + self.config.linger,
            };
            if at <= now {
                readiness.ready.push(TopicPartition {
                    topic: topic.clone(),
                    partition,
                });
            } else {
                readiness.next_check = Some(readiness.next_check.map_or(at, |next| next.min(at)));
            }
        }
        readiness
    }

    fn may_drain(&self, queue: &PartitionQueue) -> bool {
        let limit = self.config.max_in_flight_per_partition.max(1);
        let front_is_retry = queue
            .batches
            .front()
            .is_some_and(|batch| batch.attempts > 0);
        queue.in_flight < limit && !(front_is_retry && queue.in_flight > 0)
    }

    /// Takes the front batch of a partition and counts it in flight.
    pub fn drain(&mut self, topic_partition: &TopicPartition) -> Option<ProducerBatch> {
        let queue = self.queue(topic_partition)?;
        if !self.may_drain(queue) {
            return None;
        }
        let queue = self.queue_mut(&topic_partition.topic, topic_partition.partition);
        let mut batch = queue.batches.pop_front()?;
        queue.in_flight += 1;
        batch.attempts += 1;
        batch.retry_at = None;
        Some(batch)
    }

    /// Counts one in-flight batch of the partition as answered.
    pub fn unmute(&mut self, topic_partition: &TopicPartition) {
        let queue = self.queue_mut(&topic_partition.topic, topic_partition.partition);
        queue.in_flight = queue.in_flight.saturating_sub(1);
    }

    /// Puts an answered batch back in its queue, before every batch
    /// created after it, to retry at `retry_at`.
    pub fn reenqueue(&mut self, mut batch: ProducerBatch, retry_at: Instant) {
        batch.retry_at = Some(retry_at);
        let queue = self.queue_mut(
            &batch.topic_partition.topic,
            batch.topic_partition.partition,
        );
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.insert_in_order(batch);
    }

    /// Puts a drained batch that was not sent back at the front of its
    /// queue, unchanged but for its attempt count.
    pub fn undrain(&mut self, mut batch: ProducerBatch) {
        batch.attempts = batch.attempts.saturating_sub(1);
        let queue = self.queue_mut(
            &batch.topic_partition.topic,
            batch.topic_partition.partition,
        );
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.insert_in_order(batch);
    }

    /// Puts the two halves of an answered batch that was split back in its
    /// queue, ready at once, first half first.
    pub fn reenqueue_split(&mut self, first: ProducerBatch, second: ProducerBatch) {
        let queue = self.queue_mut(
            &first.topic_partition.topic,
            first.topic_partition.partition,
        );
        queue.in_flight = queue.in_flight.saturating_sub(1);
        queue.insert_in_order(first);
        queue.insert_in_order(second);
    }

    /// Removes batches (of partitions not in flight) created before
    /// `now - delivery_timeout`.
    pub fn expire(&mut self, now: Instant, delivery_timeout: Duration) -> Vec<ProducerBatch> {
        let mut expired = Vec::new();
        for queue in self.queues_mut() {
            while queue.batches.front().is_some_and(|batch| {
                now.saturating_duration_since(batch.created_at) >= delivery_timeout
            }) {
                if let Some(batch) = queue.batches.pop_front() {
                    expired.push(batch);
                }
            }
        }
        expired
    }

    /// Starts or ends a flush (every batch is ready while flushing).
    pub fn set_flushing(&mut self, flushing: bool) {
        self.flushing = flushing;
    }

    /// Whether no batch is queued or in flight.
    pub fn is_empty(&self) -> bool {
        self.queues()
            .all(|(_, _, queue)| queue.batches.is_empty() && queue.in_flight == 0)
    }

    /// Removes every queued batch (on close).
    pub fn take_all(&mut self) -> Vec<ProducerBatch> {
        self.queues_mut()
            .flat_map(|queue| queue.batches.drain(..))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(batch_size: usize, linger_ms: u64) -> AccumulatorConfig {
        AccumulatorConfig {
            max_in_flight_per_partition: 1,
            batch_size,
            linger: Duration::from_millis(linger_ms),
            compression: Compression::None,
            transactional: false,
        }
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".to_owned(),
            partition,
        }
    }

    fn append(
        accumulator: &mut Accumulator,
        partition: i32,
        value: &'static [u8],
        now: Instant,
    ) -> (
        bool,
        oneshot::Receiver<Result<RecordMetadata, ProduceError>>,
    ) {
        let (sender, receiver) = oneshot::channel();
        let record = ProducerRecord::new("t", value);
        let new_batch = accumulator
            .append(("t", partition), &record, 1, sender, None, now)
            .map_err(|(error, _)| error)
            .unwrap();
        (new_batch, receiver)
    }

    #[test]
    fn batch_is_ready_after_linger() {
        let start = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 5));
        append(&mut accumulator, 0, b"a", start);
        let readiness = accumulator.ready(start + Duration::from_millis(4));
        assert!(readiness.ready.is_empty());
        assert_eq!(readiness.next_check, Some(start + Duration::from_millis(5)));
        assert_eq!(
            accumulator.ready(start + Duration::from_millis(5)).ready,
            vec![tp(0)]
        );
    }

    #[test]
    fn full_batch_is_ready_at_once_and_a_new_one_starts() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(150, 1_000));
        assert!(append(&mut accumulator, 0, &[7; 30], now).0);
        assert!(!append(&mut accumulator, 0, &[7; 10], now).0);
        assert!(append(&mut accumulator, 0, &[7; 30], now).0);
        assert_eq!(accumulator.ready(now).ready, vec![tp(0)]);
    }

    #[test]
    fn in_flight_partition_is_muted_and_retry_waits_for_backoff() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 0));
        append(&mut accumulator, 0, b"a", now);
        append(&mut accumulator, 1, b"b", now);
        let batch = accumulator.drain(&tp(0)).unwrap();
        append(&mut accumulator, 0, b"c", now);
        assert_eq!(accumulator.ready(now).ready, vec![tp(1)]);
        assert!(accumulator.drain(&tp(0)).is_none());
        let retry_at = now + Duration::from_millis(100);
        accumulator.reenqueue(batch, retry_at);
        let readiness = accumulator.ready(now);
        assert_eq!(readiness.ready, vec![tp(1)]);
        assert_eq!(readiness.next_check, Some(retry_at));
        assert_eq!(accumulator.ready(retry_at).ready, vec![tp(0), tp(1)]);
        // The retried batch comes out first, before the newer one.
        let again = accumulator.drain(&tp(0)).unwrap();
        assert_eq!(again.attempts, 2);
        assert_eq!(again.record_count(), 1);
    }

    #[test]
    fn expired_batches_are_removed_and_flush_makes_all_ready() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 10_000));
        let (_, receiver) = append(&mut accumulator, 0, b"a", now);
        assert!(accumulator.ready(now).ready.is_empty());
        accumulator.set_flushing(true);
        assert_eq!(accumulator.ready(now).ready, vec![tp(0)]);
        let expired = accumulator.expire(now + Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(expired.len(), 1);
        for batch in expired {
            batch.fail(ProduceError::Timeout { elapsed_ms: 2_000 });
        }
        assert!(matches!(
            receiver.blocking_recv().unwrap(),
            Err(ProduceError::Timeout { .. })
        ));
        assert!(accumulator.is_empty());
    }

    #[test]
    fn seal_then_restamp_keeps_records_and_sets_producer() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 0));
        append(&mut accumulator, 0, b"a", now);
        append(&mut accumulator, 0, b"b", now);
        let mut batch = accumulator.drain(&tp(0)).unwrap();
        let first = ProducerStamp {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: 10,
        };
        let bytes = batch.seal(Some(first)).unwrap();
        let parsed = strom_protocol::records::RecordBatch::parse(bytes).unwrap();
        assert_eq!((parsed.producer_id(), parsed.base_sequence()), (1, 10));
        let second = ProducerStamp {
            producer_id: 2,
            producer_epoch: 0,
            base_sequence: 0,
        };
        let bytes = batch.seal(Some(second)).unwrap();
        let parsed = strom_protocol::records::RecordBatch::parse(bytes).unwrap();
        parsed.validate_crc().unwrap();
        assert_eq!((parsed.producer_id(), parsed.base_sequence()), (2, 0));
        assert_eq!(parsed.record_count(), 2);
    }

    #[test]
    fn transactional_batches_and_their_split_halves_carry_the_attribute() {
        let now = Instant::now();
        for transactional in [false, true] {
            let mut accumulator = Accumulator::new(AccumulatorConfig {
                transactional,
                ..config(16_384, 0)
            });
            for value in [b"a", b"b", b"c"] {
                append(&mut accumulator, 0, value, now);
            }
            let mut batch = accumulator.drain(&tp(0)).unwrap();
            let stamp = ProducerStamp {
                producer_id: 7,
                producer_epoch: 1,
                base_sequence: 0,
            };
            let bytes = batch.seal(Some(stamp)).unwrap();
            let parsed = strom_protocol::records::RecordBatch::parse(bytes).unwrap();
            assert_eq!(parsed.attributes().is_transactional(), transactional);
            let SplitOutcome::Halves(halves) = batch.split(Compression::None) else {
                panic!("three records split");
            };
            let (mut first, mut second) = *halves;
            for half in [&mut first, &mut second] {
                let stamp = half.stamp;
                let parsed =
                    strom_protocol::records::RecordBatch::parse(half.seal(stamp).unwrap()).unwrap();
                assert_eq!(parsed.attributes().is_transactional(), transactional);
            }
        }
    }

    fn values_of(bytes: Bytes) -> Vec<(Vec<u8>, i64, usize)> {
        let parsed = strom_protocol::records::RecordBatch::parse(bytes).unwrap();
        parsed.validate_crc().unwrap();
        parsed
            .records()
            .unwrap()
            .map(|record| {
                let record = record.unwrap();
                (
                    record.value().unwrap().to_vec(),
                    parsed.record_timestamp(&record),
                    record.headers().len(),
                )
            })
            .collect()
    }

    #[test]
    fn split_halves_keep_records_order_timestamps_and_sequences() {
        for compression in [Compression::None, Compression::Lz4] {
            let now = Instant::now();
            let mut accumulator = Accumulator::new(AccumulatorConfig {
                compression,
                ..config(16_384, 0)
            });
            let mut receivers = Vec::new();
            for index in 0..5u8 {
                let (sender, receiver) = oneshot::channel();
                let record = ProducerRecord::new("t", vec![index; 3])
                    .with_header("h", Some(Bytes::from_static(b"v")))
                    .with_timestamp_ms(100 + i64::from(index));
                accumulator
                    .append(("t", 0), &record, 100 + i64::from(index), sender, None, now)
                    .map_err(|(error, _)| error)
                    .unwrap();
                receivers.push(receiver);
            }
            let mut batch = accumulator.drain(&tp(0)).unwrap();
            let stamp = ProducerStamp {
                producer_id: 9,
                producer_epoch: 1,
                base_sequence: 40,
            };
            batch.seal(Some(stamp)).unwrap();
            let SplitOutcome::Halves(halves) = batch.split(compression) else {
                panic!("a batch of five records splits");
            };
            let (mut first, mut second) = *halves;
            assert_eq!((first.record_count(), second.record_count()), (2, 3));
            assert_eq!(first.stamp, Some(stamp));
            let second_stamp = second.stamp.unwrap();
            assert_eq!(second_stamp.base_sequence, 42);
            let first_bytes = first.seal(first.stamp).unwrap();
            let second_bytes = second.seal(second.stamp).unwrap();
            let parsed = strom_protocol::records::RecordBatch::parse(second_bytes.clone()).unwrap();
            assert_eq!((parsed.producer_id(), parsed.base_sequence()), (9, 42));
            assert_eq!(parsed.attributes().compression(), compression);
            let mut all = values_of(first_bytes);
            all.extend(values_of(second_bytes));
            let expected: Vec<(Vec<u8>, i64, usize)> = (0..5u8)
                .map(|index| (vec![index; 3], 100 + i64::from(index), 1))
                .collect();
            assert_eq!(all, expected);
            accumulator.reenqueue_split(first, second);
            assert_eq!(accumulator.ready(now).ready, vec![tp(0)]);
            let again = accumulator.drain(&tp(0)).unwrap();
            assert_eq!(again.record_count(), 2);
            again.complete(10, -1);
            let offsets: Vec<i64> = receivers
                .into_iter()
                .take(2)
                .map(|receiver| receiver.blocking_recv().unwrap().unwrap().offset)
                .collect();
            assert_eq!(offsets, [10, 11]);
        }
    }

    #[test]
    fn pieces_of_a_split_half_go_before_the_other_half() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 0));
        for value in [b"0", b"1", b"2", b"3", b"4"] {
            append(&mut accumulator, 0, value, now);
        }
        let mut drained = accumulator.drain(&tp(0)).unwrap();
        drained.seal(None).unwrap();
        let SplitOutcome::Halves(halves) = drained.split(Compression::None) else {
            panic!("five records split");
        };
        accumulator.reenqueue_split(halves.0, halves.1);
        let mut first = accumulator.drain(&tp(0)).unwrap();
        first.seal(None).unwrap();
        let SplitOutcome::Halves(halves) = first.split(Compression::None) else {
            panic!("two records split");
        };
        accumulator.reenqueue_split(halves.0, halves.1);
        let mut order = Vec::new();
        while let Some(mut batch) = accumulator.drain(&tp(0)) {
            let values: Vec<u8> = values_of(batch.seal(None).unwrap())
                .into_iter()
                .flat_map(|(value, _, _)| value)
                .collect();
            order.push(values);
            accumulator.unmute(&tp(0));
        }
        assert_eq!(order, [b"0".to_vec(), b"1".to_vec(), b"234".to_vec()]);
    }

    #[test]
    fn buffer_memory_is_held_per_batch_and_shared_by_split_halves() {
        let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(1_000));
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 0));
        for _ in 0..4 {
            let permit = std::sync::Arc::clone(&semaphore)
                .try_acquire_many_owned(100)
                .unwrap();
            let (sender, _) = oneshot::channel();
            accumulator
                .append(
                    ("t", 0),
                    &ProducerRecord::new("t", "v"),
                    0,
                    sender,
                    Some(permit),
                    now,
                )
                .map_err(|(error, _)| error)
                .unwrap();
        }
        assert_eq!(semaphore.available_permits(), 600);
        let mut batch = accumulator.drain(&tp(0)).unwrap();
        batch.seal(None).unwrap();
        let SplitOutcome::Halves(halves) = batch.split(Compression::None) else {
            panic!("four records split");
        };
        let (first, second) = *halves;
        assert_eq!(semaphore.available_permits(), 600);
        first.complete(0, -1);
        assert_eq!(semaphore.available_permits(), 800);
        second.fail(ProduceError::Closed);
        assert_eq!(semaphore.available_permits(), 1_000);
    }

    #[test]
    fn a_single_record_batch_does_not_split() {
        let now = Instant::now();
        let mut accumulator = Accumulator::new(config(16_384, 0));
        append(&mut accumulator, 0, b"only", now);
        let mut batch = accumulator.drain(&tp(0)).unwrap();
        batch.seal(None).unwrap();
        assert!(matches!(
            batch.split(Compression::None),
            SplitOutcome::Single(batch) if batch.record_count() == 1
        ));
    }

    proptest! {
        /// Whatever the interleaving of appends, drains, retries and time,
        /// each partition's records come out in append order and no
        /// partition has two batches in flight.
        #[test]
        fn per_partition_order_survives_retries(
            steps in proptest::collection::vec((0u8..4, 0i32..3, 0u64..20), 1..200),
        ) {
            let start = Instant::now();
            let mut now = start;
            let mut accumulator = Accumulator::new(config(120, 3));
            let mut next_value = [0u32; 3];
            let mut in_flight: Vec<ProducerBatch> = Vec::new();
            let mut delivered: Vec<Vec<u32>> = vec![Vec::new(); 3];
            for (action, partition, advance_ms) in steps {
                now += Duration::from_millis(advance_ms);
                match action {
                    0 | 1 => {
                        let index = partition as usize;
                        let value = next_value[index];
                        next_value[index] += 1;
                        let (sender, _receiver) = oneshot::channel();
                        let record = ProducerRecord::new("t", value.to_be_bytes().to_vec());
                        accumulator.append(("t", partition), &record, 0, sender, None, now).map_err(|(error, _)| error).unwrap();
                    }
                    2 => {
                        for ready in accumulator.ready(now).ready {
                            prop_assert!(in_flight.iter().all(|batch| batch.topic_partition != ready));
                            if let Some(batch) = accumulator.drain(&ready) {
                                in_flight.push(batch);
                            }
                        }
                    }
                    _ => {
                        if in_flight.is_empty() { continue; }
                        let mut batch = in_flight.remove(0);
                        if advance_ms % 2 == 0 {
                            accumulator.reenqueue(batch, now + Duration::from_millis(advance_ms));
                        } else {
                            let bytes = batch.seal(None).unwrap();
                            let parsed = strom_protocol::records::RecordBatch::parse(bytes).unwrap();
                            let index = batch.topic_partition.partition as usize;
                            for record in parsed.records().unwrap() {
                                let record = record.unwrap();
                                let value = record.value().unwrap();
                                delivered[index].push(u32::from_be_bytes([value[0], value[1], value[2], value[3]]));
                            }
                            accumulator.unmute(&batch.topic_partition);
                        }
                    }
                }
            }
            for values in delivered {
                let expected: Vec<u32> = (0..values.len() as u32).collect();
                prop_assert_eq!(values, expected);
            }
        }

        /// With several batches in flight per partition and a broker that,
        /// like one checking idempotent sequences, refuses a batch that does
        /// not start where the partition's log ends (and fails some
        /// batches at random), every record is written once and in order,
        /// and a retry is only drained while nothing else of its partition
        /// is in flight.
        #[test]
        fn pipelined_batches_stay_in_order_against_a_sequence_checking_broker(
            max_in_flight in 1usize..5,
            steps in proptest::collection::vec((0u8..5, 0i32..3, 0u64..20), 1..300),
        ) {
            let mut now = Instant::now();
            let mut accumulator = Accumulator::new(AccumulatorConfig {
                max_in_flight_per_partition: max_in_flight,
                ..config(120, 3)
            });
            let mut next_value = [0u32; 3];
            let mut in_flight: VecDeque<(ProducerBatch, Vec<u32>)> = VecDeque::new();
            let mut written: Vec<Vec<u32>> = vec![Vec::new(); 3];
            for (action, partition, advance_ms) in steps {
                now += Duration::from_millis(advance_ms);
                match action {
                    0 | 1 => {
                        let index = partition as usize;
                        let value = next_value[index];
                        next_value[index] += 1;
                        let (sender, _receiver) = oneshot::channel();
                        let record = ProducerRecord::new("t", value.to_be_bytes().to_vec());
                        accumulator.append(("t", partition), &record, 0, sender, None, now).map_err(|(error, _)| error).unwrap();
                    }
                    2 => {
                        for ready in accumulator.ready(now).ready {
                            while let Some(mut batch) = accumulator.drain(&ready) {
                                let same = in_flight.iter().filter(|(queued, _)| queued.topic_partition == ready).count();
                                prop_assert!(same < max_in_flight);
                                prop_assert!(batch.attempts == 1 || same == 0, "a retry went out behind another batch");
                                let parsed = strom_protocol::records::RecordBatch::parse(batch.seal(None).unwrap()).unwrap();
                                let values = parsed.records().unwrap().map(|record| {
                                    let value = record.unwrap().value().unwrap().to_vec();
                                    u32::from_be_bytes([value[0], value[1], value[2], value[3]])
                                }).collect();
                                in_flight.push_back((batch, values));
                            }
                        }
                    }
                    _ => {
                        // Answers come back in the order the requests went out.
                        let Some((batch, values)) = in_flight.pop_front() else { continue };
                        let index = batch.topic_partition.partition as usize;
                        let expected = written[index].len() as u32;
                        let accepted = advance_ms % 3 != 0 && values.first() == Some(&expected);
                        if accepted {
                            written[index].extend(values);
                            accumulator.unmute(&batch.topic_partition);
                        } else {
                            accumulator.reenqueue(batch, now + Duration::from_millis(advance_ms));
                        }
                    }
                }
            }
            for values in written {
                let expected: Vec<u32> = (0..values.len() as u32).collect();
                prop_assert_eq!(values, expected);
            }
        }
    }
}
