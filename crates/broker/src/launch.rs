//! From command-line arguments to a typed configuration: what the
//! `strom-broker` binary and `strom broker` share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{BrokerConfig, ConfigWarning};
use crate::error::{ArgumentError, ConfigError};
use strom_config::{error_chain, parse_properties};

/// Where the configuration comes from: an optional `server.properties` file
/// and `key=value` overrides applied on top of it, in order.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// `--config FILE`.
    pub config_file: Option<PathBuf>,
    /// `--set key=value`, repeatable.
    pub overrides: Vec<String>,
}

impl LaunchOptions {
    /// Reads the file (if any), applies the overrides and parses the result.
    pub fn load(&self) -> Result<(BrokerConfig, Vec<ConfigWarning>), ConfigError> {
        let mut map = match &self.config_file {
            Some(path) => read_properties_file(path)?,
            None => BTreeMap::new(),
        };
        for text in &self.overrides {
            let (key, value) = text
                .split_once('=')
                .ok_or_else(|| ConfigError::Override { text: text.clone() })?;
            map.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        BrokerConfig::from_map(&map)
    }
}

/// What the `strom-broker` command line asks for.
#[derive(Debug, Clone)]
pub enum Command {
    /// Run a broker.
    Run(LaunchOptions),
    /// Print the usage (`--help`, `-h`).
    Help,
    /// Print the version (`--version`, `-V`).
    Version,
}

/// The usage text of `strom-broker`.
pub const USAGE: &str = "\
A Kafka-compatible broker (a single node, or a node of a cluster with controller.quorum.voters)

Usage: strom-broker [--config FILE] [--set KEY=VALUE]...

Options:
      --config <FILE>      A server.properties file with Kafka's broker settings
      --set <KEY=VALUE>    Overrides a setting, e.g. --set num.partitions=3 (repeatable)
  -h, --help               Print help
  -V, --version            Print version
";

/// Parses the arguments of `strom-broker` (without the program name):
/// `--config FILE`, `--set KEY=VALUE` (repeatable; both also as
/// `--option=value`), `--help` and `--version`. Two options do not need a
/// command-line parsing library, and this crate is a library that other
/// services embed.
pub fn parse_arguments(
    arguments: impl IntoIterator<Item = String>,
) -> Result<Command, ArgumentError> {
    let mut options = LaunchOptions::default();
    let mut arguments = arguments.into_iter();
    while let Some(argument) = arguments.next() {
        let (name, inline) = match argument.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name.to_owned(), Some(value)),
            _ => (argument.clone(), None),
        };
        let mut value = |name: &'static str| match inline {
            Some(value) => Ok(value.to_owned()),
            None => arguments
                .next()
                .ok_or(ArgumentError::MissingValue { option: name }),
        };
        match name.as_str() {
            "--config" => options.config_file = Some(PathBuf::from(value("--config")?)),
            "--set" => options.overrides.push(value("--set")?),
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            _ => return Err(ArgumentError::Unexpected { argument }),
        }
    }
    Ok(Command::Run(options))
}

/// Loads the configuration, starts a broker, and serves until SIGTERM or
/// SIGINT; then shuts down gracefully. Returns the process exit code: 0 after
/// a clean stop, 2 for a configuration error, 1 for any other failure.
pub fn run(options: LaunchOptions) -> std::process::ExitCode {
    let loaded = options.load().and_then(|(config, warnings)| {
        let format = log_format(&config, std::env::var(LOG_FORMAT_ENV).ok().as_deref())?;
        Ok((config, warnings, format))
    });
    let (config, warnings, format) = match loaded {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("strom-broker: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    init_tracing(format);
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("strom-broker: cannot start the async runtime: {error}");
            return std::process::ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        if let Some(cluster) = config
            .cluster
            .clone()
            .filter(|cluster| !cluster.roles.broker)
        {
            return run_controller(&config, &cluster).await;
        }
        let broker = match crate::broker::start(config).await {
            Ok(broker) => broker,
            Err(error) => {
                eprintln!("strom-broker: {}", error_chain(&error));
                return std::process::ExitCode::from(1);
            }
        };
        wait_for_signal().await;
        tracing::info!("shutting down");
        broker.shutdown().await;
        std::process::ExitCode::SUCCESS
    })
}

/// Runs a controller-only node until SIGTERM or SIGINT.
async fn run_controller(
    config: &BrokerConfig,
    cluster: &crate::cluster_config::ClusterConfig,
) -> std::process::ExitCode {
    let controller = match crate::cluster_node::RunningController::start(config, cluster).await {
        Ok(controller) => controller,
        Err(error) => {
            eprintln!("strom-broker: {}", error_chain(&error));
            return std::process::ExitCode::from(1);
        }
    };
    wait_for_signal().await;
    tracing::info!("shutting down");
    controller.shutdown().await;
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The environment variable choosing the log format; it overrides
/// `strom.log.format`.
pub const LOG_FORMAT_ENV: &str = "STROM_LOG_FORMAT";

/// How log lines are written (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields` (with
    /// `message`), and the span context, for log shippers.
    Json,
}

