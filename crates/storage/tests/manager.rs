//! Log manager: directories, locks, checkpoints, clean shutdown, background ticks.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{batch, small_config};
use strom_clock::ManualClock;
use strom_storage::checkpoint::{OffsetCheckpointFile, RECOVERY_POINT_CHECKPOINT};
use strom_storage::error::ManagerError;
use strom_storage::manager::{Scheduler, CLEAN_SHUTDOWN_FILE};
use strom_storage::{LogManager, LogManagerConfig, TopicPartition};

fn manager_config(dirs: &[std::path::PathBuf]) -> LogManagerConfig {
    let mut config = LogManagerConfig::new(dirs.to_vec(), small_config());
    config.directory_delete_delay_ms = 0;
    config.recovery_threads_per_data_dir = 2;
    config
}

#[test]
fn logs_spread_over_directories_and_survive_a_clean_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("a"), root.path().join("b")];
    let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("open");
    for partition in 0..4 {
        let log = manager
            .get_or_create(&TopicPartition::new("orders", partition), 0)
            .expect("create");
        let mut log = log.write().expect("lock");
        for _ in 0..=partition {
            log.append_as_leader(batch(2, 0), 0, 0).expect("append");
        }
    }
    for dir in &dirs {
        let partitions = std::fs::read_dir(dir)
            .expect("dir")
            .filter(|entry| entry.as_ref().is_ok_and(|entry| entry.path().is_dir()))
            .count();
        assert_eq!(partitions, 2, "balanced over directories");
    }
    // A second manager cannot take the same directories.
    assert!(matches!(
        LogManager::open(manager_config(&dirs), BTreeMap::new(), 0),
        Err(ManagerError::DirectoryLocked { .. })
    ));
    manager.shutdown(0).expect("shutdown");
    for dir in &dirs {
        assert!(dir.join(CLEAN_SHUTDOWN_FILE).exists());
        let recovery_points = OffsetCheckpointFile::new(dir.join(RECOVERY_POINT_CHECKPOINT))
            .read()
            .expect("checkpoint");
        assert_eq!(recovery_points.len(), 2);
    }
    let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("reopen");
    assert!(
        !dirs[0].join(CLEAN_SHUTDOWN_FILE).exists(),
        "marker consumed"
    );
    for partition in 0..4 {
        let log = manager
            .get(&TopicPartition::new("orders", partition))
            .expect("log");
        assert_eq!(
            log.read().expect("lock").log_end_offset(),
            2 * i64::from(partition + 1)
        );
    }
}

#[test]
fn unclean_restart_recovers_from_checkpointed_recovery_points() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("logs")];
    let partition = TopicPartition::new("events", 0);
    {
        let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("open");
        let log = manager.get_or_create(&partition, 0).expect("create");
        for _ in 0..10 {
            log.write()
                .expect("lock")
                .append_as_leader(batch(1, 0), 0, 0)
                .expect("append");
        }
        log.write().expect("lock").flush(0).expect("flush");
        manager.tick(0).expect("tick writes checkpoints");
        // Dropped without shutdown: a crash.
    }
    let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("reopen");
    let log = manager.get(&partition).expect("log");
    let log = log.read().expect("lock");
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(log.recovery_point(), 10);
}

#[test]
fn tick_applies_retention_and_deleting_a_partition_removes_its_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("logs")];
    let mut topic_config = small_config();
    topic_config.retention_ms = Some(1000);
    let mut topics = BTreeMap::new();
    topics.insert("short".to_owned(), topic_config);
    let manager = Arc::new(LogManager::open(manager_config(&dirs), topics, 0).expect("open"));
    let partition = TopicPartition::new("short", 3);
    let log = manager.get_or_create(&partition, 0).expect("create");
    for step in 0..100 {
        log.write()
            .expect("lock")
            .append_as_leader(batch(2, step), 0, 0)
            .expect("append");
    }
    let segments_before = log.read().expect("lock").segment_count();
    assert!(segments_before > 1);
    let clock = Arc::new(ManualClock::new(10_000));
    let scheduler = Scheduler::start(Arc::clone(&manager), clock, Duration::from_millis(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while log.read().expect("lock").segment_count() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    scheduler.stop();
    assert_eq!(log.read().expect("lock").segment_count(), 1);
    let partition_dir = log.read().expect("lock").dir().to_path_buf();
    drop(log);
    assert!(manager.delete(&partition, 20_000).expect("delete"));
    assert!(!partition_dir.exists());
    assert!(manager.get(&partition).is_none());
    manager.tick(20_000).expect("tick");
    let leftovers = std::fs::read_dir(&dirs[0])
        .expect("dir")
        .filter(|entry| entry.as_ref().is_ok_and(|entry| entry.path().is_dir()))
        .count();
    assert_eq!(leftovers, 0, "deleted directory removed");
}

#[test]
fn flush_ms_flushes_are_timed_for_the_observer() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("logs")];
    let mut topic_config = small_config();
    topic_config.flush_ms = Some(100);
    let topics = BTreeMap::from([("timed".to_owned(), topic_config)]);
    let manager = LogManager::open(manager_config(&dirs), topics, 0).expect("open");
    let flushes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&flushes);
    manager.observe_flushes(move |took| seen.lock().expect("lock").push(took));
    let log = manager
        .get_or_create(&TopicPartition::new("timed", 0), 0)
        .expect("create");
    log.write()
        .expect("lock")
        .append_as_leader(batch(2, 0), 0, 0)
        .expect("append");
    manager.tick(50).expect("tick");
    assert!(
        flushes.lock().expect("lock").is_empty(),
        "not due before 100 ms"
    );
    manager.tick(150).expect("tick");
    assert_eq!(flushes.lock().expect("lock").len(), 1, "one flush, timed");
    assert_eq!(log.read().expect("lock").recovery_point(), 2);
    manager.tick(300).expect("tick");
    assert_eq!(
        flushes.lock().expect("lock").len(),
        1,
        "nothing new to flush"
    );
}

