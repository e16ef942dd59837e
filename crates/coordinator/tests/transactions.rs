//! Offsets committed inside transactions (TxnOffsetCommit, KIP-98 and
//! KIP-447) through the sans-IO core: held until their producer's marker,
//! answered UNSTABLE_OFFSET_COMMIT to OffsetFetch with `require_stable`,
//! committed or dropped by the marker, rebuilt on replay, and protecting
//! their group from deletion and expiry.

use crate::common;

use common::*;
use strom_coordinator::records::OffsetsRecord;
use strom_coordinator::{
    read_partition, BatchContext, CoordinatorConfig, CoordinatorCore, GroupError, GroupState,
    InMemoryOffsetsLog, LoadError, LogRecord, OffsetCommitPartition, OffsetCommitRequest,
    OffsetsLog, PartitionStatus, RecordError, TopicPartition, TransactionMarker,
    TxnOffsetCommitRequest,
};

const PRODUCER: i64 = 4_000;
const OTHER_PRODUCER: i64 = 4_001;

fn partition(topic: &str, index: i32, offset: i64) -> OffsetCommitPartition {
    OffsetCommitPartition {
        topic: topic.to_owned(),
        partition: index,
        offset,
        leader_epoch: Some(2),
        metadata: Some("txn".to_owned()),
        commit_timestamp_ms: None,
    }
}

/// A TxnOffsetCommit without member or generation (before v3, or a
/// producer committing for a simple consumer).
fn txn_request(
    group_id: &str,
    producer_id: i64,
    partitions: Vec<OffsetCommitPartition>,
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: group_id.to_owned(),
        producer_id,
        producer_epoch: 0,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions,
    }
}

/// Commits `request` through the core and appends its batch to `log`.
fn txn_commit(
    core: &mut CoordinatorCore,
    log: &mut InMemoryOffsetsLog,
    request: &TxnOffsetCommitRequest,
    now_ms: i64,
) -> Vec<(TopicPartition, Result<(), GroupError>)> {
    let results = core
        .commit_transactional_offsets(request, now_ms)
        .expect("request accepted");
    assert!(core.take_records().is_empty(), "no plain record is written");
    if let Some(append) = core.transactional_append() {
        assert_eq!(append.producer_id, request.producer_id);
        assert_eq!(append.producer_epoch, request.producer_epoch);
        let last_offset = log
            .append_transactional(
                append.partition,
                append.producer_id,
                append.producer_epoch,
                &append.records,
            )
            .expect("appended");
        core.place_transactional(last_offset);
    }
    results
}

/// A plain OffsetCommit staged, appended, placed and committed by the log.
fn plain_commit(
    core: &mut CoordinatorCore,
    log: &mut InMemoryOffsetsLog,
    group_id: &str,
    offset: i64,
) {
    let request = OffsetCommitRequest {
        group_id: group_id.to_owned(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![partition("t", 0, offset)],
    };
    core.stage_offsets(&request, 0).expect("accepted");
    let records: Vec<LogRecord> = core
        .take_records()
        .into_iter()
        .map(|(_, record)| record)
        .collect();
    let last_offset = log.append(0, &records).expect("appended");
    core.place_staged(0, last_offset);
    core.advance_committed(0, i64::MAX, 0);
}

/// Writes the marker of `producer_id` and reports it to the core, whose log
/// has committed it.
fn end_transaction(
    core: &mut CoordinatorCore,
    log: &mut InMemoryOffsetsLog,
    producer_id: i64,
    commit: bool,
) {
    let marker_offset = log.append_marker(0, producer_id, 0, TransactionMarker::new(commit));
    core.complete_transaction(0, producer_id, commit, marker_offset)
        .expect("owned");
    core.advance_committed(0, i64::MAX, 0);
}

fn fetch(core: &CoordinatorCore, group_id: &str, require_stable: bool) -> Vec<(i64, bool)> {
    core.fetch_offsets(
        group_id,
        Some(&[("t".to_owned(), vec![0, 1])]),
        require_stable,
    )
    .expect("served")
    .into_iter()
    .map(|answer| {
        assert!(answer
            .error
            .as_ref()
            .is_none_or(|error| *error == GroupError::UnstableOffsetCommit));
        (answer.offset, answer.error.is_some())
    })
    .collect()
}

fn reload(log: &InMemoryOffsetsLog) -> CoordinatorCore {
    let mut core = fresh_core();
    core.begin_loading(0);
    core.load_partition(log, 0, 0).expect("loads");
    core
}

fn fresh_core() -> CoordinatorCore {
    let config = CoordinatorConfig {
        offsets_topic_partitions: 1,
        group: no_delay(),
        ..CoordinatorConfig::default()
    };
    CoordinatorCore::new(config, seeded())
}

#[test]
fn offsets_are_held_until_the_commit_marker_and_later_ones_win() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    plain_commit(&mut core, &mut log, "g", 3);
    let results = txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        1,
    );
    assert_eq!(results, vec![(TopicPartition::new("t", 0), Ok(()))]);
    txn_commit(
        &mut core,
        &mut log,
        &txn_request(
            "g",
            PRODUCER,
            vec![partition("t", 0, 12), partition("t", 1, 5)],
        ),
        2,
    );
    assert_eq!(core.open_transactions(), 1);
    // Held offsets are not answered: the last committed value is, or
    // UNSTABLE_OFFSET_COMMIT when the client requires stable offsets.
    assert_eq!(fetch(&core, "g", false), vec![(3, false), (-1, false)]);
    assert_eq!(fetch(&core, "g", true), vec![(-1, true), (-1, true)]);
    let all = core.fetch_offsets("g", None, true).expect("served");
    assert_eq!(all.len(), 1, "only committed partitions are listed");
    assert_eq!(all[0].error, Some(GroupError::UnstableOffsetCommit));
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", true), vec![(12, false), (5, false)]);
    let committed = core
        .offsets("g")
        .expect("group")
        .iter()
        .next()
        .expect("one");
    assert_eq!(committed.1.metadata, "txn");
    assert_eq!(committed.1.leader_epoch, Some(2));
    assert_eq!(core.open_transactions(), 0);
}

