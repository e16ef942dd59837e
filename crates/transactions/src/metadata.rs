//! What the coordinator knows about one transactional id, and how each
//! request changes it (Kafka's `TransactionMetadata` and the checks of its
//! `TransactionCoordinator`).
//!
//! Every `prepare_*` method is a pure function: it reads the current
//! metadata and returns either a typed refusal or a [`Transit`], the
//! metadata to write to `__transaction_state` (Kafka's
//! `TxnTransitMetadata`). The metadata changes only once that write is
//! replicated, by replacing it with the written value; nothing changes
//! before, so a failed write leaves nothing to undo. (Kafka keeps a
//! `hasFailedEpochFence` flag because it bumps the epoch in memory before
//! the write; computing the fence again from unchanged metadata gives the
//! same epoch.)
//!
//! Not here: the pending write itself. While a transit is being written,
//! the coordinator answers further requests for the id with
//! `CONCURRENT_TRANSACTIONS`, as Kafka does with its `pendingState`.
//!
//! Epochs. A producer epoch is an int16; Kafka never hands out
//! `i16::MAX`, so that the coordinator can always fence with one more bump.
//! An epoch at or above `i16::MAX - 1` is exhausted: InitProducerId then
//! rotates to a new producer id (KIP-360), and with transaction version 2
//! (KIP-890 part 2), where every EndTxn bumps the epoch, the last
//! transaction of an exhausted id completes onto a new producer id.

use std::collections::BTreeSet;

use crate::error::{DecodeError, TransactionError};
use crate::log::{TopicPartitions, TransactionLogValue};
use crate::state::{IllegalTransition, TransactionResult, TransactionState};

/// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;
/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Whether `epoch` is too high to be bumped for a producer: the last epoch
/// is kept for fencing.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// The transaction protocol a client speaks (Kafka's `TransactionVersion`,
/// the `transaction.version` feature level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TransactionVersion {
    /// KIP-98's protocol.
    V0,
    /// KIP-98's protocol, with the flexible `__transaction_state` value.
    V1,
    /// KIP-890 part 2: every EndTxn bumps the producer epoch.
    V2,
}

impl TransactionVersion {
    /// The feature level.
    pub fn level(self) -> i16 {
        match self {
            Self::V0 => 0,
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }

    /// The version of feature level `level`, or `None`.
    pub fn from_level(level: i16) -> Option<Self> {
        match level {
            0 => Some(Self::V0),
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            _ => None,
        }
    }

    /// Whether EndTxn bumps the producer epoch.
    pub fn supports_epoch_bump(self) -> bool {
        self >= Self::V2
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

/// A producer id and epoch, as a request carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
}

/// What a request does once accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transit {
    /// Write this metadata to `__transaction_state`; once it is
    /// replicated it is the id's metadata and the request succeeds.
    Write(TransactionMetadata),
    /// Write this metadata, which aborts the ongoing transaction of a
    /// fenced producer with a bumped epoch; the request (InitProducerId) is
    /// answered `CONCURRENT_TRANSACTIONS` so the producer retries once the
    /// abort completes, and is then given a further epoch.
    AbortFenced(TransactionMetadata),
    /// Nothing to write: the request is a retry, or already satisfied, and
    /// succeeds with the current metadata.
    Unchanged,
}

/// InitProducerId for a transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerId {
    /// The `transaction.timeout.ms` asked for.
    pub transaction_timeout_ms: i32,
    /// The broker's `transaction.max.timeout.ms`.
    pub max_transaction_timeout_ms: i32,
    /// The producer id and epoch the producer has (KIP-360: a producer
    /// recovering from an abortable error), or `None` for a new producer.
    pub expected: Option<ProducerIdAndEpoch>,
    /// The cluster's `transaction.version`, with which an ongoing
    /// transaction of a fenced producer is aborted.
    pub transaction_version: TransactionVersion,
}

