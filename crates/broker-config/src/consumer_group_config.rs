//! The settings of consumer-protocol groups (KIP-848), under Kafka's
//! `group.consumer.*` names.

use std::time::Duration;

use strom_config::{invalid, Lookup};

use crate::error::{ConfigError, ValueProblem};

/// The defaults of the `group.consumer.*` keys, as Kafka 4.x has them.
pub(crate) const CONSUMER_GROUP_KEYS: &[(&str, &str)] = &[
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.min.session.timeout.ms", "45000"),
    ("group.consumer.max.session.timeout.ms", "60000"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.min.heartbeat.interval.ms", "5000"),
    ("group.consumer.max.heartbeat.interval.ms", "15000"),
    ("group.consumer.max.size", "2147483647"),
    ("group.consumer.assignors", "uniform,range"),
];

/// The server-side assignors Strom has, by Kafka's short and class names.
const ASSIGNORS: &[(&str, &str)] = &[
    (
        "uniform",
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    ),
    (
        "range",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    ),
];

/// `group.consumer.*`: sessions, heartbeats, size and assignors of
/// consumer-protocol groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    /// `group.consumer.session.timeout.ms`, within the min and max below.
    pub session_timeout: Duration,
    /// `group.consumer.min.session.timeout.ms`.
    pub min_session_timeout: Duration,
    /// `group.consumer.max.session.timeout.ms`.
    pub max_session_timeout: Duration,
    /// `group.consumer.heartbeat.interval.ms`, within the min and max below
    /// and below the session timeout.
    pub heartbeat_interval: Duration,
    /// `group.consumer.min.heartbeat.interval.ms`.
    pub min_heartbeat_interval: Duration,
    /// `group.consumer.max.heartbeat.interval.ms`.
    pub max_heartbeat_interval: Duration,
    /// `group.consumer.max.size`.
    pub max_size: usize,
    /// `group.consumer.assignors`: short names (`uniform`, `range`), in
    /// order; the first is the default.
    pub assignors: Vec<String>,
}

impl ConsumerGroupSettings {
    /// Reads and checks the settings.
    pub(crate) fn read(lookup: &Lookup<'_>) -> Result<ConsumerGroupSettings, ConfigError> {
        let settings = ConsumerGroupSettings {
            session_timeout: lookup.millis("group.consumer.session.timeout.ms")?,
            min_session_timeout: lookup.millis("group.consumer.min.session.timeout.ms")?,
            max_session_timeout: lookup.millis("group.consumer.max.session.timeout.ms")?,
            heartbeat_interval: lookup.millis("group.consumer.heartbeat.interval.ms")?,
            min_heartbeat_interval: lookup.millis("group.consumer.min.heartbeat.interval.ms")?,
            max_heartbeat_interval: lookup.millis("group.consumer.max.heartbeat.interval.ms")?,
            max_size: lookup.count("group.consumer.max.size", 1)?,
            assignors: assignors(lookup)?,
        };
        within(
            lookup,
            "group.consumer.session.timeout.ms",
            settings.session_timeout,
            settings.min_session_timeout,
            settings.max_session_timeout,
        )?;
        within(
            lookup,
            "group.consumer.heartbeat.interval.ms",
            settings.heartbeat_interval,
            settings.min_heartbeat_interval,
            settings.max_heartbeat_interval.min(
                settings
                    .session_timeout
                    .saturating_sub(Duration::from_millis(1)),
            ),
        )?;
        Ok(settings)
    }
}

fn within(
    lookup: &Lookup<'_>,
    key: &str,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ConfigError> {
    if value >= min && value <= max {
        return Ok(());
    }
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    Err(invalid(
        key,
        &lookup.string(key),
        ValueProblem::OutOfRange {
            min: millis(min),
            max: millis(max),
        },
    )
    .into())
}

fn assignors(lookup: &Lookup<'_>) -> Result<Vec<String>, ConfigError> {
    let key = "group.consumer.assignors";
    let text = lookup.string(key);
    let text = text.as_str();
    let mut names = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let known = ASSIGNORS
            .iter()
            .find(|(short, class)| item == *short || item == *class);
        match known {
            Some((short, _)) => names.push((*short).to_owned()),
            None => {
                return Err(invalid(
                    key,
                    text,
                    ValueProblem::Expected {
                        expected: "a list of uniform and range",
                    },
                )
                .into())
            }
        }
    }
    if names.is_empty() {
        return Err(invalid(
            key,
            text,
            ValueProblem::Expected {
                expected: "at least one assignor",
            },
        )
        .into());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use strom_config::Lookup;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<ConsumerGroupSettings, ConfigError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let defaults: &[&strom_config::lookup::Defaults] = &[CONSUMER_GROUP_KEYS];
        ConsumerGroupSettings::read(&Lookup::with_defaults(&map, defaults))
    }

    #[test]
    fn defaults_are_kafkas() {
        let settings = read(&[]).expect("defaults parse");
        assert_eq!(settings.session_timeout, Duration::from_secs(45));
        assert_eq!(settings.heartbeat_interval, Duration::from_secs(5));
        assert_eq!(settings.max_size, i32::MAX as usize);
        assert_eq!(settings.assignors, vec!["uniform", "range"]);
    }

    #[test]
    fn class_names_and_order_are_kept() {
        let settings = read(&[(
            "group.consumer.assignors",
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
        )])
        .expect("parses");
        assert_eq!(settings.assignors, vec!["range", "uniform"]);
    }

    #[test]
    fn out_of_bounds_and_unknown_values_are_refused() {
        assert!(read(&[("group.consumer.session.timeout.ms", "10000")]).is_err());
        assert!(read(&[("group.consumer.heartbeat.interval.ms", "20000")]).is_err());
        assert!(read(&[("group.consumer.assignors", "sticky")]).is_err());
        assert!(read(&[("group.consumer.assignors", " , ")]).is_err());
        assert!(read(&[("group.consumer.max.size", "0")]).is_err());
        let relaxed = read(&[
            ("group.consumer.min.session.timeout.ms", "6000"),
            ("group.consumer.session.timeout.ms", "6000"),
            ("group.consumer.min.heartbeat.interval.ms", "500"),
            ("group.consumer.heartbeat.interval.ms", "500"),
        ])
        .expect("lower bounds move the valid range");
        assert_eq!(relaxed.session_timeout, Duration::from_secs(6));
    }
}
