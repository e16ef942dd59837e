//! One TCP connection to a broker: ApiVersions negotiation, then pipelined
//! requests whose responses are matched in order by correlation id.
//!
//! A writer task owns the write half and a reader task owns the read half.
//! [`Connection::submit`] queues a request synchronously (so requests are
//! written in the order they were submitted) and returns a future for its
//! response. Before writing, the writer records the request's correlation id
//! in a shared queue; the reader pops the oldest entry for each response and
//! checks that the ids agree (Kafka answers in order on a connection). A
//! failure or a timed-out request closes the connection and fails every
//! pending request: a late response could never be matched again.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The guard of a poisoned lock of a connection's task list: abort handles
/// pushed and drained whole, safe to reuse after a panic.
fn reuse_task_list<G>(poisoned: PoisonError<G>) -> G {
    poisoned.into_inner()
}
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strom_protocol::api::SUPPORTED_APIS;
use strom_protocol::frame::FrameDecoder;
use strom_protocol::kafka::messages::{ApiKey, ApiVersionsRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{
    decode_response, decode_response_lenient, encode_request_frame, request_header,
};
use strom_protocol::{ErrorCode, Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::error::ClientError;
use crate::security::ClientSecurity;

/// A connection's byte stream: a TCP socket, or TLS over one.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<S: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for S {}

/// The ApiVersions version tried first; older brokers answer
/// UNSUPPORTED_VERSION with their range and the client retries lower.
const API_VERSIONS_FIRST_TRY: i16 = 3;

/// A response future returned by [`Connection::submit`].
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, ClientError>> + Send>>;

/// Versions the broker advertised: API key to (min, max).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerApiVersions {
    ranges: HashMap<i16, (i16, i16)>,
}

/// APIs whose newer versions only brokers send, with the highest version a
/// client sends (as Kafka's clients cap them): AddPartitionsToTxn v4+ is
/// the brokers' batched verification (KIP-890).
const CLIENT_MAX_VERSIONS: &[(ApiKey, i16)] = &[(ApiKey::AddPartitionsToTxn, 3)];

impl BrokerApiVersions {
    /// Builds the table from (key, min, max) triples.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        BrokerApiVersions {
            ranges: ranges
                .into_iter()
                .map(|(key, min, max)| (key, (min, max)))
                .collect(),
        }
    }

    /// The broker's (min, max) for an API key.
    pub fn range(&self, api_key: ApiKey) -> Option<(i16, i16)> {
        self.ranges.get(&(api_key as i16)).copied()
    }

    /// The highest version both this client and the broker support.
    pub fn negotiate(&self, api_key: ApiKey) -> Option<i16> {
        let (broker_min, broker_max) = self.range(api_key)?;
        let ours = SUPPORTED_APIS.iter().find(|api| api.api_key == api_key)?;
        let client_max = CLIENT_MAX_VERSIONS
            .iter()
            .find(|(key, _)| *key == api_key)
            .map_or(ours.max_version, |(_, max)| (*max).min(ours.max_version));
        let version = broker_max.min(client_max);
        (version >= broker_min.max(ours.min_version)).then_some(version)
    }
}

/// One queued request.
struct Outgoing {
    request: Request,
    api_version: i16,
    reply: Option<oneshot::Sender<Result<Response, ClientError>>>,
}

/// A request written and waiting for its response.
struct Pending {
    correlation_id: i32,
    api_key: i16,
    api_version: i16,
    reply: oneshot::Sender<Result<Response, ClientError>>,
}

/// The queue of written requests, closed once the connection fails.
#[derive(Default)]
struct PendingQueue {
    closed: bool,
    queue: VecDeque<Pending>,
}

