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
//! - `GET /api/topics/NAME/records?partition=P&limit=N`: the last N
//!   (at most [`MAX_RECORDS`]) committed records of a partition, keys and
//!   values cut at [`MAX_SHOWN_BYTES`];
//! - `GET /api/groups`: groups with state and total lag;
//! - `GET /api/groups/ID`: members with their assignments, and the lag per
//!   partition;
//! - `GET /api/transactions`: the transactional ids this broker
//!   coordinates, with producer id, state and the start of an open
//!   transaction;
//! - `GET /api/history`: samples of the counters and lag of the last
//!   [`HISTORY_SAMPLES`] × [`SAMPLE_INTERVAL`], for the charts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use strom_protocol::kafka::messages::ConsumerProtocolAssignment;
use strom_protocol::kafka::protocol::Decodable;
use strom_protocol::records::RecordBatches;

use crate::lag::group_lags;
use crate::view::{BrokerView, ClusterState, QuorumReplica, ViewSlot};

/// The console page.
pub const PAGE: &str = include_str!("console.html");

/// Most records `/api/topics/NAME/records` returns.
pub const MAX_RECORDS: usize = 100;

/// Bytes of a key, value or header value shown; longer ones are cut.
pub const MAX_SHOWN_BYTES: usize = 1024;

/// Bytes read from a partition for the records view.
const MAX_READ_BYTES: u64 = 1 << 20;

/// How often the history is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);

/// Samples kept: ten minutes.
pub const HISTORY_SAMPLES: usize = 300;

/// Answers `/api/...`: `None` for an unknown path or resource.
pub(crate) fn api(
    broker: &dyn BrokerView,
    history: &History,
    path: &str,
    query: Option<&str>,
) -> Option<Value> {
    let rest = path.strip_prefix("/api/")?;
    let parts: Vec<String> = rest.split('/').map(percent_decode).collect::<Option<_>>()?;
    match parts
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["cluster"] => Some(cluster(broker)),
        ["topics"] => Some(topics(broker)),
        ["topics", name] => topic(broker, name),
        ["topics", name, "records"] => records(broker, name, query),
        ["groups"] => Some(groups(broker)),
        ["groups", id] => group(broker, id),
        ["transactions"] => Some(transactions(broker)),
        ["history"] => Some(history.to_json()),
        _ => None,
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

fn cluster(broker: &dyn BrokerView) -> Value {
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
    json!({
        "cluster_id": broker.cluster_id(),
        "node_id": broker.node_id(),
        "brokers": brokers,
        "controller": controller(broker, &cluster),
        "topics": cluster.topic_count,
        "partitions": cluster.partition_count,
    })
}

fn topics(broker: &dyn BrokerView) -> Value {
    let topics = broker.topics();
    let counts: BTreeMap<String, _> = broker.topic_counts().into_iter().collect();
    let list: Vec<Value> = topics
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
                "size_bytes": size,
                "messages_in": count.messages_in,
                "bytes_in": count.bytes_in,
                "bytes_out": count.bytes_out,
            })
        })
        .collect();
    json!({ "topics": list })
}

fn topic(broker: &dyn BrokerView, name: &str) -> Option<Value> {
    let topic = broker.topic(name)?;
    let partitions: Vec<Value> = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, partition)| {
            // An offline partition shows no log figures.
            let log = broker.led_partition_log(name, index as i32);
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
                "size_bytes": log.as_ref().map(|l| l.size_bytes),
                "segments": log.as_ref().map(|l| l.segments),
            })
        })
        .collect();
    let configs = broker.topic_configs(name);
    Some(json!({
        "name": name,
        "id": topic.id,
        "partitions": partitions,
        "configs": configs,
    }))
}

fn query_value<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, value)| value)
}

