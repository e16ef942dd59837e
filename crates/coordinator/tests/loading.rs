//! Loading `__consumer_offsets` partitions: replay rebuilds groups and
//! offsets (later records win, tombstones delete), and ownership answers.

use crate::common;

use bytes::Bytes;
use common::*;
use strom_coordinator::records::{OffsetCommitValue, OffsetsRecord};
use strom_coordinator::{
    CoordinatorConfig, CoordinatorCore, GroupError, GroupState, InMemoryOffsetsLog, LoadError,
    LogError, LogRecord, OffsetCommitPartition, OffsetCommitRequest, OffsetsLog, PartitionStatus,
    RecordError, StoredRecord,
};

fn commit(group_id: &str, generation_id: i32, member_id: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group_id.to_owned(),
        generation_id,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "topic-x".into(),
            partition: 0,
            offset,
            leader_epoch: Some(2),
            metadata: Some("md".into()),
            commit_timestamp_ms: None,
        }],
    }
}

fn persist(core: &mut CoordinatorCore, log: &mut InMemoryOffsetsLog) {
    for (partition, record) in core.take_records() {
        log.append(partition, &[record]).expect("in-memory append");
    }
}

fn fresh_core() -> CoordinatorCore {
    CoordinatorCore::new(
        CoordinatorConfig {
            group: no_delay(),
            offsets_topic_partitions: 1,
            ..CoordinatorConfig::default()
        },
        seeded(),
    )
}

#[test]
fn replay_rebuilds_groups_and_offsets() {
    let mut log = InMemoryOffsetsLog::new();
    let mut core = core_with(no_delay());
    let (member, generation) = stable_single(&mut core, 0);
    core.commit_offsets(&commit(GROUP, generation, &member, 10), 1)
        .unwrap();
    core.commit_offsets(&commit(GROUP, generation, &member, 20), 2)
        .unwrap();
    core.commit_offsets(&commit("standalone", -1, "", 5), 3)
        .unwrap();
    core.commit_offsets(&commit("deleted", -1, "", 5), 3)
        .unwrap();
    core.delete_groups(&["deleted".to_owned()], 4);
    persist(&mut core, &mut log);

    let mut restarted = fresh_core();
    restarted.begin_loading(0);
    let replayed = restarted.load_partition(&log, 0, 100).expect("loads");
    assert_eq!(replayed, log.len(0) as u64);
    let group = restarted.group(GROUP).expect("group restored");
    assert_eq!(group.state(), GroupState::Stable);
    assert_eq!(group.generation_id(), generation);
    assert_eq!(group.leader_id(), Some(member.as_str()));
    assert_eq!(group.protocol_name(), Some("range"));
    let restored_member = group.member(&member).expect("member restored");
    assert_eq!(restored_member.assignment, Bytes::from_static(b"a"));
    let offsets = restarted.fetch_offsets(GROUP, None, false).unwrap();
    assert_eq!(offsets.len(), 1);
    assert_eq!(
        (offsets[0].offset, offsets[0].leader_epoch),
        (20, Some(2)),
        "later records win"
    );
    assert_eq!(offsets[0].metadata, "md");
    assert_eq!(
        restarted.fetch_offsets("standalone", None, false).unwrap()[0].offset,
        5
    );
    assert!(restarted.group("deleted").is_none(), "tombstones delete");
    // The restored member keeps working, and its session restarted at load.
    assert_eq!(
        restarted.heartbeat(GROUP, &heartbeat(&member, generation), 200),
        Ok(())
    );
    restarted.tick(10_199);
    assert!(restarted
        .group(GROUP)
        .and_then(|g| g.member(&member))
        .is_some());
    restarted.tick(10_200);
    assert!(restarted
        .group(GROUP)
        .and_then(|g| g.member(&member))
        .is_none());
}

