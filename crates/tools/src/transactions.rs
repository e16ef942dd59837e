//! `strom transactions list|describe|describe-producers|abort`, like
//! Kafka's `kafka-transactions.sh` (same subcommands, options and
//! columns); `find-hanging` is in [`crate::hanging`].

use strom_client::admin_transactions::{
    AbortTransactionSpec, ListTransactionsFilter, ProducerState, TopicPartition,
    TransactionDescription,
};
use strom_client::AdminClient;

use crate::cli::{AbortTransactionArguments, TransactionsCommand};
use crate::context::Context;
use crate::datetime::now_ms;
use crate::error::ToolError;
use crate::hanging::{failed, producers_of};
use crate::output::Output;

/// The columns of `describe-producers`, as Kafka names them.
const PRODUCER_HEADERS: [&str; 6] = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
];

/// Runs a `transactions` command.
pub async fn run(
    context: &Context,
    command: TransactionsCommand,
    out: &mut Output,
) -> Result<(), ToolError> {
    let admin = context.admin().await?;
    match command {
        TransactionsCommand::List {
            duration_filter,
            json,
        } => list(&admin, duration_filter, json, out).await,
        TransactionsCommand::Describe {
            transactional_id,
            json,
        } => describe(&admin, &transactional_id, json, out).await,
        TransactionsCommand::DescribeProducers {
            topic,
            partition,
            json,
        } => {
            let topic_partition = TopicPartition::new(topic, partition);
            let producers = producers_of(&admin, &topic_partition).await?;
            print_producers(&producers, json, out)
        }
        TransactionsCommand::Abort(arguments) => abort(&admin, &arguments, out).await,
        TransactionsCommand::FindHanging(arguments) => {
            crate::hanging::run(&admin, &arguments, out).await
        }
    }
}

async fn list(
    admin: &AdminClient,
    duration_filter: Option<i64>,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let filter = ListTransactionsFilter {
        duration_ms: duration_filter,
        ..ListTransactionsFilter::default()
    };
    let listings = admin
        .list_transactions(&filter)
        .await
        .map_err(|source| ToolError::client("list transactions", source))?;
    if json {
        let rows: Vec<serde_json::Value> = listings
            .transactions
            .iter()
            .map(|listing| {
                serde_json::json!({
                    "transactional_id": listing.transactional_id,
                    "coordinator": listing.coordinator_id,
                    "producer_id": listing.producer_id,
                    "state": listing.state.name(),
                })
            })
            .collect();
        out.line(&serde_json::Value::Array(rows).to_string())?;
    } else {
        let rows: Vec<Vec<String>> = listings
            .transactions
            .iter()
            .map(|listing| {
                vec![
                    listing.transactional_id.clone(),
                    listing.coordinator_id.to_string(),
                    listing.producer_id.to_string(),
                    listing.state.to_string(),
                ]
            })
            .collect();
        out.table(
            &[
                "TransactionalId",
                "Coordinator",
                "ProducerId",
                "TransactionState",
            ],
            &rows,
        )?;
    }
    for (broker_id, error) in &listings.broker_errors {
        eprintln!(
            "strom: listing the transactions of broker {broker_id} failed: {}",
            strom_config::error_chain(error)
        );
    }
    match listings.broker_errors.len() {
        0 => Ok(()),
        failed => Err(ToolError::BrokersFailed {
            operation: "list transactions",
            failed,
        }),
    }
}

