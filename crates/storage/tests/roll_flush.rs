//! A segment roll leaves the old segment's flush, the producer-state
//! snapshot and the directory sync to the background flusher: the append
//! that rolls does not wait for the disk, the recovery point moves only
//! when the flush is done, and a crash in between loses nothing that was
//! claimed durable.

use crate::common;

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{batch, partition_dir, read_all, small_config};
use strom_clock::SeededRandom;
use strom_storage::backend::FileBackend;
use strom_storage::error::{AppendError, LogError};
use strom_storage::flusher::Flusher;
use strom_storage::producer_state::snapshot_path;
use strom_storage::testing::FaultInjector;
use strom_storage::{Log, LogOpenOptions};

fn open(dir: &Path, injector: &Arc<FaultInjector>, flusher: &Arc<Flusher>, clean: bool) -> Log {
    open_at(dir, injector, flusher, clean, 0)
}

fn open_at(
    dir: &Path,
    injector: &Arc<FaultInjector>,
    flusher: &Arc<Flusher>,
    clean: bool,
    recovery_point: i64,
) -> Log {
    let (mut log, _) = Log::open_with_backend(
        dir,
        small_config(),
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point,
            had_clean_shutdown: clean,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
        Arc::clone(injector) as Arc<dyn FileBackend>,
    )
    .expect("open");
    log.set_flusher(Arc::clone(flusher));
    log
}

/// Appends two-record batches until the log has rolled once; returns the
/// new segment's base offset.
fn append_until_rolled(log: &mut Log) -> i64 {
    for step in 0..1000 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
        if log.segment_count() > 1 {
            return log
                .segments()
                .last()
                .map_or(0, |segment| segment.base_offset());
        }
    }
    panic!("the log never rolled");
}

#[test]
fn the_append_that_rolls_returns_while_the_old_segments_fsync_is_blocked() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let flusher = Flusher::start().expect("flusher");
    let mut log = open(&dir, &injector, &flusher, true);
    injector.hold_syncs(true);
    let (done, appended) = mpsc::channel();
    let appending = std::thread::spawn(move || {
        let base = append_until_rolled(&mut log);
        // More appends into the new segment do not wait either.
        log.append_as_leader(batch(2, 0), 0, 0).expect("append");
        done.send(log.recovery_point()).expect("report");
        (log, base)
    });
    let returned = appended.recv_timeout(Duration::from_secs(10));
    let fsync_reached = {
        let deadline = Instant::now() + Duration::from_secs(10);
        while injector.held_syncs() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        injector.held_syncs() > 0
    };
    // Whatever happened, let the blocked fsync go so the test can end.
    injector.hold_syncs(false);
    let recovery_point_while_blocked =
        returned.expect("the rolling append waited for the blocked fsync");
    assert!(fsync_reached, "the flusher never started the fsync");
    assert_eq!(recovery_point_while_blocked, 0, "nothing was synced yet");
    let (log, base) = appending.join().expect("appending thread");
    flusher.wait_idle();
    assert_eq!(log.recovery_point(), base);
    assert!(snapshot_path(&dir, base).exists());
}

#[test]
fn the_recovery_point_moves_only_when_the_roll_flush_is_done() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let flusher = Flusher::manual();
    let mut log = open(&dir, &injector, &flusher, true);
    let base = append_until_rolled(&mut log);
    assert!(base > 0);
    assert_eq!(log.recovery_point(), 0, "nothing synced yet");
    assert!(
        !snapshot_path(&dir, base).exists(),
        "the snapshot waits too"
    );
    assert_eq!(flusher.stats().queued, 1);
    flusher.run_queued();
    assert_eq!(log.recovery_point(), base);
    assert!(snapshot_path(&dir, base).exists());
    assert_eq!(flusher.stats().completed, 1);
}

#[test]
fn a_crash_between_roll_and_flush_keeps_only_what_was_flushed() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let flusher = Flusher::manual();
    let mut log = open(&dir, &injector, &flusher, true);
    // Something durable first: a flush, then a roll whose flush is done.
    for step in 0..5 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    log.flush(0).expect("flush");
    let flushed = log.recovery_point();
    assert_eq!(flushed, 10);
    let first_roll = append_until_rolled(&mut log);
    flusher.run_queued();
    assert_eq!(log.recovery_point(), first_roll);
    // Then a roll whose flush never runs: the machine dies first.
    let second_roll = {
        let before = log.segment_count();
        for step in 0..1000 {
            log.append_as_leader(batch(2, step), 0, 0).expect("append");
            if log.segment_count() > before {
                break;
            }
        }
        log.segments()
            .last()
            .map_or(0, |segment| segment.base_offset())
    };
    assert!(second_roll > first_roll);
    log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    let recovery_point = log.recovery_point();
    assert_eq!(recovery_point, first_roll, "the second roll is not flushed");
    let appended_end = log.log_end_offset();
    drop(log);
    assert_eq!(flusher.discard_queued(), 1);
    injector.crash(100).expect("crash");

    let log = open_at(&dir, &injector, &flusher, false, recovery_point);
    let end = log.log_end_offset();
    assert!(
        end >= first_roll,
        "records flushed by the first roll survive"
    );
    assert!(
        end < appended_end,
        "unflushed records of the second roll are lost"
    );
    let batches = read_all(&log, 0);
    assert_eq!(batches.first().map(|batch| batch.0), Some(0));
    assert_eq!(batches.last().map(|batch| batch.1), Some(end));
    for pair in batches.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "no gap after recovery");
    }
}

#[test]
fn a_failed_roll_flush_takes_the_log_offline() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let flusher = Flusher::manual();
    let mut log = open(&dir, &injector, &flusher, true);
    let base = append_until_rolled(&mut log);
    injector.fail_syncs(true);
    flusher.run_queued();
    injector.fail_syncs(false);
    assert_eq!(flusher.stats().failed, 1);
    assert_eq!(log.recovery_point(), 0, "a failed flush claims nothing");
    assert!(matches!(log.check_online(), Err(LogError::Offline { .. })));
    let refused = log.append_as_leader(batch(1, 0), 0, 0);
    assert!(
        matches!(refused, Err(AppendError::Log(LogError::Offline { .. }))),
        "{refused:?}"
    );
    assert!(log.log_end_offset() > base);
}

#[test]
fn a_roll_flush_queued_before_a_truncation_claims_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let flusher = Flusher::manual();
    let mut log = open(&dir, &injector, &flusher, true);
    let base = append_until_rolled(&mut log);
    log.truncate_to(4, 0).expect("truncate");
    // Re-append past the old roll point without rolling again: these
    // records were never synced.
    let mut roomy = log.config().clone();
    roomy.segment_bytes = 1 << 20;
    log.set_config(roomy);
    while log.log_end_offset() <= base + 4 {
        log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    }
    let queued = flusher.stats().queued;
    assert_eq!(queued, 1, "one roll, before the truncation");
    flusher.run_queued();
    assert_eq!(flusher.stats().completed, queued);
    assert!(
        log.recovery_point() <= 4,
        "recovery point {} claims records written after the truncation",
        log.recovery_point()
    );
    assert!(
        !snapshot_path(&dir, base).exists(),
        "a snapshot of truncated records is not published"
    );
}
