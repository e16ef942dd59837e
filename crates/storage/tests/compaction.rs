//! Compaction: latest value per key at its original offset, tombstones kept
//! for `delete.retention.ms`, offsets strictly increasing, and a crash at
//! every step of the swap leaves a readable log with every latest value.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use common::{partition_dir, small_config};
use strom_protocol::records::RecordBatch;
use strom_storage::compaction::{CleanOptions, SwapStep};
use strom_storage::config::CleanupPolicy;
use strom_storage::testing::{keyed_batch, BatchSpec, TestRecord};
use strom_storage::{Log, LogConfig, LogOpenOptions};

fn compacted_config() -> LogConfig {
    let mut config = small_config();
    config.cleanup_policy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    config.delete_retention_ms = 1000;
    config.min_cleanable_dirty_ratio = 0.1;
    config
}

fn open_log(dir: &Path, config: &LogConfig, clean: bool) -> Log {
    Log::open(
        dir,
        config.clone(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: clean,
            now_ms: 0,
        },
    )
    .expect("open")
    .0
}

fn put(log: &mut Log, key: &str, value: Option<&str>, timestamp: i64) -> i64 {
    let record = TestRecord {
        key: Some(key.as_bytes().to_vec()),
        value: value.map(|value| value.as_bytes().to_vec()),
    };
    let bytes = keyed_batch(
        &BatchSpec {
            base_timestamp: timestamp,
            ..BatchSpec::default()
        },
        &[record],
    );
    log.append_as_leader(bytes, 0, timestamp)
        .expect("append")
        .first_offset
}

/// Every record in the log: offset → (key, value).
fn records(log: &Log) -> BTreeMap<i64, (Bytes, Option<Bytes>)> {
    let mut all = BTreeMap::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let Some(slice) = log
            .read(offset, 1 << 20, log.log_end_offset(), true)
            .expect("read")
            .records
        else {
            break;
        };
        let bytes = slice.to_bytes().expect("bytes");
        let mut position = 0;
        while position < bytes.len() {
            let header =
                strom_storage::batch::validate_batch_at(&bytes, position).expect("valid batch");
            let batch =
                RecordBatch::parse(bytes.slice(position..position + header.size_in_bytes()))
                    .expect("parse");
            for record in batch.records().expect("records") {
                let record = record.expect("record");
                let record_offset = record.offset(header.base_offset);
                let previous = all.keys().next_back().copied().unwrap_or(-1);
                assert!(record_offset > previous, "offsets strictly increase");
                all.insert(
                    record_offset,
                    (record.key_bytes().expect("keyed"), record.value_bytes()),
                );
            }
            position += header.size_in_bytes();
        }
        offset = slice.next_offset();
    }
    all
}

/// Writes 20 rounds over 8 keys; returns key → (latest offset, latest value).
fn fill(log: &mut Log) -> BTreeMap<String, (i64, String)> {
    let mut latest = BTreeMap::new();
    for round in 0..20 {
        for key in 0..8 {
            let key = format!("key-{key}");
            let value = format!("value-{round}-{}", "x".repeat(40));
            let offset = put(log, &key, Some(&value), 100 + round);
            latest.insert(key, (offset, value));
        }
    }
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    latest
}

fn assert_latest_values(log: &Log, latest: &BTreeMap<String, (i64, String)>) {
    let all = records(log);
    for (key, (offset, value)) in latest {
        let found = all
            .get(offset)
            .expect("latest value kept at its original offset");
        assert_eq!(found.0.as_ref(), key.as_bytes());
        assert_eq!(found.1.as_deref(), Some(value.as_bytes()));
    }
}

#[test]
fn cleaning_keeps_the_latest_value_per_key_at_its_offset() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open_log(&dir, &compacted_config(), true);
    let latest = fill(&mut log);
    let bytes_before = log.size_bytes();
    let stats = log
        .clean(200, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    assert!(stats.segments_cleaned > 1);
    assert!(stats.records_removed > 0);
    assert!(log.size_bytes() < bytes_before);
    let all = records(&log);
    assert_eq!(
        all.len(),
        latest.len(),
        "exactly one record per key remains"
    );
    assert_latest_values(&log, &latest);
    assert_eq!(log.first_dirty_offset(), stats.first_dirty_offset);
    assert!(
        log.clean(200, &CleanOptions::default())
            .expect("clean")
            .is_none(),
        "nothing dirty"
    );
    // Reads still work from any offset, including ones removed by cleaning.
    assert!(log
        .read(3, 1 << 20, log.log_end_offset(), true)
        .expect("read")
        .records
        .is_some());
}

#[test]
fn tombstones_vanish_only_after_delete_retention() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open_log(&dir, &compacted_config(), true);
    put(&mut log, "gone", Some("v1"), 100);
    let tombstone = put(&mut log, "gone", None, 500);
    put(&mut log, "kept", Some("v"), 500);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(1000, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    let all = records(&log);
    assert_eq!(
        all.get(&tombstone).map(|record| record.1.is_none()),
        Some(true),
        "tombstone kept"
    );
    assert_eq!(all.len(), 2);

    // New dirty data after delete.retention.ms makes the next pass drop it.
    put(&mut log, "other", Some("v"), 2000);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(1499, &CleanOptions::default()).expect("clean");
    assert!(
        records(&log).contains_key(&tombstone),
        "still within delete.retention.ms"
    );
    put(&mut log, "more", Some("v"), 2000);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(1501, &CleanOptions::default()).expect("clean");
    let all = records(&log);
    assert!(
        !all.contains_key(&tombstone),
        "tombstone removed after delete.retention.ms"
    );
    assert!(all.values().all(|record| record.0.as_ref() != b"gone"));
}

#[test]
fn min_dirty_ratio_and_compaction_lag_hold_cleaning_back() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = compacted_config();
    config.min_compaction_lag_ms = 1_000_000;
    let mut log = open_log(&dir, &config, true);
    fill(&mut log);
    assert!(
        log.clean(200, &CleanOptions::default())
            .expect("clean")
            .is_none(),
        "records too young"
    );
    config.min_compaction_lag_ms = 0;
    config.min_cleanable_dirty_ratio = 1.0;
    log.set_config(config.clone());
    assert!(log.dirty_ratio(200) > 0.99);
    assert!(log
        .clean(200, &CleanOptions::default())
        .expect("clean")
        .is_some());
    assert_eq!(log.dirty_ratio(200), 0.0);
}

#[test]
fn a_crash_at_each_swap_step_loses_no_latest_value() {
    for step in [
        SwapStep::CleanedWritten,
        SwapStep::RenamedToSwap,
        SwapStep::OriginalsDeleted,
    ] {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = partition_dir(root.path());
        let config = compacted_config();
        let mut log = open_log(&dir, &config, true);
        let latest = fill(&mut log);
        let options = CleanOptions {
            stop_after: Some(step),
            ..CleanOptions::default()
        };
        log.clean(200, &options).expect("clean until the crash");
        drop(log);
        let log = open_log(&dir, &config, false);
        assert_latest_values(&log, &latest);
        let leftovers: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| {
                name.ends_with(".swap") || name.ends_with(".cleaned") || name.ends_with(".deleted")
            })
            .collect();
        assert!(leftovers.is_empty(), "{step:?} left {leftovers:?}");
        if step != SwapStep::CleanedWritten {
            assert_eq!(
                records(&log).len(),
                latest.len(),
                "{step:?}: swap completed on open"
            );
        }
    }
}
