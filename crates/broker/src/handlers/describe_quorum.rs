//! DescribeQuorum: the metadata quorum as Kafka's KRaft reports it, on the
//! one partition of the metadata log, `__cluster_metadata-0`.
//!
//! Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED, top level,
//! otherwise). A request that names anything but `__cluster_metadata`
//! partition 0 gets UNKNOWN_TOPIC_OR_PARTITION on each partition it names.
//!
//! In cluster mode the answer is the active controller's view
//! ([`ControllerClient::describe_quorum`]): leader, epoch (the Raft term),
//! high watermark (the offset after the last committed entry), and each
//! voter's and observer's log end offset (-1 where the active controller
//! does not know it). The active controller itself is reported as fetched
//! and caught up now, as Kafka reports its leader; for the other replicas
//! openraft keeps no fetch times, so both timestamps are -1 (unknown).
//!
//! The embedded single-node controller is a quorum of one voter, this
//! node: it is the leader, its log end offset and the high watermark are
//! the image's next offset (every record it appends is committed at once),
//! and the epoch is 0, because no election has ever taken place: the
//! embedded controller has been the only controller of its log since the
//! log was created.
//!
//! [`ControllerClient::describe_quorum`]: strom_controller::runtime::ControllerClient::describe_quorum

use strom_controller::error::RuntimeError;
use strom_controller::quorum::{QuorumStatus, ReplicaStatus};
use strom_network::{Reply, RequestContext};
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use strom_protocol::kafka::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::Response;

use super::authorization::authorize;
use super::errors::describe_quorum_error_code;
use super::BrokerContext;

/// The topic of the metadata log, as Kafka names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// The only partition of the metadata log.
pub const METADATA_PARTITION: i32 = 0;

/// One controller voter's listener, from `controller.quorum.voters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterEndpoint {
    /// The voter's node id.
    pub node_id: i32,
    /// The host of its controller listener.
    pub host: String,
    /// The port of its controller listener.
    pub port: u16,
}

/// Handles a DescribeQuorum request.
pub async fn handle(
    broker: &BrokerContext,
    context: &RequestContext,
    request: DescribeQuorumRequest,
) -> Reply {
    let respond =
        |response: DescribeQuorumResponse| Reply::Response(Response::DescribeQuorum(response));
    if !authorize(
        broker,
        context,
        operation::DESCRIBE,
        resource::CLUSTER,
        CLUSTER_NAME,
    ) {
        return respond(
            DescribeQuorumResponse::default()
                .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "DESCRIBE on the cluster is required",
                ))),
        );
    }
    if !asks_for_metadata_partition(&request) {
        return respond(unknown_partitions(&request));
    }
    let now_ms = broker.replicas.now_ms();
    let partition = match broker.controller.describe_quorum().await {
        Ok(Some(status)) => partition_of_status(&status, now_ms),
        Ok(None) => single_node_partition(broker, now_ms),
        Err(error) => partition_error(&error),
    };
    let nodes = match &broker.config.cluster {
        // `nodes` exists from v2 on; the codec refuses it below.
        Some(cluster) if context.api_version >= 2 => voter_endpoints(broker)
            .into_iter()
            .map(|voter| node_of(voter, cluster.controller_listener_name()))
            .collect(),
        // The embedded single-node controller has no voters to list.
        _ => Vec::new(),
    };
    respond(
        DescribeQuorumResponse::default()
            .with_topics(vec![TopicData::default()
                .with_topic_name(metadata_topic())
                .with_partitions(vec![partition])])
            .with_nodes(nodes),
    )
}

/// Whether the request names exactly `__cluster_metadata` partition 0, as
/// Kafka requires.
fn asks_for_metadata_partition(request: &DescribeQuorumRequest) -> bool {
    match request.topics.as_slice() {
        [topic] => {
            topic.topic_name.0.as_str() == METADATA_TOPIC
                && matches!(topic.partitions.as_slice(),
                    [partition] if partition.partition_index == METADATA_PARTITION)
        }
        _ => false,
    }
}

