//! Kafka's answers for topics, partitions and groups that do not exist, over
//! a real socket: a partition that does not exist never reaches the group
//! coordinator or a log (UNKNOWN_TOPIC_OR_PARTITION), and an unknown group
//! gets the code Kafka's group coordinator gives.

use std::time::Duration;

use strom_broker::BrokerConfig;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_partitions_request::CreatePartitionsTopic;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use strom_protocol::kafka::messages::delete_topics_request::DeleteTopicState;
use strom_protocol::kafka::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use strom_protocol::kafka::messages::leave_group_request::MemberIdentity;
use strom_protocol::kafka::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use strom_protocol::kafka::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common;

use common::{Client, TIMEOUT};

const UNKNOWN: i16 = 3; // UNKNOWN_TOPIC_OR_PARTITION

fn config(dir: &std::path::Path) -> BrokerConfig {
    common::config(
        dir,
        &[
            ("offsets.topic.num.partitions", "1"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    )
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Starts a broker with topic `events` (2 partitions) and waits until the
/// group coordinator has loaded `__consumer_offsets`.
async fn broker_with_events(dir: &std::path::Path) -> (strom_broker::RunningBroker, Client) {
    let broker = strom_broker::start(config(dir)).await.unwrap();
    let mut client = Client::connect(&broker, "unknown-resources").await;
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(text("events")))
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    let Response::CreateTopics(created) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let request =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text("probe")))
                .with_topics(None)]);
        let Response::OffsetFetch(fetched) = client.send(Request::OffsetFetch(request), 8).await
        else {
            panic!("not an OffsetFetch response");
        };
        if fetched.groups[0].error_code != ErrorCode::CoordinatorLoadInProgress.code() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "coordinator loads");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (broker, client)
}

/// Commits offset 7 for each `(topic, partition)`; returns the codes in
/// request order.
async fn commit(
    client: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    let topics = partitions
        .iter()
        .map(|(topic, partition)| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(7)])
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member))
        .with_topics(topics);
    let Response::OffsetCommit(response) = client.send(Request::OffsetCommit(request), 8).await
    else {
        panic!("not an OffsetCommit response");
    };
    response
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| partition.error_code)
        })
        .collect()
}