#[test]
fn empty_group_metadata_restores_an_empty_group() {
    let mut log = InMemoryOffsetsLog::new();
    let mut core = core_with(no_delay());
    let (member, generation) = stable_single(&mut core, 0);
    core.commit_offsets(&commit(GROUP, generation, &member, 10), 1)
        .unwrap();
    let leaving = [strom_coordinator::LeaveMember {
        member_id: member,
        group_instance_id: None,
    }];
    core.leave_group(GROUP, &leaving, 2).unwrap();
    persist(&mut core, &mut log);
    let mut restarted = fresh_core();
    restarted.begin_loading(0);
    restarted.load_partition(&log, 0, 100).unwrap();
    let group = restarted.group(GROUP).expect("group");
    assert_eq!(group.state(), GroupState::Empty);
    assert_eq!(group.generation_id(), generation + 1);
    assert_eq!(
        restarted.fetch_offsets(GROUP, None, false).unwrap()[0].offset,
        10
    );
}

#[test]
fn offset_tombstones_remove_offsets_on_replay() {
    let mut log = InMemoryOffsetsLog::new();
    let write = |log: &mut InMemoryOffsetsLog, record: OffsetsRecord| {
        log.append(0, &[record.to_log_record()]).unwrap();
    };
    let value = |offset| OffsetCommitValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 0,
        expire_timestamp_ms: -1,
    };
    let offset = |partition, value| OffsetsRecord::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition,
        value,
    };
    write(&mut log, offset(0, Some(value(1))));
    write(&mut log, offset(1, Some(value(2))));
    write(&mut log, offset(0, None));
    write(&mut log, offset(1, Some(value(3))));
    log.append(
        0,
        &[LogRecord {
            key: Bytes::from_static(&[0, 9, 1]),
            value: None,
        }],
    )
    .unwrap();
    let mut core = fresh_core();
    core.begin_loading(0);
    assert_eq!(core.load_partition(&log, 0, 0), Ok(5));
    let offsets = core.fetch_offsets("g", None, false).unwrap();
    assert_eq!(
        offsets
            .iter()
            .map(|p| (p.partition, p.offset))
            .collect::<Vec<_>>(),
        vec![(1, 3)]
    );
}

#[test]
fn load_in_progress_until_loaded_and_not_coordinator_elsewhere() {
    let mut core = CoordinatorCore::new(CoordinatorConfig::default(), seeded());
    let partition = core.partition_for(GROUP);
    let other = (partition + 1) % 50;
    core.begin_loading(partition);
    assert_eq!(
        core.partition_status(partition),
        Some(PartitionStatus::Loading)
    );
    assert_eq!(
        core.fetch_offsets(GROUP, None, false),
        Err(GroupError::CoordinatorLoadInProgress { partition })
    );
    assert_eq!(
        core.load_partition(&InMemoryOffsetsLog::new(), other, 0),
        Err(LoadError::NotOwned { partition: other })
    );
    core.load_partition(&InMemoryOffsetsLog::new(), partition, 0)
        .unwrap();
    assert_eq!(
        core.partition_status(partition),
        Some(PartitionStatus::Loaded)
    );
    assert!(core.fetch_offsets(GROUP, None, false).is_ok());
    assert!(!core.any_partition_loading());
}

#[test]
fn malformed_records_fail_the_load_and_keep_the_partition_loading() {
    let mut log = InMemoryOffsetsLog::new();
    log.append(
        0,
        &[LogRecord {
            key: Bytes::from_static(&[0, 1, 0]),
            value: None,
        }],
    )
    .unwrap();
    let mut core = fresh_core();
    core.begin_loading(0);
    assert_eq!(
        core.load_partition(&log, 0, 0),
        Err(LoadError::Malformed {
            partition: 0,
            offset: 0,
            source: RecordError::Truncated { field: "group" }
        })
    );
    assert_eq!(core.partition_status(0), Some(PartitionStatus::Loading));
}

struct FailingLog;

