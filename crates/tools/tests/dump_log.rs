//! `strom dump-log` on a segment written by Strom's storage (through the
//! broker) and on one built byte by byte after Apache Kafka's documented v2
//! layout, with its indexes, and on corrupted copies.

use crate::common;

use std::path::{Path, PathBuf};

use common::{run_strom, strom, strom_with_input};

/// Zigzag varint, as in Kafka's record encoding.
fn varint(value: i64, out: &mut Vec<u8>) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

struct HandRecord<'a> {
    timestamp_delta: i64,
    offset_delta: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [(&'a [u8], &'a [u8])],
}

fn bytes_field(field: Option<&[u8]>, out: &mut Vec<u8>) {
    match field {
        Some(bytes) => {
            varint(bytes.len() as i64, out);
            out.extend_from_slice(bytes);
        }
        None => varint(-1, out),
    }
}

fn record(record: &HandRecord<'_>) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    varint(record.timestamp_delta, &mut body);
    varint(record.offset_delta, &mut body);
    bytes_field(record.key, &mut body);
    bytes_field(record.value, &mut body);
    varint(record.headers.len() as i64, &mut body);
    for (key, value) in record.headers {
        bytes_field(Some(key), &mut body);
        bytes_field(Some(value), &mut body);
    }
    let mut out = Vec::new();
    varint(body.len() as i64, &mut out);
    out.extend(body);
    out
}

struct HandBatch<'a> {
    base_offset: i64,
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: &'a [HandRecord<'a>],
}

