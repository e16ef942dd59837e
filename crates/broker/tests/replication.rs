//! Replication between the brokers of one cluster, in one process over
//! 127.0.0.1: followers fetch from the leader, `acks=all` completes when
//! every ISR member has the records, a stuck follower leaves the ISR after
//! `replica.lag.time.max.ms` and rejoins once it catches up, and a new
//! leader elected from the ISR has every acknowledged record.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{free_port, wait_until, Client};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::{
    delete_records_request, BrokerId, CreateTopicsRequest, DeleteRecordsRequest, FetchRequest,
    InitProducerIdRequest, MetadataRequest, MetadataResponse, ProduceRequest, TopicName,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};
use strom_storage::TopicPartition;

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
const TOPIC: &str = "replicated";
const LAG_TIME_MS: &str = "1500";
fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

fn node_config(dir: &std::path::Path, id: u32, voters: &str, port: u16) -> BrokerConfig {
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
        ("offsets.topic.num.partitions".into(), "1".into()),
        ("broker.heartbeat.interval.ms".into(), "500".into()),
        ("broker.session.timeout.ms".into(), "6000".into()),
        ("replica.lag.time.max.ms".into(), LAG_TIME_MS.into()),
        ("replica.fetch.wait.max.ms".into(), "200".into()),
        ("replica.fetch.backoff.ms".into(), "100".into()),
    ];
    let map: BTreeMap<String, String> = pairs.into_iter().collect();
    BrokerConfig::from_map(&map).expect("valid config").0
}

/// The voters string and each node's controller port, to restart a node.
struct Voters {
    voters: String,
    ports: BTreeMap<u32, u16>,
}

async fn start_cluster(dir: &std::path::Path) -> Vec<RunningBroker> {
    start_cluster_keeping_ports(dir).await.0
}

async fn start_cluster_keeping_ports(dir: &std::path::Path) -> (Vec<RunningBroker>, Voters) {
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
    (brokers, Voters { voters, ports })
}
async fn metadata(broker: &RunningBroker) -> MetadataResponse {
    let topic = strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic::default()
        .with_name(Some(name(TOPIC)));
    let request = MetadataRequest::default().with_topics(Some(vec![topic]));
    let mut client = Client::connect(broker, "replication-test").await;
    match client.send(Request::Metadata(request), 9).await {
        Response::Metadata(response) => response,
        other => panic!("not a Metadata response: {other:?}"),
    }
}

/// The partition's leader and ISR as `broker` reports them.
async fn leader_and_isr(broker: &RunningBroker) -> Option<(i32, BTreeSet<i32>)> {
    let response = metadata(broker).await;
    let topic = response.topics.first()?;
    let partition = topic.partitions.first()?;
    (topic.error_code == 0 && partition.leader_id.0 >= 0).then(|| {
        (
            partition.leader_id.0,
            partition.isr_nodes.iter().map(|id| id.0).collect(),
        )
    })
}

async fn create_topic(broker: &RunningBroker) {
    let topic = CreatableTopic::default()
        .with_name(name(TOPIC))
        .with_num_partitions(1)
        .with_replication_factor(3)
        .with_configs(vec![
            strom_protocol::kafka::messages::create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("2"))),
        ]);
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000);
    let mut client = Client::connect(broker, "replication-test").await;
    match client.send(Request::CreateTopics(request), 5).await {
        Response::CreateTopics(response) => {
            assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        }
        other => panic!("not a CreateTopics response: {other:?}"),
    }
}

async fn init_producer_id(client: &mut Client) -> i64 {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(strom_protocol::kafka::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client
            .send(Request::InitProducerId(request.clone()), 4)
            .await
        {
            Response::InitProducerId(response) if response.error_code == 0 => {
                return response.producer_id.0;
            }
            // COORDINATOR_LOAD_IN_PROGRESS while the broker's first block of
            // producer ids is on its way from the quorum.
            Response::InitProducerId(response) if response.error_code == 14 => {
                assert!(Instant::now() < deadline, "InitProducerId kept loading");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("InitProducerId refused: {other:?}"),
        }
    }
}

/// Produces `values` in one idempotent batch with `acks`; the error code.
async fn produce(
    client: &mut Client,
    producer_id: i64,
    sequence: i32,
    values: &[String],
    acks: i16,
) -> i16 {
    let mut builder =
        RecordBatchBuilder::new(Compression::None).with_producer(producer_id, 0, sequence);
    for (index, value) in values.iter().enumerate() {
        builder
            .append(1_000 + index as i64, None, Some(value.as_bytes()), &[])
            .expect("append");
    }
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(builder.build().expect("build")))])]);
    match client.send(Request::Produce(request), 9).await {
        Response::Produce(response) => response.responses[0].partition_responses[0].error_code,
        other => panic!("not a Produce response: {other:?}"),
    }
}

