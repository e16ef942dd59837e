//! The log manager: every partition log across several `log.dirs`.
//!
//! At start-up it locks each directory (`.lock`, an exclusive `flock`),
//! reads the checkpoint files, and opens all logs in parallel (one thread
//! per directory); the clean-shutdown marker `.kafka_cleanshutdown` decides
//! whether logs are recovered. Background work (flush, retention,
//! checkpointing, deleting old files and directories) runs when the owner
//! calls [`LogManager::tick`] with the current time, either from its own
//! loop or from the [`Scheduler`] thread this module provides: the crate
//! has no async runtime.
//!
//! A log whose lock is poisoned (a thread panicked while changing it) may
//! be half-changed, so the manager never trusts it again: it is left out of
//! flushes, retention, compaction and checkpoints (so its last checkpointed
//! offsets stay, or it has none and starts from offset 0 at the next open),
//! it is reported once at error level, and at shutdown the directory that
//! holds it gets no clean-shutdown marker, so the next start recovers it
//! (and re-validates everything after its recovery point). The manager's
//! own maps (logs, topic configs, schedule) are changed by single inserts,
//! removes and assignments and are reused after a panic.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use strom_clock::{Clock, Random, SeededRandom};

use crate::checkpoint::{
    OffsetCheckpointFile, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use crate::compaction::CleanOptions;
use crate::config::LogConfig;
use crate::error::{IoContext, ManagerError};
use crate::flusher::{Flusher, FlusherStats};
use crate::log::Log;
use crate::page_cache::{PageCacheSettings, PageCacheStats, WriteBehind};
use crate::recovery::LogOpenOptions;
use crate::topic_partition::{is_valid_topic_name, TopicPartition};

/// Marker file written at clean shutdown (Kafka's name).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Lock file held while the manager owns a directory.
pub const LOCK_FILE: &str = ".lock";
/// The compaction progress checkpoint in each log directory (Kafka's name).
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Suffix of partition directories waiting for deletion.
pub const DELETE_DIR_SUFFIX: &str = "-delete";

/// Broker-level settings of the log manager (Kafka's names in the docs).
#[derive(Debug, Clone)]
pub struct LogManagerConfig {
    /// `log.dirs`.
    pub log_dirs: Vec<PathBuf>,
    /// Topic defaults (`log.segment.bytes`, `log.retention.ms`, ...).
    pub default_config: LogConfig,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: i64,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub recovery_point_checkpoint_interval_ms: i64,
    /// `log.flush.start.offset.checkpoint.interval.ms`.
    pub log_start_offset_checkpoint_interval_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub high_watermark_checkpoint_interval_ms: i64,
    /// `file.delete.delay.ms` for deleted partition directories.
    pub directory_delete_delay_ms: i64,
    /// `log.cleaner.backoff.ms`: time between compaction passes.
    pub cleaner_backoff_ms: i64,
    /// `log.cleaner.enable`.
    pub cleaner_enable: bool,
    /// `num.recovery.threads.per.data.dir`: threads opening logs per directory.
    pub recovery_threads_per_data_dir: usize,
    /// Write-behind and drop-behind for every log (see [`crate::page_cache`];
    /// off by default).
    pub page_cache: PageCacheSettings,
    /// The broker's source of randomness, handed to every log it opens
    /// (the `segment.jitter.ms` draws).
    pub random: Arc<dyn Random>,
}

impl LogManagerConfig {
    /// Kafka's default intervals over `log_dirs`, drawing random numbers
    /// from a generator with the fixed seed 0 (see [`Self::with_random`]).
    pub fn new(log_dirs: Vec<PathBuf>, default_config: LogConfig) -> Self {
        LogManagerConfig {
            log_dirs,
            default_config,
            retention_check_interval_ms: 300_000,
            recovery_point_checkpoint_interval_ms: 60_000,
            log_start_offset_checkpoint_interval_ms: 60_000,
            high_watermark_checkpoint_interval_ms: 5_000,
            directory_delete_delay_ms: 60_000,
            cleaner_backoff_ms: 15_000,
            cleaner_enable: true,
            recovery_threads_per_data_dir: 1,
            page_cache: PageCacheSettings::default(),
            random: Arc::new(SeededRandom::new(0)),
        }
    }

    /// The same settings drawing from `random` (the broker's one source).
    pub fn with_random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }
}

