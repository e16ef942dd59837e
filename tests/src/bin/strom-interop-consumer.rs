//! `strom-interop-consumer`: a strom-consumer group member driven by the
//! Python interop suite.
//!
//! It subscribes to the given topics (or, with `--assign`, takes every
//! partition of them manually) and prints one JSON object per line on
//! stdout: `{"event":"record","topic":..,"partition":..,"offset":..,
//! "key":..,"value":..,"time_ms":..}` for each record (key and value as
//! UTF-8, lossy; null when absent), `assigned` / `revoked` / `lost` with the
//! partitions of each rebalance callback, `started` once the consumer
//! exists, `fetch_sessions` (broker id to the KIP-227 session id it held,
//! 0 for none) when it stops and `closed` after a clean close. After each poll it prints the
//! batch and then commits what it printed synchronously. While the group
//! rebalances the commit is refused (`RebalanceInProgress`) and retried
//! after the next poll; a partition that moves away is committed through the
//! revocation callback first. So every printed record is committed before
//! its partition can move to another member.
//! It stops, closing cleanly (LeaveGroup), when stdin is closed, on
//! SIGTERM or SIGINT, or after `--max-records` records.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::{json, Value};
use strom_consumer::{
    Consumer, ConsumerConfig, ConsumerError, ConsumerRecord, OffsetAndMetadata, RebalanceListener,
    TopicPartition,
};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Command line of the interop consumer.
#[derive(Debug, Parser)]
#[command(about = "A strom-consumer group member printing records as JSON lines")]
struct Args {
    /// `bootstrap.servers`.
    #[arg(long)]
    bootstrap: String,
    /// `group.id` (required unless `--assign`).
    #[arg(long)]
    group: Option<String>,
    /// Topics to subscribe to.
    #[arg(long = "topic", required = true)]
    topics: Vec<String>,
    /// Assign every partition of the topics instead of subscribing.
    #[arg(long)]
    assign: bool,
    /// Stop after this many records.
    #[arg(long)]
    max_records: Option<u64>,
    /// Extra consumer properties as `key=value` (Kafka names).
    #[arg(long = "property", value_parser = parse_property)]
    properties: Vec<(String, String)>,
}

fn parse_property(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("expected key=value, got {text}"))
}

/// The offsets of printed records not committed yet, by partition.
type Uncommitted = Arc<Mutex<BTreeMap<TopicPartition, OffsetAndMetadata>>>;

fn locked(
    uncommitted: &Uncommitted,
) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, OffsetAndMetadata>> {
    uncommitted
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Prints the rebalance callbacks, and hands the consumer what was printed
/// but not committed of the partitions it gives up.
struct PrintingListener {
    uncommitted: Uncommitted,
}

impl RebalanceListener for PrintingListener {
    fn on_partitions_revoked(
        &mut self,
        revoked: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        emit(json!({"event": "revoked", "partitions": partitions_json(revoked)}));
        let mut uncommitted = locked(&self.uncommitted);
        revoked
            .iter()
            .filter_map(|tp| uncommitted.remove_entry(tp))
            .collect()
    }

    fn on_partitions_assigned(&mut self, assigned: &[TopicPartition]) {
        emit(json!({"event": "assigned", "partitions": partitions_json(assigned)}));
    }

    fn on_partitions_lost(&mut self, lost: &[TopicPartition]) {
        emit(json!({"event": "lost", "partitions": partitions_json(lost)}));
        let mut uncommitted = locked(&self.uncommitted);
        for tp in lost {
            uncommitted.remove(tp);
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

fn partitions_json(partitions: &[TopicPartition]) -> Vec<Value> {
    partitions
        .iter()
        .map(|tp| json!({"topic": &*tp.topic, "partition": tp.partition}))
        .collect()
}

fn emit(mut event: Value) {
    if let Some(object) = event.as_object_mut() {
        object.insert("time_ms".to_owned(), json!(now_ms()));
    }
    let mut stdout = std::io::stdout().lock();
    // A closed stdout means the driver is gone; nothing is left to report.
    let _ = writeln!(stdout, "{event}");
    let _ = stdout.flush();
}

fn text(bytes: Option<&bytes::Bytes>) -> Value {
    bytes.map_or(Value::Null, |bytes| {
        Value::String(String::from_utf8_lossy(bytes).into_owned())
    })
}

fn record_json(record: &ConsumerRecord) -> Value {
    json!({
        "event": "record",
        "topic": &*record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": text(record.key.as_ref()),
        "value": text(record.value.as_ref()),
    })
}

/// Turns true when stdin is closed or a stop signal arrives. Stdin is read
/// on a plain thread: a blocking read on the runtime would hold up its
/// shutdown.
fn stop_signal() -> Result<watch::Receiver<bool>, std::io::Error> {
    let (sender, receiver) = watch::channel(false);
    let stdin_sender = sender.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 256];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut buffer), Ok(read) if read > 0) {}
        let _ = stdin_sender.send(true);
    });
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        let _ = sender.send(true);
    });
    Ok(receiver)
}

