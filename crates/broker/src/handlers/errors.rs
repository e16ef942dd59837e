//! Typed errors of the layers below, mapped to Kafka error codes: the one
//! place where the broker chooses codes.

use strom_controller::error::{ControllerError, ProducerIdError, RuntimeError};
use strom_coordinator::GroupError;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::records::RecordError;
use strom_replication::{FetchSessionError, ReplicationError};
use strom_security::error::SaslFailure;
use strom_storage::error::{AppendError, BatchError, LogError, ReadError, RecordRefusal};

use crate::replica_manager::{AppendFailure, PartitionError, PartitionOffline, ReadFailure};

/// The code for a failed append.
pub fn append_error_code(error: &AppendFailure) -> ErrorCode {
    match error {
        AppendFailure::Replication(error) => replication_error_code(error),
        AppendFailure::Flush(_) => ErrorCode::KafkaStorageError,
        AppendFailure::Offline(error) => offline_error_code(error),
        AppendFailure::Log(error) => match error {
            AppendError::Empty => ErrorCode::InvalidRecord,
            AppendError::Corrupt(BatchError::UnsupportedMagic { .. }) => {
                ErrorCode::UnsupportedForMessageFormat
            }
            AppendError::Corrupt(_) => ErrorCode::CorruptMessage,
            AppendError::InvalidClientBatch { .. } => ErrorCode::InvalidRecord,
            AppendError::MalformedRecords { source, .. } => malformed_records_code(source),
            AppendError::RecordsRefused { refusals } => refused_records_code(refusals),
            AppendError::Conversion { .. } => ErrorCode::UnknownServerError,
            AppendError::RecordTooLarge { .. } => ErrorCode::MessageTooLarge,
            AppendError::AppendTooLarge { .. } => ErrorCode::RecordListTooLarge,
            AppendError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
            AppendError::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            AppendError::TransactionCoordinatorFenced { .. } => {
                ErrorCode::TransactionCoordinatorFenced
            }
            AppendError::InvalidTxnState { .. } | AppendError::UnverifiedTransaction { .. } => {
                ErrorCode::InvalidTxnState
            }
            AppendError::InvalidControlBatch { .. } => ErrorCode::CorruptMessage,
            AppendError::OffsetsNotIncreasing { .. } => ErrorCode::InvalidRecord,
            AppendError::Io(_)
            | AppendError::Index(_)
            | AppendError::Checkpoint(_)
            | AppendError::Log(_) => ErrorCode::KafkaStorageError,
            #[allow(unreachable_patterns)]
            _ => ErrorCode::UnknownServerError,
        },
    }
}

/// Kafka's code for records that do not parse: INVALID_RECORD (its record
/// iterator's `InvalidRecordException`), CORRUPT_MESSAGE when the
/// compressed data itself is bad or decompresses past the cap.
fn malformed_records_code(error: &RecordError) -> ErrorCode {
    match error {
        RecordError::Decompression { .. } | RecordError::DecompressedTooLarge { .. } => {
            ErrorCode::CorruptMessage
        }
        _ => ErrorCode::InvalidRecord,
    }
}

/// Kafka's `processRecordErrors`: INVALID_TIMESTAMP when any record's
/// timestamp was refused, INVALID_RECORD otherwise.
pub fn refused_records_code(refusals: &[RecordRefusal]) -> ErrorCode {
    if refusals.iter().any(|refusal| refusal.reason.is_timestamp()) {
        ErrorCode::InvalidTimestamp
    } else {
        ErrorCode::InvalidRecord
    }
}

/// The code for a replication refusal.
pub fn replication_error_code(error: &ReplicationError) -> ErrorCode {
    match error {
        ReplicationError::NotEnoughReplicas { .. } => ErrorCode::NotEnoughReplicas,
        ReplicationError::NotEnoughReplicasAfterAppend { .. } => {
            ErrorCode::NotEnoughReplicasAfterAppend
        }
        ReplicationError::UnknownReplica { .. } | ReplicationError::NotLeader => {
            ErrorCode::NotLeaderOrFollower
        }
        ReplicationError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
        ReplicationError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
    }
}

