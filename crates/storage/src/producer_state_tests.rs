use super::*;
use crate::batch::validate_batch_at;
use crate::testing::{simple_batch, BatchSpec};

fn header(base_offset: i64, epoch: i16, base_sequence: i32, records: u32) -> BatchHeader {
    let bytes = simple_batch(&BatchSpec {
        base_offset,
        records,
        producer_id: 42,
        producer_epoch: epoch,
        base_sequence,
        ..BatchSpec::default()
    });
    validate_batch_at(&bytes, 0).expect("valid")
}

#[test]
fn duplicates_and_gaps() {
    let mut state = ProducerStateManager::new();
    let first = header(0, 0, 0, 3);
    assert_eq!(
        state.check(&first, None).expect("new"),
        SequenceCheck::Append
    );
    state.update(&first, None);
    let second = header(3, 0, 3, 2);
    assert_eq!(
        state.check(&second, None).expect("next"),
        SequenceCheck::Append
    );
    state.update(&second, None);
    // Retry of the first batch is a duplicate with its original offsets.
    let retry = header(99, 0, 0, 3);
    assert!(matches!(
        state.check(&retry, None).expect("duplicate"),
        SequenceCheck::Duplicate(BatchMetadata {
            first_offset: 0,
            last_offset: 2,
            ..
        })
    ));
    let gap = header(5, 0, 7, 1);
    assert!(matches!(
        state.check(&gap, None),
        Err(AppendError::OutOfOrderSequence {
            expected_sequence: 5,
            found_sequence: 7,
            ..
        })
    ));
    let fenced = header(5, -1, 5, 1);
    assert!(matches!(
        state.check(&fenced, None),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    let bumped = header(5, 1, 0, 1);
    assert_eq!(
        state.check(&bumped, None).expect("new epoch"),
        SequenceCheck::Append
    );
    let bumped_late = header(5, 1, 4, 1);
    assert!(state.check(&bumped_late, None).is_err());
}

#[test]
fn only_five_batches_are_remembered() {
    let mut state = ProducerStateManager::new();
    for index in 0..6 {
        state.update(&header(index, 0, index as i32, 1), None);
    }
    let oldest = header(0, 0, 0, 1);
    assert!(
        state.check(&oldest, None).is_err(),
        "evicted batch is no longer a duplicate"
    );
    let kept = header(1, 0, 1, 1);
    assert!(matches!(
        state.check(&kept, None),
        Ok(SequenceCheck::Duplicate(_))
    ));
}

#[test]
fn snapshot_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = ProducerStateManager::new();
    state.update(&header(10, 2, 7, 3), None);
    state.write_snapshot(dir.path(), 13).expect("write");
    let snapshots = list_snapshots(dir.path()).expect("list");
    let path = snapshots.get(&13).expect("snapshot at 13");
    let mut loaded = ProducerStateManager::new();
    loaded.load_snapshot(path).expect("load");
    let entry = loaded.entry(42).expect("producer");
    assert_eq!(entry.epoch, 2);
    assert_eq!(
        entry.batches.back().copied(),
        state
            .entry(42)
            .and_then(|entry| entry.batches.back().copied())
    );
    let mut bytes = std::fs::read(path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(path, bytes).expect("write");
    assert!(matches!(
        loaded.load_snapshot(path),
        Err(SnapshotError::Corrupt { .. })
    ));
}

const PRODUCER: i64 = 42;

fn txn_header(base_offset: i64, epoch: i16, base_sequence: i32, records: u32) -> BatchHeader {
    let bytes = simple_batch(&BatchSpec {
        base_offset,
        records,
        producer_id: PRODUCER,
        producer_epoch: epoch,
        base_sequence,
        transactional: true,
        ..BatchSpec::default()
    });
    validate_batch_at(&bytes, 0).expect("valid")
}

fn marker_header(producer_id: i64, offset: i64, epoch: i16) -> BatchHeader {
    let marker = TransactionMarker {
        bumps_epoch: false,
        producer_id,
        producer_epoch: epoch,
        coordinator_epoch: 0,
        kind: MarkerKind::Commit,
    };
    let bytes = crate::marker::build_marker_batch(&marker, 500).expect("marker");
    let mut bytes = bytes.to_vec();
    crate::batch::assign(&mut bytes, offset, 0, None, 0).expect("assign");
    validate_batch_at(&bytes, 0).expect("valid")
}

fn control(kind: MarkerKind, coordinator_epoch: i32) -> Option<ControlMarker> {
    Some(ControlMarker {
        kind,
        coordinator_epoch,
    })
}

#[test]
fn transactions_start_with_data_and_end_with_a_marker() {
    let mut state = ProducerStateManager::new();
    assert_eq!(state.update(&txn_header(10, 0, 0, 3), None), None);
    assert_eq!(state.update(&txn_header(20, 0, 3, 2), None), None);
    let entry = state.entry(PRODUCER).expect("producer");
    assert_eq!(
        entry.current_txn_first_offset,
        Some(10),
        "the first batch starts it"
    );
    assert_eq!(
        state.ongoing_transactions().collect::<Vec<_>>(),
        vec![(10, PRODUCER)]
    );
    assert_eq!(state.first_unstable_offset(0), Some(10));
    let completed = state
        .update(
            &marker_header(PRODUCER, 22, 0),
            control(MarkerKind::Abort, 4),
        )
        .expect("the marker ends the transaction");
    assert_eq!(
        completed,
        CompletedTxn {
            producer_id: PRODUCER,
            first_offset: 10,
            last_offset: 22,
            kind: MarkerKind::Abort
        }
    );
    let entry = state.entry(PRODUCER).expect("producer");
    assert_eq!(entry.current_txn_first_offset, None);
    assert_eq!(entry.coordinator_epoch, 4);
    assert_eq!(entry.last_sequence(), Some(4), "markers carry no sequence");
    assert_eq!(state.ongoing_transactions().count(), 0);
    // Unstable until the high watermark passes the marker.
    assert_eq!(state.first_unstable_offset(22), Some(10));
    assert_eq!(state.first_unstable_offset(23), None);
    state.on_high_watermark(23);
    assert_eq!(state.first_unstable_offset(0), None);
    // A second marker without a transaction ends nothing.
    assert_eq!(
        state.update(
            &marker_header(PRODUCER, 23, 0),
            control(MarkerKind::Commit, 4)
        ),
        None
    );
}

#[test]
fn an_unreadable_marker_leaves_the_transaction_ongoing() {
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 0, 0, 1), None);
    assert_eq!(state.update(&marker_header(PRODUCER, 1, 0), None), None);
    assert_eq!(state.first_unstable_offset(100), Some(0));
}

