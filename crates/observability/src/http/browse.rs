//! The message browser: `/api/topics/NAME/records` and
//! `/api/topics/NAME/records/raw`.
//!
//! Records are read through the broker's consumer read path
//! ([`BrokerView::read_records`]: committed records only, never past the
//! high watermark), [`READ_CHUNK_BYTES`] at a time, and one request reads
//! at most [`MAX_SCAN_BYTES`]: a filter that matches rarely returns what
//! it found so far with the offset to continue from, so no request costs
//! more than a bounded read. Browsing requests run one at a time and are
//! paced to [`BROWSE_BYTES_PER_SECOND`] of reads. Control records
//! (transaction markers) are not shown.
//!
//! Query parameters of `records` (all optional):
//! - `partition`: a partition number (default 0), or `all` (the newest
//!   records, or those from a timestamp, of every partition, merged by
//!   timestamp; no paging);
//! - one of `offset=O` (forward from O), `timestamp=MS` (forward from the
//!   first record at or after MS, as ListOffsets finds it) or `before=O`
//!   (the records just before O); none: the newest records;
//! - `limit`: records per page, 1 to [`MAX_RECORDS`] (default 20);
//! - `filter`: only records whose key or value contains this text;
//! - `max_bytes`: bytes of each key, value and header value shown, up to
//!   [`MAX_SHOWN_LIMIT`] (default [`MAX_SHOWN_BYTES`]).
//!
//! The answer lists the records (offset, partition, timestamp, key, value,
//! headers; each key and value with its size, the shown bytes as text and
//! in base64, and whether it was cut) and the cursors of the neighbouring
//! pages: `next_offset` (continue forward with `offset=`) and
//! `previous_offset` (continue backward with `before=`), each `null` at
//! the end of the log. `raw?partition=P&offset=O&part=key|value` serves
//! one record's whole key or value (`view=text` shows UTF-8 as text,
//! otherwise it is downloaded).

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Value};
use strom_protocol::acl::{operation, resource};
use strom_protocol::records::{Record, RecordBatch, RecordBatches};

use super::access::{percent_decode, query_value, Access, Answer};
use crate::view::BrokerView;

/// Most records one page returns.
pub const MAX_RECORDS: usize = 100;

/// Bytes of a key, value or header value shown by default; longer ones
/// are cut (the raw download serves them whole).
pub const MAX_SHOWN_BYTES: usize = 1024;

/// The largest `max_bytes` a page may ask for.
pub const MAX_SHOWN_LIMIT: usize = 64 * 1024;

/// Bytes read from a partition at a time (at least one batch).
pub const READ_CHUNK_BYTES: u64 = 64 * 1024;

/// Bytes one request reads at most (a filtered scan stops there).
pub const MAX_SCAN_BYTES: u64 = 4 << 20;

/// Bytes browsing may read per second, over all requests: after a request
/// the next one waits until its reads fit this rate (see `routes`), so
/// that paging through a topic never takes more than a bounded share of
/// the broker.
pub const BROWSE_BYTES_PER_SECOND: u64 = 8 << 20;

/// Offsets a backward page steps back by at first, per wanted record.
const BACKWARD_SPAN_PER_RECORD: i64 = 2;

/// Where a page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The newest records.
    Latest,
    /// Forward from an offset.
    Offset(i64),
    /// Forward from the first record at or after a timestamp.
    Timestamp(i64),
    /// The records just before an offset.
    Before(i64),
}

/// A parsed `records` query.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Query {
    /// `None`: every partition.
    partition: Option<i32>,
    start: Start,
    limit: usize,
    filter: Option<Vec<u8>>,
    shown_bytes: usize,
}

/// One page of one partition.
#[derive(Debug, Default)]
struct Page {
    records: Vec<Found>,
    next_offset: Option<i64>,
    previous_offset: Option<i64>,
    /// Bytes read for it.
    scanned: u64,
}

/// A record found, with what orders it among partitions.
#[derive(Debug)]
struct Found {
    offset: i64,
    timestamp_ms: i64,
    json: Value,
}

/// Answers `records`.
pub(crate) fn records(access: &Access<'_>, name: &str, query: Option<&str>) -> Answer {
    if !access.may(operation::READ, resource::TOPIC, name) {
        return Answer::Forbidden;
    }
    let query = match parse(query) {
        Ok(query) => query,
        Err(problem) => return Answer::BadRequest(problem),
    };
    let broker = access.broker;
    let Some(topic) = broker.topic(name) else {
        return Answer::NotFound;
    };
    match query.partition {
        Some(partition) => {
            if usize::try_from(partition).map_or(true, |index| index >= topic.partitions.len()) {
                return Answer::BadRequest(format!(
                    "partition {partition} does not exist (the topic has {})",
                    topic.partitions.len()
                ));
            }
            one_partition(access, name, partition, &query)
        }
        None => all_partitions(access, name, topic.partitions.len(), &query),
    }
}