/// The code for a partition taken offline by a poisoned lock: Kafka's
/// answer for a partition whose log directory failed.
pub fn offline_error_code(_error: &PartitionOffline) -> ErrorCode {
    ErrorCode::KafkaStorageError
}

/// The code for a request refused before its partition's log was asked.
pub fn partition_error_code(error: &PartitionError) -> ErrorCode {
    match error {
        PartitionError::Replication(error) => replication_error_code(error),
        PartitionError::Offline(error) => offline_error_code(error),
    }
}

/// The code for a failed read.
pub fn read_error_code(error: &ReadFailure) -> ErrorCode {
    match error {
        ReadFailure::Log(ReadError::OffsetOutOfRange { .. }) => ErrorCode::OffsetOutOfRange,
        ReadFailure::Offline(error) => offline_error_code(error),
        #[allow(unreachable_patterns)]
        ReadFailure::Log(_) => ErrorCode::KafkaStorageError,
    }
}

/// The code for a per-item controller error.
pub fn controller_error_code(error: &ControllerError) -> ErrorCode {
    match error {
        ControllerError::InvalidTopicName { .. } => ErrorCode::InvalidTopicException,
        ControllerError::TopicAlreadyExists { .. } => ErrorCode::TopicAlreadyExists,
        ControllerError::UnknownTopic { .. } => ErrorCode::UnknownTopicOrPartition,
        ControllerError::UnknownTopicId { .. } => ErrorCode::UnknownTopicId,
        ControllerError::UnknownPartition { .. } => ErrorCode::UnknownTopicOrPartition,
        ControllerError::DuplicateTopic { .. } => ErrorCode::InvalidRequest,
        ControllerError::InvalidPartitions { .. } => ErrorCode::InvalidPartitions,
        ControllerError::InvalidReplicationFactor { .. } => ErrorCode::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment { .. } => ErrorCode::InvalidReplicaAssignment,
        ControllerError::InvalidConfig { .. } => ErrorCode::InvalidConfig,
        ControllerError::UnsupportedConfigResource { .. } => ErrorCode::InvalidRequest,
        ControllerError::ReadOnlyConfig { .. } | ControllerError::PerBrokerConfig { .. } => {
            ErrorCode::InvalidRequest
        }
        ControllerError::NoBrokersAvailable => ErrorCode::InvalidReplicationFactor,
        ControllerError::StaleBrokerEpoch { .. } => ErrorCode::StaleBrokerEpoch,
        ControllerError::ProducerIdsExhausted { .. } => ErrorCode::UnknownServerError,
        ControllerError::BrokerNotRegistered { .. } => ErrorCode::BrokerIdNotRegistered,
        ControllerError::DuplicateBrokerRegistration { .. } => {
            ErrorCode::DuplicateBrokerRegistration
        }
        ControllerError::AssignmentWithCounts { .. } => ErrorCode::InvalidRequest,
        ControllerError::ElectionNotNeeded { .. } => ErrorCode::ElectionNotNeeded,
        ControllerError::NotLeader { .. } => ErrorCode::NotLeaderOrFollower,
        ControllerError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
        ControllerError::InvalidUpdateVersion { .. } => ErrorCode::InvalidUpdateVersion,
        ControllerError::IneligibleReplica { .. } => ErrorCode::IneligibleReplica,
        ControllerError::InvalidIsr { .. } => ErrorCode::InvalidRequest,
        ControllerError::PreferredLeaderNotAvailable { .. } => {
            ErrorCode::PreferredLeaderNotAvailable
        }
        ControllerError::EligibleLeadersNotAvailable { .. } => {
            ErrorCode::EligibleLeadersNotAvailable
        }
        ControllerError::NoReassignmentInProgress { .. } => ErrorCode::NoReassignmentInProgress,
    }
}

