//! Transactions through compaction: aborted records are removed and never
//! supersede committed ones, markers are not deduplicated by key, and a
//! marker goes (after `delete.retention.ms`) once its transaction has no
//! data left.

use crate::common;

use std::sync::Arc;

use bytes::Bytes;
use common::{partition_dir, small_config};
use strom_clock::SeededRandom;
use strom_protocol::records::RecordBatch;
use strom_storage::compaction::CleanOptions;
use strom_storage::config::CleanupPolicy;
use strom_storage::marker::{MarkerKind, TransactionMarker};
use strom_storage::testing::{keyed_batch, BatchSpec, TestRecord};
use strom_storage::txn_index::AbortedTransaction;
use strom_storage::{Log, LogConfig, LogOpenOptions};

const RETENTION_MS: i64 = 1000;

fn config() -> LogConfig {
    let mut config = small_config();
    config.cleanup_policy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    config.delete_retention_ms = RETENTION_MS;
    config.min_cleanable_dirty_ratio = 0.0;
    config
}

/// Appends `key = value`, transactional for `producer` (id, sequence).
fn put(log: &mut Log, key: &str, value: &str, producer: Option<(i64, i32)>) {
    let (producer_id, base_sequence) = producer.unwrap_or((-1, -1));
    let spec = BatchSpec {
        base_timestamp: 100,
        producer_id,
        producer_epoch: if producer.is_some() { 0 } else { -1 },
        base_sequence,
        transactional: producer.is_some(),
        ..BatchSpec::default()
    };
    let record = TestRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
    };
    log.append_as_leader(keyed_batch(&spec, &[record]), 0, 100)
        .expect("append");
}

fn end(log: &mut Log, producer_id: i64, kind: MarkerKind) {
    let marker = TransactionMarker {
        bumps_epoch: false,
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        kind,
    };
    log.append_marker_as_leader(&marker, 0, 100)
        .expect("marker");
}

/// Rolls and replicates everything, so that all of it can be cleaned.
fn seal(log: &mut Log) {
    log.roll(100).expect("roll");
    log.update_high_watermark(log.log_end_offset());
}

/// What the log holds: data as `key=value`, markers as `abort:<producer>`
/// or `commit:<producer>`.
fn contents(log: &Log) -> Vec<String> {
    let read = log
        .read(log.log_start_offset(), 1 << 20, log.log_end_offset(), true)
        .expect("read");
    let Some(slice) = read.records else {
        return Vec::new();
    };
    let bytes: Bytes = slice.to_bytes().expect("bytes");
    let mut found = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        let header = strom_storage::batch::validate_batch_at(&bytes, position).expect("valid");
        let size = header.size_in_bytes();
        let batch = RecordBatch::parse(bytes.slice(position..position + size)).expect("parse");
        for record in batch.records().expect("records") {
            let record = record.expect("record");
            if header.is_control() {
                let marker = strom_storage::marker::parse_control_record(
                    record.key().unwrap_or_default(),
                    record.value().unwrap_or_default(),
                )
                .expect("marker");
                let kind = match marker.kind {
                    MarkerKind::Abort => "abort",
                    MarkerKind::Commit => "commit",
                };
                found.push(format!("{kind}:{}", header.producer_id));
            } else {
                let text = |bytes: Option<&[u8]>| {
                    String::from_utf8_lossy(bytes.unwrap_or_default()).into_owned()
                };
                found.push(format!("{}={}", text(record.key()), text(record.value())));
            }
        }
        position += size;
    }
    found
}

#[test]
fn compaction_removes_aborted_records_and_then_their_markers() {
    let root = tempfile::tempdir().expect("tempdir");
    let (mut log, _) = Log::open(
        &partition_dir(root.path()),
        config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("open");
    put(&mut log, "a", "committed", None);
    put(&mut log, "a", "aborted", Some((1, 0)));
    end(&mut log, 1, MarkerKind::Abort);
    put(&mut log, "b", "first", Some((2, 0)));
    end(&mut log, 2, MarkerKind::Commit);
    put(&mut log, "c", "other", Some((3, 0)));
    end(&mut log, 3, MarkerKind::Commit);
    seal(&mut log);
    log.clean(200, &CleanOptions::default())
        .expect("clean")
        .expect("a pass ran");
    // The aborted value neither stays nor hides the committed one; markers
    // with equal keys are all kept while their data was there.
    assert_eq!(
        contents(&log),
        [
            "a=committed",
            "abort:1",
            "b=first",
            "commit:2",
            "c=other",
            "commit:3"
        ]
    );
    let aborted = AbortedTransaction {
        producer_id: 1,
        first_offset: 1,
    };
    assert_eq!(log.collect_aborted_transactions(0, 100), vec![aborted]);

    // A newer "b" supersedes the committed one; the abort marker, whose
    // data is gone, gets a delete horizon.
    put(&mut log, "b", "second", None);
    seal(&mut log);
    log.clean(300, &CleanOptions::default())
        .expect("clean")
        .expect("a pass ran");
    assert_eq!(
        contents(&log),
        [
            "a=committed",
            "abort:1",
            "commit:2",
            "c=other",
            "commit:3",
            "b=second"
        ]
    );
    assert!(log.collect_aborted_transactions(0, 100).is_empty());

    // Nothing is due until the abort marker's horizon passes; that pass
    // removes it and starts commit 2's horizon (its data went in the last
    // pass). Commit 3 keeps its data, so it stays.
    assert_eq!(
        log.clean(400, &CleanOptions::default()).expect("clean"),
        None
    );
    log.clean(300 + RETENTION_MS, &CleanOptions::default())
        .expect("clean")
        .expect("the abort marker's horizon is due");
    assert_eq!(
        contents(&log),
        ["a=committed", "commit:2", "c=other", "commit:3", "b=second"]
    );
    log.clean(300 + 2 * RETENTION_MS, &CleanOptions::default())
        .expect("clean")
        .expect("commit 2's horizon is due");
    assert_eq!(
        contents(&log),
        ["a=committed", "c=other", "commit:3", "b=second"]
    );
    // Reopening (producer state replayed from the cleaned segments) keeps
    // the same view.
    let producers = log.producer_states().len();
    log.close(0).expect("close");
    let (mut reopened, _) = Log::open(
        &partition_dir(root.path()),
        config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: false,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("reopen");
    // Completed transactions are unstable until the high watermark is known.
    assert_eq!(reopened.first_unstable_offset(), Some(5));
    reopened.update_high_watermark(reopened.log_end_offset());
    assert_eq!(reopened.first_unstable_offset(), None);
    assert!(reopened.producer_states().len() <= producers);
    assert!(reopened.collect_aborted_transactions(0, 100).is_empty());
}

#[test]
fn compaction_stops_at_the_last_stable_offset() {
    let root = tempfile::tempdir().expect("tempdir");
    let (mut log, _) = Log::open(
        &partition_dir(root.path()),
        config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .expect("open");
    put(&mut log, "a", "first", None);
    put(&mut log, "a", "undecided", Some((1, 0)));
    put(&mut log, "a", "third", None);
    seal(&mut log);
    assert_eq!(log.last_stable_offset(), 1);
    assert_eq!(
        log.clean(200, &CleanOptions::default()).expect("clean"),
        None
    );
    assert_eq!(contents(&log), ["a=first", "a=undecided", "a=third"]);
    end(&mut log, 1, MarkerKind::Abort);
    seal(&mut log);
    log.clean(300, &CleanOptions::default())
        .expect("clean")
        .expect("a pass ran");
    assert_eq!(contents(&log), ["a=third", "abort:1"]);
}
