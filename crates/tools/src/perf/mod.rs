//! `strom perf produce|consume|e2e-latency`: the benchmarks of
//! `strom-producer` and `strom-consumer`, plus an end-to-end latency test.
//! Human output by default, one JSON line with `--json`.

pub mod consume_run;
pub mod produce_run;
pub mod txn_latency;

use std::time::{Duration, Instant};

use bytes::Bytes;
use strom_consumer::config::{IsolationLevel, OffsetReset};
use strom_consumer::record::TopicPartition;
use strom_consumer::Consumer;
use strom_producer::{Acks, Producer, ProducerRecord};

use self::produce_run::{PerfReport, TransactionCounts};
use crate::cli::{
    AcksArgument, CompressionArgument, PerfCommand, PerfConsumeArguments, PerfLatencyArguments,
    PerfProduceArguments,
};
use crate::context::Context;
use crate::error::ToolError;
use crate::output::Output;
use crate::progress::Progress;

/// Runs a `perf` command.
pub async fn run(
    context: &Context,
    command: PerfCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    match command {
        PerfCommand::Produce(arguments) => produce(context, arguments, out).await,
        PerfCommand::Consume(arguments) => consume(context, arguments, out).await,
        PerfCommand::EndToEndLatency(arguments) => latency(context, arguments, out).await,
    }
}

async fn require_topic(context: &Context, topic: &str) -> Result<usize, ToolError> {
    let cluster = context.cluster().await?;
    let info = crate::topic_metadata::topic_info(&cluster, topic).await;
    cluster.close();
    Ok(info?.partitions.len())
}

async fn produce(
    context: &Context,
    arguments: PerfProduceArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    require_topic(context, &arguments.topic).await?;
    let options = produce_run::PerfOptions {
        bootstrap_servers: context.bootstrap_server().to_owned(),
        topic: arguments.topic.clone(),
        num_records: arguments.num_records,
        record_size: arguments.record_size,
        throughput: arguments.throughput,
        acks: arguments.acks.map(AcksArgument::acks),
        linger: arguments.linger_ms.map(Duration::from_millis),
        batch_size: arguments.batch_size,
        compression: arguments.compression.map(CompressionArgument::compression),
    };
    // The client properties of `--command-config` apply (and the producer's
    // defaults where it says nothing); the options given override them.
    let config = context.producer_config(&[])?;
    let progress = Progress::spinner("producing");
    let outcome = match &arguments.transactional_id {
        Some(transactional_id) => {
            let plan = produce_run::TransactionPlan {
                transactional_id: transactional_id.clone(),
                duration: Duration::from_millis(arguments.transaction_duration_ms),
                abort_every: arguments.abort_every,
                timeout: TRANSACTION_TIMEOUT,
            };
            produce_run::run_transactional(&options, config, &plan)
                .await
                .map(|(report, counts)| (report, Some(counts)))
        }
        None => produce_run::run_with_config(&options, config)
            .await
            .map(|report| (report, None))
            .map_err(|source| ToolError::ProducerCreate { source }),
    };
    progress.finish();
    let (report, counts) = outcome?;
    out.line(&produce_summary(&report, counts.as_ref(), arguments.json))?;
    if report.failed > 0 {
        return Err(ToolError::PerfFailed {
            what: "records were not acknowledged",
            count: report.failed,
        });
    }
    Ok(())
}

/// Bound on `init_transactions`, each commit and each abort of the
/// transactional modes.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The line `strom perf produce` prints: the report, and the transaction
/// counts of a transactional run (under `"transactions"` in JSON).
fn produce_summary(report: &PerfReport, counts: Option<&TransactionCounts>, json: bool) -> String {
    match (counts, json) {
        (None, true) => report.to_json(),
        (None, false) => report.to_string(),
        (Some(counts), true) => {
            let mut value: serde_json::Value =
                serde_json::from_str(&report.to_json()).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.insert("transactions".to_owned(), counts.to_json());
            }
            value.to_string()
        }
        (Some(counts), false) => format!(
            "{report} {} transactions committed ({} records), {} aborted ({} records).",
            counts.committed, counts.committed_records, counts.aborted, counts.aborted_records
        ),
    }
}