/// The code for a controller that could not run a command at all.
pub fn runtime_error_code(error: &RuntimeError) -> ErrorCode {
    match error {
        // The quorum could not commit in time (or has no majority): the
        // outcome is unknown, as for any request that timed out.
        RuntimeError::QuorumTimeout { .. } | RuntimeError::NoMajority => ErrorCode::RequestTimedOut,
        // Not (or no longer) the active controller, a command planned on a
        // stale image, or a controller that stopped after a failure to
        // persist: clients refresh metadata and retry.
        _ => ErrorCode::NotController,
    }
}

/// The code of DescribeQuorum's metadata partition when the controller
/// could not be asked: Kafka's NOT_LEADER_OR_FOLLOWER when no active
/// controller answered (the client retries), REQUEST_TIMED_OUT when the
/// quorum did not answer in time.
pub fn describe_quorum_error_code(error: &RuntimeError) -> ErrorCode {
    match error {
        RuntimeError::QuorumTimeout { .. } | RuntimeError::NoMajority => ErrorCode::RequestTimedOut,
        _ => ErrorCode::NotLeaderOrFollower,
    }
}

/// The code for a Fetch that does not fit the fetch session it names.
pub fn fetch_session_error_code(error: &FetchSessionError) -> ErrorCode {
    match error {
        FetchSessionError::IdNotFound { .. } => ErrorCode::FetchSessionIdNotFound,
        FetchSessionError::InvalidEpoch { .. } => ErrorCode::InvalidFetchSessionEpoch,
    }
}

/// The code for a DeleteRecords that the log refused.
pub fn delete_records_error_code(error: &LogError) -> ErrorCode {
    match error {
        LogError::LogStartBeyondLimit { .. } => ErrorCode::OffsetOutOfRange,
        #[allow(unreachable_patterns)]
        _ => ErrorCode::KafkaStorageError,
    }
}

/// The code for a producer id that could not be allocated.
pub fn producer_id_error_code(error: &ProducerIdError) -> ErrorCode {
    match error {
        // The counter file could not be written: a storage problem the
        // client may retry.
        ProducerIdError::Io { .. } | ProducerIdError::Corrupt { .. } => {
            ErrorCode::KafkaStorageError
        }
        ProducerIdError::Exhausted
        | ProducerIdError::Refused {
            source: ControllerError::ProducerIdsExhausted { .. },
        } => ErrorCode::UnknownServerError,
        // No block from the controller yet (an election, a partition, a
        // broker epoch being renewed): Kafka answers so, and clients retry.
        ProducerIdError::Controller { .. } | ProducerIdError::Refused { .. } => {
            ErrorCode::CoordinatorLoadInProgress
        }
    }
}

/// The code for a group coordinator refusal (each [`GroupError`] variant
/// documents the Kafka code it stands for).
pub fn group_error_code(error: &GroupError) -> ErrorCode {
    match error {
        GroupError::UnknownMemberId => ErrorCode::UnknownMemberId,
        GroupError::IllegalGeneration { .. } => ErrorCode::IllegalGeneration,
        GroupError::RebalanceInProgress => ErrorCode::RebalanceInProgress,
        GroupError::FencedInstanceId => ErrorCode::FencedInstanceId,
        GroupError::MemberIdRequired { .. } => ErrorCode::MemberIdRequired,
        GroupError::GroupMaxSizeReached { .. } => ErrorCode::GroupMaxSizeReached,
        GroupError::InconsistentGroupProtocol => ErrorCode::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout { .. } => ErrorCode::InvalidSessionTimeout,
        GroupError::InvalidGroupId => ErrorCode::InvalidGroupId,
        GroupError::CoordinatorLoadInProgress { .. } => ErrorCode::CoordinatorLoadInProgress,
        GroupError::NotCoordinator { .. } => ErrorCode::NotCoordinator,
        GroupError::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
        GroupError::GroupIdNotFound => ErrorCode::GroupIdNotFound,
        GroupError::NonEmptyGroup => ErrorCode::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ErrorCode::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge { .. } => ErrorCode::OffsetMetadataTooLarge,
        GroupError::UnstableOffsetCommit => ErrorCode::UnstableOffsetCommit,
        GroupError::InvalidProducer { .. } => ErrorCode::InvalidProducerIdMapping,
        GroupError::LogAppendFailed { source } => log_error_code(source),
        GroupError::FencedMemberEpoch { .. } => ErrorCode::FencedMemberEpoch,
        GroupError::StaleMemberEpoch { .. } => ErrorCode::StaleMemberEpoch,
        GroupError::UnreleasedInstanceId { .. } => ErrorCode::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor { .. } => ErrorCode::UnsupportedAssignor,
        GroupError::InvalidRequest { .. } => ErrorCode::InvalidRequest,
        GroupError::InvalidRegularExpression => ErrorCode::InvalidRegularExpression,
    }
}

