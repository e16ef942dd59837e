//! Admin operations on partitions, records, configs and consumer groups
//! (the second half of [`AdminClient`]).

use std::collections::{BTreeMap, HashMap};

use strom_protocol::kafka::messages::create_partitions_request::CreatePartitionsTopic;
use strom_protocol::kafka::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use strom_protocol::kafka::messages::describe_configs_request::DescribeConfigsResource;
use strom_protocol::kafka::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::OffsetFetchRequestTopic;
use strom_protocol::kafka::messages::{
    ApiKey, CreatePartitionsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, GroupId, IncrementalAlterConfigsRequest,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::admin::AdminClient;
use crate::error::{ClientError, Retriable};

/// The highest OffsetFetch version used (v8 batches several groups).
const MAX_OFFSET_FETCH_VERSION: i16 = 7;
/// Kafka's resource type code for topics in config requests.
pub const RESOURCE_TYPE_TOPIC: i8 = 2;
/// Kafka's resource type code for brokers in config requests.
pub const RESOURCE_TYPE_BROKER: i8 = 4;

/// An incremental config change (IncrementalAlterConfigs operations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Set a value.
    Set(String, String),
    /// Revert to the default.
    Delete(String),
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type (`consumer` for consumer groups).
    pub protocol_type: String,
    /// The state, if the broker reports it.
    pub state: String,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// The state (`Empty`, `Stable`, `PreparingRebalance`, `Dead`, ...).
    pub state: String,
    /// The protocol type (`consumer` for consumer groups; empty when none).
    pub protocol_type: String,
    /// The chosen protocol (the assignor, for consumer groups).
    pub protocol: String,
    /// The members.
    pub members: Vec<GroupMember>,
}

/// A member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id the coordinator gave.
    pub member_id: String,
    /// The static member id (`group.instance.id`), if any.
    pub group_instance_id: Option<String>,
    /// The member's client id.
    pub client_id: String,
    /// The member's host as the coordinator saw it.
    pub client_host: String,
    /// The member's subscription metadata, as sent in JoinGroup (opaque;
    /// its format belongs to the protocol type).
    pub metadata: bytes::Bytes,
    /// The member's assignment, as the leader sent it in SyncGroup.
    pub assignment: bytes::Bytes,
}

