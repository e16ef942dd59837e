//! Errors of the consumer.

use strom_client::{ClientError, ConfigError};
use strom_protocol::records::RecordError;
use strom_protocol::ErrorCode;

use crate::record::TopicPartition;

/// A consumer operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    /// The client core failed (connection, timeout, broker error).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The fetch position is out of range and `auto.offset.reset` is `none`.
    #[error("offset {offset} of {partition} is out of range and auto.offset.reset is none")]
    OffsetOutOfRange {
        /// The partition.
        partition: TopicPartition,
        /// The fetch offset the broker rejected.
        offset: i64,
    },
    /// A partition has no committed offset and `auto.offset.reset` is `none`.
    #[error("{partition} has no committed offset and auto.offset.reset is none")]
    NoOffsetForPartition {
        /// The partition.
        partition: TopicPartition,
    },
    /// A fetched batch failed its CRC check or could not be decoded.
    #[error("corrupt record batch in {partition} at offset {offset}")]
    CorruptRecord {
        /// The partition.
        partition: TopicPartition,
        /// The fetch offset of the response.
        offset: i64,
        /// The decoding or CRC error.
        #[source]
        source: RecordError,
    },
    /// The next batch of a partition is larger than `max.partition.fetch.bytes`
    /// and the broker returned only part of it.
    #[error("batch at offset {offset} of {partition} exceeds max.partition.fetch.bytes ({max_partition_fetch_bytes})")]
    RecordTooLarge {
        /// The partition.
        partition: TopicPartition,
        /// The fetch offset.
        offset: i64,
        /// The configured limit.
        max_partition_fetch_bytes: i32,
    },
    /// The operation needs a partition this consumer is not assigned.
    #[error("{partition} is not assigned to this consumer")]
    NotAssigned {
        /// The partition.
        partition: TopicPartition,
    },
    /// The operation needs `group.id`.
    #[error("this operation needs group.id")]
    NoGroupId,
    /// `subscribe` and `assign` were mixed.
    #[error("subscribe and assign cannot be mixed on one consumer")]
    IllegalSubscriptionState,
    /// The group coordinator rejected a request.
    #[error("group {group_id}: {api} failed with {code}")]
    Group {
        /// The group id.
        group_id: String,
        /// The API that failed (JoinGroup, SyncGroup, OffsetCommit, ...).
        api: &'static str,
        /// The error code.
        code: ErrorCode,
    },
    /// A commit failed because the group rebalanced; the partitions may now
    /// belong to another member.
    #[error("commit failed: the group rebalanced (generation {generation_id})")]
    CommitFailed {
        /// The generation the commit was sent with.
        generation_id: i32,
    },
    /// The group is rebalancing, so offsets cannot be committed now (KIP-429:
    /// a cooperative member keeps its partitions, and its records, while the
    /// group rebalances). Not fatal: `poll` until the rebalance has finished,
    /// then commit again; partitions that move are handed to
    /// [`RebalanceListener::on_partitions_revoked`](crate::RebalanceListener::on_partitions_revoked)
    /// first, whose offsets are committed before they go.
    #[error("the group is rebalancing: poll to finish the rebalance, then commit again")]
    RebalanceInProgress,
    /// A subscription or assignment from a group member could not be decoded.
    #[error("bad consumer protocol {what} from the group")]
    BadGroupProtocol {
        /// `subscription` or `assignment`.
        what: &'static str,
    },
    /// The group leader named an assignor this consumer does not know.
    #[error("unknown partition assignor {name}")]
    UnknownAssignor {
        /// The protocol name.
        name: String,
    },
    /// The operation did not finish in time.
    #[error("{operation} timed out")]
    Timeout {
        /// What timed out.
        operation: &'static str,
    },
    /// The consumer is closed.
    #[error("the consumer is closed")]
    Closed,
}

impl ConsumerError {
    /// A broker error code as a [`ConsumerError`].
    pub fn broker(code: ErrorCode) -> ConsumerError {
        ConsumerError::Client(ClientError::Broker { code })
    }
}
