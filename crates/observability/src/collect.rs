//! The Prometheus collector: on each scrape, the counters kept on the hot
//! path and the gauges computed from the broker's state, encoded by
//! `prometheus-client`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use strom_protocol::error_code::ErrorCode;

use crate::exposition::{counter, gauge, histogram, one, Labels};
use crate::histogram::AtomicHistogram;
use crate::lag::group_lags;
use crate::metrics::{BrokerMetrics, LOG_FLUSH_TIME};
use crate::requests::ApiMetrics;
use crate::topics::TopicCounts;
use crate::view::{BrokerView, IsrChanges, NetworkCounts, QuorumState, ViewSlot};

/// Reads the process's network counters (they are counted before the
/// broker serves, so they do not come through its [`BrokerView`]).
pub type NetworkSource = fn() -> NetworkCounts;

/// Encodes every metric of one broker.
#[derive(Debug)]
pub struct BrokerCollector {
    metrics: Arc<BrokerMetrics>,
    network: NetworkSource,
    broker: Arc<ViewSlot>,
}

impl BrokerCollector {
    /// A collector over `metrics`, the network counters `network` reads and
    /// the broker `broker` will hold.
    pub fn new(
        metrics: Arc<BrokerMetrics>,
        network: NetworkSource,
        broker: Arc<ViewSlot>,
    ) -> BrokerCollector {
        BrokerCollector {
            metrics,
            network,
            broker,
        }
    }
}

impl Collector for BrokerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        encode_network(&mut encoder, (self.network)())?;
        encode_requests(&mut encoder, &self.metrics)?;
        histogram(
            &mut encoder,
            "kafka_log_logflushstats_logflushrateandtime_seconds",
            "Time of the log flushes made for flush.messages and flush.ms (LogFlushRateAndTimeMs)",
            vec![(Vec::new(), LOG_FLUSH_TIME.snapshot())],
        )?;
        counter(
            &mut encoder,
            "strom_group_rebalances",
            "Rebalances completed (JoinGroup generations handed to a leader)",
            vec![(Vec::new(), self.metrics.rebalances())],
        )?;
        let Some(broker) = self.broker.get().and_then(Weak::upgrade) else {
            return Ok(());
        };
        let broker = broker.as_ref();
        encode_topics(&mut encoder, broker)?;
        encode_partitions(&mut encoder, broker)?;
        encode_controller(&mut encoder, broker)?;
        encode_storage(&mut encoder, broker)?;
        encode_remote_storage(&mut encoder, broker)?;
        encode_groups(&mut encoder, broker)?;
        crate::quotas::encode_quotas(&mut encoder, broker)?;
        encode_transactions(&mut encoder, broker)
    }
}

fn encode_network(encoder: &mut DescriptorEncoder<'_>, counts: NetworkCounts) -> fmt::Result {
    let open = counts
        .connections_opened
        .saturating_sub(counts.connections_closed);
    gauge(
        encoder,
        "kafka_server_socket_server_metrics_connections",
        "Open client connections",
        vec![(Vec::new(), i64::try_from(open).unwrap_or(i64::MAX))],
    )?;
    let counters: [(&str, &str, u64); 8] = [
        (
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections accepted (connection-creation-total)",
            counts.connections_opened,
        ),
        (
            "kafka_server_socket_server_metrics_connection_close",
            "Connections closed (connection-close-total)",
            counts.connections_closed,
        ),
        (
            "kafka_server_socket_server_metrics_incoming_byte",
            "Bytes received from clients (incoming-byte-total)",
            counts.bytes_received,
        ),
        (
            "kafka_server_socket_server_metrics_outgoing_byte",
            "Bytes sent to clients (outgoing-byte-total)",
            counts.bytes_sent,
        ),
        (
            "strom_network_undecodable_requests",
            "Requests that could not be decoded; their connections were closed",
            counts.undecodable_requests,
        ),
        (
            "strom_log_page_cache_loads",
            "Fetched segment ranges read into the page cache before sendfile",
            counts.page_cache_loads,
        ),
        (
            "strom_network_connections_refused",
            "Connections closed at accept by max.connections, a listener's max.connections or max.connections.per.ip",
            counts.connections_refused,
        ),
        (
            "strom_network_connection_accepts_throttled",
            "Accepts delayed by max.connection.creation.rate (broker or listener)",
            counts.connection_accepts_throttled,
        ),
    ];
    for (name, help, value) in counters {
        counter(encoder, name, help, one(value))?;
    }
    Ok(())
}

