//! Shutdown closes every log cleanly (the clean-shutdown marker is written,
//! so the next start recovers nothing) after the work that leaves tasks
//! behind (a transaction, whose markers the coordinator writes on tasks of
//! its own; a consumer group), on a single node and on a whole cluster
//! stopped at once, where no stopping broker may take leadership.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strom_broker::{RunningBroker, ShutdownReport};
use strom_controller::image::MetadataImage;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use strom_protocol::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder};
use strom_storage::manager::CLEAN_SHUTDOWN_FILE;

use crate::cluster::{node_config, ports, start_all};
use crate::common::{self, Client, TIMEOUT};

const TOPIC: &str = "orders";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Sends `request` until its error code (read by `code`) is not one a
/// client retries while a coordinator or leader settles.
async fn send_settled(
    client: &mut Client,
    request: Request,
    version: i16,
    code: impl Fn(&Response) -> i16,
) -> Response {
    let retried = [
        ErrorCode::CoordinatorLoadInProgress.code(),
        ErrorCode::CoordinatorNotAvailable.code(),
        ErrorCode::NotCoordinator.code(),
        ErrorCode::NotLeaderOrFollower.code(),
        ErrorCode::ConcurrentTransactions.code(),
    ];
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let response = client.send(request.clone(), version).await;
        if !retried.contains(&code(&response)) || tokio::time::Instant::now() > deadline {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs one committed transaction over every partition of [`TOPIC`],
/// through the broker `client` is connected to (the coordinator of every
/// transactional id and the leader of every partition).
async fn commit_a_transaction(client: &mut Client, partitions: i32) {
    let transactional_id = TransactionalId(text("shutdown-txn"));
    // As a client does first: this creates `__transaction_state`.
    let request = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![text("shutdown-txn")]);
    let response = send_settled(client, Request::FindCoordinator(request), 4, |r| match r {
        Response::FindCoordinator(r) => r.coordinators.first().map_or(0, |c| c.error_code),
        _ => 0,
    })
    .await;
    let Response::FindCoordinator(found) = response else {
        panic!("not a FindCoordinator response");
    };
    assert_eq!(found.coordinators[0].error_code, 0, "{found:?}");
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(transactional_id.clone()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = send_settled(client, Request::InitProducerId(request), 4, |r| match r {
        Response::InitProducerId(r) => r.error_code,
        _ => 0,
    })
    .await;
    let Response::InitProducerId(init) = response else {
        panic!("not an InitProducerId response");
    };
    assert_eq!(init.error_code, 0, "InitProducerId: {init:?}");
    let (producer_id, epoch) = (init.producer_id, init.producer_epoch);
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(transactional_id.clone())
        .with_v3_and_below_producer_id(producer_id)
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partitions((0..partitions).collect())]);
    let Response::AddPartitionsToTxn(added) =
        send_settled(client, Request::AddPartitionsToTxn(request), 3, |_| 0).await
    else {
        panic!("not an AddPartitionsToTxn response");
    };
    for result in added.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
    {
        assert_eq!(result.partition_error_code, 0, "{added:?}");
    }
    let data = (0..partitions)
        .map(|index| {
            let mut batch = RecordBatchBuilder::new(Compression::None)
                .with_producer(producer_id.0, epoch, 0)
                .with_transactional(true);
            batch
                .append(1_000, None, Some(b"in a transaction"), &[])
                .expect("append");
            PartitionProduceData::default()
                .with_index(index)
                .with_records(Some(batch.build().expect("build")))
        })
        .collect();
    let request = ProduceRequest::default()
        .with_transactional_id(Some(transactional_id.clone()))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partition_data(data)]);
    let Response::Produce(produced) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    for partition in &produced.responses[0].partition_responses {
        assert_eq!(partition.error_code, 0, "{produced:?}");
    }
    let request = EndTxnRequest::default()
        .with_transactional_id(transactional_id)
        .with_producer_id(producer_id)
        .with_producer_epoch(epoch)
        .with_committed(true);
    let Response::EndTxn(ended) = send_settled(client, Request::EndTxn(request), 3, |r| match r {
        Response::EndTxn(r) => r.error_code,
        _ => 0,
    })
    .await
    else {
        panic!("not an EndTxn response");
    };
    assert_eq!(ended.error_code, 0, "EndTxn: {ended:?}");
}

