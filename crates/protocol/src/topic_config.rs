//! Kafka's topic-level configurations, as one table of data: for each key
//! its name, type and valid values, Kafka's default, the broker-level
//! synonyms that supply the default (`log.retention.hours` for
//! `retention.ms`, ...) and a one-line description.
//!
//! This table is the one source every layer derives from: the controller
//! validates CreateTopics and AlterConfigs values against it, the storage
//! crate's typed `LogConfig` checks ranges with it before parsing, and the
//! broker derives its `log.*` keys, DescribeConfigs types, synonyms and
//! documentation from it. It lives in the protocol crate because it is
//! Kafka's public contract (the names and types travel in DescribeConfigs
//! and CreateTopics) and every one of those crates already depends on this
//! one; it is pure data plus the value checks, with no I/O.
//!
//! Values are text, as on the wire. [`ConfigDefinition::validate`] checks a
//! value against the key's type and range; [`ConfigDefinition::normalize`]
//! gives the form to store (trimmed; lists trimmed entry by entry and joined
//! by `,`).

/// The type and valid values of a configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    /// A 32-bit integer in `min..=max`.
    Int {
        /// Smallest valid value.
        min: i32,
        /// Largest valid value.
        max: i32,
    },
    /// A 64-bit integer in `min..=max`.
    Long {
        /// Smallest valid value.
        min: i64,
        /// Largest valid value.
        max: i64,
    },
    /// A floating-point number in `min..=max`.
    Double {
        /// Smallest valid value.
        min: f64,
        /// Largest valid value.
        max: f64,
    },
    /// `true` or `false` (case-insensitive, as Kafka parses it).
    Boolean,
    /// One of the listed words.
    OneOf(&'static [&'static str]),
    /// A comma-separated, non-empty list of the listed words.
    ListOf(&'static [&'static str]),
    /// A comma-separated list of `partition:broker` pairs, or `*`.
    ThrottledReplicas,
    /// Any string.
    Text,
}

/// Kafka's `ConfigType` codes, as DescribeConfigs (v3+) reports them.
pub mod config_type {
    /// A boolean.
    pub const BOOLEAN: i8 = 1;
    /// A string.
    pub const STRING: i8 = 2;
    /// A 32-bit integer.
    pub const INT: i8 = 3;
    /// A 64-bit integer.
    pub const LONG: i8 = 5;
    /// A floating-point number.
    pub const DOUBLE: i8 = 6;
    /// A comma-separated list.
    pub const LIST: i8 = 7;
}

impl ConfigKind {
    /// Kafka's `ConfigType` code of this kind (see [`config_type`]).
    pub fn config_type(&self) -> i8 {
        match self {
            ConfigKind::Int { .. } => config_type::INT,
            ConfigKind::Long { .. } => config_type::LONG,
            ConfigKind::Double { .. } => config_type::DOUBLE,
            ConfigKind::Boolean => config_type::BOOLEAN,
            ConfigKind::OneOf(_) | ConfigKind::Text => config_type::STRING,
            ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas => config_type::LIST,
        }
    }
}

/// A broker-level key that supplies a topic key's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerSynonym {
    /// The broker-level name, e.g. `log.retention.hours`.
    pub name: &'static str,
    /// What one unit of the broker key is in the topic key's unit (3600000
    /// for hours to milliseconds, 1 for the same unit). A negative value of
    /// a scaled key means "no limit" and becomes `-1`, as in Kafka.
    pub scale: i64,
    /// Kafka's default of the broker key itself (`None`: no default, the
    /// next synonym supplies it).
    pub default: Option<&'static str>,
}

/// One topic-level configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigDefinition {
    /// The topic-level name, e.g. `retention.ms`.
    pub name: &'static str,
    /// The broker-level synonym in the topic key's unit, e.g.
    /// `log.retention.ms`: the name a dynamic broker config uses.
    pub broker_name: &'static str,
    /// Further broker-level synonyms in other units, in Kafka's order of
    /// precedence after `broker_name` (`log.retention.minutes`, then
    /// `log.retention.hours`). When there are any, `broker_name` has no
    /// default of its own: the last of them supplies it.
    pub scaled_synonyms: &'static [BrokerSynonym],
    /// Kafka's default value, as text.
    pub default: &'static str,
    /// Type and valid values.
    pub kind: ConfigKind,
    /// A one-line description (written for Strom; the meaning follows
    /// Kafka's documentation of the same key).
    pub documentation: &'static str,
}

