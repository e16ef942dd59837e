//! Errors of the load tool.

use strom_protocol::records::RecordError;
use strom_protocol::{ErrorCode, FrameError, MessageError};

/// Why a load run failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The socket failed (connect, read or write).
    #[error("i/o with the broker failed")]
    Io(#[from] std::io::Error),
    /// A frame from the broker could not be cut out of the stream.
    #[error("bad frame from the broker")]
    Frame(#[from] FrameError),
    /// A request could not be encoded or a response decoded.
    #[error("message codec failed")]
    Message(#[from] MessageError),
    /// A record batch could not be built or parsed.
    #[error("record batch error")]
    Record(#[from] RecordError),
    /// The broker closed the connection with requests outstanding.
    #[error("the broker closed the connection with {outstanding} requests outstanding")]
    Closed {
        /// Requests sent and not yet answered.
        outstanding: usize,
    },
    /// A response carried another correlation id than the oldest request.
    #[error("response correlation id {received} does not match the oldest request's {expected}")]
    Correlation {
        /// The id of the oldest outstanding request.
        expected: i32,
        /// The id the response carried.
        received: i32,
    },
    /// The broker answered with another API than the one asked.
    #[error("expected a {expected} response")]
    UnexpectedResponse {
        /// The API name expected.
        expected: &'static str,
    },
    /// The broker reported an error for a partition or topic.
    #[error("{api} failed for {topic}/{partition}: {}", code.name())]
    Broker {
        /// The API that failed.
        api: &'static str,
        /// The topic.
        topic: String,
        /// The partition (-1 for a topic-level error).
        partition: i32,
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The topic's partitions did not all get a leader in time.
    #[error("topic {topic} has no leader for every partition after {waited_ms} ms")]
    NoLeader {
        /// The topic.
        topic: String,
        /// How long the tool waited.
        waited_ms: u64,
    },
    /// A setting is out of range.
    #[error("invalid setting {name}: {reason}")]
    InvalidSetting {
        /// The setting's name.
        name: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// The group coordinator reported an error.
    #[error("{api} failed for group {group}: {}", code.name())]
    Group {
        /// The API that failed.
        api: &'static str,
        /// The group id.
        group: String,
        /// The Kafka error code.
        code: ErrorCode,
    },
    /// The members of one rebalance ended in different generations.
    #[error("members ended in generations {lowest} to {highest}")]
    GenerationMismatch {
        /// The lowest generation a member synced in.
        lowest: i32,
        /// The highest generation a member synced in.
        highest: i32,
    },
    /// A committed offset read back differs from the last one committed.
    #[error("partition {partition} reads back offset {received}, expected {expected}")]
    ReadBack {
        /// The partition.
        partition: i32,
        /// The offset last committed.
        expected: i64,
        /// The offset OffsetFetch returned.
        received: i64,
    },
}
