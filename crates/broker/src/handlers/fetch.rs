//! Fetch: read each requested partition up to its high watermark; answer at
//! once when `fetch.min.bytes` are there (or on an error), otherwise long-poll
//! until an append moves a partition's high watermark or `max_wait_ms` passes.
//!
//! Incremental fetch sessions (KIP-227) are kept by the broker's
//! [`FetchSessionCache`]: a full request (epoch 0) opens a session, an
//! incremental one names only what changed and is answered with only the
//! partitions that have news.
//!
//! Record bytes are not copied through the broker's memory when there are
//! many of them: a partition's read of at least [`ZERO_COPY_MIN_BYTES`]
//! puts a stand-in of the right length in the response and hands the
//! connection the segment range, which it sends with `sendfile` (Kafka's
//! zero-copy transfer; see `strom_protocol::chunked`). Smaller reads are
//! read into memory and go out in the response's vectored write.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use strom_network::{Answer, ConnectionMute, FileRegion, Region, Reply, RequestContext};
use strom_protocol::chunked::stand_in;
use strom_protocol::error_code::ErrorCode;
use strom_protocol::kafka::messages::fetch_request::FetchPartition;
use strom_protocol::kafka::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use strom_protocol::kafka::messages::{FetchRequest, FetchResponse, TopicName};
use strom_protocol::messages::Response;
use strom_quotas::QuotaKey;
use strom_replication::fetch_session::{
    FetchSessionCache, PartitionKey, PartitionStatus, SessionContext, SessionFetch,
    SessionPartition,
};
use strom_replication::FetchSessionError;
use strom_storage::read::LogSlice;
use strom_storage::TopicPartition;
use uuid::Uuid;

use super::errors::{fetch_session_error_code, partition_error_code, read_error_code};
use super::produce::missing_partition_error;
use super::BrokerContext;
use crate::quotas::{throttle_ms_field, QuotaClient, QuotaService};
use crate::replica_manager::{PartitionReplica, ReplicaManager};

/// Kafka's isolation level for READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

/// A partition's read of at least this many bytes is sent from its segment
/// file with `sendfile`; smaller ones are read into memory (one `pread`),
/// which costs less than a system call of their own.
pub const ZERO_COPY_MIN_BYTES: u64 = 32 * 1024;

/// A fetch resolved against its session and the metadata: what to read,
/// where, and how to answer.
struct Plan {
    topics: Vec<PlannedTopic>,
    max_bytes: u64,
    read_committed: bool,
    session: SessionContext,
    /// Every partition of `topics`, in the same order (for the session).
    partitions: Vec<SessionPartition>,
    sessions: Arc<FetchSessionCache>,
    replicas: Arc<ReplicaManager>,
    /// The fetching follower's id, or -1 for a consumer.
    replica_id: i32,
    controller: Arc<dyn strom_controller::runtime::ControllerClient>,
    /// A consumer's fetch while a `consumer_byte_rate` is configured.
    quota: Option<FetchQuota>,
}

/// What a consumer's fetch needs to account its bytes (KIP-13) and to
/// throttle (KIP-219). Followers' fetches are never client-throttled.
struct FetchQuota {
    service: Arc<QuotaService>,
    client: QuotaClient,
    mute: ConnectionMute,
}

struct PlannedTopic {
    name: TopicName,
    topic_id: Uuid,
    partitions: Vec<PlannedPartition>,
}

struct PlannedPartition {
    request: FetchPartition,
    target: Result<Arc<PartitionReplica>, ErrorCode>,
}

/// Handles a Fetch request.
pub fn handle(broker: &BrokerContext, context: &RequestContext, request: FetchRequest) -> Reply {
    let fetch = match begin_session(broker, &request) {
        Ok(fetch) => fetch,
        Err(error) => return Reply::Response(Response::Fetch(session_error(&error))),
    };
    let plan = Arc::new(plan(broker, context, context.api_version, &request, fetch));
    let min_bytes = request.min_bytes.max(0) as u64;
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    // Subscribed before the first read: a record appended after that read
    // then changes a subscribed value and wakes the long poll (subscribing
    // later would miss it, and the fetch would wait out `max_wait`).
    let receivers = if max_wait.is_zero() {
        Vec::new()
    } else {
        subscribe(&plan)
    };
    let read = read(&plan);
    if !remote_targets(&plan, &read).is_empty() {
        // Tiered storage: some offsets are only in the remote tier.
        return Reply::Deferred(Box::pin(async move {
            let read = read_remote(&plan, read).await;
            Some(read.answer(&plan))
        }));
    }
    if read.bytes >= min_bytes || read.errors || max_wait.is_zero() || plan.topics.is_empty() {
        return Reply::Answer(read.answer(&plan));
    }
    Reply::Deferred(Box::pin(long_poll(plan, receivers, min_bytes, max_wait)))
}