/// The state of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last transition (the one a producer
    /// whose epoch was exhausted may still present), or -1.
    pub previous_producer_id: i64,
    /// The producer id the current transaction completes onto when its
    /// epoch is exhausted (transaction version 2), or -1.
    pub next_producer_id: i64,
    /// The current producer epoch, -1 before the first InitProducerId.
    pub producer_epoch: i16,
    /// The epoch before the last bump, for recognising a retried
    /// InitProducerId or EndTxn, or -1. Not written to the log.
    pub last_producer_epoch: i16,
    /// The transaction timeout in milliseconds.
    pub transaction_timeout_ms: i32,
    /// The state.
    pub state: TransactionState,
    /// The partitions in the transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the transaction started (its first partition), or -1.
    pub transaction_start_timestamp_ms: i64,
    /// When the metadata last changed.
    pub transaction_last_update_timestamp_ms: i64,
    /// The transaction version of the client's last request.
    pub client_transaction_version: TransactionVersion,
}

impl TransactionMetadata {
    /// The metadata of a transactional id seen for the first time, with a
    /// freshly allocated `producer_id` and no epoch yet: InitProducerId
    /// then gives it epoch 0.
    pub fn new(
        transactional_id: String,
        producer_id: i64,
        transaction_timeout_ms: i32,
        now_ms: i64,
    ) -> Self {
        Self {
            transactional_id,
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms,
            state: TransactionState::Empty,
            partitions: BTreeSet::new(),
            transaction_start_timestamp_ms: -1,
            transaction_last_update_timestamp_ms: now_ms,
            client_transaction_version: TransactionVersion::V0,
        }
    }

    /// The metadata a `__transaction_state` value holds. The last epoch is
    /// not in the log and starts at -1, and an `Empty` transaction has no
    /// partitions, as when Kafka loads the log.
    pub fn from_log_value(
        transactional_id: String,
        value: &TransactionLogValue,
    ) -> Result<Self, DecodeError> {
        let level = value.client_transaction_version;
        let client_transaction_version = TransactionVersion::from_level(level)
            .ok_or(DecodeError::UnknownTransactionVersion { level })?;
        let mut partitions = BTreeSet::new();
        if value.transaction_status != TransactionState::Empty {
            for entry in value.transaction_partitions.iter().flatten() {
                partitions.extend(entry.partition_ids.iter().map(|partition| TopicPartition {
                    topic: entry.topic.clone(),
                    partition: *partition,
                }));
            }
        }
        Ok(Self {
            transactional_id,
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: value.transaction_timeout_ms,
            state: value.transaction_status,
            partitions,
            transaction_start_timestamp_ms: value.transaction_start_timestamp_ms,
            transaction_last_update_timestamp_ms: value.transaction_last_update_timestamp_ms,
            client_transaction_version,
        })
    }

    /// The value to write to `__transaction_state`: partitions grouped by
    /// topic, and null for an `Empty` transaction, as Kafka writes them.
    pub fn to_log_value(&self) -> TransactionLogValue {
        let transaction_partitions = (self.state != TransactionState::Empty).then(|| {
            let mut topics: Vec<TopicPartitions> = Vec::new();
            for partition in &self.partitions {
                match topics.last_mut() {
                    Some(entry) if entry.topic == partition.topic => {
                        entry.partition_ids.push(partition.partition)
                    }
                    _ => topics.push(TopicPartitions {
                        topic: partition.topic.clone(),
                        partition_ids: vec![partition.partition],
                    }),
                }
            }
            topics
        });
        TransactionLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            next_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: self.transaction_timeout_ms,
            transaction_status: self.state,
            transaction_partitions,
            transaction_last_update_timestamp_ms: self.transaction_last_update_timestamp_ms,
            transaction_start_timestamp_ms: self.transaction_start_timestamp_ms,
            client_transaction_version: self.client_transaction_version.level(),
        }
    }

    /// Whether the producer id's epochs are used up.
    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// Whether the open transaction ran past its timeout and must be
    /// aborted (with [`Self::prepare_epoch_fence`]).
    pub fn has_timed_out(&self, now_ms: i64) -> bool {
        self.state == TransactionState::Ongoing
            && self
                .transaction_start_timestamp_ms
                .saturating_add(i64::from(self.transaction_timeout_ms))
                < now_ms
    }

    /// Whether the transactional id has been idle for
    /// `transactional.id.expiration.ms` with no transaction open, and may
    /// be removed (with [`Self::prepare_dead`]).
    pub fn is_expired(&self, now_ms: i64, transactional_id_expiration_ms: i64) -> bool {
        self.state.is_expiration_allowed()
            && self.transaction_last_update_timestamp_ms
                <= now_ms.saturating_sub(transactional_id_expiration_ms)
    }

    /// A copy in state `to`, if the table allows it, with this producer id
    /// as the previous one (every transition records it, as in Kafka).
    fn transit(&self, to: TransactionState) -> Result<Self, TransactionError> {
        let state = self.state.transition(to)?;
        Ok(Self {
            state,
            previous_producer_id: self.producer_id,
            ..self.clone()
        })
    }

    fn illegal(&self, to: TransactionState) -> TransactionError {
        TransactionError::IllegalTransition(IllegalTransition {
            from: self.state,
            to,
        })
    }

    fn bumped_epoch(&self) -> Result<i16, TransactionError> {
        self.producer_epoch
            .checked_add(1)
            .ok_or(TransactionError::EpochExhausted {
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
            })
    }
}

