//! The admin client: topics, cluster and offsets here; partitions, records,
//! configs and groups in [`admin_groups`](crate::admin_groups); the metadata
//! quorum in [`admin_quorum`](crate::admin_quorum).
//!
//! Requests go to the controller (topic creation and deletion) or to the
//! partition leaders (offset lookups), as the Java `Admin` does. Results are
//! per topic or partition: one topic's error does not fail the others.

use std::collections::HashMap;
use std::time::Duration;

use strom_protocol::kafka::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig,
};
use strom_protocol::kafka::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use strom_protocol::kafka::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, ListOffsetsRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::cluster::Cluster;
use crate::error::ClientError;
use crate::metadata::BrokerInfo;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic name.
    pub name: String,
    /// Partitions (-1 for the broker default).
    pub partitions: i32,
    /// Replication factor (-1 for the broker default).
    pub replication_factor: i16,
    /// Topic configs (`retention.ms`, `cleanup.policy`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and `replication_factor` replicas.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }
}

/// Which offset [`AdminClient::list_offset`] looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset.
    Latest,
    /// The offset of the record with the largest timestamp.
    MaxTimestamp,
    /// The first offset whose timestamp is at least this (milliseconds).
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire_timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::Timestamp(timestamp_ms) => timestamp_ms,
        }
    }
}

/// An offset found by [`AdminClient::list_offset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset (-1 if none matches).
    pub offset: i64,
    /// The record's timestamp (-1 for earliest/latest).
    pub timestamp_ms: i64,
    /// The leader epoch (-1 if unknown).
    pub leader_epoch: i32,
}

/// The cluster as [`AdminClient::describe_cluster`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller's broker id.
    pub controller_id: i32,
    /// The brokers, by id.
    pub brokers: Vec<BrokerInfo>,
}

/// An admin client over a [`Cluster`].
#[derive(Debug, Clone)]
pub struct AdminClient {
    cluster: Cluster,
    operation_timeout: Duration,
}

impl AdminClient {
    /// An admin client; `operation_timeout` is what the broker may spend on
    /// topic creation or deletion.
    pub fn new(cluster: Cluster, operation_timeout: Duration) -> Self {
        AdminClient {
            cluster,
            operation_timeout,
        }
    }

    /// The cluster handle.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub(crate) fn timeout_ms(&self) -> i32 {
        i32::try_from(self.operation_timeout.as_millis()).unwrap_or(i32::MAX)
    }

    pub(crate) async fn controller(&self) -> Result<i32, ClientError> {
        let metadata = self.cluster.refresh_metadata().await?;
        if metadata.brokers.contains_key(&metadata.controller_id) {
            Ok(metadata.controller_id)
        } else {
            metadata
                .brokers
                .keys()
                .min()
                .copied()
                .ok_or(ClientError::NoBrokerAvailable { attempted: 0 })
        }
    }

    /// The brokers and the controller.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription, ClientError> {
        self.cluster.request_metadata_refresh();
        let metadata = self.cluster.refresh_metadata().await?;
        let mut brokers: Vec<BrokerInfo> = metadata.brokers.values().cloned().collect();
        brokers.sort_by_key(|broker| broker.id);
        Ok(ClusterDescription {
            cluster_id: metadata.cluster_id.clone(),
            controller_id: metadata.controller_id,
            brokers,
        })
    }

    /// Creates topics; the result maps each name to its outcome.
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<HashMap<String, Result<(), ClientError>>, ClientError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only)
            .with_topics(topics.iter().map(creatable_topic).collect());
        let controller = self.controller().await?;
        let Response::CreateTopics(response) = self.cluster.send_to(controller, request).await?
        else {
            return Err(unexpected(ApiKey::CreateTopics));
        };
        self.cluster.request_metadata_refresh();
        Ok(response
            .topics
            .iter()
            .map(|topic| (topic.name.0.to_string(), outcome(topic.error_code)))
            .collect())
    }

    /// Deletes topics by name.
    pub async fn delete_topics(
        &self,
        names: &[&str],
    ) -> Result<HashMap<String, Result<(), ClientError>>, ClientError> {
        let controller = self.controller().await?;
        let connection = self.cluster.broker_connection(controller).await?;
        let version = connection.api_version(ApiKey::DeleteTopics)?;
        let mut request = DeleteTopicsRequest::default().with_timeout_ms(self.timeout_ms());
        let topic_names: Vec<TopicName> = names.iter().map(|name| topic_name(name)).collect();
        if version >= 6 {
            request.topics = topic_names
                .into_iter()
                .map(|name| {
                    strom_protocol::kafka::messages::delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(name))
                })
                .collect();
        } else {
            request.topic_names = topic_names;
        }
        let Response::DeleteTopics(response) = connection.send(request).await? else {
            return Err(unexpected(ApiKey::DeleteTopics));
        };
        self.cluster.request_metadata_refresh();
        Ok(response
            .responses
            .iter()
            .filter_map(|result| {
                let name = result.name.as_ref()?.0.to_string();
                Some((name, outcome(result.error_code)))
            })
            .collect())
    }

    /// Looks up one offset of a partition at its leader.
    pub async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
    ) -> Result<ListedOffset, ClientError> {
        let (_, connection) = self.cluster.leader_connection(topic, partition).await?;
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(spec.wire_timestamp())])]);
        let Response::ListOffsets(response) = connection.send(request).await? else {
            return Err(unexpected(ApiKey::ListOffsets));
        };
        let found = response
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .find(|answer| answer.partition_index == partition)
            .ok_or(ClientError::Broker {
                code: ErrorCode::UnknownTopicOrPartition,
            })?;
        match ErrorCode::from_code(found.error_code) {
            ErrorCode::None => Ok(ListedOffset {
                offset: found.offset,
                timestamp_ms: found.timestamp,
                leader_epoch: found.leader_epoch,
            }),
            code => {
                if code.is_retriable() {
                    self.cluster.request_metadata_refresh();
                }
                Err(ClientError::Broker { code })
            }
        }
    }
}

fn creatable_topic(topic: &NewTopic) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(&topic.name))
        .with_num_partitions(topic.partitions)
        .with_replication_factor(topic.replication_factor)
        .with_configs(
            topic
                .configs
                .iter()
                .map(|(key, value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(key.clone()))
                        .with_value(Some(StrBytes::from_string(value.clone())))
                })
                .collect(),
        )
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn outcome(error_code: i16) -> Result<(), ClientError> {
    match ErrorCode::from_code(error_code) {
        ErrorCode::None => Ok(()),
        code => Err(ClientError::Broker { code }),
    }
}

fn unexpected(api_key: ApiKey) -> ClientError {
    ClientError::UnexpectedResponse {
        api_key: api_key as i16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs_use_kafkas_sentinel_timestamps() {
        assert_eq!(OffsetSpec::Earliest.wire_timestamp(), -2);
        assert_eq!(OffsetSpec::Latest.wire_timestamp(), -1);
        assert_eq!(OffsetSpec::MaxTimestamp.wire_timestamp(), -3);
        assert_eq!(OffsetSpec::Timestamp(1234).wire_timestamp(), 1234);
    }

    #[test]
    fn new_topic_carries_configs() {
        let topic = creatable_topic(&NewTopic::new("t", 3, 1).with_config("retention.ms", "1000"));
        assert_eq!(topic.num_partitions, 3);
        assert_eq!(topic.configs.len(), 1);
        assert_eq!(topic.configs[0].name.as_str(), "retention.ms");
    }
}
