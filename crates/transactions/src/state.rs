//! The state of one transactional id (Kafka's `TransactionState`).
//!
//! ```text
//!   Empty, CompleteCommit, CompleteAbort ──▶ Ongoing ──▶ PrepareCommit ──▶ CompleteCommit
//!                                               │ └────▶ PrepareEpochFence ──┐
//!                                               └──────▶ PrepareAbort ◀──────┘
//!                                                             └──▶ CompleteAbort
//!   Empty, CompleteCommit, CompleteAbort ──▶ Empty, Dead
//! ```
//!
//! - `Empty`: the id has a producer id and epoch, and no transaction is open.
//! - `Ongoing`: partitions were added; records may be written.
//! - `PrepareCommit`, `PrepareAbort`: EndTxn was accepted and written to the
//!   log; the markers are being written to the partitions.
//! - `CompleteCommit`, `CompleteAbort`: every partition has its marker.
//! - `Dead`: the id expired (`transactional.id.expiration.ms`) and its
//!   tombstone is being written.
//! - `PrepareEpochFence`: a new producer with the same transactional id
//!   fenced an ongoing transaction, which is aborted with a bumped epoch.
//!
//! Transaction version 2 (KIP-890 part 2) also lets `Empty`,
//! `CompleteCommit` and `CompleteAbort` enter `PrepareAbort`: a client that
//! does not know whether its transaction reached the coordinator may always
//! abort. The table is the one Kafka 4.x checks, state by state, in
//! [`TransactionState::valid_previous_states`].

use std::fmt;

/// The state of one transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// No transaction is open.
    Empty,
    /// A transaction is open and has partitions.
    Ongoing,
    /// The transaction is committing: markers are being written.
    PrepareCommit,
    /// The transaction is aborting: markers are being written.
    PrepareAbort,
    /// Every partition has the commit marker.
    CompleteCommit,
    /// Every partition has the abort marker.
    CompleteAbort,
    /// The transactional id expired and is being removed.
    Dead,
    /// An ongoing transaction is being fenced by a newer producer.
    PrepareEpochFence,
}

impl TransactionState {
    /// All states, for exhaustive checks.
    pub const ALL: [Self; 8] = [
        Self::Empty,
        Self::Ongoing,
        Self::PrepareCommit,
        Self::PrepareAbort,
        Self::CompleteCommit,
        Self::CompleteAbort,
        Self::Dead,
        Self::PrepareEpochFence,
    ];

    /// The states from which `self` may be entered.
    pub fn valid_previous_states(self) -> &'static [Self] {
        match self {
            Self::Empty => &[Self::Empty, Self::CompleteCommit, Self::CompleteAbort],
            Self::Ongoing => &[
                Self::Ongoing,
                Self::Empty,
                Self::CompleteCommit,
                Self::CompleteAbort,
            ],
            Self::PrepareCommit | Self::PrepareEpochFence => &[Self::Ongoing],
            Self::PrepareAbort => &[
                Self::Ongoing,
                Self::PrepareEpochFence,
                Self::Empty,
                Self::CompleteCommit,
                Self::CompleteAbort,
            ],
            Self::CompleteCommit => &[Self::PrepareCommit],
            Self::CompleteAbort => &[Self::PrepareAbort],
            Self::Dead => &[Self::Empty, Self::CompleteAbort, Self::CompleteCommit],
        }
    }

    /// Moves to `to` if the transition is legal.
    pub fn transition(self, to: Self) -> Result<Self, IllegalTransition> {
        if to.valid_previous_states().contains(&self) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }

    /// The id of the state in `TransactionLogValue.transaction_status`.
    pub fn id(self) -> i8 {
        match self {
            Self::Empty => 0,
            Self::Ongoing => 1,
            Self::PrepareCommit => 2,
            Self::PrepareAbort => 3,
            Self::CompleteCommit => 4,
            Self::CompleteAbort => 5,
            Self::Dead => 6,
            Self::PrepareEpochFence => 7,
        }
    }

    /// The state with log id `id`, or `None` for an unknown id.
    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// Whether the transactional id may expire in this state: only when no
    /// transaction is open or completing.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
    }

    /// Kafka's name of the state, as DescribeTransactions and
    /// ListTransactions report it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state with Kafka's name `name` (case-sensitive), or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == name)
    }
}

