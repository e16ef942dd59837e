//! Partition assignors with the Java client's protocol names and the
//! `ConsumerProtocol` subscription and assignment encodings, so Strom,
//! librdkafka and Java consumers can share one group.
//!
//! The group leader decodes every member's [`Subscription`], runs the
//! assignor the group agreed on, and encodes one [`Assignment`] per member.
//! Assignors are pure functions of the members' subscriptions and the
//! partition counts.

mod cooperative_sticky;
mod protocol;
mod range;
mod round_robin;

use std::collections::BTreeMap;

pub use cooperative_sticky::assign as cooperative_sticky;
pub use protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, Assignment,
    Subscription, ASSIGNMENT_VERSION, SUBSCRIPTION_VERSION,
};
pub use range::assign as range;
pub use round_robin::assign as round_robin;

use crate::config::AssignmentStrategy;
use crate::record::TopicPartition;

/// How members give up partitions in a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member revokes everything before joining (range, roundrobin).
    Eager,
    /// Members keep what they own; moved partitions are revoked first and
    /// assigned in a follow-up rebalance (cooperative-sticky).
    Cooperative,
}

impl AssignmentStrategy {
    /// The rebalance protocol of the strategy.
    pub fn rebalance_protocol(self) -> RebalanceProtocol {
        match self {
            AssignmentStrategy::CooperativeSticky => RebalanceProtocol::Cooperative,
            AssignmentStrategy::Range | AssignmentStrategy::RoundRobin => RebalanceProtocol::Eager,
        }
    }

    /// Runs the strategy: `partitions_per_topic` gives each known topic's
    /// partition count, `members` each member's subscription.
    pub fn assign(
        self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &BTreeMap<String, Subscription>,
    ) -> BTreeMap<String, Vec<TopicPartition>> {
        match self {
            AssignmentStrategy::Range => range(partitions_per_topic, members),
            AssignmentStrategy::RoundRobin => round_robin(partitions_per_topic, members),
            AssignmentStrategy::CooperativeSticky => {
                cooperative_sticky(partitions_per_topic, members)
            }
        }
    }
}

/// Member ids in the Java client's order: static members first (by group
/// instance id), then dynamic members by member id.
pub(crate) fn sorted_members(members: &BTreeMap<String, Subscription>) -> Vec<&String> {
    let mut ids: Vec<&String> = members.keys().collect();
    ids.sort_by(|a, b| {
        let key = |id: &String| {
            let instance = members.get(id).and_then(|s| s.group_instance_id.clone());
            (instance.is_none(), instance, id.clone())
        };
        key(a).cmp(&key(b))
    });
    ids
}

/// An empty assignment for every member.
pub(crate) fn empty_assignment(
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    members.keys().map(|id| (id.clone(), Vec::new())).collect()
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A subscription to `topics`.
    pub fn subscription(topics: &[&str]) -> Subscription {
        Subscription {
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            ..Subscription::default()
        }
    }

    /// `topic-partition` names of an assignment, for terse assertions.
    pub fn names(assigned: &[TopicPartition]) -> Vec<String> {
        assigned.iter().map(ToString::to_string).collect()
    }
}
