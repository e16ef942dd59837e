use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use strom_clock::ManualClock;

use super::*;
use crate::coordinator::{CoordinatorConfig, InitRequest};
use crate::log::TransactionLogRecord;

const HASH: i32 = 3;
const PARTITION: i32 = 3;

/// An appended record: partition, key, value.
type Appended = (i32, Vec<u8>, Option<Vec<u8>>);

#[derive(Default)]
struct MemoryLog {
    records: Mutex<Vec<Appended>>,
    failures_left: AtomicUsize,
}

#[async_trait]
impl TransactionLog for MemoryLog {
    async fn append(
        &self,
        partition: i32,
        _coordinator_epoch: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), AppendFailure> {
        if self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok()
        {
            return Err(AppendFailure::Failed {
                partition,
                reason: "injected".to_owned(),
            });
        }
        self.records.lock().unwrap().push((partition, key, value));
        Ok(())
    }
}

impl MemoryLog {
    fn states(&self) -> Vec<TransactionState> {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, key, value)| {
                match TransactionLogRecord::decode(key, value.as_deref()).unwrap() {
                    TransactionLogRecord::Transaction { value, .. } => {
                        Some(value.transaction_status)
                    }
                    TransactionLogRecord::Tombstone { .. } => None,
                }
            })
            .collect()
    }
}

/// Answers `Retry` for the first `retries` calls, then writes.
#[derive(Default)]
struct Markers {
    retries: AtomicUsize,
    /// Answer `Fenced` for every partition.
    fenced: std::sync::atomic::AtomicBool,
    written: Mutex<Vec<(TopicPartition, TransactionResult, i16)>>,
}