/// The log format: `environment` (the value of [`LOG_FORMAT_ENV`]) if set,
/// else `strom.log.format`; `text` or `json`.
pub fn log_format(
    config: &BrokerConfig,
    environment: Option<&str>,
) -> Result<LogFormat, ConfigError> {
    let (key, value) = match environment {
        Some(value) => (LOG_FORMAT_ENV, value),
        None => (
            "strom.log.format",
            config
                .properties()
                .get("strom.log.format")
                .map_or("text", String::as_str),
        ),
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "text" | "" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(ConfigError::Invalid {
            key: key.to_owned(),
            value: value.to_owned(),
            problem: crate::error::ValueProblem::LogFormat,
        }),
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // openraft reports every vote and replication step at info.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
}

/// Reads and parses a properties file.
pub fn read_properties_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_properties(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_on_top_of_the_file() {
        let directory = std::env::temp_dir().join(format!("strom-launch-{}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let path = directory.join("server.properties");
        std::fs::write(&path, "num.partitions=3\nnode.id=4\n").expect("write");
        let options = LaunchOptions {
            config_file: Some(path),
            overrides: vec!["num.partitions=5".to_owned()],
        };
        let (config, warnings) = options.load().expect("valid");
        assert_eq!(config.num_partitions, 5);
        assert_eq!(config.node_id, 4);
        assert!(warnings.is_empty());
        std::fs::remove_dir_all(&directory).expect("cleanup");
    }

    fn parse(arguments: &[&str]) -> Result<Command, ArgumentError> {
        parse_arguments(arguments.iter().map(|argument| (*argument).to_owned()))
    }

    #[test]
    fn arguments_give_the_file_and_the_overrides_in_order() {
        let Ok(Command::Run(options)) = parse(&[
            "--config",
            "server.properties",
            "--set",
            "num.partitions=3",
            "--set=log.dirs=/tmp/a=b",
        ]) else {
            panic!("a run");
        };
        assert_eq!(
            options.config_file,
            Some(PathBuf::from("server.properties"))
        );
        assert_eq!(options.overrides, ["num.partitions=3", "log.dirs=/tmp/a=b"]);
        assert!(matches!(parse(&[]), Ok(Command::Run(options)) if options.overrides.is_empty()));
        assert!(matches!(
            parse(&["--set", "a=1", "--help"]),
            Ok(Command::Help)
        ));
        assert!(matches!(parse(&["-V"]), Ok(Command::Version)));
    }

    #[test]
    fn unknown_arguments_and_missing_values_are_errors() {
        assert_eq!(
            parse(&["--set"]).unwrap_err(),
            ArgumentError::MissingValue { option: "--set" }
        );
        assert_eq!(
            parse(&["--conf", "x"]).unwrap_err(),
            ArgumentError::Unexpected {
                argument: "--conf".to_owned()
            }
        );
        assert_eq!(
            parse(&["server.properties"]).unwrap_err(),
            ArgumentError::Unexpected {
                argument: "server.properties".to_owned()
            }
        );
    }

    #[test]
    fn the_log_format_comes_from_the_environment_then_the_property() {
        let options = LaunchOptions {
            config_file: None,
            overrides: vec!["strom.log.format=json".to_owned()],
        };
        let (config, warnings) = options.load().expect("valid");
        assert!(warnings.is_empty());
        assert_eq!(log_format(&config, None).expect("valid"), LogFormat::Json);
        assert_eq!(
            log_format(&config, Some("text")).expect("valid"),
            LogFormat::Text
        );
        assert_eq!(
            log_format(&BrokerConfig::defaults(), None).expect("valid"),
            LogFormat::Text
        );
        assert!(matches!(
            log_format(&config, Some("yaml")),
            Err(ConfigError::Invalid { .. })
        ));
    }

    #[test]
    fn a_missing_file_and_a_bad_override_are_errors() {
        let options = LaunchOptions {
            config_file: Some(PathBuf::from("/nonexistent/server.properties")),
            overrides: vec![],
        };
        assert!(matches!(options.load(), Err(ConfigError::Read { .. })));
        let options = LaunchOptions {
            config_file: None,
            overrides: vec!["no-equals".to_owned()],
        };
        assert!(matches!(options.load(), Err(ConfigError::Override { .. })));
    }
}
