//! The metrics, health and console listener (`strom.metrics.listener`) over
//! real sockets: what the exposition counts after produce and fetch
//! requests, readiness, HTTP errors for bad input that leave the Kafka
//! listener undisturbed, and counters starting again after a restart.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use strom_broker::RunningBroker;
use strom_protocol::kafka::messages::create_topics_request::CreatableTopic;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common;

use common::{config, sample, Client, TIMEOUT};

const TOPIC: &str = "metered";

fn name(text: &str) -> TopicName {
    TopicName(StrBytes::from_string(text.to_owned()))
}

async fn start(dir: &std::path::Path) -> RunningBroker {
    let config = config(
        dir,
        &[
            ("strom.metrics.listener", "http://127.0.0.1:0"),
            ("offsets.topic.num.partitions", "3"),
        ],
    );
    strom_broker::start(config).await.expect("broker starts")
}

/// One HTTP/1.1 exchange: (status, body).
async fn http(address: SocketAddr, request: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        answer
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .expect("answer in time");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn get(address: SocketAddr, path: &str) -> (u16, String) {
    http(
        address,
        &format!("GET {path} HTTP/1.1\r\nHost: strom\r\nConnection: close\r\n\r\n"),
    )
    .await
}

async fn create_topic(client: &mut Client, partitions: i32) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(TOPIC))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    let Response::CreateTopics(response) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(response.topics[0].error_code, 0);
}

/// Produces `records` records of 100 bytes to `partition`; returns the
/// error code and the batch's size in bytes.
async fn produce(client: &mut Client, partition: i32, records: usize) -> (i16, usize) {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for _ in 0..records {
        builder
            .append(1_000, None, Some(&[7u8; 100]), &[])
            .expect("append");
    }
    let batch = builder.build().expect("build");
    let size = batch.len();
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    (
        response.responses[0].partition_responses[0].error_code,
        size,
    )
}

/// Fetches partition 0 from offset 0; returns the record bytes received.
async fn fetch(client: &mut Client) -> usize {
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let Response::Fetch(response) = client.send(Request::Fetch(request), 12).await else {
        panic!("not a Fetch response");
    };
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    data.records.as_ref().map_or(0, |records| records.len())
}

