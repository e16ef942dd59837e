//! A broker and its clients in one process: the broker is configured with
//! the typed builder and started inside the program, then the admin client
//! creates a topic, the producer writes keyed records, a consumer group
//! reads and commits them, and the admin client reads the group's
//! committed offsets back, all over loopback TCP to the embedded broker.
//!
//! ```sh
//! cargo run -p strom-examples --example in_process
//! ```
//!
//! It needs nothing running: the broker listens on a free port of
//! 127.0.0.1, keeps its data in a temporary directory (removed at the end),
//! and shuts down gracefully before the program exits. This is the shape
//! of a test suite or a service that carries its own broker.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::{Duration, Instant};

use strom_broker::BrokerConfig;
use strom_client::admin::NewTopic;
use strom_client::{AdminClient, ClientConfig, Cluster};
use strom_consumer::{Consumer, ConsumerConfig, OffsetReset, RebalanceListener, TopicPartition};
use strom_producer::{Producer, ProducerConfig, ProducerRecord};

/// The topic the example creates.
pub const TOPIC: &str = "in-process-events";
/// Its partitions.
pub const PARTITIONS: i32 = 3;
/// The consumer group.
pub const GROUP: &str = "in-process-readers";
/// How many records the producer writes.
pub const RECORDS: usize = 30;

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Summary {
    /// Records the broker acknowledged, per partition.
    pub produced: BTreeMap<i32, usize>,
    /// Records the consumer read, per partition.
    pub consumed: BTreeMap<i32, usize>,
    /// The group's committed offset of each partition, as the admin client
    /// reads it.
    pub committed: BTreeMap<i32, i64>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let summary = run().await?;
    println!("{summary:#?}");
    Ok(())
}

/// Starts the broker, runs the clients against it, and stops it (also when
/// a client step fails).
pub async fn run() -> Result<Summary, Box<dyn Error>> {
    let data = tempfile::tempdir()?;
    let config = BrokerConfig::builder()
        .listener("127.0.0.1:0")
        .log_dir(data.path())
        .num_partitions(PARTITIONS)
        // One broker: a small offsets topic, and no wait for more group
        // members before the first rebalance.
        .offsets_topic_num_partitions(3)
        .group_initial_rebalance_delay(Duration::ZERO)
        .build()?;
    let broker = strom_broker::start(config).await?;
    let address = broker
        .local_addresses()
        .first()
        .copied()
        .ok_or("the broker has no listener")?;
    println!("broker {} listening on {address}", broker.cluster_id());
    let result = use_clients(&address.to_string()).await;
    broker.shutdown().await;
    result
}

async fn use_clients(bootstrap: &str) -> Result<Summary, Box<dyn Error>> {
    let cluster = Cluster::connect(ClientConfig::new([bootstrap])).await?;
    let admin = AdminClient::new(cluster, Duration::from_secs(10));
    let topic = NewTopic::new(TOPIC, PARTITIONS, 1);
    for (name, outcome) in admin.create_topics(&[topic], false).await? {
        outcome?;
        println!("created {name}");
    }
    let produced = produce(bootstrap).await?;
    let consumed = consume(bootstrap).await?;
    let partitions: Vec<i32> = (0..PARTITIONS).collect();
    let committed = admin.list_group_offsets(GROUP, TOPIC, &partitions).await?;
    println!("committed offsets of {GROUP}: {committed:?}");
    admin.cluster().close();
    Ok(Summary {
        produced,
        consumed,
        committed,
    })
}

/// Writes `RECORDS` records keyed by device, and counts the acknowledged
/// ones per partition.
async fn produce(bootstrap: &str) -> Result<BTreeMap<i32, usize>, Box<dyn Error>> {
    let producer = Producer::new(ProducerConfig::new([bootstrap])).await?;
    let mut deliveries = Vec::with_capacity(RECORDS);
    for reading in 0..RECORDS {
        let device = format!("device-{}", reading % 5);
        let record = ProducerRecord::new(TOPIC, format!("reading {reading}")).with_key(device);
        deliveries.push(producer.send(record).await);
    }
    let mut produced = BTreeMap::new();
    for delivery in deliveries {
        let metadata = delivery.await?;
        *produced.entry(metadata.partition).or_insert(0) += 1;
    }
    producer.close(Duration::from_secs(5)).await;
    println!("produced per partition: {produced:?}");
    Ok(produced)
}

/// Reads every record in the group, commits, and leaves the group.
async fn consume(bootstrap: &str) -> Result<BTreeMap<i32, usize>, Box<dyn Error>> {
    let mut config = ConsumerConfig::new([bootstrap]);
    config.group_id = Some(GROUP.to_owned());
    config.auto_offset_reset = OffsetReset::Earliest;
    config.enable_auto_commit = false;
    let mut consumer = Consumer::new(config).await?;
    consumer.subscribe_with_listener([TOPIC], PrintAssignments)?;
    let mut consumed = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumed.values().sum::<usize>() < RECORDS && Instant::now() < deadline {
        for record in consumer.poll(Duration::from_millis(200)).await? {
            *consumed.entry(record.partition).or_insert(0) += 1;
        }
    }
    consumer.commit_sync().await?;
    consumer.close().await?;
    println!("consumed per partition: {consumed:?}");
    Ok(consumed)
}

/// Prints the partitions the group gives and takes.
struct PrintAssignments;

impl RebalanceListener for PrintAssignments {
    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        println!("assigned: {}", names(assigned));
    }

    fn on_partitions_revoked(
        &mut self,
        revoked: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, strom_consumer::OffsetAndMetadata> {
        println!("revoked: {}", names(revoked));
        BTreeMap::new()
    }
}

/// `topic-0, topic-1, ...`.
fn names(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    names.join(", ")
}
