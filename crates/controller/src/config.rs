//! The table of topic-level configurations the controller accepts: Kafka's
//! names, types, valid ranges and defaults, with each key's broker-level
//! synonym (the `server.properties` name that supplies its default).
//!
//! This is the one place the controller validates configuration keys and
//! values; `strom-storage`'s typed `LogConfig` parses the same keys and
//! must agree with the ranges here. Values are stored as strings, trimmed
//! (lists: entries trimmed, joined by `,`), and parsed by their consumers.
//!
//! Unknown topic keys are rejected (`INVALID_CONFIG`), as Kafka does for
//! CreateTopics and AlterConfigs. Broker resources accept the broker-level
//! synonyms of these keys (the dynamic, cluster-wide log defaults).

use crate::error::ConfigProblem;

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

/// One topic-level configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigDefinition {
    /// The topic-level name, e.g. `retention.ms`.
    pub name: &'static str,
    /// The broker-level synonym that supplies the default, e.g.
    /// `log.retention.ms`.
    pub broker_name: &'static str,
    /// Kafka's default value, as text.
    pub default: &'static str,
    /// Type and valid values.
    pub kind: ConfigKind,
}

const LONG_MAX: &str = "9223372036854775807";

const fn long(min: i64) -> ConfigKind {
    ConfigKind::Long { min, max: i64::MAX }
}

const fn int(min: i32) -> ConfigKind {
    ConfigKind::Int { min, max: i32::MAX }
}

const fn definition(
    name: &'static str,
    broker_name: &'static str,
    default: &'static str,
    kind: ConfigKind,
) -> ConfigDefinition {
    ConfigDefinition {
        name,
        broker_name,
        default,
        kind,
    }
}

/// Compression codecs a topic may demand (`producer` keeps the producer's).
pub const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Every topic-level configuration the controller knows, by name.
pub const TOPIC_CONFIGS: &[ConfigDefinition] = &[
    definition(
        "cleanup.policy",
        "log.cleanup.policy",
        "delete",
        ConfigKind::ListOf(&["delete", "compact"]),
    ),
    definition(
        "compression.gzip.level",
        "compression.gzip.level",
        "-1",
        ConfigKind::Int { min: -1, max: 9 },
    ),
    definition(
        "compression.lz4.level",
        "compression.lz4.level",
        "9",
        ConfigKind::Int { min: 1, max: 17 },
    ),
    definition(
        "compression.type",
        "compression.type",
        "producer",
        ConfigKind::OneOf(COMPRESSION_TYPES),
    ),
    definition(
        "compression.zstd.level",
        "compression.zstd.level",
        "3",
        ConfigKind::Int {
            min: -131_072,
            max: 22,
        },
    ),
    definition(
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        "86400000",
        long(0),
    ),
    definition(
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
        "60000",
        long(0),
    ),
    definition(
        "flush.messages",
        "log.flush.interval.messages",
        LONG_MAX,
        long(1),
    ),
    definition("flush.ms", "log.flush.interval.ms", LONG_MAX, long(0)),
    definition(
        "follower.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "",
        ConfigKind::ThrottledReplicas,
    ),
    definition(
        "index.interval.bytes",
        "log.index.interval.bytes",
        "4096",
        int(0),
    ),
    definition(
        "leader.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "",
        ConfigKind::ThrottledReplicas,
    ),
    definition(
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        long(1),
    ),
    definition("max.message.bytes", "message.max.bytes", "1048588", int(0)),
    definition(
        "message.downconversion.enable",
        "log.message.downconversion.enable",
        "true",
        ConfigKind::Boolean,
    ),
    definition(
        "message.format.version",
        "log.message.format.version",
        "3.0-IV1",
        ConfigKind::Text,
    ),
    definition(
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        LONG_MAX,
        long(0),
    ),
    definition(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        LONG_MAX,
        long(0),
    ),
    definition(
        "message.timestamp.difference.max.ms",
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
        long(0),
    ),
    definition(
        "message.timestamp.type",
        "log.message.timestamp.type",
        "CreateTime",
        ConfigKind::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    definition(
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        "0.5",
        ConfigKind::Double { min: 0.0, max: 1.0 },
    ),
    definition(
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        "0",
        long(0),
    ),
    definition("min.insync.replicas", "min.insync.replicas", "1", int(1)),
    definition(
        "preallocate",
        "log.preallocate",
        "false",
        ConfigKind::Boolean,
    ),
    // Kafka accepts any negative value here; -1 is the one that means "no
    // limit", and strom-storage's LogConfig accepts only that one.
    definition("retention.bytes", "log.retention.bytes", "-1", long(-1)),
    definition("retention.ms", "log.retention.ms", "604800000", long(-1)),
    // 14 bytes: the smallest legacy record (Kafka's RECORD_OVERHEAD_V0).
    definition("segment.bytes", "log.segment.bytes", "1073741824", int(14)),
    definition(
        "segment.index.bytes",
        "log.index.size.max.bytes",
        "10485760",
        int(4),
    ),
    definition("segment.jitter.ms", "log.roll.jitter.ms", "0", long(0)),
    definition("segment.ms", "log.roll.ms", "604800000", long(1)),
    definition(
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        "false",
        ConfigKind::Boolean,
    ),
];

/// The definition of a topic-level key.
pub fn topic_config(name: &str) -> Option<&'static ConfigDefinition> {
    TOPIC_CONFIGS
        .iter()
        .find(|definition| definition.name == name)
}

