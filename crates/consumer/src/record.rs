//! What the consumer returns: partitions and records.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
pub use strom_protocol::records::TimestampType;

/// A topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic name.
    pub topic: Arc<str>,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl AsRef<str>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: Arc::from(topic.as_ref()),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}-{}", self.topic, self.partition)
    }
}

/// One record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The header key (UTF-8 in practice; kept as bytes).
    pub key: Bytes,
    /// The header value, `None` for a null value.
    pub value: Option<Bytes>,
}

/// A record as the consumer returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The timestamp in milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// Whether the timestamp is the producer's or the broker's.
    pub timestamp_type: TimestampType,
    /// The partition leader epoch of the batch (`None` if unknown).
    pub leader_epoch: Option<i32>,
    /// The key, `None` for a null key.
    pub key: Option<Bytes>,
    /// The value, `None` for a tombstone.
    pub value: Option<Bytes>,
    /// The headers in order.
    pub headers: Vec<RecordHeader>,
}

impl ConsumerRecord {
    /// The record's partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition {
            topic: Arc::clone(&self.topic),
            partition: self.partition,
        }
    }

    /// Key plus value size in bytes (what consumer-perf-test counts as MB).
    pub fn payload_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len)
    }
}

/// An offset to commit, with optional metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The offset of the next record to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, if known.
    pub leader_epoch: Option<i32>,
    /// Free-form metadata stored with the offset.
    pub metadata: String,
}

impl OffsetAndMetadata {
    /// An offset without metadata.
    pub fn new(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            leader_epoch: None,
            metadata: String::new(),
        }
    }

    /// Sets the metadata.
    pub fn with_metadata(mut self, metadata: impl Into<String>) -> OffsetAndMetadata {
        self.metadata = metadata.into();
        self
    }
}