struct Shared {
    address: String,
    pending: Mutex<PendingQueue>,
    closed: AtomicBool,
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Shared {
    /// The queue of requests awaiting responses. The read loop matches
    /// responses to it in order, so one that a panic may have left out of
    /// step with the socket is not reused: the connection is closed
    /// instead, its waiting requests fail with `Disconnected`, and callers
    /// retry on a new connection.
    fn lock(&self) -> std::sync::MutexGuard<'_, PendingQueue> {
        self.pending.lock().unwrap_or_else(|poisoned| {
            let mut pending = poisoned.into_inner();
            tracing::error!(address = %self.address,
                "a thread panicked holding a connection's request queue; closing the connection");
            pending.closed = true;
            for waiting in pending.queue.drain(..) {
                let _ = waiting.reply.send(Err(self.disconnected()));
            }
            self.closed.store(true, Ordering::Release);
            self.pending.clear_poison();
            pending
        })
    }

    /// Marks the connection closed, fails all pending requests and stops
    /// both tasks.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let drained: Vec<Pending> = {
            let mut pending = self.lock();
            pending.closed = true;
            pending.queue.drain(..).collect()
        };
        for waiting in drained {
            let _ = waiting.reply.send(Err(self.disconnected()));
        }
        for task in self.tasks.lock().unwrap_or_else(reuse_task_list).drain(..) {
            task.abort();
        }
    }

    fn disconnected(&self) -> ClientError {
        ClientError::Disconnected {
            address: self.address.clone(),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(reuse_task_list)
            .drain(..)
        {
            task.abort();
        }
    }
}

/// A negotiated, pipelined connection to one broker. Cheap to clone.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    versions: Arc<BrokerApiVersions>,
    request_timeout: Duration,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Connection")
            .field("address", &self.shared.address)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// What [`Connection::connect`] needs.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// The client id sent in request headers.
    pub client_id: String,
    /// The default time to wait for a response.
    pub request_timeout: Duration,
    /// The time allowed for the TCP connect and the ApiVersions exchange.
    pub setup_timeout: Duration,
    /// TLS and SASL.
    pub security: ClientSecurity,
}

