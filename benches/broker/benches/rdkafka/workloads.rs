//! The three librdkafka workloads, identical for every target.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::statistics::Statistics;
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
    /// With a latency dump: the phase's epoch and, per record, its index and
    /// the time from send to acknowledgement (µs).
    acks: Option<(Instant, AckLog)>,
    /// The last librdkafka statistics, when `statistics.interval.ms` is set
    /// (e.g. through `STROM_RDKAFKA_PRODUCER_PROPS`).
    statistics: std::sync::Mutex<Option<Statistics>>,
}

/// Record index and send-to-acknowledgement time (µs) of each delivery.
type AckLog = std::sync::Mutex<Vec<(u64, u64)>>;

impl ClientContext for DeliveryCounter {
    fn stats(&self, statistics: Statistics) {
        if let Ok(mut last) = self.statistics.lock() {
            *last = Some(statistics);
        }
    }
}

/// One line from librdkafka's statistics (cumulative for the producer's
/// life, as of their last emission): Produce requests sent, records per
/// batch, round-trip time and the time records waited in the client.
fn statistics_line(statistics: &Statistics) -> String {
    let brokers = statistics
        .brokers
        .values()
        .filter(|broker| broker.nodeid >= 0);
    let (mut requests, mut rtt_sum, mut rtt_count, mut wait_sum, mut wait_count) = (0, 0, 0, 0, 0);
    for broker in brokers {
        requests += broker.req.get("Produce").copied().unwrap_or(0);
        if let Some(rtt) = &broker.rtt {
            rtt_sum += rtt.sum;
            rtt_count += rtt.cnt;
        }
        if let Some(wait) = &broker.int_latency {
            wait_sum += wait.sum;
            wait_count += wait.cnt;
        }
    }
    let (mut batches, mut batch_records) = (0, 0);
    for topic in statistics.topics.values() {
        batches += topic.batchcnt.cnt;
        batch_records += topic.batchcnt.sum;
    }
    let average = |sum: i64, count: i64| if count > 0 { sum / count } else { 0 };
    format!(
        "{requests} Produce requests, {batches} batches of {} records on average, \
         rtt {} µs, in-client wait {} µs (those two: the last statistics interval)",
        average(batch_records, batches),
        average(rtt_sum, rtt_count),
        average(wait_sum, wait_count),
    )
}

/// Consumer context that writes librdkafka's log lines (for example with
/// `STROM_RDKAFKA_CONSUMER_PROPS=debug=fetch`) to stderr with the time
/// since the process started, to see where a consumer waits.
pub struct StderrLog {
    started: Instant,
}

impl Default for StderrLog {
    fn default() -> Self {
        StderrLog {
            started: Instant::now(),
        }
    }
}

impl ClientContext for StderrLog {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        eprintln!(
            "{:>10.3} ms {facility} {message}",
            self.started.elapsed().as_secs_f64() * 1e3
        );
    }
}

impl rdkafka::consumer::ConsumerContext for StderrLog {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        if let (Some((epoch, acks)), Ok(message)) = (&self.acks, result) {
            let payload = message.payload().unwrap_or_default();
            if let (Some(index), Some(sent_ns)) = (read_u64(payload, 0), read_u64(payload, 8)) {
                let now_ns = epoch.elapsed().as_nanos() as u64;
                if let Ok(mut acks) = acks.lock() {
                    acks.push((index, now_ns.saturating_sub(sent_ns) / 1_000));
                }
            }
        }
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
    extra_properties(&mut config, "STROM_RDKAFKA_PRODUCER_PROPS");
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
        .set("max.partition.fetch.bytes", "8388608")
        // Keep fetching while the application reads: librdkafka stops
        // fetching once `queued.min.messages` (default 100,000) records wait
        // locally and then backs off for `fetch.queue.backoff.ms` (default
        // 1 s), which bounds a fast reader by the client's pacing, not the
        // broker's.
        .set("queued.min.messages", "1000000")
        .set("fetch.queue.backoff.ms", "0")
        .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    extra_properties(&mut config, "STROM_RDKAFKA_CONSUMER_PROPS");
    config
}

/// `STROM_RDKAFKA_CONSUMER_PROPS` / `STROM_RDKAFKA_PRODUCER_PROPS` =
/// `"key=value,key=value"`: librdkafka properties that override the
/// benchmark's own (to try client tunings).
fn extra_properties(config: &mut ClientConfig, variable: &str) {
    let Ok(extra) = std::env::var(variable) else {
        return;
    };
    for pair in extra.split(',').filter(|pair| !pair.trim().is_empty()) {
        if let Some((key, value)) = pair.split_once('=') {
            config.set(key.trim(), value.trim());
        }
    }
}

