//! The admin client of `strom-client`: create a topic, describe it and its
//! configuration, change a setting, list the consumer groups, and delete
//! the topic again.
//!
//! Start a broker (`cargo run -p strom-tools -- broker`), then:
//!
//! ```sh
//! cargo run -p strom-examples --example admin -- 127.0.0.1:9092
//! ```
//!
//! The argument (or `STROM_BOOTSTRAP`) is the bootstrap address; the
//! default is `127.0.0.1:9092`. The example works on its own topic,
//! `example-admin`, and leaves the broker as it found it.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::{Duration, Instant};

use strom_client::admin::NewTopic;
use strom_client::admin_groups::{ConfigChange, ListedGroup, RESOURCE_TYPE_TOPIC};
use strom_client::{AdminClient, ClientConfig, ClientError, Cluster};
use strom_protocol::ErrorCode;

/// The topic the example creates and deletes.
pub const TOPIC: &str = "example-admin";
/// The partitions it is created with.
pub const PARTITIONS: i32 = 3;

/// What the admin client reported.
#[derive(Debug, Default)]
pub struct AdminReport {
    /// Partition index to leader broker id, as described after creation.
    pub leaders: BTreeMap<i32, Option<i32>>,
    /// `retention.ms` as created.
    pub retention_ms_created: Option<String>,
    /// `retention.ms` after the change.
    pub retention_ms_altered: Option<String>,
    /// The consumer groups on the cluster.
    pub groups: Vec<ListedGroup>,
    /// Whether the topic is gone from the metadata after the deletion.
    pub deleted: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let report = run(&bootstrap_address()).await?;
    println!("{report:#?}");
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

/// Runs every admin step against the cluster at `bootstrap`.
pub async fn run(bootstrap: &str) -> Result<AdminReport, Box<dyn Error>> {
    let config = ClientConfig::new([bootstrap]).with_client_id("admin-example");
    let cluster = Cluster::connect(config).await?;
    // The time the broker may take to create or delete a topic.
    let admin = AdminClient::new(cluster, Duration::from_secs(10));

    create_topic(&admin).await?;
    let leaders = describe_topic(&admin).await?;
    let retention_ms_created = retention_ms(&admin).await?;
    let change = ConfigChange::Set("retention.ms".to_owned(), "7200000".to_owned());
    admin
        .incremental_alter_configs(RESOURCE_TYPE_TOPIC, TOPIC, &[change], false)
        .await?;
    let retention_ms_altered = retention_ms(&admin).await?;
    println!("retention.ms: {retention_ms_created:?} -> {retention_ms_altered:?}");
    let groups = list_groups(&admin).await?;
    let deleted = delete_topic(&admin).await?;
    admin.cluster().close();
    Ok(AdminReport {
        leaders,
        retention_ms_created,
        retention_ms_altered,
        groups,
        deleted,
    })
}

/// Creates the topic with a topic-level setting. Results are per topic: an
/// error for one topic does not fail the request.
async fn create_topic(admin: &AdminClient) -> Result<(), Box<dyn Error>> {
    let topic = NewTopic::new(TOPIC, PARTITIONS, 1).with_config("retention.ms", "3600000");
    let mut results = admin.create_topics(&[topic], false).await?;
    match results.remove(TOPIC) {
        Some(Ok(())) => println!("created {TOPIC} with {PARTITIONS} partitions"),
        Some(Err(error)) => return Err(error.into()),
        None => return Err(format!("the broker did not answer for {TOPIC}").into()),
    }
    Ok(())
}

/// The topic's partitions and their leaders, from fresh metadata.
async fn describe_topic(admin: &AdminClient) -> Result<BTreeMap<i32, Option<i32>>, Box<dyn Error>> {
    admin.cluster().request_metadata_refresh();
    let topic = admin.cluster().topic(TOPIC).await?;
    for partition in &topic.partitions {
        println!(
            "{TOPIC}-{}: leader {:?}, replicas {:?}, in sync {:?}",
            partition.partition, partition.leader, partition.replicas, partition.isr
        );
    }
    Ok(topic
        .partitions
        .iter()
        .map(|partition| (partition.partition, partition.leader))
        .collect())
}

async fn retention_ms(admin: &AdminClient) -> Result<Option<String>, Box<dyn Error>> {
    let configs = admin.describe_configs(RESOURCE_TYPE_TOPIC, TOPIC).await?;
    Ok(configs.get("retention.ms").cloned().flatten())
}

async fn list_groups(admin: &AdminClient) -> Result<Vec<ListedGroup>, Box<dyn Error>> {
    let groups = admin.list_groups().await?;
    for group in &groups {
        println!(
            "group {} ({}, {})",
            group.group_id, group.protocol_type, group.state
        );
    }
    Ok(groups)
}

/// Deletes the topic and waits (up to five seconds) until the metadata no
/// longer has it.
async fn delete_topic(admin: &AdminClient) -> Result<bool, Box<dyn Error>> {
    let mut results = admin.delete_topics(&[TOPIC]).await?;
    if let Some(Err(error)) = results.remove(TOPIC) {
        return Err(error.into());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        admin.cluster().request_metadata_refresh();
        match admin.cluster().topic(TOPIC).await {
            Err(ClientError::Broker {
                code: ErrorCode::UnknownTopicOrPartition,
            }) => break,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(_) => return Ok(false),
            Err(error) => return Err(error.into()),
        }
    }
    println!("deleted {TOPIC}");
    Ok(true)
}