/// One member joins `group`, syncs and commits an offset.
async fn run_a_group(client: &mut Client, group: &str) {
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(member))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(b"subscription"))])
    };
    let code = |r: &Response| match r {
        Response::JoinGroup(r) => r.error_code,
        _ => 0,
    };
    let Response::JoinGroup(first) =
        send_settled(client, Request::JoinGroup(join("")), 5, code).await
    else {
        panic!("not a JoinGroup response");
    };
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    let member = first.member_id.to_string();
    let Response::JoinGroup(joined) =
        send_settled(client, Request::JoinGroup(join(&member)), 5, code).await
    else {
        panic!("not a JoinGroup response");
    };
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(text(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(text(&member))
            .with_assignment(Bytes::from_static(b"assignment"))]);
    let Response::SyncGroup(synced) = client.send(Request::SyncGroup(request), 3).await else {
        panic!("not a SyncGroup response");
    };
    assert_eq!(synced.error_code, 0);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(joined.generation_id)
        .with_member_id(text(&member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let Response::OffsetCommit(committed) = client.send(Request::OffsetCommit(request), 8).await
    else {
        panic!("not an OffsetCommit response");
    };
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
}

/// Every partition directory under `log_dir` with the clean-shutdown marker
/// beside them (the marker is one per log directory).
fn assert_closed_cleanly(log_dir: &Path) {
    assert!(
        log_dir.join(CLEAN_SHUTDOWN_FILE).exists(),
        "{} has no clean-shutdown marker",
        log_dir.display()
    );
    let partitions = std::fs::read_dir(log_dir)
        .expect("read log dir")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir() && entry.file_name().to_string_lossy().contains('-'))
        .count();
    assert!(partitions > 0, "{} holds no partition", log_dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_closes_every_log_cleanly_after_a_transaction_and_a_group() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = common::config(
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "3"),
            ("transaction.state.log.num.partitions", "3"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    );
    let broker = strom_broker::start(config.clone()).await.expect("started");
    let mut client = Client::connect(&broker, "shutdown-test").await;
    let created = common::create_topic_answer(&mut client, TOPIC, 3, &[]).await;
    assert_eq!(created.topics[0].error_code, 0);
    commit_a_transaction(&mut client, 3).await;
    run_a_group(&mut client, "shutdown-group").await;
    // The client stays connected: shutdown closes its connection.
    let report = tokio::time::timeout(Duration::from_secs(30), broker.shutdown())
        .await
        .expect("shutdown in time");
    assert!(report.logs_closed_cleanly, "{report:?}");
    assert_eq!(report.leaderships_taken_while_stopping, 0);
    assert_closed_cleanly(dir.path());
    drop(client);

    // The marker is consumed by the next start, which recovers nothing and
    // closes cleanly again.
    let broker = strom_broker::start(config).await.expect("restarted");
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let report = broker.shutdown().await;
    assert!(report.logs_closed_cleanly, "{report:?}");
    assert_closed_cleanly(dir.path());
}

/// Images a node published, collected by a task until it is aborted.
struct ImageRecorder {
    seen: Arc<std::sync::Mutex<Vec<Arc<MetadataImage>>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts collecting every metadata image `broker`'s node publishes.
fn record_images(broker: &RunningBroker) -> ImageRecorder {
    let mut images = broker.controller().subscribe();
    let seen = Arc::new(std::sync::Mutex::new(vec![Arc::clone(
        &images.borrow_and_update(),
    )]));
    let recording = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        while images.changed().await.is_ok() {
            let image = Arc::clone(&images.borrow_and_update());
            recording.lock().expect("images").push(image);
        }
    });
    ImageRecorder { seen, task }
}

/// Checks, over the images in metadata order, that a broker once fenced
/// (every broker here is fenced only by its controlled shutdown) never
/// leads a partition again.
fn assert_no_stopping_broker_elected(images: &[Arc<MetadataImage>]) {
    let mut ordered: BTreeMap<Option<u64>, &Arc<MetadataImage>> = BTreeMap::new();
    for image in images {
        ordered.insert(image.last_offset(), image);
    }
    let mut stopping: BTreeSet<i32> = BTreeSet::new();
    for (offset, image) in ordered {
        stopping.extend(
            image
                .brokers()
                .filter(|broker| broker.fenced)
                .map(|broker| broker.broker_id),
        );
        for topic in image.topics() {
            for (index, partition) in topic.partitions.iter().enumerate() {
                if let Some(leader) = partition.leader {
                    assert!(
                        !stopping.contains(&leader),
                        "at offset {offset:?}, {}-{index} is led by broker {leader}, which asked to shut down",
                        topic.name
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_stopped_at_once_closes_every_log_and_elects_no_stopping_broker() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let ports = ports(3);
    let configs = (1..=3)
        .map(|id| node_config(dir.path(), id, &ports, "broker,controller"))
        .collect();
    let brokers = start_all(configs).await;
    let mut client = Client::connect(&brokers[0], "shutdown-test").await;
    let request = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(text(TOPIC)))
            .with_num_partitions(12)
            .with_replication_factor(3),
    ]);
    let Response::CreateTopics(created) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    drop(client);
    // Every node leads some of the partitions and follows the others.
    common::wait_until("every node hosts the topic's 12 partitions", || {
        let hosted: Vec<usize> = brokers
            .iter()
            .map(|broker| {
                let image = broker.controller().image();
                image.topic_by_name(TOPIC).map_or(0, |topic| {
                    topic
                        .partitions
                        .iter()
                        .filter(|p| p.leader.is_some())
                        .count()
                })
            })
            .collect();
        async move { hosted.iter().all(|count| *count == 12) }
    })
    .await;
    let recorders: Vec<_> = brokers.iter().map(record_images).collect();

    let started = std::time::Instant::now();
    let stops: Vec<tokio::task::JoinHandle<ShutdownReport>> = brokers
        .into_iter()
        .map(|broker| tokio::spawn(broker.shutdown()))
        .collect();
    for (index, stop) in stops.into_iter().enumerate() {
        let report = tokio::time::timeout(Duration::from_secs(30), stop)
            .await
            .expect("shutdown in time")
            .expect("join");
        let node = index + 1;
        assert!(report.logs_closed_cleanly, "node {node}: {report:?}");
        assert_eq!(
            report.leaderships_taken_while_stopping, 0,
            "node {node} took leadership while stopping: {report:?}"
        );
        assert_closed_cleanly(&dir.path().join(format!("node-{node}")));
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    let mut images = Vec::new();
    for recorder in recorders {
        recorder.task.abort();
        let _ = recorder.task.await;
        images.extend(recorder.seen.lock().expect("images").iter().cloned());
    }
    assert!(images.len() > 3, "the stop was seen in the images");
    assert_no_stopping_broker_elected(&images);
}