impl Connection {
    /// Connects to `address`, negotiates API versions and starts the reader
    /// and writer tasks.
    pub async fn connect(address: &str, options: &ConnectionOptions) -> Result<Self, ClientError> {
        let setup = async {
            let stream =
                TcpStream::connect(address)
                    .await
                    .map_err(|source| ClientError::Connect {
                        address: address.to_owned(),
                        source,
                    })?;
            let _ = stream.set_nodelay(true);
            let mut stream: Box<dyn Stream> = match options.security.uses_tls() {
                false => Box::new(stream),
                true => {
                    let connector =
                        tokio_rustls::TlsConnector::from(options.security.tls_config()?);
                    let name = crate::security::server_name(address)?;
                    Box::new(connector.connect(name, stream).await.map_err(|source| {
                        ClientError::Connect {
                            address: address.to_owned(),
                            source,
                        }
                    })?)
                }
            };
            let versions = negotiate_api_versions(&mut stream, address, &options.client_id).await?;
            if options.security.uses_sasl() {
                crate::security::authenticate(&mut stream, address, &options.security).await?;
            }
            Ok::<_, ClientError>((stream, versions))
        };
        let (stream, versions) = tokio::time::timeout(options.setup_timeout, setup)
            .await
            .map_err(|_| ClientError::Connect {
                address: address.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "connection setup timed out",
                ),
            })??;
        Ok(Self::start(stream, address, versions, options))
    }

    fn start(
        stream: Box<dyn Stream>,
        address: &str,
        versions: BrokerApiVersions,
        options: &ConnectionOptions,
    ) -> Self {
        let (read_half, write_half) = tokio::io::split(stream);
        let shared = Arc::new(Shared {
            address: address.to_owned(),
            pending: Mutex::new(PendingQueue::default()),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        let (outgoing, receiver) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_loop(
            write_half,
            receiver,
            Arc::downgrade(&shared),
            options.client_id.clone(),
        ));
        let reader = tokio::spawn(read_loop(read_half, Arc::downgrade(&shared)));
        shared
            .tasks
            .lock()
            .unwrap_or_else(reuse_task_list)
            .extend([writer.abort_handle(), reader.abort_handle()]);
        Connection {
            shared,
            outgoing,
            versions: Arc::new(versions),
            request_timeout: options.request_timeout,
        }
    }

    /// The broker's `host:port`.
    pub fn address(&self) -> &str {
        &self.shared.address
    }

    /// Whether the connection has failed or was closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire) || self.outgoing.is_closed()
    }

    /// Closes the connection; pending requests fail with `Disconnected`.
    pub fn close(&self) {
        self.shared.close();
    }

    /// The versions the broker advertised.
    pub fn broker_versions(&self) -> &BrokerApiVersions {
        &self.versions
    }

    /// The version this connection uses for `api_key`.
    pub fn api_version(&self, api_key: ApiKey) -> Result<i16, ClientError> {
        self.versions
            .negotiate(api_key)
            .ok_or_else(|| ClientError::UnsupportedVersion {
                api_key: api_key as i16,
                address: self.shared.address.clone(),
            })
    }

    /// Sends a request and waits for its response with the default
    /// `request.timeout.ms`.
    pub async fn send(&self, request: impl Into<Request>) -> Result<Response, ClientError> {
        self.submit(request.into(), self.request_timeout)?.await
    }

    /// Queues a request at the negotiated version and returns a future for
    /// its response, which fails with [`ClientError::Timeout`] after
    /// `timeout` (long polls pass their own, longer timeout). Requests are
    /// written in the order they are submitted.
    pub fn submit(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<ResponseFuture, ClientError> {
        let api_version = self.api_version(request.api_key())?;
        self.submit_at(request, api_version, timeout)
    }

    /// Like [`submit`](Self::submit) at an explicit version.
    pub fn submit_at(
        &self,
        request: Request,
        api_version: i16,
        timeout: Duration,
    ) -> Result<ResponseFuture, ClientError> {
        let api_key = request.api_key() as i16;
        let (reply, response) = oneshot::channel();
        self.queue(Outgoing {
            request,
            api_version,
            reply: Some(reply),
        })?;
        let shared = Arc::clone(&self.shared);
        Ok(Box::pin(async move {
            match tokio::time::timeout(timeout, response).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(shared.disconnected()),
                Err(_) => {
                    shared.close();
                    Err(ClientError::Timeout {
                        api_key,
                        address: shared.address.clone(),
                        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    })
                }
            }
        }))
    }

    /// Queues a request that gets no response (Produce with `acks=0`).
    pub fn submit_without_response(&self, request: Request) -> Result<(), ClientError> {
        let api_version = self.api_version(request.api_key())?;
        self.submit_without_response_at(request, api_version)
    }

    /// Like [`submit_without_response`](Self::submit_without_response) at an
    /// explicit version.
    pub fn submit_without_response_at(
        &self,
        request: Request,
        api_version: i16,
    ) -> Result<(), ClientError> {
        self.queue(Outgoing {
            request,
            api_version,
            reply: None,
        })
    }

    fn queue(&self, outgoing: Outgoing) -> Result<(), ClientError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(self.shared.disconnected());
        }
        self.outgoing
            .send(outgoing)
            .map_err(|_| self.shared.disconnected())
    }
}

