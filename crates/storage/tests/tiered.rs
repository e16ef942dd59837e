//! Tiered storage (KIP-405): copying closed segments to a remote store in a
//! local directory, local retention that waits for the copies, reads and
//! timestamp lookups through both tiers, and crash recovery of the remote
//! metadata, with a fault-injecting remote tier.

use crate::common;

use std::path::Path;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use common::{batch, partition_dir, small_config};
use futures::TryStreamExt;
use proptest::prelude::*;
use strom_storage::batch::validate_batch_at;
use strom_storage::error::RemoteReadError;
use strom_storage::manager::LogHandle;
use strom_storage::remote::{
    FaultyRemote, ObjectStoreMetadata, ObjectStoreStorage, RemoteFault, RemoteLogManager,
    RemoteLogManagerConfig, RemoteLogMetadataManager, RemoteSegmentState, RemoteStorageConfig,
    RemoteStorageManager,
};
use strom_storage::{LogConfig, TopicPartition};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn tiered_config() -> LogConfig {
    LogConfig {
        remote_storage_enable: true,
        local_retention_bytes: 0,
        ..small_config()
    }
}

struct Tier {
    faults: Arc<FaultyRemote>,
    storage: ObjectStoreStorage,
}

fn remote(root: &Path) -> Tier {
    let config = RemoteStorageConfig::LocalDirectory {
        dir: root.join("remote"),
        prefix: "cluster".to_owned(),
    };
    let storage = ObjectStoreStorage::open(&config).expect("store");
    let metadata = Arc::new(ObjectStoreMetadata::new(storage.clone()));
    let faults = Arc::new(FaultyRemote::new(Arc::new(storage.clone()), metadata));
    Tier { faults, storage }
}

fn manager(root: &Path, tier: &Tier) -> RemoteLogManager {
    let mut config = RemoteLogManagerConfig::new(root.join("cache"));
    config.chunk_bytes = 1024;
    config.cache_max_bytes = 8 * 1024;
    let storage: Arc<dyn RemoteStorageManager> = tier.faults.clone();
    let metadata: Arc<dyn RemoteLogMetadataManager> = tier.faults.clone();
    RemoteLogManager::new(storage, metadata, config).expect("manager")
}

/// Appends `batches` batches of 5 records (timestamps 1000 + 10 per batch)
/// and acknowledges them (high watermark at the log end).
fn append(log: &LogHandle, batches: usize) {
    let mut log = log.write().expect("log");
    for _ in 0..batches {
        let timestamp = 1_000 + log.log_end_offset() * 2;
        log.append_as_leader(batch(5, timestamp), 0, 0)
            .expect("append");
    }
    let end = log.log_end_offset();
    log.update_high_watermark(end);
}

fn open(root: &Path, config: &LogConfig) -> LogHandle {
    Arc::new(RwLock::new(common::open(
        &partition_dir(root),
        config,
        true,
        0,
    )))
}

/// Every batch readable from `from` on, through the local log or the
/// remote tier: `(base offset, next offset)` pairs.
async fn read_both(
    manager: &RemoteLogManager,
    log: &LogHandle,
    from: i64,
) -> Result<Vec<(i64, i64)>, RemoteReadError> {
    let partition = TopicPartition::new("topic".to_owned(), 0);
    let (local_start, end) = {
        let log = log.read().expect("log");
        (log.log_start_offset(), log.high_watermark())
    };
    let mut offset = from;
    let mut batches = Vec::new();
    while offset < end {
        let bytes = if offset < local_start {
            match manager.read(&partition, offset, 3000, true).await? {
                Some(read) => read.records,
                None => break,
            }
        } else {
            let log = log.read().expect("log");
            let info = log.read(offset, 3000, end, true).expect("local read");
            match info.records {
                Some(slice) => slice.to_bytes().expect("bytes"),
                None => break,
            }
        };
        offset = walk(&bytes, &mut batches);
    }
    Ok(batches)
}

fn walk(bytes: &Bytes, batches: &mut Vec<(i64, i64)>) -> i64 {
    let mut position = 0;
    let mut next = 0;
    while position < bytes.len() {
        let header = validate_batch_at(bytes, position).expect("whole, valid batches");
        batches.push((header.base_offset, header.next_offset()));
        next = header.next_offset();
        position += header.size_in_bytes();
    }
    next
}

fn contiguous(batches: &[(i64, i64)], end: i64) -> bool {
    let mut expected = 0;
    for (base, next) in batches {
        if *base != expected {
            return false;
        }
        expected = *next;
    }
    expected == end
}

