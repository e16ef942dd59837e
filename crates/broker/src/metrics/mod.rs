//! Broker metrics in Prometheus' text format, under the names Kafka's JMX
//! metrics have when a JMX exporter turns them into Prometheus metrics
//! (`kafka_server_brokertopicmetrics_messages_in_total{topic="orders"}` for
//! `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders`).
//! The list, with meanings, is in docs/operations.md.
//!
//! Two kinds of values:
//! - counters and histograms on the request path are plain atomics kept
//!   where they are counted ([`topics`], [`requests`], and the network
//!   server's [`strom_network::metrics`]): a
//!   produced batch costs two relaxed adds on a handle its partition
//!   resolved when it was first hosted, with no lock and no allocation;
//! - gauges (partitions, the controller, storage, groups and consumer lag)
//!   are computed from the broker's state when Prometheus scrapes
//!   ([`collect`]).
//!
//! `prometheus-client` writes the exposition; Strom only hands it values.

pub mod collect;
pub mod errors;
pub mod histogram;
pub mod lag;
pub mod requests;
pub mod topics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_protocol::kafka::messages::ApiKey;

use histogram::AtomicHistogram;
use requests::{ApiMetrics, RequestMetrics};
use strom_network::{Answer, Reply};

/// Time of each log flush: those the produce path makes when
/// `flush.messages` makes one due and those the log manager makes when
/// `flush.ms` passes; Kafka's `LogFlushRateAndTimeMs` (process-wide, like
/// [`strom_network::metrics::NETWORK`]).
pub static LOG_FLUSH_TIME: AtomicHistogram = AtomicHistogram::new();

/// The broker's own metrics (those not kept per partition or per process).
#[derive(Debug)]
pub struct BrokerMetrics {
    recording: bool,
    /// Per-API request metrics.
    pub requests: RequestMetrics,
    rebalances: std::sync::atomic::AtomicU64,
}

impl BrokerMetrics {
    /// Metrics for the APIs in `apis`; with `recording` off, requests are
    /// not timed or counted (no metrics listener: nobody reads them).
    pub fn new(apis: &[ApiKey], recording: bool) -> BrokerMetrics {
        BrokerMetrics {
            recording,
            requests: RequestMetrics::new(apis),
            rebalances: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Rebalances completed: JoinGroup answers that made their member the
    /// leader of a new generation (one per generation).
    pub fn rebalances(&self) -> u64 {
        self.rebalances.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count_answer(&self, api: &ApiMetrics, answer: Option<&Answer>) {
        let Some(answer) = answer else {
            return;
        };
        errors::response_error_codes(&answer.response, &mut |code| api.record_error(code));
        if let strom_protocol::messages::Response::JoinGroup(join) = &answer.response {
            if join.error_code == 0 && join.leader == join.member_id {
                self.rebalances
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Whether requests are counted and timed.
    pub fn recording(&self) -> bool {
        self.recording
    }

    /// Counts a handled request and times its stages: `received_at` is when
    /// its frame was read, `started` when its handler began. A deferred
    /// reply is wrapped so that its wait counts as remote time and its
    /// response's error codes are counted when it completes.
    pub fn observe(
        self: &Arc<Self>,
        api_key: ApiKey,
        received_at: Instant,
        started: Instant,
        reply: Reply,
    ) -> Reply {
        let Some(api) = self.requests.api(api_key).filter(|_| self.recording) else {
            return reply;
        };
        let handled = Instant::now();
        let queue = started.saturating_duration_since(received_at);
        let local = handled.saturating_duration_since(started);
        api.record_request();
        match reply {
            Reply::Deferred(future) => {
                let metrics = Arc::clone(self);
                Reply::Deferred(Box::pin(async move {
                    let answer = future.await;
                    if let Some(api) = metrics.requests.api(api_key) {
                        metrics.count_answer(api, answer.as_ref());
                        api.record_times(queue, local, handled.elapsed());
                    }
                    answer
                }))
            }
            Reply::Response(response) => {
                let answer = Answer::from(response);
                self.count_answer(api, Some(&answer));
                api.record_times(queue, local, Duration::ZERO);
                Reply::Answer(answer)
            }
            reply => {
                if let Reply::Answer(answer) = &reply {
                    self.count_answer(api, Some(answer));
                }
                api.record_times(queue, local, Duration::ZERO);
                reply
            }
        }
    }
}