/// A shared handle to one partition log.
pub type LogHandle = Arc<RwLock<Log>>;

#[derive(Debug)]
struct LogDirectory {
    path: PathBuf,
    _lock: File,
}

#[derive(Debug, Default)]
struct Schedule {
    next_retention_ms: i64,
    next_recovery_checkpoint_ms: i64,
    next_start_checkpoint_ms: i64,
    next_high_watermark_checkpoint_ms: i64,
    next_cleaning_ms: i64,
    pending_directory_deletes: Vec<(i64, PathBuf)>,
    /// `log.cleaner.backoff.ms` set while running (a dynamic broker
    /// config), in place of [`LogManagerConfig::cleaner_backoff_ms`].
    cleaner_backoff_ms: Option<i64>,
}

/// Every partition log of the broker.
#[derive(Debug)]
pub struct LogManager {
    config: LogManagerConfig,
    directories: Vec<LogDirectory>,
    logs: RwLock<BTreeMap<TopicPartition, (usize, LogHandle)>>,
    topic_configs: RwLock<BTreeMap<String, LogConfig>>,
    schedule: Mutex<Schedule>,
    /// Poisoned logs already reported (see the module docs).
    reported_poisoned: Mutex<std::collections::BTreeSet<TopicPartition>>,
    /// The page-cache thread, when [`LogManagerConfig::page_cache`] is on.
    page_cache: Option<Arc<WriteBehind>>,
    /// The thread that makes rolled segments durable (see [`crate::flusher`]).
    flusher: Arc<Flusher>,
    /// Told how long each `flush.ms` fsync took (the broker's flush metric).
    flush_observer: std::sync::OnceLock<FlushObserver>,
}

/// Told how long each `flush.ms` flush of a log took.
struct FlushObserver(Box<dyn Fn(std::time::Duration) + Send + Sync>);

impl std::fmt::Debug for FlushObserver {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("FlushObserver")
    }
}

fn lock_directory(path: &Path) -> Result<LogDirectory, ManagerError> {
    std::fs::create_dir_all(path).at(path)?;
    let lock_path = path.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .at(&lock_path)?;
    if lock.try_lock().is_err() {
        return Err(ManagerError::DirectoryLocked {
            path: path.to_path_buf(),
        });
    }
    Ok(LogDirectory {
        path: path.to_path_buf(),
        _lock: lock,
    })
}

/// The checkpointed offsets of one directory.
struct DirectoryCheckpoints {
    recovery_points: BTreeMap<TopicPartition, i64>,
    log_starts: BTreeMap<TopicPartition, i64>,
    high_watermarks: BTreeMap<TopicPartition, i64>,
    cleaner_offsets: BTreeMap<TopicPartition, i64>,
}

fn read_checkpoints(dir: &Path) -> Result<DirectoryCheckpoints, ManagerError> {
    // A damaged checkpoint only costs a longer recovery: treat it as empty.
    let read = |name: &str| {
        OffsetCheckpointFile::new(dir.join(name))
            .read()
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "ignoring unreadable checkpoint");
                BTreeMap::new()
            })
    };
    Ok(DirectoryCheckpoints {
        recovery_points: read(RECOVERY_POINT_CHECKPOINT),
        log_starts: read(LOG_START_OFFSET_CHECKPOINT),
        high_watermarks: read(REPLICATION_OFFSET_CHECKPOINT),
        cleaner_offsets: read(CLEANER_OFFSET_CHECKPOINT),
    })
}

type LoadedLogs = Vec<(TopicPartition, Log)>;

/// How to open the logs of one directory.
struct DirectoryLoad<'a> {
    configs: &'a BTreeMap<String, LogConfig>,
    default_config: &'a LogConfig,
    checkpoints: DirectoryCheckpoints,
    had_clean_shutdown: bool,
    now_ms: i64,
    random: &'a Arc<dyn Random>,
}