fn request_label(api: &ApiMetrics) -> Labels {
    vec![("request", format!("{:?}", api.api_key()))]
}

fn encode_requests(encoder: &mut DescriptorEncoder<'_>, metrics: &BrokerMetrics) -> fmt::Result {
    let apis: Vec<_> = metrics.requests.apis().collect();
    counter(
        encoder,
        "kafka_network_requestmetrics_requests",
        "Requests handled, by API (RequestsPerSec)",
        apis.iter()
            .map(|api| (request_label(api), api.requests()))
            .collect(),
    )?;
    let mut errors = Vec::new();
    for api in &apis {
        for (code, count) in api.errors() {
            let mut labels = request_label(api);
            labels.push(("error", ErrorCode::from_code(code).name().to_owned()));
            errors.push((labels, count));
        }
    }
    counter(
        encoder,
        "kafka_network_requestmetrics_errors",
        "Error codes in responses, by API and code, NONE included (ErrorsPerSec)",
        errors,
    )?;
    type Stage = fn(&ApiMetrics) -> &AtomicHistogram;
    let stages: [(&str, &str, Stage); 5] = [
        (
            "kafka_network_requestmetrics_requestqueuetime_seconds",
            "Time from the request being read to its handler starting (RequestQueueTimeMs)",
            |api| &api.queue,
        ),
        (
            "kafka_network_requestmetrics_localtime_seconds",
            "Time in the request's handler (LocalTimeMs)",
            |api| &api.local,
        ),
        (
            "kafka_network_requestmetrics_remotetime_seconds",
            "Time waiting for acks, fetch.min.bytes, a flush or a rebalance (RemoteTimeMs)",
            |api| &api.remote,
        ),
        (
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from the request being read to its answer being ready (TotalTimeMs without the send)",
            |api| &api.total,
        ),
        (
            "kafka_network_requestmetrics_responsesendtime_seconds",
            "Time writing the answer to the socket (ResponseSendTimeMs); answers written in one vectored write each count the whole write",
            |api| &api.send,
        ),
    ];
    for (name, help, stage) in stages {
        let rows = apis
            .iter()
            .map(|api| (request_label(api), stage(api).snapshot()))
            .collect();
        histogram(encoder, name, help, rows)?;
    }
    Ok(())
}

fn encode_topics(encoder: &mut DescriptorEncoder<'_>, broker: &dyn BrokerView) -> fmt::Result {
    let topics = broker.topic_counts();
    type Field = fn(&TopicCounts) -> u64;
    let fields: [(&str, &str, Field); 5] = [
        (
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended, by topic (MessagesInPerSec)",
            |c| c.messages_in,
        ),
        (
            "kafka_server_brokertopicmetrics_bytesin",
            "Record bytes appended, by topic (BytesInPerSec)",
            |c| c.bytes_in,
        ),
        (
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent to fetchers, by topic (BytesOutPerSec)",
            |c| c.bytes_out,
        ),
        (
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Partitions of produce requests that failed, by topic (FailedProduceRequestsPerSec)",
            |c| c.failed_produce_requests,
        ),
        (
            "kafka_server_brokertopicmetrics_failedfetchrequests",
            "Partitions of fetch requests that failed, by topic (FailedFetchRequestsPerSec)",
            |c| c.failed_fetch_requests,
        ),
    ];
    for (name, help, field) in fields {
        let rows = topics
            .iter()
            .map(|(topic, counts)| (vec![("topic", topic.clone())], field(counts)))
            .collect();
        counter(encoder, name, help, rows)?;
    }
    Ok(())
}

