//! The clients of the transactional workload, its invariants and its run.
//!
//! Transactional producers (transaction version 2) each run a series of
//! transactions: InitProducerId once, then per transaction
//! AddPartitionsToTxn for both data partitions, one-record batches to
//! each (retried with the same sequence until acknowledged), and EndTxn
//! with a commit or an abort drawn at random (an abort when a record could
//! not be written). What each transaction wrote, where it was
//! acknowledged, what its producer asked for and what the coordinator
//! adopted is kept on the side as the truth. Read_committed readers, one
//! per data partition, fetch from the leaders and drop aborted
//! transactions as Kafka's consumer does (with the aborted transactions
//! of the answer and the abort markers).
//!
//! On purpose, beyond the network's own duplicates: when a producer's
//! next transaction has begun, its previous EndTxn is sent to the
//! coordinator again, and when that transaction has a record on a
//! partition, the previous transaction's marker for that partition is sent
//! to the partition's leader again (KIP-890's late EndTxn and late marker).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strom_protocol::records::{Compression, RecordBatch, RecordBatchBuilder, RecordBatches};
use strom_storage::marker::{marker_of_control_batch, MarkerKind, TransactionMarker};
use strom_transactions::metadata::ProducerIdAndEpoch;
use strom_transactions::state::{TransactionResult, TransactionState};

use super::transactions::{CommittedRead, CoordinatorRequest, TxnMessage, TXN_STATE_PARTITION};
use super::{env_u64, Message, Node, Simulation, BROKERS, DATA_PARTITIONS, TOPIC};

/// Transactional producers, and the transactions each runs.
const TXN_PRODUCERS: usize = 2;
const TRANSACTIONS_PER_PRODUCER: u32 = 8;
/// How long a client waits for an answer before it asks again.
const CLIENT_TIMEOUT_MS: i64 = 3_000;
/// Failed attempts at one record before its transaction is aborted.
const RECORD_ATTEMPTS_MAX: u32 = 40;

/// What happened to one transaction, from the producer's side and the
/// coordinator's.
struct TxnTruth {
    producer: ProducerIdAndEpoch,
    /// What the producer asked EndTxn for.
    intent: Option<TransactionResult>,
    /// Acknowledged records: (partition, offset, label).
    acked: Vec<(i32, i64, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Init,
    Add,
    Produce,
    End(TransactionResult),
    Done,
}

struct TxnProducer {
    transactional_id: String,
    producer: Option<ProducerIdAndEpoch>,
    number: u32,
    phase: Phase,
    in_flight: Option<(u64, i64)>,
    next_attempt_ms: i64,
    /// The next sequence per partition at the current epoch.
    sequences: BTreeMap<i32, i32>,
    /// The partitions of the transaction's records, in order.
    records: Vec<i32>,
    written: usize,
    failures: u32,
    /// The EndTxn of the previous transaction, to deliver again late.
    last_end: Option<TxnMessage>,
}

/// A read_committed reader of one partition.
#[derive(Default)]
struct Reader {
    position: i64,
    read: BTreeMap<i64, String>,
    in_flight: Option<(u64, i64, i32)>,
    next_attempt_ms: i64,
    newest_epoch: i32,
}

/// The state of the transactional workload.
#[derive(Default)]
pub(crate) struct TxnWorkload {
    /// The last producer id handed out (the controller's blocks).
    pub(crate) next_producer_id: i64,
    pub(crate) coordinator_loads: u32,
    pub(crate) completed: u32,
    /// Every marker sent, by (producer id, marker epoch, partition).
    pub(crate) markers_sent: BTreeMap<(i64, i16, i32), TransactionMarker>,
    producers: Vec<TxnProducer>,
    readers: BTreeMap<i32, Reader>,
    transactions: BTreeMap<(usize, u32), TxnTruth>,
    /// What the coordinator adopted, by (producer id, epoch of the data).
    decisions: BTreeMap<(i64, i16), TransactionResult>,
    stable_offsets: BTreeMap<(i32, i32, i32), i64>,
    next_request: u64,
    /// Whether old markers are delivered again on purpose.
    inject_late_markers: bool,
    late_markers: u32,
    late_end_txns: u32,
}

impl TxnWorkload {
    pub(crate) fn new(inject_late_markers: bool) -> TxnWorkload {
        TxnWorkload {
            inject_late_markers,
            next_producer_id: 5_000,
            producers: (0..TXN_PRODUCERS)
                .map(|index| TxnProducer {
                    transactional_id: format!("txn-{index}"),
                    producer: None,
                    number: 0,
                    phase: Phase::Init,
                    in_flight: None,
                    next_attempt_ms: 0,
                    sequences: BTreeMap::new(),
                    records: Vec::new(),
                    written: 0,
                    failures: 0,
                    last_end: None,
                })
                .collect(),
            readers: (0..DATA_PARTITIONS)
                .map(|p| (p, Reader::default()))
                .collect(),
            ..TxnWorkload::default()
        }
    }