/// Receivers for the high watermark of every partition the plan reads (the
/// log end for a follower, which reads up to it).
fn subscribe(plan: &Plan) -> Vec<tokio::sync::watch::Receiver<i64>> {
    plan.topics
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .filter_map(|planned| planned.target.as_ref().ok())
        .map(|replica| match plan.replica_id >= 0 {
            true => replica.log_end.subscribe(),
            false => replica.high_watermark.subscribe(),
        })
        .collect()
}

/// Resolves the request's session fields: what to read and in which
/// session context.
fn begin_session(
    broker: &BrokerContext,
    request: &FetchRequest,
) -> Result<SessionFetch, FetchSessionError> {
    let requested = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|partition| SessionPartition {
                key: PartitionKey {
                    topic_id: topic.topic_id,
                    topic: topic.topic.clone(),
                    partition: partition.partition,
                },
                request: partition.clone(),
            })
        })
        .collect();
    let forgotten: Vec<PartitionKey> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|partition| PartitionKey {
                topic_id: topic.topic_id,
                topic: topic.topic.clone(),
                partition: *partition,
            })
        })
        .collect();
    // A follower's fetch (replica id set) gets a privileged session.
    let privileged = request.replica_id.0 >= 0 || request.replica_state.replica_id.0 >= 0;
    broker.fetch_sessions.begin(
        request.session_id,
        request.session_epoch,
        requested,
        &forgotten,
        privileged,
        broker.replicas.now_ms(),
    )
}

fn session_error(error: &FetchSessionError) -> FetchResponse {
    tracing::debug!(%error, "fetch session refused");
    FetchResponse::default()
        .with_error_code(fetch_session_error_code(error).code())
        .with_session_id(0)
}

fn plan(
    broker: &BrokerContext,
    context: &RequestContext,
    api_version: i16,
    request: &FetchRequest,
    fetch: SessionFetch,
) -> Plan {
    let image = broker.controller.image();
    let mut topics: Vec<PlannedTopic> = Vec::new();
    let mut resolved: Option<Option<String>> = None;
    for wanted in &fetch.partitions {
        let same_topic = topics.last().is_some_and(|last| {
            last.topic_id == wanted.key.topic_id && last.name == wanted.key.topic
        });
        if !same_topic {
            // Fetch v13+ names topics by id.
            resolved = Some(if api_version >= 13 {
                image
                    .topic_by_id(wanted.key.topic_id)
                    .map(|found| found.name.clone())
            } else {
                Some(wanted.key.topic.0.to_string())
            });
            topics.push(PlannedTopic {
                name: wanted.key.topic.clone(),
                topic_id: wanted.key.topic_id,
                partitions: Vec::new(),
            });
        }
        let target = match resolved.as_ref().and_then(|name| name.as_ref()) {
            None => Err(ErrorCode::UnknownTopicId),
            Some(name)
                if !fetch_allowed(
                    broker,
                    context,
                    request.replica_id.0.max(request.replica_state.replica_id.0),
                    name,
                ) =>
            {
                Err(ErrorCode::TopicAuthorizationFailed)
            }
            Some(name) => locate(broker, name, &wanted.request),
        };
        if let Some(topic) = topics.last_mut() {
            topic.partitions.push(PlannedPartition {
                request: wanted.request.clone(),
                target,
            });
        }
    }
    let replica_id = request.replica_id.0.max(request.replica_state.replica_id.0);
    let (quota, quota_max_bytes) = fetch_quota(broker, context, &image, replica_id);
    Plan {
        topics,
        max_bytes: (request.max_bytes.max(0) as u64).min(quota_max_bytes.unwrap_or(u64::MAX)),
        read_committed: request.isolation_level == READ_COMMITTED,
        session: fetch.context,
        partitions: fetch.partitions,
        sessions: Arc::clone(&broker.fetch_sessions),
        replicas: Arc::clone(&broker.replicas),
        replica_id,
        controller: Arc::clone(&broker.controller),
        quota,
    }
}

