//! The states of a transactional producer (Kafka's
//! `TransactionManager.State`) and the operations a caller asks of it.
//!
//! ```text
//!  Uninitialized ─▶ Initializing ─▶ Ready ─▶ InTransaction ─▶ Committing ─▶ Ready
//!                        ▲            ▲            │                │
//!                        │            │            ▼                ▼
//!                        └──────── Aborting ◀── AbortableError ◀────┘
//!   (any) ─▶ FatalError
//! ```
//!
//! - `Uninitialized`: created; `init_transactions` was not called yet.
//! - `Initializing`: InitProducerId is under way (first, or the epoch bump
//!   of KIP-360 after an abort that needs one).
//! - `Ready`: a producer id and epoch are held; no transaction is open.
//! - `InTransaction`: `begin_transaction` was called.
//! - `Committing` / `Aborting`: flushing or dropping the records, then
//!   EndTxn.
//! - `AbortableError`: the transaction cannot commit (a record failed, the
//!   broker asked for an abort); only an abort gets out of it.
//! - `FatalError`: fenced or refused for good; the producer must be closed.

use std::fmt;

/// A transactional producer's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// `init_transactions` was not called yet.
    Uninitialized,
    /// Getting a producer id and epoch from the transaction coordinator.
    Initializing,
    /// Holds a producer id; no transaction is open.
    Ready,
    /// A transaction is open.
    InTransaction,
    /// Flushing the transaction's records, then ending it committed.
    Committing,
    /// Dropping the transaction's unsent records, then ending it aborted.
    Aborting,
    /// The open transaction can only be aborted.
    AbortableError,
    /// The producer cannot go on and must be closed.
    FatalError,
}

impl TransactionState {
    /// All states, for exhaustive checks.
    pub const ALL: [Self; 8] = [
        Self::Uninitialized,
        Self::Initializing,
        Self::Ready,
        Self::InTransaction,
        Self::Committing,
        Self::Aborting,
        Self::AbortableError,
        Self::FatalError,
    ];

    /// The states from which `self` may be entered (Kafka's
    /// `State.isTransitionValid`, without the idempotent-only reset to
    /// `Uninitialized`).
    pub fn valid_previous_states(self) -> &'static [Self] {
        use TransactionState::*;
        match self {
            Uninitialized => &[],
            // Aborting: the epoch bump after an abort (KIP-360).
            Initializing => &[Uninitialized, Aborting],
            Ready => &[Initializing, Committing, Aborting],
            InTransaction => &[Ready],
            Committing => &[InTransaction],
            Aborting => &[InTransaction, AbortableError],
            AbortableError => &[Initializing, InTransaction, Committing, AbortableError],
            FatalError => &Self::ALL,
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
}

impl fmt::Display for TransactionState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Uninitialized => "UNINITIALIZED",
            Self::Initializing => "INITIALIZING",
            Self::Ready => "READY",
            Self::InTransaction => "IN_TRANSACTION",
            Self::Committing => "COMMITTING_TRANSACTION",
            Self::Aborting => "ABORTING_TRANSACTION",
            Self::AbortableError => "ABORTABLE_ERROR",
            Self::FatalError => "FATAL_ERROR",
        })
    }
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition from {from} to {to}")]
pub struct IllegalTransition {
    /// The state the producer was in.
    pub from: TransactionState,
    /// The state asked for.
    pub to: TransactionState,
}

/// What a caller asked a transactional producer to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionOperation {
    /// `init_transactions`.
    InitTransactions,
    /// `begin_transaction`.
    BeginTransaction,
    /// `send` of a record.
    Send,
    /// `send_offsets_to_transaction`.
    SendOffsets,
    /// `commit_transaction`.
    CommitTransaction,
    /// `abort_transaction`.
    AbortTransaction,
}

