use std::collections::{BTreeMap, BTreeSet};

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::{BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, Vote};
use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::records::tests::any_record;

fn log_id() -> impl Strategy<Value = LogId<NodeId>> {
    (0..1_000u64, 0..8u64, 0..1_000_000u64)
        .prop_map(|(term, node, index)| LogId::new(CommittedLeaderId::new(term, node), index))
}

fn vote() -> impl Strategy<Value = Vote<NodeId>> {
    (0..1_000u64, 0..8u64, any::<bool>()).prop_map(|(term, node, committed)| {
        if committed {
            Vote::new_committed(term, node)
        } else {
            Vote::new(term, node)
        }
    })
}

fn membership() -> impl Strategy<Value = Membership<NodeId, BasicNode>> {
    (vec(0..6u64, 1..4), vec(6..9u64, 0..3)).prop_map(|(voters, learners)| {
        let voters: BTreeSet<NodeId> = voters.into_iter().collect();
        let nodes: BTreeMap<NodeId, BasicNode> = voters
            .iter()
            .chain(learners.iter())
            .map(|id| (*id, BasicNode::new(format!("127.0.0.1:{}", 9000 + id))))
            .collect();
        Membership::new(vec![voters], nodes)
    })
}

fn entry() -> impl Strategy<Value = Entry<QuorumTypes>> {
    let payload = prop_oneof![
        Just(EntryPayload::Blank),
        (any::<u64>(), vec(any_record(), 0..4)).prop_map(|(base_offset, records)| {
            EntryPayload::Normal(MetadataBatch {
                base_offset,
                records,
            })
        }),
        membership().prop_map(EntryPayload::Membership),
    ];
    (log_id(), payload).prop_map(|(log_id, payload)| Entry { log_id, payload })
}

fn same_entries(left: &[Entry<QuorumTypes>], right: &[Entry<QuorumTypes>]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .all(|(a, b)| encode_entry(a) == encode_entry(b) && a.log_id == b.log_id)
}

proptest! {
    #[test]
    fn entries_round_trip(entry in entry()) {
        let decoded = decode_entry(&encode_entry(&entry)).expect("decodes");
        prop_assert_eq!(decoded.log_id, entry.log_id);
        prop_assert_eq!(format!("{:?}", decoded.payload), format!("{:?}", entry.payload));
    }

    #[test]
    fn append_entries_requests_round_trip(
        vote in vote(),
        prev in proptest::option::of(log_id()),
        commit in proptest::option::of(log_id()),
        entries in vec(entry(), 0..5),
    ) {
        let request = RaftRequest::AppendEntries(AppendEntriesRequest {
            vote,
            prev_log_id: prev,
            entries: entries.clone(),
            leader_commit: commit,
        });
        let RaftRequest::AppendEntries(decoded) = RaftRequest::decode(&request.encode()).expect("decodes") else {
            panic!("decoded as another request");
        };
        prop_assert_eq!(decoded.vote, vote);
        prop_assert_eq!(decoded.prev_log_id, prev);
        prop_assert_eq!(decoded.leader_commit, commit);
        prop_assert!(same_entries(&decoded.entries, &entries));
    }

    #[test]
    fn votes_and_replies_round_trip(vote in vote(), last in proptest::option::of(log_id()), granted in any::<bool>()) {
        let request = RaftRequest::Vote(VoteRequest { vote, last_log_id: last });
        let RaftRequest::Vote(decoded) = RaftRequest::decode(&request.encode()).expect("decodes") else {
            panic!("decoded as another request");
        };
        prop_assert_eq!(decoded, VoteRequest { vote, last_log_id: last });
        let reply = RaftReply::Vote(VoteResponse { vote, vote_granted: granted, last_log_id: last });
        let RaftReply::Vote(decoded) = RaftReply::decode(&reply.encode()).expect("decodes") else {
            panic!("decoded as another reply");
        };
        prop_assert_eq!(decoded, VoteResponse { vote, vote_granted: granted, last_log_id: last });
    }

    #[test]
    fn append_replies_round_trip(kind in 0..4u32, vote in vote(), matching in proptest::option::of(log_id())) {
        let reply = || match kind {
            0 => AppendEntriesResponse::Success,
            1 => AppendEntriesResponse::PartialSuccess(matching),
            2 => AppendEntriesResponse::Conflict,
            _ => AppendEntriesResponse::HigherVote(vote),
        };
        let encoded = RaftReply::AppendEntries(reply()).encode();
        let RaftReply::AppendEntries(decoded) = RaftReply::decode(&encoded).expect("decodes") else {
            panic!("decoded as another reply");
        };
        prop_assert_eq!(decoded, reply());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = RaftRequest::decode(&bytes);
        let _ = RaftReply::decode(&bytes);
        let _ = decode_entry(&bytes);
    }
}

#[test]
fn a_request_without_its_vote_is_refused() {
    let bytes = RaftRequestMessage {
        request: Some(RaftRequestKind::Vote(VoteRequestMessage {
            vote: None,
            last_log_id: None,
        })),
    }
    .encode_to_vec();
    assert!(matches!(
        RaftRequest::decode(&bytes),
        Err(CodecError::MissingField { field: "vote.vote" })
    ));
}

#[test]
fn an_unknown_append_reply_kind_is_refused() {
    let bytes = RaftReplyMessage {
        reply: Some(RaftReplyKind::AppendEntries(AppendEntriesReplyMessage {
            kind: 9,
            matching: None,
            higher_vote: None,
        })),
    }
    .encode_to_vec();
    assert!(matches!(
        RaftReply::decode(&bytes),
        Err(CodecError::UnknownKind { kind: 9, .. })
    ));
}