#[test]
fn last_stable_offset_after_names_the_earliest_other_transaction() {
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 0, 0, 1), None);
    let other = |base_offset, producer_id| {
        let bytes = simple_batch(&BatchSpec {
            base_offset,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
            ..BatchSpec::default()
        });
        validate_batch_at(&bytes, 0).expect("valid")
    };
    state.update(&other(1, 7), None);
    state.update(&other(2, 8), None);
    let completed = state
        .update(
            &marker_header(PRODUCER, 3, 0),
            control(MarkerKind::Abort, 0),
        )
        .expect("completed");
    assert_eq!(state.last_stable_offset_after(&completed), 1);
    let completed = state
        .update(&marker_header(7, 4, 0), control(MarkerKind::Abort, 0))
        .expect("completed");
    assert_eq!(state.last_stable_offset_after(&completed), 2);
    let completed = state
        .update(&marker_header(8, 5, 0), control(MarkerKind::Commit, 0))
        .expect("completed");
    assert_eq!(state.last_stable_offset_after(&completed), 6);
}

#[test]
fn markers_are_fenced_by_producer_and_coordinator_epoch() {
    let mut state = ProducerStateManager::new();
    let marker = |producer_epoch, coordinator_epoch| TransactionMarker {
        bumps_epoch: false,
        producer_id: PRODUCER,
        producer_epoch,
        coordinator_epoch,
        kind: MarkerKind::Commit,
    };
    // Unknown producers take any marker.
    state.check_marker(&marker(0, 0)).expect("unknown producer");
    state.update(&txn_header(0, 3, 0, 1), None);
    state.update(
        &marker_header(PRODUCER, 1, 3),
        control(MarkerKind::Commit, 5),
    );
    assert!(matches!(
        state.check_marker(&marker(2, 5)),
        Err(AppendError::InvalidProducerEpoch {
            current_epoch: 3,
            found_epoch: 2,
            ..
        })
    ));
    assert!(matches!(
        state.check_marker(&marker(3, 4)),
        Err(AppendError::TransactionCoordinatorFenced {
            current_coordinator_epoch: 5,
            found_coordinator_epoch: 4,
            ..
        })
    ));
    state.check_marker(&marker(3, 5)).expect("same epochs");
    state.check_marker(&marker(4, 6)).expect("newer epochs");
}