async fn object_count(storage: &ObjectStoreStorage) -> usize {
    let objects: Vec<_> = storage
        .store()
        .list(None)
        .try_collect()
        .await
        .expect("list");
    objects.len()
}

#[test]
fn copies_closed_segments_and_reads_both_tiers() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let manager = manager(dir.path(), &tier);
    let log = open(dir.path(), &tiered_config());
    append(&log, 60);
    runtime().block_on(async {
        let before = log.read().expect("log").segment_count();
        assert!(before > 3, "small segments roll: {before}");
        // Before any copy, local retention deletes nothing.
        assert_eq!(
            log.write()
                .expect("log")
                .delete_old_segments(0)
                .expect("retention"),
            0
        );
        let report = manager.copy_log_segments(&log).await.expect("copy");
        assert_eq!(
            report.segments,
            before - 1,
            "every closed segment, not the active one"
        );
        let deleted = log
            .write()
            .expect("log")
            .delete_old_segments(0)
            .expect("retention");
        assert_eq!(deleted, before - 1);
        let local_start = log.read().expect("log").log_start_offset();
        assert!(local_start > 0);
        let view = manager
            .view(&TopicPartition::new("topic".to_owned(), 0))
            .expect("view");
        assert_eq!(view.log_start_offset, Some(0));
        assert_eq!(view.copied_offset, local_start);
        let end = log.read().expect("log").high_watermark();
        let batches = read_both(&manager, &log, 0).await.expect("read");
        assert!(contiguous(&batches, end), "{batches:?}");
        // A read from the middle of a remote batch starts with that batch.
        let middle = manager
            .read(&TopicPartition::new("topic".to_owned(), 0), 7, 1, true)
            .await
            .expect("read")
            .expect("a batch");
        assert_eq!((middle.first_offset, middle.next_offset), (5, 10));
        // Timestamps across tiers: offset 20's batch starts at 1000 + 2*20.
        let found = manager
            .offset_for_timestamp(&TopicPartition::new("topic".to_owned(), 0), 1_041)
            .await
            .expect("lookup")
            .expect("found");
        assert_eq!((found.offset, found.timestamp), (21, 1_041));
        assert!(
            manager
                .stats()
                .bytes_copied
                .load(std::sync::atomic::Ordering::Relaxed)
                > 0
        );
    });
}

#[test]
fn copies_are_idempotent_and_resume_after_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 30);
    runtime().block_on(async {
        let first = manager(dir.path(), &tier);
        let copied = first.copy_log_segments(&log).await.expect("copy").segments;
        assert!(copied > 0);
        assert_eq!(
            first.copy_log_segments(&log).await.expect("again").segments,
            0
        );
        let objects = object_count(&tier.storage).await;
        append(&log, 30);
        // A new manager (restart or new leader) continues from the metadata.
        let second = manager(dir.path(), &tier);
        let more = second
            .copy_log_segments(&log)
            .await
            .expect("resume")
            .segments;
        assert!(more > 0);
        assert!(object_count(&tier.storage).await > objects);
        let records = tier
            .faults
            .list_segments(&TopicPartition::new("topic".to_owned(), 0))
            .await
            .expect("list");
        assert_eq!(records.len(), copied + more, "no segment copied twice");
        assert!(records
            .iter()
            .all(|record| record.state == RemoteSegmentState::CopySegmentFinished));
    });
}

#[test]
fn a_crash_between_upload_and_metadata_leaves_no_served_data_and_no_orphan() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 30);
    let partition = TopicPartition::new("topic".to_owned(), 0);
    runtime().block_on(async {
        let crashed = manager(dir.path(), &tier);
        tier.faults.arm(RemoteFault::LoseFinishedRecord);
        assert!(crashed.copy_log_segments(&log).await.is_err());
        // Nothing is confirmed: local retention keeps every segment.
        assert_eq!(log.read().expect("log").remote_copied_offset(), 0);
        assert_eq!(
            log.write()
                .expect("log")
                .delete_old_segments(0)
                .expect("retention"),
            0
        );
        let records = tier.faults.list_segments(&partition).await.expect("list");
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].state, RemoteSegmentState::CopySegmentStarted);
        assert!(
            object_count(&tier.storage).await > 1,
            "the orphan's objects are there"
        );
        // Recovery: the started copy is deleted, objects and record.
        let recovered = manager(dir.path(), &tier);
        let view = recovered.load(&partition).await.expect("load");
        assert_eq!(view.segment_count, 0);
        assert_eq!(
            object_count(&tier.storage).await,
            0,
            "no orphan object survives"
        );
        assert!(matches!(
            recovered.read(&partition, 0, 100, true).await,
            Err(RemoteReadError::OffsetOutOfRange { .. })
        ));
        assert!(
            recovered
                .copy_log_segments(&log)
                .await
                .expect("copy")
                .segments
                > 0
        );
    });
}

