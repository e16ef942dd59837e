//! The thin async edge of the transaction coordinator: a
//! [`TransactionCoordinator`] shares a [`CoordinatorCore`] behind a mutex
//! and performs what it decides: appends to `__transaction_state` through
//! a [`TransactionLog`], producer id allocation through a
//! [`ProducerIdSource`], and the markers of prepared transactions through
//! a [`MarkerWriter`], retried until every partition has its marker, after
//! which the transaction is completed.
//!
//! The core lock is never held across an await. A poisoned lock (a panic
//! while the core changed) takes the coordinator offline: every request
//! is then answered `COORDINATOR_NOT_AVAILABLE` until the broker restarts
//! and reloads `__transaction_state`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use strom_clock::Clock;
use tokio::task::JoinHandle;

use crate::coordinator::{
    Begin, CoordinatorConfig, CoordinatorCore, EndRequest, InitRequest, LoadSummary, MarkerPlan,
    PendingWrite,
};
use crate::error::CoordinatorError;
use crate::metadata::{
    ProducerIdAndEpoch, TopicPartition, TransactionMetadata, TransactionVersion,
};
use crate::state::{TransactionResult, TransactionState};

/// How long a failed marker or completion write waits before it is retried.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Why an append to `__transaction_state` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendFailure {
    /// This broker no longer leads the partition.
    #[error("not the leader of __transaction_state partition {partition}")]
    NotLeader {
        /// The partition.
        partition: i32,
    },
    /// The append was refused or not replicated in time.
    #[error("appending to __transaction_state partition {partition} failed: {reason}")]
    Failed {
        /// The partition.
        partition: i32,
        /// What the log reported.
        reason: String,
    },
}

/// The storage of `__transaction_state`, implemented by the broker over
/// its replicated partition logs.
#[async_trait]
pub trait TransactionLog: Send + Sync + 'static {
    /// Appends one record (`value` `None` for a tombstone) to `partition`,
    /// led at `coordinator_epoch`, and waits until the in-sync replicas
    /// have it (Kafka appends with acks=all).
    async fn append(
        &self,
        partition: i32,
        coordinator_epoch: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), AppendFailure>;
}

/// What became of the markers for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerOutcome {
    /// The marker is in the partition's log (replicated).
    Written,
    /// The partition no longer exists (its topic was deleted): nothing to
    /// mark, as Kafka skips it.
    Gone,
    /// Not written now (no leader, leadership moving, a timeout): retry.
    Retry,
    /// Refused for good: the partition has seen a newer producer epoch, or
    /// a newer coordinator decided (Kafka's `INVALID_PRODUCER_EPOCH` and
    /// `TRANSACTION_COORDINATOR_FENCED`). This coordinator stops writing
    /// the transaction's markers, as Kafka's does; a newer coordinator,
    /// if there is one, completes it.
    Fenced,
}

/// Writes transaction markers to partition leaders, implemented by the
/// broker (locally, or with WriteTxnMarkers to the leader).
#[async_trait]
pub trait MarkerWriter: Send + Sync + 'static {
    /// Writes `plan`'s marker to each of `partitions` and reports each
    /// partition's outcome.
    async fn write_markers(
        &self,
        plan: &MarkerPlan,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Vec<(TopicPartition, MarkerOutcome)>;
}

/// Allocates producer ids (the controller's blocks), implemented by the
/// broker.
#[async_trait]
pub trait ProducerIdSource: Send + Sync + 'static {
    /// A producer id never handed out before.
    async fn allocate(&self) -> Result<i64, String>;
}

/// What a transaction listing shows of one id (ListTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionListing {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TransactionState,
    /// When its open transaction started, or -1.
    pub start_timestamp_ms: i64,
}

struct Shared {
    core: Mutex<CoordinatorCore>,
    log: Arc<dyn TransactionLog>,
    markers: Arc<dyn MarkerWriter>,
    producer_ids: Arc<dyn ProducerIdSource>,
    clock: Arc<dyn Clock>,
}

/// The transaction coordinator (see the module doc). Cloning shares it.
#[derive(Clone)]
pub struct TransactionCoordinator {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TransactionCoordinator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TransactionCoordinator")
            .finish_non_exhaustive()
    }
}

impl TransactionCoordinator {
    /// A coordinator with `config` over these edges; it serves no
    /// partition until one is loaded.
    pub fn new(
        config: CoordinatorConfig,
        log: Arc<dyn TransactionLog>,
        markers: Arc<dyn MarkerWriter>,
        producer_ids: Arc<dyn ProducerIdSource>,
        clock: Arc<dyn Clock>,
    ) -> TransactionCoordinator {
        TransactionCoordinator {
            shared: Arc::new(Shared {
                core: Mutex::new(CoordinatorCore::new(config)),
                log,
                markers,
                producer_ids,
                clock,
            }),
        }
    }

