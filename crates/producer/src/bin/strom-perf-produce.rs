//! `strom-perf-produce`: Kafka's producer-perf-test for strom-producer.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use strom_producer::config::parse_compression;
use strom_producer::perf::{run, PerfOptions};
use strom_producer::Acks;

/// Produce fixed-size records and report throughput and latency.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Arguments {
    /// Bootstrap servers, `host:port[,host:port...]`.
    #[arg(long)]
    bootstrap_server: String,
    /// Topic to produce to (must exist).
    #[arg(long)]
    topic: String,
    /// Number of records to send.
    #[arg(long)]
    num_records: u64,
    /// Size of each record's value in bytes.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Records per second cap; -1 for none.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    throughput: i64,
    /// acks: 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    /// linger.ms.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// batch.size in bytes.
    #[arg(long, default_value_t = 16_384)]
    batch_size: usize,
    /// compression.type: none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// Print one JSON line instead of the text summary.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let acks = match arguments.acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        "all" | "-1" => Acks::All,
        other => {
            eprintln!("invalid --acks {other}: expected 0, 1 or all");
            return ExitCode::FAILURE;
        }
    };
    let compression = match parse_compression("compression.type", &arguments.compression) {
        Ok(compression) => compression,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let options = PerfOptions {
        bootstrap_servers: arguments.bootstrap_server,
        topic: arguments.topic,
        num_records: arguments.num_records,
        record_size: arguments.record_size,
        throughput: u64::try_from(arguments.throughput).ok(),
        acks: Some(acks),
        linger: Some(Duration::from_millis(arguments.linger_ms)),
        batch_size: Some(arguments.batch_size),
        compression: Some(compression),
    };
    match run(&options).await {
        Ok(report) if arguments.json => {
            println!("{}", report.to_json());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("strom-perf-produce: {error}");
            ExitCode::FAILURE
        }
    }
}
