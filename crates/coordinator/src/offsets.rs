//! Committed offsets of one group and the requests that change them.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::error::{GroupError, RecordError};
use crate::records::OffsetCommitValue;
use crate::wire::Reader;

/// Offset settings, Kafka's broker properties parsed into values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetConfig {
    /// `offset.metadata.max.bytes` (default 4,096).
    pub metadata_max_bytes: usize,
    /// `offsets.retention.minutes` in milliseconds (default 7 days).
    pub retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (default 600,000).
    pub retention_check_interval_ms: i64,
}

impl Default for OffsetConfig {
    fn default() -> Self {
        OffsetConfig {
            metadata_max_bytes: 4_096,
            retention_ms: 7 * 24 * 60 * 60 * 1_000,
            retention_check_interval_ms: 600_000,
        }
    }
}

/// A topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// A committed offset with what Kafka stores alongside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record.
    pub leader_epoch: Option<i32>,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed.
    pub commit_timestamp_ms: i64,
    /// Explicit expiry requested by an old client (OffsetCommit v1-v4).
    pub expire_timestamp_ms: Option<i64>,
}

impl CommittedOffset {
    /// The record value for this offset.
    pub fn to_value(&self) -> OffsetCommitValue {
        OffsetCommitValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch.unwrap_or(-1),
            metadata: self.metadata.clone(),
            commit_timestamp_ms: self.commit_timestamp_ms,
            expire_timestamp_ms: self.expire_timestamp_ms.unwrap_or(-1),
        }
    }

    /// The offset a record value describes.
    pub fn from_value(value: &OffsetCommitValue) -> CommittedOffset {
        CommittedOffset {
            offset: value.offset,
            leader_epoch: (value.leader_epoch >= 0).then_some(value.leader_epoch),
            metadata: value.metadata.clone(),
            commit_timestamp_ms: value.commit_timestamp_ms,
            expire_timestamp_ms: (value.expire_timestamp_ms >= 0)
                .then_some(value.expire_timestamp_ms),
        }
    }
}

/// One partition of an OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The offset to commit.
    pub offset: i64,
    /// Leader epoch (v6+).
    pub leader_epoch: Option<i32>,
    /// Metadata string (null is stored as empty, as Kafka does).
    pub metadata: Option<String>,
    /// Commit timestamp (v1 only), `None` to use the broker's time.
    pub commit_timestamp_ms: Option<i64>,
}

/// An OffsetCommit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The member's generation; -1 for a standalone (simple) consumer.
    pub generation_id: i32,
    /// The member id; empty for a standalone consumer.
    pub member_id: String,
    /// `group.instance.id` of a static member (v7+).
    pub group_instance_id: Option<String>,
    /// Retention time (v2-v4), `None` or -1 for the broker default.
    pub retention_time_ms: Option<i64>,
    /// The partitions.
    pub partitions: Vec<OffsetCommitPartition>,
}

/// A TxnOffsetCommit request (KIP-98): offsets committed inside the
/// transaction of a producer, which count only once that transaction
/// commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The transactional producer's id.
    pub producer_id: i64,
    /// The transactional producer's epoch.
    pub producer_epoch: i16,
    /// The consumer's generation (v3+, KIP-447); -1 when not given.
    pub generation_id: i32,
    /// The consumer's member id (v3+); empty when not given.
    pub member_id: String,
    /// The consumer's `group.instance.id` (v3+).
    pub group_instance_id: Option<String>,
    /// The partitions (their commit timestamps are ignored: the broker's
    /// time is used).
    pub partitions: Vec<OffsetCommitPartition>,
}

/// One partition's answer to OffsetFetch: offset -1 when none is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Committed offset, -1 if none.
    pub offset: i64,
    /// Leader epoch, if known.
    pub leader_epoch: Option<i32>,
    /// Metadata string (empty if none).
    pub metadata: String,
    /// Why this partition has no answer (offset -1): only
    /// [`GroupError::UnstableOffsetCommit`], for an OffsetFetch with
    /// `require_stable` while a transaction holds offsets of the partition.
    pub error: Option<GroupError>,
}

impl PartitionOffset {
    /// The answer for a partition whose offset a transaction still holds,
    /// to an OffsetFetch that requires stable offsets.
    pub fn unstable(partition: &TopicPartition) -> PartitionOffset {
        PartitionOffset {
            topic: partition.topic.clone(),
            partition: partition.partition,
            offset: -1,
            leader_epoch: None,
            metadata: String::new(),
            error: Some(GroupError::UnstableOffsetCommit),
        }
    }
}

/// The committed offsets of one group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupOffsets {
    offsets: BTreeMap<TopicPartition, CommittedOffset>,
}

