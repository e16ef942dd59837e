//! Partitions as replicas: who leads, who is in sync, and what is committed.
//!
//! `strom-replication` owns the replication state of one partition on one
//! broker, in Kafka's pull model (followers fetch from the leader with the
//! Fetch API; the leader learns their log end offsets from those fetches):
//!
//! * [`LeaderState`]: the leader's view — leader epoch, ISR, the log end
//!   offset (LEO) of every replica as learned from their fetches, and the high
//!   watermark (HW), which is the minimum LEO over the ISR and never decreases.
//!   It decides when an `acks=all` write is committed, which followers join
//!   the ISR, and which ones have fallen behind for longer than
//!   `replica.lag.time.max.ms`.
//! * [`FollowerState`]: a follower's view — its leader and epoch, the HW the
//!   leader reported, and where to fetch next.
//! * [`OffsetWatch`]: the async edge. Delayed produce (`acks=all`) and delayed
//!   fetch (`fetch.min.bytes` / `fetch.max.wait.ms`) wait on a watch that is
//!   advanced by appends and HW moves, never by polling with sleeps.
//!
//! * [`FetcherCore`] and [`FetcherManager`]: the follower's fetch loop. The
//!   core builds replica fetches and applies the leader's answers to a
//!   [`FollowerLog`] (append with the leader's offsets, HW from the answer,
//!   truncation of only the divergent suffix by leader epoch); the manager
//!   runs one task per source broker over a [`FetchTransport`], which the
//!   broker implements over TCP and tests implement in memory.
//!
//! * [`Partition`]: one replica owned whole: its `strom-storage` log, its
//!   role (a [`LeaderState`], following a leader, or idle), the HW, published
//!   from this one place, and the watches. Produce appends, consumer and
//!   follower reads and the fetcher's writes all go through it; the broker
//!   only moves it between roles as the metadata image says.
//!
//! * [`fetch_session::FetchSessionCache`]: the leader's incremental fetch
//!   sessions (KIP-227), so that a fetcher's requests name only what changed
//!   and the answers carry only the partitions with news.
//!
//! The states are sans-IO: they take events with the current time in
//! milliseconds and return decisions (a new HW, a proposed ISR change for the
//! controller). A single-node broker runs exactly this code with an ISR of
//! one, in which case the HW follows the LEO as soon as a write is done.
//! `docs/replication.md` has the rules.

mod error;
pub mod fetch_loop;
pub mod fetch_session;
pub mod fetcher;
mod follower;
mod leader;
pub mod partition;
mod watch;

pub use error::{FetchSessionError, ReplicationError};
pub use fetch_loop::{FetchTransport, FetcherManager, FollowTarget};
pub use fetcher::{
    FetchFailure, FetchPartition, FetchPartitionError, FetcherConfig, FetcherCore, FollowerLog,
    LogOffsets, PartitionEvent, PartitionFetchResult, ReplicaFetchRequest,
};
pub use follower::FollowerState;
pub use leader::{AckStatus, FollowerFetchOutcome, IsrChange, LeaderState, ReplicaProgress};
pub use partition::{
    AppendFailure, Appended, FlushFailure, FollowerFetch, FollowerRead, FollowerWriteError,
    LeaderAssignment, Partition, PartitionError, PartitionOffline, PartitionRead, ReadFailure,
    RoleView,
};
pub use watch::{OffsetWatch, WaitOutcome};

/// A broker (and replica) identifier, Kafka's `node.id`.
pub type BrokerId = i32;