/// Why a configuration value is invalid for its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ConfigValueError {
    /// The value must be an integer (of the key's width).
    #[error("not an integer")]
    NotAnInteger,
    /// The value must be a number.
    #[error("not a number")]
    NotANumber,
    /// The value must be `true` or `false`.
    #[error("not a boolean")]
    NotABoolean,
    /// The value is below the minimum.
    #[error("below the minimum {minimum}")]
    BelowMinimum {
        /// The minimum, as text.
        minimum: String,
    },
    /// The value is above the maximum.
    #[error("above the maximum {maximum}")]
    AboveMaximum {
        /// The maximum, as text.
        maximum: String,
    },
    /// The value is not a `host:count,...` list.
    #[error("not a list of host:count entries")]
    NotHostCounts,
    /// The value is not one of the allowed words.
    #[error("not one of: {}", allowed.join(", "))]
    NotAllowed {
        /// The allowed values.
        allowed: Vec<String>,
    },
}

impl ConfigValueError {
    /// [`ConfigValueError::NotAllowed`] with these words.
    pub fn not_allowed(allowed: &[&str]) -> Self {
        ConfigValueError::NotAllowed {
            allowed: allowed.iter().map(|word| (*word).to_owned()).collect(),
        }
    }
}

/// Kafka's `Long.MAX_VALUE`, the "no limit" default of several keys.
pub const LONG_MAX: &str = "9223372036854775807";

const fn long(min: i64) -> ConfigKind {
    ConfigKind::Long { min, max: i64::MAX }
}

const fn int(min: i32) -> ConfigKind {
    ConfigKind::Int { min, max: i32::MAX }
}

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;

/// Compression codecs a topic may demand (`producer` keeps the producer's).
pub const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// The values of `cleanup.policy`.
pub const CLEANUP_POLICIES: &[&str] = &["delete", "compact"];

/// The values of `message.timestamp.type`.
pub const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];