async fn build_consumer(
    args: &Args,
    uncommitted: &Uncommitted,
) -> Result<Consumer, Box<dyn std::error::Error>> {
    let mut config = ConsumerConfig::new(args.bootstrap.split(',').map(str::to_owned));
    config.group_id = args.group.clone();
    config.enable_auto_commit = false;
    config.set("auto.offset.reset", "earliest")?;
    for (key, value) in &args.properties {
        if !config.set(key, value)? {
            return Err(format!("unknown consumer property {key}").into());
        }
    }
    config.validate()?;
    let mut consumer = Consumer::new(config).await?;
    if args.assign {
        let mut partitions = Vec::new();
        for topic in &args.topics {
            let info = consumer.cluster().topic(topic).await?;
            partitions.extend(
                info.partitions
                    .iter()
                    .map(|partition| TopicPartition::new(topic, partition.partition)),
            );
        }
        consumer.assign(partitions)?;
    } else {
        let listener = PrintingListener {
            uncommitted: Arc::clone(uncommitted),
        };
        consumer.subscribe_with_listener(args.topics.clone(), listener)?;
    }
    Ok(consumer)
}

async fn consume(
    consumer: &mut Consumer,
    args: &Args,
    uncommitted: &Uncommitted,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ConsumerError> {
    let grouped = consumer.config().group_id.is_some();
    let mut remaining = args.max_records.unwrap_or(u64::MAX);
    while remaining > 0 && !*stop.borrow_and_update() {
        let records = tokio::select! {
            records = consumer.poll(Duration::from_millis(200)) => records?,
            _ = stop.changed() => break,
        };
        let printed = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(records.len());
        for record in records.iter().take(printed) {
            emit(record_json(record));
        }
        remaining -= u64::try_from(printed).unwrap_or(remaining);
        if !grouped {
            continue;
        }
        let offsets = {
            let mut uncommitted = locked(uncommitted);
            uncommitted.extend(printed_offsets(&records, printed));
            uncommitted.clone()
        };
        if offsets.is_empty() {
            continue;
        }
        match consumer.commit_offsets_sync(&offsets).await {
            Ok(()) => {
                let mut uncommitted = locked(uncommitted);
                for (tp, offset) in offsets {
                    if uncommitted.get(&tp) == Some(&offset) {
                        uncommitted.remove(&tp);
                    }
                }
            }
            // Retried after the next poll, which finishes the rebalance.
            Err(ConsumerError::RebalanceInProgress) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The offsets to commit when only the first `printed` records of a batch
/// were printed: past the last printed record of each partition, or at the
/// first unprinted one.
fn printed_offsets(
    records: &[ConsumerRecord],
    printed: usize,
) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
    let mut offsets = BTreeMap::new();
    for (index, record) in records.iter().enumerate() {
        let tp = TopicPartition::new(&*record.topic, record.partition);
        if index < printed {
            offsets.insert(tp, OffsetAndMetadata::new(record.offset + 1));
        } else {
            offsets
                .entry(tp)
                .or_insert_with(|| OffsetAndMetadata::new(record.offset));
        }
    }
    offsets
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let stop = stop_signal()?;
    let uncommitted = Uncommitted::default();
    let mut consumer = build_consumer(&args, &uncommitted).await?;
    emit(json!({"event": "started"}));
    let result = consume(&mut consumer, &args, &uncommitted, stop).await;
    let sessions: BTreeMap<String, i32> = consumer
        .fetch_session_ids()
        .into_iter()
        .map(|(broker_id, session_id)| (broker_id.to_string(), session_id))
        .collect();
    emit(json!({"event": "fetch_sessions", "sessions": sessions}));
    consumer.close().await?;
    emit(json!({"event": "closed"}));
    result.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use strom_consumer::TimestampType;

    use super::*;

    fn record(partition: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp_ms: 0,
            timestamp_type: TimestampType::CreateTime,
            leader_epoch: None,
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn a_cut_batch_commits_only_what_was_printed() {
        let batch = [record(0, 5), record(1, 9), record(0, 6), record(2, 3)];
        let offsets = printed_offsets(&batch, 2);
        let committed: Vec<(i32, i64)> = offsets
            .iter()
            .map(|(tp, offset)| (tp.partition, offset.offset))
            .collect();
        // Partition 0: offset 5 printed, 6 not; 1: 9 printed; 2: nothing printed.
        assert_eq!(committed, [(0, 6), (1, 10), (2, 3)]);
    }
}