/// The code of a `__consumer_offsets` append that failed or was not
/// committed, as Kafka's coordinator maps the errors of its `acks=-1`
/// appends: a partition not led here is NOT_COORDINATOR (the client finds
/// the new coordinator), a commit that timed out REQUEST_TIMED_OUT, and
/// too few in-sync replicas (before or after the append) or a storage
/// failure COORDINATOR_NOT_AVAILABLE.
fn log_error_code(error: &strom_coordinator::LogError) -> ErrorCode {
    use strom_coordinator::LogError;
    match error {
        LogError::NotLeader { .. } => ErrorCode::NotCoordinator,
        LogError::ReplicationTimeout { .. } => ErrorCode::RequestTimedOut,
        LogError::NotEnoughReplicas { .. }
        | LogError::UnknownPartition { .. }
        | LogError::Backend { .. } => ErrorCode::CoordinatorNotAvailable,
    }
}

/// The code of a per-item group result (`NONE` for success).
pub fn group_result_code(result: &Result<(), GroupError>) -> i16 {
    match result {
        Ok(()) => ErrorCode::None.code(),
        Err(error) => group_error_code(error).code(),
    }
}

/// The code for a refused SASL step (SaslHandshake, SaslAuthenticate).
pub fn sasl_failure_code(failure: &SaslFailure) -> ErrorCode {
    match failure {
        SaslFailure::IllegalState { .. } => ErrorCode::IllegalSaslState,
        SaslFailure::UnsupportedMechanism { .. } => ErrorCode::UnsupportedSaslMechanism,
        SaslFailure::Failed { .. } => ErrorCode::SaslAuthenticationFailed,
    }
}

#[cfg(test)]
mod tests {
    use strom_storage::TopicPartition;

    use super::*;

    fn offline() -> PartitionOffline {
        PartitionOffline {
            topic_partition: TopicPartition::new("broken".to_owned(), 0),
        }
    }

    #[test]
    fn an_offline_partition_answers_kafka_storage_error_everywhere() {
        let storage = ErrorCode::KafkaStorageError;
        assert_eq!(
            append_error_code(&AppendFailure::Offline(offline())),
            storage
        );
        assert_eq!(read_error_code(&ReadFailure::Offline(offline())), storage);
        assert_eq!(
            partition_error_code(&PartitionError::Offline(offline())),
            storage
        );
        let flush_failed = AppendError::Log(LogError::Offline {
            topic_partition: TopicPartition::new("broken".to_owned(), 0),
            path: "00000000000000000000.log".into(),
            kind: std::io::ErrorKind::Other,
        });
        assert_eq!(
            append_error_code(&AppendFailure::Log(flush_failed)),
            storage
        );
    }

    #[test]
    fn offsets_log_failures_map_as_kafka_s_coordinator_maps_them() {
        use strom_coordinator::LogError as OffsetsLogError;
        let code = |source| group_error_code(&GroupError::LogAppendFailed { source });
        assert_eq!(
            code(OffsetsLogError::NotLeader { partition: 3 }),
            ErrorCode::NotCoordinator
        );
        assert_eq!(
            code(OffsetsLogError::ReplicationTimeout {
                partition: 3,
                timeout_ms: 5000
            }),
            ErrorCode::RequestTimedOut
        );
        for after_append in [false, true] {
            assert_eq!(
                code(OffsetsLogError::NotEnoughReplicas {
                    partition: 3,
                    in_sync: 1,
                    after_append
                }),
                ErrorCode::CoordinatorNotAvailable
            );
        }
    }

