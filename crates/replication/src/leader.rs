//! The leader's replication state of one partition.

use std::collections::{BTreeMap, BTreeSet};

use crate::{BrokerId, ReplicationError};

/// What the leader knows of one follower, learned from its fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// The follower's log end offset (its last fetch offset); -1 until it
    /// has fetched under the current leader epoch.
    pub log_end_offset: i64,
    /// When the follower was last known to be fully caught up.
    pub last_caught_up_time_ms: i64,
    /// When the follower last fetched.
    pub last_fetch_time_ms: i64,
    /// The leader's log end offset at the time of that fetch.
    pub leader_end_offset_at_last_fetch: i64,
}

/// A proposed ISR, to be committed by the controller (AlterPartition) before
/// it takes effect through [`LeaderState::apply_isr`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    /// The proposed ISR.
    pub isr: BTreeSet<BrokerId>,
    /// The partition epoch the proposal is based on.
    pub partition_epoch: i32,
}

/// Result of a follower fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerFetchOutcome {
    /// The new high watermark, if it advanced.
    pub high_watermark_advanced_to: Option<i64>,
    /// An ISR expansion to propose, if the follower caught up.
    pub isr_expansion: Option<IsrChange>,
}

/// Whether an `acks=all` write that needs the HW at `required_offset` is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// The HW passed the write and the ISR is large enough.
    Committed,
    /// The HW has not reached the write yet.
    Waiting,
    /// The HW passed the write, but the ISR is smaller than
    /// `min.insync.replicas` (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    NotEnoughReplicasAfterAppend,
    /// The partition is no longer led here at the epoch of the write: the
    /// client retries on the new leader (Kafka's NOT_LEADER_OR_FOLLOWER).
    NotLeader,
}

/// The leader's view of a partition: epoch, ISR, every replica's progress,
/// and the high watermark.
#[derive(Debug, Clone)]
pub struct LeaderState {
    local: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    replicas: Vec<BrokerId>,
    isr: BTreeSet<BrokerId>,
    remotes: BTreeMap<BrokerId, ReplicaProgress>,
    local_log_end_offset: i64,
    /// The LEO when this leadership began (Kafka's leader epoch start
    /// offset): a follower joins the ISR only once it has reached it.
    epoch_start_offset: i64,
    /// Followers proposed into the ISR and not yet seen committed. The HW
    /// already waits for them (Kafka's maximal ISR): the controller may
    /// commit the expansion, and elect such a follower, before this leader
    /// hears of it, so a record must not be acknowledged without them.
    pending_additions: BTreeSet<BrokerId>,
    high_watermark: i64,
    min_insync_replicas: usize,
}

