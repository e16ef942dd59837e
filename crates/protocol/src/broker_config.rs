//! Kafka's dynamic broker configurations (KIP-226): the broker-level keys
//! an AlterConfigs or IncrementalAlterConfigs on a broker resource may set,
//! per broker (resource name = broker id) or as the cluster-wide default
//! (resource name `""`).
//!
//! Three families are dynamic, as in Kafka 4.x:
//! - the broker synonym of every topic key (`log.retention.ms`,
//!   `message.max.bytes`, ...; see [`crate::topic_config`]): the cluster's
//!   topic defaults;
//! - the broker-only keys of [`DYNAMIC_BROKER_CONFIGS`] (threads, cleaner,
//!   connection limits);
//! - per-listener keys `listener.name.<listener>.<key>` for the keys marked
//!   [`BrokerConfigDefinition::per_listener`] (connection limits, keystore and
//!   truststore). Keystore and truststore keys exist only with the listener
//!   prefix and only per broker, never as the cluster-wide default.
//!
//! Every other broker key is read-only: [`dynamic_broker_key`] returns
//! `None` for it.

use crate::topic_config::{
    split_list, topic_config_by_broker_name, ConfigDefinition, ConfigKind, ConfigValueError,
};

/// The prefix of per-listener keys.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// The value syntax of a broker-only key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BrokerConfigKind {
    /// A value of a topic-config kind (numbers, words, text).
    Plain(ConfigKind),
    /// `host:count,host:count,...` (`max.connections.per.ip.overrides`).
    HostCounts,
}

/// One dynamic broker-only configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerConfigDefinition {
    /// The key, without a listener prefix.
    pub name: &'static str,
    /// Kafka's default, as text (`None`: no default).
    pub default: Option<&'static str>,
    /// Type and valid values.
    pub kind: BrokerConfigKind,
    /// Whether DescribeConfigs hides the value (passwords, private keys).
    pub sensitive: bool,
    /// Whether `listener.name.<listener>.<name>` sets it for one listener.
    pub per_listener: bool,
    /// Whether it exists only with a listener prefix and only per broker
    /// (keystores and truststores).
    pub listener_only: bool,
    /// A one-line description.
    pub documentation: &'static str,
}

const fn int(
    min: i32,
    default: &'static str,
    documentation: &'static str,
) -> BrokerConfigDefinition {
    BrokerConfigDefinition {
        name: "",
        default: Some(default),
        kind: BrokerConfigKind::Plain(ConfigKind::Int { min, max: i32::MAX }),
        sensitive: false,
        per_listener: false,
        listener_only: false,
        documentation,
    }
}

const fn named(name: &'static str, definition: BrokerConfigDefinition) -> BrokerConfigDefinition {
    BrokerConfigDefinition { name, ..definition }
}

const fn per_listener(definition: BrokerConfigDefinition) -> BrokerConfigDefinition {
    BrokerConfigDefinition {
        per_listener: true,
        ..definition
    }
}

const fn tls(
    name: &'static str,
    sensitive: bool,
    documentation: &'static str,
) -> BrokerConfigDefinition {
    BrokerConfigDefinition {
        name,
        default: None,
        kind: BrokerConfigKind::Plain(ConfigKind::Text),
        sensitive,
        per_listener: true,
        listener_only: true,
        documentation,
    }
}

