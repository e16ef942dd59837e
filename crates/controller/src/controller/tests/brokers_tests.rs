use super::*;

#[test]
fn registration_starts_fenced_and_heartbeat_unfences() {
    let mut harness = Harness::new();
    let reply = harness.register(1, 11).unwrap();
    let broker = harness.image.broker(1).unwrap();
    assert!(broker.fenced);
    assert_eq!(broker.epoch, reply.broker_epoch);
    // The epoch is the offset of the registration record.
    assert_eq!(harness.image.last_offset(), Some(reply.broker_epoch as u64));
    let heartbeat = harness.heartbeat(1, false, false).unwrap();
    assert_eq!(
        heartbeat,
        BrokerHeartbeatReply {
            is_fenced: false,
            should_shut_down: false
        }
    );
    assert!(!harness.image.broker(1).unwrap().fenced);
}

#[test]
fn repeated_registration_of_one_incarnation_is_idempotent() {
    let mut harness = Harness::new();
    let first = harness.register(1, 11).unwrap();
    let offset = harness.image.last_offset();
    assert_eq!(harness.register(1, 11).unwrap(), first);
    assert_eq!(harness.image.last_offset(), offset);
}

#[test]
fn live_broker_cannot_be_registered_twice() {
    let mut harness = Harness::with_brokers(1);
    assert_eq!(
        harness.register(1, 999),
        Err(ControllerError::DuplicateBrokerRegistration { broker_id: 1 })
    );
}

#[test]
fn heartbeat_errors() {
    let mut harness = Harness::with_brokers(1);
    assert_eq!(
        harness.heartbeat(5, false, false),
        Err(ControllerError::BrokerNotRegistered { broker_id: 5 })
    );
    let epoch = harness.image.broker(1).unwrap().epoch;
    let request = BrokerHeartbeatRequest {
        broker_id: 1,
        broker_epoch: epoch - 1,
        want_fence: false,
        want_shutdown: false,
    };
    let result = harness
        .controller
        .broker_heartbeat(&harness.image, &request, harness.now_ms)
        .unwrap();
    assert_eq!(
        result.response,
        Err(ControllerError::StaleBrokerEpoch {
            broker_id: 1,
            current_epoch: epoch,
            request_epoch: epoch - 1
        })
    );
    assert!(result.records.is_empty());
}

#[test]
fn expired_session_fences_and_moves_leadership() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("t", 2, 2)).unwrap();
    let led_by_one: Vec<i32> = (0..2)
        .filter(|index| harness.partition("t", *index).leader == Some(1))
        .collect();
    assert_eq!(led_by_one.len(), 1);
    harness.now_ms += 5_000;
    harness.heartbeat(2, false, false).unwrap();
    assert!(harness.tick().is_empty());
    harness.now_ms += 5_000;
    harness.heartbeat(2, false, false).unwrap();
    assert_eq!(harness.tick(), vec![1]);
    assert!(harness.image.broker(1).unwrap().fenced);
    for index in 0..2 {
        let partition = harness.partition("t", index);
        assert_eq!(partition.leader, Some(2));
        assert_eq!(partition.isr, vec![2]);
    }
    let moved = harness.partition("t", led_by_one[0]);
    assert_eq!(moved.leader_epoch, 1);
}

#[test]
fn last_isr_member_is_kept_and_leads_again_on_return() {
    let mut harness = Harness::with_brokers(1);
    harness.create_one(topic("solo", 1, 1)).unwrap();
    harness.now_ms += 10_000;
    assert_eq!(harness.tick(), vec![1]);
    let partition = harness.partition("solo", 0);
    assert_eq!(partition.leader, None);
    assert_eq!(partition.isr, vec![1]);
    assert_eq!(partition.leader_epoch, 1);
    harness.heartbeat(1, false, false).unwrap();
    let partition = harness.partition("solo", 0);
    assert_eq!(partition.leader, Some(1));
    assert_eq!(partition.leader_epoch, 2);
}

