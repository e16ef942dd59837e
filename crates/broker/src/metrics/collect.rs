//! The Prometheus collector: on each scrape, the counters kept on the hot
//! path and the gauges computed from the broker's state, encoded by
//! `prometheus-client`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use strom_coordinator::GroupState;
use strom_network::metrics::NETWORK;
use strom_protocol::error_code::ErrorCode;

use super::histogram::HistogramSnapshot;
use super::BrokerMetrics;
use crate::handlers::BrokerContext;

/// Where the collector finds the broker once it has started (the listener
/// serves health probes before that).
pub type BrokerSlot = OnceLock<Weak<BrokerContext>>;

/// Labels of one sample.
type Labels = Vec<(&'static str, String)>;

/// Encodes every metric of one broker.
#[derive(Debug)]
pub struct BrokerCollector {
    metrics: Arc<BrokerMetrics>,
    broker: Arc<BrokerSlot>,
}

impl BrokerCollector {
    /// A collector over `metrics` and the broker `broker` will hold.
    pub fn new(metrics: Arc<BrokerMetrics>, broker: Arc<BrokerSlot>) -> BrokerCollector {
        BrokerCollector { metrics, broker }
    }
}

impl Collector for BrokerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        encode_network(&mut encoder)?;
        encode_requests(&mut encoder, &self.metrics)?;
        histogram(
            &mut encoder,
            "kafka_log_logflushstats_logflushrateandtime_seconds",
            "Time of the log flushes made for flush.messages and flush.ms (LogFlushRateAndTimeMs)",
            vec![(Vec::new(), super::LOG_FLUSH_TIME.snapshot())],
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
        encode_topics(&mut encoder, &broker)?;
        encode_partitions(&mut encoder, &broker)?;
        encode_controller(&mut encoder, &broker)?;
        encode_storage(&mut encoder, &broker)?;
        encode_groups(&mut encoder, &broker)
    }
}

fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, u64)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            metric.encode_counter::<NoLabelSet, u64, u64>(&value, None)?;
        } else {
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, u64, u64>(&value, None)?;
        }
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, i64)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            metric.encode_gauge(&value)?;
        } else {
            metric.encode_family(&labels)?.encode_gauge(&value)?;
        }
    }
    Ok(())
}

fn histogram(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, HistogramSnapshot)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, snapshot) in rows {
        if labels.is_empty() {
            encode_snapshot(&mut metric, &snapshot)?;
        } else {
            encode_snapshot(&mut metric.encode_family(&labels)?, &snapshot)?;
        }
    }
    Ok(())
}

fn encode_snapshot(
    metric: &mut prometheus_client::encoding::MetricEncoder<'_>,
    snapshot: &HistogramSnapshot,
) -> fmt::Result {
    metric.encode_histogram::<NoLabelSet>(
        snapshot.sum_seconds,
        snapshot.count,
        &snapshot.buckets,
        None,
    )
}

fn one(value: u64) -> Vec<(Labels, u64)> {
    vec![(Vec::new(), value)]
}

fn encode_network(encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let counts = NETWORK.counts();
    let open = counts
        .connections_opened
        .saturating_sub(counts.connections_closed);
    gauge(
        encoder,
        "kafka_server_socket_server_metrics_connections",
        "Open client connections",
        vec![(Vec::new(), i64::try_from(open).unwrap_or(i64::MAX))],
    )?;
    let counters: [(&str, &str, u64); 6] = [
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
    ];
    for (name, help, value) in counters {
        counter(encoder, name, help, one(value))?;
    }
    Ok(())
}

