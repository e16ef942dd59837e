//! The transaction coordinator's state for every transactional id of the
//! `__transaction_state` partitions this broker leads (Kafka's
//! `TransactionStateManager`), sans-IO.
//!
//! A request for an id goes through two steps. `begin_*` checks that the
//! id's partition is loaded here, computes the transition with
//! [`TransactionMetadata`] and, when something must be written, marks the
//! id pending and returns a [`PendingWrite`]: the record to append to
//! `__transaction_state`. Until [`CoordinatorCore::finish_write`] is called
//! with the outcome of that append, every other request for the id is
//! answered `CONCURRENT_TRANSACTIONS`, as Kafka does with its
//! `pendingState`. A write is adopted only if the partition is still
//! loaded at the coordinator epoch it was made at: a coordinator that lost
//! its partition meanwhile answers `NOT_COORDINATOR`.
//!
//! The coordinator epoch is the leader epoch of the `__transaction_state`
//! partition; markers carry it, and partition leaders refuse markers from
//! an older coordinator.

use std::collections::{BTreeSet, HashMap};

use crate::error::{CoordinatorError, DecodeError};
use crate::log::{encode_key, TransactionLogRecord};
use crate::metadata::{
    InitProducerId, ProducerIdAndEpoch, TopicPartition, TransactionMetadata, TransactionVersion,
    Transit,
};
use crate::state::{TransactionResult, TransactionState};

/// The coordinator's settings (broker properties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// `transaction.state.log.num.partitions` (default 50).
    pub num_partitions: i32,
    /// `transaction.max.timeout.ms` (default 900000).
    pub max_transaction_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (default 7 days).
    pub transactional_id_expiration_ms: i64,
    /// The cluster's `transaction.version`: the protocol with which the
    /// coordinator aborts transactions on its own (fences, timeouts) and
    /// the `__transaction_state` value version it writes.
    pub transaction_version: TransactionVersion,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            num_partitions: 50,
            max_transaction_timeout_ms: 900_000,
            transactional_id_expiration_ms: 7 * 24 * 60 * 60 * 1000,
            transaction_version: TransactionVersion::V1,
        }
    }
}

/// Kafka's placement of a transactional id (`TransactionStateManager`'s
/// `partitionFor`): `Utils.abs(hash) % n`, with `hash` Java's
/// `String.hashCode` of the id (the caller supplies it) and `Utils.abs`
/// mapping `i32::MIN` to 0, so that a `__transaction_state` written by
/// Kafka places every id on the same partition.
pub fn partition_for(hash: i32, num_partitions: i32) -> i32 {
    assert!(num_partitions > 0, "the partition count must be positive");
    hash.checked_abs().unwrap_or(0) % num_partitions
}

/// Whether a `__transaction_state` partition is being loaded or served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionStatus {
    /// Its records are being read; requests get `COORDINATOR_LOAD_IN_PROGRESS`.
    Loading {
        /// The coordinator epoch it is loaded at.
        coordinator_epoch: i32,
    },
    /// Served at this coordinator epoch.
    Loaded {
        /// The coordinator epoch.
        coordinator_epoch: i32,
    },
}

/// One transactional id: its adopted metadata and the transit being written.
#[derive(Debug, Clone)]
struct Entry {
    partition: i32,
    metadata: TransactionMetadata,
    /// The metadata being written, and whether the id had no adopted
    /// metadata before (a write that fails then removes it).
    pending: Option<(TransactionMetadata, bool)>,
}

/// A record to append to `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWrite {
    /// The transactional id.
    pub transactional_id: String,
    /// The `__transaction_state` partition.
    pub partition: i32,
    /// The coordinator epoch the write was decided at.
    pub coordinator_epoch: i32,
    /// The record's key.
    pub key: Vec<u8>,
    /// The record's value, `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The metadata the id has once the write is adopted.
    pub metadata: TransactionMetadata,
}

/// What a request leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// Append this record; the request is answered once it is adopted.
    Write(PendingWrite),
    /// Append this record, which aborts a fenced producer's transaction;
    /// the request (InitProducerId) is answered `CONCURRENT_TRANSACTIONS`.
    WriteFence(PendingWrite),
    /// Nothing to write: the request succeeds with this metadata.
    Done(TransactionMetadata),
    /// A new producer id is needed first: allocate one and call again
    /// with it.
    NeedProducerId,
}

