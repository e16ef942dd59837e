//! Tests of the metadata transitions, one group per request.

use std::collections::BTreeSet;

use super::{
    InitProducerId, ProducerIdAndEpoch, TopicPartition, TransactionMetadata, TransactionVersion,
    Transit, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use crate::error::{DecodeError, TransactionError};
use crate::state::{IllegalTransition, TransactionResult, TransactionState};

const PRODUCER_ID: i64 = 1000;
const NEW_PRODUCER_ID: i64 = 2000;
const EXHAUSTED: i16 = i16::MAX - 1;

fn no_allocation() -> i64 {
    panic!("no producer id should be allocated")
}

fn allocate() -> i64 {
    NEW_PRODUCER_ID
}

fn partitions(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter()
        .map(|(topic, partition)| TopicPartition {
            topic: (*topic).to_owned(),
            partition: *partition,
        })
        .collect()
}

fn producer(producer_epoch: i16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch {
        producer_id: PRODUCER_ID,
        producer_epoch,
    }
}

fn init(expected: Option<ProducerIdAndEpoch>) -> InitProducerId {
    InitProducerId {
        transaction_timeout_ms: 30_000,
        max_transaction_timeout_ms: 900_000,
        expected,
        transaction_version: TransactionVersion::V0,
    }
}

fn in_state(
    state: TransactionState,
    producer_epoch: i16,
    version: TransactionVersion,
) -> TransactionMetadata {
    let open = !matches!(
        state,
        TransactionState::Empty
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort
    );
    TransactionMetadata {
        producer_epoch,
        state,
        partitions: if open {
            partitions(&[("t", 0)])
        } else {
            BTreeSet::new()
        },
        transaction_start_timestamp_ms: if open { 100 } else { -1 },
        client_transaction_version: version,
        ..TransactionMetadata::new("tx".to_owned(), PRODUCER_ID, 60_000, 50)
    }
}

fn written(transit: Result<Transit, TransactionError>) -> TransactionMetadata {
    match transit {
        Ok(Transit::Write(metadata)) => metadata,
        other => panic!("expected a write, got {other:?}"),
    }
}

// InitProducerId.

#[test]
fn a_new_transactional_id_gets_epoch_zero() {
    let metadata = TransactionMetadata::new("tx".to_owned(), PRODUCER_ID, 60_000, 50);
    let next = written(metadata.prepare_init_producer_id(init(None), 200, no_allocation));
    assert_eq!((next.producer_id, next.producer_epoch), (PRODUCER_ID, 0));
    assert_eq!(next.last_producer_epoch, NO_PRODUCER_EPOCH);
    assert_eq!(next.state, TransactionState::Empty);
    assert_eq!(next.transaction_timeout_ms, 30_000);
    assert_eq!(next.transaction_last_update_timestamp_ms, 200);
}

#[test]
fn init_bumps_the_epoch_which_fences_the_previous_producer() {
    for state in [
        TransactionState::Empty,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
    ] {
        let metadata = in_state(state, 5, TransactionVersion::V0);
        let next = written(metadata.prepare_init_producer_id(init(None), 200, no_allocation));
        assert_eq!(
            (next.state, next.producer_epoch),
            (TransactionState::Empty, 6)
        );
        assert_eq!(next.last_producer_epoch, NO_PRODUCER_EPOCH);
        assert_eq!(next.transaction_start_timestamp_ms, -1);
        assert!(next.partitions.is_empty());
    }
}

#[test]
fn init_refuses_timeouts_out_of_range() {
    let metadata = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    for timeout_ms in [0, -1, 900_001] {
        let request = InitProducerId {
            transaction_timeout_ms: timeout_ms,
            ..init(None)
        };
        assert_eq!(
            metadata.prepare_init_producer_id(request, 200, no_allocation),
            Err(TransactionError::InvalidTransactionTimeout {
                timeout_ms,
                max_timeout_ms: 900_000
            })
        );
    }
}

#[test]
fn init_while_a_transaction_completes_is_concurrent() {
    for state in [
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
    ] {
        let metadata = in_state(state, 5, TransactionVersion::V0);
        assert_eq!(
            metadata.prepare_init_producer_id(init(None), 200, no_allocation),
            Err(TransactionError::ConcurrentTransactions { state })
        );
    }
}

#[test]
fn init_during_a_transaction_aborts_it_with_a_fenced_epoch() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    let Ok(Transit::AbortFenced(next)) =
        metadata.prepare_init_producer_id(init(None), 200, no_allocation)
    else {
        panic!("expected an abort of the fenced transaction");
    };
    assert_eq!(
        (next.state, next.producer_epoch),
        (TransactionState::PrepareAbort, 6)
    );
    assert_eq!(next.partitions, metadata.partitions);
    assert_eq!(next.transaction_timeout_ms, 60_000);
}

