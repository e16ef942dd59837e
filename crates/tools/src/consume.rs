//! `strom consume`: print records of a topic, like
//! `kafka-console-consumer` and kcat's consumer mode.

use std::time::{Duration, Instant};

use strom_consumer::config::OffsetReset;
use strom_consumer::record::{ConsumerRecord, TopicPartition};
use strom_consumer::{Consumer, ConsumerError};

use crate::cli::ConsumeArguments;
use crate::context::{parse_key_values, Context};
use crate::error::ToolError;
use crate::format::{record_json, RecordFormat};
use crate::output::Output;

/// The longest single poll, so the idle timeout and Ctrl-C are noticed.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Where a manually assigned partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOffset {
    /// The log start.
    Earliest,
    /// The log end.
    Latest,
    /// An absolute offset.
    At(i64),
}

impl StartOffset {
    /// Parses `earliest`, `latest` or a non-negative number.
    pub fn parse(text: &str) -> Result<StartOffset, ToolError> {
        match text {
            "earliest" | "beginning" => Ok(StartOffset::Earliest),
            "latest" | "end" => Ok(StartOffset::Latest),
            number => number
                .parse::<i64>()
                .ok()
                .filter(|offset| *offset >= 0)
                .map(StartOffset::At)
                .ok_or_else(|| ToolError::InvalidArgument {
                    what: "--offset",
                    text: text.to_owned(),
                    expected: "a non-negative number, `earliest` or `latest`",
                }),
        }
    }
}

/// Runs `strom consume`.
pub async fn run(
    context: &Context,
    arguments: ConsumeArguments,
    out: &mut Output,
) -> Result<(), ToolError> {
    let format = RecordFormat::parse(&arguments.format)?;
    let start = arguments
        .offset
        .as_deref()
        .map(StartOffset::parse)
        .transpose()?;
    let mut config =
        context.consumer_config(&parse_key_values("--property", &arguments.properties)?)?;
    if let Some(group) = &arguments.group {
        config.group_id = Some(group.clone());
    }
    config.auto_offset_reset = if arguments.from_beginning {
        OffsetReset::Earliest
    } else {
        OffsetReset::Latest
    };
    let cluster = context.cluster().await?;
    let info = crate::topic_metadata::topic_info(&cluster, &arguments.topic).await?;
    cluster.close();
    if let Some(partition) = arguments.partition.filter(|p| info.partition(*p).is_none()) {
        return Err(ToolError::UnknownPartition {
            topic: arguments.topic.clone(),
            partition,
            partitions: info.partitions.len(),
        });
    }
    let consume_error = |source: ConsumerError| consumer_error(context, &arguments.topic, source);
    let mut consumer = Consumer::new(config).await.map_err(consume_error)?;
    let partitions: Vec<i32> = info.partitions.iter().map(|p| p.partition).collect();
    start_reading(&mut consumer, &arguments, &partitions, start).map_err(consume_error)?;
    let printer = Printer {
        topic: arguments.topic.clone(),
        format,
        json: arguments.json,
    };
    let limits = Limits {
        max_messages: arguments.max_messages,
        idle_timeout: arguments.timeout_ms.map(Duration::from_millis),
    };
    let outcome = consume_loop(&mut consumer, &printer, &limits, out).await;
    let closed = consumer.close().await;
    let count = outcome?;
    closed.map_err(consume_error)?;
    eprintln!("Processed a total of {count} messages");
    Ok(())
}

