//! Errors of replication decisions; the broker maps them to Kafka error codes.

use crate::BrokerId;

/// Why a replication operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// The ISR is smaller than `min.insync.replicas`: an `acks=all` write is
    /// refused before it is appended (Kafka's NOT_ENOUGH_REPLICAS).
    #[error(
        "the ISR has {isr_size} replicas, fewer than min.insync.replicas {min_insync_replicas}"
    )]
    NotEnoughReplicas {
        /// Current ISR size.
        isr_size: usize,
        /// Required minimum.
        min_insync_replicas: usize,
    },
    /// The ISR shrank below `min.insync.replicas` after the write was
    /// appended (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    #[error(
        "the ISR shrank to {isr_size} replicas after the append, fewer than {min_insync_replicas}"
    )]
    NotEnoughReplicasAfterAppend {
        /// Current ISR size.
        isr_size: usize,
        /// Required minimum.
        min_insync_replicas: usize,
    },
    /// This broker no longer leads the partition (Kafka's
    /// NOT_LEADER_OR_FOLLOWER).
    #[error("this broker does not lead the partition")]
    NotLeader,
    /// A fetch from a broker that is not a replica of the partition.
    #[error("broker {replica} is not a replica of this partition")]
    UnknownReplica {
        /// The broker that fetched.
        replica: BrokerId,
    },
    /// A request carried an older leader epoch than the partition's
    /// (Kafka's FENCED_LEADER_EPOCH).
    #[error("leader epoch {requested} is older than the current epoch {current}")]
    FencedLeaderEpoch {
        /// Epoch in the request.
        requested: i32,
        /// The partition's epoch.
        current: i32,
    },
    /// A request carried a newer leader epoch than this broker knows
    /// (Kafka's UNKNOWN_LEADER_EPOCH).
    #[error("leader epoch {requested} is newer than the current epoch {current}")]
    UnknownLeaderEpoch {
        /// Epoch in the request.
        requested: i32,
        /// The partition's epoch.
        current: i32,
    },
}

/// A Fetch request that does not fit the fetch session it names (KIP-227).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchSessionError {
    /// No session with this id (never created, closed or evicted).
    #[error("fetch session {session_id} not found")]
    IdNotFound {
        /// The session id of the request.
        session_id: i32,
    },
    /// The session expects another epoch (a request was lost or repeated).
    #[error("fetch session {session_id} expects epoch {expected}, got {received}")]
    InvalidEpoch {
        /// The session id of the request.
        session_id: i32,
        /// The epoch the session expects next.
        expected: i32,
        /// The epoch of the request.
        received: i32,
    },
}
