//! The broker's HTTP listener (`strom.metrics.listener`): Prometheus
//! metrics, health probes and the read-only web console.
//!
//! Off by default: a broker opens no port it was not asked for. With
//! `strom.metrics.listener=http://127.0.0.1:9644` (or `https://...`, TLS
//! through an [`HttpTls`] the broker gives it) it serves
//! - `GET /metrics`: Prometheus' text exposition ([`crate::collect`]);
//! - `GET /health/live`: 200 while the process serves HTTP at all;
//! - `GET /health/ready`: 200 once the logs are loaded, the broker is
//!   registered and unfenced and the Kafka listeners accept, else 503;
//! - `GET /console` and `GET /api/...`: the web console ([`console`]).
//!
//! Everything else is 404 (405 for a method other than GET and HEAD).
//! Without `strom.http.authentication=basic` ([`auth`]) nothing asks who
//! the client is: the console then shows every topic's records to whoever
//! reaches the port, so such a listener belongs on a loopback address.
//! It is hyper's HTTP/1 server with tight limits, so that a bad client
//! never disturbs the Kafka listeners: headers are capped at
//! [`MAX_HEADER_BYTES`] (more is answered 431), a client has
//! [`HEADER_READ_TIMEOUT`] to send its headers and [`CONNECTION_LIFETIME`]
//! in all, and at most [`MAX_CONNECTIONS`] connections are served at once.

mod access;
pub mod auth;
pub mod browse;
pub mod console;
mod routes;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use strom_protocol::kafka::messages::ApiKey;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::collect::{BrokerCollector, NetworkSource};
use crate::error::{BindError, ListenerAddressError};
use crate::metrics::BrokerMetrics;
use crate::view::{BrokerView, Registration, ViewSlot};
use auth::{HttpAuthentication, HttpSecurity};

/// The property naming the listener.
pub const LISTENER_KEY: &str = "strom.metrics.listener";

/// Most bytes of request line and headers read before answering 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// How long a client has to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one HTTP connection may stay open.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// HTTP connections served at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 64;

/// Secures the HTTP listener's connections with TLS. The broker implements
/// it over its TLS settings, so this crate needs no TLS library.
pub trait HttpTls: Send + Sync {
    /// Runs the server side of the handshake on an accepted connection.
    fn accept(&self, stream: TcpStream) -> BoxFuture<std::io::Result<Box<dyn HttpIo>>>;
}

/// A boxed future that may move between threads.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A connection the listener speaks HTTP over (plain TCP or TLS).
pub trait HttpIo: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> HttpIo for T {}

/// Whether the value of `strom.metrics.listener` asks for TLS
/// (`https://`).
pub fn listener_uses_tls(text: &str) -> bool {
    text.trim().starts_with("https://")
}

/// The listener address from the value of `strom.metrics.listener`: `None`
/// when empty (the default; an unset key means the same), else
/// `http://HOST:PORT` or `https://HOST:PORT` (the scheme may be left out
/// for http; `localhost` means 127.0.0.1; port 0 picks a free port).
pub fn listener_address(text: &str) -> Result<Option<SocketAddr>, ListenerAddressError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let invalid = || ListenerAddressError {
        value: text.to_owned(),
    };
    let rest = match trimmed.split_once("://") {
        Some(("http" | "https", rest)) => rest,
        Some(_) => return Err(invalid()),
        None => trimmed,
    };
    let rest = rest.trim_end_matches('/');
    let rest = match rest.rsplit_once(':') {
        Some((host, port)) => format!("{}:{port}", strom_config::host::resolve_localhost(host)),
        None => rest.to_owned(),
    };
    rest.parse::<SocketAddr>().map(Some).map_err(|_| invalid())
}

/// What readiness needs to know beyond the metadata image.
#[derive(Debug, Default)]
pub struct Readiness {
    logs_loaded: AtomicBool,
    stopping: AtomicBool,
}

/// Why a broker is or is not ready, as `/health/ready` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadyState {
    /// The partition logs are open and recovered.
    pub logs_loaded: bool,
    /// The broker is registered with the controller.
    pub registered: bool,
    /// The controller has not fenced it.
    pub unfenced: bool,
    /// The Kafka listeners accept connections.
    pub listeners_accepting: bool,
    /// Shutdown has begun.
    pub stopping: bool,
}

impl ReadyState {
    /// Whether every condition holds.
    pub fn ready(&self) -> bool {
        self.logs_loaded
            && self.registered
            && self.unfenced
            && self.listeners_accepting
            && !self.stopping
    }
}

/// What the HTTP handlers share.
pub(crate) struct HttpState {
    registry: prometheus_client::registry::Registry,
    broker: Arc<ViewSlot>,
    readiness: Arc<Readiness>,
    history: Arc<console::History>,
    security: HttpSecurity,
    /// TLS for every connection (`https://`).
    tls: Option<Arc<dyn HttpTls>>,
    /// Turns and pacing of the message browser.
    browse: routes::BrowsePacing,
    authentication_failures: prometheus_client::metrics::counter::Counter,
}

