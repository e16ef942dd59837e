//! Consumer configuration with the Java client's property names.

use std::time::Duration;

use strom_client::config::{parse_duration_ms, parse_number};
use strom_client::{ClientConfig, ConfigError};
use strom_config::value::boolean;
use strom_config::{invalid, ValueProblem};

use crate::versions::{ApiVersionCaps, API_VERSION_CAPS_PROPERTY};

/// `auto.offset.reset`: where to start when there is no valid position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The log start offset.
    Earliest,
    /// The log end offset (or last stable offset for read_committed).
    Latest,
    /// Fail with an error.
    None,
}

/// `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Every record up to the high watermark.
    ReadUncommitted,
    /// Only committed transactional records, up to the last stable offset.
    ReadCommitted,
}

impl IsolationLevel {
    /// The wire value (0 or 1).
    pub fn code(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// `partition.assignment.strategy` entries, by the Java client's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentStrategy {
    /// `range` (`RangeAssignor`).
    Range,
    /// `roundrobin` (`RoundRobinAssignor`).
    RoundRobin,
    /// `cooperative-sticky` (`CooperativeStickyAssignor`).
    CooperativeSticky,
}

impl AssignmentStrategy {
    /// The protocol name sent in JoinGroup.
    pub fn protocol_name(self) -> &'static str {
        match self {
            AssignmentStrategy::Range => "range",
            AssignmentStrategy::RoundRobin => "roundrobin",
            AssignmentStrategy::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// The strategy with the given protocol name or Java class name.
    pub fn from_name(name: &str) -> Option<AssignmentStrategy> {
        let short = name.rsplit('.').next().unwrap_or(name);
        match short {
            "range" | "RangeAssignor" => Some(AssignmentStrategy::Range),
            "roundrobin" | "RoundRobinAssignor" => Some(AssignmentStrategy::RoundRobin),
            "cooperative-sticky" | "CooperativeStickyAssignor" => {
                Some(AssignmentStrategy::CooperativeSticky)
            }
            _ => None,
        }
    }
}

/// Every consumer setting, parsed once into typed values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The shared client settings (`bootstrap.servers`, `client.id`, ...).
    pub client: ClientConfig,
    /// `group.id`; without it only `assign` works and nothing is committed.
    pub group_id: Option<String>,
    /// `group.instance.id`: static membership.
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms` (also the rebalance timeout).
    pub max_poll_interval: Duration,
    /// `enable.auto.commit`.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`.
    pub auto_commit_interval: Duration,
    /// `auto.offset.reset`.
    pub auto_offset_reset: OffsetReset,
    /// `fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: i32,
    /// `max.poll.records`.
    pub max_poll_records: usize,
    /// `check.crcs`.
    pub check_crcs: bool,
    /// `isolation.level`.
    pub isolation_level: IsolationLevel,
    /// `partition.assignment.strategy`, in preference order.
    pub assignment_strategies: Vec<AssignmentStrategy>,
    /// `client.rack`.
    pub client_rack: Option<String>,
    /// `default.api.timeout.ms`: the bound of blocking calls without a timeout.
    pub default_api_timeout: Duration,
    /// `strom.api.version.caps`: upper bounds on negotiated API versions
    /// for brokers that advertise versions they cannot parse (none by
    /// default; see [`crate::versions`]).
    pub api_version_caps: ApiVersionCaps,
}

impl ConsumerConfig {
    /// Java's defaults with the given bootstrap servers.
    pub fn new<S: Into<String>>(bootstrap_servers: impl IntoIterator<Item = S>) -> ConsumerConfig {
        ConsumerConfig {
            client: ClientConfig::new(bootstrap_servers),
            group_id: None,
            group_instance_id: None,
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            auto_offset_reset: OffsetReset::Latest,
            fetch_min_bytes: 1,
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            max_poll_records: 500,
            check_crcs: true,
            isolation_level: IsolationLevel::ReadUncommitted,
            assignment_strategies: vec![
                AssignmentStrategy::Range,
                AssignmentStrategy::CooperativeSticky,
            ],
            client_rack: None,
            default_api_timeout: Duration::from_millis(60_000),
            api_version_caps: ApiVersionCaps::none(),
        }
    }

    /// Parses Kafka property pairs; returns the config and the keys neither
    /// the consumer nor the client core knows.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(ConsumerConfig, Vec<String>), ConfigError> {
        let mut config = ConsumerConfig::new(Vec::<String>::new());
        let mut unknown = Vec::new();
        for (key, value) in properties {
            if !config.set(key, value)? {
                unknown.push(key.to_owned());
            }
        }
        config.validate()?;
        Ok((config, unknown))
    }

