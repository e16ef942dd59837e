use std::collections::BTreeSet;

use super::*;
use crate::error::TransactionError;
use crate::log::TransactionLogValue;

const HASH: i32 = 7;
const PARTITION: i32 = 7;
const EPOCH: i32 = 3;

fn config() -> CoordinatorConfig {
    CoordinatorConfig {
        num_partitions: 50,
        max_transaction_timeout_ms: 60_000,
        transactional_id_expiration_ms: 1_000_000,
        transaction_version: TransactionVersion::V0,
    }
}

fn loaded() -> CoordinatorCore {
    let mut core = CoordinatorCore::new(config());
    core.begin_loading(PARTITION, EPOCH);
    core.complete_load(PARTITION, EPOCH, std::iter::empty())
        .unwrap();
    core
}

fn init(timeout_ms: i32) -> InitRequest {
    InitRequest {
        transaction_timeout_ms: timeout_ms,
        expected: None,
    }
}

fn partitions(names: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    names
        .iter()
        .map(|(topic, partition)| TopicPartition {
            topic: (*topic).to_owned(),
            partition: *partition,
        })
        .collect()
}

fn write_of(begin: Begin) -> PendingWrite {
    match begin {
        Begin::Write(write) => write,
        other => panic!("expected a write, got {other:?}"),
    }
}

/// Initialises `id` with producer id 1000 and adopts it.
fn initialised(core: &mut CoordinatorCore, id: &str) -> ProducerIdAndEpoch {
    assert_eq!(
        core.begin_init_producer_id(id, HASH, init(10_000), 0, None)
            .unwrap(),
        Begin::NeedProducerId
    );
    let write = write_of(
        core.begin_init_producer_id(id, HASH, init(10_000), 0, Some(1000))
            .unwrap(),
    );
    let metadata = core.finish_write(&write, true).unwrap();
    ProducerIdAndEpoch {
        producer_id: metadata.producer_id,
        producer_epoch: metadata.producer_epoch,
    }
}

fn ongoing(core: &mut CoordinatorCore, id: &str, now_ms: i64) -> ProducerIdAndEpoch {
    let producer = initialised(core, id);
    let write = write_of(
        core.begin_add_partitions(
            id,
            HASH,
            producer,
            &partitions(&[("orders", 0), ("orders", 1)]),
            TransactionVersion::V0,
            now_ms,
        )
        .unwrap(),
    );
    core.finish_write(&write, true).unwrap();
    producer
}

#[test]
fn requests_for_a_partition_not_served_here_are_refused() {
    let mut core = CoordinatorCore::new(config());
    let refused = core.begin_init_producer_id("app", HASH, init(1000), 0, Some(1));
    assert_eq!(
        refused,
        Err(CoordinatorError::NotCoordinator {
            partition: PARTITION
        })
    );
    core.begin_loading(PARTITION, EPOCH);
    let refused = core.begin_init_producer_id("app", HASH, init(1000), 0, Some(1));
    assert_eq!(
        refused,
        Err(CoordinatorError::LoadInProgress {
            partition: PARTITION
        })
    );
}

#[test]
fn a_new_id_gets_a_producer_id_at_epoch_zero_then_bumps() {
    let mut core = loaded();
    let producer = initialised(&mut core, "app");
    assert_eq!(
        producer,
        ProducerIdAndEpoch {
            producer_id: 1000,
            producer_epoch: 0
        }
    );
    let write = write_of(
        core.begin_init_producer_id("app", HASH, init(10_000), 1, None)
            .unwrap(),
    );
    assert_eq!(write.metadata.producer_epoch, 1);
    assert_eq!(write.partition, PARTITION);
    assert_eq!(write.coordinator_epoch, EPOCH);
    let value = TransactionLogValue::decode(write.value.as_deref().unwrap()).unwrap();
    assert_eq!(value.producer_epoch, 1);
    assert_eq!(value.transaction_status, TransactionState::Empty);
}