impl fmt::Display for TransactionOperation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::InitTransactions => "init_transactions",
            Self::BeginTransaction => "begin_transaction",
            Self::Send => "send",
            Self::SendOffsets => "send_offsets_to_transaction",
            Self::CommitTransaction => "commit_transaction",
            Self::AbortTransaction => "abort_transaction",
        })
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
            fn every_pair_is_covered() {
                let listed = [$(($from, $to)),*];
                for from in TransactionState::ALL {
                    for to in TransactionState::ALL {
                        assert!(listed.contains(&(from, to)), "{from} -> {to} has no test");
                    }
                }
            }
        };
    }

    transitions! {
        uninitialized_to_uninitialized_is_illegal: Uninitialized => Uninitialized, false;
        uninitialized_to_initializing_is_legal: Uninitialized => Initializing, true;
        uninitialized_to_ready_is_illegal: Uninitialized => Ready, false;
        uninitialized_to_in_transaction_is_illegal: Uninitialized => InTransaction, false;
        uninitialized_to_committing_is_illegal: Uninitialized => Committing, false;
        uninitialized_to_aborting_is_illegal: Uninitialized => Aborting, false;
        uninitialized_to_abortable_error_is_illegal: Uninitialized => AbortableError, false;
        uninitialized_to_fatal_error_is_legal: Uninitialized => FatalError, true;

        initializing_to_uninitialized_is_illegal: Initializing => Uninitialized, false;
        initializing_to_initializing_is_illegal: Initializing => Initializing, false;
        initializing_to_ready_is_legal: Initializing => Ready, true;
        initializing_to_in_transaction_is_illegal: Initializing => InTransaction, false;
        initializing_to_committing_is_illegal: Initializing => Committing, false;
        initializing_to_aborting_is_illegal: Initializing => Aborting, false;
        initializing_to_abortable_error_is_legal: Initializing => AbortableError, true;
        initializing_to_fatal_error_is_legal: Initializing => FatalError, true;

        ready_to_uninitialized_is_illegal: Ready => Uninitialized, false;
        ready_to_initializing_is_illegal: Ready => Initializing, false;
        ready_to_ready_is_illegal: Ready => Ready, false;
        ready_to_in_transaction_is_legal: Ready => InTransaction, true;
        ready_to_committing_is_illegal: Ready => Committing, false;
        ready_to_aborting_is_illegal: Ready => Aborting, false;
        ready_to_abortable_error_is_illegal: Ready => AbortableError, false;
        ready_to_fatal_error_is_legal: Ready => FatalError, true;

        in_transaction_to_uninitialized_is_illegal: InTransaction => Uninitialized, false;
        in_transaction_to_initializing_is_illegal: InTransaction => Initializing, false;
        in_transaction_to_ready_is_illegal: InTransaction => Ready, false;
        in_transaction_to_in_transaction_is_illegal: InTransaction => InTransaction, false;
        in_transaction_to_committing_is_legal: InTransaction => Committing, true;
        in_transaction_to_aborting_is_legal: InTransaction => Aborting, true;
        in_transaction_to_abortable_error_is_legal: InTransaction => AbortableError, true;
        in_transaction_to_fatal_error_is_legal: InTransaction => FatalError, true;

        committing_to_uninitialized_is_illegal: Committing => Uninitialized, false;
        committing_to_initializing_is_illegal: Committing => Initializing, false;
        committing_to_ready_is_legal: Committing => Ready, true;
        committing_to_in_transaction_is_illegal: Committing => InTransaction, false;
        committing_to_committing_is_illegal: Committing => Committing, false;
        committing_to_aborting_is_illegal: Committing => Aborting, false;
        committing_to_abortable_error_is_legal: Committing => AbortableError, true;
        committing_to_fatal_error_is_legal: Committing => FatalError, true;

        aborting_to_uninitialized_is_illegal: Aborting => Uninitialized, false;
        aborting_to_initializing_is_legal: Aborting => Initializing, true;
        aborting_to_ready_is_legal: Aborting => Ready, true;
        aborting_to_in_transaction_is_illegal: Aborting => InTransaction, false;
        aborting_to_committing_is_illegal: Aborting => Committing, false;
        aborting_to_aborting_is_illegal: Aborting => Aborting, false;
        aborting_to_abortable_error_is_illegal: Aborting => AbortableError, false;
        aborting_to_fatal_error_is_legal: Aborting => FatalError, true;

        abortable_error_to_uninitialized_is_illegal: AbortableError => Uninitialized, false;
        abortable_error_to_initializing_is_illegal: AbortableError => Initializing, false;
        abortable_error_to_ready_is_illegal: AbortableError => Ready, false;
        abortable_error_to_in_transaction_is_illegal: AbortableError => InTransaction, false;
        abortable_error_to_committing_is_illegal: AbortableError => Committing, false;
        abortable_error_to_aborting_is_legal: AbortableError => Aborting, true;
        abortable_error_to_abortable_error_is_legal: AbortableError => AbortableError, true;
        abortable_error_to_fatal_error_is_legal: AbortableError => FatalError, true;

        fatal_error_to_uninitialized_is_illegal: FatalError => Uninitialized, false;
        fatal_error_to_initializing_is_illegal: FatalError => Initializing, false;
        fatal_error_to_ready_is_illegal: FatalError => Ready, false;
        fatal_error_to_in_transaction_is_illegal: FatalError => InTransaction, false;
        fatal_error_to_committing_is_illegal: FatalError => Committing, false;
        fatal_error_to_aborting_is_illegal: FatalError => Aborting, false;
        fatal_error_to_abortable_error_is_illegal: FatalError => AbortableError, false;
        fatal_error_to_fatal_error_is_legal: FatalError => FatalError, true;
    }

    #[test]
    fn display_uses_kafka_names() {
        assert_eq!(InTransaction.to_string(), "IN_TRANSACTION");
        let error = Ready.transition(Committing).unwrap_err();
        assert_eq!(
            error.to_string(),
            "illegal transition from READY to COMMITTING_TRANSACTION"
        );
    }
}
