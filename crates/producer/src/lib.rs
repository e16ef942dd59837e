//! A pure-Rust async Kafka producer.
//!
//! `strom-producer` owns the producer: the [record accumulator](accumulator)
//! (per-partition batches bounded by `batch.size`, `linger.ms` and
//! `buffer.memory`), the [`sender`] task that drains ready batches per
//! leader into Produce requests and retries retriable errors until
//! `delivery.timeout.ms`, the [partitioners](partitioner) (murmur2 exactly
//! like the Java client for keyed records, sticky for unkeyed), idempotence
//! (producer id, epoch and per-partition sequences), and transactions
//! (KIP-98, with KIP-360's recovery and KIP-447's offsets with group
//! metadata; see below). Connections and
//! metadata come from `strom-client`; it does not consume or manage groups,
//! and it carries no benchmark or command-line code (the producer-perf-test
//! equivalent is `strom perf produce` in `strom-tools`).
//!
//! Design decisions a newcomer must know:
//!
//! * **Up to `max.in.flight.requests.per.connection` batches in flight per
//!   partition**, as the Java client: requests to one broker are pipelined
//!   and answered in order. A batch to retry goes back in its queue before
//!   every later batch and is sent alone, once every earlier answer is in;
//!   with idempotence (the default) sequences keep records in order and
//!   written once whatever fails. Without idempotence a retry may land
//!   after a later batch, as in Kafka (set the setting to 1 to forbid it).
//! * **Batches too large for the broker are split.** A batch answered
//!   with MESSAGE_TOO_LARGE is split in two halves that take its place (and
//!   its sequences); a single record too large fails alone with
//!   [`ProduceError::RecordTooLarge`].
//! * **Produce at the highest version both sides support**, v13 (topics
//!   by id, KIP-516) when the metadata knows every topic's id, else up to
//!   v12 by name. Answers of one broker's pipelined requests are handled in
//!   the order the requests were sent.
//! * **Sans-IO accumulator.** [`accumulator::Accumulator`] takes `now` in
//!   every time-dependent call and does no I/O, so batching, readiness and
//!   retry order are unit and property tested with an injected clock.
//! * **Idempotent retries.** A retried batch keeps its sequence; the broker
//!   answers a duplicate with DUPLICATE_SEQUENCE_NUMBER, which counts as
//!   written once. OUT_OF_ORDER_SEQUENCE_NUMBER behind an unacknowledged
//!   earlier batch is retried after it; otherwise, and on
//!   UNKNOWN_PRODUCER_ID or a batch failed for good, the producer gets a new
//!   id once nothing is in flight (sequences restart at 0) and queued
//!   batches are restamped.
//! * **Transactions** ([`transactional.id`](ProducerConfig::transactional_id)),
//!   as the Java producer: [`Producer::init_transactions`],
//!   [`begin_transaction`](Producer::begin_transaction), `send`,
//!   [`send_offsets_to_transaction`](Producer::send_offsets_to_transaction),
//!   [`commit_transaction`](Producer::commit_transaction) and
//!   [`abort_transaction`](Producer::abort_transaction). Every call is
//!   checked first by the sans-IO [`transaction::TransactionManager`], a
//!   state machine over [`TransactionState`] with Kafka's transitions, so
//!   an illegal call fails with [`TransactionError::InvalidState`] and
//!   sends nothing. The sender adds a partition to the transaction
//!   (AddPartitionsToTxn) before its first batch and sends none of its
//!   batches until the coordinator said yes; batches carry the
//!   transactional attribute. A failed record makes the transaction
//!   abortable (commit returns the error, the abort drops the records not
//!   sent and bumps the epoch, KIP-360); being fenced by a newer producer
//!   with the same id is fatal: the producer must be closed.

pub mod accumulator;
pub mod config;
pub mod coordinator;
pub mod error;
pub mod partitioner;
pub mod producer;
pub mod record;
pub mod sender;
pub mod transaction;
pub mod transaction_state;
mod transactional;

pub use config::{Acks, ProducerConfig};
pub use coordinator::{ConsumerGroupMetadata, OffsetAndMetadata, Offsets};
pub use error::{ProduceError, ProducerCreateError, SharedError, TransactionError};
pub use partitioner::{DefaultPartitioner, Partitioner};
pub use producer::{DeliveryFuture, Producer};
pub use record::{ProducerRecord, RecordMetadata};
pub use transaction_state::{TransactionOperation, TransactionState};