#[test]
fn init_with_an_exhausted_epoch_rotates_the_producer_id() {
    let metadata = in_state(
        TransactionState::CompleteCommit,
        EXHAUSTED,
        TransactionVersion::V0,
    );
    let next = written(metadata.prepare_init_producer_id(init(None), 200, allocate));
    assert_eq!(
        (next.producer_id, next.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
    assert_eq!(next.previous_producer_id, PRODUCER_ID);
    assert_eq!(next.last_producer_epoch, NO_PRODUCER_EPOCH);

    let recovering = init(Some(producer(EXHAUSTED)));
    let next = written(metadata.prepare_init_producer_id(recovering, 200, allocate));
    assert_eq!(
        (next.producer_id, next.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
    assert_eq!(next.last_producer_epoch, EXHAUSTED);

    // The answer was lost and the producer retries with its old id.
    let retried = written(next.prepare_init_producer_id(recovering, 300, no_allocation));
    assert_eq!(
        (retried.producer_id, retried.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
}

#[test]
fn a_recovering_producer_with_the_current_epoch_gets_the_next() {
    let metadata = in_state(TransactionState::CompleteAbort, 5, TransactionVersion::V0);
    let next =
        written(metadata.prepare_init_producer_id(init(Some(producer(5))), 200, no_allocation));
    assert_eq!((next.producer_epoch, next.last_producer_epoch), (6, 5));
    // A retry whose answer was lost gets the same epoch again.
    let retried =
        written(next.prepare_init_producer_id(init(Some(producer(5))), 300, no_allocation));
    assert_eq!(
        (retried.producer_epoch, retried.last_producer_epoch),
        (6, 5)
    );
}

#[test]
fn a_recovering_producer_with_an_old_epoch_or_another_id_is_fenced() {
    let metadata = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    assert_eq!(
        metadata.prepare_init_producer_id(init(Some(producer(3))), 200, no_allocation),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 3,
            current_epoch: 5
        })
    );
    let other = ProducerIdAndEpoch {
        producer_id: 7,
        producer_epoch: 5,
    };
    assert_eq!(
        metadata.prepare_init_producer_id(init(Some(other)), 200, no_allocation),
        Err(TransactionError::ProducerFenced {
            producer_id: 7,
            request_epoch: 5,
            current_epoch: 5
        })
    );
}

#[test]
fn a_producer_recovering_after_the_id_was_recreated_continues() {
    let metadata = TransactionMetadata::new("tx".to_owned(), NEW_PRODUCER_ID, 60_000, 50);
    let next =
        written(metadata.prepare_init_producer_id(init(Some(producer(9))), 200, no_allocation));
    assert_eq!(
        (next.producer_id, next.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
}

#[test]
fn init_on_a_dead_id_is_an_illegal_transition() {
    let metadata = in_state(TransactionState::Dead, 5, TransactionVersion::V0);
    assert_eq!(
        metadata.prepare_init_producer_id(init(None), 200, no_allocation),
        Err(TransactionError::IllegalTransition(IllegalTransition {
            from: TransactionState::Dead,
            to: TransactionState::Empty
        }))
    );
}

// AddPartitionsToTxn.

#[test]
fn adding_partitions_opens_a_transaction() {
    let metadata = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    let added = partitions(&[("a", 1), ("b", 0)]);
    let next =
        written(metadata.prepare_add_partitions(producer(5), &added, TransactionVersion::V1, 200));
    assert_eq!(next.state, TransactionState::Ongoing);
    assert_eq!(next.partitions, added);
    assert_eq!(next.transaction_start_timestamp_ms, 200);
    assert_eq!(next.client_transaction_version, TransactionVersion::V1);

    let more = written(next.prepare_add_partitions(
        producer(5),
        &partitions(&[("c", 0)]),
        TransactionVersion::V1,
        300,
    ));
    assert_eq!(more.partitions, partitions(&[("a", 1), ("b", 0), ("c", 0)]));
    assert_eq!(more.transaction_start_timestamp_ms, 200);
    assert_eq!(more.transaction_last_update_timestamp_ms, 300);
}

#[test]
fn partitions_already_in_the_transaction_need_no_write() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    let transit = metadata.prepare_add_partitions(
        producer(5),
        &partitions(&[("t", 0)]),
        TransactionVersion::V0,
        200,
    );
    assert_eq!(transit, Ok(Transit::Unchanged));
}

#[test]
fn adding_partitions_checks_the_producer_and_the_state() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    let added = partitions(&[("a", 0)]);
    let other = ProducerIdAndEpoch {
        producer_id: 7,
        producer_epoch: 5,
    };
    assert_eq!(
        metadata.prepare_add_partitions(other, &added, TransactionVersion::V0, 200),
        Err(TransactionError::InvalidProducerIdMapping {
            request_producer_id: 7,
            current_producer_id: PRODUCER_ID
        })
    );
    assert_eq!(
        metadata.prepare_add_partitions(producer(4), &added, TransactionVersion::V0, 200),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 4,
            current_epoch: 5
        })
    );
    let completing = in_state(TransactionState::PrepareCommit, 5, TransactionVersion::V0);
    assert_eq!(
        completing.prepare_add_partitions(producer(5), &added, TransactionVersion::V0, 200),
        Err(TransactionError::ConcurrentTransactions {
            state: TransactionState::PrepareCommit
        })
    );
    let dead = in_state(TransactionState::Dead, 5, TransactionVersion::V0);
    assert!(matches!(
        dead.prepare_add_partitions(producer(5), &added, TransactionVersion::V0, 200),
        Err(TransactionError::IllegalTransition(_))
    ));
}

// EndTxn before transaction version 2.

fn end(
    metadata: &TransactionMetadata,
    epoch: i16,
    result: TransactionResult,
    version: TransactionVersion,
) -> Result<Transit, TransactionError> {
    metadata.prepare_end_transaction(producer(epoch), result, version, 200, no_allocation)
}

#[test]
fn end_prepares_the_outcome_with_the_same_epoch() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    for (result, state) in [
        (TransactionResult::Commit, TransactionState::PrepareCommit),
        (TransactionResult::Abort, TransactionState::PrepareAbort),
    ] {
        let next = written(end(&metadata, 5, result, TransactionVersion::V0));
        assert_eq!((next.state, next.producer_epoch), (state, 5));
        assert_eq!(next.partitions, metadata.partitions);
        assert_eq!(next.transaction_start_timestamp_ms, 100);
    }
}

#[test]
fn end_answers_retries_and_refuses_contradictions() {
    use TransactionResult::{Abort, Commit};
    use TransactionState::*;
    let cases = [
        (CompleteCommit, Commit, Ok(Transit::Unchanged)),
        (CompleteAbort, Abort, Ok(Transit::Unchanged)),
        (
            PrepareCommit,
            Commit,
            Err(TransactionError::ConcurrentTransactions {
                state: PrepareCommit,
            }),
        ),
        (
            PrepareAbort,
            Abort,
            Err(TransactionError::ConcurrentTransactions {
                state: PrepareAbort,
            }),
        ),
    ];
    for (state, result, expected) in cases {
        let metadata = in_state(state, 5, TransactionVersion::V0);
        assert_eq!(
            end(&metadata, 5, result, TransactionVersion::V0),
            expected,
            "{state} {result}"
        );
    }
    for (state, result) in [
        (CompleteCommit, Abort),
        (CompleteAbort, Commit),
        (PrepareCommit, Abort),
        (PrepareAbort, Commit),
        (Empty, Commit),
        (Empty, Abort),
    ] {
        let metadata = in_state(state, 5, TransactionVersion::V0);
        assert_eq!(
            end(&metadata, 5, result, TransactionVersion::V1),
            Err(TransactionError::InvalidTxnState {
                state,
                requested: result
            }),
            "{state} {result}"
        );
    }
}

#[test]
fn end_from_a_fenced_producer_is_refused() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    assert_eq!(
        end(
            &metadata,
            4,
            TransactionResult::Commit,
            TransactionVersion::V0
        ),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 4,
            current_epoch: 5
        })
    );
    let other = ProducerIdAndEpoch {
        producer_id: 7,
        producer_epoch: 5,
    };
    assert!(matches!(
        metadata.prepare_end_transaction(
            other,
            TransactionResult::Commit,
            TransactionVersion::V0,
            200,
            no_allocation
        ),
        Err(TransactionError::InvalidProducerIdMapping { .. })
    ));
}

