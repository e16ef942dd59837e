//! Partition sets of consumer-protocol groups (KIP-848) and the
//! server-side assignors that compute a group's target assignment.
//!
//! Assignments name topics by id, as ConsumerGroupHeartbeat and the
//! `__consumer_offsets` records do. Both assignors are deterministic: the
//! same members, subscriptions, topics and previous target give the same
//! result on every coordinator, so a replayed group assigns as before.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Partitions in `left` that are not in `right`.
pub fn assignment_minus(left: &Assignment, right: &Assignment) -> Assignment {
    let mut result = Assignment::new();
    for (topic, partitions) in left {
        let remaining: BTreeSet<i32> = match right.get(topic) {
            Some(others) => partitions.difference(others).copied().collect(),
            None => partitions.clone(),
        };
        if !remaining.is_empty() {
            result.insert(*topic, remaining);
        }
    }
    result
}

/// Partitions in both `left` and `right`.
pub fn assignment_intersection(left: &Assignment, right: &Assignment) -> Assignment {
    let mut result = Assignment::new();
    for (topic, partitions) in left {
        if let Some(others) = right.get(topic) {
            let common: BTreeSet<i32> = partitions.intersection(others).copied().collect();
            if !common.is_empty() {
                result.insert(*topic, common);
            }
        }
    }
    result
}

/// Partitions in `left` or `right`.
pub fn assignment_union(left: &Assignment, right: &Assignment) -> Assignment {
    let mut result = left.clone();
    for (topic, partitions) in right {
        result
            .entry(*topic)
            .or_default()
            .extend(partitions.iter().copied());
    }
    result.retain(|_, partitions| !partitions.is_empty());
    result
}

/// How many partitions an assignment holds.
pub fn assignment_size(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// The server-side assignors of `group.consumer.assignors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerAssignor {
    /// `uniform`: balanced (member counts differ by at most one among the
    /// members subscribed to a topic) and sticky (a member keeps what it
    /// had in the previous target while that stays balanced).
    Uniform,
    /// `range`: per topic, contiguous ranges of partitions to the
    /// subscribed members in member id order, the first ones one more.
    Range,
}

impl ConsumerAssignor {
    /// Kafka's name of the assignor.
    pub fn name(self) -> &'static str {
        match self {
            ConsumerAssignor::Uniform => "uniform",
            ConsumerAssignor::Range => "range",
        }
    }

    /// Parses a name of `group.consumer.assignors` (Kafka's short names or
    /// its class names).
    pub fn from_name(name: &str) -> Option<ConsumerAssignor> {
        match name.trim() {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Some(ConsumerAssignor::Uniform)
            }
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
                Some(ConsumerAssignor::Range)
            }
            _ => None,
        }
    }

    /// The target assignment of every member: `subscriptions` maps member
    /// ids to the topic ids they subscribe to, `partition_counts` gives
    /// each existing topic's partition count, `previous` is the last
    /// target. Subscribed topics missing from `partition_counts` get
    /// nothing.
    pub fn assign(
        self,
        subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
        partition_counts: &BTreeMap<Uuid, i32>,
        previous: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        let mut target: BTreeMap<String, Assignment> = subscriptions
            .keys()
            .map(|member| (member.clone(), Assignment::new()))
            .collect();
        for (topic, count) in partition_counts {
            let subscribers: Vec<&String> = subscriptions
                .iter()
                .filter(|(_, topics)| topics.contains(topic))
                .map(|(member, _)| member)
                .collect();
            if subscribers.is_empty() || *count <= 0 {
                continue;
            }
            let per_member = match self {
                ConsumerAssignor::Range => range_topic(&subscribers, *count),
                ConsumerAssignor::Uniform => uniform_topic(topic, &subscribers, *count, previous),
            };
            for (member, partitions) in per_member {
                if !partitions.is_empty() {
                    if let Some(assignment) = target.get_mut(member) {
                        assignment.insert(*topic, partitions);
                    }
                }
            }
        }
        target
    }
}

/// Contiguous ranges of `0..count` for `members` (already in id order).
fn range_topic<'a>(members: &[&'a String], count: i32) -> Vec<(&'a String, BTreeSet<i32>)> {
    let member_count = i32::try_from(members.len()).unwrap_or(i32::MAX);
    let base = count / member_count;
    let extra = count % member_count;
    let mut next = 0;
    let mut result = Vec::with_capacity(members.len());
    for (index, member) in (0..).zip(members.iter()) {
        let size = base + i32::from(index < extra);
        result.push((*member, (next..next + size).collect()));
        next += size;
    }
    result
}

