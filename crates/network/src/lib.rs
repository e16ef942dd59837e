//! Strom's Kafka network server: listeners, connections, and the
//! request/response pipeline of each connection.
//!
//! This crate owns the accept loop ([`Server`], with the connection limits
//! of [`connection_quotas`] and the TLS handshake of SSL and SASL_SSL listeners), each
//! connection's framing, decoding and ordering of answers, the context a
//! request is handled in ([`RequestContext`]), the handler interface
//! ([`RequestHandler`], [`Reply`], [`Answer`]) and the process's network
//! counters ([`metrics`], Kafka's `socket-server-metrics`).
//!
//! It deliberately does not handle any request: the broker implements
//! [`RequestHandler`] with its dispatch table. TLS material, SASL and
//! principals come from `strom-security` (a listener is served with its
//! [`strom_security::ListenerRuntime`], a connection carries its
//! [`strom_security::Session`]); files reach it only as [`FileRegion`]s,
//! so it depends on no storage crate. It depends on `strom-protocol`,
//! `strom-security` and `strom-observability` (whose snapshot type,
//! [`metrics::NetworkCounts`], its counters are read into, so the collector
//! takes them as they are).
//!
//! Decisions a newcomer must know:
//!
//! * **Decode ahead, handle in order, answer in order.** Each connection
//!   has a reader that decodes requests ahead and runs their handlers one
//!   at a time, in arrival order, and a writer that sends the responses
//!   strictly in request order. A handler that must wait (an `acks=all`
//!   produce waiting for the high watermark, a long-poll fetch) returns
//!   [`Reply::Deferred`]: the wait runs as its own task while the reader
//!   goes on with the next request, and the writer still answers in
//!   order. Appends therefore happen in request order (what idempotent
//!   producers with several requests in flight rely on) while waits
//!   overlap. When a connection closes, its deferred tasks are aborted.
//! * **Record bytes are not copied on plaintext connections.** An
//!   [`Answer`] may carry [`FileRegion`]s in place of stand-ins in its
//!   response; the writer sends them with `sendfile` (loading a range
//!   that is not in the page cache on the blocking pool first), and reads
//!   them into memory only for TLS.
//!
//! The crate has no feature flags.

mod connection;
pub mod connection_quotas;
pub mod error;
pub mod metrics;
pub mod region;
mod request;
mod server;

pub use connection_quotas::{
    ConnectionLimitSettings, ConnectionPermit, ConnectionQuotas, ConnectionRefusal,
    ListenerConnectionLimits,
};
pub use error::BindError;
pub use region::{FileRegion, Region};
pub use request::{Answer, ConnectionMute, DeferredReply, Reply, RequestContext, RequestHandler};
pub use server::{ListeningServer, NetworkConfig, Server, ServerHandle};

#[cfg(test)]
mod mute_tests;