#[test]
fn a_second_request_while_a_write_is_in_flight_is_concurrent() {
    let mut core = loaded();
    let write = write_of(
        core.begin_init_producer_id("app", HASH, init(10_000), 0, Some(5))
            .unwrap(),
    );
    assert!(core.is_pending("app"));
    let again = core.begin_init_producer_id("app", HASH, init(10_000), 0, Some(6));
    assert!(matches!(again, Err(CoordinatorError::Concurrent { .. })));
    core.finish_write(&write, true).unwrap();
    assert!(!core.is_pending("app"));
}

#[test]
fn a_failed_first_write_forgets_the_new_id() {
    let mut core = loaded();
    let write = write_of(
        core.begin_init_producer_id("app", HASH, init(10_000), 0, Some(5))
            .unwrap(),
    );
    assert_eq!(
        core.finish_write(&write, false),
        Err(CoordinatorError::WriteFailed {
            partition: PARTITION
        })
    );
    assert!(core.metadata("app").is_none());
}

#[test]
fn a_write_adopted_after_the_partition_moved_is_not_coordinator() {
    let mut core = loaded();
    let write = write_of(
        core.begin_init_producer_id("app", HASH, init(10_000), 0, Some(5))
            .unwrap(),
    );
    core.begin_loading(PARTITION, EPOCH + 1);
    assert_eq!(
        core.finish_write(&write, true),
        Err(CoordinatorError::NotCoordinator {
            partition: PARTITION
        })
    );
}

#[test]
fn a_timeout_above_the_maximum_is_refused() {
    let mut core = loaded();
    let refused = core.begin_init_producer_id("app", HASH, init(60_001), 0, Some(5));
    assert!(matches!(
        refused,
        Err(CoordinatorError::Transaction(
            TransactionError::InvalidTransactionTimeout { .. }
        ))
    ));
}

#[test]
fn an_empty_or_unknown_id_is_refused() {
    let mut core = loaded();
    let empty = core.begin_init_producer_id("", HASH, init(1000), 0, Some(5));
    assert_eq!(empty, Err(CoordinatorError::InvalidTransactionalId));
    let producer = ProducerIdAndEpoch {
        producer_id: 1,
        producer_epoch: 0,
    };
    let unknown = core.begin_add_partitions(
        "nobody",
        HASH,
        producer,
        &partitions(&[("t", 0)]),
        TransactionVersion::V0,
        0,
    );
    assert_eq!(unknown, Err(CoordinatorError::UnknownTransactionalId));
}

#[test]
fn adding_known_partitions_again_writes_nothing() {
    let mut core = loaded();
    let producer = ongoing(&mut core, "app", 10);
    let again = core
        .begin_add_partitions(
            "app",
            HASH,
            producer,
            &partitions(&[("orders", 1)]),
            TransactionVersion::V0,
            20,
        )
        .unwrap();
    assert!(matches!(again, Begin::Done(metadata) if metadata.state == TransactionState::Ongoing));
}

#[test]
fn commit_prepares_markers_then_completes() {
    let mut core = loaded();
    let producer = ongoing(&mut core, "app", 10);
    let write = write_of(
        core.begin_end_transaction(
            "app",
            HASH,
            EndRequest {
                producer,
                result: TransactionResult::Commit,
                client_transaction_version: TransactionVersion::V0,
            },
            20,
            None,
        )
        .unwrap(),
    );
    let prepared = core.finish_write(&write, true).unwrap();
    let plan = MarkerPlan::of(&prepared, EPOCH).unwrap();
    assert_eq!(plan.result, TransactionResult::Commit);
    assert_eq!(plan.partitions, partitions(&[("orders", 0), ("orders", 1)]));
    assert_eq!(plan.producer_epoch, producer.producer_epoch);
    assert_eq!(plan.coordinator_epoch, EPOCH);
    // The producer's next transaction must wait for the markers.
    let next = core.begin_add_partitions(
        "app",
        HASH,
        producer,
        &partitions(&[("orders", 0)]),
        TransactionVersion::V0,
        30,
    );
    assert!(matches!(
        next,
        Err(CoordinatorError::Transaction(
            TransactionError::ConcurrentTransactions { .. }
        ))
    ));
    let complete = core.begin_complete(&plan, 40).unwrap();
    let completed = core.finish_write(&complete, true).unwrap();
    assert_eq!(completed.state, TransactionState::CompleteCommit);
    assert!(completed.partitions.is_empty());
    // A stale plan (already completed) cannot complete again.
    assert!(core.begin_complete(&plan, 50).is_err());
}

