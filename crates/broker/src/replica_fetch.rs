//! The broker's side of follower fetching: [`TcpFetchTransport`], which
//! sends a replica Fetch
//! (v12: topic names, the last fetched epoch, diverging-epoch answers) to
//! the leader's inter-broker listener as found in the metadata image.
//!
//! Only PLAINTEXT inter-broker listeners are reached for now.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use strom_controller::runtime::ControllerClient;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::frame::FrameDecoder;
use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::{BrokerId as WireBrokerId, FetchRequest, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{decode_response, encode_request_frame, request_header};
use strom_protocol::messages::{Request, Response};
use strom_replication::{
    BrokerId, FetchPartitionError, FetchTransport, PartitionFetchResult, ReplicaFetchRequest,
};
use strom_storage::TopicPartition;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The Fetch version followers send.
const REPLICA_FETCH_VERSION: i16 = 12;

/// How long connecting to a leader may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// Connecting, writing or reading failed.
    #[error("i/o with broker {broker} failed")]
    Io {
        /// The leader.
        broker: BrokerId,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The request or response did not encode or decode.
    #[error("the fetch exchange with broker {broker} is malformed")]
    Codec {
        /// The leader.
        broker: BrokerId,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
    listener: String,
    max_frame_bytes: usize,
    /// Idle connections per leader: each of its `num.replica.fetchers`
    /// fetchers takes one while it fetches and puts it back after.
    connections: tokio::sync::Mutex<HashMap<BrokerId, Vec<TcpStream>>>,
}

impl TcpFetchTransport {
    /// A transport resolving leaders in `controller`'s image on `listener`.
    pub fn new(
        controller: Arc<dyn ControllerClient>,
        listener: String,
        max_frame_bytes: usize,
    ) -> TcpFetchTransport {
        TcpFetchTransport {
            controller,
            listener,
            max_frame_bytes,
            connections: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    async fn connect(&self, broker: BrokerId) -> Result<TcpStream, TransportError> {
        let image = self.controller.image();
        let endpoint = image
            .broker(broker)
            .and_then(|found| {
                found
                    .endpoints
                    .iter()
                    .find(|endpoint| endpoint.name == self.listener)
            })
            .map(|endpoint| (endpoint.host.clone(), endpoint.port))
            .ok_or_else(|| TransportError::NoEndpoint {
                broker,
                listener: self.listener.clone(),
            })?;
        let io = |source| TransportError::Io { broker, source };
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(endpoint))
            .await
            .map_err(|_| io(std::io::ErrorKind::TimedOut.into()))?
            .map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        Ok(stream)
    }

    async fn exchange(
        &self,
        stream: &mut TcpStream,
        broker: BrokerId,
        frame: &[u8],
    ) -> Result<Response, TransportError> {
        let io = |source| TransportError::Io { broker, source };
        stream.write_all(frame).await.map_err(io)?;
        let decoder = FrameDecoder::new(self.max_frame_bytes);
        let mut buffer = BytesMut::with_capacity(64 * 1024);
        let body = loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(body)) => break body,
                Ok(None) => {}
                Err(source) => {
                    return Err(TransportError::Codec {
                        broker,
                        source: Box::new(source),
                    })
                }
            }
            if stream.read_buf(&mut buffer).await.map_err(io)? == 0 {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        };
        let (_, response) = decode_response(body, 1, REPLICA_FETCH_VERSION).map_err(|source| {
            TransportError::Codec {
                broker,
                source: Box::new(source),
            }
        })?;
        Ok(response)
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
        let header = request_header(
            &body,
            REPLICA_FETCH_VERSION,
            0,
            Some("strom-replica-fetcher"),
        );
        let mut frame = BytesMut::new();
        encode_request_frame(&header, &body, &mut frame).map_err(|source| {
            TransportError::Codec {
                broker: leader,
                source: Box::new(source),
            }
        })?;
        // The connection is taken out while in use: other fetchers do not
        // wait for this one's long poll.
        let reused = self
            .connections
            .lock()
            .await
            .get_mut(&leader)
            .and_then(Vec::pop);
        let mut stream = match reused {
            Some(stream) => stream,
            None => self.connect(leader).await?,
        };
        let response = self.exchange(&mut stream, leader, &frame).await?;
        self.connections
            .lock()
            .await
            .entry(leader)
            .or_default()
            .push(stream);
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
                PartitionFetchResult::Error(partition_error(data.error_code))
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

fn partition_error(code: i16) -> FetchPartitionError {
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
        code if code == ErrorCode::OffsetOutOfRange.code() => FetchPartitionError::OffsetOutOfRange,
        code => FetchPartitionError::Other { code },
    }
}
