//! What every networked command starts from: the bootstrap servers and the
//! client properties of `--command-config`, turned into typed client,
//! producer and consumer configurations, and the connection to the cluster.

use std::path::PathBuf;
use std::time::Duration;

use strom_client::{AdminClient, ClientConfig, Cluster};
use strom_consumer::ConsumerConfig;
use strom_producer::ProducerConfig;

use crate::cli::GlobalOptions;
use crate::error::{is_unreachable, ToolError};

/// How long the broker may spend on topic creation or deletion.
const ADMIN_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The connection settings of one invocation.
#[derive(Debug, Clone)]
pub struct Context {
    bootstrap_server: String,
    config_path: Option<PathBuf>,
    properties: Vec<(String, String)>,
}

impl Context {
    /// Reads `--command-config` (if given); `--bootstrap-server` wins over
    /// a `bootstrap.servers` in the file.
    pub fn new(global: &GlobalOptions) -> Result<Context, ToolError> {
        let properties = match &global.command_config {
            Some(path) => read_properties(path)?,
            None => Vec::new(),
        };
        Ok(Context {
            bootstrap_server: global.bootstrap_server.clone(),
            config_path: global.command_config.clone(),
            properties,
        })
    }

    /// Properties of `--command-config` that no client (admin, producer or
    /// consumer) knows; they are ignored, and the caller should warn.
    pub fn unknown_properties(&self) -> Vec<&str> {
        self.pairs()
            .filter(|(key, value)| {
                let known =
                    |result: Result<bool, strom_client::ConfigError>| result.unwrap_or(true);
                !known(ClientConfig::default().set(key, value))
                    && !known(ProducerConfig::new(Vec::<String>::new()).set(key, value))
                    && !known(ConsumerConfig::new(Vec::<String>::new()).set(key, value))
            })
            .map(|(key, _)| key)
            .collect()
    }

    /// The bootstrap servers as given.
    pub fn bootstrap_server(&self) -> &str {
        &self.bootstrap_server
    }

    /// The client settings (unknown properties are ignored here: they may
    /// belong to the producer or consumer).
    pub fn client_config(&self) -> Result<ClientConfig, ToolError> {
        let mut config = ClientConfig::new([self.bootstrap_server.clone()]);
        config.client_id = "strom-cli".to_owned();
        for (key, value) in self.pairs() {
            config
                .set(key, value)
                .map_err(|source| self.config_error(source))?;
        }
        config.bootstrap_servers =
            ClientConfig::new([self.bootstrap_server.clone()]).bootstrap_servers;
        Ok(config)
    }

    /// The producer settings, with `extra` (`--property`) applied last.
    pub fn producer_config(&self, extra: &[(String, String)]) -> Result<ProducerConfig, ToolError> {
        let mut config = ProducerConfig::new([self.bootstrap_server.clone()]);
        config.client = self.client_config()?;
        for (key, value) in self.pairs().chain(pairs_of(extra)) {
            config
                .set(key, value)
                .map_err(|source| self.config_error(source))?;
        }
        config.client.bootstrap_servers = self.client_config()?.bootstrap_servers;
        Ok(config)
    }

    /// The consumer settings, with `extra` (`--property`) applied last.
    pub fn consumer_config(&self, extra: &[(String, String)]) -> Result<ConsumerConfig, ToolError> {
        let mut config = ConsumerConfig::new([self.bootstrap_server.clone()]);
        config.client = self.client_config()?;
        for (key, value) in self.pairs().chain(pairs_of(extra)) {
            config
                .set(key, value)
                .map_err(|source| self.config_error(source))?;
        }
        config.client.bootstrap_servers = self.client_config()?.bootstrap_servers;
        Ok(config)
    }

    /// Connects to the cluster.
    pub async fn cluster(&self) -> Result<Cluster, ToolError> {
        let config = self.client_config()?;
        Cluster::connect(config)
            .await
            .map_err(|source| self.unreachable_or("connect to the cluster", source))
    }

    /// Connects an admin client.
    pub async fn admin(&self) -> Result<AdminClient, ToolError> {
        Ok(AdminClient::new(
            self.cluster().await?,
            ADMIN_OPERATION_TIMEOUT,
        ))
    }

