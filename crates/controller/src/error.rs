//! Error types of the controller crate, split by who reacts to them.
//!
//! - [`RecordError`]: a record could not be decoded.
//! - [`ApplyError`]: a record does not fit the image it is applied to (a
//!   corrupt or out-of-order log, or a controller bug).
//! - [`AssignmentError`]: a replica assignment cannot be made or is invalid.
//! - [`LogError`]: the durable metadata log or snapshot cannot be read or
//!   written.
//! - [`ControllerError`]: a per-item result of a controller command; its
//!   variants carry what the broker needs to pick Kafka's error code.
//! - [`RuntimeError`]: the async controller layer failed as a whole.
//! - [`ProducerIdError`]: a producer id could not be allocated (a broker's
//!   [`crate::producer_ids`]).

use std::path::PathBuf;

use uuid::Uuid;

use crate::replica_state::ReplicaState;
pub use crate::transition::IllegalTransition;

/// A metadata record or snapshot could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The bytes are not a valid protobuf message of the expected type.
    #[error("malformed metadata record")]
    Decode {
        /// The protobuf decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// The record was written by a newer version of Strom.
    #[error("metadata record version {version} is newer than the supported {max_supported}")]
    UnsupportedVersion {
        /// The record's version.
        version: u32,
        /// The highest version this build reads.
        max_supported: u32,
    },
    /// A UUID field does not hold exactly 16 bytes.
    #[error("field {field} holds {length} bytes, a UUID needs 16")]
    InvalidUuid {
        /// The field's name.
        field: &'static str,
        /// The number of bytes found.
        length: usize,
    },
}

/// Why a partition's state is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum PartitionProblem {
    /// The replica list is empty.
    #[error("no replicas")]
    NoReplicas,
    /// A broker appears twice in the replica list.
    #[error("broker {broker_id} appears twice in the replicas")]
    DuplicateReplica {
        /// The repeated broker.
        broker_id: i32,
    },
    /// A broker appears twice in the ISR.
    #[error("broker {broker_id} appears twice in the ISR")]
    DuplicateIsrMember {
        /// The repeated broker.
        broker_id: i32,
    },
    /// An ISR member is not a replica.
    #[error("ISR member {broker_id} is not a replica")]
    IsrMemberNotReplica {
        /// The stray broker.
        broker_id: i32,
    },
    /// The leader is not in the ISR.
    #[error("leader {leader} is not in the ISR")]
    LeaderNotInIsr {
        /// The leader.
        leader: i32,
    },
    /// An epoch is negative.
    #[error("negative epoch")]
    NegativeEpoch,
    /// A replica being added or removed by a reassignment is not a replica.
    #[error("reassigned broker {broker_id} is not a replica")]
    ReassignedNotReplica {
        /// The stray broker.
        broker_id: i32,
    },
    /// A replica is both being added and being removed.
    #[error("broker {broker_id} is both being added and being removed")]
    AddedAndRemoved {
        /// The broker.
        broker_id: i32,
    },
}