    fn core(&self) -> Result<MutexGuard<'_, CoordinatorCore>, CoordinatorError> {
        self.shared.core.lock().map_err(|_| {
            tracing::error!("the transaction coordinator's state was poisoned by a panic");
            CoordinatorError::Offline
        })
    }

    fn now_ms(&self) -> i64 {
        self.shared.clock.wall_ms()
    }

    /// The settings.
    pub fn config(&self) -> Result<CoordinatorConfig, CoordinatorError> {
        Ok(*self.core()?.config())
    }

    /// Marks `partition` as loading at `coordinator_epoch` (requests get
    /// `COORDINATOR_LOAD_IN_PROGRESS` until [`Self::complete_load`]).
    pub fn begin_loading(&self, partition: i32, coordinator_epoch: i32) {
        if let Ok(mut core) = self.core() {
            core.begin_loading(partition, coordinator_epoch);
        }
    }

    /// Serves `partition` from its records (key, value) and resumes the
    /// markers of the transactions found prepared.
    pub fn complete_load<'a>(
        &self,
        partition: i32,
        coordinator_epoch: i32,
        records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<LoadSummary, CoordinatorError> {
        let summary = self
            .core()?
            .complete_load(partition, coordinator_epoch, records)?;
        for plan in &summary.to_complete {
            self.spawn_completion(plan.clone());
        }
        Ok(summary)
    }

    /// Stops serving `partition`; marker tasks of its transactions stop at
    /// their next step.
    pub fn unload(&self, partition: i32) {
        if let Ok(mut core) = self.core() {
            core.unload(partition);
        }
    }

    /// Whether `partition` is loaded or loading here.
    pub fn has_partition(&self, partition: i32) -> bool {
        self.core()
            .is_ok_and(|core| core.partition_status(partition).is_some())
    }
}

impl TransactionCoordinator {
    /// InitProducerId with a transactional id (`hash`: Java's hash of it).
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        hash: i32,
        request: InitRequest,
    ) -> Result<ProducerIdAndEpoch, CoordinatorError> {
        let metadata = self
            .run(|core, now_ms, allocated| {
                core.begin_init_producer_id(transactional_id, hash, request, now_ms, allocated)
            })
            .await?;
        Ok(ProducerIdAndEpoch {
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
        })
    }

    /// AddPartitionsToTxn, or AddOffsetsToTxn with the group's partition.
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
        client_transaction_version: TransactionVersion,
    ) -> Result<(), CoordinatorError> {
        self.run(|core, now_ms, _| {
            core.begin_add_partitions(
                transactional_id,
                hash,
                producer,
                partitions,
                client_transaction_version,
                now_ms,
            )
        })
        .await
        .map(|_| ())
    }

    /// The partitions of `partitions` that are not in the producer's
    /// ongoing transaction (KIP-890 part 1's verification; empty when all
    /// are).
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<BTreeSet<TopicPartition>, CoordinatorError> {
        self.core()?
            .verify_partitions(transactional_id, hash, producer, partitions)
    }

    /// EndTxn: answers once the prepared state is written; the markers and
    /// the completion follow in the background. Returns the producer id
    /// and epoch the producer continues with (bumped with transaction
    /// version 2).
    pub async fn end_transaction(
        &self,
        transactional_id: &str,
        hash: i32,
        producer: ProducerIdAndEpoch,
        result: TransactionResult,
        client_transaction_version: TransactionVersion,
    ) -> Result<ProducerIdAndEpoch, CoordinatorError> {
        let metadata = self
            .run(|core, now_ms, allocated| {
                let request = EndRequest {
                    producer,
                    result,
                    client_transaction_version,
                };
                core.begin_end_transaction(transactional_id, hash, request, now_ms, allocated)
            })
            .await?;
        let continues_with = if metadata.next_producer_id >= 0 {
            ProducerIdAndEpoch {
                producer_id: metadata.next_producer_id,
                producer_epoch: 0,
            }
        } else {
            ProducerIdAndEpoch {
                producer_id: metadata.producer_id,
                producer_epoch: metadata.producer_epoch,
            }
        };
        Ok(continues_with)
    }

    /// The adopted metadata of `transactional_id` (DescribeTransactions),
    /// after checking that its partition is served here.
    pub fn describe(
        &self,
        transactional_id: &str,
        hash: i32,
    ) -> Result<Option<TransactionMetadata>, CoordinatorError> {
        let core = self.core()?;
        let partition = crate::coordinator::partition_for(hash, core.config().num_partitions);
        core.check_partition(partition)?;
        Ok(core.metadata(transactional_id).cloned())
    }

    /// Every transactional id this coordinator serves (ListTransactions).
    pub fn list(&self) -> Result<Vec<TransactionListing>, CoordinatorError> {
        let core = self.core()?;
        let mut listings: Vec<TransactionListing> = core
            .all_metadata()
            .map(|metadata| TransactionListing {
                transactional_id: metadata.transactional_id.clone(),
                producer_id: metadata.producer_id,
                state: metadata.state,
                start_timestamp_ms: metadata.transaction_start_timestamp_ms,
            })
            .collect();
        listings.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listings)
    }
}

