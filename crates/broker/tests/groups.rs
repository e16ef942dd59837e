//! The group APIs over a real socket: a broker on port 0 in a temporary
//! directory, requests encoded with the protocol crate at the versions whose
//! shapes differ (single and batched FindCoordinator, MEMBER_ID_REQUIRED,
//! single and batched LeaveGroup, single and multi-group OffsetFetch).

use std::time::Duration;

use bytes::Bytes;
use strom_broker::BrokerConfig;
use strom_controller::controller::TopicReference;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::leave_group_request::MemberIdentity;
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use strom_protocol::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common;

use common::{Client, TIMEOUT};

impl Client {
    /// Sends a request again while the coordinator is still loading.
    async fn send_loaded(
        &mut self,
        request: Request,
        api_version: i16,
        code: impl Fn(&Response) -> i16,
    ) -> Response {
        let loading = ErrorCode::CoordinatorLoadInProgress.code();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let response = self.send(request.clone(), api_version).await;
            if code(&response) != loading || tokio::time::Instant::now() > deadline {
                return response;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn config(dir: &std::path::Path) -> BrokerConfig {
    common::config(
        dir,
        &[
            ("offsets.topic.num.partitions", "5"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    )
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

async fn create_topic(client: &mut Client, topic: &str, partitions: i32) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(text(topic)))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let Response::CreateTopics(response) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(response.topics[0].error_code, 0);
}

async fn join(
    client: &mut Client,
    version: i16,
    group: &str,
    member_id: &str,
) -> JoinGroupResponse {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(text(member_id))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"subscription"))]);
    let response = client
        .send_loaded(
            Request::JoinGroup(request),
            version,
            |response| match response {
                Response::JoinGroup(response) => response.error_code,
                _ => 0,
            },
        )
        .await;
    let Response::JoinGroup(response) = response else {
        panic!("not a JoinGroup response");
    };
    response
}

async fn commit(
    client: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    offset: i64,
) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(text(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text("events")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(1)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(3)
                .with_committed_metadata(Some(text("note")))])]);
    let Response::OffsetCommit(response) = client.send(Request::OffsetCommit(request), 8).await
    else {
        panic!("not an OffsetCommit response");
    };
    response.topics[0].partitions[0].error_code
}

async fn fetch_single(client: &mut Client, group: &str) -> (i64, i32, String) {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text("events")))
            .with_partition_indexes(vec![1])]));
    let response = client
        .send_loaded(
            Request::OffsetFetch(request),
            7,
            |response| match response {
                Response::OffsetFetch(response) => response.error_code,
                _ => 0,
            },
        )
        .await;
    let Response::OffsetFetch(response) = response else {
        panic!("not an OffsetFetch response");
    };
    assert_eq!(response.error_code, 0);
    let partition = response.topics[0].partitions[0].clone();
    (
        partition.committed_offset,
        partition.committed_leader_epoch,
        partition
            .metadata
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_single_batched_and_transactional() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    let port = i32::from(broker.local_addresses()[0].port());

    let request = FindCoordinatorRequest::default().with_key(text("group-a"));
    let Response::FindCoordinator(single) = client.send(Request::FindCoordinator(request), 3).await
    else {
        panic!("not a FindCoordinator response");
    };
    assert_eq!(
        (single.error_code, single.node_id.0, single.port),
        (0, 1, port)
    );

    let request = FindCoordinatorRequest::default()
        .with_coordinator_keys(vec![text("group-a"), text("group-b")]);
    let Response::FindCoordinator(batched) =
        client.send(Request::FindCoordinator(request), 4).await
    else {
        panic!("not a FindCoordinator response");
    };
    let keys: Vec<(String, i16, i32)> = batched
        .coordinators
        .iter()
        .map(|c| (c.key.to_string(), c.error_code, c.port))
        .collect();
    assert_eq!(
        keys,
        vec![("group-a".into(), 0, port), ("group-b".into(), 0, port)]
    );

    let request = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![text("txn")]);
    let Response::FindCoordinator(transactional) =
        client.send(Request::FindCoordinator(request), 4).await
    else {
        panic!("not a FindCoordinator response");
    };
    // A transactional id's coordinator is this broker too (its
    // `__transaction_state` is created by this first request).
    let transactional = &transactional.coordinators[0];
    assert_eq!(
        (transactional.error_code, transactional.port),
        (0, port),
        "{transactional:?}"
    );

    // The internal topic exists, with the configured partition count.
    let request =
        MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(text("__consumer_offsets"))))]));
    let Response::Metadata(metadata) = client.send(Request::Metadata(request), 9).await else {
        panic!("not a Metadata response");
    };
    assert_eq!(metadata.topics[0].error_code, 0);
    assert!(metadata.topics[0].is_internal);
    assert_eq!(metadata.topics[0].partitions.len(), 5);
    broker.shutdown().await;
}

