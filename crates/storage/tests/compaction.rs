//! Compaction: latest value per key at its original offset, tombstones kept
//! for `delete.retention.ms`, offsets strictly increasing, and a crash at
//! every step of the swap leaves a readable log with every latest value.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use common::{partition_dir, small_config};
use strom_clock::SeededRandom;
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
    open_seeded_log(dir, config, clean, 0)
}

/// [`open_log`] drawing its roll jitter from a generator seeded with `seed`.
fn open_seeded_log(dir: &Path, config: &LogConfig, clean: bool, seed: u64) -> Log {
    Log::open(
        dir,
        config.clone(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: clean,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(seed)),
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

/// Every batch of the log, parsed.
fn batches(log: &Log) -> Vec<RecordBatch> {
    let mut all = Vec::new();
    for segment in log.segments() {
        let mut position = 0u64;
        while let Some(location) = segment.batch_at(position).expect("batch") {
            let mut buffer = vec![0u8; location.header.size_in_bytes()];
            std::os::unix::fs::FileExt::read_exact_at(&**segment.file(), &mut buffer, position)
                .expect("read batch");
            all.push(RecordBatch::parse(Bytes::from(buffer)).expect("parse"));
            position += location.header.size_in_bytes() as u64;
        }
    }
    all
}

#[test]
fn tombstones_vanish_only_after_delete_retention() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut log = open_log(&dir, &compacted_config(), true);
    // The tombstone's own timestamp is long past delete.retention.ms when
    // the first pass runs: it must still be kept for delete.retention.ms
    // after that pass (KIP-534), or a consumer could miss the deletion.
    put(&mut log, "gone", Some("v1"), 100);
    let tombstone = put(&mut log, "gone", None, 500);
    put(&mut log, "kept", Some("v"), 500);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(10_000, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    let all = records(&log);
    assert_eq!(
        all.get(&tombstone).map(|record| record.1.is_none()),
        Some(true),
        "tombstone kept"
    );
    assert_eq!(all.len(), 2);

    // The batch holding the tombstone now carries the delete horizon
    // (now + delete.retention.ms) as its base timestamp, with attribute
    // bit 6, and the record keeps its own timestamp.
    let holder = batches(&log)
        .into_iter()
        .find(|batch| batch.base_offset() <= tombstone && tombstone <= batch.last_offset())
        .expect("batch with the tombstone");
    assert!(holder.attributes().has_delete_horizon());
    assert_eq!(holder.base_timestamp(), 11_000);
    holder
        .validate_crc()
        .expect("rebuilt batch has a valid CRC");
    let record = holder
        .records()
        .expect("records")
        .next()
        .expect("one record")
        .expect("record");
    assert_eq!(holder.record_timestamp(&record), 500);

    // Before the horizon nothing is due; at the horizon a pass runs on its
    // own (no new dirty data) and removes the tombstone.
    assert!(log
        .clean(10_999, &CleanOptions::default())
        .expect("clean")
        .is_none());
    assert!(records(&log).contains_key(&tombstone));
    log.clean(11_000, &CleanOptions::default())
        .expect("clean")
        .expect("a pass is due at the delete horizon");
    let all = records(&log);
    assert!(
        !all.contains_key(&tombstone),
        "tombstone removed after delete.retention.ms"
    );
    assert!(all.values().all(|record| record.0.as_ref() != b"gone"));
    assert!(
        batches(&log)
            .iter()
            .all(|batch| !batch.attributes().has_delete_horizon()),
        "no batch keeps a horizon once its tombstones are gone"
    );
    assert!(log
        .clean(1_000_000, &CleanOptions::default())
        .expect("clean")
        .is_none());
}

#[test]
fn the_delete_horizon_survives_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = compacted_config();
    config.min_cleanable_dirty_ratio = 0.99;
    let mut log = open_log(&dir, &config, true);
    put(&mut log, "gone", Some("v1"), 100);
    let tombstone = put(&mut log, "gone", None, 100);
    put(&mut log, "kept", Some("v"), 100);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    let first_dirty = log
        .clean(5_000, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned")
        .first_dirty_offset;
    log.close(5_000).expect("close");
    // Reopen as the log manager does (first dirty offset from the cleaner
    // checkpoint), then add a little dirty data, too little for the ratio.
    let mut log = open_log(&dir, &config, true);
    log.set_first_dirty_offset(first_dirty);
    log.roll(5_000).expect("roll");
    put(&mut log, "other", Some("v"), 5_000);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    assert!(log
        .clean(5_999, &CleanOptions::default())
        .expect("clean")
        .is_none());
    log.clean(6_000, &CleanOptions::default())
        .expect("clean")
        .expect("the horizon read back from the batch headers makes a pass due");
    assert!(!records(&log).contains_key(&tombstone));
}

#[test]
fn later_passes_merge_the_small_segments_cleaning_leaves() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = compacted_config();
    config.min_cleanable_dirty_ratio = 0.01;
    let mut log = open_log(&dir, &config, true);
    fill(&mut log);
    let segments_before = log.segment_count();
    assert!(segments_before > 4, "fill spans many segments");
    let stats = log
        .clean(200, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    assert_eq!(stats.segments_cleaned, segments_before - 1);
    // Groups are formed from the sizes before cleaning (as Kafka does), so
    // this pass leaves small (here mostly empty) segments behind.
    assert_eq!(
        log.segments().next().expect("first").base_offset(),
        0,
        "the log start offset is kept"
    );

    // A second fill with new keys: the small segments the first pass left
    // are merged with the second fill's cleaned data by the next pass.
    let mut latest = BTreeMap::new();
    for round in 0..20 {
        for key in 0..8 {
            let key = format!("second-{key}");
            let value = format!("value-{round}-{}", "z".repeat(40));
            let offset = put(&mut log, &key, Some(&value), 300 + round);
            latest.insert(key, (offset, value));
        }
    }
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(400, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    log.clean(500, &CleanOptions::default()).expect("clean");
    // The next pass merges what the previous ones left: the 16 latest
    // values end up in one segment, the emptied ones are folded into it.
    put(&mut log, "third", Some("v"), 500);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    log.clean(600, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    latest.insert(
        "third".to_owned(),
        (log.log_end_offset() - 1, "v".to_owned()),
    );
    let sizes: Vec<u64> = log.segments().map(|segment| segment.size_bytes()).collect();
    assert_eq!(
        sizes.len(),
        2,
        "one cleaned segment and the active one: {sizes:?}"
    );
    assert!(log
        .segments()
        .all(|segment| segment.size_bytes() <= u64::from(config.segment_bytes)));
    assert_eq!(records(&log).len(), 17);
    assert_latest_values(&log, &latest);
    // The merged segment's index finds every surviving offset.
    for (offset, _) in latest.values() {
        let read = log
            .read(*offset, 1 << 20, log.log_end_offset(), true)
            .expect("read")
            .records
            .expect("records at the offset");
        assert!(!read.to_bytes().expect("bytes").is_empty());
    }
    drop(log);
    let log = open_log(&dir, &config, false);
    assert_eq!(
        log.segments().filter(|segment| !segment.is_empty()).count(),
        1,
        "the merged segment reopens as it was"
    );
    assert_latest_values(&log, &latest);
}

#[test]
fn groups_never_exceed_segment_bytes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = compacted_config();
    let mut log = open_log(&dir, &config, true);
    // Unique keys: nothing is removed, so cleaned segments stay full and
    // must not be merged beyond segment.bytes.
    let mut offsets = Vec::new();
    for key in 0..120 {
        let value = "y".repeat(60);
        offsets.push(put(&mut log, &format!("unique-{key}"), Some(&value), 100));
    }
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    let before = log.segment_count();
    log.clean(200, &CleanOptions::default())
        .expect("clean")
        .expect("cleaned");
    assert!(log.segment_count() > 2, "full segments stay apart");
    assert!(log.segment_count() <= before);
    assert!(log
        .segments()
        .all(|segment| segment.size_bytes() <= u64::from(config.segment_bytes)));
    assert_eq!(records(&log).len(), offsets.len());
}

#[test]
fn max_compaction_lag_forces_a_pass_below_the_dirty_ratio() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = compacted_config();
    config.min_cleanable_dirty_ratio = 0.99;
    config.max_compaction_lag_ms = 10_000;
    let mut log = open_log(&dir, &config, true);
    fill(&mut log);
    let first = log.clean(200, &CleanOptions::default()).expect("clean");
    assert!(first.is_some(), "everything dirty: ratio 1.0");
    // A little dirty data on a large clean section: ratio far below 0.99.
    put(&mut log, "key-0", Some("newer"), 1_000);
    log.roll(0).expect("roll");
    log.update_high_watermark(log.log_end_offset());
    assert!(log.dirty_ratio(1_000) < 0.99);
    assert!(log
        .clean(11_000, &CleanOptions::default())
        .expect("clean")
        .is_none());
    log.clean(11_001, &CleanOptions::default())
        .expect("clean")
        .expect("dirty record older than max.compaction.lag.ms");
}

#[test]
fn max_compaction_lag_rolls_the_active_segment() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let mut config = compacted_config();
    config.max_compaction_lag_ms = 1_000;
    let mut log = open_log(&dir, &config, true);
    log.append_as_leader(single("a", 0), 0, 0).expect("append");
    log.append_as_leader(single("b", 999), 0, 999)
        .expect("append");
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(single("c", 1_000), 0, 1_000)
        .expect("append");
    assert_eq!(log.segment_count(), 2, "rolled at max.compaction.lag.ms");

    // Without compaction the lag does not apply.
    let other = partition_dir(&root.path().join("other"));
    let mut config = config.clone();
    config.cleanup_policy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    let mut log = open_log(&other, &config, true);
    log.append_as_leader(single("a", 0), 0, 0).expect("append");
    log.append_as_leader(single("c", 5_000), 0, 5_000)
        .expect("append");
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn segment_jitter_rolls_between_segment_ms_minus_jitter_and_segment_ms() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut config = small_config();
    config.segment_ms = 1_000;
    config.segment_jitter_ms = 400;
    for round in 0..20 {
        let dir = partition_dir(&root.path().join(format!("round-{round}")));
        let mut log = open_seeded_log(&dir, &config, true, round);
        log.append_as_leader(single("a", 0), 0, 0).expect("append");
        log.append_as_leader(single("b", 599), 0, 599)
            .expect("append");
        assert_eq!(log.segment_count(), 1, "never before segment.ms - jitter");
        log.append_as_leader(single("c", 1_000), 0, 1_000)
            .expect("append");
        assert_eq!(log.segment_count(), 2, "always by segment.ms");
    }
}

/// The time of the first append that rolls a log seeded with `seed` (one
/// append per millisecond from 600 on; `segment.ms` 1000, jitter 400).
fn roll_time_ms(root: &Path, seed: u64, attempt: u32) -> i64 {
    let mut config = small_config();
    config.segment_ms = 1_000;
    config.segment_jitter_ms = 400;
    let dir = partition_dir(&root.join(format!("seed-{seed}-{attempt}")));
    let mut log = open_seeded_log(&dir, &config, true, seed);
    log.append_as_leader(single("a", 0), 0, 0).expect("append");
    for now_ms in 600..=1_000 {
        log.append_as_leader(single("b", now_ms), 0, now_ms)
            .expect("append");
        if log.segment_count() == 2 {
            return now_ms;
        }
    }
    panic!("no roll by segment.ms");
}

#[test]
fn the_roll_jitter_comes_from_the_injected_random_source() {
    let root = tempfile::tempdir().expect("tempdir");
    let times: Vec<i64> = (0..8)
        .map(|seed| roll_time_ms(root.path(), seed, 0))
        .collect();
    let again: Vec<i64> = (0..8)
        .map(|seed| roll_time_ms(root.path(), seed, 1))
        .collect();
    assert_eq!(times, again, "the same seed rolls at the same time");
    let distinct: std::collections::BTreeSet<_> = times.iter().collect();
    assert!(distinct.len() > 1, "seeds spread the rolls: {times:?}");
}

fn single(key: &str, timestamp: i64) -> Bytes {
    keyed_batch(
        &BatchSpec {
            base_timestamp: timestamp,
            ..BatchSpec::default()
        },
        &[TestRecord {
            key: Some(key.as_bytes().to_vec()),
            value: Some(b"v".to_vec()),
        }],
    )
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

/// Files an interrupted or finished cleaning pass must not leave behind.
fn swap_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| {
            [".swap", ".cleaned", ".deleted", ".cleaner-cover"]
                .iter()
                .any(|suffix| name.ends_with(suffix))
        })
        .collect()
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
        let leftovers = swap_leftovers(&dir);
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

#[test]
fn a_crash_while_swapping_a_merged_group_loses_nothing_and_leaves_no_stale_segment() {
    for step in [
        SwapStep::CleanedWritten,
        SwapStep::RenamedToSwap,
        SwapStep::OriginalsDeleted,
    ] {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = partition_dir(root.path());
        let config = compacted_config();
        let mut log = open_log(&dir, &config, true);
        let mut latest = fill(&mut log);
        log.clean(200, &CleanOptions::default())
            .expect("clean")
            .expect("cleaned");
        // A small segment whose values are all superseded by the next,
        // full segment: the first group (the small segments) comes out
        // empty, ending long before the originals it replaces do.
        for key in 0..8 {
            put(&mut log, &format!("key-{key}"), Some("short-lived"), 300);
        }
        log.roll(0).expect("roll");
        for key in 0..8 {
            let key = format!("key-{key}");
            let offset = put(&mut log, &key, Some("final"), 301);
            latest.insert(key, (offset, "final".to_owned()));
        }
        for filler in 0..30 {
            let key = format!("filler-{filler}");
            let value = "f".repeat(40);
            let offset = put(&mut log, &key, Some(&value), 302);
            latest.insert(key, (offset, value));
        }
        log.roll(0).expect("roll");
        log.update_high_watermark(log.log_end_offset());
        let options = CleanOptions {
            stop_after: Some(step),
            ..CleanOptions::default()
        };
        let stats = log
            .clean(400, &options)
            .expect("clean until the crash")
            .expect("a pass ran");
        assert!(
            stats.segments_cleaned > 1,
            "the pass rewrote several segments"
        );
        drop(log);
        let log = open_log(&dir, &config, false);
        assert_latest_values(&log, &latest);
        let all = records(&log);
        if step == SwapStep::CleanedWritten {
            assert!(all.len() > latest.len(), "originals untouched");
        } else {
            assert_eq!(
                all.len(),
                latest.len(),
                "{step:?}: every replaced original is gone after recovery"
            );
        }
        let leftovers = swap_leftovers(&dir);
        assert!(leftovers.is_empty(), "{step:?} left {leftovers:?}");
    }
}
