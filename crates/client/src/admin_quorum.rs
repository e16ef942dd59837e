//! The metadata quorum as DescribeQuorum reports it: Kafka's
//! `Admin.describeMetadataQuorum` (KIP-836).
//!
//! The request goes to any broker: a Kafka broker forwards it to the
//! active controller, a Strom broker asks its controller, which answers
//! with the active controller's view.

use std::collections::BTreeMap;

use strom_protocol::kafka::messages::describe_quorum_request::{PartitionData, TopicData};
use strom_protocol::kafka::messages::describe_quorum_response::{self, ReplicaState};
use strom_protocol::kafka::messages::{ApiKey, DescribeQuorumRequest, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};
use uuid::Uuid;

use crate::admin::AdminClient;
use crate::error::ClientError;

/// The topic of the metadata log.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// How many times [`AdminClient::describe_quorum`] asks before it gives up
/// on a retriable error.
pub const DESCRIBE_QUORUM_ATTEMPTS: u32 = 5;

/// One replica of the metadata log: a voter or an observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplica {
    /// The node id.
    pub node_id: i32,
    /// The replica's metadata directory id (KIP-853), if the quorum
    /// reports one.
    pub directory_id: Option<Uuid>,
    /// The log end offset the leader knows of, if any.
    pub log_end_offset: Option<i64>,
    /// When it last fetched from the leader (leader's clock, epoch ms),
    /// if known.
    pub last_fetch_timestamp_ms: Option<i64>,
    /// When it last caught up with the leader (leader's clock, epoch ms),
    /// if known.
    pub last_caught_up_timestamp_ms: Option<i64>,
}

/// One listener of a controller voter (DescribeQuorum v2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumEndpoint {
    /// The listener name, e.g. `CONTROLLER`.
    pub listener: String,
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
}

/// The metadata quorum, as Kafka's `QuorumInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    /// The active controller (`None` if there is none).
    pub leader_id: Option<i32>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The high watermark of the metadata log.
    pub high_watermark: i64,
    /// The voters, in the order the quorum lists them.
    pub voters: Vec<QuorumReplica>,
    /// The observers (replicas that follow the log without voting).
    pub observers: Vec<QuorumReplica>,
    /// Each voter's listeners (empty below DescribeQuorum v2).
    pub nodes: BTreeMap<i32, Vec<QuorumEndpoint>>,
}

impl QuorumInfo {
    /// The leader among the voters, if it is one.
    pub fn leader(&self) -> Option<&QuorumReplica> {
        let leader_id = self.leader_id?;
        self.voters.iter().find(|voter| voter.node_id == leader_id)
    }
}

impl AdminClient {
    /// DescribeQuorum: the metadata quorum's leader, epoch, high watermark
    /// and each voter's and observer's progress. A retriable error (no
    /// active controller during an election, a lost connection) is retried
    /// after `retry.backoff.ms`, up to [`DESCRIBE_QUORUM_ATTEMPTS`] times.
    pub async fn describe_quorum(&self) -> Result<QuorumInfo, ClientError> {
        let mut attempt = 1;
        loop {
            match self.describe_quorum_once().await {
                Err(error) if error.is_retriable() && attempt < DESCRIBE_QUORUM_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(self.cluster().config().retry_backoff).await;
                }
                result => return result,
            }
        }
    }

    async fn describe_quorum_once(&self) -> Result<QuorumInfo, ClientError> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let connection = self.cluster().any_connection().await?;
        let Response::DescribeQuorum(response) = connection.send(request).await? else {
            return Err(ClientError::UnexpectedResponse {
                api_key: ApiKey::DescribeQuorum as i16,
            });
        };
        quorum_info(&response)
    }
}

/// The typed answer; an error code at the top or on the partition is the
/// error.
pub fn quorum_info(
    response: &strom_protocol::kafka::messages::DescribeQuorumResponse,
) -> Result<QuorumInfo, ClientError> {
    broker_error(response.error_code)?;
    let partition = response
        .topics
        .iter()
        .filter(|topic| topic.topic_name.0.as_str() == METADATA_TOPIC)
        .flat_map(|topic| topic.partitions.iter())
        .find(|partition| partition.partition_index == 0)
        .ok_or(ClientError::Broker {
            code: ErrorCode::UnknownTopicOrPartition,
        })?;
    broker_error(partition.error_code)?;
    Ok(QuorumInfo {
        leader_id: (partition.leader_id.0 >= 0).then_some(partition.leader_id.0),
        leader_epoch: partition.leader_epoch,
        high_watermark: partition.high_watermark,
        voters: partition.current_voters.iter().map(replica).collect(),
        observers: partition.observers.iter().map(replica).collect(),
        nodes: response
            .nodes
            .iter()
            .map(|node| {
                (
                    node.node_id.0,
                    node.listeners.iter().map(endpoint).collect(),
                )
            })
            .collect(),
    })
}

