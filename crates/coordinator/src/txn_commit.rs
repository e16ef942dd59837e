//! TxnOffsetCommit (KIP-98, with KIP-447's member checks) and the end of
//! transactions on the sans-IO core.
//!
//! A transactional commit is validated like an OffsetCommit, appended as
//! one transactional batch of its producer, and then held (see
//! [`pending_txn`](crate::pending_txn)) until that producer's marker in
//! the group's `__consumer_offsets` partition: OffsetFetch never answers
//! it before.

use crate::coordinator::{CoordinatorCore, GroupEntry, PartitionResults};
use crate::error::GroupError;
use crate::group::Group;
use crate::log::{LogRecord, TransactionMarker};
use crate::offsets::{GroupOffsets, TxnOffsetCommitRequest};
use crate::pending_txn::StagedTransaction;
use crate::state::GroupState;

/// The records of a TxnOffsetCommit, to append to `partition` as one
/// transactional batch of the producer
/// ([`OffsetsLog::append_transactional`](crate::OffsetsLog::append_transactional)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionalAppend {
    /// The `__consumer_offsets` partition of the group.
    pub partition: i32,
    /// The transactional producer's id.
    pub producer_id: i64,
    /// The transactional producer's epoch.
    pub producer_epoch: i16,
    /// The offset commit records, in order.
    pub records: Vec<LogRecord>,
}

impl CoordinatorCore {
    /// TxnOffsetCommit: validates the request as Kafka does and stages one
    /// offset commit record per accepted partition. Nothing is visible: the
    /// caller appends [`transactional_append`](Self::transactional_append)
    /// and then either [`place_transactional`](Self::place_transactional)s
    /// it at the offset it was appended at (the offsets are then held for
    /// the producer's marker, see
    /// [`complete_transaction`](Self::complete_transaction)) or
    /// [`discard_staged`](Self::discard_staged)s it when the append fails.
    ///
    /// Checks, in order: the group id is not empty (INVALID_GROUP_ID); this
    /// coordinator serves the group (NOT_COORDINATOR,
    /// COORDINATOR_LOAD_IN_PROGRESS); the request names a producer
    /// ([`GroupError::InvalidProducer`]); a group that does not exist is
    /// created Empty when the request gives no generation (a producer
    /// committing for a simple consumer, or a TxnOffsetCommit before v3),
    /// and refused with ILLEGAL_GENERATION (`current: -1`) when it gives
    /// one, as Kafka's coordinator does; a Dead group answers
    /// COORDINATOR_NOT_AVAILABLE; when the request gives a generation, a
    /// member id or an instance id (KIP-447) and the group is not an Empty
    /// group committed to without a generation, the member must be current
    /// (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID) and the generation the
    /// group's (ILLEGAL_GENERATION). Unlike OffsetCommit, a group with
    /// members accepts commits without member and generation, and a
    /// rebalance in progress does not refuse them. A partition whose
    /// metadata exceeds `offset.metadata.max.bytes` answers
    /// OFFSET_METADATA_TOO_LARGE alone.
    pub fn commit_transactional_offsets(
        &mut self,
        request: &TxnOffsetCommitRequest,
        now_ms: i64,
    ) -> Result<PartitionResults, GroupError> {
        self.discard_staged();
        let group_id = request.group_id.as_str();
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let partition = self.check_owner(group_id)?;
        if request.producer_id < 0 || request.producer_epoch < 0 {
            return Err(GroupError::InvalidProducer {
                producer_id: request.producer_id,
                producer_epoch: request.producer_epoch,
            });
        }
        let created = !self.groups.contains_key(group_id);
        if created && request.generation_id >= 0 {
            return Err(GroupError::IllegalGeneration {
                requested: request.generation_id,
                current: -1,
            });
        }
        let entry = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| GroupEntry {
                group: Group::new(group_id, now_ms),
                offsets: GroupOffsets::new(),
                consumer: None,
            });
        match &entry.consumer {
            Some(consumer) => consumer.validate_transactional_commit(
                &request.member_id,
                request.group_instance_id.as_deref(),
                request.generation_id,
            )?,
            None => validate_transactional_commit(&entry.group, request)?,
        }
        let (results, records) = self.offset_records(group_id, &request.partitions, None, now_ms);
        if !records.is_empty() {
            self.staged_transaction = Some(StagedTransaction {
                partition,
                producer_id: request.producer_id,
                producer_epoch: request.producer_epoch,
                records,
            });
        }
        Ok(results)
    }

    /// The batch the last
    /// [`commit_transactional_offsets`](Self::commit_transactional_offsets)
    /// staged, to append; `None` when it staged nothing (every partition
    /// refused, or none given).
    pub fn transactional_append(&self) -> Option<TransactionalAppend> {
        self.staged_transaction
            .as_ref()
            .map(|staged| TransactionalAppend {
                partition: staged.partition,
                producer_id: staged.producer_id,
                producer_epoch: staged.producer_epoch,
                records: staged
                    .records
                    .iter()
                    .map(|record| record.to_log_record())
                    .collect(),
            })
    }

    /// The staged transactional batch was appended, ending at
    /// `last_offset`: its offsets are held for the producer's marker. They
    /// stay held if the log does not commit the batch in time, as it is in
    /// the leader's log; a new leader rebuilds them from its own log.
    pub fn place_transactional(&mut self, last_offset: i64) {
        if let Some(staged) = self.staged_transaction.take() {
            self.transactions.open(
                staged.partition,
                staged.producer_id,
                last_offset,
                staged.records,
            );
        }
    }

    /// The broker wrote the marker ending the transaction of `producer_id`
    /// (a commit when `commit`, an abort otherwise) at `marker_offset` of
    /// `partition` (WriteTxnMarkers for `__consumer_offsets`). Once the log
    /// has committed the marker (when
    /// [`advance_committed`](Self::advance_committed) passes it; the
    /// runtime catches up at once), a commit makes the offsets the
    /// producer wrote there before it the committed offsets of their
    /// groups, in the order they were appended (later ones winning, and
    /// losing to plain commits written after them), and an abort drops
    /// them. A second marker for the same producer, or one for a producer
    /// with nothing held, changes nothing.
    ///
    /// A partition that is still loading keeps the marker for after its
    /// replay (the replay sees it in the log if it read that far); one not
    /// owned answers [`GroupError::NotCoordinator`].
    pub fn complete_transaction(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: i64,
    ) -> Result<(), GroupError> {
        if self.partition_status(partition).is_none() {
            return Err(GroupError::NotCoordinator { partition });
        }
        let marker = TransactionMarker::new(commit);
        self.transactions
            .queue_marker(partition, marker_offset, producer_id, marker);
        Ok(())
    }
}

/// Kafka's TxnOffsetCommit member checks (`validateOffsetCommit` with
/// `isTransactional`).
fn validate_transactional_commit(
    group: &Group,
    request: &TxnOffsetCommitRequest,
) -> Result<(), GroupError> {
    if group.state() == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if request.generation_id < 0 && group.state() == GroupState::Empty {
        return Ok(());
    }
    let identified = request.generation_id >= 0
        || !request.member_id.is_empty()
        || request.group_instance_id.is_some();
    if identified {
        group.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
        group.check_generation(request.generation_id)?;
    }
    Ok(())
}
