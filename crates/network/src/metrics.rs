//! Network counters (Kafka's `socket-server-metrics`): connections opened
//! and closed, bytes received and sent, undecodable requests, and ranges
//! loaded into the page cache before `sendfile`.
//!
//! They are process-wide statics, as Kafka's are per JVM: the server
//! counts with one relaxed add and needs no handle threaded through it.
//! Several brokers embedded in one process share them. Readers take a
//! [`NetworkCounts`] snapshot with [`NetworkMetrics::counts`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The process's network counters.
pub static NETWORK: NetworkMetrics = NetworkMetrics::new();

/// How often at most a warning about undecodable requests is logged.
pub const UNDECODABLE_WARNING_INTERVAL: Duration = Duration::from_secs(10);

static UNDECODABLE_WARNINGS: WarningLimiter = WarningLimiter::new(UNDECODABLE_WARNING_INTERVAL);

/// Connection and byte counters.
#[derive(Debug)]
pub struct NetworkMetrics {
    connections_opened: AtomicU64,
    connections_closed: AtomicU64,
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
    undecodable_requests: AtomicU64,
    page_cache_loads: AtomicU64,
}

/// A snapshot of the counters: the observability crate's type, so the
/// collector reads it as it is.
pub use strom_observability::view::NetworkCounts;

impl NetworkMetrics {
    const fn new() -> NetworkMetrics {
        NetworkMetrics {
            connections_opened: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            undecodable_requests: AtomicU64::new(0),
            page_cache_loads: AtomicU64::new(0),
        }
    }

    /// Counts an accepted connection.
    pub fn connection_opened(&self) {
        self.connections_opened.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a closed connection.
    pub fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts bytes read from a client.
    pub fn received(&self, bytes: usize) {
        self.bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts bytes written to a client.
    pub fn sent(&self, bytes: u64) {
        self.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a range loaded into the page cache before `sendfile`.
    pub fn page_cache_load(&self) {
        self.page_cache_loads.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    pub fn counts(&self) -> NetworkCounts {
        NetworkCounts {
            connections_opened: self.connections_opened.load(Ordering::Relaxed),
            connections_closed: self.connections_closed.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            undecodable_requests: self.undecodable_requests.load(Ordering::Relaxed),
            page_cache_loads: self.page_cache_loads.load(Ordering::Relaxed),
            connections_refused: crate::connection_quotas::CONNECTION_LIMITS.refused(),
            connection_accepts_throttled: crate::connection_quotas::CONNECTION_LIMITS.throttled(),
        }
    }
}

/// Counts an undecodable request and logs a warning, at most one per
/// [`UNDECODABLE_WARNING_INTERVAL`]; the next warning after a quiet spell
/// says how many were not logged.
pub fn undecodable_request(peer: SocketAddr, error: &dyn std::error::Error) {
    NETWORK.undecodable_requests.fetch_add(1, Ordering::Relaxed);
    // A rate limit on log lines, on the host's clock.
    if let Some(suppressed) = UNDECODABLE_WARNINGS.admit(Instant::now()) {
        tracing::warn!(
            %peer,
            %error,
            suppressed,
            interval_s = UNDECODABLE_WARNING_INTERVAL.as_secs(),
            "closing connection: undecodable request (`suppressed` more since the last such warning; all counted in strom_network_undecodable_requests_total)"
        );
    }
}

/// Lets one event in per interval and counts the others.
#[derive(Debug)]
pub struct WarningLimiter {
    interval: Duration,
    state: Mutex<LimiterState>,
}

#[derive(Debug)]
struct LimiterState {
    last_admitted: Option<Instant>,
    suppressed: u64,
}

impl WarningLimiter {
    /// A limiter admitting one event per `interval`.
    pub const fn new(interval: Duration) -> WarningLimiter {
        WarningLimiter {
            interval,
            state: Mutex::new(LimiterState {
                last_admitted: None,
                suppressed: 0,
            }),
        }
    }

    /// `Some(events suppressed since the last admitted one)` when this
    /// event may be logged, `None` when it is suppressed.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = state
            .last_admitted
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        if due {
            state.last_admitted = Some(now);
            Some(std::mem::take(&mut state.suppressed))
        } else {
            state.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_interval_and_a_count_of_the_rest() {
        let limiter = WarningLimiter::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(limiter.admit(start), Some(0));
        for millis in 1..=3_000 {
            assert_eq!(limiter.admit(start + Duration::from_millis(millis)), None);
        }
        assert_eq!(limiter.admit(start + Duration::from_secs(10)), Some(3_000));
        assert_eq!(limiter.admit(start + Duration::from_secs(11)), None);
        assert_eq!(limiter.admit(start + Duration::from_secs(25)), Some(1));
    }

    #[test]
    fn undecodable_requests_are_counted_even_when_not_logged() {
        let before = NETWORK.counts().undecodable_requests;
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        let error = std::io::Error::other("garbage");
        for _ in 0..5 {
            undecodable_request(peer, &error);
        }
        assert!(NETWORK.counts().undecodable_requests >= before + 5);
    }
}