fn broker_error(error_code: i16) -> Result<(), ClientError> {
    match ErrorCode::from_code(error_code) {
        ErrorCode::None => Ok(()),
        code => Err(ClientError::Broker { code }),
    }
}

fn known(value: i64) -> Option<i64> {
    (value >= 0).then_some(value)
}

fn replica(state: &ReplicaState) -> QuorumReplica {
    QuorumReplica {
        node_id: state.replica_id.0,
        directory_id: (!state.replica_directory_id.is_nil()).then_some(state.replica_directory_id),
        log_end_offset: known(state.log_end_offset),
        last_fetch_timestamp_ms: known(state.last_fetch_timestamp),
        last_caught_up_timestamp_ms: known(state.last_caught_up_timestamp),
    }
}

fn endpoint(listener: &describe_quorum_response::Listener) -> QuorumEndpoint {
    QuorumEndpoint {
        listener: listener.name.to_string(),
        host: listener.host.to_string(),
        port: listener.port,
    }
}

#[cfg(test)]
mod tests {
    use strom_protocol::kafka::messages::describe_quorum_response::{
        Listener, Node, PartitionData, TopicData,
    };
    use strom_protocol::kafka::messages::{BrokerId, DescribeQuorumResponse};

    use super::*;

    fn state(node_id: i32, log_end_offset: i64, timestamp_ms: i64) -> ReplicaState {
        ReplicaState::default()
            .with_replica_id(BrokerId(node_id))
            .with_log_end_offset(log_end_offset)
            .with_last_fetch_timestamp(timestamp_ms)
            .with_last_caught_up_timestamp(timestamp_ms)
    }

    fn response(partition: PartitionData) -> DescribeQuorumResponse {
        DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![partition])])
    }

    #[test]
    fn a_response_becomes_quorum_info() {
        let directory = Uuid::from_bytes([7; 16]);
        let partition = PartitionData::default()
            .with_leader_id(BrokerId(2))
            .with_leader_epoch(4)
            .with_high_watermark(90)
            .with_current_voters(vec![
                state(1, 88, -1),
                state(2, 90, 1_000).with_replica_directory_id(directory),
            ])
            .with_observers(vec![state(4, -1, -1)]);
        let response = response(partition).with_nodes(vec![Node::default()
            .with_node_id(BrokerId(1))
            .with_listeners(vec![Listener::default()
                .with_name(StrBytes::from_static_str("CONTROLLER"))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9192)])]);
        let info = quorum_info(&response).expect("info");
        assert_eq!(info.leader_id, Some(2));
        assert_eq!(info.leader_epoch, 4);
        assert_eq!(info.high_watermark, 90);
        assert_eq!(info.leader().map(|leader| leader.node_id), Some(2));
        assert_eq!(info.voters[0].log_end_offset, Some(88));
        assert_eq!(info.voters[0].last_fetch_timestamp_ms, None);
        assert_eq!(info.voters[0].directory_id, None);
        assert_eq!(info.voters[1].directory_id, Some(directory));
        assert_eq!(info.voters[1].last_caught_up_timestamp_ms, Some(1_000));
        assert_eq!(info.observers[0].log_end_offset, None);
        assert_eq!(info.nodes[&1][0].port, 9192);
        assert_eq!(info.nodes[&1][0].listener, "CONTROLLER");
    }

    #[test]
    fn errors_at_either_level_fail() {
        let top = DescribeQuorumResponse::default().with_error_code(31);
        assert!(matches!(
            quorum_info(&top),
            Err(ClientError::Broker {
                code: ErrorCode::ClusterAuthorizationFailed
            })
        ));
        let partition = response(PartitionData::default().with_error_code(6));
        assert!(matches!(
            quorum_info(&partition),
            Err(ClientError::Broker {
                code: ErrorCode::NotLeaderOrFollower
            })
        ));
        let missing = DescribeQuorumResponse::default();
        assert!(quorum_info(&missing).is_err());
    }

    #[test]
    fn no_leader_is_none() {
        let info = quorum_info(&response(
            PartitionData::default().with_leader_id(BrokerId(-1)),
        ))
        .expect("info");
        assert_eq!(info.leader_id, None);
        assert!(info.leader().is_none());
    }
}
