//! The crate's errors. Kafka error codes are chosen by the broker from these;
//! each variant's doc names the code Kafka answers with.

pub use crate::state::IllegalTransition;
use crate::state::{TransactionResult, TransactionState};

/// A `__transaction_state` key or value that cannot be decoded. Kafka skips
/// records with an unknown key or value version on load and fails on the
/// rest; the loader decides which to skip from the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("truncated {field}: {needed} bytes needed, {remaining} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// The bytes the field needs.
        needed: usize,
        /// The bytes left in the input.
        remaining: usize,
    },
    /// A length or count below -1 (or -1 where null is not allowed).
    #[error("invalid length {length} for {field}")]
    InvalidLength {
        /// The field being read.
        field: &'static str,
        /// The length read.
        length: i64,
    },
    /// A length or count larger than the rest of the input can hold.
    #[error("{field} claims {length} bytes or elements, only {remaining} bytes left")]
    LengthOverInput {
        /// The field being read.
        field: &'static str,
        /// The length or count read.
        length: u64,
        /// The bytes left in the input.
        remaining: usize,
    },
    /// An unsigned varint longer than five bytes or over `u32::MAX`.
    #[error("malformed unsigned varint in {field}")]
    MalformedVarint {
        /// The field being read.
        field: &'static str,
    },
    /// A string that is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field being read.
        field: &'static str,
    },
    /// A key version other than 0 (`TransactionLogKey`).
    #[error("unknown __transaction_state key version {version}")]
    UnknownKeyVersion {
        /// The version read.
        version: i16,
    },
    /// A value version other than 0 and 1.
    #[error("unknown __transaction_state value version {version}")]
    UnknownValueVersion {
        /// The version read.
        version: i16,
    },
    /// A transaction status that names no state.
    #[error("unknown transaction status {id}")]
    UnknownStatus {
        /// The status id read.
        id: i8,
    },
    /// A known tagged field whose size is not its type's.
    #[error("tagged field {tag} has {size} bytes, {expected} expected")]
    TaggedFieldSize {
        /// The tag.
        tag: u32,
        /// The size read.
        size: u32,
        /// The size of the field's type.
        expected: u32,
    },
    /// A client transaction version other than 0, 1 and 2.
    #[error("unknown client transaction version {level}")]
    UnknownTransactionVersion {
        /// The version read.
        level: i16,
    },
    /// Bytes left after the last field.
    #[error("{remaining} bytes after the end of the record")]
    TrailingBytes {
        /// The bytes left.
        remaining: usize,
    },
}

/// A key or value that cannot be written in the version asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A value version other than 0 and 1.
    #[error("unsupported __transaction_state value version {version}")]
    UnsupportedVersion {
        /// The version asked for.
        version: i16,
    },
    /// A field that only version 1 carries (a tagged field) is set to a
    /// value other than its default, and version 0 was asked for.
    #[error("{field} is set but value version 0 cannot carry it")]
    FieldNotInVersion {
        /// The field.
        field: &'static str,
    },
    /// A string longer than the schema's length field can express.
    #[error("{field} is {length} bytes, over the limit of {limit}")]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        length: usize,
        /// The largest length the encoding allows.
        limit: usize,
    },
    /// An array with more elements than the schema's count can express.
    #[error("{field} has {count} elements, over the limit of {limit}")]
    ArrayTooLong {
        /// The field.
        field: &'static str,
        /// Its element count.
        count: usize,
        /// The largest count the encoding allows.
        limit: usize,
    },
}