/// Every topic-level configuration, sorted by name.
pub const TOPIC_CONFIGS: &[ConfigDefinition] = &[
    ConfigDefinition {
        name: "cleanup.policy",
        broker_name: "log.cleanup.policy",
        scaled_synonyms: &[],
        default: "delete",
        kind: ConfigKind::ListOf(CLEANUP_POLICIES),
        documentation: "How old segments are discarded: delete them, compact by key, or both.",
    },
    ConfigDefinition {
        name: "compression.gzip.level",
        broker_name: "compression.gzip.level",
        scaled_synonyms: &[],
        default: "-1",
        kind: ConfigKind::Int { min: -1, max: 9 },
        documentation: "Compression level used when compression.type is gzip.",
    },
    ConfigDefinition {
        name: "compression.lz4.level",
        broker_name: "compression.lz4.level",
        scaled_synonyms: &[],
        default: "9",
        kind: ConfigKind::Int { min: 1, max: 17 },
        documentation: "Compression level used when compression.type is lz4.",
    },
    ConfigDefinition {
        name: "compression.type",
        broker_name: "compression.type",
        scaled_synonyms: &[],
        default: "producer",
        kind: ConfigKind::OneOf(COMPRESSION_TYPES),
        documentation: "Codec for stored batches; producer keeps the codec the producer used.",
    },
    ConfigDefinition {
        name: "compression.zstd.level",
        broker_name: "compression.zstd.level",
        scaled_synonyms: &[],
        default: "3",
        kind: ConfigKind::Int {
            min: -131_072,
            max: 22,
        },
        documentation: "Compression level used when compression.type is zstd.",
    },
    ConfigDefinition {
        name: "delete.retention.ms",
        broker_name: "log.cleaner.delete.retention.ms",
        scaled_synonyms: &[],
        default: "86400000",
        kind: long(0),
        documentation: "How long delete tombstones stay readable in a compacted topic.",
    },
    ConfigDefinition {
        name: "file.delete.delay.ms",
        broker_name: "log.segment.delete.delay.ms",
        scaled_synonyms: &[],
        default: "60000",
        kind: long(0),
        documentation: "Delay before a segment removed from the log is deleted from disk.",
    },
    ConfigDefinition {
        name: "flush.messages",
        broker_name: "log.flush.interval.messages",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(1),
        documentation: "Force an fsync after this many appended messages.",
    },
    ConfigDefinition {
        name: "flush.ms",
        broker_name: "log.flush.interval.ms",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(0),
        documentation: "Force an fsync when this much time has passed since the last one.",
    },
    ConfigDefinition {
        name: "follower.replication.throttled.replicas",
        broker_name: "follower.replication.throttled.replicas",
        scaled_synonyms: &[],
        default: "",
        kind: ConfigKind::ThrottledReplicas,
        documentation: "Replicas whose follower fetches are throttled.",
    },
    ConfigDefinition {
        name: "index.interval.bytes",
        broker_name: "log.index.interval.bytes",
        scaled_synonyms: &[],
        default: "4096",
        kind: int(0),
        documentation: "Bytes of log between two offset index entries.",
    },
    ConfigDefinition {
        name: "leader.replication.throttled.replicas",
        broker_name: "leader.replication.throttled.replicas",
        scaled_synonyms: &[],
        default: "",
        kind: ConfigKind::ThrottledReplicas,
        documentation: "Replicas whose leader-side reads are throttled.",
    },
    ConfigDefinition {
        name: "local.retention.bytes",
        broker_name: "log.local.retention.bytes",
        scaled_synonyms: &[],
        default: "-2",
        kind: long(-2),
        documentation: "Tiered storage: bytes kept locally before copied segments are deleted (-2: retention.bytes).",
    },
    ConfigDefinition {
        name: "local.retention.ms",
        broker_name: "log.local.retention.ms",
        scaled_synonyms: &[],
        default: "-2",
        kind: long(-2),
        documentation: "Tiered storage: how long copied segments stay local (-2: retention.ms).",
    },
    ConfigDefinition {
        name: "max.compaction.lag.ms",
        broker_name: "log.cleaner.max.compaction.lag.ms",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(1),
        documentation: "Longest time a record may stay uncompacted.",
    },
    ConfigDefinition {
        name: "max.message.bytes",
        broker_name: "message.max.bytes",
        scaled_synonyms: &[],
        default: "1048588",
        kind: int(0),
        documentation: "Largest record batch the topic accepts, in bytes.",
    },
    ConfigDefinition {
        name: "message.downconversion.enable",
        broker_name: "log.message.downconversion.enable",
        scaled_synonyms: &[],
        default: "true",
        kind: ConfigKind::Boolean,
        documentation: "Whether fetches may down-convert batches for old clients.",
    },
    ConfigDefinition {
        name: "message.format.version",
        broker_name: "log.message.format.version",
        scaled_synonyms: &[],
        default: "3.0-IV1",
        kind: ConfigKind::Text,
        documentation: "Legacy message format version (ignored by recent brokers).",
    },
    ConfigDefinition {
        name: "message.timestamp.after.max.ms",
        broker_name: "log.message.timestamp.after.max.ms",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(0),
        documentation: "How far in the future a CreateTime timestamp may lie.",
    },
    ConfigDefinition {
        name: "message.timestamp.before.max.ms",
        broker_name: "log.message.timestamp.before.max.ms",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(0),
        documentation: "How far in the past a CreateTime timestamp may lie.",
    },
    ConfigDefinition {
        name: "message.timestamp.difference.max.ms",
        broker_name: "log.message.timestamp.difference.max.ms",
        scaled_synonyms: &[],
        default: LONG_MAX,
        kind: long(0),
        documentation:
            "Largest allowed gap between a CreateTime timestamp and the broker's clock.",
    },
    ConfigDefinition {
        name: "message.timestamp.type",
        broker_name: "log.message.timestamp.type",
        scaled_synonyms: &[],
        default: "CreateTime",
        kind: ConfigKind::OneOf(TIMESTAMP_TYPES),
        documentation: "Whether records keep the producer's timestamp (CreateTime) or get the append time (LogAppendTime).",
    },
    ConfigDefinition {
        name: "min.cleanable.dirty.ratio",
        broker_name: "log.cleaner.min.cleanable.ratio",
        scaled_synonyms: &[],
        default: "0.5",
        kind: ConfigKind::Double { min: 0.0, max: 1.0 },
        documentation: "Share of uncompacted log that makes a partition eligible for compaction.",
    },
    ConfigDefinition {
        name: "min.compaction.lag.ms",
        broker_name: "log.cleaner.min.compaction.lag.ms",
        scaled_synonyms: &[],
        default: "0",
        kind: long(0),
        documentation: "Shortest time a record stays uncompacted.",
    },
    ConfigDefinition {
        name: "min.insync.replicas",
        broker_name: "min.insync.replicas",
        scaled_synonyms: &[],
        default: "1",
        kind: int(1),
        documentation: "Fewest in-sync replicas an acks=all write needs.",
    },
    ConfigDefinition {
        name: "preallocate",
        broker_name: "log.preallocate",
        scaled_synonyms: &[],
        default: "false",
        kind: ConfigKind::Boolean,
        documentation: "Whether new segment files are preallocated.",
    },
    // Kafka accepts any negative value here; -1 is the one that means "no
    // limit", and strom-storage's LogConfig accepts only that one.
    ConfigDefinition {
        name: "remote.storage.enable",
        broker_name: "remote.storage.enable",
        scaled_synonyms: &[],
        default: "false",
        kind: ConfigKind::Boolean,
        documentation: "Tiered storage: copy closed segments to the remote store and read them back from it.",
    },
    ConfigDefinition {
        name: "retention.bytes",
        broker_name: "log.retention.bytes",
        scaled_synonyms: &[],
        default: "-1",
        kind: long(-1),
        documentation:
            "Largest size of a partition before old segments are deleted; -1 for no limit.",
    },
    ConfigDefinition {
        name: "retention.ms",
        broker_name: "log.retention.ms",
        scaled_synonyms: &[
            BrokerSynonym {
                name: "log.retention.minutes",
                scale: MINUTE_MS,
                default: None,
            },
            BrokerSynonym {
                name: "log.retention.hours",
                scale: HOUR_MS,
                default: Some("168"),
            },
        ],
        default: "604800000",
        kind: long(-1),
        documentation: "How long segments are kept before deletion; -1 for no limit.",
    },
    // 14 bytes: the smallest legacy record (Kafka's RECORD_OVERHEAD_V0).
    ConfigDefinition {
        name: "segment.bytes",
        broker_name: "log.segment.bytes",
        scaled_synonyms: &[],
        default: "1073741824",
        kind: int(14),
        documentation: "Size at which a new log segment is started.",
    },
    ConfigDefinition {
        name: "segment.index.bytes",
        broker_name: "log.index.size.max.bytes",
        scaled_synonyms: &[],
        default: "10485760",
        kind: int(4),
        documentation: "Size of a segment's offset and time indexes.",
    },
    ConfigDefinition {
        name: "segment.jitter.ms",
        broker_name: "log.roll.jitter.ms",
        scaled_synonyms: &[BrokerSynonym {
            name: "log.roll.jitter.hours",
            scale: HOUR_MS,
            default: Some("0"),
        }],
        default: "0",
        kind: long(0),
        documentation: "Random delay subtracted from segment.ms to spread segment rolls.",
    },
    ConfigDefinition {
        name: "segment.ms",
        broker_name: "log.roll.ms",
        scaled_synonyms: &[BrokerSynonym {
            name: "log.roll.hours",
            scale: HOUR_MS,
            default: Some("168"),
        }],
        default: "604800000",
        kind: long(1),
        documentation: "Age at which a new log segment is started.",
    },
    ConfigDefinition {
        name: "unclean.leader.election.enable",
        broker_name: "unclean.leader.election.enable",
        scaled_synonyms: &[],
        default: "false",
        kind: ConfigKind::Boolean,
        documentation: "Whether a replica outside the ISR may become leader (risking data loss).",
    },
];

