use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use strom_clock::SeededRandom;

use crate::error::{AppendError, RecoveryError};
use crate::marker::{MarkerKind, TransactionMarker};
use crate::testing::{simple_batch, BatchSpec};
use crate::txn_index::{AbortedTransaction, AbortedTxnEntry};
use crate::{Log, LogConfig, LogOpenOptions};

const NOW_MS: i64 = 1_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_index_bytes: 1024,
        index_interval_bytes: 256,
        retention_ms: None,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, clean: bool) -> Result<Log, RecoveryError> {
    Log::open(
        &dir.join("topic-0"),
        config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: clean,
            now_ms: NOW_MS,
            random: Arc::new(SeededRandom::new(0)),
        },
    )
    .map(|(log, _)| log)
}

/// Producer `producer_id`'s batch of `records` records at `sequence`.
fn data(producer_id: i64, sequence: i32, records: u32, transactional: bool) -> Bytes {
    simple_batch(&BatchSpec {
        records,
        base_timestamp: NOW_MS,
        producer_id,
        producer_epoch: 0,
        base_sequence: sequence,
        transactional,
        ..BatchSpec::default()
    })
}

fn marker(producer_id: i64, kind: MarkerKind) -> TransactionMarker {
    TransactionMarker {
        bumps_epoch: false,
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 1,
        kind,
    }
}

fn aborted(producer_id: i64, first_offset: i64) -> AbortedTransaction {
    AbortedTransaction {
        producer_id,
        first_offset,
    }
}

/// Every entry of every transaction index, oldest segment first.
fn index_entries(log: &Log) -> Vec<AbortedTxnEntry> {
    log.segments()
        .flat_map(|segment| segment.txn_index().entries().to_vec())
        .collect()
}

/// From the log end `start`: producer 1 aborts [start, start + 2] with its
/// marker at start + 5 while producer 2 runs [start + 3, start + 4] and
/// commits at start + 6; producer 3 is idempotent only (start + 7).
fn interleaved(log: &mut Log) {
    let start = log.log_end_offset();
    log.append_as_leader(data(1, 0, 3, true), 0, NOW_MS)
        .expect("p1");
    log.append_as_leader(data(2, 0, 2, true), 0, NOW_MS)
        .expect("p2");
    assert!(log.first_unstable_offset() <= Some(start));
    let info = log
        .append_marker_as_leader(&marker(1, MarkerKind::Abort), 0, NOW_MS)
        .expect("abort");
    assert_eq!(
        (info.first_offset, info.last_offset),
        (start + 5, start + 5)
    );
    log.append_marker_as_leader(&marker(2, MarkerKind::Commit), 0, NOW_MS)
        .expect("commit");
    log.append_as_leader(data(3, 0, 1, false), 0, NOW_MS)
        .expect("p3");
}

#[test]
fn the_last_stable_offset_follows_transactions_and_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    log.append_as_leader(data(9, 0, 2, false), 0, NOW_MS)
        .expect("idempotent");
    log.update_high_watermark(2);
    assert_eq!(
        (log.first_unstable_offset(), log.last_stable_offset()),
        (None, 2)
    );
    log.append_as_leader(data(1, 0, 3, true), 0, NOW_MS)
        .expect("txn");
    log.update_high_watermark(5);
    assert_eq!(
        (log.first_unstable_offset(), log.last_stable_offset()),
        (Some(2), 2)
    );
    log.append_marker_as_leader(&marker(1, MarkerKind::Commit), 0, NOW_MS)
        .expect("commit");
    // The marker (offset 5) is not below the high watermark yet.
    assert_eq!(log.last_stable_offset(), 2);
    log.update_high_watermark(6);
    assert_eq!(
        (log.first_unstable_offset(), log.last_stable_offset()),
        (None, 6)
    );
    assert!(index_entries(&log).is_empty(), "commits are not indexed");
}

#[test]
fn abort_markers_are_indexed_and_collected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    interleaved(&mut log);
    assert_eq!(
        index_entries(&log),
        vec![AbortedTxnEntry {
            producer_id: 1,
            first_offset: 0,
            last_offset: 5,
            last_stable_offset: 3,
        }]
    );
    log.update_high_watermark(8);
    assert_eq!(log.last_stable_offset(), 8);
    assert_eq!(log.collect_aborted_transactions(0, 8), vec![aborted(1, 0)]);
    assert_eq!(log.collect_aborted_transactions(5, 8), vec![aborted(1, 0)]);
    assert_eq!(log.collect_aborted_transactions(6, 8), vec![]);
    assert_eq!(log.collect_aborted_transactions(0, 0), vec![]);
    let states = log.producer_states();
    let ids: Vec<i64> = states.iter().map(|state| state.producer_id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    assert_eq!(states[0].coordinator_epoch, 1);
    assert_eq!(states[0].last_sequence, 2);
    assert_eq!(states[2].coordinator_epoch, -1);
    assert!(states
        .iter()
        .all(|state| state.current_txn_first_offset.is_none()));
}

