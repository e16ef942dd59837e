//! Rack-aware replica assignment, as Kafka does it when every broker has a
//! `broker.rack`.
//!
//! The brokers are first arranged so that racks alternate (racks in name
//! order, the brokers of each rack by id, then rack 1's first broker, rack
//! 2's first, ..., rack 1's second, ...). Leaders walk that list from a
//! random start, as in the rack-unaware case. Each follower is searched
//! from a shifted position (the shift is a multiple of the rack count and
//! grows every `n` partitions), skipping a broker whose rack already has a
//! replica while some rack has none, and a broker that already has one
//! while some broker has none. So a partition's replicas span
//! `min(replication factor, racks)` racks, and replicas spread evenly.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::AssignmentError;
use crate::image::BrokerId;
use strom_clock::Random;

/// Assigns replicas over brokers that all have racks, with random start
/// index and shift.
pub fn assign_replicas_rack_aware(
    brokers: &[(BrokerId, String)],
    partitions: i32,
    replication_factor: i32,
    first_partition_index: i32,
    random: &dyn Random,
) -> Result<Vec<Vec<BrokerId>>, AssignmentError> {
    let start_index = random.below(brokers.len());
    let replica_shift = random.below(brokers.len());
    assign_replicas_rack_aware_from(
        brokers,
        partitions,
        replication_factor,
        first_partition_index,
        start_index,
        replica_shift,
    )
}

/// The broker ids with racks alternating (see the module docs).
pub fn rack_alternated(brokers: &[(BrokerId, String)]) -> Vec<BrokerId> {
    let mut by_rack: BTreeMap<&str, BTreeSet<BrokerId>> = BTreeMap::new();
    for (broker_id, rack) in brokers {
        by_rack.entry(rack.as_str()).or_default().insert(*broker_id);
    }
    let mut iterators: Vec<_> = by_rack.into_values().map(BTreeSet::into_iter).collect();
    let mut arranged = Vec::new();
    loop {
        let before = arranged.len();
        for iterator in &mut iterators {
            if let Some(broker_id) = iterator.next() {
                arranged.push(broker_id);
            }
        }
        if arranged.len() == before {
            return arranged;
        }
    }
}

/// Rack-aware assignment with a fixed start index and initial shift.
pub fn assign_replicas_rack_aware_from(
    brokers: &[(BrokerId, String)],
    partitions: i32,
    replication_factor: i32,
    first_partition_index: i32,
    start_index: usize,
    replica_shift: usize,
) -> Result<Vec<Vec<BrokerId>>, AssignmentError> {
    let arranged = rack_alternated(brokers);
    let rack_of: BTreeMap<BrokerId, &str> = brokers
        .iter()
        .map(|(broker_id, rack)| (*broker_id, rack.as_str()))
        .collect();
    let broker_count = arranged.len();
    let replicas = crate::assignment::check_counts(broker_count, partitions, replication_factor)?;
    let rack_count = rack_of.values().collect::<BTreeSet<_>>().len();
    let start_index = start_index % broker_count;
    let mut shift = replica_shift % broker_count;
    let first = usize::try_from(first_partition_index.max(0)).unwrap_or(0);
    let count = usize::try_from(partitions).unwrap_or(0);
    let mut assignment = Vec::with_capacity(count);
    for partition_id in first..first + count {
        if partition_id > 0 && partition_id % broker_count == 0 {
            shift += 1;
        }
        let first_index = (partition_id + start_index) % broker_count;
        let placement = Placement {
            arranged: &arranged,
            rack_of: &rack_of,
            rack_count,
        };
        assignment.push(placement.replicas(first_index, shift * rack_count, replicas));
    }
    Ok(assignment)
}

struct Placement<'a> {
    arranged: &'a [BrokerId],
    rack_of: &'a BTreeMap<BrokerId, &'a str>,
    rack_count: usize,
}

impl Placement<'_> {
    fn replicas(&self, first_index: usize, shift: usize, replicas: usize) -> Vec<BrokerId> {
        let broker_count = self.arranged.len();
        let leader = self.arranged[first_index];
        let mut chosen = vec![leader];
        let mut racks: BTreeSet<&str> = BTreeSet::from([self.rack_of[&leader]]);
        let mut step = 0;
        while chosen.len() < replicas {
            let offset = 1 + (shift + step) % (broker_count - 1);
            let broker = self.arranged[(first_index + offset) % broker_count];
            let rack = self.rack_of[&broker];
            let rack_ok = !racks.contains(rack) || racks.len() == self.rack_count;
            let broker_ok = !chosen.contains(&broker) || chosen.len() == broker_count;
            if rack_ok && broker_ok {
                chosen.push(broker);
                racks.insert(rack);
            }
            step += 1;
        }
        chosen
    }
}

#[cfg(test)]
#[path = "rack_assignment_tests.rs"]
mod tests;
