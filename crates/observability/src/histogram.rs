//! A latency histogram on atomics: observing costs three relaxed adds, no
//! lock and no allocation; the Prometheus exposition reads it at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (the last, `+Inf`, is implied).
/// From 50 µs (an in-memory request) to 10 s (a long-polled fetch).
pub const BUCKET_BOUNDS_SECONDS: [f64; 17] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

const BUCKETS: usize = BUCKET_BOUNDS_SECONDS.len() + 1;

/// Bucket bounds in microseconds, for the comparison on the hot path.
const BUCKET_BOUNDS_MICROS: [u64; BUCKET_BOUNDS_SECONDS.len()] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Durations counted into fixed buckets, with their count and sum.
#[derive(Debug)]
pub struct AtomicHistogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

/// A consistent-enough copy of a histogram for the exposition: per-bucket
/// (not cumulative) counts with their upper bounds (`f64::MAX` for `+Inf`).
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Sum of the observations in seconds.
    pub sum_seconds: f64,
    /// Number of observations.
    pub count: u64,
    /// (upper bound in seconds, observations in this bucket only).
    pub buckets: Vec<(f64, u64)>,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        AtomicHistogram::new()
    }
}

impl AtomicHistogram {
    /// An empty histogram.
    pub const fn new() -> AtomicHistogram {
        AtomicHistogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Counts one duration.
    pub fn observe(&self, duration: Duration) {
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        let index = BUCKET_BOUNDS_MICROS.partition_point(|bound| *bound < micros);
        if let Some(bucket) = self.buckets.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .map(|(index, bucket)| {
                let bound = BUCKET_BOUNDS_SECONDS
                    .get(index)
                    .copied()
                    .unwrap_or(f64::MAX);
                (bound, bucket.load(Ordering::Relaxed))
            })
            .collect::<Vec<_>>();
        // The count is the buckets' total, so `_count` equals the `+Inf`
        // bucket even while observations race with the scrape.
        let count = buckets.iter().map(|(_, count)| count).sum();
        HistogramSnapshot {
            sum_seconds: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
            count,
            buckets,
        }
    }

    /// How many durations were counted.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_that_holds_them() {
        let histogram = AtomicHistogram::new();
        histogram.observe(Duration::from_micros(50));
        histogram.observe(Duration::from_micros(51));
        histogram.observe(Duration::from_millis(3));
        histogram.observe(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count, 4);
        assert_eq!(histogram.count(), 4);
        let at = |bound: f64| {
            snapshot
                .buckets
                .iter()
                .find(|(upper, _)| *upper == bound)
                .map(|(_, count)| *count)
        };
        assert_eq!(at(0.00005), Some(1));
        assert_eq!(at(0.0001), Some(1));
        assert_eq!(at(0.005), Some(1));
        assert_eq!(at(f64::MAX), Some(1));
        assert!((snapshot.sum_seconds - 60.003101).abs() < 1e-9);
    }

    #[test]
    fn the_bounds_in_both_units_agree() {
        for (seconds, micros) in BUCKET_BOUNDS_SECONDS.iter().zip(BUCKET_BOUNDS_MICROS) {
            assert_eq!((seconds * 1e6).round() as u64, micros);
        }
    }
}
