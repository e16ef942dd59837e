//! `strom-load`: a protocol-level load generator for a Strom (or any Kafka)
//! broker. See the crate documentation of `strom_bench`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;
use strom_bench::admin::ensure_topic;
use strom_bench::commit::{run_commit, CommitSettings};
use strom_bench::connection::Connection;
use strom_bench::fetch::{run_fetch, FetchSettings};
use strom_bench::group::{find_coordinator, run_rebalance, RebalanceSettings};
use strom_bench::produce::{run_produce, ProduceSettings};
use strom_bench::stats::Report;
use strom_bench::LoadError;
use strom_protocol::records::Compression;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(name = "strom-load", about = "Load generator built on strom-protocol")]
struct Arguments {
    /// Broker address (host:port).
    #[arg(
        long,
        alias = "bootstrap-server",
        global = true,
        default_value = "127.0.0.1:9092"
    )]
    bootstrap: String,
    /// Topic to write or read.
    #[arg(long, global = true, default_value = "strom-load")]
    topic: String,
    /// Partitions (created with the topic if it does not exist).
    #[arg(long, global = true, default_value_t = 8)]
    partitions: i32,
    /// Also print the report as one JSON line.
    #[arg(long, global = true)]
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
        /// Send this many requests per second (latency counted from each
        /// request's due time) instead of as fast as possible.
        #[arg(long)]
        rate: Option<u32>,
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
        /// read_uncommitted (to the high watermark) or read_committed (to
        /// the last stable offset, with the aborted transactions listed).
        #[arg(long, value_enum, default_value_t = Isolation::ReadUncommitted)]
        isolation_level: Isolation,
    },
    /// Consumer-group coordinator load (start the broker with
    /// `--set group.initial.rebalance.delay.ms=0` for rebalance).
    Group {
        /// Which group measurement.
        #[command(subcommand)]
        mode: GroupMode,
    },
}

/// The group measurements.
#[derive(Debug, Subcommand)]
enum GroupMode {
    /// N members join a new group per round; rebalance time per round.
    Rebalance {
        /// Members per group (one connection each).
        #[arg(long, default_value_t = 10)]
        members: usize,
        /// Rounds (a new group each).
        #[arg(long, default_value_t = 10)]
        rounds: usize,
    },
    /// Pipelined OffsetCommit of a simple group for every partition.
    Commit {
        /// Seconds to commit for.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// OffsetCommit requests in flight.
        #[arg(long, default_value_t = 8)]
        in_flight: usize,
    },
}

/// Fetch isolation levels.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Isolation {
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
    #[value(name = "read_committed")]
    ReadCommitted,
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

/// The group run's name prefix: unique per process so reruns against one
/// broker start from new groups.
fn group_prefix() -> String {
    format!("strom-load-{}", std::process::id())
}

/// Runs one group measurement; returns its human line and JSON object.
async fn run_group(arguments: &Arguments, mode: &GroupMode) -> Result<(String, Value), LoadError> {
    match mode {
        GroupMode::Rebalance { members, rounds } => {
            let settings = RebalanceSettings {
                members: *members,
                rounds: *rounds,
                topic: arguments.topic.clone(),
                partitions: arguments.partitions,
                group_prefix: group_prefix(),
            };
            let report = run_rebalance(&arguments.bootstrap, &settings).await?;
            Ok((report.human(), report.to_json()))
        }
        GroupMode::Commit { seconds, in_flight } => {
            let mut connection = Connection::connect(&arguments.bootstrap).await?;
            let partitions =
                ensure_topic(&mut connection, &arguments.topic, arguments.partitions).await?;
            let group = group_prefix();
            let coordinator = find_coordinator(&mut connection, &group).await?;
            if coordinator != arguments.bootstrap {
                connection = Connection::connect(&coordinator).await?;
            }
            let settings = CommitSettings {
                group,
                topic: arguments.topic.clone(),
                partitions,
                in_flight: *in_flight,
                duration: Duration::from_secs(*seconds),
            };
            let report = run_commit(connection, &settings).await?;
            Ok((report.human(), report.to_json()))
        }
    }
}

async fn run(arguments: Arguments) -> Result<(String, Value), LoadError> {
    if let Mode::Group { mode } = &arguments.mode {
        return run_group(&arguments, mode).await;
    }
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
            rate,
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
                requests_per_second: rate,
            };
            run_produce(connection, &settings).await.map(lines)
        }
        Mode::Fetch {
            max_bytes,
            partition_max_bytes,
            max_wait_ms,
            isolation_level,
        } => {
            let settings = FetchSettings {
                topic: arguments.topic,
                partitions,
                max_bytes,
                partition_max_bytes,
                max_wait_ms,
                isolation_level: match isolation_level {
                    Isolation::ReadUncommitted => 0,
                    Isolation::ReadCommitted => 1,
                },
            };
            run_fetch(&mut connection, &settings).await.map(lines)
        }
        Mode::Group { .. } => Err(LoadError::InvalidSetting {
            name: "mode",
            reason: "group modes are handled above",
        }),
    }
}

fn lines(report: Report) -> (String, Value) {
    (report.human(), report.to_json())
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
        Ok((human, json_value)) => {
            println!("{human}");
            if json {
                println!("{json_value}");
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