#[test]
fn an_abort_drops_the_offsets_and_repeated_markers_change_nothing() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    plain_commit(&mut core, &mut log, "g", 3);
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        1,
    );
    end_transaction(&mut core, &mut log, PRODUCER, false);
    assert_eq!(fetch(&core, "g", true), vec![(3, false), (-1, false)]);
    // A commit marker after the abort, for the same producer, finds nothing.
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", true), vec![(3, false), (-1, false)]);
    // A second commit marker is as harmless.
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 20)]),
        2,
    );
    end_transaction(&mut core, &mut log, PRODUCER, true);
    plain_commit(&mut core, &mut log, "g", 25);
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", false), vec![(25, false), (-1, false)]);
}

#[test]
fn a_marker_ends_only_its_producer_and_what_was_written_before_it() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        1,
    );
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", OTHER_PRODUCER, vec![partition("t", 1, 7)]),
        1,
    );
    let marker_offset = log.append_marker(0, PRODUCER, 0, TransactionMarker::Commit);
    core.complete_transaction(0, PRODUCER, true, marker_offset)
        .expect("owned");
    // The producer's next transaction starts before the marker is applied.
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 30)]),
        2,
    );
    assert_eq!(fetch(&core, "g", false), vec![(-1, false), (-1, false)]);
    core.advance_committed(0, marker_offset, 3);
    assert_eq!(fetch(&core, "g", false), vec![(-1, false), (-1, false)]);
    core.advance_committed(0, marker_offset + 1, 3);
    assert_eq!(fetch(&core, "g", true), vec![(-1, true), (-1, true)]);
    assert_eq!(fetch(&core, "g", false), vec![(10, false), (-1, false)]);
    assert_eq!(core.open_transactions(), 2);
}

#[test]
fn whichever_record_comes_last_in_the_log_wins() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    // A plain commit written after the transactional one wins over it.
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        1,
    );
    plain_commit(&mut core, &mut log, "g", 15);
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", false), vec![(15, false), (-1, false)]);
    // A transactional commit written after a plain one wins over it.
    plain_commit(&mut core, &mut log, "g", 16);
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 11)]),
        2,
    );
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", false), vec![(11, false), (-1, false)]);
    // The replay agrees.
    let restarted = reload(&log);
    assert_eq!(fetch(&restarted, "g", true), vec![(11, false), (-1, false)]);
}

