//! The brokers' side of the transactional workload.
//!
//! Partition [`TXN_STATE_PARTITION`] of the simulated topic stands for the
//! `__transaction_state` partition of the workload's transactional ids:
//! whichever broker leads it hosts the transaction coordinator core
//! (`strom_transactions::coordinator::CoordinatorCore`, transaction
//! version 2), loads it from its own log when it starts leading at an
//! epoch (the leader epoch is the coordinator epoch), and unloads it when
//! it stops. Every write the core decides is appended there with
//! `acks=all` and adopted (`finish_write`) once the HW passes it at the
//! epoch it was written at, or refused when it cannot be; the producer is
//! answered then. A prepared transaction's markers go to the data
//! partitions' leaders as `WriteMarker` messages through the simulated
//! network, retried until each leader answers that its marker is
//! replicated; then the completion is written.
//!
//! A data partition leader appends transactional batches and markers
//! (`Partition::append_marker_flushing_here`) and answers once the HW
//! passes them, and serves read_committed reads
//! (`Partition::read_slice_isolated`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strom_broker::groups::collect_batch;
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};
use strom_replication::{AckStatus, Partition, RoleView};
use strom_storage::marker::{MarkerKind, TransactionMarker};
use strom_storage::txn_index::AbortedTransaction;
use strom_transactions::coordinator::{
    Begin, CoordinatorConfig, CoordinatorCore, EndRequest, InitRequest, MarkerPlan, PendingWrite,
};
use strom_transactions::metadata::{
    ProducerIdAndEpoch, TopicPartition as TxnTopicPartition, TransactionMetadata,
    TransactionVersion,
};
use strom_transactions::state::{TransactionResult, TransactionState};

use super::{Message, Node, Simulation, PRODUCE_TIMEOUT_MS, TOPIC};

/// The partition of the simulated topic that holds `__transaction_state`
/// in the transactional workload (the offsets partition in the other).
pub(crate) const TXN_STATE_PARTITION: i32 = super::DATA_PARTITIONS;
/// The `__transaction_state` partition as the core numbers it: one
/// partition, so every transactional id maps to it.
const CORE_PARTITION: i32 = 0;
/// Java's `String.hashCode` of an id is irrelevant with one partition.
const ID_HASH: i32 = 0;
/// Long enough that the coordinator never aborts on a timeout (the
/// workload's producers end every transaction they begin).
const TRANSACTION_TIMEOUT_MS: i32 = 600_000;
/// How often a prepared transaction's missing markers are sent again.
const MARKER_RETRY_MS: i64 = 100;

/// A request from a transactional producer to its coordinator.
#[derive(Debug, Clone)]
pub(crate) enum CoordinatorRequest {
    InitProducerId,
    AddPartitions {
        producer: ProducerIdAndEpoch,
        partitions: Vec<i32>,
    },
    EndTxn {
        producer: ProducerIdAndEpoch,
        result: TransactionResult,
    },
}

/// What a read_committed read returned: the batches below the LSO, the
/// aborted transactions among them, and the LSO.
#[derive(Debug, Clone)]
pub(crate) struct CommittedRead {
    pub(crate) records: Bytes,
    pub(crate) aborted: Vec<AbortedTransaction>,
    pub(crate) last_stable_offset: i64,
}

/// Messages of the transactional workload.
#[derive(Debug, Clone)]
pub(crate) enum TxnMessage {
    Coordinator {
        id: u64,
        transactional_id: String,
        request: CoordinatorRequest,
    },
    CoordinatorReply {
        id: u64,
        /// The adopted metadata's producer id and epoch, or the refusal.
        answer: Result<ProducerIdAndEpoch, String>,
    },
    Produce {
        id: u64,
        partition: i32,
        batch: Bytes,
    },
    ProduceReply {
        id: u64,
        /// The offset the record was appended at, once replicated.
        offset: Result<i64, String>,
    },
    WriteMarker {
        partition: i32,
        marker: TransactionMarker,
    },
    WriteMarkerReply {
        partition: i32,
        marker: TransactionMarker,
        written: bool,
    },
    Read {
        id: u64,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
    },
    ReadReply {
        id: u64,
        answer: Option<CommittedRead>,
    },
}

