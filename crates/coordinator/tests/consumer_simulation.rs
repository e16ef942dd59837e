//! Consumer-protocol groups under random joins, heartbeats, leaves, topic
//! growth and clock jumps (proptest picks the schedule; a failure prints
//! it): no partition is ever held by two members at the coordinator, and
//! once the members keep heartbeating the group settles with every
//! partition owned exactly once.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use strom_coordinator::{
    Assignment, ConsumerGroupConfig, ConsumerGroupState, ConsumerHeartbeat, CoordinatorCore,
    GroupError, TopicMetadata,
};
use uuid::Uuid;

use crate::common::GROUP;
use crate::consumer_groups::consumer_core;

const TOPIC: Uuid = Uuid::from_u128(0x51);
const MEMBERS: usize = 4;

#[derive(Debug, Clone)]
enum Step {
    Heartbeat(usize),
    Leave(usize),
    Grow,
    Advance(i64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..MEMBERS).prop_map(Step::Heartbeat),
        1 => (0..MEMBERS).prop_map(Step::Leave),
        1 => Just(Step::Grow),
        1 => (1_000i64..50_000).prop_map(Step::Advance),
    ]
}

#[derive(Debug, Default, Clone)]
struct Client {
    epoch: i32,
    owned: Assignment,
}

struct World {
    core: CoordinatorCore,
    clients: Vec<Client>,
    partitions: i32,
    now_ms: i64,
}

impl World {
    fn catalog(&self) -> BTreeMap<String, TopicMetadata> {
        [(
            "events".to_string(),
            TopicMetadata {
                topic_id: TOPIC,
                partitions: self.partitions,
            },
        )]
        .into()
    }

    fn heartbeat(&mut self, index: usize) {
        let client = self.clients[index].clone();
        let member_id = format!("member-{index}");
        let request = ConsumerHeartbeat {
            member_id: member_id.clone(),
            member_epoch: client.epoch,
            member_id_required: true,
            rebalance_timeout_ms: if client.epoch == 0 { 30_000 } else { -1 },
            subscribed_topic_names: (client.epoch == 0).then(|| vec!["events".to_string()]),
            owned_partitions: Some(client.owned.clone()),
            ..ConsumerHeartbeat::default()
        };
        let catalog = self.catalog();
        match self
            .core
            .consumer_heartbeat(GROUP, &request, &catalog, self.now_ms)
        {
            Ok(response) => {
                let client = &mut self.clients[index];
                client.epoch = response.member_epoch;
                if let Some(assignment) = response.assignment {
                    client.owned = assignment;
                }
            }
            // Fenced or forgotten (an emptied group without offsets is
            // removed at the retention check): drop everything and rejoin,
            // as librdkafka does.
            Err(
                GroupError::UnknownMemberId
                | GroupError::FencedMemberEpoch { .. }
                | GroupError::GroupIdNotFound,
            ) => {
                self.clients[index] = Client::default();
            }
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
    }

    fn leave(&mut self, index: usize) {
        if self.clients[index].epoch <= 0 {
            return;
        }
        let request = ConsumerHeartbeat {
            member_id: format!("member-{index}"),
            member_epoch: -1,
            member_id_required: true,
            ..ConsumerHeartbeat::default()
        };
        let catalog = self.catalog();
        let _ = self
            .core
            .consumer_heartbeat(GROUP, &request, &catalog, self.now_ms);
        self.clients[index] = Client::default();
    }

    /// No partition is held (owned or being revoked) by two members.
    fn check_exclusive(&self) {
        let Some(group) = self.core.consumer_group(GROUP) else {
            return;
        };
        let mut seen = BTreeSet::new();
        for member in group.members().values() {
            let held = member.assigned.iter().chain(member.revoking.iter());
            for (topic, partitions) in held {
                for partition in partitions {
                    assert!(
                        seen.insert((*topic, *partition)),
                        "{topic}-{partition} held twice"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn partitions_are_never_held_twice_and_the_group_settles(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        let mut world = World {
            core: consumer_core(ConsumerGroupConfig::default()),
            clients: vec![Client::default(); MEMBERS],
            partitions: 5,
            now_ms: 0,
        };
        for step in steps {
            match step {
                Step::Heartbeat(index) => world.heartbeat(index),
                Step::Leave(index) => world.leave(index),
                Step::Grow => world.partitions += 1,
                Step::Advance(ms) => {
                    world.now_ms += ms;
                    world.core.tick(world.now_ms);
                }
            }
            world.check_exclusive();
        }
        // Everyone heartbeats a few rounds without time passing.
        for _ in 0..6 {
            for index in 0..MEMBERS {
                world.heartbeat(index);
                world.check_exclusive();
            }
        }
        let group = world.core.consumer_group(GROUP).expect("the group exists");
        prop_assert_eq!(group.members().len(), MEMBERS);
        prop_assert_eq!(group.state(), ConsumerGroupState::Stable);
        let mut owned = BTreeSet::new();
        for client in &world.clients {
            for partition in client.owned.get(&TOPIC).into_iter().flatten() {
                prop_assert!(owned.insert(*partition), "partition {} owned twice", partition);
            }
        }
        prop_assert_eq!(owned, (0..world.partitions).collect::<BTreeSet<i32>>());
    }
}