async fn describe(
    admin: &AdminClient,
    transactional_id: &str,
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    let description = admin
        .describe_transaction(transactional_id)
        .await
        .map_err(failed(format!(
            "describe transactional id `{transactional_id}`"
        )))?;
    let now_ms = now_ms();
    let duration_ms = description
        .transaction_start_time_ms
        .map(|start_ms| now_ms.saturating_sub(start_ms).max(0));
    if json {
        return out.line(&describe_json(&description, duration_ms).to_string());
    }
    let none = || "None".to_owned();
    let partitions: Vec<String> = description
        .partitions
        .iter()
        .map(TopicPartition::to_string)
        .collect();
    let row = vec![
        description.coordinator_id.to_string(),
        description.transactional_id.clone(),
        description.producer_id.to_string(),
        description.producer_epoch.to_string(),
        description.state.to_string(),
        description.transaction_timeout_ms.to_string(),
        description
            .transaction_start_time_ms
            .map_or_else(none, |start_ms| start_ms.to_string()),
        duration_ms.map_or_else(none, |duration_ms| duration_ms.to_string()),
        partitions.join(","),
    ];
    out.table(
        &[
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        &[row],
    )
}

fn describe_json(
    description: &TransactionDescription,
    duration_ms: Option<i64>,
) -> serde_json::Value {
    let partitions: Vec<serde_json::Value> = description
        .partitions
        .iter()
        .map(|partition| {
            serde_json::json!({"topic": partition.topic, "partition": partition.partition})
        })
        .collect();
    serde_json::json!({
        "coordinator": description.coordinator_id,
        "transactional_id": description.transactional_id,
        "producer_id": description.producer_id,
        "producer_epoch": description.producer_epoch,
        "state": description.state.name(),
        "transaction_timeout_ms": description.transaction_timeout_ms,
        "transaction_start_time_ms": description.transaction_start_time_ms,
        "transaction_duration_ms": duration_ms,
        "partitions": partitions,
    })
}

fn print_producers(
    producers: &[ProducerState],
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    if json {
        let rows: Vec<serde_json::Value> = producers
            .iter()
            .map(|producer| {
                serde_json::json!({
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.producer_epoch,
                    "latest_coordinator_epoch": producer.coordinator_epoch,
                    "last_sequence": producer.last_sequence,
                    "last_timestamp_ms": producer.last_timestamp_ms,
                    "current_transaction_start_offset": producer.current_transaction_start_offset,
                })
            })
            .collect();
        return out.line(&serde_json::Value::Array(rows).to_string());
    }
    let rows: Vec<Vec<String>> = producers
        .iter()
        .map(|producer| {
            vec![
                producer.producer_id.to_string(),
                producer.producer_epoch.to_string(),
                producer.coordinator_epoch.unwrap_or(-1).to_string(),
                producer.last_sequence.to_string(),
                producer.last_timestamp_ms.to_string(),
                producer
                    .current_transaction_start_offset
                    .map_or_else(|| "None".to_owned(), |offset| offset.to_string()),
            ]
        })
        .collect();
    out.table(&PRODUCER_HEADERS, &rows)
}

async fn abort(
    admin: &AdminClient,
    arguments: &AbortTransactionArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let topic_partition = TopicPartition::new(arguments.topic.clone(), arguments.partition);
    let spec = match (
        arguments.start_offset,
        arguments.producer_id,
        arguments.producer_epoch,
        arguments.coordinator_epoch,
    ) {
        (Some(start_offset), ..) => spec_at_offset(admin, topic_partition, start_offset).await?,
        (None, Some(producer_id), Some(producer_epoch), Some(coordinator_epoch)) => {
            AbortTransactionSpec {
                topic_partition,
                producer_id,
                producer_epoch,
                coordinator_epoch: coordinator_epoch.max(0),
            }
        }
        _ => {
            return Err(ToolError::InvalidArgument {
                what: "transaction to abort",
                text: String::new(),
                expected: "--start-offset, or --producer-id with --producer-epoch and \
                           --coordinator-epoch",
            })
        }
    };
    admin
        .abort_transaction(&spec)
        .await
        .map_err(failed(format!(
            "abort the transaction of producer {} in {}",
            spec.producer_id, spec.topic_partition
        )))?;
    out.line(&format!(
        "Aborted the transaction of producer {} (epoch {}) in {}.",
        spec.producer_id, spec.producer_epoch, spec.topic_partition
    ))
}

/// The abort spec of the producer whose open transaction starts at
/// `start_offset`.
async fn spec_at_offset(
    admin: &AdminClient,
    topic_partition: TopicPartition,
    start_offset: i64,
) -> Result<AbortTransactionSpec, ToolError> {
    let producers = producers_of(admin, &topic_partition).await?;
    producers
        .iter()
        .filter(|producer| producer.current_transaction_start_offset == Some(start_offset))
        .find_map(|producer| AbortTransactionSpec::for_producer(topic_partition.clone(), producer))
        .ok_or_else(|| ToolError::NoOpenTransaction {
            topic_partition: topic_partition.to_string(),
            start_offset,
        })
}
