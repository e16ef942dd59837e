//! Tiered storage (KIP-405): closed segments copied to a remote store and
//! read back from it once local retention has removed them.
//!
//! Two roles, as in Kafka:
//! - [`RemoteStorageManager`] moves a segment's bytes: it copies a segment
//!   with its offset, time, transaction and producer-snapshot indexes and
//!   leader-epoch entries, fetches a byte range of a remote segment or one of
//!   its indexes, and deletes a segment. [`ObjectStoreStorage`] implements
//!   it over the `object_store` crate, for a local directory (the default for
//!   tests and embedding) or an S3-compatible service.
//! - [`RemoteLogMetadataManager`] records which remote segments exist and
//!   their [`RemoteSegmentState`]. [`ObjectStoreMetadata`] keeps one small
//!   metadata object per segment next to the segment's data in the same
//!   store (see `docs/storage.md` for why this and not Kafka's
//!   `__remote_log_metadata` topic).
//!
//! [`RemoteLogManager`] drives both for the partitions whose leader is here:
//! it copies closed segments below the high watermark, tells the [`Log`]
//! how far its data is safely remote (local retention deletes only below
//! that), applies total retention to remote segments and serves reads and
//! timestamp lookups below the local log start offset.
//!
//! The traits are async (object stores are network services); the crate
//! itself starts no runtime: the broker calls them from its tokio runtime.
//!
//! [`Log`]: crate::log::Log

mod cache;
mod faults;
mod manager;
mod metadata;
mod object_store_backend;
mod read;

use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use uuid::Uuid;

use crate::error::RemoteStorageError;
use crate::topic_partition::TopicPartition;

pub use cache::ChunkCache;
pub use faults::{FaultyRemote, RemoteFault};
pub use manager::{
    CopyReport, RemoteLogManager, RemoteLogManagerConfig, RemotePartitionView, RemoteStats, Sleep,
};
pub use metadata::{decode_metadata, encode_metadata, ObjectStoreMetadata};
pub use object_store_backend::{ObjectStoreStorage, RemoteStorageConfig};
pub use read::{RemoteRead, RemoteTimestamp};

/// The lifecycle of a remote segment (Kafka's `RemoteLogSegmentState`).
///
/// `CopySegmentStarted -> CopySegmentFinished | DeleteSegmentStarted`,
/// `CopySegmentFinished -> DeleteSegmentStarted`,
/// `DeleteSegmentStarted -> DeleteSegmentFinished`. Only a
/// `CopySegmentFinished` segment is ever served as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoteSegmentState {
    /// The copy began; the remote objects may be partial.
    CopySegmentStarted,
    /// Every object of the segment is in the store.
    CopySegmentFinished,
    /// Deletion began; the segment is no longer served.
    DeleteSegmentStarted,
    /// Every object is gone (the metadata record goes last).
    DeleteSegmentFinished,
}

impl RemoteSegmentState {
    /// Every state, in lifecycle order.
    pub const ALL: [RemoteSegmentState; 4] = [
        RemoteSegmentState::CopySegmentStarted,
        RemoteSegmentState::CopySegmentFinished,
        RemoteSegmentState::DeleteSegmentStarted,
        RemoteSegmentState::DeleteSegmentFinished,
    ];

    /// Whether the lifecycle allows going from `self` to `next`.
    pub fn can_become(self, next: RemoteSegmentState) -> bool {
        use RemoteSegmentState::*;
        matches!(
            (self, next),
            (CopySegmentStarted, CopySegmentFinished)
                | (CopySegmentStarted, DeleteSegmentStarted)
                | (CopySegmentFinished, DeleteSegmentStarted)
                | (DeleteSegmentStarted, DeleteSegmentFinished)
        )
    }

    /// `self` moved to `next`, or the illegal transition.
    pub fn transition(
        self,
        next: RemoteSegmentState,
    ) -> Result<RemoteSegmentState, RemoteStorageError> {
        if self.can_become(next) {
            Ok(next)
        } else {
            Err(RemoteStorageError::IllegalTransition {
                from: self.name(),
                to: next.name(),
            })
        }
    }

    /// Kafka's name of the state (`COPY_SEGMENT_STARTED`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RemoteSegmentState::CopySegmentStarted => "COPY_SEGMENT_STARTED",
            RemoteSegmentState::CopySegmentFinished => "COPY_SEGMENT_FINISHED",
            RemoteSegmentState::DeleteSegmentStarted => "DELETE_SEGMENT_STARTED",
            RemoteSegmentState::DeleteSegmentFinished => "DELETE_SEGMENT_FINISHED",
        }
    }

    /// The state named `name` (see [`RemoteSegmentState::name`]).
    pub fn from_name(name: &str) -> Option<RemoteSegmentState> {
        RemoteSegmentState::ALL
            .into_iter()
            .find(|state| state.name() == name)
    }
}

