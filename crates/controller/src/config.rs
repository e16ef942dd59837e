//! The topic-level configurations the controller accepts, checked against
//! the one table of keys in [`strom_protocol::topic_config`] (Kafka's names,
//! types, valid ranges and defaults, with each key's broker-level synonyms).
//! `strom-storage`'s typed `LogConfig` and the broker's DescribeConfigs
//! derive from the same table. Values are stored as strings, trimmed (lists:
//! entries trimmed, joined by `,`), and parsed by their consumers.
//!
//! Unknown topic keys are rejected (`INVALID_CONFIG`), as Kafka does for
//! CreateTopics and AlterConfigs. Broker resources accept the broker-level
//! synonyms of these keys (the dynamic, cluster-wide log defaults).

pub use strom_protocol::topic_config::{
    split_list, topic_config, topic_config_by_broker_name, BrokerSynonym, ConfigDefinition,
    ConfigKind, ConfigValueError, COMPRESSION_TYPES, TOPIC_CONFIGS,
};

use crate::error::ConfigProblem;

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
            Err(ConfigProblem::Value(ConfigValueError::BelowMinimum {
                minimum: "-1".into()
            }))
        );
        assert_eq!(
            validate_topic_config("retention.ms", "1h"),
            Err(ConfigProblem::Value(ConfigValueError::NotAnInteger))
        );
        assert_eq!(
            validate_topic_config("segment.bytes", "13"),
            Err(ConfigProblem::Value(ConfigValueError::BelowMinimum {
                minimum: "14".into()
            }))
        );
        assert_eq!(
            validate_topic_config("segment.bytes", "4294967296"),
            Err(ConfigProblem::Value(ConfigValueError::NotAnInteger))
        );
        assert_eq!(
            validate_topic_config("min.insync.replicas", "0"),
            Err(ConfigProblem::Value(ConfigValueError::BelowMinimum {
                minimum: "1".into()
            }))
        );
        assert_eq!(
            validate_topic_config("compression.gzip.level", "10"),
            Err(ConfigProblem::Value(ConfigValueError::AboveMaximum {
                maximum: "9".into()
            }))
        );
        assert!(validate_topic_config("retention.bytes", "-1").is_ok());
    }

    #[test]
    fn doubles_booleans_and_words_are_checked() {
        assert!(validate_topic_config("min.cleanable.dirty.ratio", "0.9").is_ok());
        assert_eq!(
            validate_topic_config("min.cleanable.dirty.ratio", "1.5"),
            Err(ConfigProblem::Value(ConfigValueError::AboveMaximum {
                maximum: "1".into()
            }))
        );
        assert_eq!(
            validate_topic_config("min.cleanable.dirty.ratio", "NaN"),
            Err(ConfigProblem::Value(ConfigValueError::NotANumber))
        );
        assert!(validate_topic_config("preallocate", "TRUE").is_ok());
        assert_eq!(
            validate_topic_config("preallocate", "yes"),
            Err(ConfigProblem::Value(ConfigValueError::NotABoolean))
        );
        assert!(validate_topic_config("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(matches!(
            validate_topic_config("message.timestamp.type", "logappendtime"),
            Err(ConfigProblem::Value(ConfigValueError::NotAllowed { .. }))
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
            Err(ConfigProblem::Value(ConfigValueError::BelowMinimum {
                minimum: "-1".into()
            }))
        );
    }
}