/// Refuses a timeout not above zero or above `max_timeout_ms`.
pub fn check_transaction_timeout(
    timeout_ms: i32,
    max_timeout_ms: i32,
) -> Result<(), TransactionError> {
    if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
        return Err(TransactionError::InvalidTransactionTimeout {
            timeout_ms,
            max_timeout_ms,
        });
    }
    Ok(())
}

impl TransactionMetadata {
    /// InitProducerId: gives the producer an epoch (a bump of the current
    /// one, or epoch 0 of a new producer id from `allocate_producer_id`
    /// when the epochs are exhausted), fencing any older producer of the
    /// same transactional id; an ongoing transaction is aborted first.
    ///
    /// With `expected` (KIP-360), a producer that still has the current
    /// epoch gets the next one, a retry of a call that already bumped gets
    /// the current one again, and any other epoch is fenced.
    pub fn prepare_init_producer_id(
        &self,
        request: InitProducerId,
        now_ms: i64,
        allocate_producer_id: impl FnOnce() -> i64,
    ) -> Result<Transit, TransactionError> {
        check_transaction_timeout(
            request.transaction_timeout_ms,
            request.max_transaction_timeout_ms,
        )?;
        if let Some(expected) = request.expected {
            if !self.may_continue(expected) {
                return Err(TransactionError::ProducerFenced {
                    producer_id: expected.producer_id,
                    request_epoch: expected.producer_epoch,
                    current_epoch: self.producer_epoch,
                });
            }
        }
        let timeout_ms = request.transaction_timeout_ms;
        match self.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                Err(TransactionError::ConcurrentTransactions { state: self.state })
            }
            TransactionState::Empty
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort => {
                let expected_epoch = request.expected.map(|expected| expected.producer_epoch);
                let rotate = self.is_producer_epoch_exhausted()
                    && expected_epoch.is_none_or(|epoch| epoch == self.producer_epoch);
                let metadata = if rotate {
                    self.rotate_producer_id(
                        allocate_producer_id(),
                        timeout_ms,
                        now_ms,
                        expected_epoch.is_some(),
                    )?
                } else {
                    self.increment_producer_epoch(expected_epoch, timeout_ms, now_ms)?
                };
                Ok(Transit::Write(metadata))
            }
            TransactionState::Ongoing => Ok(Transit::AbortFenced(
                self.prepare_epoch_fence(request.transaction_version, now_ms)?,
            )),
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                Err(self.illegal(TransactionState::Empty))
            }
        }
    }

    /// Whether a producer presenting `expected` is this id's current
    /// producer: the id has no epoch yet (it was just created, and the
    /// producer recovers from `UNKNOWN_PRODUCER_ID`), or the producer id is
    /// the current one (its epoch is checked next), or it is the previous
    /// one with an exhausted epoch (a retry after a rotation whose answer
    /// was lost).
    fn may_continue(&self, expected: ProducerIdAndEpoch) -> bool {
        self.producer_epoch == NO_PRODUCER_EPOCH
            || expected.producer_id == self.producer_id
            || (expected.producer_id == self.previous_producer_id
                && is_epoch_exhausted(expected.producer_epoch))
    }

    fn increment_producer_epoch(
        &self,
        expected_epoch: Option<i16>,
        timeout_ms: i32,
        now_ms: i64,
    ) -> Result<Self, TransactionError> {
        let (producer_epoch, last_producer_epoch) = match expected_epoch {
            None => (self.bumped_epoch()?, NO_PRODUCER_EPOCH),
            Some(epoch)
                if self.producer_epoch == NO_PRODUCER_EPOCH || epoch == self.producer_epoch =>
            {
                (self.bumped_epoch()?, self.producer_epoch)
            }
            Some(epoch) if epoch == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(epoch) => {
                return Err(TransactionError::ProducerFenced {
                    producer_id: self.producer_id,
                    request_epoch: epoch,
                    current_epoch: self.producer_epoch,
                })
            }
        };
        Ok(Self {
            producer_epoch,
            last_producer_epoch,
            transaction_timeout_ms: timeout_ms,
            partitions: BTreeSet::new(),
            transaction_start_timestamp_ms: -1,
            transaction_last_update_timestamp_ms: now_ms,
            ..self.transit(TransactionState::Empty)?
        })
    }

    fn rotate_producer_id(
        &self,
        producer_id: i64,
        timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<Self, TransactionError> {
        Ok(Self {
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: if record_last_epoch {
                self.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            },
            transaction_timeout_ms: timeout_ms,
            partitions: BTreeSet::new(),
            transaction_start_timestamp_ms: -1,
            transaction_last_update_timestamp_ms: now_ms,
            ..self.transit(TransactionState::Empty)?
        })
    }

    /// Aborts the ongoing transaction of a fenced producer (a newer one
    /// called InitProducerId) or of one that ran past its timeout, with
    /// the cluster's `transaction.version` (not the client's: no client
    /// asked). The state passes through `PrepareEpochFence`, which is
    /// never written, to `PrepareAbort`, and the epoch is bumped once
    /// (kept at `i16::MAX` if already there) so the old producer can no
    /// longer write or end the transaction. With transaction version 2 the
    /// abort bumps it once more, as every EndTxn does, and records the
    /// fenced epoch as the last one.
    pub fn prepare_epoch_fence(
        &self,
        transaction_version: TransactionVersion,
        now_ms: i64,
    ) -> Result<Self, TransactionError> {
        let fenced = self.transit(TransactionState::PrepareEpochFence)?;
        let fenced_epoch = self.producer_epoch.saturating_add(1);
        let (producer_epoch, last_producer_epoch) = if transaction_version.supports_epoch_bump() {
            (fenced_epoch.saturating_add(1), fenced_epoch)
        } else {
            (fenced_epoch, NO_PRODUCER_EPOCH)
        };
        Ok(Self {
            producer_epoch,
            last_producer_epoch,
            next_producer_id: NO_PRODUCER_ID,
            transaction_last_update_timestamp_ms: now_ms,
            client_transaction_version: transaction_version,
            ..fenced.transit(TransactionState::PrepareAbort)?
        })
    }
}