// EndTxn with transaction version 2 (KIP-890 part 2).

#[test]
fn end_with_version_2_bumps_the_epoch() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V2);
    let prepared = written(end(
        &metadata,
        5,
        TransactionResult::Commit,
        TransactionVersion::V2,
    ));
    assert_eq!(
        (prepared.state, prepared.producer_epoch),
        (TransactionState::PrepareCommit, 6)
    );
    assert_eq!(prepared.last_producer_epoch, 5);
    assert_eq!(prepared.next_producer_id, NO_PRODUCER_ID);
    let complete = prepared.prepare_complete(300).unwrap();
    assert_eq!(
        (complete.state, complete.producer_epoch),
        (TransactionState::CompleteCommit, 6)
    );
    assert_eq!(complete.producer_id, PRODUCER_ID);

    // Retries of the same EndTxn, with the epoch it was sent with.
    assert_eq!(
        end(
            &prepared,
            5,
            TransactionResult::Commit,
            TransactionVersion::V2
        ),
        Err(TransactionError::ConcurrentTransactions {
            state: TransactionState::PrepareCommit
        })
    );
    assert_eq!(
        end(
            &complete,
            5,
            TransactionResult::Commit,
            TransactionVersion::V2
        ),
        Ok(Transit::Unchanged)
    );
    assert_eq!(
        end(
            &complete,
            5,
            TransactionResult::Abort,
            TransactionVersion::V2
        ),
        Err(TransactionError::InvalidTxnState {
            state: TransactionState::CompleteCommit,
            requested: TransactionResult::Abort
        })
    );
}

