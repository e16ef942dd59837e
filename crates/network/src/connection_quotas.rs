//! Connection limits of the accept loop, changeable while the server runs
//! (Kafka's `ConnectionQuotas`, KIP-226 and KIP-612):
//!
//! * `max.connections` (the broker; the inter-broker listener is exempt, as
//!   in Kafka) and `listener.name.<l>.max.connections` (one listener): a
//!   connection over either is closed at once;
//! * `max.connections.per.ip`, with `max.connections.per.ip.overrides`
//!   per address: a connection over its address's limit is closed at once;
//! * `max.connection.creation.rate` (the broker) and
//!   `listener.name.<l>.max.connection.creation.rate`: connections accepted
//!   per second. A listener over either rate waits before it accepts its
//!   next connection, as Kafka's acceptor does, instead of refusing.
//!
//! The counts and rates are kept here, without I/O: the accept loop asks
//! [`ConnectionQuotas::admit`] for a [`ConnectionPermit`] (given back when
//! the connection closes) and [`ConnectionQuotas::record_creation`] for the
//! delay before its next accept; time is passed in, so tests drive it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Limits of one listener (`None`: no limit of its own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerConnectionLimits {
    /// `listener.name.<l>.max.connections`.
    pub max_connections: Option<usize>,
    /// `listener.name.<l>.max.connection.creation.rate`, per second.
    pub max_connection_creation_rate: Option<u32>,
}

/// The connection limits in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimitSettings {
    /// `max.connections`: connections open on the broker.
    pub max_connections: usize,
    /// `max.connections.per.ip`: connections open from one address.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`, by address (host names are
    /// resolved by whoever builds the settings).
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// `max.connection.creation.rate`: connections accepted per second on
    /// the broker.
    pub max_connection_creation_rate: u32,
    /// Per-listener limits, by listener name in lower case.
    pub listeners: HashMap<String, ListenerConnectionLimits>,
    /// The inter-broker listener (lower case): as in Kafka, its connections
    /// are not held to the broker-wide `max.connections`, so replication
    /// goes on when clients fill the broker (its own limits still apply).
    pub protected_listener: Option<String>,
}

impl Default for ConnectionLimitSettings {
    /// No limits (Kafka's defaults are `Integer.MAX_VALUE`).
    fn default() -> Self {
        ConnectionLimitSettings {
            max_connections: i32::MAX as usize,
            max_connections_per_ip: i32::MAX as usize,
            per_ip_overrides: HashMap::new(),
            max_connection_creation_rate: i32::MAX as u32,
            listeners: HashMap::new(),
            protected_listener: None,
        }
    }
}

impl ConnectionLimitSettings {
    fn listener(&self, name: &str) -> Option<&ListenerConnectionLimits> {
        self.listeners.get(&name.to_ascii_lowercase())
    }

    /// The limit of connections from `ip`.
    pub fn limit_for(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.max_connections_per_ip)
    }
}

/// Why a connection was closed at accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefusal {
    /// `max.connections` reached.
    #[error("max.connections ({limit}) reached")]
    Broker {
        /// The limit.
        limit: usize,
    },
    /// `listener.name.<l>.max.connections` reached.
    #[error("max.connections of listener {listener} ({limit}) reached")]
    Listener {
        /// The listener.
        listener: String,
        /// The limit.
        limit: usize,
    },
    /// The address's limit reached.
    #[error("max.connections.per.ip for {ip} ({limit}) reached")]
    PerIp {
        /// The address.
        ip: IpAddr,
        /// The limit.
        limit: usize,
    },
}

/// Counters of the limits' effects, process-wide.
#[derive(Debug, Default)]
pub struct ConnectionLimitCounts {
    refused: AtomicU64,
    throttled: AtomicU64,
}

/// Connections closed at accept or delayed by a limit, in this process.
pub static CONNECTION_LIMITS: ConnectionLimitCounts = ConnectionLimitCounts {
    refused: AtomicU64::new(0),
    throttled: AtomicU64::new(0),
};

impl ConnectionLimitCounts {
    /// Connections closed at accept because of a limit.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Accepts delayed by a connection creation rate.
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }
}

/// A token bucket of `rate` connections per second, holding at most one
/// second's worth.
#[derive(Debug, Clone)]
struct RateBucket {
    tokens: f64,
    updated: Instant,
}

impl RateBucket {
    fn new(now: Instant) -> RateBucket {
        RateBucket {
            tokens: f64::MAX,
            updated: now,
        }
    }

