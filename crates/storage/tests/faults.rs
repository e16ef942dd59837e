//! Fault injection: through the file-backend seam (`FaultInjector`: torn
//! writes, failed writes, crashes that lose unflushed bytes) and by editing
//! files directly (flipped bytes, missing or damaged indexes). After each fault the log must
//! reopen, keep every flushed record before the damage, and never return a
//! corrupt batch (`read_all` checks every CRC).

use crate::common;

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{batch, open, partition_dir, read_all, small_config};
use strom_clock::SeededRandom;
use strom_storage::backend::FileBackend;
use strom_storage::error::AppendError;
use strom_storage::testing::FaultInjector;
use strom_storage::verification::TxnVerification;
use strom_storage::{Log, LogOpenOptions};

fn segment_files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|found| found == extension))
        .collect();
    files.sort();
    files
}

fn set_length(path: &Path, length: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_len(length)
        .expect("set_len");
}

#[test]
fn torn_write_at_the_tail_is_cut_at_the_last_whole_batch() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let mut log = open(&dir, &config, true, 0);
    for step in 0..30 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    log.flush(0).expect("flush");
    let flushed = read_all(&log, 0);
    let recovery_point = log.recovery_point();
    log.append_as_leader(batch(3, 99), 0, 0).expect("append");
    drop(log);
    let active = segment_files(&dir, "log").pop().expect("active segment");
    let length = std::fs::metadata(&active).expect("meta").len();
    set_length(&active, length - 17);

    let log = open(&dir, &config, false, recovery_point);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(read_all(&log, 0), flushed);
}

#[test]
fn lost_unflushed_bytes_replaced_by_zeros_are_removed() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let mut log = open(&dir, &config, true, 0);
    for step in 0..5 {
        log.append_as_leader(batch(1, step), 0, 0).expect("append");
    }
    log.flush(0).expect("flush");
    let flushed = read_all(&log, 0);
    let recovery_point = log.recovery_point();
    let active = segment_files(&dir, "log").pop().expect("active");
    let flushed_bytes = std::fs::metadata(&active).expect("meta").len();
    for step in 0..3 {
        log.append_as_leader(batch(1, step), 0, 0).expect("append");
    }
    drop(log);
    // The crash lost the unflushed appends; the file system left zeros.
    set_length(&active, flushed_bytes);
    set_length(&active, flushed_bytes + 300);

    let mut log = open(&dir, &config, false, recovery_point);
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(read_all(&log, 0), flushed);
    let next = log
        .append_as_leader(batch(1, 0), 0, 0)
        .expect("append after recovery");
    assert_eq!(next.first_offset, 5);
}

#[test]
fn flipped_byte_in_a_closed_segment_truncates_from_there_on_full_recovery() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let mut log = open(&dir, &config, true, 0);
    for step in 0..100 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    let before = read_all(&log, 0);
    drop(log);
    let segments = segment_files(&dir, "log");
    assert!(segments.len() >= 3);
    let damaged = &segments[1];
    let mut bytes = std::fs::read(damaged).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(damaged, &bytes).expect("write");

    // The recovery point is unknown (0): everything is re-validated.
    let log = open(&dir, &config, false, 0);
    let after = read_all(&log, 0);
    assert!(after.len() < before.len());
    assert_eq!(
        after[..],
        before[..after.len()],
        "every batch before the damage is kept"
    );
    let damaged_base: i64 = damaged
        .file_stem()
        .and_then(|stem| stem.to_str())
        .and_then(|stem| stem.parse().ok())
        .expect("base offset");
    assert!(log.log_end_offset() > damaged_base);
    assert_eq!(
        log.segments().last().map(|segment| segment.base_offset()),
        Some(damaged_base)
    );
}

