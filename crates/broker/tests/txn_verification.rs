//! Transaction verification between brokers (KIP-890 part 1): three nodes
//! in one process; a transactional batch sent to a partition leader that
//! is not the transaction coordinator is verified with AddPartitionsToTxn
//! v4 over the inter-broker listener, and refused while the partition is
//! not in the transaction.

use std::time::Duration;

use strom_broker::RunningBroker;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::{
    CreateTopicsRequest, FindCoordinatorRequest, MetadataRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

use crate::common::Client;
use crate::coordinator_failover::start_cluster;
use crate::transactions::{
    add_partitions, code, end, end_code, initialised, partition_codes, produce_code,
    transactional_batch, transactional_produce,
};

const TOPIC: &str = "verified";
const TRANSACTIONAL_ID: &str = "verified-app";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// The node that coordinates `TRANSACTIONAL_ID`, once `broker` names one.
async fn transaction_coordinator(broker: &RunningBroker) -> i32 {
    let mut client = Client::connect(broker, "verify-test").await;
    for _ in 0..300 {
        let request = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_key(text(TRANSACTIONAL_ID));
        if let Response::FindCoordinator(found) = client.send(request.into(), 3).await {
            if found.error_code == 0 {
                return found.node_id.0;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no transaction coordinator");
}

/// Partition 0's leader once every replica is in sync (so an `acks=all`
/// produce does not wait on a follower still catching up).
async fn settled_leader(broker: &RunningBroker) -> i32 {
    let mut client = Client::connect(broker, "verify-test").await;
    for _ in 0..300 {
        let topic = MetadataRequestTopic::default().with_name(Some(TopicName(text(TOPIC))));
        let request = MetadataRequest::default().with_topics(Some(vec![topic]));
        if let Response::Metadata(response) = client.send(request.into(), 9).await {
            let partition = response.topics.first().and_then(|t| t.partitions.first());
            if let Some(partition) = partition.filter(|p| p.isr_nodes.len() == 2) {
                return partition.leader_id.0;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("partition 0 never had a full ISR");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_verifies_with_a_remote_coordinator() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let brokers = start_cluster(dir.path()).await;
    let coordinator = transaction_coordinator(&brokers[0]).await;
    let coordinator_broker = brokers
        .iter()
        .find(|broker| broker.replicas().node_id() == coordinator)
        .expect("coordinator is one of the nodes");
    // A topic whose only partition is led by another node.
    let other = brokers
        .iter()
        .map(|broker| broker.replicas().node_id())
        .find(|node| *node != coordinator)
        .expect("another node");
    let topic = CreatableTopic::default()
        .with_name(TopicName(text(TOPIC)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![
            strom_protocol::kafka::messages::create_topics_request::CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![
                    strom_protocol::kafka::messages::BrokerId(other),
                    strom_protocol::kafka::messages::BrokerId(coordinator),
                ]),
        ]);
    let mut admin = Client::connect(&brokers[0], "verify-test").await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000);
    match admin.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        }
        other => panic!("not CreateTopics: {other:?}"),
    }
    let leader = settled_leader(&brokers[0]).await;
    assert_ne!(leader, coordinator, "the test needs a remote coordinator");
    let leader_broker = brokers
        .iter()
        .find(|broker| broker.replicas().node_id() == leader)
        .expect("leader is one of the nodes");

    let mut at_coordinator = Client::connect(coordinator_broker, "verify-test").await;
    let mut at_leader = Client::connect(leader_broker, "verify-test").await;
    let producer = initialised(&mut at_coordinator, TRANSACTIONAL_ID).await;
    let unadded = transactional_produce(
        Some(TRANSACTIONAL_ID),
        TOPIC,
        transactional_batch(producer, 0),
    );
    assert_eq!(
        produce_code(&mut at_leader, unadded, 9).await.0,
        code(ErrorCode::InvalidTxnState),
        "the remote coordinator says the partition is not in the transaction"
    );
    let added = at_coordinator
        .send(add_partitions(TRANSACTIONAL_ID, producer, TOPIC), 3)
        .await;
    assert_eq!(partition_codes(&added), vec![0]);
    let first = transactional_produce(
        Some(TRANSACTIONAL_ID),
        TOPIC,
        transactional_batch(producer, 0),
    );
    assert_eq!(produce_code(&mut at_leader, first, 9).await, (0, 0));
    assert_eq!(
        end_code(
            &mut at_coordinator,
            end(TRANSACTIONAL_ID, producer, true),
            3
        )
        .await,
        0
    );
    for broker in brokers {
        broker.shutdown().await;
    }
}