#[test]
fn a_new_producer_fences_an_ongoing_transaction_with_an_abort() {
    let mut core = loaded();
    let old = ongoing(&mut core, "app", 10);
    let fence = core
        .begin_init_producer_id("app", HASH, init(10_000), 20, None)
        .unwrap();
    let Begin::WriteFence(write) = fence else {
        panic!("expected a fence, got {fence:?}")
    };
    assert_eq!(write.metadata.state, TransactionState::PrepareAbort);
    assert_eq!(write.metadata.producer_epoch, old.producer_epoch + 1);
    let prepared = core.finish_write(&write, true).unwrap();
    let plan = MarkerPlan::of(&prepared, EPOCH).unwrap();
    assert_eq!(plan.result, TransactionResult::Abort);
    // The old producer is fenced.
    let zombie = core.begin_end_transaction(
        "app",
        HASH,
        EndRequest {
            producer: old,
            result: TransactionResult::Commit,
            client_transaction_version: TransactionVersion::V0,
        },
        30,
        None,
    );
    assert!(matches!(
        zombie,
        Err(CoordinatorError::Transaction(
            TransactionError::ProducerFenced { .. }
        ))
    ));
}

#[test]
fn verification_reports_partitions_outside_the_transaction() {
    let mut core = loaded();
    let producer = ongoing(&mut core, "app", 10);
    let missing = core
        .verify_partitions(
            "app",
            HASH,
            producer,
            &partitions(&[("orders", 0), ("payments", 0)]),
        )
        .unwrap();
    assert_eq!(missing, partitions(&[("payments", 0)]));
    let stale = ProducerIdAndEpoch {
        producer_epoch: producer.producer_epoch - 1,
        ..producer
    };
    assert!(core
        .verify_partitions("app", HASH, stale, &partitions(&[("orders", 0)]))
        .is_err());
}

#[test]
fn verification_answers_concurrent_while_the_transaction_completes() {
    let mut core = loaded();
    let producer = ongoing(&mut core, "app", 10);
    let orders = partitions(&[("orders", 0)]);
    // A write in flight does not decide: the adopted state does.
    let pending = core.begin_add_partitions(
        "app",
        HASH,
        producer,
        &partitions(&[("payments", 0)]),
        TransactionVersion::V0,
        15,
    );
    let pending = write_of(pending.unwrap());
    assert_eq!(
        core.verify_partitions("app", HASH, producer, &orders),
        Ok(BTreeSet::new())
    );
    core.finish_write(&pending, true).unwrap();
    let end = write_of(
        core.begin_end_transaction(
            "app",
            HASH,
            EndRequest {
                producer,
                result: TransactionResult::Abort,
                client_transaction_version: TransactionVersion::V0,
            },
            20,
            None,
        )
        .unwrap(),
    );
    core.finish_write(&end, true).unwrap();
    assert!(matches!(
        core.verify_partitions("app", HASH, producer, &orders),
        Err(CoordinatorError::Concurrent {
            state: TransactionState::PrepareAbort
        })
    ));
    // An id another coordinator owns, an empty id, an unknown id.
    assert_eq!(
        core.verify_partitions("", HASH, producer, &orders),
        Err(CoordinatorError::InvalidTransactionalId)
    );
    assert_eq!(
        core.verify_partitions("other", HASH, producer, &orders),
        Err(CoordinatorError::UnknownTransactionalId)
    );
}