impl AdminClient {
    /// Describes a group at its coordinator: state, protocol and members.
    /// A group the coordinator does not know comes back in state `Dead`
    /// with no members, as Kafka reports it.
    async fn describe_group_once(&self, group_id: &str) -> Result<GroupDescription, ClientError> {
        let coordinator = self.cluster().find_coordinator(group_id, 0).await?;
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id_of(group_id)]);
        let Response::DescribeGroups(response) =
            self.cluster().send_to(coordinator, request).await?
        else {
            return Err(unexpected(ApiKey::DescribeGroups));
        };
        let group = response
            .groups
            .iter()
            .find(|group| group.group_id.0.as_str() == group_id)
            .ok_or_else(|| unexpected(ApiKey::DescribeGroups))?;
        outcome(group.error_code)?;
        Ok(GroupDescription {
            group_id: group.group_id.0.to_string(),
            state: group.group_state.to_string(),
            protocol_type: group.protocol_type.to_string(),
            protocol: group.protocol_data.to_string(),
            members: group
                .members
                .iter()
                .map(|member| GroupMember {
                    member_id: member.member_id.to_string(),
                    group_instance_id: member.group_instance_id.as_ref().map(|id| id.to_string()),
                    client_id: member.client_id.to_string(),
                    client_host: member.client_host.to_string(),
                    metadata: member.member_metadata.clone(),
                    assignment: member.member_assignment.clone(),
                })
                .collect(),
        })
    }

    /// Raises the partition count of topics (name to new total count).
    pub async fn create_partitions(
        &self,
        counts: &[(&str, i32)],
        validate_only: bool,
    ) -> Result<HashMap<String, Result<(), ClientError>>, ClientError> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only)
            .with_topics(
                counts
                    .iter()
                    .map(|(name, count)| {
                        // No explicit assignment: null, as the Java client sends
                        // (the generated default is an empty list, which
                        // brokers reject as INVALID_REPLICA_ASSIGNMENT).
                        CreatePartitionsTopic::default()
                            .with_name(topic_name(name))
                            .with_count(*count)
                            .with_assignments(None)
                    })
                    .collect(),
            );
        let controller = self.controller().await?;
        let Response::CreatePartitions(response) =
            self.cluster().send_to(controller, request).await?
        else {
            return Err(unexpected(ApiKey::CreatePartitions));
        };
        self.cluster().request_metadata_refresh();
        Ok(response
            .results
            .iter()
            .map(|result| (result.name.0.to_string(), outcome(result.error_code)))
            .collect())
    }

    /// Deletes records before `offset` in one partition; returns the new
    /// low watermark.
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, ClientError> {
        let (_, connection) = self.cluster().leader_connection(topic, partition).await?;
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(offset)])]);
        let Response::DeleteRecords(response) = connection.send(request).await? else {
            return Err(unexpected(ApiKey::DeleteRecords));
        };
        let result = response
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .find(|result| result.partition_index == partition)
            .ok_or(ClientError::Broker {
                code: ErrorCode::UnknownTopicOrPartition,
            })?;
        outcome(result.error_code).map(|()| result.low_watermark)
    }

    /// The configs of a resource (`RESOURCE_TYPE_TOPIC` or
    /// `RESOURCE_TYPE_BROKER`), name to value.
    pub async fn describe_configs(
        &self,
        resource_type: i8,
        resource_name: &str,
    ) -> Result<BTreeMap<String, Option<String>>, ClientError> {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(resource_name.to_owned()))
                .with_configuration_keys(None),
        ]);
        let Response::DescribeConfigs(response) = self
            .send_to_config_owner(resource_type, resource_name, request.into())
            .await?
        else {
            return Err(unexpected(ApiKey::DescribeConfigs));
        };
        let result = response
            .results
            .first()
            .ok_or(ClientError::UnexpectedResponse {
                api_key: ApiKey::DescribeConfigs as i16,
            })?;
        outcome(result.error_code)?;
        Ok(result
            .configs
            .iter()
            .map(|config| {
                (
                    config.name.to_string(),
                    config.value.as_ref().map(|value| value.to_string()),
                )
            })
            .collect())
    }

    /// Applies incremental config changes to a resource.
    pub async fn incremental_alter_configs(
        &self,
        resource_type: i8,
        resource_name: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<(), ClientError> {
        let configs = changes
            .iter()
            .map(|change| match change {
                ConfigChange::Set(name, value) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(name.clone()))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(value.clone()))),
                ConfigChange::Delete(name) => AlterableConfig::default()
                    .with_name(StrBytes::from_string(name.clone()))
                    .with_config_operation(1),
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(resource_name.to_owned()))
                .with_configs(configs)]);
        let Response::IncrementalAlterConfigs(response) = self
            .send_to_config_owner(resource_type, resource_name, request.into())
            .await?
        else {
            return Err(unexpected(ApiKey::IncrementalAlterConfigs));
        };
        response
            .responses
            .iter()
            .try_for_each(|result| outcome(result.error_code))
    }

    async fn send_to_config_owner(
        &self,
        resource_type: i8,
        resource_name: &str,
        request: strom_protocol::Request,
    ) -> Result<Response, ClientError> {
        let broker = match resource_name.parse::<i32>() {
            Ok(broker_id) if resource_type == RESOURCE_TYPE_BROKER => broker_id,
            _ => self.controller().await?,
        };
        self.cluster().send_to(broker, request).await
    }

    /// Every group on every broker.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, ClientError> {
        let metadata = self.cluster().refresh_metadata().await?;
        let mut groups = Vec::new();
        for broker_id in metadata.brokers.keys() {
            let Response::ListGroups(response) = self
                .cluster()
                .send_to(*broker_id, ListGroupsRequest::default())
                .await?
            else {
                return Err(unexpected(ApiKey::ListGroups));
            };
            outcome(response.error_code)?;
            groups.extend(response.groups.iter().map(|group| ListedGroup {
                group_id: group.group_id.0.to_string(),
                protocol_type: group.protocol_type.to_string(),
                state: group.group_state.to_string(),
            }));
        }
        groups.sort_by(|left, right| left.group_id.cmp(&right.group_id));
        Ok(groups)
    }

    /// Deletes a (empty) group at its coordinator.
    async fn delete_group_once(&self, group_id: &str) -> Result<(), ClientError> {
        let coordinator = self.cluster().find_coordinator(group_id, 0).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id_of(group_id)]);
        let Response::DeleteGroups(response) = self.cluster().send_to(coordinator, request).await?
        else {
            return Err(unexpected(ApiKey::DeleteGroups));
        };
        response
            .results
            .iter()
            .try_for_each(|result| outcome(result.error_code))
    }

    /// The committed offsets of a group for `topic` (partition to offset).
    async fn list_group_offsets_once(
        &self,
        group_id: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        let coordinator = self.cluster().find_coordinator(group_id, 0).await?;
        let connection = self.cluster().broker_connection(coordinator).await?;
        let version = connection
            .api_version(ApiKey::OffsetFetch)?
            .min(MAX_OFFSET_FETCH_VERSION);
        let request = OffsetFetchRequest::default()
            .with_group_id(group_id_of(group_id))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(partitions.to_vec())]));
        let pending = connection.submit_at(
            request.into(),
            version,
            self.cluster().config().request_timeout,
        )?;
        let Response::OffsetFetch(response) = pending.await? else {
            return Err(unexpected(ApiKey::OffsetFetch));
        };
        outcome(response.error_code)?;
        let mut offsets = BTreeMap::new();
        for partition in response
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter())
        {
            outcome(partition.error_code)?;
            offsets.insert(partition.partition_index, partition.committed_offset);
        }
        Ok(offsets)
    }

    /// Sets a group's committed offsets for `topic` from outside the group
    /// (OffsetCommit with generation -1; the group must be empty).
    async fn alter_group_offsets_once(
        &self,
        group_id: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), ClientError> {
        let coordinator = self.cluster().find_coordinator(group_id, 0).await?;
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id_of(group_id))
            .with_generation_id_or_member_epoch(-1)
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|(partition, offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(*partition)
                                .with_committed_offset(*offset)
                                .with_committed_leader_epoch(-1)
                        })
                        .collect(),
                )]);
        let Response::OffsetCommit(response) = self.cluster().send_to(coordinator, request).await?
        else {
            return Err(unexpected(ApiKey::OffsetCommit));
        };
        response
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .try_for_each(|partition| outcome(partition.error_code))
    }

    /// Describes a group at its coordinator (members, their metadata and
    /// assignments). Retries while the coordinator is loading, moving or not
    /// yet known, up to the admin timeout.
    pub async fn describe_group(&self, group_id: &str) -> Result<GroupDescription, ClientError> {
        self.with_coordinator_retries(|| self.describe_group_once(group_id))
            .await
    }

    /// Deletes an empty group at its coordinator (retrying as
    /// [`describe_group`](Self::describe_group) does).
    pub async fn delete_group(&self, group_id: &str) -> Result<(), ClientError> {
        self.with_coordinator_retries(|| self.delete_group_once(group_id))
            .await
    }

    /// The committed offsets of a group for `topic` (partition to offset),
    /// retrying as [`describe_group`](Self::describe_group) does.
    pub async fn list_group_offsets(
        &self,
        group_id: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        self.with_coordinator_retries(|| self.list_group_offsets_once(group_id, topic, partitions))
            .await
    }

    /// Sets a group's committed offsets for `topic` from outside the group
    /// (OffsetCommit with generation -1; the group must be empty), retrying
    /// as [`describe_group`](Self::describe_group) does.
    pub async fn alter_group_offsets(
        &self,
        group_id: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), ClientError> {
        self.with_coordinator_retries(|| self.alter_group_offsets_once(group_id, topic, offsets))
            .await
    }

    /// Runs a coordinator call again, after `retry.backoff.ms`, while it
    /// fails with a retriable error (COORDINATOR_LOAD_IN_PROGRESS,
    /// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection), as
    /// the Java admin client does, until the admin timeout has passed.
    pub(crate) async fn with_coordinator_retries<T, E, F, Fut>(&self, mut call: F) -> Result<T, E>
    where
        E: Retriable,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let timeout_ms = u64::try_from(self.timeout_ms()).unwrap_or(0);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
        loop {
            match call().await {
                Err(error) if error.retriable() && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(self.cluster().config().retry_backoff).await;
                }
                outcome => return outcome,
            }
        }
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn group_id_of(group_id: &str) -> GroupId {
    GroupId(StrBytes::from_string(group_id.to_owned()))
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
