//! The cluster: bootstrap, a connection pool by broker id with reconnect
//! backoff, the metadata cache and request routing.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// The guard of a poisoned lock of the cluster's caches (metadata, the
/// staleness flag, wanted topics, the connection pool): each is changed by
/// one assignment or insert, so a panic cannot leave one half-changed, and
/// metadata is replaced whole by the next refresh anyway. They are reused.
fn reuse_cache<G>(poisoned: PoisonError<G>) -> G {
    poisoned.into_inner()
}
use std::time::{Duration, Instant};

use strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic;
use strom_protocol::kafka::messages::{ApiKey, FindCoordinatorRequest, MetadataRequest, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request, Response};

use crate::config::ClientConfig;
use crate::connection::{Connection, ConnectionOptions};
use crate::error::ClientError;
use crate::metadata::{ClusterMetadata, TopicInfo};

/// The pool key suffix of the connections most requests share.
const SHARED_LANE: &str = "";
/// The pool key suffix of group coordinator connections.
const COORDINATOR_LANE: &str = " (coordinator)";

/// The reconnect backoff after `failures` consecutive failures, Java's way:
/// `initial * 2^(failures-1)` capped at `max`, with ±20% jitter
/// (`jitter` in `[0, 1)`).
pub fn reconnect_backoff(initial: Duration, max: Duration, failures: u32, jitter: f64) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let exponent = i32::try_from(failures - 1).unwrap_or(i32::MAX).min(32);
    let base = (initial.as_secs_f64() * 2f64.powi(exponent)).min(max.as_secs_f64());
    Duration::from_secs_f64(base * (0.8 + 0.4 * jitter.clamp(0.0, 1.0)))
}

/// Per-broker connection state.
#[derive(Default)]
struct BrokerSlot {
    connection: Option<Connection>,
    failures: u32,
    next_attempt_at: Option<Instant>,
}

struct Inner {
    config: ClientConfig,
    options: ConnectionOptions,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<BrokerSlot>>>>,
    metadata: Mutex<Arc<ClusterMetadata>>,
    wanted_topics: Mutex<BTreeSet<String>>,
    stale: Mutex<bool>,
    refresh: tokio::sync::Mutex<()>,
}

/// A handle on a Kafka cluster shared by a client's parts. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Cluster")
            .field("bootstrap_servers", &self.inner.config.bootstrap_servers)
            .finish()
    }
}

impl Cluster {
    /// Connects to a bootstrap server and fetches the broker list.
    pub async fn connect(config: ClientConfig) -> Result<Cluster, ClientError> {
        config.validate()?;
        let options = ConnectionOptions {
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            setup_timeout: config.connection_setup_timeout,
            security: config.security.clone(),
        };
        let cluster = Cluster {
            inner: Arc::new(Inner {
                config,
                options,
                slots: Mutex::new(HashMap::new()),
                metadata: Mutex::new(Arc::new(ClusterMetadata::empty(Instant::now()))),
                wanted_topics: Mutex::new(BTreeSet::new()),
                stale: Mutex::new(true),
                refresh: tokio::sync::Mutex::new(()),
            }),
        };
        cluster.refresh_metadata().await?;
        Ok(cluster)
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The current metadata snapshot (possibly stale).
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        Arc::clone(&self.inner.metadata.lock().unwrap_or_else(reuse_cache))
    }

    /// Marks the metadata stale: the next lookup refreshes it. Call after a
    /// retriable error such as NOT_LEADER_OR_FOLLOWER.
    pub fn request_metadata_refresh(&self) {
        *self.inner.stale.lock().unwrap_or_else(reuse_cache) = true;
    }

    /// Whether a refresh was requested and has not happened yet.
    pub fn is_metadata_stale(&self) -> bool {
        *self.inner.stale.lock().unwrap_or_else(reuse_cache)
    }

    /// Refreshes the metadata if a refresh was requested, or if it is older
    /// than `metadata.max.age.ms`; returns the current snapshot.
    pub async fn refresh_metadata_if_needed(&self) -> Result<Arc<ClusterMetadata>, ClientError> {
        let snapshot = self.metadata();
        if self.is_metadata_stale()
            || snapshot.fetched_at.elapsed() >= self.inner.config.metadata_max_age
        {
            self.request_metadata_refresh();
            return self.refresh_metadata().await;
        }
        Ok(snapshot)
    }

