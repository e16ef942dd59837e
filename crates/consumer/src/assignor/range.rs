//! `range` (Java's `RangeAssignor`): per topic, the sorted members
//! subscribed to it get consecutive ranges of partitions; the first
//! `partitions % members` get one extra.

use std::collections::BTreeMap;

use super::{empty_assignment, sorted_members, Subscription};
use crate::record::TopicPartition;

/// Assigns partitions topic by topic in ranges.
pub fn assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut assignment = empty_assignment(members);
    let order = sorted_members(members);
    for (topic, &count) in partitions_per_topic {
        let subscribed: Vec<&String> = order
            .iter()
            .copied()
            .filter(|id| members.get(*id).is_some_and(|s| s.topics.contains(topic)))
            .collect();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let consumers = subscribed.len() as i32;
        let per_consumer = count / consumers;
        let extra = count % consumers;
        for (index, id) in subscribed.into_iter().enumerate() {
            let index = index as i32;
            let start = per_consumer * index + index.min(extra);
            let length = per_consumer + i32::from(index < extra);
            if let Some(assigned) = assignment.get_mut(id) {
                assigned.extend((start..start + length).map(|p| TopicPartition::new(topic, p)));
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
        assert_eq!(names(&assignment["c0"]), ["t0-0", "t0-1", "t1-0", "t1-1"]);
        assert_eq!(names(&assignment["c1"]), ["t0-2", "t1-2"]);
    }

    #[test]
    fn only_subscribers_of_a_topic_share_it_and_static_members_sort_first() {
        let partitions = BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)]);
        let mut late = subscription(&["a", "b"]);
        late.group_instance_id = Some("i0".to_owned());
        let members = BTreeMap::from([
            ("m0".to_owned(), subscription(&["a"])),
            ("m1".to_owned(), late),
        ]);
        let assignment = assign(&partitions, &members);
        assert_eq!(names(&assignment["m1"]), ["a-0", "b-0"]);
        assert_eq!(names(&assignment["m0"]), ["a-1"]);
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let partitions = BTreeMap::from([("t".to_owned(), 1)]);
        let members = BTreeMap::from([
            ("a".to_owned(), subscription(&["t"])),
            ("b".to_owned(), subscription(&["t"])),
        ]);
        let assignment = assign(&partitions, &members);
        assert_eq!(names(&assignment["a"]), ["t-0"]);
        assert!(assignment["b"].is_empty());
    }
}