    fn request_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request
    }
}

fn label(producer: usize, number: u32, partition: i32, index: usize) -> String {
    format!("{producer}:{number}:{partition}:{index}")
}

/// (producer, transaction number) of a record's label.
fn parse_label(label: &str) -> Option<(usize, u32)> {
    let mut fields = label.split(':');
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

fn transactional_batch(producer: ProducerIdAndEpoch, sequence: i32, value: &str) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(producer.producer_id, producer.producer_epoch, sequence)
        .with_transactional(true);
    builder
        .append(0, None, Some(value.as_bytes()), &[])
        .expect("a record fits a batch");
    builder.build().expect("the batch builds")
}

// The producers.
impl Simulation {
    pub(crate) fn txn_workload(&mut self) -> &mut TxnWorkload {
        self.txn.as_deref_mut().expect("the transactional workload")
    }

    /// The leader of `partition` in a random broker's image.
    fn txn_leader(&mut self, partition: i32) -> Option<(i32, i32)> {
        let asked = BROKERS[self.rng.below(BROKERS.len() as u64) as usize];
        let state = self.brokers[&asked]
            .image
            .as_ref()?
            .topic_by_name(TOPIC)?
            .partition(partition)?
            .clone();
        Some((state.leader?, state.leader_epoch))
    }

    pub(crate) fn txn_client_tick(&mut self) {
        for index in 0..TXN_PRODUCERS {
            self.producer_tick(index);
        }
        for partition in 0..DATA_PARTITIONS {
            self.reader_tick(partition);
        }
    }

    fn producer_tick(&mut self, index: usize) {
        let now_ms = self.now_ms;
        let producer = &mut self.txn_workload().producers[index];
        if let Some((_, sent_ms)) = producer.in_flight {
            if now_ms - sent_ms < CLIENT_TIMEOUT_MS {
                return;
            }
            producer.in_flight = None;
        }
        if now_ms < producer.next_attempt_ms || producer.phase == Phase::Done {
            return;
        }
        let phase = producer.phase;
        let transactional_id = producer.transactional_id.clone();
        let current = producer.producer;
        let (partition, message) = match (phase, current) {
            (Phase::Init, _) => (
                TXN_STATE_PARTITION,
                coordinator(&transactional_id, CoordinatorRequest::InitProducerId, 0),
            ),
            (Phase::Add, Some(producer)) => (
                TXN_STATE_PARTITION,
                coordinator(
                    &transactional_id,
                    CoordinatorRequest::AddPartitions {
                        producer,
                        partitions: (0..DATA_PARTITIONS).collect(),
                    },
                    0,
                ),
            ),
            (Phase::Produce, Some(producer)) => self.next_record(index, producer),
            (Phase::End(result), Some(producer)) => (
                TXN_STATE_PARTITION,
                coordinator(
                    &transactional_id,
                    CoordinatorRequest::EndTxn { producer, result },
                    0,
                ),
            ),
            _ => return,
        };
        let Some((leader, _)) = self.txn_leader(partition) else {
            return;
        };
        let workload = self.txn_workload();
        let id = workload.request_id();
        let message = with_id(message, id);
        workload.producers[index].in_flight = Some((id, now_ms));
        if let TxnMessage::Coordinator {
            request: CoordinatorRequest::EndTxn { .. },
            ..
        } = &message
        {
            workload.producers[index].last_end = Some(message.clone());
        }
        self.send(Node::Client, Node::Broker(leader), Message::Txn(message));
    }

