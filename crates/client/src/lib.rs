//! The shared core of Strom's Kafka clients.
//!
//! `strom-client` owns what the producer, the consumer and the admin client
//! have in common: [connections](connection) to brokers with ApiVersions
//! negotiation and pipelined requests, the [`cluster`] handle
//! (bootstrap, a connection pool by broker id with reconnect backoff, the
//! [`metadata`] cache and request routing), the typed
//! [configuration](config) with Kafka's property names, TLS and SASL
//! ([`security`]), and the [admin client](admin) (with the metadata
//! quorum in [`admin_quorum`] and transactions in [`admin_transactions`]).
//!
//! It does not batch records, track offsets or manage groups: those belong to
//! `strom-producer` and `strom-consumer`, which build on this crate. It speaks
//! only the public Kafka protocol (through `strom-protocol`), so it works
//! against Strom, Apache Kafka and other compatible brokers.
//!
//! Two decisions a newcomer must know:
//!
//! * **Responses are matched in order.** A connection writes requests in the
//!   order they are submitted and Kafka answers them in that order, so the
//!   reader pairs each response with the oldest pending request and checks
//!   the correlation id. A request that times out closes its connection (as
//!   the Java client does): a late answer could no longer be paired.
//! * **Versions are negotiated per connection**: each API is used at the
//!   highest version both the broker (from its ApiVersions answer) and
//!   `strom-protocol`'s table support, so older brokers work too. Long polls
//!   pass their own timeout to [`Connection::submit`].

pub mod admin;
pub mod admin_groups;
pub mod admin_quorum;
pub mod admin_quotas;
pub mod admin_transactions;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod error;
pub mod metadata;
pub mod security;

pub use admin::AdminClient;
pub use admin_quorum::{QuorumEndpoint, QuorumInfo, QuorumReplica};
pub use cluster::Cluster;
pub use config::ClientConfig;
pub use connection::Connection;
pub use error::{ClientError, ConfigError, TransactionAdminError};
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo};
