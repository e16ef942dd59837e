//! `strom reassign-partitions`: moves partition replicas between brokers
//! with AlterPartitionReassignments and ListPartitionReassignments, as
//! `kafka-reassign-partitions.sh` does, with Kafka's JSON formats and
//! output lines:
//!
//! - `--generate` reads `{"version":1,"topics":[{"topic":"t"}]}` and a
//!   `--broker-list`, and prints the current assignment and a proposal
//!   over those brokers (Kafka's rack-unaware placement: replicas of
//!   partition `p` start at broker `p mod n` and the followers shift by one
//!   every `n` partitions; Kafka starts at a random broker, this starts at
//!   the first, so the proposal is repeatable).
//! - `--execute` prints the current assignment (to keep for a rollback)
//!   and starts the reassignment of
//!   `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}`.
//! - `--verify` reports each partition as completed or still in progress;
//!   a partition with no reassignment whose replicas differ from the plan
//!   is a failure (exit 1).
//! - `--cancel` cancels the reassignments of the plan's partitions.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use strom_client::Cluster;
use strom_protocol::kafka::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use strom_protocol::kafka::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use strom_protocol::kafka::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Request, Response};

use crate::cli::ReassignPartitionsArguments;
use crate::context::Context;
use crate::error::ToolError;
use crate::leader_election::read_json;
use crate::output::Output;

/// How long the broker may take (`timeout_ms` of the requests).
const REQUEST_TIMEOUT_MS: i32 = 30_000;
/// `--verify` reads the replicas this many times before it reports that
/// they differ from the plan (see `verify`).
const METADATA_ATTEMPTS: u32 = 5;
/// The pause between those reads.
const METADATA_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// One partition's replicas: topic, partition index, broker ids.
pub type Assignment = (String, i32, Vec<i32>);

/// Runs `strom reassign-partitions`.
pub async fn run(
    context: &Context,
    arguments: &ReassignPartitionsArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let cluster = context.cluster().await?;
    if arguments.generate {
        let (Some(topics_file), Some(broker_list)) =
            (&arguments.topics_to_move_json_file, &arguments.broker_list)
        else {
            return Err(usage(
                "--generate needs --topics-to-move-json-file and --broker-list",
            ));
        };
        return generate(&cluster, topics_file, broker_list, out).await;
    }
    let Some(plan_file) = &arguments.reassignment_json_file else {
        return Err(usage("--reassignment-json-file"));
    };
    let plan = plan_file_assignments(plan_file)?;
    if arguments.execute {
        execute(&cluster, &plan, out).await
    } else if arguments.verify {
        verify(&cluster, &plan, out).await
    } else {
        cancel(&cluster, &plan, out).await
    }
}

fn usage(expected: &'static str) -> ToolError {
    ToolError::InvalidArgument {
        what: "arguments",
        text: String::new(),
        expected,
    }
}

async fn generate(
    cluster: &Cluster,
    topics_file: &Path,
    broker_list: &str,
    out: &mut Output,
) -> Result<(), ToolError> {
    let brokers = parse_broker_list(broker_list)?;
    let topics = topics_file_names(topics_file)?;
    let mut current = Vec::new();
    let mut proposed = Vec::new();
    for topic in &topics {
        let info = cluster
            .topic(topic)
            .await
            .map_err(|source| ToolError::client("describe the topics to move", source))?;
        let assignment: Vec<Assignment> = info
            .partitions
            .iter()
            .map(|partition| {
                (
                    topic.clone(),
                    partition.partition,
                    partition.replicas.clone(),
                )
            })
            .collect();
        let replication_factor = assignment
            .first()
            .map_or(0, |(_, _, replicas)| replicas.len());
        if replication_factor > brokers.len() {
            return Err(ToolError::InvalidArgument {
                what: "--broker-list",
                text: broker_list.to_owned(),
                expected: "at least as many brokers as the replication factor",
            });
        }
        let placement = propose(assignment.len(), replication_factor, &brokers);
        for ((_, partition, _), replicas) in assignment.iter().zip(placement) {
            proposed.push((topic.clone(), *partition, replicas));
        }
        current.extend(assignment);
    }
    let text = format!(
        "Current partition replica assignment\n{}\n\nProposed partition reassignment configuration\n{}\n",
        assignment_json(&current),
        assignment_json(&proposed)
    );
    out.bytes(text.as_bytes())
}

