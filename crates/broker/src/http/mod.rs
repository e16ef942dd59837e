//! The broker's HTTP listener (`strom.metrics.listener`): Prometheus
//! metrics, health probes and the read-only web console.
//!
//! Off by default: a broker opens no port it was not asked for. With
//! `strom.metrics.listener=http://127.0.0.1:9644` it serves
//! - `GET /metrics`: Prometheus' text exposition ([`crate::metrics`]);
//! - `GET /health/live`: 200 while the process serves HTTP at all;
//! - `GET /health/ready`: 200 once the logs are loaded, the broker is
//!   registered and unfenced and the Kafka listeners accept, else 503;
//! - `GET /console` and `GET /api/...`: the web console ([`console`]).
//!
//! Everything else is 404 (405 for a method other than GET and HEAD).
//! It is hyper's HTTP/1 server with tight limits, so that a bad client
//! never disturbs the Kafka listeners: headers are capped at
//! [`MAX_HEADER_BYTES`] (more is answered 431), a client has
//! [`HEADER_READ_TIMEOUT`] to send its headers and [`CONNECTION_LIFETIME`]
//! in all, and at most [`MAX_CONNECTIONS`] connections are served at once.

pub mod console;
mod routes;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info};

use crate::config::BrokerConfig;
use crate::error::{ConfigError, ValueProblem};
use crate::handlers::{BrokerContext, HANDLED_APIS};
use crate::metrics::collect::{BrokerCollector, BrokerSlot};
use crate::metrics::BrokerMetrics;

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

/// The listener address from `strom.metrics.listener`: `None` when unset
/// or empty (the default), else `http://HOST:PORT` (the scheme may be left
/// out; `localhost` means 127.0.0.1; port 0 picks a free port).
pub fn listener_address(config: &BrokerConfig) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(text) = config.properties().get(LISTENER_KEY) else {
        return Ok(None);
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let invalid = || ConfigError::Invalid {
        key: LISTENER_KEY.to_owned(),
        value: text.clone(),
        problem: ValueProblem::HttpListener,
    };
    let rest = match trimmed.split_once("://") {
        Some(("http", rest)) => rest,
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
    broker: Arc<BrokerSlot>,
    readiness: Arc<Readiness>,
    history: Arc<console::History>,
}

impl HttpState {
    fn broker(&self) -> Option<Arc<BrokerContext>> {
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
            let image = broker.controller.image();
            if let Some(registered) = image.broker(broker.config.node_id) {
                state.registered = true;
                state.unfenced = !registered.fenced;
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
    broker: Arc<BrokerSlot>,
    readiness: Arc<Readiness>,
    listener: Option<HttpListener>,
}

struct HttpListener {
    address: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
    sampler: JoinHandle<()>,
}

impl Drop for HttpListener {
    fn drop(&mut self) {
        self.task.abort();
        self.sampler.abort();
    }
}

impl Observability {
    /// Creates the metrics and binds the listener if `strom.metrics.listener`
    /// names one; metrics are only counted when it does.
    pub async fn start(config: &BrokerConfig) -> Result<Observability, crate::StartError> {
        let address = listener_address(config)?;
        let metrics = Arc::new(BrokerMetrics::new(HANDLED_APIS, address.is_some()));
        let broker: Arc<BrokerSlot> = Arc::new(OnceLock::new());
        let readiness = Arc::new(Readiness::default());
        let listener = match address {
            None => None,
            Some(address) => {
                let tcp = TcpListener::bind(address)
                    .await
                    .map_err(|source| crate::StartError::Bind { address, source })?;
                let bound = tcp.local_addr().unwrap_or(address);
                let history = Arc::new(console::History::default());
                let state = Arc::new(HttpState {
                    registry: crate::metrics::collect::registry(BrokerCollector::new(
                        Arc::clone(&metrics),
                        Arc::clone(&broker),
                    )),
                    broker: Arc::clone(&broker),
                    readiness: Arc::clone(&readiness),
                    history: Arc::clone(&history),
                });
                let (shutdown, receiver) = watch::channel(false);
                let task = tokio::spawn(accept_loop(tcp, state, receiver));
                let sampler = tokio::spawn(console::sample_history(history, Arc::clone(&broker)));
                info!(address = %bound, "metrics and health listener started");
                Some(HttpListener {
                    address: bound,
                    shutdown,
                    task,
                    sampler,
                })
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
    /// once the Kafka listeners accept).
    pub fn serving(&self, broker: &Arc<BrokerContext>) {
        let _ = self.broker.set(Arc::downgrade(broker));
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

async fn serve(stream: tokio::net::TcpStream, peer: SocketAddr, state: Arc<HttpState>) {
    let service = service_fn(move |request| {
        let state = Arc::clone(&state);
        async move { Ok::<_, std::convert::Infallible>(routes::route(&state, &request)) }
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
    use std::collections::BTreeMap;

    fn address(value: &str) -> Result<Option<SocketAddr>, ConfigError> {
        let map = BTreeMap::from([(LISTENER_KEY.to_owned(), value.to_owned())]);
        let (config, warnings) = BrokerConfig::from_map(&map).expect("valid");
        assert!(warnings.is_empty(), "{LISTENER_KEY} is a known key");
        listener_address(&config)
    }

    #[test]
    fn the_listener_is_off_unless_named() {
        assert_eq!(
            listener_address(&BrokerConfig::defaults()).expect("ok"),
            None
        );
        assert_eq!(address("").expect("ok"), None);
        assert_eq!(
            address("http://127.0.0.1:9644").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 9644)))
        );
        assert_eq!(
            address("localhost:0/").expect("ok"),
            Some(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert!(matches!(
            address("https://127.0.0.1:1"),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            address("http://metrics:1"),
            Err(ConfigError::Invalid { .. })
        ));
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
