//! Typed errors of the coordinator. Each variant documents the Kafka error
//! code the broker maps it to; this crate never chooses wire codes itself.

/// Why a group or offset request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The member id is not (or no longer) a member of the group
    /// (Kafka's UNKNOWN_MEMBER_ID, code 25).
    #[error("unknown member id")]
    UnknownMemberId,
    /// The request's generation is not the group's current generation
    /// (Kafka's ILLEGAL_GENERATION, code 22).
    #[error("generation {requested} is not the current generation {current}")]
    IllegalGeneration {
        /// Generation in the request.
        requested: i32,
        /// The group's generation.
        current: i32,
    },
    /// The group is rebalancing; the member must rejoin
    /// (Kafka's REBALANCE_IN_PROGRESS, code 27).
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// Another member id now holds this `group.instance.id`
    /// (Kafka's FENCED_INSTANCE_ID, code 82).
    #[error("the group instance id is held by another member id")]
    FencedInstanceId,
    /// A new dynamic member must rejoin with the member id assigned here
    /// (Kafka's MEMBER_ID_REQUIRED, code 79, with the id in the response).
    #[error("a member id is required; rejoin with {member_id}")]
    MemberIdRequired {
        /// The member id assigned by the coordinator.
        member_id: String,
    },
    /// The group already has `group.max.size` members
    /// (Kafka's GROUP_MAX_SIZE_REACHED, code 81).
    #[error("the group has reached group.max.size {max_size}")]
    GroupMaxSizeReached {
        /// The configured maximum.
        max_size: usize,
    },
    /// The protocol type or protocols are incompatible with the group's
    /// (Kafka's INCONSISTENT_GROUP_PROTOCOL, code 23).
    #[error("the protocol type or protocols do not match the group's")]
    InconsistentGroupProtocol,
    /// The session timeout is outside `group.min.session.timeout.ms` ..
    /// `group.max.session.timeout.ms` (Kafka's INVALID_SESSION_TIMEOUT, code 26).
    #[error("session timeout {session_timeout_ms} ms is outside {min_ms}..={max_ms} ms")]
    InvalidSessionTimeout {
        /// Requested session timeout.
        session_timeout_ms: i32,
        /// `group.min.session.timeout.ms`.
        min_ms: i32,
        /// `group.max.session.timeout.ms`.
        max_ms: i32,
    },
    /// The group id is empty (Kafka's INVALID_GROUP_ID, code 24).
    #[error("the group id is empty")]
    InvalidGroupId,
    /// The partition owning the group is still being loaded
    /// (Kafka's COORDINATOR_LOAD_IN_PROGRESS, code 14).
    #[error("partition {partition} of __consumer_offsets is still loading")]
    CoordinatorLoadInProgress {
        /// The `__consumer_offsets` partition.
        partition: i32,
    },
    /// This coordinator does not own the group's partition
    /// (Kafka's NOT_COORDINATOR, code 16).
    #[error("this broker is not the coordinator for partition {partition}")]
    NotCoordinator {
        /// The `__consumer_offsets` partition.
        partition: i32,
    },
    /// The group is being removed (Kafka's COORDINATOR_NOT_AVAILABLE, code 15).
    #[error("the group is dead")]
    CoordinatorNotAvailable,
    /// The group does not exist (Kafka's GROUP_ID_NOT_FOUND, code 69).
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// A consumer-protocol member's epoch is neither its current epoch nor
    /// its previous one with a subset of its partitions: it must drop its
    /// partitions and rejoin with epoch 0 (Kafka's FENCED_MEMBER_EPOCH, code 110).
    #[error("member epoch {received} is fenced; the coordinator knows epoch {current}")]
    FencedMemberEpoch {
        /// Epoch in the request.
        received: i32,
        /// The member's epoch at the coordinator.
        current: i32,
    },
    /// An OffsetCommit to a consumer-protocol group carried an epoch other
    /// than the member's (Kafka's STALE_MEMBER_EPOCH, code 113).
    #[error("member epoch {received} is stale; the member's epoch is {current}")]
    StaleMemberEpoch {
        /// Epoch in the request.
        received: i32,
        /// The member's epoch at the coordinator.
        current: i32,
    },
    /// A static member joined while the member holding its instance id has
    /// not left (Kafka's UNRELEASED_INSTANCE_ID, code 111).
    #[error("instance id {instance_id} is still held by member {holder}")]
    UnreleasedInstanceId {
        /// The `group.instance.id`.
        instance_id: String,
        /// The member id that holds it.
        holder: String,
    },
    /// The requested server-side assignor is not configured in
    /// `group.consumer.assignors` (Kafka's UNSUPPORTED_ASSIGNOR, code 112).
    #[error("assignor {assignor} is not one of group.consumer.assignors")]
    UnsupportedAssignor {
        /// The requested assignor name.
        assignor: String,
    },
    /// A malformed ConsumerGroupHeartbeat (Kafka's INVALID_REQUEST, code 42).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// Which rule the request broke.
        reason: &'static str,
    },
    /// A subscription pattern that is not a valid regular expression
    /// (Kafka's INVALID_REGULAR_EXPRESSION, code 128).
    #[error("the subscribed topic regular expression is not valid")]
    InvalidRegularExpression,
    /// The group still has members (Kafka's NON_EMPTY_GROUP, code 68).
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// The group is subscribed to the topic whose offsets should be deleted
    /// (Kafka's GROUP_SUBSCRIBED_TO_TOPIC, code 86).
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// The commit's metadata string is longer than
    /// `offset.metadata.max.bytes` (Kafka's OFFSET_METADATA_TOO_LARGE, code 12).
    #[error("offset metadata of {metadata_bytes} bytes exceeds {max_bytes} bytes")]
    OffsetMetadataTooLarge {
        /// Length of the metadata string.
        metadata_bytes: usize,
        /// The configured maximum.
        max_bytes: usize,
    },
    /// The partition has offsets committed inside a transaction that is
    /// still open, and the OffsetFetch asked for stable offsets only
    /// (`require_stable`, v7+): the client retries once the transaction
    /// ends (Kafka's UNSTABLE_OFFSET_COMMIT, code 88). Only ever a
    /// per-partition answer.
    #[error("the partition has offsets pending in an open transaction")]
    UnstableOffsetCommit,
    /// A TxnOffsetCommit named no producer (a negative producer id or
    /// epoch), so its offsets cannot belong to a transaction (Kafka's
    /// INVALID_PRODUCER_ID_MAPPING, code 49).
    #[error("producer id {producer_id} with epoch {producer_epoch} cannot commit offsets in a transaction")]
    InvalidProducer {
        /// The request's producer id.
        producer_id: i64,
        /// The request's producer epoch.
        producer_epoch: i16,
    },
    /// The `__consumer_offsets` log refused an append, or did not commit
    /// it. The code depends on the source, as Kafka's coordinator maps the
    /// errors of its `acks=-1` appends: [`LogError::NotLeader`] is
    /// NOT_COORDINATOR (code 16), [`LogError::ReplicationTimeout`]
    /// REQUEST_TIMED_OUT (code 7), every other one COORDINATOR_NOT_AVAILABLE
    /// (code 15).
    #[error("appending to __consumer_offsets failed")]
    LogAppendFailed {
        /// The log's error.
        #[source]
        source: LogError,
    },
}

