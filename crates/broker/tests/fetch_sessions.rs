//! Incremental fetch sessions (KIP-227) and the data path over a real
//! socket: raw Fetch requests with session ids and epochs, large record
//! payloads (sent with vectored writes), and `flush.messages=1` appends
//! (flushed off the async workers).

use std::time::Duration;

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{encode_request_frame, request_header, Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};

use crate::common;

use common::{config, create_topic_answer, Client};

const TOPIC: &str = "sessions";
const FETCH_VERSION: i16 = 12;
/// Large enough that the response shares the record bytes (vectored write).
const VALUE_BYTES: usize = 3_000;

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

async fn create_topic(client: &mut Client, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let response = create_topic_answer(client, topic, partitions, configs).await;
    assert_eq!(response.topics[0].error_code, 0);
}

fn value(partition: i32, index: usize) -> Vec<u8> {
    let mut value = format!("p{partition}-r{index}-").into_bytes();
    value.resize(VALUE_BYTES, b'x' + (index % 3) as u8);
    value
}

/// A Produce of `count` records (values from [`value`]) to `partition`.
fn produce_request(topic: &str, partition: i32, count: usize, acks: i16) -> ProduceRequest {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for index in 0..count {
        builder
            .append(1_000, None, Some(&value(partition, index)), &[])
            .expect("append");
    }
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(builder.build().expect("build")))])])
}

/// Produces `count` records (values from [`value`]) to `partition`; returns
/// the base offset.
async fn produce(client: &mut Client, topic: &str, partition: i32, count: usize, acks: i16) -> i64 {
    let request = produce_request(topic, partition, count, acks);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
    partition.base_offset
}

fn wanted(partition: i32, fetch_offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(fetch_offset)
        .with_partition_max_bytes(1 << 20)
}

/// A Fetch in session `session_id` at `epoch` naming `partitions` of TOPIC.
fn fetch_request(
    session_id: i32,
    epoch: i32,
    partitions: Vec<FetchPartition>,
    max_wait_ms: i32,
) -> FetchRequest {
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(partitions)]
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

async fn fetch(client: &mut Client, request: FetchRequest) -> FetchResponse {
    let Response::Fetch(response) = client.send(Request::Fetch(request), FETCH_VERSION).await
    else {
        panic!("not a Fetch response");
    };
    response
}

/// (partition, record values) of every partition in the response.
fn returned(response: &FetchResponse) -> Vec<(i32, Vec<Vec<u8>>)> {
    response
        .responses
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .map(|partition| {
            let mut values = Vec::new();
            for batch in RecordBatches::new(partition.records.clone().unwrap_or_default()) {
                let batch = batch.expect("batch");
                for record in batch.records().expect("records") {
                    let record = record.expect("record");
                    values.push(record.value().map(<[u8]>::to_vec).unwrap_or_default());
                }
            }
            (partition.partition_index, values)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_session_returns_only_partitions_with_news() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "session-test").await;
    create_topic(&mut client, TOPIC, 2, &[]).await;
    produce(&mut client, TOPIC, 0, 3, 1).await;

    // A full fetch opens a session and returns both partitions.
    let full = fetch(
        &mut client,
        fetch_request(0, 0, vec![wanted(0, 0), wanted(1, 0)], 0),
    )
    .await;
    assert_eq!(full.error_code, 0);
    let session_id = full.session_id;
    assert!(session_id > 0, "a session was opened");
    let expected: Vec<Vec<u8>> = (0..3).map(|index| value(0, index)).collect();
    assert_eq!(returned(&full), vec![(0, expected), (1, Vec::new())]);

    // Epoch 1 moves partition 0's offset: nothing new anywhere.
    let quiet = fetch(
        &mut client,
        fetch_request(session_id, 1, vec![wanted(0, 3)], 0),
    )
    .await;
    assert_eq!((quiet.error_code, quiet.session_id), (0, session_id));
    assert!(returned(&quiet).is_empty(), "{:?}", returned(&quiet));

    // Records on partition 1: an empty incremental request returns them alone.
    produce(&mut client, TOPIC, 1, 2, 1).await;
    let news = fetch(&mut client, fetch_request(session_id, 2, Vec::new(), 0)).await;
    let expected: Vec<Vec<u8>> = (0..2).map(|index| value(1, index)).collect();
    assert_eq!(returned(&news), vec![(1, expected)]);

    // Wrong epoch, unknown session.
    let wrong = fetch(&mut client, fetch_request(session_id, 7, Vec::new(), 0)).await;
    assert_eq!(wrong.error_code, ErrorCode::InvalidFetchSessionEpoch.code());
    let unknown = fetch(&mut client, fetch_request(session_id ^ 1, 1, Vec::new(), 0)).await;
    assert_eq!(unknown.error_code, ErrorCode::FetchSessionIdNotFound.code());

    // Forget partition 1 (and catch partition 1 up): new records there are
    // no longer returned; partition 0's are.
    let mut forget = fetch_request(session_id, 3, Vec::new(), 0);
    forget.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(name(TOPIC))
        .with_partitions(vec![1])];
    assert!(returned(&fetch(&mut client, forget).await).is_empty());
    produce(&mut client, TOPIC, 1, 1, 1).await;
    produce(&mut client, TOPIC, 0, 1, 1).await;
    let after = fetch(&mut client, fetch_request(session_id, 4, Vec::new(), 0)).await;
    assert_eq!(returned(&after), vec![(0, vec![value(0, 0)])]);

    // The final epoch closes the session and answers in full without one.
    let closing = fetch(
        &mut client,
        fetch_request(session_id, -1, vec![wanted(1, 0)], 0),
    )
    .await;
    assert_eq!(closing.session_id, 0);
    assert_eq!(returned(&closing)[0].1.len(), 3);
    let gone = fetch(&mut client, fetch_request(session_id, 5, Vec::new(), 0)).await;
    assert_eq!(gone.error_code, ErrorCode::FetchSessionIdNotFound.code());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_long_poll_wakes_on_an_append() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "session-poll").await;
    let mut producer = Client::connect(&broker, "session-producer").await;
    create_topic(&mut client, TOPIC, 2, &[]).await;
    let full = fetch(
        &mut client,
        fetch_request(0, 0, vec![wanted(0, 0), wanted(1, 0)], 0),
    )
    .await;
    let session_id = full.session_id;
    assert!(session_id > 0);
    let started = std::time::Instant::now();
    let waiting = tokio::spawn(async move {
        let response = fetch(
            &mut client,
            fetch_request(session_id, 1, Vec::new(), 10_000),
        )
        .await;
        (response, client)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    produce(&mut producer, TOPIC, 1, 4, 1).await;
    let (response, _client) = waiting.await.expect("fetch task");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the append"
    );
    let expected: Vec<Vec<u8>> = (0..4).map(|index| value(1, index)).collect();
    assert_eq!(returned(&response), vec![(1, expected)]);
    broker.shutdown().await;
}

