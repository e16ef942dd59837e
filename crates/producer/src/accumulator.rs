//! The record accumulator: per-partition queues of batches under
//! construction, and the sans-IO decision of which are ready to send.
//!
//! Every method that depends on time takes `now`, so tests drive it with an
//! injected clock. The sender keeps at most one batch per partition in
//! flight (it mutes the partition until the answer), which keeps records in
//! order across retries: a batch to retry goes back to the front of its queue.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strom_protocol::records::{BatchHeaderMut, Compression, RecordBatchBuilder};
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
    size_bytes: usize,
    _permits: Vec<OwnedSemaphorePermit>,
}

impl ProducerBatch {
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
        self.bytes.clone().ok_or(ProduceError::InvalidRecord {
            reason: "batch has no records".to_owned(),
        })
    }

    /// Resolves every record as written at `base_offset`.
    pub fn complete(self, base_offset: i64, log_append_time_ms: i64) {
        let TopicPartition { topic, partition } = self.topic_partition;
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
                topic: topic.clone(),
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

/// Batching settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccumulatorConfig {
    /// `batch.size`: a batch at this size is sent without waiting.
    pub batch_size: usize,
    /// `linger.ms`: how long a batch waits for more records.
    pub linger: Duration,
    /// `compression.type`.
    pub compression: Compression,
}

#[derive(Debug, Default)]
struct PartitionQueue {
    batches: VecDeque<ProducerBatch>,
    in_flight: bool,
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
    queues: BTreeMap<TopicPartition, PartitionQueue>,
    flushing: bool,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new(config: AccumulatorConfig) -> Self {
        Accumulator {
            config,
            queues: BTreeMap::new(),
            flushing: false,
        }
    }

    /// Appends a record; returns whether it started a new batch.
    pub fn append(
        &mut self,
        topic_partition: TopicPartition,
        record: &ProducerRecord,
        timestamp_ms: i64,
        completion: Completion,
        permits: Option<OwnedSemaphorePermit>,
        now: Instant,
    ) -> Result<bool, (ProduceError, Completion)> {
        let size = record.estimated_size_bytes();
        let config = self.config;
        let queue = self.queues.entry(topic_partition.clone()).or_default();
        let fits = queue.batches.back().is_some_and(|batch| {
            batch.builder.as_ref().is_some_and(|builder| {
                builder.estimated_size_in_bytes() + size <= config.batch_size
            })
        });
        let new_batch = !fits;
        if new_batch {
            queue.batches.push_back(ProducerBatch {
                topic_partition,
                builder: Some(RecordBatchBuilder::new(config.compression)),
                bytes: None,
                completions: Vec::new(),
                created_at: now,
                attempts: 0,
                retry_at: None,
                stamp: None,
                size_bytes: 0,
                _permits: Vec::new(),
            });
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
        batch._permits.extend(permits);
        Ok(new_batch)
    }

    /// Which partitions have a batch to send at `now`: the front batch is
    /// full, has lingered long enough, is a retry whose backoff passed, or a
    /// flush is in progress. Muted (in-flight) partitions are skipped.
    pub fn ready(&self, now: Instant) -> Readiness {
        let mut readiness = Readiness::default();
        for (topic_partition, queue) in &self.queues {
            let Some(front) = queue.batches.front() else {
                continue;
            };
            if queue.in_flight {
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
                readiness.ready.push(topic_partition.clone());
            } else {
                readiness.next_check = Some(readiness.next_check.map_or(at, |next| next.min(at)));
            }
        }
        readiness
    }

    /// Takes the front batch of a partition and mutes the partition.
    pub fn drain(&mut self, topic_partition: &TopicPartition) -> Option<ProducerBatch> {
        let queue = self.queues.get_mut(topic_partition)?;
        if queue.in_flight {
            return None;
        }
        let mut batch = queue.batches.pop_front()?;
        queue.in_flight = true;
        batch.attempts += 1;
        batch.retry_at = None;
        Some(batch)
    }

    /// Unmutes a partition after its in-flight batch was answered.
    pub fn unmute(&mut self, topic_partition: &TopicPartition) {
        if let Some(queue) = self.queues.get_mut(topic_partition) {
            queue.in_flight = false;
        }
    }

    /// Puts a batch back at the front of its queue to retry at `retry_at`,
    /// and unmutes the partition.
    pub fn reenqueue(&mut self, mut batch: ProducerBatch, retry_at: Instant) {
        batch.retry_at = Some(retry_at);
        let queue = self
            .queues
            .entry(batch.topic_partition.clone())
            .or_default();
        queue.in_flight = false;
        queue.batches.push_front(batch);
    }

    /// Removes batches (of partitions not in flight) created before
    /// `now - delivery_timeout`.
    pub fn expire(&mut self, now: Instant, delivery_timeout: Duration) -> Vec<ProducerBatch> {
        let mut expired = Vec::new();
        for queue in self.queues.values_mut() {
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
        self.queues
            .values()
            .all(|queue| queue.batches.is_empty() && !queue.in_flight)
    }

    /// Removes every queued batch (on close).
    pub fn take_all(&mut self) -> Vec<ProducerBatch> {
        self.queues
            .values_mut()
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
            batch_size,
            linger: Duration::from_millis(linger_ms),
            compression: Compression::None,
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
            .append(tp(partition), &record, 1, sender, None, now)
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
                        accumulator.append(tp(partition), &record, 0, sender, None, now).map_err(|(error, _)| error).unwrap();
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
    }
}
