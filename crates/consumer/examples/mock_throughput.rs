//! Consumes the same records from librdkafka's in-process mock cluster with
//! strom-consumer and with librdkafka's consumer, and prints records/s,
//! MB/s and the process CPU time of each run. The mock cluster is not a
//! broker benchmark (it serves from memory in the same process); this only
//! compares the two clients' fetch paths under identical conditions.
//!
//! `cargo run --release -p strom-consumer --example mock_throughput -- [records] [value_bytes]`

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::TopicPartitionList;
use strom_consumer::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};

const PARTITIONS: i32 = 3;

fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(0.0)
}

fn report(name: &str, records: u64, bytes: u64, elapsed: Duration, cpu: f64) {
    let seconds = elapsed.as_secs_f64();
    println!(
        "{name:>16}: {records} records, {:.0} records/s, {:.1} MB/s, {:.2} s CPU",
        records as f64 / seconds,
        bytes as f64 / seconds / 1_048_576.0,
        cpu
    );
}

/// Fills the topic with `records` records of `value_bytes` bytes.
fn produce(
    bootstrap: &str,
    records: u64,
    value_bytes: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.num.messages", "10000")
        .create()?;
    let value = vec![b'x'; value_bytes];
    for index in 0..records {
        let partition = (index % PARTITIONS as u64) as i32;
        while producer
            .send(
                BaseRecord::<(), _>::to("perf")
                    .partition(partition)
                    .payload(&value),
            )
            .is_err()
        {
            producer.poll(Duration::from_millis(5));
        }
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(())
}

/// Reads the topic with librdkafka, for comparison.
fn consume_with_librdkafka(
    bootstrap: &str,
    records: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let librdkafka: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "perf-librdkafka")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    let mut list = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        list.add_partition_offset("perf", partition, rdkafka::Offset::Beginning)?;
    }
    librdkafka.assign(&list)?;
    let (cpu_start, start) = (cpu_seconds(), Instant::now());
    let (mut count, mut bytes) = (0u64, 0u64);
    while count < records && start.elapsed() < Duration::from_secs(120) {
        if let Some(Ok(message)) = librdkafka.poll(Duration::from_millis(100)) {
            count += 1;
            bytes += message.payload().map_or(0, <[u8]>::len) as u64;
        }
    }
    report(
        "librdkafka",
        count,
        bytes,
        start.elapsed(),
        cpu_seconds() - cpu_start,
    );
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let records: u64 = arguments.next().map_or(Ok(200_000), |a| a.parse())?;
    let value_bytes: usize = arguments.next().map_or(Ok(100), |a| a.parse())?;
    let cluster = MockCluster::new(1)?;
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("perf", PARTITIONS, 1)?;
    produce(&bootstrap, records, value_bytes)?;

    let mut config = ConsumerConfig::new(bootstrap.split(',').map(str::to_owned));
    config.auto_offset_reset = OffsetReset::Earliest;
    config.max_poll_records = 10_000;
    let mut consumer = Consumer::new(config).await?;
    consumer.assign((0..PARTITIONS).map(|p| TopicPartition::new("perf", p)))?;
    let (cpu_start, start) = (cpu_seconds(), Instant::now());
    let (mut count, mut bytes) = (0u64, 0u64);
    while count < records && start.elapsed() < Duration::from_secs(120) {
        for record in consumer.poll(Duration::from_millis(100)).await? {
            count += 1;
            bytes += record.payload_bytes() as u64;
        }
    }
    report(
        "strom-consumer",
        count,
        bytes,
        start.elapsed(),
        cpu_seconds() - cpu_start,
    );
    consumer.close().await?;

    consume_with_librdkafka(&bootstrap, records)
}
