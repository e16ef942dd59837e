//! Raft RPCs over TCP, in Kafka's framing.
//!
//! A request is a Kafka request frame: `size: i32 | api_key: i16 |
//! api_version: i16 | correlation_id: i32 | client_id: nullable string |
//! body`, with the Strom-private API key [`RAFT_API_KEY`] and the encoded
//! [`RaftRequest`](crate::quorum::codec::RaftRequest) as body. The reply
//! is a Kafka response frame: `size: i32 | correlation_id: i32 | body`.
//! Using Kafka's framing lets the controller listener carry these RPCs
//! beside Kafka's own controller APIs.
//!
//! Forwarded controller commands ([`remote`]) use
//! the same framing with [`COMMAND_API_KEY`].
//!
//! [`TcpTransport`] is the client side (one connection per peer, reopened
//! after any error); [`serve_connection`] answers one accepted connection.
//! Both sides reach the socket through the embedding node's
//! [`QuorumConnector`] and [`QuorumAcceptor`] (TLS on an SSL controller
//! listener, see [`stream`](crate::quorum::stream)).
//! A frame larger than the cap, a header that does not parse, another API
//! key or a body that does not decode closes the connection and changes
//! nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::quorum::network::{QuorumTransport, TransportError};
use crate::quorum::node::QuorumController;
use crate::quorum::remote::{self, RemoteCommand, COMMAND_API_KEY, COMMAND_API_VERSION};
use crate::quorum::stream::{
    BoxedStream, Plaintext, QuorumAcceptor, QuorumConnector, HANDSHAKE_TIMEOUT,
};
use crate::quorum::types::NodeId;

/// The Strom-private API key of a Raft RPC (outside Kafka's key range).
pub const RAFT_API_KEY: i16 = 32_000;
/// The only version of the Raft RPC.
pub const RAFT_API_VERSION: i16 = 0;
/// Largest frame accepted either way (a snapshot chunk or a batch of
/// entries is far smaller).
pub const MAX_RAFT_FRAME_BYTES: usize = 64 * 1024 * 1024;
const CLIENT_ID: &str = "strom-quorum";

/// Why a connection was closed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Reading or writing failed (or the peer closed).
    #[error("connection failed")]
    Io(#[from] std::io::Error),
    /// The frame declares a size outside `0..=cap`.
    #[error("frame of {size} bytes refused (cap {max_bytes})")]
    Size {
        /// The declared size.
        size: i64,
        /// The cap.
        max_bytes: usize,
    },
    /// The request header is cut short or has another API key (or
    /// version).
    #[error("not a Raft request or controller command (API key {api_key:?})")]
    NotRaft {
        /// The API key, if the header had one.
        api_key: Option<i16>,
    },
}

async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, FrameError> {
    let size = reader.read_i32().await?;
    let length = usize::try_from(size)
        .ok()
        .filter(|length| *length <= MAX_RAFT_FRAME_BYTES)
        .ok_or(FrameError::Size {
            size: i64::from(size),
            max_bytes: MAX_RAFT_FRAME_BYTES,
        })?;
    let mut frame = vec![0; length];
    reader.read_exact(&mut frame).await?;
    Ok(frame)
}

async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[&[u8]],
) -> Result<(), FrameError> {
    let length: usize = parts.iter().map(|part| part.len()).sum();
    let size = i32::try_from(length)
        .ok()
        .filter(|_| length <= MAX_RAFT_FRAME_BYTES)
        .ok_or(FrameError::Size {
            size: length as i64,
            max_bytes: MAX_RAFT_FRAME_BYTES,
        })?;
    let mut bytes = Vec::with_capacity(4 + length);
    bytes.extend_from_slice(&size.to_be_bytes());
    for part in parts {
        bytes.extend_from_slice(part);
    }
    writer.write_all(&bytes).await?;
    writer.flush().await?;
    Ok(())
}

/// The request header: API key, version, correlation id, client id.
fn request_header(api_key: i16, correlation_id: i32) -> Vec<u8> {
    let version = if api_key == COMMAND_API_KEY {
        COMMAND_API_VERSION
    } else {
        RAFT_API_VERSION
    };
    let mut header = Vec::with_capacity(10 + CLIENT_ID.len());
    header.extend_from_slice(&api_key.to_be_bytes());
    header.extend_from_slice(&version.to_be_bytes());
    header.extend_from_slice(&correlation_id.to_be_bytes());
    header.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    header.extend_from_slice(CLIENT_ID.as_bytes());
    header
}

