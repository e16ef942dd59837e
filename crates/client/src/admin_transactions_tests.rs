//! Tests of the transaction admin answers' decoding into typed results and
//! errors.

use strom_protocol::kafka::messages::describe_transactions_response::TopicData;

use super::*;

fn described(error: ErrorCode) -> describe_transactions_response::TransactionState {
    describe_transactions_response::TransactionState::default()
        .with_error_code(error.code())
        .with_transactional_id(TransactionalId(StrBytes::from_static_str("orders")))
        .with_transaction_state(StrBytes::from_static_str("Ongoing"))
        .with_transaction_timeout_ms(60_000)
        .with_transaction_start_time_ms(1_700_000_000_000)
        .with_producer_id(ProducerId(7))
        .with_producer_epoch(3)
        .with_topics(vec![
            TopicData::default()
                .with_topic(topic_name("a"))
                .with_partitions(vec![0, 2]),
            TopicData::default()
                .with_topic(topic_name("b"))
                .with_partitions(vec![1]),
        ])
}

#[test]
fn states_round_trip_through_their_kafka_names() {
    for state in TransactionState::KNOWN {
        assert_eq!(TransactionState::from_name(state.name()), state);
    }
    assert_eq!(
        TransactionState::from_name("ongoing"),
        TransactionState::Other("ongoing".to_owned()),
        "names are case-sensitive"
    );
    assert_eq!(TransactionState::Other("X".to_owned()).to_string(), "X");
}

#[test]
fn a_description_lists_every_partition_and_the_coordinator() {
    let ongoing = description(4, &described(ErrorCode::None)).expect("described");
    assert_eq!(ongoing.coordinator_id, 4);
    assert_eq!(ongoing.state, TransactionState::Ongoing);
    assert_eq!(ongoing.producer_id, 7);
    assert_eq!(ongoing.producer_epoch, 3);
    assert_eq!(ongoing.transaction_start_time_ms, Some(1_700_000_000_000));
    assert_eq!(
        ongoing.partitions,
        [
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
            TopicPartition::new("b", 1)
        ]
    );
    let idle = described(ErrorCode::None)
        .with_transaction_start_time_ms(-1)
        .with_transaction_state(StrBytes::from_static_str("Empty"));
    let idle = description(4, &idle).expect("described");
    assert_eq!(idle.transaction_start_time_ms, None);
    assert_eq!(idle.state, TransactionState::Empty);
}

#[test]
fn description_errors_are_typed() {
    let error = description(1, &described(ErrorCode::TransactionalIdNotFound)).unwrap_err();
    assert!(
        matches!(error, TransactionAdminError::TransactionalIdNotFound { ref transactional_id } if transactional_id == "orders"),
        "{error:?}"
    );
    assert_eq!(error.code(), Some(ErrorCode::TransactionalIdNotFound));
    assert!(!error.is_retriable());
    let error =
        description(1, &described(ErrorCode::TransactionalIdAuthorizationFailed)).unwrap_err();
    assert!(matches!(
        error,
        TransactionAdminError::TransactionalIdAuthorizationFailed { .. }
    ));
    let error = description(1, &described(ErrorCode::NotCoordinator)).unwrap_err();
    assert!(
        error.is_retriable(),
        "NOT_COORDINATOR is retried: {error:?}"
    );
    let error = description(1, &described(ErrorCode::CoordinatorLoadInProgress)).unwrap_err();
    assert!(error.is_retriable(), "{error:?}");
}

#[test]
fn producer_states_turn_sentinels_into_none() {
    let open = describe_producers_response::ProducerState::default()
        .with_producer_id(ProducerId(9))
        .with_producer_epoch(2)
        .with_last_sequence(4)
        .with_last_timestamp(55)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(12);
    let state = producer_state(&open);
    assert_eq!(state.coordinator_epoch, None);
    assert_eq!(state.current_transaction_start_offset, Some(12));
    let closed = producer_state(
        &open
            .with_coordinator_epoch(3)
            .with_current_txn_start_offset(-1),
    );
    assert_eq!(closed.coordinator_epoch, Some(3));
    assert_eq!(closed.current_transaction_start_offset, None);
}

#[test]
fn an_abort_spec_uses_coordinator_epoch_zero_when_none_was_seen() {
    let partition = TopicPartition::new("t", 1);
    let mut producer = ProducerState {
        producer_id: 9,
        producer_epoch: 2,
        last_sequence: 0,
        last_timestamp_ms: 0,
        coordinator_epoch: None,
        current_transaction_start_offset: Some(5),
    };
    let spec = AbortTransactionSpec::for_producer(partition.clone(), &producer).expect("fits");
    assert_eq!(spec.coordinator_epoch, 0);
    assert_eq!(spec.producer_epoch, 2);
    producer.coordinator_epoch = Some(6);
    let spec = AbortTransactionSpec::for_producer(partition.clone(), &producer).expect("fits");
    assert_eq!(spec.coordinator_epoch, 6);
    producer.producer_epoch = i32::from(i16::MAX) + 1;
    assert_eq!(
        AbortTransactionSpec::for_producer(partition, &producer),
        None
    );
}

#[test]
fn the_abort_marker_is_an_abort_for_one_partition() {
    let spec = AbortTransactionSpec {
        topic_partition: TopicPartition::new("t", 3),
        producer_id: 11,
        producer_epoch: 4,
        coordinator_epoch: 2,
    };
    let marker = abort_marker(&spec);
    assert!(!marker.transaction_result, "false means abort");
    assert_eq!(marker.producer_id.0, 11);
    assert_eq!(marker.producer_epoch, 4);
    assert_eq!(marker.coordinator_epoch, 2);
    assert_eq!(marker.topics.len(), 1);
    assert_eq!(marker.topics[0].name.as_str(), "t");
    assert_eq!(marker.topics[0].partition_indexes, [3]);
}

#[test]
fn partition_errors_are_typed() {
    let partition = TopicPartition::new("t", 3);
    assert!(matches!(
        partition_error(ErrorCode::UnknownTopicOrPartition, &partition),
        TransactionAdminError::UnknownTopicOrPartition { ref topic, partition: 3 } if topic == "t"
    ));
    assert!(matches!(
        partition_error(ErrorCode::TopicAuthorizationFailed, &partition),
        TransactionAdminError::TopicAuthorizationFailed { .. }
    ));
    assert!(matches!(
        partition_error(ErrorCode::ClusterAuthorizationFailed, &partition),
        TransactionAdminError::ClusterAuthorizationFailed
    ));
    let moved = partition_error(ErrorCode::NotLeaderOrFollower, &partition);
    assert!(moved.is_retriable(), "{moved:?}");
    assert_eq!(partition.to_string(), "t-3");
}

#[test]
fn listings_name_their_coordinator() {
    let listed = list_transactions_response::TransactionState::default()
        .with_transactional_id(TransactionalId(StrBytes::from_static_str("x")))
        .with_producer_id(ProducerId(5))
        .with_transaction_state(StrBytes::from_static_str("PrepareCommit"));
    let listing = listing(2, &listed);
    assert_eq!(listing.coordinator_id, 2);
    assert_eq!(listing.producer_id, 5);
    assert_eq!(listing.state, TransactionState::PrepareCommit);
}
