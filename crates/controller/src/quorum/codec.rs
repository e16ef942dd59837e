//! The quorum's bytes: Raft log entries, votes and the three Raft RPCs,
//! encoded as `prost` messages written by hand (like [`crate::records`]).
//!
//! Every type openraft hands to storage or to the network has a message
//! here and a pair of conversions; decoding checks that every required
//! field is present and never trusts a count from the wire beyond what
//! `prost` itself bounds by the input length.

use std::collections::{BTreeMap, BTreeSet};

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, SnapshotMeta,
    StoredMembership, Vote,
};
use prost::Message as _;

use crate::error::CodecError;
use crate::quorum::types::{NodeId, QuorumTypes};
use crate::records::MetadataBatch;

/// A log id: the term and node of the leader that wrote it, and its index.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct LogIdMessage {
    /// The leader's term.
    #[prost(uint64, tag = "1")]
    pub term: u64,
    /// The leader's node id.
    #[prost(uint64, tag = "2")]
    pub node_id: u64,
    /// The entry's index.
    #[prost(uint64, tag = "3")]
    pub index: u64,
}

/// A vote: the term and candidate, and whether a quorum granted it.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct VoteMessage {
    /// The term.
    #[prost(uint64, tag = "1")]
    pub term: u64,
    /// The candidate (or leader) node id.
    #[prost(uint64, tag = "2")]
    pub node_id: u64,
    /// Whether a quorum granted it (the node is the leader of the term).
    #[prost(bool, tag = "3")]
    pub committed: bool,
}

/// One member of the quorum's configuration: its id and address.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct NodeMessage {
    /// The node id (`node.id`).
    #[prost(uint64, tag = "1")]
    pub node_id: u64,
    /// Its address on the controller listener, `host:port`.
    #[prost(string, tag = "2")]
    pub address: String,
}

/// One set of voters (a joint configuration has two).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct VoterSetMessage {
    /// The voters' node ids.
    #[prost(uint64, repeated, tag = "1")]
    pub voters: Vec<u64>,
}

/// A membership: the voter sets and every node (voters and learners).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct MembershipMessage {
    /// The voter sets, one unless the quorum is changing its voters.
    #[prost(message, repeated, tag = "1")]
    pub configs: Vec<VoterSetMessage>,
    /// Every node with its address.
    #[prost(message, repeated, tag = "2")]
    pub nodes: Vec<NodeMessage>,
}

/// A membership with the log id of the entry that set it.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct StoredMembershipMessage {
    /// The entry that set it, absent for the initial empty membership.
    #[prost(message, optional, tag = "1")]
    pub log_id: Option<LogIdMessage>,
    /// The membership.
    #[prost(message, optional, tag = "2")]
    pub membership: Option<MembershipMessage>,
}

/// The payload of a Raft log entry.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum EntryPayloadMessage {
    /// The empty entry a new leader commits.
    #[prost(bool, tag = "2")]
    Blank(bool),
    /// The records of one controller command.
    #[prost(message, tag = "3")]
    Metadata(MetadataBatch),
    /// A membership change.
    #[prost(message, tag = "4")]
    Membership(MembershipMessage),
}

/// A Raft log entry.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct EntryMessage {
    /// The entry's log id.
    #[prost(message, optional, tag = "1")]
    pub log_id: Option<LogIdMessage>,
    /// The payload.
    #[prost(oneof = "EntryPayloadMessage", tags = "2, 3, 4")]
    pub payload: Option<EntryPayloadMessage>,
}

/// AppendEntries, from the leader.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AppendEntriesMessage {
    /// The leader's vote.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<VoteMessage>,
    /// The log id just before the entries.
    #[prost(message, optional, tag = "2")]
    pub prev_log_id: Option<LogIdMessage>,
    /// The entries.
    #[prost(message, repeated, tag = "3")]
    pub entries: Vec<EntryMessage>,
    /// The leader's commit point.
    #[prost(message, optional, tag = "4")]
    pub leader_commit: Option<LogIdMessage>,
}