async fn consume(
    context: &Context,
    arguments: PerfConsumeArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    require_topic(context, &arguments.topic).await?;
    let mut config = context.consumer_config(&[])?;
    if arguments.group.is_some() {
        config.group_id = arguments.group.clone();
    }
    config.auto_offset_reset = OffsetReset::Earliest;
    if let Some(isolation_level) = arguments.isolation_level {
        config.isolation_level = isolation_level.isolation_level();
    }
    let options = consume_run::PerfOptions {
        config,
        topic: arguments.topic.clone(),
        records: arguments.messages,
        idle_timeout: Duration::from_millis(arguments.timeout_ms),
    };
    let progress = Progress::spinner("consuming");
    let report = consume_run::run(options).await;
    progress.finish();
    let report = report.map_err(|source| ToolError::Consume {
        topic: arguments.topic.clone(),
        source,
    })?;
    if arguments.json {
        out.line(&report.to_json().to_string())?;
    } else {
        out.line(&format!(
            "{} records ({:.2} MB) consumed in {:.2} s: {:.1} records/sec, {:.2} MB/sec, \
             rebalance {} ms, fetch {} ms.",
            report.records,
            report.bytes as f64 / (1024.0 * 1024.0),
            report.elapsed.as_secs_f64(),
            report.records_per_second(),
            report.megabytes_per_second(),
            report.rebalance.as_millis(),
            report.fetch.as_millis()
        ))?;
    }
    if report.records < arguments.messages {
        return Err(ToolError::PerfFailed {
            what: "records did not arrive before --timeout-ms",
            count: arguments.messages - report.records,
        });
    }
    Ok(())
}

/// Sends one record at a time with acks=all and waits until a consumer
/// reading every partition sees it; the latency is send to receipt. With
/// `--transactional-id`, one transaction at a time, read with
/// read_committed; the latency is commit to receipt
/// ([`txn_latency::TransactionLatencyRun`]).
async fn latency(
    context: &Context,
    arguments: PerfLatencyArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let partitions = require_topic(context, &arguments.topic).await?;
    let topic = arguments.topic.clone();
    let mut producer_config = context.producer_config(&[])?;
    producer_config.acks = Acks::All;
    producer_config.linger = Duration::ZERO;
    producer_config.transactional_id = arguments.transactional_id.clone();
    let producer = Producer::new(producer_config)
        .await
        .map_err(|source| ToolError::ProducerCreate { source })?;
    let mut consumer_config = context.consumer_config(&[])?;
    consumer_config.group_id = None;
    consumer_config.auto_offset_reset = OffsetReset::Latest;
    consumer_config.fetch_max_wait = Duration::from_millis(arguments.fetch_max_wait_ms);
    if arguments.transactional_id.is_some() {
        consumer_config.isolation_level = IsolationLevel::ReadCommitted;
    }
    let consume_error = |source| ToolError::Consume {
        topic: topic.clone(),
        source,
    };
    let mut consumer = Consumer::new(consumer_config)
        .await
        .map_err(consume_error)?;
    let assigned: Vec<TopicPartition> = (0..partitions)
        .filter_map(|partition| i32::try_from(partition).ok())
        .map(|partition| TopicPartition::new(&topic, partition))
        .collect();
    consumer.assign(assigned.clone()).map_err(consume_error)?;
    for partition in &assigned {
        consumer.position(partition).await.map_err(consume_error)?;
    }
    let started = Instant::now();
    let latencies = measure_latency(&arguments, &producer, &mut consumer).await;
    let elapsed = started.elapsed();
    producer.close(Duration::from_secs(5)).await;
    let _ = consumer.close().await;
    let (latencies_us, commit_us) = latencies?;
    let report = PerfReport::from_latencies(latencies_us, 0, elapsed, arguments.record_size);
    let commit = commit_us
        .map(|samples| PerfReport::from_latencies(samples, 0, elapsed, arguments.record_size));
    out.line(&latency_summary(&report, commit.as_ref(), arguments.json))
}

