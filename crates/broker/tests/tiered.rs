//! Tiered storage (KIP-405) over a real socket: a topic with
//! `remote.storage.enable`, tiny segments and a local retention far below
//! its data; every record is fetched from offset 0 across both tiers,
//! ListOffsets answers earliest (-2) from the remote tier and earliest-local
//! (-4) from the local log, timestamps are found in the remote range, and a
//! missing remote object fails only its own partition of a fetch.

use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder, RecordBatches};

use crate::common;

use common::{config, create_topic_answer, Client};

const TOPIC: &str = "tiered";
const BATCHES: usize = 40;
const RECORDS_PER_BATCH: usize = 5;

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn timestamp(batch: usize) -> i64 {
    1_700_000_000_000 + batch as i64 * 10
}

fn value(offset: usize) -> Vec<u8> {
    let mut value = format!("record-{offset}-").into_bytes();
    value.resize(200, b'v');
    value
}

async fn produce(client: &mut Client, partition: i32, batch: usize) {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for index in 0..RECORDS_PER_BATCH {
        let offset = batch * RECORDS_PER_BATCH + index;
        builder
            .append(timestamp(batch), Some(b"key"), Some(&value(offset)), &[])
            .expect("append");
    }
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(builder.build().expect("build")))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
}

async fn list_offset(client: &mut Client, timestamp: i64) -> (i16, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name())
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let Response::ListOffsets(response) = client.send(Request::ListOffsets(request), 8).await
    else {
        panic!("not a ListOffsets response");
    };
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.offset)
}