fn request_label(api: &super::requests::ApiMetrics) -> Labels {
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
    type Stage = fn(&super::requests::ApiMetrics) -> &super::histogram::AtomicHistogram;
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

fn encode_topics(encoder: &mut DescriptorEncoder<'_>, broker: &BrokerContext) -> fmt::Result {
    let topics = broker.replicas.topic_metrics().snapshot();
    type Field = fn(&super::topics::TopicCounts) -> u64;
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

fn partition_counts(broker: &BrokerContext) -> PartitionCounts {
    let image = broker.controller.image();
    let node_id = broker.config.node_id;
    let mut counts = PartitionCounts::default();
    for topic in image.topics() {
        let min_isr = broker.replicas.min_insync_replicas(&image, &topic.name);
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
            if partition.is_reassigning() {
                counts.reassigning += 1;
            }
            if partition.isr.len() < min_isr {
                counts.under_min_isr += 1;
            }
        }
    }
    counts
}

fn encode_partitions(encoder: &mut DescriptorEncoder<'_>, broker: &BrokerContext) -> fmt::Result {
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
    let (shrinks, expands) = broker.replicas.isr_changes();
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

fn encode_controller(encoder: &mut DescriptorEncoder<'_>, broker: &BrokerContext) -> fmt::Result {
    let image = broker.controller.image();
    let fenced = image.brokers().filter(|b| b.fenced).count();
    let active = image.brokers().filter(|b| !b.fenced).count();
    let quorum = broker.controller.local_quorum_status();
    let offset = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    // A single node is its own quorum: always active, at its image's end.
    let (is_active, leader, epoch, high_watermark, log_end) = match &quorum {
        None => {
            let end = offset(image.next_offset());
            (true, i64::from(broker.config.node_id), 0, end, end)
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
            image.topic_count() as i64,
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
    quorum: Option<&strom_controller::quorum::QuorumStatus>,
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

fn encode_storage(encoder: &mut DescriptorEncoder<'_>, broker: &BrokerContext) -> fmt::Result {
    let mut segments = Vec::new();
    let mut sizes = Vec::new();
    let mut ends = Vec::new();
    let mut starts = Vec::new();
    let mut follower_lags = Vec::new();
    let mut by_dir: BTreeMap<String, i64> = BTreeMap::new();
    for replica in broker.replicas.hosted() {
        let tp = &replica.topic_partition;
        for (follower, lag) in replica.follower_lags() {
            let mut labels = partition_labels(&tp.topic, tp.partition);
            labels.push(("replica", follower.to_string()));
            follower_lags.push((labels, lag));
        }
        // An offline partition has no figures to report.
        let Ok((count, size, end, start, dir)) = replica.with_log(|log| {
            (
                log.segment_count(),
                log.size_bytes(),
                log.log_end_offset(),
                log.log_start_offset(),
                log.dir().parent().map(|p| p.display().to_string()),
            )
        }) else {
            continue;
        };
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let labels = partition_labels(&tp.topic, tp.partition);
        segments.push((labels.clone(), count as i64));
        sizes.push((labels.clone(), size));
        ends.push((labels.clone(), end));
        starts.push((labels, start));
        *by_dir.entry(dir.unwrap_or_default()).or_default() += size;
    }
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

fn encode_groups(encoder: &mut DescriptorEncoder<'_>, broker: &BrokerContext) -> fmt::Result {
    // An offline coordinator lists no groups.
    let listings = broker
        .groups
        .coordinator
        .list_groups(&[])
        .unwrap_or_default();
    let states = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];
    let by_state = states
        .iter()
        .map(|state| {
            let count = listings.iter().filter(|(_, _, s)| s == state).count();
            (vec![("state", state.kafka_name().to_owned())], count as i64)
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
    for (group, _, _) in &listings {
        for offset in super::lag::group_lags(broker, group) {
            let mut labels = partition_labels(&offset.topic, offset.partition);
            labels.insert(0, ("group", group.clone()));
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

/// Prometheus' classic text format (0.0.4) of an OpenMetrics exposition,
/// for consumers that do not negotiate OpenMetrics (`promtool check
/// metrics`, `curl`): the two formats differ, for what this exposition
/// holds, only in that a classic counter's `HELP` and `TYPE` lines name the
/// series with its `_total` suffix, and in OpenMetrics' closing `# EOF`.
pub fn classic_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.insert(name.to_owned());
        }
    }
    let mut classic = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        classic.push_str(renamed.as_deref().unwrap_or(line));
        classic.push('\n');
    }
    classic
}

/// The text exposition of `registry` (OpenMetrics' text format, which
/// Prometheus negotiates; it ends with `# EOF`).
pub fn exposition(registry: &prometheus_client::registry::Registry) -> Result<String, fmt::Error> {
    let mut text = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::classic_text;

    #[test]
    fn classic_text_names_counters_with_their_total_suffix() {
        let openmetrics = "# HELP requests Requests.\n# TYPE requests counter\nrequests_total{api=\"Produce\"} 3\n# HELP open Open.\n# TYPE open gauge\nopen 1\n# EOF\n";
        assert_eq!(
            classic_text(openmetrics),
            "# HELP requests_total Requests.\n# TYPE requests_total counter\nrequests_total{api=\"Produce\"} 3\n# HELP open Open.\n# TYPE open gauge\nopen 1\n"
        );
    }
}