/// A Fetch that parks (nothing to read yet) and a Produce pipelined right
/// behind it on the same connection: on a single-threaded runtime the
/// Produce is appended before the parked fetch's task first runs, so the
/// append happens between the fetch's first read and its subscription to
/// the high watermark. The fetch must still answer at once with the records
/// (it used to miss that wake-up and wait out its whole `max_wait_ms`).
#[tokio::test(flavor = "current_thread")]
async fn a_fetch_parked_just_before_an_append_is_woken_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "pipelined").await;
    create_topic(&mut client, TOPIC, 1, &[]).await;
    let produce = produce_request(TOPIC, 0, 3, 1);
    let max_wait_ms = 8_000;
    let started = std::time::Instant::now();
    let answers = client
        .pipeline(vec![
            (
                Request::Fetch(fetch_request(0, -1, vec![wanted(0, 0)], max_wait_ms)),
                FETCH_VERSION,
            ),
            (Request::Produce(produce), 9),
        ])
        .await;
    let elapsed = started.elapsed();
    let Response::Fetch(fetched) = &answers[0] else {
        panic!("not a Fetch response first");
    };
    let Response::Produce(produced) = &answers[1] else {
        panic!("not a Produce response second");
    };
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let expected: Vec<Vec<u8>> = (0..3).map(|index| value(0, index)).collect();
    assert_eq!(returned(fetched), vec![(0, expected)]);
    assert!(
        elapsed < Duration::from_millis(u64::from(max_wait_ms as u32) / 2),
        "the parked fetch waited {elapsed:?} instead of waking on the append"
    );
    broker.shutdown().await;
}

/// Sends one request on a new connection and does not wait for an answer
/// (a Produce with `acks=0` gets none).
async fn send_without_answer(broker: &strom_broker::RunningBroker, request: Request, version: i16) {
    use tokio::io::AsyncWriteExt;
    let header = request_header(&request, version, 1, Some("no-answer"));
    let mut wire = bytes::BytesMut::new();
    encode_request_frame(&header, &request, &mut wire).expect("encode");
    let mut stream = tokio::net::TcpStream::connect(broker.local_addresses()[0])
        .await
        .expect("connect");
    stream.write_all(&wire).await.expect("write");
    stream.flush().await.expect("flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_per_message_appends_are_acknowledged_and_visible() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "flush-test").await;
    create_topic(&mut client, TOPIC, 1, &[("flush.messages", "1")]).await;
    assert_eq!(produce(&mut client, TOPIC, 0, 2, 1).await, 0);
    assert_eq!(produce(&mut client, TOPIC, 0, 3, -1).await, 2);
    // acks=0 has no answer; the flush still completes and the HW follows.
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder
        .append(1_000, None, Some(&value(0, 9)), &[])
        .expect("append");
    let request = ProduceRequest::default()
        .with_acks(0)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(builder.build().expect("build")))])]);
    send_without_answer(&broker, Request::Produce(request), 9).await;
    let mut request = fetch_request(0, -1, vec![wanted(0, 0)], 5_000);
    request.min_bytes = (6 * VALUE_BYTES) as i32;
    let response = fetch(&mut client, request).await;
    let values = &returned(&response)[0].1;
    assert_eq!(values.len(), 6);
    assert_eq!(values[5], value(0, 9));
    assert_eq!(response.responses[0].partitions[0].high_watermark, 6);
    broker.shutdown().await;
}