#[test]
fn a_delayed_end_never_ends_a_later_transaction() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V2);
    let prepared = written(end(
        &metadata,
        5,
        TransactionResult::Commit,
        TransactionVersion::V2,
    ));
    let complete = prepared.prepare_complete(300).unwrap();
    let added = partitions(&[("t", 1)]);
    let later =
        written(complete.prepare_add_partitions(producer(6), &added, TransactionVersion::V2, 400));
    for result in [TransactionResult::Commit, TransactionResult::Abort] {
        assert_eq!(
            end(&later, 5, result, TransactionVersion::V2),
            Err(TransactionError::ProducerFenced {
                producer_id: PRODUCER_ID,
                request_epoch: 5,
                current_epoch: 6
            })
        );
    }
    assert_eq!(
        end(
            &prepared,
            4,
            TransactionResult::Abort,
            TransactionVersion::V2
        ),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 4,
            current_epoch: 6
        })
    );
}

#[test]
fn version_2_may_abort_without_an_open_transaction() {
    for state in [
        TransactionState::Empty,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
    ] {
        let metadata = in_state(state, 5, TransactionVersion::V2);
        let next = written(end(
            &metadata,
            5,
            TransactionResult::Abort,
            TransactionVersion::V2,
        ));
        assert_eq!(
            (next.state, next.producer_epoch),
            (TransactionState::PrepareAbort, 6)
        );
        assert_eq!(next.transaction_start_timestamp_ms, 200);
    }
    let empty = in_state(TransactionState::Empty, 5, TransactionVersion::V2);
    assert_eq!(
        end(&empty, 5, TransactionResult::Commit, TransactionVersion::V2),
        Err(TransactionError::InvalidTxnState {
            state: TransactionState::Empty,
            requested: TransactionResult::Commit
        })
    );
}

