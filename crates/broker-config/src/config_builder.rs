//! A typed builder for [`BrokerConfig`], beside the property-string form.
//!
//! Services that embed a broker set its configuration as Rust values
//! (`Duration`, [`ByteSize`], the storage crate's enums) instead of
//! `key=value` strings:
//!
//! ```
//! use std::time::Duration;
//!
//! use strom_broker_config::config_builder::{BuildError, ByteSize};
//! use strom_broker_config::BrokerConfig;
//! use strom_storage::config::CompressionType;
//!
//! # fn main() -> Result<(), BuildError> {
//! let config = BrokerConfig::builder()
//!     .listener("127.0.0.1:0")
//!     .log_dir("/var/lib/strom")
//!     .num_partitions(3)
//!     .log_segment_size(ByteSize::mib(64))
//!     .log_retention(Duration::from_secs(24 * 60 * 60))
//!     .compression_type(CompressionType::Zstd)
//!     .build()?;
//! assert_eq!(config.num_partitions, 3);
//! assert_eq!(config.topic_defaults()["retention.ms"], "86400000");
//! # Ok(())
//! # }
//! ```
//!
//! The builder writes each value under its Kafka property name and parses
//! the result with [`BrokerConfig::from_map`], so both forms share one set of
//! defaults and one set of rules, and DescribeConfigs reports a built
//! configuration exactly as it reports the same `server.properties`. It is
//! stricter than the string form in three ways: a key the string form would
//! only warn about (unknown, or accepted without effect) is an error; the
//! topic-level defaults (`log.segment.bytes`, `log.retention.ms`, ...) are
//! checked when building, where the string form leaves them to the broker's
//! start; and a value the property cannot express exactly (a duration that is
//! not a whole number of the property's unit, a directory name with a comma)
//! is refused instead of rounded or split.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

use strom_storage::config::{CleanupPolicy, CompressionType, MessageTimestampType};
use strom_storage::LogConfig;

use crate::config::{BrokerConfig, ConfigWarning};
pub use crate::error::BuildError;

/// The listener name [`BrokerConfigBuilder::listener`] uses.
pub const DEFAULT_LISTENER_NAME: &str = "PLAINTEXT";

/// A size in bytes, for settings Kafka counts in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(u64);

impl ByteSize {
    /// `bytes` bytes.
    pub const fn bytes(bytes: u64) -> ByteSize {
        ByteSize(bytes)
    }

    /// `kib` kibibytes (1,024 bytes each); saturates at `u64::MAX` bytes.
    pub const fn kib(kib: u64) -> ByteSize {
        ByteSize(kib.saturating_mul(1 << 10))
    }

    /// `mib` mebibytes (1,048,576 bytes each); saturates at `u64::MAX` bytes.
    pub const fn mib(mib: u64) -> ByteSize {
        ByteSize(mib.saturating_mul(1 << 20))
    }

    /// `gib` gibibytes (2^30 bytes each); saturates at `u64::MAX` bytes.
    pub const fn gib(gib: u64) -> ByteSize {
        ByteSize(gib.saturating_mul(1 << 30))
    }

    /// The size in bytes.
    pub const fn as_bytes(self) -> u64 {
        self.0
    }
}

impl Display for ByteSize {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} bytes", self.0)
    }
}

/// A value as given, converted to its property text when building.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Text(String),
    Millis(Duration),
    Minutes(Duration),
    Bytes(ByteSize),
}

/// Builds a [`BrokerConfig`] from typed values; see the [module
/// docs](self). Settings left unset keep the defaults of
/// [`BrokerConfig::defaults`]; setting one twice keeps the last value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerConfigBuilder {
    listeners: Vec<(String, String)>,
    advertised_listeners: Vec<(String, String)>,
    log_dirs: Vec<PathBuf>,
    values: BTreeMap<String, Value>,
}

impl BrokerConfig {
    /// A builder with every default: see [`BrokerConfigBuilder`].
    pub fn builder() -> BrokerConfigBuilder {
        BrokerConfigBuilder::default()
    }
}

impl BrokerConfigBuilder {
    /// Listens on `address` (`host:port`; the host an IP address,
    /// `localhost` or empty for every interface; port 0 picks a free port)
    /// under the listener name `PLAINTEXT`, replacing an earlier one of that
    /// name. A `SocketAddr` works too. `listeners`; the default is
    /// `127.0.0.1:9092`.
    pub fn listener(self, address: impl Display) -> Self {
        self.named_listener(DEFAULT_LISTENER_NAME, address)
    }