/// The markers of a prepared transaction, to be written to its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerPlan {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id the markers are written for.
    pub producer_id: i64,
    /// The producer epoch the markers carry.
    pub producer_epoch: i16,
    /// The coordinator epoch the markers carry.
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub result: TransactionResult,
    /// The partitions that need a marker.
    pub partitions: BTreeSet<TopicPartition>,
    /// The transaction version of the transaction (the markers' format).
    pub transaction_version: TransactionVersion,
}

impl MarkerPlan {
    /// The plan of prepared metadata (`PrepareCommit` or `PrepareAbort`).
    pub fn of(metadata: &TransactionMetadata, coordinator_epoch: i32) -> Option<MarkerPlan> {
        let result = match metadata.state {
            TransactionState::PrepareCommit => TransactionResult::Commit,
            TransactionState::PrepareAbort => TransactionResult::Abort,
            _ => return None,
        };
        Some(MarkerPlan {
            transactional_id: metadata.transactional_id.clone(),
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            coordinator_epoch,
            result,
            partitions: metadata.partitions.clone(),
            transaction_version: metadata.client_transaction_version,
        })
    }
}

/// What loading a partition found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadSummary {
    /// Transactional ids loaded.
    pub transactional_ids: usize,
    /// Records skipped (unknown versions, as Kafka skips them).
    pub skipped_records: usize,
    /// Transactions found prepared: their markers must be written and
    /// the transactions completed.
    pub to_complete: Vec<MarkerPlan>,
}

/// The transaction coordinator's state (see the module doc).
#[derive(Debug)]
pub struct CoordinatorCore {
    config: CoordinatorConfig,
    partitions: HashMap<i32, PartitionStatus>,
    ids: HashMap<String, Entry>,
}