/// A write to `__transaction_state` waiting for the HW, and whom to answer.
struct StateWait {
    write: PendingWrite,
    leader_epoch: i32,
    required_offset: i64,
    deadline_ms: i64,
    reply_to: Option<u64>,
}

/// An append on a data partition leader waiting for the HW.
struct DataWait {
    partition: i32,
    leader_epoch: i32,
    required_offset: i64,
    deadline_ms: i64,
    reply: DataReply,
}

enum DataReply {
    Produce { id: u64, offset: i64 },
    Marker { to: Node, marker: TransactionMarker },
}

/// A prepared transaction whose markers are being written.
struct Completion {
    plan: MarkerPlan,
    remaining: BTreeSet<i32>,
    next_send_ms: i64,
}

/// What a broker runs for the transactional workload.
pub(crate) struct TxnHost {
    core: CoordinatorCore,
    /// The leader epoch (coordinator epoch) the partition was loaded at.
    loaded_at: Option<i32>,
    state_waits: Vec<StateWait>,
    completions: Vec<Completion>,
    data_waits: Vec<DataWait>,
}

impl TxnHost {
    pub(crate) fn new() -> TxnHost {
        TxnHost {
            core: CoordinatorCore::new(CoordinatorConfig {
                num_partitions: 1,
                transaction_version: TransactionVersion::V2,
                ..CoordinatorConfig::default()
            }),
            loaded_at: None,
            state_waits: Vec::new(),
            completions: Vec::new(),
            data_waits: Vec::new(),
        }
    }

    /// The adopted metadata of every transactional id (for the checks).
    pub(crate) fn metadata(&self) -> Vec<TransactionMetadata> {
        if self.loaded_at.is_none() {
            return Vec::new();
        }
        self.core.all_metadata().cloned().collect()
    }

    /// Whether prepared transactions still wait for their markers.
    pub(crate) fn completing(&self) -> bool {
        !self.completions.is_empty() || !self.state_waits.is_empty()
    }
}

/// The marker a plan writes.
pub(crate) fn marker_of(plan: &MarkerPlan) -> TransactionMarker {
    TransactionMarker {
        bumps_epoch: plan.transaction_version.supports_epoch_bump(),
        producer_id: plan.producer_id,
        producer_epoch: plan.producer_epoch,
        coordinator_epoch: plan.coordinator_epoch,
        kind: match plan.result {
            TransactionResult::Commit => MarkerKind::Commit,
            TransactionResult::Abort => MarkerKind::Abort,
        },
    }
}

/// Every keyed record of `partition`'s log up to its end, in order.
fn state_records(partition: &Partition) -> Vec<(Bytes, Option<Bytes>)> {
    let bytes = partition
        .with_log(|log| {
            let end = log.log_end_offset();
            log.read(log.log_start_offset(), 1 << 24, end, true)
                .ok()
                .and_then(|read| read.records)
                .and_then(|slice| slice.to_bytes().ok())
        })
        .ok()
        .flatten();
    let mut found = Vec::new();
    for batch in RecordBatches::new(bytes.unwrap_or_default()).flatten() {
        if !batch.attributes().is_control() {
            let _ = collect_batch(&batch, 0, usize::MAX, &mut found);
        }
    }
    found
        .into_iter()
        .map(|stored| (stored.record.key, stored.record.value))
        .collect()
}

fn state_batch(write: &PendingWrite, now_ms: i64) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder
        .append(now_ms, Some(&write.key), write.value.as_deref(), &[])
        .expect("a state record fits a batch");
    builder.build().expect("the batch builds")
}

