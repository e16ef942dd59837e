//! strom-client's admin `describe_group` against an in-process broker: a
//! group joined over the wire is described with its state, protocol and
//! member; an unknown group is `Dead` with no members.

use std::time::Duration;

use bytes::Bytes;
use strom_client::admin::AdminClient;
use strom_client::{ClientConfig, Cluster};
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strom_protocol::kafka::messages::{
    GroupId, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

mod common;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Joins `group` as its only member (retrying while the coordinator loads
/// and once for MEMBER_ID_REQUIRED); returns the answer.
async fn join(cluster: &Cluster, coordinator: i32, group: &str) -> JoinGroupResponse {
    let mut member_id = String::new();
    loop {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(&member_id))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(b"subscription"))]);
        let Response::JoinGroup(response) = cluster
            .send_to(coordinator, request)
            .await
            .expect("JoinGroup answered")
        else {
            panic!("not a JoinGroup response");
        };
        match ErrorCode::from_code(response.error_code) {
            ErrorCode::None => return response,
            ErrorCode::MemberIdRequired => member_id = response.member_id.to_string(),
            ErrorCode::CoordinatorLoadInProgress => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            code => panic!("JoinGroup failed with {code}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joined_group_is_described_with_its_member_and_an_unknown_one_is_not_found() {
    let run = async {
        let test_broker = common::start_broker(&[("group.initial.rebalance.delay.ms", "0")]).await;
        let bootstrap = test_broker.bootstrap.clone();
        let mut client_config = ClientConfig::new([bootstrap]);
        client_config.client_id = "describer".to_owned();
        let cluster = Cluster::connect(client_config).await.expect("connects");
        let admin = AdminClient::new(cluster.clone(), Duration::from_secs(10));

        // DescribeGroups v6 answers GROUP_ID_NOT_FOUND for a group that
        // does not exist (KIP-1043); older versions describe it as Dead.
        let unknown = admin.describe_group("nobody-here").await;
        assert!(
            matches!(
                unknown,
                Err(strom_client::ClientError::Broker {
                    code: ErrorCode::GroupIdNotFound
                })
            ),
            "{unknown:?}"
        );

        let coordinator = loop {
            match cluster.find_coordinator("readers", 0).await {
                Ok(coordinator) => break coordinator,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let joined = join(&cluster, coordinator, "readers").await;
        let member_id = joined.member_id.to_string();
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(text("readers")))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(&member_id))
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text("range")))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(&member_id))
                .with_assignment(Bytes::from_static(b"assignment"))]);
        let Response::SyncGroup(synced) = cluster
            .send_to(coordinator, request)
            .await
            .expect("SyncGroup answered")
        else {
            panic!("not a SyncGroup response");
        };
        assert_eq!(synced.error_code, 0);

        let described = admin.describe_group("readers").await.expect("described");
        assert_eq!(described.group_id, "readers");
        assert_eq!(described.state, "Stable");
        assert_eq!(described.protocol_type, "consumer");
        assert_eq!(described.protocol, "range");
        assert_eq!(described.members.len(), 1);
        let member = &described.members[0];
        assert_eq!(member.member_id, member_id);
        assert_eq!(member.client_id, "describer");
        assert_eq!(member.group_instance_id, None);
        assert_eq!(&member.metadata[..], b"subscription");
        assert_eq!(&member.assignment[..], b"assignment");
        cluster.close();
        test_broker.broker.shutdown().await;
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("test in time");
}