impl CoordinatorCore {
    /// A coordinator that serves no partition yet.
    pub fn new(config: CoordinatorConfig) -> CoordinatorCore {
        CoordinatorCore {
            config,
            partitions: HashMap::new(),
            ids: HashMap::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The status of `partition`, if this coordinator has it.
    pub fn partition_status(&self, partition: i32) -> Option<PartitionStatus> {
        self.partitions.get(&partition).copied()
    }

    /// The coordinator epoch `partition` is served at, or why not.
    pub fn check_partition(&self, partition: i32) -> Result<i32, CoordinatorError> {
        match self.partitions.get(&partition) {
            Some(PartitionStatus::Loaded { coordinator_epoch }) => Ok(*coordinator_epoch),
            Some(PartitionStatus::Loading { .. }) => {
                Err(CoordinatorError::LoadInProgress { partition })
            }
            None => Err(CoordinatorError::NotCoordinator { partition }),
        }
    }

    /// Starts loading `partition` at `coordinator_epoch`, dropping what an
    /// earlier load of it held.
    pub fn begin_loading(&mut self, partition: i32, coordinator_epoch: i32) {
        self.unload(partition);
        self.partitions
            .insert(partition, PartitionStatus::Loading { coordinator_epoch });
    }

    /// Stops serving `partition` (its leadership moved) and forgets its ids.
    pub fn unload(&mut self, partition: i32) {
        self.partitions.remove(&partition);
        self.ids.retain(|_, entry| entry.partition != partition);
    }

    /// Replays the records of `partition` (key, value; `None` for a
    /// tombstone), in log order, and serves it. Fails if the partition is
    /// not being loaded at `coordinator_epoch` (a newer load or an unload
    /// came meanwhile).
    pub fn complete_load<'a>(
        &mut self,
        partition: i32,
        coordinator_epoch: i32,
        records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<LoadSummary, CoordinatorError> {
        if self.partitions.get(&partition) != Some(&PartitionStatus::Loading { coordinator_epoch })
        {
            return Err(CoordinatorError::NotCoordinator { partition });
        }
        let mut latest: HashMap<String, Option<TransactionMetadata>> = HashMap::new();
        let mut summary = LoadSummary::default();
        for (key, value) in records {
            match replay_record(key, value) {
                Ok((id, metadata)) => {
                    latest.insert(id, metadata);
                }
                Err(error) if is_skippable(&error) => summary.skipped_records += 1,
                Err(source) => return Err(CoordinatorError::Load { partition, source }),
            }
        }
        for (id, metadata) in latest {
            let Some(metadata) = metadata else { continue };
            summary.transactional_ids += 1;
            summary
                .to_complete
                .extend(MarkerPlan::of(&metadata, coordinator_epoch));
            let entry = Entry {
                partition,
                metadata,
                pending: None,
            };
            self.ids.insert(id, entry);
        }
        self.partitions
            .insert(partition, PartitionStatus::Loaded { coordinator_epoch });
        Ok(summary)
    }

    /// The adopted metadata of `transactional_id`, if it is loaded.
    pub fn metadata(&self, transactional_id: &str) -> Option<&TransactionMetadata> {
        self.ids.get(transactional_id).map(|entry| &entry.metadata)
    }

    /// Every loaded transactional id's adopted metadata.
    pub fn all_metadata(&self) -> impl Iterator<Item = &TransactionMetadata> {
        self.ids.values().map(|entry| &entry.metadata)
    }

    /// Whether a write for `transactional_id` is in flight.
    pub fn is_pending(&self, transactional_id: &str) -> bool {
        self.ids
            .get(transactional_id)
            .is_some_and(|entry| entry.pending.is_some())
    }
}

/// Decodes one `__transaction_state` record: the id and its metadata
/// (`None` for a tombstone).
fn replay_record(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(String, Option<TransactionMetadata>), DecodeError> {
    match TransactionLogRecord::decode(key, value)? {
        TransactionLogRecord::Tombstone { transactional_id } => Ok((transactional_id, None)),
        TransactionLogRecord::Transaction {
            transactional_id,
            value,
        } => {
            let metadata = TransactionMetadata::from_log_value(transactional_id.clone(), &value)?;
            Ok((transactional_id, Some(metadata)))
        }
    }
}

/// The `__transaction_state` value of `metadata`: version 1 when the
/// cluster's `transaction.version` is 1 or more, else version 0, which
/// cannot carry the tagged fields (previous and next producer id, client
/// transaction version) and drops them, as Kafka does.
fn log_value(
    metadata: &TransactionMetadata,
    cluster_version: TransactionVersion,
) -> Result<Vec<u8>, CoordinatorError> {
    let mut value = metadata.to_log_value();
    let version = if cluster_version >= TransactionVersion::V1 {
        1
    } else {
        value.previous_producer_id = crate::metadata::NO_PRODUCER_ID;
        value.next_producer_id = crate::metadata::NO_PRODUCER_ID;
        value.next_producer_epoch = crate::metadata::NO_PRODUCER_EPOCH;
        value.client_transaction_version = 0;
        0
    };
    value.encode(version).map_err(CoordinatorError::Encode)
}

/// Records Kafka skips on load: keys and values of versions it does not
/// know (written by a newer version).
fn is_skippable(error: &DecodeError) -> bool {
    matches!(
        error,
        DecodeError::UnknownKeyVersion { .. } | DecodeError::UnknownValueVersion { .. }
    )
}

/// InitProducerId as the core sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitRequest {
    /// `transaction.timeout.ms`.
    pub transaction_timeout_ms: i32,
    /// The producer id and epoch of a recovering producer (KIP-360).
    pub expected: Option<ProducerIdAndEpoch>,
}

/// EndTxn as the core sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRequest {
    /// The producer ending its transaction.
    pub producer: ProducerIdAndEpoch,
    /// Commit or abort.
    pub result: TransactionResult,
    /// The client's transaction version (from the request version).
    pub client_transaction_version: TransactionVersion,
}

impl CoordinatorCore {
    /// The partition of `transactional_id` (given its Java hash), checked
    /// to be served here, and its coordinator epoch; an id with a write in
    /// flight is refused with `CONCURRENT_TRANSACTIONS`.
    /// The `__transaction_state` partition of `transactional_id` and its
    /// coordinator epoch, if this coordinator leads and has loaded it.
    fn placed(&self, transactional_id: &str, hash: i32) -> Result<(i32, i32), CoordinatorError> {
        if transactional_id.is_empty() {
            return Err(CoordinatorError::InvalidTransactionalId);
        }
        let partition = partition_for(hash, self.config.num_partitions);
        let coordinator_epoch = self.check_partition(partition)?;
        Ok((partition, coordinator_epoch))
    }