/// Partition counts as the image and this broker see them.
#[derive(Debug, Default)]
struct PartitionCounts {
    hosted: i64,
    leader: i64,
    under_replicated: i64,
    under_min_isr: i64,
    reassigning: i64,
    offline: i64,
    preferred_imbalance: i64,
    global: i64,
}

fn partition_counts(broker: &dyn BrokerView) -> PartitionCounts {
    let node_id = broker.node_id();
    let mut counts = PartitionCounts::default();
    for topic in broker.topics() {
        let min_isr = topic.min_insync_replicas;
        for partition in &topic.partitions {
            counts.global += 1;
            if partition.leader.is_none() {
                counts.offline += 1;
            }
            if partition.leader != partition.replicas.first().copied() {
                counts.preferred_imbalance += 1;
            }
            if partition.replicas.contains(&node_id) {
                counts.hosted += 1;
            }
            if partition.leader != Some(node_id) {
                continue;
            }
            counts.leader += 1;
            // As in Kafka, replicas a reassignment is adding do not count
            // until they are in sync.
            let replication_factor = partition
                .replicas
                .len()
                .saturating_sub(partition.adding_replicas.len());
            if partition.isr.len() < replication_factor {
                counts.under_replicated += 1;
            }
            if partition.reassigning {
                counts.reassigning += 1;
            }
            if partition.isr.len() < min_isr {
                counts.under_min_isr += 1;
            }
        }
    }
    counts
}

fn encode_partitions(encoder: &mut DescriptorEncoder<'_>, broker: &dyn BrokerView) -> fmt::Result {
    let counts = partition_counts(broker);
    let gauges: [(&str, &str, i64); 8] = [
        (
            "kafka_server_replicamanager_partitioncount",
            "Partitions with a replica on this broker (PartitionCount)",
            counts.hosted,
        ),
        (
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads (LeaderCount)",
            counts.leader,
        ),
        (
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replicas (UnderReplicatedPartitions)",
            counts.under_replicated,
        ),
        (
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount)",
            counts.under_min_isr,
        ),
        (
            "kafka_server_replicamanager_reassigningpartitions",
            "Partitions led here with a reassignment in progress (ReassigningPartitions)",
            counts.reassigning,
        ),
        (
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
            "Partitions not led by their preferred (first) replica (PreferredReplicaImbalanceCount)",
            counts.preferred_imbalance,
        ),
        (
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (OfflinePartitionsCount)",
            counts.offline,
        ),
        (
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster (GlobalPartitionCount)",
            counts.global,
        ),
    ];
    for (name, help, value) in gauges {
        gauge(encoder, name, help, vec![(Vec::new(), value)])?;
    }
    let IsrChanges { shrinks, expands } = broker.isr_changes();
    counter(
        encoder,
        "kafka_server_replicamanager_isrshrinks",
        "ISR shrinks of partitions led here that the controller committed (IsrShrinksPerSec); a single node never shrinks its ISR of one",
        one(shrinks),
    )?;
    counter(
        encoder,
        "kafka_server_replicamanager_isrexpands",
        "ISR expansions of partitions led here that the controller committed (IsrExpandsPerSec); a single node never expands its ISR of one",
        one(expands),
    )
}

/// Where this node stands in the metadata quorum, as the raft metrics
/// report it.
#[derive(Debug)]
struct QuorumPosition {
    is_active: bool,
    leader: i64,
    epoch: i64,
    high_watermark: i64,
    log_end: i64,
}