/// The dynamic broker-only keys, sorted by name.
pub const DYNAMIC_BROKER_CONFIGS: &[BrokerConfigDefinition] = &[
    named("background.threads", int(1, "10", "Threads for background work.")),
    named(
        "log.cleaner.backoff.ms",
        BrokerConfigDefinition {
            kind: BrokerConfigKind::Plain(ConfigKind::Long { min: 0, max: i64::MAX }),
            ..int(0, "15000", "How long the log cleaner sleeps when there is nothing to clean.")
        },
    ),
    named(
        "log.cleaner.dedupe.buffer.size",
        BrokerConfigDefinition {
            kind: BrokerConfigKind::Plain(ConfigKind::Long { min: 0, max: i64::MAX }),
            ..int(0, "134217728", "Memory for the log cleaner's offset map, across all cleaner threads.")
        },
    ),
    named(
        "log.cleaner.io.buffer.load.factor",
        BrokerConfigDefinition {
            kind: BrokerConfigKind::Plain(ConfigKind::Double { min: 0.0, max: f64::MAX }),
            ..int(0, "0.9", "How full the log cleaner's offset map may get.")
        },
    ),
    named(
        "log.cleaner.io.buffer.size",
        int(0, "524288", "The log cleaner's I/O buffer memory, across all cleaner threads."),
    ),
    named(
        "log.cleaner.io.max.bytes.per.second",
        BrokerConfigDefinition {
            kind: BrokerConfigKind::Plain(ConfigKind::Double { min: 0.0, max: f64::MAX }),
            ..int(0, "1.7976931348623157E308", "The log cleaner's read plus write rate limit.")
        },
    ),
    named("log.cleaner.threads", int(0, "1", "Threads of the log cleaner.")),
    named(
        "max.connection.creation.rate",
        per_listener(int(
            0,
            "2147483647",
            "New connections accepted per second, by the broker or (with a listener prefix) by one listener.",
        )),
    ),
    named(
        "max.connections",
        per_listener(int(
            0,
            "2147483647",
            "Connections open at once, on the broker or (with a listener prefix) on one listener.",
        )),
    ),
    named(
        "max.connections.per.ip",
        int(0, "2147483647", "Connections open at once from one IP address."),
    ),
    BrokerConfigDefinition {
        name: "max.connections.per.ip.overrides",
        default: Some(""),
        kind: BrokerConfigKind::HostCounts,
        sensitive: false,
        per_listener: false,
        listener_only: false,
        documentation: "Per-IP or per-host limits overriding max.connections.per.ip: host:count,...",
    },
    named("num.io.threads", int(1, "8", "Threads handling requests.")),
    named("num.network.threads", int(1, "3", "Threads reading and writing sockets.")),
    named(
        "num.recovery.threads.per.data.dir",
        int(1, "2", "Threads per log directory recovering logs at start-up."),
    ),
    named("num.replica.fetchers", int(1, "1", "Fetcher threads per source broker.")),
    tls("ssl.key.password", true, "The password of the private key in the keystore."),
    tls("ssl.keystore.certificate.chain", false, "The certificate chain in PEM, inline."),
    tls("ssl.keystore.key", true, "The private key in PEM, inline."),
    tls("ssl.keystore.location", false, "The keystore file."),
    tls("ssl.keystore.password", true, "The keystore file's password."),
    tls("ssl.keystore.type", false, "The keystore file's format (PEM)."),
    tls("ssl.truststore.certificates", false, "The trusted certificates in PEM, inline."),
    tls("ssl.truststore.location", false, "The truststore file."),
    tls("ssl.truststore.password", true, "The truststore file's password."),
    tls("ssl.truststore.type", false, "The truststore file's format (PEM)."),
];

/// What a dynamic broker key is.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerKey {
    /// The broker synonym of a topic key (a cluster topic default).
    TopicDefault(&'static ConfigDefinition),
    /// A broker-only key without a listener prefix.
    Broker(&'static BrokerConfigDefinition),
    /// A per-listener key: `listener.name.<listener>.<definition.name>`.
    Listener {
        /// The listener name as written (Kafka lower-cases it).
        listener: String,
        /// The key after the prefix.
        definition: &'static BrokerConfigDefinition,
    },
}

/// A broker-only key by name (without a listener prefix).
pub fn broker_config(name: &str) -> Option<&'static BrokerConfigDefinition> {
    DYNAMIC_BROKER_CONFIGS
        .iter()
        .find(|definition| definition.name == name)
}

/// What `name` is, when it may be set dynamically; `None` for a read-only
/// or unknown key.
pub fn dynamic_broker_key(name: &str) -> Option<BrokerKey> {
    if let Some(rest) = name.strip_prefix(LISTENER_PREFIX) {
        let (listener, key) = rest.split_once('.')?;
        if listener.is_empty() {
            return None;
        }
        let definition = broker_config(key).filter(|definition| definition.per_listener)?;
        return Some(BrokerKey::Listener {
            listener: listener.to_owned(),
            definition,
        });
    }
    if let Some(definition) = topic_config_by_broker_name(name) {
        return Some(BrokerKey::TopicDefault(definition));
    }
    broker_config(name)
        .filter(|definition| !definition.listener_only)
        .map(BrokerKey::Broker)
}

