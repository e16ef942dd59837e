//! Kafka's numeric error codes as a typed enum.
//!
//! Every code that Kafka 4 defines (the "Error Codes" table of Kafka's protocol
//! guide, `-1` to `133`) has a variant; a code this crate does not know is kept
//! as [`ErrorCode::Unknown`] with its number, never a panic, so a response from
//! a newer broker still decodes. [`ErrorCode::is_retriable`] follows the guide's
//! "Retriable" column, and [`Display`](std::fmt::Display) prints Kafka's own
//! name (`NOT_LEADER_OR_FOLLOWER`), which is what operators search logs for.

use std::fmt;

/// Declares the `ErrorCode` enum and its lookups from one table of
/// `(Variant, code, "KAFKA_NAME", retriable)` rows, so the four facts of a code
/// stay on one line and cannot drift apart.
macro_rules! error_codes {
    ($( ($variant:ident, $code:literal, $name:literal, $retriable:literal) ),* $(,)?) => {
        /// A Kafka protocol error code.
        ///
        /// Variants carry Kafka's numeric code ([`ErrorCode::code`]) and name
        /// (`Display`). [`ErrorCode::None`] is success.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($code), ").")]
                $variant,
            )*
            /// A code this crate does not know, kept as received.
            Unknown(i16),
        }

        impl ErrorCode {
            /// Every known error code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The numeric code sent on the wire.
            pub const fn code(self) -> i16 {
                match self {
                    $(ErrorCode::$variant => $code,)*
                    ErrorCode::Unknown(code) => code,
                }
            }

            /// The error code for a number read off the wire; numbers this
            /// crate does not know become [`ErrorCode::Unknown`].
            pub const fn from_code(code: i16) -> ErrorCode {
                match code {
                    $($code => ErrorCode::$variant,)*
                    other => ErrorCode::Unknown(other),
                }
            }

            /// Kafka's name for the code (`NOT_LEADER_OR_FOLLOWER`), or
            /// `UNKNOWN` for a code this crate does not know.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                    ErrorCode::Unknown(_) => "UNKNOWN",
                }
            }

            /// Whether Kafka's protocol guide marks the error retriable: the
            /// client may send the same request again (usually after
            /// refreshing metadata). Unknown codes are not retriable, as in
            /// the Java client.
            pub const fn is_retriable(self) -> bool {
                match self {
                    $(ErrorCode::$variant => $retriable,)*
                    ErrorCode::Unknown(_) => false,
                }
            }
        }
    };
}

