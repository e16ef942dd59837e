//! The async layer: parked JoinGroup/SyncGroup answered through oneshot
//! channels, records appended to the log, the timer task, and a restart that
//! reloads committed offsets. Time is tokio's paused clock.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use strom_clock::{Clock, ManualClock, Random, SeededRandom, TokioClock};
use strom_coordinator::{
    CoordinatorConfig, GroupCoordinator, GroupError, GroupState, InMemoryOffsetsLog,
    OffsetCommitPartition, OffsetCommitRequest,
};

/// The coordinator's clock on tokio's paused time: `tokio::time::sleep`
/// moves it together with the coordinator's timer task.
fn paused_clock() -> Arc<dyn Clock> {
    Arc::new(TokioClock::new())
}

/// A random source seeded from the system, as a restarted broker's is: a
/// coordinator restarted in a test must not hand out the member ids its
/// previous incarnation did.
fn fresh_random() -> Arc<dyn Random> {
    Arc::new(SeededRandom::from_entropy())
}

fn coordinator(log: InMemoryOffsetsLog) -> GroupCoordinator<InMemoryOffsetsLog> {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(config, log, paused_clock(), fresh_random());
    coordinator.load_partition(0).expect("loads");
    coordinator
}

fn old_style_join(client_id: &str) -> strom_coordinator::JoinRequest {
    let mut request = join_request(0, "", client_id);
    request.require_known_member_id = false;
    request
}

#[tokio::test(start_paused = true)]
async fn two_members_join_sync_and_commit() {
    let coordinator = coordinator(InMemoryOffsetsLog::new());
    // The first member's join completes alone (no initial delay); the second
    // member's join starts a new rebalance that needs the first to rejoin.
    let first = coordinator
        .join_group(GROUP, old_style_join("a"))
        .await
        .expect("joined");
    assert_eq!(first.generation_id, 1);
    let second_coordinator = coordinator.clone();
    let second = tokio::spawn(async move {
        second_coordinator
            .join_group(GROUP, old_style_join("b"))
            .await
    });
    tokio::task::yield_now().await;
    let mut rejoin = join_request(0, &first.member_id, "a");
    rejoin.require_known_member_id = false;
    let first_again = coordinator
        .join_group(GROUP, rejoin)
        .await
        .expect("rejoined");
    let second = second.await.expect("task").expect("joined");
    assert_eq!(first_again.generation_id, 2);
    assert_eq!(second.generation_id, 2);
    assert_eq!(first_again.leader_id, first.member_id);
    assert_eq!(first_again.members.len(), 2);

    let follower_coordinator = coordinator.clone();
    let follower_id = second.member_id.clone();
    let follower_sync = tokio::spawn(async move {
        follower_coordinator
            .sync_group(GROUP, sync_request(0, &follower_id, 2, vec![]))
            .await
    });
    tokio::task::yield_now().await;
    let assignments = vec![
        (first.member_id.clone(), Bytes::from_static(b"p0")),
        (second.member_id.clone(), Bytes::from_static(b"p1")),
    ];
    let leader_sync = coordinator
        .sync_group(GROUP, sync_request(0, &first.member_id, 2, assignments))
        .await
        .expect("leader synced");
    assert_eq!(leader_sync.assignment, Bytes::from_static(b"p0"));
    let follower_sync = follower_sync.await.expect("task").expect("follower synced");
    assert_eq!(follower_sync.assignment, Bytes::from_static(b"p1"));
    assert_eq!(
        coordinator.heartbeat(GROUP, &heartbeat(&second.member_id, 2)),
        Ok(())
    );

    let commit = OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: 2,
        member_id: second.member_id.clone(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "topic-x".into(),
            partition: 1,
            offset: 99,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    };
    let results = coordinator
        .commit_offsets(&commit)
        .await
        .expect("committed");
    assert!(results.iter().all(|(_, result)| result.is_ok()));
    // Group metadata (Stable) and the offset are in the log.
    assert_eq!(coordinator.with_log(|log| log.len(0)), 2);
    let listed = coordinator
        .list_groups(&[GroupState::Stable])
        .expect("online");
    assert_eq!(listed.len(), 1);
    let described = coordinator.describe_groups(&[GROUP.to_owned()]);
    assert_eq!(described[0].as_ref().map(|d| d.members.len()), Ok(2));

    // A restart on the same log finds the offset and the group.
    let log = coordinator.with_log(Clone::clone);
    let restarted = self::coordinator(log);
    let offsets = restarted
        .fetch_offsets(GROUP, Some(&[("topic-x".to_owned(), vec![1])]), false)
        .expect("served");
    assert_eq!(offsets[0].offset, 99);
    let restored = restarted.describe_groups(&[GROUP.to_owned()]);
    assert_eq!(
        restored[0].as_ref().map(|d| d.state),
        Ok(GroupState::Stable)
    );
}