fn quorum_position(
    node_id: i32,
    metadata_end_offset: u64,
    quorum: Option<&QuorumState>,
) -> QuorumPosition {
    let offset = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    // A single node is its own quorum: always active, at its image's end.
    let (is_active, leader, epoch, high_watermark, log_end) = match quorum {
        None => {
            let end = offset(metadata_end_offset);
            (true, i64::from(node_id), 0, end, end)
        }
        Some(status) => {
            let own = status
                .voters
                .iter()
                .chain(&status.observers)
                .find(|replica| replica.node_id == status.node_id)
                .and_then(|replica| replica.log_end_offset);
            (
                status.is_active,
                status.leader.map_or(-1, offset),
                offset(status.epoch),
                offset(status.high_watermark),
                own.map_or(offset(status.high_watermark), offset),
            )
        }
    };
    QuorumPosition {
        is_active,
        leader,
        epoch,
        high_watermark,
        log_end,
    }
}

fn encode_controller(encoder: &mut DescriptorEncoder<'_>, broker: &dyn BrokerView) -> fmt::Result {
    let cluster = broker.cluster();
    let fenced = cluster.brokers.iter().filter(|b| b.fenced).count();
    let active = cluster.brokers.iter().filter(|b| !b.fenced).count();
    let quorum = broker.quorum();
    let QuorumPosition {
        is_active,
        leader,
        epoch,
        high_watermark,
        log_end,
    } = quorum_position(
        broker.node_id(),
        cluster.metadata_end_offset,
        quorum.as_ref(),
    );
    let gauges: [(&str, &str, i64); 8] = [
        (
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller (ActiveControllerCount); the embedded controller of a single node is always active",
            i64::from(is_active),
        ),
        (
            "kafka_server_raft_metrics_current_leader",
            "The active controller this node knows of, -1 if none (raft-metrics current-leader)",
            leader,
        ),
        (
            "kafka_server_raft_metrics_current_epoch",
            "The metadata quorum's epoch, the Raft term (raft-metrics current-epoch); 0 on a single node",
            epoch,
        ),
        (
            "kafka_server_raft_metrics_high_watermark",
            "Metadata log entries this node has applied (raft-metrics high-watermark)",
            high_watermark,
        ),
        (
            "kafka_controller_kafkacontroller_fencedbrokercount",
            "Registered brokers that are fenced (FencedBrokerCount)",
            fenced as i64,
        ),
        (
            "kafka_controller_kafkacontroller_activebrokercount",
            "Registered brokers that are not fenced (ActiveBrokerCount)",
            active as i64,
        ),
        (
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster (GlobalTopicCount)",
            cluster.topic_count as i64,
        ),
        (
            "kafka_server_raft_metrics_log_end_offset",
            "End offset of this node's metadata log (raft-metrics log-end-offset); on a single node, of the log it has applied",
            log_end,
        ),
    ];
    for (name, help, value) in gauges {
        gauge(encoder, name, help, vec![(Vec::new(), value)])?;
    }
    encode_quorum_replicas(encoder, quorum.as_ref(), log_end)
}

/// On the active controller: each voter's and observer's copy of the
/// metadata log, as far as the last replication round told (Kafka's
/// DescribeQuorum shows the same).
fn encode_quorum_replicas(
    encoder: &mut DescriptorEncoder<'_>,
    quorum: Option<&QuorumState>,
    leader_end: i64,
) -> fmt::Result {
    let mut ends = Vec::new();
    let mut lags = Vec::new();
    if let Some(status) = quorum.filter(|status| status.is_active) {
        let roles = [("voter", &status.voters), ("observer", &status.observers)];
        for (role, replicas) in roles {
            for replica in replicas.iter() {
                let Some(end) = replica.log_end_offset else {
                    continue;
                };
                let end = i64::try_from(end).unwrap_or(i64::MAX);
                let labels: Labels = vec![
                    ("node", replica.node_id.to_string()),
                    ("role", role.to_owned()),
                ];
                lags.push((labels.clone(), leader_end.saturating_sub(end).max(0)));
                ends.push((labels, end));
            }
        }
    }
    gauge(
        encoder,
        "kafka_server_raft_metrics_replica_log_end_offset",
        "On the active controller: each voter's and observer's metadata log end offset as last replicated (DescribeQuorum's LogEndOffset)",
        ends,
    )?;
    gauge(
        encoder,
        "kafka_server_raft_metrics_replica_lag",
        "On the active controller: entries each voter and observer is behind its log end (DescribeQuorum's Lag)",
        lags,
    )
}