#[test]
fn version_2_completes_an_exhausted_producer_onto_a_new_id() {
    let metadata = in_state(TransactionState::Ongoing, EXHAUSTED, TransactionVersion::V2);
    let prepared = written(metadata.prepare_end_transaction(
        producer(EXHAUSTED),
        TransactionResult::Commit,
        TransactionVersion::V2,
        200,
        allocate,
    ));
    assert_eq!(
        (prepared.producer_id, prepared.producer_epoch),
        (PRODUCER_ID, i16::MAX)
    );
    assert_eq!(prepared.next_producer_id, NEW_PRODUCER_ID);
    let complete = prepared.prepare_complete(300).unwrap();
    assert_eq!(
        (complete.producer_id, complete.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
    assert_eq!(complete.previous_producer_id, PRODUCER_ID);
    assert_eq!(complete.last_producer_epoch, EXHAUSTED);
    assert_eq!(complete.next_producer_id, NO_PRODUCER_ID);
    // The answer was lost: the retry with the old id and epoch succeeds.
    assert_eq!(
        end(
            &complete,
            EXHAUSTED,
            TransactionResult::Commit,
            TransactionVersion::V2
        ),
        Ok(Transit::Unchanged)
    );
}

#[test]
fn an_epoch_that_cannot_be_bumped_is_a_typed_error() {
    let metadata = in_state(TransactionState::Ongoing, i16::MAX, TransactionVersion::V2);
    assert_eq!(
        end(
            &metadata,
            i16::MAX,
            TransactionResult::Commit,
            TransactionVersion::V2
        ),
        Err(TransactionError::EpochExhausted {
            producer_id: PRODUCER_ID,
            producer_epoch: i16::MAX
        })
    );
    // An abort at the last epoch goes through, so the id can recover.
    let aborted = written(metadata.prepare_end_transaction(
        producer(i16::MAX),
        TransactionResult::Abort,
        TransactionVersion::V2,
        200,
        allocate,
    ));
    assert_eq!(
        (aborted.producer_epoch, aborted.next_producer_id),
        (i16::MAX, NEW_PRODUCER_ID)
    );
}

// Fencing, timeouts, completion, expiration.

#[test]
fn a_fence_aborts_with_one_more_epoch() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V2);
    let fenced = metadata
        .prepare_epoch_fence(TransactionVersion::V1, 200)
        .unwrap();
    assert_eq!(
        (fenced.state, fenced.producer_epoch),
        (TransactionState::PrepareAbort, 6)
    );
    assert_eq!(fenced.last_producer_epoch, NO_PRODUCER_EPOCH);
    assert_eq!(fenced.client_transaction_version, TransactionVersion::V1);
    assert_eq!(fenced.partitions, metadata.partitions);
    assert_eq!(
        fenced.prepare_epoch_fence(TransactionVersion::V1, 300),
        fence_refused(TransactionState::PrepareAbort)
    );

    let at_max = in_state(TransactionState::Ongoing, i16::MAX, TransactionVersion::V0);
    let fenced = at_max
        .prepare_epoch_fence(TransactionVersion::V0, 200)
        .unwrap();
    assert_eq!(fenced.producer_epoch, i16::MAX);

    let empty = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    assert_eq!(
        empty.prepare_epoch_fence(TransactionVersion::V0, 200),
        fence_refused(TransactionState::Empty)
    );
}