    /// Metadata for `topic`, refreshed when stale or older than
    /// `metadata.max.age.ms`. The topic is remembered and included in every
    /// later refresh.
    pub async fn topic(&self, topic: &str) -> Result<TopicInfo, ClientError> {
        let added = self
            .inner
            .wanted_topics
            .lock()
            .unwrap_or_else(reuse_cache)
            .insert(topic.to_owned());
        let snapshot = self.metadata();
        let fresh = snapshot
            .topic_fetched_at
            .get(topic)
            .is_some_and(|at| at.elapsed() < self.inner.config.metadata_max_age);
        let stale = *self.inner.stale.lock().unwrap_or_else(reuse_cache);
        let snapshot = if added || !fresh || stale {
            self.refresh_metadata().await?
        } else {
            snapshot
        };
        let info = snapshot
            .topics
            .get(topic)
            .cloned()
            .ok_or(ClientError::Broker {
                code: ErrorCode::UnknownTopicOrPartition,
            })?;
        match info.error {
            ErrorCode::None => Ok(info),
            code => Err(ClientError::Broker { code }),
        }
    }

    /// Fetches metadata for every remembered topic now (one refresh at a
    /// time; callers that queued behind a refresh reuse its result).
    pub async fn refresh_metadata(&self) -> Result<Arc<ClusterMetadata>, ClientError> {
        let asked_at = Instant::now();
        let _guard = self.inner.refresh.lock().await;
        let current = self.metadata();
        let stale = *self.inner.stale.lock().unwrap_or_else(reuse_cache);
        let wanted: Vec<String> = self
            .inner
            .wanted_topics
            .lock()
            .unwrap_or_else(reuse_cache)
            .iter()
            .cloned()
            .collect();
        let covered = wanted
            .iter()
            .all(|topic| current.topic_fetched_at.contains_key(topic));
        if !stale && covered && current.fetched_at >= asked_at {
            return Ok(current);
        }
        let response = self.fetch_metadata(&wanted).await?;
        let next = Arc::new(current.merged(&response, Instant::now()));
        *self.inner.metadata.lock().unwrap_or_else(reuse_cache) = Arc::clone(&next);
        *self.inner.stale.lock().unwrap_or_else(reuse_cache) = false;
        Ok(next)
    }

