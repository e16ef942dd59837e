//! `strom-rdkafka-bench`: librdkafka against a Strom broker (a child
//! process) and against librdkafka's in-memory mock cluster, in one run.
//!
//! Run with `cargo bench -p strom-bench --bench strom-rdkafka-bench -- --help`
//! after `cargo build --release -p strom-broker` (or `scripts/bench-broker`).

mod broker_process;
mod workloads;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use serde_json::{json, Value};
use strom_bench::stats::LatencySummary;

use broker_process::{default_broker_binary, BrokerProcess};
use workloads::{consume, end_to_end, produce, ConsumeMode, LatencySettings, Throughput};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "strom-rdkafka-bench",
    about = "librdkafka: Strom against the mock cluster"
)]
struct Arguments {
    /// Records per throughput phase.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Value bytes per record.
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// Partitions per topic.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Produce rounds per acks setting; the targets take turns within a
    /// round (Strom, then the mock), and the median round is reported, so
    /// that load from elsewhere hits both alike.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Records timed in the end-to-end latency phase.
    #[arg(long, default_value_t = 5_000)]
    latency_records: u64,
    /// Send rate of the latency phase.
    #[arg(long, default_value_t = 1_000)]
    latency_rate: u64,
    /// Records produced (acks=1) before reading the broker's RSS; 0 skips.
    #[arg(long, default_value_t = 0)]
    rss_records: u64,
    /// The strom-broker executable (default: next to target/<profile>/deps).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// A broker setting, `key=value`, passed to strom-broker's `--set`
    /// (repeatable), e.g. `strom.log.page.cache.retain.bytes=-1`.
    #[arg(long = "broker-set", value_name = "KEY=VALUE")]
    broker_settings: Vec<String>,
    /// Skip the mock cluster.
    #[arg(long)]
    no_mock: bool,
    /// Stop the consume phase after this many seconds and report the rate
    /// of what was read.
    #[arg(long, default_value_t = 300)]
    consume_timeout_s: u64,
    /// Write the results as JSON here.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Where the clients connect.
enum Target {
    Strom(BrokerProcess),
    Mock(MockCluster<'static, DefaultProducerContext>),
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Strom(_) => "strom",
            Target::Mock(_) => "mock",
        }
    }

    fn bootstrap(&self) -> String {
        match self {
            Target::Strom(broker) => broker.bootstrap(),
            Target::Mock(cluster) => cluster.bootstrap_servers(),
        }
    }

    fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), String> {
        match self {
            Target::Strom(broker) => create_strom_topic(&broker.bootstrap(), topic, partitions),
            Target::Mock(cluster) => cluster
                .create_topic(topic, partitions, 1)
                .map_err(|error| format!("mock topic: {error}")),
        }
    }

    /// CPU time the server side has used so far: the broker process, or the
    /// mock cluster's broker threads (named `rdk:mock`) in this process.
    fn server_cpu_ns(&self) -> Option<u64> {
        match self {
            Target::Strom(broker) => broker.cpu_ns(),
            Target::Mock(_) => broker_process::threads_cpu_ns(std::process::id(), |name| {
                name.starts_with("rdk:mock")
            }),
        }
    }

    fn memory_json(&self) -> Value {
        match self {
            Target::Strom(broker) => match broker.memory_kb() {
                Some((rss_kb, peak_kb)) => json!({ "rss_kb": rss_kb, "peak_rss_kb": peak_kb }),
                None => Value::Null,
            },
            Target::Mock(_) => Value::Null,
        }
    }
}

/// CPU time of this process's threads apart from the mock cluster's
/// brokers: the librdkafka client and the application thread.
fn client_cpu_ns() -> Option<u64> {
    broker_process::threads_cpu_ns(std::process::id(), |name| !name.starts_with("rdk:mock"))
}

/// CPU time of the calling thread (the one that calls `send`).
fn application_cpu_ns() -> Option<u64> {
    broker_process::schedstat_ns(std::path::Path::new("/proc/thread-self/schedstat"))
}

fn create_strom_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("runtime: {error}"))?;
    runtime
        .block_on(async {
            let mut connection = strom_bench::connection::Connection::connect(bootstrap).await?;
            strom_bench::admin::ensure_topic(&mut connection, topic, partitions).await
        })
        .map(|_| ())
        .map_err(|error| format!("create topic {topic}: {error}"))
}

/// What one target measured.
struct Results {
    target: &'static str,
    produce_acks_one: Throughput,
    produce_acks_all: Throughput,
    produce_rounds: ProduceRounds,
    consume: Throughput,
    consume_batch: Throughput,
    end_to_end: LatencySummary,
    memory: Value,
    memory_after_rss_phase: Value,
}

fn throughput_json(throughput: &Throughput, record_bytes: usize) -> Value {
    let records_per_second = throughput.records_per_second();
    json!({
        "records": throughput.records,
        "elapsed_s": throughput.elapsed.as_secs_f64(),
        "records_per_s": records_per_second,
        "mb_per_s": records_per_second * record_bytes as f64 / 1e6,
    })
}

