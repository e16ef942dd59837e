//! Typed topic-level log configuration, parsed from Kafka's property names.
//!
//! Values arrive as `key=value` strings (broker defaults overlaid with a
//! topic's overrides) and are parsed once into [`LogConfig`]. Kafka's "no
//! limit" sentinels (`-1`, `Long.MAX_VALUE`) become `None`.

use std::collections::BTreeMap;

use strom_protocol::records::Compression;

use crate::error::ConfigError;

/// How the log assigns the timestamp it indexes (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageTimestampType {
    /// Keep the producer's timestamps (`CreateTime`).
    CreateTime,
    /// Overwrite the batch max timestamp with the broker's clock (`LogAppendTime`).
    LogAppendTime,
}

/// What happens to old segments (`cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete`: segments past retention are removed.
    pub delete: bool,
    /// `compact`: only the latest record per key is kept.
    pub compact: bool,
}

/// Compression applied by the broker (`compression.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep the producer's compression.
    Producer,
    /// Store uncompressed.
    Uncompressed,
    /// gzip.
    Gzip,
    /// snappy.
    Snappy,
    /// lz4.
    Lz4,
    /// zstd.
    Zstd,
}

impl CompressionType {
    /// The codec a batch compressed with `source` is stored with: the
    /// producer's for `producer`, else the configured one (Kafka's
    /// `BrokerCompression.targetCompression`).
    pub fn target(self, source: Compression) -> Compression {
        match self {
            CompressionType::Producer => source,
            CompressionType::Uncompressed => Compression::None,
            CompressionType::Gzip => Compression::Gzip,
            CompressionType::Snappy => Compression::Snappy,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
        }
    }
}

/// Topic-level log configuration with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this size.
    pub segment_bytes: u32,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: maximum random jitter subtracted from `segment.ms`.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: preallocated size of each index file.
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: bytes of log between two index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: largest accepted record batch.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: MessageTimestampType,
    /// `retention.ms`: `None` keeps segments forever (`-1`).
    pub retention_ms: Option<i64>,
    /// `retention.bytes`: `None` means no size limit (`-1`).
    pub retention_bytes: Option<u64>,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `flush.messages`: fsync after this many messages; `None` leaves it to the OS.
    pub flush_messages: Option<u64>,
    /// `flush.ms`: fsync when the oldest unflushed append is this old; `None` never.
    pub flush_ms: Option<i64>,
    /// `delete.retention.ms`: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty share that makes a log cleanable.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: records older than this make the log cleanable.
    pub max_compaction_lag_ms: i64,
    /// `file.delete.delay.ms`: wait between renaming to `.deleted` and deleting.
    pub file_delete_delay_ms: i64,
    /// `compression.type`.
    pub compression_type: CompressionType,
    /// `min.insync.replicas` (used by replication; kept with the topic config).
    pub min_insync_replicas: u32,
    /// `unclean.leader.election.enable` (used by the controller).
    pub unclean_leader_election_enable: bool,
    /// `message.timestamp.before.max.ms`: `None` for no limit.
    pub message_timestamp_before_max_ms: Option<i64>,
    /// `message.timestamp.after.max.ms`: `None` for no limit.
    pub message_timestamp_after_max_ms: Option<i64>,
    /// `message.timestamp.difference.max.ms` (deprecated by KIP-937): the
    /// bound in both directions when the two above are not set; `None` for
    /// no limit.
    pub message_timestamp_difference_max_ms: Option<i64>,
    /// `preallocate`: preallocate segment files (accepted, not used).
    pub preallocate: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            message_timestamp_type: MessageTimestampType::CreateTime,
            retention_ms: Some(7 * 24 * 60 * 60 * 1000),
            retention_bytes: None,
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: false,
            },
            flush_messages: None,
            flush_ms: None,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            file_delete_delay_ms: 60_000,
            compression_type: CompressionType::Producer,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            message_timestamp_before_max_ms: None,
            message_timestamp_after_max_ms: None,
            message_timestamp_difference_max_ms: None,
            preallocate: false,
        }
    }
}