/// A consumer's quota while a `consumer_byte_rate` is configured, and the
/// most it may fetch now: Kafka caps a consumer's fetch at one quota
/// window's worth.
fn fetch_quota(
    broker: &BrokerContext,
    context: &RequestContext,
    image: &strom_controller::MetadataImage,
    replica_id: i32,
) -> (Option<FetchQuota>, Option<u64>) {
    if replica_id >= 0 || !QuotaService::enabled(image, QuotaKey::ConsumerByteRate) {
        return (None, None);
    }
    let quota = FetchQuota {
        service: Arc::clone(&broker.quotas),
        client: QuotaClient::of(context),
        mute: context.mute.clone(),
    };
    let max_bytes = quota.service.max_fetch_bytes(image, &quota.client);
    (Some(quota), max_bytes)
}

/// Completes the response for the fetch's session: the session id, and for
/// an incremental fetch only the partitions with news.
fn finish(plan: &Plan, mut response: FetchResponse) -> FetchResponse {
    let statuses: Vec<PartitionStatus> = response
        .responses
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .map(|data| PartitionStatus {
            high_watermark: data.high_watermark,
            last_stable_offset: data.last_stable_offset,
            log_start_offset: data.log_start_offset,
            has_records: data
                .records
                .as_ref()
                .is_some_and(|records| !records.is_empty()),
            has_error: data.error_code != ErrorCode::None.code(),
        })
        .collect();
    let (session_id, include) = plan.sessions.finish(
        plan.session,
        &plan.partitions,
        &statuses,
        plan.replicas.now_ms(),
    );
    let mut flags = include.into_iter();
    for topic in &mut response.responses {
        topic.partitions.retain(|_| flags.next().unwrap_or(true));
    }
    response
        .responses
        .retain(|topic| !topic.partitions.is_empty());
    response.with_session_id(session_id)
}

/// READ on the topic for a consumer; CLUSTER_ACTION for a follower.
fn fetch_allowed(
    broker: &BrokerContext,
    context: &RequestContext,
    replica_id: i32,
    topic: &str,
) -> bool {
    use super::authorization::authorize;
    use strom_protocol::acl::{operation, resource, CLUSTER_NAME};
    match replica_id >= 0 {
        true => authorize(
            broker,
            context,
            operation::CLUSTER_ACTION,
            resource::CLUSTER,
            CLUSTER_NAME,
        ),
        false => authorize(broker, context, operation::READ, resource::TOPIC, topic),
    }
}

fn locate(
    broker: &BrokerContext,
    topic: &str,
    partition: &FetchPartition,
) -> Result<Arc<PartitionReplica>, ErrorCode> {
    let topic_partition = TopicPartition::new(topic.to_owned(), partition.partition);
    let replica = broker
        .replicas
        .get(&topic_partition)
        .ok_or_else(|| missing_partition_error(broker, topic, partition.partition))?;
    replica
        .validate_leader_epoch(Some(partition.current_leader_epoch))
        .map_err(|error| partition_error_code(&error))?;
    Ok(replica)
}

/// What one pass over the planned partitions read.
struct Read {
    /// The response, with stand-ins for the records sent from files.
    response: FetchResponse,
    /// The stand-ins and the segment ranges to send in their places.
    regions: Vec<(Bytes, Region)>,
    /// How many record bytes the response holds.
    bytes: u64,
    /// Whether any partition failed.
    errors: bool,
}

impl Read {
    /// The answer for the fetch's session (see [`finish`]).
    fn answer(mut self, plan: &Plan) -> Answer {
        if let Some(quota) = &plan.quota {
            if let Some(throttled) = throttle(plan, quota, self.bytes) {
                return throttled.into();
            }
        }
        report_remote_log_start(plan, &mut self.response);
        count_topic_metrics(plan, &self.response);
        Answer {
            response: Response::Fetch(finish(plan, self.response)),
            regions: self.regions,
        }
    }
}