impl HttpState {
    fn new(
        collector: BrokerCollector,
        broker: Arc<ViewSlot>,
        readiness: Arc<Readiness>,
        history: Arc<console::History>,
        (security, tls): (HttpSecurity, Option<Arc<dyn HttpTls>>),
    ) -> HttpState {
        let mut registry = crate::collect::registry(collector);
        let authentication_failures = prometheus_client::metrics::counter::Counter::default();
        registry.register(
            "strom_http_authentication_failures",
            "HTTP Basic logins to this listener refused for a wrong user or password",
            authentication_failures.clone(),
        );
        HttpState {
            registry,
            broker,
            readiness,
            history,
            security,
            tls,
            browse: routes::BrowsePacing::default(),
            authentication_failures,
        }
    }

    fn broker(&self) -> Option<Arc<dyn BrokerView>> {
        self.broker.get().and_then(Weak::upgrade)
    }

    fn ready_state(&self) -> ReadyState {
        let mut state = ReadyState {
            logs_loaded: self.readiness.logs_loaded.load(Ordering::Acquire),
            stopping: self.readiness.stopping.load(Ordering::Acquire),
            ..ReadyState::default()
        };
        if let Some(broker) = self.broker() {
            state.listeners_accepting = true;
            match broker.registration() {
                Registration::Unregistered => {}
                Registration::Fenced => state.registered = true,
                Registration::Unfenced => {
                    state.registered = true;
                    state.unfenced = true;
                }
            }
        }
        state
    }
}

/// The broker's metrics and, when configured, the HTTP listener serving
/// them. Created first in start-up so that liveness answers while the logs
/// load.
pub struct Observability {
    metrics: Arc<BrokerMetrics>,
    broker: Arc<ViewSlot>,
    readiness: Arc<Readiness>,
    listener: Option<HttpListener>,
}

struct HttpListener {
    address: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
    sampler: JoinHandle<()>,
}

impl HttpListener {
    async fn bind(address: SocketAddr, state: HttpState) -> Result<HttpListener, BindError> {
        let tcp = TcpListener::bind(address)
            .await
            .map_err(|source| BindError { address, source })?;
        let bound = tcp.local_addr().unwrap_or(address);
        let unauthenticated = state.security.authentication == HttpAuthentication::None;
        if unauthenticated && !bound.ip().is_loopback() {
            warn!(
                address = %bound,
                "the HTTP listener is not on a loopback address and does not authenticate: \
                 anyone who reaches it reads every topic through the console; \
                 set strom.http.authentication=basic"
            );
        }
        let history = Arc::clone(&state.history);
        let broker = Arc::clone(&state.broker);
        let (shutdown, receiver) = watch::channel(false);
        let task = tokio::spawn(accept_loop(tcp, Arc::new(state), receiver));
        let sampler = tokio::spawn(console::sample_history(history, broker));
        info!(address = %bound, "metrics and health listener started");
        Ok(HttpListener {
            address: bound,
            shutdown,
            task,
            sampler,
        })
    }
}

impl Drop for HttpListener {
    fn drop(&mut self) {
        self.task.abort();
        self.sampler.abort();
    }
}

impl Observability {
    /// Creates the metrics of the APIs in `apis` and binds the listener if
    /// `address` (from [`listener_address`]) names one, with `security`
    /// and, for `https://`, `tls`; metrics are only counted when it does.
    /// `network` reads the network counters.
    pub async fn start(
        address: Option<SocketAddr>,
        security: (HttpSecurity, Option<Arc<dyn HttpTls>>),
        apis: &[ApiKey],
        network: NetworkSource,
    ) -> Result<Observability, BindError> {
        let metrics = Arc::new(BrokerMetrics::new(apis, address.is_some()));
        let broker: Arc<ViewSlot> = Arc::new(OnceLock::new());
        let readiness = Arc::new(Readiness::default());
        let listener = match address {
            None => None,
            Some(address) => {
                let collector =
                    BrokerCollector::new(Arc::clone(&metrics), network, Arc::clone(&broker));
                let state = HttpState::new(
                    collector,
                    Arc::clone(&broker),
                    Arc::clone(&readiness),
                    Arc::new(console::History::default()),
                    security,
                );
                Some(HttpListener::bind(address, state).await?)
            }
        };
        Ok(Observability {
            metrics,
            broker,
            readiness,
            listener,
        })
    }

    /// The broker's metrics.
    pub fn metrics(&self) -> &Arc<BrokerMetrics> {
        &self.metrics
    }

    /// Whether metrics are counted (a listener is configured).
    pub fn recording(&self) -> bool {
        self.metrics.recording()
    }

    /// The bound HTTP address, if a listener is configured.
    pub fn address(&self) -> Option<SocketAddr> {
        self.listener.as_ref().map(|listener| listener.address)
    }

    /// Records that the partition logs are loaded.
    pub fn logs_loaded(&self) {
        self.readiness.logs_loaded.store(true, Ordering::Release);
    }

