//! `strom leader-election`: preferred or unclean leader elections with
//! the ElectLeaders API, as `kafka-leader-election.sh` runs them, with its
//! output lines:
//!
//! ```text
//! Successfully completed leader election (PREFERRED) for partitions events-0, events-1
//! Valid replica already elected for partitions events-2
//! Error completing leader election (PREFERRED) for partition: events-3: PREFERRED_LEADER_NOT_AVAILABLE ...
//! ```
//!
//! `--all-topic-partitions` sends a null topic list (the broker answers
//! only for partitions where something happened); `--path-to-json-file`
//! reads Kafka's `{"partitions": [{"topic": ..., "partition": ...}]}`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use strom_protocol::kafka::messages::elect_leaders_request::TopicPartitions;
use strom_protocol::kafka::messages::ElectLeadersRequest;
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::{ErrorCode, Response};

use crate::cli::{ElectionTypeArgument, LeaderElectionArguments};
use crate::context::Context;
use crate::error::ToolError;
use crate::output::Output;

/// How long the broker may take (`timeout_ms` of the request).
const ELECTION_TIMEOUT_MS: i32 = 30_000;

/// Runs `strom leader-election`.
pub async fn run(
    context: &Context,
    arguments: &LeaderElectionArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let partitions = requested_partitions(arguments)?;
    let (type_code, type_name) = match arguments.election_type {
        ElectionTypeArgument::Preferred => (0, "PREFERRED"),
        ElectionTypeArgument::Unclean => (1, "UNCLEAN"),
    };
    let request = ElectLeadersRequest::default()
        .with_election_type(type_code)
        .with_topic_partitions(partitions.as_ref().map(|partitions| topic_list(partitions)))
        .with_timeout_ms(ELECTION_TIMEOUT_MS);
    let cluster = context.cluster().await?;
    let connection = cluster
        .any_connection()
        .await
        .map_err(|source| context.unreachable_or("connect to the cluster", source))?;
    let response = connection
        .send(request)
        .await
        .map_err(|source| ToolError::client("elect leaders", source))?;
    let Response::ElectLeaders(response) = response else {
        return Err(ToolError::MissingResult {
            operation: "elect leaders",
            resource: "the cluster".to_owned(),
        });
    };
    let top_level = ErrorCode::from_code(response.error_code);
    if top_level != ErrorCode::None {
        return Err(ToolError::rejected(
            "elect leaders",
            "the cluster",
            top_level,
        ));
    }
    let mut report = Report::default();
    for topic in &response.replica_election_results {
        for partition in &topic.partition_result {
            let name = format!("{}-{}", topic.topic.0, partition.partition_id);
            match ErrorCode::from_code(partition.error_code) {
                ErrorCode::None => report.elected.push(name),
                ErrorCode::ElectionNotNeeded => report.not_needed.push(name),
                code => {
                    let message = partition.error_message.as_deref().unwrap_or_default();
                    report.failed.push(format!("{name}: {code} {message}"));
                }
            }
        }
    }
    out.bytes(report.text(type_name).as_bytes())?;
    if report.failed.is_empty() {
        Ok(())
    } else {
        Err(ToolError::PartitionsFailed {
            operation: "leader election",
            failed: report.failed.len(),
        })
    }
}

/// The outcome per partition, as `name-index` strings.
#[derive(Debug, Default)]
struct Report {
    elected: Vec<String>,
    not_needed: Vec<String>,
    failed: Vec<String>,
}

impl Report {
    fn text(&self, type_name: &str) -> String {
        let mut text = String::new();
        if !self.elected.is_empty() {
            text.push_str(&format!(
                "Successfully completed leader election ({type_name}) for partitions {}\n",
                self.elected.join(", ")
            ));
        }
        if !self.not_needed.is_empty() {
            text.push_str(&format!(
                "Valid replica already elected for partitions {}\n",
                self.not_needed.join(", ")
            ));
        }
        for failure in &self.failed {
            text.push_str(&format!(
                "Error completing leader election ({type_name}) for partition: {failure}\n"
            ));
        }
        text
    }
}

/// The partitions named on the command line; `None` for every partition.
fn requested_partitions(
    arguments: &LeaderElectionArguments,
) -> Result<Option<Vec<(String, i32)>>, ToolError> {
    if arguments.all_topic_partitions {
        return Ok(None);
    }
    if let (Some(topic), Some(partition)) = (&arguments.topic, arguments.partition) {
        return Ok(Some(vec![(topic.clone(), partition)]));
    }
    match &arguments.path_to_json_file {
        Some(path) => partitions_file(path).map(Some),
        None => Err(ToolError::InvalidArgument {
            what: "partition selection",
            text: String::new(),
            expected: "--all-topic-partitions, --topic with --partition, or --path-to-json-file",
        }),
    }
}

/// Reads Kafka's `{"partitions": [{"topic": "t", "partition": 0}, ...]}`.
pub fn partitions_file(path: &Path) -> Result<Vec<(String, i32)>, ToolError> {
    let value = read_json(path)?;
    let shape = || ToolError::JsonShape {
        path: path.to_owned(),
        expected: r#"{"partitions": [{"topic": "name", "partition": 0}, ...]}"#,
    };
    let entries = value
        .get("partitions")
        .and_then(Value::as_array)
        .ok_or_else(shape)?;
    entries
        .iter()
        .map(|entry| {
            let topic = entry.get("topic").and_then(Value::as_str);
            let partition = entry
                .get("partition")
                .and_then(Value::as_i64)
                .and_then(|index| i32::try_from(index).ok());
            match (topic, partition) {
                (Some(topic), Some(partition)) => Ok((topic.to_owned(), partition)),
                _ => Err(shape()),
            }
        })
        .collect()
}

/// Reads and parses a JSON file.
pub fn read_json(path: &Path) -> Result<Value, ToolError> {
    let text = std::fs::read_to_string(path).map_err(|source| ToolError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ToolError::JsonFile {
        path: path.to_owned(),
        source,
    })
}

/// The request's topic list, one entry per topic.
fn topic_list(partitions: &[(String, i32)]) -> Vec<TopicPartitions> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            TopicPartitions::default()
                .with_topic(StrBytes::from_string(topic.to_owned()).into())
                .with_partitions(partitions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_follow_kafka() {
        let report = Report {
            elected: vec!["a-0".into(), "a-1".into()],
            not_needed: vec!["b-0".into()],
            failed: vec!["c-0: PREFERRED_LEADER_NOT_AVAILABLE x".into()],
        };
        assert_eq!(
            report.text("PREFERRED"),
            "Successfully completed leader election (PREFERRED) for partitions a-0, a-1\n\
             Valid replica already elected for partitions b-0\n\
             Error completing leader election (PREFERRED) for partition: c-0: PREFERRED_LEADER_NOT_AVAILABLE x\n"
        );
    }

    #[test]
    fn partitions_file_reads_kafkas_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        std::fs::write(
            &path,
            r#"{"partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0}]}"#,
        )
        .unwrap();
        assert_eq!(
            partitions_file(&path).unwrap(),
            vec![("a".to_owned(), 1), ("b".to_owned(), 0)]
        );
        std::fs::write(&path, r#"{"partitions": [{"topic": "a"}]}"#).unwrap();
        assert!(matches!(
            partitions_file(&path),
            Err(ToolError::JsonShape { .. })
        ));
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            partitions_file(&path),
            Err(ToolError::JsonFile { .. })
        ));
    }
}