/// A record does not fit the image it is applied to.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A field of the record is malformed.
    #[error("malformed record")]
    Record(#[from] RecordError),
    /// The record is of a kind this build does not know.
    #[error("record of an unknown kind")]
    UnknownRecordKind,
    /// A client quota record names an invalid entity, key or value.
    #[error("invalid client quota record")]
    InvalidQuotaRecord {
        /// What is wrong with it.
        #[source]
        source: strom_quotas::QuotaError,
    },
    /// Record offsets must grow strictly.
    #[error("record offset {offset} does not follow the last applied offset {last_offset}")]
    NonIncreasingOffset {
        /// The offset of the rejected record.
        offset: u64,
        /// The offset of the last applied record.
        last_offset: u64,
    },
    /// A topic with this id already exists.
    #[error("topic id {topic_id} already exists")]
    TopicIdExists {
        /// The topic id.
        topic_id: Uuid,
    },
    /// A topic with this name already exists.
    #[error("topic {name} already exists")]
    TopicNameExists {
        /// The topic name.
        name: String,
    },
    /// No topic has this id.
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId {
        /// The topic id.
        topic_id: Uuid,
    },
    /// No topic has this name.
    #[error("unknown topic {name}")]
    UnknownTopicName {
        /// The topic name.
        name: String,
    },
    /// Partitions must be created in order, from 0 up.
    #[error("partition {partition_index} of topic {topic_id} is out of order, expected {expected_index}")]
    PartitionOutOfOrder {
        /// The topic id.
        topic_id: Uuid,
        /// The partition index in the record.
        partition_index: i32,
        /// The next index the topic expects.
        expected_index: usize,
    },
    /// The partition does not exist.
    #[error("unknown partition {partition_index} of topic {topic_id}")]
    UnknownPartition {
        /// The topic id.
        topic_id: Uuid,
        /// The partition index.
        partition_index: i32,
    },
    /// The partition's resulting state is inconsistent.
    #[error("invalid state for partition {partition_index} of topic {topic_id}")]
    InvalidPartition {
        /// The topic id.
        topic_id: Uuid,
        /// The partition index.
        partition_index: i32,
        /// What is wrong.
        #[source]
        problem: PartitionProblem,
    },
    /// No broker with this id is registered.
    #[error("unknown broker {broker_id}")]
    UnknownBroker {
        /// The broker id.
        broker_id: i32,
    },
    /// The record names another registration of the broker.
    #[error("broker {broker_id} has epoch {current_epoch}, the record names {record_epoch}")]
    BrokerEpochMismatch {
        /// The broker id.
        broker_id: i32,
        /// The epoch in the image.
        current_epoch: i64,
        /// The epoch in the record.
        record_epoch: i64,
    },
    /// A producer id block must move the next producer id forward.
    #[error("producer ids record sets the next id to {record}, not above {current}")]
    ProducerIdNotIncreasing {
        /// The next id in the image.
        current: i64,
        /// The next id in the record.
        record: i64,
    },
    /// A re-registration must carry a larger broker epoch.
    #[error(
        "broker {broker_id} re-registered with epoch {record_epoch}, not above {current_epoch}"
    )]
    BrokerEpochNotIncreasing {
        /// The broker id.
        broker_id: i32,
        /// The epoch in the image.
        current_epoch: i64,
        /// The epoch in the record.
        record_epoch: i64,
    },
    /// An endpoint port does not fit in 16 bits.
    #[error("broker {broker_id} advertises port {port}")]
    InvalidPort {
        /// The broker id.
        broker_id: i32,
        /// The port.
        port: u32,
    },
    /// A planned change moves a replica through a transition the replica
    /// state machine forbids (a controller bug; nothing is applied).
    #[error("illegal replica state transition")]
    IllegalReplicaTransition {
        /// The transition.
        #[source]
        source: IllegalTransition<ReplicaState>,
    },
    /// The config record's resource type is not topic or broker.
    #[error("config resource type {resource_type} is not supported")]
    InvalidConfigResourceType {
        /// The resource type code.
        resource_type: i32,
    },
    /// A broker config resource name must be empty or a broker id.
    #[error("broker config resource name '{name}' is not a broker id")]
    InvalidBrokerResourceName {
        /// The name.
        name: String,
    },
}

/// A replica assignment cannot be made or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum AssignmentError {
    /// The replication factor is zero or negative.
    #[error("replication factor {replication_factor} must be at least 1")]
    NonPositiveReplicationFactor {
        /// The requested factor.
        replication_factor: i32,
    },
    /// The replication factor exceeds the number of brokers.
    #[error("replication factor {replication_factor} is larger than the {available_brokers} available brokers")]
    ReplicationFactorTooLarge {
        /// The requested factor.
        replication_factor: i32,
        /// The number of usable brokers.
        available_brokers: usize,
    },
    /// The number of partitions is zero or negative.
    #[error("number of partitions {partitions} must be at least 1")]
    NonPositivePartitions {
        /// The requested number.
        partitions: i32,
    },
    /// A manual assignment names a partition with no replicas.
    #[error("partition {partition_index} has no replicas")]
    EmptyReplicas {
        /// The partition index.
        partition_index: i32,
    },
    /// A manual assignment names a broker twice for one partition.
    #[error("partition {partition_index} names broker {broker_id} twice")]
    DuplicateBroker {
        /// The partition index.
        partition_index: i32,
        /// The repeated broker.
        broker_id: i32,
    },
    /// A manual assignment names a broker that is not registered.
    #[error("partition {partition_index} names unknown broker {broker_id}")]
    UnknownBroker {
        /// The partition index.
        partition_index: i32,
        /// The unknown broker.
        broker_id: i32,
    },
    /// Partitions of a manual assignment have different replica counts.
    #[error("partition {partition_index} has {actual} replicas, the others {expected}")]
    InconsistentReplicationFactor {
        /// The partition index.
        partition_index: i32,
        /// The replica count of the first partition.
        expected: usize,
        /// The replica count of this partition.
        actual: usize,
    },
    /// Every replica of a requested partition is on a fenced broker.
    #[error("every replica of partition {partition_index} is on a fenced broker")]
    AllReplicasFenced {
        /// The partition index.
        partition_index: i32,
    },
    /// A manual assignment has the wrong number of partitions.
    #[error("the assignment lists {actual} partitions, {expected} are being created")]
    WrongPartitionCount {
        /// Partitions being created.
        expected: usize,
        /// Partitions in the assignment.
        actual: usize,
    },
    /// A manual assignment's partition indexes are not consecutive from the
    /// first new partition.
    #[error(
        "assignment for partition {partition_index} is not the next expected {expected_index}"
    )]
    UnexpectedPartition {
        /// The partition index.
        partition_index: i32,
        /// The index expected.
        expected_index: i32,
    },
}

