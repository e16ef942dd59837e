//! The pipelined producer: pre-built Produce frames, only the correlation
//! id rewritten per send, up to `in_flight` requests outstanding.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use strom_protocol::kafka::messages::produce_request::{PartitionProduceData, TopicProduceData};
use strom_protocol::kafka::messages::{ApiKey, ProduceRequest};
use strom_protocol::messages::{decode_response, encode_request_frame, request_header};
use strom_protocol::records::{Compression, RecordBatchBuilder};
use strom_protocol::{ErrorCode, FrameDecoder, Request, Response};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, Semaphore};

use crate::admin::{broker_error, topic_name};
use crate::connection::{read_frame, Connection, CLIENT_ID};
use crate::error::LoadError;
use crate::stats::{LatencySummary, Report};

/// Produce version the tool sends (topic names, flexible encoding).
pub const PRODUCE_VERSION: i16 = 9;
/// Where the correlation id sits in a request frame: after the 4-byte size,
/// the 2-byte API key and the 2-byte API version.
const CORRELATION_ID_RANGE: std::ops::Range<usize> = 8..12;

/// What to produce and how.
#[derive(Debug, Clone)]
pub struct ProduceSettings {
    /// The topic.
    pub topic: String,
    /// Partitions written; every request carries one batch for each.
    pub partitions: i32,
    /// Value bytes per record (no key, no headers).
    pub record_bytes: usize,
    /// Records per batch.
    pub records_per_batch: usize,
    /// Batch compression.
    pub compression: Compression,
    /// 1 (leader) or -1 (all in-sync replicas).
    pub acks: i16,
    /// Produce requests outstanding at once.
    pub in_flight: usize,
    /// Stop after at least this many records (whole requests).
    pub records: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Send at this fixed rate (requests per second) instead of as fast as
    /// the window allows. A request's latency then counts from when it was
    /// due, so time spent waiting for a window slot behind a stalled
    /// request is included (no coordinated omission).
    pub requests_per_second: Option<u32>,
}

impl ProduceSettings {
    /// Records each request carries.
    pub fn records_per_request(&self) -> u64 {
        self.records_per_batch as u64 * self.partitions.max(0) as u64
    }

    fn check(&self) -> Result<(), LoadError> {
        let invalid = |name, reason| Err(LoadError::InvalidSetting { name, reason });
        if self.acks != 1 && self.acks != -1 {
            return invalid(
                "acks",
                "must be 1 or all (-1): acks=0 gets no response to time",
            );
        }
        if self.partitions < 1 {
            return invalid("partitions", "must be at least 1");
        }
        if self.records_per_batch < 1 {
            return invalid("records-per-batch", "must be at least 1");
        }
        if self.in_flight < 1 {
            return invalid("in-flight", "must be at least 1");
        }
        if self.records.is_none() && self.duration.is_none() {
            return invalid("records", "give a record count or a duration");
        }
        if self.requests_per_second == Some(0) {
            return invalid("rate", "must be at least 1 request per second");
        }
        Ok(())
    }
}

/// One batch of `records_per_batch` records of `record_bytes` bytes.
pub fn build_batch(settings: &ProduceSettings) -> Result<Bytes, LoadError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64);
    let value: Vec<u8> = (0..settings.record_bytes)
        .map(|index| b'a' + (index % 26) as u8)
        .collect();
    let mut builder = RecordBatchBuilder::new(settings.compression);
    for _ in 0..settings.records_per_batch {
        builder.append(now_ms, None, Some(&value), &[])?;
    }
    Ok(builder.build()?)
}

/// The whole request frame (correlation id 0), one copy of `batch` per partition.
pub fn build_frame(settings: &ProduceSettings, batch: &Bytes) -> Result<Vec<u8>, LoadError> {
    let partition_data = (0..settings.partitions)
        .map(|index| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(Some(batch.clone()))
        })
        .collect();
    let request = ProduceRequest::default()
        .with_acks(settings.acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&settings.topic))
            .with_partition_data(partition_data)]);
    let body = Request::from(request);
    let header = request_header(&body, PRODUCE_VERSION, 0, Some(CLIENT_ID));
    let mut frame = BytesMut::new();
    encode_request_frame(&header, &body, &mut frame)?;
    Ok(frame.to_vec())
}

/// Produces on a connection whose topic exists; returns what was measured.
pub async fn run_produce(
    connection: Connection,
    settings: &ProduceSettings,
) -> Result<Report, LoadError> {
    settings.check()?;
    let batch = build_batch(settings)?;
    let frame = build_frame(settings, &batch)?;
    let requests = settings
        .records
        .map(|records| records.div_ceil(settings.records_per_request().max(1)));
    let (reader, writer) = connection.into_stream().into_split();
    let window = Arc::new(Semaphore::new(settings.in_flight));
    let (sent_sender, sent_receiver) = mpsc::unbounded_channel();
    let started = Instant::now();
    let deadline = settings.duration.map(|duration| started + duration);
    let writing = tokio::spawn(write_requests(
        writer,
        frame,
        Arc::clone(&window),
        sent_sender,
        Schedule {
            requests,
            deadline,
            interval: settings
                .requests_per_second
                .map(|rate| Duration::from_secs(1) / rate),
        },
    ));
    let latencies = read_responses(reader, sent_receiver, window, settings).await;
    let sent = writing
        .await
        .map_err(|_| LoadError::Closed { outstanding: 0 })??;
    let mut latencies = latencies?;
    let elapsed = started.elapsed();
    Ok(Report {
        mode: "produce",
        records: sent * settings.records_per_request(),
        batch_bytes: sent * batch.len() as u64 * settings.partitions as u64,
        elapsed,
        latency: LatencySummary::from_samples(&mut latencies),
    })
}