impl TransactionMetadata {
    /// AddPartitionsToTxn (and AddOffsetsToTxn, which adds the group's
    /// `__consumer_offsets` partition): opens the transaction if none is
    /// open and adds `partitions` to it. Partitions already in an ongoing
    /// transaction need no write.
    pub fn prepare_add_partitions(
        &self,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
        client_transaction_version: TransactionVersion,
        now_ms: i64,
    ) -> Result<Transit, TransactionError> {
        self.check_producer_id(producer.producer_id)?;
        if producer.producer_epoch != self.producer_epoch {
            return Err(self.fenced(producer.producer_epoch));
        }
        match self.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                return Err(TransactionError::ConcurrentTransactions { state: self.state })
            }
            TransactionState::Ongoing if partitions.is_subset(&self.partitions) => {
                return Ok(Transit::Unchanged)
            }
            _ => {}
        }
        let transaction_start_timestamp_ms = match self.state {
            TransactionState::Ongoing => self.transaction_start_timestamp_ms,
            _ => now_ms,
        };
        Ok(Transit::Write(Self {
            partitions: self.partitions.union(partitions).cloned().collect(),
            transaction_start_timestamp_ms,
            transaction_last_update_timestamp_ms: now_ms,
            client_transaction_version,
            ..self.transit(TransactionState::Ongoing)?
        }))
    }

    /// EndTxn: prepares the commit or abort of the transaction, whose
    /// markers are then written to its partitions. A retry of an EndTxn
    /// that already completed succeeds without a write.
    ///
    /// With transaction version 2 (KIP-890 part 2) the producer epoch is
    /// bumped by every EndTxn, so a delayed or duplicated EndTxn of an
    /// earlier transaction is fenced instead of ending a later one; an
    /// exhausted epoch completes onto a new producer id from
    /// `allocate_producer_id`, and an abort needs no open transaction.
    pub fn prepare_end_transaction(
        &self,
        producer: ProducerIdAndEpoch,
        result: TransactionResult,
        client_transaction_version: TransactionVersion,
        now_ms: i64,
        allocate_producer_id: impl FnOnce() -> i64,
    ) -> Result<Transit, TransactionError> {
        if client_transaction_version.supports_epoch_bump() {
            self.end_with_epoch_bump(producer, result, now_ms, allocate_producer_id)
        } else {
            self.end_without_epoch_bump(producer, result, client_transaction_version, now_ms)
        }
    }

    fn end_without_epoch_bump(
        &self,
        producer: ProducerIdAndEpoch,
        result: TransactionResult,
        client_transaction_version: TransactionVersion,
        now_ms: i64,
    ) -> Result<Transit, TransactionError> {
        self.check_producer_id(producer.producer_id)?;
        if producer.producer_epoch != self.producer_epoch {
            return Err(self.fenced(producer.producer_epoch));
        }
        let invalid = TransactionError::InvalidTxnState {
            state: self.state,
            requested: result,
        };
        match (self.state, result) {
            (TransactionState::Ongoing, _) => Ok(Transit::Write(Self {
                client_transaction_version,
                transaction_last_update_timestamp_ms: now_ms,
                ..self.transit(prepare_state(result))?
            })),
            (TransactionState::CompleteCommit, TransactionResult::Commit)
            | (TransactionState::CompleteAbort, TransactionResult::Abort) => Ok(Transit::Unchanged),
            (TransactionState::PrepareCommit, TransactionResult::Commit)
            | (TransactionState::PrepareAbort, TransactionResult::Abort) => {
                Err(TransactionError::ConcurrentTransactions { state: self.state })
            }
            (TransactionState::Dead | TransactionState::PrepareEpochFence, _) => {
                Err(self.illegal(prepare_state(result)))
            }
            _ => Err(invalid),
        }
    }

    fn end_with_epoch_bump(
        &self,
        producer: ProducerIdAndEpoch,
        result: TransactionResult,
        now_ms: i64,
        allocate_producer_id: impl FnOnce() -> i64,
    ) -> Result<Transit, TransactionError> {
        let epoch = producer.producer_epoch;
        // The answer to an EndTxn that moved to a new producer id was lost.
        let retry_on_overflow = self.previous_producer_id == producer.producer_id
            && epoch == i16::MAX - 1
            && self.producer_epoch == 0;
        // The answer to an EndTxn that bumped the epoch was lost.
        let retry_on_epoch_bump = i32::from(self.producer_epoch) == i32::from(epoch) + 1;
        if !retry_on_overflow {
            self.check_producer_id(producer.producer_id)?;
        }
        let valid_epoch = match self.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => retry_on_epoch_bump,
            TransactionState::CompleteCommit | TransactionState::CompleteAbort => {
                retry_on_epoch_bump || retry_on_overflow || epoch == self.producer_epoch
            }
            _ => epoch == self.producer_epoch,
        };
        if !valid_epoch {
            return Err(self.fenced(epoch));
        }
        let is_retry = retry_on_epoch_bump || retry_on_overflow;
        let invalid = TransactionError::InvalidTxnState {
            state: self.state,
            requested: result,
        };
        let (result, no_partition_added) = match (self.state, result) {
            (TransactionState::Ongoing, _) => (result, false),
            (TransactionState::CompleteCommit, TransactionResult::Commit)
            | (TransactionState::CompleteAbort, TransactionResult::Abort)
                if is_retry =>
            {
                return Ok(Transit::Unchanged)
            }
            (TransactionState::CompleteCommit, TransactionResult::Abort) if is_retry => {
                return Err(invalid)
            }
            (
                TransactionState::CompleteCommit
                | TransactionState::CompleteAbort
                | TransactionState::Empty,
                TransactionResult::Abort,
            ) => (result, true),
            (TransactionState::PrepareCommit, TransactionResult::Commit)
            | (TransactionState::PrepareAbort, TransactionResult::Abort) => {
                return Err(TransactionError::ConcurrentTransactions { state: self.state })
            }
            (TransactionState::Dead | TransactionState::PrepareEpochFence, _) => {
                return Err(self.illegal(prepare_state(result)))
            }
            _ => return Err(invalid),
        };
        self.bump_and_prepare(result, no_partition_added, now_ms, allocate_producer_id)
    }
}