#[test]
fn failed_and_partial_copies_are_cleaned_up_and_retried() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 30);
    let partition = TopicPartition::new("topic".to_owned(), 0);
    runtime().block_on(async {
        let manager = manager(dir.path(), &tier);
        tier.faults.arm(RemoteFault::PartialCopy);
        assert!(manager.copy_log_segments(&log).await.is_err());
        assert_eq!(
            object_count(&tier.storage).await,
            0,
            "the partial upload was deleted"
        );
        tier.faults.arm(RemoteFault::FailCopy);
        assert!(manager.copy_log_segments(&log).await.is_err());
        assert!(
            manager
                .copy_log_segments(&log)
                .await
                .expect("retry")
                .segments
                > 0
        );
        log.write()
            .expect("log")
            .delete_old_segments(0)
            .expect("retention");
        tier.faults.arm(RemoteFault::FailFetch);
        assert!(matches!(
            manager.read(&partition, 0, 100, true).await,
            Err(RemoteReadError::Storage(_))
        ));
        let end = log.read().expect("log").high_watermark();
        let batches = read_both(&manager, &log, 0)
            .await
            .expect("read after the fault");
        assert!(contiguous(&batches, end));
    });
}

#[test]
fn a_missing_remote_object_is_a_storage_error() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 30);
    let partition = TopicPartition::new("topic".to_owned(), 0);
    runtime().block_on(async {
        let manager = manager(dir.path(), &tier);
        manager.copy_log_segments(&log).await.expect("copy");
        let objects: Vec<_> = tier
            .storage
            .store()
            .list(None)
            .try_collect()
            .await
            .expect("list");
        for object in objects
            .iter()
            .filter(|object| object.location.as_ref().ends_with(".log"))
        {
            tier.storage
                .store()
                .delete(&object.location)
                .await
                .expect("delete");
        }
        let error = manager
            .read(&partition, 0, 100, true)
            .await
            .expect_err("missing");
        assert!(
            matches!(
                error,
                RemoteReadError::Storage(strom_storage::error::RemoteStorageError::Missing { .. })
            ),
            "{error:?}"
        );
    });
}

#[test]
fn total_retention_deletes_remote_segments_and_topic_deletion_all() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let config = LogConfig {
        retention_bytes: Some(8 * 1024),
        ..tiered_config()
    };
    let log = open(dir.path(), &config);
    append(&log, 80);
    let partition = TopicPartition::new("topic".to_owned(), 0);
    runtime().block_on(async {
        let manager = manager(dir.path(), &tier);
        manager.copy_log_segments(&log).await.expect("copy");
        let before = manager.view(&partition).expect("view");
        let deleted = manager.apply_retention(&log, 0).await.expect("retention");
        assert!(deleted > 0);
        let after = manager.view(&partition).expect("view");
        assert!(after.log_start_offset > before.log_start_offset);
        assert!(after.size_bytes <= 8 * 1024);
        let removed = manager.delete_partition(&partition).await.expect("delete");
        assert_eq!(removed, after.segment_count);
        assert_eq!(object_count(&tier.storage).await, 0);
    });
}

#[test]
fn the_state_machine_allows_only_kafkas_transitions() {
    use RemoteSegmentState::*;
    let allowed = [
        (CopySegmentStarted, CopySegmentFinished),
        (CopySegmentStarted, DeleteSegmentStarted),
        (CopySegmentFinished, DeleteSegmentStarted),
        (DeleteSegmentStarted, DeleteSegmentFinished),
    ];
    for from in RemoteSegmentState::ALL {
        for to in RemoteSegmentState::ALL {
            let legal = allowed.contains(&(from, to));
            assert_eq!(from.transition(to).is_ok(), legal, "{from:?} -> {to:?}");
        }
        assert_eq!(RemoteSegmentState::from_name(from.name()), Some(from));
    }
}

