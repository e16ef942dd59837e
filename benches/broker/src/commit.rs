//! The group commit mode: one simple group (generation -1, empty member id)
//! commits offsets for every partition of a topic in each OffsetCommit,
//! pipelined with a fixed number of requests in flight on one connection.
//! Request `n` commits offset `n` for every partition, so the last commit
//! is known and is read back with OffsetFetch at the end.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strom_protocol::kafka::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use strom_protocol::kafka::messages::offset_fetch_request::OffsetFetchRequestTopic;
use strom_protocol::kafka::messages::{ApiKey, GroupId, OffsetCommitRequest, OffsetFetchRequest};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{decode_response, encode_request_frame, request_header};
use strom_protocol::{ErrorCode, FrameDecoder, Request, Response};
use tokio::io::AsyncWriteExt;

use crate::admin::{broker_error, topic_name};
use crate::connection::{read_frame, Connection, CLIENT_ID};
use crate::error::LoadError;
use crate::group::group_error;
use crate::stats::LatencySummary;

/// OffsetCommit version the tool sends (flexible, no retention time).
pub const OFFSET_COMMIT_VERSION: i16 = 8;
/// OffsetFetch version the tool reads back with (one group, flexible).
pub const OFFSET_FETCH_VERSION: i16 = 7;

/// What to commit and how.
#[derive(Debug, Clone)]
pub struct CommitSettings {
    /// The group id.
    pub group: String,
    /// The topic whose partitions are committed (it must exist).
    pub topic: String,
    /// Partitions per OffsetCommit (0 to `partitions - 1`).
    pub partitions: i32,
    /// OffsetCommit requests outstanding at once.
    pub in_flight: usize,
    /// How long to commit.
    pub duration: Duration,
}

/// What a commit run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitReport {
    /// OffsetCommit requests answered.
    pub requests: u64,
    /// Partition offsets committed (requests times partitions).
    pub offsets: u64,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Per-request latency.
    pub latency: LatencySummary,
    /// The offset every partition read back with OffsetFetch afterwards.
    pub read_back: i64,
}

impl CommitReport {
    /// Committed offsets per second.
    pub fn offsets_per_second(&self) -> f64 {
        self.offsets as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// OffsetCommit requests per second.
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// A human-readable summary, one line.
    pub fn human(&self) -> String {
        format!(
            "group commit: {} offsets in {} requests in {:.3} s = {:.0} offsets/s, {:.0} requests/s; request latency p50 {} us, p99 {} us, max {} us; read back offset {}",
            self.offsets,
            self.requests,
            self.elapsed.as_secs_f64(),
            self.offsets_per_second(),
            self.requests_per_second(),
            self.latency.p50_us,
            self.latency.p99_us,
            self.latency.max_us,
            self.read_back,
        )
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": "group-commit",
            "requests": self.requests,
            "offsets": self.offsets,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "offsets_per_s": self.offsets_per_second(),
            "requests_per_s": self.requests_per_second(),
            "latency": self.latency.to_json(),
            "read_back": self.read_back,
        })
    }
}

