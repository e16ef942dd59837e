//! Random contents for the high-traffic messages round trip at every
//! advertised version: `decode(encode(x)) == x`, all bytes consumed, and the
//! reported size equals the written size. Fields are only filled in at the
//! versions that carry them.

use crate::wire_support;

use proptest::collection::vec;
use proptest::prelude::*;
use strom_protocol::api::supported_api;
use strom_protocol::kafka::messages::*;
use strom_protocol::{Request, Response};
use wire_support::*;

/// A version of `api_key` from the supported table, with a value built for it.
fn versioned<S: Strategy>(
    api_key: ApiKey,
    build: fn(i16) -> S,
) -> impl Strategy<Value = (i16, S::Value)> {
    let api = supported_api(api_key as i16).expect("served");
    (api.min_version..=api.max_version)
        .prop_flat_map(move |version| (Just(version), build(version)))
}

fn produce_request(version: i16) -> impl Strategy<Value = ProduceRequest> {
    use produce_request::{PartitionProduceData, TopicProduceData};
    let partition = (any::<i32>(), proptest::option::of(blob())).prop_map(|(index, records)| {
        PartitionProduceData::default()
            .with_index(index)
            .with_records(records)
    });
    let topic =
        (topic_name(), uuid(), vec(partition, 0..3)).prop_map(move |(name, id, partitions)| {
            let topic = TopicProduceData::default().with_partition_data(partitions);
            if version >= 13 {
                topic.with_topic_id(id)
            } else {
                topic.with_name(name)
            }
        });
    (
        optional_text(),
        any::<i16>(),
        any::<i32>(),
        vec(topic, 0..3),
    )
        .prop_map(|(id, acks, timeout_ms, topics)| {
            ProduceRequest::default()
                .with_transactional_id(id.map(TransactionalId))
                .with_acks(acks)
                .with_timeout_ms(timeout_ms)
                .with_topic_data(topics)
        })
}

fn fetch_partition(version: i16) -> impl Strategy<Value = fetch_request::FetchPartition> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        uuid(),
        any::<i64>(),
    )
        .prop_map(
            move |(
                partition,
                leader_epoch,
                fetch_offset,
                last_epoch,
                log_start,
                max_bytes,
                directory,
                high_watermark,
            )| {
                let mut value = fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(fetch_offset)
                    .with_partition_max_bytes(max_bytes);
                if version >= 5 {
                    value = value.with_log_start_offset(log_start);
                }
                if version >= 9 {
                    value = value.with_current_leader_epoch(leader_epoch);
                }
                if version >= 12 {
                    value = value.with_last_fetched_epoch(last_epoch);
                }
                if version >= 17 {
                    value = value.with_replica_directory_id(directory);
                }
                if version >= 18 {
                    value = value.with_high_watermark(high_watermark);
                }
                value
            },
        )
}

fn fetch_request(version: i16) -> impl Strategy<Value = FetchRequest> {
    use fetch_request::{FetchTopic, ForgottenTopic, ReplicaState};
    let topic = (topic_name(), uuid(), vec(fetch_partition(version), 0..3)).prop_map(
        move |(name, id, partitions)| {
            let topic = FetchTopic::default().with_partitions(partitions);
            if version >= 13 {
                topic.with_topic_id(id)
            } else {
                topic.with_topic(name)
            }
        },
    );
    let forgotten =
        (topic_name(), uuid(), vec(any::<i32>(), 0..3)).prop_map(move |(name, id, partitions)| {
            let topic = ForgottenTopic::default().with_partitions(partitions);
            if version >= 13 {
                topic.with_topic_id(id)
            } else {
                topic.with_topic(name)
            }
        });
    let limits = (any::<i32>(), any::<i32>(), any::<i32>(), 0i8..=1);
    let session = (
        any::<i32>(),
        any::<i32>(),
        vec(forgotten, 0..2),
        text(),
        optional_text(),
    );
    let replica = (broker_id(), any::<i64>());
    (limits, session, replica, vec(topic, 0..3)).prop_map(
        move |(
            (max_wait_ms, min_bytes, max_bytes, isolation),
            (session_id, epoch, forgotten, rack, cluster),
            (replica_id, replica_epoch),
            topics,
        )| {
            let mut request = FetchRequest::default()
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(min_bytes)
                .with_max_bytes(max_bytes)
                .with_isolation_level(isolation)
                .with_topics(topics);
            if version <= 14 {
                request = request.with_replica_id(replica_id);
            } else {
                request = request.with_replica_state(
                    ReplicaState::default()
                        .with_replica_id(replica_id)
                        .with_replica_epoch(replica_epoch),
                );
            }
            if version >= 7 {
                request = request
                    .with_session_id(session_id)
                    .with_session_epoch(epoch)
                    .with_forgotten_topics_data(forgotten);
            }
            if version >= 11 {
                request = request.with_rack_id(rack);
            }
            if version >= 12 {
                request = request.with_cluster_id(cluster);
            }
            request
        },
    )
}

