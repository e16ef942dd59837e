//! The broker-wide metrics kept on the request path: per-API request
//! metrics, completed rebalances, and the time of log flushes.
//!
//! Timing a request and wrapping a deferred answer is the network server's
//! business (it owns the reply types); it hands each answer's response here
//! with [`BrokerMetrics::count_response`].

use std::sync::atomic::{AtomicU64, Ordering};

use strom_protocol::kafka::messages::ApiKey;
use strom_protocol::messages::Response;

use crate::error_codes::response_error_codes;
use crate::histogram::AtomicHistogram;
use crate::requests::{ApiMetrics, RequestMetrics};

/// Time of each log flush: those the produce path makes when
/// `flush.messages` makes one due and those the log manager makes when
/// `flush.ms` passes; Kafka's `LogFlushRateAndTimeMs` (process-wide, like
/// the network counters).
pub static LOG_FLUSH_TIME: AtomicHistogram = AtomicHistogram::new();

/// The broker's own metrics (those not kept per partition or per process).
#[derive(Debug)]
pub struct BrokerMetrics {
    recording: bool,
    /// Per-API request metrics.
    pub requests: RequestMetrics,
    rebalances: AtomicU64,
}

impl BrokerMetrics {
    /// Metrics for the APIs in `apis`; with `recording` off, requests are
    /// not timed or counted (no metrics listener: nobody reads them).
    pub fn new(apis: &[ApiKey], recording: bool) -> BrokerMetrics {
        BrokerMetrics {
            recording,
            requests: RequestMetrics::new(apis),
            rebalances: AtomicU64::new(0),
        }
    }

    /// Rebalances completed: JoinGroup answers that made their member the
    /// leader of a new generation (one per generation).
    pub fn rebalances(&self) -> u64 {
        self.rebalances.load(Ordering::Relaxed)
    }

    /// Counts the error codes of a response to `api`'s request, and a
    /// completed rebalance when it is a JoinGroup answer that made its
    /// member the leader.
    pub fn count_response(&self, api: &ApiMetrics, response: &Response) {
        response_error_codes(response, &mut |code| api.record_error(code));
        if let Response::JoinGroup(join) = response {
            if join.error_code == 0 && join.leader == join.member_id {
                self.rebalances.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether requests are counted and timed.
    pub fn recording(&self) -> bool {
        self.recording
    }
}
