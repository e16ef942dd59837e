//! Errors of the producer.

use std::sync::Arc;

use strom_client::{ClientError, ConfigError};
use strom_protocol::records::RecordError;
use strom_protocol::ErrorCode;

use crate::transaction_state::{TransactionOperation, TransactionState};

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
    /// The record belongs to a transaction that cannot take it: `send`
    /// outside a transaction, the transaction aborted before the record was
    /// sent ([`TransactionError::Aborted`]), or in an error state.
    #[error("transactional send failed")]
    Transaction(#[source] TransactionError),
}

/// Why a transactional call failed.
///
/// [`is_fatal`](Self::is_fatal) errors leave the producer in
/// [`TransactionState::FatalError`]: it must be closed (another producer
/// with the same `transactional.id` took over, or the coordinator refuses
/// it). [`is_abortable`](Self::is_abortable) errors leave it in
/// [`TransactionState::AbortableError`]: the transaction must be aborted,
/// then the producer goes on. The others change no state: the call may be
/// retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactionError {
    /// The producer has no `transactional.id`.
    #[error("the producer has no transactional.id")]
    NotTransactional,
    /// The call is not allowed in the producer's state (begin twice, send
    /// outside a transaction, commit without begin, ...).
    #[error("{operation} is not allowed in state {state}")]
    InvalidState {
        /// What was asked.
        operation: TransactionOperation,
        /// The state the producer was in.
        state: TransactionState,
    },
    /// The record was queued in a transaction that was aborted before it
    /// was sent.
    #[error("the transaction was aborted before the record was sent")]
    Aborted,
    /// A newer producer with the same `transactional.id` took over
    /// (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH from older brokers).
    /// Fatal.
    #[error("producer fenced by a newer producer with the same transactional.id ({code})")]
    ProducerFenced {
        /// PRODUCER_FENCED or INVALID_PRODUCER_EPOCH.
        code: ErrorCode,
    },
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Fatal.
    #[error("not authorized to use transactional id {transactional_id}")]
    TransactionalIdAuthorizationFailed {
        /// The transactional id.
        transactional_id: String,
    },
    /// INVALID_PRODUCER_ID_MAPPING: the coordinator does not map the
    /// producer id to this transactional id. Fatal.
    #[error("the coordinator does not map the producer id to transactional id {transactional_id}")]
    InvalidProducerIdMapping {
        /// The transactional id.
        transactional_id: String,
    },
    /// INVALID_TXN_STATE: the coordinator's transaction is in a state that
    /// does not allow the request. Fatal.
    #[error("the coordinator's transaction state does not allow the request")]
    InvalidTxnState,
    /// INVALID_TRANSACTION_TIMEOUT: `transaction.timeout.ms` is above the
    /// broker's `transaction.max.timeout.ms`. Fatal.
    #[error("transaction.timeout.ms is refused by the coordinator")]
    InvalidTransactionTimeout,
    /// UNSUPPORTED_VERSION or UNSUPPORTED_FOR_MESSAGE_FORMAT: the broker
    /// cannot serve transactions. Fatal.
    #[error("the broker does not support transactions ({code})")]
    Unsupported {
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// TRANSACTION_ABORTABLE: the broker asks for an abort. Abortable.
    #[error("the broker asks to abort the transaction")]
    TransactionAbortable,
    /// UNKNOWN_PRODUCER_ID: the broker lost the producer's state. Abortable;
    /// the abort bumps the epoch (KIP-360).
    #[error("the broker no longer knows the producer id")]
    UnknownProducerId,
    /// GROUP_AUTHORIZATION_FAILED on `send_offsets_to_transaction`.
    /// Abortable.
    #[error("not authorized to commit offsets of group {group_id}")]
    GroupAuthorizationFailed {
        /// The consumer group.
        group_id: String,
    },
    /// TOPIC_AUTHORIZATION_FAILED when adding a partition. Abortable.
    #[error("not authorized to write to {topic} in a transaction")]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
    },
    /// UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID on
    /// TxnOffsetCommit: the consumer's group metadata is out of date (it
    /// was rebalanced). Abortable.
    #[error("the consumer group metadata of {group_id} is out of date ({code})")]
    GroupMetadataStale {
        /// The consumer group.
        group_id: String,
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// A record of the transaction failed, so it cannot commit. Abortable.
    #[error("a record of the transaction failed on {topic}-{partition}")]
    RecordFailed {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
        /// Why the record failed.
        #[source]
        cause: Box<ProduceError>,
    },
    /// A Kafka error code the request does not expect. Fatal, as in the
    /// Java client.
    #[error("{operation} failed with {code}")]
    Broker {
        /// What was asked.
        operation: TransactionOperation,
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The call did not complete within its timeout; it may be called
    /// again (commit and abort resume where they stopped).
    #[error("{operation} timed out after {elapsed_ms} ms")]
    Timeout {
        /// What was asked.
        operation: TransactionOperation,
        /// How long it ran.
        elapsed_ms: u64,
    },
    /// A client-level failure that retrying did not cure.
    #[error("client error")]
    Client(#[source] SharedError<ClientError>),
    /// The producer was closed.
    #[error("producer closed")]
    Closed,
}

/// What the names in a transactional error refer to.
#[derive(Debug, Clone, Copy)]
pub struct ErrorContext<'a> {
    /// The producer's transactional id.
    pub transactional_id: &'a str,
    /// What was asked.
    pub operation: TransactionOperation,
    /// The consumer group (offsets) or topic (partitions) of the request.
    pub resource: &'a str,
}

impl TransactionError {
    /// The error for a transaction coordinator's (or group coordinator's)
    /// non-retriable Kafka error code; every code maps to one variant.
    pub fn from_code(code: ErrorCode, context: ErrorContext<'_>) -> TransactionError {
        match code {
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
                TransactionError::ProducerFenced { code }
            }
            ErrorCode::TransactionalIdAuthorizationFailed => {
                TransactionError::TransactionalIdAuthorizationFailed {
                    transactional_id: context.transactional_id.to_owned(),
                }
            }
            ErrorCode::InvalidProducerIdMapping => TransactionError::InvalidProducerIdMapping {
                transactional_id: context.transactional_id.to_owned(),
            },
            ErrorCode::InvalidTxnState => TransactionError::InvalidTxnState,
            ErrorCode::InvalidTransactionTimeout => TransactionError::InvalidTransactionTimeout,
            ErrorCode::UnsupportedVersion | ErrorCode::UnsupportedForMessageFormat => {
                TransactionError::Unsupported { code }
            }
            ErrorCode::TransactionAbortable => TransactionError::TransactionAbortable,
            ErrorCode::UnknownProducerId => TransactionError::UnknownProducerId,
            ErrorCode::GroupAuthorizationFailed => TransactionError::GroupAuthorizationFailed {
                group_id: context.resource.to_owned(),
            },
            ErrorCode::TopicAuthorizationFailed => TransactionError::TopicAuthorizationFailed {
                topic: context.resource.to_owned(),
            },
            ErrorCode::UnknownMemberId
            | ErrorCode::IllegalGeneration
            | ErrorCode::FencedInstanceId => TransactionError::GroupMetadataStale {
                group_id: context.resource.to_owned(),
                code,
            },
            code => TransactionError::Broker {
                operation: context.operation,
                code,
            },
        }
    }

    /// Whether the producer cannot go on and must be closed.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            TransactionError::ProducerFenced { .. }
                | TransactionError::TransactionalIdAuthorizationFailed { .. }
                | TransactionError::InvalidProducerIdMapping { .. }
                | TransactionError::InvalidTxnState
                | TransactionError::InvalidTransactionTimeout
                | TransactionError::Unsupported { .. }
                | TransactionError::Broker { .. }
        )
    }

    /// Whether the open transaction must be aborted (the producer goes on
    /// afterwards).
    pub fn is_abortable(&self) -> bool {
        matches!(
            self,
            TransactionError::TransactionAbortable
                | TransactionError::UnknownProducerId
                | TransactionError::GroupAuthorizationFailed { .. }
                | TransactionError::TopicAuthorizationFailed { .. }
                | TransactionError::GroupMetadataStale { .. }
                | TransactionError::RecordFailed { .. }
        )
    }

    /// Whether the abort that follows must bump the producer epoch
    /// (KIP-360): the broker lost the producer, or a record failed and may
    /// have left a hole in its partition's sequence.
    pub fn needs_epoch_bump(&self) -> bool {
        matches!(
            self,
            TransactionError::UnknownProducerId | TransactionError::RecordFailed { .. }
        )
    }

    /// The transaction's error for a record that failed for good: fatal
    /// when the broker fenced the producer or refused its transactional id
    /// or producer id, the broker's own request for an abort or loss of the
    /// producer id, else [`RecordFailed`](Self::RecordFailed) (abortable).
    pub fn record_failed(
        transactional_id: &str,
        topic: &str,
        partition: i32,
        cause: ProduceError,
    ) -> TransactionError {
        let code = match cause {
            ProduceError::Transaction(error) => return error,
            ProduceError::Broker { code } => code,
            _ => ErrorCode::None,
        };
        match code {
            ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::TransactionalIdAuthorizationFailed
            | ErrorCode::InvalidProducerIdMapping
            | ErrorCode::TransactionAbortable
            | ErrorCode::UnknownProducerId => {
                let context = ErrorContext {
                    transactional_id,
                    operation: TransactionOperation::Send,
                    resource: topic,
                };
                TransactionError::from_code(code, context)
            }
            _ => TransactionError::RecordFailed {
                topic: topic.to_owned(),
                partition,
                cause: Box::new(cause),
            },
        }
    }
}

impl From<ClientError> for TransactionError {
    fn from(error: ClientError) -> Self {
        TransactionError::Client(SharedError::new(error))
    }
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
    /// `transactional.id` is set with `enable.idempotence=false`.
    #[error("transactional.id {transactional_id} requires enable.idempotence=true")]
    TransactionsNeedIdempotence {
        /// The transactional id.
        transactional_id: String,
    },
    /// `transactional.id` is set with `acks` other than `all`.
    #[error("transactional.id {transactional_id} requires acks=all")]
    TransactionsNeedAcksAll {
        /// The transactional id.
        transactional_id: String,
    },
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