impl DirectoryLoad<'_> {
    /// Opens one partition log with its checkpointed offsets.
    fn open(&self, partition: &TopicPartition, path: &Path) -> Result<Log, ManagerError> {
        let checkpoints = &self.checkpoints;
        let config = self
            .configs
            .get(&partition.topic)
            .unwrap_or(self.default_config)
            .clone();
        let options = LogOpenOptions {
            log_start_offset: checkpoints.log_starts.get(partition).copied().unwrap_or(0),
            recovery_point: checkpoints
                .recovery_points
                .get(partition)
                .copied()
                .unwrap_or(0),
            had_clean_shutdown: self.had_clean_shutdown,
            now_ms: self.now_ms,
            random: Arc::clone(self.random),
        };
        let (mut log, report) =
            Log::open(path, config, options).map_err(|source| ManagerError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        if report.bytes_truncated > 0 {
            tracing::warn!(partition = %partition, bytes = report.bytes_truncated, "recovery truncated the log");
        }
        if let Some(high_watermark) = checkpoints.high_watermarks.get(partition) {
            log.update_high_watermark(*high_watermark);
        }
        if let Some(first_dirty) = checkpoints.cleaner_offsets.get(partition) {
            log.set_first_dirty_offset(*first_dirty);
        }
        Ok(log)
    }
}

/// Opens every partition log of one directory with `threads` threads
/// (`num.recovery.threads.per.data.dir`).
fn load_directory(
    dir: &Path,
    configs: &BTreeMap<String, LogConfig>,
    default_config: &LogConfig,
    threads: usize,
    now_ms: i64,
    random: &Arc<dyn Random>,
) -> Result<(LoadedLogs, Vec<PathBuf>), ManagerError> {
    let clean_marker = dir.join(CLEAN_SHUTDOWN_FILE);
    let load = DirectoryLoad {
        configs,
        default_config,
        checkpoints: read_checkpoints(dir)?,
        had_clean_shutdown: clean_marker.exists(),
        now_ms,
        random,
    };
    let mut partitions = Vec::new();
    let mut doomed = Vec::new();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(DELETE_DIR_SUFFIX) {
            doomed.push(path);
        } else if let Some(partition) = TopicPartition::from_directory_name(&name) {
            partitions.push((partition, path));
        }
    }
    let chunk = partitions.len().div_ceil(threads.max(1)).max(1);
    let results: Vec<Result<LoadedLogs, ManagerError>> = std::thread::scope(|scope| {
        let load = &load;
        let workers: Vec<_> = partitions
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(partition, path)| {
                            Ok((partition.clone(), load.open(partition, path)?))
                        })
                        .collect()
                })
            })
            .collect();
        join_all(workers)
    });
    let mut logs = Vec::with_capacity(partitions.len());
    for result in results {
        logs.extend(result?);
    }
    if load.had_clean_shutdown {
        std::fs::remove_file(&clean_marker).at(&clean_marker)?;
    }
    Ok((logs, doomed))
}

/// The results of scoped worker threads, in order; a worker's panic goes
/// on in the caller.
fn join_all<T>(workers: Vec<std::thread::ScopedJoinHandle<'_, T>>) -> Vec<T> {
    workers
        .into_iter()
        .map(|worker| {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .collect()
}

/// Loads every locked directory's logs, one thread per directory.
fn load_directories(
    directories: &[LogDirectory],
    config: &LogManagerConfig,
    topic_configs: &BTreeMap<String, LogConfig>,
    now_ms: i64,
) -> Vec<Result<(LoadedLogs, Vec<PathBuf>), ManagerError>> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = directories
            .iter()
            .map(|directory| {
                let defaults = &config.default_config;
                let threads = config.recovery_threads_per_data_dir;
                let random = &config.random;
                scope.spawn(move || {
                    load_directory(
                        &directory.path,
                        topic_configs,
                        defaults,
                        threads,
                        now_ms,
                        random,
                    )
                })
            })
            .collect();
        join_all(workers)
    })
}

