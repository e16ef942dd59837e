//! One client connection: decode ahead, handle in order, answer in order.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use strom_protocol::chunked::{encode_response_frame_parts, FramePart};
use strom_protocol::frame::FrameDecoder;
use strom_protocol::header::peek_request_prefix;
use strom_protocol::messages::{decode_request, Request, Response};
use strom_security::Session;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tracing::{debug, warn};

use crate::metrics::{undecodable_request, NETWORK};
use crate::region::Region;
use crate::request::{Answer, ConnectionMute, Reply, RequestContext, RequestHandler};

/// How many decoded requests may wait for their responses on one connection
/// before the reader stops reading (back-pressure on a pipelining client).
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 128;

/// One part of an encoded frame: bytes, or a segment range to `sendfile`.
type Part = FramePart<Region>;

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
    // The connection's mute (a throttled client's pause in reading).
    let mute = ConnectionMute::default();
    let reason = read_requests(reader, (&parts, &mute), &queue, &mut shutdown).await;
    debug!(%peer, reason, "connection reader finished");
    drop(queue);
    // The writer answers what is queued, then closes the socket.
    let _ = writer_task.await;
}

async fn read_requests<R: AsyncRead + Unpin>(
    mut reader: R,
    (parts, mute): (&ConnectionParts, &ConnectionMute),
    queue: &mpsc::Sender<Pending>,
    shutdown: &mut watch::Receiver<bool>,
) -> &'static str {
    let peer = parts.peer;
    let decoder = FrameDecoder::new(parts.limits.max_frame_bytes);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            if !wait_while_muted(mute, shutdown).await {
                return "shutdown";
            }
            if !parts.session.authenticated()
                && announced_length(&buffer) > MAX_UNAUTHENTICATED_FRAME_BYTES
            {
                warn!(%peer, "closing connection: oversized frame before authentication");
                return "oversized frame before authentication";
            }
            match decoder.decode(&mut buffer) {
                Ok(Some(frame)) => {
                    if let Err(reason) = handle_frame(frame, (parts, mute), queue).await {
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

/// Waits while a throttle mutes the connection (KIP-219): no request is
/// read or decoded meanwhile. False when the server shuts down.
async fn wait_while_muted(mute: &ConnectionMute, shutdown: &mut watch::Receiver<bool>) -> bool {
    while let Some(until) = mute.muted_until() {
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {}
            _ = shutdown.changed() => return false,
        }
    }
    !*shutdown.borrow()
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
    (parts, mute): (&ConnectionParts, &ConnectionMute),
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
        mute: mute.clone(),
        request_bytes: frame.len(),
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
    (parts, mute): (&ConnectionParts, &ConnectionMute),
    queue: &mpsc::Sender<Pending>,
) -> Result<(), &'static str> {
    // Queue time for metrics, on the host's clock.
    let received_at = std::time::Instant::now();
    let (peer, handler) = (parts.peer, &parts.handler);
    if parts.session.expects_raw_token() {
        return handle_raw_token(frame, (parts, mute), queue).await;
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
            undecodable_request(peer, &error);
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
        mute: mute.clone(),
        request_bytes: frame.len(),
    };
    let (correlation_id, api_version) = (context.correlation_id, context.api_version);
    let api_key = decoded.body.api_key() as i16;
    let reply = handler.handle(context, decoded.body).await;
    let Some(pending) = pending(reply, correlation_id, api_version, api_key)? else {
        return Ok(());
    };
    queue.send(pending).await.map_err(|_| "writer gone")?;
    if parts.session.failed() {
        return Err("authentication failed");
    }
    Ok(())
}

/// What to queue for a handler's reply to a request of `api_key`: `None`
/// when nothing is sent, an error when the connection must close.
fn pending(
    reply: Reply,
    correlation_id: i32,
    api_version: i16,
    api_key: i16,
) -> Result<Option<Pending>, &'static str> {
    Ok(Some(match reply {
        Reply::Response(response) => Pending::Ready(
            encode(correlation_id, api_version, &response.into()).ok_or("encode error")?,
            Some(api_key),
        ),
        Reply::Answer(answer) => Pending::Ready(
            encode(correlation_id, api_version, &answer).ok_or("encode error")?,
            Some(api_key),
        ),
        Reply::NoResponse => return Ok(None),
        Reply::Close => return Err("request not served"),
        Reply::Deferred(future) => Pending::Deferred {
            task: AbortOnDrop(tokio::spawn(future)),
            correlation_id,
            api_version,
            api_key,
        },
    }))
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
                let bytes = tokio::task::spawn_blocking(move || slice.to_bytes())
                    .await
                    .map_err(|_| {
                        std::io::Error::other("reading a fetched range was cancelled")
                    })??;
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
async fn send_region(writer: &OwnedWriteHalf, slice: &Region) -> std::io::Result<()> {
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
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::fs::FileExt;
    use std::sync::Mutex;

    use super::*;
    use crate::region::FileRegion;
    use tokio::net::TcpListener;

    /// A range of a test file, sent as a segment range would be; what it
    /// says of the page cache is set by the test.
    #[derive(Debug)]
    struct FileRange {
        file: std::fs::File,
        position: u64,
        length: u64,
        cached: Mutex<Option<bool>>,
    }

    impl FileRegion for FileRange {
        fn len(&self) -> u64 {
            self.length
        }

        fn position(&self) -> u64 {
            self.position
        }

        fn send_to(&self, out: BorrowedFd<'_>, sent: u64) -> std::io::Result<usize> {
            let remaining = self.length.saturating_sub(sent);
            if remaining == 0 {
                return Ok(0);
            }
            let mut offset = libc::off_t::try_from(self.position + sent).expect("offset");
            // SAFETY: both descriptors are open for the duration of the
            // call and `offset` is a valid, exclusive pointer.
            let moved = unsafe {
                libc::sendfile(
                    out.as_raw_fd(),
                    self.file.as_raw_fd(),
                    &mut offset,
                    remaining as usize,
                )
            };
            usize::try_from(moved).map_err(|_| std::io::Error::last_os_error())
        }

        fn is_cached(&self) -> Option<bool> {
            *self.cached.lock().expect("lock")
        }

        fn load_into_page_cache(&self) -> std::io::Result<()> {
            self.to_bytes()?;
            *self.cached.lock().expect("lock") = Some(true);
            Ok(())
        }

        fn to_bytes(&self) -> std::io::Result<Bytes> {
            let mut buffer = vec![0; self.length as usize];
            self.file.read_exact_at(&mut buffer, self.position)?;
            Ok(Bytes::from(buffer))
        }
    }

    /// A file in `dir` of `length` bytes and a range of all of it, which
    /// reports `cached` for the page cache.
    fn range_of(dir: &std::path::Path, length: usize, cached: Option<bool>) -> Arc<FileRange> {
        let path = dir.join("00000000000000000000.log");
        let bytes: Vec<u8> = (0..length).map(|index| (index % 251) as u8).collect();
        std::fs::write(&path, bytes).expect("write");
        Arc::new(FileRange {
            file: std::fs::File::open(&path).expect("open"),
            position: 0,
            length: length as u64,
            cached: Mutex::new(cached),
        })
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
        let slice: Region = range_of(dir.path(), 1 << 20, None);
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
        let dir = tempfile::tempdir().expect("tempdir");
        let range = range_of(dir.path(), 1 << 20, Some(false));
        let slice: Region = range.clone();
        let file_bytes = slice.to_bytes().expect("bytes");
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
        let range = range_of(dir.path(), 32 * 1024, None);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("00000000000000000000.log"))
            .expect("open")
            .set_len(range.position + range.length / 2)
            .expect("truncate");
        let (mut writer, _client) = socket_pair().await;
        let mut parts = vec![
            Part::Bytes(Bytes::from_static(b"head")),
            Part::Region(range),
        ];
        let error = write_all_parts(&mut writer, &mut parts)
            .await
            .expect_err("the range cannot be finished");
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
