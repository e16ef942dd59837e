//! Errors of the producer.

use std::sync::Arc;

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
    /// The record could not be encoded into a batch.
    #[error("record cannot be encoded")]
    InvalidRecord(#[source] SharedError<RecordError>),
    /// A batch to send held no records, or splitting it did not give back
    /// its records (a producer bug; the records are failed, not sent).
    #[error("the batch's records do not match its deliveries")]
    BatchMismatch,
    /// The producer was closed before the record was sent.
    #[error("producer closed")]
    Closed,
    /// A panic left the producer's queued batches in doubt; the producer
    /// closed itself and failed them.
    #[error("the producer's state was poisoned by a panic; it closed itself")]
    Poisoned,
    /// A client-level failure (connection, metadata) that was not retried.
    #[error("client error")]
    Client(#[source] SharedError<ClientError>),
}

/// An error shared by every record of a failed batch, so that
/// [`ProduceError`] stays cloneable; two are equal when they are the same
/// error.
#[derive(Debug)]
pub struct SharedError<E>(Arc<E>);

impl<E> SharedError<E> {
    /// Shares `error`.
    pub fn new(error: E) -> Self {
        SharedError(Arc::new(error))
    }

    /// The shared error.
    pub fn get(&self) -> &E {
        &self.0
    }
}

impl<E> Clone for SharedError<E> {
    fn clone(&self) -> Self {
        SharedError(Arc::clone(&self.0))
    }
}

impl<E> PartialEq for SharedError<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<E> Eq for SharedError<E> {}

impl<E: std::fmt::Display> std::fmt::Display for SharedError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error> std::error::Error for SharedError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
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
        ProduceError::InvalidRecord(SharedError::new(error))
    }
}

impl From<ClientError> for ProduceError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Broker { code } => ProduceError::Broker { code },
            other => ProduceError::Client(SharedError::new(other)),
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_client_failure_keeps_its_error_as_the_source() {
        let error = ProduceError::from(ClientError::Connect {
            address: "127.0.0.1:1".to_owned(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        });
        assert_eq!(error.to_string(), "client error");
        let source = error.source().expect("the client error");
        assert_eq!(source.to_string(), "cannot connect to 127.0.0.1:1");
        let io = source.source().expect("the socket error");
        assert!(io.downcast_ref::<std::io::Error>().is_some());
        let ProduceError::Client(shared) = &error else {
            panic!("a client error");
        };
        assert!(matches!(shared.get(), ClientError::Connect { .. }));
        // Every record of a failed batch gets a clone of the same error.
        assert_eq!(error.clone(), error);
        let other = ProduceError::from(ClientError::Disconnected {
            address: "127.0.0.1:1".to_owned(),
        });
        assert_ne!(other, error);
    }
}
