//! Offset requests: ListOffsets (resets, beginning/end), OffsetFetch
//! (committed offsets) and OffsetCommit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strom_client::{ClientError, Cluster, Connection};
use strom_protocol::kafka::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use strom_protocol::kafka::messages::{
    ApiKey, BrokerId, GroupId, ListOffsetsRequest, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::config::IsolationLevel;
use crate::error::ConsumerError;
use crate::record::{OffsetAndMetadata, TopicPartition};
use crate::versions::ApiVersionCaps;

/// ListOffsets timestamp for the log start offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets timestamp for the log end (or last stable) offset.
pub const LATEST_TIMESTAMP: i64 = -1;
/// The first OffsetFetch version that batches groups (`groups` array).
pub const OFFSET_FETCH_GROUPS_VERSION: i16 = 8;

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn group_by_topic(
    partitions: impl IntoIterator<Item = TopicPartition>,
) -> BTreeMap<Arc<str>, Vec<i32>> {
    let mut topics: BTreeMap<Arc<str>, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(tp.topic).or_default().push(tp.partition);
    }
    topics
}

/// The offsets for `timestamp` (or [`EARLIEST_TIMESTAMP`] /
/// [`LATEST_TIMESTAMP`]) of `partitions`, asking each partition's leader.
/// Partitions whose leader answered with an error are left out and the
/// metadata is marked stale.
pub async fn list_offsets(
    cluster: &Cluster,
    partitions: &[(TopicPartition, i64)],
    isolation_level: IsolationLevel,
) -> Result<BTreeMap<TopicPartition, i64>, ConsumerError> {
    let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64)>> = BTreeMap::new();
    for (tp, timestamp) in partitions {
        let info = cluster.topic(&tp.topic).await?;
        let leader = info
            .partition(tp.partition)
            .and_then(|partition| partition.leader)
            .ok_or_else(|| ClientError::LeaderNotAvailable {
                topic: tp.topic.to_string(),
                partition: tp.partition,
            })?;
        by_leader
            .entry(leader)
            .or_default()
            .push((tp.clone(), *timestamp));
    }
    let mut offsets = BTreeMap::new();
    for (leader, wanted) in by_leader {
        list_offsets_from(cluster, leader, &wanted, isolation_level, &mut offsets).await?;
    }
    Ok(offsets)
}

async fn list_offsets_from(
    cluster: &Cluster,
    leader: i32,
    wanted: &[(TopicPartition, i64)],
    isolation_level: IsolationLevel,
    offsets: &mut BTreeMap<TopicPartition, i64>,
) -> Result<(), ConsumerError> {
    let mut topics: BTreeMap<Arc<str>, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (tp, timestamp) in wanted {
        topics.entry(Arc::clone(&tp.topic)).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_timestamp(*timestamp),
        );
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level.code())
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    ListOffsetsTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let connection = cluster.broker_connection(leader).await?;
    let response = connection.send(request).await.inspect_err(|_| {
        cluster.request_metadata_refresh();
    })?;
    let Response::ListOffsets(response) = response else {
        return Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::ListOffsets as i16,
        }
        .into());
    };
    for topic in response.topics {
        for partition in topic.partitions {
            let tp = TopicPartition::new(topic.name.0.as_str(), partition.partition_index);
            match ErrorCode::from_code(partition.error_code) {
                ErrorCode::None => {
                    offsets.insert(tp, partition.offset);
                }
                code if code.is_retriable() => cluster.request_metadata_refresh(),
                code => return Err(ConsumerError::broker(code)),
            }
        }
    }
    Ok(())
}

/// The committed offsets of `partitions` in `group_id` (`None` where the
/// group has none).
pub async fn fetch_committed(
    connection: &Connection,
    caps: &ApiVersionCaps,
    group_id: &str,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>, ConsumerError> {
    let version = caps.version(connection, ApiKey::OffsetFetch)?;
    let request = offset_fetch_request(group_id, partitions, version);
    let response = connection
        .submit_at(request.into(), version, timeout)?
        .await?;
    let Response::OffsetFetch(response) = response else {
        return Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::OffsetFetch as i16,
        }
        .into());
    };
    if version >= OFFSET_FETCH_GROUPS_VERSION {
        committed_from_groups(group_id, response)
    } else {
        committed_from_topics(group_id, response)
    }
}

