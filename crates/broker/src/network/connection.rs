//! One client connection: decode ahead, handle in order, answer in order.

use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use strom_protocol::chunked::{encode_response_frame_parts, FramePart};
use strom_protocol::frame::FrameDecoder;
use strom_protocol::header::peek_request_prefix;
use strom_protocol::messages::{decode_request, Request, Response};
use strom_security::Session;
use strom_storage::read::LogSlice;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tracing::{debug, warn};

use crate::metrics::network::NETWORK;

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

    /// When the request's frame was read (request metrics time from it).
    pub received_at: std::time::Instant,
    /// The connection's listener and authentication state.
    pub session: Arc<Session>,
}

/// A future that produces a deferred answer (or none).
pub type DeferredReply = Pin<Box<dyn Future<Output = Option<Answer>> + Send + 'static>>;

/// A response and the segment ranges that take the place of its stand-ins
/// (Fetch record bytes sent with `sendfile`, see
/// [`strom_protocol::chunked::stand_in`]).
#[derive(Debug)]
pub struct Answer {
    /// The response; its stand-ins are never sent.
    pub response: Response,
    /// Each stand-in in `response` and the range sent in its place.
    pub regions: Vec<(Bytes, LogSlice)>,
}

impl From<Response> for Answer {
    fn from(response: Response) -> Answer {
        Answer {
            response,
            regions: Vec::new(),
        }
    }
}

/// A handler's answer to one request.
pub enum Reply {
    /// Answer with this response now.
    Response(Response),
    /// Answer now, sending segment ranges in place of stand-ins.
    Answer(Answer),
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

    /// Records how long writing the answer to a request of `api_key` took
    /// (Kafka's ResponseSendTimeMs). Answers written together in one
    /// vectored write each count the whole write.
    fn record_send(&self, api_key: i16, elapsed: std::time::Duration) {
        let _ = (api_key, elapsed);
    }

    /// Whether [`RequestHandler::record_send`] records anything; when not,
    /// the writer does not time its writes.
    fn times_sends(&self) -> bool {
        false
    }
}

/// One part of an encoded frame: bytes, or a segment range to `sendfile`.
type Part = FramePart<LogSlice>;

