//! Errors of the producer.

use strom_client::{ClientError, ConfigError};
use strom_protocol::records::RecordError;
use strom_protocol::ErrorCode;

/// Why a record was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProduceError {
    /// The record is larger than `max.request.size` or the broker's limit
    /// (MESSAGE_TOO_LARGE for a batch of this one record; a larger batch
    /// is split and retried first).
    #[error("record of {size_bytes} bytes is too large")]
    RecordTooLarge {
        /// The record's estimated size, or its batch's size when the broker
        /// rejected the batch (0 when unknown).
        size_bytes: usize,
    },
    /// The topic or partition does not exist.
    #[error("unknown topic or partition {topic}-{partition}")]
    UnknownTopicOrPartition {
        /// The topic.
        topic: String,
        /// The partition (-1 when not chosen yet).
        partition: i32,
    },
    /// The client may not write to the topic.
    #[error("not authorized to write to {topic}")]
    Authorization {
        /// The topic.
        topic: String,
    },
    /// The record was not acknowledged within `delivery.timeout.ms`, or
    /// `send` could not get buffer space within `max.block.ms`.
    #[error("timed out after {elapsed_ms} ms")]
    Timeout {
        /// How long the record waited.
        elapsed_ms: u64,
    },
    /// The broker rejected the batch with a non-retriable error (or a
    /// retriable one too often).
    #[error("broker rejected the batch with {code}")]
    Broker {
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The record could not be encoded.
    #[error("record cannot be encoded: {reason}")]
    InvalidRecord {
        /// What was wrong.
        reason: String,
    },
    /// The producer was closed before the record was sent.
    #[error("producer closed")]
    Closed,
    /// A panic left the producer's queued batches in doubt; the producer
    /// closed itself and failed them.
    #[error("the producer's state was poisoned by a panic; it closed itself")]
    Poisoned,
    /// A client-level failure (connection, metadata) that was not retried.
    #[error("client error: {reason}")]
    Client {
        /// The client error's message.
        reason: String,
    },
}

impl ProduceError {
    /// The per-record error for a broker error code on `topic`.
    pub fn from_code(code: ErrorCode, topic: &str, partition: i32) -> ProduceError {
        match code {
            ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => {
                ProduceError::RecordTooLarge { size_bytes: 0 }
            }
            ErrorCode::UnknownTopicOrPartition => ProduceError::UnknownTopicOrPartition {
                topic: topic.to_owned(),
                partition,
            },
            ErrorCode::TopicAuthorizationFailed | ErrorCode::ClusterAuthorizationFailed => {
                ProduceError::Authorization {
                    topic: topic.to_owned(),
                }
            }
            code => ProduceError::Broker { code },
        }
    }
}

impl From<RecordError> for ProduceError {
    fn from(error: RecordError) -> Self {
        ProduceError::InvalidRecord {
            reason: error.to_string(),
        }
    }
}

impl From<ClientError> for ProduceError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Broker { code } => ProduceError::Broker { code },
            other => ProduceError::Client {
                reason: other.to_string(),
            },
        }
    }
}

/// The producer could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ProducerCreateError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `enable.idempotence` needs `acks=all`.
    #[error("enable.idempotence requires acks=all")]
    IdempotenceNeedsAcksAll,
    /// The cluster could not be reached or the producer id not obtained.
    #[error(transparent)]
    Client(#[from] ClientError),
}