fn records(broker: &dyn BrokerView, name: &str, query: Option<&str>) -> Option<Value> {
    let partition: i32 = query_value(query, "partition").map_or(Some(0), |p| p.parse().ok())?;
    let limit: usize = query_value(query, "limit")
        .map_or(Some(20), |l| l.parse().ok())?
        .min(MAX_RECORDS);
    let log = broker.led_partition_log(name, partition)?;
    let (log_start, high_watermark) = (log.log_start_offset, log.high_watermark);
    let from = (high_watermark - limit as i64).max(log_start);
    let mut shown = Vec::new();
    if from < high_watermark {
        let bytes = broker.read_records(name, partition, from, MAX_READ_BYTES)?;
        collect_records(bytes, from, high_watermark, &mut shown);
    }
    let first = shown.len().saturating_sub(limit);
    Some(json!({
        "topic": name,
        "partition": partition,
        "high_watermark": high_watermark,
        "records": shown.split_off(first),
    }))
}

/// Appends the records in `[from, until)` of `bytes` as JSON.
fn collect_records(bytes: Bytes, from: i64, until: i64, shown: &mut Vec<Value>) {
    for batch in RecordBatches::new(bytes).map_while(Result::ok) {
        let Ok(records) = batch.records_with_limit(4 * MAX_READ_BYTES as usize) else {
            continue;
        };
        for record in records.map_while(Result::ok) {
            let offset = record.offset(batch.base_offset());
            if offset < from || offset >= until {
                continue;
            }
            let headers: Vec<Value> = record
                .headers()
                .iter()
                .map(|h| json!({ "key": shown_bytes(Some(h.key)), "value": shown_bytes(h.value) }))
                .collect();
            shown.push(json!({
                "offset": offset,
                "timestamp_ms": batch.record_timestamp(&record),
                "key": shown_bytes(record.key()),
                "value": shown_bytes(record.value()),
                "value_bytes": record.value().map(<[u8]>::len),
                "headers": headers,
            }));
        }
    }
}