/// The definition whose broker-level synonym is `broker_name`.
pub fn topic_config_by_broker_name(broker_name: &str) -> Option<&'static ConfigDefinition> {
    TOPIC_CONFIGS
        .iter()
        .find(|definition| definition.broker_name == broker_name)
}

/// Validates a topic-level key and value; returns the value to store
/// (normalized, see [`ConfigDefinition::normalize`]).
pub fn validate_topic_config(name: &str, value: &str) -> Result<String, ConfigProblem> {
    let definition = topic_config(name).ok_or(ConfigProblem::UnknownKey)?;
    definition.validate(value)?;
    Ok(definition.normalize(value))
}

/// Validates a dynamic broker-level key (a broker synonym of a topic key)
/// and value; returns the value to store.
pub fn validate_broker_config(name: &str, value: &str) -> Result<String, ConfigProblem> {
    let definition = topic_config_by_broker_name(name).ok_or(ConfigProblem::UnknownKey)?;
    definition.validate(value)?;
    Ok(definition.normalize(value))
}

impl ConfigDefinition {
    /// Whether the value is a comma-separated list (APPEND and SUBTRACT
    /// apply to it).
    pub fn is_list(&self) -> bool {
        matches!(
            self.kind,
            ConfigKind::ListOf(_) | ConfigKind::ThrottledReplicas
        )
    }

    /// The value as the controller stores it: trimmed, and for lists the
    /// entries trimmed and joined by `,` without empty entries (Kafka trims
    /// config values when it parses them; storing them trimmed lets every
    /// reader parse them without trimming).
    pub fn normalize(&self, value: &str) -> String {
        if self.is_list() {
            split_list(value).join(",")
        } else {
            value.trim().to_owned()
        }
    }

    /// Checks `value` against the type and range.
    pub fn validate(&self, value: &str) -> Result<(), ConfigProblem> {
        let trimmed = value.trim();
        match self.kind {
            ConfigKind::Int { min, max } => {
                let parsed = trimmed
                    .parse::<i32>()
                    .map_err(|_| ConfigProblem::NotAnInteger)?;
                check_range(parsed, min, max)
            }
            ConfigKind::Long { min, max } => {
                let parsed = trimmed
                    .parse::<i64>()
                    .map_err(|_| ConfigProblem::NotAnInteger)?;
                check_range(parsed, min, max)
            }
            ConfigKind::Double { min, max } => {
                let parsed = trimmed
                    .parse::<f64>()
                    .map_err(|_| ConfigProblem::NotANumber)?;
                if parsed.is_nan() {
                    return Err(ConfigProblem::NotANumber);
                }
                check_range(parsed, min, max)
            }
            ConfigKind::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err(ConfigProblem::NotABoolean),
            },
            ConfigKind::OneOf(allowed) => {
                if allowed.contains(&trimmed) {
                    Ok(())
                } else {
                    Err(ConfigProblem::NotAllowed { allowed })
                }
            }
            ConfigKind::ListOf(allowed) => validate_word_list(trimmed, allowed),
            ConfigKind::ThrottledReplicas => validate_throttled_replicas(trimmed),
            ConfigKind::Text => Ok(()),
        }
    }
}

