//! Batches written by another client: kafka-python 3.0.12's own batch
//! builder (`fixtures/records/generate_kafka_python.py`).

use bytes::Bytes;
use strom_protocol::records::{Compression, RecordBatch, RecordBatchBuilder};

type Input = (
    i64,
    Option<&'static [u8]>,
    Option<&'static [u8]>,
    Vec<(&'static [u8], Option<&'static [u8]>)>,
);

/// The input of generate_kafka_python.py (offsets are 0, 1, 2, 3).
fn input() -> Vec<Input> {
    vec![
        (
            1_700_000_000_000,
            Some(b"user-1"),
            Some(br#"{"event":"click"}"#),
            vec![(b"trace", Some(b"t-1"))],
        ),
        (1_700_000_000_250, None, Some(b"tombstone-next"), vec![]),
        (
            1_699_999_999_000,
            Some(b"user-2"),
            None,
            vec![(b"a", None), (b"b", Some(b""))],
        ),
        (1_700_000_000_100, Some(b""), Some(&[b'x'; 600]), vec![]),
    ]
}

fn fixture(name: &str) -> Bytes {
    let path = format!(
        "{}/tests/fixtures/records/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Bytes::from(std::fs::read(path).expect("fixture"))
}

fn check_decodes_to_input(batch: &RecordBatch) {
    batch.validate_crc().expect("crc");
    assert_eq!(batch.record_count(), 4);
    assert_eq!((batch.base_offset(), batch.last_offset_delta()), (0, 3));
    assert_eq!(batch.base_timestamp(), 1_700_000_000_000);
    assert_eq!(batch.max_timestamp(), 1_700_000_000_250);
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (4_000, 2, 17)
    );
    assert_eq!(batch.last_sequence(), 20);
    let records = batch.records().expect("records");
    let mut count = 0;
    for (index, (record, (timestamp, key, value, headers))) in records.zip(input()).enumerate() {
        let record = record.expect("record");
        assert_eq!(record.offset(batch.base_offset()), index as i64);
        assert_eq!(batch.record_timestamp(&record), timestamp);
        assert_eq!(record.key(), key);
        assert_eq!(record.value(), value);
        let decoded: Vec<_> = record
            .headers()
            .iter()
            .map(|header| (header.key, header.value))
            .collect();
        assert_eq!(decoded, headers);
        count += 1;
    }
    assert_eq!(count, 4);
}

#[test]
fn kafka_python_uncompressed_batch_decodes() {
    let batch = RecordBatch::parse(fixture("kafka-python-none.bin")).expect("parse");
    assert_eq!(batch.attributes().compression(), Compression::None);
    check_decodes_to_input(&batch);
}

#[test]
fn kafka_python_gzip_batch_decodes() {
    let batch = RecordBatch::parse(fixture("kafka-python-gzip.bin")).expect("parse");
    assert_eq!(batch.attributes().compression(), Compression::Gzip);
    check_decodes_to_input(&batch);
}

#[test]
fn builder_matches_kafka_python_byte_for_byte() {
    // kafka-python writes partition leader epoch 0 where Java writes -1; with
    // that one setting the encodings agree byte for byte.
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_partition_leader_epoch(0)
        .with_producer(4_000, 2, 17);
    for (timestamp, key, value, headers) in input() {
        builder
            .append(timestamp, key, value, &headers)
            .expect("append");
    }
    assert_eq!(
        builder.build().expect("build"),
        fixture("kafka-python-none.bin")
    );
}