impl LogManager {
    /// Locks the directories and opens every log in them, one thread per
    /// directory. `topic_configs` overrides the defaults per topic.
    pub fn open(
        config: LogManagerConfig,
        topic_configs: BTreeMap<String, LogConfig>,
        now_ms: i64,
    ) -> Result<LogManager, ManagerError> {
        if config.log_dirs.is_empty() {
            return Err(ManagerError::NoLogDirectory);
        }
        let directories = config
            .log_dirs
            .iter()
            .map(|path| lock_directory(path))
            .collect::<Result<Vec<_>, _>>()?;
        let started = std::time::Instant::now();
        let results = load_directories(&directories, &config, &topic_configs, now_ms);
        let page_cache = if config.page_cache.is_enabled() {
            Some(WriteBehind::start().map_err(|source| ManagerError::Thread {
                name: "strom-page-cache",
                source,
            })?)
        } else {
            None
        };
        let flusher = Flusher::start().map_err(|source| ManagerError::Thread {
            name: "strom-log-flush",
            source,
        })?;
        let mut logs = BTreeMap::new();
        let mut schedule = Schedule::default();
        for (index, result) in results.into_iter().enumerate() {
            let (loaded, doomed) = result?;
            for (partition, mut log) in loaded {
                log.set_flusher(Arc::clone(&flusher));
                if let Some(worker) = &page_cache {
                    log.set_page_cache(Arc::clone(worker), config.page_cache);
                }
                logs.insert(partition, (index, Arc::new(RwLock::new(log))));
            }
            schedule
                .pending_directory_deletes
                .extend(doomed.into_iter().map(|path| (now_ms, path)));
        }
        tracing::info!(
            logs = logs.len(),
            directories = directories.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded partition logs"
        );
        Ok(LogManager {
            config,
            directories,
            logs: RwLock::new(logs),
            topic_configs: RwLock::new(topic_configs),
            schedule: Mutex::new(schedule),
            reported_poisoned: Mutex::default(),
            page_cache,
            flusher,
            flush_observer: std::sync::OnceLock::new(),
        })
    }

    /// Calls `observer` with the duration of every flush that `flush.ms`
    /// makes due (the background flushes; the produce path times its own).
    /// Only the first observer set is kept.
    pub fn observe_flushes(&self, observer: impl Fn(std::time::Duration) + Send + Sync + 'static) {
        let _ = self.flush_observer.set(FlushObserver(Box::new(observer)));
    }