#[tokio::test(start_paused = true)]
async fn timer_task_expires_silent_members() {
    let coordinator = coordinator(InMemoryOffsetsLog::new());
    let joined = join_and_sync(&coordinator).await;
    let timer = coordinator.spawn_timer(Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(9_000)).await;
    assert_eq!(
        coordinator.heartbeat(GROUP, &heartbeat(&joined.member_id, joined.generation_id)),
        Ok(())
    );
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert_eq!(
        coordinator.heartbeat(GROUP, &heartbeat(&joined.member_id, joined.generation_id)),
        Err(GroupError::UnknownMemberId)
    );
    let described = coordinator.describe_groups(&[GROUP.to_owned()]);
    assert_eq!(
        described[0].as_ref().map(|d| d.state),
        Ok(GroupState::Empty)
    );
    timer.abort();
}

/// A joined and synced member of a coordinator on `clock`.
async fn one_stable_member(
    clock: Arc<ManualClock>,
) -> (
    GroupCoordinator<InMemoryOffsetsLog>,
    strom_coordinator::JoinResponse,
) {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator =
        GroupCoordinator::new(config, InMemoryOffsetsLog::new(), clock, fresh_random());
    coordinator.load_partition(0).expect("loads");
    let joined = join_and_sync(&coordinator).await;
    (coordinator, joined)
}

/// Member "a" joined and synced: the group is stable with it alone.
async fn join_and_sync(
    coordinator: &GroupCoordinator<InMemoryOffsetsLog>,
) -> strom_coordinator::JoinResponse {
    let joined = coordinator
        .join_group(GROUP, old_style_join("a"))
        .await
        .expect("joined");
    coordinator
        .sync_group(
            GROUP,
            sync_request(0, &joined.member_id, joined.generation_id, vec![]),
        )
        .await
        .expect("synced");
    joined
}

#[tokio::test]
async fn an_injected_manual_clock_expires_a_session_without_waiting() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let (coordinator, joined) = one_stable_member(Arc::clone(&clock)).await;
    let beat = heartbeat(&joined.member_id, joined.generation_id);
    clock.advance(9_000);
    coordinator.tick();
    assert_eq!(coordinator.heartbeat(GROUP, &beat), Ok(()));
    // Each heartbeat renews the 10 s session: 9.9 s after one the member
    // lives (and heartbeats again), 10.1 s after that a tick removes it.
    clock.advance(9_900);
    coordinator.tick();
    assert_eq!(coordinator.heartbeat(GROUP, &beat), Ok(()));
    clock.advance(10_100);
    coordinator.tick();
    assert_eq!(
        coordinator.heartbeat(GROUP, &beat),
        Err(GroupError::UnknownMemberId)
    );
    let described = coordinator.describe_groups(&[GROUP.to_owned()]);
    assert_eq!(
        described[0].as_ref().map(|d| d.state),
        Ok(GroupState::Empty)
    );
}

#[tokio::test(start_paused = true)]
async fn errors_are_returned_directly() {
    let coordinator = coordinator(InMemoryOffsetsLog::new());
    let required = coordinator
        .join_group(GROUP, join_request(0, "", "a"))
        .await;
    assert!(matches!(required, Err(GroupError::MemberIdRequired { .. })));
    assert_eq!(
        coordinator
            .sync_group("nope", sync_request(0, "m", 1, vec![]))
            .await,
        Err(GroupError::UnknownMemberId)
    );
    coordinator.unload_partition(0);
    assert_eq!(
        coordinator.join_group(GROUP, old_style_join("a")).await,
        Err(GroupError::NotCoordinator { partition: 0 })
    );
}

