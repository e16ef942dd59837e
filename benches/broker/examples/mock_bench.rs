//! strom-producer against librdkafka (the `rdkafka` crate) on librdkafka's
//! in-process mock cluster: records/s and latency for the same workload.
//!
//! The mock broker runs in this process and is itself the bottleneck, so the
//! figures compare the clients on an equal footing but say nothing about a
//! real broker. Run with `cargo run --release -p strom-bench --example
//! mock_bench -- [records]`.

use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strom_producer::{Acks, ProducerConfig};
use strom_protocol::records::Compression;
use strom_tools::perf::produce_run::{run, PerfOptions, PerfReport};

async fn librdkafka(bootstrap: &str, topic: &str, options: &PerfOptions) -> PerfReport {
    // The comparison always sets every option; the fallbacks are the
    // producer's own defaults.
    let defaults = ProducerConfig::new([bootstrap.to_owned()]);
    let acks_setting = options.acks.unwrap_or(defaults.acks);
    let linger = options.linger.unwrap_or(defaults.linger);
    let batch_size = options.batch_size.unwrap_or(defaults.batch_size);
    let compression = options.compression.unwrap_or(defaults.compression);
    let acks = match acks_setting {
        Acks::None => "0",
        Acks::Leader => "1",
        Acks::All => "all",
    };
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("linger.ms", linger.as_millis().to_string())
        .set("batch.size", batch_size.to_string())
        .set("compression.type", compression.name())
        .set(
            "enable.idempotence",
            if acks_setting == Acks::All {
                "true"
            } else {
                "false"
            },
        )
        .create()
        .expect("librdkafka producer");
    let value = vec![b'x'; options.record_size];
    let started = Instant::now();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let collector = tokio::spawn(async move {
        let mut latencies_us = Vec::new();
        let mut failed = 0;
        while let Some((sent_at, delivery)) = receiver.recv().await {
            let delivery: rdkafka::producer::DeliveryFuture = delivery;
            match delivery.await {
                Ok(Ok(_)) => latencies_us.push(sent_at_elapsed_us(sent_at)),
                _ => failed += 1,
            }
        }
        (latencies_us, failed)
    });
    for _ in 0..options.num_records {
        loop {
            let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(topic).payload(&value[..]);
            match producer.send_result(record) {
                Ok(delivery) => {
                    let _ = sender.send((Instant::now(), delivery));
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }
    drop(sender);
    let (latencies_us, failed) = collector.await.expect("collector");
    PerfReport::from_latencies(latencies_us, failed, started.elapsed(), options.record_size)
}

fn sent_at_elapsed_us(sent_at: Instant) -> u64 {
    u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX)
}

#[tokio::main]
async fn main() {
    let records: u64 = std::env::args()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or(200_000);
    let mock = MockCluster::new(1).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    println!("| client | acks | compression | records | records/s | MB/s | p99 ms |");
    println!("|---|---|---|---|---|---|---|");
    for (acks, compression) in [
        (Acks::Leader, Compression::None),
        (Acks::Leader, Compression::Lz4),
        (Acks::All, Compression::None),
        (Acks::All, Compression::Lz4),
    ] {
        let topic = format!("bench-{}-{}", acks.wire(), compression.name());
        mock.create_topic(&topic, 6, 1).expect("topic");
        let options = PerfOptions {
            bootstrap_servers: bootstrap.clone(),
            topic: topic.clone(),
            num_records: records,
            record_size: 100,
            throughput: None,
            acks: Some(acks),
            linger: Some(Duration::from_millis(5)),
            batch_size: Some(65_536),
            compression: Some(compression),
        };
        let strom = run(&options).await.expect("strom run");
        let rdkafka = librdkafka(&bootstrap, &topic, &options).await;
        for (name, report) in [("strom-producer", strom), ("librdkafka", rdkafka)] {
            println!(
                "| {name} | {} | {} | {} | {:.0} | {:.2} | {:.2} |",
                acks.wire(),
                compression.name(),
                report.records,
                report.records_per_second,
                report.megabytes_per_second,
                report.p99_latency_ms
            );
        }
    }
}