/// A request the transaction coordinator refuses. Each variant's doc names
/// the Kafka error code the broker answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactionError {
    /// The transaction is completing (PrepareCommit, PrepareAbort): the
    /// client should back off and retry. Kafka: `CONCURRENT_TRANSACTIONS`.
    #[error("transaction in state {state}: retry once it completes")]
    ConcurrentTransactions {
        /// The transaction's state.
        state: TransactionState,
    },
    /// The request's producer epoch is not the current one: a newer
    /// producer with the same transactional id took over (a zombie). Kafka:
    /// `PRODUCER_FENCED`, or `INVALID_PRODUCER_EPOCH` to request versions
    /// from before KIP-588.
    #[error("producer {producer_id} with epoch {request_epoch} is fenced: the current epoch is {current_epoch}")]
    ProducerFenced {
        /// The request's producer id.
        producer_id: i64,
        /// The request's producer epoch.
        request_epoch: i16,
        /// The transactional id's producer epoch.
        current_epoch: i16,
    },
    /// The request's producer id is not the transactional id's. Kafka:
    /// `INVALID_PRODUCER_ID_MAPPING`.
    #[error("producer id {request_producer_id} does not belong to the transactional id, which has {current_producer_id}")]
    InvalidProducerIdMapping {
        /// The request's producer id.
        request_producer_id: i64,
        /// The transactional id's producer id.
        current_producer_id: i64,
    },
    /// EndTxn asked for an outcome the transaction's state cannot take
    /// (commit an aborted or empty transaction, abort a committed one).
    /// Kafka: `INVALID_TXN_STATE`.
    #[error("cannot {requested} a transaction in state {state}")]
    InvalidTxnState {
        /// The transaction's state.
        state: TransactionState,
        /// The outcome asked for.
        requested: TransactionResult,
    },
    /// `transaction.timeout.ms` not above zero or above
    /// `transaction.max.timeout.ms`. Kafka: `INVALID_TRANSACTION_TIMEOUT`.
    #[error("transaction timeout {timeout_ms} ms is not in 1..={max_timeout_ms} ms")]
    InvalidTransactionTimeout {
        /// The timeout asked for.
        timeout_ms: i32,
        /// `transaction.max.timeout.ms`.
        max_timeout_ms: i32,
    },
    /// Bumping the producer epoch would pass `i16::MAX`: the metadata
    /// does not follow the coordinator's invariants (it rotates the
    /// producer id before the epoch runs out). Kafka throws an
    /// `IllegalStateException`, answered `UNKNOWN_SERVER_ERROR`.
    #[error("producer {producer_id} has no epoch after {producer_epoch}")]
    EpochExhausted {
        /// The producer id.
        producer_id: i64,
        /// Its current epoch.
        producer_epoch: i16,
    },
    /// A state no request should find (Dead, PrepareEpochFence), or a
    /// transition the table forbids: the coordinator's invariants are
    /// broken. Kafka throws an `IllegalStateException`, answered
    /// `UNKNOWN_SERVER_ERROR`.
    #[error(transparent)]
    IllegalTransition(#[from] IllegalTransition),
}

/// Why the coordinator refused or could not finish a request for a
/// transactional id. Each variant's doc names Kafka's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordinatorError {
    /// The id's `__transaction_state` partition is not led here (or no
    /// longer at the epoch a write was decided at). Kafka: `NOT_COORDINATOR`.
    #[error("__transaction_state partition {partition} is not served by this coordinator")]
    NotCoordinator {
        /// The `__transaction_state` partition.
        partition: i32,
    },
    /// The id's partition is still being loaded. Kafka:
    /// `COORDINATOR_LOAD_IN_PROGRESS`.
    #[error("__transaction_state partition {partition} is being loaded")]
    LoadInProgress {
        /// The `__transaction_state` partition.
        partition: i32,
    },
    /// A write for the id is in flight. Kafka: `CONCURRENT_TRANSACTIONS`.
    #[error("a change of the transaction (in state {state}) is being written")]
    Concurrent {
        /// The state of the adopted metadata.
        state: TransactionState,
    },
    /// An empty transactional id. Kafka: `INVALID_REQUEST`.
    #[error("the transactional id is empty")]
    InvalidTransactionalId,
    /// The id has no metadata (no InitProducerId, or it expired). Kafka:
    /// `INVALID_PRODUCER_ID_MAPPING`.
    #[error("the transactional id is unknown to this coordinator")]
    UnknownTransactionalId,
    /// The transition was refused.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
    /// The record could not be encoded (an id too long for the key's
    /// int16 length). Kafka: `INVALID_REQUEST`.
    #[error("cannot encode the __transaction_state record")]
    Encode(#[source] EncodeError),
    /// A record of the partition cannot be decoded, so the partition cannot
    /// be served. Kafka: `COORDINATOR_NOT_AVAILABLE` meanwhile.
    #[error("cannot load __transaction_state partition {partition}")]
    Load {
        /// The `__transaction_state` partition.
        partition: i32,
        /// The record's problem.
        #[source]
        source: DecodeError,
    },
    /// Appending to `__transaction_state` failed (no quorum, a timeout).
    /// Kafka: `COORDINATOR_NOT_AVAILABLE`, which clients retry.
    #[error("writing to __transaction_state partition {partition} failed")]
    WriteFailed {
        /// The `__transaction_state` partition.
        partition: i32,
    },
    /// The coordinator's state was poisoned by a panic. Kafka:
    /// `COORDINATOR_NOT_AVAILABLE`.
    #[error("the transaction coordinator is offline")]
    Offline,
    /// No producer id could be allocated. Kafka: `COORDINATOR_NOT_AVAILABLE`.
    #[error("no producer id could be allocated: {reason}")]
    ProducerIdUnavailable {
        /// What the allocator reported.
        reason: String,
    },
}