async fn sync_and_heartbeat(client: &mut Client, member: &str, generation: i32) {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text("lifecycle")))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(text(member))
            .with_assignment(Bytes::from_static(b"assignment"))]);
    let Response::SyncGroup(synced) = client.send(Request::SyncGroup(request), 5).await else {
        panic!("not a SyncGroup response");
    };
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"assignment");

    for (generation_id, expected) in [
        (generation, 0),
        (generation + 7, ErrorCode::IllegalGeneration.code()),
    ] {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text("lifecycle")))
            .with_generation_id(generation_id)
            .with_member_id(text(member));
        let Response::Heartbeat(beat) = client.send(Request::Heartbeat(request), 4).await else {
            panic!("not a Heartbeat response");
        };
        assert_eq!(beat.error_code, expected);
    }
}

async fn list_and_describe(client: &mut Client) {
    for (state, expected) in [("Stable", vec!["lifecycle".to_owned()]), ("Empty", vec![])] {
        let request = ListGroupsRequest::default().with_states_filter(vec![text(state)]);
        let Response::ListGroups(listed) = client.send(Request::ListGroups(request), 4).await
        else {
            panic!("not a ListGroups response");
        };
        let ids: Vec<String> = listed
            .groups
            .iter()
            .map(|g| g.group_id.to_string())
            .collect();
        assert_eq!(ids, expected);
    }

    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(text("lifecycle")), GroupId(text("unknown"))]);
    let Response::DescribeGroups(described) =
        client.send(Request::DescribeGroups(request), 5).await
    else {
        panic!("not a DescribeGroups response");
    };
    let group = &described.groups[0];
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.protocol_data.as_str(), "range");
    assert_eq!(group.members[0].client_id.as_str(), "groups");
    assert_eq!(group.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(&group.members[0].member_assignment[..], b"assignment");
    assert_eq!(described.groups[1].group_state.as_str(), "Dead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_lifecycle_across_versions_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    create_topic(&mut client, "events", 2).await;

    // v4+: a new member first gets its id with MEMBER_ID_REQUIRED.
    let first = join(&mut client, 5, "lifecycle", "").await;
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    assert!(!first.member_id.is_empty());
    let joined = join(&mut client, 5, "lifecycle", &first.member_id).await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1);
    let member = joined.member_id.to_string();
    let generation = joined.generation_id;
    sync_and_heartbeat(&mut client, &member, generation).await;

    assert_eq!(
        commit(&mut client, "lifecycle", generation, &member, 42).await,
        0
    );
    assert_eq!(
        commit(&mut client, "lifecycle", generation + 1, &member, 43).await,
        ErrorCode::IllegalGeneration.code()
    );
    assert_eq!(
        fetch_single(&mut client, "lifecycle").await,
        (42, 3, "note".into())
    );
    list_and_describe(&mut client).await;

    // Batched LeaveGroup (v3+) answers per member.
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(text("lifecycle")))
        .with_members(vec![
            MemberIdentity::default().with_member_id(text(&member)),
            MemberIdentity::default().with_member_id(text("stranger")),
        ]);
    let Response::LeaveGroup(left) = client.send(Request::LeaveGroup(request), 4).await else {
        panic!("not a LeaveGroup response");
    };
    let codes: Vec<i16> = left.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![0, ErrorCode::UnknownMemberId.code()]);

    // The committed offset survives a restart.
    broker.shutdown().await;
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    assert_eq!(
        fetch_single(&mut client, "lifecycle").await,
        (42, 3, "note".into())
    );
    offsets_after_restart(&mut client).await;
    broker.shutdown().await;
}

