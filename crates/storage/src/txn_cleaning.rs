//! What compaction does with transactions (Kafka's
//! `CleanedTransactionMetadata`), batch by batch in offset order:
//!
//! - the data batches of an aborted transaction (known from the
//!   `.txnindex` entries) are removed whole, and their keys never enter the
//!   offset map, so an aborted record cannot supersede a committed one;
//! - a marker is *discardable* once no batch of its transaction was seen in
//!   the pass (its data is gone); the cleaner then gives its batch a delete
//!   horizon (`now + delete.retention.ms`) and removes it once that has
//!   passed, as Kafka does (KIP-534). An abort marker kept because its data
//!   was still there keeps its index entry.
//!
//! Control batches are never deduplicated by key.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::batch::BatchHeader;
use crate::marker::{ControlMarker, MarkerKind};
use crate::txn_index::AbortedTxnEntry;

/// An aborted transaction whose first record the pass has reached.
#[derive(Debug, Clone, Copy)]
struct AbortedInProgress {
    entry: AbortedTxnEntry,
    data_seen: bool,
}

/// What to do with a marker batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerVerdict {
    /// Keep it (its transaction still had data in this pass); an abort
    /// marker keeps its index entry.
    Keep(Option<AbortedTxnEntry>),
    /// Its transaction has no data left: it may go once its delete horizon
    /// has passed.
    Discardable,
}

/// The transaction bookkeeping of one pass over consecutive batches.
#[derive(Debug, Default)]
pub(crate) struct TransactionCleaning {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxnEntry>,
    /// Aborted transactions reached and not ended yet, by producer.
    aborted: HashMap<i64, AbortedInProgress>,
    /// Producers whose transactional data was seen since their last marker.
    committed: HashSet<i64>,
}

impl TransactionCleaning {
    /// Bookkeeping for a pass that will see the batches overlapping the
    /// aborted transactions `entries`.
    pub(crate) fn new(mut entries: Vec<AbortedTxnEntry>) -> TransactionCleaning {
        entries.sort_unstable_by_key(|entry| entry.first_offset);
        TransactionCleaning {
            pending: entries.into(),
            ..TransactionCleaning::default()
        }
    }

    fn reach(&mut self, offset: i64) {
        while self
            .pending
            .front()
            .is_some_and(|entry| entry.first_offset <= offset)
        {
            if let Some(entry) = self.pending.pop_front() {
                self.aborted
                    .entry(entry.producer_id)
                    .or_insert(AbortedInProgress {
                        entry,
                        data_seen: false,
                    });
            }
        }
    }

    /// A data batch: `true` when it belongs to an aborted transaction (and
    /// is to be removed whole).
    pub(crate) fn on_data_batch(&mut self, header: &BatchHeader) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        match self.aborted.get_mut(&header.producer_id) {
            Some(aborted) => {
                aborted.data_seen = true;
                true
            }
            None => {
                self.committed.insert(header.producer_id);
                false
            }
        }
    }

    /// A control batch with its marker (`None`: unreadable, kept).
    pub(crate) fn on_marker(
        &mut self,
        header: &BatchHeader,
        marker: Option<ControlMarker>,
    ) -> MarkerVerdict {
        self.reach(header.last_offset());
        let Some(marker) = marker else {
            return MarkerVerdict::Keep(None);
        };
        let producer_id = header.producer_id;
        match marker.kind {
            MarkerKind::Abort => match self.aborted.remove(&producer_id) {
                Some(aborted) if aborted.data_seen => MarkerVerdict::Keep(Some(aborted.entry)),
                _ => MarkerVerdict::Discardable,
            },
            MarkerKind::Commit => {
                if self.committed.remove(&producer_id) {
                    MarkerVerdict::Keep(None)
                } else {
                    MarkerVerdict::Discardable
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batch_at;
    use crate::marker::{build_marker_batch, TransactionMarker};
    use crate::testing::{simple_batch, BatchSpec};

    fn data(producer_id: i64, base_offset: i64, transactional: bool) -> BatchHeader {
        let bytes = simple_batch(&BatchSpec {
            base_offset,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
            transactional,
            ..BatchSpec::default()
        });
        validate_batch_at(&bytes, 0).expect("valid")
    }

    fn marker(producer_id: i64, offset: i64, kind: MarkerKind) -> (BatchHeader, ControlMarker) {
        let marker = TransactionMarker {
            bumps_epoch: false,
            producer_id,
            producer_epoch: 0,
            coordinator_epoch: 0,
            kind,
        };
        let mut bytes = build_marker_batch(&marker, 0).expect("build").to_vec();
        crate::batch::assign(&mut bytes, offset, 0, None, 0).expect("assign");
        let header = validate_batch_at(&bytes, 0).expect("valid");
        (
            header,
            ControlMarker {
                kind,
                coordinator_epoch: 0,
            },
        )
    }

    #[test]
    fn aborted_data_goes_and_markers_follow_their_data() {
        let entry = AbortedTxnEntry {
            producer_id: 1,
            first_offset: 0,
            last_offset: 3,
            last_stable_offset: 1,
        };
        let mut pass = TransactionCleaning::new(vec![entry]);
        assert!(pass.on_data_batch(&data(1, 0, true)), "aborted data");
        assert!(!pass.on_data_batch(&data(2, 1, true)), "committed data");
        assert!(!pass.on_data_batch(&data(3, 2, false)), "plain data");
        let (header, abort) = marker(1, 3, MarkerKind::Abort);
        assert_eq!(
            pass.on_marker(&header, Some(abort)),
            MarkerVerdict::Keep(Some(entry))
        );
        let (header, commit) = marker(2, 4, MarkerKind::Commit);
        assert_eq!(
            pass.on_marker(&header, Some(commit)),
            MarkerVerdict::Keep(None)
        );
        // The next pass sees no data of either transaction.
        let mut next = TransactionCleaning::new(vec![entry]);
        let (header, abort) = marker(1, 3, MarkerKind::Abort);
        assert_eq!(
            next.on_marker(&header, Some(abort)),
            MarkerVerdict::Discardable
        );
        let (header, commit) = marker(2, 4, MarkerKind::Commit);
        assert_eq!(
            next.on_marker(&header, Some(commit)),
            MarkerVerdict::Discardable
        );
        assert_eq!(next.on_marker(&header, None), MarkerVerdict::Keep(None));
    }

    #[test]
    fn a_later_transaction_of_the_producer_is_not_aborted() {
        let entry = AbortedTxnEntry {
            producer_id: 1,
            first_offset: 0,
            last_offset: 1,
            last_stable_offset: 2,
        };
        let mut pass = TransactionCleaning::new(vec![entry]);
        assert!(pass.on_data_batch(&data(1, 0, true)));
        let (header, abort) = marker(1, 1, MarkerKind::Abort);
        pass.on_marker(&header, Some(abort));
        assert!(!pass.on_data_batch(&data(1, 2, true)), "a new transaction");
    }
}