    /// The produce of the transaction's next record.
    fn next_record(&mut self, index: usize, producer: ProducerIdAndEpoch) -> (i32, TxnMessage) {
        let workload = self.txn_workload();
        let state = &workload.producers[index];
        let partition = state.records[state.written];
        let written_here = state.records[..state.written]
            .iter()
            .filter(|p| **p == partition)
            .count();
        let sequence = state.sequences.get(&partition).copied().unwrap_or(0);
        let value = label(index, state.number, partition, written_here);
        let batch = transactional_batch(producer, sequence, &value);
        let message = TxnMessage::Produce {
            id: 0,
            partition,
            batch,
        };
        (partition, message)
    }

    /// Starts the producer's next transaction: its records and the truth.
    fn begin_transaction(&mut self, index: usize) {
        let count = 2 + self.rng.below(4) as usize;
        let mut records: Vec<i32> = (0..DATA_PARTITIONS).collect();
        for _ in records.len()..count {
            records.push(self.rng.below(DATA_PARTITIONS as u64) as i32);
        }
        let workload = self.txn_workload();
        let producer = &mut workload.producers[index];
        producer.records = records;
        producer.written = 0;
        producer.failures = 0;
        producer.phase = Phase::Add;
        let truth = TxnTruth {
            producer: producer.producer.expect("initialised"),
            intent: None,
            acked: Vec::new(),
        };
        let key = (index, producer.number);
        workload.transactions.insert(key, truth);
    }
}

fn coordinator(transactional_id: &str, request: CoordinatorRequest, id: u64) -> TxnMessage {
    TxnMessage::Coordinator {
        id,
        transactional_id: transactional_id.to_owned(),
        request,
    }
}

fn with_id(message: TxnMessage, new_id: u64) -> TxnMessage {
    match message {
        TxnMessage::Coordinator {
            transactional_id,
            request,
            ..
        } => TxnMessage::Coordinator {
            id: new_id,
            transactional_id,
            request,
        },
        TxnMessage::Produce {
            partition, batch, ..
        } => TxnMessage::Produce {
            id: new_id,
            partition,
            batch,
        },
        other => other,
    }
}

// The answers to the producers.
impl Simulation {
    pub(crate) fn txn_client_receives(&mut self, message: TxnMessage) {
        match message {
            TxnMessage::CoordinatorReply { id, answer } => {
                if let Some(index) = self.producer_waiting(id) {
                    self.coordinator_answered(index, answer);
                }
            }
            TxnMessage::ProduceReply { id, offset } => {
                if let Some(index) = self.producer_waiting(id) {
                    self.produce_answered(index, offset);
                }
            }
            TxnMessage::ReadReply { id, answer } => self.read_answered(id, answer),
            _ => {}
        }
    }

    fn producer_waiting(&mut self, id: u64) -> Option<usize> {
        let workload = self.txn_workload();
        let index = workload
            .producers
            .iter()
            .position(|producer| producer.in_flight.is_some_and(|(sent, _)| sent == id))?;
        workload.producers[index].in_flight = None;
        Some(index)
    }

    fn retry_later(&mut self, index: usize) {
        let at = self.now_ms + 50;
        self.txn_workload().producers[index].next_attempt_ms = at;
    }

    fn coordinator_answered(&mut self, index: usize, answer: Result<ProducerIdAndEpoch, String>) {
        let Ok(answer) = answer else {
            return self.retry_later(index);
        };
        let workload = self.txn_workload();
        let producer = &mut workload.producers[index];
        match producer.phase {
            Phase::Init => {
                producer.producer = Some(answer);
                self.begin_transaction(index);
            }
            Phase::Add => {
                producer.phase = Phase::Produce;
                let late = producer.last_end.clone();
                // KIP-890: the previous transaction's EndTxn, late.
                if let Some(late) = late.filter(|_| self.faults && self.rng.chance(500)) {
                    if let Some((coordinator, _)) = self.txn_leader(TXN_STATE_PARTITION) {
                        self.txn_workload().late_end_txns += 1;
                        self.send(Node::Client, Node::Broker(coordinator), Message::Txn(late));
                    }
                }
            }
            Phase::End(result) => {
                let number = producer.number;
                producer.producer = Some(answer);
                producer.sequences.clear();
                producer.number += 1;
                self.note(format!(
                    "client: txn-{index} #{number} ended {result:?}, next epoch {}",
                    answer.producer_epoch
                ));
                if self.txn_workload().producers[index].number < TRANSACTIONS_PER_PRODUCER {
                    self.begin_transaction(index);
                } else {
                    self.txn_workload().producers[index].phase = Phase::Done;
                }
            }
            Phase::Produce | Phase::Done => {}
        }
    }

