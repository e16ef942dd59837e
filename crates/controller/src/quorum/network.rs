//! How controllers reach each other: a [`QuorumTransport`] moves one
//! encoded Raft request to a node and brings its encoded reply back; this
//! module adapts it to openraft's network traits.
//!
//! The transport is a trait so that the broker can carry the bytes over
//! TCP on the controller listener and tests and simulations over an
//! in-process network with injected faults
//! ([`MemoryNetwork`](crate::quorum::memory::MemoryNetwork)). Both carry
//! the same bytes ([`RaftRequest::encode`]), so every test exercises the
//! codec too.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use crate::error::CodecError;
use crate::quorum::codec::{RaftReply, RaftRequest};
use crate::quorum::types::{NodeId, QuorumTypes};

/// Why a request did not get a reply.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The node could not be reached (connection refused, link down).
    #[error("node {target} at {address} is unreachable")]
    Unreachable {
        /// The node.
        target: NodeId,
        /// Its address.
        address: String,
    },
    /// No reply came within the timeout.
    #[error("no reply from node {target} within {timeout_ms} ms")]
    Timeout {
        /// The node.
        target: NodeId,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The connection failed while the request or reply was in flight.
    #[error("connection to node {target} failed")]
    Io {
        /// The node.
        target: NodeId,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Carries encoded Raft requests between controllers.
#[async_trait]
pub trait QuorumTransport: Send + Sync + 'static {
    /// Sends `request` to node `target` at `address` and returns its reply,
    /// or an error after at most `timeout`.
    async fn call(
        &self,
        target: NodeId,
        address: &str,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError>;
}

/// The reply did not match the request, or did not decode.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The reply's bytes do not decode.
    #[error("undecodable reply from node {target}")]
    Codec {
        /// The node.
        target: NodeId,
        /// Why.
        #[source]
        source: CodecError,
    },
    /// The reply is for another kind of request.
    #[error("node {target} answered a {expected} request with another kind of reply")]
    Mismatched {
        /// The node.
        target: NodeId,
        /// The request kind.
        expected: &'static str,
    },
    /// The node refused the request.
    #[error("node {target} refused the request: {reason}")]
    Refused {
        /// The node.
        target: NodeId,
        /// What it said.
        reason: String,
    },
}

/// openraft's network factory over a [`QuorumTransport`].
#[derive(Clone)]
pub struct QuorumNetwork {
    transport: Arc<dyn QuorumTransport>,
}

impl std::fmt::Debug for QuorumNetwork {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("QuorumNetwork")
            .finish_non_exhaustive()
    }
}

impl QuorumNetwork {
    /// A factory whose connections all use `transport`.
    pub fn new(transport: Arc<dyn QuorumTransport>) -> Self {
        Self { transport }
    }
}

/// openraft's connection to one peer.
pub struct QuorumPeer {
    target: NodeId,
    address: String,
    transport: Arc<dyn QuorumTransport>,
}

impl RaftNetworkFactory<QuorumTypes> for QuorumNetwork {
    type Network = QuorumPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        QuorumPeer {
            target,
            address: node.addr.clone(),
            transport: Arc::clone(&self.transport),
        }
    }
}

type PeerError<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl QuorumPeer {
    async fn send<E: std::error::Error>(
        &self,
        request: RaftRequest,
        option: &RPCOption,
    ) -> Result<RaftReply, PeerError<E>> {
        let timeout = option.hard_ttl();
        let bytes = self
            .transport
            .call(self.target, &self.address, request.encode(), timeout)
            .await
            .map_err(|error| match error {
                // openraft backs off before retrying an unreachable node but
                // retries a network error at once: a refused or broken
                // connection would be retried in a busy loop.
                TransportError::Unreachable { .. } | TransportError::Io { .. } => {
                    RPCError::Unreachable(Unreachable::new(&error))
                }
                TransportError::Timeout { .. } => RPCError::Network(NetworkError::new(&error)),
            })?;
        let reply = RaftReply::decode(&bytes).map_err(|source| {
            RPCError::Network(NetworkError::new(&ReplyError::Codec {
                target: self.target,
                source,
            }))
        })?;
        if let RaftReply::Refused(reason) = reply {
            // A node that refuses (stopping, stopped) counts as unreachable,
            // so that openraft backs off instead of retrying at once.
            return Err(RPCError::Unreachable(Unreachable::new(
                &ReplyError::Refused {
                    target: self.target,
                    reason,
                },
            )));
        }
        Ok(reply)
    }

    fn mismatched<E: std::error::Error>(&self, expected: &'static str) -> PeerError<E> {
        RPCError::Network(NetworkError::new(&ReplyError::Mismatched {
            target: self.target,
            expected,
        }))
    }
}

impl RaftNetwork<QuorumTypes> for QuorumPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<QuorumTypes>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, PeerError> {
        match self.send(RaftRequest::AppendEntries(rpc), &option).await? {
            RaftReply::AppendEntries(reply) => Ok(reply),
            _ => Err(self.mismatched("AppendEntries")),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<QuorumTypes>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, PeerError<InstallSnapshotError>> {
        match self
            .send(RaftRequest::InstallSnapshot(rpc), &option)
            .await?
        {
            RaftReply::InstallSnapshot(reply) => Ok(reply),
            _ => Err(self.mismatched("InstallSnapshot")),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, PeerError> {
        match self.send(RaftRequest::Vote(rpc), &option).await? {
            RaftReply::Vote(reply) => Ok(reply),
            _ => Err(self.mismatched("Vote")),
        }
    }
}