#[test]
fn restart_with_new_incarnation_regains_leadership() {
    let mut harness = Harness::with_brokers(1);
    harness.create_one(topic("t", 2, 1)).unwrap();
    // A restarted controller has no sessions: the new incarnation may
    // register even though the image shows the old one unfenced.
    harness.controller = Controller::new(
        ControllerConfig::default(),
        std::sync::Arc::new(SeededRandom::new(8)),
    );
    let old_epoch = harness.image.broker(1).unwrap().epoch;
    let reply = harness.register(1, 4242).unwrap();
    assert!(reply.broker_epoch > old_epoch);
    assert_eq!(harness.partition("t", 0).leader, None);
    harness.heartbeat(1, false, false).unwrap();
    for index in 0..2 {
        assert_eq!(harness.partition("t", index).leader, Some(1));
    }
}

#[test]
fn registered_broker_gets_a_grace_period_after_controller_start() {
    let mut harness = Harness::with_brokers(1);
    harness.controller = Controller::new(
        ControllerConfig::default(),
        std::sync::Arc::new(SeededRandom::new(8)),
    );
    harness.now_ms += 100_000;
    assert!(harness.tick().is_empty());
    harness.now_ms += 9_000;
    assert_eq!(harness.tick(), vec![1]);
}

fn pinned(name: &str, broker_ids: &[BrokerId], configs: Vec<ConfigEntry>) -> NewTopic {
    NewTopic {
        name: name.into(),
        assignments: vec![RequestedAssignment {
            partition_index: 0,
            broker_ids: broker_ids.to_vec(),
        }],
        configs,
        ..NewTopic::default()
    }
}

#[test]
fn unclean_election_follows_the_topic_config() {
    let mut harness = Harness::with_brokers(2);
    harness
        .create_one(pinned("clean", &[1, 2], vec![]))
        .unwrap();
    let unclean_config = vec![ConfigEntry::new("unclean.leader.election.enable", "true")];
    harness
        .create_one(pinned("unclean", &[1, 2], unclean_config))
        .unwrap();
    // Broker 2 falls out of both ISRs, then broker 1, the only member left,
    // loses its session.
    for name in ["clean", "unclean"] {
        let topic = harness.image.topic_by_name(name).unwrap().clone();
        let record = partition_change(&topic, 0, Some(vec![1]), None);
        harness.commit(ControllerResult {
            records: vec![record],
            response: (),
        });
    }
    harness.now_ms += 10_000;
    harness.heartbeat(2, false, false).unwrap();
    assert_eq!(harness.tick(), vec![1]);
    let clean = harness.partition("clean", 0);
    assert_eq!((clean.leader, clean.isr), (None, vec![1]));
    let unclean = harness.partition("unclean", 0);
    assert_eq!((unclean.leader, unclean.isr), (Some(2), vec![2]));
}

#[test]
fn cluster_default_enables_unclean_election() {
    let mut harness = Harness::with_config(ControllerConfig {
        unclean_leader_election_enable: true,
        ..ControllerConfig::default()
    });
    harness.start_broker(1);
    harness.start_broker(2);
    harness.create_one(pinned("t", &[1, 2], vec![])).unwrap();
    let topic = harness.image.topic_by_name("t").unwrap().clone();
    harness.commit(ControllerResult {
        records: vec![partition_change(&topic, 0, Some(vec![1]), None)],
        response: (),
    });
    harness.heartbeat(1, true, false).unwrap();
    assert_eq!(harness.partition("t", 0).leader, Some(2));
}

#[test]
fn controlled_shutdown_moves_leadership_first() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("t", 2, 2)).unwrap();
    let reply = harness.heartbeat(1, false, true).unwrap();
    assert_eq!(
        reply,
        BrokerHeartbeatReply {
            is_fenced: true,
            should_shut_down: true
        }
    );
    assert!(harness.image.broker(1).unwrap().fenced);
    for index in 0..2 {
        let partition = harness.partition("t", index);
        assert_eq!(partition.leader, Some(2));
        assert_eq!(partition.isr, vec![2]);
    }
}

/// The leaders of every partition of `topic`.
fn leaders(harness: &Harness, topic: &str, partitions: i32) -> Vec<Option<BrokerId>> {
    (0..partitions)
        .map(|index| harness.partition(topic, index).leader)
        .collect()
}