async fn execute(
    cluster: &Cluster,
    plan: &[Assignment],
    out: &mut Output,
) -> Result<(), ToolError> {
    let current = current_assignment(cluster, plan).await?;
    out.bytes(
        format!(
            "Current partition replica assignment\n\n{}\n\n\
             Save this to use as the --reassignment-json-file option during rollback\n",
            assignment_json(&current)
        )
        .as_bytes(),
    )?;
    let targets = plan
        .iter()
        .map(|(topic, partition, replicas)| (topic.clone(), *partition, Some(replicas.clone())))
        .collect::<Vec<_>>();
    let started = alter(cluster, &targets, out, "start partition reassignments").await?;
    out.bytes(
        format!(
            "Successfully started partition reassignments for {}\n",
            started.join(",")
        )
        .as_bytes(),
    )
}

async fn cancel(cluster: &Cluster, plan: &[Assignment], out: &mut Output) -> Result<(), ToolError> {
    let targets = plan
        .iter()
        .map(|(topic, partition, _)| (topic.clone(), *partition, None))
        .collect::<Vec<_>>();
    let cancelled = alter(cluster, &targets, out, "cancel partition reassignments").await?;
    out.bytes(
        format!(
            "Successfully cancelled partition reassignments for: {}\n",
            cancelled.join(",")
        )
        .as_bytes(),
    )
}

/// Sends one AlterPartitionReassignments; prints the partitions that
/// failed and returns the `topic-partition` names that succeeded.
async fn alter(
    cluster: &Cluster,
    targets: &[(String, i32, Option<Vec<i32>>)],
    out: &mut Output,
    operation: &'static str,
) -> Result<Vec<String>, ToolError> {
    let mut by_topic: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
    for (topic, partition, replicas) in targets {
        by_topic.entry(topic).or_default().push(
            ReassignablePartition::default()
                .with_partition_index(*partition)
                .with_replicas(
                    replicas
                        .as_ref()
                        .map(|ids| ids.iter().copied().map(BrokerId).collect()),
                ),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            ReassignableTopic::default()
                .with_name(StrBytes::from_string(name.to_owned()).into())
                .with_partitions(partitions)
        })
        .collect();
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topics(topics);
    let Response::AlterPartitionReassignments(response) = send(cluster, request, operation).await?
    else {
        return Err(missing(operation));
    };
    let top_level = ErrorCode::from_code(response.error_code);
    if top_level != ErrorCode::None {
        return Err(ToolError::rejected(operation, "the cluster", top_level));
    }
    let mut succeeded = Vec::new();
    let mut failed = 0;
    for topic in &response.responses {
        for partition in &topic.partitions {
            let name = format!("{}-{}", topic.name.0, partition.partition_index);
            match ErrorCode::from_code(partition.error_code) {
                ErrorCode::None => succeeded.push(name),
                code => {
                    failed += 1;
                    let message = partition.error_message.as_deref().unwrap_or_default();
                    out.bytes(
                        format!("Error for partition {name}: {code} {message}\n").as_bytes(),
                    )?;
                }
            }
        }
    }
    if failed > 0 {
        return Err(ToolError::PartitionsFailed { operation, failed });
    }
    Ok(succeeded)
}

async fn verify(cluster: &Cluster, plan: &[Assignment], out: &mut Output) -> Result<(), ToolError> {
    const OPERATION: &str = "list partition reassignments";
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition, _) in plan {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            ListPartitionReassignmentsTopics::default()
                .with_name(StrBytes::from_string(name.to_owned()).into())
                .with_partition_indexes(partitions)
        })
        .collect();
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topics(Some(topics));
    let Response::ListPartitionReassignments(response) = send(cluster, request, OPERATION).await?
    else {
        return Err(missing(OPERATION));
    };
    let top_level = ErrorCode::from_code(response.error_code);
    if top_level != ErrorCode::None {
        return Err(ToolError::rejected(OPERATION, "the cluster", top_level));
    }
    let ongoing: Vec<(String, i32)> = response
        .topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic
                .partitions
                .iter()
                .map(move |partition| (name.clone(), partition.partition_index))
        })
        .collect();
    // ListPartitionReassignments comes from the active controller; the
    // replicas come from a broker's metadata, which may not have applied a
    // just-completed reassignment yet: a mismatch is asked again a few
    // times before it is reported.
    let mut attempts = 0;
    let (text, mismatched) = loop {
        let current = current_assignment(cluster, plan).await?;
        let (text, mismatched) = status_text(plan, &current, &ongoing);
        attempts += 1;
        if mismatched == 0 || attempts >= METADATA_ATTEMPTS {
            break (text, mismatched);
        }
        tokio::time::sleep(METADATA_RETRY_PAUSE).await;
    };
    out.bytes(text.as_bytes())?;
    if mismatched > 0 {
        return Err(ToolError::PartitionsFailed {
            operation: "reassignment verification",
            failed: mismatched,
        });
    }
    Ok(())
}