    fn produce_answered(&mut self, index: usize, offset: Result<i64, String>) {
        let workload = self.txn_workload();
        let producer = &mut workload.producers[index];
        let partition = producer.records[producer.written];
        let offset = match offset {
            Ok(offset) => offset,
            Err(reason) => {
                producer.failures += 1;
                if producer.failures >= RECORD_ATTEMPTS_MAX {
                    let number = producer.number;
                    self.end_transaction(index, TransactionResult::Abort);
                    self.note(format!(
                        "client: txn-{index} #{number} gives up on p{partition}: {reason}"
                    ));
                }
                return self.retry_later(index);
            }
        };
        let written_here = producer.records[..producer.written]
            .iter()
            .filter(|p| **p == partition)
            .count();
        let value = label(index, producer.number, partition, written_here);
        *producer.sequences.entry(partition).or_insert(0) += 1;
        producer.written += 1;
        producer.failures = 0;
        let done = producer.written == producer.records.len();
        let key = (index, producer.number);
        let this = producer.producer.expect("initialised");
        let truth = workload.transactions.get_mut(&key).expect("the truth");
        truth.acked.push((partition, offset, value));
        if written_here == 0 {
            self.late_marker(this, partition);
        }
        if done {
            let result = if self.rng.chance(550) {
                TransactionResult::Commit
            } else {
                TransactionResult::Abort
            };
            self.end_transaction(index, result);
        }
    }

    fn end_transaction(&mut self, index: usize, result: TransactionResult) {
        let workload = self.txn_workload();
        let producer = &mut workload.producers[index];
        producer.phase = Phase::End(result);
        let key = (index, producer.number);
        let truth = workload.transactions.get_mut(&key).expect("the truth");
        truth.intent = Some(result);
        let decided = workload
            .decisions
            .get(&(truth.producer.producer_id, truth.producer.producer_epoch))
            .copied();
        if let Some(decided) = decided {
            self.fail(&format!(
                "txn-{index} #{}: decided {decided:?} before its producer ended it",
                key.1
            ));
        }
    }

    /// KIP-890: the marker of the producer's previous transaction for
    /// `partition` (it carries the epoch the current transaction writes
    /// at), delivered again now that the current one has a record there.
    fn late_marker(&mut self, producer: ProducerIdAndEpoch, partition: i32) {
        if !self.faults || !self.txn_workload().inject_late_markers || !self.rng.chance(500) {
            return;
        }
        let key = (producer.producer_id, producer.producer_epoch, partition);
        let Some(marker) = self.txn_workload().markers_sent.get(&key).copied() else {
            return;
        };
        let Some((leader, _)) = self.txn_leader(partition) else {
            return;
        };
        let from = Node::Broker(BROKERS[self.rng.below(3) as usize]);
        self.txn_workload().late_markers += 1;
        self.note(format!(
            "client: the {:?} marker of {} epoch {} to p{partition} again",
            marker.kind, marker.producer_id, marker.producer_epoch
        ));
        let message = TxnMessage::WriteMarker { partition, marker };
        self.send(from, Node::Broker(leader), Message::Txn(message));
    }

    /// The coordinator adopted (or loaded) a prepared transaction of the
    /// producer id whose data is at `data_epoch`: the decision never
    /// changes, and is what the transaction's producer asked for.
    pub(crate) fn txn_decided(
        &mut self,
        plan: &strom_transactions::coordinator::MarkerPlan,
        data_epoch: i16,
    ) {
        let key = (plan.producer_id, data_epoch);
        let workload = self.txn_workload();
        let earlier = workload.decisions.insert(key, plan.result);
        let truth = workload
            .transactions
            .iter()
            .find(|(_, truth)| truth.producer == producer(key.0, key.1))
            .map(|((index, number), truth)| (*index, *number, truth.intent));
        if earlier.is_some_and(|earlier| earlier != plan.result) {
            self.fail(&format!(
                "{}: the transaction of producer {} epoch {data_epoch} was {earlier:?}, now {:?}",
                plan.transactional_id, plan.producer_id, plan.result
            ));
        }
        let Some((index, number, intent)) = truth else {
            self.fail(&format!(
                "{}: decided {:?} for producer {} epoch {data_epoch}, which began no transaction",
                plan.transactional_id, plan.result, plan.producer_id
            ));
        };
        if intent != Some(plan.result) {
            self.fail(&format!(
                "txn-{index} #{number}: the coordinator adopted {:?}, its producer asked for {intent:?}",
                plan.result
            ));
        }
    }
}