/// [`produce`], retried like a client while the broker has not yet
/// applied the image that makes it the leader (NOT_LEADER_OR_FOLLOWER).
async fn produce_to_leader(
    client: &mut Client,
    producer_id: i64,
    sequence: i32,
    values: &[String],
) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let code = produce(client, producer_id, sequence, values, -1).await;
        if code != 6 || Instant::now() >= deadline {
            return code;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every record value a consumer reads from `broker`, from offset 0 (none
/// if `broker` does not lead the partition).
async fn consume_all(broker: &RunningBroker) -> Vec<String> {
    let mut client = Client::connect(broker, "replication-test").await;
    let mut values = Vec::new();
    let mut offset = 0i64;
    loop {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(50 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![FetchPartition::default()
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(10 << 20)])]);
        let Response::Fetch(response) = client.send(Request::Fetch(request), 12).await else {
            panic!("not a Fetch response");
        };
        let partition = &response.responses[0].partitions[0];
        if partition.error_code != 0 {
            // Not (yet) the leader: what was read so far.
            return values;
        }
        let before = values.len();
        for batch in RecordBatches::new(partition.records.clone().unwrap_or_default()) {
            let batch = batch.expect("batch");
            for record in batch.records().expect("records") {
                let record = record.expect("record");
                if batch.header().base_offset + i64::from(record.offset_delta()) >= offset {
                    values.push(
                        String::from_utf8_lossy(record.value().unwrap_or_default()).into_owned(),
                    );
                }
            }
            offset = batch.header().next_offset();
        }
        if values.len() == before {
            return values;
        }
    }
}

/// The bytes of the partition's log on `broker` below its HW, and the HW.
fn committed_bytes(broker: &RunningBroker) -> (Bytes, i64) {
    let replicas = broker.replicas();
    let log = replicas
        .logs()
        .get(&TopicPartition::new(TOPIC.to_owned(), 0))
        .expect("the partition's log is hosted");
    let log = log.read().expect("log lock");
    let high_watermark = log.high_watermark();
    let bytes = log
        .read(0, u64::MAX >> 1, high_watermark, true)
        .expect("read")
        .records
        .map(|slice| slice.to_bytes().expect("bytes"))
        .unwrap_or_default();
    (bytes, high_watermark)
}