/// The result of parsing properties: the config and the keys it did not know.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLogConfig {
    /// The typed configuration.
    pub config: LogConfig,
    /// Keys that are not topic-level log configs (the caller warns about them).
    pub unknown_keys: Vec<String>,
}

impl LogConfig {
    /// Parses Kafka topic-level properties over the defaults.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<ParsedLogConfig, ConfigError> {
        LogConfig::default().with_overrides(properties)
    }

    /// Returns a copy of `self` with `overrides` applied (topic overrides over
    /// broker defaults).
    pub fn with_overrides(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<ParsedLogConfig, ConfigError> {
        let mut config = self.clone();
        let mut unknown_keys = Vec::new();
        for (key, value) in overrides {
            if !config.apply(key, value.trim())? {
                unknown_keys.push(key.clone());
            }
        }
        Ok(ParsedLogConfig {
            config,
            unknown_keys,
        })
    }

    /// How far before the broker's clock a CreateTime timestamp may be:
    /// `message.timestamp.before.max.ms`, else the deprecated
    /// `message.timestamp.difference.max.ms`, as Kafka reads them; `None`
    /// for no limit.
    pub fn timestamp_before_max_ms(&self) -> Option<i64> {
        self.message_timestamp_before_max_ms
            .or(self.message_timestamp_difference_max_ms)
    }

    /// How far after the broker's clock a CreateTime timestamp may be
    /// (`message.timestamp.after.max.ms`, else the deprecated difference).
    pub fn timestamp_after_max_ms(&self) -> Option<i64> {
        self.message_timestamp_after_max_ms
            .or(self.message_timestamp_difference_max_ms)
    }

    /// Applies one property; returns `false` when the key is unknown.
    fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "segment.bytes" => self.segment_bytes = parse_int_at_least(key, value, 14)?,
            "segment.ms" => self.segment_ms = parse_long_at_least(key, value, 1)?,
            "segment.jitter.ms" => self.segment_jitter_ms = parse_long_at_least(key, value, 0)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_int_at_least(key, value, 4)?,
            "index.interval.bytes" => {
                self.index_interval_bytes = parse_int_at_least(key, value, 0)?
            }
            "max.message.bytes" => self.max_message_bytes = parse_int_at_least(key, value, 0)?,
            "message.timestamp.type" => {
                self.message_timestamp_type = parse_timestamp_type(key, value)?
            }
            "retention.ms" => self.retention_ms = parse_optional_long(key, value)?,
            "retention.bytes" => {
                self.retention_bytes = parse_optional_long(key, value)?.map(|bytes| bytes as u64)
            }
            "cleanup.policy" => self.cleanup_policy = parse_cleanup_policy(key, value)?,
            "flush.messages" => {
                let messages = parse_long_at_least(key, value, 1)?;
                self.flush_messages = (messages != i64::MAX).then_some(messages as u64);
            }
            "flush.ms" => {
                let flush_ms = parse_long_at_least(key, value, 0)?;
                self.flush_ms = (flush_ms != i64::MAX).then_some(flush_ms);
            }
            "delete.retention.ms" => self.delete_retention_ms = parse_long_at_least(key, value, 0)?,
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = parse_ratio(key, value)?
            }
            "min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = parse_long_at_least(key, value, 0)?
            }
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = parse_long_at_least(key, value, 1)?
            }
            "file.delete.delay.ms" => {
                self.file_delete_delay_ms = parse_long_at_least(key, value, 0)?
            }
            "compression.type" => self.compression_type = parse_compression(key, value)?,
            "min.insync.replicas" => self.min_insync_replicas = parse_int_at_least(key, value, 1)?,
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = parse_bool(key, value)?
            }
            "message.timestamp.before.max.ms" => {
                let limit = parse_long_at_least(key, value, 0)?;
                self.message_timestamp_before_max_ms = (limit != i64::MAX).then_some(limit);
            }
            "message.timestamp.after.max.ms" => {
                let limit = parse_long_at_least(key, value, 0)?;
                self.message_timestamp_after_max_ms = (limit != i64::MAX).then_some(limit);
            }
            "message.timestamp.difference.max.ms" => {
                let limit = parse_long_at_least(key, value, 0)?;
                self.message_timestamp_difference_max_ms = (limit != i64::MAX).then_some(limit);
            }
            "preallocate" => self.preallocate = parse_bool(key, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn invalid(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn out_of_range(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::OutOfRange {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse_long_at_least(key: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    let parsed: i64 = value
        .parse()
        .map_err(|_| invalid(key, value, "a 64-bit integer"))?;
    if parsed < min {
        return Err(out_of_range(key, value, "below the minimum"));
    }
    Ok(parsed)
}

fn parse_int_at_least(key: &str, value: &str, min: i64) -> Result<u32, ConfigError> {
    let parsed: i32 = value
        .parse()
        .map_err(|_| invalid(key, value, "a 32-bit integer"))?;
    if i64::from(parsed) < min {
        return Err(out_of_range(key, value, "below the minimum"));
    }
    u32::try_from(parsed).map_err(|_| out_of_range(key, value, "must not be negative"))
}

/// Parses a long where `-1` means "no limit".
fn parse_optional_long(key: &str, value: &str) -> Result<Option<i64>, ConfigError> {
    let parsed = parse_long_at_least(key, value, -1)?;
    Ok((parsed >= 0).then_some(parsed))
}

fn parse_ratio(key: &str, value: &str) -> Result<f64, ConfigError> {
    let parsed: f64 = value
        .parse()
        .map_err(|_| invalid(key, value, "a number between 0 and 1"))?;
    if !(0.0..=1.0).contains(&parsed) {
        return Err(out_of_range(key, value, "between 0 and 1"));
    }
    Ok(parsed)
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn parse_timestamp_type(key: &str, value: &str) -> Result<MessageTimestampType, ConfigError> {
    match value {
        "CreateTime" => Ok(MessageTimestampType::CreateTime),
        "LogAppendTime" => Ok(MessageTimestampType::LogAppendTime),
        _ => Err(invalid(key, value, "CreateTime or LogAppendTime")),
    }
}

fn parse_cleanup_policy(key: &str, value: &str) -> Result<CleanupPolicy, ConfigError> {
    let mut policy = CleanupPolicy {
        delete: false,
        compact: false,
    };
    for part in value.split(',').map(str::trim) {
        match part {
            "delete" => policy.delete = true,
            "compact" => policy.compact = true,
            _ => return Err(invalid(key, value, "a list of delete and compact")),
        }
    }
    Ok(policy)
}

fn parse_compression(key: &str, value: &str) -> Result<CompressionType, ConfigError> {
    match value {
        "producer" => Ok(CompressionType::Producer),
        "uncompressed" => Ok(CompressionType::Uncompressed),
        "gzip" => Ok(CompressionType::Gzip),
        "snappy" => Ok(CompressionType::Snappy),
        "lz4" => Ok(CompressionType::Lz4),
        "zstd" => Ok(CompressionType::Zstd),
        _ => Err(invalid(
            key,
            value,
            "producer, uncompressed, gzip, snappy, lz4 or zstd",
        )),
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
    fn defaults_are_kafkas() {
        let config = LogConfig::default();
        assert_eq!(config.segment_bytes, 1_073_741_824);
        assert_eq!(config.segment_ms, 604_800_000);
        assert_eq!(config.segment_index_bytes, 10_485_760);
        assert_eq!(config.index_interval_bytes, 4096);
        assert_eq!(config.max_message_bytes, 1_048_588);
        assert_eq!(config.retention_ms, Some(604_800_000));
        assert_eq!(config.retention_bytes, None);
        assert_eq!(config.delete_retention_ms, 86_400_000);
        assert_eq!(config.file_delete_delay_ms, 60_000);
        assert!(config.cleanup_policy.delete && !config.cleanup_policy.compact);
    }

    #[test]
    fn parses_every_known_key() {
        let parsed = LogConfig::from_properties(&properties(&[
            ("segment.bytes", "1048576"),
            ("segment.ms", "1000"),
            ("segment.index.bytes", "4096"),
            ("index.interval.bytes", "100"),
            ("max.message.bytes", "2000"),
            ("message.timestamp.type", "LogAppendTime"),
            ("retention.ms", "-1"),
            ("retention.bytes", "5000"),
            ("cleanup.policy", "compact,delete"),
            ("flush.messages", "1"),
            ("flush.ms", "9223372036854775807"),
            ("delete.retention.ms", "10"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("min.compaction.lag.ms", "5"),
            ("file.delete.delay.ms", "0"),
            ("compression.type", "zstd"),
            ("some.unknown.key", "x"),
        ]))
        .expect("valid config");
        let config = parsed.config;
        assert_eq!(config.segment_bytes, 1_048_576);
        assert_eq!(config.segment_ms, 1000);
        assert_eq!(config.segment_index_bytes, 4096);
        assert_eq!(config.index_interval_bytes, 100);
        assert_eq!(config.max_message_bytes, 2000);
        assert_eq!(
            config.message_timestamp_type,
            MessageTimestampType::LogAppendTime
        );
        assert_eq!(config.retention_ms, None);
        assert_eq!(config.retention_bytes, Some(5000));
        assert!(config.cleanup_policy.compact && config.cleanup_policy.delete);
        assert_eq!(config.flush_messages, Some(1));
        assert_eq!(config.flush_ms, None);
        assert_eq!(config.delete_retention_ms, 10);
        assert!((config.min_cleanable_dirty_ratio - 0.25).abs() < f64::EPSILON);
        assert_eq!(config.min_compaction_lag_ms, 5);
        assert_eq!(config.file_delete_delay_ms, 0);
        assert_eq!(config.compression_type, CompressionType::Zstd);
        assert_eq!(parsed.unknown_keys, vec!["some.unknown.key".to_owned()]);
    }

    #[test]
    fn errors_name_the_key() {
        let error = LogConfig::from_properties(&properties(&[("segment.bytes", "lots")]))
            .expect_err("not a number");
        assert!(matches!(&error, ConfigError::InvalidValue { key, .. } if key == "segment.bytes"));
        assert!(error.to_string().contains("segment.bytes"));

        let error = LogConfig::from_properties(&properties(&[("segment.bytes", "10")]))
            .expect_err("too small");
        assert!(matches!(&error, ConfigError::OutOfRange { key, .. } if key == "segment.bytes"));

        let error =
            LogConfig::from_properties(&properties(&[("min.cleanable.dirty.ratio", "1.5")]))
                .expect_err("ratio above one");
        assert!(
            matches!(&error, ConfigError::OutOfRange { key, .. } if key == "min.cleanable.dirty.ratio")
        );

        let error = LogConfig::from_properties(&properties(&[("cleanup.policy", "remove")]))
            .expect_err("unknown policy");
        assert!(matches!(&error, ConfigError::InvalidValue { key, .. } if key == "cleanup.policy"));
    }

    #[test]
    fn overrides_apply_over_a_base() {
        let base = LogConfig::from_properties(&properties(&[("retention.ms", "1000")]))
            .expect("valid")
            .config;
        let topic = base
            .with_overrides(&properties(&[("segment.ms", "50")]))
            .expect("valid")
            .config;
        assert_eq!(topic.retention_ms, Some(1000));
        assert_eq!(topic.segment_ms, 50);
    }
}