#[test]
fn misuse_is_refused_before_anything_is_staged() {
    let mut core = core_with(no_delay());
    let refused = |core: &mut CoordinatorCore, request: &TxnOffsetCommitRequest| {
        let error = core
            .commit_transactional_offsets(request, 0)
            .expect_err("refused");
        assert_eq!(core.transactional_append(), None);
        error
    };
    let request = txn_request("", PRODUCER, vec![partition("t", 0, 1)]);
    assert_eq!(refused(&mut core, &request), GroupError::InvalidGroupId);
    for (producer_id, producer_epoch) in [(-1, 0), (PRODUCER, -1)] {
        let mut request = txn_request("g", producer_id, vec![partition("t", 0, 1)]);
        request.producer_epoch = producer_epoch;
        assert_eq!(
            refused(&mut core, &request),
            GroupError::InvalidProducer {
                producer_id,
                producer_epoch
            }
        );
    }
    // A generation for a group that does not exist: refused, not created.
    let mut request = txn_request("g", PRODUCER, vec![partition("t", 0, 1)]);
    request.generation_id = 1;
    request.member_id = "m".into();
    assert_eq!(
        refused(&mut core, &request),
        GroupError::IllegalGeneration {
            requested: 1,
            current: -1
        }
    );
    assert!(core.group("g").is_none());
    // Not owned, or still loading.
    let mut elsewhere = CoordinatorCore::new(CoordinatorConfig::default(), seeded());
    let partition_of_g = elsewhere.partition_for("g");
    let request = txn_request("g", PRODUCER, vec![partition("t", 0, 1)]);
    assert_eq!(
        refused(&mut elsewhere, &request),
        GroupError::NotCoordinator {
            partition: partition_of_g
        }
    );
    elsewhere.begin_loading(partition_of_g);
    assert_eq!(
        refused(&mut elsewhere, &request),
        GroupError::CoordinatorLoadInProgress {
            partition: partition_of_g
        }
    );
    assert_eq!(
        elsewhere.complete_transaction(partition_of_g + 1, PRODUCER, true, 0),
        Err(GroupError::NotCoordinator {
            partition: partition_of_g + 1
        })
    );
}

#[test]
fn an_unknown_group_is_created_empty_and_a_failed_append_is_forgotten() {
    let mut core = core_with(no_delay());
    let request = txn_request("fresh", PRODUCER, vec![partition("t", 0, 1)]);
    core.commit_transactional_offsets(&request, 0)
        .expect("accepted");
    assert_eq!(
        core.group("fresh").map(|group| group.state()),
        Some(GroupState::Empty)
    );
    let append = core.transactional_append().expect("staged");
    assert_eq!(append.partition, 0);
    assert_eq!(append.records.len(), 1);
    // The append failed: nothing is held.
    core.discard_staged();
    assert_eq!(core.transactional_append(), None);
    core.place_transactional(5);
    assert_eq!(core.open_transactions(), 0);
    assert_eq!(fetch(&core, "fresh", true), vec![(-1, false), (-1, false)]);
}

#[test]
fn oversized_metadata_is_refused_per_partition() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    let mut big = partition("t", 1, 1);
    big.metadata = Some("x".repeat(4_097));
    let results = txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 1), big]),
        0,
    );
    assert_eq!(results[0].1, Ok(()));
    assert_eq!(
        results[1].1,
        Err(GroupError::OffsetMetadataTooLarge {
            metadata_bytes: 4_097,
            max_bytes: 4_096
        })
    );
    assert_eq!(log.len(0), 1, "only the accepted partition is written");
    // Nothing accepted: nothing to append.
    let mut big = partition("t", 1, 1);
    big.metadata = Some("x".repeat(4_097));
    core.commit_transactional_offsets(&txn_request("g", PRODUCER, vec![big]), 0)
        .expect("request accepted");
    assert_eq!(core.transactional_append(), None);
}

/// A group with one Stable member; returns its member id and generation.
fn stable_group(core: &mut CoordinatorCore) -> (String, i32) {
    let member = stable_single(core, 0);
    let _group_metadata = core.take_records();
    member
}

#[test]
fn member_checks_follow_kip_447() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    let (member_id, generation_id) = stable_group(&mut core);
    let with_member = |member: &str, generation: i32| TxnOffsetCommitRequest {
        generation_id: generation,
        member_id: member.to_owned(),
        ..txn_request(GROUP, PRODUCER, vec![partition("t", 0, 1)])
    };
    assert_eq!(
        core.commit_transactional_offsets(&with_member(&member_id, generation_id + 1), 1),
        Err(GroupError::IllegalGeneration {
            requested: generation_id + 1,
            current: generation_id
        })
    );
    assert_eq!(
        core.commit_transactional_offsets(&with_member("stranger", generation_id), 1),
        Err(GroupError::UnknownMemberId)
    );
    // A member id without a generation is checked too.
    assert_eq!(
        core.commit_transactional_offsets(&with_member(&member_id, -1), 1),
        Err(GroupError::IllegalGeneration {
            requested: -1,
            current: generation_id
        })
    );
    let results = txn_commit(
        &mut core,
        &mut log,
        &with_member(&member_id, generation_id),
        1,
    );
    assert_eq!(results[0].1, Ok(()));
    // Without member and generation (a pre-KIP-447 producer) a group with
    // members accepts the commit, unlike OffsetCommit.
    let results = txn_commit(
        &mut core,
        &mut log,
        &txn_request(GROUP, OTHER_PRODUCER, vec![partition("t", 1, 1)]),
        1,
    );
    assert_eq!(results[0].1, Ok(()));
    assert_eq!(core.open_transactions(), 2);
}

