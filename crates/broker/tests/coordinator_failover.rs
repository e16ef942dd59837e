//! The group coordinator follows the leadership of its `__consumer_offsets`
//! partition: three `broker,controller` nodes in one process over
//! 127.0.0.1, offsets committed to the coordinator, the coordinator's
//! broker shut down, and the new leader of the partition answers
//! OffsetFetch with every committed offset.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{free_port, Client};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::OffsetFetchRequestTopic;
use strom_protocol::kafka::messages::{
    CreateTopicsRequest, FindCoordinatorRequest, GroupId, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
const GROUP: &str = "failover-readers";
const TOPIC: &str = "events";
const PARTITIONS: i32 = 4;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

pub(crate) fn node_config(dir: &std::path::Path, id: u32, voters: &str, port: u16) -> BrokerConfig {
    let pairs: Vec<(String, String)> = vec![
        ("process.roles".into(), "broker,controller".into()),
        ("node.id".into(), id.to_string()),
        ("controller.quorum.voters".into(), voters.into()),
        (
            "listeners".into(),
            format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
        ),
        ("controller.listener.names".into(), "CONTROLLER".into()),
        ("inter.broker.listener.name".into(), "PLAINTEXT".into()),
        ("strom.cluster.id".into(), CLUSTER_ID.into()),
        (
            "log.dirs".into(),
            dir.join(format!("node-{id}")).display().to_string(),
        ),
        // `offsets.topic.replication.factor` is left at its default (3).
        ("offsets.topic.num.partitions".into(), "2".into()),
        ("transaction.state.log.num.partitions".into(), "2".into()),
        ("broker.heartbeat.interval.ms".into(), "500".into()),
        ("broker.session.timeout.ms".into(), "6000".into()),
        ("replica.lag.time.max.ms".into(), "1500".into()),
        ("replica.fetch.wait.max.ms".into(), "200".into()),
        ("replica.fetch.backoff.ms".into(), "100".into()),
    ];
    let map: BTreeMap<String, String> = pairs.into_iter().collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}

/// Three `broker,controller` nodes in this process.
pub(crate) async fn start_cluster(dir: &std::path::Path) -> Vec<RunningBroker> {
    let ports: BTreeMap<u32, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let voters = ports
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let handles: Vec<_> = ports
        .iter()
        .map(|(id, port)| {
            tokio::spawn(strom_broker::broker::start(node_config(
                dir, *id, &voters, *port,
            )))
        })
        .collect();
    let mut brokers = Vec::new();
    for handle in handles {
        brokers.push(handle.await.expect("join").expect("started"));
    }
    brokers
}

fn node_of(broker: &RunningBroker) -> i32 {
    broker.replicas().node_id()
}

async fn create_topic(broker: &RunningBroker) {
    let topic = CreatableTopic::default()
        .with_name(TopicName(text(TOPIC)))
        .with_num_partitions(PARTITIONS)
        .with_replication_factor(3);
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000);
    let mut client = Client::connect(broker, "failover-test").await;
    match client.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        }
        other => panic!("not a CreateTopics response: {other:?}"),
    }
}

/// The coordinator `broker` names for the group, once it names one.
async fn find_coordinator(broker: &RunningBroker) -> Option<i32> {
    let request = FindCoordinatorRequest::default().with_key(text(GROUP));
    let mut client = Client::connect(broker, "failover-test").await;
    match client.send(Request::FindCoordinator(request), 3).await {
        Response::FindCoordinator(found) if found.error_code == 0 => Some(found.node_id.0),
        Response::FindCoordinator(_) => None,
        other => panic!("not a FindCoordinator response: {other:?}"),
    }
}

/// The replica counts of `__consumer_offsets`' partitions, as `broker` sees them.
async fn offsets_topic_replicas(broker: &RunningBroker) -> Vec<usize> {
    let topic =
        MetadataRequestTopic::default().with_name(Some(TopicName(text("__consumer_offsets"))));
    let request = MetadataRequest::default().with_topics(Some(vec![topic]));
    let mut client = Client::connect(broker, "failover-test").await;
    match client.send(Request::Metadata(request), 9).await {
        Response::Metadata(response) => response.topics[0]
            .partitions
            .iter()
            .map(|partition| partition.replica_nodes.len())
            .collect(),
        other => panic!("not a Metadata response: {other:?}"),
    }
}

