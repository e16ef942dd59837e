//! `strom-broker`: starts a single-node Strom broker.
//!
//! With no arguments it listens on 127.0.0.1:9092 and keeps its data in
//! `./data`. `--config server.properties` reads Kafka's broker settings;
//! `--set key=value` overrides any of them.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use strom_broker::launch::LaunchOptions;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "strom-broker",
    version,
    about = "A Kafka-compatible broker (single node)"
)]
struct Arguments {
    /// A server.properties file with Kafka's broker settings.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides a setting, e.g. --set num.partitions=3 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let options = LaunchOptions {
        config_file: arguments.config,
        overrides: arguments.overrides,
    };
    strom_broker::launch::run(options)
}