    #[test]
    fn sasl_failures_answer_kafkas_sasl_codes() {
        let illegal = SaslFailure::IllegalState { reason: "x" };
        assert_eq!(sasl_failure_code(&illegal), ErrorCode::IllegalSaslState);
        let unsupported = SaslFailure::UnsupportedMechanism {
            mechanism: "GSSAPI".to_owned(),
        };
        assert_eq!(
            sasl_failure_code(&unsupported),
            ErrorCode::UnsupportedSaslMechanism
        );
        let failed = SaslFailure::Failed {
            mechanism: "PLAIN".to_owned(),
            cause: strom_protocol::sasl::SaslError::InvalidCredentials,
        };
        assert_eq!(
            sasl_failure_code(&failed),
            ErrorCode::SaslAuthenticationFailed
        );
    }
}

/// Which code a fenced producer gets: `PRODUCER_FENCED` from the request
/// versions of KIP-588 on, `INVALID_PRODUCER_EPOCH` before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedCode {
    /// `PRODUCER_FENCED`.
    ProducerFenced,
    /// `INVALID_PRODUCER_EPOCH`.
    InvalidProducerEpoch,
}

impl FencedCode {
    /// `PRODUCER_FENCED` when `api_version` is at least `first_version`.
    pub fn for_version(api_version: i16, first_version: i16) -> FencedCode {
        if api_version >= first_version {
            FencedCode::ProducerFenced
        } else {
            FencedCode::InvalidProducerEpoch
        }
    }

    fn code(self) -> ErrorCode {
        match self {
            FencedCode::ProducerFenced => ErrorCode::ProducerFenced,
            FencedCode::InvalidProducerEpoch => ErrorCode::InvalidProducerEpoch,
        }
    }
}

/// The code for a transaction coordinator refusal (each variant documents
/// the Kafka code it stands for).
pub fn transaction_error_code(
    error: &strom_transactions::error::CoordinatorError,
    fenced: FencedCode,
) -> ErrorCode {
    use strom_transactions::error::{CoordinatorError, TransactionError};
    match error {
        CoordinatorError::NotCoordinator { .. } => ErrorCode::NotCoordinator,
        CoordinatorError::LoadInProgress { .. } => ErrorCode::CoordinatorLoadInProgress,
        CoordinatorError::Concurrent { .. } => ErrorCode::ConcurrentTransactions,
        CoordinatorError::InvalidTransactionalId | CoordinatorError::Encode(_) => {
            ErrorCode::InvalidRequest
        }
        CoordinatorError::UnknownTransactionalId => ErrorCode::InvalidProducerIdMapping,
        CoordinatorError::Transaction(error) => match error {
            TransactionError::ConcurrentTransactions { .. } => ErrorCode::ConcurrentTransactions,
            TransactionError::ProducerFenced { .. } => fenced.code(),
            TransactionError::InvalidProducerIdMapping { .. } => {
                ErrorCode::InvalidProducerIdMapping
            }
            TransactionError::InvalidTxnState { .. } => ErrorCode::InvalidTxnState,
            TransactionError::InvalidTransactionTimeout { .. } => {
                ErrorCode::InvalidTransactionTimeout
            }
            TransactionError::EpochExhausted { .. } | TransactionError::IllegalTransition(_) => {
                ErrorCode::UnknownServerError
            }
        },
        CoordinatorError::Load { .. }
        | CoordinatorError::WriteFailed { .. }
        | CoordinatorError::Offline
        | CoordinatorError::ProducerIdUnavailable { .. } => ErrorCode::CoordinatorNotAvailable,
    }
}