impl LeaderState {
    /// Becomes leader at `leader_epoch`. `high_watermark` is the checkpointed
    /// HW (clamped to the LEO); remote replicas start with an unknown LEO, as
    /// in Kafka, so the HW only moves once every ISR member has fetched.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        local: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<BrokerId>,
        isr: BTreeSet<BrokerId>,
        local_log_end_offset: i64,
        high_watermark: i64,
        min_insync_replicas: usize,
        now_ms: i64,
    ) -> LeaderState {
        debug_assert!(replicas.contains(&local), "the leader is a replica");
        debug_assert!(local_log_end_offset >= 0);
        let remotes = replicas
            .iter()
            .filter(|&&replica| replica != local)
            .map(|&replica| {
                let progress = ReplicaProgress {
                    log_end_offset: -1,
                    last_caught_up_time_ms: now_ms,
                    last_fetch_time_ms: now_ms,
                    leader_end_offset_at_last_fetch: -1,
                };
                (replica, progress)
            })
            .collect();
        let mut state = LeaderState {
            local,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            remotes,
            local_log_end_offset,
            epoch_start_offset: local_log_end_offset,
            pending_additions: BTreeSet::new(),
            high_watermark: high_watermark.clamp(0, local_log_end_offset),
            min_insync_replicas: min_insync_replicas.max(1),
        };
        state.isr.insert(local);
        state.maybe_advance_high_watermark();
        state
    }

    /// The leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The partition epoch (bumped by every committed ISR or replica change).
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The high watermark: offsets below it are committed and visible.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The leader's own log end offset.
    pub fn log_end_offset(&self) -> i64 {
        self.local_log_end_offset
    }

    /// The in-sync replicas.
    pub fn isr(&self) -> &BTreeSet<BrokerId> {
        &self.isr
    }

    /// All replicas, in assignment order.
    pub fn replicas(&self) -> &[BrokerId] {
        &self.replicas
    }

    /// A follower's progress.
    pub fn progress(&self, replica: BrokerId) -> Option<ReplicaProgress> {
        self.remotes.get(&replica).copied()
    }

    /// Changes `min.insync.replicas` (a dynamic topic config).
    pub fn set_min_insync_replicas(&mut self, min_insync_replicas: usize) {
        self.min_insync_replicas = min_insync_replicas.max(1);
    }

    /// Checks a request's leader epoch against the partition's; `None` (old
    /// clients) always passes.
    pub fn validate_leader_epoch(&self, requested: Option<i32>) -> Result<(), ReplicationError> {
        match requested {
            Some(epoch) if epoch >= 0 && epoch < self.leader_epoch => {
                Err(ReplicationError::FencedLeaderEpoch {
                    requested: epoch,
                    current: self.leader_epoch,
                })
            }
            Some(epoch) if epoch > self.leader_epoch => Err(ReplicationError::UnknownLeaderEpoch {
                requested: epoch,
                current: self.leader_epoch,
            }),
            _ => Ok(()),
        }
    }

    /// Checks whether a write may be appended: with `acks=all`, the ISR must
    /// hold at least `min.insync.replicas` replicas.
    pub fn check_append(&self, acks_all: bool) -> Result<(), ReplicationError> {
        if acks_all && self.isr.len() < self.min_insync_replicas {
            return Err(ReplicationError::NotEnoughReplicas {
                isr_size: self.isr.len(),
                min_insync_replicas: self.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// Records a local append; returns the new HW if it advanced (it does at
    /// once when the ISR is the leader alone).
    pub fn on_local_append(&mut self, log_end_offset: i64) -> Option<i64> {
        debug_assert!(
            log_end_offset >= self.local_log_end_offset,
            "the LEO never moves back on append"
        );
        self.local_log_end_offset = log_end_offset.max(self.local_log_end_offset);
        self.maybe_advance_high_watermark()
    }

    /// Records a local truncation (for example, DeleteRecords does not
    /// truncate, but a log reset does); the HW is clamped to the new LEO.
    pub fn on_local_truncate(&mut self, log_end_offset: i64) {
        self.local_log_end_offset = log_end_offset;
        self.high_watermark = self.high_watermark.min(log_end_offset);
    }

    /// Records a follower's fetch at `fetch_offset` (its LEO).
    pub fn on_follower_fetch(
        &mut self,
        replica: BrokerId,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Result<FollowerFetchOutcome, ReplicationError> {
        let leader_end_offset = self.local_log_end_offset;
        let progress = self
            .remotes
            .get_mut(&replica)
            .ok_or(ReplicationError::UnknownReplica { replica })?;
        // Kafka's rule: caught up now if the fetch reaches the leader's LEO;
        // caught up as of the previous fetch if it reaches the LEO the leader
        // had then.
        if fetch_offset >= leader_end_offset {
            progress.last_caught_up_time_ms = now_ms;
        } else if fetch_offset >= progress.leader_end_offset_at_last_fetch
            && progress.leader_end_offset_at_last_fetch >= 0
        {
            progress.last_caught_up_time_ms = progress
                .last_caught_up_time_ms
                .max(progress.last_fetch_time_ms);
        }
        progress.log_end_offset = fetch_offset.min(leader_end_offset);
        progress.last_fetch_time_ms = now_ms;
        progress.leader_end_offset_at_last_fetch = leader_end_offset;
        let follower_end_offset = progress.log_end_offset;
        // Kafka's rule for joining: at or past the HW, and past the start
        // of this leader epoch, so that a follower has replicated at least
        // one record of the current leader before it counts (its log up to
        // there then matches this leader's).
        let isr_expansion = if !self.isr.contains(&replica)
            && follower_end_offset >= self.high_watermark
            && follower_end_offset >= self.epoch_start_offset
        {
            let mut isr = self.isr.clone();
            isr.insert(replica);
            self.pending_additions.insert(replica);
            Some(IsrChange {
                isr,
                partition_epoch: self.partition_epoch,
            })
        } else {
            None
        };
        Ok(FollowerFetchOutcome {
            high_watermark_advanced_to: self.maybe_advance_high_watermark(),
            isr_expansion,
        })
    }

    /// The ISR without the followers that have not caught up for longer than
    /// `replica_lag_time_max_ms`, if any must go.
    pub fn isr_shrink(&self, now_ms: i64, replica_lag_time_max_ms: i64) -> Option<IsrChange> {
        let lagging: Vec<BrokerId> = self
            .isr
            .iter()
            .copied()
            .filter(|&replica| replica != self.local)
            .filter(|replica| {
                self.remotes.get(replica).is_some_and(|progress| {
                    now_ms - progress.last_caught_up_time_ms > replica_lag_time_max_ms
                })
            })
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let isr = self
            .isr
            .iter()
            .copied()
            .filter(|replica| !lagging.contains(replica))
            .collect();
        Some(IsrChange {
            isr,
            partition_epoch: self.partition_epoch,
        })
    }

    /// Applies a committed change of the assigned replicas (a
    /// reassignment adding or removing replicas): an added replica is
    /// tracked from an unknown LEO, as at election, and a removed one is
    /// forgotten. The ISR is set by [`LeaderState::apply_isr`].
    pub fn set_replicas(&mut self, replicas: Vec<BrokerId>, now_ms: i64) {
        debug_assert!(replicas.contains(&self.local), "the leader is a replica");
        self.remotes.retain(|replica, _| replicas.contains(replica));
        for &replica in &replicas {
            if replica != self.local {
                self.remotes.entry(replica).or_insert(ReplicaProgress {
                    log_end_offset: -1,
                    last_caught_up_time_ms: now_ms,
                    last_fetch_time_ms: now_ms,
                    leader_end_offset_at_last_fetch: -1,
                });
            }
        }
        self.replicas = replicas;
    }

    /// Forgets the followers proposed into the ISR: the controller refused
    /// the expansion, so it is not committed and cannot be; returns the new
    /// HW if it could advance without them.
    pub fn abandon_isr_additions(&mut self) -> Option<i64> {
        self.pending_additions.clear();
        self.maybe_advance_high_watermark()
    }

    /// Followers proposed into the ISR whose expansion is not committed
    /// yet; the HW waits for them too.
    pub fn pending_isr_additions(&self) -> &BTreeSet<BrokerId> {
        &self.pending_additions
    }

    /// Applies an ISR committed by the controller; returns the new HW if a
    /// shrink let it advance.
    pub fn apply_isr(&mut self, isr: BTreeSet<BrokerId>, partition_epoch: i32) -> Option<i64> {
        debug_assert!(isr.contains(&self.local), "the leader stays in its own ISR");
        self.isr = isr;
        self.isr.insert(self.local);
        self.partition_epoch = partition_epoch;
        // The committed ISR settles every proposal made before it: one
        // still wanted is proposed again by the follower's next fetch.
        self.pending_additions.clear();
        self.maybe_advance_high_watermark()
    }

    /// Whether an `acks=all` write ending before `required_offset` is done.
    pub fn ack_status(&self, required_offset: i64) -> AckStatus {
        if self.high_watermark < required_offset {
            AckStatus::Waiting
        } else if self.isr.len() < self.min_insync_replicas {
            AckStatus::NotEnoughReplicasAfterAppend
        } else {
            AckStatus::Committed
        }
    }

    fn maybe_advance_high_watermark(&mut self) -> Option<i64> {
        let mut candidate = self.local_log_end_offset;
        for replica in self.isr.iter().chain(&self.pending_additions) {
            if *replica == self.local {
                continue;
            }
            let end = self
                .remotes
                .get(replica)
                .map_or(-1, |progress| progress.log_end_offset);
            candidate = candidate.min(end);
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            Some(candidate)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[BrokerId]) -> BTreeSet<BrokerId> {
        ids.iter().copied().collect()
    }

    fn three_replicas(now_ms: i64) -> LeaderState {
        LeaderState::new(1, 5, 7, vec![1, 2, 3], set(&[1, 2, 3]), 0, 0, 2, now_ms)
    }

    #[test]
    fn a_follower_joins_the_isr_only_past_the_start_of_the_leader_epoch() {
        // Leader of epoch 5 from LEO 10 with a checkpointed HW of 4 that
        // stays there until ISR member 3 fetches.
        let mut state = LeaderState::new(1, 5, 7, vec![1, 2, 3], set(&[1, 3]), 10, 4, 1, 0);
        assert_eq!(state.high_watermark(), 4);
        let below_start = state.on_follower_fetch(2, 8, 1).unwrap();
        assert_eq!(below_start.isr_expansion, None, "past the HW, not past 10");
        let at_start = state.on_follower_fetch(2, 10, 2).unwrap();
        assert_eq!(
            at_start.isr_expansion.map(|change| change.isr),
            Some(set(&[1, 2, 3]))
        );
    }

    #[test]
    fn single_replica_high_watermark_follows_the_log_end_offset() {
        let mut state = LeaderState::new(1, 0, 0, vec![1], set(&[1]), 0, 0, 1, 0);
        assert_eq!(state.on_local_append(10), Some(10));
        assert_eq!(state.high_watermark(), 10);
        assert_eq!(state.ack_status(10), AckStatus::Committed);
        assert_eq!(state.ack_status(11), AckStatus::Waiting);
    }

    #[test]
    fn high_watermark_is_the_minimum_leo_of_the_isr() {
        let mut state = three_replicas(0);
        state.on_local_append(100);
        assert_eq!(state.high_watermark(), 0, "followers have not fetched");
        state.on_follower_fetch(2, 60, 1).expect("replica");
        assert_eq!(state.high_watermark(), 0);
        let outcome = state.on_follower_fetch(3, 40, 1).expect("replica");
        assert_eq!(outcome.high_watermark_advanced_to, Some(40));
        state.on_follower_fetch(3, 100, 2).expect("replica");
        assert_eq!(state.high_watermark(), 60);
        assert_eq!(state.ack_status(60), AckStatus::Committed);
        assert_eq!(state.ack_status(61), AckStatus::Waiting);
    }

    #[test]
    fn high_watermark_never_decreases() {
        let mut state = three_replicas(0);
        state.on_local_append(50);
        state.on_follower_fetch(2, 50, 1).expect("replica");
        state.on_follower_fetch(3, 50, 1).expect("replica");
        assert_eq!(state.high_watermark(), 50);
        // A follower that restarted and fetches from an older offset does not
        // pull the HW back.
        state.on_follower_fetch(2, 10, 2).expect("replica");
        assert_eq!(state.high_watermark(), 50);
    }

    #[test]
    fn a_lagging_follower_is_proposed_out_of_the_isr_and_the_shrink_advances_the_hw() {
        let mut state = three_replicas(0);
        state.on_local_append(100);
        state.on_follower_fetch(2, 100, 1_000).expect("replica");
        state.on_follower_fetch(3, 10, 1_000).expect("replica");
        assert_eq!(
            state.isr_shrink(20_000, 30_000),
            None,
            "within the lag time"
        );
        state.on_follower_fetch(2, 100, 35_000).expect("replica");
        let change = state.isr_shrink(40_000, 30_000).expect("replica 3 lags");
        assert_eq!(change.isr, set(&[1, 2]));
        assert_eq!(change.partition_epoch, 7);
        assert_eq!(state.apply_isr(change.isr, 8), Some(100));
        assert_eq!(state.partition_epoch(), 8);
    }

    #[test]
    fn a_caught_up_follower_is_proposed_into_the_isr() {
        let mut state = LeaderState::new(1, 0, 0, vec![1, 2], set(&[1]), 0, 0, 1, 0);
        state.on_local_append(20);
        assert_eq!(state.high_watermark(), 20);
        let outcome = state.on_follower_fetch(2, 10, 5).expect("replica");
        assert_eq!(outcome.isr_expansion, None, "below the HW");
        let outcome = state.on_follower_fetch(2, 20, 6).expect("replica");
        assert_eq!(outcome.isr_expansion.expect("expands").isr, set(&[1, 2]));
    }

    #[test]
    fn min_insync_replicas_gates_acks_all() {
        let mut state = LeaderState::new(1, 0, 0, vec![1, 2], set(&[1]), 0, 0, 2, 0);
        assert_eq!(
            state.check_append(true),
            Err(ReplicationError::NotEnoughReplicas {
                isr_size: 1,
                min_insync_replicas: 2
            })
        );
        assert_eq!(state.check_append(false), Ok(()));
        state.on_local_append(5);
        assert_eq!(state.ack_status(5), AckStatus::NotEnoughReplicasAfterAppend);
    }

    #[test]
    fn fetches_from_non_replicas_are_refused() {
        let mut state = three_replicas(0);
        assert_eq!(
            state.on_follower_fetch(9, 0, 0),
            Err(ReplicationError::UnknownReplica { replica: 9 })
        );
    }

    #[test]
    fn a_reassignment_adds_and_forgets_followers() {
        let mut state = three_replicas(0);
        state.on_local_append(10);
        state.set_replicas(vec![1, 2, 3, 4], 5);
        let outcome = state.on_follower_fetch(4, 10, 6).unwrap();
        assert_eq!(
            outcome.isr_expansion.map(|change| change.isr),
            Some(set(&[1, 2, 3, 4]))
        );
        assert_eq!(state.progress(4).unwrap().log_end_offset, 10);
        state.set_replicas(vec![1, 4], 7);
        assert_eq!(state.replicas(), &[1, 4]);
        assert_eq!(
            state.on_follower_fetch(2, 10, 8),
            Err(ReplicationError::UnknownReplica { replica: 2 })
        );
        // A kept follower keeps its progress.
        assert_eq!(state.progress(4).unwrap().log_end_offset, 10);
    }

    #[test]
    fn the_hw_waits_for_a_follower_proposed_into_the_isr_before_the_controller_answers() {
        // ISR {1, 2}; follower 3 catches up and is proposed into the ISR.
        let mut state = LeaderState::new(1, 0, 0, vec![1, 2, 3], set(&[1, 2]), 0, 0, 1, 0);
        state.on_local_append(5);
        state.on_follower_fetch(2, 5, 1).unwrap();
        assert_eq!(state.high_watermark(), 5);
        let proposed = state.on_follower_fetch(3, 5, 2).unwrap();
        assert_eq!(proposed.isr_expansion.map(|c| c.isr), Some(set(&[1, 2, 3])));
        // The controller may commit it (and could elect 3) before this
        // leader hears back: a new record is not committed until 3 has it.
        state.on_local_append(8);
        assert_eq!(
            state
                .on_follower_fetch(2, 8, 3)
                .unwrap()
                .high_watermark_advanced_to,
            None
        );
        assert_eq!(state.high_watermark(), 5);
        assert_eq!(
            state
                .on_follower_fetch(3, 8, 4)
                .unwrap()
                .high_watermark_advanced_to,
            Some(8)
        );
        // The committed ISR settles the proposal.
        state.apply_isr(set(&[1, 2, 3]), 1);
        assert!(state.pending_isr_additions().is_empty());
    }

    #[test]
    fn a_refused_expansion_stops_holding_the_hw_back_once_the_isr_is_known() {
        let mut state = LeaderState::new(1, 0, 0, vec![1, 2, 3], set(&[1, 2]), 0, 0, 1, 0);
        state.on_local_append(5);
        state.on_follower_fetch(2, 5, 1).unwrap();
        state.on_follower_fetch(3, 5, 2).unwrap();
        state.on_local_append(8);
        state.on_follower_fetch(2, 8, 3).unwrap();
        assert_eq!(state.high_watermark(), 5, "waits for proposed 3");
        // The controller kept {1, 2} (3 was fenced meanwhile).
        assert_eq!(state.apply_isr(set(&[1, 2]), 1), Some(8));
        // A refusal without a new ISR settles a later proposal too.
        state.on_follower_fetch(3, 8, 4).unwrap();
        state.on_local_append(9);
        state.on_follower_fetch(2, 9, 5).unwrap();
        assert_eq!(state.high_watermark(), 8);
        assert_eq!(state.abandon_isr_additions(), Some(9));
        // A proposal whose answer never came keeps holding the HW back,
        // however long its follower has stopped fetching: the controller
        // may have committed it (and may elect that follower).
        state.on_follower_fetch(3, 9, 6).unwrap();
        state.on_local_append(10);
        state.on_follower_fetch(2, 10, 7).unwrap();
        assert_eq!(state.high_watermark(), 9, "waits for proposed 3");
        assert_eq!(state.apply_isr(set(&[1, 2]), 2), Some(10));
    }

    #[test]
    fn leader_epochs_are_validated() {
        let state = three_replicas(0);
        assert_eq!(state.validate_leader_epoch(None), Ok(()));
        assert_eq!(state.validate_leader_epoch(Some(-1)), Ok(()));
        assert_eq!(state.validate_leader_epoch(Some(5)), Ok(()));
        assert_eq!(
            state.validate_leader_epoch(Some(4)),
            Err(ReplicationError::FencedLeaderEpoch {
                requested: 4,
                current: 5
            })
        );
        assert_eq!(
            state.validate_leader_epoch(Some(6)),
            Err(ReplicationError::UnknownLeaderEpoch {
                requested: 6,
                current: 5
            })
        );
    }

    #[test]
    fn checkpointed_high_watermark_is_clamped_to_the_log() {
        let state = LeaderState::new(1, 0, 0, vec![1, 2], set(&[1, 2]), 10, 50, 1, 0);
        assert_eq!(state.high_watermark(), 10);
    }

    proptest::proptest! {
        #[test]
        fn invariants_hold_under_random_events(events in proptest::collection::vec((0u8..4, 1i32..4, 0i64..200), 1..200)) {
            let mut state = three_replicas(0);
            let mut now = 0;
            let mut previous_hw = state.high_watermark();
            for (kind, replica, value) in events {
                now += 100;
                match kind {
                    0 => { let leo = state.log_end_offset() + value % 10; state.on_local_append(leo); }
                    1 if replica != 1 => { let _ = state.on_follower_fetch(replica, value.min(state.log_end_offset()), now); }
                    2 => if let Some(change) = state.isr_shrink(now, 500) { let epoch = state.partition_epoch() + 1; state.apply_isr(change.isr, epoch); },
                    _ => if let Some(change) = state.on_follower_fetch(2, state.log_end_offset(), now).ok().and_then(|o| o.isr_expansion) { let epoch = state.partition_epoch() + 1; state.apply_isr(change.isr, epoch); },
                }
                proptest::prop_assert!(state.high_watermark() >= previous_hw, "HW never decreases");
                proptest::prop_assert!(state.high_watermark() <= state.log_end_offset(), "HW never passes the LEO");
                proptest::prop_assert!(state.isr().contains(&1), "the leader stays in the ISR");
                if state.isr().len() == 1 && state.pending_isr_additions().is_empty() {
                    proptest::prop_assert_eq!(state.high_watermark(), state.log_end_offset(), "an ISR of one commits at once");
                }
                for pending in state.pending_isr_additions() {
                    let end = state.progress(*pending).map_or(-1, |p| p.log_end_offset);
                    proptest::prop_assert!(state.high_watermark() <= end.max(previous_hw), "the HW waits for a proposed ISR member");
                }
                previous_hw = state.high_watermark();
            }
        }
    }
}