fn partition_labels(topic: &str, partition: i32) -> Labels {
    vec![
        ("topic", topic.to_owned()),
        ("partition", partition.to_string()),
    ]
}

/// The storage gauges' samples, per hosted partition and per log directory.
#[derive(Debug, Default)]
struct StorageRows {
    segments: Vec<(Labels, i64)>,
    sizes: Vec<(Labels, i64)>,
    ends: Vec<(Labels, i64)>,
    starts: Vec<(Labels, i64)>,
    stable_lags: Vec<(Labels, i64)>,
    open_transactions: Vec<(Labels, i64)>,
    follower_lags: Vec<(Labels, i64)>,
    by_dir: BTreeMap<String, i64>,
}

fn storage_rows(broker: &dyn BrokerView) -> StorageRows {
    let mut rows = StorageRows::default();
    for hosted in broker.hosted_partitions() {
        for (follower, lag) in &hosted.follower_lags {
            let mut labels = partition_labels(&hosted.topic, hosted.partition);
            labels.push(("replica", follower.to_string()));
            rows.follower_lags.push((labels, *lag));
        }
        // An offline partition has no figures to report.
        let Some(log) = hosted.log else {
            continue;
        };
        let size = i64::try_from(log.size_bytes).unwrap_or(i64::MAX);
        let labels = partition_labels(&hosted.topic, hosted.partition);
        rows.segments.push((labels.clone(), log.segments as i64));
        rows.sizes.push((labels.clone(), size));
        rows.ends.push((labels.clone(), log.log_end_offset));
        rows.stable_lags.push((
            labels.clone(),
            (log.high_watermark - log.last_stable_offset).max(0),
        ));
        let open = i64::try_from(log.open_transactions).unwrap_or(i64::MAX);
        rows.open_transactions.push((labels.clone(), open));
        rows.starts.push((labels, log.log_start_offset));
        *rows
            .by_dir
            .entry(log.log_dir.unwrap_or_default())
            .or_default() += size;
    }
    rows
}

/// Tiered storage (KIP-405), when it is on.
fn encode_remote_storage(
    encoder: &mut DescriptorEncoder<'_>,
    broker: &dyn BrokerView,
) -> fmt::Result {
    let Some(counts) = broker.remote_storage() else {
        return Ok(());
    };
    let counters: [(&str, &str, u64); 5] = [
        (
            "kafka_server_brokertopicmetrics_remotecopybytes",
            "Segment bytes copied to the remote tier (RemoteCopyBytesPerSec)",
            counts.bytes_copied,
        ),
        (
            "kafka_server_brokertopicmetrics_remotefetchbytes",
            "Record bytes read from the remote tier (RemoteFetchBytesPerSec)",
            counts.bytes_fetched,
        ),
        (
            "kafka_server_brokertopicmetrics_remotecopyerrors",
            "Failed segment copies (RemoteCopyErrorsPerSec)",
            counts.copy_errors,
        ),
        (
            "kafka_server_brokertopicmetrics_remotefetcherrors",
            "Failed remote reads (RemoteFetchErrorsPerSec)",
            counts.fetch_errors,
        ),
        (
            "strom_remote_segments_deleted",
            "Remote segments deleted (retention, recovery, topic deletion)",
            counts.segments_deleted,
        ),
    ];
    for (name, help, value) in counters {
        counter(encoder, name, help, one(value))?;
    }
    gauge(
        encoder,
        "kafka_server_brokertopicmetrics_remotecopylagbytes",
        "Bytes of closed local segments not yet copied (RemoteCopyLagBytes)",
        vec![(
            Vec::new(),
            i64::try_from(counts.copy_lag_bytes).unwrap_or(i64::MAX),
        )],
    )
}