fn metadata_request(version: i16) -> impl Strategy<Value = MetadataRequest> {
    use metadata_request::MetadataRequestTopic;
    let topic = (topic_name(), uuid(), any::<bool>()).prop_map(move |(name, id, by_id)| {
        let topic = MetadataRequestTopic::default().with_name(Some(name));
        if version >= 10 && by_id {
            topic.with_topic_id(id).with_name(None)
        } else {
            topic
        }
    });
    let topics = vec(topic, 0..4);
    (
        topics,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            move |(topics, all_topics, auto_create, cluster_ops, topic_ops)| {
                let topics = if all_topics && version >= 1 {
                    None
                } else {
                    Some(topics)
                };
                let mut request = MetadataRequest::default().with_topics(topics);
                if version >= 4 {
                    request = request.with_allow_auto_topic_creation(auto_create);
                } else {
                    request = request.with_allow_auto_topic_creation(true);
                }
                if (8..=10).contains(&version) {
                    request = request.with_include_cluster_authorized_operations(cluster_ops);
                }
                if version >= 8 {
                    request = request.with_include_topic_authorized_operations(topic_ops);
                }
                request
            },
        )
}

fn api_versions_request(version: i16) -> impl Strategy<Value = ApiVersionsRequest> {
    (text(), text()).prop_map(move |(name, software_version)| {
        if version >= 3 {
            ApiVersionsRequest::default()
                .with_client_software_name(name)
                .with_client_software_version(software_version)
        } else {
            ApiVersionsRequest::default()
        }
    })
}

fn list_offsets_request(version: i16) -> impl Strategy<Value = ListOffsetsRequest> {
    use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let partition =
        (any::<i32>(), any::<i32>(), any::<i64>()).prop_map(move |(index, epoch, timestamp)| {
            let partition = ListOffsetsPartition::default()
                .with_partition_index(index)
                .with_timestamp(timestamp);
            if version >= 4 {
                partition.with_current_leader_epoch(epoch)
            } else {
                partition
            }
        });
    let topic = (topic_name(), vec(partition, 0..3)).prop_map(|(name, partitions)| {
        ListOffsetsTopic::default()
            .with_name(name)
            .with_partitions(partitions)
    });
    (broker_id(), 0i8..=1, vec(topic, 0..3), any::<i32>()).prop_map(
        move |(replica, isolation, topics, timeout_ms)| {
            let mut request = ListOffsetsRequest::default()
                .with_replica_id(replica)
                .with_topics(topics);
            if version >= 2 {
                request = request.with_isolation_level(isolation);
            }
            if version >= 10 {
                request = request.with_timeout_ms(timeout_ms);
            }
            request
        },
    )
}

fn join_group_request(version: i16) -> impl Strategy<Value = JoinGroupRequest> {
    use join_group_request::JoinGroupRequestProtocol;
    let protocol = (text(), blob()).prop_map(|(name, metadata)| {
        JoinGroupRequestProtocol::default()
            .with_name(name)
            .with_metadata(metadata)
    });
    let fields = (
        group_id(),
        any::<i32>(),
        any::<i32>(),
        text(),
        optional_text(),
        text(),
        optional_text(),
    );
    (fields, vec(protocol, 0..3)).prop_map(
        move |(
            (group, session_ms, rebalance_ms, member, instance, protocol_type, reason),
            protocols,
        )| {
            let mut request = JoinGroupRequest::default()
                .with_group_id(group)
                .with_session_timeout_ms(session_ms)
                .with_member_id(member)
                .with_protocol_type(protocol_type)
                .with_protocols(protocols.into_iter().collect());
            if version >= 1 {
                request = request.with_rebalance_timeout_ms(rebalance_ms);
            }
            if version >= 5 {
                request = request.with_group_instance_id(instance);
            }
            if version >= 8 {
                request = request.with_reason(reason);
            }
            request
        },
    )
}

