//! `strom produce`: lines from stdin or a file become records, like
//! `kafka-console-producer`.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use strom_producer::{DeliveryFuture, ProduceError, Producer, ProducerRecord};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

use crate::cli::ProduceArguments;
use crate::context::{parse_key_values, Context};
use crate::error::ToolError;

/// Deliveries awaited at most at once before reading more input.
const MAX_PENDING_DELIVERIES: usize = 10_000;
/// How long closing the producer may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// How lines are split into headers, key and value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineFormat {
    /// Key and value are split at the first occurrence of this.
    pub key_separator: Option<String>,
    /// Lines start with `k:v,k:v` headers and a tab.
    pub parse_headers: bool,
}

/// One input line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine {
    /// The key (without a key separator: none).
    pub key: Option<Bytes>,
    /// The value.
    pub value: Bytes,
    /// Headers from the line.
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl LineFormat {
    /// Parses one line (without its newline); `line_number` counts from 1.
    pub fn parse(&self, line: &str, line_number: u64) -> Result<ParsedLine, ToolError> {
        let (headers, rest) = if self.parse_headers {
            let (headers, rest) = line.split_once('\t').ok_or_else(|| {
                bad_line(
                    line_number,
                    line,
                    "headers `k:v,k:v`, a tab, then the record",
                )
            })?;
            (parse_headers(headers), rest)
        } else {
            (Vec::new(), line)
        };
        let (key, value) = match &self.key_separator {
            Some(separator) => {
                let (key, value) = rest.split_once(separator.as_str()).ok_or_else(|| {
                    bad_line(
                        line_number,
                        line,
                        "a key, the key separator, then the value",
                    )
                })?;
                (Some(Bytes::copy_from_slice(key.as_bytes())), value)
            }
            None => (None, rest),
        };
        Ok(ParsedLine {
            key,
            value: Bytes::copy_from_slice(value.as_bytes()),
            headers,
        })
    }
}

fn parse_headers(text: &str) -> Vec<(String, Option<Bytes>)> {
    text.split(',')
        .filter(|header| !header.is_empty())
        .map(|header| match header.split_once(':') {
            Some((key, value)) => (
                key.to_owned(),
                Some(Bytes::copy_from_slice(value.as_bytes())),
            ),
            None => (header.to_owned(), None),
        })
        .collect()
}

fn bad_line(line_number: u64, line: &str, expected: &'static str) -> ToolError {
    ToolError::BadInputLine {
        line_number,
        text: line.chars().take(80).collect(),
        expected,
    }
}

/// Runs `strom produce`.
pub async fn run(context: &Context, arguments: ProduceArguments) -> Result<(), ToolError> {
    let properties = parse_key_values("--property", &arguments.properties)?;
    let static_headers: Vec<(String, Option<Bytes>)> =
        parse_key_values("--header", &arguments.headers)?
            .into_iter()
            .map(|(key, value)| (key, Some(Bytes::from(value))))
            .collect();
    let mut config = context.producer_config(&[])?;
    config.acks = arguments.acks.acks();
    config.compression = arguments.compression.compression();
    for (key, value) in &properties {
        config
            .set(key, value)
            .map_err(|source| ToolError::CommandConfig {
                path: "--property".into(),
                source,
            })?;
    }
    let format = LineFormat {
        key_separator: arguments.key_separator.clone(),
        parse_headers: arguments.parse_headers,
    };
    let input = open_input(arguments.file.as_deref()).await?;
    let cluster = context.cluster().await?;
    let info = crate::topic_metadata::topic_info(&cluster, &arguments.topic).await?;
    if let Some(partition) = arguments.partition {
        if info.partition(partition).is_none() {
            return Err(ToolError::UnknownPartition {
                topic: arguments.topic.clone(),
                partition,
                partitions: info.partitions.len(),
            });
        }
    }
    cluster.close();
    let producer = Producer::new(config)
        .await
        .map_err(|source| ToolError::ProducerCreate { source })?;
    let sending = Sending {
        topic: &arguments.topic,
        partition: arguments.partition,
        headers: &static_headers,
        format: &format,
    };
    let outcome = sending.send_all(&producer, input).await;
    producer.close(CLOSE_TIMEOUT).await;
    let sent = outcome?;
    eprintln!("Produced {sent} record(s) to {}.", arguments.topic);
    Ok(())
}

