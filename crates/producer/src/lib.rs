//! A pure-Rust async Kafka producer.
//!
//! `strom-producer` owns the producer: the [record accumulator](accumulator)
//! (per-partition batches bounded by `batch.size`, `linger.ms` and
//! `buffer.memory`), the [`sender`] task that drains ready batches per
//! leader into Produce requests and retries retriable errors until
//! `delivery.timeout.ms`, the [partitioners](partitioner) (murmur2 exactly
//! like the Java client for keyed records, sticky for unkeyed), idempotence
//! (producer id, epoch and per-partition sequences), and a
//! [`perf`] tool modelled on Kafka's producer-perf-test. Connections and
//! metadata come from `strom-client`; it does not consume or manage groups.
//!
//! Design decisions a newcomer must know:
//!
//! * **One batch in flight per partition.** The sender mutes a partition
//!   while its batch is in flight and puts a batch to retry back at the front
//!   of its queue, so records stay in order per partition whatever fails;
//!   `max.in.flight.requests.per.connection` bounds requests per broker.
//! * **Sans-IO accumulator.** [`accumulator::Accumulator`] takes `now` in
//!   every time-dependent call and does no I/O, so batching, readiness and
//!   retry order are unit and property tested with an injected clock.
//! * **Idempotent retries.** A retried batch keeps its sequence; the broker
//!   answers a duplicate with DUPLICATE_SEQUENCE_NUMBER, which counts as
//!   written once. OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID get a
//!   new producer id (sequences restart at 0) and the batch is restamped.

pub mod accumulator;
pub mod config;
pub mod error;
pub mod partitioner;
pub mod perf;
pub mod producer;
pub mod record;
pub mod sender;

pub use config::{Acks, ProducerConfig};
pub use error::{ProduceError, ProducerCreateError};
pub use partitioner::{DefaultPartitioner, Partitioner};
pub use producer::{DeliveryFuture, Producer};
pub use record::{ProducerRecord, RecordMetadata};
