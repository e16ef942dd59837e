//! One member of a classic group.

use bytes::Bytes;

/// An identifier chosen by the caller for a request whose answer may be
/// delayed; completions carry it back.
pub type RequestId = u64;

/// One protocol a member supports, with its metadata (for the consumer
/// protocol type: the assignor name and the serialized subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// Protocol name (`range`, `cooperative-sticky`, ...).
    pub name: String,
    /// Opaque metadata bytes for this protocol.
    pub metadata: Bytes,
}

/// A member of a group, as the coordinator tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member id assigned by the coordinator.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The client id of the member's connection.
    pub client_id: String,
    /// The client's host.
    pub client_host: String,
    /// Session timeout requested in JoinGroup.
    pub session_timeout_ms: i32,
    /// Rebalance timeout requested in JoinGroup.
    pub rebalance_timeout_ms: i32,
    /// The protocols the member supports, in preference order.
    pub protocols: Vec<Protocol>,
    /// The assignment the leader gave this member in the current generation.
    pub assignment: Bytes,
    /// A JoinGroup waiting for the rebalance to complete.
    pub(crate) pending_join: Option<RequestId>,
    /// A SyncGroup waiting for the leader's assignment.
    pub(crate) pending_sync: Option<RequestId>,
    /// When the member last proved it was alive.
    pub(crate) last_heartbeat_ms: i64,
    /// Order in which members joined; the oldest member becomes leader.
    pub(crate) join_order: u64,
}

impl Member {
    /// The metadata this member sent for `protocol`, if it supports it.
    pub fn metadata_for(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|candidate| candidate.name == protocol)
            .map(|candidate| &candidate.metadata)
    }

    /// Whether the member supports `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.metadata_for(protocol).is_some()
    }

    /// The first protocol in the member's preference order among `candidates`.
    pub(crate) fn vote<'a>(&self, candidates: &[&'a str]) -> Option<&'a str> {
        self.protocols.iter().find_map(|protocol| {
            candidates
                .iter()
                .copied()
                .find(|candidate| *candidate == protocol.name)
        })
    }

    /// Whether a JoinGroup of this member is waiting.
    pub fn is_awaiting_join(&self) -> bool {
        self.pending_join.is_some()
    }

    /// Whether a SyncGroup of this member is waiting.
    pub fn is_awaiting_sync(&self) -> bool {
        self.pending_sync.is_some()
    }

    /// Whether the session expired at `now_ms`. A member whose JoinGroup or
    /// SyncGroup is parked cannot heartbeat, so it does not expire then.
    pub(crate) fn session_expired(&self, now_ms: i64) -> bool {
        !self.is_awaiting_join()
            && !self.is_awaiting_sync()
            && now_ms >= self.last_heartbeat_ms + i64::from(self.session_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(protocols: &[&str]) -> Member {
        Member {
            member_id: "m".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: protocols
                .iter()
                .map(|name| Protocol {
                    name: (*name).into(),
                    metadata: Bytes::from(name.as_bytes().to_vec()),
                })
                .collect(),
            assignment: Bytes::new(),
            pending_join: None,
            pending_sync: None,
            last_heartbeat_ms: 1_000,
            join_order: 0,
        }
    }

    #[test]
    fn vote_follows_member_preference() {
        let m = member(&["sticky", "range"]);
        assert_eq!(m.vote(&["range", "sticky"]), Some("sticky"));
        assert_eq!(m.vote(&["range"]), Some("range"));
        assert_eq!(m.vote(&["roundrobin"]), None);
    }

    #[test]
    fn session_expiry_is_suspended_while_parked() {
        let mut m = member(&["range"]);
        assert!(!m.session_expired(10_999));
        assert!(m.session_expired(11_000));
        m.pending_join = Some(1);
        assert!(!m.session_expired(50_000));
        m.pending_join = None;
        m.pending_sync = Some(2);
        assert!(!m.session_expired(50_000));
    }

    #[test]
    fn metadata_lookup() {
        let m = member(&["range"]);
        assert_eq!(
            m.metadata_for("range").map(|b| b.as_ref()),
            Some(&b"range"[..])
        );
        assert!(m.supports("range"));
        assert!(!m.supports("sticky"));
    }
}