async fn open_input(
    file: Option<&Path>,
) -> Result<Box<dyn AsyncBufRead + Unpin + Send>, ToolError> {
    match file {
        Some(path) => {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|source| ToolError::ReadFile {
                    path: path.to_owned(),
                    source,
                })?;
            Ok(Box::new(BufReader::new(file)))
        }
        None => Ok(Box::new(BufReader::new(tokio::io::stdin()))),
    }
}

struct Sending<'a> {
    topic: &'a str,
    partition: Option<i32>,
    headers: &'a [(String, Option<Bytes>)],
    format: &'a LineFormat,
}

impl Sending<'_> {
    async fn send_all(
        &self,
        producer: &Producer,
        input: Box<dyn AsyncBufRead + Unpin + Send>,
    ) -> Result<u64, ToolError> {
        let mut lines = input.lines();
        let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
        let mut line_number = 0u64;
        let mut delivered = 0u64;
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|source| ToolError::ReadFile {
                path: "<input>".into(),
                source,
            })?
        {
            line_number += 1;
            let parsed = self.format.parse(&line, line_number)?;
            pending.push_back(producer.send(self.record(parsed)).await);
            if pending.len() >= MAX_PENDING_DELIVERIES {
                if let Some(delivery) = pending.pop_front() {
                    self.await_delivery(delivery).await?;
                    delivered += 1;
                }
            }
        }
        producer.flush().await;
        for delivery in pending {
            self.await_delivery(delivery).await?;
            delivered += 1;
        }
        Ok(delivered)
    }

    fn record(&self, line: ParsedLine) -> ProducerRecord {
        let mut record = ProducerRecord::new(self.topic, line.value);
        record.key = line.key;
        record.partition = self.partition;
        record.headers = self.headers.iter().cloned().chain(line.headers).collect();
        record
    }

    async fn await_delivery(&self, delivery: DeliveryFuture) -> Result<(), ToolError> {
        delivery.await.map(|_| ()).map_err(|source| match source {
            ProduceError::UnknownTopicOrPartition { .. } => ToolError::UnknownTopic {
                topic: self.topic.to_owned(),
            },
            source => ToolError::Produce {
                topic: self.topic.to_owned(),
                source,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_values() {
        let parsed = LineFormat::default().parse("a:b", 1).expect("valid");
        assert_eq!(parsed.key, None);
        assert_eq!(parsed.value, Bytes::from_static(b"a:b"));
        assert!(parsed.headers.is_empty());
    }

    #[test]
    fn key_separator_splits_at_the_first_occurrence() {
        let format = LineFormat {
            key_separator: Some(":".to_owned()),
            parse_headers: false,
        };
        let parsed = format.parse("user-1:a:b", 1).expect("valid");
        assert_eq!(parsed.key, Some(Bytes::from_static(b"user-1")));
        assert_eq!(parsed.value, Bytes::from_static(b"a:b"));
        let error = format.parse("no separator", 7).unwrap_err();
        assert!(error.to_string().contains("line 7"), "{error}");
    }

    #[test]
    fn headers_precede_a_tab() {
        let format = LineFormat {
            key_separator: Some("=".to_owned()),
            parse_headers: true,
        };
        let parsed = format.parse("source:web,flag\tk=v", 1).expect("valid");
        assert_eq!(
            parsed.headers,
            [
                ("source".to_owned(), Some(Bytes::from_static(b"web"))),
                ("flag".to_owned(), None)
            ]
        );
        assert_eq!(parsed.key, Some(Bytes::from_static(b"k")));
        assert_eq!(parsed.value, Bytes::from_static(b"v"));
        assert!(format.parse("no tab here", 2).is_err());
    }
}
