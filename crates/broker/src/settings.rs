//! What the broker derives from its configuration for the parts it starts:
//! where the metadata lives, the data directories, the controller's
//! defaults, the log manager's settings, the follower fetch settings and
//! the heartbeat interval.

use std::time::Duration;

use strom_controller::controller::ControllerConfig;
use strom_replication::FetcherConfig;
use strom_storage::page_cache::PageCacheSettings;
use strom_storage::{LogConfig, LogManagerConfig};
use tracing::warn;

use crate::config::BrokerConfig;
use crate::start_error::StartError;

/// The directory (inside the first log directory) of the embedded
/// controller's metadata log. Its name has no `-N` suffix, so the log manager
/// never mistakes it for a partition.
pub const METADATA_DIR: &str = "strom-metadata";

/// The directory (inside the first log directory) of a cluster node's
/// metadata quorum: its Raft log, vote and snapshot.
pub const METADATA_QUORUM_DIR: &str = "strom-metadata-quorum";

/// How often a single-node broker heartbeats to its embedded controller
/// (in a cluster: `broker.heartbeat.interval.ms`).
pub(crate) const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);

/// How often this broker heartbeats to the controller.
pub(crate) fn heartbeat_interval(config: &BrokerConfig) -> Duration {
    config
        .cluster
        .as_ref()
        .map_or(HEARTBEAT_INTERVAL, |cluster| cluster.heartbeat_interval)
}