#[test]
fn fenced_markers_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    log.append_as_leader(data(1, 0, 1, true), 0, NOW_MS)
        .expect("txn");
    log.append_marker_as_leader(
        &TransactionMarker {
            bumps_epoch: false,
            producer_epoch: 2,
            coordinator_epoch: 4,
            ..marker(1, MarkerKind::Abort)
        },
        0,
        NOW_MS,
    )
    .expect("abort at a newer epoch");
    let end = log.log_end_offset();
    let old_producer = TransactionMarker {
        bumps_epoch: false,
        producer_epoch: 1,
        coordinator_epoch: 4,
        ..marker(1, MarkerKind::Commit)
    };
    assert!(matches!(
        log.append_marker_as_leader(&old_producer, 0, NOW_MS),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    let old_coordinator = TransactionMarker {
        bumps_epoch: false,
        producer_epoch: 2,
        coordinator_epoch: 3,
        ..marker(1, MarkerKind::Commit)
    };
    assert!(matches!(
        log.append_marker_as_leader(&old_coordinator, 0, NOW_MS),
        Err(AppendError::TransactionCoordinatorFenced { .. })
    ));
    assert_eq!(log.log_end_offset(), end);
    // Data of the fenced epoch is refused too; the new epoch starts at 0.
    assert!(matches!(
        log.append_as_leader(data(1, 1, 1, true), 0, NOW_MS),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    let bumped = simple_batch(&BatchSpec {
        base_timestamp: NOW_MS,
        producer_id: 1,
        producer_epoch: 2,
        base_sequence: 0,
        transactional: true,
        ..BatchSpec::default()
    });
    // The aborted transaction is unstable until its marker is replicated.
    assert_eq!(log.first_unstable_offset(), Some(0));
    log.update_high_watermark(end);
    assert_eq!(log.first_unstable_offset(), None);
    log.append_as_leader(bumped, 0, NOW_MS)
        .expect("the new epoch");
    assert_eq!(log.first_unstable_offset(), Some(end));
}

#[test]
fn a_marker_without_a_transaction_is_written_but_not_indexed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    let info = log
        .append_marker_as_leader(&marker(5, MarkerKind::Abort), 3, NOW_MS)
        .expect("marker");
    assert_eq!((info.first_offset, log.log_end_offset()), (0, 1));
    assert!(index_entries(&log).is_empty());
    let read = log.read(0, 1 << 20, 1, true).expect("read");
    let bytes = read.records.expect("records").to_bytes().expect("bytes");
    let header = crate::batch::validate_batch_at(&bytes, 0).expect("valid");
    assert!(header.is_control() && header.is_transactional());
    assert_eq!(
        (header.partition_leader_epoch, header.max_timestamp),
        (3, NOW_MS)
    );
    assert_eq!(log.producer_states()[0].coordinator_epoch, 1);
}

/// Every batch of `log` from `from`, as one buffer.
fn replicate(log: &Log, from: i64) -> Bytes {
    let read = log
        .read(from, 1 << 20, log.log_end_offset(), true)
        .expect("read");
    read.records.expect("records").to_bytes().expect("bytes")
}

#[test]
fn followers_learn_the_same_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut leader = open(&dir.path().join("leader"), true).expect("open");
    let mut follower = open(&dir.path().join("follower"), true).expect("open");
    leader
        .append_as_leader(data(4, 0, 2, true), 0, NOW_MS)
        .expect("p4");
    interleaved(&mut leader);
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let bytes = replicate(&leader, offset);
        follower
            .append_as_follower(bytes, NOW_MS)
            .expect("replicate");
        offset = follower.log_end_offset();
    }
    assert_eq!(index_entries(&follower), index_entries(&leader));
    assert_eq!(follower.producer_states(), leader.producer_states());
    assert_eq!(follower.first_unstable_offset(), Some(0));
    assert_eq!(
        index_entries(&follower)[0].last_stable_offset,
        0,
        "producer 4 is still ongoing"
    );
}