/// The definition of a topic-level key.
pub fn topic_config(name: &str) -> Option<&'static ConfigDefinition> {
    TOPIC_CONFIGS
        .iter()
        .find(|definition| definition.name == name)
}

/// The definition whose broker-level synonym in the topic key's unit
/// ([`ConfigDefinition::broker_name`]) is `broker_name`.
pub fn topic_config_by_broker_name(broker_name: &str) -> Option<&'static ConfigDefinition> {
    TOPIC_CONFIGS
        .iter()
        .find(|definition| definition.broker_name == broker_name)
}

/// Every broker-level key that supplies a topic key's default, with the
/// topic key's definition, each topic key's synonyms in Kafka's order of
/// precedence.
pub fn broker_synonyms() -> impl Iterator<Item = (BrokerSynonym, &'static ConfigDefinition)> {
    TOPIC_CONFIGS.iter().flat_map(|definition| {
        definition
            .broker_synonyms()
            .map(move |synonym| (synonym, definition))
    })
}

impl ConfigDefinition {
    /// The broker-level synonyms of this key in Kafka's order of precedence:
    /// [`broker_name`](Self::broker_name), then the scaled ones.
    pub fn broker_synonyms(&self) -> impl Iterator<Item = BrokerSynonym> + '_ {
        let primary = BrokerSynonym {
            name: self.broker_name,
            scale: 1,
            default: self.scaled_synonyms.is_empty().then_some(self.default),
        };
        std::iter::once(primary).chain(self.scaled_synonyms.iter().copied())
    }

    /// Whether the value is a comma-separated list (APPEND and SUBTRACT
    /// apply to it).
    pub fn is_list(&self) -> bool {
        matches!(
            self.kind,
            ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas
        )
    }

    /// The value as it is stored: trimmed, and for lists the entries
    /// trimmed and joined by `,` without empty entries (Kafka trims config
    /// values when it parses them; storing them trimmed lets every reader
    /// parse them without trimming).
    pub fn normalize(&self, value: &str) -> String {
        if self.is_list() {
            split_list(value).join(",")
        } else {
            value.trim().to_owned()
        }
    }

    /// Checks `value` (surrounding whitespace ignored) against the type and
    /// range.
    pub fn validate(&self, value: &str) -> Result<(), ConfigValueError> {
        let trimmed = value.trim();
        match self.kind {
            ConfigKind::Int { min, max } => {
                let parsed = trimmed
                    .parse::<i32>()
                    .map_err(|_| ConfigValueError::NotAnInteger)?;
                check_range(parsed, min, max)
            }
            ConfigKind::Long { min, max } => {
                let parsed = trimmed
                    .parse::<i64>()
                    .map_err(|_| ConfigValueError::NotAnInteger)?;
                check_range(parsed, min, max)
            }
            ConfigKind::Double { min, max } => {
                let parsed = trimmed
                    .parse::<f64>()
                    .map_err(|_| ConfigValueError::NotANumber)?;
                if parsed.is_nan() {
                    return Err(ConfigValueError::NotANumber);
                }
                check_range(parsed, min, max)
            }
            ConfigKind::Boolean => parse_boolean(trimmed).map(|_| ()),
            ConfigKind::OneOf(allowed) => {
                if allowed.contains(&trimmed) {
                    Ok(())
                } else {
                    Err(ConfigValueError::not_allowed(allowed))
                }
            }
            ConfigKind::ListOf(allowed) => validate_word_list(trimmed, allowed),
            ConfigKind::ThrottledReplicas => validate_throttled_replicas(trimmed),
            ConfigKind::Text => Ok(()),
        }
    }
}