    fn owned(&self, transactional_id: &str, hash: i32) -> Result<(i32, i32), CoordinatorError> {
        let (partition, coordinator_epoch) = self.placed(transactional_id, hash)?;
        if let Some(Entry {
            pending: Some((metadata, _)),
            ..
        }) = self.ids.get(transactional_id)
        {
            return Err(CoordinatorError::Concurrent {
                state: metadata.state,
            });
        }
        Ok((partition, coordinator_epoch))
    }

    /// InitProducerId with a transactional id. `hash` is Java's
    /// `String.hashCode` of the id; `allocated` is a fresh producer id when
    /// an earlier call answered [`Begin::NeedProducerId`].
    pub fn begin_init_producer_id(
        &mut self,
        transactional_id: &str,
        hash: i32,
        request: InitRequest,
        now_ms: i64,
        allocated: Option<i64>,
    ) -> Result<Begin, CoordinatorError> {
        let (partition, coordinator_epoch) = self.owned(transactional_id, hash)?;
        let (current, is_new) = match self.ids.get(transactional_id) {
            Some(entry) => (entry.metadata.clone(), false),
            None => {
                crate::metadata::check_transaction_timeout(
                    request.transaction_timeout_ms,
                    self.config.max_transaction_timeout_ms,
                )?;
                let Some(producer_id) = allocated else {
                    return Ok(Begin::NeedProducerId);
                };
                let metadata = TransactionMetadata::new(
                    transactional_id.to_owned(),
                    producer_id,
                    request.transaction_timeout_ms,
                    now_ms,
                );
                (metadata, true)
            }
        };
        let mut needs_id = false;
        let init = InitProducerId {
            transaction_timeout_ms: request.transaction_timeout_ms,
            max_transaction_timeout_ms: self.config.max_transaction_timeout_ms,
            expected: request.expected,
            transaction_version: self.config.transaction_version,
        };
        let transit = current.prepare_init_producer_id(init, now_ms, || {
            allocated.unwrap_or_else(|| {
                needs_id = true;
                crate::metadata::NO_PRODUCER_ID
            })
        })?;
        if needs_id && !is_new {
            return Ok(Begin::NeedProducerId);
        }
        let place = Place {
            partition,
            coordinator_epoch,
            is_new,
        };
        self.begin_transit(current, transit, place)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn with the group's
    /// `__consumer_offsets` partition).
    pub fn begin_add_partitions(
        &mut self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
        client_transaction_version: TransactionVersion,
        now_ms: i64,
    ) -> Result<Begin, CoordinatorError> {
        let (partition, coordinator_epoch) = self.owned(transactional_id, hash)?;
        let current = self.existing(transactional_id)?;
        let transit = current.prepare_add_partitions(
            producer,
            partitions,
            client_transaction_version,
            now_ms,
        )?;
        let place = Place {
            partition,
            coordinator_epoch,
            is_new: false,
        };
        self.begin_transit(current, transit, place)
    }

    /// Checks, without writing, that `partitions` are in the producer's
    /// ongoing transaction (KIP-890 part 1's verification) and returns
    /// those that are not. As in Kafka, the adopted state decides (a
    /// write in flight does not: the partition leader's append is the
    /// final check), and a transaction being completed answers
    /// [`CoordinatorError::Concurrent`].
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<BTreeSet<TopicPartition>, CoordinatorError> {
        self.placed(transactional_id, hash)?;
        let current = self.existing(transactional_id)?;
        if current.producer_id != producer.producer_id {
            return Err(CoordinatorError::Transaction(
                crate::error::TransactionError::InvalidProducerIdMapping {
                    request_producer_id: producer.producer_id,
                    current_producer_id: current.producer_id,
                },
            ));
        }
        if current.producer_epoch != producer.producer_epoch {
            return Err(CoordinatorError::Transaction(
                crate::error::TransactionError::ProducerFenced {
                    producer_id: producer.producer_id,
                    request_epoch: producer.producer_epoch,
                    current_epoch: current.producer_epoch,
                },
            ));
        }
        let missing = match current.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                return Err(CoordinatorError::Concurrent {
                    state: current.state,
                })
            }
            TransactionState::Ongoing => partitions
                .difference(&current.partitions)
                .cloned()
                .collect(),
            _ => partitions.clone(),
        };
        Ok(missing)
    }