#[test]
fn followers_refuse_control_batches_without_a_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut follower = open(dir.path(), true).expect("open");
    let mut builder = strom_protocol::records::RecordBatchBuilder::new(
        strom_protocol::records::Compression::None,
    )
    .with_producer(1, 0, -1)
    .with_transactional(true)
    .with_control(true);
    builder
        .append(NOW_MS, Some(&[0, 0, 0, 7]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .expect("append");
    let bad = builder.build().expect("build");
    let mut both = data(1, 0, 1, true).to_vec();
    let mut bad = bad.to_vec();
    crate::batch::assign(&mut bad, 1, 0, None, 0).expect("offset");
    both.extend_from_slice(&bad);
    assert!(matches!(
        follower.append_as_follower(Bytes::from(both), NOW_MS),
        Err(AppendError::InvalidControlBatch { .. })
    ));
    assert_eq!(follower.log_end_offset(), 0, "nothing was written");
    assert_eq!(follower.epoch_cache().latest_epoch(), None);
}

#[test]
fn clients_may_not_write_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    let marker_batch =
        crate::marker::build_marker_batch(&marker(1, MarkerKind::Commit), NOW_MS).expect("build");
    assert!(matches!(
        log.append_as_leader(marker_batch, 0, NOW_MS),
        Err(AppendError::InvalidClientBatch { .. })
    ));
}

#[test]
fn reopening_restores_transactions_and_indexes() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), true).expect("open");
        log.append_as_leader(data(4, 0, 2, true), 0, NOW_MS)
            .expect("p4");
        interleaved(&mut log);
        let entries = index_entries(&log);
        let states = log.producer_states();
        if clean {
            log.close(NOW_MS).expect("close");
        } else {
            log.flush(NOW_MS).expect("flush");
            drop(log);
        }
        let reopened = open(dir.path(), clean).expect("reopen");
        assert_eq!(index_entries(&reopened), entries, "clean: {clean}");
        assert_eq!(reopened.producer_states(), states, "clean: {clean}");
        assert_eq!(reopened.first_unstable_offset(), Some(0));
    }
}

#[test]
fn a_corrupt_transaction_index_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    interleaved(&mut log);
    // Enough data to roll a few segments, with a snapshot at each roll.
    for sequence in 0..20 {
        log.append_as_leader(data(3, 1 + sequence * 4, 4, false), 0, NOW_MS)
            .expect("fill");
    }
    assert!(log.segment_count() > 2);
    let entries = index_entries(&log);
    let path = log
        .segments()
        .next()
        .map(|segment| segment.txn_index().path().to_path_buf())
        .expect("first segment");
    log.close(NOW_MS).expect("close");
    let mut bytes = std::fs::read(&path).expect("txnindex");
    bytes.push(0);
    std::fs::write(&path, &bytes).expect("damage");
    let reopened = open(dir.path(), true).expect("reopen");
    assert_eq!(index_entries(&reopened), entries);
    assert_eq!(std::fs::read(&path).expect("rebuilt").len(), 34);
}

#[test]
fn truncation_drops_entries_and_reopens_the_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    interleaved(&mut log);
    assert_eq!(index_entries(&log).len(), 1);
    log.truncate_to(5, NOW_MS).expect("truncate");
    assert!(index_entries(&log).is_empty());
    assert_eq!(log.first_unstable_offset(), Some(0));
    let ongoing: Vec<Option<i64>> = log
        .producer_states()
        .iter()
        .map(|state| state.current_txn_first_offset)
        .collect();
    assert_eq!(ongoing, vec![Some(0), Some(3)]);
    let reopened_path = log
        .segments()
        .next()
        .map(|segment| segment.txn_index().path().to_path_buf())
        .expect("segment");
    assert_eq!(
        std::fs::metadata(&reopened_path)
            .map(|meta| meta.len())
            .ok(),
        Some(0)
    );
}

#[test]
fn deleted_segments_take_their_transaction_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    interleaved(&mut log);
    log.roll(NOW_MS).expect("roll");
    let path = log
        .segments()
        .next()
        .map(|segment| segment.txn_index().path().to_path_buf())
        .expect("segment");
    assert!(path.exists());
    log.append_as_leader(data(3, 1, 1, false), 0, NOW_MS)
        .expect("more");
    log.update_high_watermark(log.log_end_offset());
    log.increment_log_start_offset(8).expect("delete records");
    assert_eq!(log.delete_old_segments(NOW_MS).expect("retention"), 1);
    log.delete_pending_files(NOW_MS).expect("delete");
    assert!(!path.exists());
    assert!(log.collect_aborted_transactions(8, 9).is_empty());
}