// The coordinator.
impl Simulation {
    /// Loads `__transaction_state` when the broker starts leading it at an
    /// epoch (resuming the markers of prepared transactions), unloads it
    /// when it stops.
    pub(crate) fn txn_apply_image(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let role = broker
            .partitions
            .get(&TXN_STATE_PARTITION)
            .map(|partition| partition.role_view());
        let host = &mut broker.txn;
        let note = match role {
            Some(RoleView::Leader { leader_epoch }) if host.loaded_at != Some(leader_epoch) => {
                let records = state_records(&broker.partitions[&TXN_STATE_PARTITION]);
                host.core.begin_loading(CORE_PARTITION, leader_epoch);
                host.completions.clear();
                let summary = host
                    .core
                    .complete_load(
                        CORE_PARTITION,
                        leader_epoch,
                        records
                            .iter()
                            .map(|(key, value)| (key.as_ref(), value.as_deref())),
                    )
                    .unwrap_or_else(|error| {
                        panic!("seed {}: the coordinator cannot load: {error}", self.seed)
                    });
                host.loaded_at = Some(leader_epoch);
                let plans = summary.to_complete;
                let note = format!(
                    "broker {id}: txn coordinator loaded {} ids at epoch {leader_epoch}, {} to complete",
                    summary.transactional_ids,
                    plans.len()
                );
                for plan in plans {
                    self.txn_decided(&plan, plan.producer_epoch - 1);
                    self.start_completion(id, plan, now_ms);
                }
                self.txn_workload().coordinator_loads += 1;
                note
            }
            Some(RoleView::Leader { .. }) => return,
            _ if host.loaded_at.is_some() => {
                host.core.unload(CORE_PARTITION);
                host.loaded_at = None;
                host.completions.clear();
                format!("broker {id}: txn coordinator unloaded")
            }
            _ => return,
        };
        self.note(note);
    }

    fn start_completion(&mut self, id: i32, plan: MarkerPlan, now_ms: i64) {
        let host = &mut self.brokers.get_mut(&id).expect("broker").txn;
        let remaining = plan
            .partitions
            .iter()
            .map(|partition| partition.partition)
            .collect();
        host.completions.push(Completion {
            plan,
            remaining,
            next_send_ms: now_ms,
        });
    }

    /// A producer's request to the coordinator: refused, answered at once,
    /// or answered once its write is adopted.
    pub(crate) fn txn_coordinate(
        &mut self,
        id: i32,
        request_id: u64,
        transactional_id: &str,
        request: CoordinatorRequest,
    ) {
        let now_ms = self.now_ms;
        let mut allocated = None;
        let begun = loop {
            let core = &mut self.brokers.get_mut(&id).expect("broker").txn.core;
            let begun = match &request {
                CoordinatorRequest::InitProducerId => {
                    let init = InitRequest {
                        transaction_timeout_ms: TRANSACTION_TIMEOUT_MS,
                        expected: None,
                    };
                    core.begin_init_producer_id(transactional_id, ID_HASH, init, now_ms, allocated)
                }
                CoordinatorRequest::AddPartitions {
                    producer,
                    partitions,
                } => {
                    let partitions: BTreeSet<TxnTopicPartition> =
                        partitions.iter().map(|p| txn_partition(*p)).collect();
                    core.begin_add_partitions(
                        transactional_id,
                        ID_HASH,
                        *producer,
                        &partitions,
                        TransactionVersion::V2,
                        now_ms,
                    )
                }
                CoordinatorRequest::EndTxn { producer, result } => {
                    let end = EndRequest {
                        producer: *producer,
                        result: *result,
                        client_transaction_version: TransactionVersion::V2,
                    };
                    core.begin_end_transaction(transactional_id, ID_HASH, end, now_ms, None)
                }
            };
            match begun {
                Ok(Begin::NeedProducerId) if allocated.is_none() => {
                    let workload = self.txn_workload();
                    workload.next_producer_id += 1;
                    allocated = Some(workload.next_producer_id);
                }
                other => break other,
            }
        };
        let answer = match begun {
            Ok(Begin::Done(metadata)) => Ok(producer_of(&metadata)),
            Ok(Begin::Write(write) | Begin::WriteFence(write)) => {
                return self.write_state(id, write, Some(request_id));
            }
            Ok(Begin::NeedProducerId) => Err("no producer id".to_owned()),
            Err(error) => Err(error.to_string()),
        };
        let reply = TxnMessage::CoordinatorReply {
            id: request_id,
            answer,
        };
        self.send(Node::Broker(id), Node::Client, Message::Txn(reply));
    }