impl GroupOffsets {
    /// No offsets.
    pub fn new() -> GroupOffsets {
        GroupOffsets::default()
    }

    /// Stores (or replaces) an offset.
    pub fn commit(&mut self, partition: TopicPartition, offset: CommittedOffset) {
        self.offsets.insert(partition, offset);
    }

    /// Removes an offset; returns whether there was one.
    pub fn remove(&mut self, partition: &TopicPartition) -> bool {
        self.offsets.remove(partition).is_some()
    }

    /// The offset of one partition.
    pub fn get(&self, partition: &TopicPartition) -> Option<&CommittedOffset> {
        self.offsets.get(partition)
    }

    /// All offsets, ordered by topic and partition.
    pub fn iter(&self) -> impl Iterator<Item = (&TopicPartition, &CommittedOffset)> {
        self.offsets.iter()
    }

    /// The number of offsets.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether no offset is stored.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// OffsetFetch: the requested partitions (-1 where nothing is
    /// committed), or every committed partition when `topics` is `None`.
    pub fn fetch(&self, topics: Option<&[(String, Vec<i32>)]>) -> Vec<PartitionOffset> {
        let answer =
            |partition: &TopicPartition, offset: Option<&CommittedOffset>| PartitionOffset {
                topic: partition.topic.clone(),
                partition: partition.partition,
                offset: offset.map_or(-1, |offset| offset.offset),
                leader_epoch: offset.and_then(|offset| offset.leader_epoch),
                metadata: offset
                    .map(|offset| offset.metadata.clone())
                    .unwrap_or_default(),
                error: None,
            };
        match topics {
            None => self
                .offsets
                .iter()
                .map(|(partition, offset)| answer(partition, Some(offset)))
                .collect(),
            Some(topics) => topics
                .iter()
                .flat_map(|(topic, partitions)| {
                    partitions
                        .iter()
                        .map(move |partition| TopicPartition::new(topic.clone(), *partition))
                })
                .map(|partition| answer(&partition, self.offsets.get(&partition)))
                .collect(),
        }
    }

    /// Removes every offset of `topic`; returns the removed partitions.
    pub fn remove_topic(&mut self, topic: &str) -> Vec<TopicPartition> {
        let removed: Vec<TopicPartition> = self
            .offsets
            .keys()
            .filter(|partition| partition.topic == topic)
            .cloned()
            .collect();
        for partition in &removed {
            self.offsets.remove(partition);
        }
        removed
    }

    /// Removes the offsets that expired at `now_ms`: those past an explicit
    /// expire timestamp, and those whose `base_ms` (the time the group became
    /// empty, or the commit time when `base_ms` is `None`) is more than
    /// `retention_ms` ago. Partitions for which `held` answers `true` (an
    /// open transaction holds a newer offset) are kept. Returns the removed
    /// partitions.
    pub fn remove_expired(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        base_ms: Option<i64>,
        held: impl Fn(&TopicPartition) -> bool,
    ) -> Vec<TopicPartition> {
        let expired: Vec<TopicPartition> = self
            .offsets
            .iter()
            .filter(|(partition, _)| !held(partition))
            .filter(|(_, offset)| match offset.expire_timestamp_ms {
                Some(expire_ms) => now_ms >= expire_ms,
                None => now_ms >= base_ms.unwrap_or(offset.commit_timestamp_ms) + retention_ms,
            })
            .map(|(partition, _)| partition.clone())
            .collect();
        for partition in &expired {
            self.offsets.remove(partition);
        }
        expired
    }
}

impl GroupOffsets {
    /// Removes only the offsets past an explicit expire timestamp (the rule
    /// for groups that still have members), except those for which `held`
    /// answers `true`. Returns the removed partitions.
    pub fn remove_past_explicit_expiry(
        &mut self,
        now_ms: i64,
        held: impl Fn(&TopicPartition) -> bool,
    ) -> Vec<TopicPartition> {
        let expired: Vec<TopicPartition> = self
            .offsets
            .iter()
            .filter(|(partition, _)| !held(partition))
            .filter(|(_, offset)| {
                offset
                    .expire_timestamp_ms
                    .is_some_and(|expire_ms| now_ms >= expire_ms)
            })
            .map(|(partition, _)| partition.clone())
            .collect();
        for partition in &expired {
            self.offsets.remove(partition);
        }
        expired
    }
}