#[async_trait]
impl MarkerWriter for Markers {
    async fn write_markers(
        &self,
        plan: &MarkerPlan,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Vec<(TopicPartition, MarkerOutcome)> {
        let retry = self
            .retries
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if self.fenced.load(Ordering::SeqCst) {
            return partitions
                .iter()
                .map(|partition| (partition.clone(), MarkerOutcome::Fenced))
                .collect();
        }
        partitions
            .iter()
            .map(|partition| {
                if retry {
                    (partition.clone(), MarkerOutcome::Retry)
                } else {
                    self.written.lock().unwrap().push((
                        partition.clone(),
                        plan.result,
                        plan.producer_epoch,
                    ));
                    (partition.clone(), MarkerOutcome::Written)
                }
            })
            .collect()
    }
}

struct Counter(AtomicI64);

#[async_trait]
impl ProducerIdSource for Counter {
    async fn allocate(&self) -> Result<i64, String> {
        Ok(self.0.fetch_add(1, Ordering::SeqCst))
    }
}

struct Fixture {
    coordinator: TransactionCoordinator,
    log: Arc<MemoryLog>,
    markers: Arc<Markers>,
    clock: Arc<ManualClock>,
}

fn fixture() -> Fixture {
    let log = Arc::new(MemoryLog::default());
    let markers = Arc::new(Markers::default());
    let clock = Arc::new(ManualClock::new(1_000));
    let config = CoordinatorConfig {
        num_partitions: 10,
        ..CoordinatorConfig::default()
    };
    let coordinator = TransactionCoordinator::new(
        config,
        log.clone(),
        markers.clone(),
        Arc::new(Counter(AtomicI64::new(4000))),
        clock.clone(),
    );
    coordinator.begin_loading(PARTITION, 1);
    coordinator
        .complete_load(PARTITION, 1, std::iter::empty())
        .unwrap();
    Fixture {
        coordinator,
        log,
        markers,
        clock,
    }
}

fn orders() -> BTreeSet<TopicPartition> {
    [0, 1]
        .into_iter()
        .map(|partition| TopicPartition {
            topic: "orders".to_owned(),
            partition,
        })
        .collect()
}

fn init() -> InitRequest {
    InitRequest {
        transaction_timeout_ms: 60_000,
        expected: None,
    }
}

/// Waits (in paused time) until the id reaches `state`.
async fn settle(coordinator: &TransactionCoordinator, state: TransactionState) {
    for _ in 0..100 {
        let metadata = coordinator.describe("app", HASH).unwrap().unwrap();
        if metadata.state == state && !coordinator.core().unwrap().is_pending("app") {
            return;
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
    panic!("the transaction never reached {state}");
}

#[tokio::test(start_paused = true)]
async fn a_transaction_commits_through_markers_to_complete() {
    let fixture = fixture();
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    assert_eq!(producer.producer_id, 4000);
    assert_eq!(producer.producer_epoch, 0);
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    let continues = coordinator
        .end_transaction(
            "app",
            HASH,
            producer,
            TransactionResult::Commit,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    assert_eq!(continues, producer);
    settle(coordinator, TransactionState::CompleteCommit).await;
    let written = fixture.markers.written.lock().unwrap().clone();
    assert_eq!(written.len(), 2);
    assert!(written
        .iter()
        .all(|(_, result, epoch)| *result == TransactionResult::Commit && *epoch == 0));
    assert_eq!(
        fixture.log.states(),
        vec![
            TransactionState::Empty,
            TransactionState::Ongoing,
            TransactionState::PrepareCommit,
            TransactionState::CompleteCommit
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn markers_are_retried_until_written() {
    let fixture = fixture();
    fixture.markers.retries.store(3, Ordering::SeqCst);
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    coordinator
        .end_transaction(
            "app",
            HASH,
            producer,
            TransactionResult::Abort,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    settle(coordinator, TransactionState::CompleteAbort).await;
    assert_eq!(fixture.markers.written.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_is_reported_and_leaves_the_state() {
    let fixture = fixture();
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    fixture.log.failures_left.store(1, Ordering::SeqCst);
    let failed = coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await;
    assert_eq!(
        failed,
        Err(CoordinatorError::WriteFailed {
            partition: PARTITION
        })
    );
    let metadata = coordinator.describe("app", HASH).unwrap().unwrap();
    assert_eq!(metadata.state, TransactionState::Empty);
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_new_producer_fences_the_old_one_and_gets_the_next_epoch() {
    let fixture = fixture();
    let coordinator = &fixture.coordinator;
    let old = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    coordinator
        .add_partitions("app", HASH, old, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    let fenced = coordinator.init_producer_id("app", HASH, init()).await;
    assert!(matches!(fenced, Err(CoordinatorError::Concurrent { .. })));
    settle(coordinator, TransactionState::CompleteAbort).await;
    let new = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    assert_eq!(new.producer_epoch, old.producer_epoch + 2);
    let zombie = coordinator
        .end_transaction(
            "app",
            HASH,
            old,
            TransactionResult::Commit,
            TransactionVersion::V0,
        )
        .await;
    assert!(matches!(zombie, Err(CoordinatorError::Transaction(_))));
}

#[tokio::test(start_paused = true)]
async fn the_timer_aborts_a_transaction_past_its_timeout() {
    let fixture = fixture();
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    fixture.clock.advance(60_001);
    coordinator.expire().await;
    settle(coordinator, TransactionState::CompleteAbort).await;
    let written = fixture.markers.written.lock().unwrap().clone();
    assert!(written
        .iter()
        .all(|(_, result, epoch)| *result == TransactionResult::Abort && *epoch == 1));
}

#[tokio::test(start_paused = true)]
async fn a_prepared_transaction_found_on_load_is_completed() {
    let fixture = fixture();
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    // The markers never get through on this coordinator.
    fixture.markers.retries.store(usize::MAX, Ordering::SeqCst);
    coordinator
        .end_transaction(
            "app",
            HASH,
            producer,
            TransactionResult::Commit,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    coordinator.unload(PARTITION);
    let records = fixture.log.records.lock().unwrap().clone();
    let successor = fixture_without_load(&fixture);
    successor.begin_loading(PARTITION, 2);
    let summary = successor
        .complete_load(
            PARTITION,
            2,
            records
                .iter()
                .map(|(_, key, value)| (key.as_slice(), value.as_deref())),
        )
        .unwrap();
    assert_eq!(summary.to_complete.len(), 1);
    settle(&successor, TransactionState::CompleteCommit).await;
}

/// A second coordinator sharing the fixture's log, with markers that work.
fn fixture_without_load(fixture: &Fixture) -> TransactionCoordinator {
    TransactionCoordinator::new(
        CoordinatorConfig {
            num_partitions: 10,
            ..CoordinatorConfig::default()
        },
        fixture.log.clone(),
        Arc::new(Markers::default()),
        Arc::new(Counter(AtomicI64::new(9000))),
        fixture.clock.clone(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_fenced_marker_stops_this_coordinator_writing_markers() {
    let fixture = fixture();
    fixture.markers.fenced.store(true, Ordering::SeqCst);
    let coordinator = &fixture.coordinator;
    let producer = coordinator
        .init_producer_id("app", HASH, init())
        .await
        .unwrap();
    coordinator
        .add_partitions("app", HASH, producer, &orders(), TransactionVersion::V0)
        .await
        .unwrap();
    coordinator
        .end_transaction(
            "app",
            HASH,
            producer,
            TransactionResult::Commit,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    tokio::time::sleep(RETRY_BACKOFF * 20).await;
    let metadata = coordinator.describe("app", HASH).unwrap().unwrap();
    assert_eq!(metadata.state, TransactionState::PrepareCommit);
    assert!(fixture.markers.written.lock().unwrap().is_empty());
    assert_eq!(
        fixture.log.states().last(),
        Some(&TransactionState::PrepareCommit)
    );
}
