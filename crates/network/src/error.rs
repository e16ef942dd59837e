//! The errors of the network server.

use std::net::SocketAddr;

/// A listener's address could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot bind {address}")]
pub struct BindError {
    /// The address.
    pub address: SocketAddr,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}
