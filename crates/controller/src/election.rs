//! The four leader election policies of Kafka's controller, as pure
//! functions of a partition's replicas, ISR and the set of live brokers.
//!
//! | policy               | used when                               | candidates, in order                           |
//! |----------------------|-----------------------------------------|------------------------------------------------|
//! | offline partition    | the leader died or the partition is new | assigned replicas that are live and in the ISR; if none and unclean election is enabled, any live assigned replica |
//! | reassignment         | a reassignment completes                | target replicas that are live and in the ISR   |
//! | preferred replica    | rebalancing leadership                  | only the first assigned replica, if live and in the ISR |
//! | controlled shutdown  | a broker shuts down cleanly             | assigned replicas live, in the ISR and not shutting down |
//!
//! Each returns the new leader and the new ISR, or `None` when no candidate
//! qualifies (the partition stays or becomes leaderless).

use crate::image::BrokerId;

/// The result of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// The elected leader.
    pub leader: BrokerId,
    /// The ISR after the election; always contains `leader`.
    pub isr: Vec<BrokerId>,
    /// Whether the leader was taken from outside the ISR (data may be lost).
    pub unclean: bool,
}

/// Offline partition election: the first assigned replica that is live and
/// in the ISR. If none qualifies and `unclean_enabled`, the first live
/// assigned replica becomes leader with an ISR of itself alone. The clean
/// ISR keeps only live members.
pub fn offline_partition_leader(
    assignment: &[BrokerId],
    isr: &[BrokerId],
    is_live: impl Fn(BrokerId) -> bool,
    unclean_enabled: bool,
) -> Option<Election> {
    let clean = assignment
        .iter()
        .find(|id| is_live(**id) && isr.contains(id))
        .map(|leader| Election {
            leader: *leader,
            isr: isr.iter().copied().filter(|id| is_live(*id)).collect(),
            unclean: false,
        });
    if clean.is_some() || !unclean_enabled {
        return clean;
    }
    assignment
        .iter()
        .find(|id| is_live(**id))
        .map(|leader| Election {
            leader: *leader,
            isr: vec![*leader],
            unclean: true,
        })
}

/// Reassignment election: the first replica of the target assignment that
/// is live and in the ISR. The ISR is unchanged.
pub fn reassignment_leader(
    target_replicas: &[BrokerId],
    isr: &[BrokerId],
    is_live: impl Fn(BrokerId) -> bool,
) -> Option<Election> {
    target_replicas
        .iter()
        .find(|id| is_live(**id) && isr.contains(id))
        .map(|leader| Election {
            leader: *leader,
            isr: isr.to_vec(),
            unclean: false,
        })
}

/// Preferred replica election: the first assigned replica, only if it is
/// live and in the ISR. The ISR is unchanged.
pub fn preferred_replica_leader(
    assignment: &[BrokerId],
    isr: &[BrokerId],
    is_live: impl Fn(BrokerId) -> bool,
) -> Option<Election> {
    assignment
        .first()
        .filter(|id| is_live(**id) && isr.contains(id))
        .map(|leader| Election {
            leader: *leader,
            isr: isr.to_vec(),
            unclean: false,
        })
}

/// Controlled shutdown election: the first assigned replica that is live,
/// in the ISR and not shutting down. The new ISR drops the brokers that are
/// shutting down.
pub fn controlled_shutdown_leader(
    assignment: &[BrokerId],
    isr: &[BrokerId],
    is_live: impl Fn(BrokerId) -> bool,
    is_shutting_down: impl Fn(BrokerId) -> bool,
) -> Option<Election> {
    assignment
        .iter()
        .find(|id| is_live(**id) && isr.contains(id) && !is_shutting_down(**id))
        .map(|leader| Election {
            leader: *leader,
            isr: isr
                .iter()
                .copied()
                .filter(|id| !is_shutting_down(*id))
                .collect(),
            unclean: false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ids: &'static [BrokerId]) -> impl Fn(BrokerId) -> bool {
        move |id| ids.contains(&id)
    }

    #[test]
    fn offline_picks_first_live_isr_member_in_assignment_order() {
        let election = offline_partition_leader(&[1, 2, 3], &[3, 2], live(&[2, 3]), false).unwrap();
        assert_eq!(election.leader, 2);
        assert_eq!(election.isr, vec![3, 2]);
        assert!(!election.unclean);
    }

    #[test]
    fn offline_drops_dead_members_from_the_isr() {
        let election =
            offline_partition_leader(&[1, 2, 3], &[1, 2, 3], live(&[2, 3]), false).unwrap();
        assert_eq!(election.leader, 2);
        assert_eq!(election.isr, vec![2, 3]);
    }

    #[test]
    fn offline_without_live_isr_member_fails_when_unclean_is_disabled() {
        assert_eq!(
            offline_partition_leader(&[1, 2, 3], &[1], live(&[2, 3]), false),
            None
        );
    }

    #[test]
    fn offline_unclean_takes_first_live_replica_with_isr_of_itself() {
        let election = offline_partition_leader(&[1, 2, 3], &[1], live(&[3, 2]), true).unwrap();
        assert_eq!(election.leader, 2);
        assert_eq!(election.isr, vec![2]);
        assert!(election.unclean);
    }

    #[test]
    fn offline_prefers_clean_even_when_unclean_is_enabled() {
        let election = offline_partition_leader(&[1, 2, 3], &[3], live(&[2, 3]), true).unwrap();
        assert_eq!(election.leader, 3);
        assert!(!election.unclean);
    }

    #[test]
    fn offline_with_nothing_live_fails_even_unclean() {
        assert_eq!(
            offline_partition_leader(&[1, 2], &[1, 2], live(&[]), true),
            None
        );
    }

    #[test]
    fn reassignment_picks_from_the_target_replicas() {
        let election = reassignment_leader(&[4, 5, 6], &[1, 5, 6], live(&[1, 4, 5, 6])).unwrap();
        assert_eq!(election.leader, 5);
        assert_eq!(reassignment_leader(&[4], &[1], live(&[1, 4])), None);
    }

    #[test]
    fn preferred_replica_is_only_the_first_assigned() {
        let election = preferred_replica_leader(&[2, 1], &[1, 2], live(&[1, 2])).unwrap();
        assert_eq!(election.leader, 2);
        assert_eq!(preferred_replica_leader(&[2, 1], &[1], live(&[1, 2])), None);
        assert_eq!(preferred_replica_leader(&[2, 1], &[1, 2], live(&[1])), None);
        assert_eq!(preferred_replica_leader(&[], &[1], live(&[1])), None);
    }

    #[test]
    fn controlled_shutdown_skips_and_drops_shutting_down_brokers() {
        let election =
            controlled_shutdown_leader(&[1, 2, 3], &[1, 2, 3], live(&[1, 2, 3]), |id| id == 1)
                .unwrap();
        assert_eq!(election.leader, 2);
        assert_eq!(election.isr, vec![2, 3]);
        assert_eq!(
            controlled_shutdown_leader(&[1, 2], &[1], live(&[1, 2]), |id| id == 1),
            None
        );
    }
}