fn producer(producer_id: i64, producer_epoch: i16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id,
        producer_epoch,
    }
}

// The read_committed readers.
impl Simulation {
    fn reader_tick(&mut self, partition: i32) {
        let now_ms = self.now_ms;
        let reader = &mut self
            .txn_workload()
            .readers
            .get_mut(&partition)
            .expect("reader");
        if let Some((_, sent_ms, _)) = reader.in_flight {
            if now_ms - sent_ms < CLIENT_TIMEOUT_MS {
                return;
            }
            reader.in_flight = None;
        }
        if now_ms < reader.next_attempt_ms {
            return;
        }
        let Some((leader, leader_epoch)) = self.txn_leader(partition) else {
            return;
        };
        let workload = self.txn_workload();
        let id = workload.request_id();
        let reader = workload.readers.get_mut(&partition).expect("reader");
        if leader_epoch < reader.newest_epoch {
            return;
        }
        reader.newest_epoch = leader_epoch;
        reader.in_flight = Some((id, now_ms, partition));
        let message = TxnMessage::Read {
            id,
            partition,
            leader_epoch,
            offset: reader.position,
        };
        self.send(Node::Client, Node::Broker(leader), Message::Txn(message));
    }

    fn read_answered(&mut self, id: u64, answer: Option<CommittedRead>) {
        let now_ms = self.now_ms;
        let workload = self.txn_workload();
        let Some((partition, reader)) = workload
            .readers
            .iter_mut()
            .find(|(_, reader)| reader.in_flight.is_some_and(|(sent, _, _)| sent == id))
        else {
            return;
        };
        let partition = *partition;
        reader.in_flight = None;
        reader.next_attempt_ms = now_ms + if answer.is_some() { 20 } else { 50 };
        let Some(answer) = answer else { return };
        let position = reader.position;
        let (records, next) = visible_records(&answer, position);
        if next > answer.last_stable_offset.max(position) {
            self.fail(&format!(
                "p{partition}: read_committed returned batches up to {next}, past the LSO {}",
                answer.last_stable_offset
            ));
        }
        for (offset, producer, value) in records {
            self.check_committed_read(partition, offset, producer, &value);
        }
        let reader = self
            .txn_workload()
            .readers
            .get_mut(&partition)
            .expect("reader");
        reader.position = reader.position.max(next);
        self.check_nothing_skipped(partition);
        // Now and then a reader starts again from the beginning.
        if self.rng.chance(10) {
            self.txn_workload()
                .readers
                .get_mut(&partition)
                .expect("reader")
                .position = 0;
        }
    }