fn encode_storage(encoder: &mut DescriptorEncoder<'_>, broker: &dyn BrokerView) -> fmt::Result {
    let StorageRows {
        segments,
        sizes,
        ends,
        starts,
        stable_lags,
        open_transactions,
        follower_lags,
        by_dir,
    } = storage_rows(broker);
    gauge(
        encoder,
        "kafka_log_log_numlogsegments",
        "Segments of a partition's log (NumLogSegments)",
        segments,
    )?;
    gauge(
        encoder,
        "kafka_log_log_size",
        "Bytes of a partition's log (Size)",
        sizes,
    )?;
    gauge(
        encoder,
        "kafka_log_log_logendoffset",
        "A partition's log end offset (LogEndOffset)",
        ends,
    )?;
    gauge(
        encoder,
        "kafka_log_log_logstartoffset",
        "A partition's log start offset (LogStartOffset)",
        starts,
    )?;
    gauge(
        encoder,
        "kafka_cluster_partition_laststableoffsetlag",
        "A partition's high watermark minus its last stable offset: the records read_committed consumers wait for (LastStableOffsetLag)",
        stable_lags,
    )?;
    gauge(
        encoder,
        "strom_log_open_transactions",
        "Transactions open in a partition (records written, no marker yet)",
        open_transactions,
    )?;
    gauge(
        encoder,
        "strom_replica_follower_lag",
        "On a partition's leader: its log end offset minus each follower's, as of that follower's last fetch (offsets)",
        follower_lags,
    )?;
    gauge(
        encoder,
        "strom_log_directory_size_bytes",
        "Bytes of the partition logs in each log directory",
        by_dir
            .into_iter()
            .map(|(dir, bytes)| (vec![("log_dir", dir)], bytes))
            .collect(),
    )
}

/// Kafka's transaction states, in the order the metrics list them.
const TRANSACTION_STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

fn encode_transactions(
    encoder: &mut DescriptorEncoder<'_>,
    broker: &dyn BrokerView,
) -> fmt::Result {
    let transactions = broker.transactions();
    let by_state = TRANSACTION_STATES
        .iter()
        .map(|state| {
            let count = transactions
                .iter()
                .filter(|transaction| transaction.state == *state)
                .count();
            (vec![("state", (*state).to_owned())], count as i64)
        })
        .collect();
    gauge(
        encoder,
        "strom_transaction_coordinator_transactional_ids",
        "Transactional ids this broker coordinates, by state (Ongoing: an open transaction)",
        by_state,
    )
}

fn encode_groups(encoder: &mut DescriptorEncoder<'_>, broker: &dyn BrokerView) -> fmt::Result {
    // An offline coordinator lists no groups.
    let listings = broker.groups();
    let by_state = broker
        .group_states()
        .into_iter()
        .map(|state| {
            let count = listings
                .iter()
                .filter(|listing| listing.state == state)
                .count();
            (vec![("state", state.to_owned())], count as i64)
        })
        .collect();
    gauge(
        encoder,
        "kafka_coordinator_group_groupmetadatamanager_numgroups",
        "Groups this coordinator owns, by state (NumGroups, NumGroupsStable, ...)",
        by_state,
    )?;
    let mut lags = Vec::new();
    let mut committed = Vec::new();
    for listing in &listings {
        for offset in group_lags(broker, &listing.group) {
            let mut labels = partition_labels(&offset.topic, offset.partition);
            labels.insert(0, ("group", listing.group.clone()));
            committed.push((labels.clone(), offset.committed));
            if let Some(lag) = offset.lag() {
                lags.push((labels, lag));
            }
        }
    }
    gauge(
        encoder,
        "kafka_consumergroup_current_offset",
        "A group's committed offset of a partition",
        committed,
    )?;
    gauge(
        encoder,
        "kafka_consumergroup_lag",
        "Records between a group's committed offset and the partition's high watermark",
        lags,
    )
}

