//! DescribeConfigs of broker resources (KIP-226): every broker key with its
//! effective value and, in Kafka's precedence, where values come from: this
//! broker's dynamic config (`DYNAMIC_BROKER_CONFIG`), the cluster-wide
//! dynamic default (`DYNAMIC_DEFAULT_BROKER_CONFIG`), `server.properties`
//! (`STATIC_BROKER_CONFIG`) and Kafka's default (`DEFAULT_CONFIG`). A key
//! with several broker names (`log.retention.ms`, `.minutes`, `.hours`)
//! lists its synonyms source by source, each source over the names in
//! order, as Kafka does.
//!
//! The cluster default resource (empty name) lists only the keys set there.

use std::collections::BTreeMap;

use strom_controller::image::{ConfigResource, MetadataImage};
use strom_protocol::broker_config::{dynamic_broker_key, BrokerKey, DYNAMIC_BROKER_CONFIGS};
use strom_protocol::kafka::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::topic_config::{self, config_type};

use super::config_docs::source;
use super::BrokerContext;
use crate::config::KNOWN_KEYS;

/// One value of a key and where it came from.
pub(super) struct Sourced {
    /// The name it is set under.
    pub(super) name: String,
    /// The value.
    pub(super) value: Option<String>,
    /// The `ConfigSource` code.
    pub(super) source: i8,
}

/// The four places a broker key's value can come from, highest first.
pub(super) struct BrokerLayers<'a> {
    /// This broker's dynamic configs.
    pub(super) broker: &'a BTreeMap<String, String>,
    /// The cluster-wide dynamic defaults.
    pub(super) cluster: &'a BTreeMap<String, String>,
    /// `server.properties`.
    pub(super) properties: &'a BTreeMap<String, String>,
}

impl<'a> BrokerLayers<'a> {
    /// The layers as `broker` sees them in `image`.
    pub(super) fn new(broker: &'a BrokerContext, image: &'a MetadataImage) -> BrokerLayers<'a> {
        BrokerLayers {
            broker: image.configs(&ConfigResource::Broker(Some(broker.config.node_id))),
            cluster: image.configs(&ConfigResource::Broker(None)),
            properties: broker.config.properties(),
        }
    }

    /// Every value of the key known by `names` (its broker names in
    /// precedence order), source by source, ending with `default` (the
    /// default's name and value) when there is one.
    pub(super) fn sources(
        &self,
        names: &[&str],
        default: Option<(&str, Option<&str>)>,
    ) -> Vec<Sourced> {
        let layers = [
            (self.broker, source::DYNAMIC_BROKER_CONFIG),
            (self.cluster, source::DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.properties, source::STATIC_BROKER_CONFIG),
        ];
        let mut sources = Vec::new();
        for (layer, code) in layers {
            for name in names {
                if let Some(value) = layer.get(*name) {
                    sources.push(Sourced {
                        name: (*name).to_owned(),
                        value: Some(value.trim().to_owned()),
                        source: code,
                    });
                }
            }
        }
        if let Some((name, value)) = default {
            sources.push(Sourced {
                name: name.to_owned(),
                value: value.map(str::to_owned),
                source: source::DEFAULT_CONFIG,
            });
        }
        sources
    }
}

/// What DescribeConfigs says about one broker key besides its values.
struct KeyFacts {
    read_only: bool,
    sensitive: bool,
    config_type: i8,
    documentation: Option<&'static str>,
    /// The key's broker names, itself first.
    names: Vec<&'static str>,
    /// The default's name and value.
    default: Option<(&'static str, Option<&'static str>)>,
    /// For a topic key's broker name: each synonym's unit in this key's
    /// unit (`log.retention.hours` is 3600000 `log.retention.ms`).
    scales: Vec<(&'static str, i64)>,
}

fn facts(name: &str) -> KeyFacts {
    let fallback = KNOWN_KEYS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(known, default)| (*known, Some(*default)));
    match dynamic_broker_key(name) {
        Some(BrokerKey::TopicDefault(definition)) => {
            let synonyms: Vec<_> = definition.broker_synonyms().collect();
            let default = synonyms
                .iter()
                .find_map(|synonym| Some((synonym.name, Some(synonym.default?))));
            KeyFacts {
                read_only: false,
                sensitive: false,
                config_type: definition.kind.config_type(),
                documentation: Some(definition.documentation),
                names: synonyms.iter().map(|synonym| synonym.name).collect(),
                default,
                scales: synonyms
                    .iter()
                    .map(|synonym| (synonym.name, synonym.scale))
                    .collect(),
            }
        }
        Some(BrokerKey::Broker(definition)) | Some(BrokerKey::Listener { definition, .. }) => {
            KeyFacts {
                read_only: false,
                sensitive: definition.sensitive,
                config_type: definition.config_type(),
                documentation: Some(definition.documentation),
                names: Vec::new(),
                default: fallback.or(Some((definition.name, definition.default))),
                scales: Vec::new(),
            }
        }
        None => {
            let scaled = topic_config::broker_synonyms().find(|(synonym, _)| synonym.name == name);
            KeyFacts {
                read_only: true,
                sensitive: false,
                config_type: scaled.map_or(config_type::STRING, |(_, definition)| {
                    definition.kind.config_type()
                }),
                documentation: scaled.map(|(_, definition)| definition.documentation),
                names: Vec::new(),
                default: scaled
                    .map(|(synonym, _)| (synonym.name, synonym.default))
                    .or(fallback),
                scales: Vec::new(),
            }
        }
    }
}

