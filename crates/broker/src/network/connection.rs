//! One client connection: decode ahead, handle in order, answer in order.

use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use strom_protocol::chunked::encode_response_frame_chunks;
use strom_protocol::frame::FrameDecoder;
use strom_protocol::header::peek_request_prefix;
use strom_protocol::messages::{decode_request, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// How many decoded requests may wait for their responses on one connection
/// before the reader stops reading (back-pressure on a pipelining client).
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 128;

/// What a request needs to know about where it came from.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The correlation id to echo.
    pub correlation_id: i32,
    /// The API version of the request (and of its response).
    pub api_version: i16,
    /// The client id from the request header, if any.
    pub client_id: Option<String>,
    /// The peer's address.
    pub peer: SocketAddr,
}

/// A future that produces a deferred response (or none).
pub type DeferredReply = Pin<Box<dyn Future<Output = Option<Response>> + Send + 'static>>;

/// A handler's answer to one request.
pub enum Reply {
    /// Answer with this response now.
    Response(Response),
    /// Send nothing (a Produce with `acks=0`).
    NoResponse,
    /// Answer nothing and close the connection (what Kafka does with a
    /// request it cannot serve).
    Close,
    /// The answer comes later: the future runs as its own task and the
    /// connection answers in request order when it completes.
    Deferred(DeferredReply),
}

/// Serves decoded requests; the broker implements it with its dispatch
/// table.
#[async_trait::async_trait]
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request. Called for the requests of one connection one at
    /// a time, in arrival order.
    async fn handle(&self, context: RequestContext, request: Request) -> Reply;

    /// The ApiVersions answer to a request at a version this broker does not
    /// know: `UNSUPPORTED_VERSION` and the served versions, so the client can
    /// retry with one it shares (sent with header v0, body v0).
    fn unsupported_api_versions(&self) -> Response;
}

/// A queued answer, in request order.
enum Pending {
    /// An encoded frame as chunks (see [`encode_response_frame_chunks`]).
    Ready(Vec<Bytes>),
    Deferred {
        task: AbortOnDrop<Option<Response>>,
        correlation_id: i32,
        api_version: i16,
    },
}

/// A spawned task that is aborted when its handle is dropped (for example
/// when the connection closes before the deferred answer is ready).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Limits and timeouts of a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_frame_bytes: usize,
    pub(crate) idle_timeout: Duration,
}

/// Serves one connection until the peer closes it, it misbehaves, it idles
/// out, or the server shuts down. In-flight requests are answered first on
/// shutdown.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<dyn RequestHandler>,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    let (queue, pending) = mpsc::channel(MAX_IN_FLIGHT_PER_CONNECTION);
    let writer_task = tokio::spawn(write_responses(writer, pending));
    let reason = read_requests(reader, peer, &handler, limits, &queue, &mut shutdown).await;
    debug!(%peer, reason, "connection reader finished");
    drop(queue);
    // The writer answers what is queued, then closes the socket.
    let _ = writer_task.await;
}

async fn read_requests(
    mut reader: OwnedReadHalf,
    peer: SocketAddr,
    handler: &Arc<dyn RequestHandler>,
    limits: ConnectionLimits,
    queue: &mpsc::Sender<Pending>,
    shutdown: &mut watch::Receiver<bool>,
) -> &'static str {
    let decoder = FrameDecoder::new(limits.max_frame_bytes);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(frame)) => {
                    if let Err(reason) = handle_frame(frame, peer, handler, queue).await {
                        return reason;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    warn!(%peer, %error, "closing connection: bad frame");
                    return "bad frame";
                }
            }
        }
        if *shutdown.borrow() {
            return "shutdown";
        }
        let read = tokio::select! {
            read = tokio::time::timeout(limits.idle_timeout, reader.read_buf(&mut buffer)) => read,
            _ = shutdown.changed() => return "shutdown",
        };
        match read {
            Ok(Ok(0)) => return "closed by peer",
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return "read error",
            Err(_) => return "idle timeout",
        }
    }
}

