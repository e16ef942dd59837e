//! Consumer lag: a group's committed offset of each partition against the
//! partition's high watermark (what Burrow and kafka-lag-exporter report).

use crate::view::BrokerView;

/// One committed offset and how far behind it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The group's committed offset (the next record it will read).
    pub committed: i64,
    /// The partition's high watermark, if this broker leads it.
    pub high_watermark: Option<i64>,
}

impl PartitionLag {
    /// Records between the committed offset and the high watermark (never
    /// negative), if the high watermark is known here.
    pub fn lag(&self) -> Option<i64> {
        self.high_watermark
            .map(|high_watermark| (high_watermark - self.committed).max(0))
    }
}

/// Every committed offset of `group` with its lag, by topic and partition.
pub fn group_lags(broker: &dyn BrokerView, group: &str) -> Vec<PartitionLag> {
    broker
        .committed_offsets(group)
        .into_iter()
        .filter(|offset| offset.offset >= 0)
        .map(|offset| {
            let high_watermark = broker.high_watermark(&offset.topic, offset.partition);
            PartitionLag {
                topic: offset.topic,
                partition: offset.partition,
                committed: offset.offset,
                high_watermark,
            }
        })
        .collect()
}
