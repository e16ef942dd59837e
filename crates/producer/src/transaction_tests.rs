//! The transaction manager's calls in every state: the legal ones move as
//! Kafka's producer does, the illegal ones fail with a typed error and
//! change nothing.

use std::time::{Duration, Instant};

use strom_protocol::ErrorCode;

use super::TransactionManager;
use crate::accumulator::TopicPartition;
use crate::error::{ProduceError, TransactionError};
use crate::transaction_state::TransactionOperation::{self, *};
use crate::transaction_state::TransactionState::{self, *};

fn tp(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: "t".to_owned(),
        partition,
    }
}

fn record_failed() -> TransactionError {
    TransactionError::record_failed("id", "t", 0, ProduceError::Timeout { elapsed_ms: 1 })
}

fn fenced() -> TransactionError {
    TransactionError::ProducerFenced {
        code: ErrorCode::ProducerFenced,
    }
}

/// A manager driven into `state` through legal calls.
fn manager_in(state: TransactionState) -> TransactionManager {
    let mut manager = TransactionManager::new("id");
    let steps: &[fn(&mut TransactionManager)] = match state {
        Uninitialized => &[],
        Initializing => &[|m| m.start_init().unwrap()],
        Ready => &[|m| m.start_init().unwrap(), |m| m.init_completed()],
        InTransaction => &[
            |m| m.start_init().unwrap(),
            |m| m.init_completed(),
            |m| m.begin().unwrap(),
        ],
        Committing => &[
            |m| m.start_init().unwrap(),
            |m| m.init_completed(),
            |m| m.begin().unwrap(),
            |m| m.start_commit().unwrap(),
        ],
        Aborting => &[
            |m| m.start_init().unwrap(),
            |m| m.init_completed(),
            |m| m.begin().unwrap(),
            |m| m.start_abort().unwrap(),
        ],
        AbortableError => &[
            |m| m.start_init().unwrap(),
            |m| m.init_completed(),
            |m| m.begin().unwrap(),
            |m| m.fail(TransactionError::TransactionAbortable),
        ],
        FatalError => &[|m| m.fail(fenced())],
    };
    for step in steps {
        step(&mut manager);
    }
    assert_eq!(manager.state(), state);
    manager
}

/// Calls `operation`; `Ok` with the state after, or the error.
fn call(
    manager: &mut TransactionManager,
    operation: TransactionOperation,
) -> Result<TransactionState, TransactionError> {
    match operation {
        InitTransactions => manager.start_init(),
        BeginTransaction => manager.begin(),
        Send => manager.check_send(&tp(0)),
        SendOffsets => manager.check_send_offsets(),
        CommitTransaction => manager.start_commit(),
        AbortTransaction => manager.start_abort(),
    }
    .map(|()| manager.state())
}

/// Every call in every state: the state it leads to, or `None` when it is
/// refused.
const CALLS: [(
    TransactionState,
    TransactionOperation,
    Option<TransactionState>,
); 48] = [
    (Uninitialized, InitTransactions, Some(Initializing)),
    (Uninitialized, BeginTransaction, None),
    (Uninitialized, Send, None),
    (Uninitialized, SendOffsets, None),
    (Uninitialized, CommitTransaction, None),
    (Uninitialized, AbortTransaction, None),
    // Resumed after a timeout.
    (Initializing, InitTransactions, Some(Initializing)),
    (Initializing, BeginTransaction, None),
    (Initializing, Send, None),
    (Initializing, SendOffsets, None),
    (Initializing, CommitTransaction, None),
    (Initializing, AbortTransaction, None),
    (Ready, InitTransactions, None),
    (Ready, BeginTransaction, Some(InTransaction)),
    (Ready, Send, None),
    (Ready, SendOffsets, None),
    (Ready, CommitTransaction, None),
    (Ready, AbortTransaction, None),
    (InTransaction, InitTransactions, None),
    (InTransaction, BeginTransaction, None),
    (InTransaction, Send, Some(InTransaction)),
    (InTransaction, SendOffsets, Some(InTransaction)),
    (InTransaction, CommitTransaction, Some(Committing)),
    (InTransaction, AbortTransaction, Some(Aborting)),
    (Committing, InitTransactions, None),
    (Committing, BeginTransaction, None),
    (Committing, Send, None),
    (Committing, SendOffsets, None),
    // Resumed after a timeout.
    (Committing, CommitTransaction, Some(Committing)),
    (Committing, AbortTransaction, None),
    (Aborting, InitTransactions, None),
    (Aborting, BeginTransaction, None),
    (Aborting, Send, None),
    (Aborting, SendOffsets, None),
    (Aborting, CommitTransaction, None),
    // Resumed after a timeout.
    (Aborting, AbortTransaction, Some(Aborting)),
    (AbortableError, InitTransactions, None),
    (AbortableError, BeginTransaction, None),
    (AbortableError, Send, None),
    (AbortableError, SendOffsets, None),
    (AbortableError, CommitTransaction, None),
    (AbortableError, AbortTransaction, Some(Aborting)),
    (FatalError, InitTransactions, None),
    (FatalError, BeginTransaction, None),
    (FatalError, Send, None),
    (FatalError, SendOffsets, None),
    (FatalError, CommitTransaction, None),
    (FatalError, AbortTransaction, None),
];

