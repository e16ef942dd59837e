//! Latency percentiles and the report every run prints.

use std::time::Duration;

use serde_json::{json, Value};

/// Latency percentiles of a set of samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

impl LatencySummary {
    /// Summarises `samples` (sorted in place); all zero when empty.
    pub fn from_samples(samples: &mut [Duration]) -> LatencySummary {
        samples.sort_unstable();
        let micros = |sample: Option<&Duration>| {
            sample.map_or(0, |duration| {
                duration.as_micros().min(u128::from(u64::MAX)) as u64
            })
        };
        LatencySummary {
            count: samples.len(),
            p50_us: micros(percentile(samples, 0.50)),
            p99_us: micros(percentile(samples, 0.99)),
            p999_us: micros(percentile(samples, 0.999)),
            max_us: micros(samples.last()),
        }
    }

    /// The summary as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "p999_us": self.p999_us,
            "max_us": self.max_us,
        })
    }
}

/// The nearest-rank percentile `quantile` (0..=1) of sorted `samples`.
pub fn percentile<T>(sorted: &[T], quantile: f64) -> Option<&T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (quantile.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1).min(sorted.len() - 1))
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `produce` or `fetch`.
    pub mode: &'static str,
    /// Records written or read.
    pub records: u64,
    /// Record batch bytes written or read (what crossed the wire as records).
    pub batch_bytes: u64,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Per-request latency.
    pub latency: LatencySummary,
}

impl Report {
    /// Records per second.
    pub fn records_per_second(&self) -> f64 {
        per_second(self.records as f64, self.elapsed)
    }

    /// Megabytes (10^6 bytes) of batches per second.
    pub fn megabytes_per_second(&self) -> f64 {
        per_second(self.batch_bytes as f64 / 1e6, self.elapsed)
    }

    /// A human-readable summary, one line.
    pub fn human(&self) -> String {
        format!(
            "{}: {} records in {:.3} s = {:.0} records/s, {:.1} MB/s; request latency p50 {} us, p99 {} us, p99.9 {} us, max {} us ({} requests)",
            self.mode,
            self.records,
            self.elapsed.as_secs_f64(),
            self.records_per_second(),
            self.megabytes_per_second(),
            self.latency.p50_us,
            self.latency.p99_us,
            self.latency.p999_us,
            self.latency.max_us,
            self.latency.count,
        )
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "mode": self.mode,
            "records": self.records,
            "batch_bytes": self.batch_bytes,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "records_per_s": self.records_per_second(),
            "mb_per_s": self.megabytes_per_second(),
            "latency": self.latency.to_json(),
        })
    }
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.5), Some(&50));
        assert_eq!(percentile(&values, 0.99), Some(&99));
        assert_eq!(percentile(&values, 1.0), Some(&100));
        assert_eq!(percentile(&values, 0.0), Some(&1));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }

    #[test]
    fn summary_sorts_and_converts_to_micros() {
        let mut samples: Vec<Duration> = (1..=1000).rev().map(Duration::from_micros).collect();
        let summary = LatencySummary::from_samples(&mut samples);
        assert_eq!(summary.count, 1000);
        assert_eq!(summary.p50_us, 500);
        assert_eq!(summary.p99_us, 990);
        assert_eq!(summary.p999_us, 999);
        assert_eq!(summary.max_us, 1000);
    }

    #[test]
    fn rates_use_elapsed_time() {
        let report = Report {
            mode: "produce",
            records: 2_000,
            batch_bytes: 4_000_000,
            elapsed: Duration::from_secs(2),
            latency: LatencySummary::default(),
        };
        assert_eq!(report.records_per_second(), 1_000.0);
        assert_eq!(report.megabytes_per_second(), 2.0);
        assert_eq!(report.to_json()["records"], 2_000);
    }
}