/// Sends `record`, polling while librdkafka's queue is full, until
/// [`PHASE_TIMEOUT`] after `started`.
fn send_until_queued(
    producer: &BaseProducer<DeliveryCounter>,
    mut record: BaseRecord<'_, (), [u8]>,
    started: Instant,
) -> Result<(), String> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
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
        let record = BaseRecord::<(), [u8]>::to(topic)
            .partition(partition)
            .payload(&value[..]);
        send_until_queued(&producer, record, started)?;
        if index % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    let enqueued = started.elapsed();
    let context = producer.context();
    let acknowledged_by_then = context.delivered.load(Ordering::Relaxed);
    // Wait for the last acknowledgements in 1 ms polls: `flush` polls in
    // 100 ms slices (rdkafka's `BaseProducer::flush` sleeps out each slice),
    // which would add up to 100 ms to every round whatever the broker does.
    while context.delivered.load(Ordering::Relaxed) + context.failed.load(Ordering::Relaxed)
        < records
    {
        if started.elapsed() > PHASE_TIMEOUT {
            return Err("produce timed out waiting for acknowledgements".to_owned());
        }
        producer.poll(Duration::from_millis(1));
    }
    let elapsed = started.elapsed();
    // Where the time went: the application's sends, then the wait for the
    // last acknowledgements.
    eprintln!(
        "  sends took {:.1} ms ({acknowledged_by_then} acknowledged by then), the rest {:.1} ms",
        enqueued.as_secs_f64() * 1e3,
        (elapsed - enqueued).as_secs_f64() * 1e3
    );
    if let Ok(statistics) = context.statistics.lock() {
        if let Some(statistics) = statistics.as_ref() {
            eprintln!("  client: {}", statistics_line(statistics));
        }
    }
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
    consumer: &BaseConsumer<StderrLog>,
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
    mode: ConsumeMode,
) -> Result<Throughput, String> {
    let consumer: BaseConsumer<StderrLog> = consumer_config(bootstrap, mode.group(), 500)
        .create_with_context(StderrLog::default())
        .map_err(|error| format!("consumer: {error}"))?;
    // Without metadata the new client knows no partition leader at
    // assignment, and librdkafka retries the offset lookup 500 ms later:
    // client start-up, not consuming, so it is done before the clock runs.
    consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|error| format!("metadata: {error}"))?;
    assign_from_beginning(&consumer, topic, partitions)?;
    let mut reader = Reader {
        phase_started: Instant::now(),
        started: None,
        read: 0,
        records,
        timeout,
    };
    match mode {
        ConsumeMode::Poll => read_polling(&consumer, &mut reader)?,
        ConsumeMode::Batch => read_batches(&consumer, &mut reader)?,
    }
    if reader.read < records {
        eprintln!(
            "consume stopped after {} of {records} records (timeout); partial rate",
            reader.read
        );
    }
    let started = reader
        .started
        .ok_or_else(|| "consume read nothing before its timeout".to_owned())?;
    // The clock starts at the first record; the records counted are the
    // ones after it.
    Ok(Throughput {
        records: reader.read.saturating_sub(1),
        elapsed: started.elapsed(),
    })
}

/// How the consume phase takes records from librdkafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeMode {
    /// One `BaseConsumer::poll` per record (the rdkafka crate's API).
    Poll,
    /// `rd_kafka_consume_batch_queue`, up to [`BATCH_RECORDS`] records per
    /// call (librdkafka's batch API, as confluent-kafka's `consume(n)` uses).
    Batch,
}

impl ConsumeMode {
    fn group(self) -> &'static str {
        match self {
            ConsumeMode::Poll => "strom-bench-consume",
            ConsumeMode::Batch => "strom-bench-consume-batch",
        }
    }
}

/// Records asked for per `rd_kafka_consume_batch_queue` call.
pub const BATCH_RECORDS: usize = 10_000;

/// Progress of one consume phase.
struct Reader {
    phase_started: Instant,
    started: Option<Instant>,
    read: u64,
    records: u64,
    timeout: Duration,
}

impl Reader {
    fn add(&mut self, count: u64) {
        if count > 0 && self.started.is_none() {
            self.started = Some(Instant::now());
            eprintln!(
                "first record after {} ms",
                self.phase_started.elapsed().as_millis()
            );
        }
        self.read += count;
    }

    fn timed_out(&self) -> bool {
        self.phase_started.elapsed() > self.timeout
    }
}

fn read_polling(consumer: &BaseConsumer<StderrLog>, reader: &mut Reader) -> Result<(), String> {
    while reader.read < reader.records {
        let idle = match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(_)) => {
                reader.add(1);
                false
            }
            Some(Err(error)) => return Err(format!("consume: {error}")),
            None => true,
        };
        // The clock is read after an empty poll and once per 1,024 records,
        // not per record.
        if (idle || reader.read.is_multiple_of(1024)) && reader.timed_out() {
            break;
        }
    }
    Ok(())
}

