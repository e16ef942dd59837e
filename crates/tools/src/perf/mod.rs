//! `strom perf produce|consume|e2e-latency`: the benchmarks of
//! `strom-producer` and `strom-consumer`, plus an end-to-end latency test.
//! Human output by default, one JSON line with `--json`.

pub mod consume_run;
pub mod produce_run;

use std::time::{Duration, Instant};

use bytes::Bytes;
use strom_consumer::config::OffsetReset;
use strom_consumer::record::TopicPartition;
use strom_consumer::Consumer;
use strom_producer::{Acks, Producer, ProducerRecord};

use self::produce_run::PerfReport;
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
    let report = produce_run::run_with_config(&options, config).await;
    progress.finish();
    let report = report.map_err(|source| ToolError::ProducerCreate { source })?;
    if arguments.json {
        out.line(&report.to_json())?;
    } else {
        out.line(&report.to_string())?;
    }
    if report.failed > 0 {
        return Err(ToolError::PerfFailed {
            what: "records were not acknowledged",
            count: report.failed,
        });
    }
    Ok(())
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
/// reading every partition sees it; the latency is send to receipt.
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
    let producer = Producer::new(producer_config)
        .await
        .map_err(|source| ToolError::ProducerCreate { source })?;
    let mut consumer_config = context.consumer_config(&[])?;
    consumer_config.group_id = None;
    consumer_config.auto_offset_reset = OffsetReset::Latest;
    consumer_config.fetch_max_wait = Duration::from_millis(10);
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
    let run = LatencyRun {
        topic: &topic,
        record_size: arguments.record_size,
        timeout: Duration::from_millis(arguments.timeout_ms),
    };
    let started = Instant::now();
    let latencies = run
        .measure(&producer, &mut consumer, arguments.num_records)
        .await;
    let elapsed = started.elapsed();
    producer.close(Duration::from_secs(5)).await;
    let _ = consumer.close().await;
    let latencies_us = latencies?;
    let report = PerfReport::from_latencies(latencies_us, 0, elapsed, arguments.record_size);
    if arguments.json {
        out.line(&report.to_json())
    } else {
        out.line(&format!(
            "{} records, end-to-end latency: {:.2} ms avg, {:.2} ms p50, {:.2} ms p99, \
             {:.2} ms p99.9, {:.2} ms max.",
            report.records,
            report.average_latency_ms,
            report.p50_latency_ms,
            report.p99_latency_ms,
            report.p999_latency_ms,
            report.max_latency_ms
        ))
    }
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