#[test]
fn every_call_in_every_state_is_listed() {
    let operations = [
        InitTransactions,
        BeginTransaction,
        Send,
        SendOffsets,
        CommitTransaction,
        AbortTransaction,
    ];
    for state in TransactionState::ALL {
        for operation in operations {
            assert!(
                CALLS.iter().any(|(s, o, _)| (*s, *o) == (state, operation)),
                "{operation} in {state} has no case"
            );
        }
    }
}

#[test]
fn legal_calls_move_and_illegal_calls_fail_typed_without_moving() {
    for (state, operation, expected) in CALLS {
        let mut manager = manager_in(state);
        let result = call(&mut manager, operation);
        match expected {
            Some(next) => assert_eq!(result, Ok(next), "{operation} in {state}"),
            None => {
                let error = result.expect_err("refused");
                let expected_error = match state {
                    AbortableError => TransactionError::TransactionAbortable,
                    FatalError => fenced(),
                    state => TransactionError::InvalidState { operation, state },
                };
                assert_eq!(error, expected_error, "{operation} in {state}");
                assert_eq!(manager.state(), state, "{operation} in {state} moved");
            }
        }
    }
}

#[test]
fn begin_twice_send_outside_and_commit_without_begin_are_invalid_state() {
    let mut manager = manager_in(Ready);
    assert_eq!(
        manager.check_send(&tp(0)),
        Err(TransactionError::InvalidState {
            operation: Send,
            state: Ready
        })
    );
    assert_eq!(
        manager.start_commit(),
        Err(TransactionError::InvalidState {
            operation: CommitTransaction,
            state: Ready
        })
    );
    manager.begin().unwrap();
    assert_eq!(
        manager.begin(),
        Err(TransactionError::InvalidState {
            operation: BeginTransaction,
            state: InTransaction
        })
    );
}

#[test]
fn a_partition_is_sent_only_after_it_was_added() {
    let mut manager = manager_in(InTransaction);
    let now = Instant::now();
    manager.check_send(&tp(0)).unwrap();
    manager.check_send(&tp(0)).unwrap();
    manager.check_send(&tp(1)).unwrap();
    assert!(!manager.may_send(&tp(0)));
    assert!(!manager.needs_end_txn(), "nothing reached the coordinator");
    assert_eq!(manager.partitions_to_add(now), [tp(0), tp(1)]);
    assert!(manager.add_in_flight());
    // One add at a time.
    manager.check_send(&tp(2)).unwrap();
    assert!(manager.partitions_to_add(now).is_empty());
    assert!(!manager.may_send(&tp(0)));
    manager.partitions_added();
    assert!(manager.may_send(&tp(0)) && manager.may_send(&tp(1)));
    assert!(!manager.may_send(&tp(2)));
    assert!(manager.needs_end_txn());
    // A partition already added is not added again.
    manager.check_send(&tp(0)).unwrap();
    assert_eq!(manager.partitions_to_add(now), [tp(2)]);
}

#[test]
fn a_retried_add_waits_for_its_backoff() {
    let mut manager = manager_in(InTransaction);
    let now = Instant::now();
    manager.check_send(&tp(0)).unwrap();
    assert_eq!(manager.partitions_to_add(now), [tp(0)]);
    let retry_at = now + Duration::from_millis(20);
    manager.partitions_retry(retry_at);
    assert!(!manager.add_in_flight());
    assert_eq!(manager.next_add_partitions_at(), Some(retry_at));
    assert!(manager.partitions_to_add(now).is_empty());
    assert_eq!(manager.partitions_to_add(retry_at), [tp(0)]);
}

