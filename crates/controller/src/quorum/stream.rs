//! How quorum connections are secured, without this crate knowing any TLS
//! library: the node that embeds the quorum supplies a
//! [`QuorumConnector`] (the side that opens connections: Raft RPCs and
//! forwarded commands) and a [`QuorumAcceptor`] (the controller listener,
//! or an observer's listener), each wrapping a connected TCP stream, for
//! instance in TLS. [`Plaintext`] leaves the stream as it is.

use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a quorum connection runs over.
pub trait QuorumStream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin> QuorumStream for S {}

/// A secured (or plain) quorum connection.
pub type BoxedStream = Box<dyn QuorumStream>;

/// How long an accepted connection may take to finish its handshake
/// before it is dropped (a peer that connects and says nothing must not
/// hold a task forever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Wraps the connections this node opens to other quorum members.
#[async_trait]
pub trait QuorumConnector: Send + Sync + std::fmt::Debug {
    /// Secures `stream`, just connected to `address` (`host:port`).
    async fn connect(&self, stream: TcpStream, address: &str) -> std::io::Result<BoxedStream>;
}

/// Wraps the connections this node accepts from other quorum members.
#[async_trait]
pub trait QuorumAcceptor: Send + Sync + std::fmt::Debug {
    /// Secures `stream`, just accepted.
    async fn accept(&self, stream: TcpStream) -> std::io::Result<BoxedStream>;
}

/// No security: the TCP stream is used as it is (a PLAINTEXT controller
/// listener).
#[derive(Debug, Clone, Copy, Default)]
pub struct Plaintext;

#[async_trait]
impl QuorumConnector for Plaintext {
    async fn connect(&self, stream: TcpStream, _address: &str) -> std::io::Result<BoxedStream> {
        Ok(Box::new(stream))
    }
}

#[async_trait]
impl QuorumAcceptor for Plaintext {
    async fn accept(&self, stream: TcpStream) -> std::io::Result<BoxedStream> {
        Ok(Box::new(stream))
    }
}