impl TransactionMetadata {
    /// The EndTxn of transaction version 2: the epoch is bumped (an abort
    /// at `i16::MAX`, reachable only through a fence, keeps it), the
    /// current epoch is kept as the last one, and an exhausted producer id
    /// gets the one to complete onto. An abort with no partitions added
    /// starts its (empty) transaction now.
    fn bump_and_prepare(
        &self,
        result: TransactionResult,
        no_partition_added: bool,
        now_ms: i64,
        allocate_producer_id: impl FnOnce() -> i64,
    ) -> Result<Transit, TransactionError> {
        let prepared = self.transit(prepare_state(result))?;
        let producer_epoch =
            if self.producer_epoch == i16::MAX && result == TransactionResult::Abort {
                self.producer_epoch
            } else {
                self.bumped_epoch()?
            };
        let next_producer_id = if self.is_producer_epoch_exhausted() {
            allocate_producer_id()
        } else {
            NO_PRODUCER_ID
        };
        let transaction_start_timestamp_ms = if no_partition_added {
            now_ms
        } else {
            self.transaction_start_timestamp_ms
        };
        Ok(Transit::Write(Self {
            producer_epoch,
            last_producer_epoch: self.producer_epoch,
            next_producer_id,
            transaction_start_timestamp_ms,
            transaction_last_update_timestamp_ms: now_ms,
            client_transaction_version: TransactionVersion::V2,
            ..prepared
        }))
    }