/// A failure of an [`OffsetsLog`](crate::OffsetsLog) backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The partition is not hosted by this log.
    #[error("partition {partition} of __consumer_offsets is not hosted here")]
    UnknownPartition {
        /// The partition.
        partition: i32,
    },
    /// This broker does not lead the partition (any more): its replica is
    /// a follower, or was removed, or leadership moved while the append
    /// waited to be committed.
    #[error("this broker does not lead partition {partition} of __consumer_offsets")]
    NotLeader {
        /// The partition.
        partition: i32,
    },
    /// The partition's in-sync replicas are fewer than its
    /// `min.insync.replicas`: refused before the append (nothing was
    /// written), or found after it (the records are in the leader's log but
    /// were not acknowledged).
    #[error("partition {partition} of __consumer_offsets has {in_sync} in-sync replicas, fewer than its min.insync.replicas")]
    NotEnoughReplicas {
        /// The partition.
        partition: i32,
        /// The in-sync replicas when it was refused.
        in_sync: usize,
        /// Whether the records were appended (and then not acknowledged).
        after_append: bool,
    },
    /// The in-sync replicas did not all have the appended records within
    /// `offsets.commit.timeout.ms`.
    #[error("partition {partition} of __consumer_offsets did not commit the append within {timeout_ms} ms")]
    ReplicationTimeout {
        /// The partition.
        partition: i32,
        /// `offsets.commit.timeout.ms`.
        timeout_ms: u64,
    },
    /// The backend failed (disk error, shutdown, a corrupt batch, ...).
    #[error("the __consumer_offsets log failed to {operation}")]
    Backend {
        /// What the backend was doing.
        operation: LogOperation,
        /// The backend's own error.
        #[source]
        source: BackendError,
    },
}

