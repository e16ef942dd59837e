//! What the collectors and the console read of a running broker: the
//! [`BrokerView`] trait the broker implements over its own state, and the
//! plain values it answers with.
//!
//! Every answer is a copy taken when asked, so nothing here holds a lock or
//! a metadata image of the broker's. Each method reads one snapshot (one
//! metadata image, one coordinator listing); two calls may see two.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{OnceLock, Weak};

use bytes::Bytes;

use crate::topics::TopicCounts;

/// Where the collector and the console find the broker once it serves (the
/// listener answers health probes before that). Held weakly, so that the
/// listener never keeps a stopping broker's state alive.
pub type ViewSlot = OnceLock<Weak<dyn BrokerView>>;

/// A read-only view of a running broker.
pub trait BrokerView: Send + Sync {
    /// This broker's id (`node.id`).
    fn node_id(&self) -> i32;

    /// The cluster id (from `meta.properties`).
    fn cluster_id(&self) -> &str;

    /// Whether the latest metadata image has this broker registered, and
    /// fenced or not.
    fn registration(&self) -> Registration;

    /// The registered brokers and totals of the latest metadata image.
    fn cluster(&self) -> ClusterState;

    /// The metadata quorum as this node sees it; `None` for the embedded
    /// controller of a single node.
    fn quorum(&self) -> Option<QuorumState>;

    /// Every topic of the latest metadata image, by name.
    fn topics(&self) -> Vec<TopicState>;

    /// One topic of the latest metadata image.
    fn topic(&self, name: &str) -> Option<TopicState>;

    /// The configuration explicitly set on a topic (empty if none).
    fn topic_configs(&self, name: &str) -> BTreeMap<String, String>;

    /// Every topic-level config of a topic with its effective value and
    /// where that comes from, as DescribeConfigs reports it (empty for an
    /// unknown topic). By default: the keys set on the topic only.
    fn topic_config_entries(&self, name: &str) -> Vec<ConfigEntryState> {
        self.topic_configs(name)
            .into_iter()
            .map(|(name, value)| ConfigEntryState {
                name,
                value: Some(value),
                source: "DYNAMIC_TOPIC_CONFIG",
            })
            .collect()
    }

    /// Every topic's counters, by name.
    fn topic_counts(&self) -> Vec<(String, TopicCounts)>;

    /// ISR changes the controller committed for partitions led here.
    fn isr_changes(&self) -> IsrChanges;

    /// Tiered storage's counters, when it is on (KIP-405).
    fn remote_storage(&self) -> Option<RemoteStorageCounts> {
        None
    }

    /// Every partition with a replica here, in any role.
    fn hosted_partitions(&self) -> Vec<HostedPartition>;

    /// The log of a partition this broker leads now; `None` if it does not
    /// lead it or the partition is offline.
    fn led_partition_log(&self, topic: &str, partition: i32) -> Option<LogState>;

    /// Reads record batches of a partition this broker leads, from `from`,
    /// at most `max_bytes` (at least one batch); `None` if it does not lead
    /// it or the read failed, empty bytes if there is nothing to read.
    fn read_records(&self, topic: &str, partition: i32, from: i64, max_bytes: u64)
        -> Option<Bytes>;

    /// The offset of the first record at or after `timestamp_ms` in a
    /// partition this broker leads, below its high watermark (ListOffsets
    /// by time); `None` if there is none or it is not led here.
    fn offset_for_timestamp(&self, topic: &str, partition: i32, timestamp_ms: i64) -> Option<i64>;

    /// Every state a group can be in, by Kafka's name, in the order the
    /// metrics list them.
    fn group_states(&self) -> Vec<&'static str>;

    /// The groups this broker coordinates (none while the coordinator is
    /// offline).
    fn groups(&self) -> Vec<GroupListing>;

    /// A group as DescribeGroups reports it; `None` if it cannot be
    /// described here.
    fn describe_group(&self, group: &str) -> Option<GroupDescription>;

    /// Every offset `group` has committed (-1 where none), empty if they
    /// cannot be read here.
    fn committed_offsets(&self, group: &str) -> Vec<CommittedOffset>;