/// How a transaction ends, as EndTxn asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionResult {
    /// Commit: the records become visible to `read_committed` readers.
    Commit,
    /// Abort: the records are skipped by `read_committed` readers.
    Abort,
}

impl fmt::Display for TransactionResult {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Commit => "commit",
            Self::Abort => "abort",
        })
    }
}

/// A transition the state table forbids. It lives with the table, and the
/// errors of [`crate::error`] carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition from {from} to {to}")]
pub struct IllegalTransition {
    /// The current state.
    pub from: TransactionState,
    /// The requested state.
    pub to: TransactionState,
}

impl fmt::Display for TransactionState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::TransactionState::{self, *};

    macro_rules! transitions {
        ($($name:ident: $from:ident => $to:ident, $legal:literal;)*) => {
            $(
                #[test]
                fn $name() {
                    let result = $from.transition($to);
                    if $legal {
                        assert_eq!(result, Ok($to));
                    } else {
                        let error = result.unwrap_err();
                        assert_eq!((error.from, error.to), ($from, $to));
                    }
                }
            )*

            #[test]
            fn every_pair_is_covered_once() {
                let listed = [$(($from, $to)),*];
                for from in TransactionState::ALL {
                    for to in TransactionState::ALL {
                        let count = listed.iter().filter(|pair| **pair == (from, to)).count();
                        assert_eq!(count, 1, "{from} -> {to} is listed {count} times");
                    }
                }
            }
        };
    }

    transitions! {
        empty_to_empty_is_legal: Empty => Empty, true;
        empty_to_ongoing_is_legal: Empty => Ongoing, true;
        empty_to_prepare_commit_is_illegal: Empty => PrepareCommit, false;
        empty_to_prepare_abort_is_legal: Empty => PrepareAbort, true;
        empty_to_complete_commit_is_illegal: Empty => CompleteCommit, false;
        empty_to_complete_abort_is_illegal: Empty => CompleteAbort, false;
        empty_to_dead_is_legal: Empty => Dead, true;
        empty_to_prepare_epoch_fence_is_illegal: Empty => PrepareEpochFence, false;

        ongoing_to_empty_is_illegal: Ongoing => Empty, false;
        ongoing_to_ongoing_is_legal: Ongoing => Ongoing, true;
        ongoing_to_prepare_commit_is_legal: Ongoing => PrepareCommit, true;
        ongoing_to_prepare_abort_is_legal: Ongoing => PrepareAbort, true;
        ongoing_to_complete_commit_is_illegal: Ongoing => CompleteCommit, false;
        ongoing_to_complete_abort_is_illegal: Ongoing => CompleteAbort, false;
        ongoing_to_dead_is_illegal: Ongoing => Dead, false;
        ongoing_to_prepare_epoch_fence_is_legal: Ongoing => PrepareEpochFence, true;

        prepare_commit_to_empty_is_illegal: PrepareCommit => Empty, false;
        prepare_commit_to_ongoing_is_illegal: PrepareCommit => Ongoing, false;
        prepare_commit_to_prepare_commit_is_illegal: PrepareCommit => PrepareCommit, false;
        prepare_commit_to_prepare_abort_is_illegal: PrepareCommit => PrepareAbort, false;
        prepare_commit_to_complete_commit_is_legal: PrepareCommit => CompleteCommit, true;
        prepare_commit_to_complete_abort_is_illegal: PrepareCommit => CompleteAbort, false;
        prepare_commit_to_dead_is_illegal: PrepareCommit => Dead, false;
        prepare_commit_to_prepare_epoch_fence_is_illegal: PrepareCommit => PrepareEpochFence, false;

        prepare_abort_to_empty_is_illegal: PrepareAbort => Empty, false;
        prepare_abort_to_ongoing_is_illegal: PrepareAbort => Ongoing, false;
        prepare_abort_to_prepare_commit_is_illegal: PrepareAbort => PrepareCommit, false;
        prepare_abort_to_prepare_abort_is_illegal: PrepareAbort => PrepareAbort, false;
        prepare_abort_to_complete_commit_is_illegal: PrepareAbort => CompleteCommit, false;
        prepare_abort_to_complete_abort_is_legal: PrepareAbort => CompleteAbort, true;
        prepare_abort_to_dead_is_illegal: PrepareAbort => Dead, false;
        prepare_abort_to_prepare_epoch_fence_is_illegal: PrepareAbort => PrepareEpochFence, false;

        complete_commit_to_empty_is_legal: CompleteCommit => Empty, true;
        complete_commit_to_ongoing_is_legal: CompleteCommit => Ongoing, true;
        complete_commit_to_prepare_commit_is_illegal: CompleteCommit => PrepareCommit, false;
        complete_commit_to_prepare_abort_is_legal: CompleteCommit => PrepareAbort, true;
        complete_commit_to_complete_commit_is_illegal: CompleteCommit => CompleteCommit, false;
        complete_commit_to_complete_abort_is_illegal: CompleteCommit => CompleteAbort, false;
        complete_commit_to_dead_is_legal: CompleteCommit => Dead, true;
        complete_commit_to_prepare_epoch_fence_is_illegal: CompleteCommit => PrepareEpochFence, false;

        complete_abort_to_empty_is_legal: CompleteAbort => Empty, true;
        complete_abort_to_ongoing_is_legal: CompleteAbort => Ongoing, true;
        complete_abort_to_prepare_commit_is_illegal: CompleteAbort => PrepareCommit, false;
        complete_abort_to_prepare_abort_is_legal: CompleteAbort => PrepareAbort, true;
        complete_abort_to_complete_commit_is_illegal: CompleteAbort => CompleteCommit, false;
        complete_abort_to_complete_abort_is_illegal: CompleteAbort => CompleteAbort, false;
        complete_abort_to_dead_is_legal: CompleteAbort => Dead, true;
        complete_abort_to_prepare_epoch_fence_is_illegal: CompleteAbort => PrepareEpochFence, false;

        dead_to_empty_is_illegal: Dead => Empty, false;
        dead_to_ongoing_is_illegal: Dead => Ongoing, false;
        dead_to_prepare_commit_is_illegal: Dead => PrepareCommit, false;
        dead_to_prepare_abort_is_illegal: Dead => PrepareAbort, false;
        dead_to_complete_commit_is_illegal: Dead => CompleteCommit, false;
        dead_to_complete_abort_is_illegal: Dead => CompleteAbort, false;
        dead_to_dead_is_illegal: Dead => Dead, false;
        dead_to_prepare_epoch_fence_is_illegal: Dead => PrepareEpochFence, false;

        prepare_epoch_fence_to_empty_is_illegal: PrepareEpochFence => Empty, false;
        prepare_epoch_fence_to_ongoing_is_illegal: PrepareEpochFence => Ongoing, false;
        prepare_epoch_fence_to_prepare_commit_is_illegal: PrepareEpochFence => PrepareCommit, false;
        prepare_epoch_fence_to_prepare_abort_is_legal: PrepareEpochFence => PrepareAbort, true;
        prepare_epoch_fence_to_complete_commit_is_illegal: PrepareEpochFence => CompleteCommit, false;
        prepare_epoch_fence_to_complete_abort_is_illegal: PrepareEpochFence => CompleteAbort, false;
        prepare_epoch_fence_to_dead_is_illegal: PrepareEpochFence => Dead, false;
        prepare_epoch_fence_to_prepare_epoch_fence_is_illegal: PrepareEpochFence => PrepareEpochFence, false;
    }

    #[test]
    fn log_ids_are_kafkas_and_round_trip() {
        let ids: Vec<i8> = TransactionState::ALL
            .iter()
            .map(|state| state.id())
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6, 7]);
        for state in TransactionState::ALL {
            assert_eq!(TransactionState::from_id(state.id()), Some(state));
            assert_eq!(TransactionState::from_name(state.name()), Some(state));
        }
        assert_eq!(TransactionState::from_id(8), None);
        assert_eq!(TransactionState::from_id(-1), None);
        assert_eq!(TransactionState::from_name("ongoing"), None);
    }

    #[test]
    fn expiration_is_allowed_only_without_an_open_transaction() {
        let allowed: Vec<TransactionState> = TransactionState::ALL
            .into_iter()
            .filter(|state| state.is_expiration_allowed())
            .collect();
        assert_eq!(allowed, [Empty, CompleteCommit, CompleteAbort]);
    }

    #[test]
    fn display_uses_kafka_names() {
        assert_eq!(PrepareEpochFence.to_string(), "PrepareEpochFence");
        let error = Dead.transition(Ongoing).unwrap_err();
        assert_eq!(error.to_string(), "illegal transition from Dead to Ongoing");
    }
}
