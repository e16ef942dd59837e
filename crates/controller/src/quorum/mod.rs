//! The metadata quorum: the metadata log replicated by Raft (openraft
//! 0.9) among 1, 3 or 5 controller voters, as Kafka's KRaft mode does.
//!
//! The pieces, each replaceable in tests:
//!
//! - [`types`]: openraft's type configuration. A log entry's payload is a
//!   [`MetadataBatch`](crate::records::MetadataBatch), the records of one
//!   controller command, so the records, the image and the sans-IO
//!   [`Controller`](crate::Controller) are the single-node ones.
//! - [`log_store`]: the Raft log and vote on disk, `fsync`ed before an
//!   append or a vote is acknowledged.
//! - [`state_machine`]: committed entries applied to the
//!   [`MetadataImage`](crate::MetadataImage), published on a `watch`
//!   channel; snapshots of the image, with the log truncated behind them.
//! - [`codec`]: the bytes of entries, votes and RPCs.
//! - [`network`]: the [`QuorumTransport`](network::QuorumTransport) trait
//!   that carries encoded RPCs (the broker implements it over TCP on the
//!   controller listener) and its adapter to openraft.
//! - [`memory`]: an in-process transport with seeded faults, for tests
//!   and simulations.
//! - [`node`]: [`node::QuorumController`], one node,
//!   which runs commands when it is the active controller and is a
//!   [`ControllerClient`](crate::ControllerClient) like the embedded
//!   [`LocalController`](crate::LocalController).
//! - [`status`]: the DescribeQuorum view of the quorum.
//! - [`tcp`]: Raft RPCs over TCP in Kafka's framing: the transport nodes use
//!   between processes, and the server side of a connection.
//! - [`stream`]: the connector and acceptor traits through which the
//!   embedding node secures those connections (TLS), and [`stream::Plaintext`].
//!
//! # Mapping to Kafka
//!
//! The Raft term is the controller epoch; the Raft leader is the active
//! controller; followers that are not voters (brokers) are openraft
//! learners. A command is planned by the active controller against its
//! applied image and committed as one entry, which every replica applies
//! only if it follows the image it was planned on (see
//! [`state_machine`]), so a deposed controller's late proposal never
//! applies to an image it was not checked against.

pub mod cluster;
pub mod codec;
pub mod liveness;
pub mod log_store;
pub mod memory;
pub mod network;
pub mod node;
pub mod remote;
pub mod state_machine;
pub mod status;
pub mod stream;
pub mod tcp;
pub mod types;

pub use node::{QuorumConfig, QuorumController, QuorumStartError};
pub use status::{QuorumStatus, ReplicaStatus};
pub use types::{ApplyOutcome, NodeId, QuorumTypes};
