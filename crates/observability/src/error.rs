//! The errors of this crate: a listener address that does not parse, and a
//! listener that cannot bind. A caller reacts to the first as to bad
//! configuration and to the second as to a start-up failure, so they are
//! two types.

use std::net::SocketAddr;

/// A `strom.metrics.listener` value that is not `http://IP:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid value `{value}` for configuration `strom.metrics.listener`: expected http://HOST:PORT with an IP address"
)]
pub struct ListenerAddressError {
    /// The value as given.
    pub value: String,
}

/// The HTTP listener could not bind its address.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {address}")]
pub struct BindError {
    /// The address.
    pub address: SocketAddr,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}
