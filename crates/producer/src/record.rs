//! Records given to the producer and the metadata returned for them.

use std::sync::Arc;

use bytes::Bytes;

/// A record to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The topic (shared: records to one topic clone it without copying).
    pub topic: Arc<str>,
    /// An explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key (keyed records are partitioned by murmur2 of it).
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers: UTF-8 key and optional value.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The create time in milliseconds; `None` means now.
    pub timestamp_ms: Option<i64>,
}

impl ProducerRecord {
    /// A record with only a value.
    pub fn new(topic: impl Into<Arc<str>>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp_ms: None,
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push((key.into(), value));
        self
    }

    /// Sets the timestamp.
    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// An upper bound of the record's encoded size in a batch.
    pub fn estimated_size_bytes(&self) -> usize {
        const RECORD_OVERHEAD_BYTES: usize = 21;
        let key = self.key.as_ref().map_or(0, Bytes::len);
        let value = self.value.as_ref().map_or(0, Bytes::len);
        let headers: usize = self
            .headers
            .iter()
            .map(|(key, value)| key.len() + value.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        RECORD_OVERHEAD_BYTES + key + value + headers
    }
}

/// Where an acknowledged record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic (shared by the records of a batch).
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset (-1 with `acks=0`, or for a retry the broker recognised
    /// as a duplicate).
    pub offset: i64,
    /// The timestamp: the broker's append time for LogAppendTime topics,
    /// else the record's create time.
    pub timestamp_ms: i64,
}