impl BrokerKey {
    /// Checks `value` against the key's type and range.
    pub fn validate(&self, value: &str) -> Result<(), ConfigValueError> {
        match self {
            BrokerKey::TopicDefault(definition) => definition.validate(value),
            BrokerKey::Broker(definition) | BrokerKey::Listener { definition, .. } => {
                definition.validate(value)
            }
        }
    }

    /// The value as stored (trimmed; lists normalized).
    pub fn normalize(&self, value: &str) -> String {
        match self {
            BrokerKey::TopicDefault(definition) => definition.normalize(value),
            BrokerKey::Broker(definition) | BrokerKey::Listener { definition, .. } => {
                definition.normalize(value)
            }
        }
    }

    /// Kafka's default, as text (empty when there is none).
    pub fn default_value(&self) -> &'static str {
        match self {
            BrokerKey::TopicDefault(definition) => definition.default,
            BrokerKey::Broker(definition) | BrokerKey::Listener { definition, .. } => {
                definition.default.unwrap_or("")
            }
        }
    }

    /// Whether APPEND and SUBTRACT apply.
    pub fn is_list(&self) -> bool {
        match self {
            BrokerKey::TopicDefault(definition) => definition.is_list(),
            BrokerKey::Broker(definition) | BrokerKey::Listener { definition, .. } => {
                definition.kind == BrokerConfigKind::HostCounts
            }
        }
    }

    /// Whether the key may be set only per broker, never as the cluster
    /// default.
    pub fn per_broker_only(&self) -> bool {
        matches!(self, BrokerKey::Listener { definition, .. } if definition.listener_only)
    }

    /// Whether DescribeConfigs hides the value.
    pub fn sensitive(&self) -> bool {
        match self {
            BrokerKey::TopicDefault(_) => false,
            BrokerKey::Broker(definition) | BrokerKey::Listener { definition, .. } => {
                definition.sensitive
            }
        }
    }
}

impl BrokerConfigDefinition {
    /// Checks `value` (surrounding whitespace ignored).
    pub fn validate(&self, value: &str) -> Result<(), ConfigValueError> {
        match self.kind {
            BrokerConfigKind::HostCounts => parse_host_counts(value).map(|_| ()),
            BrokerConfigKind::Plain(kind) => ConfigDefinition {
                name: self.name,
                broker_name: self.name,
                scaled_synonyms: &[],
                default: "",
                kind,
                documentation: self.documentation,
            }
            .validate(value),
        }
    }

    /// The value as stored: trimmed; host counts entry by entry.
    pub fn normalize(&self, value: &str) -> String {
        match self.kind {
            BrokerConfigKind::HostCounts => split_list(value).join(","),
            BrokerConfigKind::Plain(_) => value.trim().to_owned(),
        }
    }

    /// Kafka's `ConfigType` code for DescribeConfigs.
    pub fn config_type(&self) -> i8 {
        match self.kind {
            BrokerConfigKind::HostCounts => crate::topic_config::config_type::STRING,
            BrokerConfigKind::Plain(ConfigKind::Text) if self.sensitive => PASSWORD,
            BrokerConfigKind::Plain(kind) => kind.config_type(),
        }
    }
}

/// Kafka's `ConfigType` code of a password.
pub const PASSWORD: i8 = 8;

/// Parses `host:count,host:count,...` (`max.connections.per.ip.overrides`):
/// each host an IP address or a host name, each count a non-negative
/// 32-bit integer. An empty value is an empty list.
pub fn parse_host_counts(value: &str) -> Result<Vec<(String, u32)>, ConfigValueError> {
    split_list(value)
        .into_iter()
        .map(|entry| {
            let (host, count) = entry
                .rsplit_once(':')
                .ok_or(ConfigValueError::NotHostCounts)?;
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            let count = count
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|count| i32::try_from(*count).is_ok())
                .ok_or(ConfigValueError::NotHostCounts)?;
            if host.is_empty() {
                return Err(ConfigValueError::NotHostCounts);
            }
            Ok((host.to_owned(), count))
        })
        .collect()
}

#[cfg(test)]
#[path = "broker_config_tests.rs"]
mod tests;
