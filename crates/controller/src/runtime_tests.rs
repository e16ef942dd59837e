use std::path::Path;
use std::time::Duration;

use uuid::Uuid;

use super::*;
use crate::controller::{NewTopic, TopicReference};
use crate::image::Endpoint;
use crate::log::SNAPSHOT_FILE_NAME;
use strom_clock::{ManualClock, SeededRandom};

async fn start(
    directory: &Path,
    clock: Arc<ManualClock>,
    snapshot_interval_records: u64,
) -> LocalController {
    let mut config = LocalControllerConfig::new(directory);
    config.snapshot_interval_records = snapshot_interval_records;
    config.tick_interval_ms = 10;
    LocalController::start(config, clock, Arc::new(SeededRandom::new(1)))
        .await
        .unwrap()
}

async fn bring_up_broker(controller: &LocalController, incarnation: u128) {
    let registration = controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(incarnation),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
        })
        .await
        .unwrap()
        .unwrap();
    let reply = controller
        .broker_heartbeat(BrokerHeartbeatRequest {
            broker_id: 1,
            broker_epoch: registration.broker_epoch,
            want_fence: false,
            want_shutdown: false,
        })
        .await
        .unwrap()
        .unwrap();
    assert!(!reply.is_fenced);
}

fn new_topic(name: &str, partitions: i32) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![NewTopic {
            name: name.into(),
            partitions: Some(partitions),
            replication_factor: Some(1),
            ..NewTopic::default()
        }],
        validate_only: false,
    }
}

#[tokio::test]
async fn commands_publish_new_images() {
    let directory = tempfile::tempdir().unwrap();
    let controller = start(directory.path(), Arc::new(ManualClock::new(0)), 1_000).await;
    let mut images = controller.subscribe();
    bring_up_broker(&controller, 1).await;
    assert!(images.has_changed().unwrap());
    images.mark_unchanged();
    let outcomes = controller
        .create_topics(new_topic("orders", 3))
        .await
        .unwrap();
    assert!(outcomes[0].result.is_ok());
    images.changed().await.unwrap();
    let image = images.borrow_and_update().clone();
    assert_eq!(image.topic_by_name("orders").unwrap().partitions.len(), 3);
    assert_eq!(controller.image().last_offset(), image.last_offset());
}

#[tokio::test]
async fn validate_only_and_failed_items_publish_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let controller = start(directory.path(), Arc::new(ManualClock::new(0)), 1_000).await;
    bring_up_broker(&controller, 1).await;
    let mut images = controller.subscribe();
    images.mark_unchanged();
    let mut request = new_topic("dry", 1);
    request.validate_only = true;
    assert!(controller.create_topics(request).await.unwrap()[0]
        .result
        .is_ok());
    let outcomes = controller
        .create_topics(new_topic("bad name", 1))
        .await
        .unwrap();
    assert!(outcomes[0].result.is_err());
    assert!(!images.has_changed().unwrap());
    assert!(controller.image().topic_by_name("dry").is_none());
}

#[tokio::test]
async fn metadata_survives_restart() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let topic_id = {
        let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
        bring_up_broker(&controller, 1).await;
        let outcomes = controller
            .create_topics(new_topic("orders", 2))
            .await
            .unwrap();
        controller
            .create_topics(new_topic("gone", 1))
            .await
            .unwrap();
        controller
            .delete_topics(vec![TopicReference::Name("gone".into())])
            .await
            .unwrap();
        outcomes[0].result.as_ref().unwrap().topic_id
    };
    let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
    let image = controller.image();
    assert_eq!(image.topic_by_name("orders").unwrap().id, topic_id);
    assert!(image.topic_by_name("gone").is_none());
    // The restarted broker takes its partitions back.
    bring_up_broker(&controller, 2).await;
    let image = controller.image();
    let topic = image.topic_by_name("orders").unwrap();
    assert!(topic
        .partitions
        .iter()
        .all(|partition| partition.leader == Some(1)));
}