/// The committed offsets of `group`, as `(topic, partition, offset)`.
async fn committed(client: &mut Client, group: &str) -> Vec<(String, i32, i64)> {
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(None)]);
    let Response::OffsetFetch(fetched) = client.send(Request::OffsetFetch(request), 8).await else {
        panic!("not an OffsetFetch response");
    };
    fetched.groups[0]
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|partition| {
                (
                    topic.name.0.to_string(),
                    partition.partition_index,
                    partition.committed_offset,
                )
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commit_refuses_partitions_that_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    let codes = commit(
        &mut client,
        "simple",
        -1,
        "",
        &[("events", 0), ("events", 5), ("ghost", 0)],
    )
    .await;
    assert_eq!(codes, vec![0, UNKNOWN, UNKNOWN]);
    assert_eq!(
        committed(&mut client, "simple").await,
        vec![("events".to_owned(), 0, 7)],
        "only the existing partition is committed"
    );
    // Only missing partitions: answered before the coordinator is asked, so
    // a generation the group does not have is not what is reported.
    let codes = commit(&mut client, "simple", 9, "stranger", &[("ghost", 1)]).await;
    assert_eq!(codes, vec![UNKNOWN]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_delete_refuses_partitions_that_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    assert_eq!(
        commit(&mut client, "simple", -1, "", &[("events", 0)]).await,
        vec![0]
    );
    let delete = |group: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(vec![
                OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(text("events")))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0),
                        OffsetDeleteRequestPartition::default().with_partition_index(7),
                    ]),
                OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(text("ghost")))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ]),
            ])
    };
    let codes = |response: &OffsetDeleteResponse| -> Vec<(String, i32, i16)> {
        response
            .topics
            .iter()
            .flat_map(|topic| {
                topic.partitions.iter().map(|partition| {
                    (
                        topic.name.0.to_string(),
                        partition.partition_index,
                        partition.error_code,
                    )
                })
            })
            .collect()
    };
    let Response::OffsetDelete(deleted) = client
        .send(Request::OffsetDelete(delete("simple")), 0)
        .await
    else {
        panic!("not an OffsetDelete response");
    };
    assert_eq!(deleted.error_code, 0);
    assert_eq!(
        codes(&deleted),
        vec![
            ("events".to_owned(), 0, 0),
            ("events".to_owned(), 7, UNKNOWN),
            ("ghost".to_owned(), 0, UNKNOWN)
        ]
    );
    assert!(committed(&mut client, "simple").await.is_empty());
    // An unknown group: the group error on top, the missing partitions
    // answered on their own.
    let Response::OffsetDelete(deleted) = client
        .send(Request::OffsetDelete(delete("nobody")), 0)
        .await
    else {
        panic!("not an OffsetDelete response");
    };
    assert_eq!(deleted.error_code, ErrorCode::GroupIdNotFound.code());
    assert_eq!(
        codes(&deleted),
        vec![
            ("events".to_owned(), 7, UNKNOWN),
            ("ghost".to_owned(), 0, UNKNOWN)
        ]
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_refuses_a_partition_beyond_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    let topic = |name: &str, partitions: &[i32]| {
        DeleteRecordsTopic::default()
            .with_name(TopicName(text(name)))
            .with_partitions(
                partitions
                    .iter()
                    .map(|index| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(*index)
                            .with_offset(0)
                    })
                    .collect(),
            )
    };
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![topic("events", &[0, 9]), topic("ghost", &[0])]);
    let Response::DeleteRecords(response) = client.send(Request::DeleteRecords(request), 2).await
    else {
        panic!("not a DeleteRecords response");
    };
    let codes: Vec<i16> = response
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| partition.error_code)
        })
        .collect();
    assert_eq!(codes, vec![0, UNKNOWN, UNKNOWN]);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_groups_get_kafkas_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    let unknown_member = ErrorCode::UnknownMemberId.code();
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(text("nobody")))
        .with_generation_id(1)
        .with_member_id(text("m"));
    let Response::Heartbeat(heartbeat) = client.send(Request::Heartbeat(request), 4).await else {
        panic!("not a Heartbeat response");
    };
    assert_eq!(heartbeat.error_code, unknown_member);
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text("nobody")))
        .with_generation_id(1)
        .with_member_id(text("m"));
    let Response::SyncGroup(synced) = client.send(Request::SyncGroup(request), 5).await else {
        panic!("not a SyncGroup response");
    };
    assert_eq!(synced.error_code, unknown_member);
    // Batched LeaveGroup (v3+): no group-level error, each member unknown.
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text("nobody")))
        .with_members(vec![MemberIdentity::default().with_member_id(text("m"))]);
    let Response::LeaveGroup(left) = client.send(Request::LeaveGroup(request), 4).await else {
        panic!("not a LeaveGroup response");
    };
    assert_eq!(left.error_code, 0);
    let members: Vec<i16> = left.members.iter().map(|m| m.error_code).collect();
    assert_eq!(members, vec![unknown_member]);
    // Single-member LeaveGroup (v0-v2): the member's error is the answer.
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text("nobody")))
        .with_member_id(text("m"));
    let Response::LeaveGroup(left) = client.send(Request::LeaveGroup(request), 1).await else {
        panic!("not a LeaveGroup response");
    };
    assert_eq!(left.error_code, unknown_member);
    // DescribeGroups up to v5: a Dead group without error, as Kafka.
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text("nobody"))]);
    let Response::DescribeGroups(described) =
        client.send(Request::DescribeGroups(request), 5).await
    else {
        panic!("not a DescribeGroups response");
    };
    assert_eq!(described.groups[0].error_code, 0);
    assert_eq!(described.groups[0].group_state.as_str(), "Dead");
    // From v6 (KIP-1043): GROUP_ID_NOT_FOUND with a message.
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text("nobody"))]);
    let Response::DescribeGroups(described) =
        client.send(Request::DescribeGroups(request), 6).await
    else {
        panic!("not a DescribeGroups response");
    };
    assert_eq!(
        described.groups[0].error_code,
        ErrorCode::GroupIdNotFound.code()
    );
    assert_eq!(
        described.groups[0].error_message.as_deref(),
        Some("Group nobody not found.")
    );
    // OffsetFetch: no error, offset -1 for each partition asked about.
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("nobody")))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(text("events")))
                .with_partition_indexes(vec![0, 1])]))]);
    let Response::OffsetFetch(fetched) = client.send(Request::OffsetFetch(request), 8).await else {
        panic!("not an OffsetFetch response");
    };
    assert_eq!(fetched.groups[0].error_code, 0);
    let offsets: Vec<(i32, i64, i16)> = fetched.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect();
    assert_eq!(offsets, vec![(0, -1, 0), (1, -1, 0)]);
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text("nobody"))]);
    let Response::DeleteGroups(deleted) = client.send(Request::DeleteGroups(request), 2).await
    else {
        panic!("not a DeleteGroups response");
    };
    assert_eq!(
        deleted.results[0].error_code,
        ErrorCode::GroupIdNotFound.code()
    );
    broker.shutdown().await;
}

