//! Offsets committed inside transactions (TxnOffsetCommit, KIP-98) that
//! wait for their transaction's marker, and the markers that wait for the
//! log to commit them.
//!
//! A transactional offset is held by the `__consumer_offsets` partition of
//! its group and the producer that wrote it, with its position in the log
//! (the offset of its record, or of the last record of its batch). A commit
//! marker of that producer makes the offsets written before it the group's
//! committed offsets; an abort marker drops them. A plain commit or a
//! tombstone of the same group and partition written later supersedes
//! them, so that whichever record comes last in the log wins, as it does
//! in Kafka's coordinator.

use std::collections::BTreeMap;

use crate::log::TransactionMarker;
use crate::offsets::TopicPartition;
use crate::records::OffsetsRecord;

/// A transactional offset commit record and its position in the log.
pub(crate) type PositionedRecord = (i64, OffsetsRecord);

/// A marker waiting for the log to commit it: its offset, its producer and
/// the outcome.
pub(crate) type QueuedMarker = (i64, i64, TransactionMarker);

/// A TxnOffsetCommit's records between validation and their append.
#[derive(Debug, Clone)]
pub(crate) struct StagedTransaction {
    /// The `__consumer_offsets` partition of the group.
    pub(crate) partition: i32,
    /// The transactional producer.
    pub(crate) producer_id: i64,
    /// Its epoch.
    pub(crate) producer_epoch: i16,
    /// The offset commit records.
    pub(crate) records: Vec<OffsetsRecord>,
}

/// The open transactions' offsets and the markers not committed yet.
#[derive(Debug, Default)]
pub(crate) struct PendingTransactions {
    /// Open transactions' offset commits by `__consumer_offsets` partition
    /// and producer id, in log order.
    open: BTreeMap<(i32, i64), Vec<PositionedRecord>>,
    /// Markers written at or past the high watermark, by partition and
    /// marker offset, with their producer and outcome.
    markers: BTreeMap<(i32, i64), Vec<(i64, TransactionMarker)>>,
}

impl PendingTransactions {
    /// Holds `records`, written by `producer_id` at `position` of
    /// `partition`, until a marker of that producer.
    pub(crate) fn open(
        &mut self,
        partition: i32,
        producer_id: i64,
        position: i64,
        records: impl IntoIterator<Item = OffsetsRecord>,
    ) {
        let held = self.open.entry((partition, producer_id)).or_default();
        held.extend(records.into_iter().map(|record| (position, record)));
        if held.is_empty() {
            self.open.remove(&(partition, producer_id));
        }
    }

    /// Removes and returns the records `producer_id` wrote to `partition`
    /// before `marker_offset`, in log order: those its marker there ends.
    pub(crate) fn take(
        &mut self,
        partition: i32,
        producer_id: i64,
        marker_offset: i64,
    ) -> Vec<PositionedRecord> {
        let key = (partition, producer_id);
        let Some(held) = self.open.get_mut(&key) else {
            return Vec::new();
        };
        let (ended, later): (Vec<_>, Vec<_>) = std::mem::take(held)
            .into_iter()
            .partition(|(position, _)| *position < marker_offset);
        if later.is_empty() {
            self.open.remove(&key);
        } else {
            *held = later;
        }
        ended
    }

    /// A record of `group_id` for `partition` at `position` is now the
    /// group's (a plain commit, a tombstone, or a committed transaction's
    /// offset): transactional offsets written before it lose to it.
    pub(crate) fn supersede(&mut self, group_id: &str, partition: &TopicPartition, position: i64) {
        self.retain(|held_position, record| {
            *held_position >= position || !commit_of(record, group_id, Some(partition))
        });
    }

    /// Drops the transactional offsets of `group_id` (of one of its
    /// partitions when `only` is given): they were deleted.
    pub(crate) fn drop_offsets(&mut self, group_id: &str, only: Option<&TopicPartition>) {
        self.retain(|_, record| !commit_of(record, group_id, only));
    }

    /// Drops the transactional offsets of the deleted `topics`.
    pub(crate) fn drop_topics(&mut self, topics: &[String]) {
        self.retain(|_, record| match record {
            OffsetsRecord::OffsetCommit { topic, .. } => !topics.contains(topic),
            _ => true,
        });
    }

    fn retain(&mut self, mut keep: impl FnMut(&i64, &OffsetsRecord) -> bool) {
        for held in self.open.values_mut() {
            held.retain(|(position, record)| keep(position, record));
        }
        self.open.retain(|_, held| !held.is_empty());
    }

    /// Whether an open transaction holds an offset of `group_id` (of
    /// `only`, when given).
    pub(crate) fn has_offsets(&self, group_id: &str, only: Option<&TopicPartition>) -> bool {
        self.open
            .values()
            .flatten()
            .any(|(_, record)| commit_of(record, group_id, only))
    }

    /// How many (partition, producer) transactions hold offsets.
    pub(crate) fn open_transactions(&self) -> usize {
        self.open.len()
    }

    /// Queues the marker of `producer_id` at `marker_offset` of
    /// `partition` until the log commits it.
    pub(crate) fn queue_marker(
        &mut self,
        partition: i32,
        marker_offset: i64,
        producer_id: i64,
        marker: TransactionMarker,
    ) {
        self.markers
            .entry((partition, marker_offset))
            .or_default()
            .push((producer_id, marker));
    }

