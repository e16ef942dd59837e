//! The transactional requests as built for each version the client uses,
//! read back by the protocol codec, and the step taken for each answer.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strom_protocol::kafka::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use strom_protocol::kafka::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use strom_protocol::kafka::messages::{
    AddPartitionsToTxnResponse, TopicName, TxnOffsetCommitResponse,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request};

use super::*;
use crate::error::ProduceError;
use crate::transaction_state::TransactionOperation;

/// Encodes at `version` and decodes back (every byte read).
fn round_trip(request: impl Into<Request>, version: i16) -> Request {
    let request = request.into();
    let api_key = request.api_key() as i16;
    let mut buffer = BytesMut::new();
    request.encode(version, &mut buffer).expect("encodes");
    let mut bytes: Bytes = buffer.freeze();
    Request::decode(api_key, version, &mut bytes).expect("decodes")
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.to_owned(),
        partition,
    }
}

fn context() -> ErrorContext<'static> {
    ErrorContext {
        transactional_id: "writer",
        operation: TransactionOperation::CommitTransaction,
        resource: "group-a",
    }
}

#[test]
fn init_producer_id_names_the_transactional_id_and_bumps_from_v3() {
    let timeout = Duration::from_millis(60_000);
    for version in 0..=5 {
        let request = init_producer_id_request("writer", timeout, None, version);
        let Request::InitProducerId(decoded) = round_trip(request, version) else {
            panic!("InitProducerId");
        };
        assert_eq!(
            decoded.transactional_id.as_ref().map(|id| id.0.as_str()),
            Some("writer")
        );
        assert_eq!(decoded.transaction_timeout_ms, 60_000);
        assert_eq!((decoded.producer_id.0, decoded.producer_epoch), (-1, -1));
        // KIP-360: the current producer id and epoch, where the version has them.
        let bump = init_producer_id_request("writer", timeout, Some((42, 7)), version);
        let Request::InitProducerId(decoded) = round_trip(bump, version) else {
            panic!("InitProducerId");
        };
        let expected = if version >= 3 { (42, 7) } else { (-1, -1) };
        assert_eq!((decoded.producer_id.0, decoded.producer_epoch), expected);
    }
}

#[test]
fn add_partitions_groups_partitions_by_topic_for_v0_to_v3() {
    let partitions = [tp("b", 1), tp("a", 0), tp("b", 0)];
    for version in 0..=3 {
        let request = add_partitions_request("writer", (9, 2), &partitions);
        let Request::AddPartitionsToTxn(decoded) = round_trip(request, version) else {
            panic!("AddPartitionsToTxn");
        };
        assert_eq!(decoded.v3_and_below_transactional_id.0.as_str(), "writer");
        assert_eq!(decoded.v3_and_below_producer_id.0, 9);
        assert_eq!(decoded.v3_and_below_producer_epoch, 2);
        let topics: Vec<(String, Vec<i32>)> = decoded
            .v3_and_below_topics
            .iter()
            .map(|topic| (topic.name.0.to_string(), topic.partitions.clone()))
            .collect();
        assert_eq!(
            topics,
            [("a".to_owned(), vec![0]), ("b".to_owned(), vec![1, 0])]
        );
    }
}

#[test]
fn add_offsets_and_end_txn_carry_the_producer() {
    for version in 0..=3 {
        let request = add_offsets_request("writer", (9, 2), "group-a");
        let Request::AddOffsetsToTxn(decoded) = round_trip(request, version) else {
            panic!("AddOffsetsToTxn");
        };
        assert_eq!(decoded.transactional_id.0.as_str(), "writer");
        assert_eq!((decoded.producer_id.0, decoded.producer_epoch), (9, 2));
        assert_eq!(decoded.group_id.0.as_str(), "group-a");
        for committed in [true, false] {
            let request = end_txn_request("writer", (9, 2), committed);
            let Request::EndTxn(decoded) = round_trip(request, version) else {
                panic!("EndTxn");
            };
            assert_eq!(decoded.transactional_id.0.as_str(), "writer");
            assert_eq!((decoded.producer_id.0, decoded.producer_epoch), (9, 2));
            assert_eq!(decoded.committed, committed);
        }
    }
}