/// The answer to AppendEntries.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AppendEntriesReplyMessage {
    /// 0 success, 1 partial success, 2 conflict, 3 higher vote.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    /// With partial success: the last log id that matched.
    #[prost(message, optional, tag = "2")]
    pub matching: Option<LogIdMessage>,
    /// With a higher vote: that vote.
    #[prost(message, optional, tag = "3")]
    pub higher_vote: Option<VoteMessage>,
}

/// RequestVote, from a candidate.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct VoteRequestMessage {
    /// The candidate's vote.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<VoteMessage>,
    /// The candidate's last log id.
    #[prost(message, optional, tag = "2")]
    pub last_log_id: Option<LogIdMessage>,
}

/// The answer to RequestVote.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct VoteReplyMessage {
    /// The voter's vote after handling the request.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<VoteMessage>,
    /// Whether the vote was granted.
    #[prost(bool, tag = "2")]
    pub vote_granted: bool,
    /// The voter's last log id.
    #[prost(message, optional, tag = "3")]
    pub last_log_id: Option<LogIdMessage>,
}

/// A chunk of a snapshot, from the leader.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct InstallSnapshotMessage {
    /// The leader's vote.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<VoteMessage>,
    /// The last log id the snapshot covers.
    #[prost(message, optional, tag = "2")]
    pub last_log_id: Option<LogIdMessage>,
    /// The membership the snapshot holds.
    #[prost(message, optional, tag = "3")]
    pub last_membership: Option<StoredMembershipMessage>,
    /// The snapshot's id.
    #[prost(string, tag = "4")]
    pub snapshot_id: String,
    /// Byte offset of this chunk.
    #[prost(uint64, tag = "5")]
    pub offset: u64,
    /// The chunk.
    #[prost(bytes = "vec", tag = "6")]
    pub data: Vec<u8>,
    /// Whether this is the last chunk.
    #[prost(bool, tag = "7")]
    pub done: bool,
}

/// The answer to a snapshot chunk.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct InstallSnapshotReplyMessage {
    /// The receiver's vote.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<VoteMessage>,
}

/// A Raft request as it travels between controllers.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RaftRequestMessage {
    /// The request.
    #[prost(oneof = "RaftRequestKind", tags = "1, 2, 3")]
    pub request: Option<RaftRequestKind>,
}

/// The three Raft requests.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum RaftRequestKind {
    /// AppendEntries.
    #[prost(message, tag = "1")]
    AppendEntries(AppendEntriesMessage),
    /// RequestVote.
    #[prost(message, tag = "2")]
    Vote(VoteRequestMessage),
    /// InstallSnapshot (one chunk).
    #[prost(message, tag = "3")]
    InstallSnapshot(InstallSnapshotMessage),
}

/// A Raft response as it travels between controllers.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RaftReplyMessage {
    /// The response.
    #[prost(oneof = "RaftReplyKind", tags = "1, 2, 3, 4")]
    pub reply: Option<RaftReplyKind>,
}

/// The answers, and a refusal.
#[derive(Clone, PartialEq, ::prost::Oneof)]
pub enum RaftReplyKind {
    /// To AppendEntries.
    #[prost(message, tag = "1")]
    AppendEntries(AppendEntriesReplyMessage),
    /// To RequestVote.
    #[prost(message, tag = "2")]
    Vote(VoteReplyMessage),
    /// To InstallSnapshot.
    #[prost(message, tag = "3")]
    InstallSnapshot(InstallSnapshotReplyMessage),
    /// The receiver could not handle the request (shutting down, or a
    /// snapshot chunk out of order); the text says why.
    #[prost(string, tag = "4")]
    Refused(String),
}

/// A decoded Raft request.
#[derive(Debug)]
pub enum RaftRequest {
    /// AppendEntries.
    AppendEntries(AppendEntriesRequest<QuorumTypes>),
    /// RequestVote.
    Vote(VoteRequest<NodeId>),
    /// InstallSnapshot (one chunk).
    InstallSnapshot(InstallSnapshotRequest<QuorumTypes>),
}

