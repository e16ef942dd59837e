//! The crate's errors. Kafka error codes are chosen by the broker from these;
//! each variant's doc names the code Kafka answers with.

use crate::state::TransactionState;

/// A transition the state table forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition from {from} to {to}")]
pub struct IllegalTransition {
    /// The current state.
    pub from: TransactionState,
    /// The requested state.
    pub to: TransactionState,
}