#[test]
fn a_late_version_two_marker_cannot_end_the_next_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), true).expect("open");
    let bumped = |producer_epoch, kind| TransactionMarker {
        bumps_epoch: true,
        producer_epoch,
        ..marker(1, kind)
    };
    // Transaction 1 at epoch 0 ends with a marker at epoch 1.
    log.append_as_leader(data(1, 0, 1, true), 0, NOW_MS)
        .expect("txn 1");
    log.append_marker_as_leader(&bumped(1, MarkerKind::Commit), 0, NOW_MS)
        .expect("commit of txn 1");
    // Transaction 2 writes at epoch 1.
    let second = simple_batch(&BatchSpec {
        records: 1,
        base_timestamp: NOW_MS,
        producer_id: 1,
        producer_epoch: 1,
        base_sequence: 0,
        transactional: true,
        ..BatchSpec::default()
    });
    log.append_as_leader(second, 0, NOW_MS).expect("txn 2");
    let open = log.first_unstable_offset();
    // Transaction 1's marker again (epoch 1) must not end transaction 2.
    assert!(matches!(
        log.append_marker_as_leader(&bumped(1, MarkerKind::Abort), 0, NOW_MS),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(log.first_unstable_offset(), open);
    // Transaction 2's own marker carries epoch 2.
    log.append_marker_as_leader(&bumped(2, MarkerKind::Abort), 0, NOW_MS)
        .expect("abort of txn 2");
    // With no transaction open, a repeated marker is harmless and written.
    log.append_marker_as_leader(&bumped(2, MarkerKind::Abort), 0, NOW_MS)
        .expect("repeated marker");
    assert!(log
        .producer_states()
        .iter()
        .all(|state| state.current_txn_first_offset.is_none()));
}

fn guarded(
    log: &mut Log,
    records: Bytes,
    guard: Option<crate::verification::VerificationGuard>,
) -> Result<crate::AppendInfo, AppendError> {
    log.append_as_leader_deferring_flush(
        records,
        0,
        NOW_MS,
        crate::verification::TxnVerification::Guard(guard),
    )
}

#[test]
fn a_verified_batch_opens_a_transaction_unless_a_marker_came_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), true).unwrap();
    // No verification ran: refused, nothing written.
    assert!(matches!(
        guarded(&mut log, data(1, 0, 2, true), None),
        Err(AppendError::UnverifiedTransaction { producer_id: 1 })
    ));
    assert_eq!(log.log_end_offset(), 0);
    // Verified: written; the transaction is ongoing, so the next batch
    // needs no guard and no new verification starts.
    let guard = log.start_transaction_verification(1, 0, 0, NOW_MS);
    assert!(guard.is_some());
    guarded(&mut log, data(1, 0, 2, true), guard).unwrap();
    assert_eq!(log.start_transaction_verification(1, 2, 0, NOW_MS), None);
    guarded(&mut log, data(1, 2, 1, true), None).unwrap();
    log.append_marker_as_leader(&marker(1, MarkerKind::Commit), 0, NOW_MS)
        .unwrap();

    // A verification started, then the transaction's abort marker landed
    // (the coordinator aborted it meanwhile): the verified append must not
    // open a transaction nobody will end.
    let stale = log.start_transaction_verification(1, 3, 0, NOW_MS);
    log.append_marker_as_leader(&marker(1, MarkerKind::Abort), 0, NOW_MS)
        .unwrap();
    let end = log.log_end_offset();
    assert!(matches!(
        guarded(&mut log, data(1, 3, 1, true), stale),
        Err(AppendError::UnverifiedTransaction { .. })
    ));
    assert_eq!(log.log_end_offset(), end);
    assert!(log.producer_state().ongoing_transactions().next().is_none());

    // A later sequence may not overtake the one being verified.
    let fresh = log.start_transaction_verification(1, 3, 0, NOW_MS);
    assert!(matches!(
        guarded(&mut log, data(1, 4, 1, true), fresh),
        Err(AppendError::OutOfOrderSequence { .. })
    ));
    guarded(&mut log, data(1, 3, 1, true), fresh).unwrap();
    // Idempotent (non-transactional) batches never need a guard.
    guarded(&mut log, data(2, 0, 1, false), None).unwrap();
}