/// Commits `offsets` (one per partition) as a standalone consumer; the
/// error code of each partition.
async fn commit(client: &mut Client, offsets: &[i64]) -> Vec<i16> {
    let partitions = offsets
        .iter()
        .enumerate()
        .map(|(index, offset)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(index as i32)
                .with_committed_offset(*offset)
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partitions(partitions)]);
    match client.send(Request::OffsetCommit(request), 8).await {
        Response::OffsetCommit(response) => response.topics[0]
            .partitions
            .iter()
            .map(|partition| partition.error_code)
            .collect(),
        other => panic!("not an OffsetCommit response: {other:?}"),
    }
}

/// The committed offsets of every partition, or the error code.
async fn fetch(client: &mut Client) -> Result<Vec<i64>, i16> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partition_indexes((0..PARTITIONS).collect())]));
    match client.send(Request::OffsetFetch(request), 7).await {
        Response::OffsetFetch(response) if response.error_code != 0 => Err(response.error_code),
        Response::OffsetFetch(response) => Ok(response.topics[0]
            .partitions
            .iter()
            .map(|partition| partition.committed_offset)
            .collect()),
        other => panic!("not an OffsetFetch response: {other:?}"),
    }
}

/// The coordinator the running brokers agree on, and its index.
async fn agreed_coordinator(brokers: &[RunningBroker]) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut named = Vec::new();
        for broker in brokers {
            named.push(find_coordinator(broker).await);
        }
        let first = named[0];
        let index = first.and_then(|node| brokers.iter().position(|b| node_of(b) == node));
        if let Some(index) = index.filter(|_| named.iter().all(|node| *node == first)) {
            return index;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the brokers name no common live coordinator: {named:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Commits `offsets` until every partition is accepted, as a client
/// retries (COORDINATOR_LOAD_IN_PROGRESS right after a load starts,
/// REQUEST_TIMED_OUT while a stopped follower is still in the ISR, and
/// NOT_COORDINATOR while the broker that FindCoordinator named has not
/// applied the image that makes it the coordinator yet).
async fn commit_until_accepted(client: &mut Client, offsets: &[i64]) {
    let retriable = [
        ErrorCode::CoordinatorLoadInProgress.code(),
        ErrorCode::RequestTimedOut.code(),
        ErrorCode::NotCoordinator.code(),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let codes = commit(client, offsets).await;
        if codes.iter().all(|code| *code == ErrorCode::None.code()) {
            return;
        }
        assert!(
            codes.iter().all(|code| retriable.contains(code))
                && tokio::time::Instant::now() < deadline,
            "commit refused: {codes:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`fetch`] until the coordinator answers (it may still be loading).
async fn fetch_when_loaded(client: &mut Client) -> Vec<i64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match fetch(client).await {
            Ok(offsets) => return offsets,
            Err(code) => assert!(
                code == ErrorCode::CoordinatorLoadInProgress.code()
                    && tokio::time::Instant::now() < deadline,
                "OffsetFetch refused with {code}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_coordinator_has_every_committed_offset_after_the_old_one_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut brokers = start_cluster(dir.path()).await;
    create_topic(&brokers[0]).await;
    let coordinator = agreed_coordinator(&brokers).await;
    assert_eq!(
        offsets_topic_replicas(&brokers[0]).await,
        vec![3, 3],
        "offsets.topic.replication.factor defaults to 3"
    );

    // Every commit is answered once the in-sync replicas have it.
    let mut client = Client::connect(&brokers[coordinator], "failover-test").await;
    let mut last = Vec::new();
    for round in 1..=20_i64 {
        let offsets: Vec<i64> = (0..i64::from(PARTITIONS))
            .map(|partition| round * 100 + partition)
            .collect();
        commit_until_accepted(&mut client, &offsets).await;
        last = offsets;
    }
    assert_eq!(fetch(&mut client).await, Ok(last.clone()));
    drop(client);

    // The coordinator's broker stops; another broker leads the partition,
    // loads it, and answers with every committed offset.
    let old = brokers.remove(coordinator);
    let old_node = node_of(&old);
    old.shutdown().await;
    let coordinator = agreed_coordinator(&brokers).await;
    assert_ne!(node_of(&brokers[coordinator]), old_node);
    let mut client = Client::connect(&brokers[coordinator], "failover-test").await;
    assert_eq!(
        fetch_when_loaded(&mut client).await,
        last,
        "no committed offset is lost"
    );

    // And it takes new commits.
    let next: Vec<i64> = (0..i64::from(PARTITIONS)).map(|p| 5_000 + p).collect();
    commit_until_accepted(&mut client, &next).await;
    assert_eq!(fetch(&mut client).await, Ok(next));
    for broker in brokers {
        broker.shutdown().await;
    }
}
