//! An embedded single-node broker, started from Rust in a few lines.
//!
//! ```sh
//! cargo run -p strom-examples --example embedded_broker
//! ```
//!
//! It listens on a free loopback port, keeps its data in a temporary
//! directory, prints its address for Kafka clients, and stops gracefully on
//! Ctrl-C (or after `STROM_EXAMPLE_SECONDS` seconds when that is set).

use std::time::Duration;

use strom_broker::launch::LaunchOptions;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = std::env::temp_dir().join(format!("strom-example-{}", std::process::id()));
    let options = LaunchOptions {
        config_file: None,
        overrides: vec![
            "listeners=PLAINTEXT://127.0.0.1:0".to_owned(),
            format!("log.dirs={}", data_dir.display()),
        ],
    };
    let (config, _warnings) = options.load()?;
    let broker = strom_broker::start(config).await?;
    let address = broker.local_addresses()[0];
    eprintln!(
        "Strom is listening on {address}; point a Kafka client at bootstrap.servers={address}"
    );

    match std::env::var("STROM_EXAMPLE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
        None => tokio::signal::ctrl_c().await?,
    }
    broker.shutdown().await;
    std::fs::remove_dir_all(&data_dir)?;
    Ok(())
}