/// The durable metadata log or snapshot failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file operation failed.
    #[error("I/O error on {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A frame's CRC does not match and more frames follow: corruption
    /// that truncating a torn tail cannot explain.
    #[error("CRC mismatch in {path} at byte {position}: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The log file.
        path: PathBuf,
        /// Byte position of the frame.
        position: u64,
        /// The stored CRC.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// A frame declares a length of zero or above the cap, and the bytes
    /// after it are not a zero-filled tail.
    #[error(
        "frame at byte {position} of {path} declares {length} bytes (allowed 1 to {max_bytes})"
    )]
    InvalidFrameLength {
        /// The log file.
        path: PathBuf,
        /// Byte position of the frame.
        position: u64,
        /// The declared length.
        length: u32,
        /// The cap.
        max_bytes: u64,
    },
    /// A record too large to append.
    #[error("record of {length} bytes exceeds the {max_bytes}-byte frame limit")]
    RecordTooLarge {
        /// The encoded length.
        length: usize,
        /// The cap.
        max_bytes: u64,
    },
    /// A frame's payload is not a valid record.
    #[error("undecodable record at offset {offset} in {path}")]
    Record {
        /// The log or snapshot file.
        path: PathBuf,
        /// The record's offset.
        offset: u64,
        /// The decoding error.
        #[source]
        source: RecordError,
    },
    /// A record does not apply to the image rebuilt so far.
    #[error("record at offset {offset} does not apply")]
    Apply {
        /// The record's offset.
        offset: u64,
        /// The apply error.
        #[source]
        source: ApplyError,
    },
    /// Log offsets are not consecutive.
    #[error("expected offset {expected} in {path}, found {found}")]
    OffsetGap {
        /// The log file.
        path: PathBuf,
        /// The expected offset.
        expected: u64,
        /// The offset found.
        found: u64,
    },
    /// The log starts after offset 0 but no snapshot covers what precedes it.
    #[error(
        "the log starts at offset {first_log_offset} but no snapshot covers the offsets before it"
    )]
    MissingSnapshot {
        /// The first offset in the log.
        first_log_offset: u64,
    },
    /// The snapshot file is damaged.
    #[error("snapshot {path} is corrupt: {problem}")]
    CorruptSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong.
        problem: SnapshotProblem,
    },
    /// A frame of the quorum's Raft log or vote file does not decode.
    #[error("undecodable quorum frame at byte {position} of {path}")]
    QuorumFrame {
        /// The file.
        path: PathBuf,
        /// Byte position of the frame.
        position: u64,
        /// Why it does not decode.
        #[source]
        source: CodecError,
    },
    /// A thread panicked while it held the log file; what it left on disk
    /// is unknown until recovery runs again.
    #[error("the quorum log was left in an unknown state by a panic")]
    Poisoned,
}

/// Bytes of the quorum (a Raft entry, vote or RPC) do not decode.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes are not a valid message.
    #[error("undecodable message")]
    Decode {
        /// The decoding error.
        #[source]
        source: prost::DecodeError,
    },
    /// A required field is absent.
    #[error("required field {field} is missing")]
    MissingField {
        /// The field.
        field: &'static str,
    },
    /// An enumeration field has a value this build does not know.
    #[error("unknown value {kind} of {field}")]
    UnknownKind {
        /// The field.
        field: &'static str,
        /// The value.
        kind: u32,
    },
    /// A forwarded controller command or its reply is not valid JSON of
    /// the expected shape.
    #[error("undecodable controller command")]
    Json {
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The metadata records inside an entry are not valid.
    #[error("invalid metadata records")]
    Records {
        /// Why.
        #[source]
        source: RecordError,
    },
}