/// Bytes as text when they are UTF-8, else as hex; cut at
/// [`MAX_SHOWN_BYTES`].
fn shown_bytes(bytes: Option<&[u8]>) -> Value {
    let Some(bytes) = bytes else {
        return Value::Null;
    };
    let cut = &bytes[..bytes.len().min(MAX_SHOWN_BYTES)];
    let text = match std::str::from_utf8(cut) {
        Ok(text) => text.to_owned(),
        Err(_) => format!(
            "0x{}",
            cut.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    };
    json!({ "text": text, "truncated": bytes.len() > cut.len() })
}

/// The transactional ids this broker coordinates.
fn transactions(broker: &dyn BrokerView) -> Value {
    let list: Vec<Value> = broker
        .transactions()
        .into_iter()
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

fn groups(broker: &dyn BrokerView) -> Value {
    // An offline coordinator lists no groups.
    let list: Vec<Value> = broker
        .groups()
        .into_iter()
        .map(|listing| {
            let lag: i64 = group_lags(broker, &listing.group)
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

fn group(broker: &dyn BrokerView, id: &str) -> Option<Value> {
    let description = broker.describe_group(id)?;
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
    let offsets: Vec<Value> = group_lags(broker, id)
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
    Some(json!({
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

/// Decodes `%XX` escapes of a path segment; `None` if malformed or not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(byte);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// One sample of the counters the charts draw.
#[derive(Debug, Clone)]
struct Sample {
    time_ms: i64,
    /// topic → (messages in, bytes in, bytes out), user topics only.
    topics: BTreeMap<String, (u64, u64, u64)>,
    /// group → total lag.
    lag: BTreeMap<String, i64>,
}

/// The last [`HISTORY_SAMPLES`] samples, taken every [`SAMPLE_INTERVAL`].
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    fn record(&self, broker: &dyn BrokerView) {
        let topics = broker
            .topic_counts()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("__"))
            .map(|(name, c)| (name, (c.messages_in, c.bytes_in, c.bytes_out)))
            .collect();
        let lag = broker
            .groups()
            .into_iter()
            .map(|listing| {
                let total = group_lags(broker, &listing.group)
                    .iter()
                    .filter_map(|o| o.lag())
                    .sum();
                (listing.group, total)
            })
            .collect();
        let time_ms = broker.now_ms();
        let mut samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if samples.len() == HISTORY_SAMPLES {
            samples.pop_front();
        }
        samples.push_back(Sample {
            time_ms,
            topics,
            lag,
        });
    }

    fn to_json(&self) -> Value {
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let list: Vec<Value> = samples
            .iter()
            .map(|sample| {
                let topics: BTreeMap<&String, Value> = sample
                    .topics
                    .iter()
                    .map(|(name, (messages, bytes_in, bytes_out))| {
                        (name, json!({ "messages_in": messages, "bytes_in": bytes_in, "bytes_out": bytes_out }))
                    })
                    .collect();
                json!({ "time_ms": sample.time_ms, "topics": topics, "lag": sample.lag })
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
mod tests {
    use super::*;

    fn get(path: &str, query: Option<&str>) -> Option<Value> {
        api(
            &crate::fake_broker::FakeBroker::default(),
            &History::default(),
            path,
            query,
        )
    }

    #[test]
    fn the_api_answers_from_the_view() {
        let cluster = get("/api/cluster", None).expect("cluster");
        assert_eq!(cluster["cluster_id"], "fake-cluster");
        assert_eq!(cluster["partitions"], 2);
        assert_eq!(cluster["brokers"][1]["fenced"], true);
        assert_eq!(
            cluster["brokers"][0]["endpoints"][0],
            "PLAINTEXT://127.0.0.1:9092"
        );
        assert_eq!(
            cluster["controller"]["mode"],
            "embedded single-node controller"
        );
        assert_eq!(cluster["controller"]["metadata_log_end_offset"], 42);
        let topics = get("/api/topics", None).expect("topics");
        assert_eq!(topics["topics"][0]["size_bytes"], 100);
        assert_eq!(topics["topics"][0]["messages_in"], 10);
        let topic = get("/api/topics/orders", None).expect("topic");
        assert_eq!(topic["partitions"][0]["high_watermark"], 10);
        assert_eq!(topic["partitions"][1]["high_watermark"], Value::Null);
        assert_eq!(topic["configs"]["min.insync.replicas"], "2");
        let records = get("/api/topics/orders/records", Some("partition=0")).expect("records");
        assert_eq!(records["high_watermark"], 10);
        assert_eq!(records["records"], json!([]));
        let groups = get("/api/groups", None).expect("groups");
        assert_eq!(groups["groups"][0]["lag"], 3);
        let group = get("/api/groups/readers", None).expect("group");
        assert_eq!(group["state"], "Stable");
        assert_eq!(group["offsets"][1]["lag"], Value::Null);
        let transactions = get("/api/transactions", None).expect("transactions");
        assert_eq!(transactions["transactions"][0]["state"], "Ongoing");
        assert_eq!(transactions["transactions"][0]["producer_id"], 4000);
        let topic = get("/api/topics/orders", None).expect("topic");
        assert_eq!(topic["partitions"][0]["last_stable_offset"], 8);
        assert_eq!(topic["partitions"][0]["open_transactions"], 1);
        for missing in [
            "/api/topics/nope",
            "/api/topics/orders/records?partition=1",
            "/api/groups/nope%zz",
            "/api/nothing",
        ] {
            let (path, query) = missing
                .split_once('?')
                .map_or((missing, None), |(path, query)| (path, Some(query)));
            assert_eq!(get(path, query), None, "{missing}");
        }
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        assert_eq!(percent_decode("my%20group").as_deref(), Some("my group"));
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decode("bad%2"), None);
        assert_eq!(percent_decode("bad%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn shown_bytes_are_text_or_hex_and_cut() {
        assert_eq!(shown_bytes(None), Value::Null);
        assert_eq!(shown_bytes(Some(b"hi"))["text"], "hi");
        assert_eq!(shown_bytes(Some(&[0xff, 0x00]))["text"], "0xff00");
        let long = vec![b'a'; MAX_SHOWN_BYTES + 1];
        let shown = shown_bytes(Some(&long));
        assert_eq!(shown["truncated"], true);
        assert_eq!(shown["text"].as_str().map(str::len), Some(MAX_SHOWN_BYTES));
    }
}
