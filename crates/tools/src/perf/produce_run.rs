//! The producer benchmark behind `strom perf produce`, modelled on Kafka's
//! `producer-perf-test`: sends a
//! number of fixed-size records (optionally capped at a throughput) and
//! reports records/s, MB/s and latency percentiles.
//!
//! Latency is measured from `send` to the moment the collector observes the
//! acknowledgement; the collector awaits records in send order, so a record
//! acknowledged before an earlier one is counted when the earlier one is.

use std::time::{Duration, Instant};

use bytes::Bytes;
use strom_protocol::records::Compression;
use tokio::sync::mpsc;

use crate::error::ToolError;

use strom_producer::{
    Acks, DeliveryFuture, ProduceError, Producer, ProducerConfig, ProducerCreateError,
    ProducerRecord, TransactionError,
};

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfOptions {
    /// `host:port` list.
    pub bootstrap_servers: String,
    /// The topic (must exist).
    pub topic: String,
    /// Records to send.
    pub num_records: u64,
    /// Value size in bytes.
    pub record_size: usize,
    /// Records per second cap; `None` for no cap.
    pub throughput: Option<u64>,
    /// `acks`; `None` keeps the configuration's.
    pub acks: Option<Acks>,
    /// `linger.ms`; `None` keeps the configuration's.
    pub linger: Option<Duration>,
    /// `batch.size`; `None` keeps the configuration's.
    pub batch_size: Option<usize>,
    /// `compression.type`; `None` keeps the configuration's.
    pub compression: Option<Compression>,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfReport {
    /// Records acknowledged.
    pub records: u64,
    /// Records that failed.
    pub failed: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Records per second.
    pub records_per_second: f64,
    /// Megabytes (2^20 bytes) of values per second.
    pub megabytes_per_second: f64,
    /// Mean latency in milliseconds.
    pub average_latency_ms: f64,
    /// Median latency in milliseconds.
    pub p50_latency_ms: f64,
    /// 99th percentile latency in milliseconds.
    pub p99_latency_ms: f64,
    /// 99.9th percentile latency in milliseconds.
    pub p999_latency_ms: f64,
    /// Maximum latency in milliseconds.
    pub max_latency_ms: f64,
}

impl PerfReport {
    /// Builds the report from per-record latencies in microseconds.
    pub fn from_latencies(
        mut latencies_us: Vec<u64>,
        failed: u64,
        elapsed: Duration,
        record_size: usize,
    ) -> PerfReport {
        latencies_us.sort_unstable();
        let records = latencies_us.len() as u64;
        let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let percentile = |fraction: f64| -> f64 {
            if latencies_us.is_empty() {
                return 0.0;
            }
            let index = ((latencies_us.len() as f64 * fraction).ceil() as usize)
                .saturating_sub(1)
                .min(latencies_us.len() - 1);
            latencies_us.get(index).copied().unwrap_or(0) as f64 / 1000.0
        };
        let total_us: u64 = latencies_us.iter().sum();
        PerfReport {
            records,
            failed,
            elapsed,
            records_per_second: records as f64 / seconds,
            megabytes_per_second: (records as f64 * record_size as f64)
                / (1024.0 * 1024.0)
                / seconds,
            average_latency_ms: if records == 0 {
                0.0
            } else {
                total_us as f64 / records as f64 / 1000.0
            },
            p50_latency_ms: percentile(0.5),
            p99_latency_ms: percentile(0.99),
            p999_latency_ms: percentile(0.999),
            max_latency_ms: latencies_us.last().copied().unwrap_or(0) as f64 / 1000.0,
        }
    }

    /// One JSON object with every figure.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "records": self.records,
            "failed": self.failed,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "records_per_sec": self.records_per_second,
            "mb_per_sec": self.megabytes_per_second,
            "avg_latency_ms": self.average_latency_ms,
            "p50_latency_ms": self.p50_latency_ms,
            "p99_latency_ms": self.p99_latency_ms,
            "p999_latency_ms": self.p999_latency_ms,
            "max_latency_ms": self.max_latency_ms,
        })
        .to_string()
    }
}

impl std::fmt::Display for PerfReport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "{} records sent ({} failed), {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, \
             {:.2} ms p50, {:.2} ms p99, {:.2} ms p99.9, {:.2} ms max latency.",
            self.records,
            self.failed,
            self.records_per_second,
            self.megabytes_per_second,
            self.average_latency_ms,
            self.p50_latency_ms,
            self.p99_latency_ms,
            self.p999_latency_ms,
            self.max_latency_ms
        )
    }
}

/// Runs the benchmark.
pub async fn run(options: &PerfOptions) -> Result<PerfReport, ProducerCreateError> {
    let mut config = ProducerConfig::new([options.bootstrap_servers.clone()]);
    config.client.client_id = "strom-perf-produce".to_owned();
    run_with_config(options, config).await
}