    fn logs_read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<TopicPartition, (usize, LogHandle)>> {
        // Single inserts and removes: reused after a panic (module docs).
        self.logs
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn logs_write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, BTreeMap<TopicPartition, (usize, LogHandle)>> {
        // Single inserts and removes: reused after a panic (module docs).
        self.logs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the time between compaction passes while running (the
    /// dynamic `log.cleaner.backoff.ms`); `None` goes back to the
    /// configured one. It applies from the next pass on.
    pub fn set_cleaner_backoff_ms(&self, backoff_ms: Option<i64>) {
        self.schedule().cleaner_backoff_ms = backoff_ms.map(|backoff_ms| backoff_ms.max(0));
    }

    /// The time between compaction passes in force.
    pub fn cleaner_backoff_ms(&self) -> i64 {
        self.schedule()
            .cleaner_backoff_ms
            .unwrap_or(self.config.cleaner_backoff_ms)
    }

    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        // Due times and a list of pending deletions, each changed by one
        // assignment or push: reused after a panic (module docs).
        self.schedule
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Logs, once per partition, the logs whose lock is poisoned; returns
    /// how many there are.
    pub fn report_poisoned_logs(&self) -> usize {
        let poisoned: Vec<TopicPartition> = self
            .logs_read()
            .iter()
            .filter(|(_, (_, log))| log.is_poisoned())
            .map(|(partition, _)| partition.clone())
            .collect();
        // A set of names, changed by single inserts: reused after a panic.
        let mut reported = self
            .reported_poisoned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for partition in &poisoned {
            if reported.insert(partition.clone()) {
                tracing::error!(%partition,
                    "a thread panicked holding this log's lock; it is no longer flushed, checkpointed or cleaned, and is recovered at the next start");
            }
        }
        poisoned.len()
    }

    /// What the page-cache thread has done; `None` when
    /// [`LogManagerConfig::page_cache`] is off.
    pub fn page_cache_stats(&self) -> Option<PageCacheStats> {
        self.page_cache.as_ref().map(|worker| worker.stats())
    }

    /// Waits until the page-cache thread has done every hint queued so far
    /// (at once when it is off).
    pub fn wait_for_page_cache(&self) {
        if let Some(worker) = &self.page_cache {
            worker.wait_idle();
        }
    }

    /// What the background flusher of rolled segments has done.
    pub fn flusher_stats(&self) -> FlusherStats {
        self.flusher.stats()
    }

    /// Waits until every roll flush queued so far is done.
    pub fn wait_for_flushes(&self) {
        self.flusher.wait_idle();
    }

    /// The log of `partition`, if it exists.
    pub fn get(&self, partition: &TopicPartition) -> Option<LogHandle> {
        self.logs_read()
            .get(partition)
            .map(|(_, log)| Arc::clone(log))
    }

    /// All partitions with a log.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.logs_read().keys().cloned().collect()
    }

    /// Sets (or replaces) a topic's configuration, for existing and future logs.
    pub fn set_topic_config(&self, topic: &str, config: LogConfig) {
        // Partitions sort by topic first: the topic's logs are one range,
        // so applying every topic's config visits each log once.
        let first = TopicPartition::new(topic.to_owned(), i32::MIN);
        for (partition, (_, log)) in self.logs_read().range(first..) {
            if partition.topic != topic {
                break;
            }
            if let Some(mut log) = write_log(log) {
                log.set_config(config.clone());
            }
        }
        // Single inserts: reused after a panic (module docs).
        self.topic_configs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(topic.to_owned(), config);
    }

    /// Returns the log of `partition`, creating it in the directory holding
    /// the fewest partitions.
    pub fn get_or_create(
        &self,
        partition: &TopicPartition,
        now_ms: i64,
    ) -> Result<LogHandle, ManagerError> {
        if !is_valid_topic_name(&partition.topic) || partition.partition < 0 {
            return Err(ManagerError::InvalidTopicName {
                topic: partition.topic.clone(),
            });
        }
        let mut logs = self.logs_write();
        if let Some((_, log)) = logs.get(partition) {
            return Ok(Arc::clone(log));
        }
        let index = self.emptiest_directory(&logs);
        let config = self
            .topic_configs
            // Single inserts: reused after a panic (module docs).
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&partition.topic)
            .cloned()
            .unwrap_or_else(|| self.config.default_config.clone());
        let path = self.directories[index]
            .path
            .join(partition.directory_name());
        let options = LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms,
            random: Arc::clone(&self.config.random),
        };
        let (mut log, _) =
            Log::open(&path, config, options).map_err(|source| ManagerError::Open {
                path: path.clone(),
                source,
            })?;
        if let Some(worker) = &self.page_cache {
            log.set_page_cache(Arc::clone(worker), self.config.page_cache);
        }
        log.set_flusher(Arc::clone(&self.flusher));
        crate::checkpoint::sync_directory(&self.directories[index].path)?;
        let handle = Arc::new(RwLock::new(log));
        logs.insert(partition.clone(), (index, Arc::clone(&handle)));
        Ok(handle)
    }

    /// The index of the directory holding the fewest logs (counting is
    /// skipped with one directory: creating many partitions stays linear).
    fn emptiest_directory(&self, logs: &BTreeMap<TopicPartition, (usize, LogHandle)>) -> usize {
        if self.directories.len() <= 1 {
            return 0;
        }
        let mut counts = vec![0usize; self.directories.len()];
        for (index, _) in logs.values() {
            if let Some(count) = counts.get_mut(*index) {
                *count += 1;
            }
        }
        (0..counts.len())
            .min_by_key(|index| counts[*index])
            .unwrap_or(0)
    }

    /// Removes a partition's log: its directory is renamed to
    /// `<topic>-<partition>.<time>-delete` at once and removed after the
    /// directory delete delay. Returns whether the log existed.
    pub fn delete(&self, partition: &TopicPartition, now_ms: i64) -> Result<bool, ManagerError> {
        let Some((index, log)) = self.logs_write().remove(partition) else {
            return Ok(false);
        };
        let from = self.directories[index]
            .path
            .join(partition.directory_name());
        drop(log);
        let target = self.directories[index].path.join(format!(
            "{}.{now_ms}{DELETE_DIR_SUFFIX}",
            partition.directory_name()
        ));
        std::fs::rename(&from, &target).at(&from)?;
        crate::checkpoint::sync_directory(&self.directories[index].path)?;
        self.schedule()
            .pending_directory_deletes
            .push((now_ms + self.config.directory_delete_delay_ms, target));
        Ok(true)
    }