#[test]
fn a_fence_with_version_2_bumps_for_the_fence_and_for_the_abort() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    let fenced = metadata
        .prepare_epoch_fence(TransactionVersion::V2, 200)
        .unwrap();
    assert_eq!((fenced.producer_epoch, fenced.last_producer_epoch), (7, 6));
    assert_eq!(fenced.client_transaction_version, TransactionVersion::V2);
    // The fenced producer's EndTxn, late, changes nothing.
    assert_eq!(
        end(
            &fenced,
            5,
            TransactionResult::Commit,
            TransactionVersion::V2
        ),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 5,
            current_epoch: 7
        })
    );
    let complete = fenced.prepare_complete(300).unwrap();
    assert_eq!(
        end(
            &complete,
            5,
            TransactionResult::Abort,
            TransactionVersion::V2
        ),
        Err(TransactionError::ProducerFenced {
            producer_id: PRODUCER_ID,
            request_epoch: 5,
            current_epoch: 7
        })
    );

    let exhausted = in_state(TransactionState::Ongoing, EXHAUSTED, TransactionVersion::V2);
    let fenced = exhausted
        .prepare_epoch_fence(TransactionVersion::V2, 200)
        .unwrap();
    assert_eq!(
        (fenced.producer_epoch, fenced.last_producer_epoch),
        (i16::MAX, i16::MAX)
    );
    assert_eq!(fenced.next_producer_id, NO_PRODUCER_ID);
    // The next InitProducerId moves the id to a new producer id.
    let complete = fenced.prepare_complete(300).unwrap();
    let next = written(complete.prepare_init_producer_id(init(None), 400, allocate));
    assert_eq!(
        (next.producer_id, next.producer_epoch),
        (NEW_PRODUCER_ID, 0)
    );
}

fn fence_refused(from: TransactionState) -> Result<TransactionMetadata, TransactionError> {
    Err(TransactionError::IllegalTransition(IllegalTransition {
        from,
        to: TransactionState::PrepareEpochFence,
    }))
}

#[test]
fn an_ongoing_transaction_times_out_after_its_timeout() {
    let metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    assert!(!metadata.has_timed_out(100 + 60_000));
    assert!(metadata.has_timed_out(100 + 60_001));
    let empty = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    assert!(!empty.has_timed_out(i64::MAX));
}

#[test]
fn completion_clears_the_partitions() {
    for (state, complete) in [
        (
            TransactionState::PrepareCommit,
            TransactionState::CompleteCommit,
        ),
        (
            TransactionState::PrepareAbort,
            TransactionState::CompleteAbort,
        ),
    ] {
        let metadata = in_state(state, 5, TransactionVersion::V0);
        let next = metadata.prepare_complete(300).unwrap();
        assert_eq!((next.state, next.producer_epoch), (complete, 5));
        assert!(next.partitions.is_empty());
        assert_eq!(next.transaction_last_update_timestamp_ms, 300);
    }
    let ongoing = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    assert!(matches!(
        ongoing.prepare_complete(300),
        Err(TransactionError::IllegalTransition(_))
    ));
}