/// What is wrong with a snapshot file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotProblem {
    /// The file does not start with the snapshot magic.
    #[error("bad magic")]
    BadMagic,
    /// The file is shorter than its header says.
    #[error("truncated")]
    Truncated,
    /// The payload CRC does not match.
    #[error("CRC mismatch")]
    CrcMismatch,
    /// The payload does not decode.
    #[error("undecodable payload")]
    Undecodable,
    /// The payload's records do not rebuild an image.
    #[error("records do not apply")]
    DoesNotApply,
}

/// Why a topic name is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum TopicNameProblem {
    /// The name is empty.
    #[error("the name is empty")]
    Empty,
    /// The name is too long.
    #[error("the name has {length} characters, at most {max_length} are allowed")]
    TooLong {
        /// The name's length.
        length: usize,
        /// The maximum length.
        max_length: usize,
    },
    /// The name is `.` or `..`.
    #[error("the name cannot be '.' or '..'")]
    DotOrDotDot,
    /// The name differs from an existing topic's only in `.` versus `_`.
    #[error("the name collides with existing topic {existing} ('.' and '_' are interchangeable)")]
    CollidesWith {
        /// The existing topic.
        existing: String,
    },
    /// The name has a character outside `[a-zA-Z0-9._-]`.
    #[error("the character '{}' (U+{:04X}) is not one of [a-zA-Z0-9._-]", character.escape_default(), u32::from(*character))]
    IllegalCharacter {
        /// The first illegal character.
        character: char,
    },
}

/// Why a configuration value is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ConfigProblem {
    /// The key is not a known configuration.
    #[error("unknown configuration key")]
    UnknownKey,
    /// The value does not fit the key's type or range.
    #[error(transparent)]
    Value(#[from] strom_protocol::topic_config::ConfigValueError),
    /// A value is required (deletion or null is not allowed here).
    #[error("a value is required")]
    MissingValue,
    /// The key appears twice in one request.
    #[error("the key appears twice")]
    DuplicateKey,
    /// The operation does not apply to this key (APPEND/SUBTRACT on a
    /// non-list key).
    #[error("the operation needs a list-valued key")]
    NotAList,
}

