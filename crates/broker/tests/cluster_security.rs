//! SCRAM users and ACLs hold on every broker of a cluster: three
//! `broker,controller` nodes in one process, each with a PLAINTEXT listener
//! (inter-broker, and the operator's: `User:ANONYMOUS` is a super user
//! here) and a SASL_PLAINTEXT listener with SCRAM-SHA-256 for
//! applications. A user and ACLs created through one broker are written by
//! the active controller to the metadata log and reach the other brokers'
//! images: the user authenticates there and is authorized or refused by
//! those ACLs; an ACL deleted through another broker stops applying
//! everywhere.

use crate::common;

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{free_port, wait_until, Client};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_protocol::kafka::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use strom_protocol::kafka::messages::create_acls_request::AclCreation;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::delete_acls_request::DeleteAclsFilter;
use strom_protocol::kafka::messages::describe_quorum_request::{PartitionData, TopicData};
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, CreateTopicsRequest, DeleteAclsRequest,
    DescribeAclsRequest, DescribeQuorumRequest, MetadataRequest, MetadataResponse,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::sasl::scram::{ScramClient, ScramMechanism};

const CLUSTER_ID: &str = "U2VjdXJpdHlDbHVzdGVyMQ";
const MECHANISM: ScramMechanism = ScramMechanism::Sha256;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka's resource, pattern, operation and permission codes.
const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const READ: i8 = 3;
const ALLOW: i8 = 3;
fn node_config(dir: &std::path::Path, id: u32, controllers: &BTreeMap<u32, u16>) -> BrokerConfig {
    let voters = controllers
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let listeners = format!(
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{}",
        controllers[&id]
    );
    let pairs = [
        ("process.roles", "broker,controller".to_owned()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters),
        ("listeners", listeners),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT".to_owned(),
        ),
        ("controller.listener.names", "CONTROLLER".to_owned()),
        ("inter.broker.listener.name", "PLAINTEXT".to_owned()),
        ("strom.cluster.id", CLUSTER_ID.to_owned()),
        (
            "log.dirs",
            dir.join(format!("node-{id}")).display().to_string(),
        ),
        ("offsets.topic.num.partitions", "1".to_owned()),
        ("broker.heartbeat.interval.ms", "500".to_owned()),
        ("broker.session.timeout.ms", "6000".to_owned()),
        ("sasl.enabled.mechanisms", MECHANISM.name().to_owned()),
        ("strom.authorizer.enable", "true".to_owned()),
        ("super.users", "User:ANONYMOUS".to_owned()),
    ];
    let map: BTreeMap<String, String> = pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}
/// The operator's connection: the PLAINTEXT listener.
async fn operator(broker: &RunningBroker) -> Client {
    Client::connect(broker, "operator").await
}

/// A SCRAM exchange on the SASL listener; the connection if the broker
/// accepted `password`, else the error code it answered.
async fn login(broker: &RunningBroker, user: &str, password: &str) -> Result<Client, i16> {
    let mut client = Client::connect_to(broker.local_addresses()[1], "application").await;
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(MECHANISM.name()));
    match client.send(Request::SaslHandshake(handshake), 1).await {
        Response::SaslHandshake(response) => assert_eq!(response.error_code, 0),
        other => panic!("not a SaslHandshake response: {other:?}"),
    }
    let (mut scram, first) =
        ScramClient::start(MECHANISM, user, password, "fyko+d2lbbFgONRv9qkxdawL");
    let server_first = authenticate(&mut client, first).await?;
    let last = scram
        .client_final(&server_first)
        .expect("a valid server-first");
    let server_final = authenticate(&mut client, last).await?;
    scram
        .finish(&server_final)
        .expect("the server proves it knows the key");
    Ok(client)
}

async fn authenticate(client: &mut Client, token: Vec<u8>) -> Result<Vec<u8>, i16> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    match client.send(Request::SaslAuthenticate(request), 2).await {
        Response::SaslAuthenticate(response) if response.error_code == 0 => {
            Ok(response.auth_bytes.to_vec())
        }
        Response::SaslAuthenticate(response) => Err(response.error_code),
        other => panic!("not a SaslAuthenticate response: {other:?}"),
    }
}

/// The node id of the active controller, as DescribeQuorum names it.
async fn active_controller(broker: &RunningBroker) -> usize {
    let mut client = operator(broker).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let leader = match client.send(Request::DescribeQuorum(request), 1).await {
            Response::DescribeQuorum(response) => response
                .topics
                .first()
                .and_then(|topic| topic.partitions.first())
                .map_or(-1, |partition| partition.leader_id.0),
            other => panic!("not a DescribeQuorum response: {other:?}"),
        };
        if let Ok(leader @ 1..=3) = usize::try_from(leader) {
            return leader;
        }
        assert!(Instant::now() < deadline, "no active controller");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The error codes Metadata answers for `topics`.
async fn topic_codes(client: &mut Client, topics: &[&str]) -> Vec<i16> {
    let request = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|name| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string((*name).to_owned()))))
            })
            .collect(),
    ));
    let response: MetadataResponse = match client.send(Request::Metadata(request), 9).await {
        Response::Metadata(response) => response,
        other => panic!("not a Metadata response: {other:?}"),
    };
    topics
        .iter()
        .map(|name| {
            response
                .topics
                .iter()
                .find(|topic| {
                    topic
                        .name
                        .as_ref()
                        .is_some_and(|found| found.0.as_str() == *name)
                })
                .map_or(-1, |topic| topic.error_code)
        })
        .collect()
}