async fn offsets_after_restart(client: &mut Client) {
    // Multi-group OffsetFetch (v8+): null topics means every partition.
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("lifecycle")))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("nobody")))
            .with_topics(None),
    ]);
    let Response::OffsetFetch(fetched) = client.send(Request::OffsetFetch(request), 8).await else {
        panic!("not an OffsetFetch response");
    };
    assert_eq!(fetched.groups[0].error_code, 0);
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        42
    );
    assert!(fetched.groups[1].topics.is_empty());

    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(text("lifecycle")))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(TopicName(text("events")))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(1)
            ])]);
    let Response::OffsetDelete(deleted) = client.send(Request::OffsetDelete(request), 0).await
    else {
        panic!("not an OffsetDelete response");
    };
    assert_eq!(deleted.error_code, 0);
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_single(client, "lifecycle").await.0, -1);

    let request = DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(text("lifecycle")), GroupId(text("nobody"))]);
    let Response::DeleteGroups(deleted) = client.send(Request::DeleteGroups(request), 2).await
    else {
        panic!("not a DeleteGroups response");
    };
    let codes: Vec<i16> = deleted.results.iter().map(|r| r.error_code).collect();
    // The OffsetDelete above removed the only offset of an Empty group, and
    // that removes the group at once (as Kafka's coordinator does).
    assert_eq!(
        codes,
        vec![
            ErrorCode::GroupIdNotFound.code(),
            ErrorCode::GroupIdNotFound.code()
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_versions_join_and_leave_with_a_single_member() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    // v0-v3 assign the member id on the first join; v0 has no rebalance
    // timeout, and its protocol name is not nullable.
    let joined = join(&mut client, 0, "old", "").await;
    assert_eq!(joined.error_code, 0);
    assert!(!joined.member_id.is_empty());
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    for expected in [0, ErrorCode::UnknownMemberId.code()] {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text("old")))
            .with_member_id(joined.member_id.clone());
        let Response::LeaveGroup(left) = client.send(Request::LeaveGroup(request), 1).await else {
            panic!("not a LeaveGroup response");
        };
        assert_eq!(left.error_code, expected);
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_of_a_deleted_topic_are_removed_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    create_topic(&mut client, "events", 2).await;
    // A standalone consumer's commit: generation -1, no member id.
    let first = commit(&mut client, "simple", -1, "", 7).await;
    let code = if first == ErrorCode::CoordinatorLoadInProgress.code() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        commit(&mut client, "simple", -1, "", 7).await
    } else {
        first
    };
    assert_eq!(code, 0);
    assert_eq!(fetch_single(&mut client, "simple").await.0, 7);

    let outcomes = broker
        .controller()
        .delete_topics(vec![TopicReference::Name("events".to_owned())])
        .await
        .unwrap();
    assert!(outcomes.iter().all(|outcome| outcome.result.is_ok()));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while fetch_single(&mut client, "simple").await.0 != -1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "offsets not removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The tombstones are in the log: a restart does not bring them back.
    broker.shutdown().await;
    let broker = strom_broker::start(config(dir.path())).await.unwrap();
    let mut client = Client::connect(&broker, "groups").await;
    assert_eq!(fetch_single(&mut client, "simple").await.0, -1);
    broker.shutdown().await;
}