fn sync_group_request(version: i16) -> impl Strategy<Value = SyncGroupRequest> {
    use sync_group_request::SyncGroupRequestAssignment;
    let assignment = (text(), blob()).prop_map(|(member, assignment)| {
        SyncGroupRequestAssignment::default()
            .with_member_id(member)
            .with_assignment(assignment)
    });
    let fields = (
        group_id(),
        any::<i32>(),
        text(),
        optional_text(),
        optional_text(),
        optional_text(),
    );
    (fields, vec(assignment, 0..3)).prop_map(
        move |(
            (group, generation, member, instance, protocol_type, protocol_name),
            assignments,
        )| {
            let mut request = SyncGroupRequest::default()
                .with_group_id(group)
                .with_generation_id(generation)
                .with_member_id(member)
                .with_assignments(assignments);
            if version >= 3 {
                request = request.with_group_instance_id(instance);
            }
            if version >= 5 {
                request = request
                    .with_protocol_type(protocol_type)
                    .with_protocol_name(protocol_name);
            }
            request
        },
    )
}

fn offset_commit_request(version: i16) -> impl Strategy<Value = OffsetCommitRequest> {
    use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    let partition = (any::<i32>(), any::<i64>(), any::<i32>(), optional_text()).prop_map(
        move |(index, offset, epoch, metadata)| {
            let partition = OffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_committed_metadata(metadata);
            if version >= 6 {
                partition.with_committed_leader_epoch(epoch)
            } else {
                partition
            }
        },
    );
    let topic = (topic_name(), vec(partition, 0..3)).prop_map(|(name, partitions)| {
        OffsetCommitRequestTopic::default()
            .with_name(name)
            .with_partitions(partitions)
    });
    (
        group_id(),
        any::<i32>(),
        text(),
        optional_text(),
        any::<i64>(),
        vec(topic, 0..3),
    )
        .prop_map(
            move |(group, generation, member, instance, retention_ms, topics)| {
                let mut request = OffsetCommitRequest::default()
                    .with_group_id(group)
                    .with_generation_id_or_member_epoch(generation)
                    .with_member_id(member)
                    .with_topics(topics);
                if version >= 7 {
                    request = request.with_group_instance_id(instance);
                }
                if version <= 4 {
                    request = request.with_retention_time_ms(retention_ms);
                }
                request
            },
        )
}

fn offset_fetch_request(version: i16) -> impl Strategy<Value = OffsetFetchRequest> {
    use offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    };
    let topic = (topic_name(), vec(any::<i32>(), 0..3)).prop_map(|(name, partitions)| {
        OffsetFetchRequestTopic::default()
            .with_name(name)
            .with_partition_indexes(partitions)
    });
    let topics = (topic_name(), vec(any::<i32>(), 0..3)).prop_map(|(name, partitions)| {
        OffsetFetchRequestTopics::default()
            .with_name(name)
            .with_partition_indexes(partitions)
    });
    let group = (
        group_id(),
        optional_text(),
        any::<i32>(),
        proptest::option::of(vec(topics, 0..3)),
    )
        .prop_map(move |(group, member, epoch, topics)| {
            let group = OffsetFetchRequestGroup::default()
                .with_group_id(group)
                .with_topics(topics);
            if version >= 9 {
                group.with_member_id(member).with_member_epoch(epoch)
            } else {
                group
            }
        });
    (
        group_id(),
        proptest::option::of(vec(topic, 0..3)),
        vec(group, 0..3),
        any::<bool>(),
    )
        .prop_map(move |(group, topics, groups, require_stable)| {
            let mut request = OffsetFetchRequest::default();
            if version <= 7 {
                let topics = if version < 2 {
                    Some(topics.unwrap_or_default())
                } else {
                    topics
                };
                request = request.with_group_id(group).with_topics(topics);
            } else {
                request = request.with_groups(groups);
            }
            if version >= 7 {
                request = request.with_require_stable(require_stable);
            }
            request
        })
}