/// Records a consumer's fetched bytes against its quota. Over the quota,
/// Kafka's answer: the bytes are taken back and the fetch is answered
/// empty, with the throttle time, and the connection is muted for it (the
/// consumer fetches the same offsets again afterwards). An incremental
/// session keeps its id (nothing in it changes); no session is opened.
fn throttle(plan: &Plan, quota: &FetchQuota, bytes: u64) -> Option<Response> {
    let image = plan.controller.image();
    let key = QuotaKey::ConsumerByteRate;
    let throttle = quota
        .service
        .record(&image, key, &quota.client, bytes as f64);
    if throttle.is_zero() {
        return None;
    }
    quota
        .service
        .unrecord(&image, key, &quota.client, bytes as f64);
    quota.mute.mute_for(throttle);
    let session_id = match plan.session {
        SessionContext::Incremental { id } => id,
        _ => 0,
    };
    Some(Response::Fetch(
        FetchResponse::default()
            .with_throttle_time_ms(throttle_ms_field(throttle))
            .with_session_id(session_id),
    ))
}

/// Tiered storage: a consumer is told the log start of both tiers (the
/// remote one), as Kafka reports it, not the local log's.
fn report_remote_log_start(plan: &Plan, response: &mut FetchResponse) {
    let Some(manager) = plan.replicas.remote_log_manager() else {
        return;
    };
    if plan.replica_id >= 0 {
        return;
    }
    let planned = plan.topics.iter().flat_map(|topic| &topic.partitions);
    let answered = response
        .responses
        .iter_mut()
        .flat_map(|topic| topic.partitions.iter_mut());
    for (planned, data) in planned.zip(answered) {
        let Ok(replica) = &planned.target else {
            continue;
        };
        let remote_start = manager
            .view(&replica.topic_partition)
            .and_then(|view| view.log_start_offset);
        if let Some(start) = remote_start.filter(|start| *start < data.log_start_offset) {
            data.log_start_offset = start;
        }
    }
}

/// Counts the bytes sent and the failures of each partition read here in
/// its topic's metrics (once per answer, not per long-poll pass).
fn count_topic_metrics(plan: &Plan, response: &FetchResponse) {
    let planned = plan.topics.iter().flat_map(|topic| &topic.partitions);
    let answered = response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions);
    for (planned, data) in planned.zip(answered) {
        if let Ok(replica) = &planned.target {
            if data.error_code != 0 {
                replica.metrics.record_failed_fetch();
            } else {
                let bytes = data.records.as_ref().map_or(0, |records| records.len());
                replica.metrics.record_fetch(bytes as u64);
            }
        }
    }
}

/// A segment range read for a response, sent by the network server in
/// place of its stand-in.
#[derive(Debug)]
struct SegmentRange(LogSlice);

impl FileRegion for SegmentRange {
    fn len(&self) -> u64 {
        self.0.len()
    }

    fn position(&self) -> u64 {
        self.0.position()
    }

    fn send_to(&self, out: std::os::fd::BorrowedFd<'_>, sent: u64) -> std::io::Result<usize> {
        self.0.send_to(out, sent)
    }

    fn is_cached(&self) -> Option<bool> {
        self.0.is_cached()
    }

    fn load_into_page_cache(&self) -> std::io::Result<()> {
        self.0.load_into_page_cache().map_err(std::io::Error::other)
    }

    fn to_bytes(&self) -> std::io::Result<Bytes> {
        self.0.to_bytes().map_err(std::io::Error::other)
    }
}

/// The records of a partition read for the response: a stand-in (and its
/// region) for a large read, the bytes of a small one.
fn records_for_response(
    slice: LogSlice,
    regions: &mut Vec<(Bytes, Region)>,
) -> Result<Bytes, strom_storage::error::ReadError> {
    if slice.len() >= ZERO_COPY_MIN_BYTES {
        if let Some(stand_in) = stand_in(regions.len(), slice.len() as usize) {
            regions.push((stand_in.clone(), Arc::new(SegmentRange(slice))));
            return Ok(stand_in);
        }
    }
    slice.to_bytes()
}

/// A partition read, or an answer without records (a follower's
/// divergence or refusal).
enum PartitionOutcome {
    Read(crate::replica_manager::PartitionRead<LogSlice>),
    Answered(PartitionData),
}

