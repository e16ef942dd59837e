//! ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments
//! over a real socket on a single-node broker: the answers at every served
//! version, the per-partition error codes, and the authorization refusal.
//! The elections and reassignments themselves run on a cluster in
//! `tests/interop/test_elections.py`.

use strom_protocol::kafka::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::elect_leaders_request::TopicPartitions;
use strom_protocol::kafka::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common;

use common::{config, Client};

const ELECTION_NOT_NEEDED: i16 = 84;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
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

async fn elect(
    client: &mut Client,
    version: i16,
    election_type: i8,
    partitions: Option<&[(&str, i32)]>,
) -> ElectLeadersResponse {
    let topics = partitions.map(|partitions| {
        partitions
            .iter()
            .map(|(topic, index)| {
                TopicPartitions::default()
                    .with_topic(name(topic))
                    .with_partitions(vec![*index])
            })
            .collect()
    });
    let mut request = ElectLeadersRequest::default().with_topic_partitions(topics);
    if version > 0 {
        request = request.with_election_type(election_type);
    }
    let Response::ElectLeaders(response) =
        client.send(Request::ElectLeaders(request), version).await
    else {
        panic!("not an ElectLeaders response");
    };
    response
}

/// The per-partition codes of an ElectLeaders answer, by `topic-index`.
fn election_codes(response: &ElectLeadersResponse) -> Vec<(String, i16)> {
    response
        .replica_election_results
        .iter()
        .flat_map(|topic| {
            topic.partition_result.iter().map(|partition| {
                (
                    format!("{}-{}", topic.topic.0, partition.partition_id),
                    partition.error_code,
                )
            })
        })
        .collect()
}

async fn reassign(
    client: &mut Client,
    topic: &str,
    replicas: Option<Vec<i32>>,
) -> AlterPartitionReassignmentsResponse {
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(
                    replicas.map(|ids| ids.into_iter().map(BrokerId).collect()),
                )]),
    ]);
    let Response::AlterPartitionReassignments(response) = client
        .send(Request::AlterPartitionReassignments(request), 0)
        .await
    else {
        panic!("not an AlterPartitionReassignments response");
    };
    response
}

fn reassignment_code(response: &AlterPartitionReassignmentsResponse) -> i16 {
    assert_eq!(response.error_code, 0);
    assert_eq!(response.responses.len(), 1);
    assert_eq!(response.responses[0].partitions.len(), 1);
    response.responses[0].partitions[0].error_code
}

async fn list(client: &mut Client, topics: Option<&[&str]>) -> ListPartitionReassignmentsResponse {
    let request = ListPartitionReassignmentsRequest::default().with_topics(topics.map(|topics| {
        topics
            .iter()
            .map(|topic| {
                ListPartitionReassignmentsTopics::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![0])
            })
            .collect()
    }));
    let Response::ListPartitionReassignments(response) = client
        .send(Request::ListPartitionReassignments(request), 0)
        .await
    else {
        panic!("not a ListPartitionReassignments response");
    };
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_answer_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "elections-test").await;
    create_topic(&mut client, "t").await;
    for version in 0..=2 {
        let response = elect(&mut client, version, 0, Some(&[("t", 0), ("missing", 0)])).await;
        assert_eq!(response.error_code, 0, "v{version}");
        let mut codes = election_codes(&response);
        codes.sort();
        assert_eq!(
            codes,
            [
                ("missing-0".to_owned(), UNKNOWN_TOPIC_OR_PARTITION),
                ("t-0".to_owned(), ELECTION_NOT_NEEDED)
            ],
            "v{version}"
        );
    }
    // Every partition: only those where something happened are listed.
    let response = elect(&mut client, 2, 0, None).await;
    assert!(response.replica_election_results.is_empty());
    // Unclean on a partition with a live leader: nothing to do.
    let response = elect(&mut client, 2, 1, Some(&[("t", 0)])).await;
    assert_eq!(
        election_codes(&response),
        [("t-0".to_owned(), ELECTION_NOT_NEEDED)]
    );
    // An election type Kafka does not have.
    let response = elect(&mut client, 1, 7, Some(&[("t", 0)])).await;
    assert_eq!(response.error_code, INVALID_REQUEST);
    assert_eq!(
        election_codes(&response),
        [("t-0".to_owned(), INVALID_REQUEST)]
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassignments_answer_with_kafkas_codes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "reassignments-test").await;
    create_topic(&mut client, "t").await;
    let code = reassignment_code(&reassign(&mut client, "t", None).await);
    assert_eq!(code, NO_REASSIGNMENT_IN_PROGRESS);
    let code = reassignment_code(&reassign(&mut client, "t", Some(vec![1, 9])).await);
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
    let code = reassignment_code(&reassign(&mut client, "missing", Some(vec![1])).await);
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);
    // The same replicas: accepted, and nothing is in progress after it.
    let code = reassignment_code(&reassign(&mut client, "t", Some(vec![1])).await);
    assert_eq!(code, 0);
    for topics in [None, Some(&["t", "missing"][..])] {
        let response = list(&mut client, topics).await;
        assert_eq!(response.error_code, 0);
        assert!(response.topics.is_empty(), "{response:?}");
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cluster_permissions_everything_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[("strom.authorizer.enable", "true")]))
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "refused").await;
    let response = elect(&mut client, 2, 0, Some(&[("t", 0)])).await;
    assert_eq!(response.error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        election_codes(&response),
        [("t-0".to_owned(), CLUSTER_AUTHORIZATION_FAILED)]
    );
    let response = elect(&mut client, 0, 0, Some(&[("t", 0)])).await;
    assert_eq!(response.error_code, 0, "v0 has no top-level code");
    assert_eq!(
        election_codes(&response),
        [("t-0".to_owned(), CLUSTER_AUTHORIZATION_FAILED)]
    );
    let response = reassign(&mut client, "t", Some(vec![1])).await;
    assert_eq!(response.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let response = list(&mut client, None).await;
    assert_eq!(response.error_code, CLUSTER_AUTHORIZATION_FAILED);
    broker.shutdown().await;
}