/// Commits for `settings.duration`, then reads the offsets back and checks
/// that every partition holds the last committed one.
pub async fn run_commit(
    connection: Connection,
    settings: &CommitSettings,
) -> Result<CommitReport, LoadError> {
    if settings.partitions < 1 || settings.in_flight < 1 {
        return Err(LoadError::InvalidSetting {
            name: "partitions",
            reason: "partitions and in-flight must be at least 1",
        });
    }
    let mut stream = connection.into_stream();
    let decoder = FrameDecoder::default();
    let mut receive = BytesMut::new();
    let mut send = BytesMut::new();
    let mut outstanding: VecDeque<(i32, Instant)> = VecDeque::new();
    let mut latencies = Vec::new();
    let mut sent = 0_i32;
    let started = Instant::now();
    let deadline = started + settings.duration;
    loop {
        let sending = Instant::now() < deadline && sent < i32::MAX;
        if sending && outstanding.len() < settings.in_flight {
            send.clear();
            let body = Request::from(commit_request(settings, i64::from(sent)));
            let header = request_header(&body, OFFSET_COMMIT_VERSION, sent, Some(CLIENT_ID));
            encode_request_frame(&header, &body, &mut send)?;
            stream.write_all(&send).await?;
            outstanding.push_back((sent, Instant::now()));
            sent += 1;
            continue;
        }
        let Some((correlation_id, sent_at)) = outstanding.pop_front() else {
            break;
        };
        let frame = read_frame(&mut stream, &mut receive, &decoder, outstanding.len() + 1).await?;
        latencies.push(sent_at.elapsed());
        check_commit(frame, correlation_id, settings)?;
    }
    let elapsed = started.elapsed();
    let requests = u64::try_from(sent).unwrap_or(0);
    let mut connection = Connection::from_stream(stream);
    let expected = i64::from(sent) - 1;
    let read_back = fetch_offsets(&mut connection, settings, expected).await?;
    Ok(CommitReport {
        requests,
        offsets: requests * settings.partitions as u64,
        elapsed,
        latency: LatencySummary::from_samples(&mut latencies),
        read_back,
    })
}

fn commit_request(settings: &CommitSettings, offset: i64) -> OffsetCommitRequest {
    let partitions = (0..settings.partitions)
        .map(|index| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)
        })
        .collect();
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(settings.group.clone())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(&settings.topic))
            .with_partitions(partitions)])
}

fn check_commit(
    frame: bytes::Bytes,
    correlation_id: i32,
    settings: &CommitSettings,
) -> Result<(), LoadError> {
    let (header, response) =
        decode_response(frame, ApiKey::OffsetCommit as i16, OFFSET_COMMIT_VERSION)?;
    if header.correlation_id != correlation_id {
        return Err(LoadError::Correlation {
            expected: correlation_id,
            received: header.correlation_id,
        });
    }
    let Response::OffsetCommit(response) = response else {
        return Err(LoadError::UnexpectedResponse {
            expected: "OffsetCommit",
        });
    };
    let mut answered = 0;
    for partition in response.topics.iter().flat_map(|topic| &topic.partitions) {
        let code = ErrorCode::from(partition.error_code);
        if !code.is_none() {
            return Err(broker_error(
                "OffsetCommit",
                &settings.topic,
                partition.partition_index,
                code,
            ));
        }
        answered += 1;
    }
    if answered != settings.partitions {
        return Err(LoadError::UnexpectedResponse {
            expected: "an OffsetCommit answer for every partition",
        });
    }
    Ok(())
}

/// Reads the group's offsets back; every partition must hold `expected`.
async fn fetch_offsets(
    connection: &mut Connection,
    settings: &CommitSettings,
    expected: i64,
) -> Result<i64, LoadError> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(settings.group.clone())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(&settings.topic))
            .with_partition_indexes((0..settings.partitions).collect())]));
    let Response::OffsetFetch(response) = connection
        .round_trip(Request::from(request), OFFSET_FETCH_VERSION)
        .await?
    else {
        return Err(LoadError::UnexpectedResponse {
            expected: "OffsetFetch",
        });
    };
    let code = ErrorCode::from(response.error_code);
    if !code.is_none() {
        return Err(group_error("OffsetFetch", &settings.group, code));
    }
    let mut seen = 0;
    for partition in response.topics.iter().flat_map(|topic| &topic.partitions) {
        let code = ErrorCode::from(partition.error_code);
        if !code.is_none() {
            return Err(broker_error(
                "OffsetFetch",
                &settings.topic,
                partition.partition_index,
                code,
            ));
        }
        if partition.committed_offset != expected {
            return Err(LoadError::ReadBack {
                partition: partition.partition_index,
                expected,
                received: partition.committed_offset,
            });
        }
        seen += 1;
    }
    if seen != settings.partitions {
        return Err(LoadError::UnexpectedResponse {
            expected: "an OffsetFetch answer for every partition",
        });
    }
    Ok(expected)
}
