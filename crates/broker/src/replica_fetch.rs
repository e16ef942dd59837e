//! The broker's side of follower fetching: [`TcpFetchTransport`], which
//! sends a replica Fetch
//! (v12: topic names, the last fetched epoch, diverging-epoch answers) to
//! the leader's inter-broker listener as found in the metadata image,
//! over connections secured as that listener asks ([`PeerConnector`]:
//! TLS and SASL when the listener is SSL, SASL_PLAINTEXT or SASL_SSL).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strom_controller::runtime::ControllerClient;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::{BrokerId as WireBrokerId, FetchRequest, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_replication::{
    BrokerId, FetchPartitionError, FetchTransport, PartitionFetchResult, ReplicaFetchRequest,
};
use strom_security::error::PeerError;
use strom_security::peer::{call, BoxedStream, PeerConnector};
use strom_storage::TopicPartition;

/// The Fetch version followers send.
const REPLICA_FETCH_VERSION: i16 = 12;

/// How often a refused inter-broker login is logged per leader (the
/// fetchers retry every `replica.fetch.backoff.ms` meanwhile).
const AUTHENTICATION_WARNING_INTERVAL: Duration = Duration::from_secs(30);

/// Why a replica fetch could not be exchanged with a leader.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The leader has no endpoint on the inter-broker listener.
    #[error("broker {broker} has no {listener} endpoint in the metadata")]
    NoEndpoint {
        /// The leader.
        broker: BrokerId,
        /// The listener name.
        listener: String,
    },
    /// Connecting, authenticating or the exchange failed.
    #[error("the replica fetch from broker {broker} failed")]
    Peer {
        /// The leader.
        broker: BrokerId,
        /// The cause.
        #[source]
        source: PeerError,
    },
    /// The leader answered with a top-level error code.
    #[error("broker {broker} refused the fetch with error code {code}")]
    Refused {
        /// The leader.
        broker: BrokerId,
        /// The code.
        code: i16,
    },
}

/// Replica fetches over TCP to each leader's inter-broker listener, one
/// connection per leader, reused while it works.
pub struct TcpFetchTransport {
    controller: Arc<dyn ControllerClient>,
    connector: Arc<PeerConnector>,
    max_frame_bytes: usize,
    /// Idle connections per leader: each of its `num.replica.fetchers`
    /// fetchers takes one while it fetches and puts it back after.
    /// Each connection is kept with the leader's `host:port`.
    connections: tokio::sync::Mutex<HashMap<BrokerId, Vec<(String, BoxedStream)>>>,
    /// When a refused login to each leader was last logged.
    authentication_warnings: Mutex<HashMap<BrokerId, Instant>>,
}

impl TcpFetchTransport {
    /// A transport resolving leaders in `controller`'s image on the
    /// connector's listener.
    pub fn new(
        controller: Arc<dyn ControllerClient>,
        connector: Arc<PeerConnector>,
        max_frame_bytes: usize,
    ) -> TcpFetchTransport {
        TcpFetchTransport {
            controller,
            connector,
            max_frame_bytes,
            connections: tokio::sync::Mutex::new(HashMap::new()),
            authentication_warnings: Mutex::new(HashMap::new()),
        }
    }

    async fn connect(&self, broker: BrokerId) -> Result<(String, BoxedStream), TransportError> {
        let image = self.controller.image();
        let listener = self.connector.listener();
        let address = image
            .broker(broker)
            .and_then(|found| {
                found
                    .endpoints
                    .iter()
                    .find(|endpoint| endpoint.name == listener)
            })
            .map(|endpoint| format!("{}:{}", endpoint.host, endpoint.port))
            .ok_or_else(|| TransportError::NoEndpoint {
                broker,
                listener: listener.to_owned(),
            })?;
        match self.connector.connect(&address).await {
            Ok(stream) => Ok((address, stream)),
            Err(source) => Err(self.peer_failure(broker, source)),
        }
    }

    /// Wraps a failure with `broker`, warning (at most every
    /// [`AUTHENTICATION_WARNING_INTERVAL`] per leader) when the leader and
    /// this broker did not accept each other's certificate or the leader
    /// refused this broker's login: replication from it cannot work until
    /// that is fixed.
    fn peer_failure(&self, broker: BrokerId, source: PeerError) -> TransportError {
        if source.is_authentication() {
            let now = Instant::now();
            let mut warned = self
                .authentication_warnings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let due = warned
                .get(&broker)
                .is_none_or(|last| now.duration_since(*last) >= AUTHENTICATION_WARNING_INTERVAL);
            if due {
                warned.insert(broker, now);
                tracing::warn!(
                    leader = broker,
                    listener = self.connector.listener(),
                    error = %strom_config::error_chain(&source),
                    "the leader refused this broker's inter-broker login (or TLS handshake); \
                     replication from it is retried with backoff (check the certificates, the \
                     user and password of listener.name.<listener>.<mechanism>.sasl.jaas.config \
                     and that the user exists)"
                );
            }
        }
        TransportError::Peer { broker, source }
    }
}