    /// Removes and returns the queued markers of `partition` below
    /// `high_watermark`, in log order.
    pub(crate) fn take_markers(
        &mut self,
        partition: i32,
        high_watermark: i64,
    ) -> Vec<QueuedMarker> {
        let ready: Vec<(i32, i64)> = self
            .markers
            .range((partition, i64::MIN)..(partition, high_watermark))
            .map(|(key, _)| *key)
            .collect();
        let mut markers = Vec::new();
        for key in ready {
            for (producer_id, marker) in self.markers.remove(&key).unwrap_or_default() {
                markers.push((key.1, producer_id, marker));
            }
        }
        markers
    }

    /// The partitions with queued markers.
    pub(crate) fn marker_partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.markers.keys().map(|(partition, _)| *partition)
    }

    /// Forgets everything of `partition` except the queued markers past
    /// `kept_after` (markers reported while it loaded that the replayed
    /// records did not reach).
    pub(crate) fn clear_partition(&mut self, partition: i32, kept_after: i64) {
        self.open.retain(|(held, _), _| *held != partition);
        self.markers
            .retain(|(held, offset), _| *held != partition || *offset > kept_after);
    }
}

/// Whether `record` commits an offset of `group_id` (of `only`, when
/// given).
pub(crate) fn commit_of(
    record: &OffsetsRecord,
    group_id: &str,
    only: Option<&TopicPartition>,
) -> bool {
    match record {
        OffsetsRecord::OffsetCommit {
            group,
            topic,
            partition,
            ..
        } => {
            group == group_id
                && only.is_none_or(|key| key.topic == *topic && key.partition == *partition)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::OffsetCommitValue;

    fn commit(group: &str, topic: &str, offset: i64) -> OffsetsRecord {
        OffsetsRecord::OffsetCommit {
            group: group.into(),
            topic: topic.into(),
            partition: 0,
            value: Some(OffsetCommitValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
                expire_timestamp_ms: -1,
            }),
        }
    }

    fn offsets(records: &[PositionedRecord]) -> Vec<(i64, i64)> {
        records
            .iter()
            .map(|(position, record)| match record {
                OffsetsRecord::OffsetCommit {
                    value: Some(value), ..
                } => (*position, value.offset),
                other => panic!("not a commit: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_marker_ends_only_what_its_producer_wrote_before_it() {
        let mut pending = PendingTransactions::default();
        pending.open(0, 7, 10, [commit("g", "t", 1)]);
        pending.open(0, 7, 20, [commit("g", "t", 2)]);
        pending.open(0, 8, 15, [commit("g", "u", 3)]);
        pending.open(1, 7, 12, [commit("h", "t", 4)]);
        assert_eq!(offsets(&pending.take(0, 7, 18)), vec![(10, 1)]);
        assert_eq!(offsets(&pending.take(0, 7, 18)), vec![]);
        assert!(pending.has_offsets("g", Some(&TopicPartition::new("t", 0))));
        assert_eq!(offsets(&pending.take(0, 7, 30)), vec![(20, 2)]);
        assert_eq!(pending.open_transactions(), 2);
        assert_eq!(offsets(&pending.take(0, 9, 30)), vec![]);
    }

    #[test]
    fn later_records_supersede_earlier_transactional_offsets_only() {
        let mut pending = PendingTransactions::default();
        let key = TopicPartition::new("t", 0);
        pending.open(0, 7, 10, [commit("g", "t", 1), commit("g", "u", 1)]);
        pending.open(0, 8, 30, [commit("g", "t", 2)]);
        pending.supersede("g", &key, 20);
        assert_eq!(offsets(&pending.take(0, 7, 40)), vec![(10, 1)]);
        assert_eq!(offsets(&pending.take(0, 8, 40)), vec![(30, 2)]);
        pending.supersede("other", &key, 100);
        assert_eq!(pending.open_transactions(), 0);
    }

    #[test]
    fn deletions_drop_held_offsets() {
        let mut pending = PendingTransactions::default();
        pending.open(0, 7, 10, [commit("g", "t", 1), commit("g", "u", 1)]);
        pending.open(0, 8, 11, [commit("h", "t", 1)]);
        pending.drop_offsets("g", Some(&TopicPartition::new("u", 0)));
        assert!(!pending.has_offsets("g", Some(&TopicPartition::new("u", 0))));
        assert!(pending.has_offsets("g", None));
        pending.drop_topics(&["t".to_owned()]);
        assert!(!pending.has_offsets("g", None));
        assert!(!pending.has_offsets("h", None));
        assert_eq!(pending.open_transactions(), 0);
        pending.open(0, 7, 12, []);
        assert_eq!(pending.open_transactions(), 0);
    }

    #[test]
    fn markers_wait_for_the_high_watermark_and_clearing_keeps_later_ones() {
        let mut pending = PendingTransactions::default();
        pending.queue_marker(0, 5, 7, TransactionMarker::Commit);
        pending.queue_marker(0, 9, 8, TransactionMarker::Abort);
        pending.queue_marker(1, 2, 7, TransactionMarker::Commit);
        assert_eq!(pending.take_markers(0, 5), vec![]);
        assert_eq!(
            pending.take_markers(0, 6),
            vec![(5, 7, TransactionMarker::Commit)]
        );
        pending.open(0, 8, 3, [commit("g", "t", 1)]);
        pending.clear_partition(0, 8);
        assert_eq!(pending.open_transactions(), 0);
        assert_eq!(pending.marker_partitions().collect::<Vec<_>>(), vec![0, 1]);
        pending.clear_partition(0, 9);
        assert_eq!(pending.marker_partitions().collect::<Vec<_>>(), vec![1]);
        assert_eq!(
            pending.take_markers(1, i64::MAX),
            vec![(2, 7, TransactionMarker::Commit)]
        );
    }
}
