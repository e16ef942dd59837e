//! The request quota (KIP-124): each request's handler time against the
//! client's `request_percentage` (see [`RequestTime`]).

use strom_network::{ConnectionMute, Reply, RequestContext};
use strom_protocol::messages::{Request, Response};
use strom_quotas::QuotaKey;

use super::BrokerContext;
use crate::quotas::{throttle_ms_field, QuotaClient, QuotaService};

/// The request quota (KIP-124) of one request: the handler's time, taken
/// as a percentage of one thread over the quota window, against the
/// client's `request_percentage`. ApiVersions, the SASL exchange and
/// followers' fetches are exempt, as in Kafka. Over the quota, the
/// connection is muted and a Produce or Fetch answer that is ready at
/// once carries the throttle time (when it is longer than its own).
pub struct RequestTime {
    /// The client and when its handler started; `None` when exempt or no
    /// `request_percentage` is configured.
    measured: Option<(QuotaClient, ConnectionMute, std::time::Instant)>,
}

impl RequestTime {
    /// Starts timing `request` if the request quota applies to it.
    pub fn start(broker: &BrokerContext, context: &RequestContext, request: &Request) -> Self {
        let exempt = match request {
            Request::ApiVersions(_) | Request::SaslHandshake(_) | Request::SaslAuthenticate(_) => {
                true
            }
            Request::Fetch(fetch) => fetch.replica_id.0.max(fetch.replica_state.replica_id.0) >= 0,
            _ => false,
        };
        let applies = !exempt
            && QuotaService::enabled(&broker.controller.image(), QuotaKey::RequestPercentage);
        Self {
            measured: applies.then(|| {
                (
                    QuotaClient::of(context),
                    context.mute.clone(),
                    std::time::Instant::now(),
                )
            }),
        }
    }

    /// Records the handler's time and applies the throttle to `reply`.
    pub fn finish(self, broker: &BrokerContext, reply: Reply) -> Reply {
        let Some((client, mute, started)) = self.measured else {
            return reply;
        };
        // Percent-seconds of one thread: the handler's time in seconds
        // times 100 (Kafka's `nanosToPercentage`).
        let percent_seconds = started.elapsed().as_secs_f64() * 100.0;
        let image = broker.controller.image();
        let throttle = broker.quotas.record(
            &image,
            QuotaKey::RequestPercentage,
            &client,
            percent_seconds,
        );
        if throttle.is_zero() {
            return reply;
        }
        mute.mute_for(throttle);
        with_throttle(reply, throttle_ms_field(throttle))
    }
}

/// `reply` with a throttle time of at least `throttle_ms`, if it is a
/// Produce or Fetch answer that is ready.
fn with_throttle(reply: Reply, throttle_ms: i32) -> Reply {
    let raise = |response: &mut Response| match response {
        Response::Produce(produce) => {
            produce.throttle_time_ms = produce.throttle_time_ms.max(throttle_ms);
        }
        Response::Fetch(fetch) => {
            fetch.throttle_time_ms = fetch.throttle_time_ms.max(throttle_ms);
        }
        _ => {}
    };
    match reply {
        Reply::Response(mut response) => {
            raise(&mut response);
            Reply::Response(response)
        }
        Reply::Answer(mut answer) => {
            raise(&mut answer.response);
            Reply::Answer(answer)
        }
        other => other,
    }
}