/// Splits a request frame into its API key, correlation id and body,
/// checking that it is a Raft request or a controller command.
pub fn parse_request(frame: &[u8]) -> Result<(i16, i32, &[u8]), FrameError> {
    let read_i16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|bytes| i16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let api_key = read_i16(0);
    let known = match api_key {
        Some(RAFT_API_KEY) => read_i16(2) == Some(RAFT_API_VERSION),
        Some(COMMAND_API_KEY) => read_i16(2) == Some(COMMAND_API_VERSION),
        _ => false,
    };
    let Some(api_key) = api_key.filter(|_| known) else {
        return Err(FrameError::NotRaft { api_key });
    };
    let api_key_field = Some(api_key);
    let correlation_id = frame
        .get(4..8)
        .map(|bytes| i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        .ok_or(FrameError::NotRaft {
            api_key: api_key_field,
        })?;
    let client_id_length = read_i16(8).ok_or(FrameError::NotRaft {
        api_key: api_key_field,
    })?;
    let body_start = 10 + usize::try_from(client_id_length.max(0)).unwrap_or(0);
    let body = frame.get(body_start..).ok_or(FrameError::NotRaft {
        api_key: api_key_field,
    })?;
    Ok((api_key, correlation_id, body))
}

/// Answers one request frame of the controller listener (a Raft request
/// or a controller command) with the reply body; `Err` means the frame
/// was not a valid request and the connection must be closed.
pub async fn answer(node: &QuorumController, frame: &[u8]) -> Result<(i32, Vec<u8>), FrameError> {
    let (api_key, correlation_id, body) = parse_request(frame)?;
    let reply = if api_key == COMMAND_API_KEY {
        let command = RemoteCommand::decode(body).map_err(|source| {
            tracing::warn!(error = %source, "undecodable controller command; closing the connection");
            FrameError::NotRaft {
                api_key: Some(api_key),
            }
        })?;
        remote::execute(node, command).await.encode()
    } else {
        node.handle_raft_request(body).await.map_err(|source| {
            tracing::warn!(error = %source, "undecodable Raft request; closing the connection");
            FrameError::NotRaft {
                api_key: Some(api_key),
            }
        })?
    };
    Ok((correlation_id, reply))
}

/// Answers Raft requests on one accepted connection until the peer closes
/// it, sends something that is not a valid Raft request, or the node is
/// shut down.
pub async fn serve_connection<S>(
    mut stream: S,
    node: Arc<QuorumController>,
) -> Result<(), FrameError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut stopped = node.stopped();
    // The broker whose heartbeats this connection carries, if any: when
    // the connection ends, the broker may be gone (see `liveness`).
    let mut heartbeats_of: Option<(i32, i64)> = None;
    let result = loop {
        let read = tokio::select! {
            read = read_frame(&mut stream) => read,
            // A stopped node closes its connections (see `shutdown`).
            _ = stopped.wait_for(|stopped| *stopped) => return Ok(()),
        };
        let frame = match read {
            Ok(frame) => frame,
            Err(FrameError::Io(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                break Ok(())
            }
            Err(error) => break Err(error),
        };
        if let Some(broker) = heartbeating_broker(&frame) {
            heartbeats_of = Some(broker);
        }
        let answered = match answer(&node, &frame).await {
            Ok(answered) => answered,
            Err(error) => break Err(error),
        };
        let (correlation_id, reply) = answered;
        if let Err(error) = write_frame(&mut stream, &[&correlation_id.to_be_bytes(), &reply]).await
        {
            break Err(error);
        }
    };
    if let Some((broker_id, broker_epoch)) = heartbeats_of {
        if node.is_active() {
            let since_ms = node.now_ms();
            crate::quorum::liveness::check_broker(
                Arc::downgrade(&node),
                broker_id,
                broker_epoch,
                since_ms,
            );
        }
    }
    result
}

/// The broker (id, epoch) of a BrokerHeartbeat command frame that does not
/// ask to shut down.
fn heartbeating_broker(frame: &[u8]) -> Option<(i32, i64)> {
    let (api_key, _, body) = parse_request(frame).ok()?;
    if api_key != COMMAND_API_KEY {
        return None;
    }
    match RemoteCommand::decode(body).ok()? {
        RemoteCommand::BrokerHeartbeat(request) if !request.want_shutdown => {
            Some((request.broker_id, request.broker_epoch))
        }
        _ => None,
    }
}

/// Serves Raft requests on `listener`, over plain TCP, until the task is
/// aborted.
pub async fn serve(listener: tokio::net::TcpListener, node: Arc<QuorumController>) {
    serve_with(listener, node, Arc::new(Plaintext)).await;
}

/// Serves Raft requests on `listener` until the task is aborted, each
/// accepted connection first secured by `acceptor` (within
/// [`HANDSHAKE_TIMEOUT`]).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    node: Arc<QuorumController>,
    acceptor: Arc<dyn QuorumAcceptor>,
) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let node = Arc::clone(&node);
        let acceptor = Arc::clone(&acceptor);
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                .await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::warn!(%peer, %error, "refused a controller connection");
                    return;
                }
                Err(_) => {
                    tracing::warn!(%peer, "a controller connection did not finish its handshake in time");
                    return;
                }
            };
            if let Err(error) = serve_connection(stream, node).await {
                tracing::debug!(%peer, error = %error, "closed a controller connection");
            }
        });
    }
}