/// The per-item error of a controller command. Each variant maps to one
/// Kafka error code at the broker edge (named in the variant's docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ControllerError {
    /// `INVALID_TOPIC_EXCEPTION`.
    #[error("invalid topic name '{}'", name.escape_default())]
    InvalidTopicName {
        /// The name.
        name: String,
        /// Why it is invalid.
        #[source]
        problem: TopicNameProblem,
    },
    /// `TOPIC_ALREADY_EXISTS`.
    #[error("topic {name} already exists")]
    TopicAlreadyExists {
        /// The topic name.
        name: String,
    },
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    #[error("unknown topic {name}")]
    UnknownTopic {
        /// The topic name.
        name: String,
    },
    /// `UNKNOWN_TOPIC_ID`.
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId {
        /// The topic id.
        topic_id: Uuid,
    },
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    #[error("unknown partition {partition_index} of topic {topic}")]
    UnknownPartition {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
    },
    /// `INVALID_REQUEST`: the same topic appears twice in one request.
    #[error("topic {name} appears more than once in the request")]
    DuplicateTopic {
        /// The topic name.
        name: String,
    },
    /// `INVALID_PARTITIONS`.
    #[error("invalid partition count {requested} for topic {topic} (currently {current})")]
    InvalidPartitions {
        /// The topic name.
        topic: String,
        /// The requested count.
        requested: i32,
        /// The current count (0 for a new topic).
        current: usize,
    },
    /// `INVALID_REPLICATION_FACTOR`.
    #[error("invalid replication factor {requested} with {available_brokers} available brokers")]
    InvalidReplicationFactor {
        /// The requested factor.
        requested: i32,
        /// The number of usable brokers.
        available_brokers: usize,
    },
    /// `INVALID_REPLICA_ASSIGNMENT`.
    #[error("invalid replica assignment")]
    InvalidReplicaAssignment {
        /// What is wrong.
        #[source]
        problem: AssignmentError,
    },
    /// `INVALID_CONFIG`.
    #[error("invalid value {} for configuration {key}", value.as_deref().map_or_else(|| "null".to_owned(), |value| format!("'{value}'")))]
    InvalidConfig {
        /// The key.
        key: String,
        /// The value (`None` for a deletion).
        value: Option<String>,
        /// Why it is invalid.
        #[source]
        reason: ConfigProblem,
    },
    /// `INVALID_REQUEST`: a broker key that cannot be changed while the
    /// broker runs (read-only in Kafka's terms, or unknown).
    #[error("cannot update this config dynamically: {key}")]
    ReadOnlyConfig {
        /// The key.
        key: String,
    },
    /// `INVALID_REQUEST`: a per-broker-only key (keystores, truststores)
    /// set as the cluster-wide default.
    #[error("cannot update {key} at the cluster default level; a broker id must be given")]
    PerBrokerConfig {
        /// The key.
        key: String,
    },
    /// `INVALID_REQUEST`: a resource type other than topic or broker.
    #[error("config resource type {resource_type} is not supported")]
    UnsupportedConfigResource {
        /// The Kafka resource type code.
        resource_type: i8,
    },
    /// `BROKER_NOT_AVAILABLE`: no unfenced broker can host replicas.
    #[error("no broker is available")]
    NoBrokersAvailable,
    /// Every producer id has been handed out (`UNKNOWN_SERVER_ERROR`).
    #[error("no producer ids are left after {next_producer_id}")]
    ProducerIdsExhausted {
        /// The first id not yet handed out.
        next_producer_id: i64,
    },
    /// `STALE_BROKER_EPOCH`.
    #[error("broker {broker_id} is at epoch {current_epoch}, the request names {request_epoch}")]
    StaleBrokerEpoch {
        /// The broker id.
        broker_id: i32,
        /// The registered epoch.
        current_epoch: i64,
        /// The epoch in the request.
        request_epoch: i64,
    },
    /// `BROKER_ID_NOT_REGISTERED`.
    #[error("broker {broker_id} is not registered")]
    BrokerNotRegistered {
        /// The broker id.
        broker_id: i32,
    },
    /// `DUPLICATE_BROKER_REGISTRATION`: another live incarnation holds the id.
    #[error("broker {broker_id} is registered by another live incarnation")]
    DuplicateBrokerRegistration {
        /// The broker id.
        broker_id: i32,
    },
    /// `INVALID_REQUEST`: a manual assignment was given together with a
    /// partition count or replication factor.
    #[error(
        "topic {topic} has both a replica assignment and a partition count or replication factor"
    )]
    AssignmentWithCounts {
        /// The topic name.
        topic: String,
    },
    /// `NOT_LEADER_OR_FOLLOWER`: an ISR change from a broker that does not
    /// lead the partition.
    #[error("broker {broker_id} does not lead partition {partition_index} of topic {topic}")]
    NotLeader {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
        /// The requesting broker.
        broker_id: i32,
    },
    /// `FENCED_LEADER_EPOCH`: the request names an old leader epoch.
    #[error("leader epoch {request_epoch} is not the current {current_epoch}")]
    FencedLeaderEpoch {
        /// The partition's leader epoch.
        current_epoch: i32,
        /// The epoch in the request.
        request_epoch: i32,
    },
    /// `INVALID_UPDATE_VERSION`: the request names an old partition epoch.
    #[error("partition epoch {request_epoch} is not the current {current_epoch}")]
    InvalidUpdateVersion {
        /// The partition's epoch.
        current_epoch: i32,
        /// The epoch in the request.
        request_epoch: i32,
    },
    /// `INELIGIBLE_REPLICA`: a proposed ISR member is fenced or unknown.
    #[error("broker {broker_id} cannot join the ISR: it is fenced or not registered")]
    IneligibleReplica {
        /// The broker.
        broker_id: i32,
    },
    /// `INVALID_REQUEST`: the proposed ISR is inconsistent.
    #[error("invalid ISR proposed")]
    InvalidIsr {
        /// What is wrong.
        #[source]
        problem: PartitionProblem,
    },
    /// `ELECTION_NOT_NEEDED`.
    #[error("partition {partition_index} of topic {topic} already has the wanted leader")]
    ElectionNotNeeded {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
    },
    /// `PREFERRED_LEADER_NOT_AVAILABLE`.
    #[error(
        "the preferred leader of partition {partition_index} of topic {topic} is not available"
    )]
    PreferredLeaderNotAvailable {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
    },
    /// `ELIGIBLE_LEADERS_NOT_AVAILABLE`.
    #[error("no eligible leader for partition {partition_index} of topic {topic}")]
    EligibleLeadersNotAvailable {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
    },
    /// `NO_REASSIGNMENT_IN_PROGRESS`: a cancellation for a partition that
    /// is not being reassigned.
    #[error("partition {partition_index} of topic {topic} is not being reassigned")]
    NoReassignmentInProgress {
        /// The topic name.
        topic: String,
        /// The partition index.
        partition_index: i32,
    },
}

