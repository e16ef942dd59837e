//! `cooperative-sticky` (Java's `CooperativeStickyAssignor`): a balanced
//! assignment that keeps as many owned partitions in place as possible, with
//! the cooperative rule on top: a partition moving from one member to
//! another is left unassigned in this rebalance (its owner revokes it and
//! rejoins) and assigned in the follow-up rebalance. Partitions that do not
//! move keep being consumed throughout.
//!
//! Stickiness comes from each member's `owned_partitions` (subscription v1+);
//! when two members claim one partition the higher `generation_id` (v2+)
//! wins, as in Java.

use std::collections::{BTreeMap, BTreeSet};

use super::{empty_assignment, sorted_members, Subscription};
use crate::record::TopicPartition;

/// Assigns with stickiness and cooperative revocation.
pub fn assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let order = sorted_members(members);
    let mut assignment = empty_assignment(members);
    let all = assignable_partitions(partitions_per_topic, members);
    if order.is_empty() || all.is_empty() {
        return assignment;
    }
    let prior_owner = prior_owners(members);
    let claimed = valid_claims(members, &order, &all);
    for (tp, (_, member)) in &claimed {
        if let Some(assigned) = assignment.get_mut(*member) {
            assigned.push(tp.clone());
        }
    }
    let mut unassigned: BTreeSet<TopicPartition> = all
        .iter()
        .filter(|tp| !claimed.contains_key(*tp))
        .cloned()
        .collect();
    trim_to_quota(&mut assignment, &order, all.len(), &mut unassigned);
    fill(&mut assignment, &order, members, unassigned);
    for (member, assigned) in assignment.iter_mut() {
        assigned.retain(|tp| prior_owner.get(tp).is_none_or(|owner| *owner == member));
        assigned.sort();
    }
    assignment
}

/// Existing partitions of topics somebody subscribes to.
fn assignable_partitions(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &BTreeMap<String, Subscription>,
) -> BTreeSet<TopicPartition> {
    let subscribed: BTreeSet<&String> = members.values().flat_map(|s| &s.topics).collect();
    partitions_per_topic
        .iter()
        .filter(|(topic, _)| subscribed.contains(topic))
        .flat_map(|(topic, &count)| (0..count.max(0)).map(move |p| TopicPartition::new(topic, p)))
        .collect()
}

/// Who owned each partition before this rebalance (any claim counts).
fn prior_owners(members: &BTreeMap<String, Subscription>) -> BTreeMap<TopicPartition, &String> {
    let mut owners: BTreeMap<TopicPartition, (i32, &String)> = BTreeMap::new();
    for (member, subscription) in members {
        for tp in &subscription.owned_partitions {
            let claim = (subscription.generation_id, member);
            let entry = owners.entry(tp.clone()).or_insert(claim);
            if claim.0 > entry.0 {
                *entry = claim;
            }
        }
    }
    owners
        .into_iter()
        .map(|(tp, (_, member))| (tp, member))
        .collect()
}

/// Claims that can be kept: the partition exists, the member still
/// subscribes to its topic, and no claim from a newer generation exists.
fn valid_claims<'a>(
    members: &'a BTreeMap<String, Subscription>,
    order: &[&'a String],
    all: &BTreeSet<TopicPartition>,
) -> BTreeMap<TopicPartition, (i32, &'a String)> {
    let mut claimed: BTreeMap<TopicPartition, (i32, &String)> = BTreeMap::new();
    for member in order {
        let Some(subscription) = members.get(*member) else {
            continue;
        };
        for tp in &subscription.owned_partitions {
            let valid = all.contains(tp) && subscription.topics.iter().any(|t| **t == *tp.topic);
            let newer = claimed
                .get(tp)
                .is_none_or(|(generation, _)| subscription.generation_id > *generation);
            if valid && newer {
                claimed.insert(tp.clone(), (subscription.generation_id, *member));
            }
        }
    }
    claimed
}

/// Members above their quota give up their excess (highest partitions
/// first): at most `total % members` members may hold one above the floor.
fn trim_to_quota(
    assignment: &mut BTreeMap<String, Vec<TopicPartition>>,
    order: &[&String],
    total: usize,
    unassigned: &mut BTreeSet<TopicPartition>,
) {
    let min_quota = total / order.len();
    let mut extra_slots = total % order.len();
    let mut by_size: Vec<&String> = order.to_vec();
    by_size.sort_by_key(|member| std::cmp::Reverse(assignment.get(*member).map_or(0, Vec::len)));
    for member in by_size {
        let Some(assigned) = assignment.get_mut(member) else {
            continue;
        };
        assigned.sort();
        let quota = if assigned.len() > min_quota && extra_slots > 0 {
            extra_slots -= 1;
            min_quota + 1
        } else {
            min_quota
        };
        if assigned.len() > quota {
            unassigned.extend(assigned.drain(quota..));
        }
    }
}

