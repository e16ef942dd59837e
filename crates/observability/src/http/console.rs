//! The read-only web console: one HTML page (embedded in the binary, plain
//! JavaScript, nothing fetched from elsewhere) and the JSON API it reads.
//! Every path is listed in docs/operations.md.
//!
//! - `GET /console`: the page;
//! - `GET /api/cluster`: cluster id, brokers, the controller (and the
//!   metadata quorum in a cluster);
//! - `GET /api/topics`: topics with partition counts, sizes and counters;
//! - `GET /api/topics/NAME`: partitions (leader, replicas, ISR, offsets,
//!   size, segments) and the topic's configs;
//! - `GET /api/topics/NAME/records?...`: the message browser (records
//!   from an offset, a timestamp or the newest, paged, filtered; see
//!   [`super::browse`]), and `GET /api/topics/NAME/records/raw?...` one
//!   record's whole key or value;
//! - `GET /api/groups`: groups with state and total lag;
//! - `GET /api/groups/ID`: members with their assignments, and the lag per
//!   partition;
//! - `GET /api/transactions`: the transactional ids this broker
//!   coordinates, with producer id, state and the start of an open
//!   transaction;
//! - `GET /api/history`: samples of the counters and lag of the last
//!   [`HISTORY_SAMPLES`] × [`SAMPLE_INTERVAL`], for the charts.
//!
//! Behind an authenticating listener every view is cut to what the
//! viewer's ACLs show a Kafka client of principal `User:NAME` (`Access`):
//! topics need DESCRIBE on the topic (Metadata, ListOffsets), their
//! configs DESCRIBE_CONFIGS (DescribeConfigs), their records READ (Fetch;
//! 403 without), their sizes and segments DESCRIBE on the cluster
//! (DescribeLogDirs); groups need DESCRIBE on the group (ListGroups,
//! DescribeGroups; 403 without), and show offsets and lag of the topics
//! the viewer may describe only (OffsetFetch); transactional ids need
//! DESCRIBE on the id (ListTransactions); the cluster view shows brokers
//! and the active controller to every viewer (DescribeCluster) and the
//! metadata quorum with DESCRIBE on the cluster (DescribeQuorum). A topic
//! or group the viewer may not describe is 403 whether it exists or not.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use strom_protocol::kafka::messages::ConsumerProtocolAssignment;
use strom_protocol::kafka::protocol::Decodable;

use strom_protocol::acl::{operation, resource};

use super::access::percent_decode;
pub(crate) use super::access::{Access, Answer};
use crate::lag::{group_lags, PartitionLag};
use crate::view::{BrokerView, ClusterState, QuorumReplica, ViewSlot};

/// The console page.
pub const PAGE: &str = include_str!("console.html");

/// How often the history is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);

/// Samples kept: ten minutes.
pub const HISTORY_SAMPLES: usize = 300;

/// Answers `/api/...`.
pub(crate) fn api(
    access: &Access<'_>,
    history: &History,
    path: &str,
    query: Option<&str>,
) -> Answer {
    let Some(rest) = path.strip_prefix("/api/") else {
        return Answer::NotFound;
    };
    let Some(parts) = rest
        .split('/')
        .map(percent_decode)
        .collect::<Option<Vec<String>>>()
    else {
        return Answer::NotFound;
    };
    match parts
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["cluster"] => Answer::Json(cluster(access)),
        ["topics"] => Answer::Json(topics(access)),
        ["topics", name] => topic(access, name),
        ["topics", name, "records"] => super::browse::records(access, name, query),
        ["topics", name, "records", "raw"] => super::browse::raw(access, name, query),
        ["groups"] => Answer::Json(groups(access)),
        ["groups", id] => group(access, id),
        ["transactions"] => Answer::Json(transactions(access)),
        ["history"] => Answer::Json(history.to_json(access)),
        _ => Answer::NotFound,
    }
}