async fn metrics(broker: &RunningBroker) -> String {
    let address = broker.metrics_address().expect("a metrics listener");
    let (status, body) = get(address, "/metrics").await;
    assert_eq!(status, 200);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exposition_counts_what_was_produced_and_fetched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let mut client = Client::connect(&broker, "metrics-test").await;
    create_topic(&mut client, 2).await;
    let mut bytes_in = 0;
    for partition in [0, 1, 0] {
        let (code, size) = produce(&mut client, partition, 5).await;
        assert_eq!(code, 0);
        bytes_in += size;
    }
    let (code, _) = produce(&mut client, 7, 5).await;
    assert_ne!(code, 0, "partition 7 does not exist");
    let bytes_out = fetch(&mut client).await;
    assert!(bytes_out > 0);
    let text = metrics(&broker).await;
    let topic = |metric: &str| sample(&text, &format!("{metric}{{topic=\"{TOPIC}\"}}"));
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_messagesin_total"),
        Some(15.0)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_bytesin_total"),
        Some(bytes_in as f64)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_bytesout_total"),
        Some(bytes_out as f64)
    );
    let produce_series = |metric: &str| format!("{metric}{{request=\"Produce\"}}");
    assert_eq!(
        sample(
            &text,
            &produce_series("kafka_network_requestmetrics_requests_total")
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"NONE\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &produce_series("kafka_network_requestmetrics_totaltime_seconds_count")
        ),
        Some(4.0)
    );
    // Each answer's write to the socket was timed (before the client read it).
    assert_eq!(
        sample(
            &text,
            &produce_series("kafka_network_requestmetrics_responsesendtime_seconds_count")
        ),
        Some(4.0)
    );
    // 2 partitions of the topic and 3 of __consumer_offsets, all led here.
    assert_eq!(
        sample(&text, "kafka_server_replicamanager_leadercount"),
        Some(5.0)
    );
    assert_eq!(
        sample(&text, "kafka_server_replicamanager_partitioncount"),
        Some(5.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_server_replicamanager_underreplicatedpartitions"
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_controller_kafkacontroller_offlinepartitionscount"
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "kafka_server_replicamanager_reassigningpartitions"),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "kafka_controller_kafkacontroller_activecontrollercount"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("kafka_log_log_logendoffset{{topic=\"{TOPIC}\",partition=\"0\"}}")
        ),
        Some(10.0)
    );
    assert!(sample(&text, "kafka_server_socket_server_metrics_connections").unwrap_or(0.0) >= 1.0);
    // Classic text format unless OpenMetrics is asked for.
    assert!(text.contains("# TYPE kafka_server_brokertopicmetrics_messagesin_total counter\n"));
    assert!(!text.contains("# EOF"));
    let address = broker.metrics_address().expect("a metrics listener");
    let (status, openmetrics) = http(
        address,
        "GET /metrics HTTP/1.1\r\nHost: strom\r\nAccept: application/openmetrics-text;version=1.0.0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    assert!(openmetrics.contains("# TYPE kafka_server_brokertopicmetrics_messagesin counter\n"));
    assert!(openmetrics.ends_with("# EOF\n"));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_live_and_ready() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let address = broker.metrics_address().expect("a metrics listener");
    assert_eq!(get(address, "/health/live").await.0, 200);
    let (status, body) = get(address, "/health/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"ready\":true"), "{body}");
    broker.shutdown().await;
    // Once stopped, nothing listens any more.
    assert!(TcpStream::connect(address).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_http_input_gets_http_errors_and_leaves_kafka_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let address = broker.metrics_address().expect("a metrics listener");
    assert_eq!(get(address, "/nowhere").await.0, 404);
    assert_eq!(get(address, "/metrics/../../etc/passwd").await.0, 404);
    let post =
        "POST /metrics HTTP/1.1\r\nHost: strom\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(http(address, post).await.0, 405);
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nHost: strom\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    assert_eq!(http(address, &huge).await.0, 431);
    let garbage = "\u{1}\u{2}\u{3} not http at all\r\n\r\n";
    assert_eq!(http(address, garbage).await.0, 400);

    // Slow clients that never finish their headers, while Kafka clients
    // are served as usual.
    let mut slow = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(b"GET /metr").await.expect("write");
        slow.push(stream);
    }
    let mut client = Client::connect(&broker, "during-slow-http").await;
    let started = Instant::now();
    let Response::ApiVersions(versions) = client
        .send(Request::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    else {
        panic!("not an ApiVersions response");
    };
    assert_eq!(versions.error_code, 0);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        get(address, "/health/live").await.0,
        200,
        "others are served meanwhile"
    );
    for mut stream in slow {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(
            strom_observability::http::HEADER_READ_TIMEOUT + TIMEOUT,
            stream.read_to_end(&mut rest),
        )
        .await;
        assert!(closed.is_ok(), "a slow client is cut off");
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_counters_start_again_and_gauges_are_right() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(dir.path()).await;
    let mut client = Client::connect(&broker, "before-restart").await;
    create_topic(&mut client, 1).await;
    assert_eq!(produce(&mut client, 0, 4).await.0, 0);
    drop(client);
    broker.shutdown().await;

    let broker = start(dir.path()).await;
    let text = metrics(&broker).await;
    let messages_in =
        format!("kafka_server_brokertopicmetrics_messagesin_total{{topic=\"{TOPIC}\"}}");
    assert_eq!(sample(&text, &messages_in), Some(0.0));
    assert_eq!(
        sample(
            &text,
            &format!("kafka_log_log_logendoffset{{topic=\"{TOPIC}\",partition=\"0\"}}")
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(&text, "kafka_server_replicamanager_leadercount"),
        Some(4.0)
    );
    let mut client = Client::connect(&broker, "after-restart").await;
    assert_eq!(produce(&mut client, 0, 2).await.0, 0);
    let text = metrics(&broker).await;
    assert_eq!(sample(&text, &messages_in), Some(2.0));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_setting_no_listener_is_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = strom_broker::start(config(dir.path(), &[]))
        .await
        .expect("broker starts");
    assert_eq!(broker.metrics_address(), None);
    broker.shutdown().await;
}