/// Creates every `log.dirs` directory that does not exist yet.
pub(crate) fn create_log_dirs(config: &BrokerConfig) -> Result<(), StartError> {
    for dir in &config.log_dirs {
        std::fs::create_dir_all(dir).map_err(|source| StartError::CreateDirectory {
            path: dir.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The controller's settings taken from the broker's: the defaults of new
/// topics and the cluster default of `unclean.leader.election.enable`
/// (a topic's own setting overrides it).
pub(crate) fn controller_settings(config: &BrokerConfig) -> ControllerConfig {
    ControllerConfig {
        default_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        unclean_leader_election_enable: default_log_config(config).unclean_leader_election_enable,
        ..ControllerConfig::default()
    }
}

/// The broker's topic defaults as a log configuration (Kafka's defaults
/// if they do not parse).
pub(crate) fn default_log_config(config: &BrokerConfig) -> LogConfig {
    match LogConfig::from_properties(config.topic_defaults()) {
        Ok(parsed) => parsed.config,
        Err(error) => {
            warn!(%error, "invalid broker log defaults; using Kafka's");
            LogConfig::default()
        }
    }
}

/// The log manager's settings from the broker's `log.*` keys.
pub(crate) fn log_manager_config(config: &BrokerConfig, defaults: LogConfig) -> LogManagerConfig {
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    // Kafka deletes a removed partition's directory after the broker's
    // default `file.delete.delay.ms` (`log.segment.delete.delay.ms`).
    let directory_delete_delay_ms = defaults.file_delete_delay_ms;
    let mut manager = LogManagerConfig::new(config.log_dirs.clone(), defaults);
    manager.retention_check_interval_ms = millis(config.log_retention_check_interval);
    manager.recovery_point_checkpoint_interval_ms =
        millis(config.log_flush_offset_checkpoint_interval);
    manager.log_start_offset_checkpoint_interval_ms =
        millis(config.log_flush_start_offset_checkpoint_interval);
    manager.high_watermark_checkpoint_interval_ms =
        millis(config.replica_high_watermark_checkpoint_interval);
    manager.directory_delete_delay_ms = directory_delete_delay_ms;
    manager.cleaner_enable = config.log_cleaner_enable;
    manager.cleaner_backoff_ms = millis(config.log_cleaner_backoff);
    manager.recovery_threads_per_data_dir = config.num_recovery_threads_per_data_dir;
    manager.page_cache = PageCacheSettings {
        writeback_bytes: config.log_writeback_interval_bytes,
        retain_bytes: config.log_page_cache_retain_bytes,
    };
    manager
}

/// The follower fetch settings (`replica.fetch.*`).
pub fn replica_fetcher_config(config: &BrokerConfig) -> FetcherConfig {
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    let mut fetcher = FetcherConfig::new(config.node_id);
    fetcher.partition_max_bytes = config.replica_fetch_max_bytes;
    fetcher.response_max_bytes = config.replica_fetch_response_max_bytes;
    fetcher.max_wait_ms = i32::try_from(millis(config.replica_fetch_wait_max)).unwrap_or(i32::MAX);
    fetcher.min_bytes = config.replica_fetch_min_bytes;
    fetcher.backoff_ms = millis(config.replica_fetch_backoff);
    fetcher
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn manager_config(pairs: &[(&str, &str)]) -> LogManagerConfig {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let (config, _) = BrokerConfig::from_map(&map).expect("valid config");
        let defaults = default_log_config(&config);
        log_manager_config(&config, defaults)
    }

    fn broker_config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        BrokerConfig::from_map(&map).expect("valid config").0
    }

    #[test]
    fn the_controller_takes_the_brokers_unclean_leader_election_setting() {
        let enabled = broker_config(&[("unclean.leader.election.enable", "true")]);
        assert!(controller_settings(&enabled).unclean_leader_election_enable);
        let default = broker_config(&[]);
        assert!(!controller_settings(&default).unclean_leader_election_enable);
        let settings = controller_settings(&broker_config(&[
            ("num.partitions", "7"),
            ("default.replication.factor", "2"),
        ]));
        assert_eq!(
            (
                settings.default_partitions,
                settings.default_replication_factor
            ),
            (7, 2)
        );
    }

    #[test]
    fn the_log_managers_settings_come_from_the_broker_keys() {
        let manager = manager_config(&[
            ("log.cleaner.enable", "false"),
            ("log.cleaner.backoff.ms", "250"),
            ("num.recovery.threads.per.data.dir", "3"),
            ("log.segment.delete.delay.ms", "0"),
            ("log.retention.check.interval.ms", "1000"),
            ("log.flush.offset.checkpoint.interval.ms", "2000"),
            ("log.flush.start.offset.checkpoint.interval.ms", "3000"),
            ("replica.high.watermark.checkpoint.interval.ms", "4000"),
            ("strom.log.writeback.interval.bytes", "1048576"),
            ("strom.log.page.cache.retain.bytes", "67108864"),
        ]);
        assert!(!manager.cleaner_enable);
        assert_eq!(manager.cleaner_backoff_ms, 250);
        assert_eq!(manager.recovery_threads_per_data_dir, 3);
        assert_eq!(manager.directory_delete_delay_ms, 0);
        assert_eq!(manager.default_config.file_delete_delay_ms, 0);
        assert_eq!(manager.retention_check_interval_ms, 1000);
        assert_eq!(manager.recovery_point_checkpoint_interval_ms, 2000);
        assert_eq!(manager.log_start_offset_checkpoint_interval_ms, 3000);
        assert_eq!(manager.high_watermark_checkpoint_interval_ms, 4000);
        assert_eq!(manager.page_cache, PageCacheSettings::BOUNDED);
        let manager = manager_config(&[
            ("strom.log.writeback.interval.bytes", "65536"),
            ("strom.log.page.cache.retain.bytes", "0"),
        ]);
        assert_eq!(manager.page_cache.writeback_bytes, 65_536);
        assert_eq!(manager.page_cache.retain_bytes, Some(0));
    }

    #[test]
    fn the_log_managers_defaults_are_kafkas() {
        let manager = manager_config(&[]);
        assert!(manager.cleaner_enable);
        assert_eq!(manager.cleaner_backoff_ms, 15_000);
        assert_eq!(manager.recovery_threads_per_data_dir, 2);
        assert_eq!(manager.directory_delete_delay_ms, 60_000);
        assert_eq!(manager.log_start_offset_checkpoint_interval_ms, 60_000);
        assert_eq!(manager.high_watermark_checkpoint_interval_ms, 5_000);
        // Strom's own page-cache hints are off by default, as Kafka has none.
        assert_eq!(manager.page_cache, PageCacheSettings::KERNEL);
    }
}
