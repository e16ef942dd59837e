//! The client's view of the cluster: brokers, topics, partitions and leaders,
//! built from Metadata responses.

use std::collections::HashMap;
use std::time::Instant;

use strom_protocol::kafka::messages::MetadataResponse;
use strom_protocol::ErrorCode;
use uuid::Uuid;

/// A broker as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The broker id.
    pub id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: u16,
    /// Its rack, if configured.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition index.
    pub partition: i32,
    /// The leader's broker id, `None` when there is no leader.
    pub leader: Option<i32>,
    /// The leader epoch (-1 if the broker does not send it).
    pub leader_epoch: i32,
    /// Replica broker ids.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// The partition-level error the broker reported.
    pub error: ErrorCode,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// The topic id (nil for brokers before Metadata v10).
    pub topic_id: Uuid,
    /// The topic-level error (`UNKNOWN_TOPIC_OR_PARTITION`, ...).
    pub error: ErrorCode,
    /// Whether it is an internal topic.
    pub is_internal: bool,
    /// Partitions ordered by index.
    pub partitions: Vec<PartitionInfo>,
}

impl TopicInfo {
    /// The partition with index `partition`.
    pub fn partition(&self, partition: i32) -> Option<&PartitionInfo> {
        usize::try_from(partition)
            .ok()
            .and_then(|index| self.partitions.get(index))
            .filter(|info| info.partition == partition)
            .or_else(|| {
                self.partitions
                    .iter()
                    .find(|info| info.partition == partition)
            })
    }
}

/// An immutable snapshot of cluster metadata.
#[derive(Debug, Clone)]
pub struct ClusterMetadata {
    /// The cluster id, if the broker sends one.
    pub cluster_id: Option<String>,
    /// The controller's broker id (-1 if unknown).
    pub controller_id: i32,
    /// Brokers by id.
    pub brokers: HashMap<i32, BrokerInfo>,
    /// Topics by name.
    pub topics: HashMap<String, TopicInfo>,
    /// When each topic was last fetched.
    pub topic_fetched_at: HashMap<String, Instant>,
    /// When the broker list was last fetched.
    pub fetched_at: Instant,
}

impl ClusterMetadata {
    /// An empty snapshot taken at `now`.
    pub fn empty(now: Instant) -> Self {
        ClusterMetadata {
            cluster_id: None,
            controller_id: -1,
            brokers: HashMap::new(),
            topics: HashMap::new(),
            topic_fetched_at: HashMap::new(),
            fetched_at: now,
        }
    }

    /// This snapshot updated with a response fetched at `now`: the broker
    /// list is replaced, the topics in the response are replaced, others are
    /// kept.
    pub fn merged(&self, response: &MetadataResponse, now: Instant) -> ClusterMetadata {
        let mut next = self.clone();
        next.cluster_id = response.cluster_id.as_ref().map(|id| id.to_string());
        next.controller_id = response.controller_id.0;
        next.brokers = response
            .brokers
            .iter()
            .filter_map(|broker| {
                let port = u16::try_from(broker.port).ok()?;
                Some((
                    broker.node_id.0,
                    BrokerInfo {
                        id: broker.node_id.0,
                        host: broker.host.to_string(),
                        port,
                        rack: broker.rack.as_ref().map(|rack| rack.to_string()),
                    },
                ))
            })
            .collect();
        for topic in &response.topics {
            let Some(name) = topic.name.as_ref() else {
                continue;
            };
            let info = topic_info(name.0.to_string(), topic);
            next.topic_fetched_at.insert(info.name.clone(), now);
            next.topics.insert(info.name.clone(), info);
        }
        next.fetched_at = now;
        next
    }

    /// The leader broker of a partition, if known.
    pub fn leader_of(&self, topic: &str, partition: i32) -> Option<&BrokerInfo> {
        let leader = self.topics.get(topic)?.partition(partition)?.leader?;
        self.brokers.get(&leader)
    }
}

fn topic_info(
    name: String,
    topic: &strom_protocol::kafka::messages::metadata_response::MetadataResponseTopic,
) -> TopicInfo {
    let mut partitions: Vec<PartitionInfo> = topic
        .partitions
        .iter()
        .map(|partition| PartitionInfo {
            partition: partition.partition_index,
            leader: (partition.leader_id.0 >= 0).then_some(partition.leader_id.0),
            leader_epoch: partition.leader_epoch,
            replicas: partition.replica_nodes.iter().map(|id| id.0).collect(),
            isr: partition.isr_nodes.iter().map(|id| id.0).collect(),
            error: ErrorCode::from_code(partition.error_code),
        })
        .collect();
    partitions.sort_by_key(|partition| partition.partition);
    TopicInfo {
        name,
        topic_id: topic.topic_id,
        error: ErrorCode::from_code(topic.error_code),
        is_internal: topic.is_internal,
        partitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_protocol::kafka::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use strom_protocol::kafka::messages::{BrokerId, TopicName};
    use strom_protocol::kafka::protocol::StrBytes;

    fn response(leader: i32) -> MetadataResponse {
        MetadataResponse::default()
            .with_controller_id(BrokerId(1))
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092)])
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![
                    MetadataResponsePartition::default()
                        .with_partition_index(1)
                        .with_leader_id(BrokerId(-1)),
                    MetadataResponsePartition::default()
                        .with_partition_index(0)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(4),
                ])])
    }

    #[test]
    fn merge_builds_topics_partitions_and_leaders() {
        let now = Instant::now();
        let metadata = ClusterMetadata::empty(now).merged(&response(1), now);
        assert_eq!(metadata.controller_id, 1);
        let topic = &metadata.topics["t"];
        assert_eq!(topic.partitions.len(), 2);
        assert_eq!(topic.partition(0).unwrap().leader_epoch, 4);
        assert_eq!(topic.partition(1).unwrap().leader, None);
        assert_eq!(
            metadata.leader_of("t", 0).unwrap().address(),
            "127.0.0.1:9092"
        );
        assert!(metadata.leader_of("t", 1).is_none());
        assert!(metadata.leader_of("t", 7).is_none());
    }

    #[test]
    fn merge_keeps_topics_absent_from_the_response() {
        let now = Instant::now();
        let first = ClusterMetadata::empty(now).merged(&response(1), now);
        let second = first.merged(&MetadataResponse::default(), now);
        assert!(second.topics.contains_key("t"));
        assert!(second.brokers.is_empty());
    }
}
