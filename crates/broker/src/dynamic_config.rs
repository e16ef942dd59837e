//! Dynamic broker configs (KIP-226) applied where they take effect outside
//! the logs: the connection limits of the accept loop, the keystores and
//! truststores of TLS listeners and the log cleaner's
//! `log.cleaner.backoff.ms`. (Topic defaults reach the logs through
//! [`crate::replica_manager::topic_properties`].)
//!
//! A key's value is this broker's dynamic config, else the cluster-wide
//! dynamic default, else `server.properties`, else Kafka's default. Every
//! new metadata image recomputes the settings; they replace the server's
//! at once, so a lowered limit refuses the next connections and never
//! closes open ones.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use strom_controller::image::{ConfigResource, MetadataImage};
use strom_controller::runtime::ControllerClient;
use strom_network::{ConnectionLimitSettings, ConnectionQuotas, ListenerConnectionLimits};
use strom_protocol::broker_config::{parse_host_counts, LISTENER_PREFIX};
use strom_security::config::PemSource;
use strom_security::reload::KeystoreSources;
use strom_security::ListenerRuntime;
use strom_storage::LogManager;
use tracing::{info, warn};

use crate::config::BrokerConfig;

/// The effective broker-level properties: `server.properties`, then the
/// cluster default, then this broker's dynamic configs.
pub fn effective_broker_properties(
    config: &BrokerConfig,
    image: &MetadataImage,
) -> BTreeMap<String, String> {
    let mut properties = config.properties().clone();
    for broker in [None, Some(config.node_id)] {
        for (key, value) in image.configs(&ConfigResource::Broker(broker)) {
            properties.insert(key.clone(), value.clone());
        }
    }
    properties
}

fn number<T: std::str::FromStr>(properties: &BTreeMap<String, String>, key: &str) -> Option<T> {
    let value = properties.get(key)?;
    match value.trim().parse() {
        Ok(parsed) => Some(parsed),
        Err(_) => {
            warn!(key, value, "ignoring an unparsable connection limit");
            None
        }
    }
}

/// The connection limits `config` and `image` give this broker.
pub fn connection_limits(config: &BrokerConfig, image: &MetadataImage) -> ConnectionLimitSettings {
    let properties = effective_broker_properties(config, image);
    let defaults = ConnectionLimitSettings::default();
    let mut listeners: HashMap<String, ListenerConnectionLimits> = HashMap::new();
    for (key, _) in properties.range(LISTENER_PREFIX.to_owned()..) {
        let Some(rest) = key.strip_prefix(LISTENER_PREFIX) else {
            break;
        };
        let Some((listener, suffix)) = rest.split_once('.') else {
            continue;
        };
        let limits = listeners.entry(listener.to_ascii_lowercase()).or_default();
        match suffix {
            "max.connections" => limits.max_connections = number(&properties, key),
            "max.connection.creation.rate" => {
                limits.max_connection_creation_rate = number(&properties, key);
            }
            _ => {}
        }
    }
    listeners.retain(|_, limits| *limits != ListenerConnectionLimits::default());
    ConnectionLimitSettings {
        max_connections: number(&properties, "max.connections").unwrap_or(defaults.max_connections),
        max_connections_per_ip: number(&properties, "max.connections.per.ip")
            .unwrap_or(defaults.max_connections_per_ip),
        per_ip_overrides: properties
            .get("max.connections.per.ip.overrides")
            .map(|value| ip_overrides(value))
            .unwrap_or_default(),
        max_connection_creation_rate: number(&properties, "max.connection.creation.rate")
            .unwrap_or(defaults.max_connection_creation_rate),
        listeners,
        protected_listener: config
            .cluster
            .as_ref()
            .map(|cluster| cluster.inter_broker_listener_name.to_ascii_lowercase()),
    }
}

/// `host:count,...` by address; host names are resolved (every address of
/// a name gets its count).
fn ip_overrides(value: &str) -> HashMap<IpAddr, usize> {
    let entries = match parse_host_counts(value) {
        Ok(entries) => entries,
        Err(error) => {
            warn!(value, %error, "ignoring max.connections.per.ip.overrides");
            return HashMap::new();
        }
    };
    let mut overrides = HashMap::new();
    for (host, count) in entries {
        let count = count as usize;
        if let Ok(ip) = host.parse::<IpAddr>() {
            overrides.insert(ip, count);
            continue;
        }
        match (host.as_str(), 0).to_socket_addrs() {
            Ok(addresses) => {
                for address in addresses {
                    overrides.insert(address.ip(), count);
                }
            }
            Err(error) => {
                warn!(host, %error, "cannot resolve a max.connections.per.ip.overrides host")
            }
        }
    }
    overrides
}

/// This broker's dynamic configs of `listener`, by key after the
/// `listener.name.<listener>.` prefix (matched without regard to case), and
/// the prefix.
fn listener_dynamic_configs<'a>(
    config: &BrokerConfig,
    image: &'a MetadataImage,
    listener: &str,
) -> (String, BTreeMap<&'a str, &'a str>) {
    let prefix = format!("{LISTENER_PREFIX}{}.", listener.to_ascii_lowercase());
    let dynamic = image
        .configs(&ConfigResource::Broker(Some(config.node_id)))
        .iter()
        .filter_map(|(key, value)| {
            // The prefix is ASCII: its length in `key` is the same.
            let suffix = key.get(prefix.len()..)?;
            key.to_ascii_lowercase()
                .starts_with(&prefix)
                .then_some((suffix, value.as_str()))
        })
        .collect();
    (prefix, dynamic)
}