/// The topics of a consumer protocol subscription
/// (`ConsumerProtocolSubscription`: int16 version, then an array of topic
/// names, then fields not needed here).
pub(crate) fn subscribed_topics(metadata: &Bytes) -> Result<BTreeSet<String>, RecordError> {
    let mut reader = Reader::new(metadata, false);
    let _version = reader.int16("subscription version")?;
    let count = reader.array_length("topics")?;
    let mut topics = BTreeSet::new();
    for _ in 0..count {
        topics.insert(reader.string("topic")?);
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64, commit_timestamp_ms: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: Some(3),
            metadata: "m".into(),
            commit_timestamp_ms,
            expire_timestamp_ms: None,
        }
    }

    #[test]
    fn fetch_requested_and_all() {
        let mut offsets = GroupOffsets::new();
        offsets.commit(TopicPartition::new("a", 0), committed(10, 0));
        offsets.commit(TopicPartition::new("b", 1), committed(20, 0));
        let requested = offsets.fetch(Some(&[("a".into(), vec![0, 1])]));
        assert_eq!(requested.len(), 2);
        assert_eq!(requested[0].offset, 10);
        assert_eq!(requested[0].leader_epoch, Some(3));
        assert_eq!(requested[1].offset, -1);
        assert_eq!(requested[1].metadata, "");
        let all = offsets.fetch(None);
        assert_eq!(
            all.iter()
                .map(|p| (p.topic.as_str(), p.offset))
                .collect::<Vec<_>>(),
            vec![("a", 10), ("b", 20)]
        );
    }

    #[test]
    fn remove_topic_removes_only_that_topic() {
        let mut offsets = GroupOffsets::new();
        offsets.commit(TopicPartition::new("a", 0), committed(1, 0));
        offsets.commit(TopicPartition::new("a", 1), committed(1, 0));
        offsets.commit(TopicPartition::new("b", 0), committed(1, 0));
        assert_eq!(offsets.remove_topic("a").len(), 2);
        assert_eq!(offsets.len(), 1);
        assert!(offsets.get(&TopicPartition::new("b", 0)).is_some());
    }

    #[test]
    fn expiry_by_commit_time_base_time_and_explicit_timestamp() {
        let mut offsets = GroupOffsets::new();
        offsets.commit(TopicPartition::new("a", 0), committed(1, 100));
        offsets.commit(TopicPartition::new("a", 1), committed(1, 500));
        let mut explicit = committed(1, 0);
        explicit.expire_timestamp_ms = Some(50);
        offsets.commit(TopicPartition::new("a", 2), explicit);
        let none = |_: &TopicPartition| false;
        assert_eq!(offsets.remove_expired(49, 1_000, None, none).len(), 0);
        assert_eq!(offsets.remove_expired(50, 1_000, None, none).len(), 1);
        assert_eq!(offsets.remove_expired(1_100, 1_000, None, none).len(), 1);
        assert_eq!(
            offsets
                .remove_expired(1_100, 1_000, Some(2_000), none)
                .len(),
            0
        );
        let held = |partition: &TopicPartition| partition.partition == 1;
        assert_eq!(
            offsets
                .remove_expired(3_000, 1_000, Some(2_000), held)
                .len(),
            0
        );
        assert_eq!(
            offsets
                .remove_expired(3_000, 1_000, Some(2_000), none)
                .len(),
            1
        );
        assert!(offsets.is_empty());
    }

    #[test]
    fn explicit_expiry_spares_held_partitions() {
        let mut offsets = GroupOffsets::new();
        let mut explicit = committed(1, 0);
        explicit.expire_timestamp_ms = Some(50);
        offsets.commit(TopicPartition::new("a", 0), explicit.clone());
        offsets.commit(TopicPartition::new("a", 1), explicit);
        let held = |partition: &TopicPartition| partition.partition == 1;
        assert_eq!(
            offsets.remove_past_explicit_expiry(60, held),
            vec![TopicPartition::new("a", 0)]
        );
        assert_eq!(offsets.remove_past_explicit_expiry(60, |_| false).len(), 1);
        assert!(offsets.is_empty());
    }

    #[test]
    fn value_conversion_round_trips() {
        let offset = committed(42, 7);
        assert_eq!(CommittedOffset::from_value(&offset.to_value()), offset);
        let mut no_epoch = committed(42, 7);
        no_epoch.leader_epoch = None;
        no_epoch.expire_timestamp_ms = Some(9);
        assert_eq!(CommittedOffset::from_value(&no_epoch.to_value()), no_epoch);
    }

    proptest::proptest! {
        #[test]
        fn subscription_parsing_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let _ = subscribed_topics(&Bytes::from(bytes));
        }
    }

    #[test]
    fn subscription_topics_are_parsed() {
        let bytes =
            Bytes::from_static(&[0, 1, 0, 0, 0, 2, 0, 1, b'x', 0, 2, b'y', b'z', 0xff, 0xff]);
        let topics = subscribed_topics(&bytes).expect("parses");
        assert_eq!(topics.into_iter().collect::<Vec<_>>(), vec!["x", "yz"]);
        assert!(subscribed_topics(&Bytes::from_static(&[0, 1, 0, 0, 0, 9])).is_err());
    }
}