/// A queued answer, in request order.
enum Pending {
    /// An encoded frame as parts (see [`encode_response_frame_parts`]),
    /// and the API it answers (`None` for SASL tokens).
    Ready(Vec<Part>, Option<i16>),
    Deferred {
        task: AbortOnDrop<Option<Answer>>,
        correlation_id: i32,
        api_version: i16,
        api_key: i16,
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

/// The largest frame read before SASL authentication completes (Kafka's
/// `sasl.server.max.receive.size` default): a huge "SASL token" closes the
/// connection before it is buffered.
const MAX_UNAUTHENTICATED_FRAME_BYTES: usize = 512 * 1024;

/// The sending half of a connection: plaintext sockets send fetched
/// segment ranges with `sendfile`; TLS connections copy them through the
/// encryption.
pub(crate) enum ResponseWriter {
    /// A plaintext socket.
    Plain(OwnedWriteHalf),
    /// A TLS connection.
    Tls(tokio::io::WriteHalf<TlsStream<BufReader<TcpStream>>>),
}

/// What a connection needs besides its socket.
pub(crate) struct ConnectionParts {
    pub(crate) peer: SocketAddr,
    pub(crate) session: Arc<Session>,
    pub(crate) handler: Arc<dyn RequestHandler>,
    pub(crate) limits: ConnectionLimits,
}

/// Serves one plaintext connection (see [`serve_connection`]).
pub(crate) async fn serve_plain(
    stream: TcpStream,
    parts: ConnectionParts,
    shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    serve_connection(reader, ResponseWriter::Plain(writer), parts, shutdown).await;
}

/// Serves one TLS connection (see [`serve_connection`]).
pub(crate) async fn serve_tls(
    stream: TlsStream<BufReader<TcpStream>>,
    parts: ConnectionParts,
    shutdown: watch::Receiver<bool>,
) {
    let (reader, writer) = tokio::io::split(stream);
    serve_connection(reader, ResponseWriter::Tls(writer), parts, shutdown).await;
}

/// Serves one connection until the peer closes it, it misbehaves, it idles
/// out, or the server shuts down. In-flight requests are answered first on
/// shutdown.
async fn serve_connection<R: AsyncRead + Unpin>(
    reader: R,
    writer: ResponseWriter,
    parts: ConnectionParts,
    mut shutdown: watch::Receiver<bool>,
) {
    let (queue, pending) = mpsc::channel(MAX_IN_FLIGHT_PER_CONNECTION);
    let writer_task = tokio::spawn(write_responses(writer, pending, Arc::clone(&parts.handler)));
    let peer = parts.peer;
    let reason = read_requests(reader, &parts, &queue, &mut shutdown).await;
    debug!(%peer, reason, "connection reader finished");
    drop(queue);
    // The writer answers what is queued, then closes the socket.
    let _ = writer_task.await;
}

async fn read_requests<R: AsyncRead + Unpin>(
    mut reader: R,
    parts: &ConnectionParts,
    queue: &mpsc::Sender<Pending>,
    shutdown: &mut watch::Receiver<bool>,
) -> &'static str {
    let peer = parts.peer;
    let decoder = FrameDecoder::new(parts.limits.max_frame_bytes);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            if !parts.session.authenticated()
                && announced_length(&buffer) > MAX_UNAUTHENTICATED_FRAME_BYTES
            {
                warn!(%peer, "closing connection: oversized frame before authentication");
                return "oversized frame before authentication";
            }
            match decoder.decode(&mut buffer) {
                Ok(Some(frame)) => {
                    if let Err(reason) = handle_frame(frame, parts, queue).await {
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
            read = tokio::time::timeout(parts.limits.idle_timeout, reader.read_buf(&mut buffer)) => read,
            _ = shutdown.changed() => return "shutdown",
        };
        match read {
            Ok(Ok(0)) => return "closed by peer",
            Ok(Ok(read)) => NETWORK.received(read),
            Ok(Err(_)) => return "read error",
            Err(_) => return "idle timeout",
        }
    }
}

/// The size prefix of the frame at the head of `buffer` (0 until it is
/// there; negative sizes are the decoder's to refuse).
fn announced_length(buffer: &[u8]) -> usize {
    match buffer.get(..4) {
        Some(&[a, b, c, d]) => usize::try_from(i32::from_be_bytes([a, b, c, d])).unwrap_or(0),
        _ => 0,
    }
}

/// A bare SASL token (after a v0 SaslHandshake): handled as a
/// SaslAuthenticate and answered with a bare token; a failure closes.
async fn handle_raw_token(
    frame: Bytes,
    parts: &ConnectionParts,
    queue: &mpsc::Sender<Pending>,
) -> Result<(), &'static str> {
    use strom_protocol::kafka::messages::SaslAuthenticateRequest;
    let context = RequestContext {
        correlation_id: 0,
        api_version: 0,
        client_id: None,
        peer: parts.peer,
        received_at: std::time::Instant::now(),
        session: Arc::clone(&parts.session),
    };
    let request =
        Request::SaslAuthenticate(SaslAuthenticateRequest::default().with_auth_bytes(frame));
    let Reply::Response(Response::SaslAuthenticate(response)) =
        parts.handler.handle(context, request).await
    else {
        return Err("unexpected answer to a SASL token");
    };
    if response.error_code != 0 {
        return Err("SASL authentication failed");
    }
    let length = u32::try_from(response.auth_bytes.len()).map_err(|_| "token too long")?;
    let frame = vec![
        Part::Bytes(Bytes::copy_from_slice(&length.to_be_bytes())),
        Part::Bytes(response.auth_bytes),
    ];
    queue
        .send(Pending::Ready(frame, None))
        .await
        .map_err(|_| "writer gone")
}

/// Decodes and handles one frame, queueing its answer. An error closes the
/// connection (Kafka closes connections that send undecodable requests).
async fn handle_frame(
    frame: Bytes,
    parts: &ConnectionParts,
    queue: &mpsc::Sender<Pending>,
) -> Result<(), &'static str> {
    // Queue time for metrics, on the host's clock.
    let received_at = std::time::Instant::now();
    let (peer, handler) = (parts.peer, &parts.handler);
    if parts.session.expects_raw_token() {
        return handle_raw_token(frame, parts, queue).await;
    }
    if let Ok(prefix) = peek_request_prefix(&frame) {
        if !parts.session.may_serve(prefix.api_key) {
            warn!(%peer, api_key = prefix.api_key, "closing connection: request before authentication");
            return Err("request before authentication");
        }
    }
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
                        encode(prefix.correlation_id, 0, &response.into()).ok_or("encode error")?;
                    return queue
                        .send(Pending::Ready(bytes, Some(prefix.api_key)))
                        .await
                        .map_err(|_| "writer gone");
                }
            }
            crate::metrics::network::undecodable_request(peer, &error);
            debug!(%peer, frame = %hex_prefix(&frame, 256), "undecodable request bytes");
            return Err("undecodable request");
        }
    };
    let context = RequestContext {
        correlation_id: decoded.correlation_id(),
        api_version: decoded.api_version(),
        client_id: decoded.header.client_id.as_ref().map(|id| id.to_string()),
        peer,

        received_at,
        session: Arc::clone(&parts.session),
    };
    let correlation_id = context.correlation_id;
    let api_version = context.api_version;
    let api_key = decoded.body.api_key() as i16;
    let pending = match handler.handle(context, decoded.body).await {
        Reply::Response(response) => Pending::Ready(
            encode(correlation_id, api_version, &response.into()).ok_or("encode error")?,
            Some(api_key),
        ),
        Reply::Answer(answer) => Pending::Ready(
            encode(correlation_id, api_version, &answer).ok_or("encode error")?,
            Some(api_key),
        ),
        Reply::NoResponse => return Ok(()),
        Reply::Close => return Err("request not served"),
        Reply::Deferred(future) => Pending::Deferred {
            task: AbortOnDrop(tokio::spawn(future)),
            correlation_id,
            api_version,
            api_key,
        },
    };
    queue.send(pending).await.map_err(|_| "writer gone")?;
    if parts.session.failed() {
        return Err("authentication failed");
    }
    Ok(())
}

