//! The log's side of transactions (KIP-98): markers written by the
//! leader, the last stable offset, and the aborted transactions a
//! read_committed fetch needs.
//!
//! Which transactions are ongoing is producer state
//! ([`crate::producer_state`]), updated by every append (leader and
//! follower) and by recovery from the batches themselves, so every replica
//! and a restarted broker agree. Aborted transactions are listed per
//! segment in its `.txnindex` ([`crate::txn_index`]).

use crate::error::AppendError;
use crate::log::{AppendInfo, Log};
use crate::marker::{build_marker_batch, ControlMarker, TransactionMarker};
use crate::producer_state::ProducerSummary;
use crate::txn_index::{AbortedTransaction, AbortedTxnEntry};

impl Log {
    /// Writes `marker` as the leader (WriteTxnMarkers): Kafka's control
    /// batch for it, timestamped `now_ms`, gets the next offset and
    /// `leader_epoch`. A producer epoch below the producer's is
    /// [`AppendError::InvalidProducerEpoch`], a coordinator epoch below the
    /// one of its last marker [`AppendError::TransactionCoordinatorFenced`].
    /// A producer with no ongoing transaction here still gets its marker
    /// (nothing is indexed for it), as in Kafka. An abort marker that ends
    /// a transaction is recorded in the active segment's `.txnindex`.
    /// Flushes when `flush.messages` says so.
    pub fn append_marker_as_leader(
        &mut self,
        marker: &TransactionMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, AppendError> {
        self.check_online()?;
        self.producer_state.check_marker(marker)?;
        let records =
            build_marker_batch(marker, now_ms).map_err(|source| AppendError::MalformedRecords {
                position: 0,
                source,
            })?;
        let control = ControlMarker {
            kind: marker.kind,
            coordinator_epoch: marker.coordinator_epoch,
        };
        let info = self.append_control_as_leader(records, control, leader_epoch, now_ms)?;
        self.flush_if_due(now_ms)?;
        Ok(info)
    }

    /// The first offset of the earliest transaction that is ongoing, or
    /// whose marker is not below the high watermark yet (never below the
    /// log start offset); `None` when there is none.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state
            .first_unstable_offset(self.high_watermark)
            .map(|offset| offset.max(self.log_start_offset))
    }

    /// The last stable offset: read_committed consumers read below it.
    /// The first unstable offset, or the high watermark if that is lower.
    pub fn last_stable_offset(&self) -> i64 {
        self.first_unstable_offset()
            .map_or(self.high_watermark, |offset| {
                offset.min(self.high_watermark)
            })
    }

    /// The aborted transactions a read_committed fetch of
    /// `[start_offset, upper_bound_offset)` must be told about: from the
    /// segment holding `start_offset` on, every indexed abort whose marker
    /// is at or after `start_offset` and whose first record is before
    /// `upper_bound_offset` (Kafka's rule). The scan stops at the first
    /// entry whose last stable offset reaches the bound; segments without
    /// aborts cost nothing.
    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTransaction> {
        let mut aborted = Vec::new();
        let from = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        for segment in self.segments.range(from..).map(|(_, segment)| segment) {
            if segment
                .txn_index()
                .collect(start_offset, upper_bound_offset, &mut aborted)
            {
                break;
            }
        }
        aborted
    }

    /// Every index entry overlapping `[start_offset, upper_bound_offset)`
    /// (marker at or after the start, first record before the bound), for
    /// the cleaner: all segments are read, without the early stop.
    pub(crate) fn aborted_entries(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxnEntry> {
        self.segments
            .values()
            .flat_map(|segment| segment.txn_index().entries())
            .filter(|entry| {
                entry.last_offset >= start_offset && entry.first_offset < upper_bound_offset
            })
            .copied()
            .collect()
    }

    /// Every producer the log knows, by id: epoch, last sequence, last
    /// timestamp, coordinator epoch and ongoing transaction
    /// (DescribeProducers, KIP-664).
    pub fn producer_states(&self) -> Vec<ProducerSummary> {
        self.producer_state.summaries()
    }
}

#[cfg(test)]
#[path = "transaction_tests.rs"]
mod tests;