/// What the metadata records about one remote segment (Kafka's
/// `RemoteLogSegmentMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSegmentMetadata {
    /// The remote segment's id (a fresh uuid per copy attempt).
    pub id: Uuid,
    /// The first offset of the segment.
    pub base_offset: i64,
    /// The last offset of the segment (inclusive).
    pub end_offset: i64,
    /// The largest record timestamp in the segment (-1 when none).
    pub max_timestamp_ms: i64,
    /// The segment's `.log` size in bytes.
    pub size_bytes: u64,
    /// Leader epochs starting within the segment: `(epoch, start_offset)`.
    pub leader_epochs: Vec<(i32, i64)>,
    /// The lifecycle state.
    pub state: RemoteSegmentState,
}

impl RemoteSegmentMetadata {
    /// The offset after the segment's last record.
    pub fn next_offset(&self) -> i64 {
        self.end_offset + 1
    }

    /// Whether `offset` is inside the segment.
    pub fn contains(&self, offset: i64) -> bool {
        (self.base_offset..=self.end_offset).contains(&offset)
    }
}

/// The index files of a remote segment (Kafka's `IndexType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexType {
    /// `.index`: relative offset to byte position.
    Offset,
    /// `.timeindex`: timestamp to relative offset.
    Timestamp,
    /// `.snapshot`: the producer state at the segment's end.
    ProducerSnapshot,
    /// The leader epoch entries of the segment (checkpoint text).
    LeaderEpoch,
    /// `.txnindex`: aborted transactions.
    Transaction,
}

impl IndexType {
    /// Every index type.
    pub const ALL: [IndexType; 5] = [
        IndexType::Offset,
        IndexType::Timestamp,
        IndexType::ProducerSnapshot,
        IndexType::LeaderEpoch,
        IndexType::Transaction,
    ];

    /// The object-name suffix of the index.
    pub fn suffix(self) -> &'static str {
        match self {
            IndexType::Offset => ".index",
            IndexType::Timestamp => ".timeindex",
            IndexType::ProducerSnapshot => ".snapshot",
            IndexType::LeaderEpoch => ".leader-epoch-checkpoint",
            IndexType::Transaction => ".txnindex",
        }
    }
}

/// A closed local segment to copy: its files and its leader-epoch entries
/// (Kafka's `LogSegmentData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSegmentData {
    /// The `.log` file.
    pub log: PathBuf,
    /// The `.index` file.
    pub offset_index: PathBuf,
    /// The `.timeindex` file.
    pub time_index: PathBuf,
    /// The `.txnindex` file, when it exists.
    pub transaction_index: Option<PathBuf>,
    /// The producer snapshot at the segment's end offset, when it exists.
    pub producer_snapshot: Option<PathBuf>,
    /// The leader epoch entries of the segment, as checkpoint text.
    pub leader_epoch_index: Bytes,
}

/// Moves segment data to and from a remote store (Kafka's
/// `RemoteStorageManager`). Implementations must make each call
/// idempotent: a copy or delete may be repeated after a crash.
#[async_trait]
pub trait RemoteStorageManager: Send + Sync + std::fmt::Debug {
    /// Copies the segment's log and indexes under `segment.id`.
    async fn copy_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        data: &LogSegmentData,
    ) -> Result<(), RemoteStorageError>;

    /// Bytes `start..end` of the remote segment's log (`end` is clamped to
    /// the segment's size).
    async fn fetch_log_segment(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        start: u64,
        end: u64,
    ) -> Result<Bytes, RemoteStorageError>;

    /// One index of the remote segment (empty for an optional index that
    /// was not copied).
    async fn fetch_index(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
        index: IndexType,
    ) -> Result<Bytes, RemoteStorageError>;

    /// Deletes every object of the segment (objects already gone are fine).
    async fn delete_log_segment_data(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError>;
}

/// Records remote segments and their states (Kafka's
/// `RemoteLogMetadataManager`). A record written here is durable when the
/// call returns.
#[async_trait]
pub trait RemoteLogMetadataManager: Send + Sync + std::fmt::Debug {
    /// Writes (creates or replaces) the record of `segment`.
    async fn put_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError>;

    /// Removes the record of a segment whose deletion finished.
    async fn remove_segment_metadata(
        &self,
        partition: &TopicPartition,
        segment: &RemoteSegmentMetadata,
    ) -> Result<(), RemoteStorageError>;

    /// Every recorded segment of the partition, in base-offset order.
    async fn list_segments(
        &self,
        partition: &TopicPartition,
    ) -> Result<Vec<RemoteSegmentMetadata>, RemoteStorageError>;
}