/// Decodes and handles one frame, queueing its answer. An error closes the
/// connection (Kafka closes connections that send undecodable requests).
async fn handle_frame(
    frame: Bytes,
    peer: SocketAddr,
    handler: &Arc<dyn RequestHandler>,
    queue: &mpsc::Sender<Pending>,
) -> Result<(), &'static str> {
    let decoded = match decode_request(frame.clone()) {
        Ok(decoded) => decoded,
        Err(error) => {
            // An ApiVersions request at a version we do not know is answered
            // with UNSUPPORTED_VERSION and our versions (header v0, body v0),
            // so that the client can pick a version; anything else closes.
            if let Ok(prefix) = peek_request_prefix(&frame) {
                if prefix.api_key == 18 {
                    let response = handler.unsupported_api_versions();
                    let bytes =
                        encode(prefix.correlation_id, 0, &response).ok_or("encode error")?;
                    return queue
                        .send(Pending::Ready(bytes))
                        .await
                        .map_err(|_| "writer gone");
                }
            }
            warn!(%peer, %error, "closing connection: undecodable request");
            debug!(%peer, frame = %hex_prefix(&frame, 256), "undecodable request bytes");
            return Err("undecodable request");
        }
    };
    let context = RequestContext {
        correlation_id: decoded.correlation_id(),
        api_version: decoded.api_version(),
        client_id: decoded.header.client_id.as_ref().map(|id| id.to_string()),
        peer,
    };
    let correlation_id = context.correlation_id;
    let api_version = context.api_version;
    let pending = match handler.handle(context, decoded.body).await {
        Reply::Response(response) => {
            Pending::Ready(encode(correlation_id, api_version, &response).ok_or("encode error")?)
        }
        Reply::NoResponse => return Ok(()),
        Reply::Close => return Err("request not served"),
        Reply::Deferred(future) => Pending::Deferred {
            task: AbortOnDrop(tokio::spawn(future)),
            correlation_id,
            api_version,
        },
    };
    queue.send(pending).await.map_err(|_| "writer gone")
}

/// Encodes a response frame as chunks: a Fetch response's record bytes are
/// sent from the buffers they were read into, not copied again.
fn encode(correlation_id: i32, api_version: i16, response: &Response) -> Option<Vec<Bytes>> {
    match encode_response_frame_chunks(correlation_id, api_version, response) {
        Ok(chunks) => Some(chunks),
        Err(error) => {
            warn!(%error, correlation_id, api_version, "cannot encode a response");
            None
        }
    }
}

/// Most I/O vector entries handed to one `writev`.
const MAX_IO_SLICES: usize = 64;

/// Writes answers in request order. Answers that are ready together go out
/// in one vectored write.
async fn write_responses(mut writer: OwnedWriteHalf, mut pending: mpsc::Receiver<Pending>) {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut carried: Option<Pending> = None;
    loop {
        let next = match carried.take() {
            Some(next) => next,
            None => match pending.recv().await {
                Some(next) => next,
                None => break,
            },
        };
        if !resolve(next, &mut chunks).await {
            break;
        }
        // Gather the answers that are ready now (pipelined requests); a
        // deferred one waits until these are written.
        while chunks.len() < MAX_IO_SLICES {
            match pending.try_recv() {
                Ok(Pending::Ready(ready)) => chunks.extend(ready),
                Ok(deferred) => {
                    carried = Some(deferred);
                    break;
                }
                Err(_) => break,
            }
        }
        if write_all_chunks(&mut writer, &mut chunks).await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// Appends the encoded answer of `next` to `chunks` (waiting for a deferred
/// one); `false` when the connection must close.
async fn resolve(next: Pending, chunks: &mut Vec<Bytes>) -> bool {
    match next {
        Pending::Ready(ready) => {
            chunks.extend(ready);
            true
        }
        Pending::Deferred {
            mut task,
            correlation_id,
            api_version,
        } => {
            let response = match (&mut task.0).await {
                Ok(Some(response)) => response,
                Ok(None) => return true,
                Err(_) => return false,
            };
            match encode(correlation_id, api_version, &response) {
                Some(encoded) => {
                    chunks.extend(encoded);
                    true
                }
                None => false,
            }
        }
    }
}

/// Writes every chunk with vectored writes, handling short writes, and
/// leaves `chunks` empty.
async fn write_all_chunks(
    writer: &mut OwnedWriteHalf,
    chunks: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    let mut first = 0;
    while first < chunks.len() {
        let slices: Vec<IoSlice<'_>> = chunks
            .iter()
            .skip(first)
            .take(MAX_IO_SLICES)
            .map(|chunk| IoSlice::new(chunk))
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while let Some(chunk) = chunks.get_mut(first) {
            if written < chunk.len() {
                chunk.advance(written);
                break;
            }
            written -= chunk.len();
            first += 1;
        }
    }
    chunks.clear();
    Ok(())
}

/// The first `limit` bytes of `bytes` in hex, for debug logs.
fn hex_prefix(bytes: &[u8], limit: usize) -> String {
    bytes
        .iter()
        .take(limit)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