/// A decoded Raft response.
#[derive(Debug)]
pub enum RaftReply {
    /// To AppendEntries.
    AppendEntries(AppendEntriesResponse<NodeId>),
    /// To RequestVote.
    Vote(VoteResponse<NodeId>),
    /// To InstallSnapshot.
    InstallSnapshot(InstallSnapshotResponse<NodeId>),
    /// The receiver refused the request.
    Refused(String),
}

fn required<T>(field: &'static str, value: Option<T>) -> Result<T, CodecError> {
    value.ok_or(CodecError::MissingField { field })
}

fn decode_message<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, CodecError> {
    M::decode(bytes).map_err(|source| CodecError::Decode { source })
}

/// Encodes a log id.
pub fn log_id_to_message(log_id: &LogId<NodeId>) -> LogIdMessage {
    LogIdMessage {
        term: log_id.leader_id.term,
        node_id: log_id.leader_id.node_id,
        index: log_id.index,
    }
}

/// Decodes a log id.
pub fn log_id_from_message(message: LogIdMessage) -> LogId<NodeId> {
    LogId::new(
        CommittedLeaderId::new(message.term, message.node_id),
        message.index,
    )
}

fn optional_log_id(message: Option<LogIdMessage>) -> Option<LogId<NodeId>> {
    message.map(log_id_from_message)
}

/// Encodes a vote.
pub fn vote_to_message(vote: &Vote<NodeId>) -> VoteMessage {
    VoteMessage {
        term: vote.leader_id.term,
        node_id: vote.leader_id.node_id,
        committed: vote.committed,
    }
}

/// Decodes a vote.
pub fn vote_from_message(message: VoteMessage) -> Vote<NodeId> {
    if message.committed {
        Vote::new_committed(message.term, message.node_id)
    } else {
        Vote::new(message.term, message.node_id)
    }
}

/// Encodes a membership.
pub fn membership_to_message(membership: &Membership<NodeId, BasicNode>) -> MembershipMessage {
    MembershipMessage {
        configs: membership
            .get_joint_config()
            .iter()
            .map(|voters| VoterSetMessage {
                voters: voters.iter().copied().collect(),
            })
            .collect(),
        nodes: membership
            .nodes()
            .map(|(node_id, node)| NodeMessage {
                node_id: *node_id,
                address: node.addr.clone(),
            })
            .collect(),
    }
}

/// Decodes a membership.
pub fn membership_from_message(message: MembershipMessage) -> Membership<NodeId, BasicNode> {
    let configs: Vec<BTreeSet<NodeId>> = message
        .configs
        .into_iter()
        .map(|set| set.voters.into_iter().collect())
        .collect();
    let nodes: BTreeMap<NodeId, BasicNode> = message
        .nodes
        .into_iter()
        .map(|node| (node.node_id, BasicNode::new(node.address)))
        .collect();
    Membership::new(configs, nodes)
}

/// Encodes a stored membership.
pub fn stored_membership_to_message(
    stored: &StoredMembership<NodeId, BasicNode>,
) -> StoredMembershipMessage {
    StoredMembershipMessage {
        log_id: stored.log_id().as_ref().map(log_id_to_message),
        membership: Some(membership_to_message(stored.membership())),
    }
}

/// Decodes a stored membership.
pub fn stored_membership_from_message(
    message: StoredMembershipMessage,
) -> StoredMembership<NodeId, BasicNode> {
    StoredMembership::new(
        optional_log_id(message.log_id),
        message
            .membership
            .map(membership_from_message)
            .unwrap_or_default(),
    )
}

/// Encodes a log entry.
pub fn entry_to_message(entry: &Entry<QuorumTypes>) -> EntryMessage {
    let payload = match &entry.payload {
        EntryPayload::Blank => EntryPayloadMessage::Blank(true),
        EntryPayload::Normal(batch) => EntryPayloadMessage::Metadata(batch.clone()),
        EntryPayload::Membership(membership) => {
            EntryPayloadMessage::Membership(membership_to_message(membership))
        }
    };
    EntryMessage {
        log_id: Some(log_id_to_message(&entry.log_id)),
        payload: Some(payload),
    }
}