/// One topic's partitions, balanced over `members`: each keeps what it had
/// in `previous` up to its quota, the rest go to the members with fewest.
fn uniform_topic<'a>(
    topic: &Uuid,
    members: &[&'a String],
    count: i32,
    previous: &BTreeMap<String, Assignment>,
) -> Vec<(&'a String, BTreeSet<i32>)> {
    let member_count = members.len();
    let partition_count = usize::try_from(count).unwrap_or(0);
    let base = partition_count / member_count;
    let extra = partition_count % member_count;
    let mut result: Vec<(&String, BTreeSet<i32>)> = members
        .iter()
        .map(|member| (*member, BTreeSet::new()))
        .collect();
    let mut taken = BTreeSet::new();
    let mut extras_used = 0;
    for (member, partitions) in &mut result {
        let kept = previous
            .get(member.as_str())
            .and_then(|assignment| assignment.get(topic))
            .into_iter()
            .flatten()
            .filter(|partition| **partition < count);
        for partition in kept {
            let quota = base + usize::from(extras_used < extra);
            if partitions.len() >= quota {
                break;
            }
            partitions.insert(*partition);
            taken.insert(*partition);
        }
        if partitions.len() > base {
            extras_used += 1;
        }
    }
    for partition in (0..count).filter(|partition| !taken.contains(partition)) {
        let smallest = result
            .iter_mut()
            .min_by_key(|(_, partitions)| partitions.len())
            .map(|(_, partitions)| partitions);
        if let Some(partitions) = smallest {
            partitions.insert(partition);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str], topics: &[Uuid]) -> BTreeMap<String, BTreeSet<Uuid>> {
        names
            .iter()
            .map(|name| (name.to_string(), topics.iter().copied().collect()))
            .collect()
    }

    fn topic(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn counts(entries: &[(Uuid, i32)]) -> BTreeMap<Uuid, i32> {
        entries.iter().copied().collect()
    }

    fn assert_exact_cover(target: &BTreeMap<String, Assignment>, topic: Uuid, count: i32) {
        let mut seen = BTreeSet::new();
        for assignment in target.values() {
            for partition in assignment.get(&topic).into_iter().flatten() {
                assert!(seen.insert(*partition), "partition {partition} twice");
            }
        }
        assert_eq!(seen, (0..count).collect());
    }

    #[test]
    fn range_gives_contiguous_ranges_first_members_one_more() {
        let target = ConsumerAssignor::Range.assign(
            &members(&["a", "b", "c"], &[topic(1)]),
            &counts(&[(topic(1), 7)]),
            &BTreeMap::new(),
        );
        assert_eq!(target["a"][&topic(1)], (0..3).collect());
        assert_eq!(target["b"][&topic(1)], (3..5).collect());
        assert_eq!(target["c"][&topic(1)], (5..7).collect());
    }

    #[test]
    fn uniform_is_balanced_and_covers_every_partition() {
        for member_count in 1..6 {
            let names: Vec<String> = (0..member_count).map(|i| format!("m{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let target = ConsumerAssignor::Uniform.assign(
                &members(&refs, &[topic(1), topic(2)]),
                &counts(&[(topic(1), 5), (topic(2), 3)]),
                &BTreeMap::new(),
            );
            assert_exact_cover(&target, topic(1), 5);
            assert_exact_cover(&target, topic(2), 3);
            let sizes: Vec<usize> = target.values().map(assignment_size).collect();
            let max = sizes.iter().max().copied().unwrap_or(0);
            let min = sizes.iter().min().copied().unwrap_or(0);
            assert!(max - min <= 2, "{sizes:?}");
        }
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let subscribed = members(&["a", "b"], &[topic(1)]);
        let partitions = counts(&[(topic(1), 6)]);
        let first = ConsumerAssignor::Uniform.assign(&subscribed, &partitions, &BTreeMap::new());
        let grown = members(&["a", "b", "c"], &[topic(1)]);
        let second = ConsumerAssignor::Uniform.assign(&grown, &partitions, &first);
        assert_exact_cover(&second, topic(1), 6);
        for member in ["a", "b"] {
            let before = &first[member][&topic(1)];
            let after = &second[member][&topic(1)];
            assert_eq!(after.len(), 2);
            assert!(
                after.is_subset(before),
                "{member} lost a partition it could keep"
            );
        }
    }

    #[test]
    fn unsubscribed_and_missing_topics_get_nothing() {
        let mut subscribed = members(&["a"], &[topic(1)]);
        subscribed.insert("b".into(), [topic(2)].into_iter().collect());
        let target = ConsumerAssignor::Uniform.assign(
            &subscribed,
            &counts(&[(topic(1), 2)]),
            &BTreeMap::new(),
        );
        assert_eq!(target["a"][&topic(1)], (0..2).collect());
        assert!(target["b"].is_empty());
    }

    #[test]
    fn set_operations() {
        let left: Assignment = [(topic(1), [0, 1, 2].into_iter().collect())].into();
        let right: Assignment = [(topic(1), [2, 3].into_iter().collect())].into();
        assert_eq!(assignment_minus(&left, &right)[&topic(1)], [0, 1].into());
        assert_eq!(
            assignment_intersection(&left, &right)[&topic(1)],
            [2].into()
        );
        assert_eq!(assignment_size(&assignment_union(&left, &right)), 4);
        assert!(assignment_minus(&left, &left).is_empty());
    }

    #[test]
    fn assignor_names() {
        for assignor in [ConsumerAssignor::Uniform, ConsumerAssignor::Range] {
            assert_eq!(ConsumerAssignor::from_name(assignor.name()), Some(assignor));
        }
        assert_eq!(ConsumerAssignor::from_name("sticky"), None);
    }
}