/// The async controller layer failed; the command's records were not
/// committed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Appending to the durable log failed.
    #[error("metadata log failure")]
    Log(#[from] LogError),
    /// The controller produced records that do not apply (a bug).
    #[error("controller produced an inapplicable record")]
    Apply(#[from] ApplyError),
    /// The controller task has stopped.
    #[error("the controller has shut down")]
    Shutdown,
    /// An earlier failure stopped the controller (fail-stop: after a log
    /// write failed, the on-disk state is unknown until recovery).
    #[error("the controller stopped after an earlier failure")]
    Failed,
    /// This node is not the active controller of the quorum; `leader` is
    /// the one it knows of (Kafka's NOT_CONTROLLER).
    #[error("this node is not the active controller (the active controller is {})", leader.map_or_else(|| "unknown".to_string(), |id| format!("node {id}")))]
    NotController {
        /// The active controller's node id, if known.
        leader: Option<u64>,
    },
    /// The quorum did not commit the command within the request timeout
    /// (fewer than a majority of voters reachable); nothing was applied
    /// unless it shows in a later image.
    #[error("the metadata quorum did not answer within {timeout_ms} ms")]
    QuorumTimeout {
        /// The timeout.
        timeout_ms: u64,
    },
    /// Fewer than a majority of the controller voters answered the active
    /// controller, so it cannot commit; nothing was applied.
    #[error("fewer than a majority of the controller voters are reachable")]
    NoMajority,
    /// The command's records were planned against an image that a new
    /// active controller had already moved past; nothing was applied.
    #[error("the command was planned on a stale image and was not applied")]
    Stale,
    /// The Raft node failed.
    #[error("the metadata quorum failed")]
    Quorum {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Why a producer id could not be allocated or the counter not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    /// Reading or writing the counter file failed.
    #[error("cannot access the producer id counter {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The counter file does not hold a non-negative integer.
    #[error("the producer id counter {path} is corrupt: `{content}`")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What it holds (at most the first 64 characters).
        content: String,
    },
    /// Every producer id has been handed out.
    #[error("producer ids are exhausted")]
    Exhausted,
    /// The controller quorum could not be asked for a block of ids.
    #[error("no block of producer ids from the controller")]
    Controller {
        /// Why.
        #[source]
        source: RuntimeError,
    },
    /// The controller refused this broker a block of ids (for example
    /// after the broker was fenced and re-registered).
    #[error("the controller refused a block of producer ids")]
    Refused {
        /// Why.
        #[source]
        source: ControllerError,
    },
}

#[cfg(test)]
mod tests {
    use strom_protocol::topic_config::ConfigValueError;

    use super::*;

    #[test]
    fn messages_quote_values_without_debug_formatting() {
        let error = ControllerError::InvalidConfig {
            key: "retention.ms".into(),
            value: Some("soon".into()),
            reason: ConfigProblem::Value(ConfigValueError::NotAnInteger),
        };
        assert_eq!(
            error.to_string(),
            "invalid value 'soon' for configuration retention.ms"
        );
        let error = ControllerError::InvalidConfig {
            key: "retention.ms".into(),
            value: None,
            reason: ConfigProblem::MissingValue,
        };
        assert_eq!(
            error.to_string(),
            "invalid value null for configuration retention.ms"
        );
        let error = TopicNameProblem::IllegalCharacter { character: '/' };
        assert_eq!(
            error.to_string(),
            "the character '/' (U+002F) is not one of [a-zA-Z0-9._-]"
        );
        let error = ControllerError::InvalidTopicName {
            name: "a\nb".into(),
            problem: TopicNameProblem::IllegalCharacter { character: '\n' },
        };
        assert_eq!(error.to_string(), "invalid topic name 'a\\nb'");
    }

    #[test]
    fn config_problem_lists_allowed_values() {
        let problem = ConfigProblem::Value(ConfigValueError::not_allowed(&["delete", "compact"]));
        assert_eq!(problem.to_string(), "not one of: delete, compact");
    }
}
