//! Incremental fetch sessions (KIP-227), sans-IO, one per broker.
//!
//! The first request of a session is a full fetch with session id 0 and
//! epoch 0 ("create a session if you can"). A broker that answers with a
//! non-zero session id keeps the partition list; later requests carry that
//! id, the next epoch, only the partitions whose fetch offset or size limit
//! changed, and the partitions to forget. A broker that answers session id 0
//! (Strom's broker does) gets full fetches every time. A session error resets
//! to a full fetch.

use std::collections::BTreeMap;

use strom_protocol::ErrorCode;

use crate::record::TopicPartition;

/// What one partition asks for in a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionFetch {
    /// The fetch offset.
    pub fetch_offset: i64,
    /// The per-partition byte limit.
    pub max_bytes: i32,
    /// The leader epoch the consumer knows, -1 if none.
    pub current_leader_epoch: i32,
}

/// The session part of one Fetch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    /// The session id (0 for none).
    pub session_id: i32,
    /// The session epoch (0 to create a session, -1 for sessionless).
    pub session_epoch: i32,
    /// The partitions to put in the request.
    pub partitions: Vec<(TopicPartition, PartitionFetch)>,
    /// The partitions to remove from the session.
    pub forgotten: Vec<TopicPartition>,
    /// Whether the request is a full fetch (the complete partition list).
    pub full: bool,
}

/// The fetch session with one broker.
#[derive(Debug, Default)]
pub struct FetchSession {
    session_id: i32,
    next_epoch: i32,
    /// The partitions the broker's session holds, with what it last saw.
    partitions: BTreeMap<TopicPartition, PartitionFetch>,
    /// The full partition list of the request in flight (applied on success).
    pending: Option<BTreeMap<TopicPartition, PartitionFetch>>,
}

impl FetchSession {
    /// A session handler with no session yet.
    pub fn new() -> FetchSession {
        FetchSession::default()
    }

    /// The current session id (0 when sessionless).
    pub fn session_id(&self) -> i32 {
        self.session_id
    }

    /// Builds the session part of the next request for `wanted`.
    pub fn build(&mut self, wanted: &BTreeMap<TopicPartition, PartitionFetch>) -> SessionRequest {
        self.pending = Some(wanted.clone());
        if self.session_id == 0 {
            return SessionRequest {
                session_id: 0,
                session_epoch: 0,
                partitions: wanted.iter().map(|(tp, f)| (tp.clone(), *f)).collect(),
                forgotten: Vec::new(),
                full: true,
            };
        }
        let partitions = wanted
            .iter()
            .filter(|(tp, fetch)| self.partitions.get(*tp) != Some(*fetch))
            .map(|(tp, fetch)| (tp.clone(), *fetch))
            .collect();
        let forgotten = self
            .partitions
            .keys()
            .filter(|tp| !wanted.contains_key(*tp))
            .cloned()
            .collect();
        SessionRequest {
            session_id: self.session_id,
            session_epoch: self.next_epoch,
            partitions,
            forgotten,
            full: false,
        }
    }

    /// Applies a response's top-level error code and session id.
    pub fn handle_response(&mut self, error: ErrorCode, session_id: i32) {
        let pending = self.pending.take();
        if error != ErrorCode::None || session_id == 0 {
            self.reset();
            return;
        }
        let Some(pending) = pending else {
            return;
        };
        if self.session_id == session_id {
            self.next_epoch = next_epoch(self.next_epoch);
        } else {
            self.session_id = session_id;
            self.next_epoch = 1;
        }
        self.partitions = pending;
    }

    /// Drops the session after a failed request: the next fetch is full.
    pub fn reset(&mut self) {
        self.session_id = 0;
        self.next_epoch = 0;
        self.partitions.clear();
        self.pending = None;
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(offset: i64) -> PartitionFetch {
        PartitionFetch {
            fetch_offset: offset,
            max_bytes: 100,
            current_leader_epoch: -1,
        }
    }

    fn wanted(items: &[(i32, i64)]) -> BTreeMap<TopicPartition, PartitionFetch> {
        items
            .iter()
            .map(|(partition, offset)| (TopicPartition::new("t", *partition), fetch(*offset)))
            .collect()
    }

    #[test]
    fn sessionless_broker_gets_full_fetches() {
        let mut session = FetchSession::new();
        for _ in 0..3 {
            let request = session.build(&wanted(&[(0, 5), (1, 7)]));
            assert!(request.full);
            assert_eq!((request.session_id, request.session_epoch), (0, 0));
            assert_eq!(request.partitions.len(), 2);
            session.handle_response(ErrorCode::None, 0);
        }
    }

    #[test]
    fn incremental_requests_send_changes_and_forgotten_partitions() {
        let mut session = FetchSession::new();
        session.build(&wanted(&[(0, 5), (1, 7), (2, 9)]));
        session.handle_response(ErrorCode::None, 42);
        let request = session.build(&wanted(&[(0, 6), (1, 7)]));
        assert!(!request.full);
        assert_eq!((request.session_id, request.session_epoch), (42, 1));
        assert_eq!(
            request.partitions,
            [(TopicPartition::new("t", 0), fetch(6))]
        );
        assert_eq!(request.forgotten, [TopicPartition::new("t", 2)]);
        session.handle_response(ErrorCode::None, 42);
        let request = session.build(&wanted(&[(0, 6), (1, 7)]));
        assert_eq!(request.session_epoch, 2);
        assert!(request.partitions.is_empty() && request.forgotten.is_empty());
    }

    #[test]
    fn session_errors_fall_back_to_a_full_fetch() {
        let mut session = FetchSession::new();
        session.build(&wanted(&[(0, 5)]));
        session.handle_response(ErrorCode::None, 42);
        session.build(&wanted(&[(0, 6)]));
        session.handle_response(ErrorCode::InvalidFetchSessionEpoch, 0);
        let request = session.build(&wanted(&[(0, 6)]));
        assert!(request.full);
        assert_eq!((request.session_id, request.session_epoch), (0, 0));
    }

    #[test]
    fn epoch_wraps_to_one() {
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(1), 2);
    }
}
