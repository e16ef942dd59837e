//! Tiered storage (KIP-405) in the broker: the settings
//! (`remote.log.storage.system.enable`, `remote.log.manager.*`,
//! `rsm.config.*`), the background task that copies and expires remote
//! segments of the partitions led here, and the remote side of Fetch and
//! ListOffsets (records and timestamps below the local log start).
//!
//! The storage crate owns the remote tier ([`RemoteLogManager`]); this
//! module only wires it to the broker's runtime and replicas.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strom_storage::error::{RemoteReadError, RemoteStorageError};
use strom_storage::remote::{
    ObjectStoreMetadata, ObjectStoreStorage, RemoteLogManager, RemoteLogManagerConfig,
    RemoteStorageConfig,
};
use tracing::{debug, warn};

use crate::replica_manager::ReplicaManager;

/// Kafka's `remote.log.manager.task.interval.ms` default.
const TASK_INTERVAL_MS_DEFAULT: u64 = 30_000;

/// The broker's tiered storage settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TieredSettings {
    /// `remote.log.manager.task.interval.ms`: how often segments are copied and expired.
    pub task_interval: Duration,
    /// The remote store (`rsm.config.*`).
    pub storage: RemoteStorageConfig,
    /// The manager's copy and cache settings (`remote.log.manager.*`).
    pub manager: RemoteLogManagerConfig,
}

/// Whether `remote.log.storage.system.enable` is set in `properties`.
pub fn system_enabled(properties: &BTreeMap<String, String>) -> bool {
    properties
        .get("remote.log.storage.system.enable")
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

fn number(
    properties: &BTreeMap<String, String>,
    key: &str,
) -> Result<Option<i64>, RemoteStorageError> {
    properties
        .get(key)
        .map(|value| {
            value
                .trim()
                .parse::<i64>()
                .map_err(|_| RemoteStorageError::Config {
                    key: key.to_owned(),
                    problem: format!("{value} is not an integer"),
                })
        })
        .transpose()
}

/// Parses the settings, or `None` when tiered storage is off
/// (`remote.log.storage.system.enable` is not `true`). `data_dir` holds the
/// default remote directory and the chunk cache.
pub fn settings(
    properties: &BTreeMap<String, String>,
    data_dir: &Path,
) -> Result<Option<TieredSettings>, RemoteStorageError> {
    if !system_enabled(properties) {
        return Ok(None);
    }
    let storage =
        RemoteStorageConfig::from_properties(properties, &data_dir.join("remote-storage"))?;
    let mut manager = RemoteLogManagerConfig::new(data_dir.join("remote-log-cache"));
    manager.copy_max_bytes_per_second =
        number(properties, "remote.log.manager.copy.max.bytes.per.second")?
            .filter(|rate| *rate > 0 && *rate != i64::MAX)
            .map(|rate| rate as u64);
    if let Some(size) = number(properties, "remote.log.manager.copier.thread.pool.size")? {
        manager.copy_concurrency = size.clamp(1, 1024) as usize;
    }
    if let Some(bytes) = number(properties, "remote.log.index.file.cache.total.size.bytes")? {
        manager.cache_max_bytes = bytes.max(1) as u64;
    }
    let interval_ms = number(properties, "remote.log.manager.task.interval.ms")?
        .map_or(TASK_INTERVAL_MS_DEFAULT, |ms| ms.max(1) as u64);
    Ok(Some(TieredSettings {
        task_interval: Duration::from_millis(interval_ms),
        storage,
        manager,
    }))
}

/// Opens the remote store and the manager over it, paced by tokio's timer.
pub fn open(settings: &TieredSettings) -> Result<Arc<RemoteLogManager>, RemoteStorageError> {
    let storage = ObjectStoreStorage::open(&settings.storage)?;
    let metadata = Arc::new(ObjectStoreMetadata::new(storage.clone()));
    let manager = RemoteLogManager::new(Arc::new(storage), metadata, settings.manager.clone())?
        .with_sleep(Arc::new(|duration| Box::pin(tokio::time::sleep(duration))));
    Ok(Arc::new(manager))
}

/// Every `interval`: copies and expires the remote segments of tiered
/// partitions led here; for those followed here, learns from the metadata
/// how far the leader copied (so local retention may delete there too).
pub async fn run(
    replicas: Arc<ReplicaManager>,
    manager: Arc<RemoteLogManager>,
    interval: Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        run_once(&replicas, &manager).await;
    }
}

/// One pass of [`run`].
pub async fn run_once(replicas: &ReplicaManager, manager: &RemoteLogManager) {
    let mut led = Vec::new();
    let mut followed = Vec::new();
    for replica in replicas.hosted() {
        let Some(log) = replicas.logs().get(&replica.topic_partition) else {
            continue;
        };
        let tiered = log
            .read()
            .map(|log| log.config().remote_storage_enable)
            .unwrap_or(false);
        match (tiered, replica.is_leader()) {
            (false, _) => {}
            (true, true) => led.push(log),
            (true, false) => followed.push(log),
        }
    }
    for (partition, error) in manager.run_once(led, replicas.now_ms()).await {
        warn!(%partition, %error, "tiered storage: copy or remote retention failed");
    }
    for log in followed {
        if let Err(error) = manager.follow(&log).await {
            debug!(%error, "tiered storage: cannot read remote metadata");
        }
    }
}

