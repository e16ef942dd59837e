//! Request frames captured from real clients (confluent-kafka / librdkafka
//! 2.16.1 and kafka-python 3.0.12, see `tests/fixtures/capture.py`) decode to
//! the values the capture script configured.

use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::messages::{decode_request, encode_request};
use strom_protocol::{DecodedRequest, FrameDecoder, Request};

const TOPIC: &str = "fixture-topic";

struct Client {
    file_suffix: &'static str,
    client_id: &'static str,
    software_name: &'static str,
    acks: i16,
    timeout_ms: i32,
}

const CONFLUENT: Client = Client {
    file_suffix: "confluent-kafka",
    client_id: "strom-fixture-confluent",
    software_name: "confluent-kafka-python",
    acks: -1,
    timeout_ms: 15_000,
};

const KAFKA_PYTHON: Client = Client {
    file_suffix: "kafka-python",
    client_id: "strom-fixture-kafka-python",
    software_name: "kafka-python",
    acks: 1,
    timeout_ms: 17_000,
};

fn fixture(name: &str) -> Bytes {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    Bytes::from(std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display())))
}

/// Reads one captured frame through the frame decoder and the request
/// decoder, checks the header, and checks that re-encoding gives the same
/// bytes back.
fn decode_fixture(api: &str, version: i16, client: &Client) -> DecodedRequest {
    let mut wire =
        BytesMut::from(&fixture(&format!("{api}-v{version}-{}.bin", client.file_suffix))[..]);
    let frame = FrameDecoder::default()
        .decode(&mut wire)
        .unwrap()
        .expect("a whole frame");
    assert!(wire.is_empty(), "one frame per fixture");
    let request = decode_request(frame.clone()).unwrap();
    assert_eq!(request.api_version(), version);
    assert_eq!(request.header.client_id.as_deref(), Some(client.client_id));
    let mut encoded = BytesMut::new();
    encode_request(&request.header, &request.body, &mut encoded).unwrap();
    assert_eq!(
        encoded.freeze(),
        frame,
        "{api} v{version} re-encodes byte for byte"
    );
    request
}

fn check_api_versions(version: i16, client: &Client) {
    let request = decode_fixture("api-versions", version, client);
    let Request::ApiVersions(body) = request.body else {
        panic!("not ApiVersions: {:?}", request.body);
    };
    if version >= 3 {
        assert_eq!(body.client_software_name.as_str(), client.software_name);
        assert!(!body.client_software_version.is_empty());
    }
}

fn check_metadata(version: i16, client: &Client) {
    let request = decode_fixture("metadata", version, client);
    assert_eq!(request.api_key(), ApiKey::Metadata);
    let Request::Metadata(body) = request.body else {
        panic!("not Metadata");
    };
    let names: Vec<String> = body
        .topics
        .unwrap_or_default()
        .iter()
        .filter_map(|topic| topic.name.as_ref().map(|name| name.0.to_string()))
        .collect();
    assert!(names.is_empty() || names == [TOPIC], "{names:?}");
}

fn check_produce(version: i16, client: &Client) {
    let request = decode_fixture("produce", version, client);
    let Request::Produce(body) = request.body else {
        panic!("not Produce");
    };
    assert_eq!(body.transactional_id, None);
    assert_eq!(body.acks, client.acks);
    assert_eq!(body.timeout_ms, client.timeout_ms);
    assert_eq!(body.topic_data.len(), 1);
    let topic = &body.topic_data[0];
    assert_eq!(topic.name.0.as_str(), TOPIC);
    assert_eq!(topic.partition_data.len(), 1);
    let partition = &topic.partition_data[0];
    assert_eq!(partition.index, 0);
    let records = partition.records.as_ref().expect("records");
    check_record_batch(records);
}

/// The records field holds record batches v2: base offset (8), batch length
/// (4) covering the rest, magic 2 at byte 16, the record count at byte 57.
fn check_record_batch(records: &Bytes) {
    assert!(records.len() > 61, "{} bytes", records.len());
    let batch_length = i32::from_be_bytes(records[8..12].try_into().unwrap());
    assert_eq!(
        batch_length as usize + 12,
        records.len(),
        "one batch fills the records"
    );
    assert_eq!(records[16], 2, "magic");
    let record_count = i32::from_be_bytes(records[57..61].try_into().unwrap());
    assert!((1..=2).contains(&record_count), "{record_count} records");
    let value_1 = records.windows(7).any(|window| window == b"value-1");
    assert!(value_1, "the first value is in the batch uncompressed");
}

#[test]
fn confluent_kafka_api_versions() {
    check_api_versions(0, &CONFLUENT);
    check_api_versions(3, &CONFLUENT);
}

#[test]
fn kafka_python_api_versions() {
    check_api_versions(2, &KAFKA_PYTHON);
    check_api_versions(3, &KAFKA_PYTHON);
    check_api_versions(4, &KAFKA_PYTHON);
}

#[test]
fn metadata_requests() {
    for client in [&CONFLUENT, &KAFKA_PYTHON] {
        check_metadata(8, client);
        check_metadata(12, client);
    }
}

#[test]
fn produce_requests() {
    for client in [&CONFLUENT, &KAFKA_PYTHON] {
        check_produce(8, client);
        check_produce(9, client);
    }
}