#[test]
fn an_idle_id_expires_and_an_open_one_does_not() {
    let metadata = in_state(TransactionState::CompleteCommit, 5, TransactionVersion::V0);
    assert!(!metadata.is_expired(50 + 999, 1000));
    assert!(metadata.is_expired(50 + 1000, 1000));
    assert_eq!(
        metadata.prepare_dead().unwrap().state,
        TransactionState::Dead
    );
    let ongoing = in_state(TransactionState::Ongoing, 5, TransactionVersion::V0);
    assert!(!ongoing.is_expired(i64::MAX, 1000));
    assert!(matches!(
        ongoing.prepare_dead(),
        Err(TransactionError::IllegalTransition(_))
    ));
}

// The log value.

#[test]
fn the_log_value_groups_partitions_by_topic_and_reads_back() {
    let mut metadata = in_state(TransactionState::Ongoing, 5, TransactionVersion::V2);
    metadata.partitions = partitions(&[("a", 2), ("a", 0), ("b", 1)]);
    let value = metadata.to_log_value();
    let topics = value.transaction_partitions.clone().unwrap();
    assert_eq!(topics.len(), 2);
    assert_eq!(
        (topics[0].topic.as_str(), topics[0].partition_ids.as_slice()),
        ("a", &[0, 2][..])
    );
    assert_eq!(value.client_transaction_version, 2);
    let bytes = value.encode(1).unwrap();
    let decoded = crate::log::TransactionLogValue::decode(&bytes).unwrap();
    assert_eq!(
        TransactionMetadata::from_log_value("tx".to_owned(), &decoded),
        Ok(metadata)
    );

    let empty = in_state(TransactionState::Empty, 5, TransactionVersion::V0);
    assert_eq!(empty.to_log_value().transaction_partitions, None);
    let mut unknown = empty.to_log_value();
    unknown.client_transaction_version = 3;
    assert_eq!(
        TransactionMetadata::from_log_value("tx".to_owned(), &unknown),
        Err(DecodeError::UnknownTransactionVersion { level: 3 })
    );
}

// Random request sequences.

mod sequences {
    use std::cell::Cell;
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::{in_state, partitions, PRODUCER_ID};
    use crate::log::TransactionLogValue;
    use crate::metadata::{
        InitProducerId, ProducerIdAndEpoch, TransactionMetadata, TransactionVersion, Transit,
        NO_PRODUCER_EPOCH,
    };
    use crate::state::{TransactionResult, TransactionState};

    #[derive(Debug, Clone)]
    enum Request {
        Init {
            expected_epoch: Option<i16>,
        },
        Add {
            epoch_delta: i16,
            partition: i32,
            version: TransactionVersion,
        },
        End {
            epoch_delta: i16,
            result: TransactionResult,
            version: TransactionVersion,
        },
        Fence {
            version: TransactionVersion,
        },
        Complete,
        Expire,
    }

    fn any_version() -> impl Strategy<Value = TransactionVersion> {
        prop::sample::select(vec![
            TransactionVersion::V0,
            TransactionVersion::V1,
            TransactionVersion::V2,
        ])
    }

    fn any_request() -> impl Strategy<Value = Request> {
        let result =
            prop::sample::select(vec![TransactionResult::Commit, TransactionResult::Abort]);
        prop_oneof![
            prop::option::of(-2_i16..3).prop_map(|expected_epoch| Request::Init { expected_epoch }),
            (-1_i16..2, 0..3, any_version()).prop_map(|(epoch_delta, partition, version)| {
                Request::Add {
                    epoch_delta,
                    partition,
                    version,
                }
            }),
            (
                prop_oneof![3 => Just(0_i16), 1 => -2_i16..2],
                result,
                any_version()
            )
                .prop_map(|(epoch_delta, result, version)| {
                    Request::End {
                        epoch_delta,
                        result,
                        version,
                    }
                }),
            any_version().prop_map(|version| Request::Fence { version }),
            Just(Request::Complete),
            Just(Request::Expire),
        ]
    }

