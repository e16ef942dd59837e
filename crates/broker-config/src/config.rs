//! Broker configuration: Kafka's `server.properties` names, parsed once into
//! typed values.
//!
//! Every key Strom acts on is listed in [`KNOWN_KEYS`] with Kafka's default.
//! Keys Kafka defines that Strom does not act on yet are accepted and reported
//! as [`ConfigWarning::Ignored`]; keys nobody defines are reported as
//! [`ConfigWarning::Unknown`]. An invalid value is an error naming the key.
//!
//! Broker-level `log.*` keys are also the defaults of the topic-level configs
//! (`log.segment.bytes` is the default `segment.bytes`, and so on, as in
//! Kafka). Which broker key feeds which topic key, in which unit and with
//! which precedence, comes from the one table of topic configurations
//! ([`strom_protocol::topic_config`]); [`BrokerConfig::topic_defaults`]
//! returns the values under the topic-level names so that the storage layer
//! parses one vocabulary.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use strom_config::lookup::Defaults;
use strom_config::{invalid, Lookup};
use strom_protocol::topic_config::{self, BrokerSynonym, TOPIC_CONFIGS};

use crate::cluster_config::{ClusterConfig, ProcessRoles};
use crate::consumer_group_config::ConsumerGroupSettings;
use crate::error::{ConfigError, ValueProblem};

pub use strom_config::listener::{parse_listeners, Listener};

/// A warning about a configuration key, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWarning {
    /// A key Kafka does not define (probably a typo).
    Unknown {
        /// The key.
        key: String,
    },
    /// A Kafka key that Strom accepts but does not act on.
    Ignored {
        /// The key.
        key: String,
    },
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigWarning::Unknown { key } => {
                write!(f, "unknown configuration key `{key}` ignored")
            }
            ConfigWarning::Ignored { key } => {
                write!(
                    f,
                    "configuration key `{key}` is accepted but has no effect in Strom"
                )
            }
        }
    }
}