/// Exchanges ApiVersions on a fresh stream, retrying at the broker's highest
/// ApiVersions version when it rejects ours.
async fn negotiate_api_versions<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    address: &str,
    client_id: &str,
) -> Result<BrokerApiVersions, ClientError> {
    let mut version = API_VERSIONS_FIRST_TRY;
    for correlation_id in 0..3 {
        let request = Request::from(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("strom"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION"))),
        );
        let header = request_header(&request, version, correlation_id, Some(client_id));
        let mut wire = BytesMut::new();
        encode_request_frame(&header, &request, &mut wire)
            .map_err(|source| protocol(address, source))?;
        stream
            .write_all(&wire)
            .await
            .map_err(|_| disconnected(address))?;
        let frame = read_one_frame(stream, address).await?;
        // A broker that rejects the version answers UNSUPPORTED_VERSION with
        // a body not always decodable at our version: then fall back to v0,
        // which every broker serves.
        let body = match decode_response(frame, ApiKey::ApiVersions as i16, version) {
            Ok((_, Response::ApiVersions(body))) => body,
            Ok(_) => {
                return Err(ClientError::UnexpectedResponse {
                    api_key: ApiKey::ApiVersions as i16,
                })
            }
            Err(source) if version == 0 => return Err(protocol(address, source)),
            Err(_) => {
                version = 0;
                continue;
            }
        };
        let table = BrokerApiVersions::from_ranges(
            body.api_keys
                .iter()
                .map(|api| (api.api_key, api.min_version, api.max_version)),
        );
        match ErrorCode::from_code(body.error_code) {
            ErrorCode::None => return Ok(table),
            ErrorCode::UnsupportedVersion if version > 0 => {
                let (_, broker_max) = table.range(ApiKey::ApiVersions).unwrap_or((0, 0));
                version = broker_max.min(version - 1).max(0);
            }
            code => return Err(ClientError::Broker { code }),
        }
    }
    Err(ClientError::UnsupportedVersion {
        api_key: ApiKey::ApiVersions as i16,
        address: address.to_owned(),
    })
}

/// Reads exactly one response frame (connection set-up).
async fn read_one_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    address: &str,
) -> Result<Bytes, ClientError> {
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::with_capacity(4096);
    loop {
        if let Some(frame) = decoder
            .decode(&mut buffer)
            .map_err(|source| ClientError::Frame {
                address: address.to_owned(),
                source,
            })?
        {
            return Ok(frame);
        }
        if stream
            .read_buf(&mut buffer)
            .await
            .map_err(|_| disconnected(address))?
            == 0
        {
            return Err(disconnected(address));
        }
    }
}

fn disconnected(address: &str) -> ClientError {
    ClientError::Disconnected {
        address: address.to_owned(),
    }
}

fn protocol(address: &str, source: strom_protocol::MessageError) -> ClientError {
    ClientError::Protocol {
        address: address.to_owned(),
        source,
    }
}

/// Most requests written with one `write_all`.
const MAX_REQUESTS_PER_WRITE: usize = 64;

async fn write_loop(
    mut writer: tokio::io::WriteHalf<Box<dyn Stream>>,
    mut receiver: mpsc::UnboundedReceiver<Outgoing>,
    shared: std::sync::Weak<Shared>,
    client_id: String,
) {
    let mut correlation_id: i32 = 0;
    let mut wire = BytesMut::with_capacity(64 * 1024);
    while let Some(first) = receiver.recv().await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut next = Some(first);
        let mut count = 0;
        while let Some(outgoing) = next.take() {
            correlation_id = correlation_id.wrapping_add(1);
            encode_outgoing(&shared, outgoing, correlation_id, &client_id, &mut wire);
            count += 1;
            if count < MAX_REQUESTS_PER_WRITE {
                next = receiver.try_recv().ok();
            }
        }
        if wire.is_empty() {
            continue;
        }
        if writer.write_all(&wire).await.is_err() {
            shared.close();
            return;
        }
        wire.clear();
    }
}