#[tokio::test]
async fn snapshots_are_taken_and_used() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let before = {
        let controller = start(directory.path(), Arc::clone(&clock), 3).await;
        bring_up_broker(&controller, 1).await;
        for index in 0..4 {
            controller
                .create_topics(new_topic(&format!("t{index}"), 1))
                .await
                .unwrap();
        }
        controller.image()
    };
    assert!(directory.path().join(SNAPSHOT_FILE_NAME).exists());
    let controller = start(directory.path(), clock, 3).await;
    assert!(controller.recovery_report().snapshot_offset.is_some());
    assert_eq!(*controller.image(), *before);
}

#[tokio::test]
async fn expired_session_is_fenced_by_tick() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
    bring_up_broker(&controller, 1).await;
    controller.create_topics(new_topic("t", 1)).await.unwrap();
    clock.advance(8_000);
    assert!(controller.tick().await.unwrap().is_empty());
    clock.advance(2_000);
    assert_eq!(controller.tick().await.unwrap(), vec![1]);
    let image = controller.image();
    assert!(image.broker(1).unwrap().fenced);
    assert_eq!(image.topic_by_name("t").unwrap().partitions[0].leader, None);
}

#[tokio::test]
async fn a_wall_clock_jump_does_not_expire_sessions() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
    bring_up_broker(&controller, 1).await;
    // A day forward, then a day back: sessions are measured on the
    // monotonic reading, which did not move.
    clock.jump_wall_ms(86_400_000);
    assert!(controller.tick().await.unwrap().is_empty());
    clock.jump_wall_ms(-2 * 86_400_000);
    assert!(controller.tick().await.unwrap().is_empty());
    assert!(!controller.image().broker(1).unwrap().fenced);
    clock.advance(10_000);
    assert_eq!(controller.tick().await.unwrap(), vec![1]);
}

#[tokio::test]
async fn liveness_task_fences_without_being_asked() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
    bring_up_broker(&controller, 1).await;
    let mut images = controller.subscribe();
    images.mark_unchanged();
    clock.advance(60_000);
    let fenced = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            images.changed().await.unwrap();
            if images
                .borrow_and_update()
                .broker(1)
                .is_some_and(|broker| broker.fenced)
            {
                return;
            }
        }
    })
    .await;
    assert!(fenced.is_ok(), "the liveness task did not fence the broker");
}

#[tokio::test]
async fn works_through_the_trait_object() {
    let directory = tempfile::tempdir().unwrap();
    let controller = start(directory.path(), Arc::new(ManualClock::new(0)), 1_000).await;
    bring_up_broker(&controller, 1).await;
    let client: Arc<dyn ControllerClient> = Arc::new(controller);
    let outcomes = client.create_topics(new_topic("x", 1)).await.unwrap();
    assert!(outcomes[0].result.is_ok());
    assert!(client.image().topic_by_name("x").is_some());
}

#[tokio::test]
async fn controlled_shutdown_then_restart_restores_leadership() {
    let directory = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    {
        let controller = start(directory.path(), Arc::clone(&clock), 1_000).await;
        bring_up_broker(&controller, 1).await;
        controller.create_topics(new_topic("t", 2)).await.unwrap();
        let epoch = controller.image().broker(1).unwrap().epoch;
        let reply = controller
            .broker_heartbeat(BrokerHeartbeatRequest {
                broker_id: 1,
                broker_epoch: epoch,
                want_fence: false,
                want_shutdown: true,
            })
            .await
            .unwrap()
            .unwrap();
        assert!(reply.should_shut_down);
        let image = controller.image();
        let topic = image.topic_by_name("t").unwrap();
        assert!(topic
            .partitions
            .iter()
            .all(|partition| partition.leader.is_none()));
        assert!(topic
            .partitions
            .iter()
            .all(|partition| partition.isr == vec![1]));
    }
    let controller = start(directory.path(), clock, 1_000).await;
    bring_up_broker(&controller, 2).await;
    let image = controller.image();
    for partition in &image.topic_by_name("t").unwrap().partitions {
        assert_eq!(partition.leader, Some(1));
        assert_eq!(partition.leader_epoch, 2);
    }
}