#[test]
fn load_replays_the_latest_record_and_resumes_prepared_transactions() {
    let mut core = loaded();
    ongoing(&mut core, "app", 10);
    let prepared = {
        let producer = ProducerIdAndEpoch {
            producer_id: 1000,
            producer_epoch: 0,
        };
        let write = write_of(
            core.begin_end_transaction(
                "app",
                HASH,
                EndRequest {
                    producer,
                    result: TransactionResult::Abort,
                    client_transaction_version: TransactionVersion::V0,
                },
                20,
                None,
            )
            .unwrap(),
        );
        core.finish_write(&write, true).unwrap();
        write
    };
    let gone = encode_key("expired").unwrap();
    let earlier = TransactionMetadata::new("expired".to_owned(), 9, 1000, 0)
        .to_log_value()
        .encode(0)
        .unwrap();
    let mut unknown_version = earlier.clone();
    unknown_version[1] = 9;
    let records: Vec<(&[u8], Option<&[u8]>)> = vec![
        (&gone, Some(&earlier)),
        (&gone, None),
        (&gone, Some(&unknown_version)),
        (&prepared.key, prepared.value.as_deref()),
    ];
    let mut reloaded = CoordinatorCore::new(config());
    reloaded.begin_loading(PARTITION, EPOCH + 1);
    let summary = reloaded
        .complete_load(PARTITION, EPOCH + 1, records)
        .unwrap();
    assert_eq!(summary.transactional_ids, 1);
    assert_eq!(summary.skipped_records, 1);
    assert_eq!(summary.to_complete.len(), 1);
    assert_eq!(summary.to_complete[0].result, TransactionResult::Abort);
    assert_eq!(summary.to_complete[0].coordinator_epoch, EPOCH + 1);
    assert!(reloaded.metadata("expired").is_none());
}

#[test]
fn load_fails_on_a_malformed_record() {
    let mut core = CoordinatorCore::new(config());
    core.begin_loading(PARTITION, EPOCH);
    let key = encode_key("app").unwrap();
    let bad_value = [0u8, 0, 1];
    let loaded = core.complete_load(PARTITION, EPOCH, vec![(&key[..], Some(&bad_value[..]))]);
    assert!(matches!(loaded, Err(CoordinatorError::Load { .. })));
    // A load for an epoch that is not the one being loaded is refused.
    assert!(core
        .complete_load(PARTITION, EPOCH + 1, std::iter::empty())
        .is_err());
}

#[test]
fn timed_out_transactions_are_aborted_and_idle_ids_expire() {
    let mut core = loaded();
    ongoing(&mut core, "slow", 10);
    assert!(core.expire(5_000).timed_out.is_empty());
    let expirations = core.expire(10_011);
    assert_eq!(expirations.timed_out.len(), 1);
    let abort = &expirations.timed_out[0];
    assert_eq!(abort.metadata.state, TransactionState::PrepareAbort);
    core.finish_write(abort, true).unwrap();

    let mut idle = loaded();
    initialised(&mut idle, "idle");
    let expirations = idle.expire(2_000_000);
    assert_eq!(expirations.expired.len(), 1);
    let tombstone = &expirations.expired[0];
    assert_eq!(tombstone.value, None);
    idle.finish_write(tombstone, true).unwrap();
    assert!(idle.metadata("idle").is_none());
}

#[test]
fn unload_forgets_the_partitions_ids() {
    let mut core = loaded();
    initialised(&mut core, "app");
    core.unload(PARTITION);
    assert!(core.metadata("app").is_none());
    assert_eq!(core.partition_status(PARTITION), None);
}

#[test]
fn placement_is_kafkas() {
    assert_eq!(partition_for(123, 50), 23);
    // Utils.abs, not a mask: -7 is placed as 7 (a mask would give 41).
    assert_eq!(partition_for(-7, 50), 7);
    assert_eq!(partition_for(i32::MIN, 50), 0);
}