impl OffsetsLog for FailingLog {
    fn append(&mut self, partition: i32, _records: &[LogRecord]) -> Result<i64, LogError> {
        Err(LogError::UnknownPartition { partition })
    }
    fn append_transactional(
        &mut self,
        partition: i32,
        _producer_id: i64,
        _producer_epoch: i16,
        _records: &[LogRecord],
    ) -> Result<i64, LogError> {
        Err(LogError::UnknownPartition { partition })
    }
    fn read(
        &self,
        _partition: i32,
        _from: i64,
        _max: usize,
    ) -> Result<Vec<StoredRecord>, LogError> {
        Err(LogError::Backend {
            operation: strom_coordinator::LogOperation::Read,
            source: strom_coordinator::BackendError::new(std::io::Error::other("disk gone")),
        })
    }
}

#[test]
fn read_failures_fail_the_load() {
    let mut core = fresh_core();
    core.begin_loading(0);
    let error = core.load_partition(&FailingLog, 0, 0).unwrap_err();
    let LoadError::Read {
        partition: 0,
        source: LogError::Backend { operation, source },
    } = &error
    else {
        panic!("not a read failure of partition 0: {error:?}");
    };
    assert_eq!(*operation, strom_coordinator::LogOperation::Read);
    assert_eq!(source.to_string(), "disk gone");
}

#[test]
fn records_of_groups_from_other_partitions_are_ignored() {
    let mut log = InMemoryOffsetsLog::new();
    let config = CoordinatorConfig::default();
    let mut core = CoordinatorCore::new(config.clone(), seeded());
    let partition = core.partition_for("mine");
    let foreign = (0..1_000)
        .map(|index| format!("group-{index}"))
        .find(|group| core.partition_for(group) != partition)
        .expect("some group elsewhere");
    for group in ["mine", foreign.as_str()] {
        let record = OffsetsRecord::GroupMetadata {
            group: group.into(),
            value: Some(strom_coordinator::Group::new(group, 0).to_metadata_value()),
        };
        log.append(partition, &[record.to_log_record()]).unwrap();
    }
    core.begin_loading(partition);
    core.load_partition(&log, partition, 0).unwrap();
    assert!(core.group("mine").is_some());
    assert!(core.group(&foreign).is_none());
}

#[test]
fn unloading_answers_parked_requests_not_coordinator() {
    let mut core = core_with(no_delay());
    let (_first, _) = stable_single(&mut core, 0);
    join_new(&mut core, 9, "b", 10);
    core.unload(0);
    let results = join_results(&core.take_completions());
    assert_eq!(
        results,
        vec![(9, Err(GroupError::NotCoordinator { partition: 0 }))]
    );
    assert!(core.group(GROUP).is_none());
    assert_eq!(
        core.heartbeat(GROUP, &heartbeat("x", 1), 20),
        Err(GroupError::NotCoordinator { partition: 0 })
    );
}

/// A log that ignores `from_offset` and always answers its first record.
struct StuckLog(InMemoryOffsetsLog);

impl OffsetsLog for StuckLog {
    fn append(&mut self, partition: i32, records: &[LogRecord]) -> Result<i64, LogError> {
        self.0.append(partition, records)
    }
    fn append_transactional(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: &[LogRecord],
    ) -> Result<i64, LogError> {
        self.0
            .append_transactional(partition, producer_id, producer_epoch, records)
    }
    fn read(&self, partition: i32, _from: i64, _max: usize) -> Result<Vec<StoredRecord>, LogError> {
        self.0.read(partition, 0, 1)
    }
}

#[test]
fn a_log_that_does_not_advance_ends_the_load() {
    let mut log = InMemoryOffsetsLog::new();
    let record = OffsetsRecord::GroupMetadata {
        group: "g".into(),
        value: Some(strom_coordinator::Group::new("g", 0).to_metadata_value()),
    };
    log.append(0, &[record.to_log_record(), record.to_log_record()])
        .unwrap();
    let mut core = fresh_core();
    core.begin_loading(0);
    assert_eq!(core.load_partition(&StuckLog(log), 0, 0), Ok(1));
    assert!(core.group("g").is_some());
}