    /// Runs the background work that is due at `now_ms`: per-log flush and
    /// file deletion, retention, checkpoints and directory deletion.
    pub fn tick(&self, now_ms: i64) -> Result<(), ManagerError> {
        let handles: Vec<LogHandle> = self
            .logs_read()
            .values()
            .map(|(_, log)| Arc::clone(log))
            .collect();
        // One failing log must not stop the others' background work: every
        // log is visited and the first error is returned at the end.
        let mut first_error: Option<ManagerError> = None;
        let mut note = |result: Result<(), ManagerError>| {
            if let Err(error) = result {
                tracing::error!(%error, "background work on a log failed");
                first_error.get_or_insert(error);
            }
        };
        self.report_poisoned_logs();
        for log in &handles {
            note(flush_by_time(log, now_ms).map(|took| {
                if let (Some(took), Some(observer)) = (took, self.flush_observer.get()) {
                    (observer.0)(took);
                }
            }));
            if let Some(mut log) = write_log(log) {
                note(log.delete_pending_files(now_ms).map_err(ManagerError::from));
            }
        }
        let mut schedule = self.schedule();
        if now_ms >= schedule.next_retention_ms {
            schedule.next_retention_ms = now_ms + self.config.retention_check_interval_ms;
            for log in handles.iter().filter_map(write_log) {
                let deleted = { log }.delete_old_segments(now_ms);
                note(deleted.map(|_| ()).map_err(ManagerError::from));
            }
        }
        if now_ms >= schedule.next_recovery_checkpoint_ms {
            schedule.next_recovery_checkpoint_ms =
                now_ms + self.config.recovery_point_checkpoint_interval_ms;
            note(self.checkpoint(RECOVERY_POINT_CHECKPOINT, |log| log.recovery_point()));
        }
        if now_ms >= schedule.next_start_checkpoint_ms {
            schedule.next_start_checkpoint_ms =
                now_ms + self.config.log_start_offset_checkpoint_interval_ms;
            note(self.checkpoint(LOG_START_OFFSET_CHECKPOINT, |log| log.log_start_offset()));
        }
        if now_ms >= schedule.next_high_watermark_checkpoint_ms {
            schedule.next_high_watermark_checkpoint_ms =
                now_ms + self.config.high_watermark_checkpoint_interval_ms;
            note(self.checkpoint(REPLICATION_OFFSET_CHECKPOINT, |log| log.high_watermark()));
        }
        if self.config.cleaner_enable && now_ms >= schedule.next_cleaning_ms {
            let backoff_ms = schedule
                .cleaner_backoff_ms
                .unwrap_or(self.config.cleaner_backoff_ms);
            schedule.next_cleaning_ms = now_ms + backoff_ms;
            note(self.clean_logs(&handles, now_ms));
        }
        let (due, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut schedule.pending_directory_deletes)
                .into_iter()
                .partition(|(delete_at_ms, _)| *delete_at_ms <= now_ms);
        schedule.pending_directory_deletes = waiting;
        for (_, path) in due {
            note(
                std::fs::remove_dir_all(&path)
                    .at(&path)
                    .map_err(ManagerError::from),
            );
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Runs one compaction pass on every compacted log that is dirty enough,
    /// then checkpoints the first dirty offsets.
    fn clean_logs(&self, handles: &[LogHandle], now_ms: i64) -> Result<(), ManagerError> {
        let mut cleaned_any = false;
        let mut first_error = None;
        for mut log in handles.iter().filter_map(write_log) {
            if log.config().cleanup_policy.compact {
                match log.clean(now_ms, &CleanOptions::default()) {
                    Ok(stats) => cleaned_any |= stats.is_some(),
                    Err(error) => {
                        tracing::error!(%error, partition = %log.topic_partition(), "compaction failed");
                        first_error.get_or_insert(error);
                    }
                }
            }
        }
        if let Some(error) = first_error {
            return Err(error.into());
        }
        if cleaned_any {
            self.checkpoint(CLEANER_OFFSET_CHECKPOINT, |log| log.first_dirty_offset())?;
        }
        Ok(())
    }

    /// Writes one checkpoint file per directory with `offset` of each log.
    pub fn checkpoint(&self, name: &str, offset: impl Fn(&Log) -> i64) -> Result<(), ManagerError> {
        let mut per_directory: Vec<BTreeMap<TopicPartition, i64>> =
            vec![BTreeMap::new(); self.directories.len()];
        for (partition, (index, log)) in self.logs_read().iter() {
            if let Some(log) = read_log(log) {
                per_directory[*index].insert(partition.clone(), offset(&log));
            }
        }
        for (directory, offsets) in self.directories.iter().zip(per_directory) {
            OffsetCheckpointFile::new(directory.path.join(name)).write(&offsets)?;
        }
        Ok(())
    }

    /// Flushes every log and writes every checkpoint (recovery points, log
    /// start offsets, high watermarks, cleaner offsets) through a shared
    /// manager: what a shutdown does when another handle to the manager is
    /// still alive. No clean-shutdown marker is written (the next start runs
    /// recovery, which finds nothing unflushed).
    pub fn flush_and_checkpoint(&self, now_ms: i64) -> Result<(), ManagerError> {
        let handles: Vec<LogHandle> = self
            .logs_read()
            .values()
            .map(|(_, log)| Arc::clone(log))
            .collect();
        for mut log in handles.iter().filter_map(write_log) {
            log.flush(now_ms)?;
        }
        self.checkpoint(RECOVERY_POINT_CHECKPOINT, |log| log.recovery_point())?;
        self.checkpoint(LOG_START_OFFSET_CHECKPOINT, |log| log.log_start_offset())?;
        self.checkpoint(REPLICATION_OFFSET_CHECKPOINT, |log| log.high_watermark())?;
        self.checkpoint(CLEANER_OFFSET_CHECKPOINT, |log| log.first_dirty_offset())?;
        Ok(())
    }

    /// Flushes and closes every log, writes all checkpoints and the
    /// clean-shutdown marker. The logs are closed by
    /// `num.recovery.threads.per.data.dir` threads per directory, as they
    /// are opened; a log with nothing unflushed costs no fsync (see
    /// [`Log::close`]).
    pub fn shutdown(self, now_ms: i64) -> Result<(), ManagerError> {
        let started = std::time::Instant::now();
        let logs: Vec<(TopicPartition, (usize, LogHandle))> =
            std::mem::take(&mut *self.logs_write())
                .into_iter()
                .collect();
        let count = logs.len();
        self.report_poisoned_logs();
        let threads = self.config.recovery_threads_per_data_dir.max(1) * self.directories.len();
        let results: Vec<Vec<Result<Closed, ManagerError>>> = std::thread::scope(|scope| {
            let workers: Vec<_> = split_evenly(logs, threads)
                .into_iter()
                .map(|part| {
                    scope.spawn(move || {
                        part.into_iter()
                            .map(|(partition, (index, handle))| {
                                close_log(partition, index, handle, now_ms)
                            })
                            .collect()
                    })
                })
                .collect();
            join_all(workers)
        });
        let mut closed: BTreeMap<TopicPartition, (usize, i64, i64, i64)> = BTreeMap::new();
        let mut unclean = vec![false; self.directories.len()];
        for result in results.into_iter().flatten() {
            match result? {
                Closed::Offsets(partition, offsets) => {
                    closed.insert(partition, offsets);
                }
                Closed::Poisoned(index) => unclean[index] = true,
            }
        }
        self.write_shutdown_files(&closed, &unclean)?;
        tracing::info!(
            logs = count,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "closed partition logs"
        );
        Ok(())
    }

    /// The checkpoints of the closed logs and, in each directory without
    /// a poisoned log, the clean-shutdown marker.
    fn write_shutdown_files(
        &self,
        closed: &BTreeMap<TopicPartition, (usize, i64, i64, i64)>,
        unclean: &[bool],
    ) -> Result<(), ManagerError> {
        for (directory_index, directory) in self.directories.iter().enumerate() {
            let select = |pick: fn(&(usize, i64, i64, i64)) -> i64| {
                closed
                    .iter()
                    .filter(|(_, entry)| entry.0 == directory_index)
                    .map(|(partition, entry)| (partition.clone(), pick(entry)))
                    .collect::<BTreeMap<_, _>>()
            };
            OffsetCheckpointFile::new(directory.path.join(RECOVERY_POINT_CHECKPOINT))
                .write(&select(|entry| entry.1))?;
            OffsetCheckpointFile::new(directory.path.join(LOG_START_OFFSET_CHECKPOINT))
                .write(&select(|entry| entry.2))?;
            OffsetCheckpointFile::new(directory.path.join(REPLICATION_OFFSET_CHECKPOINT))
                .write(&select(|entry| entry.3))?;
            if unclean.get(directory_index).copied().unwrap_or(true) {
                // A poisoned log: the next start must recover this directory.
                crate::checkpoint::sync_directory(&directory.path)?;
                continue;
            }
            let marker = directory.path.join(CLEAN_SHUTDOWN_FILE);
            File::create(&marker)
                .and_then(|file| file.sync_all())
                .at(&marker)?;
            crate::checkpoint::sync_directory(&directory.path)?;
        }
        Ok(())
    }
}

/// The `flush.ms` flush of one log, with the fsync done holding no lock on
/// it (appends to the partition go on meanwhile; see [`crate::flush`]).
/// Returns how long the fsync took, if one was due.
fn flush_by_time(
    log: &LogHandle,
    now_ms: i64,
) -> Result<Option<std::time::Duration>, ManagerError> {
    let ticket =
        read_log(log).and_then(|log| log.flush_ms_due(now_ms).then(|| log.prepare_flush()));
    let Some(ticket) = ticket else {
        return Ok(None);
    };
    // The fsync's duration for metrics, on the host's clock.
    let started = std::time::Instant::now();
    ticket.sync()?;
    let took = started.elapsed();
    if let Some(mut log) = write_log(log) {
        log.complete_flush(&ticket, now_ms);
    }
    Ok(Some(took))
}

/// The log for a change, or `None` when its lock is poisoned: such a log
/// is left alone (see the module docs).
fn write_log(log: &LogHandle) -> Option<std::sync::RwLockWriteGuard<'_, Log>> {
    log.write().ok()
}

/// The log for a read, or `None` when its lock is poisoned (as [`write_log`]).
fn read_log(log: &LogHandle) -> Option<std::sync::RwLockReadGuard<'_, Log>> {
    log.read().ok()
}

