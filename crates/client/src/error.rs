//! Errors of the client core.

use std::io;

use strom_config::{InvalidValue, ValueProblem};
use strom_protocol::{ErrorCode, FrameError, MessageError};

/// A request could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// TLS could not be set up.
    #[error("TLS: {reason}")]
    Tls {
        /// What went wrong.
        reason: &'static str,
    },
    /// A PEM file of `ssl.ca.location`, `ssl.certificate.location` or
    /// `ssl.key.location` is missing or holds nothing usable.
    #[error("cannot use the PEM file {path}")]
    TlsFile {
        /// The file.
        path: std::path::PathBuf,
    },
    /// SASL authentication failed.
    #[error("SASL {mechanism} authentication with {address} failed")]
    Authentication {
        /// The broker.
        address: String,
        /// The mechanism.
        mechanism: String,
        /// What failed: the broker's refusal or the client's check.
        #[source]
        cause: Box<strom_protocol::sasl::client::SaslClientError>,
    },
    /// The TCP connection to a broker could not be opened.
    #[error("cannot connect to {address}")]
    Connect {
        /// The `host:port` dialled.
        address: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// The connection failed or was closed while the request was in flight.
    #[error("connection to {address} lost")]
    Disconnected {
        /// The broker's `host:port`.
        address: String,
    },
    /// No response arrived within the request timeout; the connection was
    /// closed (responses are matched in order, so a late one cannot be used).
    #[error("request {api_key} to {address} timed out after {timeout_ms} ms")]
    Timeout {
        /// The API key of the request.
        api_key: i16,
        /// The broker's `host:port`.
        address: String,
        /// The timeout that expired.
        timeout_ms: u64,
    },
    /// The broker answered with an error code.
    #[error("broker returned {code}")]
    Broker {
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The broker and this client share no version of an API.
    #[error("broker {address} supports no common version of API key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The broker's `host:port`.
        address: String,
    },
    /// A message could not be encoded, or a response could not be decoded.
    #[error("protocol error with {address}")]
    Protocol {
        /// The broker's `host:port`.
        address: String,
        /// The codec error.
        #[source]
        source: MessageError,
    },
    /// A response frame was malformed.
    #[error("bad frame from {address}")]
    Frame {
        /// The broker's `host:port`.
        address: String,
        /// The framing error.
        #[source]
        source: FrameError,
    },
    /// A response carried a correlation id other than the oldest pending one.
    #[error("response from {address} has correlation id {received}, expected {expected}")]
    CorrelationMismatch {
        /// The broker's `host:port`.
        address: String,
        /// The correlation id expected.
        expected: i32,
        /// The correlation id received.
        received: i32,
    },
    /// A response arrived for a different API than the request.
    #[error("unexpected response to API key {api_key}")]
    UnexpectedResponse {
        /// The API key of the request.
        api_key: i16,
    },
    /// None of the bootstrap servers could be reached.
    #[error("no bootstrap server reachable ({attempted} tried)")]
    NoBrokerAvailable {
        /// How many addresses were tried.
        attempted: usize,
    },
    /// A broker id that the current metadata does not know.
    #[error("broker {broker_id} is not in the cluster metadata")]
    UnknownBroker {
        /// The broker id.
        broker_id: i32,
    },
    /// A topic or partition the metadata does not know, or without leader.
    #[error("no leader known for {topic}-{partition}")]
    LeaderNotAvailable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ClientError {
    /// Whether retrying (after a metadata refresh or a reconnect) may
    /// succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Disconnected { .. }
            | ClientError::Timeout { .. }
            | ClientError::NoBrokerAvailable { .. }
            | ClientError::UnknownBroker { .. }
            | ClientError::LeaderNotAvailable { .. } => true,
            ClientError::Broker { code } => code.is_retriable(),
            _ => false,
        }
    }
}

/// An error that may go away when the call is repeated (after a metadata
/// refresh, a coordinator lookup or a reconnect).
pub(crate) trait Retriable {
    /// Whether repeating the call may succeed.
    fn retriable(&self) -> bool;
}

impl Retriable for ClientError {
    fn retriable(&self) -> bool {
        self.is_retriable()
    }
}

