//! An embedded single-node broker, started from Rust in a few lines and
//! configured with Kafka's property strings, as in `server.properties`.
//!
//! ```sh
//! cargo run -p strom-examples --example embedded_broker
//! ```
//!
//! It listens on a free loopback port, keeps its data in a temporary
//! directory (removed when it stops), prints its address for Kafka clients,
//! and stops gracefully on Ctrl-C (or after `STROM_EXAMPLE_SECONDS` seconds
//! when that is set). The `in_process` example configures a broker with the
//! typed builder (`BrokerConfig::builder()`) instead.

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use strom_broker::launch::LaunchOptions;
use strom_broker::RunningBroker;
use tempfile::TempDir;

/// A running broker and the directory that holds its data.
pub struct EmbeddedBroker {
    /// The broker.
    pub broker: RunningBroker,
    /// Its data directory, removed when this is dropped.
    pub data: TempDir,
}

impl EmbeddedBroker {
    /// The address Kafka clients bootstrap from.
    pub fn address(&self) -> Result<SocketAddr, Box<dyn Error>> {
        Ok(self
            .broker
            .local_addresses()
            .first()
            .copied()
            .ok_or("the broker has no listener")?)
    }

    /// Stops the broker gracefully (in-flight requests answered, logs
    /// flushed), then removes its data.
    pub async fn stop(self) -> Result<(), Box<dyn Error>> {
        self.broker.shutdown().await;
        self.data.close()?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let embedded = start().await?;
    let address = embedded.address()?;
    eprintln!(
        "Strom is listening on {address}; point a Kafka client at bootstrap.servers={address}"
    );
    match std::env::var("STROM_EXAMPLE_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
    {
        Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
        None => tokio::signal::ctrl_c().await?,
    }
    embedded.stop().await
}

/// Starts a broker on a free loopback port with its data in a new
/// temporary directory. The settings are the ones `strom broker --set`
/// takes; a `server.properties` file would go in `config_file`.
pub async fn start() -> Result<EmbeddedBroker, Box<dyn Error>> {
    let data = tempfile::Builder::new()
        .prefix("strom-example-")
        .tempdir()?;
    let options = LaunchOptions {
        config_file: None,
        overrides: vec![
            "listeners=PLAINTEXT://127.0.0.1:0".to_owned(),
            format!("log.dirs={}", data.path().display()),
        ],
    };
    let (config, warnings) = options.load()?;
    for warning in warnings {
        eprintln!("configuration: {warning}");
    }
    let broker = strom_broker::start(config).await?;
    Ok(EmbeddedBroker { broker, data })
}
