//! Producing keyed records with `strom-producer` and reading each record's
//! delivery result: the partition and offset it was written at, or why it
//! was not.
//!
//! Start a broker (`cargo run -p strom-tools -- broker`), then:
//!
//! ```sh
//! cargo run -p strom-examples --example produce -- 127.0.0.1:9092
//! ```
//!
//! The argument (or `STROM_BOOTSTRAP`) is the bootstrap address; the
//! default is `127.0.0.1:9092`. The records go to the topic
//! `example-orders`, which the broker creates on first use (with
//! `num.partitions` partitions). Records with the same key land in the same
//! partition, in the order they were sent, as with Kafka's Java client. One
//! record is deliberately larger than `max.request.size`, to show how a
//! failed delivery is reported.

use std::error::Error;
use std::time::Duration;

use strom_producer::{
    DeliveryFuture, ProduceError, Producer, ProducerConfig, ProducerRecord, RecordMetadata,
};

/// The topic the example writes to.
pub const TOPIC: &str = "example-orders";
/// The keys of the example's records: one per customer.
pub const CUSTOMERS: [&str; 3] = ["alice", "bob", "carol"];

/// What happened to the records sent.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// The records the broker acknowledged, in the order they were sent,
    /// with their keys.
    pub delivered: Vec<(String, RecordMetadata)>,
    /// The records that were not written, with the reason.
    pub failed: Vec<(String, ProduceError)>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let bootstrap = bootstrap_address();
    let deliveries = run(&bootstrap, 3).await?;
    println!(
        "{} records delivered, {} failed",
        deliveries.delivered.len(),
        deliveries.failed.len()
    );
    Ok(())
}

/// The bootstrap address: the first argument, else `STROM_BOOTSTRAP`, else
/// `127.0.0.1:9092`.
pub fn bootstrap_address() -> String {
    std::env::args()
        .nth(1)
        .or_else(|| std::env::var("STROM_BOOTSTRAP").ok())
        .unwrap_or_else(|| "127.0.0.1:9092".to_owned())
}

/// Sends `orders_per_customer` keyed records for each customer, plus one
/// record too large to send, and reports every delivery result.
pub async fn run(
    bootstrap: &str,
    orders_per_customer: usize,
) -> Result<Deliveries, Box<dyn Error>> {
    let producer = Producer::new(producer_config(bootstrap)).await?;
    // `send` only queues the record (waiting for buffer space if needed);
    // the returned future resolves once the broker answered. Queue them all
    // first, so that they travel in batches, then wait for the answers.
    let mut pending: Vec<(String, DeliveryFuture)> = Vec::new();
    for order in 0..orders_per_customer {
        for customer in CUSTOMERS {
            let record = ProducerRecord::new(TOPIC, format!("order {order} of {customer}"))
                .with_key(customer)
                .with_header("source", Some("produce-example".into()));
            pending.push((customer.to_owned(), producer.send(record).await));
        }
    }
    let oversized = ProducerRecord::new(TOPIC, vec![0_u8; 2 * 1024 * 1024]).with_key("dave");
    pending.push(("dave".to_owned(), producer.send(oversized).await));

    let deliveries = collect(pending).await;
    // Waits for whatever is still queued (nothing here), then stops the
    // sender and the connections.
    producer.close(Duration::from_secs(5)).await;
    Ok(deliveries)
}

/// Java's producer defaults, with a shorter delivery timeout so that an
/// unreachable broker fails the example in seconds rather than minutes.
fn producer_config(bootstrap: &str) -> ProducerConfig {
    let mut config = ProducerConfig::new([bootstrap]);
    config.client = config.client.with_client_id("produce-example");
    // `acks=all` and idempotence are the defaults: each record is written
    // once, in order per partition, even when a request is retried.
    config.linger = Duration::from_millis(10);
    config.delivery_timeout = Duration::from_secs(15);
    config
}

/// Waits for each record's delivery result and prints it.
async fn collect(pending: Vec<(String, DeliveryFuture)>) -> Deliveries {
    let mut deliveries = Deliveries::default();
    for (key, delivery) in pending {
        match delivery.await {
            Ok(metadata) => {
                println!(
                    "delivered key={key} to {}-{} at offset {}",
                    metadata.topic, metadata.partition, metadata.offset
                );
                deliveries.delivered.push((key, metadata));
            }
            Err(error) => {
                println!("not delivered key={key}: {error} ({})", advice(&error));
                deliveries.failed.push((key, error));
            }
        }
    }
    deliveries
}

/// What an application would do about each kind of failure.
fn advice(error: &ProduceError) -> &'static str {
    match error {
        ProduceError::RecordTooLarge { .. } => {
            "split the payload, or raise max.request.size and the topic's max.message.bytes"
        }
        ProduceError::Timeout { .. } => {
            "no answer in time: it may have been written; send again if a duplicate is acceptable"
        }
        ProduceError::UnknownTopicOrPartition { .. } | ProduceError::Authorization { .. } => {
            "check the topic name and the broker's auto.create.topics.enable"
        }
        _ => "the producer gave up on it: log it, and send again once the cause has passed",
    }
}