/// Decodes a log entry, checking the metadata records' versions.
pub fn entry_from_message(message: EntryMessage) -> Result<Entry<QuorumTypes>, CodecError> {
    let log_id = log_id_from_message(required("entry.log_id", message.log_id)?);
    let payload = match required("entry.payload", message.payload)? {
        EntryPayloadMessage::Blank(_) => EntryPayload::Blank,
        EntryPayloadMessage::Metadata(batch) => {
            let batch = MetadataBatch::decode_from(&batch.encode_to_vec())
                .map_err(|source| CodecError::Records { source })?;
            EntryPayload::Normal(batch)
        }
        EntryPayloadMessage::Membership(membership) => {
            EntryPayload::Membership(membership_from_message(membership))
        }
    };
    Ok(Entry { log_id, payload })
}

/// Encodes one entry to bytes.
pub fn encode_entry(entry: &Entry<QuorumTypes>) -> Vec<u8> {
    entry_to_message(entry).encode_to_vec()
}

/// Decodes one entry from bytes.
pub fn decode_entry(bytes: &[u8]) -> Result<Entry<QuorumTypes>, CodecError> {
    entry_from_message(decode_message(bytes)?)
}

impl RaftRequest {
    /// Encodes the request.
    pub fn encode(&self) -> Vec<u8> {
        let request = match self {
            RaftRequest::AppendEntries(request) => {
                RaftRequestKind::AppendEntries(AppendEntriesMessage {
                    vote: Some(vote_to_message(&request.vote)),
                    prev_log_id: request.prev_log_id.as_ref().map(log_id_to_message),
                    entries: request.entries.iter().map(entry_to_message).collect(),
                    leader_commit: request.leader_commit.as_ref().map(log_id_to_message),
                })
            }
            RaftRequest::Vote(request) => RaftRequestKind::Vote(VoteRequestMessage {
                vote: Some(vote_to_message(&request.vote)),
                last_log_id: request.last_log_id.as_ref().map(log_id_to_message),
            }),
            RaftRequest::InstallSnapshot(request) => {
                RaftRequestKind::InstallSnapshot(install_snapshot_to_message(request))
            }
        };
        RaftRequestMessage {
            request: Some(request),
        }
        .encode_to_vec()
    }

    /// Decodes a request.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let message: RaftRequestMessage = decode_message(bytes)?;
        Ok(match required("request", message.request)? {
            RaftRequestKind::AppendEntries(request) => {
                let entries = request
                    .entries
                    .into_iter()
                    .map(entry_from_message)
                    .collect::<Result<Vec<_>, _>>()?;
                RaftRequest::AppendEntries(AppendEntriesRequest {
                    vote: vote_from_message(required("append_entries.vote", request.vote)?),
                    prev_log_id: optional_log_id(request.prev_log_id),
                    entries,
                    leader_commit: optional_log_id(request.leader_commit),
                })
            }
            RaftRequestKind::Vote(request) => RaftRequest::Vote(VoteRequest {
                vote: vote_from_message(required("vote.vote", request.vote)?),
                last_log_id: optional_log_id(request.last_log_id),
            }),
            RaftRequestKind::InstallSnapshot(request) => {
                RaftRequest::InstallSnapshot(install_snapshot_from_message(request)?)
            }
        })
    }
}

fn install_snapshot_to_message(
    request: &InstallSnapshotRequest<QuorumTypes>,
) -> InstallSnapshotMessage {
    InstallSnapshotMessage {
        vote: Some(vote_to_message(&request.vote)),
        last_log_id: request.meta.last_log_id.as_ref().map(log_id_to_message),
        last_membership: Some(stored_membership_to_message(&request.meta.last_membership)),
        snapshot_id: request.meta.snapshot_id.clone(),
        offset: request.offset,
        data: request.data.clone(),
        done: request.done,
    }
}