#[test]
fn a_failed_add_makes_the_transaction_abortable() {
    let mut manager = manager_in(InTransaction);
    manager.check_send(&tp(0)).unwrap();
    manager.partitions_to_add(Instant::now());
    let error = TransactionError::TopicAuthorizationFailed {
        topic: "t".to_owned(),
    };
    manager.partitions_failed(error.clone());
    assert_eq!(manager.state(), AbortableError);
    assert_eq!(manager.error_for_queued_batches(), Some(error.clone()));
    assert!(!manager.may_send(&tp(0)));
    assert_eq!(manager.start_commit(), Err(error));
    manager.start_abort().unwrap();
    assert_eq!(manager.end_completed(), Ready);
    assert!(!manager.epoch_bump_required());
}

#[test]
fn commit_ends_in_ready_and_clears_the_partitions() {
    let mut manager = manager_in(InTransaction);
    manager.check_send(&tp(0)).unwrap();
    manager.partitions_to_add(Instant::now());
    manager.partitions_added();
    manager.start_commit().unwrap();
    assert!(manager.may_send(&tp(0)), "commit flushes the records");
    assert_eq!(manager.end_completed(), Ready);
    assert!(!manager.needs_end_txn());
    assert!(!manager.may_send(&tp(0)));
    manager.begin().unwrap();
    manager.check_send(&tp(0)).unwrap();
    assert_eq!(
        manager.partitions_to_add(Instant::now()),
        [tp(0)],
        "each transaction adds its partitions"
    );
}

#[test]
fn a_failed_record_during_commit_makes_it_abortable_and_the_abort_bumps_the_epoch() {
    let mut manager = manager_in(Committing);
    manager.fail(record_failed());
    assert_eq!(manager.state(), AbortableError);
    assert!(manager.epoch_bump_required());
    manager.start_abort().unwrap();
    // KIP-360: the abort is followed by InitProducerId with the current
    // producer id and epoch.
    assert_eq!(manager.end_completed(), Initializing);
    assert!(manager.epoch_bump_required());
    assert_eq!(manager.start_init(), Ok(()));
    manager.init_completed();
    assert_eq!(manager.state(), Ready);
    assert!(!manager.epoch_bump_required());
}

#[test]
fn unknown_producer_id_is_abortable_with_an_epoch_bump() {
    let mut manager = manager_in(InTransaction);
    manager.fail(TransactionError::UnknownProducerId);
    assert_eq!(manager.state(), AbortableError);
    assert!(manager.epoch_bump_required());
}

#[test]
fn fatal_errors_are_fatal_from_every_state_and_stay() {
    for state in TransactionState::ALL {
        let mut manager = manager_in(state);
        manager.fail(fenced());
        assert_eq!(manager.state(), FatalError, "from {state}");
        manager.fail(TransactionError::TransactionAbortable);
        assert_eq!(manager.state(), FatalError);
        assert_eq!(manager.begin(), Err(fenced()));
        assert_eq!(manager.error_for_queued_batches(), Some(fenced()));
    }
}

#[test]
fn errors_that_are_neither_fatal_nor_abortable_change_nothing() {
    let mut manager = manager_in(InTransaction);
    manager.fail(TransactionError::Timeout {
        operation: CommitTransaction,
        elapsed_ms: 5,
    });
    manager.fail(TransactionError::InvalidState {
        operation: BeginTransaction,
        state: InTransaction,
    });
    assert_eq!(manager.state(), InTransaction);
    assert_eq!(manager.error_for_queued_batches(), None);
}

#[test]
fn an_abortable_error_while_aborting_keeps_aborting() {
    let mut manager = manager_in(Aborting);
    manager.fail(record_failed());
    assert_eq!(manager.state(), Aborting);
    assert!(manager.epoch_bump_required());
}

#[test]
fn abort_forgets_partitions_not_added_yet() {
    let mut manager = manager_in(InTransaction);
    manager.check_send(&tp(0)).unwrap();
    manager.start_abort().unwrap();
    assert!(manager.partitions_to_add(Instant::now()).is_empty());
    assert!(
        !manager.needs_end_txn(),
        "no EndTxn for a transaction the coordinator never saw"
    );
    assert_eq!(manager.end_completed(), Ready);
}

#[test]
fn offsets_alone_need_an_end_txn() {
    let mut manager = manager_in(InTransaction);
    manager.check_send_offsets().unwrap();
    manager.offsets_added();
    assert!(manager.needs_end_txn());
}