/// An OffsetFetch request for one group, in the layout of `version`.
pub fn offset_fetch_request(
    group_id: &str,
    partitions: &[TopicPartition],
    version: i16,
) -> OffsetFetchRequest {
    let by_topic = group_by_topic(partitions.iter().cloned());
    let group = GroupId(StrBytes::from_string(group_id.to_owned()));
    if version >= OFFSET_FETCH_GROUPS_VERSION {
        let topics = by_topic
            .into_iter()
            .map(|(topic, indexes)| {
                OffsetFetchRequestTopics::default()
                    .with_name(topic_name(&topic))
                    .with_partition_indexes(indexes)
            })
            .collect();
        let group = OffsetFetchRequestGroup::default()
            .with_group_id(group)
            .with_member_id(None)
            .with_member_epoch(-1)
            .with_topics(Some(topics));
        return OffsetFetchRequest::default().with_groups(vec![group]);
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, indexes)| {
            OffsetFetchRequestTopic::default()
                .with_name(topic_name(&topic))
                .with_partition_indexes(indexes)
        })
        .collect();
    OffsetFetchRequest::default()
        .with_group_id(group)
        .with_topics(Some(topics))
}

fn committed_from_topics(
    group_id: &str,
    response: OffsetFetchResponse,
) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>, ConsumerError> {
    group_error(group_id, "OffsetFetch", response.error_code)?;
    let mut committed = BTreeMap::new();
    for topic in response.topics {
        for partition in topic.partitions {
            group_error(group_id, "OffsetFetch", partition.error_code)?;
            let tp = TopicPartition::new(topic.name.0.as_str(), partition.partition_index);
            let offset = committed_offset(
                partition.committed_offset,
                partition.committed_leader_epoch,
                partition.metadata.as_ref(),
            );
            committed.insert(tp, offset);
        }
    }
    Ok(committed)
}

fn committed_from_groups(
    group_id: &str,
    response: OffsetFetchResponse,
) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>, ConsumerError> {
    let mut committed = BTreeMap::new();
    for group in response.groups {
        if group.group_id.0.as_str() != group_id {
            continue;
        }
        group_error(group_id, "OffsetFetch", group.error_code)?;
        for topic in group.topics {
            for partition in topic.partitions {
                group_error(group_id, "OffsetFetch", partition.error_code)?;
                let tp = TopicPartition::new(topic.name.0.as_str(), partition.partition_index);
                let offset = committed_offset(
                    partition.committed_offset,
                    partition.committed_leader_epoch,
                    partition.metadata.as_ref(),
                );
                committed.insert(tp, offset);
            }
        }
    }
    Ok(committed)
}

fn committed_offset(
    offset: i64,
    leader_epoch: i32,
    metadata: Option<&StrBytes>,
) -> Option<OffsetAndMetadata> {
    (offset >= 0).then(|| OffsetAndMetadata {
        offset,
        leader_epoch: (leader_epoch >= 0).then_some(leader_epoch),
        metadata: metadata
            .map(|metadata| metadata.as_str().to_owned())
            .unwrap_or_default(),
    })
}

/// Who commits: the member identity sent with OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitIdentity {
    /// The group id.
    pub group_id: String,
    /// The generation (-1 for a consumer outside group management).
    pub generation_id: i32,
    /// The member id ("" outside group management).
    pub member_id: String,
    /// The static member id.
    pub group_instance_id: Option<String>,
}