/// A v2 record batch, field by field as Kafka's protocol guide lays it out.
fn batch(batch: &HandBatch<'_>) -> Vec<u8> {
    let last_offset_delta = batch
        .records
        .iter()
        .map(|r| r.offset_delta)
        .max()
        .unwrap_or(0);
    let max_timestamp = batch.base_timestamp
        + batch
            .records
            .iter()
            .map(|r| r.timestamp_delta)
            .max()
            .unwrap_or(0);
    // From attributes to the end: what the CRC covers.
    let mut covered = Vec::new();
    covered.extend(0i16.to_be_bytes()); // attributes: no codec, CreateTime
    covered.extend((last_offset_delta as i32).to_be_bytes());
    covered.extend(batch.base_timestamp.to_be_bytes());
    covered.extend(max_timestamp.to_be_bytes());
    covered.extend(batch.producer_id.to_be_bytes());
    covered.extend(batch.producer_epoch.to_be_bytes());
    covered.extend(batch.base_sequence.to_be_bytes());
    covered.extend((batch.records.len() as i32).to_be_bytes());
    for hand_record in batch.records {
        covered.extend(record(hand_record));
    }
    let crc = crc32c::crc32c(&covered);
    let mut out = Vec::new();
    out.extend(batch.base_offset.to_be_bytes());
    let batch_length = 4 + 1 + 4 + covered.len();
    out.extend((batch_length as i32).to_be_bytes());
    out.extend(7i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend(crc.to_be_bytes());
    out.extend(covered);
    out
}

/// Writes a two-batch segment at base offset 100 with its indexes.
fn kafka_segment(directory: &Path) -> PathBuf {
    let first = batch(&HandBatch {
        base_offset: 100,
        base_timestamp: 1_700_000_000_000,
        producer_id: 4000,
        producer_epoch: 1,
        base_sequence: 0,
        records: &[
            HandRecord {
                timestamp_delta: 0,
                offset_delta: 0,
                key: Some(b"k1"),
                value: Some(b"hello"),
                headers: &[(b"trace", b"abc")],
            },
            HandRecord {
                timestamp_delta: 5,
                offset_delta: 1,
                key: Some(b"k2"),
                value: Some(b"world"),
                headers: &[],
            },
        ],
    });
    let second = batch(&HandBatch {
        base_offset: 102,
        base_timestamp: 1_700_000_000_100,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records: &[HandRecord {
            timestamp_delta: 0,
            offset_delta: 0,
            key: None,
            value: None,
            headers: &[],
        }],
    });
    let second_position = first.len() as u32;
    let log = directory.join("00000000000000000100.log");
    std::fs::write(&log, [first, second].concat()).expect("write log");
    let mut index = 1u32.to_be_bytes().to_vec();
    index.extend(0u32.to_be_bytes());
    index.extend(2u32.to_be_bytes());
    index.extend(second_position.to_be_bytes());
    index.extend([0u8; 16]); // preallocated space of an active segment
    std::fs::write(directory.join("00000000000000000100.index"), index).expect("write index");
    let mut time_index = 1_700_000_000_005i64.to_be_bytes().to_vec();
    time_index.extend(1u32.to_be_bytes());
    time_index.extend(1_700_000_000_100i64.to_be_bytes());
    time_index.extend(2u32.to_be_bytes());
    std::fs::write(directory.join("00000000000000000100.timeindex"), time_index)
        .expect("write time index");
    log
}

fn path_text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn a_segment_built_after_kafkas_layout_dumps_and_verifies() {
    let directory = tempfile::tempdir().expect("tempdir");
    let log = kafka_segment(directory.path());
    let out = run_strom(&["dump-log", path_text(&log), "--print-data"], "").ok();
    assert!(out.contains("Log starting offset: 100"), "{out}");
    assert!(
        out.contains(
            "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: 0 lastSequence: 1 \
             producerId: 4000 producerEpoch: 1 partitionLeaderEpoch: 7 isTransactional: false \
             isControl: false position: 0 CreateTime: 1700000000005"
        ),
        "{out}"
    );
    assert!(out.contains("compresscodec: none"), "{out}");
    assert_eq!(out.matches("isvalid: true").count(), 2, "{out}");
    assert!(
        out.contains("| offset: 100 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: 0 headerKeys: [trace] key: k1 payload: hello"),
        "{out}"
    );
    assert!(
        out.contains("| offset: 101 CreateTime: 1700000000005 keySize: 2 valueSize: 5 sequence: 1"),
        "{out}"
    );
    assert!(out.contains("| offset: 102 CreateTime: 1700000000100 keySize: -1 valueSize: -1 sequence: -1 headerKeys: [] key: null payload: null"), "{out}");
    assert!(out.contains("Summary: 2 batch(es), 3 record(s)"), "{out}");
    assert!(out.contains("0 problem(s)"), "{out}");

    let index = directory.path().join("00000000000000000100.index");
    let out = run_strom(&["dump-log", path_text(&index)], "").ok();
    assert!(out.contains("offset: 101 position: 0"), "{out}");
    assert!(out.contains("offset: 102 position: "), "{out}");
    assert!(
        out.contains("2 entries, 2 preallocated, checked against the .log, 0 problem(s)"),
        "{out}"
    );

    let time_index = directory.path().join("00000000000000000100.timeindex");
    let out = run_strom(&["dump-log", path_text(&time_index)], "").ok();
    assert!(
        out.contains("timestamp: 1700000000005 offset: 101"),
        "{out}"
    );
    assert!(
        out.contains("timestamp: 1700000000100 offset: 102"),
        "{out}"
    );
    assert!(out.contains("0 problem(s)"), "{out}");
}

#[test]
fn corruption_fails_with_exit_code_1() {
    let directory = tempfile::tempdir().expect("tempdir");
    let log = kafka_segment(directory.path());
    let mut bytes = std::fs::read(&log).expect("read");
    // A byte of the first record's value: covered by the CRC.
    let at = bytes
        .windows(5)
        .position(|window| window == b"hello")
        .expect("value");
    bytes[at] = b'j';
    bytes.extend([0u8; 5]);
    std::fs::write(&log, &bytes).expect("write");
    let run = run_strom(&["dump-log", path_text(&log)], "");
    assert!(run.stdout.contains("isvalid: false"), "{run:?}");
    assert!(run.stdout.contains("PROBLEM at byte 0"), "{run:?}");
    assert!(run.stdout.contains("trailing byte"), "{run:?}");
    run.fails_with(1, "2 problem(s) found");

    let index = directory.path().join("00000000000000000100.index");
    let mut entries = 1u32.to_be_bytes().to_vec();
    entries.extend(3u32.to_be_bytes()); // not a batch start
    std::fs::write(&index, entries).expect("write");
    let run = run_strom(&["dump-log", path_text(&index), "--verify-only"], "");
    assert!(run.stdout.contains("not the start of a batch"), "{run:?}");
    run.fails_with(1, "problem(s) found");

    run_strom(&["dump-log", "/nonexistent/00000000000000000000.log"], "")
        .fails_with(2, "cannot read");
    let other = directory.path().join("notes.txt");
    std::fs::write(&other, "x").expect("write");
    run_strom(&["dump-log", path_text(&other)], "").fails_with(2, ".log, .index or .timeindex");
}

#[test]
fn segments_written_by_the_broker_verify() {
    strom(&[
        "topics",
        "create",
        "dumped",
        "--partitions",
        "1",
        "--config",
        "index.interval.bytes=256",
    ])
    .ok();
    // Three runs: at least three batches, so the index gets entries.
    for run in 0..3 {
        let input: String = (run * 100..run * 100 + 100)
            .map(|index| format!("key-{index}:value-{index}\n"))
            .collect();
        strom_with_input(
            &[
                "produce",
                "dumped",
                "--key-separator",
                ":",
                "--compression",
                "gzip",
            ],
            &input,
        )
        .ok();
    }
    let partition_dir = common::broker().data_dir.join("dumped-0");
    let log = partition_dir.join("00000000000000000000.log");
    let out = run_strom(&["dump-log", path_text(&log), "--print-data"], "").ok();
    assert!(out.contains("compresscodec: gzip"), "{out}");
    assert!(out.contains("key: key-299 payload: value-299"), "{out}");
    assert!(out.contains("300 record(s)"), "{out}");
    assert!(out.contains(" 0 problem(s)"), "{out}");
    for index in [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        let path = partition_dir.join(index);
        let out = run_strom(&["dump-log", path_text(&path)], "").ok();
        assert!(
            out.contains("checked against the .log, 0 problem(s)"),
            "{index}: {out}"
        );
        assert!(out.contains("offset: "), "{index} has entries: {out}");
    }
}
