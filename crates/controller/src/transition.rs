//! The error of a state machine asked for a transition its table forbids,
//! shared by the partition and replica state machines.

use std::fmt;

/// An illegal state machine transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition from {from} to {to}")]
pub struct IllegalTransition<S: fmt::Display + fmt::Debug> {
    /// The current state.
    pub from: S,
    /// The requested state.
    pub to: S,
}