/// The truststore `listener` verifies client certificates with: this
/// broker's dynamic `listener.name.<listener>.ssl.truststore.location` or
/// `.ssl.truststore.certificates` when set, else the static one (`None`
/// when the listener has none).
pub fn listener_truststore(
    config: &BrokerConfig,
    image: &MetadataImage,
    listener: &str,
) -> Option<PemSource> {
    let static_truststore = config
        .security
        .listener(listener)
        .and_then(|security| security.tls.as_ref())
        .and_then(|tls| tls.truststore.clone());
    let (prefix, dynamic) = listener_dynamic_configs(config, image, listener);
    if let Some(path) = dynamic.get("ssl.truststore.location") {
        return Some(PemSource::File(PathBuf::from(path)));
    }
    if let Some(text) = dynamic.get("ssl.truststore.certificates") {
        return Some(PemSource::Inline {
            key: format!("{prefix}ssl.truststore.certificates"),
            text: (*text).to_owned(),
        });
    }
    static_truststore
}

/// The keystore `listener` serves with: this broker's dynamic
/// `listener.name.<listener>.ssl.keystore.*` configs when any is set
/// (keystores are per-broker only), else the static one (`None` for a
/// listener without TLS).
pub fn listener_keystore(
    config: &BrokerConfig,
    image: &MetadataImage,
    listener: &str,
) -> Option<KeystoreSources> {
    let static_sources = config
        .security
        .listener(listener)
        .and_then(|security| security.tls.as_ref())
        .map(KeystoreSources::of)?;
    let (prefix, dynamic) = listener_dynamic_configs(config, image, listener);
    let inline = |key: &str| {
        dynamic.get(key).map(|text| PemSource::Inline {
            key: format!("{prefix}{key}"),
            text: (*text).to_owned(),
        })
    };
    let (chain, key) = match (
        dynamic.get("ssl.keystore.location"),
        inline("ssl.keystore.certificate.chain"),
        inline("ssl.keystore.key"),
    ) {
        (Some(path), _, _) => (
            PemSource::File(PathBuf::from(path)),
            PemSource::File(PathBuf::from(path)),
        ),
        (None, Some(chain), Some(key)) => (chain, key),
        _ => (static_sources.chain.clone(), static_sources.key.clone()),
    };
    let password = dynamic
        .get("ssl.key.password")
        .map(|password| (*password).to_owned())
        .or(static_sources.password.clone());
    Some(KeystoreSources {
        chain,
        key,
        password,
    })
}

/// Serves each TLS listener with the keystore and truststore the image
/// gives it: new connections get the new certificate and are verified with
/// the new trusted certificates, open ones keep theirs. A store that cannot
/// be used is logged and the one in use stays.
fn apply_listener_stores(
    config: &BrokerConfig,
    image: &MetadataImage,
    listeners: &[Arc<ListenerRuntime>],
) {
    for runtime in listeners {
        let name = &runtime.name;
        if let (Some(certificate), Some(wanted)) =
            (&runtime.certificate, listener_keystore(config, image, name))
        {
            if wanted != certificate.sources() {
                match certificate.replace(wanted) {
                    Ok(()) => info!(listener = %name, "listener keystore replaced"),
                    Err(error) => warn!(listener = %name, %error,
                        "the new listener keystore cannot be used; the previous one stays"),
                }
            }
        }
        if let (Some(truststore), Some(wanted)) = (
            &runtime.truststore,
            listener_truststore(config, image, name),
        ) {
            if wanted != truststore.source() {
                match truststore.replace(wanted) {
                    Ok(()) => info!(listener = %name, "listener truststore replaced"),
                    Err(error) => warn!(listener = %name, %error,
                        "the new listener truststore cannot be used; the previous one stays"),
                }
            }
        }
    }
}

/// The dynamic `log.cleaner.backoff.ms` (this broker's, else the cluster
/// default); `None` when neither is set.
pub fn dynamic_cleaner_backoff_ms(config: &BrokerConfig, image: &MetadataImage) -> Option<i64> {
    const KEY: &str = "log.cleaner.backoff.ms";
    [Some(config.node_id), None]
        .into_iter()
        .find_map(|broker| image.configs(&ConfigResource::Broker(broker)).get(KEY))
        .and_then(|value| value.trim().parse().ok())
}

/// Where the dynamic configs take effect outside the logs' topic configs.
pub struct DynamicTargets {
    /// The accept loop's connection limits.
    pub quotas: Arc<ConnectionQuotas>,
    /// The listeners (their TLS certificates).
    pub listeners: Vec<Arc<ListenerRuntime>>,
    /// The logs (the cleaner's backoff).
    pub logs: Arc<LogManager>,
}

/// Keeps the connection limits, the listeners' keystores and the log
/// cleaner's backoff in line with every new metadata image.
pub async fn follow_dynamic_configs(
    config: BrokerConfig,
    controller: Arc<dyn ControllerClient>,
    targets: DynamicTargets,
) {
    let mut images = controller.subscribe();
    loop {
        let image = Arc::clone(&images.borrow_and_update());
        let settings = connection_limits(&config, &image);
        if settings != targets.quotas.settings() {
            info!(?settings, "connection limits changed");
            targets.quotas.update(settings);
        }
        apply_listener_stores(&config, &image, &targets.listeners);
        targets
            .logs
            .set_cleaner_backoff_ms(dynamic_cleaner_backoff_ms(&config, &image));
        if images.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
#[path = "dynamic_config_tests.rs"]
mod tests;