#[test]
fn brokers_stopping_together_never_lead_each_others_partitions() {
    let mut harness = Harness::with_brokers(3);
    harness.create_one(topic("t", 6, 3)).unwrap();
    let mut stopped = Vec::new();
    for broker_id in [1, 2, 3] {
        let reply = harness.heartbeat(broker_id, false, true).unwrap();
        assert!(reply.should_shut_down && reply.is_fenced);
        stopped.push(broker_id);
        for index in 0..6 {
            let partition = harness.partition("t", index);
            assert!(
                partition
                    .leader
                    .is_none_or(|leader| !stopped.contains(&leader)),
                "partition {index} led by a stopping broker: {partition:?}"
            );
            assert!(
                partition.isr.iter().all(|id| !stopped.contains(id))
                    || partition.isr == vec![broker_id],
                "only the last in-sync replica stays in the ISR: {partition:?}"
            );
        }
    }
    // Broker 3 was the last in-sync replica everywhere: the partitions wait
    // for it, leaderless, instead of being led by a stopping broker.
    assert_eq!(leaders(&harness, "t", 6), vec![None; 6]);
    for index in 0..6 {
        assert_eq!(harness.partition("t", index).isr, vec![3]);
    }
}

#[test]
fn a_heartbeat_after_controlled_shutdown_does_not_unfence_the_broker() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("t", 2, 2)).unwrap();
    harness.heartbeat(2, false, true).unwrap();
    harness.heartbeat(1, false, true).unwrap();
    assert_eq!(leaders(&harness, "t", 2), vec![None, None]);
    // A heartbeat sent before the shutdown request but delivered after it:
    // without the shutdown it would unfence broker 1 and make it leader of
    // both partitions (it is their last in-sync replica).
    let offset = harness.image.last_offset();
    let reply = harness.heartbeat(1, false, false).unwrap();
    assert_eq!(
        reply,
        BrokerHeartbeatReply {
            is_fenced: true,
            should_shut_down: true
        }
    );
    assert_eq!(harness.image.last_offset(), offset, "nothing written");
    assert!(harness.image.broker(1).unwrap().fenced);
    assert_eq!(leaders(&harness, "t", 2), vec![None, None]);
    // Nor does a want_fence heartbeat change that.
    assert!(harness.heartbeat(1, true, false).unwrap().should_shut_down);
}

#[test]
fn a_broker_registered_again_after_controlled_shutdown_leads_again() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("t", 2, 2)).unwrap();
    harness.heartbeat(2, false, true).unwrap();
    harness.heartbeat(1, false, true).unwrap();
    let old_epoch = harness.image.broker(1).unwrap().epoch;
    assert!(harness.controller.is_shutting_down(1, old_epoch));
    // The restarted process: a new incarnation, a new epoch.
    harness.register(1, 4242).unwrap();
    assert!(!harness.heartbeat(1, false, false).unwrap().is_fenced);
    let epoch = harness.image.broker(1).unwrap().epoch;
    assert_ne!(epoch, old_epoch);
    assert!(!harness.controller.is_shutting_down(1, epoch));
    assert!(!harness.image.broker(1).unwrap().fenced);
    assert_eq!(leaders(&harness, "t", 2), vec![Some(1), Some(1)]);
}

#[test]
fn want_fence_fences_and_keeps_the_broker_fenced() {
    let mut harness = Harness::with_brokers(1);
    let reply = harness.heartbeat(1, true, false).unwrap();
    assert!(reply.is_fenced);
    assert!(harness.image.broker(1).unwrap().fenced);
    assert!(harness.heartbeat(1, true, false).unwrap().is_fenced);
    assert!(!harness.heartbeat(1, false, false).unwrap().is_fenced);
}

fn elect(
    harness: &mut Harness,
    election_type: ElectionType,
    partitions: Option<Vec<(String, i32)>>,
) -> Vec<ElectionOutcome> {
    let request = ElectLeadersRequest {
        election_type,
        partitions,
    };
    let result = harness
        .controller
        .elect_leaders(&harness.image, &request)
        .unwrap();
    harness.commit(result)
}

