//! `strom-interop-producer`: strom-producer driven by the Python interop suite.
//!
//! Usage: `strom-interop-producer --bootstrap-servers HOST:PORT [-X key=value]...`
//!
//! Each `-X` sets one producer property with Kafka's name (`acks`,
//! `compression.type`, `linger.ms`, `enable.idempotence`, ...). Records come
//! on stdin as JSON lines:
//!
//! ```json
//! {"topic": "t", "partition": null, "key": "6b6579", "value": null,
//!  "headers": [["h", "7631"], ["n", null]], "timestamp": 1700000000000}
//! ```
//!
//! where keys, values and header values are hex strings (or `null`), and
//! `partition` and `timestamp` may be left out. Every record is sent before
//! any is awaited; then one JSON line per record is printed, in input order:
//! `{"partition": 0, "offset": 12, "timestamp": 1700000000000}` or
//! `{"error": "...", "kind": "RecordTooLarge"}`. The exit code is 0 when the
//! input was well formed, whatever the records' outcomes.
//!
//! With `--stream` (the chaos workload of `tests/interop/chaos.py`), each
//! record is sent as soon as its line is read, and its outcome is printed
//! as soon as it is known, in completion order, with the line's `"id"`
//! (any JSON value) echoed back and `"time_ms"`, the wall-clock time of the
//! outcome; the program flushes and exits when stdin is closed.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use strom_producer::{ProduceError, Producer, ProducerConfig, ProducerRecord, RecordMetadata};

/// Why the program could not run.
#[derive(Debug, thiserror::Error)]
enum InteropError {
    #[error(
        "usage: strom-interop-producer --bootstrap-servers HOST:PORT [--stream] [-X key=value]..."
    )]
    Usage,
    #[error("invalid property {property}: expected key=value")]
    Property { property: String },
    #[error("configuration: {0}")]
    Config(#[from] strom_client::ConfigError),
    #[error("producer: {0}")]
    Create(#[from] strom_producer::ProducerCreateError),
    #[error("stdin line {line}: {reason}")]
    Input { line: usize, reason: &'static str },
    #[error("stdin line {line}: {source}")]
    Json {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("strom-interop-producer: runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("strom-interop-producer: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), InteropError> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let stream = arguments.iter().any(|argument| argument == "--stream");
    let config = parse_arguments(
        arguments
            .into_iter()
            .filter(|argument| argument != "--stream"),
    )?;
    if stream {
        return run_streaming(config).await;
    }
    let records = read_records(std::io::stdin().lock())?;
    let producer = Producer::new(config).await?;
    let mut deliveries = Vec::with_capacity(records.len());
    for record in records {
        deliveries.push(producer.send(record).await);
    }
    let mut stdout = std::io::stdout().lock();
    for delivery in deliveries {
        writeln!(stdout, "{}", outcome_json(delivery.await))?;
    }
    stdout.flush()?;
    producer.close(Duration::from_secs(10)).await;
    Ok(())
}

/// `--stream`: sends each line's record as it is read and prints each
/// outcome (with the line's `"id"` and the time) as it completes.
async fn run_streaming(config: ProducerConfig) -> Result<(), InteropError> {
    let producer = Producer::new(config).await?;
    let (lines, mut receiver) = tokio::sync::mpsc::channel::<(usize, String)>(1024);
    // A plain thread: a blocking read on the runtime would hold up its
    // shutdown.
    let reader = std::thread::spawn(move || -> Result<(), std::io::Error> {
        for (index, line) in std::io::stdin().lock().lines().enumerate() {
            if lines.blocking_send((index + 1, line?)).is_err() {
                break;
            }
        }
        Ok(())
    });
    let mut pending = tokio::task::JoinSet::new();
    while let Some((line_number, line)) = receiver.recv().await {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|source| InteropError::Json {
            line: line_number,
            source,
        })?;
        let record = record_from_json(&value).map_err(|reason| InteropError::Input {
            line: line_number,
            reason,
        })?;
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        let delivery = producer.send(record).await;
        pending.spawn(async move {
            let mut outcome = outcome_json(delivery.await);
            if let Some(object) = outcome.as_object_mut() {
                object.insert("id".to_owned(), id);
                object.insert("time_ms".to_owned(), json!(now_ms()));
            }
            let mut stdout = std::io::stdout().lock();
            // A closed stdout means the driver is gone; nothing is left to report.
            let _ = writeln!(stdout, "{outcome}");
            let _ = stdout.flush();
        });
        // Reap what has completed, so the set stays small on long runs.
        while pending.try_join_next().is_some() {}
    }
    while pending.join_next().await.is_some() {}
    producer.close(Duration::from_secs(10)).await;
    match reader.join() {
        Ok(result) => Ok(result?),
        Err(_) => Err(InteropError::Io(std::io::Error::other(
            "the stdin reader thread panicked",
        ))),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

fn parse_arguments(
    mut arguments: impl Iterator<Item = String>,
) -> Result<ProducerConfig, InteropError> {
    let mut properties: Vec<(String, String)> = Vec::new();
    while let Some(argument) = arguments.next() {
        let value = arguments.next().ok_or(InteropError::Usage)?;
        match argument.as_str() {
            "--bootstrap-servers" => properties.push(("bootstrap.servers".to_owned(), value)),
            "-X" => {
                let (key, setting) =
                    value
                        .split_once('=')
                        .ok_or_else(|| InteropError::Property {
                            property: value.clone(),
                        })?;
                properties.push((key.to_owned(), setting.to_owned()));
            }
            _ => return Err(InteropError::Usage),
        }
    }
    let (config, unknown) = ProducerConfig::from_properties(
        properties
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str())),
    )?;
    if let Some(key) = unknown.first() {
        return Err(InteropError::Property {
            property: key.clone(),
        });
    }
    Ok(config)
}

fn read_records(input: impl BufRead) -> Result<Vec<ProducerRecord>, InteropError> {
    let mut records = Vec::new();
    for (index, line) in input.lines().enumerate() {
        let line_number = index + 1;
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|source| InteropError::Json {
            line: line_number,
            source,
        })?;
        records.push(
            record_from_json(&value).map_err(|reason| InteropError::Input {
                line: line_number,
                reason,
            })?,
        );
    }
    Ok(records)
}

fn record_from_json(value: &Value) -> Result<ProducerRecord, &'static str> {
    let topic = value
        .get("topic")
        .and_then(Value::as_str)
        .ok_or("missing \"topic\"")?;
    let partition = match value.get("partition") {
        None | Some(Value::Null) => None,
        Some(number) => Some(
            number
                .as_i64()
                .and_then(|number| i32::try_from(number).ok())
                .ok_or("\"partition\" is not an i32")?,
        ),
    };
    let timestamp_ms = match value.get("timestamp") {
        None | Some(Value::Null) => None,
        Some(number) => Some(number.as_i64().ok_or("\"timestamp\" is not an i64")?),
    };
    let mut headers = Vec::new();
    if let Some(list) = value.get("headers").and_then(Value::as_array) {
        for header in list {
            let pair = header.as_array().ok_or("a header is not [key, value]")?;
            let (Some(key), Some(header_value)) = (pair.first(), pair.get(1)) else {
                return Err("a header is not [key, value]");
            };
            let key = key.as_str().ok_or("a header key is not a string")?;
            headers.push((key.to_owned(), hex_field(Some(header_value))?));
        }
    }
    Ok(ProducerRecord {
        topic: topic.into(),
        partition,
        key: hex_field(value.get("key"))?,
        value: hex_field(value.get("value"))?,
        headers,
        timestamp_ms,
    })
}