/// Reads one partition: for a consumer up to the HW; for a follower up to
/// the log end, recording its fetch (see
/// [`PartitionReplica::read_for_follower`]) and proposing the ISR
/// expansion it earns.
fn read_partition(
    plan: &Plan,
    replica: &Arc<PartitionReplica>,
    planned: &PlannedPartition,
    limit: u64,
    min_one_batch: bool,
) -> Result<PartitionOutcome, crate::replica_manager::ReadFailure> {
    use crate::replica_manager::{FollowerFetch, FollowerRead};
    if plan.replica_id < 0 {
        let read = replica.read_slice_isolated(
            planned.request.fetch_offset,
            limit,
            min_one_batch,
            plan.read_committed,
        )?;
        return Ok(PartitionOutcome::Read(read));
    }
    let fetch = FollowerFetch {
        replica: plan.replica_id,
        fetch_offset: planned.request.fetch_offset,
        last_fetched_epoch: Some(planned.request.last_fetched_epoch),
    };
    let now_ms = plan.replicas.now_ms();
    match replica.read_for_follower(&fetch, limit, min_one_batch, now_ms)? {
        FollowerRead::Records {
            read,
            isr_expansion,
        } => {
            if let Some(change) = isr_expansion {
                crate::isr::propose(&plan.controller, &plan.replicas, replica, change);
            }
            Ok(PartitionOutcome::Read(read))
        }
        FollowerRead::Diverging {
            epoch,
            end_offset,
            high_watermark,
        } => Ok(PartitionOutcome::Answered(
            PartitionData::default()
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(high_watermark)
                .with_records(Some(Bytes::new()))
                .with_diverging_epoch(
                    strom_protocol::kafka::messages::fetch_response::EpochEndOffset::default()
                        .with_epoch(epoch)
                        .with_end_offset(end_offset),
                ),
        )),
        FollowerRead::Refused(error) => Ok(PartitionOutcome::Answered(
            PartitionData::default()
                .with_records(Some(Bytes::new()))
                .with_error_code(super::errors::replication_error_code(&error).code()),
        )),
    }
}

/// The offsets a read reports.
struct ReadOffsets {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// The wire form of a read's aborted transactions.
fn aborted_transactions(
    aborted: &[strom_storage::txn_index::AbortedTransaction],
) -> Vec<strom_protocol::kafka::messages::fetch_response::AbortedTransaction> {
    aborted
        .iter()
        .map(|transaction| {
            strom_protocol::kafka::messages::fetch_response::AbortedTransaction::default()
                .with_producer_id(strom_protocol::kafka::messages::ProducerId(
                    transaction.producer_id,
                ))
                .with_first_offset(transaction.first_offset)
        })
        .collect()
}

/// A partition to read, found here, and its byte limit.
struct Located<'a> {
    replica: &'a Arc<PartitionReplica>,
    planned: &'a PlannedPartition,
    limit: u64,
    min_one_batch: bool,
}

/// Reads one partition hosted here into `data`: the filled data, the
/// record bytes it holds, and whether it is answered without records (an
/// error, a divergence or a refusal), which answers the fetch at once.
fn read_located(
    plan: &Plan,
    located: &Located<'_>,
    data: PartitionData,
    regions: &mut Vec<(Bytes, Region)>,
) -> (PartitionData, u64, bool) {
    let Located {
        replica,
        planned,
        limit,
        min_one_batch,
    } = located;
    let read = match read_partition(plan, replica, planned, *limit, *min_one_batch) {
        Ok(PartitionOutcome::Read(read)) => Ok(read),
        Ok(PartitionOutcome::Answered(answered)) => {
            let answered = answered.with_partition_index(planned.request.partition);
            return (answered, 0, true);
        }
        Err(error) => Err(error),
    };
    let read = read.and_then(|read| {
        let records = read
            .records
            .map(|slice| records_for_response(slice, regions))
            .transpose()?;
        let offsets = ReadOffsets {
            high_watermark: read.high_watermark,
            last_stable_offset: read.last_stable_offset,
            log_start_offset: read.log_start_offset,
        };
        Ok((offsets, read.aborted_transactions, records))
    });
    match read {
        Ok((offsets, aborted, records)) => {
            let size = records.as_ref().map_or(0, |records| records.len() as u64);
            let mut data = data
                .with_high_watermark(offsets.high_watermark)
                .with_last_stable_offset(offsets.last_stable_offset)
                .with_log_start_offset(offsets.log_start_offset)
                .with_records(Some(records.unwrap_or_default()));
            if let Some(aborted) = aborted {
                data = data.with_aborted_transactions(Some(aborted_transactions(&aborted)));
            }
            (data, size, false)
        }
        Err(error) => {
            let (high_watermark, log_start_offset) = replica
                .with_log(|log| (log.high_watermark(), log.log_start_offset()))
                .unwrap_or((-1, -1));
            let data = data
                .with_error_code(read_error_code(&error).code())
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(high_watermark)
                .with_log_start_offset(log_start_offset);
            (data, 0, true)
        }
    }
}

