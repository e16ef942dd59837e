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

use strom_producer::{
    Acks, DeliveryFuture, ProduceError, Producer, ProducerConfig, ProducerCreateError,
    ProducerRecord,
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
    mut config: ProducerConfig,
) -> Result<PerfReport, ProducerCreateError> {
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
    let producer = Producer::new(config).await?;
    let value = Bytes::from(vec![b'x'; options.record_size]);
    let topic: std::sync::Arc<str> = options.topic.as_str().into();
    let (deliveries, mut receiver) = mpsc::unbounded_channel::<(Instant, DeliveryFuture)>();
    let collector = tokio::spawn(async move {
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
    });
    let started = Instant::now();
    for index in 0..options.num_records {
        if let Some(throughput) = options.throughput.filter(|cap| *cap > 0) {
            let due = Duration::from_secs_f64(index as f64 / throughput as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
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
    }
    drop(deliveries);
    producer.flush().await;
    let (latencies_us, failed) = collector.await.unwrap_or_default();
    let elapsed = started.elapsed();
    producer.close(Duration::from_secs(5)).await;
    Ok(PerfReport::from_latencies(
        latencies_us,
        failed,
        elapsed,
        options.record_size,
    ))
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
}