    /// A client error, as "unreachable" when no broker answered.
    pub fn unreachable_or(
        &self,
        operation: &'static str,
        source: strom_client::ClientError,
    ) -> ToolError {
        if is_unreachable(&source) {
            ToolError::Unreachable {
                bootstrap: self.bootstrap_server.clone(),
                source,
            }
        } else {
            ToolError::client(operation, source)
        }
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        pairs_of(&self.properties)
    }

    fn config_error(&self, source: strom_client::ConfigError) -> ToolError {
        ToolError::CommandConfig {
            path: self
                .config_path
                .clone()
                .unwrap_or_else(|| PathBuf::from("--property")),
            source,
        }
    }
}

fn pairs_of(pairs: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    pairs
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
}

/// Reads a Java properties file into ordered pairs.
pub fn read_properties(path: &std::path::Path) -> Result<Vec<(String, String)>, ToolError> {
    let text = std::fs::read_to_string(path).map_err(|source| ToolError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    let map =
        strom_config::parse_properties(&text, &path.display().to_string()).map_err(|source| {
            ToolError::PropertiesFile {
                path: path.to_owned(),
                source,
            }
        })?;
    Ok(map.into_iter().collect())
}

/// Splits `KEY=VALUE` arguments; `what` names the argument in errors.
pub fn parse_key_values(
    what: &'static str,
    texts: &[String],
) -> Result<Vec<(String, String)>, ToolError> {
    texts
        .iter()
        .map(|text| {
            text.split_once('=')
                .filter(|(key, _)| !key.trim().is_empty())
                .map(|(key, value)| (key.trim().to_owned(), value.to_owned()))
                .ok_or_else(|| ToolError::InvalidArgument {
                    what,
                    text: text.clone(),
                    expected: "KEY=VALUE",
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(command_config: Option<PathBuf>) -> GlobalOptions {
        GlobalOptions {
            bootstrap_server: "127.0.0.1:1".to_owned(),
            command_config,
        }
    }

    #[test]
    fn command_config_sets_client_producer_and_consumer_properties() {
        let directory = tempfile::tempdir().expect("tempdir");
        let path = directory.path().join("client.properties");
        std::fs::write(
            &path,
            "bootstrap.servers=10.0.0.1:9092\nclient.id=ops\nlinger.ms=7\ngroup.id=g\n",
        )
        .expect("write");
        let context = Context::new(&global(Some(path))).expect("context");
        let client = context.client_config().expect("client");
        assert_eq!(client.client_id, "ops");
        assert_eq!(client.bootstrap_servers, ["127.0.0.1:1"]);
        let producer = context.producer_config(&[]).expect("producer");
        assert_eq!(producer.linger, Duration::from_millis(7));
        assert_eq!(producer.client.client_id, "ops");
        let consumer = context
            .consumer_config(&[("group.id".to_owned(), "h".to_owned())])
            .expect("consumer");
        assert_eq!(consumer.group_id.as_deref(), Some("h"));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        let directory = tempfile::tempdir().expect("tempdir");
        let path = directory.path().join("client.properties");
        std::fs::write(&path, "request.timeout.ms=soon\n").expect("write");
        let context = Context::new(&global(Some(path))).expect("context");
        let error = context.client_config().unwrap_err();
        assert_eq!(
            error.exit_status(),
            crate::error::ExitStatus::Usage,
            "{error}"
        );
        let directory_path = directory.path().join("odd.properties");
        std::fs::write(&directory_path, "client.id=x\nfrobnication.level=9\n").expect("write");
        let context = Context::new(&global(Some(directory_path))).expect("context");
        assert_eq!(context.unknown_properties(), ["frobnication.level"]);
        let missing = Context::new(&global(Some(PathBuf::from("/nonexistent/x.properties"))));
        assert!(matches!(missing, Err(ToolError::ReadFile { .. })));
    }

    #[test]
    fn key_values_need_an_equals_sign() {
        let parsed = parse_key_values("config", &["a=b=c".to_owned()]).expect("valid");
        assert_eq!(parsed, [("a".to_owned(), "b=c".to_owned())]);
        assert!(parse_key_values("config", &["novalue".to_owned()]).is_err());
        assert!(parse_key_values("config", &["=x".to_owned()]).is_err());
    }
}