fn read_batches(consumer: &BaseConsumer<StderrLog>, reader: &mut Reader) -> Result<(), String> {
    // SAFETY: `native_ptr` is the live `rd_kafka_t` owned by `consumer`,
    // which outlives the queue handle (destroyed below, before returning).
    let queue =
        unsafe { rdkafka::bindings::rd_kafka_queue_get_consumer(consumer.client().native_ptr()) };
    if queue.is_null() {
        return Err("no consumer queue".to_owned());
    }
    let mut messages: Vec<*mut rdkafka::bindings::rd_kafka_message_t> =
        vec![std::ptr::null_mut(); BATCH_RECORDS];
    let mut outcome = Ok(());
    while reader.read < reader.records && !reader.timed_out() {
        // SAFETY: `queue` is a valid queue handle and `messages` has room for
        // `messages.len()` pointers, which librdkafka fills.
        let count = unsafe {
            rdkafka::bindings::rd_kafka_consume_batch_queue(
                queue,
                100,
                messages.as_mut_ptr(),
                messages.len(),
            )
        };
        let Ok(count) = usize::try_from(count) else {
            outcome = Err("rd_kafka_consume_batch_queue failed".to_owned());
            break;
        };
        let mut good = 0_u64;
        for &message in messages.iter().take(count) {
            // SAFETY: librdkafka returned `count` valid message pointers,
            // each read once here and destroyed once right after.
            let error = unsafe { (*message).err };
            // SAFETY: as above; the message is not used after this.
            unsafe { rdkafka::bindings::rd_kafka_message_destroy(message) };
            if error == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                good += 1;
            } else if outcome.is_ok() {
                outcome = Err(format!("consume: {error:?}"));
            }
        }
        reader.add(good);
        if outcome.is_err() {
            break;
        }
    }
    // SAFETY: `queue` came from `rd_kafka_queue_get_consumer` and is
    // destroyed once.
    unsafe { rdkafka::bindings::rd_kafka_queue_destroy(queue) };
    outcome
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
    let consumer: BaseConsumer<StderrLog> = consumer_config(bootstrap, "strom-bench-latency", 500)
        .create_with_context(StderrLog::default())
        .map_err(|error| format!("consumer: {error}"))?;
    assign_from_beginning(&consumer, topic, partitions)?;
    let total = settings.warmup_records + settings.records;
    let reader = std::thread::spawn(move || read_latencies(consumer, epoch, settings));
    let dumping = std::env::var_os("STROM_BENCH_LATENCY_DUMP");
    let counter = DeliveryCounter {
        acks: dumping
            .as_ref()
            .map(|_| (epoch, std::sync::Mutex::new(Vec::new()))),
        ..DeliveryCounter::default()
    };
    let producer: BaseProducer<DeliveryCounter> = producer_config(bootstrap, "all", 0)
        .create_with_context(counter)
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
    if let (Some(path), Some((_, acks))) = (dumping, &producer.context().acks) {
        // `<dump>.acks`: index and send-to-acknowledgement time (µs).
        let mut path = path;
        path.push(".acks");
        let acks = acks.lock().map(|acks| acks.clone()).unwrap_or_default();
        let text: String = acks
            .iter()
            .map(|(index, ack_us)| format!("{index} {ack_us}\n"))
            .collect();
        if let Err(error) = std::fs::write(&path, text) {
            eprintln!("cannot write the acknowledgement dump: {error}");
        }
    }
    Ok(LatencySummary::from_samples(&mut samples))
}

fn read_latencies(
    consumer: BaseConsumer<StderrLog>,
    epoch: Instant,
    settings: LatencySettings,
) -> Result<Vec<Duration>, String> {
    let total = settings.warmup_records + settings.records;
    let mut samples = Vec::with_capacity(settings.records as usize);
    let mut dump = latency_dump();
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
            let latency = Duration::from_nanos(now_ns.saturating_sub(sent_ns));
            samples.push(latency);
            if let Some(dump) = dump.as_mut() {
                // Best effort: a failed write only loses the dump.
                let wall_us = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_micros());
                let _ = writeln!(
                    dump,
                    "{} {} {} {wall_us} {index}",
                    sent_ns / 1_000,
                    message.partition(),
                    latency.as_micros()
                );
            }
        }
    }
    Ok(samples)
}

/// `STROM_BENCH_LATENCY_DUMP=FILE`: every timed record's send time (µs since
/// the phase began), partition, latency (µs) and wall-clock receipt time
/// (µs since the Unix epoch, to line up with `strace -tt`) and index, one
/// line each, to see when the slow ones happen; `FILE.acks` gets each
/// record's index and send-to-acknowledgement time (µs).
fn latency_dump() -> Option<std::io::BufWriter<std::fs::File>> {
    let path = std::env::var_os("STROM_BENCH_LATENCY_DUMP")?;
    match std::fs::File::create(&path) {
        Ok(file) => Some(std::io::BufWriter::new(file)),
        Err(error) => {
            eprintln!("cannot create the latency dump: {error}");
            None
        }
    }
}

fn read_u64(payload: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = payload.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}