#[derive(Debug, Clone)]
enum Step {
    Append(usize),
    Copy(Option<RemoteFault>),
    LocalRetention,
    RemoteRetention,
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    let fault = prop_oneof![
        3 => Just(None),
        1 => Just(Some(RemoteFault::FailCopy)),
        1 => Just(Some(RemoteFault::PartialCopy)),
        1 => Just(Some(RemoteFault::LoseFinishedRecord)),
        1 => Just(Some(RemoteFault::FailDelete)),
    ];
    prop_oneof![
        3 => (1usize..12).prop_map(Step::Append),
        3 => fault.prop_map(Step::Copy),
        2 => Just(Step::LocalRetention),
        1 => Just(Step::RemoteRetention),
        1 => Just(Step::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever faults hit the remote tier, every acknowledged record stays
    /// readable from one tier or the other (total retention aside, which
    /// only moves the start).
    #[test]
    fn every_acknowledged_record_is_readable(steps in proptest::collection::vec(step(), 1..25)) {
        let dir = tempfile::tempdir().expect("dir");
        let tier = remote(dir.path());
        let log = open(dir.path(), &tiered_config());
        let runtime = runtime();
        let mut manager = manager(dir.path(), &tier);
        for step in steps {
            runtime.block_on(async {
                match step {
                    Step::Append(batches) => append(&log, batches),
                    Step::Copy(fault) => {
                        if let Some(fault) = fault {
                            tier.faults.arm(fault);
                        }
                        manager.copy_log_segments(&log).await.ok();
                        tier.faults.disarm_all();
                    }
                    Step::LocalRetention => {
                        log.write().expect("log").delete_old_segments(0).expect("retention");
                    }
                    Step::RemoteRetention => {
                        manager.apply_retention(&log, 0).await.ok();
                    }
                    Step::Restart => manager = self::manager(dir.path(), &tier),
                }
            });
            let partition = TopicPartition::new("topic".to_owned(), 0);
            runtime.block_on(manager.load(&partition)).expect("load");
            let end = log.read().expect("log").high_watermark();
            let batches = runtime.block_on(read_both(&manager, &log, 0)).expect("read");
            prop_assert!(contiguous(&batches, end), "records lost: {batches:?} up to {end}");
        }
    }
}

#[test]
fn aborted_transactions_are_found_in_remote_transaction_indexes() {
    use strom_storage::marker::{MarkerKind, TransactionMarker};
    use strom_storage::testing::{keyed_batch, BatchSpec, TestRecord};
    use strom_storage::txn_index::AbortedTransaction;
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 2);
    let first_offset = {
        let mut log = log.write().expect("log");
        let spec = BatchSpec {
            base_timestamp: 100,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
            ..BatchSpec::default()
        };
        let record = TestRecord {
            key: None,
            value: Some(vec![1; 100]),
        };
        let info = log
            .append_as_leader(keyed_batch(&spec, &[record]), 0, 100)
            .expect("append");
        let marker = TransactionMarker {
            bumps_epoch: false,
            producer_id: 7,
            producer_epoch: 0,
            coordinator_epoch: 0,
            kind: MarkerKind::Abort,
        };
        log.append_marker_as_leader(&marker, 0, 100).expect("abort");
        info.first_offset
    };
    append(&log, 30);
    let partition = TopicPartition::new("topic".to_owned(), 0);
    runtime().block_on(async {
        let manager = manager(dir.path(), &tier);
        manager.copy_log_segments(&log).await.expect("copy");
        log.write()
            .expect("log")
            .delete_old_segments(0)
            .expect("retention");
        let local_start = log.read().expect("log").log_start_offset();
        assert!(
            local_start > first_offset + 1,
            "the transaction is remote only"
        );
        let (aborted, complete) = manager
            .aborted_transactions(&partition, 0, local_start)
            .await
            .expect("index");
        assert_eq!(
            aborted,
            vec![AbortedTransaction {
                producer_id: 7,
                first_offset
            }]
        );
        assert!(
            !complete,
            "no entry's stable offset reaches the bound: later indexes count"
        );
        let (_, complete) = manager
            .aborted_transactions(&partition, 0, first_offset + 1)
            .await
            .expect("index");
        assert!(complete, "the abort's stable offset reaches the bound");
        let (none, _) = manager
            .aborted_transactions(&partition, first_offset + 2, local_start)
            .await
            .expect("index");
        assert!(none.is_empty(), "the abort marker is before the range");
    });
}

#[test]
fn compacted_topics_are_not_copied() {
    let dir = tempfile::tempdir().expect("dir");
    let tier = remote(dir.path());
    let log = open(dir.path(), &tiered_config());
    append(&log, 30);
    let mut config = tiered_config();
    config.cleanup_policy.compact = true;
    log.write().expect("log").set_config(config);
    runtime().block_on(async {
        let manager = manager(dir.path(), &tier);
        assert_eq!(
            manager
                .copy_log_segments(&log)
                .await
                .expect("copy")
                .segments,
            0
        );
        assert_eq!(object_count(&tier.storage).await, 0);
        assert_eq!(
            log.write()
                .expect("log")
                .delete_old_segments(0)
                .expect("retention"),
            0
        );
    });
}