/// The controller as this node sees it: the embedded one, or the metadata
/// quorum (each replica's log end is known on the active controller only).
fn controller(broker: &dyn BrokerView, cluster: &ClusterState) -> Value {
    let Some(status) = broker.quorum() else {
        return json!({
            "mode": "embedded single-node controller",
            "active_controller": broker.node_id(),
            "metadata_log_end_offset": cluster.metadata_end_offset,
        });
    };
    let replicas = |replicas: &[QuorumReplica]| {
        replicas
            .iter()
            .map(|replica| json!({ "node_id": replica.node_id, "log_end_offset": replica.log_end_offset }))
            .collect::<Vec<_>>()
    };
    json!({
        "mode": format!("metadata quorum of {} voters", status.voters.len()),
        "active_controller": status.leader,
        "metadata_log_end_offset": cluster.metadata_end_offset,
        "quorum": {
            "epoch": status.epoch,
            "high_watermark": status.high_watermark,
            "answered_by_active_controller": status.is_active,
            "voters": replicas(&status.voters),
            "observers": replicas(&status.observers),
        },
    })
}

fn cluster(access: &Access<'_>) -> Value {
    let broker = access.broker;
    let cluster = broker.cluster();
    let brokers: Vec<Value> = cluster
        .brokers
        .iter()
        .map(|b| {
            json!({
                "id": b.broker_id,
                "endpoints": b.endpoints.iter().map(|e| format!("{}://{}:{}", e.name, e.host, e.port)).collect::<Vec<_>>(),
                "rack": b.rack,
                "fenced": b.fenced,
                "epoch": b.epoch,
            })
        })
        .collect();
    let (topics, partitions) = if access.viewer.is_some() {
        let visible = access.topics();
        let partitions: usize = visible.iter().map(|topic| topic.partitions.len()).sum();
        (visible.len(), partitions)
    } else {
        (cluster.topic_count, cluster.partition_count)
    };
    let controller = if access.may_describe_cluster() {
        controller(broker, &cluster)
    } else {
        let active = broker.quorum().map_or(Some(broker.node_id()), |status| {
            status.leader.and_then(|leader| i32::try_from(leader).ok())
        });
        json!({
            "mode": "details need DESCRIBE on the cluster",
            "active_controller": active,
            "metadata_log_end_offset": null,
        })
    };
    json!({
        "cluster_id": broker.cluster_id(),
        "node_id": broker.node_id(),
        "brokers": brokers,
        "controller": controller,
        "topics": topics,
        "partitions": partitions,
    })
}

fn topics(access: &Access<'_>) -> Value {
    let broker = access.broker;
    let sizes = access.may_describe_cluster();
    let counts: BTreeMap<String, _> = broker.topic_counts().into_iter().collect();
    let list: Vec<Value> = access
        .topics()
        .iter()
        .map(|topic| {
            let size: u64 = (0..topic.partitions.len())
                .filter_map(|index| broker.led_partition_log(&topic.name, index as i32))
                .map(|log| log.size_bytes)
                .sum();
            let count = counts.get(&topic.name).copied().unwrap_or_default();
            json!({
                "name": topic.name,
                "id": topic.id,
                "partitions": topic.partitions.len(),
                "internal": topic.name.starts_with("__"),
                "size_bytes": sizes.then_some(size),
                "messages_in": count.messages_in,
                "bytes_in": count.bytes_in,
                "bytes_out": count.bytes_out,
            })
        })
        .collect();
    json!({ "topics": list })
}

fn topic(access: &Access<'_>, name: &str) -> Answer {
    if !access.may_describe_topic(name) {
        return Answer::Forbidden;
    }
    let broker = access.broker;
    let Some(topic) = broker.topic(name) else {
        return Answer::NotFound;
    };
    let sizes = access.may_describe_cluster();
    let partitions: Vec<Value> = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, partition)| {
            // An offline partition shows no log figures.
            let log = broker.led_partition_log(name, index as i32);
            let sized = log.as_ref().filter(|_| sizes);
            json!({
                "partition": index,
                "leader": partition.leader,
                "leader_epoch": partition.leader_epoch,
                "replicas": partition.replicas,
                "isr": partition.isr,
                "log_start_offset": log.as_ref().map(|l| l.log_start_offset),
                "log_end_offset": log.as_ref().map(|l| l.log_end_offset),
                "high_watermark": log.as_ref().map(|l| l.high_watermark),
                "last_stable_offset": log.as_ref().map(|l| l.last_stable_offset),
                "open_transactions": log.as_ref().map(|l| l.open_transactions),
                "size_bytes": sized.map(|l| l.size_bytes),
                "segments": sized.map(|l| l.segments),
            })
        })
        .collect();
    let (configs, entries) = if access.may(operation::DESCRIBE_CONFIGS, resource::TOPIC, name) {
        let entries: Vec<Value> = broker
            .topic_config_entries(name)
            .into_iter()
            .map(
                |entry| json!({ "name": entry.name, "value": entry.value, "source": entry.source }),
            )
            .collect();
        (broker.topic_configs(name), entries)
    } else {
        (BTreeMap::new(), Vec::new())
    };
    Answer::Json(json!({
        "name": name,
        "id": topic.id,
        "partitions": partitions,
        "configs": configs,
        "config_entries": entries,
    }))
}