impl TransactionCoordinator {
    /// Runs a request: asks the core (allocating a producer id when it
    /// needs one), writes what it decided and adopts it.
    async fn run(
        &self,
        mut begin: impl FnMut(&mut CoordinatorCore, i64, Option<i64>) -> Result<Begin, CoordinatorError>,
    ) -> Result<TransactionMetadata, CoordinatorError> {
        let mut allocated = None;
        loop {
            let now_ms = self.now_ms();
            let step = begin(&mut *self.core()?, now_ms, allocated)?;
            match step {
                Begin::Done(metadata) => return Ok(metadata),
                Begin::Write(write) => return self.write(write).await,
                Begin::WriteFence(write) => {
                    let metadata = self.write(write).await?;
                    return Err(CoordinatorError::Concurrent {
                        state: metadata.state,
                    });
                }
                Begin::NeedProducerId if allocated.is_none() => {
                    let id = self.shared.producer_ids.allocate().await;
                    let id =
                        id.map_err(|reason| CoordinatorError::ProducerIdUnavailable { reason })?;
                    allocated = Some(id);
                }
                Begin::NeedProducerId => {
                    return Err(CoordinatorError::ProducerIdUnavailable {
                        reason: "the coordinator asked for a second producer id".to_owned(),
                    })
                }
            }
        }
    }

    /// Appends `write`, adopts it, and starts the markers of a prepared
    /// transaction.
    async fn write(&self, write: PendingWrite) -> Result<TransactionMetadata, CoordinatorError> {
        let appended = self
            .shared
            .log
            .append(
                write.partition,
                write.coordinator_epoch,
                write.key.clone(),
                write.value.clone(),
            )
            .await;
        if let Err(failure) = &appended {
            tracing::warn!(transactional_id = %write.transactional_id, %failure, "__transaction_state write failed");
        }
        let adopted = self.core()?.finish_write(&write, appended.is_ok())?;
        if let Some(plan) = MarkerPlan::of(&adopted, write.coordinator_epoch) {
            self.spawn_completion(plan);
        }
        Ok(adopted)
    }

    fn spawn_completion(&self, plan: MarkerPlan) {
        let coordinator = self.clone();
        tokio::spawn(async move { coordinator.complete(plan).await });
    }

    /// Writes the markers of `plan` until every partition has one, then
    /// completes the transaction. Stops when the coordinator lost the
    /// partition or the transaction moved on.
    async fn complete(&self, plan: MarkerPlan) {
        let mut remaining = plan.partitions.clone();
        while !remaining.is_empty() {
            if !self.still_prepared(&plan) {
                return;
            }
            let outcomes = self.shared.markers.write_markers(&plan, &remaining).await;
            for (partition, outcome) in outcomes {
                match outcome {
                    MarkerOutcome::Written | MarkerOutcome::Gone => {
                        remaining.remove(&partition);
                    }
                    MarkerOutcome::Retry => {}
                    MarkerOutcome::Fenced => {
                        tracing::warn!(
                            transactional_id = %plan.transactional_id,
                            topic = %partition.topic,
                            partition = partition.partition,
                            "a partition refused the transaction's marker as fenced; this coordinator stops writing them"
                        );
                        return;
                    }
                }
            }
            if !remaining.is_empty() {
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
        loop {
            let begun = match self.core() {
                Ok(mut core) => core.begin_complete(&plan, self.now_ms()),
                Err(_) => return,
            };
            let retry = match begun {
                Ok(write) => matches!(
                    self.write(write).await,
                    Err(CoordinatorError::WriteFailed { .. })
                ),
                Err(CoordinatorError::Concurrent { .. }) => true,
                Err(_) => false,
            };
            if !retry {
                return;
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    fn still_prepared(&self, plan: &MarkerPlan) -> bool {
        let Ok(core) = self.core() else { return false };
        core.metadata(&plan.transactional_id)
            .and_then(|metadata| MarkerPlan::of(metadata, plan.coordinator_epoch))
            .is_some_and(|current| &current == plan)
    }
}

impl TransactionCoordinator {
    /// One round of the periodic tasks: aborts timed-out transactions and
    /// removes expired transactional ids.
    pub async fn expire(&self) {
        let expirations = match self.core() {
            Ok(mut core) => core.expire(self.now_ms()),
            Err(_) => return,
        };
        for write in expirations.timed_out.into_iter().chain(expirations.expired) {
            let id = write.transactional_id.clone();
            if let Err(error) = self.write(write).await {
                tracing::debug!(transactional_id = %id, %error, "expiring a transaction failed; retried next round");
            } else {
                tracing::info!(transactional_id = %id, "aborted or expired by the coordinator");
            }
        }
    }

    /// Runs [`Self::expire`] every `interval` (Kafka's
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`)
    /// until the handle is aborted.
    pub fn spawn_timer(&self, interval: Duration) -> JoinHandle<()> {
        let coordinator = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                coordinator.expire().await;
            }
        })
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