/// A registry holding `collector`: what the metrics endpoint encodes.
pub fn registry(collector: BrokerCollector) -> prometheus_client::registry::Registry {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(collector));
    registry
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use strom_protocol::kafka::messages::ApiKey;

    use super::*;
    use crate::exposition::exposition;
    use crate::fake_broker::FakeBroker;

    fn network() -> NetworkCounts {
        NetworkCounts {
            connections_opened: 5,
            connections_closed: 3,
            ..NetworkCounts::default()
        }
    }

    fn scrape(broker: Option<&Arc<FakeBroker>>) -> String {
        let metrics = Arc::new(BrokerMetrics::new(&[ApiKey::Produce], true));
        let slot: Arc<ViewSlot> = Arc::new(OnceLock::new());
        if let Some(broker) = broker {
            let view: Weak<FakeBroker> = Arc::downgrade(broker);
            let _ = slot.set(view as Weak<dyn BrokerView>);
        }
        let registry = registry(BrokerCollector::new(metrics, network, slot));
        exposition(&registry).expect("encodes")
    }

    #[test]
    fn before_the_broker_serves_only_process_and_request_metrics_are_shown() {
        let text = scrape(None);
        assert!(text.contains("\nkafka_server_socket_server_metrics_connections 2\n"));
        assert!(
            text.contains("kafka_network_requestmetrics_requests_total{request=\"Produce\"} 0\n")
        );
        assert!(!text.contains("kafka_server_replicamanager_leadercount"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_gauges_are_computed_from_the_view() {
        let broker = Arc::new(FakeBroker::default());
        let text = scrape(Some(&broker));
        for line in [
            "kafka_server_replicamanager_partitioncount 2",
            "kafka_server_replicamanager_leadercount 1",
            "kafka_server_replicamanager_underreplicatedpartitions 1",
            "kafka_server_replicamanager_underminisrpartitioncount 1",
            "kafka_server_replicamanager_reassigningpartitions 0",
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount 1",
            "kafka_controller_kafkacontroller_globalpartitioncount 2",
            "kafka_server_replicamanager_isrshrinks_total 1",
            "kafka_controller_kafkacontroller_activecontrollercount 1",
            "kafka_server_raft_metrics_current_leader 1",
            "kafka_server_raft_metrics_log_end_offset 42",
            "kafka_controller_kafkacontroller_fencedbrokercount 1",
            "kafka_controller_kafkacontroller_activebrokercount 1",
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"orders\"} 10",
            "kafka_log_log_size{topic=\"orders\",partition=\"0\"} 100",
            "kafka_log_log_logstartoffset{topic=\"orders\",partition=\"0\"} 2",
            "kafka_cluster_partition_laststableoffsetlag{topic=\"orders\",partition=\"0\"} 2",
            "strom_log_open_transactions{topic=\"orders\",partition=\"0\"} 1",
            "strom_transaction_coordinator_transactional_ids{state=\"Ongoing\"} 1",
            "strom_transaction_coordinator_transactional_ids{state=\"Empty\"} 0",
            "strom_replica_follower_lag{topic=\"orders\",partition=\"0\",replica=\"2\"} 5",
            "strom_log_directory_size_bytes{log_dir=\"/data\"} 100",
            "kafka_coordinator_group_groupmetadatamanager_numgroups{state=\"Stable\"} 1",
            "kafka_coordinator_group_groupmetadatamanager_numgroups{state=\"Dead\"} 0",
            "kafka_consumergroup_current_offset{group=\"readers\",topic=\"orders\",partition=\"1\"} 3",
            "kafka_consumergroup_lag{group=\"readers\",topic=\"orders\",partition=\"0\"} 3",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line}");
        }
        // The offline partition has no log figures, a partition not led here
        // no lag, and no offset was committed for partition 2.
        assert!(!text.contains("kafka_log_log_size{topic=\"orders\",partition=\"1\"}"));
        assert!(!text.contains(
            "kafka_consumergroup_lag{group=\"readers\",topic=\"orders\",partition=\"1\"}"
        ));
        assert!(!text.contains("partition=\"2\""));
    }
}
