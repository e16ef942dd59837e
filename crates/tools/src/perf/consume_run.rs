//! The consumer throughput test behind `strom perf consume`, modelled on Kafka's
//! `kafka-consumer-perf-test`: consume a number of records from a topic and
//! report records/s, MB/s and the time spent joining the group.

use std::time::{Duration, Instant};

use strom_consumer::{Consumer, ConsumerConfig, ConsumerError, OffsetReset, TopicPartition};

/// What to consume.
#[derive(Debug, Clone)]
pub struct PerfOptions {
    /// The consumer configuration (bootstrap servers, group, fetch sizes).
    pub config: ConsumerConfig,
    /// The topic.
    pub topic: String,
    /// Stop after this many records.
    pub records: u64,
    /// Give up when no record arrives for this long.
    pub idle_timeout: Duration,
}

/// The measurements, with consumer-perf-test's meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfReport {
    /// Records consumed.
    pub records: u64,
    /// Key plus value bytes consumed.
    pub bytes: u64,
    /// From the first poll to the last record.
    pub elapsed: Duration,
    /// Time until the group assigned partitions (zero with `assign`).
    pub rebalance: Duration,
    /// `elapsed` minus `rebalance`: time spent fetching.
    pub fetch: Duration,
}

impl PerfReport {
    /// Records per second over the fetch time.
    pub fn records_per_second(&self) -> f64 {
        per_second(self.records as f64, self.fetch)
    }

    /// MiB per second over the fetch time.
    pub fn megabytes_per_second(&self) -> f64 {
        per_second(self.bytes as f64 / (1024.0 * 1024.0), self.fetch)
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "records": self.records,
            "bytes": self.bytes,
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "rebalance_time_ms": self.rebalance.as_millis() as u64,
            "fetch_time_ms": self.fetch.as_millis() as u64,
            "records_per_sec": self.records_per_second(),
            "mb_per_sec": self.megabytes_per_second(),
        })
    }

    /// consumer-perf-test's CSV header.
    pub const CSV_HEADER: &'static str = "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms";

    /// The report as a consumer-perf-test CSV line.
    pub fn to_csv(&self) -> String {
        format!(
            "{:.4}, {:.4}, {}, {:.4}, {}, {}",
            self.bytes as f64 / (1024.0 * 1024.0),
            self.megabytes_per_second(),
            self.records,
            self.records_per_second(),
            self.rebalance.as_millis(),
            self.fetch.as_millis(),
        )
    }
}

fn per_second(amount: f64, duration: Duration) -> f64 {
    let seconds = duration.as_secs_f64();
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

/// Consumes `options.records` records (by group subscription when the
/// config has `group.id`, else by assigning every partition) and reports.
pub async fn run(options: PerfOptions) -> Result<PerfReport, ConsumerError> {
    let mut config = options.config.clone();
    if config.group_id.is_none() {
        config.auto_offset_reset = OffsetReset::Earliest;
    }
    let mut consumer = Consumer::new(config).await?;
    if consumer.config().group_id.is_some() {
        consumer.subscribe([options.topic.clone()])?;
    } else {
        let info = consumer.cluster().topic(&options.topic).await?;
        consumer.assign(
            info.partitions
                .iter()
                .map(|p| TopicPartition::new(&options.topic, p.partition)),
        )?;
    }
    let start = Instant::now();
    let mut rebalance = None;
    let mut last_record = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    while records < options.records && last_record.elapsed() < options.idle_timeout {
        let batch = consumer.poll(Duration::from_millis(100)).await?;
        if rebalance.is_none() && !consumer.assignment().is_empty() {
            rebalance = Some(start.elapsed());
        }
        if !batch.is_empty() {
            last_record = Instant::now();
        }
        records += batch.len() as u64;
        bytes += batch.iter().map(|r| r.payload_bytes() as u64).sum::<u64>();
    }
    let elapsed = start.elapsed();
    consumer.close().await?;
    let rebalance = rebalance.unwrap_or_default();
    Ok(PerfReport {
        records,
        bytes,
        elapsed,
        rebalance,
        fetch: elapsed.saturating_sub(rebalance),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_use_the_fetch_time() {
        let report = PerfReport {
            records: 1_000,
            bytes: 2 * 1024 * 1024,
            elapsed: Duration::from_secs(3),
            rebalance: Duration::from_secs(1),
            fetch: Duration::from_secs(2),
        };
        assert_eq!(report.records_per_second(), 500.0);
        assert_eq!(report.megabytes_per_second(), 1.0);
        assert_eq!(report.to_json()["rebalance_time_ms"], 1000);
        assert_eq!(
            report.to_csv(),
            "2.0000, 1.0000, 1000, 500.0000, 1000, 2000"
        );
        let empty = PerfReport {
            fetch: Duration::ZERO,
            ..report
        };
        assert_eq!(empty.records_per_second(), 0.0);
    }
}
