//! Durable partition logs for Strom, in Apache Kafka's on-disk layout.
//!
//! This crate owns everything a broker keeps on disk per partition: segments
//! (`.log` files of record batches exactly as on the wire) with their sparse
//! `.index` and `.timeindex` files, the log that appends to them (offset
//! assignment, roll, reads, truncation), recovery after a crash, retention,
//! idempotent producer state, Kafka's checkpoint files, the leader epoch
//! cache, and the log manager over several `log.dirs`.
//!
//! It deliberately does not own the network, request handling, replication
//! decisions (ISR, high watermark advancement) or Kafka error codes: callers
//! get typed errors (see [`error`]) and choose codes at the broker edge. It is
//! a synchronous library with no async runtime; background work is exposed as
//! `tick(now)`-style methods driven by an injected [`clock::Clock`].
//!
//! Key design decisions:
//! - **Byte-for-byte Kafka layout.** Batches are stored without re-encoding;
//!   the leader only rewrites base offset, partition leader epoch and (for
//!   `LogAppendTime`) max timestamp in place. See `docs/storage.md`.
//! - **Reads are descriptors.** A read returns [`log::LogSlice`]s: a shared
//!   handle to the segment file plus position and length, which the broker
//!   can `sendfile` or turn into `Bytes` with one read.
//! - **Recovery re-validates.** After an unclean shutdown, every batch after
//!   the recovery point is re-checked (CRC, offsets, sizes), the log is
//!   truncated at the first invalid byte and indexes are rebuilt.

pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod clock;
pub mod config;
pub mod epoch_cache;
pub mod error;
pub mod index;
pub mod log;
mod mapped;
pub mod producer_state;
pub mod read;
pub mod recovery;
mod retention;
pub mod segment;
pub mod testing;
pub mod topic_partition;

pub use crate::config::LogConfig;
pub use crate::log::{AppendInfo, Log};
pub use crate::read::{LogSlice, ReadInfo};
pub use crate::recovery::{LogOpenOptions, RecoveryReport};
pub use crate::topic_partition::TopicPartition;
pub mod manager;

pub use crate::manager::{LogManager, LogManagerConfig};