/// The remote tier's counters and the copy lag of the partitions led here.
pub fn counts(
    replicas: &ReplicaManager,
    manager: &RemoteLogManager,
) -> strom_observability::view::RemoteStorageCounts {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = manager.stats();
    let mut copy_lag_bytes = 0;
    for replica in replicas
        .hosted()
        .iter()
        .filter(|replica| replica.is_leader())
    {
        if let Some(log) = replicas.logs().get(&replica.topic_partition) {
            if let Ok(log) = log.read() {
                copy_lag_bytes += copy_lag(&log);
            }
        }
    }
    strom_observability::view::RemoteStorageCounts {
        bytes_copied: stats.bytes_copied.load(Relaxed),
        bytes_fetched: stats.bytes_fetched.load(Relaxed),
        copy_errors: stats.copy_errors.load(Relaxed),
        fetch_errors: stats.fetch_errors.load(Relaxed),
        segments_deleted: stats.segments_deleted.load(Relaxed),
        copy_lag_bytes,
    }
}

/// Bytes of a tiered log's closed segments that are not remote yet.
fn copy_lag(log: &strom_storage::Log) -> u64 {
    if !log.config().remote_storage_enable {
        return 0;
    }
    let copied = log.remote_copied_offset();
    let closed = log.segment_count().saturating_sub(1);
    log.segments()
        .take(closed)
        .filter(|segment| segment.next_offset() > copied)
        .map(|segment| segment.size_bytes())
        .sum()
}

/// The Kafka error of a failed remote read (for that partition only).
pub fn read_error_code(error: &RemoteReadError) -> strom_protocol::error_code::ErrorCode {
    use strom_protocol::error_code::ErrorCode;
    match error {
        RemoteReadError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        RemoteReadError::Storage(_) | RemoteReadError::Corrupt { .. } => {
            ErrorCode::KafkaStorageError
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn off_unless_the_system_flag_is_set() {
        let dir = Path::new("/data");
        assert_eq!(settings(&properties(&[]), dir).expect("parse"), None);
        let off = properties(&[("remote.log.storage.system.enable", "false")]);
        assert_eq!(settings(&off, dir).expect("parse"), None);
    }

    #[test]
    fn parses_kafka_names() {
        let parsed = settings(
            &properties(&[
                ("remote.log.storage.system.enable", "true"),
                ("remote.log.manager.task.interval.ms", "500"),
                ("remote.log.manager.copy.max.bytes.per.second", "1048576"),
                ("rsm.config.storage.backend", "s3"),
                ("rsm.config.s3.bucket.name", "tiers"),
                ("rsm.config.s3.endpoint.url", "http://127.0.0.1:9000"),
            ]),
            Path::new("/data"),
        )
        .expect("parse")
        .expect("enabled");
        assert_eq!(parsed.task_interval, Duration::from_millis(500));
        assert_eq!(parsed.manager.copy_max_bytes_per_second, Some(1_048_576));
        assert!(matches!(
            parsed.storage,
            RemoteStorageConfig::S3 { ref bucket, ref endpoint, path_style: true, .. }
                if bucket == "tiers" && endpoint.as_deref() == Some("http://127.0.0.1:9000")
        ));
        let local = settings(
            &properties(&[("remote.log.storage.system.enable", "true")]),
            Path::new("/data"),
        )
        .expect("parse")
        .expect("enabled");
        assert_eq!(
            local.storage,
            RemoteStorageConfig::LocalDirectory {
                dir: Path::new("/data/remote-storage").to_owned(),
                prefix: String::new()
            }
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let bad = [
            ("remote.log.manager.task.interval.ms", "soon"),
            ("rsm.config.storage.backend", "tape"),
            ("rsm.config.s3.path.style.access.enabled", "maybe"),
        ];
        for (key, value) in bad {
            let mut map = properties(&[("remote.log.storage.system.enable", "true"), (key, value)]);
            if key.starts_with("rsm.config.s3") {
                map.insert("rsm.config.storage.backend".to_owned(), "s3".to_owned());
                map.insert("rsm.config.s3.bucket.name".to_owned(), "b".to_owned());
            }
            assert!(settings(&map, Path::new("/data")).is_err(), "{key}={value}");
        }
        let no_bucket = properties(&[
            ("remote.log.storage.system.enable", "true"),
            ("rsm.config.storage.backend", "s3"),
        ]);
        assert!(settings(&no_bucket, Path::new("/data")).is_err());
    }
}