fn index_of(brokers: &[RunningBroker], node: i32) -> usize {
    usize::try_from(node - 1)
        .expect("node ids start at 1")
        .min(brokers.len() - 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_replicate_and_a_new_leader_has_every_acknowledged_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut brokers = start_cluster(dir.path()).await;
    create_topic(&brokers[0]).await;
    wait_until("the partition has a leader and a full ISR", || async {
        leader_and_isr(&brokers[0])
            .await
            .is_some_and(|(_, isr)| isr.len() == 3)
    })
    .await;
    let (leader, _) = leader_and_isr(&brokers[0]).await.expect("a leader");
    let leader_index = index_of(&brokers, leader);

    // acks=all completes only once both followers fetched the records.
    let mut client = Client::connect(&brokers[leader_index], "replication-test").await;
    let producer_id = init_producer_id(&mut client).await;
    let mut expected = Vec::new();
    for round in 0..5 {
        let values: Vec<String> = (0..10).map(|index| format!("r{round}-{index}")).collect();
        let code = produce_to_leader(&mut client, producer_id, round * 10, &values).await;
        assert_eq!(code, 0, "acks=all produce {round} refused");
        expected.extend(values);
    }
    assert_eq!(consume_all(&brokers[leader_index]).await, expected);
    let (_, isr) = leader_and_isr(&brokers[leader_index])
        .await
        .expect("a leader");
    assert_eq!(isr.len(), 3, "committed with all three in the ISR");

    // Every follower's log equals the leader's up to the HW.
    wait_until("every replica has the HW at 50", || async {
        brokers.iter().all(|broker| committed_bytes(broker).1 == 50)
    })
    .await;
    let (leader_bytes, _) = committed_bytes(&brokers[leader_index]);
    for broker in &brokers {
        assert_eq!(
            committed_bytes(broker).0,
            leader_bytes,
            "logs agree up to the HW"
        );
    }

    // A follower that stops fetching leaves the ISR after the lag time;
    // writes go on with the other two; it rejoins once it catches up.
    let stuck_index = (leader_index + 1) % 3;
    let stuck_node = i32::try_from(stuck_index + 1).expect("small");
    let fetchers = brokers[stuck_index].replicas();
    let fetchers = fetchers.fetchers().expect("a cluster node fetches");
    fetchers.set_paused(true);
    let values: Vec<String> = (0..5).map(|index| format!("lag-{index}")).collect();
    let started = Instant::now();
    assert_eq!(produce(&mut client, producer_id, 50, &values, -1).await, 0);
    expected.extend(values);
    assert!(
        started.elapsed() >= Duration::from_millis(1_000),
        "acks=all waited for the stuck follower to leave the ISR"
    );
    let (_, isr) = leader_and_isr(&brokers[leader_index])
        .await
        .expect("a leader");
    assert!(
        !isr.contains(&stuck_node),
        "the stuck follower left the ISR: {isr:?}"
    );
    // The leader reports the stuck follower's lag (the metric
    // strom_replica_follower_lag): the records it has not fetched.
    let topic_partition = TopicPartition::new(TOPIC.to_owned(), 0);
    let lags = brokers[leader_index]
        .replicas()
        .get_hosted(&topic_partition)
        .expect("hosted")
        .follower_lags();
    let stuck_lag = lags
        .iter()
        .find(|(replica, _)| *replica == stuck_node)
        .map(|(_, lag)| *lag);
    assert!(
        stuck_lag.is_some_and(|lag| lag >= 5),
        "the stuck follower's lag: {lags:?}"
    );
    fetchers.set_paused(false);
    wait_until("the follower rejoins the ISR", || async {
        leader_and_isr(&brokers[leader_index])
            .await
            .is_some_and(|(_, isr)| isr.contains(&stuck_node))
    })
    .await;
    // The leader counted both committed changes (IsrShrinksPerSec and
    // IsrExpandsPerSec); the counters are bumped just after the commit.
    wait_until("the leader counts the shrink and the expansion", || async {
        let (shrinks, expands) = brokers[leader_index].replicas().isr_changes();
        shrinks >= 1 && expands >= 1
    })
    .await;

    // Both followers stuck: the write appended meanwhile is answered
    // NOT_ENOUGH_REPLICAS_AFTER_APPEND once the ISR shrinks below
    // min.insync.replicas (2); the next acks=all write is refused before
    // the append, and acks=1 still writes.
    let follower_indexes: Vec<usize> = (0..3).filter(|index| *index != leader_index).collect();
    for index in &follower_indexes {
        brokers[*index]
            .replicas()
            .fetchers()
            .expect("fetchers")
            .set_paused(true);
    }
    let values: Vec<String> = (0..2).map(|index| format!("alone-{index}")).collect();
    assert_eq!(produce(&mut client, producer_id, 55, &values, -1).await, 20);
    expected.extend(values);
    let log_end = || {
        brokers[leader_index]
            .replicas()
            .logs()
            .get(&TopicPartition::new(TOPIC.to_owned(), 0))
            .expect("hosted")
            .read()
            .expect("log lock")
            .log_end_offset()
    };
    let before = log_end();
    let values = vec!["refused".to_owned()];
    assert_eq!(produce(&mut client, producer_id, 57, &values, -1).await, 19);
    assert_eq!(log_end(), before, "nothing stored");
    let values = vec!["acks-one".to_owned()];
    assert_eq!(produce(&mut client, producer_id, 57, &values, 1).await, 0);
    expected.extend(values);
    for index in &follower_indexes {
        brokers[*index]
            .replicas()
            .fetchers()
            .expect("fetchers")
            .set_paused(false);
    }
    wait_until("both followers rejoin the ISR", || async {
        leader_and_isr(&brokers[leader_index])
            .await
            .is_some_and(|(_, isr)| isr.len() == 3)
    })
    .await;

    // The leader's broker stops: a follower from the ISR takes over with
    // every acknowledged record.
    let old_leader = brokers.remove(leader_index);
    drop(client);
    old_leader.shutdown().await;
    wait_until("another broker leads", || async {
        leader_and_isr(&brokers[0])
            .await
            .is_some_and(|(id, _)| id != leader)
    })
    .await;
    let (new_leader, _) = leader_and_isr(&brokers[0]).await.expect("a leader");
    let new_index = brokers
        .iter()
        .position(|broker| broker.replicas().node_id() == new_leader)
        .expect("the new leader runs");
    // Its HW catches up once the remaining follower fetches from it.
    wait_until(
        "the new leader serves every acknowledged record",
        || async { consume_all(&brokers[new_index]).await == expected },
    )
    .await;
    // And it takes acks=all writes with its ISR.
    let mut client = Client::connect(&brokers[new_index], "replication-test").await;
    let values = vec!["after-failover".to_owned()];
    let producer_id = init_producer_id(&mut client).await;
    assert_eq!(
        produce_to_leader(&mut client, producer_id, 0, &values).await,
        0
    );
    expected.extend(values);
    assert_eq!(consume_all(&brokers[new_index]).await, expected);
    for broker in brokers {
        broker.shutdown().await;
    }
}

fn log_end_offset(broker: &RunningBroker) -> i64 {
    broker
        .replicas()
        .logs()
        .get(&TopicPartition::new(TOPIC.to_owned(), 0))
        .expect("hosted")
        .read()
        .expect("log lock")
        .log_end_offset()
}

fn node_of(broker: &RunningBroker) -> i32 {
    broker.replicas().node_id()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_leader_truncates_its_unreplicated_tail_when_it_follows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut brokers, voters) = start_cluster_keeping_ports(dir.path()).await;
    create_topic(&brokers[0]).await;
    wait_until("a full ISR", || async {
        leader_and_isr(&brokers[0])
            .await
            .is_some_and(|(_, isr)| isr.len() == 3)
    })
    .await;
    let (leader, _) = leader_and_isr(&brokers[0]).await.expect("a leader");
    let leader_index = index_of(&brokers, leader);
    let mut client = Client::connect(&brokers[leader_index], "replication-test").await;
    let producer_id = init_producer_id(&mut client).await;
    let values: Vec<String> = (0..10).map(|index| format!("shared-{index}")).collect();
    assert_eq!(
        produce_to_leader(&mut client, producer_id, 0, &values).await,
        0
    );
    let followers: Vec<i32> = brokers
        .iter()
        .map(node_of)
        .filter(|node| *node != leader)
        .collect();
    let broker_of = |brokers: &[RunningBroker], node: i32| {
        brokers
            .iter()
            .position(|broker| node_of(broker) == node)
            .expect("running")
    };
    // One follower falls out of the ISR.
    let (lagging, in_sync) = (followers[0], followers[1]);
    brokers[broker_of(&brokers, lagging)]
        .replicas()
        .fetchers()
        .expect("fetchers")
        .set_paused(true);
    wait_until("the lagging follower leaves the ISR", || async {
        leader_and_isr(&brokers[leader_index])
            .await
            .is_some_and(|(_, isr)| !isr.contains(&lagging))
    })
    .await;
    // The other one misses a tail the leader writes with acks=1, and the
    // leader's broker stops before anyone fetched it.
    brokers[broker_of(&brokers, in_sync)]
        .replicas()
        .fetchers()
        .expect("fetchers")
        .set_paused(true);
    let tail: Vec<String> = (0..3).map(|index| format!("tail-{index}")).collect();
    assert_eq!(produce(&mut client, producer_id, 10, &tail, 1).await, 0);
    assert_eq!(log_end_offset(&brokers[leader_index]), 13);
    drop(client);
    let old_leader = brokers.remove(leader_index);
    old_leader.shutdown().await;
    for broker in &brokers {
        broker
            .replicas()
            .fetchers()
            .expect("fetchers")
            .set_paused(false);
    }
    wait_until("the in-sync follower leads", || async {
        leader_and_isr(&brokers[0])
            .await
            .is_some_and(|(id, _)| id == in_sync)
    })
    .await;
    let new_index = broker_of(&brokers, in_sync);
    wait_until("the new leader has two in sync", || async {
        leader_and_isr(&brokers[new_index])
            .await
            .is_some_and(|(_, isr)| isr.len() >= 2)
    })
    .await;
    let mut client = Client::connect(&brokers[new_index], "replication-test").await;
    let producer_id = init_producer_id(&mut client).await;
    let values = vec!["new-0".to_owned(), "new-1".to_owned()];
    assert_eq!(
        produce_to_leader(&mut client, producer_id, 0, &values).await,
        0
    );
    assert_eq!(log_end_offset(&brokers[new_index]), 12);

    // The old leader comes back and follows: its tail (offsets 10..13 of
    // the old epoch) goes, and nothing before it.
    let port = voters.ports[&u32::try_from(leader).expect("positive")];
    let restarted = strom_broker::broker::start(node_config(
        dir.path(),
        u32::try_from(leader).expect("positive"),
        &voters.voters,
        port,
    ))
    .await
    .expect("restarted");
    wait_until("the old leader's log equals the new leader's", || async {
        log_end_offset(&restarted) == 12
            && committed_bytes(&restarted) == committed_bytes(&brokers[new_index])
    })
    .await;
    let (bytes, high_watermark) = committed_bytes(&restarted);
    assert_eq!(high_watermark, 12);
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("tail-"), "the unreplicated tail is gone");
    assert!(text.contains("shared-9") && text.contains("new-1"));
    restarted.shutdown().await;
    for broker in brokers {
        broker.shutdown().await;
    }
}