/// What an [`OffsetsLog`](crate::OffsetsLog) backend was doing when it
/// failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOperation {
    /// Building a record batch from the records to append.
    BuildBatch,
    /// Appending a batch.
    Append,
    /// Reading from the log.
    Read,
    /// Decoding a batch or record read from the log.
    Decode,
}

impl LogError {
    /// A backend failure while doing `operation`, with its cause.
    pub fn backend(
        operation: LogOperation,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> LogError {
        LogError::Backend {
            operation,
            source: BackendError::new(source),
        }
    }
}

impl std::fmt::Display for LogOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogOperation::BuildBatch => "build a record batch",
            LogOperation::Append => "append",
            LogOperation::Read => "read",
            LogOperation::Decode => "decode a stored batch",
        })
    }
}

/// A backend's own error, shared so that [`LogError`] stays cloneable; two
/// are equal when they are the same error.
#[derive(Debug, Clone)]
pub struct BackendError(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl BackendError {
    /// Wraps a backend's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendError(std::sync::Arc::new(error))
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for BackendError {}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Why a `__consumer_offsets` record key or value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The buffer ended before the field.
    #[error("record truncated while reading {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A key or value version this code does not know.
    #[error("unknown {schema} version {version}")]
    UnknownVersion {
        /// The schema (`key`, `OffsetCommitValue`, `GroupMetadataValue`).
        schema: &'static str,
        /// The version read.
        version: i16,
    },
    /// A length prefix is negative where null is not allowed, or exceeds the
    /// remaining bytes.
    #[error("invalid length {length} for {field}")]
    InvalidLength {
        /// The field being read.
        field: &'static str,
        /// The length read.
        length: i64,
    },
    /// A string is not valid UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field being read.
        field: &'static str,
    },
    /// Bytes were left after the last field.
    #[error("{remaining} trailing bytes after the record")]
    TrailingBytes {
        /// How many bytes remained.
        remaining: usize,
    },
}

/// Why replaying a `__consumer_offsets` partition failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The coordinator is offline: a panic poisoned its group state.
    #[error("partition {partition} cannot be loaded: the group coordinator is offline")]
    Offline {
        /// The partition.
        partition: i32,
    },
    /// The log could not be read.
    #[error("reading partition {partition} failed")]
    Read {
        /// The partition.
        partition: i32,
        /// The log's error.
        #[source]
        source: LogError,
    },
    /// A record could not be decoded.
    #[error("record at offset {offset} of partition {partition} is malformed")]
    Malformed {
        /// The partition.
        partition: i32,
        /// Offset of the record.
        offset: i64,
        /// The decoding error.
        #[source]
        source: RecordError,
    },
    /// The partition is not owned by this coordinator.
    #[error("partition {partition} is not owned by this coordinator")]
    NotOwned {
        /// The partition.
        partition: i32,
    },
}
