//! `roundrobin` (Java's `RoundRobinAssignor`): all partitions of all
//! subscribed topics, sorted, dealt to the sorted members in turn, skipping
//! members not subscribed to a partition's topic.

use std::collections::{BTreeMap, BTreeSet};

use super::{empty_assignment, sorted_members, Subscription};
use crate::record::TopicPartition;

/// Deals partitions round-robin.
pub fn assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut assignment = empty_assignment(members);
    let order = sorted_members(members);
    if order.is_empty() {
        return assignment;
    }
    let subscribed: BTreeSet<&String> = members.values().flat_map(|s| &s.topics).collect();
    let mut next = 0usize;
    for (topic, &count) in partitions_per_topic {
        if !subscribed.contains(topic) {
            continue;
        }
        for partition in 0..count.max(0) {
            for step in 0..order.len() {
                let Some(id) = order.get((next + step) % order.len()) else {
                    continue;
                };
                if members.get(*id).is_some_and(|s| s.topics.contains(topic)) {
                    if let Some(assigned) = assignment.get_mut(*id) {
                        assigned.push(TopicPartition::new(topic, partition));
                    }
                    next = (next + step + 1) % order.len();
                    break;
                }
            }
        }
    }
    assignment
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{names, subscription};
    use super::*;

    #[test]
    fn java_example_two_consumers_two_topics_three_partitions() {
        let partitions = BTreeMap::from([("t0".to_owned(), 3), ("t1".to_owned(), 3)]);
        let members = BTreeMap::from([
            ("c0".to_owned(), subscription(&["t0", "t1"])),
            ("c1".to_owned(), subscription(&["t0", "t1"])),
        ]);
        let assignment = assign(&partitions, &members);
        assert_eq!(names(&assignment["c0"]), ["t0-0", "t0-2", "t1-1"]);
        assert_eq!(names(&assignment["c1"]), ["t0-1", "t1-0", "t1-2"]);
    }

    #[test]
    fn java_example_unequal_subscriptions() {
        let partitions = BTreeMap::from([
            ("t0".to_owned(), 1),
            ("t1".to_owned(), 2),
            ("t2".to_owned(), 3),
        ]);
        let members = BTreeMap::from([
            ("c0".to_owned(), subscription(&["t0"])),
            ("c1".to_owned(), subscription(&["t0", "t1"])),
            ("c2".to_owned(), subscription(&["t0", "t1", "t2"])),
        ]);
        let assignment = assign(&partitions, &members);
        assert_eq!(names(&assignment["c0"]), ["t0-0"]);
        assert_eq!(names(&assignment["c1"]), ["t1-0"]);
        assert_eq!(names(&assignment["c2"]), ["t1-1", "t2-0", "t2-1", "t2-2"]);
    }
}