    /// A record read_committed returned belongs to a transaction the
    /// coordinator committed, is the record its producer was acknowledged
    /// at that offset, and is read at no other offset.
    fn check_committed_read(
        &mut self,
        partition: i32,
        offset: i64,
        batch_producer: ProducerIdAndEpoch,
        value: &str,
    ) {
        let Some(key) = parse_label(value) else {
            self.fail(&format!(
                "p{partition}: unreadable record {value:?} at {offset}"
            ));
        };
        let workload = self.txn_workload();
        let Some(truth) = workload.transactions.get(&key) else {
            let problem = format!("p{partition}: {value} at {offset} belongs to no transaction");
            self.fail(&problem);
        };
        let decision = workload
            .decisions
            .get(&(truth.producer.producer_id, truth.producer.producer_epoch))
            .copied();
        let acked = truth
            .acked
            .iter()
            .any(|(p, at, label)| *p == partition && *at == offset && label == value);
        let reader = workload.readers.get_mut(&partition).expect("reader");
        let elsewhere = reader
            .read
            .iter()
            .find(|(at, label)| **at != offset && label.as_str() == value)
            .map(|(at, _)| *at);
        let earlier = reader.read.insert(offset, value.to_owned());
        let problem = if decision != Some(TransactionResult::Commit) {
            Some(format!(
                "a record of a transaction that is {decision:?} (None: open)"
            ))
        } else if batch_producer != truth.producer {
            Some(format!(
                "written by {batch_producer:?}, not {:?}",
                truth.producer
            ))
        } else if !acked {
            Some("a record its producer was not acknowledged there".to_owned())
        } else if let Some(at) = elsewhere {
            Some(format!("read again, first at {at}"))
        } else {
            earlier
                .filter(|earlier| earlier != value)
                .map(|earlier| format!("where {earlier} was read before"))
        };
        if let Some(problem) = problem {
            self.fail(&format!(
                "p{partition}: read_committed returned {value} at {offset}: {problem}"
            ));
        }
    }

    /// A committed transaction is visible entirely: every acknowledged
    /// record of a committed transaction below a reader's position was
    /// read there.
    fn check_nothing_skipped(&mut self, partition: i32) {
        let workload = self.txn_workload();
        let reader = &workload.readers[&partition];
        let mut missing = None;
        for ((index, number), truth) in &workload.transactions {
            let key = (truth.producer.producer_id, truth.producer.producer_epoch);
            if workload.decisions.get(&key) != Some(&TransactionResult::Commit) {
                continue;
            }
            for (p, offset, value) in &truth.acked {
                if *p == partition
                    && *offset < reader.position
                    && reader.read.get(offset) != Some(value)
                {
                    missing = Some(format!(
                        "p{partition}: committed txn-{index} #{number}'s {value} at {offset} was skipped by read_committed (reader at {}, read there {:?})",
                        reader.position,
                        reader.read.get(offset)
                    ));
                }
            }
        }
        if let Some(missing) = missing {
            self.fail(&missing);
        }
    }
}

/// The records a read_committed consumer keeps from `read`, from
/// `position` on: (offset, producer, value), and the offset after the
/// last batch. Aborted transactions are dropped as Kafka's consumer drops
/// them: a producer's data batches from the first offset of an aborted
/// transaction on, until its abort marker.
fn visible_records(
    read: &CommittedRead,
    position: i64,
) -> (Vec<(i64, ProducerIdAndEpoch, String)>, i64) {
    let mut aborted = read.aborted.clone();
    aborted.sort_by_key(|transaction| std::cmp::Reverse(transaction.first_offset));
    let mut aborting = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    let mut next = position;
    for batch in RecordBatches::new(read.records.clone()) {
        let batch: RecordBatch = batch.expect("the leader's batches parse");
        next = next.max(batch.next_offset());
        if batch.next_offset() <= position {
            continue;
        }
        while aborted
            .last()
            .is_some_and(|transaction| transaction.first_offset <= batch.last_offset())
        {
            let transaction = aborted.pop().expect("checked");
            aborting.insert(transaction.producer_id);
        }
        let attributes = batch.attributes();
        if attributes.is_control() {
            let marker = marker_of_control_batch(batch.as_bytes().clone()).expect("a marker");
            if marker.kind == MarkerKind::Abort {
                aborting.remove(&batch.producer_id());
            }
            continue;
        }
        if attributes.is_transactional() && aborting.contains(&batch.producer_id()) {
            continue;
        }
        let producer = producer(batch.producer_id(), batch.producer_epoch());
        for record in batch.records().expect("records").flatten() {
            let offset = record.offset(batch.base_offset());
            if offset < position {
                continue;
            }
            let value = String::from_utf8_lossy(record.value().unwrap_or_default()).into_owned();
            kept.push((offset, producer, value));
        }
    }
    (kept, next)
}