#[tokio::test(start_paused = true)]
async fn a_commit_that_cannot_be_appended_is_undone() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        ControlledLog::default(),
        paused_clock(),
        fresh_random(),
    );
    coordinator.load_partition(0).expect("loads");
    let commit = |offset| OffsetCommitRequest {
        group_id: "simple".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    };
    coordinator
        .commit_offsets(&commit(5))
        .await
        .expect("durable");
    coordinator.with_log_mut(|log| log.refuse_appends = true);
    let error = coordinator.commit_offsets(&commit(9)).await.unwrap_err();
    let GroupError::LogAppendFailed {
        source: strom_coordinator::LogError::Backend { operation, source },
    } = &error
    else {
        panic!("not an append failure: {error:?}");
    };
    assert_eq!(*operation, strom_coordinator::LogOperation::Append);
    // The backend's own error is kept, not replaced by a fixed string.
    assert_eq!(source.to_string(), "disk full");
    let offsets = coordinator
        .fetch_offsets("simple", None, false)
        .expect("served");
    assert_eq!(offsets[0].offset, 5, "the failed commit is not visible");
    // A commit the log holds but has not committed is not answered until
    // its high watermark passes it.
    coordinator.with_log_mut(|log| {
        log.refuse_appends = false;
        log.committed = Some(i64::try_from(log.inner.len(0)).expect("small"));
    });
    coordinator
        .commit_offsets(&commit(11))
        .await
        .expect("appended");
    let offsets = coordinator
        .fetch_offsets("simple", None, false)
        .expect("served");
    assert_eq!(offsets[0].offset, 5, "not committed by the log yet");
    coordinator.with_log_mut(|log| log.committed = None);
    let offsets = coordinator
        .fetch_offsets("simple", None, false)
        .expect("served");
    assert_eq!(offsets[0].offset, 11);
    // A group that commits and never fetches keeps no more pending commits
    // than it has in flight: each commit applies what the log committed,
    // and the timer applies the rest.
    for offset in 12..40 {
        coordinator
            .commit_offsets(&commit(offset))
            .await
            .expect("committed");
        assert!(coordinator.pending_commits() <= 1);
    }
    coordinator.tick();
    assert_eq!(coordinator.pending_commits(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_claimed_partition_answers_load_in_progress_until_loaded() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        InMemoryOffsetsLog::new(),
        paused_clock(),
        fresh_random(),
    );
    // Not owned yet: NOT_COORDINATOR.
    assert!(matches!(
        coordinator.fetch_offsets(GROUP, None, false),
        Err(GroupError::NotCoordinator { partition: 0 })
    ));
    coordinator.begin_loading(0);
    assert_eq!(
        coordinator.fetch_offsets(GROUP, None, false),
        Err(GroupError::CoordinatorLoadInProgress { partition: 0 })
    );
    coordinator.load_partition(0).expect("loads");
    assert_eq!(
        coordinator.fetch_offsets(GROUP, None, false),
        Ok(Vec::new())
    );
}