/// What closing one log left: its directory and offsets for the
/// checkpoints, or a poisoned log in a directory.
enum Closed {
    /// Directory index, recovery point, log start offset, high watermark.
    Offsets(TopicPartition, (usize, i64, i64, i64)),
    /// A poisoned log in the directory of this index.
    Poisoned(usize),
}

/// Closes one log at shutdown (flushing through the handle when someone
/// still holds it).
fn close_log(
    partition: TopicPartition,
    index: usize,
    handle: LogHandle,
    now_ms: i64,
) -> Result<Closed, ManagerError> {
    let log = match Arc::try_unwrap(handle) {
        Ok(lock) => match lock.into_inner() {
            Ok(log) => log,
            Err(_poisoned) => return Ok(Closed::Poisoned(index)),
        },
        Err(shared) => {
            // Someone still holds the handle: flush through it instead.
            let Some(mut log) = write_log(&shared) else {
                return Ok(Closed::Poisoned(index));
            };
            log.flush(now_ms)?;
            let offsets = (
                index,
                log.recovery_point(),
                log.log_start_offset(),
                log.high_watermark(),
            );
            return Ok(Closed::Offsets(partition, offsets));
        }
    };
    let offsets = (
        index,
        log.log_end_offset(),
        log.log_start_offset(),
        log.high_watermark(),
    );
    log.close(now_ms)?;
    Ok(Closed::Offsets(partition, offsets))
}

/// `items` in at most `parts` runs of nearly equal length, in order.
fn split_evenly<T>(items: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    let chunk = items.len().div_ceil(parts.max(1)).max(1);
    let mut runs = Vec::new();
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        runs.push(items.by_ref().take(chunk).collect());
    }
    runs
}

/// A thread that calls [`LogManager::tick`] every `period` with the clock's
/// time, until stopped or dropped.
#[derive(Debug)]
pub struct Scheduler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Scheduler {
    /// Starts the thread. Errors from `tick` are logged and retried next period.
    pub fn start(manager: Arc<LogManager>, clock: Arc<dyn Clock>, period: Duration) -> Scheduler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Acquire) {
                if let Err(error) = manager.tick(clock.wall_ms()) {
                    tracing::error!(%error, "log manager background work failed");
                }
                std::thread::park_timeout(period);
            }
        });
        Scheduler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.halt();
    }
}
