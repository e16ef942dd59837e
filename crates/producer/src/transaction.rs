//! The sans-IO transaction manager: which calls the producer's state allows,
//! which partitions the coordinator must add before their records may be
//! sent, and what an error does to the state.
//!
//! It does no I/O and reads no clock of its own: the producer handle and
//! the sender task call it under one lock, and perform the requests it
//! asks for. Every call a caller makes is checked here first, so an
//! illegal one fails with [`TransactionError::InvalidState`] (or with the
//! error that put the producer in an error state) before anything is sent.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::accumulator::TopicPartition;
use crate::error::TransactionError;
use crate::transaction_state::{TransactionOperation, TransactionState};

/// The state of one transactional producer.
#[derive(Debug)]
pub struct TransactionManager {
    transactional_id: String,
    state: TransactionState,
    /// Partitions with records in the open transaction, not added yet.
    pending_partitions: BTreeSet<TopicPartition>,
    /// Partitions an AddPartitionsToTxn is under way for.
    adding_partitions: BTreeSet<TopicPartition>,
    /// Partitions the coordinator added to the open transaction.
    partitions_in_transaction: BTreeSet<TopicPartition>,
    /// Whether the coordinator knows of the open transaction (a partition
    /// or a group's offsets were added): only then does it need an EndTxn.
    transaction_started: bool,
    /// The next AddPartitionsToTxn waits until then (after a retriable
    /// error).
    add_partitions_at: Option<Instant>,
    /// The error that put the producer in `AbortableError` or `FatalError`.
    last_error: Option<TransactionError>,
    /// The abort must be followed by an epoch bump (KIP-360).
    epoch_bump_required: bool,
}

impl TransactionManager {
    /// A manager for `transactional_id`, `Uninitialized`.
    pub fn new(transactional_id: impl Into<String>) -> Self {
        TransactionManager {
            transactional_id: transactional_id.into(),
            state: TransactionState::Uninitialized,
            pending_partitions: BTreeSet::new(),
            adding_partitions: BTreeSet::new(),
            partitions_in_transaction: BTreeSet::new(),
            transaction_started: false,
            add_partitions_at: None,
            last_error: None,
            epoch_bump_required: false,
        }
    }

    /// The transactional id.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The current state.
    pub fn state(&self) -> TransactionState {
        self.state
    }

    /// The error that put the producer in an error state, if it is in one.
    pub fn last_error(&self) -> Option<&TransactionError> {
        self.last_error.as_ref()
    }

    /// Whether the abort under way must be followed by an epoch bump.
    pub fn epoch_bump_required(&self) -> bool {
        self.epoch_bump_required
    }

    fn move_to(&mut self, to: TransactionState) {
        match self.state.transition(to) {
            Ok(state) => self.state = state,
            // Every caller checks the state first.
            Err(illegal) => debug_assert!(false, "{illegal}"),
        }
    }

    /// The error for `operation` refused in the current state: the error
    /// that caused an error state, else [`TransactionError::InvalidState`].
    fn refuse(&self, operation: TransactionOperation) -> TransactionError {
        match (&self.last_error, self.state) {
            (Some(error), TransactionState::AbortableError | TransactionState::FatalError) => {
                error.clone()
            }
            (_, state) => TransactionError::InvalidState { operation, state },
        }
    }

    fn require(
        &self,
        operation: TransactionOperation,
        allowed: &[TransactionState],
    ) -> Result<(), TransactionError> {
        if allowed.contains(&self.state) {
            Ok(())
        } else {
            Err(self.refuse(operation))
        }
    }

    /// `init_transactions`: from `Uninitialized`, or resumed in
    /// `Initializing` (after a timeout, or for the epoch bump after an
    /// abort).
    pub fn start_init(&mut self) -> Result<(), TransactionError> {
        use TransactionState::*;
        self.require(
            TransactionOperation::InitTransactions,
            &[Uninitialized, Initializing],
        )?;
        if self.state == Uninitialized {
            self.move_to(Initializing);
        }
        Ok(())
    }

    /// InitProducerId succeeded: `Ready`.
    pub fn init_completed(&mut self) {
        if self.state == TransactionState::Initializing {
            self.move_to(TransactionState::Ready);
            self.epoch_bump_required = false;
        }
    }

    /// `begin_transaction`: `Ready` to `InTransaction`.
    pub fn begin(&mut self) -> Result<(), TransactionError> {
        self.require(
            TransactionOperation::BeginTransaction,
            &[TransactionState::Ready],
        )?;
        self.move_to(TransactionState::InTransaction);
        Ok(())
    }

    /// `send` of a record to `topic_partition`: allowed in a transaction;
    /// a partition new to it is queued to be added to the transaction.
    pub fn check_send(&mut self, topic_partition: &TopicPartition) -> Result<(), TransactionError> {
        self.require(
            TransactionOperation::Send,
            &[TransactionState::InTransaction],
        )?;
        if !self.partitions_in_transaction.contains(topic_partition)
            && !self.adding_partitions.contains(topic_partition)
        {
            self.pending_partitions.insert(topic_partition.clone());
        }
        Ok(())
    }

    /// `send_offsets_to_transaction`: allowed in a transaction.
    pub fn check_send_offsets(&self) -> Result<(), TransactionError> {
        self.require(
            TransactionOperation::SendOffsets,
            &[TransactionState::InTransaction],
        )
    }

    /// The coordinator added a group's offsets to the transaction.
    pub fn offsets_added(&mut self) {
        self.transaction_started = true;
    }