fn one_partition(access: &Access<'_>, name: &str, partition: i32, query: &Query) -> Answer {
    let broker = access.broker;
    let Some(log) = broker.led_partition_log(name, partition) else {
        return Answer::BadRequest(format!(
            "partition {partition} is not led by this broker; open the console of its leader"
        ));
    };
    let (log_start, high_watermark) = (log.log_start_offset, log.high_watermark);
    let page = match query.start {
        Start::Offset(offset) if offset < log_start || offset > high_watermark => {
            return Answer::BadRequest(format!(
                "offset {offset} is out of range: the partition holds {log_start} to {high_watermark}"
            ))
        }
        Start::Offset(offset) => forward(broker, (name, partition), offset, (log_start, high_watermark), query),
        Start::Timestamp(timestamp) => {
            let from = broker
                .offset_for_timestamp(name, partition, timestamp)
                .unwrap_or(high_watermark);
            forward(broker, (name, partition), from, (log_start, high_watermark), query)
        }
        Start::Before(offset) => {
            let before = offset.clamp(log_start, high_watermark);
            let mut page = backward(broker, (name, partition), before, log_start, query);
            page.next_offset = (before < high_watermark).then_some(before);
            page
        }
        Start::Latest => backward(broker, (name, partition), high_watermark, log_start, query),
    };
    access.count_scanned(page.scanned);
    Answer::Json(json!({
        "topic": name,
        "partition": partition,
        "log_start_offset": log_start,
        "high_watermark": high_watermark,
        "next_offset": page.next_offset,
        "previous_offset": page.previous_offset,
        "records": page.records.into_iter().map(|found| found.json).collect::<Vec<_>>(),
    }))
}

/// The newest records (or those from a timestamp) of every partition led
/// here, merged by timestamp.
fn all_partitions(access: &Access<'_>, name: &str, partitions: usize, query: &Query) -> Answer {
    let broker = access.broker;
    if matches!(query.start, Start::Offset(_) | Start::Before(_)) {
        return Answer::BadRequest("offset and before need one partition (partition=N)".to_owned());
    }
    let mut found = Vec::new();
    for partition in (0..partitions).filter_map(|index| i32::try_from(index).ok()) {
        let Some(log) = broker.led_partition_log(name, partition) else {
            continue;
        };
        let page = match query.start {
            Start::Timestamp(timestamp) => {
                let from = broker
                    .offset_for_timestamp(name, partition, timestamp)
                    .unwrap_or(log.high_watermark);
                let bounds = (log.log_start_offset, log.high_watermark);
                forward(broker, (name, partition), from, bounds, query)
            }
            _ => backward(
                broker,
                (name, partition),
                log.high_watermark,
                log.log_start_offset,
                query,
            ),
        };
        access.count_scanned(page.scanned);
        found.extend(page.records.into_iter().map(|record| (partition, record)));
    }
    found.sort_by_key(|(partition, record)| (record.timestamp_ms, *partition, record.offset));
    let keep = if query.start == Start::Latest {
        found.split_off(found.len().saturating_sub(query.limit))
    } else {
        found.truncate(query.limit);
        found
    };
    Answer::Json(json!({
        "topic": name,
        "partition": "all",
        "next_offset": null,
        "previous_offset": null,
        "records": keep.into_iter().map(|(_, found)| found.json).collect::<Vec<_>>(),
    }))
}

/// Up to `limit` matching records from `from`, stopping at the high
/// watermark or the scan budget.
fn forward(
    broker: &dyn BrokerView,
    (name, partition): (&str, i32),
    from: i64,
    (log_start, high_watermark): (i64, i64),
    query: &Query,
) -> Page {
    let mut page = Page::default();
    let mut position = from;
    let mut scanned = 0u64;
    while position < high_watermark && scanned < MAX_SCAN_BYTES {
        let Some(bytes) = broker.read_records(name, partition, position, READ_CHUNK_BYTES) else {
            break;
        };
        if bytes.is_empty() {
            break;
        }
        scanned += bytes.len() as u64;
        let read = scan(&bytes, (position, high_watermark), partition, query);
        for found in read.matches {
            if page.records.len() == query.limit {
                break;
            }
            position = found.offset + 1;
            page.records.push(found);
        }
        if page.records.len() == query.limit {
            break;
        }
        if read.next <= position {
            break;
        }
        position = read.next;
    }
    page.next_offset = (position < high_watermark).then_some(position);
    // Older records exist before where this page started.
    page.previous_offset = (from > log_start).then_some(from);
    page.scanned = scanned;
    page
}