/// The topic error codes of a Metadata request for `names` (v12).
async fn metadata_codes(client: &mut Client, names: &[&str], auto_create: bool) -> Vec<i16> {
    let topics = names
        .iter()
        .map(|name| MetadataRequestTopic::default().with_name(Some(TopicName(text(name)))))
        .collect();
    let request = MetadataRequest::default()
        .with_topics(Some(topics))
        .with_allow_auto_topic_creation(auto_create);
    let Response::Metadata(response) = client.send(Request::Metadata(request), 12).await else {
        panic!("not a Metadata response");
    };
    response
        .topics
        .iter()
        .map(|topic| topic.error_code)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_for_a_missing_topic_with_auto_creation_on_and_off() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    // Creation not allowed by the request: unknown, and not created.
    assert_eq!(
        metadata_codes(&mut client, &["later"], false).await,
        vec![UNKNOWN]
    );
    assert_eq!(
        metadata_codes(&mut client, &["later"], false).await,
        vec![UNKNOWN]
    );
    // An invalid name is INVALID_TOPIC_EXCEPTION whether or not creation is
    // allowed.
    let invalid = ErrorCode::InvalidTopicException.code();
    assert_eq!(
        metadata_codes(&mut client, &["bad/name"], true).await,
        vec![invalid]
    );
    // Allowed: created (Kafka answers LEADER_NOT_AVAILABLE while its
    // controller creates the topic; Strom's embedded controller has created
    // it before the answer, so it is described at once).
    assert_eq!(metadata_codes(&mut client, &["later"], true).await, vec![0]);
    broker.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(common::config(
        dir.path(),
        &[("auto.create.topics.enable", "false")],
    ))
    .await
    .unwrap();
    let mut client = Client::connect(&broker, "unknown-resources").await;
    assert_eq!(
        metadata_codes(&mut client, &["later"], true).await,
        vec![UNKNOWN]
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_offset_requests_for_missing_topics_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client) = broker_with_events(dir.path()).await;
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(text("ghost")))
            .with_count(3)]);
    let Response::CreatePartitions(created) =
        client.send(Request::CreatePartitions(request), 3).await
    else {
        panic!("not a CreatePartitions response");
    };
    assert_eq!(created.results[0].error_code, UNKNOWN);
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(TopicName(text("ghost")))),
            DeleteTopicState::default().with_topic_id(uuid::Uuid::from_u128(7)),
        ]);
    let Response::DeleteTopics(deleted) = client.send(Request::DeleteTopics(request), 6).await
    else {
        panic!("not a DeleteTopics response");
    };
    let codes: Vec<i16> = deleted.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![UNKNOWN, ErrorCode::UnknownTopicId.code()]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("ghost"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(text("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(text("1000")))]),
    ]);
    let Response::IncrementalAlterConfigs(altered) = client
        .send(Request::IncrementalAlterConfigs(request), 1)
        .await
    else {
        panic!("not an IncrementalAlterConfigs response");
    };
    assert_eq!(altered.responses[0].error_code, UNKNOWN);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(text("events")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(4)
                .with_timestamp(-1)])]);
    let Response::ListOffsets(listed) = client.send(Request::ListOffsets(request), 7).await else {
        panic!("not a ListOffsets response");
    };
    assert_eq!(listed.topics[0].partitions[0].error_code, UNKNOWN);
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(text("events")))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(4)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    let Response::OffsetForLeaderEpoch(epochs) =
        client.send(Request::OffsetForLeaderEpoch(request), 4).await
    else {
        panic!("not an OffsetForLeaderEpoch response");
    };
    assert_eq!(epochs.topics[0].partitions[0].error_code, UNKNOWN);
    broker.shutdown().await;
}