    /// `commit_transaction`: `InTransaction` to `Committing`, or resumed
    /// in `Committing` after a timeout.
    pub fn start_commit(&mut self) -> Result<(), TransactionError> {
        use TransactionState::*;
        self.require(
            TransactionOperation::CommitTransaction,
            &[InTransaction, Committing],
        )?;
        if self.state == InTransaction {
            self.move_to(Committing);
        }
        Ok(())
    }

    /// `abort_transaction`: from `InTransaction` or `AbortableError` to
    /// `Aborting`, or resumed in `Aborting`. Partitions not added yet are
    /// forgotten: their records are dropped.
    pub fn start_abort(&mut self) -> Result<(), TransactionError> {
        use TransactionState::*;
        self.require(
            TransactionOperation::AbortTransaction,
            &[InTransaction, AbortableError, Aborting],
        )?;
        if self.state != Aborting {
            self.move_to(Aborting);
        }
        self.pending_partitions.clear();
        self.add_partitions_at = None;
        Ok(())
    }

    /// Whether ending the transaction needs an EndTxn: only when the
    /// coordinator knows of it.
    pub fn needs_end_txn(&self) -> bool {
        self.transaction_started || !self.partitions_in_transaction.is_empty()
    }

    /// EndTxn succeeded (or was not needed): `Ready`, or `Initializing`
    /// when an abort must bump the epoch. Returns the new state.
    pub fn end_completed(&mut self) -> TransactionState {
        let next = match self.state {
            TransactionState::Aborting if self.epoch_bump_required => {
                TransactionState::Initializing
            }
            TransactionState::Committing | TransactionState::Aborting => TransactionState::Ready,
            state => return state,
        };
        self.move_to(next);
        self.pending_partitions.clear();
        self.adding_partitions.clear();
        self.partitions_in_transaction.clear();
        self.transaction_started = false;
        self.add_partitions_at = None;
        self.last_error = None;
        next
    }

    /// Applies an error: a fatal one moves to `FatalError` from any state;
    /// an abortable one to `AbortableError` when a transaction is open (or
    /// being committed, or the producer is initializing), and marks an
    /// epoch bump when it needs one. Other errors change nothing.
    pub fn fail(&mut self, error: TransactionError) {
        use TransactionState::*;
        if error.is_fatal() {
            self.move_to(FatalError);
            self.last_error = Some(error);
            return;
        }
        if !error.is_abortable() {
            return;
        }
        if error.needs_epoch_bump() {
            self.epoch_bump_required = true;
        }
        if matches!(self.state, Initializing | InTransaction | Committing) {
            self.move_to(AbortableError);
            self.last_error = Some(error);
        }
    }

    /// The error queued batches must fail with, when the transaction can no
    /// longer send them (an error state).
    pub fn error_for_queued_batches(&self) -> Option<TransactionError> {
        match self.state {
            TransactionState::AbortableError | TransactionState::FatalError => {
                self.last_error.clone()
            }
            _ => None,
        }
    }

    /// The partitions to add now with one AddPartitionsToTxn (they move to
    /// "adding"), or none: no transaction is being written, an add is under
    /// way, or its retry backoff has not passed.
    pub fn partitions_to_add(&mut self, now: Instant) -> Vec<TopicPartition> {
        let writing = matches!(
            self.state,
            TransactionState::InTransaction | TransactionState::Committing
        );
        let waiting = self.add_partitions_at.is_some_and(|at| at > now);
        if !writing || waiting || !self.adding_partitions.is_empty() {
            return Vec::new();
        }
        self.add_partitions_at = None;
        let partitions = std::mem::take(&mut self.pending_partitions);
        self.adding_partitions.clone_from(&partitions);
        partitions.into_iter().collect()
    }

    /// When the next AddPartitionsToTxn may go, if one waits for its
    /// backoff.
    pub fn next_add_partitions_at(&self) -> Option<Instant> {
        self.add_partitions_at
            .filter(|_| !self.pending_partitions.is_empty())
    }

    /// Whether an AddPartitionsToTxn is under way.
    pub fn add_in_flight(&self) -> bool {
        !self.adding_partitions.is_empty()
    }

    /// The coordinator added the partitions under way: their records may be
    /// sent.
    pub fn partitions_added(&mut self) {
        let added = std::mem::take(&mut self.adding_partitions);
        if !added.is_empty() {
            self.transaction_started = true;
        }
        self.partitions_in_transaction.extend(added);
    }

    /// The add under way must be retried at `retry_at`.
    pub fn partitions_retry(&mut self, retry_at: Instant) {
        let adding = std::mem::take(&mut self.adding_partitions);
        if self.state != TransactionState::Aborting {
            self.pending_partitions.extend(adding);
        }
        self.add_partitions_at = Some(retry_at);
    }

    /// The add under way failed for good with `error`.
    pub fn partitions_failed(&mut self, error: TransactionError) {
        self.adding_partitions.clear();
        self.fail(error);
    }

    /// Whether a batch of `topic_partition` may be sent: its partition was
    /// added to the transaction being written.
    pub fn may_send(&self, topic_partition: &TopicPartition) -> bool {
        matches!(
            self.state,
            TransactionState::InTransaction | TransactionState::Committing
        ) && self.partitions_in_transaction.contains(topic_partition)
    }
}

#[cfg(test)]
#[path = "transaction_tests.rs"]
mod tests;
