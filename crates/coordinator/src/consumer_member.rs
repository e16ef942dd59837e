//! A member of a consumer-protocol group (KIP-848) and the reconciliation
//! that moves its assignment toward the group's target.
//!
//! A member gives up partitions before it gets new ones: while it still
//! owns partitions its target no longer holds it stays at its epoch in
//! [`MemberState::UnrevokedPartitions`]; only once a heartbeat shows them
//! gone does it take the target's epoch, and a partition another member
//! still owns is withheld ([`MemberState::UnreleasedPartitions`]) until
//! that owner's heartbeat releases it.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::consumer_assignor::{
    assignment_intersection, assignment_minus, assignment_union, Assignment,
};

/// Where a member's reconciliation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemberState {
    /// The member owns its target assignment at the target epoch.
    Stable,
    /// The member must give up partitions before it moves on.
    UnrevokedPartitions,
    /// The member is at the target epoch but waits for partitions other
    /// members still own.
    UnreleasedPartitions,
    /// A state read from a record written by a newer coordinator.
    Unknown,
}

impl MemberState {
    /// Every state.
    pub const ALL: [MemberState; 4] = [
        MemberState::Stable,
        MemberState::UnrevokedPartitions,
        MemberState::UnreleasedPartitions,
        MemberState::Unknown,
    ];

    /// The state's byte in `ConsumerGroupCurrentMemberAssignmentValue`.
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// The state of a record's byte.
    pub fn from_code(code: i8) -> MemberState {
        match code {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    /// Kafka's name, as ConsumerGroupDescribe tools print it.
    pub fn kafka_name(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            MemberState::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
            MemberState::Unknown => "UNKNOWN",
        }
    }
}

/// The epoch a static member reports when it leaves temporarily.
pub const LEAVE_STATIC_MEMBER_EPOCH: i32 = -2;
/// The epoch a member reports when it leaves.
pub const LEAVE_MEMBER_EPOCH: i32 = -1;

/// One member of a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    /// The member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// The client's rack.
    pub rack_id: Option<String>,
    /// The client id of its last heartbeat.
    pub client_id: String,
    /// The client host of its last heartbeat.
    pub client_host: String,
    /// Topic names it subscribes to.
    pub subscribed_topics: BTreeSet<String>,
    /// The regular expression it subscribes with, if any (whole names).
    pub subscribed_topic_regex: Option<String>,
    /// The server assignor it asked for.
    pub server_assignor: Option<String>,
    /// How long it may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    /// Its epoch.
    pub member_epoch: i32,
    /// Its epoch before the last bump (a heartbeat at this epoch whose
    /// partitions are a subset of the assignment is accepted).
    pub previous_member_epoch: i32,
    /// Its reconciliation state.
    pub state: MemberState,
    /// Partitions it owns now.
    pub assigned: Assignment,
    /// Partitions it must give up.
    pub revoking: Assignment,
}

impl ConsumerMember {
    /// A new member at epoch 0 with nothing assigned.
    pub fn new(member_id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: member_id.to_owned(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topics: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: 0,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
        }
    }

    /// Whether it owns or is revoking `partition` of `topic`.
    pub fn holds(&self, topic: &Uuid, partition: i32) -> bool {
        let contains = |assignment: &Assignment| {
            assignment
                .get(topic)
                .is_some_and(|partitions| partitions.contains(&partition))
        };
        contains(&self.assigned) || contains(&self.revoking)
    }

    /// Moves the member toward `target` at `target_epoch`. `owned` is what
    /// the member's heartbeat reports it owns (`None` when the heartbeat
    /// did not say); `held_elsewhere` tells whether another member still
    /// owns or revokes a partition.
    pub fn reconcile(
        &mut self,
        target_epoch: i32,
        target: &Assignment,
        owned: Option<&Assignment>,
        held_elsewhere: &dyn Fn(&Uuid, i32) -> bool,
    ) {
        match self.state {
            MemberState::Stable | MemberState::UnreleasedPartitions | MemberState::Unknown => {
                self.advance(target_epoch, target, held_elsewhere);
            }
            MemberState::UnrevokedPartitions => {
                let still_owned = match owned {
                    Some(owned) => !assignment_intersection(owned, &self.revoking).is_empty(),
                    None => true,
                };
                if !still_owned {
                    self.revoking.clear();
                    self.advance(target_epoch, target, held_elsewhere);
                }
            }
        }
    }

    /// The next step toward `target`: revoke first, then take the
    /// partitions nobody else holds, at the target epoch.
    fn advance(
        &mut self,
        target_epoch: i32,
        target: &Assignment,
        held_elsewhere: &dyn Fn(&Uuid, i32) -> bool,
    ) {
        let keep = assignment_intersection(&self.assigned, target);
        let revoke = assignment_minus(&self.assigned, target);
        let wanted = assignment_minus(target, &self.assigned);
        let mut free = Assignment::new();
        let mut unreleased = false;
        for (topic, partitions) in &wanted {
            for partition in partitions {
                if held_elsewhere(topic, *partition) {
                    unreleased = true;
                } else {
                    free.entry(*topic).or_default().insert(*partition);
                }
            }
        }
        if !revoke.is_empty() {
            self.assigned = keep;
            self.revoking = revoke;
            self.state = MemberState::UnrevokedPartitions;
            return;
        }
        self.assigned = assignment_union(&keep, &free);
        self.revoking.clear();
        if self.member_epoch != target_epoch {
            self.previous_member_epoch = self.member_epoch;
            self.member_epoch = target_epoch;
        }
        self.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }
}

#[cfg(test)]
#[path = "consumer_member_tests.rs"]
mod tests;