/// `--verify`'s report, and how many partitions have no reassignment but
/// other replicas than the plan's.
fn status_text(
    plan: &[Assignment],
    current: &[Assignment],
    ongoing: &[(String, i32)],
) -> (String, usize) {
    let mut text = String::from("Status of partition reassignment:\n");
    let mut mismatched = 0;
    for ((topic, partition, target), (_, _, replicas)) in plan.iter().zip(current) {
        if ongoing.contains(&(topic.clone(), *partition)) {
            text.push_str(&format!(
                "Reassignment of partition {topic}-{partition} is still in progress.\n"
            ));
        } else if replicas == target {
            text.push_str(&format!(
                "Reassignment of partition {topic}-{partition} is completed.\n"
            ));
        } else {
            mismatched += 1;
            text.push_str(&format!(
                "There is no active reassignment of partition {topic}-{partition}, but replica set is {} rather than {}.\n",
                join(replicas),
                join(target)
            ));
        }
    }
    (text, mismatched)
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

fn missing(operation: &'static str) -> ToolError {
    ToolError::MissingResult {
        operation,
        resource: "the cluster".to_owned(),
    }
}

async fn send(
    cluster: &Cluster,
    request: impl Into<Request>,
    operation: &'static str,
) -> Result<Response, ToolError> {
    let connection = cluster
        .any_connection()
        .await
        .map_err(|source| ToolError::client(operation, source))?;
    connection
        .send(request)
        .await
        .map_err(|source| ToolError::client(operation, source))
}

/// The current replicas of the plan's partitions, in the plan's order,
/// from fresh metadata.
async fn current_assignment(
    cluster: &Cluster,
    plan: &[Assignment],
) -> Result<Vec<Assignment>, ToolError> {
    cluster.request_metadata_refresh();
    let mut current = Vec::with_capacity(plan.len());
    for (topic, partition, _) in plan {
        let info = cluster
            .topic(topic)
            .await
            .map_err(|source| ToolError::client("describe the plan's topics", source))?;
        let replicas = info
            .partition(*partition)
            .ok_or(ToolError::UnknownPartition {
                topic: topic.clone(),
                partition: *partition,
                partitions: info.partitions.len(),
            })?
            .replicas
            .clone();
        current.push((topic.clone(), *partition, replicas));
    }
    Ok(current)
}

/// Kafka's rack-unaware placement of `partitions` partitions with
/// `replication_factor` replicas over `brokers`, starting at the first
/// broker (see the module docs).
pub fn propose(partitions: usize, replication_factor: usize, brokers: &[i32]) -> Vec<Vec<i32>> {
    let count = brokers.len();
    if count == 0 {
        return vec![Vec::new(); partitions];
    }
    let mut shift = 0usize;
    (0..partitions)
        .map(|partition| {
            if partition > 0 && partition % count == 0 {
                shift += 1;
            }
            let first = partition % count;
            let mut replicas = vec![brokers[first]];
            for replica in 0..replication_factor.saturating_sub(1) {
                let step = 1 + (shift + replica) % (count - 1).max(1);
                replicas.push(brokers[(first + step) % count]);
            }
            replicas
        })
        .collect()
}

/// Kafka's reassignment JSON, with its key order and `log_dirs` of "any".
pub fn assignment_json(assignment: &[Assignment]) -> String {
    let partitions: Vec<String> = assignment
        .iter()
        .map(|(topic, partition, replicas)| {
            let topic = Value::String(topic.clone());
            let log_dirs = vec!["\"any\""; replicas.len()].join(",");
            format!(
                "{{\"topic\":{topic},\"partition\":{partition},\"replicas\":[{}],\"log_dirs\":[{log_dirs}]}}",
                join(replicas)
            )
        })
        .collect();
    format!(
        "{{\"version\":1,\"partitions\":[{}]}}",
        partitions.join(",")
    )
}

fn parse_broker_list(text: &str) -> Result<Vec<i32>, ToolError> {
    let invalid = || ToolError::InvalidArgument {
        what: "--broker-list",
        text: text.to_owned(),
        expected: "comma-separated broker ids, e.g. 1,2,3",
    };
    let mut brokers: Vec<i32> = text
        .split(',')
        .map(|id| id.trim().parse::<i32>().map_err(|_| invalid()))
        .collect::<Result<_, _>>()?;
    brokers.sort_unstable();
    brokers.dedup();
    if brokers.is_empty() {
        return Err(invalid());
    }
    Ok(brokers)
}

/// Reads `{"version":1,"topics":[{"topic":"t"}, ...]}`.
fn topics_file_names(path: &Path) -> Result<Vec<String>, ToolError> {
    let value = read_json(path)?;
    let shape = || ToolError::JsonShape {
        path: path.to_owned(),
        expected: r#"{"version": 1, "topics": [{"topic": "name"}, ...]}"#,
    };
    value
        .get("topics")
        .and_then(Value::as_array)
        .ok_or_else(shape)?
        .iter()
        .map(|entry| {
            entry
                .get("topic")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(shape)
        })
        .collect()
}

/// Reads `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`
/// (`log_dirs` may be present; only "any" is meaningful to Strom).
pub fn plan_file_assignments(path: &Path) -> Result<Vec<Assignment>, ToolError> {
    let value = read_json(path)?;
    let shape = || ToolError::JsonShape {
        path: path.to_owned(),
        expected: r#"{"version": 1, "partitions": [{"topic": "name", "partition": 0, "replicas": [1, 2]}, ...]}"#,
    };
    value
        .get("partitions")
        .and_then(Value::as_array)
        .ok_or_else(shape)?
        .iter()
        .map(|entry| {
            let topic = entry.get("topic").and_then(Value::as_str);
            let partition = entry
                .get("partition")
                .and_then(Value::as_i64)
                .and_then(|index| i32::try_from(index).ok());
            let replicas = entry.get("replicas").and_then(Value::as_array).map(|ids| {
                ids.iter()
                    .map(|id| id.as_i64().and_then(|id| i32::try_from(id).ok()))
                    .collect::<Option<Vec<i32>>>()
            });
            match (topic, partition, replicas) {
                (Some(topic), Some(partition), Some(Some(replicas))) => {
                    Ok((topic.to_owned(), partition, replicas))
                }
                _ => Err(shape()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_spreads_leaders_and_followers_like_kafka() {
        assert_eq!(
            propose(4, 3, &[2, 3, 4]),
            vec![vec![2, 3, 4], vec![3, 4, 2], vec![4, 2, 3], vec![2, 4, 3]]
        );
        assert_eq!(propose(2, 1, &[5]), vec![vec![5], vec![5]]);
    }

    #[test]
    fn assignment_json_is_kafkas() {
        let json = assignment_json(&[("t".into(), 0, vec![2, 3])]);
        assert_eq!(
            json,
            r#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}"#
        );
    }

    #[test]
    fn plan_files_round_trip_through_the_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        let plan = vec![
            ("a".to_owned(), 0, vec![2, 3, 4]),
            ("b".to_owned(), 1, vec![1]),
        ];
        std::fs::write(&path, assignment_json(&plan)).unwrap();
        assert_eq!(plan_file_assignments(&path).unwrap(), plan);
        std::fs::write(&path, r#"{"partitions":[{"topic":"a","partition":0}]}"#).unwrap();
        assert!(matches!(
            plan_file_assignments(&path),
            Err(ToolError::JsonShape { .. })
        ));
    }

    #[test]
    fn verify_reports_completed_in_progress_and_mismatched() {
        let plan = vec![
            ("t".to_owned(), 0, vec![2, 3]),
            ("t".to_owned(), 1, vec![2, 3]),
            ("t".to_owned(), 2, vec![2, 3]),
        ];
        let current = vec![
            ("t".to_owned(), 0, vec![2, 3]),
            ("t".to_owned(), 1, vec![2, 3, 1]),
            ("t".to_owned(), 2, vec![1, 2]),
        ];
        let (text, mismatched) = status_text(&plan, &current, &[("t".to_owned(), 1)]);
        assert_eq!(
            text,
            "Status of partition reassignment:\n\
             Reassignment of partition t-0 is completed.\n\
             Reassignment of partition t-1 is still in progress.\n\
             There is no active reassignment of partition t-2, but replica set is 1,2 rather than 2,3.\n"
        );
        assert_eq!(mismatched, 1);
    }

    #[test]
    fn broker_lists_parse_and_refuse_garbage() {
        assert_eq!(parse_broker_list("3, 1,2,1").unwrap(), vec![1, 2, 3]);
        assert!(parse_broker_list("1,x").is_err());
        assert!(parse_broker_list("").is_err());
    }
}
