//! Durable partition logs for Strom, in Apache Kafka's on-disk layout.
//!
//! This crate owns everything a broker keeps on disk per partition: segments
//! (`.log` files of record batches exactly as on the wire) with their sparse
//! `.index` and `.timeindex` files and their `.txnindex` of aborted
//! transactions, the [`Log`] that appends to them (offset assignment, roll,
//! reads, truncation), recovery after a crash, retention, compaction,
//! idempotent and transactional producer state (KIP-98: transaction
//! markers, the last stable offset, the aborted transactions of a
//! read_committed fetch, DescribeProducers' view), Kafka's checkpoint files,
//! the leader epoch cache, and the [`LogManager`] over several `log.dirs`.
//!
//! It deliberately does not own the network, request handling, replication
//! decisions (ISR, when the high watermark moves) or Kafka error codes:
//! callers get typed errors (see [`error`]: `AppendError`, `ReadError`,
//! `RecoveryError`, ...) and choose codes at the broker edge. It is a
//! synchronous library with no async runtime (the one exception is the
//! remote tier of [`remote`], whose object-store calls are async and run on
//! the caller's runtime); background work is exposed as
//! [`LogManager::tick`] (or the [`manager::Scheduler`] thread) driven by an
//! injected [`strom_clock::Clock`]. Time reaches the log only as `now_ms`
//! arguments (wall-clock milliseconds) and randomness (the `segment.jitter.ms`
//! draw) only from the injected [`strom_clock::Random`] in
//! [`LogOpenOptions`] and [`manager::LogManagerConfig`]: nothing in the crate
//! reads the system clock or a global random generator.
//!
//! Key design decisions:
//! - **Byte-for-byte Kafka layout.** Batches are stored without re-encoding
//!   their records; the leader only rewrites base offset, partition leader
//!   epoch and (for `LogAppendTime`, or a wrong producer max timestamp) max
//!   timestamp in place, and converts a batch to the topic's
//!   `compression.type` when that names another codec. Followers append
//!   with offsets already assigned ([`Log::append_as_follower`]). See
//!   `docs/storage.md`.
//! - **The format is the protocol crate's, the policy is the log's.**
//!   `strom-protocol` owns the batch header's checks, the CRC-32C and the
//!   record checks ([`batch`] only adds byte positions to its errors). A
//!   leader append checks a client's batches before writing anything:
//!   header, size and CRC, then every record, then what the topic demands
//!   (a key on compacted topics, the timestamp type and bounds; Kafka's
//!   `LogValidator`). Refusals are typed ([`error::AppendError`], with each
//!   refused record as an [`error::RecordRefusal`]).
//! - **Reads are descriptors.** A read returns a [`LogSlice`]: a shared
//!   handle to one segment file plus position and length of whole batches,
//!   which the broker can `sendfile` or turn into `Bytes` with one `pread`.
//! - **Recovery re-validates.** After an unclean shutdown every batch after
//!   the recovery point is re-checked (header, size, CRC, offsets), the log is
//!   truncated at the first invalid byte and indexes are rebuilt.
//! - **Rolls do not wait for the disk.** A roll seals the old segment and
//!   creates the new one; the old segment's fsync, the producer-state
//!   snapshot and the directory sync run on the [`flusher::Flusher`]
//!   thread, and the recovery point moves only when they are done.
//! - **A poisoned log is not trusted.** The [`LogManager`] leaves a log
//!   whose lock a panic poisoned out of flushes and checkpoints, and its
//!   directory is recovered at the next start (see [`manager`]).
//! - **Transactions are derived from the log itself.** A transactional data
//!   batch starts its producer's transaction, a control batch (marker) ends
//!   it, whether the batch came from a client, from the coordinator through
//!   [`Log::append_marker_as_leader`], from the leader (follower appends)
//!   or from disk (recovery), so every replica and a restarted broker know
//!   the same ongoing transactions (see [`producer_state`], [`marker`],
//!   [`txn_index`]). Clients may not write control batches; the cleaner
//!   removes aborted records and, after `delete.retention.ms`, markers
//!   whose transaction has no data left.
//! - **Tiered storage keeps its metadata beside its data.** [`remote`]
//!   copies closed segments to an object store (a local directory or S3,
//!   through the `object_store` crate) and records each segment's state in
//!   an object next to it; local retention of a tiered log deletes only
//!   what a finished copy confirmed (`docs/storage.md`).
//! - **Faults are injectable.** Segment data goes through a
//!   [`backend::FileBackend`]; tests use [`testing::FaultInjector`] to tear
//!   writes and simulate crashes that lose unflushed bytes.
//!
//! The crate has no feature flags.

pub mod backend;
pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod compaction;
pub mod config;
pub mod epoch_cache;
pub mod error;
pub mod flush;
mod flush_progress;
pub mod flusher;
pub mod index;
pub mod log;
pub mod manager;
mod mapped;
pub mod marker;
pub mod page_cache;
pub mod producer_state;
pub mod read;
pub mod recovery;
pub mod remote;
mod retention;
pub mod segment;
mod sys;
pub mod testing;
pub mod topic_partition;
mod transaction;
mod txn_cleaning;
pub mod txn_index;
mod validation;
pub mod verification;

pub use crate::config::LogConfig;
pub use crate::log::{AppendInfo, Log};
pub use crate::manager::{LogManager, LogManagerConfig};
pub use crate::read::{LogSlice, ReadInfo};
pub use crate::recovery::{LogOpenOptions, RecoveryReport};
pub use crate::topic_partition::TopicPartition;
