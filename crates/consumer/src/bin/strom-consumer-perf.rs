//! `strom-consumer-perf`: consume records and report throughput, like
//! Kafka's `kafka-consumer-perf-test`.

use std::time::Duration;

use clap::Parser;
use strom_consumer::perf::{run, PerfOptions, PerfReport};
use strom_consumer::ConsumerConfig;

/// Consumer throughput test.
#[derive(Debug, Parser)]
#[command(name = "strom-consumer-perf")]
struct Arguments {
    /// `host:port` of a broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap_server: String,
    /// The topic to consume.
    #[arg(long)]
    topic: String,
    /// How many records to consume.
    #[arg(long)]
    messages: u64,
    /// Consume as this group (otherwise every partition is assigned).
    #[arg(long)]
    group: Option<String>,
    /// Give up after this long without records.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Extra consumer properties, `key=value`.
    #[arg(long = "consumer-property")]
    properties: Vec<String>,
    /// Print one JSON object instead of CSV.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments = Arguments::parse();
    let mut config = ConsumerConfig::new([arguments.bootstrap_server.clone()]);
    config.group_id = arguments.group.clone();
    config.auto_offset_reset = strom_consumer::OffsetReset::Earliest;
    for property in &arguments.properties {
        let (key, value) = property.split_once('=').ok_or("properties are key=value")?;
        if !config.set(key, value)? {
            eprintln!("warning: unknown consumer property {key}");
        }
    }
    let report = run(PerfOptions {
        config,
        topic: arguments.topic,
        records: arguments.messages,
        idle_timeout: Duration::from_millis(arguments.timeout_ms),
    })
    .await?;
    if arguments.json {
        println!("{}", report.to_json());
    } else {
        println!("{}", PerfReport::CSV_HEADER);
        println!("{}", report.to_csv());
    }
    Ok(())
}