#[test]
fn data_after_markers_follows_the_epoch_rules() {
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 1, 0, 2), None);
    state.update(
        &marker_header(PRODUCER, 2, 1),
        control(MarkerKind::Commit, 0),
    );
    // The same epoch continues its sequence in the next transaction.
    assert_eq!(
        state.check(&txn_header(3, 1, 2, 1), None).expect("next"),
        SequenceCheck::Append
    );
    assert!(state.check(&txn_header(3, 1, 0, 1), None).is_err());
    // A fenced epoch is refused, a newer one starts at sequence 0.
    assert!(matches!(
        state.check(&txn_header(3, 0, 2, 1), None),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(
        state.check(&txn_header(3, 2, 0, 1), None).expect("bumped"),
        SequenceCheck::Append
    );
    // A marker at a newer epoch moves the producer to it.
    state.update(
        &marker_header(PRODUCER, 3, 5),
        control(MarkerKind::Abort, 0),
    );
    assert_eq!(state.entry(PRODUCER).map(|entry| entry.epoch), Some(5));
    assert!(matches!(
        state.check(&txn_header(4, 2, 0, 1), None),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
}

#[test]
fn non_transactional_data_during_a_transaction_is_refused() {
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 0, 0, 1), None);
    assert!(matches!(
        state.check(&header(1, 0, 1, 1), None),
        Err(AppendError::InvalidTxnState {
            producer_id: PRODUCER
        })
    ));
    assert_eq!(
        state
            .check(&txn_header(1, 0, 1, 1), None)
            .expect("transactional"),
        SequenceCheck::Append
    );
}

#[test]
fn producers_in_a_transaction_are_never_evicted() {
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 0, 0, 1), None);
    state.update(&header(1, 0, 0, 1).with_producer(43), None);
    state.evict_before(100);
    assert!(state.entry(PRODUCER).is_some());
    assert!(state.entry(43).is_none());
    state.update(
        &marker_header(PRODUCER, 101, 0),
        control(MarkerKind::Commit, 0),
    );
    state.evict_before(102);
    assert!(state.is_empty());
}

trait WithProducer {
    fn with_producer(self, producer_id: i64) -> Self;
}

impl WithProducer for BatchHeader {
    fn with_producer(mut self, producer_id: i64) -> Self {
        self.producer_id = producer_id;
        self
    }
}

#[test]
fn snapshots_keep_coordinator_epoch_and_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(10, 2, 0, 3), None);
    // Producer 7 wrote only a marker: no sequence, no data offset.
    state.update(&marker_header(7, 13, 1), control(MarkerKind::Abort, 9));
    state.write_snapshot(dir.path(), 14).expect("write");
    let path = snapshot_path(dir.path(), 14);
    let bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.len(), 10 + 2 * SNAPSHOT_ENTRY_BYTES);
    // Producer 7 sorts first: its entry's fields, as Kafka lays them out.
    let first = &bytes[10..10 + SNAPSHOT_ENTRY_BYTES];
    assert_eq!(first[0..8], 7i64.to_be_bytes());
    assert_eq!(first[8..10], 1i16.to_be_bytes());
    assert_eq!(first[10..14], (-1i32).to_be_bytes());
    assert_eq!(first[14..22], (-1i64).to_be_bytes());
    assert_eq!(first[26..34], 500i64.to_be_bytes());
    assert_eq!(first[34..38], 9i32.to_be_bytes());
    assert_eq!(first[38..46], (-1i64).to_be_bytes());
    let second = &bytes[10 + SNAPSHOT_ENTRY_BYTES..];
    assert_eq!(second[34..38], (-1i32).to_be_bytes());
    assert_eq!(second[38..46], 10i64.to_be_bytes());
    let mut loaded = ProducerStateManager::new();
    loaded.load_snapshot(&path).expect("load");
    assert_eq!(loaded.summaries(), state.summaries());
    assert_eq!(
        loaded.ongoing_transactions().collect::<Vec<_>>(),
        vec![(10, PRODUCER)]
    );
    assert_eq!(loaded.entry(7).map(|entry| entry.last_offset), Some(13));
    let summary = loaded.summaries()[1];
    assert_eq!(
        summary,
        ProducerSummary {
            producer_id: PRODUCER,
            producer_epoch: 2,
            last_sequence: 2,
            last_timestamp: 2,
            coordinator_epoch: -1,
            current_txn_first_offset: Some(10),
        }
    );
}

#[test]
fn truncated_or_miscounted_snapshots_are_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = ProducerStateManager::new();
    state.update(&txn_header(0, 0, 0, 1), None);
    let path = snapshot_path(dir.path(), 1);
    let bytes = state.snapshot_bytes();
    for cut in [0, 5, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).expect("write");
        assert!(matches!(
            ProducerStateManager::new().load_snapshot(&path),
            Err(SnapshotError::Corrupt { .. })
        ));
    }
    let mut wrong_version = bytes.clone();
    wrong_version[1] = 2;
    std::fs::write(&path, &wrong_version).expect("write");
    assert!(matches!(
        ProducerStateManager::new().load_snapshot(&path),
        Err(SnapshotError::Corrupt { .. })
    ));
}