// The invariants of the workload.
impl Simulation {
    /// After every step: a leader's LSO never decreases at one epoch, and
    /// never passes the first record of a transaction the coordinator has
    /// not decided yet.
    pub(crate) fn check_txn_step_invariants(&mut self) {
        let offsets = self.leader_stable_offsets();
        let workload = self.txn_workload();
        let mut violations = Vec::new();
        for (key, lso) in &offsets {
            let (id, partition, epoch) = key;
            if let Some(seen) = workload.stable_offsets.insert(*key, *lso) {
                if seen > *lso {
                    violations.push(format!(
                        "the LSO of p{partition} on leader {id} at epoch {epoch} went back from {seen} to {lso}"
                    ));
                }
            }
        }
        for ((index, number), truth) in &workload.transactions {
            let key = (truth.producer.producer_id, truth.producer.producer_epoch);
            if workload.decisions.contains_key(&key) {
                continue;
            }
            for ((id, partition, epoch), lso) in &offsets {
                let first = truth
                    .acked
                    .iter()
                    .filter(|(p, _, _)| p == partition)
                    .map(|(_, offset, _)| *offset)
                    .min();
                if first.is_some_and(|first| *lso > first) {
                    violations.push(format!(
                        "the LSO {lso} of p{partition} on leader {id} at epoch {epoch} passed the first record ({first:?}) of open txn-{index} #{number}"
                    ));
                }
            }
        }
        if let Some(violation) = violations.first() {
            self.fail(violation);
        }
    }

    /// Whether every transaction ended and completed, and each reader read
    /// up to its leader's HW, which is its LSO.
    fn txn_settled(&mut self) -> bool {
        let workload = self.txn.as_deref().expect("workload");
        if workload
            .producers
            .iter()
            .any(|producer| producer.phase != Phase::Done)
        {
            return false;
        }
        if self.brokers.values().any(|broker| broker.txn.completing()) {
            return false;
        }
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
            let lso = replica.with_log(|log| log.last_stable_offset()).ok();
            lso == Some(high_watermark) && workload.readers[&partition].position == high_watermark
        })
    }

    /// At the end: every transaction was decided as its producer asked and
    /// completed, and every committed record was read once, at its offset.
    fn check_txn_final(&mut self) {
        let topic = self.image.topic_by_name(TOPIC).expect("the topic");
        let coordinator = topic
            .partition(TXN_STATE_PARTITION)
            .and_then(|state| state.leader)
            .unwrap_or_else(|| self.fail("no transaction coordinator at the end"));
        for metadata in self.brokers[&coordinator].txn.metadata() {
            if !matches!(
                metadata.state,
                TransactionState::CompleteCommit | TransactionState::CompleteAbort
            ) {
                self.fail(&format!(
                    "{} is {:?} at the end",
                    metadata.transactional_id, metadata.state
                ));
            }
        }
        let workload = self.txn.as_deref().expect("workload");
        for ((index, number), truth) in &workload.transactions {
            let key = (truth.producer.producer_id, truth.producer.producer_epoch);
            let decision = workload.decisions.get(&key);
            if decision.is_none() || decision != truth.intent.as_ref() {
                self.fail(&format!(
                    "txn-{index} #{number}: decided {decision:?}, asked {:?}",
                    truth.intent
                ));
            }
        }
        for partition in 0..DATA_PARTITIONS {
            self.check_nothing_skipped(partition);
        }
    }
}

impl Simulation {
    /// Where the producers, readers and leaders are (for a failure).
    fn txn_summary(&self) -> String {
        let workload = self.txn.as_deref().expect("workload");
        let producers: Vec<String> = workload
            .producers
            .iter()
            .map(|p| {
                format!(
                    "{} #{} {:?} {:?} written {} failures {}",
                    p.transactional_id, p.number, p.phase, p.producer, p.written, p.failures
                )
            })
            .collect();
        let readers: Vec<String> = workload
            .readers
            .iter()
            .map(|(partition, reader)| format!("p{partition} reader at {}", reader.position))
            .collect();
        let leaders: Vec<String> = self
            .leader_stable_offsets()
            .iter()
            .map(|((id, partition, epoch), lso)| {
                format!("p{partition} on {id} at {epoch}: LSO {lso}")
            })
            .collect();
        let completing: Vec<i32> = self
            .brokers
            .iter()
            .filter(|(_, broker)| broker.txn.completing())
            .map(|(id, _)| *id)
            .collect();
        format!("{producers:?} {readers:?} {leaders:?}, completing on {completing:?}")
    }
}