#[test]
fn preferred_election_restores_the_first_replica() {
    let mut harness = Harness::with_brokers(2);
    harness
        .create_one(NewTopic {
            name: "p".into(),
            assignments: vec![RequestedAssignment {
                partition_index: 0,
                broker_ids: vec![1, 2],
            }],
            ..NewTopic::default()
        })
        .unwrap();
    let only = Some(vec![("p".to_owned(), 0)]);
    assert!(matches!(
        elect(&mut harness, ElectionType::Preferred, only.clone())[0].result,
        Err(ControllerError::ElectionNotNeeded { .. })
    ));
    // Broker 1 bounces: leadership moves to 2, and 1 returns outside the ISR.
    harness.heartbeat(1, true, false).unwrap();
    assert_eq!(harness.partition("p", 0).leader, Some(2));
    harness.heartbeat(1, false, false).unwrap();
    assert!(matches!(
        elect(&mut harness, ElectionType::Preferred, only.clone())[0].result,
        Err(ControllerError::PreferredLeaderNotAvailable { .. })
    ));
    // The leader adds 1 back to the ISR (the replication layer's job).
    let topic = harness.image.topic_by_name("p").unwrap().clone();
    let record = partition_change(&topic, 0, Some(vec![2, 1]), None);
    harness.commit(ControllerResult {
        records: vec![record],
        response: (),
    });
    assert_eq!(
        elect(&mut harness, ElectionType::Preferred, only)[0].result,
        Ok(1)
    );
    assert_eq!(harness.partition("p", 0).leader, Some(1));
    // "All partitions" leaves out the ones that need nothing.
    assert!(elect(&mut harness, ElectionType::Preferred, None).is_empty());
}

#[test]
fn unclean_election_on_request() {
    let mut harness = Harness::with_brokers(2);
    harness
        .create_one(NewTopic {
            name: "u".into(),
            assignments: vec![RequestedAssignment {
                partition_index: 0,
                broker_ids: vec![1, 2],
            }],
            ..NewTopic::default()
        })
        .unwrap();
    let topic = harness.image.topic_by_name("u").unwrap().clone();
    harness.commit(ControllerResult {
        records: vec![partition_change(&topic, 0, Some(vec![1]), None)],
        response: (),
    });
    harness.heartbeat(1, true, false).unwrap();
    assert_eq!(harness.partition("u", 0).leader, None);
    let only = Some(vec![("u".to_owned(), 0)]);
    assert_eq!(
        elect(&mut harness, ElectionType::Unclean, only.clone())[0].result,
        Ok(2)
    );
    assert_eq!(harness.partition("u", 0).isr, vec![2]);
    assert!(matches!(
        elect(&mut harness, ElectionType::Unclean, only)[0].result,
        Err(ControllerError::ElectionNotNeeded { .. })
    ));
}

#[test]
fn election_for_unknown_partitions() {
    let mut harness = Harness::with_brokers(1);
    harness.create_one(topic("e", 1, 1)).unwrap();
    let outcomes = elect(
        &mut harness,
        ElectionType::Preferred,
        Some(vec![("e".into(), 4), ("nope".into(), 0), ("e".into(), -1)]),
    );
    assert_eq!(
        outcomes[0].result,
        Err(ControllerError::UnknownPartition {
            topic: "e".into(),
            partition_index: 4
        })
    );
    assert_eq!(
        outcomes[1].result,
        Err(ControllerError::UnknownTopic {
            name: "nope".into()
        })
    );
    assert_eq!(
        outcomes[2].result,
        Err(ControllerError::UnknownPartition {
            topic: "e".into(),
            partition_index: -1
        })
    );
}

#[test]
fn producer_id_blocks_are_disjoint_and_survive_a_snapshot() {
    let mut harness = Harness::with_brokers(2);
    let allocate = |harness: &mut Harness, broker_id: BrokerId| {
        let broker_epoch = harness.image.broker(broker_id).unwrap().epoch;
        let request = AllocateProducerIdsRequest {
            broker_id,
            broker_epoch,
        };
        let result = harness
            .controller
            .allocate_producer_ids(&harness.image, &request)
            .unwrap();
        harness.commit(result)
    };
    let first = allocate(&mut harness, 1).unwrap();
    let second = allocate(&mut harness, 2).unwrap();
    assert_eq!(first.first_producer_id, 0);
    assert_eq!(first.size, PRODUCER_ID_BLOCK_SIZE);
    assert_eq!(second.first_producer_id, i64::from(PRODUCER_ID_BLOCK_SIZE));
    assert_eq!(
        harness.image.next_producer_id(),
        2 * i64::from(PRODUCER_ID_BLOCK_SIZE)
    );

    let rebuilt = MetadataImage::from_snapshot_records(
        harness.image.last_offset().unwrap(),
        &harness.image.to_snapshot_records(),
    )
    .unwrap();
    assert_eq!(rebuilt.next_producer_id(), harness.image.next_producer_id());
}

