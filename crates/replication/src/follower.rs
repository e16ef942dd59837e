//! A follower's replication state of one partition.

use crate::BrokerId;

/// A follower's view: which leader at which epoch, where to fetch next, and
/// the HW as the leader reported it (never beyond the local log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerState {
    leader: BrokerId,
    leader_epoch: i32,
    log_end_offset: i64,
    high_watermark: i64,
}

impl FollowerState {
    /// Becomes a follower of `leader` at `leader_epoch`.
    pub fn new(
        leader: BrokerId,
        leader_epoch: i32,
        log_end_offset: i64,
        high_watermark: i64,
    ) -> FollowerState {
        FollowerState {
            leader,
            leader_epoch,
            log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
        }
    }

    /// The leader to fetch from.
    pub fn leader(&self) -> BrokerId {
        self.leader
    }

    /// The leader epoch this follower follows.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The next offset to fetch (the local LEO).
    pub fn fetch_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The local high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Records the result of a fetch: the local LEO after appending what the
    /// leader sent, and the leader's HW. The local HW is the leader's, capped
    /// by what this replica holds, and never decreases.
    pub fn on_fetch_response(&mut self, log_end_offset: i64, leader_high_watermark: i64) {
        self.log_end_offset = log_end_offset;
        let candidate = leader_high_watermark.min(log_end_offset);
        self.high_watermark = self.high_watermark.max(candidate).min(log_end_offset);
    }

    /// Records a truncation (after OffsetForLeaderEpoch, KIP-101).
    pub fn on_truncate(&mut self, log_end_offset: i64) {
        self.log_end_offset = log_end_offset;
        self.high_watermark = self.high_watermark.min(log_end_offset);
    }

    /// Records that the log was emptied to start at `log_start_offset`, the
    /// leader's log start (the follower's records were all below it).
    pub fn on_restart_at(&mut self, log_start_offset: i64) {
        self.log_end_offset = log_start_offset;
        self.high_watermark = self.high_watermark.max(log_start_offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_watermark_is_capped_by_the_local_log() {
        let mut state = FollowerState::new(2, 3, 0, 0);
        state.on_fetch_response(10, 50);
        assert_eq!(state.high_watermark(), 10);
        assert_eq!(state.fetch_offset(), 10);
        state.on_fetch_response(60, 50);
        assert_eq!(state.high_watermark(), 50);
    }

    #[test]
    fn truncation_clamps_the_high_watermark() {
        let mut state = FollowerState::new(2, 3, 100, 90);
        state.on_truncate(80);
        assert_eq!(state.high_watermark(), 80);
        assert_eq!(state.fetch_offset(), 80);
        assert_eq!(state.leader(), 2);
        assert_eq!(state.leader_epoch(), 3);
    }
}