/// The broker's Prometheus exposition (one HTTP/1.1 GET).
async fn metrics(broker: &strom_broker::RunningBroker) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = broker.metrics_address().expect("a metrics listener");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let request = "GET /metrics HTTP/1.1\r\nHost: strom\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Asks ListOffsets(`timestamp`) until `done` holds of the answer (30 s at most).
async fn poll_until(
    client: &mut Client,
    what: &str,
    done: impl Fn((i16, i64)) -> bool,
    timestamp: i64,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done(list_offset(client, timestamp).await) {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn fetch(client: &mut Client, partitions: &[(i32, i64)]) -> FetchResponse {
    let wanted = partitions
        .iter()
        .map(|(partition, offset)| {
            FetchPartition::default()
                .with_partition(*partition)
                .with_fetch_offset(*offset)
                .with_partition_max_bytes(2_000)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name())
            .with_partitions(wanted)]);
    let Response::Fetch(response) = client.send(Request::Fetch(request), 12).await else {
        panic!("not a Fetch response");
    };
    response
}

/// Every record of partition 0 from offset 0: `(offset, timestamp, value)`.
async fn fetch_all(client: &mut Client, end: i64) -> Vec<(i64, i64, Vec<u8>)> {
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < end {
        let response = fetch(client, &[(0, offset)]).await;
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0, "fetch at {offset}");
        let before = records.len();
        for batch in RecordBatches::new(partition.records.clone().unwrap_or_default()) {
            let batch = batch.expect("batch");
            for record in batch.records().expect("records") {
                let record = record.expect("record");
                let at = record.offset(batch.base_offset());
                if at >= offset {
                    let value = record.value().map(<[u8]>::to_vec).unwrap_or_default();
                    records.push((at, batch.record_timestamp(&record), value));
                }
            }
            offset = batch.next_offset();
        }
        assert!(records.len() > before, "no progress at {offset}");
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_read_across_both_tiers() {
    let dir = tempfile::tempdir().expect("dir");
    let broker = strom_broker::start(config(
        dir.path(),
        &[
            ("remote.log.storage.system.enable", "true"),
            ("remote.log.manager.task.interval.ms", "50"),
            ("log.retention.check.interval.ms", "50"),
            ("strom.metrics.listener", "http://127.0.0.1:0"),
        ],
    ))
    .await
    .expect("start");
    let mut client = Client::connect(&broker, "tiered").await;
    let created = create_topic_answer(
        &mut client,
        TOPIC,
        2,
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "4096"),
            ("local.retention.bytes", "1"),
            ("file.delete.delay.ms", "0"),
            // The records' timestamps are from 2023: kept by time forever.
            ("retention.ms", "-1"),
        ],
    )
    .await;
    assert_eq!(created.topics[0].error_code, 0);
    for batch in 0..BATCHES {
        produce(&mut client, 0, batch).await;
    }
    produce(&mut client, 1, 0).await;
    let end = (BATCHES * RECORDS_PER_BATCH) as i64;
    poll_until(
        &mut client,
        "local segments are deleted after their copies",
        |(_, local)| local > 100,
        -4,
    )
    .await;
    assert_eq!(
        list_offset(&mut client, -2).await,
        (0, 0),
        "earliest is remote"
    );
    let (code, last_tiered) = list_offset(&mut client, -5).await;
    assert_eq!(code, 0);
    assert!(last_tiered >= list_offset(&mut client, -4).await.1 - 1);
    // By timestamp, inside the remote range: batch 3 starts at offset 15.
    assert_eq!(list_offset(&mut client, timestamp(3)).await, (0, 15));
    assert_eq!(list_offset(&mut client, timestamp(3) - 5).await, (0, 15));

    let records = fetch_all(&mut client, end).await;
    assert_eq!(records.len(), end as usize);
    for (index, (offset, stamp, value)) in records.iter().enumerate() {
        assert_eq!(*offset, index as i64);
        assert_eq!(*stamp, timestamp(index / RECORDS_PER_BATCH));
        assert_eq!(value, &self::value(index));
    }

    let text = metrics(&broker).await;
    let value = |name: &str| common::sample(&text, name).unwrap_or(-1.0);
    assert!(
        value("kafka_server_brokertopicmetrics_remotecopybytes_total") > 0.0,
        "{text}"
    );
    assert!(value("kafka_server_brokertopicmetrics_remotefetchbytes_total") > 0.0);
    assert_eq!(
        value("kafka_server_brokertopicmetrics_remotefetcherrors_total"),
        0.0
    );
    assert!(value("kafka_server_brokertopicmetrics_remotecopylagbytes") >= 0.0);

    // A lost remote object: KAFKA_STORAGE_ERROR for that partition only
    // (after a restart, which empties the chunk cache).
    broker.shutdown().await;
    let remote = dir.path().join("remote-storage").join(format!("{TOPIC}-0"));
    for entry in std::fs::read_dir(&remote).expect("remote dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|extension| extension == "log") {
            std::fs::remove_file(path).expect("remove");
        }
    }
    let broker = strom_broker::start(config(
        dir.path(),
        &[("remote.log.storage.system.enable", "true")],
    ))
    .await
    .expect("restart");
    let mut client = Client::connect(&broker, "tiered").await;
    poll_until(
        &mut client,
        "the partition is led again",
        |answer| answer == (0, end),
        -1,
    )
    .await;
    let response = fetch(&mut client, &[(0, 0), (1, 0)]).await;
    let partitions = &response.responses[0].partitions;
    assert_eq!(
        partitions[0].error_code,
        ErrorCode::KafkaStorageError.code()
    );
    assert_eq!(partitions[1].error_code, 0);
    assert!(partitions[1]
        .records
        .as_ref()
        .is_some_and(|records| !records.is_empty()));

    // Deleting the topic deletes its remote segments and their records.
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topic_names(vec![name()]);
    let Response::DeleteTopics(response) = client.send(Request::DeleteTopics(request), 5).await
    else {
        panic!("not a DeleteTopics response");
    };
    assert_eq!(response.responses[0].error_code, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_dir(&remote).map_or(0, |entries| entries.count()) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "remote data outlived its topic"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    broker.shutdown().await;
}