#[test]
fn txn_offset_commit_sends_group_metadata_from_v3_and_leader_epochs_from_v2() {
    let group = ConsumerGroupMetadata::new("group-a")
        .with_member(5, "member-1")
        .with_group_instance_id("instance-1");
    let mut offsets = Offsets::new();
    offsets.insert(
        ("t".to_owned(), 1),
        OffsetAndMetadata {
            offset: 100,
            leader_epoch: Some(3),
            metadata: Some("m".to_owned()),
        },
    );
    offsets.insert(("t".to_owned(), 0), OffsetAndMetadata::new(50));
    for version in 0..=3 {
        let request = txn_offset_commit_request("writer", (9, 2), &group, &offsets, version);
        let Request::TxnOffsetCommit(decoded) = round_trip(request, version) else {
            panic!("TxnOffsetCommit");
        };
        assert_eq!(decoded.transactional_id.0.as_str(), "writer");
        assert_eq!(decoded.group_id.0.as_str(), "group-a");
        assert_eq!((decoded.producer_id.0, decoded.producer_epoch), (9, 2));
        let expected_member = if version >= 3 {
            (5, "member-1", Some("instance-1"))
        } else {
            (-1, "", None)
        };
        assert_eq!(
            (
                decoded.generation_id,
                decoded.member_id.as_str(),
                decoded.group_instance_id.as_deref()
            ),
            expected_member
        );
        let [topic] = decoded.topics.as_slice() else {
            panic!("one topic");
        };
        assert_eq!(topic.name.0.as_str(), "t");
        let partitions: Vec<(i32, i64, i32, Option<&str>)> = topic
            .partitions
            .iter()
            .map(|partition| {
                (
                    partition.partition_index,
                    partition.committed_offset,
                    partition.committed_leader_epoch,
                    partition.committed_metadata.as_deref(),
                )
            })
            .collect();
        let epoch = if version >= 2 { 3 } else { -1 };
        assert_eq!(partitions, [(0, 50, -1, None), (1, 100, epoch, Some("m"))]);
    }
}

#[test]
fn retriable_codes_retry_and_coordinator_moves_look_it_up_again() {
    let backoff = Duration::from_millis(100);
    assert_eq!(
        step_for_code(ErrorCode::None, context(), backoff),
        Step::Done(())
    );
    for code in [
        ErrorCode::NotCoordinator,
        ErrorCode::CoordinatorNotAvailable,
    ] {
        assert_eq!(
            step_for_code(code, context(), backoff),
            Step::FindCoordinator
        );
    }
    assert_eq!(
        step_for_code(ErrorCode::ConcurrentTransactions, context(), backoff),
        Step::Retry(CONCURRENT_TRANSACTIONS_BACKOFF)
    );
    assert_eq!(CONCURRENT_TRANSACTIONS_BACKOFF, Duration::from_millis(20));
    for code in [
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::RequestTimedOut,
        ErrorCode::OperationNotAttempted,
    ] {
        assert_eq!(
            step_for_code(code, context(), backoff),
            Step::Retry(backoff)
        );
    }
}