/// Every broker key this broker describes: the keys it acts on, the broker
/// names of topic keys, the dynamic broker-only keys (without listener
/// prefix) and any per-listener key set dynamically, sorted.
fn broker_key_names(layers: &BrokerLayers<'_>) -> Vec<String> {
    let mut names: Vec<String> = KNOWN_KEYS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .chain(topic_config::broker_synonyms().map(|(synonym, _)| synonym.name.to_owned()))
        .chain(
            DYNAMIC_BROKER_CONFIGS
                .iter()
                .filter(|definition| !definition.listener_only)
                .map(|definition| definition.name.to_owned()),
        )
        .chain(layers.broker.keys().cloned())
        .chain(layers.cluster.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The entries of this broker's resource, those `wanted` only.
pub(super) fn broker_entries(
    broker: &BrokerContext,
    image: &MetadataImage,
    wanted: impl Fn(&str) -> bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let layers = BrokerLayers::new(broker, image);
    broker_key_names(&layers)
        .into_iter()
        .filter(|name| wanted(name))
        .map(|name| {
            let facts = facts(&name);
            let mut names = vec![name.as_str()];
            names.extend(facts.names.iter().copied().filter(|other| *other != name));
            // A broker key without a default has no value (Kafka: null).
            let default = facts
                .default
                .map(|(name, value)| (name, value.filter(|value| !value.is_empty())));
            let sources = layers.sources(&names, default);
            entry(
                &name,
                &facts,
                &sources,
                include_synonyms,
                include_documentation,
            )
        })
        .collect()
}

/// The entries of the cluster default resource: the keys set there.
pub(super) fn cluster_default_entries(
    image: &MetadataImage,
    wanted: impl Fn(&str) -> bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let cluster = image.configs(&ConfigResource::Broker(None));
    cluster
        .iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, value)| {
            let facts = facts(name);
            let sources = vec![Sourced {
                name: name.clone(),
                value: Some(value.clone()),
                source: source::DYNAMIC_DEFAULT_BROKER_CONFIG,
            }];
            entry(
                name,
                &facts,
                &sources,
                include_synonyms,
                include_documentation,
            )
        })
        .collect()
}

/// A value set under a scaled synonym, in the described key's unit (a
/// negative value of a scaled key means "no limit": `-1`).
fn scaled(facts: &KeyFacts, sourced: &Sourced) -> Option<String> {
    let scale = facts
        .scales
        .iter()
        .find(|(name, _)| *name == sourced.name)
        .map_or(1, |(_, scale)| *scale);
    match (scale, sourced.value.as_deref().map(str::parse::<i64>)) {
        (1, _) | (_, None) | (_, Some(Err(_))) => sourced.value.clone(),
        (_, Some(Ok(value))) if value < 0 => Some("-1".to_owned()),
        (_, Some(Ok(value))) => Some(value.saturating_mul(scale).to_string()),
    }
}

fn entry(
    name: &str,
    facts: &KeyFacts,
    sources: &[Sourced],
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let hide = |value: &Option<String>| {
        if facts.sensitive {
            None
        } else {
            value.clone().map(StrBytes::from_string)
        }
    };
    let (value, config_source) = sources
        .first()
        .map_or((None, source::DEFAULT_CONFIG), |first| {
            (hide(&scaled(facts, first)), first.source)
        });
    let synonyms = if include_synonyms {
        sources
            .iter()
            .map(|sourced| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(sourced.name.clone()))
                    .with_value(hide(&sourced.value))
                    .with_source(sourced.source)
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_owned()))
        .with_value(value)
        .with_read_only(facts.read_only)
        .with_config_source(config_source)
        .with_is_sensitive(facts.sensitive)
        .with_synonyms(synonyms)
        .with_config_type(facts.config_type)
        .with_documentation(
            facts
                .documentation
                .filter(|_| include_documentation)
                .map(StrBytes::from_static_str),
        )
}