/// Assigns one partition (at `start`), subscribes as a group member, or
/// assigns every partition of the topic.
fn start_reading(
    consumer: &mut Consumer,
    arguments: &ConsumeArguments,
    partitions: &[i32],
    start: Option<StartOffset>,
) -> Result<(), ConsumerError> {
    let topic = &arguments.topic;
    if let Some(partition) = arguments.partition {
        let assigned = TopicPartition::new(topic, partition);
        consumer.assign([assigned.clone()])?;
        return match start {
            Some(StartOffset::Earliest) => consumer.seek_to_beginning(&[assigned]),
            Some(StartOffset::Latest) => consumer.seek_to_end(&[assigned]),
            Some(StartOffset::At(offset)) => consumer.seek(&assigned, offset),
            None => Ok(()),
        };
    }
    if consumer.config().group_id.is_some() {
        return consumer.subscribe([topic.clone()]);
    }
    consumer.assign(
        partitions
            .iter()
            .map(|partition| TopicPartition::new(topic, *partition)),
    )
}

fn consumer_error(context: &Context, topic: &str, source: ConsumerError) -> ToolError {
    match source {
        ConsumerError::Client(client) if crate::error::is_unreachable(&client) => {
            context.unreachable_or("consume", client)
        }
        source => ToolError::Consume {
            topic: topic.to_owned(),
            source,
        },
    }
}

struct Printer {
    topic: String,
    format: RecordFormat,
    json: bool,
}

struct Limits {
    max_messages: Option<u64>,
    idle_timeout: Option<Duration>,
}

async fn consume_loop(
    consumer: &mut Consumer,
    printer: &Printer,
    limits: &Limits,
    out: &mut Output,
) -> Result<u64, ToolError> {
    let mut count = 0u64;
    let mut last_record_at = Instant::now();
    let mut buffer = Vec::new();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        if limits.max_messages.is_some_and(|max| count >= max) {
            return Ok(count);
        }
        if limits
            .idle_timeout
            .is_some_and(|timeout| last_record_at.elapsed() >= timeout)
        {
            return Ok(count);
        }
        let records = tokio::select! {
            records = consumer.poll(POLL_INTERVAL) => records.map_err(|source| ToolError::Consume {
                topic: printer.topic.clone(),
                source,
            })?,
            _ = &mut interrupted => return Ok(count),
        };
        if !records.is_empty() {
            last_record_at = Instant::now();
        }
        let mut records = records.into_iter();
        while let Some(record) = records.next() {
            if limits.max_messages.is_some_and(|max| count >= max) {
                // Rewind to the first record not printed, so that the
                // commit on close covers exactly what was printed.
                rewind_unprinted(consumer, std::iter::once(record).chain(records), printer)?;
                break;
            }
            buffer.clear();
            if printer.json {
                buffer.extend_from_slice(record_json(&record).to_string().as_bytes());
                buffer.push(b'\n');
            } else {
                printer.format.render(&record, &mut buffer);
            }
            out.bytes(&buffer)?;
            count += 1;
        }
        out.flush()?;
    }
}

/// Seeks each partition of `unprinted` back to its first unprinted offset.
fn rewind_unprinted(
    consumer: &mut Consumer,
    unprinted: impl Iterator<Item = ConsumerRecord>,
    printer: &Printer,
) -> Result<(), ToolError> {
    let mut first_unprinted: std::collections::BTreeMap<TopicPartition, i64> =
        std::collections::BTreeMap::new();
    for record in unprinted {
        first_unprinted
            .entry(record.topic_partition())
            .and_modify(|offset| *offset = (*offset).min(record.offset))
            .or_insert(record.offset);
    }
    for (partition, offset) in first_unprinted {
        consumer
            .seek(&partition, offset)
            .map_err(|source| ToolError::Consume {
                topic: printer.topic.clone(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_offsets_parse() {
        assert_eq!(
            StartOffset::parse("earliest").expect("valid"),
            StartOffset::Earliest
        );
        assert_eq!(
            StartOffset::parse("latest").expect("valid"),
            StartOffset::Latest
        );
        assert_eq!(
            StartOffset::parse("42").expect("valid"),
            StartOffset::At(42)
        );
        assert!(StartOffset::parse("-1").is_err());
        assert!(StartOffset::parse("soon").is_err());
    }
}
