//! TxnOffsetCommit and transaction markers through the async layer: the
//! transactional batch in the log, the answer after the log commits it,
//! markers applied once the log commits them, and a restart.

use crate::common;

use std::sync::Arc;

use common::*;
use strom_clock::{SeededRandom, TokioClock};
use strom_coordinator::{
    BatchContext, CoordinatorConfig, GroupCoordinator, GroupError, LogError, OffsetCommitPartition,
    OffsetsLog, TransactionMarker, TxnOffsetCommitRequest,
};

const PRODUCER: i64 = 77;

fn coordinator(log: ControlledLog) -> GroupCoordinator<ControlledLog> {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        log,
        Arc::new(TokioClock::new()),
        Arc::new(SeededRandom::from_entropy()),
    );
    coordinator.load_partition(0).expect("loads");
    coordinator
}

fn request(offset: i64) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: "g".into(),
        producer_id: PRODUCER,
        producer_epoch: 3,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: vec![OffsetCommitPartition {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    }
}

/// The offset of t-0 and whether it is unstable.
fn fetched(
    coordinator: &GroupCoordinator<ControlledLog>,
    require_stable: bool,
) -> Result<(i64, bool), GroupError> {
    let topics = [("t".to_owned(), vec![0])];
    let answers = coordinator.fetch_offsets("g", Some(&topics), require_stable)?;
    Ok((answers[0].offset, answers[0].error.is_some()))
}

/// Writes the producer's marker into the log; returns its offset.
fn write_marker(coordinator: &GroupCoordinator<ControlledLog>, commit: bool) -> i64 {
    coordinator.with_log_mut(|log| {
        log.inner
            .append_marker(0, PRODUCER, 3, TransactionMarker::new(commit))
    })
}

#[tokio::test(start_paused = true)]
async fn a_transactional_commit_is_a_transactional_batch_held_until_its_marker() {
    let coordinator = coordinator(ControlledLog::default());
    let results = coordinator
        .commit_transactional_offsets(&request(42))
        .await
        .expect("committed");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1, Ok(()));
    let stored = coordinator.with_log(|log| log.read(0, 0, 10).expect("reads"));
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].batch, BatchContext::transactional(PRODUCER, 3));
    assert_eq!(coordinator.open_transactions(), 1);
    assert_eq!(fetched(&coordinator, false), Ok((-1, false)));
    assert_eq!(fetched(&coordinator, true), Ok((-1, true)));
    let marker_offset = write_marker(&coordinator, true);
    coordinator
        .complete_transaction(0, PRODUCER, true, marker_offset)
        .expect("owned");
    assert_eq!(fetched(&coordinator, true), Ok((42, false)));
    // Idempotent.
    coordinator
        .complete_transaction(0, PRODUCER, false, marker_offset)
        .expect("owned");
    assert_eq!(fetched(&coordinator, true), Ok((42, false)));
    assert_eq!(
        coordinator.complete_transaction(1, PRODUCER, true, 0),
        Err(GroupError::NotCoordinator { partition: 1 })
    );
    // A restarted coordinator reads the same from the log.
    let log = coordinator.with_log(|log| log.inner.clone());
    let restarted = self::coordinator(ControlledLog {
        inner: log,
        ..ControlledLog::default()
    });
    assert_eq!(fetched(&restarted, true), Ok((42, false)));
}

#[tokio::test(start_paused = true)]
async fn a_refused_append_holds_nothing_and_an_uncommitted_one_stays_held() {
    let coordinator = coordinator(ControlledLog::default());
    coordinator.with_log_mut(|log| log.refuse_appends = true);
    assert_eq!(
        coordinator.commit_transactional_offsets(&request(1)).await,
        Err(GroupError::LogAppendFailed {
            source: LogError::NotLeader { partition: 0 }
        })
    );
    assert_eq!(coordinator.open_transactions(), 0);
    assert_eq!(fetched(&coordinator, true), Ok((-1, false)));
    let timeout = LogError::ReplicationTimeout {
        partition: 0,
        timeout_ms: 5_000,
    };
    coordinator.with_log_mut(|log| {
        log.refuse_appends = false;
        log.commit_failure = Some(timeout.clone());
    });
    assert_eq!(
        coordinator.commit_transactional_offsets(&request(2)).await,
        Err(GroupError::LogAppendFailed { source: timeout })
    );
    // The batch is in the leader's log: its offsets are held.
    assert_eq!(coordinator.open_transactions(), 1);
    assert_eq!(fetched(&coordinator, true), Ok((-1, true)));
}

#[tokio::test(start_paused = true)]
async fn a_marker_takes_effect_once_the_log_commits_it() {
    let coordinator = coordinator(ControlledLog::default());
    coordinator
        .commit_transactional_offsets(&request(9))
        .await
        .expect("committed");
    let marker_offset = write_marker(&coordinator, true);
    coordinator.with_log_mut(|log| log.committed = Some(marker_offset));
    coordinator
        .complete_transaction(0, PRODUCER, true, marker_offset)
        .expect("owned");
    assert_eq!(fetched(&coordinator, false), Ok((-1, false)));
    assert_eq!(fetched(&coordinator, true), Ok((-1, true)));
    coordinator.with_log_mut(|log| log.committed = Some(marker_offset + 1));
    coordinator.tick();
    assert_eq!(coordinator.open_transactions(), 0);
    assert_eq!(fetched(&coordinator, true), Ok((9, false)));
}

#[tokio::test(start_paused = true)]
async fn misuse_is_answered_with_typed_errors() {
    let coordinator = coordinator(ControlledLog::default());
    let mut bad = request(1);
    bad.producer_id = -1;
    assert_eq!(
        coordinator.commit_transactional_offsets(&bad).await,
        Err(GroupError::InvalidProducer {
            producer_id: -1,
            producer_epoch: 3
        })
    );
    let mut bad = request(1);
    bad.generation_id = 4;
    assert_eq!(
        coordinator.commit_transactional_offsets(&bad).await,
        Err(GroupError::IllegalGeneration {
            requested: 4,
            current: -1
        })
    );
    assert_eq!(coordinator.with_log(|log| log.inner.len(0)), 0);
    assert_eq!(
        coordinator.delete_groups(&["g".to_owned()]),
        Ok(vec![("g".to_owned(), Err(GroupError::GroupIdNotFound))])
    );
    coordinator
        .commit_transactional_offsets(&request(1))
        .await
        .expect("committed");
    assert_eq!(
        coordinator.delete_groups(&["g".to_owned()]),
        Ok(vec![("g".to_owned(), Err(GroupError::NonEmptyGroup))])
    );
}
