//! The network server: listeners, connections, and the request/response
//! pipeline of each connection.
//!
//! Each connection has a reader that decodes requests ahead and runs their
//! handlers one at a time, in arrival order, and a writer that sends the
//! responses strictly in request order. A handler that must wait (an
//! `acks=all` produce waiting for the high watermark, a long-poll fetch)
//! returns [`Reply::Deferred`]: the wait runs as its own task while the
//! reader goes on with the next request, and the writer still answers in
//! order. Appends therefore happen in request order (what idempotent
//! producers with several requests in flight rely on) while waits overlap.
//! When a connection closes, its deferred tasks are aborted.

mod connection;
mod server;

pub use connection::{Answer, Reply, RequestContext, RequestHandler};
pub use server::{NetworkConfig, Server, ServerHandle};