/// The samples (µs) of either mode, and the commit times of the
/// transactional one.
async fn measure_latency(
    arguments: &PerfLatencyArguments,
    producer: &Producer,
    consumer: &mut Consumer,
) -> Result<(Vec<u64>, Option<Vec<u64>>), ToolError> {
    let timeout = Duration::from_millis(arguments.timeout_ms);
    let Some(transactional_id) = &arguments.transactional_id else {
        let run = LatencyRun {
            topic: &arguments.topic,
            record_size: arguments.record_size,
            timeout,
        };
        let samples = run
            .measure(producer, consumer, arguments.num_records)
            .await?;
        return Ok((samples, None));
    };
    let run = txn_latency::TransactionLatencyRun {
        topic: arguments.topic.clone(),
        transactional_id: transactional_id.clone(),
        transactions: arguments.num_records,
        records_per_transaction: arguments.records_per_transaction,
        record_size: arguments.record_size,
        timeout,
        transaction_timeout: TRANSACTION_TIMEOUT,
    };
    let samples = run.measure(producer, consumer).await?;
    Ok((samples.visible_us, Some(samples.commit_us)))
}

/// The line `strom perf e2e-latency` prints; with transactions, the
/// samples count transactions and the commit times are added (under
/// `"commit"` in JSON).
fn latency_summary(report: &PerfReport, commit: Option<&PerfReport>, json: bool) -> String {
    if json {
        let mut value: serde_json::Value =
            serde_json::from_str(&report.to_json()).unwrap_or_default();
        if let (Some(commit), Some(object)) = (commit, value.as_object_mut()) {
            let commit = serde_json::from_str(&commit.to_json()).unwrap_or_default();
            object.insert("commit".to_owned(), commit);
        }
        return value.to_string();
    }
    let what = if commit.is_some() {
        "transactions, commit-to-read latency"
    } else {
        "records, end-to-end latency"
    };
    let mut line = format!(
        "{} {what}: {:.2} ms avg, {:.2} ms p50, {:.2} ms p99, {:.2} ms p99.9, {:.2} ms max.",
        report.records,
        report.average_latency_ms,
        report.p50_latency_ms,
        report.p99_latency_ms,
        report.p999_latency_ms,
        report.max_latency_ms
    );
    if let Some(commit) = commit {
        line.push_str(&format!(
            " commit_transaction: {:.2} ms p50, {:.2} ms p99, {:.2} ms max.",
            commit.p50_latency_ms, commit.p99_latency_ms, commit.max_latency_ms
        ));
    }
    line
}

struct LatencyRun<'a> {
    topic: &'a str,
    record_size: usize,
    timeout: Duration,
}

impl LatencyRun<'_> {
    async fn measure(
        &self,
        producer: &Producer,
        consumer: &mut Consumer,
        records: u64,
    ) -> Result<Vec<u64>, ToolError> {
        let progress = Progress::bar(records, "measuring end-to-end latency");
        let mut latencies_us =
            Vec::with_capacity(usize::try_from(records).unwrap_or(0).min(1 << 20));
        for index in 0..records {
            let value = self.value(index);
            let sent_at = Instant::now();
            let delivery = producer
                .send(ProducerRecord::new(self.topic, value.clone()))
                .await;
            delivery.await.map_err(|source| ToolError::Produce {
                topic: self.topic.to_owned(),
                source,
            })?;
            self.receive(consumer, &value).await?;
            latencies_us.push(u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX));
            progress.advance(1);
        }
        progress.finish();
        Ok(latencies_us)
    }

    /// A value of `record_size` bytes that starts with the record's index.
    fn value(&self, index: u64) -> Bytes {
        let mut value = index.to_string().into_bytes();
        value.push(b':');
        value.resize(self.record_size.max(value.len()), b'x');
        Bytes::from(value)
    }

    async fn receive(&self, consumer: &mut Consumer, expected: &Bytes) -> Result<(), ToolError> {
        let deadline = Instant::now() + self.timeout;
        while Instant::now() < deadline {
            let records = consumer
                .poll(Duration::from_millis(50))
                .await
                .map_err(|source| ToolError::Consume {
                    topic: self.topic.to_owned(),
                    source,
                })?;
            if records
                .iter()
                .any(|record| record.value.as_ref() == Some(expected))
            {
                return Ok(());
            }
        }
        Err(ToolError::PerfFailed {
            what: "record did not come back before --timeout-ms",
            count: 1,
        })
    }
}
