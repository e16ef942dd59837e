//! A whole broker on an injected clock and random source
//! (`strom_broker::start_with`): a `ManualClock` decides when segments roll
//! and when retention deletes them, with no sleeping, and a seed decides
//! the controller's random choices.

use std::sync::Arc;

use strom_broker::{Environment, RunningBroker};
use strom_clock::{Clock, ManualClock, Random, SeededRandom, SystemClock};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::*;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_protocol::records::{Compression, RecordBatchBuilder};
use strom_storage::TopicPartition;

use crate::common;

use common::{config, create_topic_answer, wait_until, Client};

const TOPIC: &str = "timed";
const HOUR_MS: i64 = 3_600_000;

async fn create_topic(client: &mut Client, topic: &str, configs: &[(&str, &str)]) {
    let response = create_topic_answer(client, topic, 1, configs).await;
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
}

/// Produces one record stamped `timestamp_ms`; returns the error code.
async fn produce_at(client: &mut Client, timestamp_ms: i64) -> i16 {
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder
        .append(timestamp_ms, None, Some(b"value".as_slice()), &[])
        .expect("append");
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(TOPIC.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(builder.build().expect("build")))])]);
    let Response::Produce(response) = client.send(Request::Produce(request), 9).await else {
        panic!("not a Produce response");
    };
    response.responses[0].partition_responses[0].error_code
}

/// (segments, log start offset) of the topic's partition.
fn log_shape(broker: &RunningBroker) -> (usize, i64) {
    let log = broker
        .replicas()
        .logs()
        .get(&TopicPartition::new(TOPIC, 0))
        .expect("the partition log");
    let log = log.read().expect("log lock");
    (log.segment_count(), log.log_start_offset())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clock_rolls_and_deletes_segments_without_sleeping() {
    let dir = tempfile::tempdir().unwrap();
    // Ten years ahead of the host: a broker that read the system clock
    // would see these records as written in the future, never old enough
    // to roll away from or delete.
    let start_ms = SystemClock.wall_ms() + 10 * 365 * 24 * HOUR_MS;
    let clock = Arc::new(ManualClock::new(start_ms));
    let environment = Environment::new(clock.clone(), Arc::new(SeededRandom::new(1)));
    let settings = [("log.retention.check.interval.ms", "100")];
    let broker = strom_broker::start_with(config(dir.path(), &settings), environment)
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "clock-test").await;
    let topic_configs = [("segment.ms", "60000"), ("retention.ms", "3600000")];
    create_topic(&mut client, TOPIC, &topic_configs).await;

    assert_eq!(produce_at(&mut client, clock.wall_ms()).await, 0);
    clock.advance(30_000);
    assert_eq!(produce_at(&mut client, clock.wall_ms()).await, 0);
    assert_eq!(log_shape(&broker), (1, 0), "younger than segment.ms");
    clock.advance(31_000);
    assert_eq!(produce_at(&mut client, clock.wall_ms()).await, 0);
    assert_eq!(log_shape(&broker), (2, 0), "rolled at segment.ms");

    // The wall clock alone jumps two hours: the first segment is past
    // retention.ms; broker sessions, measured on the monotonic reading,
    // are not disturbed.
    clock.jump_wall_ms(2 * HOUR_MS);
    wait_until("retention deletes the first segment", || async {
        log_shape(&broker).1 >= 2
    })
    .await;
    assert_eq!(produce_at(&mut client, clock.wall_ms()).await, 0);
    broker.shutdown().await;
}

/// The ids of the offsets topic and of one created topic on a broker
/// seeded with `seed`.
async fn topic_ids(seed: u64) -> Vec<uuid::Uuid> {
    let dir = tempfile::tempdir().unwrap();
    let random: Arc<dyn Random> = Arc::new(SeededRandom::new(seed));
    let environment = Environment::new(Arc::new(SystemClock), random);
    let broker = strom_broker::start_with(config(dir.path(), &[]), environment)
        .await
        .unwrap();
    let mut client = Client::connect(&broker, "seed-test").await;
    create_topic(&mut client, TOPIC, &[]).await;
    let image = broker.controller().image();
    let ids = ["__consumer_offsets", TOPIC]
        .iter()
        .map(|name| image.topic_by_name(name).expect("topic").id)
        .collect();
    broker.shutdown().await;
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_a_broker_the_same_topic_ids() {
    let first = topic_ids(7).await;
    assert_eq!(first, topic_ids(7).await);
    let other = topic_ids(8).await;
    assert!(
        first.iter().all(|id| !other.contains(id)),
        "{first:?} {other:?}"
    );
}