    /// Appends `write` to `__transaction_state` (acks=all); it is adopted
    /// or refused in [`Self::txn_broker_tick`].
    fn write_state(&mut self, id: i32, write: PendingWrite, reply_to: Option<u64>) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let appended = broker
            .partitions
            .get(&TXN_STATE_PARTITION)
            .filter(|_| broker.txn.loaded_at == Some(write.coordinator_epoch))
            .map(|partition| partition.append(state_batch(&write, now_ms), true, now_ms));
        match appended {
            Some(Ok(appended)) if appended.leader_epoch == write.coordinator_epoch => {
                broker.txn.state_waits.push(StateWait {
                    write,
                    leader_epoch: appended.leader_epoch,
                    required_offset: appended.info.last_offset + 1,
                    deadline_ms: now_ms + PRODUCE_TIMEOUT_MS,
                    reply_to,
                });
            }
            _ => {
                let refused = broker.txn.core.finish_write(&write, false);
                self.state_written(id, write, refused, reply_to);
            }
        }
    }

    /// What an adopted (or refused) write leads to: the producer's answer,
    /// and the markers of a prepared transaction.
    fn state_written(
        &mut self,
        id: i32,
        write: PendingWrite,
        adopted: Result<TransactionMetadata, strom_transactions::error::CoordinatorError>,
        reply_to: Option<u64>,
    ) {
        let answer = match adopted {
            Ok(metadata) => {
                if let Some(plan) = MarkerPlan::of(&metadata, write.coordinator_epoch) {
                    self.txn_decided(&plan, metadata.last_producer_epoch);
                    self.note(format!(
                        "broker {id}: {} prepared {:?} of producer {} epoch {}",
                        metadata.transactional_id,
                        plan.result,
                        plan.producer_id,
                        metadata.last_producer_epoch
                    ));
                    self.start_completion(id, plan, self.now_ms);
                }
                if matches!(
                    metadata.state,
                    TransactionState::CompleteCommit | TransactionState::CompleteAbort
                ) {
                    self.txn_workload().completed += 1;
                }
                Ok(producer_of(&metadata))
            }
            Err(error) => Err(error.to_string()),
        };
        if let Some(request_id) = reply_to {
            let reply = TxnMessage::CoordinatorReply {
                id: request_id,
                answer,
            };
            self.send(Node::Broker(id), Node::Client, Message::Txn(reply));
        }
    }

    /// Sends the markers still missing, and writes the completion of a
    /// transaction whose markers are all written.
    fn drive_completions(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let Some(image) = broker.image.clone() else {
            return;
        };
        let mut sends = Vec::new();
        let mut completes = Vec::new();
        let host = &mut broker.txn;
        let core = &host.core;
        // A plan no longer prepared (its completion adopted, or the
        // coordinator moved on) is dropped.
        host.completions.retain(|completion| {
            core.metadata(&completion.plan.transactional_id)
                .and_then(|metadata| MarkerPlan::of(metadata, completion.plan.coordinator_epoch))
                .is_some_and(|current| current == completion.plan)
        });
        for completion in &mut host.completions {
            // A completion write in flight is adopted or refused first.
            if completion.next_send_ms > now_ms
                || core.is_pending(&completion.plan.transactional_id)
            {
                continue;
            }
            completion.next_send_ms = now_ms + MARKER_RETRY_MS;
            if completion.remaining.is_empty() {
                completes.push(completion.plan.clone());
                continue;
            }
            for partition in &completion.remaining {
                let leader = image
                    .topic_by_name(TOPIC)
                    .and_then(|topic| topic.partition(*partition)?.leader);
                if let Some(leader) = leader {
                    sends.push((leader, *partition, marker_of(&completion.plan)));
                }
            }
        }
        for (leader, partition, marker) in sends {
            let key = (marker.producer_id, marker.producer_epoch, partition);
            self.txn_workload().markers_sent.insert(key, marker);
            let message = TxnMessage::WriteMarker { partition, marker };
            self.send(
                Node::Broker(id),
                Node::Broker(leader),
                Message::Txn(message),
            );
        }
        for plan in completes {
            self.complete(id, &plan);
        }
    }

    fn complete(&mut self, id: i32, plan: &MarkerPlan) {
        let now_ms = self.now_ms;
        let host = &mut self.brokers.get_mut(&id).expect("broker").txn;
        match host.core.begin_complete(plan, now_ms) {
            Ok(write) => self.write_state(id, write, None),
            // Retried on a later tick.
            Err(strom_transactions::error::CoordinatorError::Concurrent { .. }) => {}
            Err(_) => host
                .completions
                .retain(|completion| &completion.plan != plan),
        }
    }

    /// A data leader's answer to a marker: the partition is done if the
    /// marker is one of a plan this coordinator is completing.
    fn marker_answered(&mut self, id: i32, partition: i32, marker: TransactionMarker) {
        let host = &mut self.brokers.get_mut(&id).expect("broker").txn;
        for completion in &mut host.completions {
            if marker_of(&completion.plan) == marker {
                completion.remaining.remove(&partition);
            }
        }
    }

    /// Adopts or refuses the `__transaction_state` writes whose fate is
    /// known, answers the appends on data partitions the HW passed, and
    /// drives the markers.
    pub(crate) fn txn_broker_tick(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let state = broker.partitions.get(&TXN_STATE_PARTITION);
        let mut decided = Vec::new();
        broker.txn.state_waits.retain(|wait| {
            let status = state.map(|p| p.ack_status(wait.required_offset, wait.leader_epoch));
            let appended = match status {
                Some(AckStatus::Committed) => true,
                Some(AckStatus::Waiting) if now_ms < wait.deadline_ms => return true,
                _ => false,
            };
            decided.push((wait.write.clone(), appended, wait.reply_to));
            false
        });
        for (write, appended, reply_to) in decided {
            let host = &mut self.brokers.get_mut(&id).expect("broker").txn;
            let adopted = host.core.finish_write(&write, appended);
            self.state_written(id, write, adopted, reply_to);
        }
        self.answer_data_waits(id);
        self.drive_completions(id);
    }

    fn answer_data_waits(&mut self, id: i32) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let partitions = &broker.partitions;
        let mut answers = Vec::new();
        broker.txn.data_waits.retain(|wait| {
            let status = partitions
                .get(&wait.partition)
                .map(|p| p.ack_status(wait.required_offset, wait.leader_epoch));
            let committed = match status {
                Some(AckStatus::Committed) => true,
                Some(AckStatus::Waiting) if now_ms < wait.deadline_ms => return true,
                _ => false,
            };
            let (to, message) = match wait.reply {
                DataReply::Produce { id, offset } => (
                    Node::Client,
                    TxnMessage::ProduceReply {
                        id,
                        offset: if committed {
                            Ok(offset)
                        } else {
                            Err(format!("not replicated: {status:?}"))
                        },
                    },
                ),
                DataReply::Marker { to, marker } => (
                    to,
                    TxnMessage::WriteMarkerReply {
                        partition: wait.partition,
                        marker,
                        written: committed,
                    },
                ),
            };
            answers.push((to, message));
            false
        });
        for (to, message) in answers {
            self.send(Node::Broker(id), to, Message::Txn(message));
        }
    }
}