fn create_topics_request(_version: i16) -> impl Strategy<Value = CreateTopicsRequest> {
    use create_topics_request::{CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig};
    let assignment = (any::<i32>(), vec(broker_id(), 0..3)).prop_map(|(index, brokers)| {
        CreatableReplicaAssignment::default()
            .with_partition_index(index)
            .with_broker_ids(brokers)
    });
    let config = (text(), optional_text()).prop_map(|(name, value)| {
        CreatableTopicConfig::default()
            .with_name(name)
            .with_value(value)
    });
    let topic = (
        topic_name(),
        any::<i32>(),
        any::<i16>(),
        vec(assignment, 0..2),
        vec(config, 0..3),
    )
        .prop_map(|(name, partitions, replication, assignments, configs)| {
            CreatableTopic::default()
                .with_name(name)
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_assignments(assignments)
                .with_configs(configs)
        });
    (vec(topic, 0..3), any::<i32>(), any::<bool>()).prop_map(
        |(topics, timeout_ms, validate_only)| {
            CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only)
        },
    )
}

fn produce_response(version: i16) -> impl Strategy<Value = ProduceResponse> {
    use produce_response::{PartitionProduceResponse, TopicProduceResponse};
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        optional_text(),
    )
        .prop_map(
            move |(index, error_code, base_offset, append_ms, log_start, message)| {
                let mut partition = PartitionProduceResponse::default()
                    .with_index(index)
                    .with_error_code(error_code)
                    .with_base_offset(base_offset)
                    .with_log_append_time_ms(append_ms);
                if version >= 5 {
                    partition = partition.with_log_start_offset(log_start);
                }
                if version >= 8 {
                    partition = partition.with_error_message(message);
                }
                partition
            },
        );
    let topic =
        (topic_name(), uuid(), vec(partition, 0..3)).prop_map(move |(name, id, partitions)| {
            let topic = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                topic.with_topic_id(id)
            } else {
                topic.with_name(name)
            }
        });
    (vec(topic, 0..3), any::<i32>()).prop_map(|(topics, throttle)| {
        ProduceResponse::default()
            .with_responses(topics)
            .with_throttle_time_ms(throttle)
    })
}

fn fetch_response(version: i16) -> impl Strategy<Value = FetchResponse> {
    use fetch_response::{FetchableTopicResponse, PartitionData};
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        proptest::option::of(blob()),
    )
        .prop_map(
            move |(index, error_code, high_watermark, stable, log_start, records)| {
                let partition = PartitionData::default()
                    .with_partition_index(index)
                    .with_error_code(error_code)
                    .with_high_watermark(high_watermark)
                    .with_last_stable_offset(stable)
                    .with_records(records);
                if version >= 5 {
                    partition.with_log_start_offset(log_start)
                } else {
                    partition
                }
            },
        );
    let topic =
        (topic_name(), uuid(), vec(partition, 0..3)).prop_map(move |(name, id, partitions)| {
            let topic = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                topic.with_topic_id(id)
            } else {
                topic.with_topic(name)
            }
        });
    (vec(topic, 0..3), any::<i32>(), any::<i16>(), any::<i32>()).prop_map(
        move |(topics, throttle, error, session)| {
            let response = FetchResponse::default()
                .with_responses(topics)
                .with_throttle_time_ms(throttle);
            if version >= 7 {
                response.with_error_code(error).with_session_id(session)
            } else {
                response
            }
        },
    )
}

