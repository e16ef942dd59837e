//! The two clients, each run in its own process: the same workload, the
//! same latency measure, and the process's CPU time around the produce phase.

use std::time::{Duration, Instant};

use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use serde_json::{json, Value};
use strom_producer::config::parse_compression;
use strom_producer::Acks;
use strom_tools::perf::produce_run::{run as run_strom, PerfOptions, PerfReport};

/// `linger.ms` of both clients.
const LINGER: Duration = Duration::from_millis(5);
/// `batch.size` of both clients.
const BATCH_BYTES: usize = 65_536;

/// Which client a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientKind {
    /// strom-producer.
    Strom,
    /// librdkafka through the `rdkafka` crate.
    Rdkafka,
}

impl std::fmt::Display for ClientKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            ClientKind::Strom => "strom",
            ClientKind::Rdkafka => "rdkafka",
        })
    }
}

/// One produce run.
#[derive(Debug, Clone)]
pub struct Workload {
    /// host:port of the broker.
    pub bootstrap: String,
    /// The topic (exists).
    pub topic: String,
    /// Records to send.
    pub records: u64,
    /// Value bytes per record.
    pub record_bytes: usize,
    /// `1` or `all`.
    pub acks: String,
    /// `compression.type`.
    pub compression: String,
}

/// Runs the workload with one client; returns its report with `cpu_ms`.
pub fn run(kind: ClientKind, workload: &Workload) -> Result<Value, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("runtime: {error}"))?;
    let cpu_before = process_cpu_ms()?;
    let report = match kind {
        ClientKind::Strom => runtime.block_on(strom(workload))?,
        ClientKind::Rdkafka => runtime.block_on(librdkafka(workload))?,
    };
    let cpu_ms = process_cpu_ms()? - cpu_before;
    let mut value: Value =
        serde_json::from_str(&report.to_json()).map_err(|error| format!("report: {error}"))?;
    if let Some(object) = value.as_object_mut() {
        object.insert("cpu_ms".to_owned(), json!(cpu_ms));
    }
    if report.failed > 0 {
        return Err(format!("{kind}: {} records failed", report.failed));
    }
    Ok(value)
}

async fn strom(workload: &Workload) -> Result<PerfReport, String> {
    let acks = match workload.acks.as_str() {
        "1" => Acks::Leader,
        _ => Acks::All,
    };
    let compression = parse_compression("compression.type", &workload.compression)
        .map_err(|error| error.to_string())?;
    let options = PerfOptions {
        bootstrap_servers: workload.bootstrap.clone(),
        topic: workload.topic.clone(),
        num_records: workload.records,
        record_size: workload.record_bytes,
        throughput: None,
        acks: Some(acks),
        linger: Some(LINGER),
        batch_size: Some(BATCH_BYTES),
        compression: Some(compression),
    };
    run_strom(&options)
        .await
        .map_err(|error| format!("strom-producer: {error}"))
}

async fn librdkafka(workload: &Workload) -> Result<PerfReport, String> {
    let idempotence = if workload.acks == "all" {
        "true"
    } else {
        "false"
    };
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &workload.bootstrap)
        .set("acks", &workload.acks)
        .set("linger.ms", LINGER.as_millis().to_string())
        .set("batch.size", BATCH_BYTES.to_string())
        .set("compression.type", &workload.compression)
        .set("enable.idempotence", idempotence)
        .create()
        .map_err(|error| format!("librdkafka producer: {error}"))?;
    let value = vec![b'x'; workload.record_bytes];
    let (deliveries, mut receiver) =
        tokio::sync::mpsc::unbounded_channel::<(Instant, DeliveryFuture)>();
    let collector = tokio::spawn(async move {
        let mut latencies_us = Vec::new();
        let mut failed = 0_u64;
        while let Some((sent_at, delivery)) = receiver.recv().await {
            match delivery.await {
                Ok(Ok(_)) => latencies_us
                    .push(u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX)),
                _ => failed += 1,
            }
        }
        (latencies_us, failed)
    });
    let started = Instant::now();
    for _ in 0..workload.records {
        loop {
            let record: FutureRecord<'_, (), [u8]> =
                FutureRecord::to(&workload.topic).payload(&value[..]);
            let sent_at = Instant::now();
            match producer.send_result(record) {
                Ok(delivery) => {
                    let _ = deliveries.send((sent_at, delivery));
                    break;
                }
                // The local queue is full: wait as strom-producer's send
                // waits for buffer memory.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }
    drop(deliveries);
    let (latencies_us, failed) = collector
        .await
        .map_err(|error| format!("collector: {error}"))?;
    Ok(PerfReport::from_latencies(
        latencies_us,
        failed,
        started.elapsed(),
        workload.record_bytes,
    ))
}

/// User plus system CPU time of this process (every thread, live or
/// exited) in milliseconds, from `/proc/self/stat` (clock ticks of
/// `USER_HZ`, 100 per second on Linux).
fn process_cpu_ms() -> Result<f64, String> {
    const TICKS_PER_SECOND: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|error| format!("/proc/self/stat: {error}"))?;
    // Fields after the command name (which is in parentheses): state is
    // field 3 of the line, utime 14 and stime 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or("/proc/self/stat has no command name")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize| -> Result<f64, String> {
        fields
            .get(index)
            .and_then(|field| field.parse::<u64>().ok())
            .map(|value| value as f64)
            .ok_or_else(|| format!("/proc/self/stat field {} missing", index + 3))
    };
    Ok((ticks(11)? + ticks(12)?) * 1000.0 / TICKS_PER_SECOND)
}