/// A hex string (or null / absent) as bytes.
fn hex_field(value: Option<&Value>) -> Result<Option<Bytes>, &'static str> {
    let text = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text,
        Some(_) => return Err("a key, value or header value is not a hex string"),
    };
    decode_hex(text).map(|bytes| Some(Bytes::from(bytes)))
}

fn decode_hex(text: &str) -> Result<Vec<u8>, &'static str> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err("odd number of hex digits");
    }
    digits
        .chunks_exact(2)
        .map(|pair| match pair {
            [high, low] => Ok((hex_digit(*high)? << 4) | hex_digit(*low)?),
            _ => Err("odd number of hex digits"),
        })
        .collect()
}

fn hex_digit(digit: u8) -> Result<u8, &'static str> {
    match digit {
        b'0'..=b'9' => Ok(digit - b'0'),
        b'a'..=b'f' => Ok(digit - b'a' + 10),
        b'A'..=b'F' => Ok(digit - b'A' + 10),
        _ => Err("not a hex digit"),
    }
}

fn outcome_json(outcome: Result<RecordMetadata, ProduceError>) -> Value {
    match outcome {
        Ok(metadata) => json!({
            "topic": metadata.topic.as_ref(),
            "partition": metadata.partition,
            "offset": metadata.offset,
            "timestamp": metadata.timestamp_ms,
        }),
        Err(error) => json!({
            "error": strom_config::error_chain(&error),
            "kind": error_kind(&error),
        }),
    }
}

fn error_kind(error: &ProduceError) -> &'static str {
    match error {
        ProduceError::RecordTooLarge { .. } => "RecordTooLarge",
        ProduceError::UnknownTopicOrPartition { .. } => "UnknownTopicOrPartition",
        ProduceError::Authorization { .. } => "Authorization",
        ProduceError::Timeout { .. } => "Timeout",
        ProduceError::Broker { .. } => "Broker",
        ProduceError::InvalidRecord { .. } => "InvalidRecord",
        ProduceError::BatchMismatch => "BatchMismatch",
        ProduceError::Closed => "Closed",
        ProduceError::Poisoned => "Poisoned",
        ProduceError::Client { .. } => "Client",
        ProduceError::Transaction(_) => "Transaction",
    }
}
