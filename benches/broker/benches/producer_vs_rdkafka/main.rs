//! `producer-vs-rdkafka`: strom-producer against librdkafka (through the
//! `rdkafka` crate), both producing to one Strom broker in one run.
//!
//! The broker is a child process (the release `strom-broker`). Each client
//! run is a child process too — this executable started again with
//! `--client strom|rdkafka` — so that the CPU time it reports (user plus
//! system time of the whole process, threads included, from
//! `/proc/self/stat`, measured around the produce phase) is the client's
//! alone. Both clients get the same settings (`linger.ms=5`,
//! `batch.size=65536`, idempotence on with acks=all and off with acks=1,
//! unkeyed records of one fixed value) and the same latency measure: from
//! `send` to the moment a collector awaiting the records' futures in send
//! order sees the acknowledgement. After each run the topic's end offsets
//! must add up to the records sent (each written once), or the run fails.
//!
//! Run with `cargo bench -p strom-bench --bench producer-vs-rdkafka` after
//! `cargo build --release -p strom-broker`. The record counts (5 M
//! records of 100 bytes, 1 M of 1 KiB) are the default; the environment
//! variables `STROM_PRODUCER_BENCH_100B_RECORDS` and
//! `STROM_PRODUCER_BENCH_1KIB_RECORDS` set smaller ones for quick runs.

#[path = "../rdkafka/broker_process.rs"]
mod broker_process;
mod clients;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::Parser;
use serde_json::{json, Value};
use strom_client::admin::{AdminClient, NewTopic, OffsetSpec};
use strom_client::{ClientConfig, Cluster};

use broker_process::{default_broker_binary, BrokerProcess};
use clients::{ClientKind, Workload};

/// Partitions of every benchmark topic.
const PARTITIONS: i32 = 6;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "producer-vs-rdkafka",
    about = "strom-producer vs librdkafka against one Strom broker"
)]
struct Arguments {
    /// Run one client (a child of the benchmark): strom or rdkafka.
    #[arg(long)]
    client: Option<ClientKind>,
    /// Child only: bootstrap server.
    #[arg(long, default_value = "")]
    bootstrap: String,
    /// Child only: topic.
    #[arg(long, default_value = "")]
    topic: String,
    /// Child only: records to send.
    #[arg(long, default_value_t = 0)]
    records: u64,
    /// Child only: value bytes per record.
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// Child only: acks (1 or all).
    #[arg(long, default_value = "1")]
    acks: String,
    /// Child only: compression.type.
    #[arg(long, default_value = "none")]
    compression: String,
    /// The strom-broker executable (default: next to target/release/deps).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Write all results as JSON here.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let outcome = match arguments.client {
        Some(kind) => run_child(kind, &arguments),
        None => run_parent(&arguments),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("producer-vs-rdkafka: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run_child(kind: ClientKind, arguments: &Arguments) -> Result<(), String> {
    let workload = Workload {
        bootstrap: arguments.bootstrap.clone(),
        topic: arguments.topic.clone(),
        records: arguments.records,
        record_bytes: arguments.record_bytes,
        acks: arguments.acks.clone(),
        compression: arguments.compression.clone(),
    };
    let result = clients::run(kind, &workload)?;
    println!("{result}");
    Ok(())
}

fn records_from_env(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map_err(|_| format!("{name}={value} is not a number of records")),
        Err(_) => Ok(default),
    }
}

