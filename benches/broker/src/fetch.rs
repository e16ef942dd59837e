//! The fetch mode: reads a topic from offset 0 to the end offsets it had
//! when the run started, one Fetch at a time on one connection.

use std::time::Instant;

use strom_protocol::kafka::messages::fetch_request::{FetchPartition, FetchTopic};
use strom_protocol::kafka::messages::{BrokerId, FetchRequest, FetchResponse};
use strom_protocol::records::RecordBatches;
use strom_protocol::{ErrorCode, Request, Response};

use crate::admin::{broker_error, end_offsets_at, topic_name};
use crate::connection::Connection;
use crate::error::LoadError;
use crate::stats::{LatencySummary, Report};

/// Fetch version the tool sends (topic names, flexible encoding).
pub const FETCH_VERSION: i16 = 12;

/// How to read.
#[derive(Debug, Clone)]
pub struct FetchSettings {
    /// The topic.
    pub topic: String,
    /// Its partition count.
    pub partitions: i32,
    /// `max_bytes` of each Fetch.
    pub max_bytes: i32,
    /// `partition_max_bytes` of each partition in a Fetch.
    pub partition_max_bytes: i32,
    /// `max_wait_ms` of each Fetch.
    pub max_wait_ms: i32,
    /// `isolation_level` of each Fetch (0: read_uncommitted, 1:
    /// read_committed, which reads to the last stable offset). Batches are
    /// counted as returned: the broker's cost, without the client's
    /// filtering of aborted transactions.
    pub isolation_level: i8,
}

/// Reads every partition of the topic from 0 to its current end offset.
pub async fn run_fetch(
    connection: &mut Connection,
    settings: &FetchSettings,
) -> Result<Report, LoadError> {
    let targets = end_offsets_at(
        connection,
        &settings.topic,
        settings.partitions,
        settings.isolation_level,
    )
    .await?;
    let mut positions = vec![0_i64; targets.len()];
    let mut records = 0_u64;
    let mut batch_bytes = 0_u64;
    let mut latencies = Vec::new();
    let started = Instant::now();
    loop {
        let wanted: Vec<(i32, i64)> = positions
            .iter()
            .zip(&targets)
            .enumerate()
            .filter(|(_, (position, target))| position < target)
            .map(|(index, (position, _))| (index as i32, *position))
            .collect();
        if wanted.is_empty() {
            break;
        }
        let sent_at = Instant::now();
        let response = connection
            .round_trip(
                Request::from(fetch_request(settings, &wanted)),
                FETCH_VERSION,
            )
            .await?;
        latencies.push(sent_at.elapsed());
        let Response::Fetch(response) = response else {
            return Err(LoadError::UnexpectedResponse { expected: "Fetch" });
        };
        let (new_records, new_bytes) = advance_positions(&response, settings, &mut positions)?;
        records += new_records;
        batch_bytes += new_bytes;
    }
    Ok(Report {
        mode: "fetch",
        records,
        batch_bytes,
        elapsed: started.elapsed(),
        latency: LatencySummary::from_samples(&mut latencies),
    })
}

/// Moves each partition's position past the batches `response` returned;
/// the records and batch bytes that were new.
fn advance_positions(
    response: &FetchResponse,
    settings: &FetchSettings,
    positions: &mut [i64],
) -> Result<(u64, u64), LoadError> {
    let mut records = 0_u64;
    let mut batch_bytes = 0_u64;
    for partition in response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
    {
        let code = ErrorCode::from(partition.error_code);
        if !code.is_none() {
            return Err(broker_error(
                "Fetch",
                &settings.topic,
                partition.partition_index,
                code,
            ));
        }
        let Some(position) = usize::try_from(partition.partition_index)
            .ok()
            .and_then(|index| positions.get_mut(index))
        else {
            continue;
        };
        let Some(bytes) = partition.records.clone() else {
            continue;
        };
        for batch in RecordBatches::new(bytes) {
            let batch = batch?;
            if batch.next_offset() <= *position {
                continue;
            }
            records += u64::try_from(batch.record_count()).unwrap_or(0);
            batch_bytes += batch.size_in_bytes() as u64;
            *position = batch.next_offset();
        }
    }
    Ok((records, batch_bytes))
}

fn fetch_request(settings: &FetchSettings, wanted: &[(i32, i64)]) -> FetchRequest {
    let partitions = wanted
        .iter()
        .map(|(index, offset)| {
            FetchPartition::default()
                .with_partition(*index)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(*offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(settings.partition_max_bytes)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(settings.max_wait_ms)
        .with_isolation_level(settings.isolation_level)
        .with_min_bytes(1)
        .with_max_bytes(settings.max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(&settings.topic))
            .with_partitions(partitions)])
}