/// Commits `offsets` for `identity` through the coordinator `connection`.
pub async fn commit(
    connection: &Connection,
    caps: &ApiVersionCaps,
    identity: &CommitIdentity,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    timeout: Duration,
) -> Result<(), ConsumerError> {
    let request = commit_request(identity, offsets);
    let version = caps.version(connection, ApiKey::OffsetCommit)?;
    let mut request = request;
    if version < 7 {
        request.group_instance_id = None;
    }
    let response = connection
        .submit_at(request.into(), version, timeout)?
        .await?;
    let Response::OffsetCommit(response) = response else {
        return Err(ClientError::UnexpectedResponse {
            api_key: ApiKey::OffsetCommit as i16,
        }
        .into());
    };
    commit_outcome(identity, response)
}

/// The OffsetCommit request for `offsets` (all versions' fields set; the
/// caller clears what its version lacks).
fn commit_request(
    identity: &CommitIdentity,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> OffsetCommitRequest {
    let mut topics: BTreeMap<Arc<str>, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        topics.entry(Arc::clone(&tp.topic)).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(offset.offset)
                .with_committed_leader_epoch(offset.leader_epoch.unwrap_or(-1))
                .with_committed_metadata(Some(StrBytes::from_string(offset.metadata.clone()))),
        );
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(identity.group_id.clone())))
        .with_generation_id_or_member_epoch(identity.generation_id)
        .with_member_id(StrBytes::from_string(identity.member_id.clone()))
        .with_group_instance_id(
            identity
                .group_instance_id
                .clone()
                .map(StrBytes::from_string),
        )
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// The first partition error of an OffsetCommit response, as a
/// [`ConsumerError`].
fn commit_outcome(
    identity: &CommitIdentity,
    response: OffsetCommitResponse,
) -> Result<(), ConsumerError> {
    for topic in response.topics {
        for partition in topic.partitions {
            match ErrorCode::from_code(partition.error_code) {
                ErrorCode::None => {}
                // The group completes a rebalance this member has yet to
                // join: it can commit again once it has.
                ErrorCode::RebalanceInProgress => return Err(ConsumerError::RebalanceInProgress),
                ErrorCode::IllegalGeneration
                | ErrorCode::UnknownMemberId
                | ErrorCode::FencedInstanceId => {
                    return Err(ConsumerError::CommitFailed {
                        generation_id: identity.generation_id,
                    })
                }
                code => {
                    return Err(ConsumerError::Group {
                        group_id: identity.group_id.clone(),
                        api: "OffsetCommit",
                        code,
                    })
                }
            }
        }
    }
    Ok(())
}

/// A group-level error code as a [`ConsumerError`].
pub fn group_error(group_id: &str, api: &'static str, code: i16) -> Result<(), ConsumerError> {
    match ErrorCode::from_code(code) {
        ErrorCode::None => Ok(()),
        code => Err(ConsumerError::Group {
            group_id: group_id.to_owned(),
            api,
            code,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partitions() -> Vec<TopicPartition> {
        vec![
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
            TopicPartition::new("b", 1),
        ]
    }

    #[test]
    fn offset_fetch_before_v8_names_one_group_at_the_top() {
        let request = offset_fetch_request("g", &partitions(), 7);
        assert_eq!(request.group_id.0.as_str(), "g");
        assert!(request.groups.is_empty());
        let topics = request.topics.expect("topics");
        assert_eq!(topics.len(), 2);
        assert_eq!(topics[0].partition_indexes, [0, 2]);
    }

    #[test]
    fn offset_fetch_from_v8_batches_groups() {
        let request = offset_fetch_request("g", &partitions(), 9);
        assert!(request.topics.as_ref().is_none_or(Vec::is_empty));
        let [group] = request.groups.as_slice() else {
            panic!("expected one group, got {:?}", request.groups);
        };
        assert_eq!(group.group_id.0.as_str(), "g");
        assert_eq!((group.member_id.as_ref(), group.member_epoch), (None, -1));
        let topics = group.topics.as_ref().expect("topics");
        assert_eq!(topics[1].name.0.as_str(), "b");
        assert_eq!(topics[1].partition_indexes, [1]);
    }
}