fn run_parent(arguments: &Arguments) -> Result<(), String> {
    let small = records_from_env("STROM_PRODUCER_BENCH_100B_RECORDS", 5_000_000)?;
    let large = records_from_env("STROM_PRODUCER_BENCH_1KIB_RECORDS", 1_000_000)?;
    let binary = arguments
        .broker_bin
        .clone()
        .or_else(default_broker_binary)
        .ok_or("no strom-broker binary; pass --broker-bin")?;
    let broker = BrokerProcess::start(&binary, PARTITIONS, &[])?;
    let bootstrap = broker.bootstrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("runtime: {error}"))?;
    let admin = runtime.block_on(admin_client(&bootstrap))?;
    println!("| records | bytes | acks | compression | client | records/s | MB/s | p99 ms | client CPU s | CPU s per M records |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut results = Vec::new();
    for (records, record_bytes) in [(small, 100), (large, 1024)] {
        for acks in ["1", "all"] {
            for compression in ["none", "lz4"] {
                for kind in [ClientKind::Strom, ClientKind::Rdkafka] {
                    let topic = format!("bench-{record_bytes}-{acks}-{compression}-{kind}");
                    runtime.block_on(create_topic(&admin, &topic))?;
                    let workload = Workload {
                        bootstrap: bootstrap.clone(),
                        topic: topic.clone(),
                        records,
                        record_bytes,
                        acks: acks.to_owned(),
                        compression: compression.to_owned(),
                    };
                    let result = run_client_process(kind, &workload)?;
                    let written = runtime.block_on(records_in_topic(&admin, &topic))?;
                    if written != i64::try_from(records).unwrap_or(i64::MAX) {
                        return Err(format!("{topic}: {written} records written of {records}"));
                    }
                    print_row(&workload, kind, &result);
                    results.push(json!({
                        "client": kind.to_string(),
                        "records": records,
                        "record_bytes": record_bytes,
                        "acks": acks,
                        "compression": compression,
                        "result": result,
                    }));
                    // Keeps the disk from filling with 10+ GB of logs.
                    runtime.block_on(delete_topic(&admin, &topic))?;
                }
            }
        }
    }
    if let Some((rss_kb, peak_kb)) = broker.memory_kb() {
        println!("\nbroker memory at the end: {rss_kb} kB resident, {peak_kb} kB peak");
    }
    if let Some(path) = &arguments.json_out {
        std::fs::write(path, Value::Array(results).to_string())
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    Ok(())
}

async fn admin_client(bootstrap: &str) -> Result<AdminClient, String> {
    let cluster = Cluster::connect(ClientConfig::new([bootstrap.to_owned()]))
        .await
        .map_err(|error| format!("admin client: {error}"))?;
    Ok(AdminClient::new(cluster, Duration::from_secs(30)))
}

async fn create_topic(admin: &AdminClient, topic: &str) -> Result<(), String> {
    let mut outcomes = admin
        .create_topics(&[NewTopic::new(topic, PARTITIONS, 1)], false)
        .await
        .map_err(|error| format!("create {topic}: {error}"))?;
    match outcomes.remove(topic) {
        Some(Ok(())) => Ok(()),
        Some(Err(error)) => Err(format!("create {topic}: {error}")),
        None => Err(format!("create {topic}: no answer for it")),
    }
}

/// The records in a topic: the sum of its partitions' end offsets, checked
/// against the records the client reported acknowledged.
async fn records_in_topic(admin: &AdminClient, topic: &str) -> Result<i64, String> {
    let mut total = 0;
    for partition in 0..PARTITIONS {
        total += admin
            .list_offset(topic, partition, OffsetSpec::Latest)
            .await
            .map_err(|error| format!("end offset of {topic}-{partition}: {error}"))?
            .offset;
    }
    Ok(total)
}

async fn delete_topic(admin: &AdminClient, topic: &str) -> Result<(), String> {
    admin
        .delete_topics(&[topic])
        .await
        .map_err(|error| format!("delete {topic}: {error}"))?;
    Ok(())
}

fn run_client_process(kind: ClientKind, workload: &Workload) -> Result<Value, String> {
    let executable = std::env::current_exe().map_err(|error| format!("own executable: {error}"))?;
    let output = Command::new(executable)
        .arg("--client")
        .arg(kind.to_string())
        .arg("--bootstrap")
        .arg(&workload.bootstrap)
        .arg("--topic")
        .arg(&workload.topic)
        .arg("--records")
        .arg(workload.records.to_string())
        .arg("--record-bytes")
        .arg(workload.record_bytes.to_string())
        .arg("--acks")
        .arg(&workload.acks)
        .arg("--compression")
        .arg(&workload.compression)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("client process: {error}"))?;
    if !output.status.success() {
        return Err(format!("{kind} client failed: {}", output.status));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).map_err(|error| format!("{kind} client output: {error}"))
}

fn print_row(workload: &Workload, kind: ClientKind, result: &Value) {
    let number = |key: &str| result.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let cpu_s = number("cpu_ms") / 1000.0;
    let records = number("records");
    println!(
        "| {} | {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.2} | {:.2} |",
        workload.records,
        workload.record_bytes,
        workload.acks,
        workload.compression,
        kind,
        number("records_per_sec"),
        number("mb_per_sec"),
        number("p99_latency_ms"),
        cpu_s,
        cpu_s / (records / 1_000_000.0),
    );
}
