//! Typed topic-level log configuration, parsed from Kafka's property names.
//!
//! Values arrive as `key=value` strings (broker defaults overlaid with a
//! topic's overrides) and are parsed once into [`LogConfig`]. Kafka's "no
//! limit" sentinels (`-1`, `Long.MAX_VALUE`) become `None`.
//!
//! The keys, their types and valid ranges come from the one table of topic
//! configurations, [`strom_protocol::topic_config`]: a value is checked
//! against its definition there before it is converted into a typed field
//! here, so what the controller accepts and what a log opens with cannot
//! drift apart. Keys of the table that the log does not act on
//! ([`UNUSED_BY_THE_LOG`]) are checked and accepted.

use std::collections::BTreeMap;

use strom_protocol::records::Compression;
use strom_protocol::topic_config::{
    parse_boolean, split_list, topic_config, ConfigDefinition, ConfigValueError,
};

use crate::error::ConfigError;

/// Topic configurations of the table that no field of [`LogConfig`] holds:
/// they are validated and accepted, and other layers act on them (or
/// nobody yet: throttles, down-conversion, compression levels).
pub const UNUSED_BY_THE_LOG: &[&str] = &[
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.downconversion.enable",
    "message.format.version",
];

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
    /// `remote.storage.enable`: copy closed segments to the remote tier
    /// (KIP-405; acted on only when the broker's
    /// `remote.log.storage.system.enable` is set too).
    pub remote_storage_enable: bool,
    /// `local.retention.ms`: for a tiered topic, how long copied segments
    /// stay local; `-2` takes `retention.ms`, `-1` keeps them.
    pub local_retention_ms: i64,
    /// `local.retention.bytes`: for a tiered topic, the local size above
    /// which copied segments are deleted; `-2` takes `retention.bytes`.
    pub local_retention_bytes: i64,
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
            remote_storage_enable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
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

    /// The local retention time of a tiered topic: `local.retention.ms`,
    /// or `retention.ms` for `-2`; `None` for no limit.
    pub fn effective_local_retention_ms(&self) -> Option<i64> {
        match self.local_retention_ms {
            -2 => self.retention_ms,
            value if value < 0 => None,
            value => Some(value),
        }
    }

    /// The local size bound of a tiered topic: `local.retention.bytes`, or
    /// `retention.bytes` for `-2`; `None` for no limit.
    pub fn effective_local_retention_bytes(&self) -> Option<u64> {
        match self.local_retention_bytes {
            -2 => self.retention_bytes,
            value if value < 0 => None,
            value => Some(value as u64),
        }
    }

    /// How far after the broker's clock a CreateTime timestamp may be
    /// (`message.timestamp.after.max.ms`, else the deprecated difference).
    pub fn timestamp_after_max_ms(&self) -> Option<i64> {
        self.message_timestamp_after_max_ms
            .or(self.message_timestamp_difference_max_ms)
    }

    /// Applies one property; returns `false` when the key is not a topic
    /// configuration.
    fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let Some(definition) = topic_config(key) else {
            return Ok(false);
        };
        let value = Value::checked(definition, value)?;
        match key {
            "segment.bytes" => self.segment_bytes = value.unsigned()?,
            "segment.ms" => self.segment_ms = value.long()?,
            "segment.jitter.ms" => self.segment_jitter_ms = value.long()?,
            "segment.index.bytes" => self.segment_index_bytes = value.unsigned()?,
            "index.interval.bytes" => self.index_interval_bytes = value.unsigned()?,
            "max.message.bytes" => self.max_message_bytes = value.unsigned()?,
            "message.timestamp.type" => self.message_timestamp_type = value.timestamp_type(),
            "retention.ms" => self.retention_ms = value.minus_one_unlimited()?,
            "retention.bytes" => {
                self.retention_bytes = value.minus_one_unlimited()?.map(|bytes| bytes as u64)
            }
            "cleanup.policy" => self.cleanup_policy = value.cleanup_policy(),
            "flush.messages" => {
                self.flush_messages = value.long_max_unlimited()?.map(|count| count as u64)
            }
            "flush.ms" => self.flush_ms = value.long_max_unlimited()?,
            "delete.retention.ms" => self.delete_retention_ms = value.long()?,
            "min.cleanable.dirty.ratio" => self.min_cleanable_dirty_ratio = value.ratio()?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = value.long()?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = value.long()?,
            "file.delete.delay.ms" => self.file_delete_delay_ms = value.long()?,
            "compression.type" => self.compression_type = value.compression(),
            "min.insync.replicas" => self.min_insync_replicas = value.unsigned()?,
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = value.boolean()?
            }
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = value.long_max_unlimited()?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = value.long_max_unlimited()?
            }
            "message.timestamp.difference.max.ms" => {
                self.message_timestamp_difference_max_ms = value.long_max_unlimited()?
            }
            "preallocate" => self.preallocate = value.boolean()?,
            "remote.storage.enable" => self.remote_storage_enable = value.boolean()?,
            "local.retention.ms" => self.local_retention_ms = value.long()?,
            "local.retention.bytes" => self.local_retention_bytes = value.long()?,
            _ => debug_assert!(UNUSED_BY_THE_LOG.contains(&key), "{key} has no field"),
        }
        Ok(true)
    }
}

/// A value that passed its definition's type and range check; the
/// conversions below cannot fail for such a value except where the typed
/// field is narrower than Kafka's range (negative sizes).
struct Value<'a> {
    key: &'a str,
    text: &'a str,
}