    /// The high watermark of a partition this broker leads.
    fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64>;

    /// The transactional ids this broker coordinates, ascending (none
    /// while it coordinates none).
    fn transactions(&self) -> Vec<TransactionSummary>;

    /// The measured usage of every client a quota limits (none when no
    /// quota is configured).
    fn client_quotas(&self) -> Vec<ClientQuotaState> {
        Vec::new()
    }

    /// The broker's wall clock, in milliseconds.
    fn now_ms(&self) -> i64;

    /// Whether `password` is `user`'s, checked against the user's SCRAM
    /// credential as a SASL login would check it (HTTP Basic logins to the
    /// listener). Slow on purpose (a key derivation): the listener calls
    /// it off the async workers.
    fn authenticate(&self, user: &str, password: &str) -> bool;

    /// Whether `viewer` may perform `operation` on the resource of
    /// `resource_type` named `name` (codes of [`strom_protocol::acl`]), as
    /// the broker's authorizer would decide for a Kafka client of principal
    /// `User:NAME` connecting from the viewer's host; always true when no
    /// authorizer is configured.
    fn authorize(&self, viewer: &Viewer, operation: i8, resource_type: i8, name: &str) -> bool;
}

/// Who reads the console through an authenticated HTTP listener: the user
/// its Basic credentials named, and the address it connects from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// The SCRAM user name (the principal is `User:NAME`).
    pub user: String,
    /// The client's address.
    pub host: IpAddr,
}

/// Whether the metadata image knows this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// Not registered (yet).
    Unregistered,
    /// Registered, but fenced by the controller.
    Fenced,
    /// Registered and not fenced.
    Unfenced,
}

/// The process's network counters (Kafka's `socket-server-metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetworkCounts {
    /// Connections accepted.
    pub connections_opened: u64,
    /// Connections closed.
    pub connections_closed: u64,
    /// Bytes read from clients.
    pub bytes_received: u64,
    /// Bytes written to clients.
    pub bytes_sent: u64,
    /// Requests that could not be decoded (their connections were closed).
    pub undecodable_requests: u64,
    /// Fetched ranges read into the page cache before `sendfile`.
    pub page_cache_loads: u64,
    /// Connections closed at accept by a connection limit
    /// (`max.connections`, per listener, per IP).
    pub connections_refused: u64,
    /// Accepts delayed by a connection creation rate (KIP-612).
    pub connection_accepts_throttled: u64,
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    /// The broker id.
    pub broker_id: i32,
    /// The epoch of its registration.
    pub epoch: i64,
    /// Its advertised listeners.
    pub endpoints: Vec<EndpointState>,
    /// Its rack.
    pub rack: Option<String>,
    /// Whether the controller fenced it.
    pub fenced: bool,
}

/// An advertised listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointState {
    /// Listener name.
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
}

/// The cluster as one metadata image shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterState {
    /// Registered brokers, by id.
    pub brokers: Vec<BrokerState>,
    /// Topics in the cluster.
    pub topic_count: usize,
    /// Partitions in the cluster.
    pub partition_count: usize,
    /// The offset after the last metadata record the image applied.
    pub metadata_end_offset: u64,
}

/// One replica of the metadata log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuorumReplica {
    /// The node.
    pub node_id: u64,
    /// Its metadata log end as the active controller last heard (`None`
    /// if it knows nothing yet).
    pub log_end_offset: Option<u64>,
}

/// The metadata quorum as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumState {
    /// The node that answered.
    pub node_id: u64,
    /// Whether that node is the active controller.
    pub is_active: bool,
    /// The active controller, if known.
    pub leader: Option<u64>,
    /// The Raft term, the controller epoch.
    pub epoch: u64,
    /// The offset after the last entry applied on this node.
    pub high_watermark: u64,
    /// The voters, ascending by id.
    pub voters: Vec<QuorumReplica>,
    /// The observers, ascending by id.
    pub observers: Vec<QuorumReplica>,
}

/// A topic of the metadata image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    /// The name.
    pub name: String,
    /// The topic id, as text.
    pub id: String,
    /// Its `min.insync.replicas` (the topic's, else the broker's).
    pub min_insync_replicas: usize,
    /// Its partitions, by index.
    pub partitions: Vec<PartitionState>,
}

