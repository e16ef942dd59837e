//! The sans-IO parts of group membership: the member's state machine and
//! the heartbeat, session and poll timers (Java's `Heartbeat`). Time is
//! passed in, so tests drive them with made-up instants.

use std::time::{Duration, Instant};

/// Where a member stands in the group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group (never joined, left, or fenced).
    Unjoined,
    /// JoinGroup sent, waiting for the rebalance to finish.
    Joining,
    /// JoinGroup done, SyncGroup sent, waiting for the assignment.
    Syncing,
    /// Assigned and heartbeating.
    Stable,
}

/// What happens to a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberEvent {
    /// A JoinGroup request is sent.
    JoinSent,
    /// JoinGroup answered with a generation.
    Joined,
    /// SyncGroup answered with an assignment.
    Synced,
    /// The member left, was fenced, or lost its coordinator mid-rebalance.
    Reset,
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("member event {event:?} is illegal in state {state:?}")]
pub struct IllegalTransition {
    /// The state.
    pub state: MemberState,
    /// The event.
    pub event: MemberEvent,
}

impl MemberState {
    /// The state after `event`.
    pub fn on(self, event: MemberEvent) -> Result<MemberState, IllegalTransition> {
        use MemberEvent as E;
        use MemberState as S;
        match (self, event) {
            (_, E::Reset) => Ok(S::Unjoined),
            (S::Unjoined | S::Stable | S::Syncing | S::Joining, E::JoinSent) => Ok(S::Joining),
            (S::Joining, E::Joined) => Ok(S::Syncing),
            (S::Syncing, E::Synced) => Ok(S::Stable),
            (state, event) => Err(IllegalTransition { state, event }),
        }
    }
}

/// Heartbeat, session and poll timers.
#[derive(Debug, Clone)]
pub struct HeartbeatTimer {
    session_timeout: Duration,
    heartbeat_interval: Duration,
    max_poll_interval: Duration,
    last_sent: Instant,
    last_received: Instant,
    last_poll: Instant,
    in_flight: bool,
}

impl HeartbeatTimer {
    /// Timers started at `now`.
    pub fn new(
        session_timeout: Duration,
        heartbeat_interval: Duration,
        max_poll_interval: Duration,
        now: Instant,
    ) -> HeartbeatTimer {
        HeartbeatTimer {
            session_timeout,
            heartbeat_interval,
            max_poll_interval,
            last_sent: now,
            last_received: now,
            last_poll: now,
            in_flight: false,
        }
    }

    /// The application polled.
    pub fn polled(&mut self, now: Instant) {
        self.last_poll = now;
    }

    /// A heartbeat was sent.
    pub fn sent(&mut self, now: Instant) {
        self.last_sent = now;
        self.in_flight = true;
    }

    /// A heartbeat was answered (with any group-level outcome).
    pub fn received(&mut self, now: Instant) {
        self.last_received = now;
        self.in_flight = false;
    }

    /// A heartbeat failed to reach the coordinator.
    pub fn failed(&mut self) {
        self.in_flight = false;
    }

    /// Restarts the session clock (after a join).
    pub fn reset_session(&mut self, now: Instant) {
        self.last_sent = now;
        self.last_received = now;
        self.in_flight = false;
    }

    /// Whether a heartbeat is due.
    pub fn should_heartbeat(&self, now: Instant) -> bool {
        !self.in_flight && now.saturating_duration_since(self.last_sent) >= self.heartbeat_interval
    }

    /// How long until the next heartbeat is due.
    pub fn time_to_next_heartbeat(&self, now: Instant) -> Duration {
        (self.last_sent + self.heartbeat_interval).saturating_duration_since(now)
    }

    /// Whether no heartbeat succeeded for `session.timeout.ms`: the
    /// coordinator is presumed gone.
    pub fn session_expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_received) > self.session_timeout
    }

    /// Whether the application has not polled for `max.poll.interval.ms`.
    pub fn poll_expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_poll) > self.max_poll_interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legal_transitions_follow_the_protocol() {
        use MemberEvent as E;
        use MemberState as S;
        assert_eq!(S::Unjoined.on(E::JoinSent), Ok(S::Joining));
        assert_eq!(S::Joining.on(E::Joined), Ok(S::Syncing));
        assert_eq!(S::Syncing.on(E::Synced), Ok(S::Stable));
        assert_eq!(S::Stable.on(E::JoinSent), Ok(S::Joining));
        assert_eq!(S::Syncing.on(E::JoinSent), Ok(S::Joining));
        for state in [S::Unjoined, S::Joining, S::Syncing, S::Stable] {
            assert_eq!(state.on(E::Reset), Ok(S::Unjoined));
        }
    }

    #[test]
    fn illegal_transitions_are_errors() {
        use MemberEvent as E;
        use MemberState as S;
        for (state, event) in [
            (S::Unjoined, E::Joined),
            (S::Unjoined, E::Synced),
            (S::Joining, E::Synced),
            (S::Stable, E::Joined),
            (S::Stable, E::Synced),
            (S::Syncing, E::Joined),
        ] {
            assert_eq!(state.on(event), Err(IllegalTransition { state, event }));
        }
    }

    fn timer(start: Instant) -> HeartbeatTimer {
        HeartbeatTimer::new(
            Duration::from_secs(10),
            Duration::from_secs(3),
            Duration::from_secs(60),
            start,
        )
    }

    #[test]
    fn heartbeats_are_due_every_interval_one_at_a_time() {
        let start = Instant::now();
        let mut timer = timer(start);
        assert!(!timer.should_heartbeat(start + Duration::from_secs(2)));
        assert_eq!(
            timer.time_to_next_heartbeat(start + Duration::from_secs(2)),
            Duration::from_secs(1)
        );
        let due = start + Duration::from_secs(3);
        assert!(timer.should_heartbeat(due));
        timer.sent(due);
        assert!(
            !timer.should_heartbeat(due + Duration::from_secs(5)),
            "one in flight"
        );
        timer.received(due + Duration::from_millis(10));
        assert!(timer.should_heartbeat(due + Duration::from_secs(3)));
    }

    #[test]
    fn session_expires_without_answers_and_poll_timer_tracks_polls() {
        let start = Instant::now();
        let mut timer = timer(start);
        timer.sent(start + Duration::from_secs(3));
        timer.failed();
        assert!(!timer.session_expired(start + Duration::from_secs(10)));
        assert!(timer.session_expired(start + Duration::from_secs(11)));
        timer.received(start + Duration::from_secs(11));
        assert!(!timer.session_expired(start + Duration::from_secs(12)));

        assert!(!timer.poll_expired(start + Duration::from_secs(60)));
        assert!(timer.poll_expired(start + Duration::from_secs(61)));
        timer.polled(start + Duration::from_secs(61));
        assert!(!timer.poll_expired(start + Duration::from_secs(100)));
    }
}