/// Gives each unassigned partition to the least-loaded member subscribed to
/// its topic (ties in member order).
fn fill(
    assignment: &mut BTreeMap<String, Vec<TopicPartition>>,
    order: &[&String],
    members: &BTreeMap<String, Subscription>,
    unassigned: BTreeSet<TopicPartition>,
) {
    for tp in unassigned {
        let target = order
            .iter()
            .filter(|member| {
                members
                    .get(**member)
                    .is_some_and(|s| s.topics.iter().any(|t| **t == *tp.topic))
            })
            .min_by_key(|member| assignment.get(**member).map_or(0, Vec::len));
        if let Some(assigned) = target.and_then(|member| assignment.get_mut(*member)) {
            assigned.push(tp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{names, subscription};
    use super::*;

    fn owning(topics: &[&str], owned: &[i32], generation_id: i32) -> Subscription {
        Subscription {
            owned_partitions: owned.iter().map(|p| TopicPartition::new("t", *p)).collect(),
            generation_id,
            ..subscription(topics)
        }
    }

    fn six() -> BTreeMap<String, i32> {
        BTreeMap::from([("t".to_owned(), 6)])
    }

    #[test]
    fn a_fresh_group_is_balanced() {
        let members = BTreeMap::from([
            ("a".to_owned(), subscription(&["t"])),
            ("b".to_owned(), subscription(&["t"])),
            ("c".to_owned(), subscription(&["t"])),
        ]);
        let assignment = assign(&six(), &members);
        assert!(assignment.values().all(|assigned| assigned.len() == 2));
        let total: BTreeSet<_> = assignment.values().flatten().collect();
        assert_eq!(total.len(), 6);
    }

    #[test]
    fn a_joining_member_gets_moved_partitions_only_after_they_are_revoked() {
        let first = BTreeMap::from([
            ("a".to_owned(), owning(&["t"], &[0, 1, 2], 1)),
            ("b".to_owned(), owning(&["t"], &[3, 4, 5], 1)),
            ("c".to_owned(), subscription(&["t"])),
        ]);
        let round_one = assign(&six(), &first);
        assert_eq!(names(&round_one["a"]), ["t-0", "t-1"]);
        assert_eq!(names(&round_one["b"]), ["t-3", "t-4"]);
        assert!(round_one["c"].is_empty(), "t-2 and t-5 are still owned");

        let second = BTreeMap::from([
            ("a".to_owned(), owning(&["t"], &[0, 1], 2)),
            ("b".to_owned(), owning(&["t"], &[3, 4], 2)),
            ("c".to_owned(), subscription(&["t"])),
        ]);
        let round_two = assign(&six(), &second);
        assert_eq!(names(&round_two["a"]), ["t-0", "t-1"]);
        assert_eq!(names(&round_two["b"]), ["t-3", "t-4"]);
        assert_eq!(names(&round_two["c"]), ["t-2", "t-5"]);
    }

    #[test]
    fn a_leaving_members_partitions_move_at_once_and_others_stay() {
        let members = BTreeMap::from([
            ("a".to_owned(), owning(&["t"], &[0, 1], 3)),
            ("b".to_owned(), owning(&["t"], &[2, 3], 3)),
        ]);
        let assignment = assign(&six(), &members);
        assert_eq!(names(&assignment["a"]), ["t-0", "t-1", "t-4"]);
        assert_eq!(names(&assignment["b"]), ["t-2", "t-3", "t-5"]);
    }

    #[test]
    fn the_newer_generation_wins_a_conflicting_claim() {
        let members = BTreeMap::from([
            ("a".to_owned(), owning(&["t"], &[0], 1)),
            ("b".to_owned(), owning(&["t"], &[0], 2)),
        ]);
        let assignment = assign(&BTreeMap::from([("t".to_owned(), 2)]), &members);
        assert_eq!(names(&assignment["b"]), ["t-0"]);
        assert_eq!(names(&assignment["a"]), ["t-1"]);
    }
}