fn producer_of(metadata: &TransactionMetadata) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: metadata.producer_id,
        producer_epoch: metadata.producer_epoch,
    }
}

pub(crate) fn txn_partition(partition: i32) -> TxnTopicPartition {
    TxnTopicPartition {
        topic: TOPIC.to_owned(),
        partition,
    }
}

// The data partitions' leaders.
impl Simulation {
    pub(crate) fn txn_broker_receives(&mut self, id: i32, from: Node, message: TxnMessage) {
        match message {
            TxnMessage::Coordinator {
                id: request_id,
                transactional_id,
                request,
            } => self.txn_coordinate(id, request_id, &transactional_id, request),
            TxnMessage::Produce {
                id: request_id,
                partition,
                batch,
            } => self.txn_produce(id, request_id, partition, batch),
            TxnMessage::WriteMarker { partition, marker } => {
                self.write_marker(id, from, partition, marker)
            }
            TxnMessage::WriteMarkerReply {
                partition,
                marker,
                written: true,
            } => self.marker_answered(id, partition, marker),
            TxnMessage::Read {
                id: request_id,
                partition,
                leader_epoch,
                offset,
            } => {
                let answer = self.read_committed(id, partition, leader_epoch, offset);
                let reply = TxnMessage::ReadReply {
                    id: request_id,
                    answer,
                };
                self.send(Node::Broker(id), from, Message::Txn(reply));
            }
            _ => {}
        }
    }