fn read_acl(user: &str, topic: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_owned()))
        .with_resource_pattern_type(LITERAL)
        .with_principal(StrBytes::from_string(format!("User:{user}")))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(READ)
        .with_permission_type(ALLOW)
}

async fn create_topics(client: &mut Client, names: &[&str]) {
    let topics = names
        .iter()
        .map(|name| {
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                .with_num_partitions(1)
                .with_replication_factor(3)
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(10_000);
    match client.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            for topic in &response.topics {
                assert_eq!(topic.error_code, 0, "{topic:?}");
            }
        }
        other => panic!("not a CreateTopics response: {other:?}"),
    }
}

async fn set_password(client: &mut Client, user: &str, password: &str) {
    let salt = b"cluster-test-salt";
    let iterations = 4096;
    let salted = MECHANISM.salted_password(
        password,
        salt,
        NonZeroU32::new(iterations).expect("not zero"),
    );
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.to_owned()))
        .with_mechanism(MECHANISM.code())
        .with_iterations(i32::try_from(iterations).expect("small"))
        .with_salt(Bytes::from_static(salt))
        .with_salted_password(Bytes::from(salted));
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
    match client
        .send(Request::AlterUserScramCredentials(request), 0)
        .await
    {
        Response::AlterUserScramCredentials(response) => {
            assert_eq!(response.results[0].error_code, 0, "{response:?}");
        }
        other => panic!("not an AlterUserScramCredentials response: {other:?}"),
    }
}

/// How many ACL bindings a broker's DescribeAcls lists for topic `topic`.
async fn acl_count(broker: &RunningBroker, topic: &str) -> usize {
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(StrBytes::from_string(topic.to_owned())))
        .with_pattern_type_filter(LITERAL)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    match operator(broker)
        .await
        .send(Request::DescribeAcls(request), 3)
        .await
    {
        Response::DescribeAcls(response) => {
            assert_eq!(response.error_code, 0, "{response:?}");
            response.resources.iter().map(|r| r.acls.len()).sum()
        }
        other => panic!("not a DescribeAcls response: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_users_and_acls_hold_on_every_broker_of_a_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controllers: BTreeMap<u32, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let handles: Vec<_> = (1..=3)
        .map(|id| {
            tokio::spawn(strom_broker::broker::start(node_config(
                dir.path(),
                id,
                &controllers,
            )))
        })
        .collect();
    let mut brokers = Vec::new();
    for handle in handles {
        brokers.push(handle.await.expect("join").expect("started"));
    }

    // The user, topics and ACL go through a broker that is not the active
    // controller, so they are forwarded to it; every broker (the active
    // one too) learns them from the metadata log.
    let active = active_controller(&brokers[0]).await;
    let followers: Vec<usize> = (0..3).filter(|index| *index + 1 != active).collect();
    let (writer, deleter) = (&brokers[followers[0]], &brokers[followers[1]]);
    let mut admin = operator(writer).await;
    create_topics(&mut admin, &["readable", "hidden"]).await;
    set_password(&mut admin, "alice", "alice-secret").await;
    let request = CreateAclsRequest::default().with_creations(vec![read_acl("alice", "readable")]);
    match admin.send(Request::CreateAcls(request), 3).await {
        Response::CreateAcls(response) => assert_eq!(response.results[0].error_code, 0),
        other => panic!("not a CreateAcls response: {other:?}"),
    }

    // Alice logs in on each broker, sees the topic she may read, not the
    // other, and a wrong password or an unknown user is refused.
    for broker in &brokers {
        wait_until("the broker lists the ACL", || async {
            acl_count(broker, "readable").await == 1
        })
        .await;
        wait_until("alice may describe `readable`", || async {
            match login(broker, "alice", "alice-secret").await {
                Ok(mut alice) => topic_codes(&mut alice, &["readable"]).await == [0],
                Err(_) => false,
            }
        })
        .await;
        let mut alice = login(broker, "alice", "alice-secret")
            .await
            .expect("alice logs in");
        assert_eq!(
            topic_codes(&mut alice, &["readable", "hidden"]).await,
            [0, TOPIC_AUTHORIZATION_FAILED]
        );
        assert_eq!(
            login(broker, "alice", "wrong-secret").await.err(),
            Some(SASL_AUTHENTICATION_FAILED)
        );
        assert_eq!(
            login(broker, "mallory", "alice-secret").await.err(),
            Some(SASL_AUTHENTICATION_FAILED)
        );
    }

    // The ACL deleted through another follower stops applying everywhere.
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(StrBytes::from_static_str("readable")))
        .with_pattern_type_filter(LITERAL)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let request = DeleteAclsRequest::default().with_filters(vec![filter]);
    match operator(deleter)
        .await
        .send(Request::DeleteAcls(request), 3)
        .await
    {
        Response::DeleteAcls(response) => {
            assert_eq!(response.filter_results[0].error_code, 0);
            assert_eq!(response.filter_results[0].matching_acls.len(), 1);
        }
        other => panic!("not a DeleteAcls response: {other:?}"),
    }
    for broker in &brokers {
        wait_until("the ACL is gone", || async {
            acl_count(broker, "readable").await == 0
        })
        .await;
        let mut alice = login(broker, "alice", "alice-secret")
            .await
            .expect("alice still logs in");
        assert_eq!(
            topic_codes(&mut alice, &["readable"]).await,
            [TOPIC_AUTHORIZATION_FAILED]
        );
    }

    for broker in brokers {
        broker.shutdown().await;
    }
}
