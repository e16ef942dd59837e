//! Compatibility with Kafka's on-disk layout: files written by the log are
//! parsed here field by field, by code that shares nothing with the writer
//! (only the `crc32c` crate and the protocol crate's batch parser).

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::{partition_dir, small_config};
use strom_clock::SeededRandom;
use strom_protocol::records::RecordBatch;
use strom_storage::testing::{keyed_batch, BatchSpec, TestRecord};
use strom_storage::{Log, LogOpenOptions};

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// A batch as Kafka's `DefaultRecordBatch` lays it out.
#[derive(Debug)]
struct ParsedBatch {
    position: u32,
    base_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
}

fn parse_log_file(bytes: &[u8]) -> Vec<ParsedBatch> {
    let mut batches = Vec::new();
    let mut position = 0usize;
    while position < bytes.len() {
        let base_offset = be_i64(bytes, position);
        let batch_length = be_i32(bytes, position + 8) as usize;
        let end = position + 12 + batch_length;
        assert!(end <= bytes.len(), "batch within the file");
        assert_eq!(bytes[position + 16], 2, "magic v2");
        let stored_crc = be_u32(bytes, position + 17);
        assert_eq!(
            stored_crc,
            crc32c::crc32c(&bytes[position + 21..end]),
            "CRC-32C over attributes..end"
        );
        let last_offset_delta = be_i32(bytes, position + 23);
        let max_timestamp = be_i64(bytes, position + 35);
        let record_count = be_i32(bytes, position + 57);
        assert_eq!(record_count, last_offset_delta + 1);
        let batch = RecordBatch::parse(bytes::Bytes::copy_from_slice(&bytes[position..end]))
            .expect("parses");
        batch.validate_crc().expect("crc");
        assert_eq!(
            batch.records().expect("records").count(),
            record_count as usize
        );
        batches.push(ParsedBatch {
            position: position as u32,
            base_offset,
            last_offset: base_offset + i64::from(last_offset_delta),
            max_timestamp,
        });
        position = end;
    }
    batches
}

fn check_offset_index(path: &Path, base: i64, batches: &[ParsedBatch]) -> usize {
    let bytes = std::fs::read(path).expect("index");
    assert_eq!(bytes.len() % 8, 0, "whole 8-byte entries (trimmed)");
    let mut previous = None;
    for entry in bytes.chunks_exact(8) {
        let relative = be_u32(entry, 0);
        let position = be_u32(entry, 4);
        let batch = batches
            .iter()
            .find(|batch| batch.position == position)
            .expect("entry points at a batch start");
        assert_eq!(
            base + i64::from(relative),
            batch.last_offset,
            "entry offset is the batch's last offset"
        );
        assert!(previous.is_none_or(|before| before < relative));
        previous = Some(relative);
    }
    bytes.len() / 8
}

fn check_time_index(path: &Path, base: i64, batches: &[ParsedBatch]) -> usize {
    let bytes = std::fs::read(path).expect("time index");
    assert_eq!(bytes.len() % 12, 0, "whole 12-byte entries (trimmed)");
    let mut previous = None;
    for entry in bytes.chunks_exact(12) {
        let timestamp = be_i64(entry, 0);
        let offset = base + i64::from(be_u32(entry, 8));
        let max_so_far = batches
            .iter()
            .filter(|batch| batch.last_offset <= offset)
            .map(|batch| batch.max_timestamp)
            .max()
            .expect("batches up to the entry");
        assert_eq!(
            timestamp, max_so_far,
            "entry holds the max timestamp so far"
        );
        assert!(previous.is_none_or(|before| before < timestamp));
        previous = Some(timestamp);
    }
    bytes.len() / 12
}

#[test]
fn segments_indexes_and_checkpoints_follow_kafkas_layout() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let (mut log, _) = Log::open(
        &dir,
        small_config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("open");
    for step in 0..120i64 {
        let records: Vec<TestRecord> = (0..3)
            .map(|index| TestRecord {
                key: Some(format!("k{index}").into_bytes()),
                value: Some(vec![b'v'; 30]),
            })
            .collect();
        let spec = BatchSpec {
            base_timestamp: 1_000 + step * 7,
            producer_id: 77,
            producer_epoch: 1,
            base_sequence: (step * 3) as i32,
            ..BatchSpec::default()
        };
        log.append_as_leader(keyed_batch(&spec, &records), 4, 0)
            .expect("append");
    }
    log.close(0).expect("close");

    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let logs: Vec<&String> = names.iter().filter(|name| name.ends_with(".log")).collect();
    assert!(logs.len() > 2);
    let mut expected_offset = 0;
    let (mut index_entries, mut time_entries) = (0, 0);
    for name in logs {
        let stem = name.strip_suffix(".log").expect("suffix");
        assert_eq!(stem.len(), 20, "20-digit base offset");
        let base: i64 = stem.parse().expect("digits");
        assert_eq!(base, expected_offset, "segment named by its first offset");
        let bytes = std::fs::read(dir.join(name)).expect("log");
        let batches = parse_log_file(&bytes);
        for batch in &batches {
            assert_eq!(batch.base_offset, expected_offset, "offsets contiguous");
            expected_offset = batch.last_offset + 1;
        }
        index_entries += check_offset_index(&dir.join(format!("{stem}.index")), base, &batches);
        time_entries += check_time_index(&dir.join(format!("{stem}.timeindex")), base, &batches);
    }
    assert_eq!(expected_offset, 360);
    assert!(index_entries > 0 && time_entries > 0);

    // Partition leader epoch stamped in every batch, and the epoch checkpoint.
    let epochs = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).expect("epochs");
    assert_eq!(epochs, "0\n1\n4 0\n");

    // Producer snapshot, Kafka version 1: version, CRC-32C, entries.
    let snapshot_name = names
        .iter()
        .rfind(|name| name.ends_with(".snapshot"))
        .expect("snapshot");
    assert_eq!(snapshot_name, &format!("{:020}.snapshot", 360));
    let snapshot = std::fs::read(dir.join(snapshot_name)).expect("snapshot");
    assert_eq!(i16::from_be_bytes([snapshot[0], snapshot[1]]), 1);
    assert_eq!(be_u32(&snapshot, 2), crc32c::crc32c(&snapshot[6..]));
    assert_eq!(be_i32(&snapshot, 6), 1, "one producer");
    let entry = &snapshot[10..];
    assert_eq!(entry.len(), 46);
    assert_eq!(be_i64(entry, 0), 77, "producer id");
    assert_eq!(i16::from_be_bytes([entry[8], entry[9]]), 1, "epoch");
    assert_eq!(be_i32(entry, 10), 359, "last sequence");
    assert_eq!(be_i64(entry, 14), 359, "last offset");
    assert_eq!(be_i32(entry, 22), 2, "offset delta");
}