#[test]
fn a_fenced_static_member_is_refused() {
    let mut core = core_with(no_delay());
    core.join_group(GROUP, static_join(1, "", "inst"), 0)
        .expect("joined");
    let response = joined(&core.take_completions(), 1);
    let request = TxnOffsetCommitRequest {
        generation_id: response.generation_id,
        member_id: "old-id".into(),
        group_instance_id: Some("inst".into()),
        ..txn_request(GROUP, PRODUCER, vec![partition("t", 0, 1)])
    };
    assert_eq!(
        core.commit_transactional_offsets(&request, 1),
        Err(GroupError::FencedInstanceId)
    );
    // The current holder of the instance id commits, even while the group
    // completes its rebalance.
    let request = TxnOffsetCommitRequest {
        member_id: response.member_id.clone(),
        ..request
    };
    assert!(core.commit_transactional_offsets(&request, 1).is_ok());
}

#[test]
fn held_offsets_keep_their_group_from_deletion_and_expiry() {
    let config = CoordinatorConfig {
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let retention_ms = config.offsets.retention_ms;
    let mut core = CoordinatorCore::new(config, seeded());
    core.begin_loading(0);
    core.load_partition(&InMemoryOffsetsLog::new(), 0, 0)
        .expect("loads");
    let mut log = InMemoryOffsetsLog::new();
    plain_commit(&mut core, &mut log, "g", 3);
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        0,
    );
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("only-held", PRODUCER, vec![partition("t", 0, 1)]),
        0,
    );
    let groups = ["g".to_owned(), "only-held".to_owned()];
    assert_eq!(
        core.delete_groups(&groups, 1),
        vec![
            ("g".to_owned(), Err(GroupError::NonEmptyGroup)),
            ("only-held".to_owned(), Err(GroupError::NonEmptyGroup)),
        ]
    );
    let later_ms = retention_ms * 3;
    core.expire_offsets(later_ms);
    assert!(core.group("only-held").is_some());
    assert_eq!(fetch(&core, "g", false), vec![(3, false), (-1, false)]);
    // Once the transaction aborts, both go as usual.
    end_transaction(&mut core, &mut log, PRODUCER, false);
    assert_eq!(
        core.delete_groups(&["only-held".to_owned()], later_ms),
        vec![("only-held".to_owned(), Ok(()))]
    );
    core.expire_offsets(later_ms);
    assert!(core.group("g").is_none());
}

#[test]
fn deleting_offsets_or_topics_drops_held_offsets() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    txn_commit(
        &mut core,
        &mut log,
        &txn_request(
            "g",
            PRODUCER,
            vec![partition("t", 0, 10), partition("u", 0, 4)],
        ),
        0,
    );
    let results = core
        .delete_offsets("g", &[("t".to_owned(), vec![0])], 1)
        .expect("deleted");
    assert_eq!(results, vec![(TopicPartition::new("t", 0), Ok(()))]);
    let tombstones: Vec<OffsetsRecord> = core
        .take_records()
        .into_iter()
        .map(|(_, record)| OffsetsRecord::from_log_record(&record).expect("decodes"))
        .collect();
    assert_eq!(
        tombstones,
        vec![OffsetsRecord::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: None,
        }]
    );
    assert!(core.group("g").is_some(), "u-0 is still held");
    core.remove_topic_offsets(&["u".to_owned()]);
    assert_eq!(core.open_transactions(), 0);
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert!(core.offsets("g").is_none_or(|offsets| offsets.is_empty()));
}

#[test]
fn unloading_drops_held_offsets_and_a_reload_rebuilds_them() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        0,
    );
    core.unload(0);
    assert_eq!(core.open_transactions(), 0);
    assert_eq!(
        core.complete_transaction(0, PRODUCER, true, 5),
        Err(GroupError::NotCoordinator { partition: 0 })
    );
    core.begin_loading(0);
    core.load_partition(&log, 0, 0).expect("loads");
    assert_eq!(core.open_transactions(), 1);
    assert_eq!(fetch(&core, "g", true), vec![(-1, true), (-1, false)]);
    end_transaction(&mut core, &mut log, PRODUCER, true);
    assert_eq!(fetch(&core, "g", true), vec![(10, false), (-1, false)]);
}