/// Runs the benchmark with `config` (for example read from a client
/// properties file) as the starting point; the options' acks, linger,
/// batch size and compression override it where they are set, and its
/// bootstrap servers are used instead of the options'.
pub async fn run_with_config(
    options: &PerfOptions,
    config: ProducerConfig,
) -> Result<PerfReport, ProducerCreateError> {
    let producer = Producer::new(apply_options(options, config)).await?;
    let outcome = send_records(options, &producer, &mut NoTransactions).await;
    producer.close(Duration::from_secs(5)).await;
    match outcome {
        Ok(report) => Ok(report),
        Err(never) => match never {},
    }
}

/// How `strom perf produce --transactional-id` groups its records, as
/// Kafka's `producer-perf-test --transaction-duration-ms`: a transaction is
/// begun before a record is sent and ended by the first send that finds it
/// `duration` old (and after the last record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionPlan {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// How long each transaction stays open.
    pub duration: Duration,
    /// Abort every n-th transaction (1: all) instead of committing it; its
    /// records are flushed first, so that they reach the log. `None`
    /// commits every transaction.
    pub abort_every: Option<u64>,
    /// Bound on `init_transactions`, each commit and each abort.
    pub timeout: Duration,
}

impl TransactionPlan {
    /// Whether the `ordinal`-th transaction (from 1) is to be aborted.
    pub fn aborts(&self, ordinal: u64) -> bool {
        self.abort_every
            .is_some_and(|every| every > 0 && ordinal.is_multiple_of(every))
    }
}

/// How many transactions a transactional run ended, and their records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransactionCounts {
    /// Transactions committed.
    pub committed: u64,
    /// Records sent in committed transactions.
    pub committed_records: u64,
    /// Transactions aborted.
    pub aborted: u64,
    /// Records sent (and flushed) in aborted transactions.
    pub aborted_records: u64,
}

impl TransactionCounts {
    /// The counts as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "committed": self.committed,
            "committed_records": self.committed_records,
            "aborted": self.aborted,
            "aborted_records": self.aborted_records,
        })
    }
}

/// Runs the benchmark in transactions: `config` with `plan`'s
/// `transactional.id` (so idempotent, `acks=all`) and the options applied.
/// Records are counted when acknowledged, as without transactions; the
/// wall time includes every commit (not `init_transactions`).
pub async fn run_transactional(
    options: &PerfOptions,
    mut config: ProducerConfig,
    plan: &TransactionPlan,
) -> Result<(PerfReport, TransactionCounts), ToolError> {
    config.transactional_id = Some(plan.transactional_id.clone());
    let producer = Producer::new(apply_options(options, config))
        .await
        .map_err(|source| ToolError::ProducerCreate { source })?;
    let outcome = async {
        producer
            .init_transactions(plan.timeout)
            .await
            .map_err(failed(plan, "init_transactions"))?;
        let mut transactions = Transactions {
            plan,
            open_since: None,
            open_records: 0,
            counts: TransactionCounts::default(),
        };
        let report = send_records(options, &producer, &mut transactions).await?;
        Ok((report, transactions.counts))
    }
    .await;
    producer.close(Duration::from_secs(5)).await;
    outcome
}

fn apply_options(options: &PerfOptions, mut config: ProducerConfig) -> ProducerConfig {
    if let Some(acks) = options.acks {
        config.acks = acks;
    }
    if let Some(linger) = options.linger {
        config.linger = linger;
    }
    if let Some(batch_size) = options.batch_size {
        config.batch_size = batch_size;
    }
    if let Some(compression) = options.compression {
        config.compression = compression;
    }
    config
}

/// Awaits every delivery in send order: the latencies (µs) of the
/// acknowledged records and the count of failed ones.
fn collect_deliveries(
    mut receiver: mpsc::UnboundedReceiver<(Instant, DeliveryFuture)>,
) -> tokio::task::JoinHandle<(Vec<u64>, u64)> {
    tokio::spawn(async move {
        let mut latencies_us = Vec::new();
        let mut failed = 0u64;
        while let Some((sent_at, delivery)) = receiver.recv().await {
            match delivery.await {
                Ok(_) => latencies_us
                    .push(u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX)),
                Err(ProduceError::Closed) | Err(_) => failed += 1,
            }
        }
        (latencies_us, failed)
    })
}

/// What the send loop does around each record: nothing, or keep records in
/// transactions.
trait SendHooks {
    /// What a hook can fail with.
    type Error;
    /// Called before each record is sent.
    fn before_send(&mut self, producer: &Producer) -> Result<(), Self::Error>;
    /// Called after each record is sent, and once more (`last`) after the
    /// last one.
    async fn after_send(&mut self, producer: &Producer, last: bool) -> Result<(), Self::Error>;
}

/// The plain producer: no hooks.
struct NoTransactions;

impl SendHooks for NoTransactions {
    type Error = std::convert::Infallible;

    fn before_send(&mut self, _: &Producer) -> Result<(), Self::Error> {
        Ok(())
    }

