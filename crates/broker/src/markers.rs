//! Transaction markers: writing a commit or abort marker into a partition
//! led here (for the local transaction coordinator and for WriteTxnMarkers
//! from a remote one), and [`BrokerMarkers`], the coordinator's
//! [`MarkerWriter`], which writes locally where this broker leads and
//! sends WriteTxnMarkers to the leader elsewhere (on the broker's pooled
//! inter-broker connections, [`crate::peer_pool`]).
//!
//! A marker is written as a leader append with `acks=all` semantics and
//! reported written once the high watermark passes it. A marker in a
//! `__consumer_offsets` partition also completes the transaction's
//! pending offsets in the group coordinator.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use strom_controller::runtime::ControllerClient;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use strom_protocol::kafka::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{Request, Response};
use strom_replication::AckStatus;
use strom_storage::marker::{MarkerKind, TransactionMarker};
use strom_storage::TopicPartition;
use strom_transactions::coordinator::MarkerPlan;
use strom_transactions::metadata::TopicPartition as TxnPartition;
use strom_transactions::runtime::{MarkerOutcome, MarkerWriter};
use strom_transactions::state::TransactionResult;
use tracing::debug;

use crate::blocking::blocking;
use crate::groups::{GroupService, OFFSETS_TOPIC};
use crate::peer_pool::PeerPool;
use crate::replica_manager::ReplicaManager;

/// How long a marker waits for the in-sync replicas.
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(5);