error_codes! {
    (UnknownServerError, -1, "UNKNOWN_SERVER_ERROR", false),
    (None, 0, "NONE", false),
    (OffsetOutOfRange, 1, "OFFSET_OUT_OF_RANGE", false),
    (CorruptMessage, 2, "CORRUPT_MESSAGE", true),
    (UnknownTopicOrPartition, 3, "UNKNOWN_TOPIC_OR_PARTITION", true),
    (InvalidFetchSize, 4, "INVALID_FETCH_SIZE", false),
    (LeaderNotAvailable, 5, "LEADER_NOT_AVAILABLE", true),
    (NotLeaderOrFollower, 6, "NOT_LEADER_OR_FOLLOWER", true),
    (RequestTimedOut, 7, "REQUEST_TIMED_OUT", true),
    (BrokerNotAvailable, 8, "BROKER_NOT_AVAILABLE", false),
    (ReplicaNotAvailable, 9, "REPLICA_NOT_AVAILABLE", true),
    (MessageTooLarge, 10, "MESSAGE_TOO_LARGE", false),
    (StaleControllerEpoch, 11, "STALE_CONTROLLER_EPOCH", false),
    (OffsetMetadataTooLarge, 12, "OFFSET_METADATA_TOO_LARGE", false),
    (NetworkException, 13, "NETWORK_EXCEPTION", true),
    (CoordinatorLoadInProgress, 14, "COORDINATOR_LOAD_IN_PROGRESS", true),
    (CoordinatorNotAvailable, 15, "COORDINATOR_NOT_AVAILABLE", true),
    (NotCoordinator, 16, "NOT_COORDINATOR", true),
    (InvalidTopicException, 17, "INVALID_TOPIC_EXCEPTION", false),
    (RecordListTooLarge, 18, "RECORD_LIST_TOO_LARGE", false),
    (NotEnoughReplicas, 19, "NOT_ENOUGH_REPLICAS", true),
    (NotEnoughReplicasAfterAppend, 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true),
    (InvalidRequiredAcks, 21, "INVALID_REQUIRED_ACKS", false),
    (IllegalGeneration, 22, "ILLEGAL_GENERATION", false),
    (InconsistentGroupProtocol, 23, "INCONSISTENT_GROUP_PROTOCOL", false),
    (InvalidGroupId, 24, "INVALID_GROUP_ID", false),
    (UnknownMemberId, 25, "UNKNOWN_MEMBER_ID", false),
    (InvalidSessionTimeout, 26, "INVALID_SESSION_TIMEOUT", false),
    (RebalanceInProgress, 27, "REBALANCE_IN_PROGRESS", false),
    (InvalidCommitOffsetSize, 28, "INVALID_COMMIT_OFFSET_SIZE", false),
    (TopicAuthorizationFailed, 29, "TOPIC_AUTHORIZATION_FAILED", false),
    (GroupAuthorizationFailed, 30, "GROUP_AUTHORIZATION_FAILED", false),
    (ClusterAuthorizationFailed, 31, "CLUSTER_AUTHORIZATION_FAILED", false),
    (InvalidTimestamp, 32, "INVALID_TIMESTAMP", false),
    (UnsupportedSaslMechanism, 33, "UNSUPPORTED_SASL_MECHANISM", false),
    (IllegalSaslState, 34, "ILLEGAL_SASL_STATE", false),
    (UnsupportedVersion, 35, "UNSUPPORTED_VERSION", false),
    (TopicAlreadyExists, 36, "TOPIC_ALREADY_EXISTS", false),
    (InvalidPartitions, 37, "INVALID_PARTITIONS", false),
    (InvalidReplicationFactor, 38, "INVALID_REPLICATION_FACTOR", false),
    (InvalidReplicaAssignment, 39, "INVALID_REPLICA_ASSIGNMENT", false),
    (InvalidConfig, 40, "INVALID_CONFIG", false),
    (NotController, 41, "NOT_CONTROLLER", true),
    (InvalidRequest, 42, "INVALID_REQUEST", false),
    (UnsupportedForMessageFormat, 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", false),
    (PolicyViolation, 44, "POLICY_VIOLATION", false),
    (OutOfOrderSequenceNumber, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false),
    (DuplicateSequenceNumber, 46, "DUPLICATE_SEQUENCE_NUMBER", false),
    (InvalidProducerEpoch, 47, "INVALID_PRODUCER_EPOCH", false),
    (InvalidTxnState, 48, "INVALID_TXN_STATE", false),
    (InvalidProducerIdMapping, 49, "INVALID_PRODUCER_ID_MAPPING", false),
    (InvalidTransactionTimeout, 50, "INVALID_TRANSACTION_TIMEOUT", false),
    (ConcurrentTransactions, 51, "CONCURRENT_TRANSACTIONS", false),
    (TransactionCoordinatorFenced, 52, "TRANSACTION_COORDINATOR_FENCED", false),
    (TransactionalIdAuthorizationFailed, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false),
    (SecurityDisabled, 54, "SECURITY_DISABLED", false),
    (OperationNotAttempted, 55, "OPERATION_NOT_ATTEMPTED", false),
    (KafkaStorageError, 56, "KAFKA_STORAGE_ERROR", true),
    (LogDirNotFound, 57, "LOG_DIR_NOT_FOUND", false),
    (SaslAuthenticationFailed, 58, "SASL_AUTHENTICATION_FAILED", false),
    (UnknownProducerId, 59, "UNKNOWN_PRODUCER_ID", false),
    (ReassignmentInProgress, 60, "REASSIGNMENT_IN_PROGRESS", false),
    (DelegationTokenAuthDisabled, 61, "DELEGATION_TOKEN_AUTH_DISABLED", false),
    (DelegationTokenNotFound, 62, "DELEGATION_TOKEN_NOT_FOUND", false),
    (DelegationTokenOwnerMismatch, 63, "DELEGATION_TOKEN_OWNER_MISMATCH", false),
    (DelegationTokenRequestNotAllowed, 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", false),
    (DelegationTokenAuthorizationFailed, 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", false),
    (DelegationTokenExpired, 66, "DELEGATION_TOKEN_EXPIRED", false),
    (InvalidPrincipalType, 67, "INVALID_PRINCIPAL_TYPE", false),
    (NonEmptyGroup, 68, "NON_EMPTY_GROUP", false),
    (GroupIdNotFound, 69, "GROUP_ID_NOT_FOUND", false),
    (FetchSessionIdNotFound, 70, "FETCH_SESSION_ID_NOT_FOUND", true),
    (InvalidFetchSessionEpoch, 71, "INVALID_FETCH_SESSION_EPOCH", true),
    (ListenerNotFound, 72, "LISTENER_NOT_FOUND", true),
    (TopicDeletionDisabled, 73, "TOPIC_DELETION_DISABLED", false),
    (FencedLeaderEpoch, 74, "FENCED_LEADER_EPOCH", true),
    (UnknownLeaderEpoch, 75, "UNKNOWN_LEADER_EPOCH", true),
    (UnsupportedCompressionType, 76, "UNSUPPORTED_COMPRESSION_TYPE", false),
    (StaleBrokerEpoch, 77, "STALE_BROKER_EPOCH", false),
    (OffsetNotAvailable, 78, "OFFSET_NOT_AVAILABLE", true),
    (MemberIdRequired, 79, "MEMBER_ID_REQUIRED", false),
    (PreferredLeaderNotAvailable, 80, "PREFERRED_LEADER_NOT_AVAILABLE", true),
    (GroupMaxSizeReached, 81, "GROUP_MAX_SIZE_REACHED", false),
    (FencedInstanceId, 82, "FENCED_INSTANCE_ID", false),
    (EligibleLeadersNotAvailable, 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true),
    (ElectionNotNeeded, 84, "ELECTION_NOT_NEEDED", true),
    (NoReassignmentInProgress, 85, "NO_REASSIGNMENT_IN_PROGRESS", false),
    (GroupSubscribedToTopic, 86, "GROUP_SUBSCRIBED_TO_TOPIC", false),
    (InvalidRecord, 87, "INVALID_RECORD", false),
    (UnstableOffsetCommit, 88, "UNSTABLE_OFFSET_COMMIT", true),
    (ThrottlingQuotaExceeded, 89, "THROTTLING_QUOTA_EXCEEDED", true),
    (ProducerFenced, 90, "PRODUCER_FENCED", false),
    (ResourceNotFound, 91, "RESOURCE_NOT_FOUND", false),
    (DuplicateResource, 92, "DUPLICATE_RESOURCE", false),
    (UnacceptableCredential, 93, "UNACCEPTABLE_CREDENTIAL", false),
    (InconsistentVoterSet, 94, "INCONSISTENT_VOTER_SET", false),
    (InvalidUpdateVersion, 95, "INVALID_UPDATE_VERSION", false),
    (FeatureUpdateFailed, 96, "FEATURE_UPDATE_FAILED", false),
    (PrincipalDeserializationFailure, 97, "PRINCIPAL_DESERIALIZATION_FAILURE", false),
    (SnapshotNotFound, 98, "SNAPSHOT_NOT_FOUND", false),
    (PositionOutOfRange, 99, "POSITION_OUT_OF_RANGE", false),
    (UnknownTopicId, 100, "UNKNOWN_TOPIC_ID", true),
    (DuplicateBrokerRegistration, 101, "DUPLICATE_BROKER_REGISTRATION", false),
    (BrokerIdNotRegistered, 102, "BROKER_ID_NOT_REGISTERED", false),
    (InconsistentTopicId, 103, "INCONSISTENT_TOPIC_ID", true),
    (InconsistentClusterId, 104, "INCONSISTENT_CLUSTER_ID", false),
    (TransactionalIdNotFound, 105, "TRANSACTIONAL_ID_NOT_FOUND", false),
    (FetchSessionTopicIdError, 106, "FETCH_SESSION_TOPIC_ID_ERROR", true),
    (IneligibleReplica, 107, "INELIGIBLE_REPLICA", false),
    (NewLeaderElected, 108, "NEW_LEADER_ELECTED", false),
    (OffsetMovedToTieredStorage, 109, "OFFSET_MOVED_TO_TIERED_STORAGE", false),
    (FencedMemberEpoch, 110, "FENCED_MEMBER_EPOCH", false),
    (UnreleasedInstanceId, 111, "UNRELEASED_INSTANCE_ID", false),
    (UnsupportedAssignor, 112, "UNSUPPORTED_ASSIGNOR", false),
    (StaleMemberEpoch, 113, "STALE_MEMBER_EPOCH", false),
    (MismatchedEndpointType, 114, "MISMATCHED_ENDPOINT_TYPE", false),
    (UnsupportedEndpointType, 115, "UNSUPPORTED_ENDPOINT_TYPE", false),
    (UnknownControllerId, 116, "UNKNOWN_CONTROLLER_ID", false),
    (UnknownSubscriptionId, 117, "UNKNOWN_SUBSCRIPTION_ID", false),
    (TelemetryTooLarge, 118, "TELEMETRY_TOO_LARGE", false),
    (InvalidRegistration, 119, "INVALID_REGISTRATION", false),
    (TransactionAbortable, 120, "TRANSACTION_ABORTABLE", false),
    (InvalidRecordState, 121, "INVALID_RECORD_STATE", false),
    (ShareSessionNotFound, 122, "SHARE_SESSION_NOT_FOUND", true),
    (InvalidShareSessionEpoch, 123, "INVALID_SHARE_SESSION_EPOCH", true),
    (FencedStateEpoch, 124, "FENCED_STATE_EPOCH", false),
    (InvalidVoterKey, 125, "INVALID_VOTER_KEY", false),
    (DuplicateVoter, 126, "DUPLICATE_VOTER", false),
    (VoterNotFound, 127, "VOTER_NOT_FOUND", false),
    (InvalidRegularExpression, 128, "INVALID_REGULAR_EXPRESSION", false),
    (RebootstrapRequired, 129, "REBOOTSTRAP_REQUIRED", false),
    (StreamsInvalidTopology, 130, "STREAMS_INVALID_TOPOLOGY", false),
    (StreamsInvalidTopologyEpoch, 131, "STREAMS_INVALID_TOPOLOGY_EPOCH", false),
    (StreamsTopologyFenced, 132, "STREAMS_TOPOLOGY_FENCED", false),
    (ShareSessionLimitReached, 133, "SHARE_SESSION_LIMIT_REACHED", true),
}

impl ErrorCode {
    /// Whether this is [`ErrorCode::None`], Kafka's "no error".
    pub const fn is_none(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unknown(code) => write!(formatter, "UNKNOWN_ERROR_CODE({code})"),
            known => formatter.write_str(known.name()),
        }
    }
}

impl From<i16> for ErrorCode {
    fn from(code: i16) -> Self {
        ErrorCode::from_code(code)
    }
}

impl From<ErrorCode> for i16 {
    fn from(error: ErrorCode) -> Self {
        error.code()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn codes_are_contiguous_from_minus_one_to_133() {
        let codes: Vec<i16> = ErrorCode::ALL.iter().map(|error| error.code()).collect();
        let expected: Vec<i16> = (-1..=133).collect();
        assert_eq!(codes, expected);
    }

    #[test]
    fn every_known_code_round_trips() {
        for &error in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(error.code()), error);
            assert!(!matches!(error, ErrorCode::Unknown(_)));
        }
    }

    #[test]
    fn unknown_codes_are_kept() {
        for code in [-2, 134, 1000, i16::MIN, i16::MAX] {
            let error = ErrorCode::from_code(code);
            assert_eq!(error, ErrorCode::Unknown(code));
            assert_eq!(error.code(), code);
            assert!(!error.is_retriable());
        }
        assert_eq!(
            ErrorCode::from_code(999).to_string(),
            "UNKNOWN_ERROR_CODE(999)"
        );
    }

    #[test]
    fn display_uses_kafka_names() {
        assert_eq!(
            ErrorCode::from_code(6).to_string(),
            "NOT_LEADER_OR_FOLLOWER"
        );
        assert_eq!(ErrorCode::from_code(0).to_string(), "NONE");
        assert_eq!(ErrorCode::from_code(-1).to_string(), "UNKNOWN_SERVER_ERROR");
        assert_eq!(ErrorCode::from_code(35).to_string(), "UNSUPPORTED_VERSION");
    }

    #[test]
    fn retriable_follows_the_protocol_guide() {
        let retriable = [
            2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 56, 74, 75, 100,
        ];
        for code in retriable {
            assert!(ErrorCode::from_code(code).is_retriable(), "code {code}");
        }
        let fatal = [-1, 0, 1, 8, 10, 35, 36, 42, 87, 90];
        for code in fatal {
            assert!(!ErrorCode::from_code(code).is_retriable(), "code {code}");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|error| error.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
    }
}
