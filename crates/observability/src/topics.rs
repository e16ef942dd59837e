//! Per-topic counters (Kafka's `BrokerTopicMetrics`): messages and bytes
//! in, bytes out, failed produce and fetch requests.
//!
//! Each hosted partition holds an `Arc` of its topic's [`TopicMetrics`],
//! resolved once when the broker starts leading it, so counting a produced
//! batch is two relaxed atomic adds: no lock, no map lookup, no allocation.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The counters of one topic.
#[derive(Debug, Default)]
pub struct TopicMetrics {
    recording: bool,
    messages_in: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    failed_produce_requests: AtomicU64,
    failed_fetch_requests: AtomicU64,
}

/// A copy of a topic's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicCounts {
    /// Records appended (`MessagesInPerSec`).
    pub messages_in: u64,
    /// Record bytes appended (`BytesInPerSec`).
    pub bytes_in: u64,
    /// Record bytes sent to fetchers (`BytesOutPerSec`).
    pub bytes_out: u64,
    /// Partitions of produce requests that failed (`FailedProduceRequestsPerSec`).
    pub failed_produce_requests: u64,
    /// Partitions of fetch requests that failed (`FailedFetchRequestsPerSec`).
    pub failed_fetch_requests: u64,
}

impl TopicMetrics {
    /// Counts an appended batch.
    #[inline]
    pub fn record_produce(&self, records: u64, bytes: u64) {
        if self.recording {
            self.messages_in.fetch_add(records, Ordering::Relaxed);
            self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Counts a partition of a produce request that failed.
    #[inline]
    pub fn record_failed_produce(&self) {
        if self.recording {
            self.failed_produce_requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts record bytes read for a fetcher.
    #[inline]
    pub fn record_fetch(&self, bytes: u64) {
        if self.recording {
            self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Counts a partition of a fetch request that failed.
    #[inline]
    pub fn record_failed_fetch(&self) {
        if self.recording {
            self.failed_fetch_requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The current values.
    pub fn counts(&self) -> TopicCounts {
        TopicCounts {
            messages_in: self.messages_in.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            failed_produce_requests: self.failed_produce_requests.load(Ordering::Relaxed),
            failed_fetch_requests: self.failed_fetch_requests.load(Ordering::Relaxed),
        }
    }
}

/// Every topic's counters, by name. Locked only when a partition is first
/// hosted and when metrics are scraped.
#[derive(Debug)]
pub struct TopicMetricsTable {
    recording: std::sync::atomic::AtomicBool,
    topics: RwLock<BTreeMap<String, Arc<TopicMetrics>>>,
}

impl Default for TopicMetricsTable {
    fn default() -> Self {
        TopicMetricsTable {
            recording: std::sync::atomic::AtomicBool::new(true),
            topics: RwLock::new(BTreeMap::new()),
        }
    }
}

impl TopicMetricsTable {
    /// Whether topics resolved from now on count anything (the broker turns
    /// counting off when no metrics listener is configured).
    pub fn set_recording(&self, recording: bool) {
        self.recording.store(recording, Ordering::Relaxed);
    }

    /// The topic's counters, created on first use.
    pub fn resolve(&self, topic: &str) -> Arc<TopicMetrics> {
        if let Some(found) = self.read().get(topic) {
            return Arc::clone(found);
        }
        let mut topics = self
            .topics
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let recording = self.recording.load(Ordering::Relaxed);
        Arc::clone(topics.entry(topic.to_owned()).or_insert_with(|| {
            Arc::new(TopicMetrics {
                recording,
                ..TopicMetrics::default()
            })
        }))
    }

    /// Forgets a deleted topic (its counters stop being exported).
    pub fn remove(&self, topic: &str) {
        self.topics
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(topic);
    }

    /// Every topic's counters, by name.
    pub fn snapshot(&self) -> Vec<(String, TopicCounts)> {
        self.read()
            .iter()
            .map(|(name, metrics)| (name.clone(), metrics.counts()))
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<TopicMetrics>>> {
        self.topics
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_resolves_to_one_set_of_counters() {
        let table = TopicMetricsTable::default();
        let first = table.resolve("orders");
        let second = table.resolve("orders");
        first.record_produce(3, 300);
        second.record_produce(2, 200);
        second.record_fetch(50);
        first.record_failed_produce();
        first.record_failed_fetch();
        assert_eq!(
            table.snapshot(),
            vec![(
                "orders".to_owned(),
                TopicCounts {
                    messages_in: 5,
                    bytes_in: 500,
                    bytes_out: 50,
                    failed_produce_requests: 1,
                    failed_fetch_requests: 1,
                }
            )]
        );
        table.remove("orders");
        assert!(table.snapshot().is_empty());
    }

    #[test]
    fn counting_off_counts_nothing() {
        let table = TopicMetricsTable::default();
        table.set_recording(false);
        let topic = table.resolve("quiet");
        topic.record_produce(3, 300);
        topic.record_fetch(10);
        assert_eq!(topic.counts(), TopicCounts::default());
    }
}