    /// EndTxn.
    pub fn begin_end_transaction(
        &mut self,
        transactional_id: &str,
        hash: i32,
        request: EndRequest,
        now_ms: i64,
        allocated: Option<i64>,
    ) -> Result<Begin, CoordinatorError> {
        let (partition, coordinator_epoch) = self.owned(transactional_id, hash)?;
        let current = self.existing(transactional_id)?;
        let mut needs_id = false;
        let transit = current.prepare_end_transaction(
            request.producer,
            request.result,
            request.client_transaction_version,
            now_ms,
            || {
                allocated.unwrap_or_else(|| {
                    needs_id = true;
                    crate::metadata::NO_PRODUCER_ID
                })
            },
        )?;
        if needs_id {
            return Ok(Begin::NeedProducerId);
        }
        let place = Place {
            partition,
            coordinator_epoch,
            is_new: false,
        };
        self.begin_transit(current, transit, place)
    }

    fn existing(&self, transactional_id: &str) -> Result<TransactionMetadata, CoordinatorError> {
        self.ids
            .get(transactional_id)
            .map(|entry| entry.metadata.clone())
            .ok_or(CoordinatorError::UnknownTransactionalId)
    }
}

/// Where a transit is written, and whether its id is new.
#[derive(Debug, Clone, Copy)]
struct Place {
    partition: i32,
    coordinator_epoch: i32,
    is_new: bool,
}

impl CoordinatorCore {
    fn begin_transit(
        &mut self,
        current: TransactionMetadata,
        transit: Transit,
        place: Place,
    ) -> Result<Begin, CoordinatorError> {
        let (target, fence) = match transit {
            Transit::Unchanged => return Ok(Begin::Done(current)),
            Transit::Write(target) => (target, false),
            Transit::AbortFenced(target) => (target, true),
        };
        let write = self.pending_write(current, target, place)?;
        Ok(if fence {
            Begin::WriteFence(write)
        } else {
            Begin::Write(write)
        })
    }

    /// Marks the id pending with `target` and returns the record to write.
    fn pending_write(
        &mut self,
        current: TransactionMetadata,
        target: TransactionMetadata,
        place: Place,
    ) -> Result<PendingWrite, CoordinatorError> {
        let id = target.transactional_id.clone();
        let key = encode_key(&id).map_err(CoordinatorError::Encode)?;
        let value = if target.state == TransactionState::Dead {
            None
        } else {
            Some(log_value(&target, self.config.transaction_version)?)
        };
        let entry = self.ids.entry(id.clone()).or_insert_with(|| Entry {
            partition: place.partition,
            metadata: current,
            pending: None,
        });
        entry.pending = Some((target.clone(), place.is_new));
        Ok(PendingWrite {
            transactional_id: id,
            partition: place.partition,
            coordinator_epoch: place.coordinator_epoch,
            key,
            value,
            metadata: target,
        })
    }

