//! The group coordinator: consumer group membership, rebalances and
//! committed offsets.
//!
//! `strom-coordinator` owns Kafka's classic group protocol on the server
//! side: the group state machine (Empty → PreparingRebalance →
//! CompletingRebalance → Stable, and Dead), member ids and the
//! MEMBER_ID_REQUIRED round trip, leader election and protocol selection,
//! session and rebalance timeouts, static membership, committed offsets,
//! the group coordinator's half of transactions (offsets committed inside
//! a transaction, KIP-98/KIP-447), and the records that persist them in the
//! compacted internal topic `__consumer_offsets` in Kafka's own key/value
//! schemas.
//!
//! It deliberately does not decode requests or choose wire error codes (the
//! broker maps its typed requests and [`GroupError`]s), does not store
//! records itself (the broker implements [`OffsetsLog`] on `strom-storage`),
//! does not run transactions (the transaction coordinator decides their
//! outcome and the broker writes the markers).
//!
//! It also owns the consumer group protocol of KIP-848 beside the classic
//! one: [`ConsumerGroup`] keeps a group epoch, a target assignment computed
//! by a server-side assignor ([`ConsumerAssignor`]: `uniform`, `range`)
//! with its epoch, and members that reconcile toward it
//! ([`ConsumerMember::reconcile`]: a partition reaches its new owner only
//! after the previous owner's heartbeat shows it revoked). Both protocols
//! share one coordinator, one group id space, the committed offsets and the
//! `__consumer_offsets` schema set (key versions 3 to 8,
//! [`consumer_records`]); a group id held by a live group of one protocol
//! is refused to the other (GROUP_ID_NOT_FOUND / INCONSISTENT_GROUP_PROTOCOL,
//! as Kafka with online migration disabled), an empty one changes sides.
//!
//! Design decisions a newcomer must know:
//!
//! * **Sans-IO core.** [`Group`] and [`CoordinatorCore`] take events with the
//!   current time in milliseconds and return decisions. Requests Kafka
//!   parks (a JoinGroup until every member rejoined or the rebalance timeout
//!   passed, a SyncGroup until the leader's assignment) return
//!   [`Reply::Pending`]; their answers come out later as [`Completion`]s
//!   when a join, sync, leave or timer [`tick`](CoordinatorCore::tick)
//!   resolves them. Tests drive time by hand; nothing sleeps. New member
//!   ids draw their random part from an injected [`strom_clock::Random`].
//! * **Thin async edge.** [`GroupCoordinator`] wraps the core in a mutex,
//!   turns pending replies into `tokio::sync::oneshot` receivers and runs a
//!   timer task that calls `tick`, reading the time from the broker's
//!   injected [`strom_clock::Clock`] (wall-clock milliseconds, as Kafka's
//!   coordinator uses; paused-time tests give it a `TokioClock`, which
//!   moves with tokio's timers). A panic while that mutex is held takes
//!   the coordinator offline ([`GroupError::CoordinatorNotAvailable`])
//!   rather than serving half-changed groups.
//! * **Transactional offsets wait for their marker.** A TxnOffsetCommit is
//!   appended as a transactional batch of its producer and held per
//!   partition and producer; OffsetFetch never answers it, and with
//!   `require_stable` answers UNSTABLE_OFFSET_COMMIT for the partitions it
//!   holds. The marker the broker writes into the same partition ends it
//!   ([`CoordinatorCore::complete_transaction`]): a commit makes the
//!   offsets written before it committed, an abort drops them; whichever
//!   record of a group and partition comes last in the log wins. Markers,
//!   like plain commits, count once the log has committed them, and a
//!   replay of the log rebuilds both.
//! * **Kafka's placement and formats.** A group lives on partition
//!   `(String.hashCode(group) & 0x7fffffff) % offsets.topic.num.partitions`
//!   ([`partition_for_group`]) and its records use Kafka's schema versions
//!   ([`records`]), so Kafka tooling can read the topic.
//!
//! # Wiring into the broker
//!
//! | Kafka API | Call | Notes |
//! |---|---|---|
//! | FindCoordinator (group) | [`partition_for_group`] | the leader of that `__consumer_offsets` partition |
//! | JoinGroup | [`GroupCoordinator::join_group`] | `require_known_member_id` for v4+; v0's rebalance timeout is the session timeout |
//! | SyncGroup | [`GroupCoordinator::sync_group`] | protocol type/name checked when present (v5+) |
//! | Heartbeat | [`GroupCoordinator::heartbeat`] | |
//! | LeaveGroup | [`GroupCoordinator::leave_group`] | v0-v2: one member, top-level error; v3+: per member |
//! | OffsetCommit | [`GroupCoordinator::commit_offsets`] | per-partition results; on a consumer-protocol group the generation is the member epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) |
//! | OffsetFetch | [`GroupCoordinator::fetch_offsets`] | once per group for v8+; `None` topics = all; `require_stable` from v7 |
//! | TxnOffsetCommit | [`GroupCoordinator::commit_transactional_offsets`] | per-partition results; v0-v2 have no generation (-1) or member id (empty) |
//! | WriteTxnMarkers (`__consumer_offsets` partitions) | [`GroupCoordinator::complete_transaction`] | after the marker is appended to that partition, with its offset |
//! | OffsetDelete | [`GroupCoordinator::delete_offsets`] | |
//! | DeleteGroups | [`GroupCoordinator::delete_groups`] | |
//! | ListGroups | [`GroupCoordinator::list_groups`] | states filter (v4+) |
//! | DescribeGroups | [`GroupCoordinator::describe_groups`] | a consumer-protocol group is described as Dead |
//! | ConsumerGroupHeartbeat | [`GroupCoordinator::consumer_heartbeat`] | the broker's metadata is the [`TopicCatalog`] |
//! | ConsumerGroupDescribe | [`GroupCoordinator::describe_consumer_groups`] | |
//! | ListGroups (consumer groups) | [`GroupCoordinator::list_consumer_groups`] | type `consumer` |
//! | OffsetFetch v9+ (member and epoch) | [`GroupCoordinator::validate_offset_fetch`] | |
//!
//! Partitions are taken over with [`GroupCoordinator::load_partition`] and
//! given up with [`GroupCoordinator::unload_partition`]; deleted topics are
//! reported with [`GroupCoordinator::remove_topic_offsets`]. Every
//! [`GroupError`] variant names the Kafka error code it maps to.
//!
//! The async layer appends records to the [`OffsetsLog`] while holding the
//! coordinator's lock; a broker whose log does blocking file I/O should call
//! it from a blocking-tolerant context (for example `spawn_blocking`).