    /// Hands the running broker to the metrics and health endpoints (called
    /// once the Kafka listeners accept). They hold it weakly: they never keep
    /// a stopping broker alive.
    pub fn serving<B: BrokerView + 'static>(&self, broker: &Arc<B>) {
        let view: Weak<B> = Arc::downgrade(broker);
        let _ = self.broker.set(view as Weak<dyn BrokerView>);
    }

    /// Marks the broker not ready and stops the listener.
    pub async fn shutdown(self) {
        self.readiness.stopping.store(true, Ordering::Release);
        if let Some(listener) = &self.listener {
            let _ = listener.shutdown.send(true);
        }
        if let Some(mut listener) = self.listener {
            listener.sampler.abort();
            let _ = (&mut listener.sampler).await;
            let _ = (&mut listener.task).await;
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<HttpState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => permit,
            _ = shutdown.changed() => break,
        };
        let Ok(permit) = permit else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                debug!(%error, "HTTP accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        connections.spawn(async move {
            serve(stream, peer, state).await;
            drop(permit);
        });
    }
    // Dropping the set aborts the connections still open.
}

async fn serve(stream: TcpStream, peer: SocketAddr, state: Arc<HttpState>) {
    match state.tls.clone() {
        None => serve_http(stream, peer, state).await,
        Some(tls) => {
            // The handshake shares the header deadline: a client that
            // stalls in it holds a connection slot no longer.
            match tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(secured)) => serve_http(secured, peer, state).await,
                Ok(Err(error)) => debug!(%peer, %error, "HTTP TLS handshake failed"),
                Err(_) => debug!(%peer, "HTTP TLS handshake timed out"),
            }
        }
    }
}

async fn serve_http<S: HttpIo + 'static>(stream: S, peer: SocketAddr, state: Arc<HttpState>) {
    let service = service_fn(move |request| {
        let state = Arc::clone(&state);
        async move { Ok::<_, std::convert::Infallible>(routes::respond(&state, request, peer).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => debug!(%peer, %error, "HTTP connection closed"),
        Err(_) => debug!(%peer, "HTTP connection closed: lifetime over"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(value: &str) -> Result<Option<SocketAddr>, ListenerAddressError> {
        listener_address(value)
    }

    #[test]
    fn the_listener_is_off_unless_named() {
        assert_eq!(address("").expect("ok"), None);
        assert_eq!(address("  ").expect("ok"), None);
        assert_eq!(
            address("http://127.0.0.1:9644").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 9644)))
        );
        assert_eq!(
            address("localhost:0/").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert_eq!(
            address("https://127.0.0.1:1").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 1)))
        );
        assert!(listener_uses_tls(" https://127.0.0.1:1"));
        assert!(!listener_uses_tls("http://127.0.0.1:1"));
        assert_eq!(
            address("ftp://127.0.0.1:1"),
            Err(ListenerAddressError {
                value: "ftp://127.0.0.1:1".to_owned()
            })
        );
        assert!(address("http://metrics:1").is_err());
    }

    #[test]
    fn readiness_reads_the_registration_from_the_view() {
        let state = |broker: Option<Arc<crate::fake_broker::FakeBroker>>| {
            let slot: Arc<ViewSlot> = Arc::new(OnceLock::new());
            if let Some(broker) = &broker {
                let view: Weak<crate::fake_broker::FakeBroker> = Arc::downgrade(broker);
                let _ = slot.set(view as Weak<dyn BrokerView>);
            }
            let http = HttpState {
                registry: prometheus_client::registry::Registry::default(),
                broker: slot,
                readiness: Arc::new(Readiness::default()),
                history: Arc::new(console::History::default()),
                security: HttpSecurity::default(),
                tls: None,
                browse: routes::BrowsePacing::default(),
                authentication_failures: Default::default(),
            };
            http.readiness.logs_loaded.store(true, Ordering::Release);
            (http.ready_state(), broker)
        };
        let (starting, _) = state(None);
        assert!(starting.logs_loaded && !starting.listeners_accepting && !starting.registered);
        let (fenced, _broker) = state(Some(Arc::new(crate::fake_broker::FakeBroker {
            fenced: true,
            ..Default::default()
        })));
        assert!(fenced.listeners_accepting && fenced.registered && !fenced.unfenced);
        let (serving, _broker) = state(Some(Arc::default()));
        assert!(serving.ready());
    }

    #[test]
    fn ready_needs_every_condition() {
        let all = ReadyState {
            logs_loaded: true,
            registered: true,
            unfenced: true,
            listeners_accepting: true,
            stopping: false,
        };
        assert!(all.ready());
        assert!(!ReadyState {
            unfenced: false,
            ..all
        }
        .ready());
        assert!(!ReadyState {
            logs_loaded: false,
            ..all
        }
        .ready());
        assert!(!ReadyState {
            stopping: true,
            ..all
        }
        .ready());
    }
}