/// Encodes one request and records it as pending (unless it expects no
/// response); encoding errors go back to the caller.
fn encode_outgoing(
    shared: &Shared,
    outgoing: Outgoing,
    correlation_id: i32,
    client_id: &str,
    wire: &mut BytesMut,
) {
    let Outgoing {
        request,
        api_version,
        reply,
    } = outgoing;
    let api_key = request.api_key() as i16;
    let header = request_header(&request, api_version, correlation_id, Some(client_id));
    if let Err(source) = encode_request_frame(&header, &request, wire) {
        if let Some(reply) = reply {
            let _ = reply.send(Err(protocol(&shared.address, source)));
        }
        return;
    }
    let Some(reply) = reply else { return };
    let mut pending = shared.lock();
    if pending.closed {
        drop(pending);
        let _ = reply.send(Err(shared.disconnected()));
        return;
    }
    pending.queue.push_back(Pending {
        correlation_id,
        api_key,
        api_version,
        reply,
    });
}

async fn read_loop(
    mut reader: tokio::io::ReadHalf<Box<dyn Stream>>,
    shared: std::sync::Weak<Shared>,
) {
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    loop {
        let read = reader.read_buf(&mut buffer).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        match read {
            Ok(0) | Err(_) => {
                shared.close();
                return;
            }
            Ok(_) => {}
        }
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(frame)) => {
                    if dispatch_response(&shared, frame).is_err() {
                        shared.close();
                        return;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    shared.close();
                    return;
                }
            }
        }
    }
}

/// Hands a response frame to the oldest pending request.
fn dispatch_response(shared: &Shared, frame: Bytes) -> Result<(), ClientError> {
    let Some(pending) = shared.lock().queue.pop_front() else {
        return Err(shared.disconnected());
    };
    let result = decode_response_lenient(frame, pending.api_key, pending.api_version)
        .map_err(|source| protocol(&shared.address, source));
    match result {
        Ok((header, body, _trailing_bytes)) if header.correlation_id == pending.correlation_id => {
            let _ = pending.reply.send(Ok(body));
            Ok(())
        }
        Ok((header, _, _)) => {
            let error = ClientError::CorrelationMismatch {
                address: shared.address.clone(),
                expected: pending.correlation_id,
                received: header.correlation_id,
            };
            let _ = pending.reply.send(Err(shared.disconnected()));
            Err(error)
        }
        Err(error) => {
            let _ = pending.reply.send(Err(error));
            Err(shared.disconnected())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_takes_the_highest_common_version() {
        let versions = BrokerApiVersions::from_ranges([(0, 3, 7), (3, 0, 99), (1, 0, 3)]);
        assert_eq!(versions.negotiate(ApiKey::Produce), Some(7));
        let metadata_max = SUPPORTED_APIS
            .iter()
            .find(|api| api.api_key == ApiKey::Metadata)
            .map(|api| api.max_version);
        assert_eq!(versions.negotiate(ApiKey::Metadata), metadata_max);
        // The broker's Fetch tops out below our minimum (4): no common version.
        assert_eq!(versions.negotiate(ApiKey::Fetch), None);
        // Broker-only versions are never chosen by a client.
        let brokers = BrokerApiVersions::from_ranges([(ApiKey::AddPartitionsToTxn as i16, 0, 5)]);
        assert_eq!(brokers.negotiate(ApiKey::AddPartitionsToTxn), Some(3));
        assert_eq!(versions.negotiate(ApiKey::ListOffsets), None);
    }

    #[test]
    fn a_panic_holding_the_request_queue_closes_the_connection_and_fails_its_requests() {
        let shared = Shared {
            address: "127.0.0.1:9092".to_owned(),
            pending: Mutex::new(PendingQueue::default()),
            closed: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        };
        let (reply, mut answer) = oneshot::channel();
        shared.lock().queue.push_back(Pending {
            correlation_id: 7,
            api_key: 3,
            api_version: 12,
            reply,
        });
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _pending = shared.lock();
            panic!("injected panic while changing the request queue");
        }));
        assert!(panicked.is_err());
        let pending = shared.lock();
        assert!(pending.closed && pending.queue.is_empty());
        drop(pending);
        assert!(shared.closed.load(Ordering::Acquire));
        assert!(matches!(
            answer.try_recv(),
            Ok(Err(ClientError::Disconnected { .. }))
        ));
    }
}
