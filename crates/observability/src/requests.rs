//! Per-API request metrics (Kafka's `RequestMetrics`): requests, errors by
//! code, and the time a request spends in each stage.
//!
//! The stages are Kafka's: *queue* (from the frame being read to its
//! handler starting), *local* (the handler's own work), *remote* (waiting
//! for something else: the high watermark for `acks=all`, `fetch.min.bytes`
//! for a long-polled fetch, a flush, a rebalance), and *total* (from the
//! frame being read to the answer being ready for the connection's writer),
//! and *response send* (the write of the answer to the socket, Kafka's
//! `ResponseSendTimeMs`; Kafka's total includes it, Strom's total ends
//! before it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strom_protocol::kafka::messages::ApiKey;

use crate::histogram::AtomicHistogram;

/// Error codes counted: Kafka's range (-1 for UNKNOWN_SERVER_ERROR up to
/// 158); codes outside it are counted as -1.
const ERROR_CODES: usize = 160;

/// The counters of one API.
#[derive(Debug)]
pub struct ApiMetrics {
    api_key: ApiKey,
    requests: AtomicU64,
    /// Index `code + 1`.
    errors: Box<[AtomicU64]>,
    /// Time waiting to be handled.
    pub queue: AtomicHistogram,
    /// Time in the handler.
    pub local: AtomicHistogram,
    /// Time waiting for something else (acks, min bytes, a rebalance).
    pub remote: AtomicHistogram,
    /// Time from the frame being read to the answer being ready.
    pub total: AtomicHistogram,
    /// Time writing the answer to the socket.
    pub send: AtomicHistogram,
}

impl ApiMetrics {
    fn new(api_key: ApiKey) -> ApiMetrics {
        ApiMetrics {
            api_key,
            requests: AtomicU64::new(0),
            errors: (0..ERROR_CODES).map(|_| AtomicU64::new(0)).collect(),
            queue: AtomicHistogram::new(),
            local: AtomicHistogram::new(),
            remote: AtomicHistogram::new(),
            total: AtomicHistogram::new(),
            send: AtomicHistogram::new(),
        }
    }

    /// The API.
    pub fn api_key(&self) -> ApiKey {
        self.api_key
    }

    /// Counts a request.
    pub fn record_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an error code in a response (0, NONE, included, as Kafka does).
    pub fn record_error(&self, code: i16) {
        let index = usize::try_from(i32::from(code) + 1)
            .ok()
            .filter(|index| *index < ERROR_CODES)
            .unwrap_or(0);
        if let Some(counter) = self.errors.get(index) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests counted.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// (error code, count) of every code seen.
    pub fn errors(&self) -> Vec<(i16, u64)> {
        self.errors
            .iter()
            .enumerate()
            .filter_map(|(index, counter)| {
                let count = counter.load(Ordering::Relaxed);
                let code = i16::try_from(index).ok()? - 1;
                (count > 0).then_some((code, count))
            })
            .collect()
    }

    /// Records the stages of a request answered without waiting.
    pub fn record_times(&self, queue: Duration, local: Duration, remote: Duration) {
        self.queue.observe(queue);
        self.local.observe(local);
        self.remote.observe(remote);
        self.total.observe(queue + local + remote);
    }
}

/// The metrics of every API the broker serves, indexed by API key: built
/// once, read without locks.
#[derive(Debug)]
pub struct RequestMetrics {
    by_key: Vec<Option<ApiMetrics>>,
}

impl RequestMetrics {
    /// Metrics for `apis`.
    pub fn new(apis: &[ApiKey]) -> RequestMetrics {
        let size = apis
            .iter()
            .map(|key| usize::try_from(*key as i16).unwrap_or(0) + 1)
            .max()
            .unwrap_or(0);
        let mut by_key: Vec<Option<ApiMetrics>> = (0..size).map(|_| None).collect();
        for key in apis {
            if let Some(slot) = usize::try_from(*key as i16)
                .ok()
                .and_then(|index| by_key.get_mut(index))
            {
                *slot = Some(ApiMetrics::new(*key));
            }
        }
        RequestMetrics { by_key }
    }

    /// The metrics of one API, if it is served.
    pub fn api(&self, key: ApiKey) -> Option<&ApiMetrics> {
        usize::try_from(key as i16)
            .ok()
            .and_then(|index| self.by_key.get(index))
            .and_then(Option::as_ref)
    }

    /// Every served API's metrics.
    pub fn apis(&self) -> impl Iterator<Item = &ApiMetrics> {
        self.by_key.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_counted_by_code() {
        let metrics = RequestMetrics::new(&[ApiKey::Produce, ApiKey::Fetch]);
        let produce = metrics.api(ApiKey::Produce).expect("served");
        produce.record_request();
        produce.record_error(0);
        produce.record_error(0);
        produce.record_error(6);
        produce.record_error(-1);
        produce.record_error(i16::MAX);
        assert_eq!(produce.requests(), 1);
        assert_eq!(produce.errors(), vec![(-1, 2), (0, 2), (6, 1)]);
        assert!(metrics.api(ApiKey::Metadata).is_none());
        assert_eq!(metrics.apis().count(), 2);
    }

    #[test]
    fn the_total_is_the_sum_of_the_stages() {
        let metrics = RequestMetrics::new(&[ApiKey::Produce]);
        let produce = metrics.api(ApiKey::Produce).expect("served");
        produce.record_times(
            Duration::from_micros(10),
            Duration::from_micros(20),
            Duration::from_millis(30),
        );
        let total = produce.total.snapshot();
        assert_eq!(total.count, 1);
        assert!((total.sum_seconds - 0.03003).abs() < 1e-9);
    }
}