/// What a seed's transactional run did.
#[derive(Default)]
struct TxnOutcome {
    committed: usize,
    aborted: usize,
    late_markers: u32,
    late_end_txns: u32,
    coordinator_loads: u32,
}

fn run_transactional_seed(seed: u64, steps: u32, late_markers: bool) -> TxnOutcome {
    let mut simulation = Simulation::new(seed);
    simulation.producers.clear();
    simulation.txn = Some(Box::new(TxnWorkload::new(late_markers)));
    simulation.run_with_faults(steps);
    let mut calm_steps = 0;
    loop {
        simulation.step();
        calm_steps += 1;
        if simulation.txn_settled() && simulation.cluster_settled() && calm_steps > 400 {
            break;
        }
        if calm_steps > 20_000 {
            let state = simulation.txn_summary();
            simulation.fail(&format!(
                "the transactions did not settle after the faults stopped: {state}"
            ));
        }
    }
    simulation.check_final();
    simulation.check_txn_final();
    let workload = simulation.txn_workload();
    let decided = |result| {
        workload
            .decisions
            .values()
            .filter(|decision| **decision == result)
            .count()
    };
    TxnOutcome {
        committed: decided(TransactionResult::Commit),
        aborted: decided(TransactionResult::Abort),
        late_markers: workload.late_markers,
        late_end_txns: workload.late_end_txns,
        coordinator_loads: workload.coordinator_loads,
    }
}

/// Runs the transactional workload over `STROM_REPLICATION_SIM_TXN_SEEDS`
/// seeds (the other variables as for the idempotent workload).
fn run_transactional_seeds(default_seeds: u64, late_markers: bool) -> TxnOutcome {
    let seeds = env_u64("STROM_REPLICATION_SIM_TXN_SEEDS", default_seeds);
    let first = env_u64("STROM_REPLICATION_SIM_FIRST_SEED", 1);
    let steps = env_u64("STROM_REPLICATION_SIM_STEPS", 1_500) as u32;
    let keep_going = env_u64("STROM_REPLICATION_SIM_KEEP_GOING", 0) == 1;
    let budget = Duration::from_secs(env_u64("STROM_REPLICATION_SIM_TIME_BUDGET_S", 0));
    let started = Instant::now();
    let mut total = TxnOutcome::default();
    let mut failed = Vec::new();
    let mut ran = 0;
    for seed in first..first + seeds {
        if !budget.is_zero() && started.elapsed() >= budget {
            break;
        }
        ran += 1;
        let run = || run_transactional_seed(seed, steps, late_markers);
        let outcome = if keep_going {
            match std::panic::catch_unwind(run) {
                Ok(outcome) => outcome,
                Err(_) => {
                    failed.push(seed);
                    continue;
                }
            }
        } else {
            run()
        };
        total.committed += outcome.committed;
        total.aborted += outcome.aborted;
        total.late_markers += outcome.late_markers;
        total.late_end_txns += outcome.late_end_txns;
        total.coordinator_loads += outcome.coordinator_loads;
    }
    println!(
        "{ran} transactional seeds from {first} ({} s): failed {failed:?}; {} committed and {} aborted transactions, {} late markers and {} late EndTxn delivered on purpose, {} coordinator loads",
        started.elapsed().as_secs(),
        total.committed,
        total.aborted,
        total.late_markers,
        total.late_end_txns,
        total.coordinator_loads
    );
    assert!(failed.is_empty(), "seeds {failed:?} broke an invariant");
    assert!(ran > 0, "the time budget ran out before the first seed");
    assert!(total.coordinator_loads as u64 > ran);
    total
}

#[test]
fn transactions_keep_their_invariants_under_seeded_faults() {
    let total = run_transactional_seeds(10, false);
    assert!(total.committed > 0 && total.aborted > 0);
    assert!(total.late_end_txns > 0);
}

/// Delivers each producer's previous marker again once its next
/// transaction has a record in the partition: with transaction version 2
/// that marker carries the epoch the current transaction writes at, and
/// the storage must refuse it (Kafka refuses a version-2 marker whose
/// epoch is not above the producer's while a transaction is open) instead
/// of ending the current transaction with the previous one's outcome.
#[test]
fn late_markers_never_end_the_next_transaction() {
    let total = run_transactional_seeds(10, true);
    assert!(total.late_markers > 0);
}