    /// Listens on `address` under the listener `name`, replacing an earlier
    /// listener of that name.
    pub fn named_listener(mut self, name: &str, address: impl Display) -> Self {
        replace_named(&mut self.listeners, name, address.to_string());
        self
    }

    /// The address clients are told to use for the `PLAINTEXT` listener
    /// (`advertised.listeners`; by default each listener's own address).
    pub fn advertised_listener(mut self, address: impl Display) -> Self {
        let address = address.to_string();
        replace_named(
            &mut self.advertised_listeners,
            DEFAULT_LISTENER_NAME,
            address,
        );
        self
    }

    /// Adds a directory for partition logs (`log.dirs`; the default is
    /// `data`).
    pub fn log_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.log_dirs.push(path.into());
        self
    }

    /// `node.id`.
    pub fn node_id(self, node_id: i32) -> Self {
        self.text("node.id", node_id)
    }

    /// `num.partitions`: partitions of topics created without a count.
    pub fn num_partitions(self, partitions: i32) -> Self {
        self.text("num.partitions", partitions)
    }

    /// `default.replication.factor`.
    pub fn default_replication_factor(self, factor: i16) -> Self {
        self.text("default.replication.factor", factor)
    }

    /// `auto.create.topics.enable`.
    pub fn auto_create_topics(self, enable: bool) -> Self {
        self.text("auto.create.topics.enable", enable)
    }

    /// `delete.topic.enable`.
    pub fn delete_topic_enable(self, enable: bool) -> Self {
        self.text("delete.topic.enable", enable)
    }

    /// `socket.request.max.bytes`: the largest request accepted.
    pub fn socket_request_max_size(self, size: ByteSize) -> Self {
        self.value("socket.request.max.bytes", Value::Bytes(size))
    }

    /// `connections.max.idle.ms`.
    pub fn connections_max_idle(self, idle: Duration) -> Self {
        self.value("connections.max.idle.ms", Value::Millis(idle))
    }

    /// `max.connections`.
    pub fn max_connections(self, connections: u32) -> Self {
        self.text("max.connections", connections)
    }

    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets`.
    pub fn offsets_topic_num_partitions(self, partitions: i32) -> Self {
        self.text("offsets.topic.num.partitions", partitions)
    }

    /// `offsets.topic.replication.factor`.
    pub fn offsets_topic_replication_factor(self, factor: i16) -> Self {
        self.text("offsets.topic.replication.factor", factor)
    }

    /// `offsets.retention.minutes`: a whole number of minutes.
    pub fn offsets_retention(self, retention: Duration) -> Self {
        self.value("offsets.retention.minutes", Value::Minutes(retention))
    }

    /// `group.initial.rebalance.delay.ms`: how long a new group waits for
    /// more members before its first rebalance.
    pub fn group_initial_rebalance_delay(self, delay: Duration) -> Self {
        self.value("group.initial.rebalance.delay.ms", Value::Millis(delay))
    }

    /// `group.min.session.timeout.ms`.
    pub fn group_min_session_timeout(self, timeout: Duration) -> Self {
        self.value("group.min.session.timeout.ms", Value::Millis(timeout))
    }

    /// `group.max.session.timeout.ms`.
    pub fn group_max_session_timeout(self, timeout: Duration) -> Self {
        self.value("group.max.session.timeout.ms", Value::Millis(timeout))
    }

    /// `group.max.size`.
    pub fn group_max_size(self, members: u32) -> Self {
        self.text("group.max.size", members)
    }

    /// `replica.lag.time.max.ms`.
    pub fn replica_lag_time_max(self, lag: Duration) -> Self {
        self.value("replica.lag.time.max.ms", Value::Millis(lag))
    }

    /// `log.retention.check.interval.ms`.
    pub fn log_retention_check_interval(self, interval: Duration) -> Self {
        self.value("log.retention.check.interval.ms", Value::Millis(interval))
    }

    /// `log.flush.scheduler.interval.ms`.
    pub fn log_flush_scheduler_interval(self, interval: Duration) -> Self {
        self.value("log.flush.scheduler.interval.ms", Value::Millis(interval))
    }

    /// `log.flush.offset.checkpoint.interval.ms`.
    pub fn log_flush_offset_checkpoint_interval(self, interval: Duration) -> Self {
        let key = "log.flush.offset.checkpoint.interval.ms";
        self.value(key, Value::Millis(interval))
    }

    /// `log.flush.start.offset.checkpoint.interval.ms`.
    pub fn log_flush_start_offset_checkpoint_interval(self, interval: Duration) -> Self {
        let key = "log.flush.start.offset.checkpoint.interval.ms";
        self.value(key, Value::Millis(interval))
    }

    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub fn replica_high_watermark_checkpoint_interval(self, interval: Duration) -> Self {
        let key = "replica.high.watermark.checkpoint.interval.ms";
        self.value(key, Value::Millis(interval))
    }

    /// `log.cleaner.enable`: whether compacted topics are compacted.
    pub fn log_cleaner_enable(self, enable: bool) -> Self {
        self.text("log.cleaner.enable", enable)
    }

    /// `log.cleaner.backoff.ms`: the pause between compaction passes.
    pub fn log_cleaner_backoff(self, backoff: Duration) -> Self {
        self.value("log.cleaner.backoff.ms", Value::Millis(backoff))
    }

    /// `num.recovery.threads.per.data.dir`.
    pub fn num_recovery_threads_per_data_dir(self, threads: u32) -> Self {
        self.text("num.recovery.threads.per.data.dir", threads)
    }

    /// `max.incremental.fetch.session.cache.slots` (KIP-227).
    pub fn max_incremental_fetch_session_cache_slots(self, slots: u32) -> Self {
        self.text("max.incremental.fetch.session.cache.slots", slots)
    }

    /// `strom.log.writeback.interval.bytes`: start writeback every this many
    /// bytes appended to a segment (0, the default, never).
    pub fn log_writeback_interval(self, interval: ByteSize) -> Self {
        self.value("strom.log.writeback.interval.bytes", Value::Bytes(interval))
    }

    /// `strom.log.page.cache.retain.bytes`: bytes of each partition kept in
    /// the page cache behind its end (by default the kernel decides).
    pub fn log_page_cache_retain(self, retain: ByteSize) -> Self {
        self.value("strom.log.page.cache.retain.bytes", Value::Bytes(retain))
    }

    /// `log.segment.bytes`: the default `segment.bytes` of topics.
    pub fn log_segment_size(self, size: ByteSize) -> Self {
        self.value("log.segment.bytes", Value::Bytes(size))
    }

    /// `log.roll.ms`: the default `segment.ms` of topics.
    pub fn log_roll_interval(self, interval: Duration) -> Self {
        self.value("log.roll.ms", Value::Millis(interval))
    }

    /// `log.retention.ms`: the default `retention.ms` of topics.
    pub fn log_retention(self, retention: Duration) -> Self {
        self.value("log.retention.ms", Value::Millis(retention))
    }

    /// `log.retention.ms=-1`: topics keep their records forever by default.
    pub fn log_retention_forever(self) -> Self {
        self.text("log.retention.ms", -1)
    }

    /// `log.retention.bytes`: the default `retention.bytes` of topics (by
    /// default no size limit).
    pub fn log_retention_size(self, size: ByteSize) -> Self {
        self.value("log.retention.bytes", Value::Bytes(size))
    }

    /// `log.cleanup.policy`: the default `cleanup.policy` of topics.
    pub fn log_cleanup_policy(self, policy: CleanupPolicy) -> Self {
        let names = [(policy.delete, "delete"), (policy.compact, "compact")];
        let text = names
            .iter()
            .filter(|(set, _)| *set)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join(",");
        self.text("log.cleanup.policy", text)
    }

    /// `compression.type`: the default codec of stored batches.
    pub fn compression_type(self, compression: CompressionType) -> Self {
        self.text("compression.type", compression_name(compression))
    }

    /// `log.message.timestamp.type`: the default `message.timestamp.type`.
    pub fn log_message_timestamp_type(self, timestamp_type: MessageTimestampType) -> Self {
        let name = match timestamp_type {
            MessageTimestampType::CreateTime => "CreateTime",
            MessageTimestampType::LogAppendTime => "LogAppendTime",
        };
        self.text("log.message.timestamp.type", name)
    }

    /// `message.max.bytes`: the default `max.message.bytes`, the largest
    /// record batch a topic accepts.
    pub fn message_max_size(self, size: ByteSize) -> Self {
        self.value("message.max.bytes", Value::Bytes(size))
    }

    /// `min.insync.replicas`: the default of topics.
    pub fn min_insync_replicas(self, replicas: u32) -> Self {
        self.text("min.insync.replicas", replicas)
    }

    /// Sets any broker property by its Kafka name, for keys without a typed
    /// setter. The value is checked like the same line in
    /// `server.properties`; a key Kafka does not define, or one Strom does
    /// not act on, makes [`build`](Self::build) fail.
    pub fn property(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.value(key, Value::Text(value.into()))
    }

    /// Checks the settings and returns the configuration.
    pub fn build(self) -> Result<BrokerConfig, BuildError> {
        let map = self.render()?;
        let (config, warnings) = BrokerConfig::from_map(&map).map_err(BuildError::Invalid)?;
        if let Some(warning) = warnings.into_iter().next() {
            return Err(match warning {
                ConfigWarning::Unknown { key } => BuildError::UnknownProperty { key },
                ConfigWarning::Ignored { key } => BuildError::IgnoredProperty { key },
            });
        }
        for listener in config.listeners.iter().chain(&config.advertised_listeners) {
            listener.bind_address().map_err(BuildError::Invalid)?;
        }
        LogConfig::from_properties(config.topic_defaults()).map_err(BuildError::TopicDefault)?;
        Ok(config)
    }

    fn text(self, key: &str, value: impl Display) -> Self {
        self.value(key, Value::Text(value.to_string()))
    }

    fn value(mut self, key: impl Into<String>, value: Value) -> Self {
        self.values.insert(key.into(), value);
        self
    }

    /// The settings as Kafka properties: only what was set appears.
    fn render(self) -> Result<BTreeMap<String, String>, BuildError> {
        let mut map = BTreeMap::new();
        if !self.listeners.is_empty() {
            map.insert("listeners".to_owned(), listener_list(&self.listeners));
        }
        if !self.advertised_listeners.is_empty() {
            let text = listener_list(&self.advertised_listeners);
            map.insert("advertised.listeners".to_owned(), text);
        }
        if !self.log_dirs.is_empty() {
            map.insert("log.dirs".to_owned(), log_dir_list(&self.log_dirs)?);
        }
        for (key, value) in self.values {
            let text = render_value(&key, value)?;
            map.insert(key, text);
        }
        Ok(map)
    }
}

fn replace_named(listeners: &mut Vec<(String, String)>, name: &str, address: String) {
    match listeners.iter_mut().find(|(known, _)| known == name) {
        Some(entry) => entry.1 = address,
        None => listeners.push((name.to_owned(), address)),
    }
}

fn listener_list(listeners: &[(String, String)]) -> String {
    listeners
        .iter()
        .map(|(name, address)| format!("{name}://{address}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn log_dir_list(directories: &[PathBuf]) -> Result<String, BuildError> {
    let texts = directories
        .iter()
        .map(|path| log_dir_text(path))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(texts.join(","))
}

fn log_dir_text(path: &Path) -> Result<&str, BuildError> {
    match path.to_str() {
        Some(text) if !text.contains(',') && text.trim() == text && !text.is_empty() => Ok(text),
        _ => Err(BuildError::LogDir {
            path: path.to_owned(),
        }),
    }
}

/// The property text of a value; `key` names the property in errors.
fn render_value(key: &str, value: Value) -> Result<String, BuildError> {
    match value {
        Value::Text(text) => Ok(text),
        Value::Millis(duration) => whole_units(key, duration, 1, "milliseconds"),
        Value::Minutes(duration) => whole_units(key, duration, 60_000, "minutes"),
        Value::Bytes(size) => at_most_long(key, u128::from(size.as_bytes())),
    }
}

/// `duration` as a count of units of `unit_ms` milliseconds.
fn whole_units(
    key: &str,
    duration: Duration,
    unit_ms: u128,
    unit: &'static str,
) -> Result<String, BuildError> {
    let unit_nanos = unit_ms * 1_000_000;
    let nanos = duration.as_nanos();
    if !nanos.is_multiple_of(unit_nanos) {
        return Err(BuildError::NotWholeUnit {
            key: key.to_owned(),
            unit,
            nanos,
        });
    }
    at_most_long(key, nanos / unit_nanos)
}

fn at_most_long(key: &str, value: u128) -> Result<String, BuildError> {
    let max = i64::MAX as u128;
    if value > max {
        return Err(BuildError::TooLarge {
            key: key.to_owned(),
            value,
            max,
        });
    }
    Ok(value.to_string())
}

fn compression_name(compression: CompressionType) -> &'static str {
    match compression {
        CompressionType::Producer => "producer",
        CompressionType::Uncompressed => "uncompressed",
        CompressionType::Gzip => "gzip",
        CompressionType::Snappy => "snappy",
        CompressionType::Lz4 => "lz4",
        CompressionType::Zstd => "zstd",
    }
}

#[cfg(test)]
#[path = "config_builder_tests.rs"]
mod tests;