#[test]
fn missing_truncated_or_wrong_indexes_are_rebuilt() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let config = small_config();
    let mut log = open(&dir, &config, true, 0);
    for step in 0..100 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    let before = read_all(&log, 0);
    log.close(0).expect("close");
    let indexes = segment_files(&dir, "index");
    let time_indexes = segment_files(&dir, "timeindex");
    std::fs::remove_file(&indexes[0]).expect("remove index");
    let length = std::fs::metadata(&indexes[1]).expect("meta").len();
    set_length(&indexes[1], length - 3);
    std::fs::write(&indexes[2], [0xffu8; 16]).expect("garbage index");
    std::fs::remove_file(&time_indexes[0]).expect("remove time index");

    let log = open(&dir, &config, true, 200);
    assert_eq!(read_all(&log, 0), before);
    for segment in log.segments().take(3) {
        assert!(
            !segment.offset_index().is_empty(),
            "index rebuilt for {}",
            segment.base_offset()
        );
        segment
            .offset_index()
            .sanity_check(segment.size_bytes())
            .expect("sane");
    }
    assert_eq!(read_all(&log, 37).first().map(|batch| batch.0), Some(36));
    assert!(log.offset_for_timestamp(50).is_some());
}

#[test]
fn leftover_deleted_and_tmp_files_are_removed_on_open() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("00000000000000000000.log.deleted"), b"x").expect("write");
    std::fs::write(dir.join("leader-epoch-checkpoint.tmp"), b"x").expect("write");
    std::fs::write(dir.join("00000000000000000077.index"), [0u8; 8]).expect("stray index");
    let log = open(&dir, &small_config(), false, 0);
    assert_eq!(log.log_end_offset(), 0);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(names
        .iter()
        .all(|name| !name.ends_with(".deleted") && !name.ends_with(".tmp")));
    assert!(!names.contains(&"00000000000000000077.index".to_owned()));
}

fn open_with(dir: &Path, injector: &Arc<FaultInjector>, clean: bool, recovery_point: i64) -> Log {
    open_configured(dir, injector, clean, recovery_point, small_config())
}

fn open_configured(
    dir: &Path,
    injector: &Arc<FaultInjector>,
    clean: bool,
    recovery_point: i64,
    config: strom_storage::LogConfig,
) -> Log {
    Log::open_with_backend(
        dir,
        config,
        LogOpenOptions {
            log_start_offset: 0,
            recovery_point,
            had_clean_shutdown: clean,
            now_ms: 0,
            random: Arc::new(SeededRandom::new(0)),
        },
        Arc::clone(injector) as Arc<dyn FileBackend>,
    )
    .expect("open")
    .0
}

#[test]
fn a_crash_loses_unflushed_appends_and_keeps_every_flushed_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let mut log = open_with(&dir, &injector, true, 0);
    for step in 0..50 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
        if step % 10 == 9 {
            log.flush(0).expect("flush");
        }
    }
    for step in 0..5 {
        log.append_as_leader(batch(2, step), 0, 0)
            .expect("unflushed append");
    }
    let recovery_point = log.recovery_point();
    // Flushed up to 100; a roll during the unflushed appends may flush more.
    assert!((100..110).contains(&recovery_point));
    drop(log);
    injector.crash(200).expect("crash");

    let mut log = open_with(&dir, &injector, false, recovery_point);
    assert_eq!(
        log.log_end_offset(),
        recovery_point,
        "flushed records kept, lost ones gone"
    );
    assert_eq!(read_all(&log, 0).len() as i64, recovery_point / 2);
    let next = log
        .append_as_leader(batch(1, 0), 0, 0)
        .expect("append after crash");
    assert_eq!(next.first_offset, recovery_point);
}