/// When the writer stops, and the fixed pace it sends at, if any.
struct Schedule {
    requests: Option<u64>,
    deadline: Option<Instant>,
    interval: Option<Duration>,
}

/// Sends the frame until `requests` are sent or `deadline` passes, each
/// after taking a window permit (and, when paced, at its due time); returns
/// how many were sent.
async fn write_requests(
    mut writer: OwnedWriteHalf,
    mut frame: Vec<u8>,
    window: Arc<Semaphore>,
    sent: mpsc::UnboundedSender<(i32, Instant)>,
    schedule: Schedule,
) -> Result<u64, LoadError> {
    let mut count = 0_u64;
    let started = Instant::now();
    loop {
        if schedule.requests.is_some_and(|limit| count >= limit)
            || schedule
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
        {
            return Ok(count);
        }
        let due = schedule.interval.map(|interval| {
            started + interval.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX))
        });
        if let Some(due) = due {
            tokio::time::sleep_until(due.into()).await;
        }
        let Ok(permit) = window.acquire().await else {
            return Ok(count);
        };
        permit.forget();
        let correlation_id = (count % i32::MAX as u64) as i32;
        if let Some(slot) = frame.get_mut(CORRELATION_ID_RANGE) {
            slot.copy_from_slice(&correlation_id.to_be_bytes());
        }
        if sent
            .send((correlation_id, due.unwrap_or_else(Instant::now)))
            .is_err()
        {
            return Ok(count);
        }
        writer.write_all(&frame).await?;
        count += 1;
    }
}

/// Reads one response per sent request, checks it, frees its window slot
/// and returns the request latencies.
async fn read_responses(
    mut reader: OwnedReadHalf,
    mut sent: mpsc::UnboundedReceiver<(i32, Instant)>,
    window: Arc<Semaphore>,
    settings: &ProduceSettings,
) -> Result<Vec<Duration>, LoadError> {
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    let mut latencies = Vec::new();
    let mut outstanding: VecDeque<(i32, Instant)> = VecDeque::new();
    while let Some(request) = sent.recv().await {
        outstanding.push_back(request);
        while let Ok(request) = sent.try_recv() {
            outstanding.push_back(request);
        }
        while let Some((correlation_id, sent_at)) = outstanding.pop_front() {
            let result =
                read_frame(&mut reader, &mut buffer, &decoder, outstanding.len() + 1).await;
            let frame = match result {
                Ok(frame) => frame,
                Err(error) => {
                    window.close();
                    return Err(error);
                }
            };
            latencies.push(sent_at.elapsed());
            if let Err(error) = check_response(frame, correlation_id, settings) {
                window.close();
                return Err(error);
            }
            window.add_permits(1);
        }
    }
    Ok(latencies)
}

fn check_response(
    frame: Bytes,
    correlation_id: i32,
    settings: &ProduceSettings,
) -> Result<(), LoadError> {
    let (header, response) = decode_response(frame, ApiKey::Produce as i16, PRODUCE_VERSION)?;
    if header.correlation_id != correlation_id {
        return Err(LoadError::Correlation {
            expected: correlation_id,
            received: header.correlation_id,
        });
    }
    let Response::Produce(response) = response else {
        return Err(LoadError::UnexpectedResponse {
            expected: "Produce",
        });
    };
    for partition in response
        .responses
        .iter()
        .flat_map(|topic| &topic.partition_responses)
    {
        let code = ErrorCode::from(partition.error_code);
        if !code.is_none() {
            return Err(broker_error(
                "Produce",
                &settings.topic,
                partition.index,
                code,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_protocol::messages::decode_request;
    use strom_protocol::records::RecordBatch;

    fn settings() -> ProduceSettings {
        ProduceSettings {
            topic: "load".to_owned(),
            partitions: 3,
            record_bytes: 100,
            records_per_batch: 10,
            compression: Compression::None,
            acks: -1,
            in_flight: 4,
            records: Some(1000),
            duration: None,
            requests_per_second: None,
        }
    }

    #[test]
    fn batch_has_the_requested_records() {
        let batch = RecordBatch::parse(build_batch(&settings()).unwrap()).unwrap();
        assert_eq!(batch.record_count(), 10);
        batch.validate_crc().unwrap();
        let records = batch.records().unwrap();
        for record in records {
            assert_eq!(record.unwrap().value().map(|value| value.len()), Some(100));
        }
    }

    #[test]
    fn patched_frame_decodes_with_the_new_correlation_id() {
        let settings = settings();
        let batch = build_batch(&settings).unwrap();
        let mut frame = build_frame(&settings, &batch).unwrap();
        frame[CORRELATION_ID_RANGE].copy_from_slice(&77_i32.to_be_bytes());
        let decoded = decode_request(Bytes::from(frame[4..].to_vec())).unwrap();
        assert_eq!(decoded.correlation_id(), 77);
        let Request::Produce(request) = decoded.body else {
            panic!("not a produce request");
        };
        assert_eq!(request.acks, -1);
        assert_eq!(request.topic_data[0].partition_data.len(), 3);
    }

    #[test]
    fn bad_settings_are_rejected() {
        let mut zero_acks = settings();
        zero_acks.acks = 0;
        assert!(matches!(
            zero_acks.check(),
            Err(LoadError::InvalidSetting { name: "acks", .. })
        ));
        let mut unbounded = settings();
        unbounded.records = None;
        assert!(unbounded.check().is_err());
        assert_eq!(settings().records_per_request(), 30);
    }
}
