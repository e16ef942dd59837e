//! The client quota metrics: per quota key and client (Kafka's
//! `kafka.server:type=Produce|Fetch|Request|ControllerMutation` metrics
//! with `user` and `client-id` tags), read from the broker at scrape time.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;

use crate::exposition::{counter, gauge, Labels};
use crate::view::{BrokerView, ClientQuotaState};

fn labels(state: &ClientQuotaState) -> Labels {
    vec![
        ("quota", state.key.to_owned()),
        ("user", state.user.clone()),
        ("client_id", state.client_id.clone()),
    ]
}

/// Encodes the quota families (empty when no client is limited).
pub(crate) fn encode_quotas(
    encoder: &mut DescriptorEncoder<'_>,
    broker: &dyn BrokerView,
) -> fmt::Result {
    let states = broker.client_quotas();
    // Rates are rounded to whole units (a float-to-integer `as` saturates).
    let rows = |value: fn(&ClientQuotaState) -> f64| {
        states
            .iter()
            .map(|state| (labels(state), value(state).round() as i64))
            .collect()
    };
    gauge(
        encoder,
        "strom_client_quota_usage",
        "A limited client's measured rate over the quota window: bytes/s (producer_byte_rate, consumer_byte_rate), percent of a thread (request_percentage), or tokens left (controller_mutation_rate)",
        rows(|state| state.usage),
    )?;
    gauge(
        encoder,
        "strom_client_quota_limit",
        "The quota that applies to the client",
        rows(|state| state.limit),
    )?;
    counter(
        encoder,
        "strom_client_quota_throttle_time_ms",
        "Milliseconds of throttle answered to the client (Kafka's throttle-time)",
        states
            .iter()
            .map(|state| (labels(state), state.throttle_time_ms_total))
            .collect(),
    )?;
    counter(
        encoder,
        "strom_client_quota_throttled",
        "Answers that carried a throttle time",
        states
            .iter()
            .map(|state| (labels(state), state.throttled_total))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, OnceLock, Weak};

    use strom_protocol::kafka::messages::ApiKey;

    use crate::collect::{registry, BrokerCollector};
    use crate::exposition::exposition;
    use crate::fake_broker::FakeBroker;
    use crate::view::{BrokerView, NetworkCounts, ViewSlot};
    use crate::BrokerMetrics;

    #[test]
    fn a_limited_clients_usage_limit_and_throttle_are_exposed() {
        let broker = Arc::new(FakeBroker::default());
        let slot: Arc<ViewSlot> = Arc::new(OnceLock::new());
        let view: Weak<FakeBroker> = Arc::downgrade(&broker);
        let _ = slot.set(view as Weak<dyn BrokerView>);
        let metrics = Arc::new(BrokerMetrics::new(&[ApiKey::Produce], true));
        let collector = BrokerCollector::new(metrics, NetworkCounts::default, slot);
        let text = exposition(&registry(collector)).expect("encodes");
        let labels = "{quota=\"producer_byte_rate\",user=\"\",client_id=\"app\"}";
        for line in [
            format!("strom_client_quota_usage{labels} 1100000\n"),
            format!("strom_client_quota_limit{labels} 1048576\n"),
            format!("strom_client_quota_throttle_time_ms_total{labels} 2500\n"),
            format!("strom_client_quota_throttled_total{labels} 3\n"),
        ] {
            assert!(text.contains(&line), "{line} missing in\n{text}");
        }
    }
}
