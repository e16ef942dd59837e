//! Tests of the controller core, driven through a small harness that
//! applies each command's records the way the runtime does.

use uuid::Uuid;

use super::*;
use crate::assignment::RequestedAssignment;
use crate::config::ConfigValueError;
use crate::error::{AssignmentError, ConfigProblem, ControllerError, TopicNameProblem};
use crate::image::{ConfigResource, Endpoint, PartitionImage};
use strom_clock::SeededRandom;

mod broker_configs_tests;
mod brokers_tests;
mod configs_tests;
mod partitions_tests;
mod reassignments_tests;
mod simulation_tests;
mod topics_tests;

struct Harness {
    controller: Controller,
    image: MetadataImage,
    now_ms: u64,
}

impl Harness {
    fn new() -> Self {
        Self::with_config(ControllerConfig::default())
    }

    fn with_config(config: ControllerConfig) -> Self {
        Self {
            controller: Controller::new(config, std::sync::Arc::new(SeededRandom::new(7))),
            image: MetadataImage::empty(),
            now_ms: 1_000,
        }
    }

    /// A harness with unfenced brokers `1..=count`.
    fn with_brokers(count: i32) -> Self {
        let mut harness = Self::new();
        for broker_id in 1..=count {
            harness.start_broker(broker_id);
        }
        harness
    }

    fn commit<T>(&mut self, result: ControllerResult<T>) -> T {
        let base = self.image.next_offset();
        self.image = self
            .image
            .apply_all(
                result
                    .records
                    .iter()
                    .enumerate()
                    .map(|(index, record)| (base + index as u64, record)),
            )
            .unwrap();
        result.response
    }

    fn register(
        &mut self,
        broker_id: BrokerId,
        incarnation: u128,
    ) -> Result<BrokerRegistrationReply, ControllerError> {
        self.register_in_rack(broker_id, incarnation, None)
    }

    fn register_in_rack(
        &mut self,
        broker_id: BrokerId,
        incarnation: u128,
        rack: Option<&str>,
    ) -> Result<BrokerRegistrationReply, ControllerError> {
        let request = BrokerRegistrationRequest {
            broker_id,
            incarnation_id: Uuid::from_u128(incarnation),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9000 + broker_id as u16,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: rack.map(str::to_string),
        };
        let result = self
            .controller
            .register_broker(&self.image, &request, self.now_ms)
            .unwrap();
        self.commit(result)
    }

    fn heartbeat(
        &mut self,
        broker_id: BrokerId,
        want_fence: bool,
        want_shutdown: bool,
    ) -> Result<BrokerHeartbeatReply, ControllerError> {
        let broker_epoch = self
            .image
            .broker(broker_id)
            .map_or(-1, |broker| broker.epoch);
        let request = BrokerHeartbeatRequest {
            broker_id,
            broker_epoch,
            want_fence,
            want_shutdown,
        };
        let result = self
            .controller
            .broker_heartbeat(&self.image, &request, self.now_ms)
            .unwrap();
        self.commit(result)
    }

    fn start_broker(&mut self, broker_id: BrokerId) {
        self.register(broker_id, broker_id as u128 * 1000 + self.now_ms as u128)
            .unwrap();
        let reply = self.heartbeat(broker_id, false, false).unwrap();
        assert!(!reply.is_fenced);
    }

    fn tick(&mut self) -> Vec<BrokerId> {
        let result = self.controller.tick(&self.image, self.now_ms).unwrap();
        self.commit(result)
    }

    fn create(&mut self, topics: Vec<NewTopic>) -> Vec<TopicOutcome<CreatedTopic>> {
        let request = CreateTopicsRequest {
            topics,
            validate_only: false,
        };
        let result = self
            .controller
            .create_topics(&self.image, &request)
            .unwrap();
        self.commit(result)
    }

    fn create_one(&mut self, topic: NewTopic) -> Result<CreatedTopic, ControllerError> {
        self.create(vec![topic]).remove(0).result
    }

    fn partition(&self, topic: &str, index: i32) -> PartitionImage {
        self.image
            .topic_by_name(topic)
            .unwrap()
            .partition(index)
            .unwrap()
            .clone()
    }
}

fn topic(name: &str, partitions: i32, replication_factor: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        partitions: Some(partitions),
        replication_factor: Some(replication_factor),
        ..NewTopic::default()
    }
}