    fn apply(
        metadata: &TransactionMetadata,
        request: &Request,
        now_ms: i64,
        next_id: &Cell<i64>,
    ) -> Option<TransactionMetadata> {
        let allocate = || {
            next_id.set(next_id.get() + 1);
            next_id.get()
        };
        let producer = |delta: i16| ProducerIdAndEpoch {
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch.wrapping_add(delta),
        };
        let transit = match request {
            Request::Init { expected_epoch } => {
                let request = InitProducerId {
                    transaction_timeout_ms: 1000,
                    max_transaction_timeout_ms: 1000,
                    expected: expected_epoch.map(producer),
                    transaction_version: TransactionVersion::V2,
                };
                metadata.prepare_init_producer_id(request, now_ms, allocate)
            }
            Request::Add {
                epoch_delta,
                partition,
                version,
            } => {
                let added: BTreeSet<_> = partitions(&[("t", *partition)]);
                metadata.prepare_add_partitions(producer(*epoch_delta), &added, *version, now_ms)
            }
            Request::End {
                epoch_delta,
                result,
                version,
            } => {
                let accepted = metadata.prepare_end_transaction(
                    producer(*epoch_delta),
                    *result,
                    *version,
                    now_ms,
                    allocate,
                );
                if version.supports_epoch_bump() && matches!(accepted, Ok(Transit::Write(_))) {
                    assert_eq!(
                        *epoch_delta, 0,
                        "a version 2 EndTxn was accepted with a stale epoch"
                    );
                }
                accepted
            }
            Request::Fence { version } => metadata
                .prepare_epoch_fence(*version, now_ms)
                .map(Transit::Write),
            Request::Complete => metadata.prepare_complete(now_ms).map(Transit::Write),
            Request::Expire => metadata.prepare_dead().map(|_| Transit::Unchanged),
        };
        match transit {
            Ok(Transit::Write(next) | Transit::AbortFenced(next)) => Some(next),
            Ok(Transit::Unchanged) | Err(_) => None,
        }
    }

    fn check(before: &TransactionMetadata, after: &TransactionMetadata) {
        assert_eq!(before.state.transition(after.state), Ok(after.state));
        if after.producer_id == before.producer_id {
            assert!(
                after.producer_epoch >= before.producer_epoch,
                "{before:?} -> {after:?}"
            );
        } else {
            assert_eq!(after.producer_epoch, 0);
            assert_eq!(after.previous_producer_id, before.producer_id);
        }
        if after.state == TransactionState::Ongoing {
            assert!(!after.partitions.is_empty());
        }
        let bytes = after
            .to_log_value()
            .encode(1)
            .expect("every metadata encodes");
        let value = TransactionLogValue::decode(&bytes).expect("and decodes");
        let loaded =
            TransactionMetadata::from_log_value(after.transactional_id.clone(), &value).unwrap();
        let expected_partitions = if after.state == TransactionState::Empty {
            BTreeSet::new()
        } else {
            after.partitions.clone()
        };
        assert_eq!(
            loaded,
            TransactionMetadata {
                last_producer_epoch: NO_PRODUCER_EPOCH,
                partitions: expected_partitions,
                ..after.clone()
            }
        );
    }

    proptest! {
        #[test]
        fn random_requests_keep_the_invariants(
            start_epoch in prop::sample::select(vec![-1_i16, 0, 5, i16::MAX - 3, i16::MAX - 1, i16::MAX]),
            requests in prop::collection::vec(any_request(), 1..40),
        ) {
            let mut metadata = in_state(TransactionState::Empty, start_epoch, TransactionVersion::V0);
            let next_id = Cell::new(PRODUCER_ID);
            for (step, request) in requests.iter().enumerate() {
                let now_ms = 1000 + step as i64;
                if let Some(next) = apply(&metadata, request, now_ms, &next_id) {
                    check(&metadata, &next);
                    metadata = next;
                }
            }
        }
    }
}
