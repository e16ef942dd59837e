//! The broker's side of its metrics: the timing of each handled request
//! around the network server's reply types.
//!
//! The metrics themselves (registry, histograms, per-API, per-topic and
//! broker-wide counters, the collector and the HTTP listener) live in
//! `strom-observability`; the broker reads its own state for them through
//! [`crate::observe`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use strom_observability::requests::ApiMetrics;
use strom_observability::BrokerMetrics;
use strom_protocol::kafka::messages::ApiKey;

use strom_network::{Answer, Reply};

fn count_answer(metrics: &BrokerMetrics, api: &ApiMetrics, answer: Option<&Answer>) {
    if let Some(answer) = answer {
        metrics.count_response(api, &answer.response);
    }
}

/// Counts a handled request and times its stages: `received_at` is when
/// its frame was read, `started` when its handler began. A deferred
/// reply is wrapped so that its wait counts as remote time and its
/// response's error codes are counted when it completes.
pub fn observe(
    metrics: &Arc<BrokerMetrics>,
    api_key: ApiKey,
    received_at: Instant,
    started: Instant,
    reply: Reply,
) -> Reply {
    let Some(api) = metrics
        .requests
        .api(api_key)
        .filter(|_| metrics.recording())
    else {
        return reply;
    };
    let handled = Instant::now();
    let queue = started.saturating_duration_since(received_at);
    let local = handled.saturating_duration_since(started);
    api.record_request();
    match reply {
        Reply::Deferred(future) => {
            let metrics = Arc::clone(metrics);
            Reply::Deferred(Box::pin(async move {
                let answer = future.await;
                if let Some(api) = metrics.requests.api(api_key) {
                    count_answer(&metrics, api, answer.as_ref());
                    api.record_times(queue, local, handled.elapsed());
                }
                answer
            }))
        }
        Reply::Response(response) => {
            let answer = Answer::from(response);
            count_answer(metrics, api, Some(&answer));
            api.record_times(queue, local, Duration::ZERO);
            Reply::Answer(answer)
        }
        reply => {
            if let Reply::Answer(answer) = &reply {
                count_answer(metrics, api, Some(answer));
            }
            api.record_times(queue, local, Duration::ZERO);
            reply
        }
    }
}