#[test]
fn a_torn_append_fails_without_moving_the_log_end() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let mut log = open_with(&dir, &injector, true, 0);
    for step in 0..5 {
        log.append_as_leader(batch(2, step), 0, 0).expect("append");
    }
    injector.tear_next_write(40);
    assert!(matches!(
        log.append_as_leader(batch(2, 9), 0, 0),
        Err(AppendError::Io(_))
    ));
    assert_eq!(log.log_end_offset(), 10);
    injector.fail_writes(true);
    assert!(log.append_as_leader(batch(2, 9), 0, 0).is_err());
    injector.fail_writes(false);
    assert_eq!(read_all(&log, 0).len(), 5, "the torn bytes are never read");
    let info = log
        .append_as_leader(batch(1, 9), 0, 0)
        .expect("append after the failure");
    assert_eq!(info.first_offset, 10);
    assert_eq!(read_all(&log, 0).len(), 6);

    // Torn again, then a crash: the reopened log ends at the last whole batch.
    log.flush(0).expect("flush");
    injector.tear_next_write(70);
    assert!(log.append_as_leader(batch(3, 9), 0, 0).is_err());
    let recovery_point = log.recovery_point();
    drop(log);
    injector.crash(0).expect("crash");
    let log = open_with(&dir, &injector, false, recovery_point);
    assert_eq!(log.log_end_offset(), 11);
    assert_eq!(read_all(&log, 0).len(), 6);
}

#[test]
fn a_clean_close_after_a_torn_append_drops_the_torn_bytes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let mut log = open_with(&dir, &injector, true, 0);
    log.append_as_leader(batch(2, 0), 0, 0).expect("append");
    injector.tear_next_write(50);
    assert!(log.append_as_leader(batch(2, 0), 0, 0).is_err());
    log.close(0).expect("close");
    let log = open_with(&dir, &injector, true, 2);
    assert_eq!(log.log_end_offset(), 2);
    let active = segment_files(&dir, "log").pop().expect("segment");
    assert_eq!(
        std::fs::metadata(active).expect("meta").len(),
        log.size_bytes()
    );
}

#[test]
fn a_deferred_flush_is_durable_once_its_ticket_is_synced_and_not_before() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let config = strom_storage::LogConfig {
        flush_messages: Some(4),
        ..small_config()
    };
    let mut log = open_configured(&dir, &injector, true, 0, config.clone());
    log.append_as_leader_deferring_flush(batch(2, 0), 0, 0, TxnVerification::Unchecked)
        .expect("append");
    assert!(!log.flush_due(), "2 of 4 messages");
    log.append_as_leader_deferring_flush(batch(2, 1), 0, 0, TxnVerification::Unchecked)
        .expect("append");
    assert!(log.flush_due());
    assert_eq!(log.recovery_point(), 0, "nothing flushed inline");
    let ticket = log.prepare_flush();
    assert_eq!(ticket.flushed_to(), 4);
    // An append while the ticket syncs is not covered by it.
    log.append_as_leader_deferring_flush(batch(2, 2), 0, 0, TxnVerification::Unchecked)
        .expect("append");
    ticket.sync().expect("sync");
    log.complete_flush(&ticket, 5);
    assert_eq!(log.recovery_point(), 4);
    assert!(
        !log.flush_due(),
        "the two later messages are below the limit"
    );
    // Written after the sync, and a ticket for it prepared but never synced.
    log.append_as_leader_deferring_flush(batch(2, 3), 0, 0, TxnVerification::Unchecked)
        .expect("append");
    let _unsynced = log.prepare_flush();
    drop(log);
    injector.crash(0).expect("crash");
    let log = open_configured(&dir, &injector, false, 4, config);
    // The fsync also covered the append made before it (offsets 4 and 5),
    // though the ticket only claimed offsets below 4; the last one is lost.
    assert_eq!(
        log.log_end_offset(),
        6,
        "synced records kept, the rest lost"
    );
    assert_eq!(read_all(&log, 0).len(), 3);
}

#[test]
fn append_as_leader_still_flushes_inline_when_due() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = partition_dir(root.path());
    let injector = Arc::new(FaultInjector::new());
    let config = strom_storage::LogConfig {
        flush_messages: Some(1),
        ..small_config()
    };
    let mut log = open_configured(&dir, &injector, true, 0, config);
    log.append_as_leader(batch(3, 0), 0, 0).expect("append");
    assert_eq!(log.recovery_point(), 3);
    assert!(!log.flush_due());
}