/// The last `limit` matching records before `before`: windows further
/// and further back, read forward, until enough are found, the log start
/// is reached or the scan budget is spent.
fn backward(
    broker: &dyn BrokerView,
    (name, partition): (&str, i32),
    before: i64,
    log_start: i64,
    query: &Query,
) -> Page {
    let mut collected: Vec<Found> = Vec::new();
    let mut end = before;
    let mut span = (query.limit as i64)
        .saturating_mul(BACKWARD_SPAN_PER_RECORD)
        .max(1);
    let mut scanned = 0u64;
    while end > log_start && collected.len() < query.limit && scanned < MAX_SCAN_BYTES {
        let start = end.saturating_sub(span).max(log_start);
        let mut window = Vec::new();
        let mut position = start;
        while position < end && scanned < MAX_SCAN_BYTES {
            let Some(bytes) = broker.read_records(name, partition, position, READ_CHUNK_BYTES)
            else {
                break;
            };
            if bytes.is_empty() {
                break;
            }
            scanned += bytes.len() as u64;
            let read = scan(&bytes, (position, end), partition, query);
            window.extend(read.matches);
            if read.next <= position {
                break;
            }
            position = read.next;
        }
        window.append(&mut collected);
        collected = window;
        end = start;
        span = span.saturating_mul(2);
    }
    let first = collected.len().saturating_sub(query.limit);
    let records = collected.split_off(first);
    let previous_offset = match records.first() {
        Some(found) if found.offset > log_start => Some(found.offset),
        Some(_) => None,
        None => (end > log_start).then_some(end),
    };
    Page {
        records,
        next_offset: None,
        previous_offset,
        scanned,
    }
}

/// What one read held: the matching records in `[from, until)` and the
/// offset after its last batch.
struct Scanned {
    matches: Vec<Found>,
    next: i64,
}

fn scan(bytes: &Bytes, (from, until): (i64, i64), partition: i32, query: &Query) -> Scanned {
    let mut scanned = Scanned {
        matches: Vec::new(),
        next: from,
    };
    for batch in RecordBatches::new(bytes.clone()).map_while(Result::ok) {
        if batch.base_offset() >= until {
            break;
        }
        scanned.next = scanned.next.max(batch.next_offset());
        if batch.attributes().is_control() {
            continue;
        }
        let Ok(records) = batch.records_with_limit(4 * READ_CHUNK_BYTES as usize) else {
            continue;
        };
        for record in records.map_while(Result::ok) {
            let offset = record.offset(batch.base_offset());
            if offset < from || offset >= until || !matches(&record, query.filter.as_deref()) {
                continue;
            }
            scanned.matches.push(Found {
                offset,
                timestamp_ms: batch.record_timestamp(&record),
                json: record_json(&batch, &record, partition, query.shown_bytes),
            });
        }
    }
    scanned
}

fn matches(record: &Record, filter: Option<&[u8]>) -> bool {
    let Some(filter) = filter else {
        return true;
    };
    let contains = |bytes: Option<&[u8]>| {
        bytes.is_some_and(|bytes| {
            filter.is_empty() || bytes.windows(filter.len()).any(|window| window == filter)
        })
    };
    contains(record.key()) || contains(record.value())
}

fn record_json(batch: &RecordBatch, record: &Record, partition: i32, shown: usize) -> Value {
    let headers: Vec<Value> = record
        .headers()
        .iter()
        .map(|header| {
            json!({
                "key": String::from_utf8_lossy(header.key),
                "value": shown_bytes(header.value, shown),
            })
        })
        .collect();
    json!({
        "partition": partition,
        "offset": record.offset(batch.base_offset()),
        "timestamp_ms": batch.record_timestamp(record),
        "key": shown_bytes(record.key(), shown),
        "value": shown_bytes(record.value(), shown),
        "headers": headers,
    })
}