    /// Takes one token and returns how long to wait until the bucket is
    /// no longer in debt.
    fn take(&mut self, rate: u32, now: Instant) -> Duration {
        let rate = f64::from(rate.max(1));
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = now;
        self.tokens = (self.tokens + elapsed * rate).min(rate) - 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

#[derive(Debug)]
struct State {
    settings: ConnectionLimitSettings,
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    per_listener: HashMap<String, usize>,
    broker_rate: Option<RateBucket>,
    listener_rates: HashMap<String, RateBucket>,
}

/// The connection counts of a server and the limits they are held to.
#[derive(Debug)]
pub struct ConnectionQuotas {
    state: Mutex<State>,
}

impl ConnectionQuotas {
    /// Quotas starting with `settings` and no connection.
    pub fn new(settings: ConnectionLimitSettings) -> Arc<ConnectionQuotas> {
        Arc::new(ConnectionQuotas {
            state: Mutex::new(State {
                settings,
                total: 0,
                per_ip: HashMap::new(),
                per_listener: HashMap::new(),
                broker_rate: None,
                listener_rates: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change under the lock is a single assignment or counter
        // step: a panic cannot leave the state half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the limits; connections already open stay open (a lowered
    /// limit applies to the next connections).
    pub fn update(&self, settings: ConnectionLimitSettings) {
        self.lock().settings = settings;
    }

    /// The limits in force.
    pub fn settings(&self) -> ConnectionLimitSettings {
        self.lock().settings.clone()
    }

    /// Connections open now (all listeners).
    pub fn open_connections(&self) -> usize {
        self.lock().total
    }

    /// Admits a connection accepted on `listener` from `ip`, or says
    /// which limit refuses it (and counts the refusal).
    pub fn admit(
        self: &Arc<Self>,
        listener: &str,
        ip: IpAddr,
    ) -> Result<ConnectionPermit, ConnectionRefusal> {
        let listener = listener.to_ascii_lowercase();
        let mut state = self.lock();
        let refusal = check(&state, &listener, ip);
        if let Some(refusal) = refusal {
            drop(state);
            CONNECTION_LIMITS.refused.fetch_add(1, Ordering::Relaxed);
            return Err(refusal);
        }
        state.total += 1;
        *state.per_ip.entry(ip).or_insert(0) += 1;
        *state.per_listener.entry(listener.clone()).or_insert(0) += 1;
        Ok(ConnectionPermit {
            quotas: Arc::clone(self),
            listener,
            ip,
        })
    }

    /// Records a connection created on `listener` at `now` and returns how
    /// long the listener waits before accepting the next one (zero while
    /// both the broker's and the listener's creation rates hold).
    pub fn record_creation(&self, listener: &str, now: Instant) -> Duration {
        let listener = listener.to_ascii_lowercase();
        let mut state = self.lock();
        let broker_rate = state.settings.max_connection_creation_rate;
        let listener_rate = state
            .settings
            .listener(&listener)
            .and_then(|limits| limits.max_connection_creation_rate);
        let broker_delay = if broker_rate < i32::MAX as u32 {
            state
                .broker_rate
                .get_or_insert_with(|| RateBucket::new(now))
                .take(broker_rate, now)
        } else {
            Duration::ZERO
        };
        let listener_delay = match listener_rate {
            Some(rate) if rate < i32::MAX as u32 => state
                .listener_rates
                .entry(listener)
                .or_insert_with(|| RateBucket::new(now))
                .take(rate, now),
            _ => Duration::ZERO,
        };
        let delay = broker_delay.max(listener_delay);
        if !delay.is_zero() {
            CONNECTION_LIMITS.throttled.fetch_add(1, Ordering::Relaxed);
        }
        delay
    }

    fn release(&self, listener: &str, ip: IpAddr) {
        let mut state = self.lock();
        state.total = state.total.saturating_sub(1);
        if let Some(count) = state.per_ip.get_mut(&ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.per_ip.remove(&ip);
            }
        }
        if let Some(count) = state.per_listener.get_mut(listener) {
            *count = count.saturating_sub(1);
        }
    }
}

fn check(state: &State, listener: &str, ip: IpAddr) -> Option<ConnectionRefusal> {
    let settings = &state.settings;
    let protected = settings.protected_listener.as_deref() == Some(listener);
    if !protected && state.total >= settings.max_connections {
        return Some(ConnectionRefusal::Broker {
            limit: settings.max_connections,
        });
    }
    if let Some(limit) = settings
        .listener(listener)
        .and_then(|limits| limits.max_connections)
    {
        if state.per_listener.get(listener).copied().unwrap_or(0) >= limit {
            return Some(ConnectionRefusal::Listener {
                listener: listener.to_owned(),
                limit,
            });
        }
    }
    let limit = settings.limit_for(ip);
    if state.per_ip.get(&ip).copied().unwrap_or(0) >= limit {
        return Some(ConnectionRefusal::PerIp { ip, limit });
    }
    None
}

/// One admitted connection; dropping it gives its place back.
#[derive(Debug)]
pub struct ConnectionPermit {
    quotas: Arc<ConnectionQuotas>,
    listener: String,
    ip: IpAddr,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.quotas.release(&self.listener, self.ip);
    }
}

#[cfg(test)]
#[path = "connection_quotas_tests.rs"]
mod tests;
