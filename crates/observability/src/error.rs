//! The errors of this crate: a listener address or security setting that
//! does not parse, and a listener that cannot bind. A caller reacts to the
//! first two as to bad configuration and to the last as to a start-up
//! failure, so they are separate types.

use std::net::SocketAddr;

/// A `strom.metrics.listener` value that is not `http://IP:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid value `{value}` for configuration `strom.metrics.listener`: expected http://HOST:PORT or https://HOST:PORT with an IP address"
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

/// A value of the HTTP listener's security settings that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpSecurityError {
    /// `strom.http.authentication` is neither `none` nor `basic`.
    #[error("invalid value `{value}` for configuration `strom.http.authentication`: expected none or basic")]
    Authentication {
        /// The value as given.
        value: String,
    },
    /// `strom.http.authenticate.metrics` is neither `true` nor `false`.
    #[error("invalid value `{value}` for configuration `strom.http.authenticate.metrics`: expected true or false")]
    AuthenticateMetrics {
        /// The value as given.
        value: String,
    },
}