fn check_range<T: PartialOrd + ToString>(value: T, min: T, max: T) -> Result<(), ConfigProblem> {
    if value < min {
        Err(ConfigProblem::BelowMinimum {
            minimum: min.to_string(),
        })
    } else if value > max {
        Err(ConfigProblem::AboveMaximum {
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

fn validate_word_list(value: &str, allowed: &'static [&'static str]) -> Result<(), ConfigProblem> {
    let entries = split_list(value);
    if entries.is_empty() || entries.iter().any(|entry| !allowed.contains(entry)) {
        return Err(ConfigProblem::NotAllowed { allowed });
    }
    Ok(())
}

fn validate_throttled_replicas(value: &str) -> Result<(), ConfigProblem> {
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
        Err(ConfigProblem::NotAllowed {
            allowed: &["*", "<partition>:<broker>,..."],
        })
    }
}

/// Where an effective config value comes from, highest precedence first.
/// The names follow Kafka's `DescribeConfigs` config sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigSource {
    /// Set on the topic (`DYNAMIC_TOPIC_CONFIG`).
    DynamicTopic,
    /// Set dynamically on this broker (`DYNAMIC_BROKER_CONFIG`).
    DynamicBroker,
    /// Set dynamically as the cluster-wide default
    /// (`DYNAMIC_DEFAULT_BROKER_CONFIG`).
    DynamicDefaultBroker,
    /// From the broker's `server.properties` (`STATIC_BROKER_CONFIG`).
    StaticBroker,
    /// Kafka's built-in default (`DEFAULT_CONFIG`).
    Default,
}

/// A topic config's effective value and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedConfig {
    /// The definition.
    pub definition: &'static ConfigDefinition,
    /// The effective value.
    pub value: String,
    /// Where the value comes from.
    pub source: ConfigSource,
}

