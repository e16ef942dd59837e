//! What a host as written in a listener means: the one rule for an empty
//! host and for `localhost`.
//!
//! An empty host (`PLAINTEXT://:9092`) binds every interface, and is
//! reached (advertised, dialled) at the loopback address; `localhost` is
//! the loopback address, 127.0.0.1. Strom resolves no other names: a host
//! to bind is an IP address.

use std::net::{IpAddr, Ipv4Addr};

/// The address `localhost` and an empty host are reached at.
pub const LOOPBACK: &str = "127.0.0.1";

/// `host` with `localhost` as [`LOOPBACK`]; any other host unchanged.
pub fn resolve_localhost(host: &str) -> &str {
    if host == "localhost" {
        LOOPBACK
    } else {
        host
    }
}

/// The host other nodes and clients reach a listener at: an empty host
/// (every interface) is reached at [`LOOPBACK`].
pub fn reachable_host(host: &str) -> &str {
    if host.is_empty() {
        LOOPBACK
    } else {
        host
    }
}

/// The address a listener with `host` binds: every interface for an empty
/// host, the loopback address for `localhost`, else the IP address written
/// (IPv6 in brackets or not). `None` for a host that is not one of them.
pub fn bind_ip(host: &str) -> Option<IpAddr> {
    if host.is_empty() {
        return Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    resolve_localhost(host).parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_localhost_hosts() {
        assert_eq!(bind_ip(""), Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        assert_eq!(bind_ip("localhost"), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(bind_ip("[::1]"), Some("::1".parse().expect("ip")));
        assert_eq!(bind_ip("10.0.0.7"), Some("10.0.0.7".parse().expect("ip")));
        assert_eq!(bind_ip("broker-1.example"), None);
        assert_eq!(reachable_host(""), "127.0.0.1");
        assert_eq!(reachable_host("localhost"), "localhost");
        assert_eq!(reachable_host("10.0.0.7"), "10.0.0.7");
        assert_eq!(resolve_localhost("localhost"), "127.0.0.1");
        assert_eq!(resolve_localhost(""), "");
    }
}
