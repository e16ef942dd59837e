//! Client configuration with Kafka's property names.

use std::time::Duration;

use strom_config::{invalid, ValueProblem};

use crate::error::ConfigError;
use crate::security::ClientSecurity;

/// Settings shared by every Strom client (producer, consumer, admin).
///
/// Built in Rust with [`ClientConfig::new`] and the `with_*` methods, or from
/// Kafka property pairs with [`ClientConfig::set`] (the property names are
/// the Java client's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `bootstrap.servers`: `host:port` addresses to discover the cluster.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`, sent in every request header.
    pub client_id: String,
    /// `request.timeout.ms`: how long to wait for a response.
    pub request_timeout: Duration,
    /// `reconnect.backoff.ms`: the first wait before reconnecting.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`: the cap of the exponential backoff.
    pub reconnect_backoff_max: Duration,
    /// `retry.backoff.ms`: the wait before retrying a failed request.
    pub retry_backoff: Duration,
    /// `metadata.max.age.ms`: metadata older than this is refreshed.
    pub metadata_max_age: Duration,
    /// `socket.connection.setup.timeout.ms`: TCP connect timeout.
    pub connection_setup_timeout: Duration,
    /// `allow.auto.create.topics`: whether Metadata requests for topics let
    /// the broker create missing ones (when its `auto.create.topics.enable`
    /// allows). Off by default here (an admin client must not create what it
    /// describes); the producer turns it on, as the Java producer does.
    pub allow_auto_topic_creation: bool,
    /// `security.protocol`, `ssl.*` and `sasl.*` (see [`ClientSecurity`]).
    pub security: ClientSecurity,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            bootstrap_servers: Vec::new(),
            client_id: "strom".to_owned(),
            request_timeout: Duration::from_millis(30_000),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_millis(1_000),
            retry_backoff: Duration::from_millis(100),
            metadata_max_age: Duration::from_millis(300_000),
            connection_setup_timeout: Duration::from_millis(10_000),
            allow_auto_topic_creation: false,
            security: ClientSecurity::default(),
        }
    }
}

impl ClientConfig {
    /// Defaults with the given bootstrap servers (each item may itself be a
    /// comma-separated list, as in `bootstrap.servers`).
    pub fn new<S: Into<String>>(bootstrap_servers: impl IntoIterator<Item = S>) -> Self {
        ClientConfig {
            bootstrap_servers: bootstrap_servers
                .into_iter()
                .flat_map(|servers| {
                    let servers: String = servers.into();
                    servers
                        .split(',')
                        .map(str::trim)
                        .filter(|address| !address.is_empty())
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .collect(),
            ..ClientConfig::default()
        }
    }

    /// Sets `client.id`.
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn with_request_timeout(mut self, request_timeout: Duration) -> Self {
        self.request_timeout = request_timeout;
        self
    }

    /// Sets `reconnect.backoff.ms` and `reconnect.backoff.max.ms`.
    pub fn with_reconnect_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.reconnect_backoff = initial;
        self.reconnect_backoff_max = max;
        self
    }

    /// Sets `retry.backoff.ms`.
    pub fn with_retry_backoff(mut self, retry_backoff: Duration) -> Self {
        self.retry_backoff = retry_backoff;
        self
    }

    /// Sets `metadata.max.age.ms`.
    pub fn with_metadata_max_age(mut self, metadata_max_age: Duration) -> Self {
        self.metadata_max_age = metadata_max_age;
        self
    }

    /// Parses from Kafka property pairs; returns the config and the keys it
    /// did not know (for the caller to warn about or to handle itself).
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut config = ClientConfig::default();
        let mut unknown = Vec::new();
        for (key, value) in properties {
            if !config.set(key, value)? {
                unknown.push(key.to_owned());
            }
        }
        config.validate()?;
        Ok((config, unknown))
    }

    /// Sets one property by its Kafka name. Returns `Ok(false)` for a name
    /// this struct does not own, `Err` for a bad value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "bootstrap.servers" => {
                self.bootstrap_servers = value
                    .split(',')
                    .map(str::trim)
                    .filter(|address| !address.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            "client.id" => self.client_id = value.to_owned(),
            "allow.auto.create.topics" => {
                self.allow_auto_topic_creation = strom_config::value::boolean(key, value)?
            }
            "request.timeout.ms" => self.request_timeout = parse_duration_ms(key, value)?,
            "reconnect.backoff.ms" => self.reconnect_backoff = parse_duration_ms(key, value)?,
            "reconnect.backoff.max.ms" => {
                self.reconnect_backoff_max = parse_duration_ms(key, value)?
            }
            "retry.backoff.ms" => self.retry_backoff = parse_duration_ms(key, value)?,
            "metadata.max.age.ms" => self.metadata_max_age = parse_duration_ms(key, value)?,
            "socket.connection.setup.timeout.ms" => {
                self.connection_setup_timeout = parse_duration_ms(key, value)?
            }
            _ => return self.security.set(key, value),
        }
        Ok(true)
    }

    /// Checks the properties that must be present.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing {
                key: "bootstrap.servers",
            });
        }
        Ok(())
    }
}

/// Parses a non-negative number of milliseconds.
pub fn parse_duration_ms(key: &str, value: &str) -> Result<Duration, ConfigError> {
    parse_number::<u64>(key, value, "a non-negative number of milliseconds")
        .map(Duration::from_millis)
}

/// Parses a number of type `T`, naming `expected` in the error.
pub fn parse_number<T: std::str::FromStr>(
    key: &str,
    value: &str,
    expected: &'static str,
) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, ValueProblem::expected(expected)).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_properties_parse_into_typed_values() {
        let (config, unknown) = ClientConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092, 127.0.0.1:9093"),
            ("client.id", "app"),
            ("request.timeout.ms", "1500"),
            ("reconnect.backoff.max.ms", "2000"),
            ("linger.ms", "5"),
        ])
        .unwrap();
        assert_eq!(
            config.bootstrap_servers,
            ["127.0.0.1:9092", "127.0.0.1:9093"]
        );
        assert_eq!(config.client_id, "app");
        assert_eq!(config.request_timeout, Duration::from_millis(1500));
        assert_eq!(config.reconnect_backoff_max, Duration::from_secs(2));
        assert_eq!(unknown, ["linger.ms"]);
    }

    #[test]
    fn bad_values_and_missing_bootstrap_are_errors() {
        let error = ClientConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("request.timeout.ms", "soon"),
        ])
        .unwrap_err();
        assert!(
            matches!(error, ConfigError::InvalidValue { ref key, .. } if key == "request.timeout.ms")
        );
        assert_eq!(
            ClientConfig::from_properties([("client.id", "x")]).unwrap_err(),
            ConfigError::Missing {
                key: "bootstrap.servers"
            }
        );
    }

    #[test]
    fn builder_matches_properties() {
        let built = ClientConfig::new(["127.0.0.1:1"])
            .with_client_id("a")
            .with_request_timeout(Duration::from_millis(7));
        let (parsed, _) = ClientConfig::from_properties([
            ("bootstrap.servers", "127.0.0.1:1"),
            ("client.id", "a"),
            ("request.timeout.ms", "7"),
        ])
        .unwrap();
        assert_eq!(built, parsed);
    }
}