/// A partition's assignment and leadership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionState {
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// The leader, if any.
    pub leader: Option<i32>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// Replicas an ongoing reassignment adds (within `replicas`).
    pub adding_replicas: Vec<i32>,
    /// Whether a reassignment is ongoing.
    pub reassigning: bool,
}

/// Tiered storage's counters since start (Kafka's `RemoteCopyBytesPerSec`,
/// `RemoteFetchBytesPerSec`, their error rates and `RemoteCopyLagBytes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStorageCounts {
    /// Segment bytes whose copy finished.
    pub bytes_copied: u64,
    /// Record bytes served from the remote tier.
    pub bytes_fetched: u64,
    /// Copies that failed.
    pub copy_errors: u64,
    /// Remote reads that failed.
    pub fetch_errors: u64,
    /// Remote segments deleted.
    pub segments_deleted: u64,
    /// Bytes of closed local segments of led tiered partitions not copied yet.
    pub copy_lag_bytes: u64,
}

/// ISR changes committed by the controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IsrChanges {
    /// Shrinks.
    pub shrinks: u64,
    /// Expansions.
    pub expands: u64,
}

/// A partition with a replica on this broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// On its leader: each follower and how many offsets it is behind, as
    /// of its last fetch.
    pub follower_lags: Vec<(i32, i64)>,
    /// Its log; `None` while the partition is offline.
    pub log: Option<LogState>,
}

/// One config of a resource with its effective value and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntryState {
    /// The config name.
    pub name: String,
    /// The effective value (`None` when unset or sensitive).
    pub value: Option<String>,
    /// Kafka's name of where the value comes from: `DYNAMIC_TOPIC_CONFIG`,
    /// `DYNAMIC_BROKER_CONFIG`, `DYNAMIC_DEFAULT_BROKER_CONFIG`,
    /// `STATIC_BROKER_CONFIG` or `DEFAULT_CONFIG`.
    pub source: &'static str,
}

/// What is shown of a partition's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset: where read_committed reads stop.
    pub last_stable_offset: i64,
    /// Transactions open in this partition (started, no marker yet).
    pub open_transactions: usize,
    /// Bytes of the log.
    pub size_bytes: u64,
    /// Segments of the log.
    pub segments: usize,
    /// The log directory holding it.
    pub log_dir: Option<String>,
}

/// A transactional id as its coordinator knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSummary {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its state, by Kafka's name (`Ongoing`, `CompleteCommit`, ...).
    pub state: &'static str,
    /// When its open transaction started (ms since the epoch), or -1.
    pub start_timestamp_ms: i64,
}

/// A group in a coordinator's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group: String,
    /// Its protocol type, empty if none.
    pub protocol_type: String,
    /// Its state, by Kafka's name.
    pub state: &'static str,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Its state, by Kafka's name.
    pub state: &'static str,
    /// Its protocol type, empty if none.
    pub protocol_type: String,
    /// The selected protocol (empty unless Stable).
    pub protocol_name: String,
    /// Its members.
    pub members: Vec<GroupMember>,
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Its assignment as the group's protocol encodes it (empty unless
    /// Stable).
    pub assignment: Bytes,
}

/// One committed offset of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset (the next record to read), -1 if none.
    pub offset: i64,
}

/// What was measured of one client under one quota key.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuotaState {
    /// The quota key (`producer_byte_rate`, `consumer_byte_rate`,
    /// `request_percentage`, `controller_mutation_rate`).
    pub key: &'static str,
    /// The user the usage is summed under (empty: every user).
    pub user: String,
    /// The client id the usage is summed under (empty: every client id).
    pub client_id: String,
    /// The quota.
    pub limit: f64,
    /// The measured rate (bytes per second, percent of a thread, or the
    /// controller mutation tokens left).
    pub usage: f64,
    /// The sum of the throttle times answered, in milliseconds.
    pub throttle_time_ms_total: u64,
    /// How many answers were throttled.
    pub throttled_total: u64,
}
