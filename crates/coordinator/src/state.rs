//! The group states and their legal transitions.

use std::fmt;

/// The state of a classic consumer group, as in Kafka's group coordinator.
///
/// ```text
///            +--------------------------------------------+
///            v                                            |
///  Empty --> PreparingRebalance --> CompletingRebalance --> Stable
///    ^            |   ^                  |                   |
///    +------------+   +------------------+-------------------+
///  (any state except Dead) --> Dead
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// A rebalance started: members must (re)join before it completes.
    PreparingRebalance,
    /// Everyone joined; waiting for the leader's assignment in SyncGroup.
    CompletingRebalance,
    /// Members have their assignments and heartbeat.
    Stable,
    /// The group was deleted or expired; it is being removed.
    Dead,
}

impl GroupState {
    /// Every state, for iteration in tests and listings.
    pub const ALL: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// Whether the state machine may move from `self` to `next`.
    pub fn can_transition_to(self, next: GroupState) -> bool {
        use GroupState::{CompletingRebalance, Dead, Empty, PreparingRebalance, Stable};
        matches!(
            (self, next),
            (Empty, PreparingRebalance)
                | (PreparingRebalance, CompletingRebalance)
                | (PreparingRebalance, Empty)
                | (CompletingRebalance, Stable)
                | (CompletingRebalance, PreparingRebalance)
                | (Stable, PreparingRebalance)
                | (
                    Empty | PreparingRebalance | CompletingRebalance | Stable,
                    Dead
                )
        )
    }

    /// Kafka's name of the state, as ListGroups and DescribeGroups report it.
    pub fn kafka_name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Parses Kafka's state name (case-insensitive, as ListGroups filters are).
    pub fn from_kafka_name(name: &str) -> Option<GroupState> {
        GroupState::ALL
            .into_iter()
            .find(|state| state.kafka_name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.kafka_name())
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState::{self, CompletingRebalance, Dead, Empty, PreparingRebalance, Stable};

    const LEGAL: [(GroupState, GroupState); 10] = [
        (Empty, PreparingRebalance),
        (Empty, Dead),
        (PreparingRebalance, CompletingRebalance),
        (PreparingRebalance, Empty),
        (PreparingRebalance, Dead),
        (CompletingRebalance, Stable),
        (CompletingRebalance, PreparingRebalance),
        (CompletingRebalance, Dead),
        (Stable, PreparingRebalance),
        (Stable, Dead),
    ];

    #[test]
    fn empty_to_preparing_rebalance_is_legal() {
        assert!(Empty.can_transition_to(PreparingRebalance));
    }
    #[test]
    fn empty_to_dead_is_legal() {
        assert!(Empty.can_transition_to(Dead));
    }
    #[test]
    fn preparing_to_completing_is_legal() {
        assert!(PreparingRebalance.can_transition_to(CompletingRebalance));
    }
    #[test]
    fn preparing_to_empty_is_legal() {
        assert!(PreparingRebalance.can_transition_to(Empty));
    }
    #[test]
    fn preparing_to_dead_is_legal() {
        assert!(PreparingRebalance.can_transition_to(Dead));
    }
    #[test]
    fn completing_to_stable_is_legal() {
        assert!(CompletingRebalance.can_transition_to(Stable));
    }
    #[test]
    fn completing_to_preparing_is_legal() {
        assert!(CompletingRebalance.can_transition_to(PreparingRebalance));
    }
    #[test]
    fn completing_to_dead_is_legal() {
        assert!(CompletingRebalance.can_transition_to(Dead));
    }
    #[test]
    fn stable_to_preparing_is_legal() {
        assert!(Stable.can_transition_to(PreparingRebalance));
    }
    #[test]
    fn stable_to_dead_is_legal() {
        assert!(Stable.can_transition_to(Dead));
    }

    #[test]
    fn every_other_transition_is_illegal() {
        let mut illegal = 0;
        for from in GroupState::ALL {
            for to in GroupState::ALL {
                let legal = LEGAL.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
                if !legal {
                    illegal += 1;
                }
            }
        }
        assert_eq!(illegal, 25 - LEGAL.len());
    }

    #[test]
    fn named_illegal_transitions() {
        assert!(!Empty.can_transition_to(CompletingRebalance));
        assert!(!Empty.can_transition_to(Stable));
        assert!(!Empty.can_transition_to(Empty));
        assert!(!PreparingRebalance.can_transition_to(Stable));
        assert!(!PreparingRebalance.can_transition_to(PreparingRebalance));
        assert!(!CompletingRebalance.can_transition_to(Empty));
        assert!(!CompletingRebalance.can_transition_to(CompletingRebalance));
        assert!(!Stable.can_transition_to(Empty));
        assert!(!Stable.can_transition_to(CompletingRebalance));
        assert!(!Stable.can_transition_to(Stable));
        for to in GroupState::ALL {
            assert!(!Dead.can_transition_to(to), "Dead -> {to}");
        }
    }

    #[test]
    fn kafka_names_round_trip() {
        for state in GroupState::ALL {
            assert_eq!(GroupState::from_kafka_name(state.kafka_name()), Some(state));
        }
        assert_eq!(GroupState::from_kafka_name("stable"), Some(Stable));
        assert_eq!(GroupState::from_kafka_name("Unknown"), None);
    }
}
