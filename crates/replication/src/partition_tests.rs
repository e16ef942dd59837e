//! Tests of [`Partition`]: role changes, acknowledgements across them, the
//! high watermark's single publication, and the follower's writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strom_clock::ManualClock;
use strom_storage::testing::{simple_batch, BatchSpec};
use strom_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    partition: Arc<Partition>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogManagerConfig::new(vec![dir.path().to_owned()], LogConfig::default());
    let logs = LogManager::open(config, BTreeMap::new(), 0).expect("log manager");
    let topic_partition = TopicPartition::new("t".to_owned(), 0);
    let log = logs.get_or_create(&topic_partition, 0).expect("log");
    let partition = Partition::open(topic_partition, log, Arc::new(ManualClock::new(0)));
    Fixture {
        _dir: dir,
        partition: Arc::new(partition),
    }
}

fn assignment(leader_epoch: i32, partition_epoch: i32, isr: &[BrokerId]) -> LeaderAssignment {
    LeaderAssignment {
        local: 1,
        leader_epoch,
        partition_epoch,
        replicas: vec![1, 2, 3],
        isr: isr.iter().copied().collect::<BTreeSet<_>>(),
        min_insync_replicas: 1,
    }
}

fn batch() -> Bytes {
    simple_batch(&BatchSpec::default())
}

/// A batch as a follower receives it: `base_offset`, `count` records, written at `epoch`.
fn replicated_batch(base_offset: i64, epoch: i32) -> Bytes {
    simple_batch(&BatchSpec {
        base_offset,
        partition_leader_epoch: epoch,
        ..BatchSpec::default()
    })
}

fn fetch(replica: BrokerId, fetch_offset: i64) -> FollowerFetch {
    FollowerFetch {
        replica,
        fetch_offset,
        last_fetched_epoch: None,
    }
}

#[test]
fn an_opened_replica_neither_leads_nor_accepts_writes() {
    let fixture = fixture();
    let partition = &fixture.partition;
    assert_eq!(partition.role_view(), RoleView::Idle);
    assert!(matches!(
        partition.append(batch(), false, 0),
        Err(AppendFailure::Replication(ReplicationError::NotLeader))
    ));
    assert!(matches!(
        FollowerLog::append(&**partition, replicated_batch(0, 0)),
        Err(FollowerWriteError::NotFollower { .. })
    ));
}

#[test]
fn the_high_watermark_is_published_once_for_the_log_and_the_watch() {
    let fixture = fixture();
    let partition = &fixture.partition;
    partition
        .become_leader(&assignment(0, 0, &[1, 2]), 0)
        .expect("online");
    let appended = partition.append(batch(), true, 0).expect("append");
    let end = appended.info.last_offset + 1;
    assert_eq!(partition.high_watermark.current(), 0, "2 has not fetched");
    assert_eq!(partition.log_end.current(), end);
    assert!(matches!(
        partition.read_for_follower(&fetch(2, end), 1 << 20, true, 1),
        Ok(FollowerRead::Records { .. })
    ));
    let in_log = partition
        .with_log(|log| log.high_watermark())
        .expect("online");
    assert_eq!((partition.high_watermark.current(), in_log), (end, end));
    assert_eq!(
        partition.ack_status(end, appended.leader_epoch),
        AckStatus::Committed
    );
    // A smaller HW published late (an out-of-order decision) changes nothing.
    let mut log = partition.log_mut().expect("online");
    partition.publish_high_watermark(&mut log, 0);
    drop(log);
    assert_eq!(partition.high_watermark.current(), end);
}

#[tokio::test(start_paused = true)]
async fn a_waiting_acks_all_write_learns_at_once_that_leadership_moved() {
    let fixture = fixture();
    let partition = Arc::clone(&fixture.partition);
    partition
        .become_leader(&assignment(3, 0, &[1, 2]), 0)
        .expect("online");
    let appended = partition.append(batch(), true, 0).expect("append");
    let required = appended.info.last_offset + 1;
    let waiter = {
        let partition = Arc::clone(&partition);
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let status = partition
                .wait_for_ack(required, appended.leader_epoch, Duration::from_secs(30))
                .await;
            (status, started.elapsed())
        })
    };
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "follower 2 has not fetched");
    partition.become_follower(2, 4).expect("online");
    let (status, waited) = waiter.await.expect("joins");
    assert_eq!(status, AckStatus::NotLeader);
    assert!(
        waited < Duration::from_secs(1),
        "woken, not timed out: {waited:?}"
    );
    assert!(matches!(
        partition.append(batch(), true, 0),
        Err(AppendFailure::Replication(ReplicationError::NotLeader))
    ));
}