/// Encodes a response frame as parts: a Fetch response's record bytes are
/// sent from the buffers they were read into, or from their segment files,
/// not copied again.
fn encode(correlation_id: i32, api_version: i16, answer: &Answer) -> Option<Vec<Part>> {
    match encode_response_frame_parts(
        correlation_id,
        api_version,
        &answer.response,
        &answer.regions,
    ) {
        Ok(parts) => Some(parts),
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
async fn write_responses(
    mut writer: ResponseWriter,
    mut pending: mpsc::Receiver<Pending>,
    handler: Arc<dyn RequestHandler>,
) {
    let mut parts: Vec<Part> = Vec::new();
    let mut answered: Vec<i16> = Vec::new();
    let timed = handler.times_sends();
    let mut carried: Option<Pending> = None;
    loop {
        let next = match carried.take() {
            Some(next) => next,
            None => match pending.recv().await {
                Some(next) => next,
                None => break,
            },
        };
        if !resolve(next, &mut parts, &mut answered).await {
            break;
        }
        // Gather the answers that are ready now (pipelined requests); a
        // deferred one waits until these are written.
        while parts.len() < MAX_IO_SLICES {
            match pending.try_recv() {
                Ok(Pending::Ready(ready, api_key)) => {
                    parts.extend(ready);
                    answered.extend(api_key);
                }
                Ok(deferred) => {
                    carried = Some(deferred);
                    break;
                }
                Err(_) => break,
            }
        }
        let started = timed.then(std::time::Instant::now);
        let written = match &mut writer {
            ResponseWriter::Plain(writer) => write_all_parts(writer, &mut parts).await,
            ResponseWriter::Tls(writer) => write_all_parts_copied(writer, &mut parts).await,
        };
        if let Some(started) = started {
            let elapsed = started.elapsed();
            for api_key in answered.iter() {
                handler.record_send(*api_key, elapsed);
            }
        }
        answered.clear();
        if let Err(error) = written {
            debug!(%error, "closing connection: write failed");
            break;
        }
    }
    let _ = match &mut writer {
        ResponseWriter::Plain(writer) => writer.shutdown().await,
        ResponseWriter::Tls(writer) => writer.shutdown().await,
    };
}

/// Writes every part through an encrypting stream: segment ranges are read
/// into memory (off the async workers) and everything goes out as one
/// buffer, so the TLS layer makes few, full records. Leaves `parts` empty.
async fn write_all_parts_copied<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &mut Vec<Part>,
) -> std::io::Result<()> {
    let mut buffer = BytesMut::new();
    for part in parts.drain(..) {
        match part {
            FramePart::Bytes(bytes) => buffer.extend_from_slice(&bytes),
            FramePart::Region(slice) => {
                let read = tokio::task::spawn_blocking(move || slice.to_bytes())
                    .await
                    .map_err(|_| std::io::Error::other("reading a fetched range was cancelled"))?;
                let bytes = read.map_err(std::io::Error::other)?;
                buffer.extend_from_slice(&bytes);
            }
        }
    }
    writer.write_all(&buffer).await?;
    writer.flush().await
}

/// Appends the encoded answer of `next` to `parts` (waiting for a deferred
/// one); `false` when the connection must close.
async fn resolve(next: Pending, parts: &mut Vec<Part>, answered: &mut Vec<i16>) -> bool {
    match next {
        Pending::Ready(ready, api_key) => {
            parts.extend(ready);
            answered.extend(api_key);
            true
        }
        Pending::Deferred {
            mut task,
            correlation_id,
            api_version,
            api_key,
        } => {
            answered.push(api_key);
            let answer = match (&mut task.0).await {
                Ok(Some(answer)) => answer,
                Ok(None) => return true,
                Err(_) => return false,
            };
            match encode(correlation_id, api_version, &answer) {
                Some(encoded) => {
                    parts.extend(encoded);
                    true
                }
                None => false,
            }
        }
    }
}

/// Writes every part, runs of bytes with vectored writes (handling short
/// writes) and segment ranges with `sendfile`, and leaves `parts` empty.
async fn write_all_parts(
    writer: &mut OwnedWriteHalf,
    parts: &mut Vec<Part>,
) -> std::io::Result<()> {
    let mut first = 0;
    while first < parts.len() {
        if let Some(FramePart::Region(slice)) = parts.get(first) {
            send_region(writer, slice).await?;
            first += 1;
            continue;
        }
        let slices: Vec<IoSlice<'_>> = parts
            .iter()
            .skip(first)
            .take(MAX_IO_SLICES)
            .map_while(|part| match part {
                FramePart::Bytes(bytes) => Some(IoSlice::new(bytes)),
                FramePart::Region(_) => None,
            })
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        NETWORK.sent(written as u64);
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while let Some(FramePart::Bytes(chunk)) = parts.get_mut(first) {
            if written < chunk.len() {
                chunk.advance(written);
                break;
            }
            written -= chunk.len();
            first += 1;
        }
    }
    parts.clear();
    Ok(())
}

/// Sends a segment range with `sendfile`, waiting whenever the socket is
/// full (and for the disk, off the async workers, when the range is not in
/// the page cache). A range that the file no longer holds whole (truncated since the
/// read) is an error: the frame's length is already promised, so the
/// connection must close.
async fn send_region(writer: &OwnedWriteHalf, slice: &LogSlice) -> std::io::Result<()> {
    // `sendfile` reads what is not cached from the disk, blocking the
    // thread: load such a range on the blocking pool first, so that the
    // async worker goes on serving other connections meanwhile. Loading is
    // only a head start: if it fails (the file was truncated, say),
    // `sendfile` meets the same problem below and reports it.
    if slice.is_cached() == Some(false) {
        NETWORK.page_cache_load();
        let loading = slice.clone();
        let loaded = tokio::task::spawn_blocking(move || loading.load_into_page_cache()).await;
        if let Ok(Err(error)) = loaded {
            debug!(%error, "loading a fetched range into the page cache failed");
        }
    }
    let stream: &TcpStream = writer.as_ref();
    let mut sent = 0u64;
    while sent < slice.len() {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || slice.send_to(stream.as_fd(), sent)) {
            Ok(0) => {
                warn!(
                    position = slice.position(),
                    length = slice.len(),
                    sent,
                    "closing connection: a fetched segment range was truncated while being sent"
                );
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            Ok(moved) => {
                NETWORK.sent(moved as u64);
                sent += moved as u64;
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use strom_storage::testing::{simple_batch, BatchSpec};
    use strom_storage::{Log, LogConfig, LogOpenOptions};
    use tokio::net::TcpListener;

    /// A log in `dir` holding `batches` batches, and a slice of all of them.
    fn slice_of(dir: &std::path::Path, batches: usize) -> LogSlice {
        let options = LogOpenOptions {
            log_start_offset: 0,
            recovery_point: 0,
            had_clean_shutdown: true,
            now_ms: 0,
            random: std::sync::Arc::new(strom_clock::SeededRandom::new(0)),
        };
        let dir = dir.join("topic-0");
        let (mut log, _) = Log::open(&dir, LogConfig::default(), options).expect("open");
        for _ in 0..batches {
            let batch = simple_batch(&BatchSpec {
                records: 20,
                value_bytes: 500,
                ..BatchSpec::default()
            });
            log.append_as_leader(batch, 0, 0).expect("append");
        }
        log.read(0, 64 << 20, log.log_end_offset(), true)
            .expect("read")
            .records
            .expect("records")
    }

    /// A connected pair: the broker's write half and the client's stream.
    async fn socket_pair() -> (OwnedWriteHalf, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address"))
            .await
            .expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        (server.into_split().1, client)
    }

    #[tokio::test]
    async fn bytes_and_segment_ranges_go_out_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        // About 1 MB: more than the socket holds, so sendfile waits for room.
        let slice = slice_of(dir.path(), 100);
        let file_bytes = slice.to_bytes().expect("bytes");
        let (mut writer, mut client) = socket_pair().await;
        let mut parts = vec![
            Part::Bytes(Bytes::from_static(b"head")),
            Part::Region(slice.clone()),
            Part::Bytes(Bytes::from_static(b"middle")),
            Part::Bytes(Bytes::from_static(b"-")),
            Part::Region(slice.clone()),
            Part::Bytes(Bytes::from_static(b"tail")),
        ];
        let total = 4 + 6 + 1 + 4 + 2 * file_bytes.len();
        let reader = tokio::spawn(async move {
            let mut received = vec![0; total];
            client.read_exact(&mut received).await.expect("read");
            received
        });
        write_all_parts(&mut writer, &mut parts)
            .await
            .expect("written");
        assert!(parts.is_empty());
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&file_bytes);
        expected.extend_from_slice(b"middle-");
        expected.extend_from_slice(&file_bytes);
        expected.extend_from_slice(b"tail");
        assert_eq!(reader.await.expect("reader"), expected);
    }

    #[tokio::test]
    async fn a_range_dropped_from_the_page_cache_is_loaded_and_sent() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("tempdir");
        let slice = slice_of(dir.path(), 100);
        let file_bytes = slice.to_bytes().expect("bytes");
        slice.file().sync_all().expect("fsync");
        // SAFETY: the descriptor is open; fadvise only drops clean pages.
        let dropped = unsafe {
            libc::posix_fadvise(slice.file().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
        };
        assert_eq!(dropped, 0);
        assert_eq!(slice.is_cached(), Some(false));
        let (mut writer, mut client) = socket_pair().await;
        let total = 4 + file_bytes.len();
        let reader = tokio::spawn(async move {
            let mut received = vec![0; total];
            client.read_exact(&mut received).await.expect("read");
            received
        });
        let mut parts = vec![
            Part::Bytes(Bytes::from_static(b"head")),
            Part::Region(slice.clone()),
        ];
        write_all_parts(&mut writer, &mut parts)
            .await
            .expect("written");
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&file_bytes);
        assert_eq!(reader.await.expect("reader"), expected);
        assert_eq!(slice.is_cached(), Some(true), "loaded on the way");
    }

    #[tokio::test]
    async fn a_range_truncated_before_it_is_sent_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let slice = slice_of(dir.path(), 3);
        slice
            .file()
            .set_len(slice.position() + slice.len() / 2)
            .expect("truncate");
        let (mut writer, _client) = socket_pair().await;
        let mut parts = vec![
            Part::Bytes(Bytes::from_static(b"head")),
            Part::Region(slice),
        ];
        let error = write_all_parts(&mut writer, &mut parts)
            .await
            .expect_err("the range cannot be finished");
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