    fn txn_produce(&mut self, id: i32, request_id: u64, partition: i32, batch: Bytes) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let appended = broker
            .partitions
            .get(&partition)
            .map(|replica| replica.append(batch, true, now_ms));
        match appended {
            Some(Ok(appended)) => broker.txn.data_waits.push(DataWait {
                partition,
                leader_epoch: appended.leader_epoch,
                required_offset: appended.info.last_offset + 1,
                deadline_ms: now_ms + PRODUCE_TIMEOUT_MS,
                reply: DataReply::Produce {
                    id: request_id,
                    offset: appended.info.first_offset,
                },
            }),
            refused => {
                let reason = match refused {
                    Some(Err(error)) => error.to_string(),
                    _ => "not hosted here".to_owned(),
                };
                let reply = TxnMessage::ProduceReply {
                    id: request_id,
                    offset: Err(reason),
                };
                self.send(Node::Broker(id), Node::Client, Message::Txn(reply));
            }
        }
    }

    /// WriteTxnMarkers for one partition: appended as leader and answered
    /// once replicated; a refusal is answered at once.
    fn write_marker(&mut self, id: i32, from: Node, partition: i32, marker: TransactionMarker) {
        let now_ms = self.now_ms;
        let broker = self.brokers.get_mut(&id).expect("broker");
        let appended = broker
            .partitions
            .get(&partition)
            .map(|replica| replica.append_marker_flushing_here(&marker, now_ms));
        let note = match appended {
            Some(Ok(appended)) => {
                broker.txn.data_waits.push(DataWait {
                    partition,
                    leader_epoch: appended.leader_epoch,
                    required_offset: appended.info.last_offset + 1,
                    deadline_ms: now_ms + PRODUCE_TIMEOUT_MS,
                    reply: DataReply::Marker { to: from, marker },
                });
                format!(
                    "broker {id}: p{partition} {:?} marker of {} epoch {} at {}",
                    marker.kind,
                    marker.producer_id,
                    marker.producer_epoch,
                    appended.info.first_offset
                )
            }
            refused => {
                let reply = TxnMessage::WriteMarkerReply {
                    partition,
                    marker,
                    written: false,
                };
                self.send(Node::Broker(id), from, Message::Txn(reply));
                let Some(Err(error)) = refused else { return };
                format!(
                    "broker {id}: p{partition} marker of {} epoch {} refused: {error}",
                    marker.producer_id, marker.producer_epoch
                )
            }
        };
        self.note(note);
    }

    /// A read_committed fetch from the leader at the reader's epoch.
    fn read_committed(
        &self,
        id: i32,
        partition: i32,
        leader_epoch: i32,
        offset: i64,
    ) -> Option<CommittedRead> {
        let replica = self.brokers[&id].partitions.get(&partition)?;
        if replica.role_view() != (RoleView::Leader { leader_epoch }) {
            return None;
        }
        let read = replica
            .read_slice_isolated(offset, 16 * 1024, true, true)
            .ok()?;
        let records = match read.records {
            Some(slice) => slice.to_bytes().ok()?,
            None => Bytes::new(),
        };
        Some(CommittedRead {
            records,
            aborted: read.aborted_transactions.unwrap_or_default(),
            last_stable_offset: read.last_stable_offset,
        })
    }

    /// The last stable offset of every data partition led by a live
    /// broker, by (broker, partition, leader epoch).
    pub(crate) fn leader_stable_offsets(&self) -> BTreeMap<(i32, i32, i32), i64> {
        let mut offsets = BTreeMap::new();
        for (id, broker) in &self.brokers {
            if !broker.alive {
                continue;
            }
            for (index, partition) in &broker.partitions {
                if *index == TXN_STATE_PARTITION {
                    continue;
                }
                if let RoleView::Leader { leader_epoch } = partition.role_view() {
                    if let Ok(lso) = partition.with_log(|log| log.last_stable_offset()) {
                        offsets.insert((*id, *index, leader_epoch), lso);
                    }
                }
            }
        }
        offsets
    }
}