/// The effective value of every topic config for `topic` as seen by
/// `broker_id`: the topic's own value, else the broker's dynamic value,
/// else the cluster-wide dynamic default, else `static_broker_value` (the
/// broker's `server.properties`, looked up by broker-level name), else
/// Kafka's default. This is what DescribeConfigs reports and what a
/// partition's log configuration should be built from.
pub fn resolve_topic_configs(
    image: &crate::image::MetadataImage,
    topic: &str,
    broker_id: crate::image::BrokerId,
    static_broker_value: impl Fn(&str) -> Option<String>,
) -> Vec<ResolvedConfig> {
    use crate::image::ConfigResource;
    let topic_configs = image.configs(&ConfigResource::Topic(topic.to_owned()));
    let broker_configs = image.configs(&ConfigResource::Broker(Some(broker_id)));
    let cluster_configs = image.configs(&ConfigResource::Broker(None));
    TOPIC_CONFIGS
        .iter()
        .map(|definition| {
            let (value, source) = if let Some(value) = topic_configs.get(definition.name) {
                (value.clone(), ConfigSource::DynamicTopic)
            } else if let Some(value) = broker_configs.get(definition.broker_name) {
                (value.clone(), ConfigSource::DynamicBroker)
            } else if let Some(value) = cluster_configs.get(definition.broker_name) {
                (value.clone(), ConfigSource::DynamicDefaultBroker)
            } else if let Some(value) = static_broker_value(definition.broker_name) {
                (value, ConfigSource::StaticBroker)
            } else {
                (definition.default.to_owned(), ConfigSource::Default)
            };
            ResolvedConfig {
                definition,
                value,
                source,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_unique_and_defaults_valid() {
        for (index, definition) in TOPIC_CONFIGS.iter().enumerate() {
            assert!(
                !TOPIC_CONFIGS[..index]
                    .iter()
                    .any(|earlier| earlier.name == definition.name),
                "{} listed twice",
                definition.name
            );
            assert_eq!(
                definition.validate(definition.default),
                Ok(()),
                "{}",
                definition.name
            );
        }
    }

    #[test]
    fn unknown_key_is_rejected() {
        assert_eq!(
            validate_topic_config("retention.hours", "1"),
            Err(ConfigProblem::UnknownKey)
        );
        assert_eq!(
            validate_broker_config("retention.ms", "1"),
            Err(ConfigProblem::UnknownKey)
        );
    }

    #[test]
    fn integers_are_checked_for_type_and_range() {
        assert!(validate_topic_config("retention.ms", "-1").is_ok());
        assert_eq!(
            validate_topic_config("retention.ms", "-2"),
            Err(ConfigProblem::BelowMinimum {
                minimum: "-1".into()
            })
        );
        assert_eq!(
            validate_topic_config("retention.ms", "1h"),
            Err(ConfigProblem::NotAnInteger)
        );
        assert_eq!(
            validate_topic_config("segment.bytes", "13"),
            Err(ConfigProblem::BelowMinimum {
                minimum: "14".into()
            })
        );
        assert_eq!(
            validate_topic_config("segment.bytes", "4294967296"),
            Err(ConfigProblem::NotAnInteger)
        );
        assert_eq!(
            validate_topic_config("min.insync.replicas", "0"),
            Err(ConfigProblem::BelowMinimum {
                minimum: "1".into()
            })
        );
        assert_eq!(
            validate_topic_config("compression.gzip.level", "10"),
            Err(ConfigProblem::AboveMaximum {
                maximum: "9".into()
            })
        );
        assert!(validate_topic_config("retention.bytes", "-1").is_ok());
    }

    #[test]
    fn doubles_booleans_and_words_are_checked() {
        assert!(validate_topic_config("min.cleanable.dirty.ratio", "0.9").is_ok());
        assert_eq!(
            validate_topic_config("min.cleanable.dirty.ratio", "1.5"),
            Err(ConfigProblem::AboveMaximum {
                maximum: "1".into()
            })
        );
        assert_eq!(
            validate_topic_config("min.cleanable.dirty.ratio", "NaN"),
            Err(ConfigProblem::NotANumber)
        );
        assert!(validate_topic_config("preallocate", "TRUE").is_ok());
        assert_eq!(
            validate_topic_config("preallocate", "yes"),
            Err(ConfigProblem::NotABoolean)
        );
        assert!(validate_topic_config("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(matches!(
            validate_topic_config("message.timestamp.type", "logappendtime"),
            Err(ConfigProblem::NotAllowed { .. })
        ));
        assert!(validate_topic_config("compression.type", "zstd").is_ok());
    }

    #[test]
    fn lists_are_checked_entry_by_entry() {
        assert!(validate_topic_config("cleanup.policy", "compact,delete").is_ok());
        assert!(validate_topic_config("cleanup.policy", " compact , delete ").is_ok());
        assert!(validate_topic_config("cleanup.policy", "compact,shred").is_err());
        assert!(validate_topic_config("cleanup.policy", "").is_err());
        assert!(validate_topic_config("leader.replication.throttled.replicas", "0:1,1:2").is_ok());
        assert!(validate_topic_config("leader.replication.throttled.replicas", "*").is_ok());
        assert!(validate_topic_config("leader.replication.throttled.replicas", "0-1").is_err());
        assert!(topic_config("cleanup.policy").unwrap().is_list());
        assert!(!topic_config("retention.ms").unwrap().is_list());
    }

    #[test]
    fn broker_synonyms_validate_like_their_topic_key() {
        assert!(validate_broker_config("log.retention.ms", "1000").is_ok());
        assert!(validate_broker_config("log.retention.ms", "x").is_err());
        assert_eq!(
            topic_config_by_broker_name("message.max.bytes")
                .unwrap()
                .name,
            "max.message.bytes"
        );
    }

    #[test]
    fn resolution_follows_kafkas_precedence() {
        use crate::image::{ConfigResource, MetadataImage};
        use crate::records::{
            uuid_to_bytes, ConfigRecord, ConfigResourceType, MetadataRecord, Record, TopicRecord,
        };
        let config = |resource_type: ConfigResourceType, resource: &str, key: &str, value: &str| {
            MetadataRecord::new(Record::Config(ConfigRecord {
                resource_type: resource_type as i32,
                resource_name: resource.into(),
                name: key.into(),
                value: Some(value.into()),
            }))
        };
        let records = [
            MetadataRecord::new(Record::Topic(TopicRecord {
                name: "t".into(),
                topic_id: uuid_to_bytes(uuid::Uuid::from_u128(5)),
            })),
            config(ConfigResourceType::Topic, "t", "retention.ms", "1"),
            config(ConfigResourceType::Broker, "1", "log.retention.ms", "2"),
            config(ConfigResourceType::Broker, "1", "log.segment.bytes", "2000"),
            config(ConfigResourceType::Broker, "", "log.segment.bytes", "3000"),
            config(
                ConfigResourceType::Broker,
                "",
                "log.cleanup.policy",
                "compact",
            ),
        ];
        let image = MetadataImage::from_snapshot_records(0, &records).unwrap();
        assert_eq!(image.configs(&ConfigResource::Broker(None)).len(), 2);
        let static_value = |name: &str| (name == "log.roll.ms").then(|| "77".to_owned());
        let resolved = resolve_topic_configs(&image, "t", 1, static_value);
        let find = |name: &str| {
            let entry = resolved
                .iter()
                .find(|entry| entry.definition.name == name)
                .unwrap();
            (entry.value.as_str(), entry.source)
        };
        assert_eq!(find("retention.ms"), ("1", ConfigSource::DynamicTopic));
        assert_eq!(find("segment.bytes"), ("2000", ConfigSource::DynamicBroker));
        assert_eq!(
            find("cleanup.policy"),
            ("compact", ConfigSource::DynamicDefaultBroker)
        );
        assert_eq!(find("segment.ms"), ("77", ConfigSource::StaticBroker));
        assert_eq!(
            find("max.message.bytes"),
            ("1048588", ConfigSource::Default)
        );
        assert_eq!(resolved.len(), TOPIC_CONFIGS.len());
        // Another broker does not see broker 1's dynamic values.
        let other = resolve_topic_configs(&image, "t", 2, |_| None);
        let segment = other
            .iter()
            .find(|entry| entry.definition.name == "segment.bytes")
            .unwrap();
        assert_eq!(
            (segment.value.as_str(), segment.source),
            ("3000", ConfigSource::DynamicDefaultBroker)
        );
    }

    #[test]
    fn stored_values_are_normalized() {
        assert_eq!(
            validate_topic_config("retention.ms", " 1000 ").unwrap(),
            "1000"
        );
        assert_eq!(
            validate_topic_config("cleanup.policy", " compact , delete,").unwrap(),
            "compact,delete"
        );
        assert_eq!(
            validate_topic_config("compression.type", "zstd ").unwrap(),
            "zstd"
        );
        assert_eq!(
            validate_broker_config("log.retention.ms", " 5").unwrap(),
            "5"
        );
        assert_eq!(
            validate_topic_config("retention.bytes", "-2"),
            Err(ConfigProblem::BelowMinimum {
                minimum: "-1".into()
            })
        );
    }

    #[test]
    fn split_list_trims_and_drops_empty_entries() {
        assert_eq!(split_list(" a, ,b ,"), vec!["a", "b"]);
    }
}
