//! The consumer group protocol (KIP-848) over a real socket:
//! ConsumerGroupHeartbeat v0 and v1, ConsumerGroupDescribe, ListGroups'
//! group type, OffsetCommit at the member epoch, and a classic JoinGroup
//! refused on a consumer group.

use std::time::Duration;

use bytes::Bytes;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::consumer_group_heartbeat_request::TopicPartitions;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common::{self, Client, TIMEOUT};

const GROUP: &str = "kip848-group";
const TOPIC: &str = "kip848-topic";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn join_request(member_id: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text(TOPIC))]))
        .with_topic_partitions(Some(Vec::<TopicPartitions>::new()))
}

/// Sends a heartbeat, again while the coordinator is still loading.
async fn heartbeat(
    client: &mut Client,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let sent = Request::ConsumerGroupHeartbeat(request.clone());
        let Response::ConsumerGroupHeartbeat(response) = client.send(sent, version).await else {
            panic!("not a ConsumerGroupHeartbeat response");
        };
        let loading = response.error_code == ErrorCode::CoordinatorLoadInProgress.code()
            || response.error_code == ErrorCode::NotCoordinator.code();
        if !loading || tokio::time::Instant::now() > deadline {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn commit(client: &mut Client, member_id: &str, epoch: i32) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member_id))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(3)])]);
    let Response::OffsetCommit(response) = client.send(Request::OffsetCommit(request), 9).await
    else {
        panic!("not an OffsetCommit response");
    };
    response.topics[0].partitions[0].error_code
}

async fn start() -> (tempfile::TempDir, strom_broker::RunningBroker, Client) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(dir.path(), &[("offsets.topic.num.partitions", "3")]);
    let broker = strom_broker::start(config).await.unwrap();
    let mut client = Client::connect(&broker, "kip848").await;
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(text(TOPIC)))
        .with_num_partitions(4)
        .with_replication_factor(1)]);
    let Response::CreateTopics(created) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0);
    (dir, broker, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_commit_and_are_described() {
    let (_dir, _broker, mut client) = start().await;
    let joined = heartbeat(&mut client, join_request("member-1"), 1).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(joined.member_epoch, 1);
    assert_eq!(joined.heartbeat_interval_ms, 5_000);
    let assignment = joined.assignment.expect("assignment on join");
    assert_eq!(assignment.topic_partitions.len(), 1);
    assert_eq!(assignment.topic_partitions[0].partitions, vec![0, 1, 2, 3]);

    // v1 needs a client-generated member id; v0 gets one from the coordinator.
    let anonymous = heartbeat(&mut client, join_request(""), 1).await;
    assert_eq!(anonymous.error_code, ErrorCode::InvalidRequest.code());
    let generated = heartbeat(&mut client, join_request(""), 0).await;
    assert_eq!(generated.error_code, 0);
    let second = generated
        .member_id
        .expect("generated member id")
        .to_string();
    assert!(!second.is_empty());
    assert_eq!(generated.member_epoch, 2);

    let unsupported = heartbeat(
        &mut client,
        join_request("member-3").with_server_assignor(Some(text("sticky"))),
        1,
    )
    .await;
    assert_eq!(
        unsupported.error_code,
        ErrorCode::UnsupportedAssignor.code()
    );

    // member-1 is still at epoch 1 (its next heartbeat moves it on).
    assert_eq!(commit(&mut client, "member-1", 1).await, 0);
    assert_eq!(
        commit(&mut client, "member-1", 2).await,
        ErrorCode::StaleMemberEpoch.code()
    );
    assert_eq!(
        commit(&mut client, "nobody", 1).await,
        ErrorCode::UnknownMemberId.code()
    );

    describe_and_list(&mut client, &second).await;

    let classic = JoinGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"subscription"))]);
    let Response::JoinGroup(refused) = client.send(Request::JoinGroup(classic), 9).await else {
        panic!("not a JoinGroup response");
    };
    assert_eq!(
        refused.error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
}

async fn describe_and_list(client: &mut Client, second: &str) {
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(text(GROUP)), GroupId(text("unknown"))]);
    let Response::ConsumerGroupDescribe(described) = client
        .send(Request::ConsumerGroupDescribe(request), 1)
        .await
    else {
        panic!("not a ConsumerGroupDescribe response");
    };
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_epoch, 2);
    assert_eq!(group.assignment_epoch, 2);
    assert_eq!(group.assignor_name.as_str(), "uniform");
    let members: Vec<&str> = group.members.iter().map(|m| m.member_id.as_str()).collect();
    assert!(members.contains(&"member-1") && members.contains(&second));
    let first = group
        .members
        .iter()
        .find(|member| member.member_id.as_str() == "member-1")
        .expect("member-1 described");
    assert_eq!(
        first.assignment.topic_partitions[0].topic_name.0.as_str(),
        TOPIC
    );
    assert_eq!(
        first.target_assignment.topic_partitions[0].partitions.len(),
        2
    );
    assert_eq!(
        described.groups[1].error_code,
        ErrorCode::GroupIdNotFound.code()
    );

    let Response::ListGroups(listed) = client
        .send(Request::ListGroups(ListGroupsRequest::default()), 5)
        .await
    else {
        panic!("not a ListGroups response");
    };
    let listed = listed
        .groups
        .iter()
        .find(|listed| listed.group_id.0.as_str() == GROUP)
        .expect("group listed");
    assert_eq!(listed.group_type.as_str(), "consumer");
    assert_eq!(listed.protocol_type.as_str(), "consumer");
    assert_eq!(listed.group_state.as_str(), "Reconciling");
}