impl<'a> Value<'a> {
    fn checked(definition: &ConfigDefinition, text: &'a str) -> Result<Self, ConfigError> {
        let text = text.trim();
        definition
            .validate(text)
            .map_err(|problem| invalid(definition.name, text, problem))?;
        Ok(Value {
            key: definition.name,
            text,
        })
    }

    fn invalid(&self, problem: ConfigValueError) -> ConfigError {
        invalid(self.key, self.text, problem)
    }

    fn long(&self) -> Result<i64, ConfigError> {
        self.text
            .parse()
            .map_err(|_| self.invalid(ConfigValueError::NotAnInteger))
    }

    /// A non-negative 32-bit size or count.
    fn unsigned(&self) -> Result<u32, ConfigError> {
        let parsed: i32 = self
            .text
            .parse()
            .map_err(|_| self.invalid(ConfigValueError::NotAnInteger))?;
        u32::try_from(parsed).map_err(|_| {
            self.invalid(ConfigValueError::BelowMinimum {
                minimum: "0".to_owned(),
            })
        })
    }

    /// A long where `-1` means "no limit".
    fn minus_one_unlimited(&self) -> Result<Option<i64>, ConfigError> {
        Ok(Some(self.long()?).filter(|value| *value >= 0))
    }

    /// A long where `Long.MAX_VALUE` means "no limit".
    fn long_max_unlimited(&self) -> Result<Option<i64>, ConfigError> {
        Ok(Some(self.long()?).filter(|value| *value != i64::MAX))
    }

    fn ratio(&self) -> Result<f64, ConfigError> {
        self.text
            .parse()
            .map_err(|_| self.invalid(ConfigValueError::NotANumber))
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        parse_boolean(self.text).map_err(|problem| self.invalid(problem))
    }

    fn timestamp_type(&self) -> MessageTimestampType {
        if self.text == "LogAppendTime" {
            MessageTimestampType::LogAppendTime
        } else {
            MessageTimestampType::CreateTime
        }
    }

    fn cleanup_policy(&self) -> CleanupPolicy {
        let entries = split_list(self.text);
        CleanupPolicy {
            delete: entries.contains(&"delete"),
            compact: entries.contains(&"compact"),
        }
    }

    fn compression(&self) -> CompressionType {
        match self.text {
            "uncompressed" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => CompressionType::Producer,
        }
    }
}

fn invalid(key: &str, value: &str, problem: ConfigValueError) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        problem,
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
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "segment.bytes"));
        assert!(error.to_string().contains("segment.bytes"));

        let error = LogConfig::from_properties(&properties(&[("segment.bytes", "10")]))
            .expect_err("too small");
        assert!(matches!(
            &error,
            ConfigError::Invalid { key, problem: ConfigValueError::BelowMinimum { .. }, .. }
                if key == "segment.bytes"
        ));

        let error =
            LogConfig::from_properties(&properties(&[("min.cleanable.dirty.ratio", "1.5")]))
                .expect_err("ratio above one");
        assert!(
            matches!(&error, ConfigError::Invalid { key, problem: ConfigValueError::AboveMaximum { .. }, .. } if key == "min.cleanable.dirty.ratio")
        );

        let error = LogConfig::from_properties(&properties(&[("cleanup.policy", "remove")]))
            .expect_err("unknown policy");
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "cleanup.policy"));
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

    /// A valid value of `definition` other than its default.
    fn other_value(definition: &ConfigDefinition) -> String {
        use strom_protocol::topic_config::ConfigKind;
        let default = definition.default;
        match definition.kind {
            ConfigKind::Int { min, .. } => match default.parse::<i32>() {
                Ok(value) if value == min => (min + 1).to_string(),
                _ => min.to_string(),
            },
            ConfigKind::Long { min, .. } => match default.parse::<i64>() {
                Ok(value) if value == min => (min + 1).to_string(),
                _ => min.to_string(),
            },
            ConfigKind::Double { min, max } => ((min + max) / 4.0).to_string(),
            ConfigKind::Boolean => (default != "true").to_string(),
            ConfigKind::OneOf(words) | ConfigKind::ListOf(words) => words
                .iter()
                .find(|word| **word != default)
                .map(|word| (*word).to_owned())
                .unwrap_or_default(),
            ConfigKind::ThrottledReplicas => "*".to_owned(),
            ConfigKind::Text => "something else".to_owned(),
        }
    }

    #[test]
    fn every_table_key_is_a_field_or_listed_as_unused() {
        use strom_protocol::topic_config::TOPIC_CONFIGS;
        for name in UNUSED_BY_THE_LOG {
            assert!(topic_config(name).is_some(), "{name} is not in the table");
        }
        for definition in TOPIC_CONFIGS {
            let value = other_value(definition);
            assert_eq!(definition.validate(&value), Ok(()), "{}", definition.name);
            let parsed = LogConfig::from_properties(&properties(&[(definition.name, &value)]))
                .unwrap_or_else(|error| panic!("{} = {value}: {error}", definition.name));
            assert!(parsed.unknown_keys.is_empty(), "{}", definition.name);
            let changed = parsed.config != LogConfig::default();
            assert_eq!(
                changed,
                !UNUSED_BY_THE_LOG.contains(&definition.name),
                "{} = {value} changes the log configuration: {changed}",
                definition.name
            );
        }
    }
}