#[tokio::test(start_paused = true)]
async fn a_panic_holding_the_group_state_takes_the_coordinator_offline() {
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = ControlledLog {
        panic_armed: std::sync::Arc::clone(&armed),
        ..ControlledLog::default()
    };
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(config, log, paused_clock(), fresh_random());
    coordinator.load_partition(0).expect("loads");
    let commit = |offset| OffsetCommitRequest {
        group_id: "simple".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![OffsetCommitPartition {
            topic: "topic-x".into(),
            partition: 0,
            offset,
            leader_epoch: None,
            metadata: None,
            commit_timestamp_ms: None,
        }],
    };
    coordinator
        .commit_offsets(&commit(5))
        .await
        .expect("commit");
    assert!(!coordinator.is_offline());
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let panicking = coordinator.clone();
    let panicked = tokio::spawn(async move { panicking.commit_offsets(&commit(9)).await }).await;
    assert!(panicked.is_err_and(|error| error.is_panic()));
    armed.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(coordinator.is_offline());
    // Nothing is served from the possibly half-changed state.
    assert_eq!(
        coordinator.commit_offsets(&commit(10)).await.err(),
        Some(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(
        coordinator.fetch_offsets("simple", None, false).err(),
        Some(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(
        coordinator.list_groups(&[]).err(),
        Some(GroupError::CoordinatorNotAvailable)
    );
    assert!(coordinator
        .describe_groups(&["simple".to_owned()])
        .iter()
        .all(|described| described == &Err(GroupError::CoordinatorNotAvailable)));
}

fn standalone_commit(offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: "simple".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
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

#[tokio::test(start_paused = true)]
async fn a_commit_is_answered_once_the_log_committed_it_without_holding_the_coordinator() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        ControlledLog::gated(),
        paused_clock(),
        fresh_random(),
    );
    coordinator.load_partition(0).expect("loads");
    let committing = coordinator.clone();
    let commit =
        tokio::spawn(async move { committing.commit_offsets(&standalone_commit(7)).await });
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!commit.is_finished(), "answered before the log committed");
    // The coordinator serves other requests while the commit waits.
    assert_eq!(
        coordinator.fetch_offsets("other", None, false),
        Ok(Vec::new()),
        "the coordinator is not held by the waiting commit"
    );
    assert_eq!(coordinator.with_log(|log| log.inner.len(0)), 1);
    coordinator.with_log(|log| log.release_commits());
    let results = commit.await.expect("task").expect("committed");
    assert!(results.iter().all(|(_, result)| result.is_ok()));
    let offsets = coordinator
        .fetch_offsets("simple", None, false)
        .expect("served");
    assert_eq!(offsets[0].offset, 7);
}

#[tokio::test(start_paused = true)]
async fn a_commit_the_log_does_not_commit_fails_with_the_log_s_reason() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let not_leader = strom_coordinator::LogError::NotLeader { partition: 0 };
    let log = ControlledLog {
        commit_failure: Some(not_leader.clone()),
        ..ControlledLog::gated()
    };
    let coordinator = GroupCoordinator::new(config, log, paused_clock(), fresh_random());
    coordinator.load_partition(0).expect("loads");
    assert_eq!(
        coordinator.commit_offsets(&standalone_commit(7)).await,
        Err(GroupError::LogAppendFailed { source: not_leader })
    );
}

/// Two members joined to generation 2 of GROUP on `coordinator`: (leader
/// id, follower id).
async fn two_members(coordinator: &GroupCoordinator<ControlledLog>) -> (String, String) {
    let first = coordinator
        .join_group(GROUP, old_style_join("a"))
        .await
        .expect("joined");
    let joining = coordinator.clone();
    let second = tokio::spawn(async move { joining.join_group(GROUP, old_style_join("b")).await });
    tokio::task::yield_now().await;
    let mut rejoin = join_request(0, &first.member_id, "a");
    rejoin.require_known_member_id = false;
    let first_again = coordinator
        .join_group(GROUP, rejoin)
        .await
        .expect("rejoined");
    let second = second.await.expect("task").expect("joined");
    assert_eq!((first_again.generation_id, second.generation_id), (2, 2));
    (first.member_id, second.member_id)
}

/// The leader's and the follower's SyncGroup answers of generation 2.
async fn sync_both(
    coordinator: &GroupCoordinator<ControlledLog>,
    leader: &str,
    follower: &str,
) -> (
    tokio::task::JoinHandle<Result<strom_coordinator::SyncResponse, GroupError>>,
    tokio::task::JoinHandle<Result<strom_coordinator::SyncResponse, GroupError>>,
) {
    let syncing = coordinator.clone();
    let follower_id = follower.to_owned();
    let follower_sync = tokio::spawn(async move {
        syncing
            .sync_group(GROUP, sync_request(0, &follower_id, 2, vec![]))
            .await
    });
    tokio::task::yield_now().await;
    let syncing = coordinator.clone();
    let assignments = vec![
        (leader.to_owned(), Bytes::from_static(b"p0")),
        (follower.to_owned(), Bytes::from_static(b"p1")),
    ];
    let leader_id = leader.to_owned();
    let leader_sync = tokio::spawn(async move {
        syncing
            .sync_group(GROUP, sync_request(0, &leader_id, 2, assignments))
            .await
    });
    (leader_sync, follower_sync)
}

#[tokio::test(start_paused = true)]
async fn sync_answers_wait_until_the_group_s_assignment_is_committed() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        ControlledLog::gated(),
        paused_clock(),
        fresh_random(),
    );
    coordinator.load_partition(0).expect("loads");
    let (leader, follower) = two_members(&coordinator).await;
    let (leader_sync, follower_sync) = sync_both(&coordinator, &leader, &follower).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!leader_sync.is_finished() && !follower_sync.is_finished());
    assert_eq!(
        coordinator.heartbeat(GROUP, &heartbeat(&follower, 2)),
        Ok(()),
        "the coordinator is not held while the record commits"
    );
    coordinator.with_log(|log| log.release_commits());
    let leader_sync = leader_sync.await.expect("task").expect("synced");
    let follower_sync = follower_sync.await.expect("task").expect("synced");
    assert_eq!(leader_sync.assignment, Bytes::from_static(b"p0"));
    assert_eq!(follower_sync.assignment, Bytes::from_static(b"p1"));
}

#[tokio::test(start_paused = true)]
async fn an_assignment_not_committed_fails_every_member_s_sync() {
    let config = CoordinatorConfig {
        group: no_delay(),
        offsets_topic_partitions: 1,
        ..CoordinatorConfig::default()
    };
    let coordinator = GroupCoordinator::new(
        config,
        ControlledLog::gated(),
        paused_clock(),
        fresh_random(),
    );
    coordinator.load_partition(0).expect("loads");
    let (leader, follower) = two_members(&coordinator).await;
    let not_leader = strom_coordinator::LogError::NotLeader { partition: 0 };
    coordinator.with_log_mut(|log| log.commit_failure = Some(not_leader.clone()));
    let (leader_sync, follower_sync) = sync_both(&coordinator, &leader, &follower).await;
    let failed = Err(GroupError::LogAppendFailed { source: not_leader });
    assert_eq!(leader_sync.await.expect("task"), failed);
    assert_eq!(follower_sync.await.expect("task"), failed);
}
