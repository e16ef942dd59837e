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