/// The transactional ids this broker coordinates.
fn transactions(access: &Access<'_>) -> Value {
    let list: Vec<Value> = access
        .broker
        .transactions()
        .into_iter()
        .filter(|transaction| {
            access.may(
                operation::DESCRIBE,
                resource::TRANSACTIONAL_ID,
                &transaction.transactional_id,
            )
        })
        .map(|transaction| {
            json!({
                "transactional_id": transaction.transactional_id,
                "producer_id": transaction.producer_id,
                "state": transaction.state,
                "start_timestamp_ms": (transaction.start_timestamp_ms >= 0)
                    .then_some(transaction.start_timestamp_ms),
            })
        })
        .collect();
    json!({ "transactions": list })
}

fn groups(access: &Access<'_>) -> Value {
    // An offline coordinator lists no groups.
    let list: Vec<Value> = access
        .broker
        .groups()
        .into_iter()
        .filter(|listing| access.may_describe_group(&listing.group))
        .map(|listing| {
            let lag: i64 = access
                .group_lags(&listing.group)
                .iter()
                .filter_map(|offset| offset.lag())
                .sum();
            json!({
                "group": listing.group,
                "protocol_type": listing.protocol_type,
                "state": listing.state,
                "lag": lag,
            })
        })
        .collect();
    json!({ "groups": list })
}

fn group(access: &Access<'_>, id: &str) -> Answer {
    if !access.may_describe_group(id) {
        return Answer::Forbidden;
    }
    let Some(description) = access.broker.describe_group(id) else {
        return Answer::NotFound;
    };
    let members: Vec<Value> = description
        .members
        .iter()
        .map(|member| {
            json!({
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "assignment": assignment(&description.protocol_type, &member.assignment),
            })
        })
        .collect();
    let offsets: Vec<Value> = access
        .group_lags(id)
        .iter()
        .map(|offset| {
            json!({
                "topic": offset.topic,
                "partition": offset.partition,
                "committed": offset.committed,
                "high_watermark": offset.high_watermark,
                "lag": offset.lag(),
            })
        })
        .collect();
    Answer::Json(json!({
        "group": id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol_name,
        "members": members,
        "offsets": offsets,
    }))
}

/// A consumer group member's assignment (topic → partitions), decoded from
/// the consumer protocol; `null` for other protocols or undecodable bytes.
fn assignment(protocol_type: &str, bytes: &Bytes) -> Value {
    if protocol_type != "consumer" || bytes.len() < 2 {
        return Value::Null;
    }
    let mut buffer = bytes.clone();
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    bytes::Buf::advance(&mut buffer, 2);
    let Ok(decoded) = ConsumerProtocolAssignment::decode(&mut buffer, version.clamp(0, 3)) else {
        return Value::Null;
    };
    let topics: BTreeMap<String, Vec<i32>> = decoded
        .assigned_partitions
        .iter()
        .map(|topic| (topic.topic.to_string(), topic.partitions.clone()))
        .collect();
    json!(topics)
}

/// One sample of the counters the charts draw.
#[derive(Debug, Clone)]
struct Sample {
    time_ms: i64,
    /// topic → (messages in, bytes in, bytes out), user topics only.
    topics: BTreeMap<String, (u64, u64, u64)>,
    /// group → topic → lag, so that a viewer's chart sums the topics it
    /// may describe only.
    lag: BTreeMap<String, BTreeMap<String, i64>>,
}

/// The last [`HISTORY_SAMPLES`] samples, taken every [`SAMPLE_INTERVAL`].
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