struct Connection {
    stream: BoxedStream,
    next_correlation_id: i32,
}

/// The client side: one connection per peer, reopened after any error.
pub struct TcpTransport {
    api_key: i16,
    connector: Arc<dyn QuorumConnector>,
    connections: std::sync::Mutex<BTreeMap<NodeId, Arc<tokio::sync::Mutex<Option<Connection>>>>>,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TcpTransport")
            .field("connector", &self.connector)
            .finish_non_exhaustive()
    }
}

impl Default for TcpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl TcpTransport {
    /// A transport of Raft requests over plain TCP, with no connections
    /// yet.
    pub fn new() -> Self {
        Self {
            api_key: RAFT_API_KEY,
            connector: Arc::new(Plaintext),
            connections: std::sync::Mutex::default(),
        }
    }

    /// A transport of forwarded controller commands
    /// ([`RemoteCommand`]) over plain TCP, with no connections yet.
    pub fn for_commands() -> Self {
        Self {
            api_key: COMMAND_API_KEY,
            ..Self::new()
        }
    }

    /// The same transport, securing each new connection with `connector`.
    pub fn with_connector(self, connector: Arc<dyn QuorumConnector>) -> Self {
        Self { connector, ..self }
    }

    fn slot(&self, target: NodeId) -> Arc<tokio::sync::Mutex<Option<Connection>>> {
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(connections.entry(target).or_default())
    }
}

/// Opens a connection to `target` at `address`, secured by `connector`.
async fn open(
    connector: &dyn QuorumConnector,
    target: NodeId,
    address: &str,
) -> Result<Connection, TransportError> {
    let stream = TcpStream::connect(address)
        .await
        .map_err(|_| TransportError::Unreachable {
            target,
            address: address.to_string(),
        })?;
    let _ = stream.set_nodelay(true);
    let stream = connector
        .connect(stream, address)
        .await
        .map_err(|source| TransportError::Io { target, source })?;
    Ok(Connection {
        stream,
        next_correlation_id: 0,
    })
}

async fn exchange(
    transport: &TcpTransport,
    slot: &mut Option<Connection>,
    target: NodeId,
    address: &str,
    request: &[u8],
) -> Result<Vec<u8>, TransportError> {
    if slot.is_none() {
        *slot = Some(open(transport.connector.as_ref(), target, address).await?);
    }
    let io = |source| TransportError::Io { target, source };
    let Some(connection) = slot.as_mut() else {
        return Err(io(std::io::Error::other("no connection")));
    };
    let correlation_id = connection.next_correlation_id;
    connection.next_correlation_id = correlation_id.wrapping_add(1);
    let header = request_header(transport.api_key, correlation_id);
    write_frame(&mut connection.stream, &[&header, request])
        .await
        .map_err(|error| io(std::io::Error::other(error)))?;
    let frame = read_frame(&mut connection.stream)
        .await
        .map_err(|error| io(std::io::Error::other(error)))?;
    let answered = frame
        .get(..4)
        .map(|bytes| i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
    if answered != Some(correlation_id) {
        return Err(io(std::io::Error::other("reply to another request")));
    }
    Ok(frame[4..].to_vec())
}

#[async_trait]
impl QuorumTransport for TcpTransport {
    async fn call(
        &self,
        target: NodeId,
        address: &str,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let slot = self.slot(target);
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let attempt = async {
            let mut connection = slot.lock().await;
            let result = exchange(self, &mut connection, target, address, &request).await;
            if result.is_err() {
                *connection = None;
            }
            result
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(result) => result,
            Err(_) => {
                // The connection may hold half an exchange: drop it.
                if let Ok(mut connection) = slot.try_lock() {
                    *connection = None;
                }
                Err(TransportError::Timeout { target, timeout_ms })
            }
        }
    }
}

#[cfg(test)]
#[path = "tcp_tests.rs"]
mod tests;