#[test]
fn each_error_code_maps_to_its_variant_and_severity() {
    let backoff = Duration::from_millis(100);
    let fail = |code| match step_for_code(code, context(), backoff) {
        Step::Fail(error) => error,
        other => panic!("{code} gave {other:?}"),
    };
    let fatal = [
        (
            ErrorCode::ProducerFenced,
            TransactionError::ProducerFenced {
                code: ErrorCode::ProducerFenced,
            },
        ),
        (
            ErrorCode::InvalidProducerEpoch,
            TransactionError::ProducerFenced {
                code: ErrorCode::InvalidProducerEpoch,
            },
        ),
        (
            ErrorCode::TransactionalIdAuthorizationFailed,
            TransactionError::TransactionalIdAuthorizationFailed {
                transactional_id: "writer".to_owned(),
            },
        ),
        (
            ErrorCode::InvalidProducerIdMapping,
            TransactionError::InvalidProducerIdMapping {
                transactional_id: "writer".to_owned(),
            },
        ),
        (
            ErrorCode::InvalidTxnState,
            TransactionError::InvalidTxnState,
        ),
        (
            ErrorCode::InvalidTransactionTimeout,
            TransactionError::InvalidTransactionTimeout,
        ),
        (
            ErrorCode::UnsupportedVersion,
            TransactionError::Unsupported {
                code: ErrorCode::UnsupportedVersion,
            },
        ),
        (
            ErrorCode::UnknownServerError,
            TransactionError::Broker {
                operation: TransactionOperation::CommitTransaction,
                code: ErrorCode::UnknownServerError,
            },
        ),
    ];
    for (code, expected) in fatal {
        let error = fail(code);
        assert_eq!(error, expected);
        assert!(error.is_fatal() && !error.is_abortable(), "{code}");
    }
    let abortable = [
        (
            ErrorCode::TransactionAbortable,
            TransactionError::TransactionAbortable,
            false,
        ),
        (
            ErrorCode::UnknownProducerId,
            TransactionError::UnknownProducerId,
            true,
        ),
        (
            ErrorCode::GroupAuthorizationFailed,
            TransactionError::GroupAuthorizationFailed {
                group_id: "group-a".to_owned(),
            },
            false,
        ),
        (
            ErrorCode::TopicAuthorizationFailed,
            TransactionError::TopicAuthorizationFailed {
                topic: "group-a".to_owned(),
            },
            false,
        ),
        (
            ErrorCode::IllegalGeneration,
            TransactionError::GroupMetadataStale {
                group_id: "group-a".to_owned(),
                code: ErrorCode::IllegalGeneration,
            },
            false,
        ),
    ];
    for (code, expected, bump) in abortable {
        let error = fail(code);
        assert_eq!(error, expected);
        assert!(error.is_abortable() && !error.is_fatal(), "{code}");
        assert_eq!(error.needs_epoch_bump(), bump, "{code}");
    }
}

#[test]
fn a_failed_record_is_fatal_when_fenced_and_abortable_otherwise() {
    let fenced = TransactionError::record_failed(
        "writer",
        "t",
        0,
        ProduceError::Broker {
            code: ErrorCode::ProducerFenced,
        },
    );
    assert!(fenced.is_fatal());
    let timed_out =
        TransactionError::record_failed("writer", "t", 2, ProduceError::Timeout { elapsed_ms: 9 });
    assert!(timed_out.is_abortable() && timed_out.needs_epoch_bump());
    assert!(matches!(
        timed_out,
        TransactionError::RecordFailed { ref topic, partition: 2, .. } if topic == "t"
    ));
    let abortable = TransactionError::record_failed(
        "writer",
        "t",
        0,
        ProduceError::Broker {
            code: ErrorCode::TransactionAbortable,
        },
    );
    assert_eq!(abortable, TransactionError::TransactionAbortable);
}

#[test]
fn the_first_partition_error_of_an_add_wins_over_not_attempted() {
    let response = |codes: &[(i32, ErrorCode)]| {
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(vec![
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_results_by_partition(
                    codes
                        .iter()
                        .map(|(partition, code)| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*partition)
                                .with_partition_error_code(code.code())
                        })
                        .collect(),
                ),
        ])
    };
    let all_fine = response(&[(0, ErrorCode::None), (1, ErrorCode::None)]);
    assert_eq!(add_partitions_error(&all_fine).0, ErrorCode::None);
    let one_failed = response(&[
        (0, ErrorCode::OperationNotAttempted),
        (1, ErrorCode::TopicAuthorizationFailed),
    ]);
    assert_eq!(
        add_partitions_error(&one_failed),
        (ErrorCode::TopicAuthorizationFailed, "t".to_owned())
    );
    let busy = response(&[(0, ErrorCode::ConcurrentTransactions)]);
    assert_eq!(
        add_partitions_error(&busy).0,
        ErrorCode::ConcurrentTransactions
    );
}

#[test]
fn the_first_partition_error_of_an_offset_commit_is_reported() {
    let response = TxnOffsetCommitResponse::default().with_topics(vec![
        TxnOffsetCommitResponseTopic::default().with_partitions(vec![
            TxnOffsetCommitResponsePartition::default().with_error_code(0),
            TxnOffsetCommitResponsePartition::default()
                .with_error_code(ErrorCode::UnknownMemberId.code()),
        ]),
    ]);
    assert_eq!(
        txn_offset_commit_error(&response),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(
        txn_offset_commit_error(&TxnOffsetCommitResponse::default()),
        ErrorCode::None
    );
}