    /// The outcome of appending `write`: on success the id adopts its
    /// metadata (a tombstone removes the id) and it is returned; on failure
    /// nothing changes but the pending mark. Either way, if the partition
    /// is no longer served at the write's coordinator epoch the answer is
    /// `NOT_COORDINATOR`.
    pub fn finish_write(
        &mut self,
        write: &PendingWrite,
        appended: bool,
    ) -> Result<TransactionMetadata, CoordinatorError> {
        let partition = write.partition;
        let served = self.partitions.get(&partition)
            == Some(&PartitionStatus::Loaded {
                coordinator_epoch: write.coordinator_epoch,
            });
        let Some(entry) = self.ids.get_mut(&write.transactional_id) else {
            return Err(CoordinatorError::NotCoordinator { partition });
        };
        let is_new = entry.pending.take().is_some_and(|(_, is_new)| is_new);
        if !served {
            return Err(CoordinatorError::NotCoordinator { partition });
        }
        if !appended {
            if is_new {
                self.ids.remove(&write.transactional_id);
            }
            return Err(CoordinatorError::WriteFailed { partition });
        }
        if write.metadata.state == TransactionState::Dead {
            self.ids.remove(&write.transactional_id);
        } else {
            entry.metadata = write.metadata.clone();
        }
        Ok(write.metadata.clone())
    }

    /// The write that completes a prepared transaction once its markers
    /// are written, if the id is still prepared at `plan`'s producer epoch
    /// and served at its coordinator epoch.
    pub fn begin_complete(
        &mut self,
        plan: &MarkerPlan,
        now_ms: i64,
    ) -> Result<PendingWrite, CoordinatorError> {
        let hash_free_partition = self
            .ids
            .get(&plan.transactional_id)
            .map(|entry| entry.partition)
            .ok_or(CoordinatorError::UnknownTransactionalId)?;
        let coordinator_epoch = self.check_partition(hash_free_partition)?;
        if coordinator_epoch != plan.coordinator_epoch {
            return Err(CoordinatorError::NotCoordinator {
                partition: hash_free_partition,
            });
        }
        let current = self.existing(&plan.transactional_id)?;
        if self.is_pending(&plan.transactional_id) {
            return Err(CoordinatorError::Concurrent {
                state: current.state,
            });
        }
        if MarkerPlan::of(&current, coordinator_epoch).as_ref() != Some(plan) {
            return Err(CoordinatorError::Transaction(
                crate::error::TransactionError::IllegalTransition(
                    crate::state::IllegalTransition {
                        from: current.state,
                        to: TransactionState::CompleteCommit,
                    },
                ),
            ));
        }
        let target = current.prepare_complete(now_ms)?;
        let place = Place {
            partition: hash_free_partition,
            coordinator_epoch,
            is_new: false,
        };
        self.pending_write(current, target, place)
    }
}

/// What the timer found to do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Expirations {
    /// Ongoing transactions past their timeout: the writes that abort them
    /// with a bumped epoch (their markers follow once written).
    pub timed_out: Vec<PendingWrite>,
    /// Idle transactional ids past `transactional.id.expiration.ms`: their
    /// tombstones.
    pub expired: Vec<PendingWrite>,
}

impl CoordinatorCore {
    /// Kafka's two periodic tasks: aborting transactions that ran past
    /// their timeout, and removing transactional ids idle for longer than
    /// `transactional.id.expiration.ms`. Ids with a write in flight wait.
    pub fn expire(&mut self, now_ms: i64) -> Expirations {
        let expiration_ms = self.config.transactional_id_expiration_ms;
        let version = self.config.transaction_version;
        let mut chosen = Vec::new();
        for (id, entry) in &self.ids {
            if entry.pending.is_some() {
                continue;
            }
            let Ok(coordinator_epoch) = self.check_partition(entry.partition) else {
                continue;
            };
            let place = Place {
                partition: entry.partition,
                coordinator_epoch,
                is_new: false,
            };
            let metadata = &entry.metadata;
            if metadata.has_timed_out(now_ms) {
                if let Ok(target) = metadata.prepare_epoch_fence(version, now_ms) {
                    chosen.push((id.clone(), target, place, true));
                }
            } else if metadata.is_expired(now_ms, expiration_ms) {
                if let Ok(target) = metadata.prepare_dead() {
                    chosen.push((id.clone(), target, place, false));
                }
            }
        }
        let mut expirations = Expirations::default();
        for (id, target, place, timed_out) in chosen {
            let Ok(current) = self.existing(&id) else {
                continue;
            };
            let Ok(write) = self.pending_write(current, target, place) else {
                continue;
            };
            if timed_out {
                expirations.timed_out.push(write);
            } else {
                expirations.expired.push(write);
            }
        }
        expirations
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