    async fn fetch_metadata(
        &self,
        topics: &[String],
    ) -> Result<strom_protocol::kafka::messages::MetadataResponse, ClientError> {
        let connection = self.any_connection().await?;
        let version = connection.api_version(ApiKey::Metadata)?;
        let request_topics = topics
            .iter()
            .map(|topic| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(topic.clone()))))
            })
            .collect();
        let mut request = MetadataRequest::default().with_topics(Some(request_topics));
        if version >= 4 {
            request.allow_auto_topic_creation = self.inner.config.allow_auto_topic_creation;
        }
        match connection.send(request).await? {
            Response::Metadata(response) => Ok(response),
            _ => Err(ClientError::UnexpectedResponse {
                api_key: ApiKey::Metadata as i16,
            }),
        }
    }

    /// A connection to any reachable broker: a known broker first, then the
    /// bootstrap servers.
    pub async fn any_connection(&self) -> Result<Connection, ClientError> {
        let metadata = self.metadata();
        let mut addresses: Vec<String> = metadata
            .brokers
            .values()
            .map(|broker| broker.address())
            .collect();
        fastrand::shuffle(&mut addresses);
        addresses.extend(self.inner.config.bootstrap_servers.iter().cloned());
        let attempted = addresses.len();
        let mut last_error = None;
        for address in addresses {
            match self.connection_to(&address, false).await {
                Ok(connection) => return Ok(connection),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or(ClientError::NoBrokerAvailable { attempted }))
    }

    /// A connection to broker `broker_id`, reconnecting with backoff.
    pub async fn broker_connection(&self, broker_id: i32) -> Result<Connection, ClientError> {
        let address = self.broker_address(broker_id)?;
        self.connection_to(&address, true).await
    }

    /// The `host:port` of broker `broker_id` in the metadata.
    fn broker_address(&self, broker_id: i32) -> Result<String, ClientError> {
        self.metadata()
            .brokers
            .get(&broker_id)
            .map(|broker| broker.address())
            .ok_or(ClientError::UnknownBroker { broker_id })
    }

    /// A connection of its own to broker `broker_id` for a group
    /// coordinator's requests. A JoinGroup can wait on the broker for as long
    /// as the group's rebalance timeout, and a broker answers the requests of
    /// one connection in order, so on the shared connection it would hold up
    /// the fetches sent behind it; Kafka's clients keep a separate
    /// coordinator connection for the same reason.
    pub async fn coordinator_connection(&self, broker_id: i32) -> Result<Connection, ClientError> {
        let address = self.broker_address(broker_id)?;
        self.pooled_connection(&address, COORDINATOR_LANE, true)
            .await
    }

    /// A connection to the leader of `topic`/`partition`.
    pub async fn leader_connection(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<(i32, Connection), ClientError> {
        let info = self.topic(topic).await?;
        let leader = info
            .partition(partition)
            .and_then(|partition| partition.leader)
            .ok_or_else(|| ClientError::LeaderNotAvailable {
                topic: topic.to_owned(),
                partition,
            })?;
        Ok((leader, self.broker_connection(leader).await?))
    }

    /// Sends to broker `broker_id` with the default request timeout.
    pub async fn send_to(
        &self,
        broker_id: i32,
        request: impl Into<Request>,
    ) -> Result<Response, ClientError> {
        self.broker_connection(broker_id).await?.send(request).await
    }

    /// The coordinator of a group (`key_type` 0) or transaction (1).
    pub async fn find_coordinator(&self, key: &str, key_type: i8) -> Result<i32, ClientError> {
        let connection = self.any_connection().await?;
        let version = connection.api_version(ApiKey::FindCoordinator)?;
        let mut request = FindCoordinatorRequest::default().with_key_type(key_type);
        if version >= 4 {
            request.coordinator_keys = vec![StrBytes::from_string(key.to_owned())];
        } else {
            request.key = StrBytes::from_string(key.to_owned());
        }
        let Response::FindCoordinator(response) = connection.send(request).await? else {
            return Err(ClientError::UnexpectedResponse {
                api_key: ApiKey::FindCoordinator as i16,
            });
        };
        let (code, node) = match response.coordinators.first() {
            Some(coordinator) if version >= 4 => (coordinator.error_code, coordinator.node_id.0),
            _ => (response.error_code, response.node_id.0),
        };
        match ErrorCode::from_code(code) {
            ErrorCode::None => {
                if !self.metadata().brokers.contains_key(&node) {
                    self.request_metadata_refresh();
                    self.refresh_metadata().await?;
                }
                Ok(node)
            }
            code => Err(ClientError::Broker { code }),
        }
    }

    /// A pooled connection to `address`; with `backoff`, waits out the
    /// reconnect backoff of earlier failures first.
    async fn connection_to(&self, address: &str, backoff: bool) -> Result<Connection, ClientError> {
        self.pooled_connection(address, SHARED_LANE, backoff).await
    }

    /// The pooled connection to `address` on `lane` (connections of
    /// different lanes to one broker are separate sockets).
    async fn pooled_connection(
        &self,
        address: &str,
        lane: &str,
        backoff: bool,
    ) -> Result<Connection, ClientError> {
        let slot = {
            let mut slots = self.inner.slots.lock().unwrap_or_else(reuse_cache);
            Arc::clone(slots.entry(format!("{address}{lane}")).or_default())
        };
        let mut slot = slot.lock().await;
        if let Some(connection) = slot.connection.as_ref().filter(|c| !c.is_closed()) {
            return Ok(connection.clone());
        }
        if let Some(next_attempt_at) = slot.next_attempt_at.filter(|_| backoff) {
            tokio::time::sleep_until(next_attempt_at.into()).await;
        }
        match Connection::connect(address, &self.inner.options).await {
            Ok(connection) => {
                slot.failures = 0;
                slot.next_attempt_at = None;
                slot.connection = Some(connection.clone());
                Ok(connection)
            }
            Err(error) => {
                slot.failures = slot.failures.saturating_add(1);
                let wait = reconnect_backoff(
                    self.inner.config.reconnect_backoff,
                    self.inner.config.reconnect_backoff_max,
                    slot.failures,
                    fastrand::f64(),
                );
                slot.next_attempt_at = Some(Instant::now() + wait);
                slot.connection = None;
                Err(error)
            }
        }
    }

    /// Closes every pooled connection.
    pub fn close(&self) {
        let slots: Vec<_> = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(reuse_cache)
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        for slot in slots {
            if let Ok(slot) = slot.try_lock() {
                if let Some(connection) = slot.connection.as_ref() {
                    connection.close();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_to_the_cap_with_jitter() {
        let initial = Duration::from_millis(50);
        let max = Duration::from_millis(1000);
        assert_eq!(reconnect_backoff(initial, max, 0, 0.5), Duration::ZERO);
        assert_eq!(
            reconnect_backoff(initial, max, 1, 0.5),
            Duration::from_millis(50)
        );
        assert_eq!(
            reconnect_backoff(initial, max, 3, 0.5),
            Duration::from_millis(200)
        );
        assert_eq!(reconnect_backoff(initial, max, 30, 0.5), max);
        let low = reconnect_backoff(initial, max, 2, 0.0);
        let high = reconnect_backoff(initial, max, 2, 0.999);
        assert!(low >= Duration::from_millis(79) && low <= Duration::from_millis(81));
        assert!(high > Duration::from_millis(115) && high <= Duration::from_millis(120));
    }

    #[tokio::test]
    async fn unreachable_bootstrap_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let error = Cluster::connect(ClientConfig::new([address.clone()]))
            .await
            .unwrap_err();
        assert!(
            matches!(error, ClientError::Connect { address: ref a, .. } if *a == address),
            "{error}"
        );
    }
}
