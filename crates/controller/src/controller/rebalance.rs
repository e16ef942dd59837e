//! Automatic preferred-leader rebalancing (`auto.leader.rebalance.enable`).
//!
//! Every `leader.imbalance.check.interval.seconds`, the active controller
//! looks at each broker's preferred partitions (those whose first replica
//! is that broker): the share of them that another broker leads is the
//! broker's leader imbalance. Above `leader.imbalance.per.broker.percentage`
//! the controller runs a preferred replica election for each of them whose
//! preferred replica is live and in the ISR, as Kafka's controller does.
//! Partitions being reassigned are left alone (their replica order is the
//! reassignment's).

use std::collections::BTreeMap;

use super::{is_live, Controller, Pending};
use crate::election::preferred_replica_leader;
use crate::error::ApplyError;
use crate::image::{BrokerId, MetadataImage};

use super::brokers::election_record;

/// One broker's preferred partitions: how many, and which of them another
/// broker leads (topic name, partition index).
#[derive(Debug, Default)]
struct Preferred {
    total: usize,
    led_elsewhere: Vec<(String, usize)>,
}

impl Controller {
    /// Runs the rebalance check if it is enabled and due at `now_ms`;
    /// returns the partitions whose leadership moved.
    pub(super) fn maybe_rebalance(
        &mut self,
        pending: &mut Pending,
        now_ms: u64,
    ) -> Result<Vec<(String, i32, BrokerId)>, ApplyError> {
        if !self.config.auto_leader_rebalance_enable {
            return Ok(Vec::new());
        }
        let last = *self.last_rebalance_check_ms.get_or_insert(now_ms);
        if now_ms.saturating_sub(last) < self.config.leader_imbalance_check_interval_ms {
            return Ok(Vec::new());
        }
        self.last_rebalance_check_ms = Some(now_ms);
        let percentage = self.config.leader_imbalance_per_broker_percentage;
        let mut moved = Vec::new();
        for (broker_id, preferred) in preferred_by_broker(&pending.image) {
            // Kafka's test: imbalance ratio > percentage / 100.
            let imbalanced =
                preferred.led_elsewhere.len() * 100 > preferred.total * percentage as usize;
            if !imbalanced || !is_live(&pending.image, broker_id) {
                continue;
            }
            tracing::info!(
                broker_id,
                led_elsewhere = preferred.led_elsewhere.len(),
                preferred = preferred.total,
                "leader imbalance above leader.imbalance.per.broker.percentage; electing preferred leaders"
            );
            for (topic_name, index) in preferred.led_elsewhere {
                if let Some(leader) = elect_preferred(pending, &topic_name, index)? {
                    moved.push((topic_name, i32::try_from(index).unwrap_or(i32::MAX), leader));
                }
            }
        }
        Ok(moved)
    }
}

/// Each broker's preferred partitions, over partitions not being
/// reassigned.
fn preferred_by_broker(image: &MetadataImage) -> BTreeMap<BrokerId, Preferred> {
    let mut by_broker: BTreeMap<BrokerId, Preferred> = BTreeMap::new();
    for topic in image.topics() {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let Some(preferred) = partition.replicas.first().copied() else {
                continue;
            };
            if partition.is_reassigning() {
                continue;
            }
            let entry = by_broker.entry(preferred).or_default();
            entry.total += 1;
            if partition.leader != Some(preferred) {
                entry.led_elsewhere.push((topic.name.clone(), index));
            }
        }
    }
    by_broker
}

/// A preferred replica election for one partition, if its preferred
/// replica can lead; returns the new leader.
fn elect_preferred(
    pending: &mut Pending,
    topic_name: &str,
    index: usize,
) -> Result<Option<BrokerId>, ApplyError> {
    let image = &pending.image;
    let Some(topic) = image.topic_by_name(topic_name) else {
        return Ok(None);
    };
    let Some(partition) = topic.partitions.get(index) else {
        return Ok(None);
    };
    let live = |id| is_live(image, id);
    let Some(election) = preferred_replica_leader(&partition.replicas, &partition.isr, live) else {
        return Ok(None);
    };
    if partition.leader == Some(election.leader) {
        return Ok(None);
    }
    let leader = election.leader;
    let record = election_record(image, topic, index, partition, election);
    pending.push(vec![record])?;
    Ok(Some(leader))
}