#[test]
fn replay_commits_aborts_and_keeps_open_transactions() {
    let mut core = core_with(no_delay());
    let mut log = InMemoryOffsetsLog::new();
    for (group, producer_id, offset) in [("a", 1, 10), ("b", 2, 20), ("c", 3, 30)] {
        txn_commit(
            &mut core,
            &mut log,
            &txn_request(group, producer_id, vec![partition("t", 0, offset)]),
            0,
        );
    }
    end_transaction(&mut core, &mut log, 1, true);
    end_transaction(&mut core, &mut log, 2, false);
    // The aborted transaction's markers come again after a later commit:
    // the aborted records still never count.
    log.append_marker(0, 2, 0, TransactionMarker::Commit);
    let restarted = reload(&log);
    assert_eq!(fetch(&restarted, "a", true), vec![(10, false), (-1, false)]);
    assert_eq!(fetch(&restarted, "b", true), vec![(-1, false), (-1, false)]);
    assert_eq!(fetch(&restarted, "c", true), vec![(-1, true), (-1, false)]);
    assert_eq!(
        fetch(&restarted, "c", false),
        vec![(-1, false), (-1, false)]
    );
    assert_eq!(restarted.open_transactions(), 1);
}

#[test]
fn replay_holds_markers_past_the_high_watermark_until_it_passes_them() {
    let mut log = InMemoryOffsetsLog::new();
    let records = [OffsetsRecord::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
        value: Some(strom_coordinator::records::OffsetCommitValue {
            offset: 10,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
            expire_timestamp_ms: -1,
        }),
    }
    .to_log_record()];
    log.append_transactional(0, PRODUCER, 0, &records)
        .expect("appended");
    let marker_offset = log.append_marker(0, PRODUCER, 0, TransactionMarker::Commit);
    let mut core = fresh_core();
    core.begin_loading(0);
    let stored = read_partition(&log, 0).expect("reads");
    assert_eq!(stored[0].batch, BatchContext::transactional(PRODUCER, 0));
    assert_eq!(stored[1].batch, BatchContext::marker(PRODUCER, 0));
    core.replay_records(0, stored, marker_offset, 0)
        .expect("replays");
    // The marker is past the high watermark: OffsetFetch waits for it.
    assert_eq!(
        core.fetch_offsets("g", None, false),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    assert_eq!(core.pending_partitions(), vec![0]);
    core.advance_committed(0, marker_offset + 1, 0);
    assert_eq!(fetch(&core, "g", true), vec![(10, false), (-1, false)]);
}

#[test]
fn a_marker_reported_while_loading_is_kept_when_the_replay_did_not_reach_it() {
    let mut log = InMemoryOffsetsLog::new();
    let mut core = core_with(no_delay());
    txn_commit(
        &mut core,
        &mut log,
        &txn_request("g", PRODUCER, vec![partition("t", 0, 10)]),
        0,
    );
    let mut loading = fresh_core();
    loading.begin_loading(0);
    let stored = read_partition(&log, 0).expect("reads");
    // The marker lands after the loader read the log.
    let marker_offset = log.append_marker(0, PRODUCER, 0, TransactionMarker::Commit);
    loading
        .complete_transaction(0, PRODUCER, true, marker_offset)
        .expect("owned while loading");
    loading
        .replay_records(0, stored, i64::MAX, 0)
        .expect("replays");
    assert_eq!(loading.partition_status(0), Some(PartitionStatus::Loaded));
    loading.advance_committed(0, i64::MAX, 0);
    assert_eq!(fetch(&loading, "g", true), vec![(10, false), (-1, false)]);
}

#[test]
fn a_malformed_marker_fails_the_load() {
    let mut log = InMemoryOffsetsLog::new();
    let bad = LogRecord {
        key: bytes::Bytes::from_static(&[0, 0, 1]),
        value: None,
    };
    log.append_batch(0, BatchContext::marker(PRODUCER, 0), &[bad]);
    // A control record of another type is skipped.
    let other = LogRecord {
        key: bytes::Bytes::from_static(&[0, 0, 0, 5]),
        value: None,
    };
    let mut fine = InMemoryOffsetsLog::new();
    fine.append_batch(0, BatchContext::marker(PRODUCER, 0), &[other]);
    let mut core = fresh_core();
    core.begin_loading(0);
    assert_eq!(
        core.load_partition(&log, 0, 0),
        Err(LoadError::Malformed {
            partition: 0,
            offset: 0,
            source: RecordError::Truncated {
                field: "control record type"
            },
        })
    );
    assert_eq!(core.partition_status(0), Some(PartitionStatus::Loading));
    assert_eq!(core.load_partition(&fine, 0, 0), Ok(1));
}
