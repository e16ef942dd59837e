//! `strom-load`: a protocol-level load generator for a Strom (or any Kafka)
//! broker. See the crate documentation of `strom_bench`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use strom_bench::admin::ensure_topic;
use strom_bench::connection::Connection;
use strom_bench::fetch::{run_fetch, FetchSettings};
use strom_bench::produce::{run_produce, ProduceSettings};
use strom_bench::stats::Report;
use strom_bench::LoadError;
use strom_protocol::records::Compression;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(name = "strom-load", about = "Load generator built on strom-protocol")]
struct Arguments {
    /// Broker address (host:port).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Topic to write or read.
    #[arg(long, default_value = "strom-load")]
    topic: String,
    /// Partitions (created with the topic if it does not exist).
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Also print the report as one JSON line.
    #[arg(long)]
    json: bool,
    /// What to do.
    #[command(subcommand)]
    mode: Mode,
}

/// The two modes.
#[derive(Debug, Subcommand)]
enum Mode {
    /// Pipelined Produce requests of pre-built batches.
    Produce {
        /// Records to send (rounded up to whole requests).
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Run for this many seconds instead of a record count.
        #[arg(long)]
        seconds: Option<u64>,
        /// Value bytes per record.
        #[arg(long, default_value_t = 100)]
        record_bytes: usize,
        /// Records per batch (one batch per partition per request).
        #[arg(long, default_value_t = 1000)]
        records_per_batch: usize,
        /// Batch compression.
        #[arg(long, value_enum, default_value_t = Codec::None)]
        codec: Codec,
        /// 1 or all.
        #[arg(long, default_value = "all")]
        acks: String,
        /// Requests in flight.
        #[arg(long, default_value_t = 8)]
        in_flight: usize,
    },
    /// Reads the topic from offset 0 to its current end.
    Fetch {
        /// max_bytes per Fetch.
        #[arg(long, default_value_t = 52_428_800)]
        max_bytes: i32,
        /// partition_max_bytes per partition.
        #[arg(long, default_value_t = 8_388_608)]
        partition_max_bytes: i32,
        /// max_wait_ms per Fetch.
        #[arg(long, default_value_t = 500)]
        max_wait_ms: i32,
    },
}

/// Batch codecs.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl From<Codec> for Compression {
    fn from(codec: Codec) -> Compression {
        match codec {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

fn parse_acks(text: &str) -> Result<i16, LoadError> {
    match text {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        _ => Err(LoadError::InvalidSetting {
            name: "acks",
            reason: "must be 1 or all",
        }),
    }
}

async fn run(arguments: Arguments) -> Result<Report, LoadError> {
    let mut connection = Connection::connect(&arguments.bootstrap).await?;
    let partitions = ensure_topic(&mut connection, &arguments.topic, arguments.partitions).await?;
    match arguments.mode {
        Mode::Produce {
            records,
            seconds,
            record_bytes,
            records_per_batch,
            codec,
            acks,
            in_flight,
        } => {
            let settings = ProduceSettings {
                topic: arguments.topic,
                partitions,
                record_bytes,
                records_per_batch,
                compression: codec.into(),
                acks: parse_acks(&acks)?,
                in_flight,
                records: seconds.is_none().then_some(records),
                duration: seconds.map(Duration::from_secs),
            };
            run_produce(connection, &settings).await
        }
        Mode::Fetch {
            max_bytes,
            partition_max_bytes,
            max_wait_ms,
        } => {
            let settings = FetchSettings {
                topic: arguments.topic,
                partitions,
                max_bytes,
                partition_max_bytes,
                max_wait_ms,
            };
            run_fetch(&mut connection, &settings).await
        }
    }
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let json = arguments.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("strom-load: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(arguments)) {
        Ok(report) => {
            println!("{}", report.human());
            if json {
                println!("{}", report.to_json());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            eprintln!("strom-load: {text}");
            ExitCode::FAILURE
        }
    }
}