/// Up to `limit` bytes: their size, whether they were cut, the shown
/// bytes in base64, and as text (UTF-8, else `0x` and hex).
pub(crate) fn shown_bytes(bytes: Option<&[u8]>, limit: usize) -> Value {
    let Some(bytes) = bytes else {
        return Value::Null;
    };
    let mut cut = &bytes[..bytes.len().min(limit)];
    // Cut at a character boundary when the bytes are text.
    if let Err(error) = std::str::from_utf8(cut) {
        if error.error_len().is_none() && std::str::from_utf8(bytes).is_ok() {
            cut = &cut[..error.valid_up_to()];
        }
    }
    let (text, utf8) = match std::str::from_utf8(cut) {
        Ok(text) => (text.to_owned(), true),
        Err(_) => (
            format!(
                "0x{}",
                cut.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
            false,
        ),
    };
    json!({
        "size": bytes.len(),
        "truncated": bytes.len() > cut.len(),
        "utf8": utf8,
        "text": text,
        "base64": base64::engine::general_purpose::STANDARD.encode(cut),
    })
}

/// Answers `records/raw`: one record's whole key or value.
pub(crate) fn raw(access: &Access<'_>, name: &str, query: Option<&str>) -> Answer {
    if !access.may(operation::READ, resource::TOPIC, name) {
        return Answer::Forbidden;
    }
    let number = |key: &str| -> Result<i64, String> {
        let value = query_value(query, key).ok_or_else(|| format!("{key} is required"))?;
        value
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{key} must be a number ≥ 0, not {value:?}"))
    };
    let (partition, offset) = match (number("partition"), number("offset")) {
        (Ok(partition), Ok(offset)) => (partition, offset),
        (Err(problem), _) | (_, Err(problem)) => return Answer::BadRequest(problem),
    };
    let Ok(partition) = i32::try_from(partition) else {
        return Answer::BadRequest("partition is too large".to_owned());
    };
    let key = match query_value(query, "part") {
        None | Some("value") => false,
        Some("key") => true,
        Some(other) => {
            return Answer::BadRequest(format!("part must be key or value, not {other:?}"))
        }
    };
    let broker = access.broker;
    let Some(log) = broker.led_partition_log(name, partition) else {
        return Answer::NotFound;
    };
    if offset < log.log_start_offset || offset >= log.high_watermark {
        return Answer::NotFound;
    }
    let Some(bytes) = broker.read_records(name, partition, offset, READ_CHUNK_BYTES) else {
        return Answer::NotFound;
    };
    access.count_scanned(bytes.len() as u64);
    let Some(body) = record_part(&bytes, offset, key) else {
        return Answer::NotFound;
    };
    let text = query_value(query, "view") == Some("text") && std::str::from_utf8(&body).is_ok();
    let part = if key { "key" } else { "value" };
    Answer::Raw {
        body,
        text,
        filename: format!("{name}-{partition}-{offset}.{part}"),
    }
}

/// The key or value of the record at `offset` in `bytes`.
fn record_part(bytes: &Bytes, offset: i64, key: bool) -> Option<Bytes> {
    for batch in RecordBatches::new(bytes.clone()).map_while(Result::ok) {
        if batch.attributes().is_control() || offset >= batch.next_offset() {
            continue;
        }
        let records = batch
            .records_with_limit(4 * READ_CHUNK_BYTES as usize)
            .ok()?;
        for record in records.map_while(Result::ok) {
            if record.offset(batch.base_offset()) == offset {
                let part = if key { record.key() } else { record.value() };
                return part.map(Bytes::copy_from_slice);
            }
        }
        return None;
    }
    None
}

/// Reads the query of `records`.
fn parse(query: Option<&str>) -> Result<Query, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        query_value(query, key)
            .map(|value| {
                percent_decode(value)
                    .ok_or_else(|| format!("{key} is not valid UTF-8 percent-encoding"))
            })
            .transpose()
    };
    let number = |key: &str| -> Result<Option<i64>, String> {
        text(key)?
            .map(|value| {
                value
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| format!("{key} must be a number ≥ 0, not {value:?}"))
            })
            .transpose()
    };
    let partition = match text("partition")?.as_deref() {
        None => Some(0),
        Some("all") => None,
        Some(value) => Some(
            value
                .parse::<i32>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("partition must be a number ≥ 0 or all, not {value:?}"))?,
        ),
    };
    let starts = [
        number("offset")?.map(Start::Offset),
        number("timestamp")?.map(Start::Timestamp),
        number("before")?.map(Start::Before),
    ];
    let start = match starts.iter().flatten().collect::<Vec<_>>().as_slice() {
        [] => Start::Latest,
        [one] => **one,
        _ => return Err("give at most one of offset, timestamp and before".to_owned()),
    };
    let limit = match number("limit")? {
        None => 20,
        Some(limit) if (1..=MAX_RECORDS as i64).contains(&limit) => limit as usize,
        Some(limit) => return Err(format!("limit must be 1 to {MAX_RECORDS}, not {limit}")),
    };
    let shown_bytes = match number("max_bytes")? {
        None => MAX_SHOWN_BYTES,
        Some(bytes) if (1..=MAX_SHOWN_LIMIT as i64).contains(&bytes) => bytes as usize,
        Some(bytes) => {
            return Err(format!(
                "max_bytes must be 1 to {MAX_SHOWN_LIMIT}, not {bytes}"
            ))
        }
    };
    let filter = text("filter")?
        .filter(|filter| !filter.is_empty())
        .map(String::into_bytes);
    Ok(Query {
        partition,
        start,
        limit,
        filter,
        shown_bytes,
    })
}

#[cfg(test)]
#[path = "browse_tests.rs"]
mod tests;