fn install_snapshot_from_message(
    message: InstallSnapshotMessage,
) -> Result<InstallSnapshotRequest<QuorumTypes>, CodecError> {
    Ok(InstallSnapshotRequest {
        vote: vote_from_message(required("install_snapshot.vote", message.vote)?),
        meta: SnapshotMeta {
            last_log_id: optional_log_id(message.last_log_id),
            last_membership: stored_membership_from_message(required(
                "install_snapshot.last_membership",
                message.last_membership,
            )?),
            snapshot_id: message.snapshot_id,
        },
        offset: message.offset,
        data: message.data,
        done: message.done,
    })
}

const APPEND_SUCCESS: u32 = 0;
const APPEND_PARTIAL_SUCCESS: u32 = 1;
const APPEND_CONFLICT: u32 = 2;
const APPEND_HIGHER_VOTE: u32 = 3;

impl RaftReply {
    /// Encodes the reply.
    pub fn encode(&self) -> Vec<u8> {
        let reply = match self {
            RaftReply::AppendEntries(reply) => {
                RaftReplyKind::AppendEntries(append_reply_to_message(reply))
            }
            RaftReply::Vote(reply) => RaftReplyKind::Vote(VoteReplyMessage {
                vote: Some(vote_to_message(&reply.vote)),
                vote_granted: reply.vote_granted,
                last_log_id: reply.last_log_id.as_ref().map(log_id_to_message),
            }),
            RaftReply::InstallSnapshot(reply) => {
                RaftReplyKind::InstallSnapshot(InstallSnapshotReplyMessage {
                    vote: Some(vote_to_message(&reply.vote)),
                })
            }
            RaftReply::Refused(reason) => RaftReplyKind::Refused(reason.clone()),
        };
        RaftReplyMessage { reply: Some(reply) }.encode_to_vec()
    }

    /// Decodes a reply.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let message: RaftReplyMessage = decode_message(bytes)?;
        Ok(match required("reply", message.reply)? {
            RaftReplyKind::AppendEntries(reply) => {
                RaftReply::AppendEntries(append_reply_from_message(reply)?)
            }
            RaftReplyKind::Vote(reply) => RaftReply::Vote(VoteResponse {
                vote: vote_from_message(required("vote_reply.vote", reply.vote)?),
                vote_granted: reply.vote_granted,
                last_log_id: optional_log_id(reply.last_log_id),
            }),
            RaftReplyKind::InstallSnapshot(reply) => {
                RaftReply::InstallSnapshot(InstallSnapshotResponse {
                    vote: vote_from_message(required("install_snapshot_reply.vote", reply.vote)?),
                })
            }
            RaftReplyKind::Refused(reason) => RaftReply::Refused(reason),
        })
    }
}

fn append_reply_to_message(reply: &AppendEntriesResponse<NodeId>) -> AppendEntriesReplyMessage {
    let mut message = AppendEntriesReplyMessage::default();
    match reply {
        AppendEntriesResponse::Success => message.kind = APPEND_SUCCESS,
        AppendEntriesResponse::PartialSuccess(matching) => {
            message.kind = APPEND_PARTIAL_SUCCESS;
            message.matching = matching.as_ref().map(log_id_to_message);
        }
        AppendEntriesResponse::Conflict => message.kind = APPEND_CONFLICT,
        AppendEntriesResponse::HigherVote(vote) => {
            message.kind = APPEND_HIGHER_VOTE;
            message.higher_vote = Some(vote_to_message(vote));
        }
    }
    message
}

fn append_reply_from_message(
    message: AppendEntriesReplyMessage,
) -> Result<AppendEntriesResponse<NodeId>, CodecError> {
    Ok(match message.kind {
        APPEND_SUCCESS => AppendEntriesResponse::Success,
        APPEND_PARTIAL_SUCCESS => {
            AppendEntriesResponse::PartialSuccess(optional_log_id(message.matching))
        }
        APPEND_CONFLICT => AppendEntriesResponse::Conflict,
        APPEND_HIGHER_VOTE => AppendEntriesResponse::HigherVote(vote_from_message(required(
            "append_reply.higher_vote",
            message.higher_vote,
        )?)),
        kind => {
            return Err(CodecError::UnknownKind {
                field: "append_reply.kind",
                kind,
            })
        }
    })
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