/// UNKNOWN_TOPIC_OR_PARTITION on every partition the request names.
fn unknown_partitions(request: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            TopicData::default()
                .with_topic_name(topic.topic_name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            unknown_leader_partition()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(ErrorCode::UnknownTopicOrPartition.code())
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeQuorumResponse::default().with_topics(topics)
}

fn metadata_topic() -> TopicName {
    TopicName(StrBytes::from_static_str(METADATA_TOPIC))
}

/// A partition entry with no leader and no replicas (for errors).
fn unknown_leader_partition() -> PartitionData {
    PartitionData::default()
        .with_partition_index(METADATA_PARTITION)
        .with_leader_id(BrokerId(-1))
        .with_leader_epoch(-1)
        .with_high_watermark(-1)
}

/// The metadata partition when the controller could not be asked (the
/// code from [`describe_quorum_error_code`]).
fn partition_error(error: &RuntimeError) -> PartitionData {
    unknown_leader_partition()
        .with_error_code(describe_quorum_error_code(error).code())
        .with_error_message(Some(StrBytes::from_string(error.to_string())))
}

/// The metadata partition from the active controller's view.
pub fn partition_of_status(status: &QuorumStatus, now_ms: i64) -> PartitionData {
    let replica = |replica: &ReplicaStatus| {
        let is_leader = status.leader == Some(replica.node_id);
        replica_state(
            node_id_of(replica.node_id),
            replica.log_end_offset.map(offset_of),
            is_leader.then_some(now_ms),
        )
    };
    PartitionData::default()
        .with_partition_index(METADATA_PARTITION)
        .with_leader_id(BrokerId(status.leader.map_or(-1, node_id_of)))
        .with_leader_epoch(i32::try_from(status.epoch).unwrap_or(i32::MAX))
        .with_high_watermark(offset_of(status.high_watermark))
        .with_current_voters(status.voters.iter().map(replica).collect())
        .with_observers(status.observers.iter().map(replica).collect())
}

/// The embedded controller as a quorum of one (see the module docs).
fn single_node_partition(broker: &BrokerContext, now_ms: i64) -> PartitionData {
    let next_offset = offset_of(broker.controller.image().next_offset());
    single_voter_partition(broker.config.node_id, next_offset, now_ms)
}

/// A one-voter quorum led by `node_id` whose log ends at `next_offset`.
pub fn single_voter_partition(node_id: i32, next_offset: i64, now_ms: i64) -> PartitionData {
    PartitionData::default()
        .with_partition_index(METADATA_PARTITION)
        .with_leader_id(BrokerId(node_id))
        .with_leader_epoch(0)
        .with_high_watermark(next_offset)
        .with_current_voters(vec![replica_state(
            node_id,
            Some(next_offset),
            Some(now_ms),
        )])
}

/// One replica; `caught_up_ms` is set for the leader only.
fn replica_state(
    node_id: i32,
    log_end_offset: Option<i64>,
    caught_up_ms: Option<i64>,
) -> ReplicaState {
    ReplicaState::default()
        .with_replica_id(BrokerId(node_id))
        .with_log_end_offset(log_end_offset.unwrap_or(-1))
        .with_last_fetch_timestamp(caught_up_ms.unwrap_or(-1))
        .with_last_caught_up_timestamp(caught_up_ms.unwrap_or(-1))
}

fn node_id_of(node_id: u64) -> i32 {
    i32::try_from(node_id).unwrap_or(-1)
}

fn offset_of(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// The voters' controller listeners (`controller.quorum.voters`); empty
/// on a single node. An entry whose address does not parse is left out.
pub fn voter_endpoints(broker: &BrokerContext) -> Vec<VoterEndpoint> {
    broker
        .controller
        .quorum_voters()
        .into_iter()
        .filter_map(|(node_id, address)| {
            let (host, port) = split_host_port(&address)?;
            Some(VoterEndpoint {
                node_id: i32::try_from(node_id).ok()?,
                host,
                port,
            })
        })
        .collect()
}

/// `host:port` (or `[v6]:port`) split into host and port.
pub fn split_host_port(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse().ok()?;
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// A voter as a v2 `Node`, with its controller listener.
fn node_of(voter: VoterEndpoint, listener_name: &str) -> Node {
    Node::default()
        .with_node_id(BrokerId(voter.node_id))
        .with_listeners(vec![Listener::default()
            .with_name(StrBytes::from_string(listener_name.to_owned()))
            .with_host(StrBytes::from_string(voter.host))
            .with_port(voter.port)])
}

#[cfg(test)]
mod tests {
    use strom_protocol::kafka::messages::describe_quorum_request;

    use super::*;

    fn request(topic: &str, partitions: &[i32]) -> DescribeQuorumRequest {
        DescribeQuorumRequest::default().with_topics(vec![
            describe_quorum_request::TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&index| {
                            describe_quorum_request::PartitionData::default()
                                .with_partition_index(index)
                        })
                        .collect(),
                ),
        ])
    }

    #[test]
    fn only_the_metadata_partition_is_described() {
        assert!(asks_for_metadata_partition(&request(METADATA_TOPIC, &[0])));
        assert!(!asks_for_metadata_partition(&request(METADATA_TOPIC, &[1])));
        assert!(!asks_for_metadata_partition(&request(
            METADATA_TOPIC,
            &[0, 0]
        )));
        assert!(!asks_for_metadata_partition(&request("events", &[0])));
        assert!(!asks_for_metadata_partition(
            &DescribeQuorumRequest::default()
        ));
    }

    #[test]
    fn other_partitions_are_unknown() {
        let response = unknown_partitions(&request("events", &[3, 4]));
        let topic = &response.topics[0];
        assert_eq!(topic.topic_name.0.as_str(), "events");
        let indexes: Vec<i32> = topic.partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(indexes, vec![3, 4]);
        assert!(topic
            .partitions
            .iter()
            .all(|p| p.error_code == ErrorCode::UnknownTopicOrPartition.code()));
    }

    fn replica(node_id: u64, log_end_offset: Option<u64>) -> ReplicaStatus {
        ReplicaStatus {
            node_id,
            log_end_offset,
        }
    }

    #[test]
    fn a_quorum_status_maps_to_kafkas_fields() {
        let status = QuorumStatus {
            node_id: 2,
            is_active: true,
            leader: Some(2),
            epoch: 7,
            high_watermark: 41,
            voters: vec![replica(1, Some(40)), replica(2, Some(42)), replica(3, None)],
            observers: vec![replica(4, Some(39))],
        };
        let partition = partition_of_status(&status, 1_000);
        assert_eq!(partition.error_code, 0);
        assert_eq!(partition.leader_id, BrokerId(2));
        assert_eq!(partition.leader_epoch, 7);
        assert_eq!(partition.high_watermark, 41);
        let row = |state: &ReplicaState| {
            (
                state.replica_id.0,
                state.log_end_offset,
                state.last_fetch_timestamp,
                state.last_caught_up_timestamp,
            )
        };
        let voters: Vec<_> = partition.current_voters.iter().map(row).collect();
        assert_eq!(
            voters,
            vec![(1, 40, -1, -1), (2, 42, 1_000, 1_000), (3, -1, -1, -1)]
        );
        let observers: Vec<_> = partition.observers.iter().map(row).collect();
        assert_eq!(observers, vec![(4, 39, -1, -1)]);
    }

    #[test]
    fn no_known_leader_is_minus_one() {
        let status = QuorumStatus {
            node_id: 1,
            is_active: false,
            leader: None,
            epoch: 3,
            high_watermark: 0,
            voters: vec![replica(1, Some(5))],
            observers: Vec::new(),
        };
        let partition = partition_of_status(&status, 9);
        assert_eq!(partition.leader_id, BrokerId(-1));
        assert_eq!(partition.current_voters[0].last_caught_up_timestamp, -1);
    }

    #[test]
    fn a_single_node_is_a_quorum_of_one_at_epoch_zero() {
        let partition = single_voter_partition(5, 17, 123);
        assert_eq!(partition.leader_id, BrokerId(5));
        assert_eq!(partition.leader_epoch, 0);
        assert_eq!(partition.high_watermark, 17);
        assert_eq!(partition.current_voters.len(), 1);
        let voter = &partition.current_voters[0];
        assert_eq!(
            (
                voter.replica_id.0,
                voter.log_end_offset,
                voter.last_caught_up_timestamp
            ),
            (5, 17, 123)
        );
        assert!(partition.observers.is_empty());
    }

    #[test]
    fn quorum_failures_are_partition_errors() {
        let timed_out = partition_error(&RuntimeError::QuorumTimeout { timeout_ms: 2_000 });
        assert_eq!(timed_out.error_code, ErrorCode::RequestTimedOut.code());
        let not_controller = partition_error(&RuntimeError::NotController { leader: None });
        assert_eq!(
            not_controller.error_code,
            ErrorCode::NotLeaderOrFollower.code()
        );
        assert_eq!(not_controller.leader_id, BrokerId(-1));
        assert!(not_controller.error_message.is_some());
    }

    #[test]
    fn voter_addresses_split_into_host_and_port() {
        assert_eq!(
            split_host_port("127.0.0.1:9192"),
            Some(("127.0.0.1".to_owned(), 9192))
        );
        assert_eq!(
            split_host_port("[::1]:9193"),
            Some(("::1".to_owned(), 9193))
        );
        assert_eq!(split_host_port("localhost"), None);
        assert_eq!(split_host_port(":9192"), None);
        assert_eq!(split_host_port("host:99999"), None);
    }
}
