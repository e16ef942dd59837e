//! Kafka's listeners: `listeners` and `advertised.listeners` as
//! `NAME://host:port,...`.

use std::net::SocketAddr;

use crate::error::{invalid, ConfigError, ValueProblem};
use crate::host;

/// One listener: a name (its security protocol comes from
/// `listener.security.protocol.map`) and an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Listener name, e.g. `PLAINTEXT`.
    pub name: String,
    /// Host as written (may be empty for "all interfaces").
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Listener {
    /// The socket address to bind: an empty host binds all interfaces
    /// (see [`host::bind_ip`]).
    pub fn bind_address(&self) -> Result<SocketAddr, ConfigError> {
        let ip = host::bind_ip(&self.host).ok_or_else(|| {
            invalid(
                "listeners",
                &format!("{}://{}:{}", self.name, self.host, self.port),
                ValueProblem::ListenerHost,
            )
        })?;
        Ok(SocketAddr::new(ip, self.port))
    }
}

/// Parses `NAME://host:port,NAME://host:port` (the value of `key`).
pub fn parse_listeners(key: &str, text: &str) -> Result<Vec<Listener>, ConfigError> {
    let refuse = |problem| ConfigError::from(invalid(key, text, problem));
    let mut listeners = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (name, address) = item
            .split_once("://")
            .ok_or_else(|| refuse(ValueProblem::ListenerSyntax))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| refuse(ValueProblem::ListenerSyntax))?;
        let port: u16 = port
            .parse()
            .map_err(|_| refuse(ValueProblem::ListenerPort))?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(refuse(ValueProblem::ListenerName));
        }
        if listeners.iter().any(|l: &Listener| l.name == name) {
            return Err(refuse(ValueProblem::DuplicateListener));
        }
        listeners.push(Listener {
            name: name.to_owned(),
            host: host.to_owned(),
            port,
        });
    }
    if listeners.is_empty() {
        return Err(refuse(ValueProblem::NoListener));
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_and_bind() {
        let listeners =
            parse_listeners("listeners", "PLAINTEXT://:9093, INTERNAL://localhost:9094")
                .expect("valid");
        assert_eq!(listeners.len(), 2);
        assert_eq!(
            listeners[0].bind_address().expect("valid"),
            "0.0.0.0:9093".parse().expect("addr")
        );
        assert_eq!(
            listeners[1].bind_address().expect("valid"),
            "127.0.0.1:9094".parse().expect("addr")
        );
        let named = Listener {
            name: "PLAINTEXT".to_owned(),
            host: "broker-1".to_owned(),
            port: 1,
        };
        assert!(matches!(
            named.bind_address(),
            Err(ConfigError::Invalid {
                problem: ValueProblem::ListenerHost,
                ..
            })
        ));
    }

    #[test]
    fn malformed_listeners_say_what_is_wrong() {
        for (text, expected) in [
            ("127.0.0.1:9092", ValueProblem::ListenerSyntax),
            ("A://host", ValueProblem::ListenerSyntax),
            ("A://:99999", ValueProblem::ListenerPort),
            ("A-B://:1", ValueProblem::ListenerName),
            ("A://:1,A://:2", ValueProblem::DuplicateListener),
            (" , ", ValueProblem::NoListener),
        ] {
            match parse_listeners("listeners", text) {
                Err(ConfigError::Invalid { key, problem, .. }) => {
                    assert_eq!((key.as_str(), problem), ("listeners", expected), "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
