//! Kafka's answers for topics, partitions and groups that do not exist, over
//! a real socket: a partition that does not exist never reaches the group
//! coordinator or a log (UNKNOWN_TOPIC_OR_PARTITION), and an unknown group
//! gets the code Kafka's group coordinator gives.

use std::time::Duration;

use strom_broker::BrokerConfig;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use strom_protocol::kafka::messages::leave_group_request::MemberIdentity;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::OffsetFetchRequestGroup;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

mod common;

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
    // DescribeGroups (up to v5): a Dead group without error, as Kafka.
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text("nobody"))]);
    let Response::DescribeGroups(described) =
        client.send(Request::DescribeGroups(request), 5).await
    else {
        panic!("not a DescribeGroups response");
    };
    assert_eq!(described.groups[0].error_code, 0);
    assert_eq!(described.groups[0].group_state.as_str(), "Dead");
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