/// Reads every planned partition once.
fn read(plan: &Plan) -> Read {
    let mut remaining = plan.max_bytes;
    let mut total = 0u64;
    let mut errors = false;
    let mut regions = Vec::new();
    let mut responses = Vec::with_capacity(plan.topics.len());
    for topic in &plan.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for planned in &topic.partitions {
            let mut data = PartitionData::default()
                .with_partition_index(planned.request.partition)
                .with_records(Some(Bytes::new()));
            if plan.read_committed {
                data = data.with_aborted_transactions(Some(Vec::new()));
            }
            match &planned.target {
                Err(code) => {
                    errors = true;
                    data = data.with_error_code(code.code());
                }
                Ok(replica) => {
                    let limit = (planned.request.partition_max_bytes.max(0) as u64).min(remaining);
                    // KIP-74: the first partition with data may return one
                    // batch even beyond the limits, so large records progress.
                    let located = Located {
                        replica,
                        planned,
                        limit,
                        min_one_batch: total == 0,
                    };
                    let (filled, size, failed) = read_located(plan, &located, data, &mut regions);
                    data = filled;
                    total += size;
                    remaining = remaining.saturating_sub(size);
                    errors |= failed;
                }
            }
            partitions.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    Read {
        response: FetchResponse::default().with_responses(responses),
        regions,
        bytes: total,
        errors,
    }
}

/// Waits for appends until `min_bytes` are readable or `max_wait` passes,
/// then answers with whatever is there.
async fn long_poll(
    plan: Arc<Plan>,
    mut receivers: Vec<tokio::sync::watch::Receiver<i64>>,
    min_bytes: u64,
    max_wait: Duration,
) -> Option<Answer> {
    // `max.wait.ms` bounds a wait: a tokio timer, not a broker decision.
    let deadline = tokio::time::Instant::now() + max_wait;
    loop {
        if receivers.is_empty() {
            tokio::time::sleep_until(deadline).await;
        } else {
            let changed = select_all(
                receivers
                    .iter_mut()
                    .map(|receiver| Box::pin(receiver.changed())),
            );
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                break;
            }
        }
        let read = read_remote(&plan, read(&plan)).await;
        if read.bytes >= min_bytes || read.errors || tokio::time::Instant::now() >= deadline {
            return Some(read.answer(&plan));
        }
    }
    Some(read_remote(&plan, read(&plan)).await.answer(&plan))
}

/// A follower fetching below a tiered leader's local log start is told
/// OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405), with the local log start in
/// the answer: it starts over there instead of copying the remote history.
fn moved_to_tiered_storage(plan: &Plan, read: &mut Read) {
    let topics = plan.topics.iter().zip(read.response.responses.iter_mut());
    for (topic, answered) in topics {
        for (planned, data) in topic.partitions.iter().zip(answered.partitions.iter_mut()) {
            let Ok(replica) = &planned.target else {
                continue;
            };
            let below_local = data.error_code == ErrorCode::OffsetOutOfRange.code()
                && planned.request.fetch_offset < data.log_start_offset;
            let tiered = replica
                .with_log(|log| log.config().remote_storage_enable)
                .unwrap_or(false);
            if below_local && tiered {
                data.error_code = ErrorCode::OffsetMovedToTieredStorage.code();
            }
        }
    }
}

/// A consumer's partition whose fetch offset is below the local log start
/// of a tiered log: `(topic index, partition index)` in the response.
fn remote_targets(plan: &Plan, read: &Read) -> Vec<(usize, usize)> {
    if plan.replica_id >= 0 || plan.replicas.remote_log_manager().is_none() {
        return Vec::new();
    }
    let mut targets = Vec::new();
    let topics = plan.topics.iter().zip(&read.response.responses).enumerate();
    for (topic_index, (topic, answered)) in topics {
        let partitions = topic
            .partitions
            .iter()
            .zip(&answered.partitions)
            .enumerate();
        for (partition_index, (planned, data)) in partitions {
            let Ok(replica) = &planned.target else {
                continue;
            };
            let below_local = data.error_code == ErrorCode::OffsetOutOfRange.code()
                && planned.request.fetch_offset < data.log_start_offset;
            let tiered = below_local
                && replica
                    .with_log(|log| log.config().remote_storage_enable)
                    .unwrap_or(false);
            if tiered {
                targets.push((topic_index, partition_index));
            }
        }
    }
    targets
}