impl Results {
    fn to_json(&self, record_bytes: usize) -> Value {
        json!({
            "target": self.target,
            "produce_acks_1": throughput_json(&self.produce_acks_one, record_bytes),
            "produce_acks_all": throughput_json(&self.produce_acks_all, record_bytes),
            "produce_acks_1_rounds": self.produce_rounds.acks_one.iter().map(|round| throughput_json(round, record_bytes)).collect::<Vec<_>>(),
            "produce_acks_all_rounds": self.produce_rounds.acks_all.iter().map(|round| throughput_json(round, record_bytes)).collect::<Vec<_>>(),
            "consume": throughput_json(&self.consume, record_bytes),
            "consume_batch": throughput_json(&self.consume_batch, record_bytes),
            "end_to_end": self.end_to_end.to_json(),
            "broker_memory": self.memory,
            "broker_memory_after_rss_phase": self.memory_after_rss_phase,
        })
    }
}

/// Every produce round of one target.
#[derive(Debug, Default, Clone)]
struct ProduceRounds {
    acks_one: Vec<Throughput>,
    acks_all: Vec<Throughput>,
}

/// The round with the median rate.
fn median(rounds: &[Throughput]) -> Throughput {
    let mut sorted = rounds.to_vec();
    sorted.sort_by(|a, b| a.records_per_second().total_cmp(&b.records_per_second()));
    sorted.get(sorted.len() / 2).copied().unwrap_or(Throughput {
        records: 0,
        elapsed: Duration::ZERO,
    })
}

/// Produce rounds, the targets taking turns: round by round, acks=1 on
/// each target, then acks=all on each target.
fn produce_rounds(targets: &[Target], arguments: &Arguments) -> Result<Vec<ProduceRounds>, String> {
    for target in targets {
        target.create_topic("bench-acks-1", arguments.partitions)?;
        target.create_topic("bench-acks-all", arguments.partitions)?;
    }
    let mut figures = vec![ProduceRounds::default(); targets.len()];
    for round in 1..=arguments.rounds.max(1) {
        for (acks, topic) in [("1", "bench-acks-1"), ("all", "bench-acks-all")] {
            for (target, rounds) in targets.iter().zip(figures.iter_mut()) {
                eprintln!("[{}] produce acks={acks}, round {round}", target.name());
                let server_before = target.server_cpu_ns();
                let client_before = client_cpu_ns();
                let application_before = application_cpu_ns();
                let throughput = produce(
                    &target.bootstrap(),
                    topic,
                    arguments.partitions,
                    arguments.records,
                    arguments.record_bytes,
                    acks,
                )?;
                let spent_ms = |after: Option<u64>, before: Option<u64>| {
                    after
                        .zip(before)
                        .map(|(after, before)| after.saturating_sub(before) as f64 / 1e6)
                        .unwrap_or(f64::NAN)
                };
                eprintln!(
                    "  CPU: server {:.1} ms, client {:.1} ms (the sending thread {:.1} ms)",
                    spent_ms(target.server_cpu_ns(), server_before),
                    spent_ms(client_cpu_ns(), client_before),
                    spent_ms(application_cpu_ns(), application_before)
                );
                if acks == "1" {
                    rounds.acks_one.push(throughput);
                } else {
                    rounds.acks_all.push(throughput);
                }
            }
        }
    }
    Ok(figures)
}

fn measure(
    target: &Target,
    produce_rounds: ProduceRounds,
    arguments: &Arguments,
) -> Result<Results, String> {
    let bootstrap = target.bootstrap();
    let partitions = arguments.partitions;
    let name = target.name();
    let produce_acks_one = median(&produce_rounds.acks_one);
    let produce_acks_all = median(&produce_rounds.acks_all);
    eprintln!("[{name}] consume (poll per record)");
    let consumed = consume(
        &bootstrap,
        "bench-acks-1",
        partitions,
        arguments.records,
        Duration::from_secs(arguments.consume_timeout_s),
        ConsumeMode::Poll,
    )?;
    eprintln!("[{name}] consume (batch API)");
    let consumed_in_batches = consume(
        &bootstrap,
        "bench-acks-1",
        partitions,
        arguments.records,
        Duration::from_secs(arguments.consume_timeout_s),
        ConsumeMode::Batch,
    )?;
    eprintln!("[{name}] end-to-end latency");
    target.create_topic("bench-latency", partitions)?;
    let latency = LatencySettings {
        records: arguments.latency_records,
        warmup_records: arguments.latency_rate.min(1_000),
        records_per_second: arguments.latency_rate,
        record_bytes: arguments.record_bytes,
    };
    let end_to_end = end_to_end(&bootstrap, "bench-latency", partitions, latency)?;
    let memory = target.memory_json();
    let mut memory_after_rss_phase = Value::Null;
    if arguments.rss_records > 0 && matches!(target, Target::Strom(_)) {
        eprintln!(
            "[{name}] {} records for the RSS reading",
            arguments.rss_records
        );
        target.create_topic("bench-rss", partitions)?;
        produce(
            &bootstrap,
            "bench-rss",
            partitions,
            arguments.rss_records,
            arguments.record_bytes,
            "1",
        )?;
        memory_after_rss_phase = target.memory_json();
    }
    Ok(Results {
        target: name,
        produce_acks_one,
        produce_acks_all,
        produce_rounds,
        consume: consumed,
        consume_batch: consumed_in_batches,
        end_to_end,
        memory,
        memory_after_rss_phase,
    })
}

