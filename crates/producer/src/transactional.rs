//! The transactional API of [`Producer`] (KIP-98, KIP-360, KIP-447):
//! `init_transactions`, `begin_transaction`, `send_offsets_to_transaction`,
//! `commit_transaction` and `abort_transaction`.
//!
//! Each call is first checked by the
//! [`TransactionManager`](crate::transaction::TransactionManager) state
//! machine, then performs its round trips through
//! [`Coordinators`](crate::coordinator::Coordinators).
//! Records are sent by the sender task as usual; it adds each partition to
//! the transaction (AddPartitionsToTxn) before the partition's first batch.

use std::time::{Duration, Instant};

use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::{ErrorCode, Response};

use crate::coordinator::{
    add_offsets_request, end_txn_request, init_producer_id_request, step_for_code,
    txn_offset_commit_error, txn_offset_commit_request, unexpected, ConsumerGroupMetadata, Offsets,
    Target, Transactions,
};
use crate::error::{ErrorContext, ProduceError, TransactionError};
use crate::producer::Producer;
use crate::transaction_state::{TransactionOperation, TransactionState};

impl Producer {
    /// The transaction state and coordinators, or
    /// [`TransactionError::NotTransactional`] without a `transactional.id`
    /// ([`TransactionError::Closed`] once closed).
    fn transactions(&self) -> Result<&Transactions, TransactionError> {
        if self
            .shared
            .closing
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err(TransactionError::Closed);
        }
        self.shared
            .transactions
            .as_ref()
            .ok_or(TransactionError::NotTransactional)
    }

    /// The transaction state (`None` without a `transactional.id`).
    pub fn transaction_state(&self) -> Option<TransactionState> {
        self.shared
            .transactions
            .as_ref()
            .map(|transactions| transactions.manager().state())
    }

    fn producer_id(&self, operation: TransactionOperation) -> Result<(i64, i16), TransactionError> {
        self.shared
            .idempotence()
            .producer
            .ok_or(TransactionError::InvalidState {
                operation,
                state: TransactionState::Uninitialized,
            })
    }

    /// Gets the producer id and epoch for the `transactional.id` from its
    /// transaction coordinator (InitProducerId), which fences any earlier
    /// producer with the same id and completes its open transaction. Must
    /// be called once before any other transactional call; after a
    /// [`TransactionError::Timeout`] it may be called again.
    pub async fn init_transactions(&self, timeout: Duration) -> Result<(), TransactionError> {
        let transactions = self.transactions()?;
        let bump = {
            let mut manager = transactions.manager();
            manager.start_init()?;
            // Resumed after an abort whose epoch bump timed out: bump it.
            manager.epoch_bump_required()
        };
        self.init_producer_id(transactions, Instant::now() + timeout, bump)
            .await
    }

    /// InitProducerId; with `bump`, for the current producer id and epoch
    /// (KIP-360). On success the sequences restart and the state is
    /// `Ready`.
    async fn init_producer_id(
        &self,
        transactions: &Transactions,
        deadline: Instant,
        bump: bool,
    ) -> Result<(), TransactionError> {
        let transactional_id = transactions.transactional_id();
        let current = bump.then(|| self.shared.idempotence().producer).flatten();
        let timeout = transactions.transaction_timeout;
        let context = ErrorContext {
            transactional_id,
            operation: TransactionOperation::InitTransactions,
            resource: transactional_id,
        };
        let retry_backoff = transactions.coordinators.retry_backoff();
        let build =
            |version| init_producer_id_request(transactional_id, timeout, current, version).into();
        let interpret = |response| match response {
            Response::InitProducerId(response) => {
                let code = ErrorCode::from_code(response.error_code);
                step_for_code(code, context, retry_backoff)
                    .map(|()| (response.producer_id.0, response.producer_epoch))
            }
            _ => unexpected(ApiKey::InitProducerId),
        };
        let coordinators = &transactions.coordinators;
        let target = Target::Transaction;
        let result = coordinators
            .call(
                target,
                context,
                ApiKey::InitProducerId,
                deadline,
                build,
                interpret,
            )
            .await;
        let producer = self.record_failure(transactions, result)?;
        let mut idempotence = self.shared.idempotence();
        idempotence.producer = Some(producer);
        idempotence.sequences.clear();
        idempotence.acknowledged.clear();
        drop(idempotence);
        transactions.manager().init_completed();
        Ok(())
    }

    /// Applies a failed call's error to the state machine.
    fn record_failure<T>(
        &self,
        transactions: &Transactions,
        result: Result<T, TransactionError>,
    ) -> Result<T, TransactionError> {
        if let Err(error) = &result {
            transactions.manager().fail(error.clone());
        }
        result
    }

    /// Opens a transaction: records sent from now on belong to it. Only in
    /// `Ready` (after `init_transactions`, or after the previous
    /// transaction ended).
    pub fn begin_transaction(&self) -> Result<(), TransactionError> {
        self.transactions()?.manager().begin()
    }

    /// Adds a consumer's offsets to the transaction (KIP-447): they are
    /// committed with it, or dropped if it aborts. `group` is the
    /// consumer's group metadata, so a member rebalanced out cannot commit.
    /// Sends AddOffsetsToTxn to the transaction coordinator, then
    /// TxnOffsetCommit to the group's coordinator, within `max.block.ms`.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &Offsets,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        let transactions = self.transactions()?;
        transactions.manager().check_send_offsets()?;
        if offsets.is_empty() {
            return Ok(());
        }
        let producer = self.producer_id(TransactionOperation::SendOffsets)?;
        let deadline = Instant::now() + self.config.max_block;
        let result = self
            .add_offsets(transactions, producer, &group.group_id, deadline)
            .await;
        self.record_failure(transactions, result)?;
        transactions.manager().offsets_added();
        let result = self
            .commit_offsets(transactions, producer, offsets, group, deadline)
            .await;
        self.record_failure(transactions, result)
    }

    async fn add_offsets(
        &self,
        transactions: &Transactions,
        producer: (i64, i16),
        group_id: &str,
        deadline: Instant,
    ) -> Result<(), TransactionError> {
        let transactional_id = transactions.transactional_id();
        let context = ErrorContext {
            transactional_id,
            operation: TransactionOperation::SendOffsets,
            resource: group_id,
        };
        let retry_backoff = transactions.coordinators.retry_backoff();
        let build = |_version| add_offsets_request(transactional_id, producer, group_id).into();
        let interpret = |response| match response {
            Response::AddOffsetsToTxn(response) => {
                let code = ErrorCode::from_code(response.error_code);
                step_for_code(code, context, retry_backoff)
            }
            _ => unexpected(ApiKey::AddOffsetsToTxn),
        };
        let target = Target::Transaction;
        let api_key = ApiKey::AddOffsetsToTxn;
        transactions
            .coordinators
            .call(target, context, api_key, deadline, build, interpret)
            .await
    }

    async fn commit_offsets(
        &self,
        transactions: &Transactions,
        producer: (i64, i16),
        offsets: &Offsets,
        group: &ConsumerGroupMetadata,
        deadline: Instant,
    ) -> Result<(), TransactionError> {
        let transactional_id = transactions.transactional_id();
        let context = ErrorContext {
            transactional_id,
            operation: TransactionOperation::SendOffsets,
            resource: &group.group_id,
        };
        let retry_backoff = transactions.coordinators.retry_backoff();
        let build = |version| {
            txn_offset_commit_request(transactional_id, producer, group, offsets, version).into()
        };
        let interpret = |response| match response {
            Response::TxnOffsetCommit(response) => {
                step_for_code(txn_offset_commit_error(&response), context, retry_backoff)
            }
            _ => unexpected(ApiKey::TxnOffsetCommit),
        };
        let target = Target::Group(&group.group_id);
        let api_key = ApiKey::TxnOffsetCommit;
        transactions
            .coordinators
            .call(target, context, api_key, deadline, build, interpret)
            .await
    }

    /// Commits the transaction: sends every record queued in it and waits
    /// for their acknowledgements, then EndTxn(commit). If a record failed,
    /// the transaction cannot commit: the error is returned and the
    /// producer is in `AbortableError` (call
    /// [`abort_transaction`](Self::abort_transaction)). After a
    /// [`TransactionError::Timeout`] it may be called again.
    pub async fn commit_transaction(&self, timeout: Duration) -> Result<(), TransactionError> {
        let transactions = self.transactions()?;
        transactions.manager().start_commit()?;
        let started = Instant::now();
        let deadline = started + timeout;
        if tokio::time::timeout_at(deadline.into(), self.flush())
            .await
            .is_err()
        {
            return Err(TransactionError::Timeout {
                operation: TransactionOperation::CommitTransaction,
                elapsed_ms: elapsed_ms(started),
            });
        }
        if let Some(error) = transactions.manager().error_for_queued_batches() {
            return Err(error);
        }
        self.end_transaction(transactions, true, deadline).await
    }

    /// Aborts the transaction: records not sent yet fail with
    /// [`TransactionError::Aborted`], those in flight are awaited, then
    /// EndTxn(abort); when the transaction failed in a way that needs it
    /// (UNKNOWN_PRODUCER_ID, a failed record), the epoch is then bumped
    /// (KIP-360). Allowed in a transaction and in `AbortableError`; after a
    /// [`TransactionError::Timeout`] it may be called again.
    pub async fn abort_transaction(&self, timeout: Duration) -> Result<(), TransactionError> {
        let transactions = self.transactions()?;
        transactions.manager().start_abort()?;
        let started = Instant::now();
        let deadline = started + timeout;
        let queued = self.shared.accumulator().take_all();
        for batch in queued {
            batch.fail(ProduceError::Transaction(TransactionError::Aborted));
        }
        let settled = self.settle(transactions);
        if tokio::time::timeout_at(deadline.into(), settled)
            .await
            .is_err()
        {
            return Err(TransactionError::Timeout {
                operation: TransactionOperation::AbortTransaction,
                elapsed_ms: elapsed_ms(started),
            });
        }
        self.end_transaction(transactions, false, deadline).await
    }

    /// Waits until no batch is in flight and no AddPartitionsToTxn is under
    /// way.
    async fn settle(&self, transactions: &Transactions) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let adding = transactions.manager().add_in_flight();
            if !adding && self.shared.accumulator().is_empty() {
                return;
            }
            self.shared.wake.notify_one();
            let _ = tokio::time::timeout(Duration::from_millis(20), drained).await;
        }
    }

    /// EndTxn when the coordinator knows of the transaction, then `Ready`
    /// (or the epoch bump after an abort that needs one).
    async fn end_transaction(
        &self,
        transactions: &Transactions,
        committed: bool,
        deadline: Instant,
    ) -> Result<(), TransactionError> {
        let needs_end_txn = transactions.manager().needs_end_txn();
        if needs_end_txn {
            let operation = if committed {
                TransactionOperation::CommitTransaction
            } else {
                TransactionOperation::AbortTransaction
            };
            let producer = self.producer_id(operation)?;
            let result = self
                .send_end_txn(transactions, producer, committed, operation, deadline)
                .await;
            self.record_failure(transactions, result)?;
        }
        let state = transactions.manager().end_completed();
        if state == TransactionState::Initializing {
            return self.init_producer_id(transactions, deadline, true).await;
        }
        Ok(())
    }

    async fn send_end_txn(
        &self,
        transactions: &Transactions,
        producer: (i64, i16),
        committed: bool,
        operation: TransactionOperation,
        deadline: Instant,
    ) -> Result<(), TransactionError> {
        let transactional_id = transactions.transactional_id();
        let context = ErrorContext {
            transactional_id,
            operation,
            resource: transactional_id,
        };
        let retry_backoff = transactions.coordinators.retry_backoff();
        let build = |_version| end_txn_request(transactional_id, producer, committed).into();
        let interpret = |response| match response {
            Response::EndTxn(response) => {
                let code = ErrorCode::from_code(response.error_code);
                step_for_code(code, context, retry_backoff)
            }
            _ => unexpected(ApiKey::EndTxn),
        };
        let target = Target::Transaction;
        transactions
            .coordinators
            .call(target, context, ApiKey::EndTxn, deadline, build, interpret)
            .await
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
