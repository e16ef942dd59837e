//! What counting costs on the request path: a produced batch's topic
//! counters, and a request's count, error codes and stage times, with
//! metrics on and off.
//!
//! `cargo bench -p strom-broker --bench metrics`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_main, Criterion};
use strom_broker::handlers::HANDLED_APIS;
use strom_network::Reply;
use strom_observability::topics::TopicMetricsTable;
use strom_observability::BrokerMetrics;
use strom_protocol::kafka::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use strom_protocol::kafka::messages::{ApiKey, ProduceResponse};
use strom_protocol::messages::Response;

fn topic_counters(c: &mut Criterion) {
    for recording in [true, false] {
        let table = TopicMetricsTable::default();
        table.set_recording(recording);
        let topic = table.resolve("orders");
        let name = if recording { "on" } else { "off" };
        c.bench_function(&format!("record_produce/{name}"), |b| {
            b.iter(|| topic.record_produce(black_box(100), black_box(16_384)))
        });
    }
}

fn produce_response() -> Response {
    Response::Produce(
        ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
            .with_partition_responses(vec![PartitionProduceResponse::default()])]),
    )
}

fn request_metrics(c: &mut Criterion) {
    for recording in [true, false] {
        let metrics = Arc::new(BrokerMetrics::new(HANDLED_APIS, recording));
        let name = if recording { "on" } else { "off" };
        c.bench_function(&format!("observe_produce/{name}"), |b| {
            b.iter_batched(
                || Reply::Response(produce_response()),
                |reply| {
                    let now = Instant::now();
                    black_box(strom_broker::metrics::observe(
                        &metrics,
                        ApiKey::Produce,
                        now,
                        now,
                        reply,
                    ))
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
}

/// Criterion's generated group function lives in a private module.
mod harness {
    use super::{request_metrics, topic_counters};
    use criterion::criterion_group;

    criterion_group!(benches, topic_counters, request_metrics);
}

criterion_main!(harness::benches);