#[test]
fn producer_ids_go_only_to_a_registered_broker_at_its_epoch() {
    let mut harness = Harness::with_brokers(1);
    let epoch = harness.image.broker(1).unwrap().epoch;
    let stale = AllocateProducerIdsRequest {
        broker_id: 1,
        broker_epoch: epoch - 1,
    };
    let result = harness
        .controller
        .allocate_producer_ids(&harness.image, &stale)
        .unwrap();
    assert!(result.records.is_empty());
    assert!(matches!(
        result.response,
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    let unknown = AllocateProducerIdsRequest {
        broker_id: 9,
        broker_epoch: 0,
    };
    let result = harness
        .controller
        .allocate_producer_ids(&harness.image, &unknown)
        .unwrap();
    assert!(matches!(
        result.response,
        Err(ControllerError::BrokerNotRegistered { broker_id: 9 })
    ));
    assert_eq!(harness.image.next_producer_id(), 0);
}

#[test]
fn a_broker_gone_from_its_connection_is_fenced_at_once_and_a_live_one_is_not() {
    let mut harness = Harness::with_brokers(2);
    harness.create_one(topic("t", 2, 2)).unwrap();
    let epoch = harness.image.broker(1).unwrap().epoch;
    // Broker 1's connection closed at now_ms; it heartbeats again after:
    // alive (a flapping connection), not fenced.
    let evidence = harness.now_ms;
    harness.now_ms += 100;
    harness.heartbeat(1, false, false).unwrap();
    let result = harness
        .controller
        .fence_unreachable(&harness.image, 1, epoch, evidence)
        .unwrap();
    assert!(!harness.commit(result));
    assert!(!harness.image.broker(1).unwrap().fenced);
    // No heartbeat since the evidence: fenced long before its session
    // expires, and its partitions are led elsewhere.
    let evidence = harness.now_ms;
    harness.now_ms += 300;
    let result = harness
        .controller
        .fence_unreachable(&harness.image, 1, epoch, evidence)
        .unwrap();
    assert!(harness.commit(result));
    assert!(harness.image.broker(1).unwrap().fenced);
    for index in 0..2 {
        assert_eq!(harness.partition("t", index).leader, Some(2));
    }
    // Evidence about an older incarnation (or an already fenced broker)
    // changes nothing.
    let result = harness
        .controller
        .fence_unreachable(&harness.image, 1, epoch, evidence)
        .unwrap();
    assert!(!harness.commit(result));
    let result = harness
        .controller
        .fence_unreachable(&harness.image, 2, epoch - 1, evidence)
        .unwrap();
    assert!(!harness.commit(result));
    assert!(!harness.image.broker(2).unwrap().fenced);
}

#[test]
fn silent_brokers_are_those_not_heard_from_since() {
    let mut harness = Harness::with_brokers(3);
    let since = harness.now_ms;
    harness.now_ms += 500;
    harness.heartbeat(2, false, false).unwrap();
    let result = harness
        .controller
        .silent_brokers(&harness.image, since)
        .unwrap();
    let silent: Vec<BrokerId> = harness
        .commit(result)
        .into_iter()
        .map(|(broker_id, _)| broker_id)
        .collect();
    assert_eq!(silent, vec![1, 3]);
}

#[test]
fn a_new_controllers_grace_is_not_a_heartbeat() {
    let mut harness = Harness::with_brokers(2);
    // A controller that becomes active forgets what it heard; its first
    // check gives every broker a session from now, but that is not word
    // from the broker.
    harness.controller.reset_liveness();
    let since = harness.now_ms;
    assert!(harness.tick().is_empty());
    harness.now_ms += 100;
    harness.heartbeat(2, false, false).unwrap();
    let result = harness
        .controller
        .silent_brokers(&harness.image, since)
        .unwrap();
    let silent: Vec<BrokerId> = harness
        .commit(result)
        .into_iter()
        .map(|(broker_id, _)| broker_id)
        .collect();
    assert_eq!(silent, vec![1]);
}
