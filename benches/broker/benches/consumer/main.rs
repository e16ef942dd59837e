//! `strom-consumer-bench`: strom-consumer against librdkafka's consumer,
//! reading the same records from one Strom broker (a child process) in the
//! same run.
//!
//! Two workloads, each on its own topic filled once by a librdkafka producer:
//! 5 million records of 100 bytes and 1 million records of 1 KiB (counts
//! overridable with `STROM_CONSUMER_BENCH_SMALL_RECORDS` and
//! `STROM_CONSUMER_BENCH_LARGE_RECORDS`, or the flags). Each client is
//! assigned every partition from the beginning and reads until it has seen
//! every record; reported per client: records/s, MB/s (value bytes, 10^6
//! bytes per MB) and the client's CPU time (user + system of this process
//! over the read, broker excluded). Both clients check CRCs and use the same
//! fetch sizes. `--rounds` repeats each read, alternating which client
//! goes first.
//!
//! `cargo build --release -p strom-broker && cargo bench -p strom-bench
//! --bench strom-consumer-bench -- --help`

#[path = "../rdkafka/broker_process.rs"]
mod broker_process;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde_json::{json, Value};
use strom_consumer::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};

use broker_process::{default_broker_binary, BrokerProcess};

/// How long one produce or read may take before it is abandoned.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// `fetch.max.bytes` of both clients.
const FETCH_MAX_BYTES: &str = "52428800";
/// `max.partition.fetch.bytes` of both clients.
const PARTITION_FETCH_MAX_BYTES: &str = "8388608";
/// `fetch.max.wait.ms` (librdkafka: `fetch.wait.max.ms`) of both clients.
const FETCH_MAX_WAIT_MS: &str = "500";

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "strom-consumer-bench",
    about = "strom-consumer vs librdkafka, reading from one Strom broker"
)]
struct Arguments {
    /// Records of the 100-byte workload.
    #[arg(
        long,
        env = "STROM_CONSUMER_BENCH_SMALL_RECORDS",
        default_value_t = 5_000_000
    )]
    small_records: u64,
    /// Records of the 1 KiB workload.
    #[arg(
        long,
        env = "STROM_CONSUMER_BENCH_LARGE_RECORDS",
        default_value_t = 1_000_000
    )]
    large_records: u64,
    /// Partitions per topic.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Reads per client and workload.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// strom-consumer's `max.poll.records`.
    #[arg(long, default_value_t = 10_000)]
    max_poll_records: usize,
    /// The strom-broker executable (default: next to target/<profile>/deps).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One read of a whole topic by one client.
#[derive(Debug, Clone, Copy)]
struct Read {
    records: u64,
    value_bytes: u64,
    elapsed: Duration,
    cpu: Duration,
}

impl Read {
    fn records_per_second(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    fn megabytes_per_second(&self) -> f64 {
        self.value_bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    fn to_json(self) -> Value {
        json!({
            "records": self.records,
            "value_bytes": self.value_bytes,
            "seconds": self.elapsed.as_secs_f64(),
            "records_per_second": self.records_per_second(),
            "megabytes_per_second": self.megabytes_per_second(),
            "cpu_seconds": self.cpu.as_secs_f64(),
        })
    }
}

/// User plus system CPU time of this process so far.
fn process_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            let user: u64 = fields.get(11)?.parse().ok()?;
            let system: u64 = fields.get(12)?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    // Linux reports clock ticks of 1/100 s (USER_HZ).
    Duration::from_millis(ticks * 10)
}

/// Counts delivery reports.
#[derive(Default)]
struct DeliveryCounter {
    delivered: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        let counter = if result.is_ok() {
            &self.delivered
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Fills `topic` with `records` values of `value_bytes` bytes, round-robin
/// over the partitions (acks=1, uncompressed).
fn fill(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    value_bytes: usize,
) -> Result<(), String> {
    let producer: BaseProducer<DeliveryCounter> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("batch.num.messages", "10000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("compression.type", "none")
        .set("enable.idempotence", "false")
        .create_with_context(DeliveryCounter::default())
        .map_err(|error| format!("producer: {error}"))?;
    let value = vec![b'v'; value_bytes];
    let started = Instant::now();
    for index in 0..records {
        let partition = i32::try_from(index % u64::try_from(partitions).unwrap_or(1)).unwrap_or(0);
        let mut record = BaseRecord::<(), [u8]>::to(topic)
            .partition(partition)
            .payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => return Err(format!("send: {error}")),
            }
            if started.elapsed() > PHASE_TIMEOUT {
                return Err("produce timed out".to_owned());
            }
        }
        if index % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(PHASE_TIMEOUT)
        .map_err(|error| format!("flush: {error}"))?;
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} deliveries failed"));
    }
    Ok(())
}

/// librdkafka's `BaseConsumer` reads every partition of `topic` from the
/// beginning until it has `records` records.
fn read_with_librdkafka(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
) -> Result<Read, String> {
    let cpu_before = process_cpu();
    let started = Instant::now();
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "strom-consumer-bench")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", FETCH_MAX_WAIT_MS)
        .set("fetch.max.bytes", FETCH_MAX_BYTES)
        .set("max.partition.fetch.bytes", PARTITION_FETCH_MAX_BYTES)
        .create()
        .map_err(|error| format!("consumer: {error}"))?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .map_err(|error| format!("assignment: {error}"))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|error| format!("assign: {error}"))?;
    let (mut read, mut value_bytes) = (0_u64, 0_u64);
    while read < records {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                read += 1;
                value_bytes += message.payload_len() as u64;
            }
            Some(Err(error)) => return Err(format!("librdkafka consume: {error}")),
            None => {}
        }
        if started.elapsed() > PHASE_TIMEOUT {
            return Err(format!("librdkafka read timed out after {read} records"));
        }
    }
    let elapsed = started.elapsed();
    drop(consumer);
    Ok(Read {
        records: read,
        value_bytes,
        elapsed,
        cpu: process_cpu().saturating_sub(cpu_before),
    })
}