impl FetchTransport for TcpFetchTransport {
    type Error = TransportError;

    async fn fetch(
        &self,
        leader: BrokerId,
        request: ReplicaFetchRequest,
    ) -> Result<Vec<(TopicPartition, PartitionFetchResult)>, TransportError> {
        let body = Request::Fetch(wire_request(&request));
        // The connection is taken out while in use: other fetchers do not
        // wait for this one's long poll.
        let reused = self
            .connections
            .lock()
            .await
            .get_mut(&leader)
            .and_then(Vec::pop);
        let (address, mut stream) = match reused {
            Some(connection) => connection,
            None => self.connect(leader).await?,
        };
        let response = call(
            &mut stream,
            &address,
            &body,
            REPLICA_FETCH_VERSION,
            0,
            self.max_frame_bytes,
        )
        .await
        .map_err(|source| TransportError::Peer {
            broker: leader,
            source,
        })?;
        self.connections
            .lock()
            .await
            .entry(leader)
            .or_default()
            .push((address, stream));
        match response {
            Response::Fetch(response) if response.error_code == 0 => Ok(results(response)),
            Response::Fetch(response) => Err(TransportError::Refused {
                broker: leader,
                code: response.error_code,
            }),
            _ => Err(TransportError::Refused {
                broker: leader,
                code: ErrorCode::UnknownServerError.code(),
            }),
        }
    }
}

fn wire_request(request: &ReplicaFetchRequest) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for partition in &request.partitions {
        let name = &partition.topic_partition.topic;
        let wire = FetchPartition::default()
            .with_partition(partition.topic_partition.partition)
            .with_current_leader_epoch(partition.current_leader_epoch)
            .with_fetch_offset(partition.fetch_offset)
            .with_last_fetched_epoch(partition.last_fetched_epoch)
            .with_log_start_offset(partition.log_start_offset)
            .with_partition_max_bytes(partition.partition_max_bytes);
        match topics.last_mut() {
            Some(topic) if topic.topic.0.as_str() == name => topic.partitions.push(wire),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(vec![wire]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(WireBrokerId(request.replica_id))
        .with_max_wait_ms(request.max_wait_ms)
        .with_min_bytes(request.min_bytes)
        .with_max_bytes(request.max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

fn results(
    response: strom_protocol::kafka::messages::FetchResponse,
) -> Vec<(TopicPartition, PartitionFetchResult)> {
    let mut out = Vec::new();
    for topic in response.responses {
        let name = topic.topic.0.to_string();
        for data in topic.partitions {
            let topic_partition = TopicPartition::new(name.clone(), data.partition_index);
            let result = if data.error_code != 0 {
                PartitionFetchResult::Error(partition_error(data.error_code, data.log_start_offset))
            } else if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
                PartitionFetchResult::Diverging {
                    epoch: data.diverging_epoch.epoch,
                    end_offset: data.diverging_epoch.end_offset,
                    high_watermark: data.high_watermark,
                }
            } else {
                PartitionFetchResult::Records {
                    records: data.records.unwrap_or_default(),
                    high_watermark: data.high_watermark,
                }
            };
            out.push((topic_partition, result));
        }
    }
    out
}

fn partition_error(code: i16, leader_log_start_offset: i64) -> FetchPartitionError {
    match code {
        code if code == ErrorCode::NotLeaderOrFollower.code() => {
            FetchPartitionError::NotLeaderOrFollower
        }
        code if code == ErrorCode::FencedLeaderEpoch.code() => {
            FetchPartitionError::FencedLeaderEpoch
        }
        code if code == ErrorCode::UnknownLeaderEpoch.code() => {
            FetchPartitionError::UnknownLeaderEpoch
        }
        code if code == ErrorCode::OffsetOutOfRange.code()
            || code == ErrorCode::OffsetMovedToTieredStorage.code() =>
        {
            FetchPartitionError::OffsetOutOfRange {
                leader_log_start_offset,
            }
        }
        code => FetchPartitionError::Other { code },
    }
}