#[test]
fn a_write_of_an_earlier_leadership_is_never_acknowledged_by_a_later_one() {
    let fixture = fixture();
    let partition = &fixture.partition;
    partition
        .become_leader(&assignment(1, 0, &[1, 2]), 0)
        .expect("online");
    let appended = partition.append(batch(), true, 0).expect("append");
    let required = appended.info.last_offset + 1;
    partition.become_follower(2, 2).expect("online");
    // Leading again at epoch 3 with an ISR of one: the HW passes the old
    // write at once, but it was written under epoch 1 and may have been
    // replaced in between.
    partition
        .become_leader(&assignment(3, 1, &[1]), 0)
        .expect("online");
    assert!(partition.high_watermark.current() >= required);
    assert_eq!(partition.ack_status(required, 1), AckStatus::NotLeader);
    assert_eq!(partition.ack_status(required, 3), AckStatus::Committed);
}

#[test]
fn a_follower_appends_with_the_leaders_offsets_and_takes_its_high_watermark() {
    let fixture = fixture();
    let partition = &fixture.partition;
    partition.become_follower(2, 5).expect("online");
    let end = FollowerLog::append(&**partition, replicated_batch(0, 5)).expect("append");
    assert!(end > 0);
    assert_eq!(partition.log_end.current(), end);
    partition.set_high_watermark(end);
    assert_eq!(partition.high_watermark.current(), end);
    let offsets = partition.offsets().expect("online");
    assert_eq!((offsets.log_end_offset, offsets.high_watermark), (end, end));
    assert_eq!(offsets.latest_epoch, Some(5));
    // Truncation lowers both the LEO and the HW.
    assert_eq!(partition.truncate_to(0).expect("truncate"), 0);
    assert_eq!(
        (
            partition.log_end.current(),
            partition.high_watermark.current()
        ),
        (0, 0)
    );
    // Once it leads, the fetcher's late writes are refused.
    partition
        .become_leader(&assignment(6, 0, &[1]), 0)
        .expect("online");
    assert!(matches!(
        FollowerLog::append(&**partition, replicated_batch(0, 5)),
        Err(FollowerWriteError::NotFollower { .. })
    ));
}

#[test]
fn a_committed_isr_change_applies_only_at_the_current_leader_epoch() {
    let fixture = fixture();
    let partition = &fixture.partition;
    partition
        .become_leader(&assignment(2, 0, &[1, 2, 3]), 0)
        .expect("online");
    let appended = partition.append(batch(), true, 0).expect("append");
    let end = appended.info.last_offset + 1;
    assert_eq!(partition.high_watermark.current(), 0);
    // The controller removed 2 and 3: the HW follows the leader alone.
    assert!(partition
        .update_leadership(&assignment(2, 1, &[1]), 0)
        .expect("online"));
    assert_eq!(partition.high_watermark.current(), end);
    assert_eq!(partition.isr_size(), 1);
    // Another epoch is not an update: it must become leader again.
    assert!(!partition
        .update_leadership(&assignment(3, 2, &[1]), 0)
        .expect("online"));
}

#[test]
fn a_panic_holding_the_replication_state_takes_the_partition_offline() {
    let fixture = fixture();
    let partition = Arc::clone(&fixture.partition);
    partition
        .become_leader(&assignment(0, 0, &[1]), 0)
        .expect("online");
    let poisoned = Arc::clone(&partition);
    let panicked = std::thread::spawn(move || {
        let _role = poisoned.role.lock();
        panic!("injected panic while changing the replication state");
    })
    .join();
    assert!(panicked.is_err());
    assert!(matches!(
        partition.append(batch(), false, 0),
        Err(AppendFailure::Offline(_))
    ));
    assert!(partition.check_online().is_err());
    assert!(partition.leader_epoch().is_err());
    assert_eq!(partition.ack_status(0, 0), AckStatus::Waiting);
    assert!(matches!(
        partition.read(0, 1 << 20, true),
        Err(ReadFailure::Offline(_))
    ));
    // The log itself was not poisoned, but it is not served either.
    assert!(!partition.log.is_poisoned());
}