fn print_table(results: &[Results]) {
    let mut header = format!("{:<28}", "metric");
    for result in results {
        header.push_str(&format!("{:>16}", result.target));
    }
    println!("{header}");
    type Row = (&'static str, fn(&Results) -> f64);
    let rows: [Row; 9] = [
        ("produce acks=1 (rec/s)*", |r| {
            r.produce_acks_one.records_per_second()
        }),
        ("produce acks=all (rec/s)*", |r| {
            r.produce_acks_all.records_per_second()
        }),
        ("acks=all / acks=1", |r| {
            r.produce_acks_all.records_per_second()
                / r.produce_acks_one
                    .records_per_second()
                    .max(f64::MIN_POSITIVE)
        }),
        ("consume, poll (rec/s)", |r| r.consume.records_per_second()),
        ("consume, batch API (rec/s)", |r| {
            r.consume_batch.records_per_second()
        }),
        ("end-to-end p50 (us)", |r| r.end_to_end.p50_us as f64),
        ("end-to-end p99 (us)", |r| r.end_to_end.p99_us as f64),
        ("end-to-end max (us)", |r| r.end_to_end.max_us as f64),
        ("end-to-end samples", |r| r.end_to_end.count as f64),
    ];
    for (label, value) in rows {
        let mut line = format!("{label:<28}");
        for result in results {
            let figure = value(result);
            if figure.fract() == 0.0 || figure > 100.0 {
                line.push_str(&format!("{figure:>16.0}"));
            } else {
                line.push_str(&format!("{figure:>16.3}"));
            }
        }
        println!("{line}");
    }
    print_rounds(results);
    println!("* median of the rounds below");
    print_memory(results);
}

/// Each produce round's figure per target.
fn print_rounds(results: &[Results]) {
    let rounds = results
        .first()
        .map_or(0, |result| result.produce_rounds.acks_one.len());
    for round in 0..rounds {
        for (label, pick) in [
            (
                "acks=1",
                (|r: &Results| &r.produce_rounds.acks_one) as fn(&Results) -> &Vec<Throughput>,
            ),
            ("acks=all", |r: &Results| &r.produce_rounds.acks_all),
        ] {
            let mut line = format!("{:<28}", format!("  round {} {label}", round + 1));
            for result in results {
                let figure = pick(result)
                    .get(round)
                    .map_or(0.0, Throughput::records_per_second);
                line.push_str(&format!("{figure:>16.0}"));
            }
            println!("{line}");
        }
    }
}

/// The brokers' memory after the phases, where measured.
fn print_memory(results: &[Results]) {
    for result in results {
        if !result.memory.is_null() {
            println!(
                "{} broker memory after the phases: {}",
                result.target, result.memory
            );
        }
        if !result.memory_after_rss_phase.is_null() {
            println!(
                "{} broker memory after the RSS phase: {}",
                result.target, result.memory_after_rss_phase
            );
        }
    }
}

fn run(arguments: &Arguments) -> Result<Value, String> {
    let binary = arguments
        .broker_bin
        .clone()
        .or_else(default_broker_binary)
        .ok_or("cannot locate strom-broker; pass --broker-bin")?;
    let mut targets = vec![Target::Strom(BrokerProcess::start(
        &binary,
        arguments.partitions,
        &arguments.broker_settings,
    )?)];
    if !arguments.no_mock {
        let cluster = MockCluster::new(1).map_err(|error| format!("mock cluster: {error}"))?;
        targets.push(Target::Mock(cluster));
    }
    let rounds = produce_rounds(&targets, arguments)?;
    let mut results = Vec::new();
    for (target, rounds) in targets.iter().zip(rounds) {
        results.push(measure(target, rounds, arguments)?);
        // Strom's figures survive a failing mock run.
        if results.len() == 1 {
            print_table(&results);
        }
    }
    drop(targets);
    print_table(&results);
    Ok(json!({
        "records": arguments.records,
        "record_bytes": arguments.record_bytes,
        "partitions": arguments.partitions,
        "latency_records": arguments.latency_records,
        "latency_rate": arguments.latency_rate,
        "rounds": arguments.rounds,
        "librdkafka": rdkafka::util::get_rdkafka_version().1,
        "results": results.iter().map(|result| result.to_json(arguments.record_bytes)).collect::<Vec<_>>(),
    }))
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    match run(&arguments) {
        Ok(report) => {
            if let Some(path) = &arguments.json_out {
                if let Err(error) = std::fs::write(path, format!("{report:#}\n")) {
                    eprintln!(
                        "strom-rdkafka-bench: cannot write {}: {error}",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("strom-rdkafka-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