    /// Sets one property by its Kafka name; `Ok(false)` for an unknown name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        if self.client.set(key, value)? {
            return Ok(true);
        }
        match key {
            "group.id" => self.group_id = non_empty(value),
            "group.instance.id" => self.group_instance_id = non_empty(value),
            "client.rack" => self.client_rack = non_empty(value),
            "session.timeout.ms" => self.session_timeout = parse_duration_ms(key, value)?,
            "heartbeat.interval.ms" => self.heartbeat_interval = parse_duration_ms(key, value)?,
            "max.poll.interval.ms" => self.max_poll_interval = parse_duration_ms(key, value)?,
            "enable.auto.commit" => self.enable_auto_commit = boolean(key, value)?,
            "auto.commit.interval.ms" => self.auto_commit_interval = parse_duration_ms(key, value)?,
            "auto.offset.reset" => self.auto_offset_reset = parse_reset(key, value)?,
            "fetch.min.bytes" => self.fetch_min_bytes = parse_positive(key, value)?,
            "fetch.max.wait.ms" => self.fetch_max_wait = parse_duration_ms(key, value)?,
            "fetch.max.bytes" => self.fetch_max_bytes = parse_positive(key, value)?,
            "max.partition.fetch.bytes" => {
                self.max_partition_fetch_bytes = parse_positive(key, value)?
            }
            "max.poll.records" => {
                self.max_poll_records =
                    parse_number::<usize>(key, value, "a positive number of records")?.max(1)
            }
            "check.crcs" => self.check_crcs = boolean(key, value)?,
            "isolation.level" => self.isolation_level = parse_isolation(key, value)?,
            "partition.assignment.strategy" => {
                self.assignment_strategies = parse_strategies(key, value)?
            }
            "default.api.timeout.ms" => self.default_api_timeout = parse_duration_ms(key, value)?,
            API_VERSION_CAPS_PROPERTY => self.api_version_caps = ApiVersionCaps::parse(value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks cross-property rules.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.client.validate()?;
        if self.heartbeat_interval >= self.session_timeout {
            let value = self.heartbeat_interval.as_millis().to_string();
            let problem = ValueProblem::expected("a value below session.timeout.ms");
            return Err(invalid("heartbeat.interval.ms", &value, problem).into());
        }
        if self.assignment_strategies.is_empty() {
            return Err(ConfigError::Missing {
                key: "partition.assignment.strategy",
            });
        }
        Ok(())
    }
}

fn non_empty(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

fn parse_positive(key: &str, value: &str) -> Result<i32, ConfigError> {
    let number = parse_number::<i32>(key, value, "a positive 32-bit number of bytes")?;
    if number <= 0 {
        let problem = ValueProblem::expected("a positive 32-bit number of bytes");
        return Err(invalid(key, value, problem).into());
    }
    Ok(number)
}

fn parse_reset(key: &str, value: &str) -> Result<OffsetReset, ConfigError> {
    match value.trim() {
        "earliest" | "smallest" | "beginning" => Ok(OffsetReset::Earliest),
        "latest" | "largest" | "end" => Ok(OffsetReset::Latest),
        "none" | "error" => Ok(OffsetReset::None),
        _ => Err(invalid(
            key,
            value,
            ValueProblem::expected("earliest, latest or none"),
        )
        .into()),
    }
}

fn parse_isolation(key: &str, value: &str) -> Result<IsolationLevel, ConfigError> {
    match value.trim() {
        "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
        "read_committed" => Ok(IsolationLevel::ReadCommitted),
        _ => {
            let problem = ValueProblem::expected("read_uncommitted or read_committed");
            Err(invalid(key, value, problem).into())
        }
    }
}

fn parse_strategies(key: &str, value: &str) -> Result<Vec<AssignmentStrategy>, ConfigError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            AssignmentStrategy::from_name(name).ok_or_else(|| {
                let problem = ValueProblem::expected("range, roundrobin or cooperative-sticky");
                invalid(key, value, problem).into()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse_with_java_names() {
        let (config, unknown) = ConsumerConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("group.id", "g"),
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "7"),
            ("isolation.level", "read_committed"),
            (
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor, range",
            ),
            ("linger.ms", "5"),
        ])
        .unwrap();
        assert_eq!(config.group_id.as_deref(), Some("g"));
        assert_eq!(config.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(config.max_poll_records, 7);
        assert_eq!(config.isolation_level, IsolationLevel::ReadCommitted);
        assert_eq!(
            config.assignment_strategies,
            [AssignmentStrategy::RoundRobin, AssignmentStrategy::Range]
        );
        assert_eq!(unknown, ["linger.ms"]);
    }

    #[test]
    fn bad_values_are_errors() {
        for (key, value) in [
            ("auto.offset.reset", "sometimes"),
            ("fetch.max.bytes", "0"),
            ("enable.auto.commit", "yes"),
            ("partition.assignment.strategy", "sticky-ish"),
        ] {
            let error = ConsumerConfig::from_properties([
                ("bootstrap.servers", "127.0.0.1:9092"),
                (key, value),
            ])
            .unwrap_err();
            assert!(
                matches!(error, ConfigError::InvalidValue { key: ref k, .. } if k == key),
                "{key}: {error}"
            );
        }
        let error = ConsumerConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("heartbeat.interval.ms", "50000"),
        ])
        .unwrap_err();
        assert!(matches!(error, ConfigError::InvalidValue { .. }));
    }
}