/// The typed broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `node.id` (alias `broker.id`).
    pub node_id: i32,
    /// The cluster-mode settings; `None` for a single-node broker (no
    /// `controller.quorum.voters`).
    pub cluster: Option<ClusterConfig>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `listeners`.
    pub listeners: Vec<Listener>,
    /// `advertised.listeners` (defaults to `listeners`).
    pub advertised_listeners: Vec<Listener>,
    /// `log.dirs` (alias `log.dir`).
    pub log_dirs: Vec<PathBuf>,
    /// `num.partitions`: partitions of auto-created topics and of CreateTopics
    /// requests that leave the count to the broker.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `socket.request.max.bytes`: the largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`.
    pub connections_max_idle: Duration,
    /// `max.connections`.
    pub max_connections: usize,
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor`.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.retention.minutes`.
    pub offsets_retention: Duration,
    /// `offsets.commit.timeout.ms`: how long an offset commit waits for the
    /// in-sync replicas of its `__consumer_offsets` partition.
    pub offsets_commit_timeout: Duration,
    /// The transaction coordinator's `transaction.*` settings.
    pub transactions: TransactionConfig,
    /// `group.initial.rebalance.delay.ms`.
    pub group_initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout: Duration,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout: Duration,
    /// `group.max.size`.
    pub group_max_size: usize,
    /// `group.consumer.*`: consumer-protocol (KIP-848) groups.
    pub consumer_groups: ConsumerGroupSettings,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max: Duration,
    /// `replica.fetch.max.bytes`: per partition of a follower's fetch.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`.
    pub replica_fetch_wait_max: Duration,
    /// `replica.fetch.min.bytes`.
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`.
    pub replica_fetch_backoff: Duration,
    /// `num.replica.fetchers`: fetch tasks per source broker.
    pub num_replica_fetchers: usize,
    /// `log.retention.check.interval.ms`.
    pub log_retention_check_interval: Duration,
    /// `log.flush.scheduler.interval.ms`.
    pub log_flush_scheduler_interval: Duration,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub log_flush_offset_checkpoint_interval: Duration,
    /// `log.flush.start.offset.checkpoint.interval.ms`.
    pub log_flush_start_offset_checkpoint_interval: Duration,
    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub replica_high_watermark_checkpoint_interval: Duration,
    /// `log.cleaner.enable`.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: the sleep between compaction passes.
    pub log_cleaner_backoff: Duration,
    /// `num.recovery.threads.per.data.dir`.
    pub num_recovery_threads_per_data_dir: usize,
    /// `strom.log.writeback.interval.bytes` (Strom's own): start writeback
    /// every this many bytes appended to a segment; 0 never.
    pub log_writeback_interval_bytes: u64,
    /// `strom.log.page.cache.retain.bytes` (Strom's own): bytes of each
    /// partition kept in the page cache behind its end; `None` (-1) leaves
    /// it to the kernel.
    pub log_page_cache_retain_bytes: Option<u64>,
    /// `max.incremental.fetch.session.cache.slots` (KIP-227).
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `quota.window.num`: samples client quota rates are measured over.
    pub quota_window_num: u32,
    /// `quota.window.size.seconds`: the span of one sample, in seconds.
    pub quota_window_size_seconds: u32,
    /// Listener protocols, TLS, SASL and the authorizer.
    pub security: strom_security::SecurityConfig,
    /// Topic-level defaults under topic-level names (see the module docs).
    topic_defaults: BTreeMap<String, String>,
    /// The properties as given (file and overrides), for DescribeConfigs.
    properties: BTreeMap<String, String>,
}

/// Broker keys Strom acts on, with Kafka's default value (empty: no default).
pub const KNOWN_KEYS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("broker.id", ""),
    ("process.roles", ProcessRoles::DEFAULT.name()),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", ""),
    ("log.dirs", ""),
    ("log.dir", "data"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("delete.topic.enable", "true"),
    ("socket.request.max.bytes", "104857600"),
    ("connections.max.idle.ms", "600000"),
    ("max.connections", "2147483647"),
    // Applied by the broker's accept loop (`strom_broker::dynamic_config`),
    // dynamic as in Kafka.
    ("max.connections.per.ip", "2147483647"),
    ("max.connections.per.ip.overrides", ""),
    ("max.connection.creation.rate", "2147483647"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.commit.timeout.ms", "5000"),
    ("transaction.state.log.num.partitions", "50"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.min.isr", "2"),
    ("transaction.max.timeout.ms", "900000"),
    ("transaction.partition.verification.enable", "true"),
    ("transactional.id.expiration.ms", "604800000"),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "10000",
    ),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("max.incremental.fetch.session.cache.slots", "1000"),
    ("quota.window.num", "11"),
    ("quota.window.size.seconds", "1"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.max.size", "2147483647"),
    ("replica.lag.time.max.ms", "30000"),
    ("replica.fetch.max.bytes", "1048576"),
    ("replica.fetch.response.max.bytes", "10485760"),
    ("replica.fetch.wait.max.ms", "500"),
    ("replica.fetch.min.bytes", "1"),
    ("replica.fetch.backoff.ms", "1000"),
    ("num.replica.fetchers", "1"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.flush.scheduler.interval.ms", "9223372036854775807"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
    ("log.flush.start.offset.checkpoint.interval.ms", "60000"),
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("log.cleaner.enable", "true"),
    ("log.cleaner.backoff.ms", "15000"),
    ("num.recovery.threads.per.data.dir", "2"),
    // Strom's own keys (no Kafka equivalent), under the `strom.` prefix.
    ("strom.log.writeback.interval.bytes", "0"),
    ("strom.log.page.cache.retain.bytes", "-1"),
    // Parsed by the broker (`strom_broker::observe::listener_address`).
    ("strom.metrics.listener", ""),
    // Parsed by the broker (`strom_broker::observe::http_security`).
    ("strom.http.authentication", "none"),
    ("strom.http.authenticate.metrics", "false"),
    // Parsed by the broker (`strom_broker::launch::log_format`; env
    // `STROM_LOG_FORMAT` wins).
    ("strom.log.format", "text"),
];

/// Kafka broker keys that Strom accepts without acting on them.
pub const IGNORED_KEYS: &[&str] = &[
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "controller.quorum.bootstrap.servers",
    "log.cleaner.threads",
    "group.coordinator.rebalance.protocols",
    "zookeeper.connect",
];

impl BrokerConfig {
    /// The configuration with every default, as `strom broker` with no
    /// arguments uses it.
    pub fn defaults() -> BrokerConfig {
        match BrokerConfig::from_map(&BTreeMap::new()) {
            Ok((config, _)) => config,
            Err(error) => unreachable!("the built-in defaults are valid: {error}"),
        }
    }

    /// Parses a properties map (file contents merged with command-line
    /// overrides) into a typed configuration and the warnings to log.
    pub fn from_map(
        map: &BTreeMap<String, String>,
    ) -> Result<(BrokerConfig, Vec<ConfigWarning>), ConfigError> {
        let lookup = Lookup::with_defaults(map, DEFAULTS);
        let Topology {
            node_id,
            cluster,
            listeners,
            advertised_listeners,
        } = Topology::read(&lookup)?;
        let rack = Some(lookup.string("broker.rack").trim().to_owned()).filter(|r| !r.is_empty());
        let config = BrokerConfig {
            node_id,
            cluster,
            rack,
            listeners: listeners.clone(),
            advertised_listeners,
            log_dirs: log_dirs(&lookup)?,
            num_partitions: lookup.int32("num.partitions", 1)?,
            default_replication_factor: lookup.int16("default.replication.factor", 1)?,
            auto_create_topics_enable: lookup.boolean("auto.create.topics.enable")?,
            delete_topic_enable: lookup.boolean("delete.topic.enable")?,
            socket_request_max_bytes: lookup.count("socket.request.max.bytes", 1)?,
            connections_max_idle: lookup.millis("connections.max.idle.ms")?,
            max_connections: lookup.count("max.connections", 0)?,
            offsets_topic_num_partitions: lookup.int32("offsets.topic.num.partitions", 1)?,
            offsets_topic_replication_factor: lookup
                .int16("offsets.topic.replication.factor", 1)?,
            offsets_retention: offsets_retention(&lookup)?,
            offsets_commit_timeout: offsets_commit_timeout(&lookup)?,
            transactions: TransactionConfig::read(&lookup)?,
            group_initial_rebalance_delay: lookup.millis("group.initial.rebalance.delay.ms")?,
            group_min_session_timeout: lookup.millis("group.min.session.timeout.ms")?,
            group_max_session_timeout: lookup.millis("group.max.session.timeout.ms")?,
            group_max_size: lookup.count("group.max.size", 1)?,
            consumer_groups: ConsumerGroupSettings::read(&lookup)?,
            replica_lag_time_max: lookup.millis("replica.lag.time.max.ms")?,
            replica_fetch_max_bytes: lookup.int32("replica.fetch.max.bytes", 0)?,
            replica_fetch_response_max_bytes: lookup
                .int32("replica.fetch.response.max.bytes", 0)?,
            replica_fetch_wait_max: lookup.millis("replica.fetch.wait.max.ms")?,
            replica_fetch_min_bytes: lookup.int32("replica.fetch.min.bytes", 1)?,
            replica_fetch_backoff: lookup.millis("replica.fetch.backoff.ms")?,
            num_replica_fetchers: lookup.int32("num.replica.fetchers", 1)? as usize,
            log_retention_check_interval: lookup.millis("log.retention.check.interval.ms")?,
            log_flush_scheduler_interval: lookup.millis("log.flush.scheduler.interval.ms")?,
            log_flush_offset_checkpoint_interval: lookup
                .millis("log.flush.offset.checkpoint.interval.ms")?,
            log_flush_start_offset_checkpoint_interval: lookup
                .millis("log.flush.start.offset.checkpoint.interval.ms")?,
            replica_high_watermark_checkpoint_interval: lookup
                .millis("replica.high.watermark.checkpoint.interval.ms")?,
            log_cleaner_enable: lookup.boolean("log.cleaner.enable")?,
            log_cleaner_backoff: lookup.millis("log.cleaner.backoff.ms")?,
            num_recovery_threads_per_data_dir: num_recovery_threads_per_data_dir(&lookup)?,
            log_writeback_interval_bytes: log_writeback_interval_bytes(&lookup)?,
            log_page_cache_retain_bytes: lookup
                .bytes_or_unlimited("strom.log.page.cache.retain.bytes")?,
            max_incremental_fetch_session_cache_slots: lookup
                .count("max.incremental.fetch.session.cache.slots", 0)?,
            quota_window_num: lookup.int32("quota.window.num", 1)?.unsigned_abs(),
            quota_window_size_seconds: lookup.int32("quota.window.size.seconds", 1)?.unsigned_abs(),
            security: strom_security::SecurityConfig::from_map(map, &listeners)?,
            topic_defaults: topic_defaults(map)?,
            properties: map.clone(),
        };
        check_session_timeouts(&config)?;
        Ok((config, collect_warnings(map)))
    }

    /// Topic-level config defaults derived from the broker's `log.*` keys,
    /// under topic-level names (`segment.bytes`, `retention.ms`, ...). Only
    /// keys the operator set appear; the storage layer supplies Kafka's
    /// defaults for the rest.
    pub fn topic_defaults(&self) -> &BTreeMap<String, String> {
        &self.topic_defaults
    }

    /// The properties exactly as the operator gave them (file contents
    /// merged with command-line overrides), under Kafka's broker names.
    pub fn properties(&self) -> &BTreeMap<String, String> {
        &self.properties
    }
}

/// Who this node is and where it listens: what the cluster settings take
/// the controller listener out of.
struct Topology {
    node_id: i32,
    cluster: Option<ClusterConfig>,
    listeners: Vec<Listener>,
    advertised_listeners: Vec<Listener>,
}

impl Topology {
    /// `listeners`, `node.id`, the cluster keys, then `advertised.listeners`
    /// (defaulting to the listeners, and limited to their names).
    fn read(lookup: &Lookup<'_>) -> Result<Topology, ConfigError> {
        let mut listeners = parse_listeners("listeners", &lookup.string("listeners"))?;
        let node_id = node_id(lookup)?;
        let cluster = crate::cluster_config::parse(lookup.map(), node_id, &mut listeners)?;
        let advertised_listeners = match lookup.map().get("advertised.listeners") {
            Some(text) if !text.trim().is_empty() => parse_listeners("advertised.listeners", text)?
                .into_iter()
                .filter(|advertised| listeners.iter().any(|l| l.name == advertised.name))
                .collect(),
            _ => listeners.clone(),
        };
        Ok(Topology {
            node_id,
            cluster,
            listeners,
            advertised_listeners,
        })
    }
}

/// `offsets.retention.minutes`.
fn offsets_retention(lookup: &Lookup<'_>) -> Result<Duration, ConfigError> {
    let minutes = lookup.unsigned("offsets.retention.minutes", 1, i32::MAX.into())?;
    Ok(Duration::from_secs(minutes * 60))
}

/// `offsets.commit.timeout.ms`: positive, at most Kafka's int.
fn offsets_commit_timeout(lookup: &Lookup<'_>) -> Result<Duration, ConfigError> {
    let millis = lookup.unsigned("offsets.commit.timeout.ms", 1, i32::MAX.into())?;
    Ok(Duration::from_millis(millis))
}

/// `num.recovery.threads.per.data.dir`: 1 to 1024.
fn num_recovery_threads_per_data_dir(lookup: &Lookup<'_>) -> Result<usize, ConfigError> {
    Ok(lookup.unsigned("num.recovery.threads.per.data.dir", 1, 1024)? as usize)
}

/// `strom.log.writeback.interval.bytes`: any non-negative count.
fn log_writeback_interval_bytes(lookup: &Lookup<'_>) -> Result<u64, ConfigError> {
    lookup.unsigned("strom.log.writeback.interval.bytes", 0, i64::MAX)
}

/// `node.id`, or its older alias `broker.id` when only that one is set.
fn node_id(lookup: &Lookup<'_>) -> Result<i32, ConfigError> {
    let key = if lookup.is_set("broker.id") && !lookup.is_set("node.id") {
        "broker.id"
    } else {
        "node.id"
    };
    lookup.int32(key, 0)
}

/// `log.dirs`, else `log.dir`: at least one directory.
fn log_dirs(lookup: &Lookup<'_>) -> Result<Vec<PathBuf>, ConfigError> {
    let text = lookup
        .map()
        .get("log.dirs")
        .filter(|text| !text.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| lookup.string("log.dir"));
    let log_dirs = text
        .split(',')
        .map(str::trim)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .collect::<Vec<_>>();
    if log_dirs.is_empty() {
        return Err(invalid("log.dirs", &text, ValueProblem::NoDirectory).into());
    }
    Ok(log_dirs)
}

fn check_session_timeouts(config: &BrokerConfig) -> Result<(), ConfigError> {
    if config.group_min_session_timeout > config.group_max_session_timeout {
        let value = config.group_min_session_timeout.as_millis().to_string();
        let problem = ValueProblem::Exceeds {
            other: "group.max.session.timeout.ms",
        };
        return Err(invalid("group.min.session.timeout.ms", &value, problem).into());
    }
    Ok(())
}

/// Whether `key` is a broker-level synonym of a topic configuration.
pub fn is_topic_default_key(key: &str) -> bool {
    topic_config::broker_synonyms().any(|(synonym, _)| synonym.name == key)
}

/// `listener.name.<l>.max.connections` and
/// `listener.name.<l>.max.connection.creation.rate`: applied by the
/// broker's accept loop (`strom_broker::dynamic_config`).
fn is_listener_connection_limit(key: &str) -> bool {
    key.strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(listener, suffix)| {
            !listener.is_empty()
                && matches!(suffix, "max.connections" | "max.connection.creation.rate")
        })
}

fn collect_warnings(map: &BTreeMap<String, String>) -> Vec<ConfigWarning> {
    // Accepted as the topic default `preallocate`, which segments do not
    // act on (they grow as records are appended): say so when it is asked for.
    let preallocate = map
        .get("log.preallocate")
        .filter(|value| value.trim().eq_ignore_ascii_case("true"))
        .map(|_| ConfigWarning::Ignored {
            key: "log.preallocate".to_owned(),
        });
    map.keys()
        .filter(|key| {
            !KNOWN_KEYS.iter().any(|(known, _)| known == key)
                && !crate::cluster_config::CLUSTER_KEYS
                    .iter()
                    .any(|(known, _)| known == key)
                && !crate::consumer_group_config::CONSUMER_GROUP_KEYS
                    .iter()
                    .any(|(known, _)| known == key)
                && !is_topic_default_key(key)
                && !strom_security::is_security_key(key)
                && !is_listener_connection_limit(key)
        })
        .map(|key| {
            if IGNORED_KEYS.contains(&key.as_str()) {
                ConfigWarning::Ignored { key: key.clone() }
            } else {
                ConfigWarning::Unknown { key: key.clone() }
            }
        })
        .chain(preallocate)
        .collect()
}

/// For each topic key, the value of the first of its broker synonyms that
/// is set (Kafka's precedence: `ms` before `minutes` before `hours`), in the
/// topic key's unit, checked against the topic key's type and range.
fn topic_defaults(map: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut defaults = BTreeMap::new();
    for definition in TOPIC_CONFIGS {
        let set = definition
            .broker_synonyms()
            .find_map(|synonym| Some((synonym, map.get(synonym.name)?)));
        if let Some((synonym, value)) = set {
            let converted = scale(&synonym, value.trim())?;
            definition.validate(&converted).map_err(|problem| {
                invalid(
                    synonym.name,
                    value.trim(),
                    ValueProblem::TopicConfig(problem),
                )
            })?;
            defaults.insert(definition.name.to_owned(), converted);
        }
    }
    Ok(defaults)
}

/// A broker synonym's value in the topic key's unit.
fn scale(synonym: &BrokerSynonym, value: &str) -> Result<String, ConfigError> {
    if synonym.scale == 1 {
        return Ok(value.to_owned());
    }
    let number: i64 = value
        .parse()
        .map_err(|_| invalid(synonym.name, value, ValueProblem::NotAnInteger))?;
    if number < 0 {
        // Kafka: a negative retention means "no limit".
        return Ok("-1".to_owned());
    }
    number
        .checked_mul(synonym.scale)
        .map(|ms| ms.to_string())
        .ok_or_else(|| {
            let range = ValueProblem::OutOfRange {
                min: 0,
                max: i64::MAX / synonym.scale,
            };
            invalid(synonym.name, value, range).into()
        })
}

/// The defaults of every broker key with one: [`KNOWN_KEYS`] and the
/// cluster keys.
pub(crate) const DEFAULTS: &[&Defaults] = &[
    KNOWN_KEYS,
    crate::cluster_config::CLUSTER_KEYS,
    crate::consumer_group_config::CONSUMER_GROUP_KEYS,
];

/// The transaction coordinator's settings (`transaction.*` and
/// `transactional.id.expiration.ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transaction.state.log.num.partitions`.
    pub state_log_num_partitions: i32,
    /// `transaction.state.log.replication.factor`.
    pub state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr`: the `min.insync.replicas` of
    /// `__transaction_state`.
    pub state_log_min_isr: i32,
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms`
    /// a producer may ask for.
    pub max_timeout: Duration,
    /// `transactional.id.expiration.ms`: how long an idle transactional id
    /// is kept.
    pub transactional_id_expiration: Duration,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how
    /// often transactions past their timeout are looked for.
    pub abort_timed_out_transaction_cleanup_interval: Duration,
    /// `transaction.partition.verification.enable`: a partition leader asks
    /// the transaction coordinator whether a transactional batch's
    /// partition is in the transaction before it opens one there
    /// (KIP-890 part 1).
    pub partition_verification: bool,
}

impl TransactionConfig {
    /// Reads the settings.
    fn read(lookup: &Lookup<'_>) -> Result<TransactionConfig, ConfigError> {
        Ok(TransactionConfig {
            state_log_num_partitions: lookup.int32("transaction.state.log.num.partitions", 1)?,
            state_log_replication_factor: lookup
                .int16("transaction.state.log.replication.factor", 1)?,
            state_log_min_isr: lookup.int32("transaction.state.log.min.isr", 1)?,
            max_timeout: lookup.millis("transaction.max.timeout.ms")?,
            transactional_id_expiration: lookup.millis("transactional.id.expiration.ms")?,
            abort_timed_out_transaction_cleanup_interval: lookup
                .millis("transaction.abort.timed.out.transaction.cleanup.interval.ms")?,
            partition_verification: lookup.boolean("transaction.partition.verification.enable")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_are_a_single_node_on_loopback() {
        let config = BrokerConfig::defaults();
        assert_eq!(config.node_id, 1);
        assert_eq!(
            config.listeners[0].bind_address().expect("valid"),
            "127.0.0.1:9092".parse().expect("addr")
        );
        assert_eq!(config.advertised_listeners, config.listeners);
        assert_eq!(config.log_dirs, vec![PathBuf::from("data")]);
        assert_eq!(config.socket_request_max_bytes, 104_857_600);
        assert_eq!(config.offsets_topic_num_partitions, 50);
        assert!(config.topic_defaults().is_empty());
    }

    #[test]
    fn an_invalid_value_names_the_key() {
        let error = BrokerConfig::from_map(&map(&[("num.partitions", "many")])).unwrap_err();
        assert!(error.to_string().contains("num.partitions"), "{error}");
        let error = BrokerConfig::from_map(&map(&[("num.partitions", "0")])).unwrap_err();
        assert!(error.to_string().contains("num.partitions"), "{error}");
        let error =
            BrokerConfig::from_map(&map(&[("auto.create.topics.enable", "yes")])).unwrap_err();
        assert!(
            error.to_string().contains("auto.create.topics.enable"),
            "{error}"
        );
        let error = BrokerConfig::from_map(&map(&[("listeners", "127.0.0.1:9092")])).unwrap_err();
        assert!(error.to_string().contains("listeners"), "{error}");
        for (key, value) in [
            ("strom.log.page.cache.retain.bytes", "-2"),
            ("strom.log.writeback.interval.bytes", "-1"),
            ("log.segment.bytes", "10"),
            ("log.cleanup.policy", "shred"),
            ("log.retention.hours", "soon"),
            ("log.roll.hours", "0"),
        ] {
            let error = BrokerConfig::from_map(&map(&[(key, value)])).unwrap_err();
            assert!(error.to_string().contains(key), "{error}");
        }
    }

    #[test]
    fn preallocation_asked_for_is_a_warning() {
        let (_, warnings) =
            BrokerConfig::from_map(&map(&[("log.preallocate", "true")])).expect("valid");
        assert_eq!(
            warnings,
            vec![ConfigWarning::Ignored {
                key: "log.preallocate".to_owned()
            }]
        );
        let (_, warnings) =
            BrokerConfig::from_map(&map(&[("log.preallocate", "false")])).expect("valid");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn unknown_and_ignored_keys_are_warnings() {
        let (_, warnings) = BrokerConfig::from_map(&map(&[
            ("num.io.threads", "8"),
            ("log.retension.hours", "1"),
        ]))
        .expect("valid");
        assert!(warnings.contains(&ConfigWarning::Ignored {
            key: "num.io.threads".to_owned()
        }));
        assert!(warnings.contains(&ConfigWarning::Unknown {
            key: "log.retension.hours".to_owned()
        }));
    }

    #[test]
    fn listener_connection_limits_are_known() {
        let (_, warnings) = BrokerConfig::from_map(&map(&[
            ("listener.name.external.max.connections", "8"),
            ("listener.name.external.max.connection.creation.rate", "8"),
            ("listener.name.external.max.connections.per.ip", "8"),
            ("max.connections.per.ip", "8"),
        ]))
        .expect("valid");
        assert_eq!(
            warnings,
            vec![ConfigWarning::Unknown {
                key: "listener.name.external.max.connections.per.ip".to_owned()
            }]
        );
    }

    #[test]
    fn log_keys_become_topic_defaults_with_kafka_precedence() {
        let (config, _) = BrokerConfig::from_map(&map(&[
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "3"),
            ("log.segment.bytes", "1048576"),
            ("message.max.bytes", "2000000"),
        ]))
        .expect("valid");
        let defaults = config.topic_defaults();
        // `log.retention.minutes` takes precedence over hours; the table lists
        // minutes first among those two.
        assert_eq!(defaults["retention.ms"], "180000");
        assert_eq!(defaults["segment.bytes"], "1048576");
        assert_eq!(defaults["max.message.bytes"], "2000000");
        let (config, _) = BrokerConfig::from_map(&map(&[
            ("log.retention.ms", "5"),
            ("log.retention.hours", "2"),
        ]))
        .expect("valid");
        assert_eq!(config.topic_defaults()["retention.ms"], "5");
    }

    #[test]
    fn listeners_and_advertised_listeners() {
        let (config, _) = BrokerConfig::from_map(&map(&[
            ("listeners", "PLAINTEXT://:9093, INTERNAL://127.0.0.1:9094"),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            ),
            ("advertised.listeners", "PLAINTEXT://localhost:9093"),
            ("log.dirs", "/a, /b"),
        ]))
        .expect("valid");
        assert_eq!(config.listeners.len(), 2);
        assert_eq!(
            config.listeners[0].bind_address().expect("valid").port(),
            9093
        );
        assert_eq!(config.advertised_listeners[0].host, "localhost");
        assert_eq!(
            config.log_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        let duplicate = BrokerConfig::from_map(&map(&[("listeners", "A://:1,A://:2")]));
        assert!(duplicate.is_err());
    }

    #[test]
    fn broker_id_is_an_alias_of_node_id() {
        let (config, _) = BrokerConfig::from_map(&map(&[("broker.id", "7")])).expect("valid");
        assert_eq!(config.node_id, 7);
        let (config, _) =
            BrokerConfig::from_map(&map(&[("broker.id", "7"), ("node.id", "3")])).expect("valid");
        assert_eq!(config.node_id, 3);
    }

    #[test]
    fn session_timeout_bounds_must_be_ordered() {
        let error = BrokerConfig::from_map(&map(&[
            ("group.min.session.timeout.ms", "10000"),
            ("group.max.session.timeout.ms", "5000"),
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("group.min.session.timeout.ms"));
    }
}
