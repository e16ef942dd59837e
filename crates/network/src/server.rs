//! Listeners and the accept loop.
//!
//! Binding and listening are two steps. [`Server::bind`] binds each
//! address (so a port of 0 gets its number, which the broker registers
//! with the controller) but does not listen: a client connecting then is
//! refused by the kernel, as by a broker that is not running. Only once
//! the broker can answer does it call [`Server::listen`] and
//! [`ListeningServer::start`]. A socket listening earlier would let the
//! kernel complete connections into its accept backlog while the broker
//! is still loading its logs, and those clients would wait for answers
//! that do not come (Kafka, too, starts its acceptors after log
//! recovery).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use strom_security::principal::certificate_subject;
use strom_security::{ListenerRuntime, Principal, Session};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::connection::{serve_plain, serve_tls, ConnectionLimits, ConnectionParts};
use crate::connection_quotas::{ConnectionLimitSettings, ConnectionQuotas};
use crate::error::BindError;
use crate::metrics::NETWORK;
use crate::request::RequestHandler;

/// The read buffer under a TLS connection.
const TLS_READ_BUFFER_BYTES: usize = 256 * 1024;

/// How long a TLS handshake may take before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The accept backlog of a listening socket (the kernel caps it at
/// `net.core.somaxconn`).
const ACCEPT_BACKLOG: u32 = 1024;

/// Network settings, from the broker configuration.
#[derive(Debug, Clone, Copy)]
pub struct NetworkConfig {
    /// `socket.request.max.bytes`.
    pub max_request_bytes: usize,
    /// `connections.max.idle.ms`.
    pub idle_timeout: Duration,
    /// `max.connections`.
    pub max_connections: usize,
}

/// Bound listeners, not yet listening: connections to them are refused
/// until [`Server::listen`].
pub struct Server {
    sockets: Vec<BoundSocket>,
    config: NetworkConfig,
    quotas: Arc<ConnectionQuotas>,
}

/// One bound, not yet listening, socket.
struct BoundSocket {
    socket: TcpSocket,
    /// The address bound (port 0 resolved; a failed `listen` names it).
    local: SocketAddr,
    runtime: Arc<ListenerRuntime>,
}

/// A running server: its addresses and the means to stop it.
pub struct ServerHandle {
    addresses: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds every address (port 0 picks a free port), each served with
    /// the security of its listener (`runtimes` in the same order; an
    /// address without one is PLAINTEXT). Nothing listens yet: connecting
    /// is refused until [`Server::listen`]. The sockets are bound with
    /// `SO_REUSEADDR`, as a listener would be, so a broker restarted at
    /// once binds its port despite connections of its previous run left
    /// in `TIME_WAIT`.
    pub async fn bind(
        addresses: &[SocketAddr],
        runtimes: Vec<Arc<ListenerRuntime>>,
        config: NetworkConfig,
    ) -> Result<Server, BindError> {
        let mut sockets = Vec::with_capacity(addresses.len());
        let mut runtimes = runtimes.into_iter();
        for address in addresses {
            let runtime = runtimes
                .next()
                .unwrap_or_else(|| Arc::new(ListenerRuntime::plaintext("PLAINTEXT")));
            let (socket, local) = bind_socket(*address).map_err(|source| BindError {
                address: *address,
                source,
            })?;
            sockets.push(BoundSocket {
                socket,
                local,
                runtime,
            });
        }
        let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
            max_connections: config.max_connections,
            ..ConnectionLimitSettings::default()
        });
        Ok(Server {
            sockets,
            config,
            quotas,
        })
    }

    /// Serves with these connection limits (shared with whoever changes
    /// them while the server runs) in place of the `max.connections` of
    /// the [`NetworkConfig`].
    pub fn with_connection_quotas(mut self, quotas: Arc<ConnectionQuotas>) -> Server {
        self.quotas = quotas;
        self
    }

    /// The bound addresses.
    pub fn local_addresses(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|bound| bound.local).collect()
    }

    /// The listeners' runtimes, in address order (whose TLS certificates a
    /// dynamic keystore config replaces).
    pub fn listener_runtimes(&self) -> Vec<Arc<ListenerRuntime>> {
        self.sockets
            .iter()
            .map(|bound| Arc::clone(&bound.runtime))
            .collect()
    }

    /// Listens on every bound socket: from here the kernel completes
    /// connections into the accept backlog, so the caller starts the
    /// returned server as soon as it can. Fails when a socket cannot
    /// listen (another socket took the port and listens on it meanwhile).
    pub fn listen(self) -> Result<ListeningServer, BindError> {
        let addresses = self.local_addresses();
        let mut listeners = Vec::with_capacity(self.sockets.len());
        for bound in self.sockets {
            let listener = bound
                .socket
                .listen(ACCEPT_BACKLOG)
                .map_err(|source| BindError {
                    address: bound.local,
                    source,
                })?;
            listeners.push((listener, bound.runtime));
        }
        Ok(ListeningServer {
            addresses,
            listeners,
            config: self.config,
            quotas: self.quotas,
        })
    }
}