fn metadata_response(version: i16) -> impl Strategy<Value = MetadataResponse> {
    use metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    let broker = (broker_id(), text(), any::<i32>(), optional_text()).prop_map(
        move |(id, host, port, rack)| {
            let broker = MetadataResponseBroker::default()
                .with_node_id(id)
                .with_host(host)
                .with_port(port);
            if version >= 1 {
                broker.with_rack(rack)
            } else {
                broker
            }
        },
    );
    let partition = (
        any::<i16>(),
        any::<i32>(),
        broker_id(),
        any::<i32>(),
        vec(broker_id(), 0..3),
        vec(broker_id(), 0..3),
    )
        .prop_map(move |(error_code, index, leader, epoch, replicas, isr)| {
            let partition = MetadataResponsePartition::default()
                .with_error_code(error_code)
                .with_partition_index(index)
                .with_leader_id(leader)
                .with_replica_nodes(replicas)
                .with_isr_nodes(isr);
            if version >= 7 {
                partition.with_leader_epoch(epoch)
            } else {
                partition
            }
        });
    let topic = (
        any::<i16>(),
        topic_name(),
        uuid(),
        any::<bool>(),
        vec(partition, 0..3),
    )
        .prop_map(move |(error_code, name, id, internal, partitions)| {
            let mut topic = MetadataResponseTopic::default()
                .with_error_code(error_code)
                .with_name(Some(name))
                .with_partitions(partitions);
            if version >= 1 {
                topic = topic.with_is_internal(internal);
            }
            if version >= 10 {
                topic = topic.with_topic_id(id);
            }
            topic
        });
    (
        vec(broker, 0..3),
        optional_text(),
        broker_id(),
        vec(topic, 0..3),
        any::<i32>(),
    )
        .prop_map(move |(brokers, cluster_id, controller, topics, throttle)| {
            let mut response = MetadataResponse::default()
                .with_brokers(brokers)
                .with_topics(topics);
            if version >= 1 {
                response = response.with_controller_id(controller);
            }
            if version >= 2 {
                response = response.with_cluster_id(cluster_id);
            }
            if version >= 3 {
                response = response.with_throttle_time_ms(throttle);
            }
            response
        })
}

fn api_versions_response(version: i16) -> impl Strategy<Value = ApiVersionsResponse> {
    use api_versions_response::ApiVersion;
    let key = (any::<i16>(), any::<i16>(), any::<i16>()).prop_map(|(key, min, max)| {
        ApiVersion::default()
            .with_api_key(key)
            .with_min_version(min)
            .with_max_version(max)
    });
    (any::<i16>(), vec(key, 0..6), any::<i32>()).prop_map(move |(error_code, keys, throttle)| {
        let response = ApiVersionsResponse::default()
            .with_error_code(error_code)
            .with_api_keys(keys);
        if version >= 1 {
            response.with_throttle_time_ms(throttle)
        } else {
            response
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn produce_requests((version, body) in versioned(ApiKey::Produce, produce_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn fetch_requests((version, body) in versioned(ApiKey::Fetch, fetch_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn metadata_requests((version, body) in versioned(ApiKey::Metadata, metadata_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn api_versions_requests((version, body) in versioned(ApiKey::ApiVersions, api_versions_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn list_offsets_requests((version, body) in versioned(ApiKey::ListOffsets, list_offsets_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn join_group_requests((version, body) in versioned(ApiKey::JoinGroup, join_group_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn sync_group_requests((version, body) in versioned(ApiKey::SyncGroup, sync_group_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn offset_commit_requests((version, body) in versioned(ApiKey::OffsetCommit, offset_commit_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn offset_fetch_requests((version, body) in versioned(ApiKey::OffsetFetch, offset_fetch_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn create_topics_requests((version, body) in versioned(ApiKey::CreateTopics, create_topics_request)) {
        assert_request_round_trip(&Request::from(body), version);
    }

    #[test]
    fn produce_responses((version, body) in versioned(ApiKey::Produce, produce_response)) {
        assert_response_round_trip(&Response::from(body), version);
    }

    #[test]
    fn fetch_responses((version, body) in versioned(ApiKey::Fetch, fetch_response)) {
        assert_response_round_trip(&Response::from(body), version);
    }

    #[test]
    fn metadata_responses((version, body) in versioned(ApiKey::Metadata, metadata_response)) {
        assert_response_round_trip(&Response::from(body), version);
    }

    #[test]
    fn api_versions_responses((version, body) in versioned(ApiKey::ApiVersions, api_versions_response)) {
        assert_response_round_trip(&Response::from(body), version);
    }
}