/// Each name's lag summed over its partitions.
fn lag_by_topic(lags: &[PartitionLag]) -> BTreeMap<String, i64> {
    let mut by_topic = BTreeMap::new();
    for lag in lags {
        if let Some(value) = lag.lag() {
            *by_topic.entry(lag.topic.clone()).or_insert(0) += value;
        }
    }
    by_topic
}

impl History {
    fn record(&self, broker: &dyn BrokerView) {
        let topics: BTreeMap<String, (u64, u64, u64)> = broker
            .topic_counts()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("__"))
            .map(|(name, c)| (name, (c.messages_in, c.bytes_in, c.bytes_out)))
            .collect();
        let lag = broker
            .groups()
            .into_iter()
            .map(|listing| {
                let by_topic = lag_by_topic(&group_lags(broker, &listing.group));
                (listing.group, by_topic)
            })
            .collect();
        let time_ms = broker.now_ms();
        let mut samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if samples.is_empty() {
            // The counters start at zero with the broker: a zero sample one
            // interval before the first keeps what was counted before it
            // (a broker written to as soon as it started) in the rates.
            let interval_ms = i64::try_from(SAMPLE_INTERVAL.as_millis()).unwrap_or(i64::MAX);
            samples.push_back(Sample {
                time_ms: time_ms.saturating_sub(interval_ms),
                topics: topics
                    .keys()
                    .map(|name| (name.clone(), (0, 0, 0)))
                    .collect(),
                lag: BTreeMap::new(),
            });
        }
        if samples.len() == HISTORY_SAMPLES {
            samples.pop_front();
        }
        samples.push_back(Sample {
            time_ms,
            topics,
            lag,
        });
    }

    /// The samples as the viewer of `access` may see them: the topics it
    /// may describe, the groups it may describe with their lag summed
    /// over those topics. Each name is asked about once.
    fn to_json(&self, access: &Access<'_>) -> Value {
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut topic_allowed: BTreeMap<&str, bool> = BTreeMap::new();
        let mut group_allowed: BTreeMap<&str, bool> = BTreeMap::new();
        for sample in samples.iter() {
            let lag_topics = sample.lag.values().flat_map(BTreeMap::keys);
            for topic in sample.topics.keys().chain(lag_topics) {
                topic_allowed
                    .entry(topic)
                    .or_insert_with(|| access.may_describe_topic(topic));
            }
            for group in sample.lag.keys() {
                group_allowed
                    .entry(group)
                    .or_insert_with(|| access.may_describe_group(group));
            }
        }
        let shown = |allowed: &BTreeMap<&str, bool>, name: &str| allowed.get(name) == Some(&true);
        let list: Vec<Value> = samples
            .iter()
            .map(|sample| {
                let topics: BTreeMap<&String, Value> = sample
                    .topics
                    .iter()
                    .filter(|(name, _)| shown(&topic_allowed, name))
                    .map(|(name, (messages, bytes_in, bytes_out))| {
                        (name, json!({ "messages_in": messages, "bytes_in": bytes_in, "bytes_out": bytes_out }))
                    })
                    .collect();
                let lag: BTreeMap<&String, i64> = sample
                    .lag
                    .iter()
                    .filter(|(group, _)| shown(&group_allowed, group))
                    .map(|(group, by_topic)| {
                        let total = by_topic
                            .iter()
                            .filter(|(topic, _)| shown(&topic_allowed, topic))
                            .map(|(_, lag)| lag)
                            .sum();
                        (group, total)
                    })
                    .collect();
                json!({ "time_ms": sample.time_ms, "topics": topics, "lag": lag })
            })
            .collect();
        json!({ "interval_ms": SAMPLE_INTERVAL.as_millis(), "samples": list })
    }
}

/// Samples the broker into `history` every [`SAMPLE_INTERVAL`] while it
/// runs. A sample reads counters and offsets in memory, so it runs on the
/// async worker: aborting the task then surely drops its handle on the
/// broker (which shutdown needs gone before it closes the logs).
pub(crate) async fn sample_history(
    history: std::sync::Arc<History>,
    broker: std::sync::Arc<ViewSlot>,
) {
    let mut interval = tokio::time::interval(SAMPLE_INTERVAL);
    loop {
        interval.tick().await;
        if let Some(broker) = broker.get().and_then(Weak::upgrade) {
            history.record(broker.as_ref());
        }
    }
}

#[cfg(test)]
#[path = "console_tests.rs"]
mod tests;