/// strom-consumer (on a current-thread runtime) reads every partition of
/// `topic` from the beginning until it has `records` records.
fn read_with_strom(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    max_poll_records: usize,
) -> Result<Read, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("runtime: {error}"))?;
    let cpu_before = process_cpu();
    let started = Instant::now();
    let (read, value_bytes) = runtime.block_on(async {
        let mut config = ConsumerConfig::new([bootstrap]);
        config.auto_offset_reset = OffsetReset::Earliest;
        config.max_poll_records = max_poll_records;
        for (key, value) in [
            ("fetch.max.wait.ms", FETCH_MAX_WAIT_MS),
            ("fetch.max.bytes", FETCH_MAX_BYTES),
            ("max.partition.fetch.bytes", PARTITION_FETCH_MAX_BYTES),
            ("check.crcs", "true"),
        ] {
            config.set(key, value).map_err(|error| error.to_string())?;
        }
        let mut consumer = Consumer::new(config)
            .await
            .map_err(|error| format!("strom-consumer: {error}"))?;
        consumer
            .assign((0..partitions).map(|partition| TopicPartition::new(topic, partition)))
            .map_err(|error| format!("assign: {error}"))?;
        let (mut read, mut value_bytes) = (0_u64, 0_u64);
        while read < records {
            let batch = consumer
                .poll(Duration::from_millis(100))
                .await
                .map_err(|error| format!("strom-consumer poll: {error}"))?;
            for record in &batch {
                read += 1;
                value_bytes += record.value.as_ref().map_or(0, |value| value.len() as u64);
            }
            if started.elapsed() > PHASE_TIMEOUT {
                return Err(format!(
                    "strom-consumer read timed out after {read} records"
                ));
            }
        }
        consumer
            .close()
            .await
            .map_err(|error| format!("close: {error}"))?;
        Ok::<_, String>((read, value_bytes))
    })?;
    let elapsed = started.elapsed();
    drop(runtime);
    Ok(Read {
        records: read,
        value_bytes,
        elapsed,
        cpu: process_cpu().saturating_sub(cpu_before),
    })
}

/// Fills a topic and reads it with both clients, `rounds` times each.
fn workload(
    broker: &BrokerProcess,
    arguments: &Arguments,
    topic: &str,
    records: u64,
    value_bytes: usize,
) -> Result<Value, String> {
    let bootstrap = broker.bootstrap();
    let fill_started = Instant::now();
    fill(
        &bootstrap,
        topic,
        arguments.partitions,
        records,
        value_bytes,
    )?;
    eprintln!(
        "{topic}: {records} records of {value_bytes} bytes produced in {:.1} s",
        fill_started.elapsed().as_secs_f64()
    );
    let (mut strom, mut librdkafka) = (Vec::new(), Vec::new());
    for round in 0..arguments.rounds {
        let strom_first = round % 2 == 0;
        for client in 0..2 {
            if (client == 0) == strom_first {
                let read = read_with_strom(
                    &bootstrap,
                    topic,
                    arguments.partitions,
                    records,
                    arguments.max_poll_records,
                )?;
                print_read("strom-consumer", topic, &read);
                strom.push(read);
            } else {
                let read = read_with_librdkafka(&bootstrap, topic, arguments.partitions, records)?;
                print_read("librdkafka", topic, &read);
                librdkafka.push(read);
            }
        }
    }
    Ok(json!({
        "topic": topic,
        "records": records,
        "value_bytes": value_bytes,
        "strom_consumer": strom.into_iter().map(Read::to_json).collect::<Vec<_>>(),
        "librdkafka": librdkafka.into_iter().map(Read::to_json).collect::<Vec<_>>(),
    }))
}

fn print_read(client: &str, topic: &str, read: &Read) {
    println!(
        "{topic:>12} {client:>15}: {:>10.0} records/s {:>8.1} MB/s {:>6.2} s wall {:>6.2} s CPU",
        read.records_per_second(),
        read.megabytes_per_second(),
        read.elapsed.as_secs_f64(),
        read.cpu.as_secs_f64(),
    );
}

fn run(arguments: &Arguments) -> Result<Value, String> {
    let binary = arguments
        .broker_bin
        .clone()
        .or_else(default_broker_binary)
        .ok_or("cannot locate strom-broker; pass --broker-bin")?;
    let broker = BrokerProcess::start(&binary, arguments.partitions, &[])?;
    let small = workload(
        &broker,
        arguments,
        "consume-100b",
        arguments.small_records,
        100,
    )?;
    let large = workload(
        &broker,
        arguments,
        "consume-1kib",
        arguments.large_records,
        1024,
    )?;
    let memory = broker
        .memory_kb()
        .map(|(rss, peak)| json!({"broker_rss_kb": rss, "broker_peak_rss_kb": peak}));
    Ok(json!({
        "partitions": arguments.partitions,
        "max_poll_records": arguments.max_poll_records,
        "librdkafka": rdkafka::util::get_rdkafka_version().1,
        "workloads": [small, large],
        "broker_memory": memory,
    }))
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    match run(&arguments) {
        Ok(report) => {
            if let Some(path) = &arguments.json_out {
                if let Err(error) = std::fs::write(path, format!("{report:#}\n")) {
                    eprintln!(
                        "strom-consumer-bench: cannot write {}: {error}",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("strom-consumer-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