/// A transaction admin operation failed: Kafka's error codes for
/// ListTransactions, DescribeTransactions, DescribeProducers and
/// WriteTxnMarkers as typed variants, or the request itself failed.
#[derive(Debug, thiserror::Error)]
pub enum TransactionAdminError {
    /// The coordinator knows no such transactional id
    /// (TRANSACTIONAL_ID_NOT_FOUND).
    #[error("transactional id `{transactional_id}` is not known to its coordinator (TRANSACTIONAL_ID_NOT_FOUND)")]
    TransactionalIdNotFound {
        /// The transactional id.
        transactional_id: String,
    },
    /// The principal may not DESCRIBE the transactional id
    /// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    #[error("not authorized to describe transactional id `{transactional_id}` (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)")]
    TransactionalIdAuthorizationFailed {
        /// The transactional id.
        transactional_id: String,
    },
    /// The topic or the partition does not exist
    /// (UNKNOWN_TOPIC_OR_PARTITION).
    #[error(
        "partition {partition} of topic `{topic}` does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    )]
    UnknownTopicOrPartition {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The principal may not READ the topic (TOPIC_AUTHORIZATION_FAILED).
    #[error("not authorized to read topic `{topic}` (TOPIC_AUTHORIZATION_FAILED)")]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
    },
    /// Writing transaction markers needs CLUSTER_ACTION on the cluster
    /// (CLUSTER_AUTHORIZATION_FAILED).
    #[error("not authorized to write transaction markers: CLUSTER_ACTION on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED)")]
    ClusterAuthorizationFailed,
    /// The producer epoch of an abort is older than the partition's
    /// (INVALID_PRODUCER_EPOCH or PRODUCER_FENCED).
    #[error("producer {producer_id} with epoch {producer_epoch} is fenced by a newer epoch (INVALID_PRODUCER_EPOCH)")]
    ProducerFenced {
        /// The producer id.
        producer_id: i64,
        /// The epoch given.
        producer_epoch: i16,
    },
    /// The coordinator epoch of an abort is older than the one the
    /// partition last saw (TRANSACTION_COORDINATOR_FENCED).
    #[error("coordinator epoch {coordinator_epoch} is older than the partition's (TRANSACTION_COORDINATOR_FENCED)")]
    CoordinatorFenced {
        /// The coordinator epoch given.
        coordinator_epoch: i32,
    },
    /// The broker does not support what was asked (the duration filter of
    /// ListTransactions needs version 1).
    #[error("broker {broker_id} does not support {feature}")]
    Unsupported {
        /// The broker.
        broker_id: i32,
        /// What it lacks.
        feature: &'static str,
    },
    /// Another error code.
    #[error("broker returned {code}")]
    Broker {
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The request could not be completed.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl TransactionAdminError {
    /// Whether retrying (after a metadata refresh or a coordinator lookup)
    /// may succeed: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    /// NOT_LEADER_OR_FOLLOWER, a lost connection, ...
    pub fn is_retriable(&self) -> bool {
        match self {
            TransactionAdminError::Broker { code } => code.is_retriable(),
            TransactionAdminError::Client(error) => error.is_retriable(),
            _ => false,
        }
    }

    /// The Kafka error code behind this error, if a broker sent one.
    pub fn code(&self) -> Option<ErrorCode> {
        Some(match self {
            TransactionAdminError::TransactionalIdNotFound { .. } => {
                ErrorCode::TransactionalIdNotFound
            }
            TransactionAdminError::TransactionalIdAuthorizationFailed { .. } => {
                ErrorCode::TransactionalIdAuthorizationFailed
            }
            TransactionAdminError::UnknownTopicOrPartition { .. } => {
                ErrorCode::UnknownTopicOrPartition
            }
            TransactionAdminError::TopicAuthorizationFailed { .. } => {
                ErrorCode::TopicAuthorizationFailed
            }
            TransactionAdminError::ClusterAuthorizationFailed => {
                ErrorCode::ClusterAuthorizationFailed
            }
            TransactionAdminError::ProducerFenced { .. } => ErrorCode::InvalidProducerEpoch,
            TransactionAdminError::CoordinatorFenced { .. } => {
                ErrorCode::TransactionCoordinatorFenced
            }
            TransactionAdminError::Broker { code } => *code,
            TransactionAdminError::Client(ClientError::Broker { code }) => *code,
            TransactionAdminError::Unsupported { .. } | TransactionAdminError::Client(_) => {
                return None
            }
        })
    }
}

impl Retriable for TransactionAdminError {
    fn retriable(&self) -> bool {
        self.is_retriable()
    }
}

/// A configuration property has a bad value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse as the property's type (built with
    /// [`strom_config::invalid`], which `?` converts).
    #[error("invalid value {value:?} for {key}: {problem}")]
    InvalidValue {
        /// The property name.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it: for the clients' properties, what was
        /// expected ([`ValueProblem::Expected`], [`ValueProblem::NotABoolean`]).
        problem: ValueProblem,
    },
    /// A required property is missing.
    #[error("missing required property {key}")]
    Missing {
        /// The property name.
        key: &'static str,
    },
}

impl From<InvalidValue> for ConfigError {
    fn from(invalid: InvalidValue) -> ConfigError {
        ConfigError::InvalidValue {
            key: invalid.key,
            value: invalid.value,
            problem: invalid.problem,
        }
    }
}