/// The WriteTxnMarkers version sent to other brokers.
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Writes `marker` into `topic_partition`, led here, and waits until it
/// is committed; a `__consumer_offsets` partition then completes the
/// producer's pending transactional offsets. The error is the partition's
/// Kafka code for WriteTxnMarkers.
pub async fn write_local(
    replicas: &ReplicaManager,
    groups: &GroupService,
    topic_partition: &TopicPartition,
    marker: &TransactionMarker,
) -> Result<(), ErrorCode> {
    let replica = replicas
        .get(topic_partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let now_ms = replicas.now_ms();
    let appended = blocking(|| replica.append_marker_flushing_here(marker, now_ms))
        .map_err(|failure| crate::handlers::errors::append_error_code(&failure))?;
    let required = appended.info.last_offset.saturating_add(1);
    match replica
        .wait_for_ack(required, appended.leader_epoch, MARKER_TIMEOUT)
        .await
    {
        AckStatus::Committed => {}
        AckStatus::NotLeader => return Err(ErrorCode::NotLeaderOrFollower),
        AckStatus::Waiting => return Err(ErrorCode::RequestTimedOut),
        AckStatus::NotEnoughReplicasAfterAppend => {
            return Err(ErrorCode::NotEnoughReplicasAfterAppend)
        }
    }
    if topic_partition.topic == OFFSETS_TOPIC {
        let commit = marker.kind == MarkerKind::Commit;
        let completed = groups.coordinator.complete_transaction(
            topic_partition.partition,
            marker.producer_id,
            commit,
            appended.info.last_offset,
        );
        if let Err(error) = completed {
            // The partition moved: its next leader replays the marker.
            debug!(partition = topic_partition.partition, %error, "transactional offsets not completed here");
        }
    }
    Ok(())
}

/// The marker a plan writes.
fn marker_of(plan: &MarkerPlan) -> TransactionMarker {
    TransactionMarker {
        bumps_epoch: plan.transaction_version.supports_epoch_bump(),
        producer_id: plan.producer_id,
        producer_epoch: plan.producer_epoch,
        coordinator_epoch: plan.coordinator_epoch,
        kind: match plan.result {
            TransactionResult::Commit => MarkerKind::Commit,
            TransactionResult::Abort => MarkerKind::Abort,
        },
    }
}

/// The coordinator's marker writer (see the module doc).
pub struct BrokerMarkers {
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupService>,
    controller: Arc<dyn ControllerClient>,
    /// Connections to other brokers' inter-broker listener (a cluster
    /// node); `None` on a single node.
    pool: Option<Arc<PeerPool>>,
}

impl BrokerMarkers {
    /// A writer over these parts of the broker.
    pub fn new(
        replicas: Arc<ReplicaManager>,
        groups: Arc<GroupService>,
        controller: Arc<dyn ControllerClient>,
        pool: Option<Arc<PeerPool>>,
    ) -> BrokerMarkers {
        BrokerMarkers {
            replicas,
            groups,
            controller,
            pool,
        }
    }

    /// The outcome for a partition whose leader is unknown or which failed
    /// with `code`: gone when its topic no longer exists, else retried.
    fn unwritten(&self, partition: &TxnPartition, code: Option<ErrorCode>) -> MarkerOutcome {
        let image = self.controller.image();
        let exists = image.topic_by_name(&partition.topic).is_some_and(|topic| {
            usize::try_from(partition.partition).is_ok_and(|index| index < topic.partitions.len())
        });
        if !exists {
            return MarkerOutcome::Gone;
        }
        if matches!(
            code,
            Some(ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced)
        ) {
            return MarkerOutcome::Fenced;
        }
        if let Some(code) = code {
            debug!(topic = %partition.topic, partition = partition.partition, ?code, "marker not written; retried");
        }
        MarkerOutcome::Retry
    }

    /// Partitions grouped by their leader in the current image (`None`
    /// when leaderless or gone).
    fn by_leader(
        &self,
        partitions: &BTreeSet<TxnPartition>,
    ) -> BTreeMap<Option<i32>, Vec<TxnPartition>> {
        let image = self.controller.image();
        let mut grouped: BTreeMap<Option<i32>, Vec<TxnPartition>> = BTreeMap::new();
        for partition in partitions {
            let leader = image
                .topic_by_name(&partition.topic)
                .and_then(|topic| {
                    usize::try_from(partition.partition)
                        .ok()
                        .and_then(|index| topic.partitions.get(index))
                })
                .and_then(|found| found.leader);
            grouped.entry(leader).or_default().push(partition.clone());
        }
        grouped
    }
}

#[async_trait]
impl MarkerWriter for BrokerMarkers {
    async fn write_markers(
        &self,
        plan: &MarkerPlan,
        partitions: &BTreeSet<TxnPartition>,
    ) -> Vec<(TxnPartition, MarkerOutcome)> {
        let marker = marker_of(plan);
        let mut outcomes = Vec::with_capacity(partitions.len());
        for (leader, group) in self.by_leader(partitions) {
            match leader {
                Some(leader) if leader == self.replicas.node_id() => {
                    for partition in group {
                        let topic_partition =
                            TopicPartition::new(partition.topic.clone(), partition.partition);
                        let outcome = match write_local(
                            &self.replicas,
                            &self.groups,
                            &topic_partition,
                            &marker,
                        )
                        .await
                        {
                            Ok(()) => MarkerOutcome::Written,
                            Err(code) => self.unwritten(&partition, Some(code)),
                        };
                        outcomes.push((partition, outcome));
                    }
                }
                Some(leader) => outcomes.extend(self.write_remote(leader, &marker, group).await),
                None => {
                    for partition in group {
                        let outcome = self.unwritten(&partition, None);
                        outcomes.push((partition, outcome));
                    }
                }
            }
        }
        outcomes
    }
}

impl BrokerMarkers {
    /// Sends one WriteTxnMarkers for `partitions` to `leader` and reads
    /// each partition's outcome from the answer.
    async fn write_remote(
        &self,
        leader: i32,
        marker: &TransactionMarker,
        partitions: Vec<TxnPartition>,
    ) -> Vec<(TxnPartition, MarkerOutcome)> {
        let answered = match &self.pool {
            Some(pool) => self.exchange(pool, leader, marker, &partitions).await,
            None => None,
        };
        partitions
            .into_iter()
            .map(|partition| {
                let code = answered
                    .as_ref()
                    .and_then(|codes| codes.get(&(partition.topic.clone(), partition.partition)))
                    .copied();
                let outcome = match code {
                    Some(ErrorCode::None) => MarkerOutcome::Written,
                    other => self.unwritten(&partition, other),
                };
                (partition, outcome)
            })
            .collect()
    }

    async fn exchange(
        &self,
        pool: &PeerPool,
        leader: i32,
        marker: &TransactionMarker,
        partitions: &[TxnPartition],
    ) -> Option<BTreeMap<(String, i32), ErrorCode>> {
        let address = pool.address(&self.controller.image(), leader)?;
        let request = Request::WriteTxnMarkers(write_txn_markers_request(marker, partitions));
        match pool
            .call(&address, &request, WRITE_TXN_MARKERS_VERSION)
            .await
        {
            Ok(Response::WriteTxnMarkers(response)) => Some(partition_codes(&response)),
            Ok(_) => None,
            Err(error) => {
                debug!(leader, %error, "WriteTxnMarkers to the leader failed; retried");
                None
            }
        }
    }
}

/// A WriteTxnMarkers request for one marker over `partitions`.
fn write_txn_markers_request(
    marker: &TransactionMarker,
    partitions: &[TxnPartition],
) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for partition in partitions {
        topics
            .entry(partition.topic.as_str())
            .or_default()
            .push(partition.partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, indexes)| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partition_indexes(indexes)
        })
        .collect();
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(marker.producer_id))
        .with_producer_epoch(marker.producer_epoch)
        .with_transaction_result(marker.kind == MarkerKind::Commit)
        .with_coordinator_epoch(marker.coordinator_epoch)
        .with_topics(topics)])
}

/// Each partition's code in a WriteTxnMarkers response.
fn partition_codes(
    response: &strom_protocol::kafka::messages::WriteTxnMarkersResponse,
) -> BTreeMap<(String, i32), ErrorCode> {
    let mut codes = BTreeMap::new();
    for marker in &response.markers {
        for topic in &marker.topics {
            for partition in &topic.partitions {
                let code = ErrorCode::from_code(partition.error_code);
                codes.insert((topic.name.to_string(), partition.partition_index), code);
            }
        }
    }
    codes
}