    /// The markers of a prepared commit or abort are written to every
    /// partition: the transaction completes and its partitions are
    /// cleared. With transaction version 2, a transaction prepared with a
    /// next producer id completes onto it, at epoch 0.
    pub fn prepare_complete(&self, now_ms: i64) -> Result<Self, TransactionError> {
        let to = match self.state {
            TransactionState::PrepareCommit => TransactionState::CompleteCommit,
            TransactionState::PrepareAbort => TransactionState::CompleteAbort,
            _ => return Err(self.illegal(TransactionState::CompleteCommit)),
        };
        let rotate = self.client_transaction_version.supports_epoch_bump()
            && self.next_producer_id != NO_PRODUCER_ID;
        let (producer_id, producer_epoch) = if rotate {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        };
        Ok(Self {
            producer_id,
            producer_epoch,
            next_producer_id: NO_PRODUCER_ID,
            partitions: BTreeSet::new(),
            transaction_last_update_timestamp_ms: now_ms,
            ..self.transit(to)?
        })
    }

    /// The transactional id expired (see [`Self::is_expired`]): the
    /// metadata in state `Dead`, while its tombstone is written.
    pub fn prepare_dead(&self) -> Result<Self, TransactionError> {
        Ok(Self {
            partitions: BTreeSet::new(),
            ..self.transit(TransactionState::Dead)?
        })
    }

    fn check_producer_id(&self, producer_id: i64) -> Result<(), TransactionError> {
        if producer_id != self.producer_id {
            return Err(TransactionError::InvalidProducerIdMapping {
                request_producer_id: producer_id,
                current_producer_id: self.producer_id,
            });
        }
        Ok(())
    }

    fn fenced(&self, request_epoch: i16) -> TransactionError {
        TransactionError::ProducerFenced {
            producer_id: self.producer_id,
            request_epoch,
            current_epoch: self.producer_epoch,
        }
    }
}

/// The state EndTxn prepares for `result`.
fn prepare_state(result: TransactionResult) -> TransactionState {
    match result {
        TransactionResult::Commit => TransactionState::PrepareCommit,
        TransactionResult::Abort => TransactionState::PrepareAbort,
    }
}

#[cfg(test)]
mod tests;