    async fn after_send(&mut self, _: &Producer, _: bool) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The send loop of both modes.
async fn send_records<H: SendHooks>(
    options: &PerfOptions,
    producer: &Producer,
    hooks: &mut H,
) -> Result<PerfReport, H::Error> {
    let value = Bytes::from(vec![b'x'; options.record_size]);
    let topic: std::sync::Arc<str> = options.topic.as_str().into();
    let (deliveries, receiver) = mpsc::unbounded_channel::<(Instant, DeliveryFuture)>();
    let collector = collect_deliveries(receiver);
    let started = Instant::now();
    for index in 0..options.num_records {
        if let Some(throughput) = options.throughput.filter(|cap| *cap > 0) {
            let due = Duration::from_secs_f64(index as f64 / throughput as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        hooks.before_send(producer)?;
        let sent_at = Instant::now();
        let delivery = producer
            .send(ProducerRecord::new(
                std::sync::Arc::clone(&topic),
                value.clone(),
            ))
            .await;
        if deliveries.send((sent_at, delivery)).is_err() {
            break;
        }
        hooks.after_send(producer, false).await?;
    }
    drop(deliveries);
    hooks.after_send(producer, true).await?;
    producer.flush().await;
    let (latencies_us, failed) = collector.await.unwrap_or_default();
    let elapsed = started.elapsed();
    Ok(PerfReport::from_latencies(
        latencies_us,
        failed,
        elapsed,
        options.record_size,
    ))
}

/// The open transaction of a transactional run.
struct Transactions<'a> {
    plan: &'a TransactionPlan,
    /// When the open transaction began, if one is open.
    open_since: Option<Instant>,
    /// Records sent in the open transaction.
    open_records: u64,
    counts: TransactionCounts,
}

impl SendHooks for Transactions<'_> {
    type Error = ToolError;

    fn before_send(&mut self, producer: &Producer) -> Result<(), ToolError> {
        if self.open_since.is_none() {
            producer
                .begin_transaction()
                .map_err(failed(self.plan, "begin_transaction"))?;
            self.open_since = Some(Instant::now());
        }
        self.open_records += 1;
        Ok(())
    }

    /// Ends the open transaction if it is `plan.duration` old, or if
    /// `last`.
    async fn after_send(&mut self, producer: &Producer, last: bool) -> Result<(), ToolError> {
        let Some(open_since) = self.open_since else {
            return Ok(());
        };
        if !last && open_since.elapsed() < self.plan.duration {
            return Ok(());
        }
        let ordinal = self.counts.committed + self.counts.aborted + 1;
        if self.plan.aborts(ordinal) {
            producer.flush().await;
            producer
                .abort_transaction(self.plan.timeout)
                .await
                .map_err(failed(self.plan, "abort_transaction"))?;
            self.counts.aborted += 1;
            self.counts.aborted_records += self.open_records;
        } else {
            producer
                .commit_transaction(self.plan.timeout)
                .await
                .map_err(failed(self.plan, "commit_transaction"))?;
            self.counts.committed += 1;
            self.counts.committed_records += self.open_records;
        }
        self.open_since = None;
        self.open_records = 0;
        Ok(())
    }
}

fn failed<'a>(
    plan: &'a TransactionPlan,
    operation: &'static str,
) -> impl Fn(TransactionError) -> ToolError + 'a {
    move |source| ToolError::ProducerTransaction {
        transactional_id: plan.transactional_id.clone(),
        operation,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_percentiles_and_rates() {
        let latencies: Vec<u64> = (1..=1000).map(|ms| ms * 1000).collect();
        let report = PerfReport::from_latencies(latencies, 2, Duration::from_secs(2), 1024 * 1024);
        assert_eq!(report.records, 1000);
        assert_eq!(report.failed, 2);
        assert!((report.records_per_second - 500.0).abs() < 1e-9);
        assert!((report.megabytes_per_second - 500.0).abs() < 1e-9);
        assert!((report.p50_latency_ms - 500.0).abs() < 1e-9);
        assert!((report.p99_latency_ms - 990.0).abs() < 1e-9);
        assert!((report.p999_latency_ms - 999.0).abs() < 1e-9);
        assert!((report.max_latency_ms - 1000.0).abs() < 1e-9);
        assert!((report.average_latency_ms - 500.5).abs() < 1e-9);
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["records"], 1000);
    }

    #[test]
    fn the_plan_aborts_every_nth_transaction() {
        let mut plan = TransactionPlan {
            transactional_id: "id".to_owned(),
            duration: Duration::from_millis(100),
            abort_every: Some(3),
            timeout: Duration::from_secs(1),
        };
        let aborted: Vec<u64> = (1..=10).filter(|ordinal| plan.aborts(*ordinal)).collect();
        assert_eq!(aborted, [3, 6, 9]);
        plan.abort_every = Some(1);
        assert!((1..=5).all(|ordinal| plan.aborts(ordinal)));
        for never in [None, Some(0)] {
            plan.abort_every = never;
            assert!(!(1..=10).any(|ordinal| plan.aborts(ordinal)));
        }
        let counts = TransactionCounts {
            committed: 2,
            committed_records: 20,
            aborted: 1,
            aborted_records: 7,
        };
        assert_eq!(counts.to_json()["aborted_records"], 7);
    }
}
