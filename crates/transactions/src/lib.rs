//! The core of Strom's transaction coordinator (Kafka's KIP-98, with
//! KIP-360's epoch recovery and KIP-890's transaction version 2).
//!
//! This crate owns what the coordinator knows about one transactional id and
//! how that knowledge may change: the [`state::TransactionState`] machine
//! with Kafka's table of legal transitions; the records of
//! `__transaction_state` ([`log`]: `TransactionLogKey`,
//! `TransactionLogValue` v0 and v1, tombstones); and the
//! [`metadata::TransactionMetadata`] of one transactional id with the
//! checks and transitions of InitProducerId, AddPartitionsToTxn, EndTxn,
//! the epoch fence, marker completion and expiration.
//!
//! It deliberately does not own the log that stores `__transaction_state`
//! (the storage and replication crates do), the writing of commit and abort
//! markers into data partitions (partition leaders do, on WriteTxnMarkers),
//! the allocation of producer id blocks, timers, or the broker's request
//! handlers and Kafka error codes: the broker wires this crate in, as it
//! wires the group coordinator, and chooses codes from its typed errors
//! (see [`error`]).
//!
//! Key design decisions:
//! - **Sans-IO.** No sockets, no runtime, no clock: every function takes
//!   what it needs, the current time included, as arguments and returns a
//!   value or a typed error, so the coordinator can be driven
//!   deterministically by a simulation.
//! - **Kafka's semantics, state by state.** The transition table and the
//!   state ids are Kafka 4.x's, so a `__transaction_state` partition written
//!   by Kafka reads the same here.
//! - **Transitions are values.** A request yields the metadata to write
//!   to `__transaction_state` (Kafka's `TxnTransitMetadata`) or a typed
//!   refusal ([`error::TransactionError`], whose variants name the Kafka
//!   code to answer with); the coordinator adopts the new metadata once
//!   the write is replicated, and holds further requests for the id with
//!   `CONCURRENT_TRANSACTIONS` meanwhile.
//! - **Kafka's schemas byte for byte.** Keys and values are encoded and
//!   decoded by hand from Kafka's message definitions, with every length
//!   checked against the input before anything is allocated and every
//!   malformed record a typed [`error::DecodeError`], never a panic.
//!
//! The crate has no feature flags.

pub mod coordinator;
pub mod error;
pub mod log;
pub mod metadata;
pub mod runtime;
pub mod state;
mod wire;