/// Listening sockets, not yet accepting.
pub struct ListeningServer {
    addresses: Vec<SocketAddr>,
    listeners: Vec<(TcpListener, Arc<ListenerRuntime>)>,
    config: NetworkConfig,
    quotas: Arc<ConnectionQuotas>,
}

impl ListeningServer {
    /// The listening addresses.
    pub fn local_addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// Starts accepting connections and serving them with `handler`.
    pub fn start(self, handler: Arc<dyn RequestHandler>) -> ServerHandle {
        let (shutdown, shutdown_receiver) = watch::channel(false);
        let config = self.config;
        let listeners = self.listeners;
        let quotas = self.quotas;
        let task = tokio::spawn(async move {
            let mut accept_loops = JoinSet::new();
            for (listener, runtime) in listeners {
                accept_loops.spawn(accept_loop(
                    listener,
                    runtime,
                    Arc::clone(&handler),
                    config,
                    Arc::clone(&quotas),
                    shutdown_receiver.clone(),
                ));
            }
            while accept_loops.join_next().await.is_some() {}
        });
        ServerHandle {
            addresses: self.addresses,
            shutdown,
            task,
        }
    }
}

/// A socket bound to `address` with `SO_REUSEADDR`, not listening, and
/// the address it got.
fn bind_socket(address: SocketAddr) -> std::io::Result<(TcpSocket, SocketAddr)> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    let local = socket.local_addr()?;
    Ok((socket, local))
}

impl ServerHandle {
    /// The addresses the server listens on.
    pub fn local_addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// Stops accepting, lets every connection answer the requests it has
    /// already read, and returns when all connections are closed.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    runtime: Arc<ListenerRuntime>,
    handler: Arc<dyn RequestHandler>,
    config: NetworkConfig,
    quotas: Arc<ConnectionQuotas>,
    mut shutdown: watch::Receiver<bool>,
) {
    let limits = ConnectionLimits {
        max_frame_bytes: config.max_request_bytes,
        idle_timeout: config.idle_timeout,
    };
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: back off briefly.
                warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let permit = match quotas.admit(&runtime.name, peer.ip()) {
            Ok(permit) => permit,
            Err(refusal) => {
                info!(%peer, listener = %runtime.name, %refusal, "connection refused");
                drop(stream);
                continue;
            }
        };
        let handler = Arc::clone(&handler);
        let connection_shutdown = shutdown.clone();
        let connection_runtime = Arc::clone(&runtime);
        NETWORK.connection_opened();
        connections.spawn(async move {
            serve_accepted(
                stream,
                peer,
                connection_runtime,
                handler,
                limits,
                connection_shutdown,
            )
            .await;
            NETWORK.connection_closed();
            drop(permit);
        });
        // KIP-612: over a creation rate, the listener waits before its
        // next accept (connections queue in the kernel's backlog).
        let delay = quotas.record_creation(&runtime.name, std::time::Instant::now());
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => break,
            }
        }
    }
    drop(listener);
    info!("listener closed; waiting for open connections to finish");
    while connections.join_next().await.is_some() {}
}

/// Runs the TLS handshake where the listener has one, finds the principal,
/// and serves the connection.
async fn serve_accepted(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    runtime: Arc<ListenerRuntime>,
    handler: Arc<dyn RequestHandler>,
    limits: ConnectionLimits,
    shutdown: watch::Receiver<bool>,
) {
    let Some(acceptor) = runtime.acceptor.clone() else {
        let session = Arc::new(Session::new(runtime, Principal::anonymous()));
        let parts = ConnectionParts {
            peer,
            session,
            handler,
            limits,
        };
        serve_plain(stream, parts, shutdown).await;
        return;
    };
    let _ = stream.set_nodelay(true);
    // rustls reads at most 4 KiB of ciphertext per call: a buffer under it
    // turns those calls into copies instead of one system call each.
    let stream = tokio::io::BufReader::with_capacity(TLS_READ_BUFFER_BYTES, stream);
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            warn!(%peer, listener = %runtime.name, %error, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            warn!(%peer, listener = %runtime.name, "closing connection: TLS handshake timed out");
            return;
        }
    };
    let principal = match stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
    {
        None => Principal::anonymous(),
        Some(certificate) => {
            let subject = certificate_subject(certificate).unwrap_or_default();
            match runtime.principal_mapping.apply(&subject) {
                Some(name) => Principal::user(name),
                None => {
                    warn!(%peer, subject, "closing connection: no ssl.principal.mapping.rules rule applies");
                    return;
                }
            }
        }
    };
    let session = Arc::new(Session::new(runtime, principal));
    let parts = ConnectionParts {
        peer,
        session,
        handler,
        limits,
    };
    serve_tls(stream, parts, shutdown).await;
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
