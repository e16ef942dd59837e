//! `strom groups reset-offsets`: plan new committed offsets for a group,
//! print the plan, and apply it with `--execute`.

use strom_client::admin::OffsetSpec;
use strom_client::{AdminClient, ClientError};

use crate::cli::{ResetOffsetsArguments, ResetTarget};
use crate::error::ToolError;
use crate::output::Output;
use crate::progress::Progress;

/// Where offsets move, parsed from the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The log start offset.
    Earliest,
    /// The log end offset.
    Latest,
    /// An offset, clamped to the log range.
    Offset(i64),
    /// The first offset with a timestamp at or after this (epoch ms).
    Datetime(i64),
    /// The committed offset moved by this many (clamped).
    ShiftBy(i64),
}

impl Target {
    /// Parses the exclusive target options.
    pub fn from_arguments(target: &ResetTarget) -> Result<Target, ToolError> {
        if target.to_earliest {
            Ok(Target::Earliest)
        } else if target.to_latest {
            Ok(Target::Latest)
        } else if let Some(offset) = target.to_offset {
            Ok(Target::Offset(offset))
        } else if let Some(text) = &target.to_datetime {
            crate::datetime::parse_epoch_ms(text).map(Target::Datetime)
        } else if let Some(shift) = target.shift_by {
            Ok(Target::ShiftBy(shift))
        } else {
            Err(ToolError::InvalidArgument {
                what: "reset target",
                text: String::new(),
                expected:
                    "one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by",
            })
        }
    }
}

/// What is known about one partition when planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// The log start offset.
    pub earliest: i64,
    /// The log end offset.
    pub latest: i64,
    /// The committed offset, if any.
    pub committed: Option<i64>,
    /// For [`Target::Datetime`]: the offset found by timestamp (`None` when
    /// no record is that recent).
    pub by_timestamp: Option<i64>,
}

/// The new offset of one partition. Without a committed offset,
/// `--shift-by` starts from the log end (where a new consumer starts by
/// default).
pub fn plan(target: Target, offsets: PartitionOffsets) -> i64 {
    let clamp = |offset: i64| offset.clamp(offsets.earliest, offsets.latest.max(offsets.earliest));
    match target {
        Target::Earliest => offsets.earliest,
        Target::Latest => offsets.latest,
        Target::Offset(offset) => clamp(offset),
        Target::Datetime(_) => clamp(offsets.by_timestamp.unwrap_or(offsets.latest)),
        Target::ShiftBy(shift) => clamp(
            offsets
                .committed
                .unwrap_or(offsets.latest)
                .saturating_add(shift),
        ),
    }
}

/// Parses `topic` or `topic:0,1,2`.
pub fn parse_topic_partitions(text: &str) -> Result<(String, Option<Vec<i32>>), ToolError> {
    let invalid = || ToolError::InvalidArgument {
        what: "--topic",
        text: text.to_owned(),
        expected: "TOPIC or TOPIC:PARTITION,PARTITION,...",
    };
    match text.split_once(':') {
        None if !text.is_empty() => Ok((text.to_owned(), None)),
        None => Err(invalid()),
        Some((topic, partitions)) if !topic.is_empty() => {
            let partitions = partitions
                .split(',')
                .map(|partition| partition.trim().parse::<i32>().ok().filter(|p| *p >= 0))
                .collect::<Option<Vec<i32>>>()
                .ok_or_else(invalid)?;
            Ok((topic.to_owned(), Some(partitions)))
        }
        Some(_) => Err(invalid()),
    }
}

/// One line of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlannedPartition {
    partition: i32,
    current: Option<i64>,
    new: i64,
}

/// Runs `groups reset-offsets`.
pub async fn run(
    admin: &AdminClient,
    arguments: ResetOffsetsArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let target = Target::from_arguments(&arguments.target)?;
    let (topic, partitions) = parse_topic_partitions(&arguments.topic)?;
    let partitions = partitions_to_reset(admin, &topic, partitions).await?;
    let group = &arguments.group;
    ensure_group_is_empty(admin, group).await?;
    let committed = admin
        .list_group_offsets(group, &topic, &partitions)
        .await
        .map_err(|source| ToolError::client("fetch committed offsets", source))?;
    let mut plan_lines = Vec::with_capacity(partitions.len());
    let progress = Progress::bar(partitions.len() as u64, "looking up offsets");
    for partition in partitions {
        let current = committed
            .get(&partition)
            .copied()
            .filter(|offset| *offset >= 0);
        let offsets = partition_offsets(admin, &topic, partition, target, current).await?;
        plan_lines.push(PlannedPartition {
            partition,
            current,
            new: plan(target, offsets),
        });
        progress.advance(1);
    }
    progress.finish();
    print_plan(group, &topic, &plan_lines, arguments.json, out)?;
    if !arguments.execute {
        eprintln!("Dry run: nothing changed. Pass --execute to apply these offsets.");
        return Ok(());
    }
    let new_offsets: Vec<(i32, i64)> = plan_lines
        .iter()
        .map(|line| (line.partition, line.new))
        .collect();
    admin
        .alter_group_offsets(group, &topic, &new_offsets)
        .await
        .map_err(|error| match error {
            ClientError::Broker { code } => {
                ToolError::rejected("reset offsets of group", group, code)
            }
            other => ToolError::client("reset offsets", other),
        })?;
    eprintln!("Committed the new offsets of group {group}.");
    Ok(())
}