#[test]
fn invalid_topic_names_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("logs")];
    let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("open");
    assert!(matches!(
        manager.get_or_create(&TopicPartition::new("../escape", 0), 0),
        Err(ManagerError::InvalidTopicName { .. })
    ));
}

#[test]
fn tick_compacts_compacted_topics_and_checkpoints_the_cleaner_offset() {
    use strom_storage::config::CleanupPolicy;
    use strom_storage::manager::CLEANER_OFFSET_CHECKPOINT;
    use strom_storage::testing::{keyed_batch, BatchSpec, TestRecord};

    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("logs")];
    let mut compacted = small_config();
    compacted.cleanup_policy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    let mut topics = BTreeMap::new();
    topics.insert("state".to_owned(), compacted);
    let manager = LogManager::open(manager_config(&dirs), topics, 0).expect("open");
    let partition = TopicPartition::new("state", 0);
    let log = manager.get_or_create(&partition, 0).expect("create");
    {
        let mut log = log.write().expect("lock");
        for round in 0..40 {
            let record = TestRecord {
                key: Some(vec![b'k', (round % 4) as u8]),
                value: Some(vec![round as u8; 60]),
            };
            log.append_as_leader(keyed_batch(&BatchSpec::default(), &[record]), 0, 0)
                .expect("append");
        }
        log.roll(0).expect("roll");
        let end = log.log_end_offset();
        log.update_high_watermark(end);
    }
    let size_before = log.read().expect("lock").size_bytes();
    manager.tick(1_000).expect("tick");
    assert!(
        log.read().expect("lock").size_bytes() < size_before,
        "compacted"
    );
    let checkpoint = OffsetCheckpointFile::new(dirs[0].join(CLEANER_OFFSET_CHECKPOINT))
        .read()
        .expect("cleaner checkpoint");
    assert_eq!(checkpoint.get(&partition).copied(), Some(40));
}

#[test]
fn a_log_poisoned_by_a_panic_is_not_checkpointed_and_its_directory_is_recovered() {
    let root = tempfile::tempdir().expect("tempdir");
    let dirs = vec![root.path().join("a"), root.path().join("b")];
    let manager = LogManager::open(manager_config(&dirs), BTreeMap::new(), 0).expect("open");
    // One partition per directory.
    let healthy = manager
        .get_or_create(&TopicPartition::new("healthy", 0), 0)
        .expect("create");
    let broken = manager
        .get_or_create(&TopicPartition::new("broken", 0), 0)
        .expect("create");
    for log in [&healthy, &broken] {
        let mut log = log.write().expect("lock");
        log.append_as_leader(batch(2, 0), 0, 0).expect("append");
        log.flush(0).expect("flush");
    }
    let handle = Arc::clone(&broken);
    let panicked = std::thread::spawn(move || {
        let _guard = handle.write().expect("lock");
        panic!("injected panic while changing the log");
    })
    .join();
    assert!(panicked.is_err());
    assert!(broken.is_poisoned());
    assert_eq!(manager.report_poisoned_logs(), 1);
    manager.tick(0).expect("tick");
    manager
        .checkpoint(RECOVERY_POINT_CHECKPOINT, |log| log.recovery_point())
        .expect("checkpoint");
    let checkpointed: Vec<TopicPartition> = dirs
        .iter()
        .flat_map(|dir| {
            OffsetCheckpointFile::new(dir.join(RECOVERY_POINT_CHECKPOINT))
                .read()
                .expect("checkpoint")
                .into_keys()
        })
        .collect();
    assert_eq!(checkpointed, vec![TopicPartition::new("healthy", 0)]);
    drop((healthy, broken));
    manager.shutdown(0).expect("shutdown");
    let markers: Vec<bool> = dirs
        .iter()
        .map(|dir| dir.join(CLEAN_SHUTDOWN_FILE).exists())
        .collect();
    assert_eq!(
        markers.iter().filter(|marker| **marker).count(),
        1,
        "the directory of the poisoned log has no clean-shutdown marker: {markers:?}"
    );
}

#[test]
fn the_cleaner_backoff_can_change_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = manager_config(&[dir.path().to_owned()]);
    config.cleaner_backoff_ms = 15_000;
    let manager = LogManager::open(config, BTreeMap::new(), 0).unwrap();
    assert_eq!(manager.cleaner_backoff_ms(), 15_000);
    manager.set_cleaner_backoff_ms(Some(250));
    assert_eq!(manager.cleaner_backoff_ms(), 250);
    manager.set_cleaner_backoff_ms(Some(-5));
    assert_eq!(manager.cleaner_backoff_ms(), 0, "never negative");
    manager.set_cleaner_backoff_ms(None);
    assert_eq!(
        manager.cleaner_backoff_ms(),
        15_000,
        "back to the configured one"
    );
}