/// A partition's read of 32 KiB or more is sent from its segment file with
/// `sendfile` in place of a stand-in, a smaller one from memory. Responses
/// that mix both, pipelined on one connection at every Fetch version that
/// names topics, must carry exactly the records produced, each answer whole
/// and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_reads_sent_from_segment_files_arrive_whole_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "zero-copy").await;
    create_topic(&mut client, TOPIC, 3, &[]).await;
    // 300 KB and 180 KB (sent from the files) around 9 KB (read), each in
    // two produces so that the reads span batches.
    let mut expected = Vec::new();
    for (partition, count) in [(0, 100), (1, 3), (2, 60)] {
        let first = count / 2;
        produce(&mut client, TOPIC, partition, first, 1).await;
        produce(&mut client, TOPIC, partition, count - first, 1).await;
        let values: Vec<Vec<u8>> = (0..first)
            .chain(0..count - first)
            .map(|index| value(partition, index))
            .collect();
        expected.push((partition, values));
    }
    let request = fetch_request(0, -1, vec![wanted(0, 0), wanted(1, 0), wanted(2, 0)], 0);
    let versions: Vec<i16> = (4..=12).collect();
    let answers = client
        .pipeline(
            versions
                .iter()
                .map(|version| (Request::Fetch(request.clone()), *version))
                .collect(),
        )
        .await;
    for (version, answer) in versions.iter().zip(&answers) {
        let Response::Fetch(response) = answer else {
            panic!("not a Fetch response at version {version}");
        };
        assert_eq!(returned(response), expected, "version {version}");
    }
    // From the middle of a batch: the whole batch comes back, as Kafka does.
    let response = fetch(&mut client, fetch_request(0, -1, vec![wanted(0, 70)], 0)).await;
    let (_, values) = &returned(&response)[0];
    assert_eq!(values.len(), 50);
    assert_eq!(
        values[0],
        value(0, 0),
        "the second batch starts at offset 50"
    );
    broker.shutdown().await;
}

/// An incremental session whose answers are sent from the segment files:
/// a long poll woken by appends returns the partitions with large news
/// (stand-ins replaced by their ranges), leaves out the quiet one, and the
/// next epoch returns only what is new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_answers_with_large_reads_carry_only_the_news() {
    let dir = tempfile::tempdir().unwrap();
    let broker = strom_broker::start(config(dir.path(), &[])).await.unwrap();
    let mut client = Client::connect(&broker, "zero-copy-session").await;
    let mut producer = Client::connect(&broker, "zero-copy-producer").await;
    create_topic(&mut client, TOPIC, 3, &[]).await;
    let all = vec![wanted(0, 0), wanted(1, 0), wanted(2, 0)];
    let full = fetch(&mut client, fetch_request(0, 0, all, 0)).await;
    let session_id = full.session_id;
    assert!(session_id > 0, "a session was opened");

    // 120 KB on partitions 0 and 2 while an empty incremental fetch waits.
    let waiting = tokio::spawn(async move {
        let answer = fetch(&mut client, fetch_request(session_id, 1, Vec::new(), 5_000)).await;
        (client, answer)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    produce(&mut producer, TOPIC, 0, 40, 1).await;
    produce(&mut producer, TOPIC, 2, 40, 1).await;
    let (mut client, answer) = waiting.await.expect("fetch task");
    let forty = |partition| {
        (0..40)
            .map(|index| value(partition, index))
            .collect::<Vec<_>>()
    };
    let mut news = returned(&answer);
    let mut epoch = 2;
    if news.len() < 2 {
        // The poll woke on partition 0's append alone: ask again, moving
        // partition 0 on.
        assert_eq!(news, vec![(0, forty(0))]);
        let again = fetch(
            &mut client,
            fetch_request(session_id, epoch, vec![wanted(0, 40)], 0),
        )
        .await;
        news.extend(returned(&again));
        epoch += 1;
    }
    // The quiet partition 1 is never in an answer.
    assert_eq!(news, vec![(0, forty(0)), (2, forty(2))]);

    // Both move on to 40; 40 more on partition 2 alone.
    produce(&mut producer, TOPIC, 2, 40, 1).await;
    let moved_on = vec![wanted(0, 40), wanted(2, 40)];
    let next = fetch(&mut client, fetch_request(session_id, epoch, moved_on, 0)).await;
    assert_eq!(next.error_code, 0);
    assert_eq!(returned(&next), vec![(2, forty(2))]);
    broker.shutdown().await;
}