/// The partitions to reset: those named (each must exist) or all of `topic`.
async fn partitions_to_reset(
    admin: &AdminClient,
    topic: &str,
    partitions: Option<Vec<i32>>,
) -> Result<Vec<i32>, ToolError> {
    let info = crate::topic_metadata::topic_info(admin.cluster(), topic).await?;
    Ok(match partitions {
        Some(partitions) => {
            if let Some(missing) = partitions.iter().find(|p| info.partition(**p).is_none()) {
                return Err(ToolError::UnknownPartition {
                    topic: topic.to_owned(),
                    partition: *missing,
                    partitions: info.partitions.len(),
                });
            }
            partitions
        }
        None => info.partitions.iter().map(|p| p.partition).collect(),
    })
}

/// Offsets are reset only for a group without members, as Kafka's tool
/// requires.
async fn ensure_group_is_empty(admin: &AdminClient, group: &str) -> Result<(), ToolError> {
    if let Some(description) = crate::group_description::describe_group(admin, group).await? {
        if !description.members.is_empty() {
            return Err(ToolError::GroupNotEmpty {
                group: group.to_owned(),
                members: description.members.len(),
            });
        }
    }
    Ok(())
}

async fn partition_offsets(
    admin: &AdminClient,
    topic: &str,
    partition: i32,
    target: Target,
    committed: Option<i64>,
) -> Result<PartitionOffsets, ToolError> {
    let lookup = |spec| async move {
        admin
            .list_offset(topic, partition, spec)
            .await
            .map(|listed| listed.offset)
            .map_err(|source| ToolError::client("look up offsets", source))
    };
    let earliest = lookup(OffsetSpec::Earliest).await?;
    let latest = lookup(OffsetSpec::Latest).await?;
    let by_timestamp = match target {
        Target::Datetime(timestamp_ms) => {
            Some(lookup(OffsetSpec::Timestamp(timestamp_ms)).await?).filter(|offset| *offset >= 0)
        }
        _ => None,
    };
    Ok(PartitionOffsets {
        earliest,
        latest,
        committed,
        by_timestamp,
    })
}

fn print_plan(
    group: &str,
    topic: &str,
    lines: &[PlannedPartition],
    json: bool,
    out: &mut Output,
) -> Result<(), ToolError> {
    if json {
        let partitions: Vec<serde_json::Value> = lines
            .iter()
            .map(|line| {
                serde_json::json!({
                    "topic": topic,
                    "partition": line.partition,
                    "current_offset": line.current,
                    "new_offset": line.new,
                })
            })
            .collect();
        return out
            .line(&serde_json::json!({"group": group, "partitions": partitions}).to_string());
    }
    out.line(&format!(
        "{:<20} {:<24} {:>9} {:>14} {:>11}",
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"
    ))?;
    for line in lines {
        out.line(&format!(
            "{:<20} {:<24} {:>9} {:>14} {:>11}",
            group,
            topic,
            line.partition,
            line.current
                .map_or_else(|| "-".to_owned(), |offset| offset.to_string()),
            line.new
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFSETS: PartitionOffsets = PartitionOffsets {
        earliest: 10,
        latest: 100,
        committed: Some(50),
        by_timestamp: Some(70),
    };

    #[test]
    fn every_target_plans_within_the_log() {
        assert_eq!(plan(Target::Earliest, OFFSETS), 10);
        assert_eq!(plan(Target::Latest, OFFSETS), 100);
        assert_eq!(plan(Target::Offset(42), OFFSETS), 42);
        assert_eq!(plan(Target::Offset(5), OFFSETS), 10);
        assert_eq!(plan(Target::Offset(500), OFFSETS), 100);
        assert_eq!(plan(Target::Datetime(0), OFFSETS), 70);
        assert_eq!(plan(Target::ShiftBy(-20), OFFSETS), 30);
        assert_eq!(plan(Target::ShiftBy(-200), OFFSETS), 10);
        assert_eq!(plan(Target::ShiftBy(i64::MAX), OFFSETS), 100);
    }

    #[test]
    fn missing_values_fall_back_to_the_log_end() {
        let offsets = PartitionOffsets {
            committed: None,
            by_timestamp: None,
            ..OFFSETS
        };
        assert_eq!(plan(Target::Datetime(0), offsets), 100);
        assert_eq!(plan(Target::ShiftBy(-5), offsets), 95);
    }

    #[test]
    fn topic_partition_lists_parse() {
        assert_eq!(
            parse_topic_partitions("events").expect("valid"),
            ("events".to_owned(), None)
        );
        assert_eq!(
            parse_topic_partitions("events:0,2").expect("valid"),
            ("events".to_owned(), Some(vec![0, 2]))
        );
        assert!(parse_topic_partitions("events:x").is_err());
        assert!(parse_topic_partitions(":1").is_err());
        assert!(parse_topic_partitions("").is_err());
    }
}