fn log_start_offset(broker: &RunningBroker) -> i64 {
    broker
        .replicas()
        .logs()
        .get(&TopicPartition::new(TOPIC.to_owned(), 0))
        .expect("hosted")
        .read()
        .expect("log lock")
        .log_start_offset()
}

/// A follower away while the leader's log start moved past everything it
/// holds (DeleteRecords here; retention, or a tiered log's local
/// retention, alike) is answered OFFSET_OUT_OF_RANGE with the leader's
/// log start, starts its log over there and rejoins the ISR, instead of
/// retrying its fetch forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let brokers = start_cluster(dir.path()).await;
    create_topic(&brokers[0]).await;
    wait_until("a full ISR", || async {
        leader_and_isr(&brokers[0])
            .await
            .is_some_and(|(_, isr)| isr.len() == 3)
    })
    .await;
    let (leader, _) = leader_and_isr(&brokers[0]).await.expect("a leader");
    let leader_index = index_of(&brokers, leader);
    let mut client = Client::connect(&brokers[leader_index], "replication-test").await;
    let producer_id = init_producer_id(&mut client).await;
    let first: Vec<String> = (0..10).map(|index| format!("early-{index}")).collect();
    assert_eq!(
        produce_to_leader(&mut client, producer_id, 0, &first).await,
        0
    );
    let away = brokers
        .iter()
        .map(node_of)
        .find(|node| *node != leader)
        .expect("a follower");
    let away_index = index_of(&brokers, away);
    wait_until("the follower has the first records", || async {
        log_end_offset(&brokers[away_index]) == 10
    })
    .await;
    let pause = |paused: bool| {
        brokers[away_index]
            .replicas()
            .fetchers()
            .expect("fetchers")
            .set_paused(paused);
    };
    pause(true);
    wait_until("the paused follower leaves the ISR", || async {
        leader_and_isr(&brokers[leader_index])
            .await
            .is_some_and(|(_, isr)| !isr.contains(&away))
    })
    .await;
    let later: Vec<String> = (0..10).map(|index| format!("later-{index}")).collect();
    assert_eq!(produce(&mut client, producer_id, 10, &later, -1).await, 0);
    // The leader's log now starts at 15, above the follower's end (10).
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(15),
            ])]);
    match client.send(Request::DeleteRecords(request), 2).await {
        Response::DeleteRecords(response) => {
            let partition = &response.topics[0].partitions[0];
            assert_eq!((partition.error_code, partition.low_watermark), (0, 15));
        }
        other => panic!("not a DeleteRecords response: {other:?}"),
    }
    assert_eq!(log_start_offset(&brokers[leader_index]), 15);
    pause(false);
    wait_until("the follower rejoins the ISR", || async {
        leader_and_isr(&brokers[leader_index])
            .await
            .is_some_and(|(_, isr)| isr.contains(&away))
    })
    .await;
    // The leader's start (15) lies inside the batch 10..20: the follower's
    // log starts at that batch, as Kafka's follower's does.
    assert_eq!(log_start_offset(&brokers[away_index]), 10);
    assert_eq!(log_end_offset(&brokers[away_index]), 20);
    drop(client);
    for broker in brokers {
        broker.shutdown().await;
    }
}
