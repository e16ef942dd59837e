//! What passes between the network server and the request handlers: a
//! request's [`RequestContext`], the handler's [`Reply`] (an [`Answer`]
//! now, later, or none) and the [`RequestHandler`] the server calls.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use strom_protocol::messages::{Request, Response};
use strom_security::Session;

use crate::region::Region;

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
    /// Stops the connection reading for a while (a throttled client).
    pub mute: ConnectionMute,
    /// The size of the request's frame in bytes, without the size prefix
    /// (what Kafka's produce quota counts).
    pub request_bytes: usize,
}

/// Asks a connection to stop reading requests for a while: Kafka's muting
/// of a throttled client's channel (KIP-219). The response that carries
/// the throttle time is sent at once; the connection reads no further
/// request until the time has passed. Cloned handles share the deadline,
/// so a deferred answer can mute its connection when it is ready.
#[derive(Debug, Clone, Default)]
pub struct ConnectionMute {
    until: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl ConnectionMute {
    /// Stops reading for `duration` from now (or longer, if an earlier mute
    /// ends later). A zero duration does nothing.
    pub fn mute_for(&self, duration: std::time::Duration) {
        if duration.is_zero() {
            return;
        }
        let until = tokio::time::Instant::now() + duration;
        // A poisoned lock only means another thread panicked between two
        // plain assignments: the deadline is whole, reuse it.
        let mut current = self
            .until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = Some(current.map_or(until, |earlier| earlier.max(until)));
    }

    /// When reading may go on, if the connection is muted now.
    pub fn muted_until(&self) -> Option<tokio::time::Instant> {
        let mut current = self
            .until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match *current {
            Some(until) if until > tokio::time::Instant::now() => Some(until),
            _ => {
                *current = None;
                None
            }
        }
    }
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
    pub regions: Vec<(Bytes, Region)>,
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
