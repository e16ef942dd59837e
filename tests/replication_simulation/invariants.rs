//! The replication invariants the simulation checks after every step and
//! at the end.

use std::collections::{BTreeMap, BTreeSet};

use strom_replication::{Partition, RoleView};
use strom_storage::batch::parse_header;

use super::{Simulation, PARTITIONS, TOPIC};

// The invariants.
impl Simulation {
    pub(crate) fn check_step_invariants(&mut self) {
        let mut leaders: BTreeMap<(i32, i32), i32> = BTreeMap::new();
        let mut violations = Vec::new();
        for (id, broker) in &self.brokers {
            if !broker.alive {
                continue;
            }
            for (index, partition) in &broker.partitions {
                let RoleView::Leader { leader_epoch } = partition.role_view() else {
                    continue;
                };
                if let Some(other) = leaders.insert((*index, leader_epoch), *id) {
                    violations.push(format!(
                        "brokers {other} and {id} both lead p{index} at epoch {leader_epoch}"
                    ));
                }
                match self.leaders_seen.get(&(*index, leader_epoch)) {
                    Some(seen) if seen != id => violations.push(format!(
                        "p{index} epoch {leader_epoch} led by {seen} and later by {id}"
                    )),
                    _ => {}
                }
                let high_watermark = partition.high_watermark.current();
                let key = (*id, *index, leader_epoch);
                if self
                    .high_watermarks
                    .get(&key)
                    .is_some_and(|seen| *seen > high_watermark)
                {
                    violations.push(format!(
                        "the HW of p{index} on leader {id} at epoch {leader_epoch} went back to {high_watermark}"
                    ));
                }
                self.high_watermarks.insert(key, high_watermark);
            }
        }
        for (key, id) in leaders {
            self.leaders_seen.entry(key).or_insert(id);
        }
        violations.extend(self.acknowledged_on_isr());
        if let Some(violation) = violations.first() {
            self.fail(violation);
        }
    }

    /// Every acknowledged record is, at its offset, in the log of the
    /// leader and of every live and registered ISR member whose log
    /// reaches that far.
    fn acknowledged_on_isr(&self) -> Vec<String> {
        let mut violations = Vec::new();
        let Some(topic) = self.image.topic_by_name(TOPIC) else {
            return violations;
        };
        for (partition, producer) in &self.producers {
            let Some(state) = topic.partition(*partition) else {
                continue;
            };
            for member in &state.isr {
                let broker = &self.brokers[member];
                if !broker.alive || broker.registered().is_none() {
                    continue;
                }
                let Some(replica) = broker.partitions.get(partition) else {
                    continue;
                };
                let batches = read_batches(replica, i64::MAX);
                // A follower may still be catching up; the leader may not:
                // it was elected from the ISR, which holds every
                // acknowledged record.
                let leads = state.leader == Some(*member)
                    && matches!(replica.role_view(), RoleView::Leader { leader_epoch } if leader_epoch == state.leader_epoch);
                for (sequence, offset) in &producer.acknowledged {
                    if !leads && batches.last().is_none_or(|last| last.0 < *offset) {
                        continue;
                    }
                    if !batches
                        .iter()
                        .any(|batch| batch.0 == *offset && batch.1 == *sequence)
                    {
                        violations.push(format!(
                            "ISR member {member} of p{partition} lacks acknowledged seq {sequence} at {offset}: {batches:?}"
                        ));
                    }
                }
            }
        }
        violations
    }

    pub(crate) fn check_final(&self) {
        let topic = self.image.topic_by_name(TOPIC).expect("the topic");
        for (partition, producer) in &self.producers {
            let state = topic.partition(*partition).expect("the partition");
            let Some(leader) = state.leader else {
                self.fail(&format!("p{partition} has no leader at the end"));
            };
            let replica = &self.brokers[&leader].partitions[partition];
            let high_watermark = replica.high_watermark.current();
            let committed = read_batches(replica, high_watermark);
            let sequences: Vec<i32> = committed.iter().map(|batch| batch.1).collect();
            let mut seen = BTreeSet::new();
            for sequence in &sequences {
                if !seen.insert(*sequence) {
                    self.fail(&format!(
                        "p{partition}: seq {sequence} stored twice: {sequences:?}"
                    ));
                }
            }
            if sequences.windows(2).any(|pair| pair[0] >= pair[1]) {
                self.fail(&format!(
                    "p{partition}: records out of order: {sequences:?}"
                ));
            }
            for (sequence, offset) in &producer.acknowledged {
                if !committed
                    .iter()
                    .any(|batch| batch.0 == *offset && batch.1 == *sequence)
                {
                    self.fail(&format!(
                        "p{partition}: acknowledged seq {sequence} at {offset} lost: {committed:?}"
                    ));
                }
            }
        }
        for partition in 0..PARTITIONS {
            self.check_isr_identical(partition);
        }
    }

    /// The logs of a partition's ISR members are identical up to the HW.
    fn check_isr_identical(&self, partition: i32) {
        let topic = self.image.topic_by_name(TOPIC).expect("the topic");
        let state = topic.partition(partition).expect("the partition");
        let Some(leader) = state.leader else {
            self.fail(&format!("p{partition} has no leader at the end"));
        };
        let replica = &self.brokers[&leader].partitions[&partition];
        let high_watermark = replica.high_watermark.current();
        let committed = read_batches(replica, high_watermark);
        for member in &state.isr {
            let other = read_batches(&self.brokers[member].partitions[&partition], high_watermark);
            if other != committed {
                self.fail(&format!(
                    "p{partition}: ISR member {member} differs from leader {leader} below the HW {high_watermark}"
                ));
            }
        }
    }
}

/// (base offset, base sequence, crc) of every batch below `upto`.
pub(crate) fn read_batches(partition: &Partition, upto: i64) -> Vec<(i64, i32, u32)> {
    partition
        .with_log(|log| {
            let mut batches = Vec::new();
            let mut offset = log.log_start_offset();
            let end = log.log_end_offset().min(upto);
            while offset < end {
                let Ok(read) = log.read(offset, 1 << 20, end, true) else {
                    break;
                };
                let Some(bytes) = read.records.and_then(|slice| slice.to_bytes().ok()) else {
                    break;
                };
                let mut position = 0;
                let mut next = offset;
                while position < bytes.len() {
                    let Ok(header) = parse_header(&bytes[position..], position) else {
                        break;
                    };
                    if header.base_offset >= offset && header.base_offset < end {
                        batches.push((header.base_offset, header.base_sequence, header.crc));
                    }
                    next = header.base_offset + i64::from(header.last_offset_delta) + 1;
                    position += 12 + header.batch_length as usize;
                }
                if next <= offset {
                    break;
                }
                offset = next;
            }
            batches
        })
        .expect("online")
}
