//! DescribeQuorum and DescribeCluster's controller endpoints over a real
//! socket: on a single node, and on a one-voter cluster in this process.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::describe_quorum_request::{PartitionData, TopicData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common;

use common::{config, Client};

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

fn describe_quorum_request(topic: &str, partition: i32) -> Request {
    Request::DescribeQuorum(
        DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(name(topic))
            .with_partitions(vec![
                PartitionData::default().with_partition_index(partition)
            ])]),
    )
}

async fn describe_quorum(client: &mut Client, version: i16) -> DescribeQuorumResponse {
    let request = describe_quorum_request("__cluster_metadata", 0);
    let Response::DescribeQuorum(response) = client.send(request, version).await else {
        panic!("not a DescribeQuorum response");
    };
    response
}

async fn create_topic(client: &mut Client, topic: &str) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let Response::CreateTopics(response) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(response.topics[0].error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_is_a_one_voter_quorum_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[("node.id", "7")]))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;
    let Response::ApiVersions(versions) = client
        .send(Request::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    else {
        panic!("not ApiVersions");
    };
    let advertised = versions
        .api_keys
        .iter()
        .find(|entry| entry.api_key == ApiKey::DescribeQuorum as i16)
        .expect("DescribeQuorum advertised");
    assert_eq!((advertised.min_version, advertised.max_version), (0, 2));

    let before = describe_quorum(&mut client, 2).await;
    let before_watermark = before.topics[0].partitions[0].high_watermark;
    create_topic(&mut client, "quorum-events").await;
    for version in 0..=2 {
        let response = describe_quorum(&mut client, version).await;
        assert_eq!(response.error_code, 0);
        assert_eq!(response.topics.len(), 1);
        assert_eq!(
            response.topics[0].topic_name.0.as_str(),
            "__cluster_metadata"
        );
        let partition = &response.topics[0].partitions[0];
        assert_eq!(partition.error_code, 0, "v{version}");
        assert_eq!(partition.partition_index, 0);
        assert_eq!(partition.leader_id, BrokerId(7));
        assert_eq!(partition.leader_epoch, 0);
        assert!(
            partition.high_watermark > before_watermark,
            "v{version}: the topic's records moved the high watermark ({before_watermark} -> {})",
            partition.high_watermark
        );
        assert_eq!(partition.current_voters.len(), 1);
        let voter = &partition.current_voters[0];
        assert_eq!(voter.replica_id, BrokerId(7));
        assert_eq!(voter.log_end_offset, partition.high_watermark);
        if version >= 1 {
            assert!(voter.last_fetch_timestamp > 0, "v{version}");
            assert!(voter.last_caught_up_timestamp > 0, "v{version}");
        }
        assert!(partition.observers.is_empty());
        assert!(response.nodes.is_empty(), "no controller listener");
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_partition_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;
    for (topic, partition) in [("__cluster_metadata", 1), ("events", 0)] {
        let request = describe_quorum_request(topic, partition);
        let Response::DescribeQuorum(response) = client.send(request, 2).await else {
            panic!("not a DescribeQuorum response");
        };
        assert_eq!(response.topics[0].topic_name.0.as_str(), topic);
        let answered = &response.topics[0].partitions[0];
        assert_eq!(answered.partition_index, partition);
        assert_eq!(
            answered.error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_quorum_needs_describe_on_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[("strom.authorizer.enable", "true")]))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;
    let response = describe_quorum(&mut client, 2).await;
    assert_eq!(
        response.error_code,
        ErrorCode::ClusterAuthorizationFailed.code()
    );
    assert!(response.topics.is_empty());
    broker.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(
        dir.path(),
        &[
            ("strom.authorizer.enable", "true"),
            ("super.users", "User:ANONYMOUS"),
        ],
    ))
    .await
    .unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;
    let response = describe_quorum(&mut client, 2).await;
    assert_eq!(response.error_code, 0);
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    broker.shutdown().await;
}

async fn describe_cluster(client: &mut Client, endpoint_type: i8) -> DescribeClusterResponse {
    let request = DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
    let Response::DescribeCluster(response) =
        client.send(Request::DescribeCluster(request), 1).await
    else {
        panic!("not a DescribeCluster response");
    };
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_has_no_controller_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;
    let brokers = describe_cluster(&mut client, 1).await;
    assert_eq!(brokers.error_code, 0);
    assert_eq!(brokers.brokers.len(), 1);
    let controllers = describe_cluster(&mut client, 2).await;
    assert_eq!(
        controllers.error_code,
        ErrorCode::MismatchedEndpointType.code()
    );
    assert!(controllers.brokers.is_empty());
    let unknown = describe_cluster(&mut client, 3).await;
    assert_eq!(
        unknown.error_code,
        ErrorCode::UnsupportedEndpointType.code()
    );
    broker.shutdown().await;
}

/// A loopback port nobody listens on (bound, then released).
fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// A one-voter cluster in this process: cluster mode, with the quorum's
/// view in DescribeQuorum and the voter in DescribeCluster's controllers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_voter_cluster_reports_its_quorum_and_controller_listener() {
    let dir = tempfile::tempdir().unwrap();
    let controller_port = unused_port();
    let voters = format!("1@127.0.0.1:{controller_port}");
    let listeners = format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_port}");
    let broker = strom_broker::start(config(
        dir.path(),
        &[
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.voters", &voters),
            ("listeners", &listeners),
            ("controller.listener.names", "CONTROLLER"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("strom.cluster.id", "MkU3OEVBNTcwNTJENDM2Qg"),
        ],
    ))
    .await
    .unwrap();
    let mut client = Client::connect(&broker, "quorum-test").await;

    let response = describe_quorum(&mut client, 2).await;
    assert_eq!(response.error_code, 0);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
    assert_eq!(partition.leader_id, BrokerId(1));
    assert!(
        partition.leader_epoch >= 1,
        "elected: {}",
        partition.leader_epoch
    );
    assert!(partition.high_watermark > 0);
    assert_eq!(partition.current_voters.len(), 1);
    assert_eq!(partition.current_voters[0].replica_id, BrokerId(1));
    assert!(partition.current_voters[0].log_end_offset >= partition.high_watermark);
    assert_eq!(response.nodes.len(), 1);
    let listener = &response.nodes[0].listeners[0];
    assert_eq!(
        (
            listener.name.as_str(),
            listener.host.as_str(),
            listener.port
        ),
        ("CONTROLLER", "127.0.0.1", controller_port)
    );

    for version in [0, 1] {
        let older = describe_quorum(&mut client, version).await;
        assert_eq!(
            older.topics[0].partitions[0].leader_id,
            BrokerId(1),
            "v{version}"
        );
        assert!(older.nodes.is_empty(), "v{version} has no nodes");
    }

    let controllers = describe_cluster(&mut client, 2).await;
    assert_eq!(controllers.error_code, 0, "{:?}", controllers.error_message);
    assert_eq!(controllers.endpoint_type, 2);
    assert_eq!(controllers.controller_id, BrokerId(1));
    let voters: Vec<(i32, &str, i32)> = controllers
        .brokers
        .iter()
        .map(|voter| (voter.broker_id.0, voter.host.as_str(), voter.port))
        .collect();
    assert_eq!(voters, vec![(1, "127.0.0.1", i32::from(controller_port))]);
    broker.shutdown().await;
}
