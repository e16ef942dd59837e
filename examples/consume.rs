//! Consuming in a group with `strom-consumer`: subscribe with a rebalance
//! listener, poll, commit what was processed, and leave the group cleanly.
//!
//! Start a broker, write some records with the `produce` example, then:
//!
//! ```sh
//! cargo run -p strom-examples --example consume -- 127.0.0.1:9092
//! ```
//!
//! The argument (or `STROM_BOOTSTRAP`) is the bootstrap address; the
//! default is `127.0.0.1:9092`. The consumer joins the group
//! `example-order-readers`, reads `example-orders` from the beginning (or
//! from the group's committed offsets), prints each record and the
//! partitions the group assigns and revokes, commits after each poll, and
//! stops once it has read nothing for two seconds since its partitions were
//! assigned (or after thirty seconds in all). Run it twice: the second run
//! reads nothing, because the first committed its offsets. Start two at
//! once and watch the partitions split between them.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::{Duration, Instant};

use strom_consumer::{
    Consumer, ConsumerConfig, ConsumerError, ConsumerRecord, OffsetAndMetadata, OffsetReset,
    RebalanceListener, TopicPartition,
};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The topic the example reads (the one the `produce` example writes).
pub const TOPIC: &str = "example-orders";
/// The consumer group.
pub const GROUP: &str = "example-order-readers";

/// A rebalance as the listener saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebalance {
    /// Partitions given to this member.
    Assigned(Vec<TopicPartition>),
    /// Partitions taken away (after their offsets were committed).
    Revoked(Vec<TopicPartition>),
    /// Partitions lost without a chance to commit.
    Lost(Vec<TopicPartition>),
}

/// What the consumer did.
#[derive(Debug, Default)]
pub struct Consumed {
    /// The records read, in the order `poll` returned them.
    pub records: Vec<ConsumerRecord>,
    /// The rebalances, in order.
    pub rebalances: Vec<Rebalance>,
    /// The group's committed offsets when the consumer stopped.
    pub committed: BTreeMap<TopicPartition, i64>,
}

/// When to stop reading.
#[derive(Debug, Clone, Copy)]
pub struct StopWhen {
    /// Stop once nothing arrived for this long: since the last records,
    /// or before any, since the partitions were assigned.
    pub idle: Duration,
    /// Stop after this long in any case.
    pub total: Duration,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let bootstrap = bootstrap_address();
    let stop = StopWhen {
        idle: Duration::from_secs(2),
        total: Duration::from_secs(30),
    };
    let consumed = run(&bootstrap, stop).await?;
    println!("{} records read", consumed.records.len());
    for (partition, offset) in &consumed.committed {
        println!("committed {partition} at offset {offset}");
    }
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

/// Joins the group, reads and commits until `stop`, then leaves the group.
pub async fn run(bootstrap: &str, stop: StopWhen) -> Result<Consumed, Box<dyn Error>> {
    let mut consumer = Consumer::new(consumer_config(bootstrap)).await?;
    let (events, mut received) = unbounded_channel();
    consumer.subscribe_with_listener([TOPIC], PrintingListener { events })?;
    let outcome = match read_and_commit(&mut consumer, stop).await {
        Ok(records) => committed_offsets(&consumer)
            .await
            .map(|committed| (records, committed)),
        Err(error) => Err(error),
    };
    // Revokes the partitions through the listener and leaves the group (also
    // after a failure), so the others need not wait for this member's
    // session to expire.
    consumer.close().await?;
    let (records, committed) = outcome?;
    Ok(Consumed {
        records,
        rebalances: drain(&mut received),
        committed,
    })
}

fn consumer_config(bootstrap: &str) -> ConsumerConfig {
    let mut config = ConsumerConfig::new([bootstrap]);
    config.client = config.client.with_client_id("consume-example");
    config.group_id = Some(GROUP.to_owned());
    // Without committed offsets, start at the beginning of each partition.
    config.auto_offset_reset = OffsetReset::Earliest;
    // Commit by hand, after the records are processed: at-least-once.
    config.enable_auto_commit = false;
    config
}

/// Polls until `stop`, committing the positions after each batch. The idle
/// time counts from the first assignment, so a slow first join does not
/// end the run.
async fn read_and_commit(
    consumer: &mut Consumer,
    stop: StopWhen,
) -> Result<Vec<ConsumerRecord>, Box<dyn Error>> {
    let started = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    let mut records = Vec::new();
    while started.elapsed() < stop.total
        && quiet_since.is_none_or(|since| since.elapsed() < stop.idle)
    {
        let batch = consumer.poll(Duration::from_millis(200)).await?;
        if batch.is_empty() {
            if quiet_since.is_none() && !consumer.assignment().is_empty() {
                quiet_since = Some(Instant::now());
            }
            continue;
        }
        for record in &batch {
            process(record);
        }
        // Commits the position of every assigned partition: the offset
        // after the last record `poll` returned. While the group rebalances
        // the commit is refused; the next poll finishes the rebalance, and
        // the next commit covers these records too.
        match consumer.commit_sync().await {
            Ok(()) | Err(ConsumerError::RebalanceInProgress) => {}
            Err(error) => return Err(error.into()),
        }
        quiet_since = Some(Instant::now());
        records.extend(batch);
    }
    Ok(records)
}

/// The application's work on one record.
fn process(record: &ConsumerRecord) {
    println!(
        "{}-{}@{} key={} value={}",
        record.topic,
        record.partition,
        record.offset,
        text(record.key.as_deref()),
        text(record.value.as_deref())
    );
}

fn text(bytes: Option<&[u8]>) -> String {
    bytes
        .map(String::from_utf8_lossy)
        .unwrap_or_default()
        .into_owned()
}

/// The group's committed offset of each partition of the topic.
async fn committed_offsets(
    consumer: &Consumer,
) -> Result<BTreeMap<TopicPartition, i64>, Box<dyn Error>> {
    let partitions = consumer.assignment();
    let committed = consumer.committed(&partitions).await?;
    Ok(committed
        .into_iter()
        .filter_map(|(partition, offset)| Some((partition, offset?.offset)))
        .collect())
}

/// Prints each rebalance and passes it on to the example's report.
struct PrintingListener {
    events: UnboundedSender<Rebalance>,
}

impl PrintingListener {
    fn report(&self, event: Rebalance) {
        let (what, partitions) = match &event {
            Rebalance::Assigned(partitions) => ("assigned", partitions),
            Rebalance::Revoked(partitions) => ("revoked", partitions),
            Rebalance::Lost(partitions) => ("lost", partitions),
        };
        println!("{what}: {}", names(partitions));
        // The receiver lives until the consumer is closed; a send can only
        // fail after that, when nobody is listening any more.
        let _ = self.events.send(event);
    }
}

impl RebalanceListener for PrintingListener {
    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        self.report(Rebalance::Assigned(assigned.to_vec()));
    }

    fn on_partitions_revoked(
        &mut self,
        revoked: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        // Offsets are committed after every poll, so there is nothing left
        // to commit here; an application that commits less often returns
        // its processed offsets, and the consumer commits them first.
        self.report(Rebalance::Revoked(revoked.to_vec()));
        BTreeMap::new()
    }

    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        self.report(Rebalance::Lost(lost.to_vec()));
    }
}

/// `topic-0, topic-1, ...`.
fn names(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    names.join(", ")
}

fn drain(received: &mut UnboundedReceiver<Rebalance>) -> Vec<Rebalance> {
    let mut events = Vec::new();
    while let Ok(event) = received.try_recv() {
        events.push(event);
    }
    events
}
