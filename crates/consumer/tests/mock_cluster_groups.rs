//! A group shared by strom-consumer and a librdkafka consumer on
//! librdkafka's mock cluster (both use `range`, so the wire encodings of
//! subscriptions and assignments must agree whichever member leads).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use strom_consumer::{ApiVersionCaps, AssignmentStrategy, Consumer, ConsumerConfig, OffsetReset};

const PARTITIONS: i32 = 6;

fn produce(bootstrap: &str, topic: &str, count: usize) -> BTreeSet<String> {
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let mut produced = BTreeSet::new();
    for index in 0..count {
        let partition = (index % PARTITIONS as usize) as i32;
        let value = format!("{topic}-{index}");
        while producer
            .send(
                BaseRecord::<(), _>::to(topic)
                    .partition(partition)
                    .payload(&value),
            )
            .is_err()
        {
            producer.poll(Duration::from_millis(10));
        }
        produced.insert(value);
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    produced
}

fn config(bootstrap: &str, group: &str, strategy: AssignmentStrategy) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(bootstrap.split(',').map(str::to_owned));
    config.group_id = Some(group.to_owned());
    config.auto_offset_reset = OffsetReset::Earliest;
    config.fetch_max_wait = Duration::from_millis(100);
    config.session_timeout = Duration::from_millis(6_000);
    config.heartbeat_interval = Duration::from_millis(300);
    config.assignment_strategies = vec![strategy];
    config.max_poll_records = 5;
    // The mock advertises flexible group versions it cannot parse.
    config.api_version_caps = ApiVersionCaps::librdkafka_mock();
    config
}

fn values(records: Vec<strom_consumer::ConsumerRecord>) -> Vec<String> {
    records
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
        .collect()
}

/// librdkafka's mock coordinator moves a group to "up" as soon as the
/// leader's SyncGroup carries every member's assignment and then answers a
/// follower's later SyncGroup with INVALID_REQUEST (a real coordinator hands
/// the follower its stored assignment). When strom-consumer leads and syncs
/// before librdkafka does, librdkafka rejoins and the group rebalances again,
/// sometimes for tens of seconds under load, hence the generous deadline.
/// Mixed groups with strom-consumer leading are tested against Strom's broker
/// in tests/interop.
#[tokio::test]
async fn a_group_shared_with_a_librdkafka_consumer() {
    let cluster = MockCluster::new(3).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic("mixed", PARTITIONS, 3).unwrap();
    let produced = produce(&bootstrap, "mixed", 600);

    let stop = Arc::new(AtomicBool::new(false));
    let librdkafka_seen = Arc::new(Mutex::new(Vec::new()));
    let librdkafka_assignment = Arc::new(Mutex::new(0usize));
    let thread = {
        let (stop, seen, assignment) = (
            Arc::clone(&stop),
            Arc::clone(&librdkafka_seen),
            Arc::clone(&librdkafka_assignment),
        );
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            let consumer: BaseConsumer = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "mixed-group")
                .set("partition.assignment.strategy", "range")
                .set("auto.offset.reset", "earliest")
                .set("session.timeout.ms", "6000")
                .set("heartbeat.interval.ms", "300")
                .create()
                .expect("librdkafka consumer");
            consumer.subscribe(&["mixed"]).unwrap();
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
                    let value = String::from_utf8(message.payload().unwrap().to_vec()).unwrap();
                    seen.lock().unwrap().push(value);
                }
                *assignment.lock().unwrap() =
                    consumer.assignment().map(|list| list.count()).unwrap_or(0);
            }
            consumer.unsubscribe();
        })
    };

    let mut strom = Consumer::new(config(&bootstrap, "mixed-group", AssignmentStrategy::Range))
        .await
        .unwrap();
    strom.subscribe(["mixed"]).unwrap();
    let mut strom_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        strom_seen.extend(values(
            strom.poll(Duration::from_millis(100)).await.unwrap(),
        ));
        let mut union: BTreeSet<String> = strom_seen.iter().cloned().collect();
        union.extend(librdkafka_seen.lock().unwrap().iter().cloned());
        let shared = strom.assignment().len() == 3 && *librdkafka_assignment.lock().unwrap() == 3;
        if (union == produced && shared) || Instant::now() >= deadline {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    let librdkafka_seen = librdkafka_seen.lock().unwrap().clone();
    let mut union: BTreeSet<String> = strom_seen.iter().cloned().collect();
    union.extend(librdkafka_seen.iter().cloned());
    assert_eq!(
        union.len(),
        produced.len(),
        "records seen: strom {} (assigned {:?}), librdkafka {} (assigned {})",
        strom_seen.len(),
        strom.assignment(),
        librdkafka_seen.len(),
        *librdkafka_assignment.lock().unwrap()
    );
    assert_eq!(union, produced);
    assert_eq!(
        strom.assignment().len(),
        3,
        "range splits six partitions three and three"
    );
    assert!(!strom_seen.is_empty() && !librdkafka_seen.is_empty());
    strom.close().await.unwrap();
}