/// Parses a Kafka boolean: `true` or `false`, case-insensitive.
pub fn parse_boolean(value: &str) -> Result<bool, ConfigValueError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigValueError::NotABoolean),
    }
}

fn check_range<T: PartialOrd + ToString>(value: T, min: T, max: T) -> Result<(), ConfigValueError> {
    if value < min {
        Err(ConfigValueError::BelowMinimum {
            minimum: min.to_string(),
        })
    } else if value > max {
        Err(ConfigValueError::AboveMaximum {
            maximum: max.to_string(),
        })
    } else {
        Ok(())
    }
}

/// Splits a Kafka list value: comma-separated, entries trimmed, empty
/// entries dropped.
pub fn split_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .collect()
}

fn validate_word_list(
    value: &str,
    allowed: &'static [&'static str],
) -> Result<(), ConfigValueError> {
    let entries = split_list(value);
    if entries.is_empty() || entries.iter().any(|entry| !allowed.contains(entry)) {
        return Err(ConfigValueError::not_allowed(allowed));
    }
    Ok(())
}

fn validate_throttled_replicas(value: &str) -> Result<(), ConfigValueError> {
    if value == "*" || value.is_empty() {
        return Ok(());
    }
    let valid = split_list(value).iter().all(|entry| {
        entry.split_once(':').is_some_and(|(partition, broker)| {
            partition.trim().parse::<u32>().is_ok() && broker.trim().parse::<u32>().is_ok()
        })
    });
    if valid {
        Ok(())
    } else {
        Err(ConfigValueError::not_allowed(&[
            "*",
            "<partition>:<broker>,...",
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_sorted_and_defaults_valid() {
        for pair in TOPIC_CONFIGS.windows(2) {
            assert!(pair[0].name < pair[1].name, "{} order", pair[1].name);
        }
        for definition in TOPIC_CONFIGS {
            assert_eq!(
                definition.validate(definition.default),
                Ok(()),
                "{}",
                definition.name
            );
            assert!(!definition.documentation.is_empty(), "{}", definition.name);
        }
    }

    #[test]
    fn broker_names_are_unique_and_each_key_has_one_default() {
        let names: Vec<&str> = broker_synonyms().map(|(synonym, _)| synonym.name).collect();
        for (index, name) in names.iter().enumerate() {
            assert!(!names[..index].contains(name), "{name} listed twice");
        }
        for definition in TOPIC_CONFIGS {
            let defaults = definition
                .broker_synonyms()
                .filter(|synonym| synonym.default.is_some())
                .count();
            assert_eq!(defaults, 1, "{}", definition.name);
        }
        let retention = topic_config("retention.ms").expect("retention.ms");
        let names: Vec<&str> = retention.broker_synonyms().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours"
            ]
        );
    }

    #[test]
    fn scaled_defaults_equal_the_topic_default() {
        for definition in TOPIC_CONFIGS {
            for synonym in definition.scaled_synonyms {
                let default: i64 = synonym.default.map_or(Ok(0), str::parse).expect("a number");
                if synonym.default.is_some() {
                    assert_eq!(
                        (default * synonym.scale).to_string(),
                        definition.default,
                        "{}",
                        synonym.name
                    );
                }
            }
        }
    }

    #[test]
    fn values_are_checked_for_type_and_range() {
        let check = |name: &str, value: &str| topic_config(name).expect(name).validate(value);
        assert_eq!(check("retention.ms", "-1"), Ok(()));
        assert_eq!(
            check("retention.ms", "-2"),
            Err(ConfigValueError::BelowMinimum {
                minimum: "-1".into()
            })
        );
        assert_eq!(
            check("segment.bytes", "4294967296"),
            Err(ConfigValueError::NotAnInteger)
        );
        assert_eq!(
            check("compression.gzip.level", "10"),
            Err(ConfigValueError::AboveMaximum {
                maximum: "9".into()
            })
        );
        assert_eq!(
            check("min.cleanable.dirty.ratio", "NaN"),
            Err(ConfigValueError::NotANumber)
        );
        assert_eq!(check("preallocate", "TRUE"), Ok(()));
        assert_eq!(
            check("preallocate", "yes"),
            Err(ConfigValueError::NotABoolean)
        );
        assert!(check("cleanup.policy", " compact , delete ").is_ok());
        assert!(check("cleanup.policy", "").is_err());
        assert!(check("leader.replication.throttled.replicas", "0-1").is_err());
        assert_eq!(
            ConfigValueError::not_allowed(CLEANUP_POLICIES).to_string(),
            "not one of: delete, compact"
        );
    }

    #[test]
    fn config_types_follow_the_kind() {
        let type_of = |name: &str| topic_config(name).expect(name).kind.config_type();
        assert_eq!(type_of("cleanup.policy"), config_type::LIST);
        assert_eq!(type_of("retention.ms"), config_type::LONG);
        assert_eq!(type_of("segment.bytes"), config_type::INT);
        assert_eq!(type_of("preallocate"), config_type::BOOLEAN);
        assert_eq!(type_of("min.cleanable.dirty.ratio"), config_type::DOUBLE);
        assert_eq!(type_of("compression.type"), config_type::STRING);
    }

    #[test]
    fn split_list_trims_and_drops_empty_entries() {
        assert_eq!(split_list(" a, ,b ,"), vec!["a", "b"]);
    }
}