/// Serves the [`remote_targets`] of `read` from the remote tier (KIP-405):
/// records, or OFFSET_OUT_OF_RANGE below the remote start, or
/// KAFKA_STORAGE_ERROR for that partition alone when the remote store fails.
async fn read_remote(plan: &Plan, mut read: Read) -> Read {
    let Some(manager) = plan.replicas.remote_log_manager() else {
        return read;
    };
    if plan.replica_id >= 0 {
        moved_to_tiered_storage(plan, &mut read);
        return read;
    }
    for (topic_index, partition_index) in remote_targets(plan, &read) {
        let planned = &plan.topics[topic_index].partitions[partition_index];
        let Ok(replica) = &planned.target else {
            continue;
        };
        let limit = (planned.request.partition_max_bytes.max(0) as u64)
            .min(plan.max_bytes.saturating_sub(read.bytes));
        let (found, remote_start) =
            read_one_remote(plan, manager, replica, planned, limit, read.bytes == 0).await;
        let data = &mut read.response.responses[topic_index].partitions[partition_index];
        if let Some(start) = remote_start {
            data.log_start_offset = start;
        }
        match found {
            Err(error) => data.error_code = crate::tiered::read_error_code(&error).code(),
            Ok((records, aborted)) => {
                if let Some(aborted) = aborted {
                    data.aborted_transactions = Some(aborted_transactions(&aborted));
                }
                read.bytes += records.len() as u64;
                let (high_watermark, last_stable_offset) = replica
                    .with_log(|log| (log.high_watermark(), log.last_stable_offset()))
                    .unwrap_or((data.high_watermark, data.last_stable_offset));
                data.error_code = 0;
                data.high_watermark = high_watermark;
                data.last_stable_offset = last_stable_offset;
                data.records = Some(records);
            }
        }
    }
    read
}

/// Records read from the remote tier (with their aborted transactions for
/// read_committed) and the remote log start offset.
type RemoteRecords = Result<
    (
        Bytes,
        Option<Vec<strom_storage::txn_index::AbortedTransaction>>,
    ),
    strom_storage::error::RemoteReadError,
>;

/// One partition's remote read.
async fn read_one_remote(
    plan: &Plan,
    manager: &strom_storage::remote::RemoteLogManager,
    replica: &PartitionReplica,
    planned: &PlannedPartition,
    limit: u64,
    min_one_batch: bool,
) -> (RemoteRecords, Option<i64>) {
    let partition = &replica.topic_partition;
    let view = match manager.view(partition) {
        Some(view) => Ok(view),
        None => manager.load(partition).await,
    };
    let remote_start = view.ok().and_then(|view| view.log_start_offset);
    let fetch_offset = planned.request.fetch_offset;
    let found = match manager
        .read(partition, fetch_offset, limit, min_one_batch)
        .await
    {
        Ok(found) => found,
        Err(error) => return (Err(error), remote_start),
    };
    let Some(found) = found else {
        return (Ok((Bytes::new(), None)), remote_start);
    };
    if !plan.read_committed {
        return (Ok((found.records, None)), remote_start);
    }
    let aborted =
        remote_aborted_transactions(manager, replica, fetch_offset, found.next_offset).await;
    (
        aborted.map(|aborted| (found.records, Some(aborted))),
        remote_start,
    )
}

/// The aborted transactions of a read_committed remote read: the remote
/// segments' indexes, then the local log's when the remote scan did not
/// reach the bound.
async fn remote_aborted_transactions(
    manager: &strom_storage::remote::RemoteLogManager,
    replica: &PartitionReplica,
    start_offset: i64,
    upper_bound_offset: i64,
) -> Result<Vec<strom_storage::txn_index::AbortedTransaction>, strom_storage::error::RemoteReadError>
{
    let partition = &replica.topic_partition;
    let (mut aborted, complete) = manager
        .aborted_transactions(partition, start_offset, upper_bound_offset)
        .await?;
    if !complete {
        let local = replica
            .with_log(|log| log.collect_aborted_transactions(start_offset, upper_bound_offset))
            .unwrap_or_default();
        for transaction in local {
            if !aborted.contains(&transaction) {
                aborted.push(transaction);
            }
        }
    }
    Ok(aborted)
}
