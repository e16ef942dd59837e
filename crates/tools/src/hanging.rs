//! `strom transactions find-hanging`, as Kafka's `kafka-transactions.sh
//! find-hanging` searches: open transactions whose producer has been
//! silent for longer than the maximum transaction timeout and whose
//! transactional id no longer covers the partition (or no longer exists).
//! Such a transaction holds back the partition's last stable offset until
//! it is aborted with `strom transactions abort`.

use std::collections::{BTreeMap, BTreeSet};

use strom_client::admin_transactions::{ListTransactionsFilter, ProducerState, TopicPartition};
use strom_client::{AdminClient, TransactionAdminError};

use crate::cli::FindHangingArguments;
use crate::datetime::now_ms;
use crate::error::ToolError;
use crate::output::Output;

/// The columns of `find-hanging`, as Kafka names them.
const HANGING_HEADERS: [&str; 8] = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
];

/// An open transaction in one partition.
#[derive(Debug, Clone)]
struct OpenTransaction {
    topic_partition: TopicPartition,
    producer: ProducerState,
}

/// A transaction admin error of `operation`.
pub fn failed(operation: String) -> impl FnOnce(TransactionAdminError) -> ToolError {
    move |source| ToolError::Transaction { operation, source }
}

/// The active producers of one partition, as its leader reports them.
pub async fn producers_of(
    admin: &AdminClient,
    topic_partition: &TopicPartition,
) -> Result<Vec<ProducerState>, ToolError> {
    let mut described = admin
        .describe_producers(std::slice::from_ref(topic_partition))
        .await;
    let operation = format!("describe the producers of {topic_partition}");
    described
        .remove(topic_partition)
        .unwrap_or_else(|| Ok(Vec::new()))
        .map_err(failed(operation))
}

/// Runs `transactions find-hanging`.
pub async fn run(
    admin: &AdminClient,
    arguments: &FindHangingArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let partitions = partitions_to_search(admin, arguments).await?;
    let max_timeout_ms = i64::try_from(arguments.max_transaction_timeout)
        .unwrap_or(i64::MAX / 60_000)
        .saturating_mul(60_000);
    let now_ms = now_ms();
    let mut candidates = Vec::new();
    for (topic_partition, producers) in admin.describe_producers(&partitions).await {
        let operation = format!("describe the producers of {topic_partition}");
        for producer in producers.map_err(failed(operation))? {
            let silent_ms = now_ms.saturating_sub(producer.last_timestamp_ms);
            if producer.current_transaction_start_offset.is_some() && silent_ms >= max_timeout_ms {
                candidates.push(OpenTransaction {
                    topic_partition: topic_partition.clone(),
                    producer,
                });
            }
        }
    }
    let hanging = if candidates.is_empty() {
        candidates
    } else {
        hanging_among(admin, candidates).await?
    };
    print(&hanging, now_ms, arguments.json, out)
}

/// The partitions `arguments` name: one, a topic's, or every topic's, kept
/// to those with a replica on `--broker-id` when it is given.
async fn partitions_to_search(
    admin: &AdminClient,
    arguments: &FindHangingArguments,
) -> Result<Vec<TopicPartition>, ToolError> {
    if let (Some(topic), Some(partition)) = (&arguments.topic, arguments.partition) {
        return Ok(vec![TopicPartition::new(topic.clone(), partition)]);
    }
    let topics = match &arguments.topic {
        Some(topic) => {
            let info = crate::topic_metadata::topic_info(admin.cluster(), topic).await?;
            BTreeMap::from([(topic.clone(), info)])
        }
        None => crate::topic_metadata::all_topics(admin.cluster()).await?,
    };
    Ok(topics
        .values()
        .filter(|info| !info.is_internal || arguments.topic.is_some())
        .flat_map(|info| {
            info.partitions
                .iter()
                .filter(|partition| {
                    arguments
                        .broker_id
                        .is_none_or(|broker_id| partition.replicas.contains(&broker_id))
                })
                .map(|partition| TopicPartition::new(info.name.clone(), partition.partition))
        })
        .collect())
}

/// The candidates that no coordinator still tracks: their producer id has
/// no transactional id, the id is unknown, or its transaction does not
/// include the partition.
async fn hanging_among(
    admin: &AdminClient,
    candidates: Vec<OpenTransaction>,
) -> Result<Vec<OpenTransaction>, ToolError> {
    let producer_ids: BTreeSet<i64> = candidates
        .iter()
        .map(|candidate| candidate.producer.producer_id)
        .collect();
    let filter = ListTransactionsFilter {
        producer_ids: producer_ids.into_iter().collect(),
        ..ListTransactionsFilter::default()
    };
    let listings = admin
        .list_transactions(&filter)
        .await
        .map_err(|source| ToolError::client("list transactions", source))?;
    if let Some((broker_id, error)) = listings.broker_errors.into_iter().next() {
        return Err(failed(format!(
            "list the transactions of broker {broker_id}"
        ))(error));
    }
    let ids: BTreeMap<i64, String> = listings
        .transactions
        .into_iter()
        .map(|listing| (listing.producer_id, listing.transactional_id))
        .collect();
    let id_list: Vec<&str> = ids.values().map(String::as_str).collect();
    let mut covered: BTreeMap<String, BTreeSet<TopicPartition>> = BTreeMap::new();
    for (transactional_id, described) in admin.describe_transactions(&id_list).await {
        let partitions = match described {
            Ok(description) => description.partitions.into_iter().collect(),
            Err(TransactionAdminError::TransactionalIdNotFound { .. }) => BTreeSet::new(),
            Err(error) => {
                return Err(failed(format!(
                    "describe transactional id `{transactional_id}`"
                ))(error))
            }
        };
        covered.insert(transactional_id, partitions);
    }
    Ok(candidates
        .into_iter()
        .filter(|candidate| {
            ids.get(&candidate.producer.producer_id)
                .and_then(|id| covered.get(id))
                .is_none_or(|partitions| !partitions.contains(&candidate.topic_partition))
        })
        .collect())
}

fn print(
    hanging: &[OpenTransaction],
    now_ms: i64,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let duration_min = |transaction: &OpenTransaction| {
        now_ms.saturating_sub(transaction.producer.last_timestamp_ms) / 60_000
    };
    if json {
        let rows: Vec<serde_json::Value> = hanging
            .iter()
            .map(|transaction| {
                let producer = &transaction.producer;
                serde_json::json!({
                    "topic": transaction.topic_partition.topic,
                    "partition": transaction.topic_partition.partition,
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.producer_epoch,
                    "coordinator_epoch": producer.coordinator_epoch,
                    "start_offset": producer.current_transaction_start_offset,
                    "last_timestamp_ms": producer.last_timestamp_ms,
                    "duration_min": duration_min(transaction),
                })
            })
            .collect();
        return out.line(&serde_json::Value::Array(rows).to_string());
    }
    let rows: Vec<Vec<String>> = hanging
        .iter()
        .map(|transaction| {
            let producer = &transaction.producer;
            vec![
                transaction.topic_partition.topic.clone(),
                transaction.topic_partition.partition.to_string(),
                producer.producer_id.to_string(),
                producer.producer_epoch.to_string(),
                producer.coordinator_epoch.unwrap_or(-1).to_string(),
                producer
                    .current_transaction_start_offset
                    .unwrap_or(-1)
                    .to_string(),
                producer.last_timestamp_ms.to_string(),
                duration_min(transaction).to_string(),
            ]
        })
        .collect();
    out.table(&HANGING_HEADERS, &rows)
}
