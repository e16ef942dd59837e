//! The three librdkafka workloads, identical for every target.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use strom_bench::stats::LatencySummary;

/// How long any one phase may take before it is abandoned.
const PHASE_TIMEOUT: Duration = Duration::from_secs(300);

/// A throughput measurement.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Records acknowledged (produce) or read (consume).
    pub records: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Throughput {
    /// Records per second.
    pub fn records_per_second(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// Counts delivery reports.
#[derive(Default)]
pub struct DeliveryCounter {
    delivered: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Producer settings shared by both targets; only `acks` and `linger.ms` vary.
fn producer_config(bootstrap: &str, acks: &str, linger_ms: u32) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("linger.ms", linger_ms.to_string())
        .set("batch.size", "1000000")
        .set("batch.num.messages", "10000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("compression.type", "none")
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "120000");
    config
}

fn consumer_config(bootstrap: &str, group: &str, fetch_wait_max_ms: u32) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", fetch_wait_max_ms.to_string())
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "8388608");
    extra_consumer_properties(&mut config);
    config
}

/// `STROM_RDKAFKA_CONSUMER_PROPS="key=value,key=value"`: librdkafka consumer
/// properties that override the ones above (to try client tunings).
fn extra_consumer_properties(config: &mut ClientConfig) {
    let Ok(extra) = std::env::var("STROM_RDKAFKA_CONSUMER_PROPS") else {
        return;
    };
    for pair in extra.split(',').filter(|pair| !pair.trim().is_empty()) {
        if let Some((key, value)) = pair.split_once('=') {
            config.set(key.trim(), value.trim());
        }
    }
}

/// Sends `records` records of `record_bytes` bytes round-robin over the
/// partitions and waits for every delivery report.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    record_bytes: usize,
    acks: &str,
) -> Result<Throughput, String> {
    let producer: BaseProducer<DeliveryCounter> = producer_config(bootstrap, acks, 5)
        .create_with_context(DeliveryCounter::default())
        .map_err(|error| format!("producer: {error}"))?;
    let value = vec![b'x'; record_bytes];
    let started = Instant::now();
    for index in 0..records {
        let partition = (index % partitions as u64) as i32;
        let mut record = BaseRecord::<(), [u8]>::to(topic)
            .partition(partition)
            .payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => return Err(format!("send: {error}")),
            }
            if started.elapsed() > PHASE_TIMEOUT {
                return Err("produce timed out".to_owned());
            }
        }
        if index % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(PHASE_TIMEOUT)
        .map_err(|error| format!("flush: {error}"))?;
    let elapsed = started.elapsed();
    let context = producer.context();
    let failed = context.failed.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} deliveries failed"));
    }
    Ok(Throughput {
        records: context.delivered.load(Ordering::Relaxed),
        elapsed,
    })
}

fn assign_from_beginning(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> Result<(), String> {
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .map_err(|error| format!("assignment: {error}"))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|error| format!("assign: {error}"))
}

/// Reads `records` records from the beginning of every partition.
///
/// After `timeout` it stops and reports the rate of what it read (with a
/// warning): librdkafka's mock cluster can be that slow, and its partial
/// rate is still its rate.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    timeout: Duration,
) -> Result<Throughput, String> {
    let consumer: BaseConsumer = consumer_config(bootstrap, "strom-bench-consume", 500)
        .create()
        .map_err(|error| format!("consumer: {error}"))?;
    assign_from_beginning(&consumer, topic, partitions)?;
    let started = Instant::now();
    let mut read = 0_u64;
    while read < records {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => read += 1,
            Some(Err(error)) => return Err(format!("consume: {error}")),
            None => {}
        }
        if started.elapsed() > timeout {
            if read == 0 {
                return Err("consume read nothing before its timeout".to_owned());
            }
            eprintln!("consume stopped after {read} of {records} records (timeout); partial rate");
            break;
        }
    }
    Ok(Throughput {
        records: read,
        elapsed: started.elapsed(),
    })
}

/// End-to-end latency settings.
#[derive(Debug, Clone, Copy)]
pub struct LatencySettings {
    /// Records timed.
    pub records: u64,
    /// Records sent (and read) before timing starts.
    pub warmup_records: u64,
    /// Send rate.
    pub records_per_second: u64,
    /// Record size.
    pub record_bytes: usize,
}

/// Produces at a fixed rate with acks=all and linger.ms=0 while a consumer
/// with fetch.wait.max.ms=500 reads; each record carries its send time.
pub fn end_to_end(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    settings: LatencySettings,
) -> Result<LatencySummary, String> {
    let epoch = Instant::now();
    let consumer: BaseConsumer = consumer_config(bootstrap, "strom-bench-latency", 500)
        .create()
        .map_err(|error| format!("consumer: {error}"))?;
    assign_from_beginning(&consumer, topic, partitions)?;
    let total = settings.warmup_records + settings.records;
    let reader = std::thread::spawn(move || read_latencies(consumer, epoch, settings));
    let producer: BaseProducer<DeliveryCounter> = producer_config(bootstrap, "all", 0)
        .create_with_context(DeliveryCounter::default())
        .map_err(|error| format!("producer: {error}"))?;
    let interval = Duration::from_nanos(1_000_000_000 / settings.records_per_second.max(1));
    let mut value = vec![b'x'; settings.record_bytes.max(16)];
    let started = Instant::now();
    for index in 0..total {
        let due = started + interval * index as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            producer.poll(wait);
        }
        let sent_ns = epoch.elapsed().as_nanos() as u64;
        value[..8].copy_from_slice(&index.to_be_bytes());
        value[8..16].copy_from_slice(&sent_ns.to_be_bytes());
        let record = BaseRecord::<(), [u8]>::to(topic)
            .partition((index % partitions as u64) as i32)
            .payload(&value[..]);
        producer
            .send(record)
            .map_err(|(error, _)| format!("send: {error}"))?;
    }
    producer
        .flush(PHASE_TIMEOUT)
        .map_err(|error| format!("flush: {error}"))?;
    let mut samples = reader
        .join()
        .map_err(|_| "latency reader panicked".to_owned())??;
    Ok(LatencySummary::from_samples(&mut samples))
}

fn read_latencies(
    consumer: BaseConsumer,
    epoch: Instant,
    settings: LatencySettings,
) -> Result<Vec<Duration>, String> {
    let total = settings.warmup_records + settings.records;
    let mut samples = Vec::with_capacity(settings.records as usize);
    let mut seen = 0_u64;
    let started = Instant::now();
    while seen < total {
        if started.elapsed() > PHASE_TIMEOUT {
            return Err(format!("latency consumer timed out after {seen} records"));
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message.map_err(|error| format!("consume: {error}"))?;
        let now_ns = epoch.elapsed().as_nanos() as u64;
        seen += 1;
        let Some(payload) = message.payload() else {
            continue;
        };
        let (Some(index), Some(sent_ns)) = (read_u64(payload, 0), read_u64(payload, 8)) else {
            continue;
        };
        if index >= settings.warmup_records {
            samples.push(Duration::from_nanos(now_ns.saturating_sub(sent_ns)));
        }
    }
    Ok(samples)
}

fn read_u64(payload: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = payload.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}