mod consumer_assignor;
mod consumer_core;
mod consumer_group;
mod consumer_member;
mod consumer_persist;
pub mod consumer_records;
mod consumer_regex;
mod coordinator;
mod error;
mod group;
mod load;
mod log;
mod member;
mod offsets;
mod pending_txn;
mod rebalance;
pub mod records;
mod runtime;
mod state;
mod txn_commit;
mod wire;

pub use consumer_assignor::{
    assignment_intersection, assignment_minus, assignment_size, assignment_union, Assignment,
    ConsumerAssignor,
};
pub use consumer_core::ConsumerGroupListing;
pub use consumer_group::{
    validate_heartbeat, ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, ConsumerHeartbeat,
    ConsumerHeartbeatResponse, TopicCatalog, TopicMetadata,
};
pub use consumer_member::{
    ConsumerMember, MemberState, LEAVE_MEMBER_EPOCH, LEAVE_STATIC_MEMBER_EPOCH,
};
pub use coordinator::{
    CoordinatorConfig, CoordinatorCore, GroupListing, GroupResults, PartitionResults,
    PartitionStatus,
};
pub use error::{BackendError, GroupError, LoadError, LogError, LogOperation, RecordError};
pub use group::{
    Completion, Group, GroupConfig, GroupDescription, HeartbeatRequest, JoinRequest, JoinResponse,
    JoinedMember, LeaveMember, MemberDescription, Reply, SyncRequest, SyncResponse,
};
pub use load::read_partition;
pub use log::{
    BatchContext, CommitWait, InMemoryOffsetsLog, LogRecord, OffsetsLog, StoredRecord,
    TransactionMarker,
};
pub use member::{Member, Protocol, RequestId};
pub use offsets::{
    CommittedOffset, GroupOffsets, OffsetCommitPartition, OffsetCommitRequest, OffsetConfig,
    PartitionOffset, TopicPartition, TxnOffsetCommitRequest,
};
pub use records::{java_string_hash_code, partition_for_group};
pub use runtime::GroupCoordinator;
pub use state::GroupState;
pub use txn_commit::TransactionalAppend;
