//! The follower's fetch loop, sans-IO: which partitions to fetch from one
//! source broker, and what to do with the leader's answer.
//!
//! A [`FetcherCore`] holds the partitions this broker follows whose leader
//! is one source broker (Kafka's ReplicaFetcherThread keeps the same set).
//! [`FetcherCore::next_request`] builds a Fetch as a replica (replica id,
//! current leader epoch, the epoch of the last fetched batch so the leader
//! can report a divergence, KIP-320/KIP-595), and
//! [`FetcherCore::handle_response`] appends what came back with the offsets
//! the leader gave them, takes the high watermark from the answer, and
//! truncates only the divergent suffix when the leader reports one. Errors
//! put the partition in back-off. The log is reached through
//! [`FollowerLog`], so tests drive the core with an in-memory log; the async
//! driver is in [`crate::fetch_loop`].

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use strom_storage::TopicPartition;

use crate::{BrokerId, FollowerState};

/// The follower's side of one partition's log.
pub trait FollowerLog: Send + Sync + 'static {
    /// Why a log operation failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The log's start and end offsets, high watermark and latest epoch.
    fn offsets(&self) -> Result<LogOffsets, Self::Error>;

    /// The largest epoch at or below `epoch` that the log holds, with its
    /// end offset (the start of the next epoch, or the log end offset);
    /// `None` when the log holds no epoch at all.
    fn end_offset_for_epoch(&self, epoch: i32) -> Result<Option<(i32, i64)>, Self::Error>;

    /// Appends batches replicated from the leader, keeping their offsets;
    /// returns the new log end offset.
    fn append(&self, records: Bytes) -> Result<i64, Self::Error>;

    /// Removes every record at or after `offset`; returns the new log end
    /// offset.
    fn truncate_to(&self, offset: i64) -> Result<i64, Self::Error>;

    /// Removes every record and starts the log (empty) at `offset`, the
    /// leader's log start, when the follower's log ends below it.
    fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), Self::Error>;

    /// Records the high watermark taken from the leader.
    fn set_high_watermark(&self, high_watermark: i64);
}

/// Offsets of a follower's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsets {
    /// The first offset held.
    pub log_start_offset: i64,
    /// The next offset to be written.
    pub log_end_offset: i64,
    /// The local high watermark.
    pub high_watermark: i64,
    /// The epoch of the last batch, if any.
    pub latest_epoch: Option<i32>,
}

/// Fetch settings of a follower (Kafka's `replica.fetch.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetcherConfig {
    /// This broker's id, sent as the replica id.
    pub replica_id: BrokerId,
    /// `replica.fetch.max.bytes`: per partition.
    pub partition_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: per response.
    pub response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`.
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub min_bytes: i32,
    /// `replica.fetch.backoff.ms`: the wait after an error.
    pub backoff_ms: i64,
}

impl FetcherConfig {
    /// Kafka's defaults for replica `replica_id`.
    pub fn new(replica_id: BrokerId) -> FetcherConfig {
        FetcherConfig {
            replica_id,
            partition_max_bytes: 1024 * 1024,
            response_max_bytes: 10 * 1024 * 1024,
            max_wait_ms: 500,
            min_bytes: 1,
            backoff_ms: 1_000,
        }
    }
}

/// One partition of a replica fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The next offset wanted (the follower's log end offset).
    pub fetch_offset: i64,
    /// The leader epoch the follower follows (fences a stale leader).
    pub current_leader_epoch: i32,
    /// The epoch of the follower's last batch, -1 when it has none.
    pub last_fetched_epoch: i32,
    /// The follower's log start offset.
    pub log_start_offset: i64,
    /// The most bytes wanted for this partition.
    pub partition_max_bytes: i32,
}

/// A Fetch as a replica, before it is encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchRequest {
    /// The fetching broker.
    pub replica_id: BrokerId,
    /// How long the leader may wait for `min_bytes`.
    pub max_wait_ms: i32,
    /// The least bytes worth answering for.
    pub min_bytes: i32,
    /// The most bytes in the response.
    pub max_bytes: i32,
    /// The partitions.
    pub partitions: Vec<FetchPartition>,
}

/// A refused partition of a fetch, as the transport decoded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchPartitionError {
    /// The source is not the leader (NOT_LEADER_OR_FOLLOWER).
    #[error("the source broker does not lead the partition")]
    NotLeaderOrFollower,
    /// The follower's epoch is older than the leader's (FENCED_LEADER_EPOCH).
    #[error("the follower's leader epoch is fenced")]
    FencedLeaderEpoch,
    /// The follower's epoch is newer than the leader's (UNKNOWN_LEADER_EPOCH).
    #[error("the leader does not know the follower's leader epoch yet")]
    UnknownLeaderEpoch,
    /// The fetch offset is outside the leader's log (OFFSET_OUT_OF_RANGE,
    /// or OFFSET_MOVED_TO_TIERED_STORAGE below a tiered leader's local
    /// log), with the leader's (local) log start offset, -1 if unknown.
    #[error("the fetch offset is out of the leader's range (its log starts at {leader_log_start_offset})")]
    OffsetOutOfRange {
        /// Where the leader's local log starts.
        leader_log_start_offset: i64,
    },
    /// Any other Kafka error code.
    #[error("the leader answered error code {code}")]
    Other {
        /// The code.
        code: i16,
    },
}

/// The leader's answer for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionFetchResult {
    /// Records (possibly none) and the leader's high watermark.
    Records {
        /// Whole batches from the fetch offset.
        records: Bytes,
        /// The leader's high watermark.
        high_watermark: i64,
    },
    /// The follower's log diverges from the leader's (Fetch v12+): the
    /// largest epoch the leader has at or below the follower's last epoch,
    /// and where it ends on the leader.
    Diverging {
        /// The epoch.
        epoch: i32,
        /// Its end offset on the leader.
        end_offset: i64,
        /// The leader's high watermark.
        high_watermark: i64,
    },
    /// The leader refused the partition.
    Error(FetchPartitionError),
}

/// Why a partition backs off.
#[derive(Debug, thiserror::Error)]
pub enum FetchFailure {
    /// The leader refused it.
    #[error(transparent)]
    Leader(#[from] FetchPartitionError),
    /// The local log failed.
    #[error("the follower's log failed")]
    Log {
        /// The log's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl FetchFailure {
    fn log<E: std::error::Error + Send + Sync + 'static>(error: E) -> FetchFailure {
        FetchFailure::Log {
            source: Box::new(error),
        }
    }
}

/// What happened to one partition when a response was handled.
#[derive(Debug)]
pub enum PartitionEvent {
    /// Records were appended; the new log end offset and high watermark.
    Appended {
        /// The partition.
        topic_partition: TopicPartition,
        /// The log end offset after the append.
        log_end_offset: i64,
        /// The local high watermark.
        high_watermark: i64,
    },
    /// The divergent suffix was removed; the new log end offset.
    Truncated {
        /// The partition.
        topic_partition: TopicPartition,
        /// The log end offset after the truncation.
        log_end_offset: i64,
    },
    /// The partition backs off until `retry_at_ms`.
    BackingOff {
        /// The partition.
        topic_partition: TopicPartition,
        /// Why.
        reason: FetchFailure,
        /// When it is fetched again.
        retry_at_ms: i64,
    },
}

struct Followed<L> {
    log: Arc<L>,
    state: FollowerState,
    retry_at_ms: i64,
    /// Answers in a row saying the source does not lead (yet) at the
    /// epoch the metadata named; see [`retry_delay_ms`].
    refusals_in_a_row: u32,
}

/// The first retry after the leader the metadata named answers that it
/// does not lead at that epoch yet (NOT_LEADER_OR_FOLLOWER or
/// UNKNOWN_LEADER_EPOCH): it applies the same metadata a moment later, and
/// until a follower fetches again its `acks=all` writes wait. Doubled on
/// each such answer in a row, up to `replica.fetch.backoff.ms`.
const LEADER_CATCH_UP_FIRST_RETRY_MS: i64 = 50;

/// How long a partition backs off after `reason`: the short, growing
/// retry while the named leader catches up with the metadata, else
/// `backoff_ms`.
fn retry_delay_ms<L>(followed: &mut Followed<L>, reason: &FetchFailure, backoff_ms: i64) -> i64 {
    match reason {
        FetchFailure::Leader(
            FetchPartitionError::NotLeaderOrFollower | FetchPartitionError::UnknownLeaderEpoch,
        ) => {
            let doublings = followed.refusals_in_a_row.min(16);
            followed.refusals_in_a_row = followed.refusals_in_a_row.saturating_add(1);
            (LEADER_CATCH_UP_FIRST_RETRY_MS << doublings).min(backoff_ms)
        }
        _ => backoff_ms,
    }
}

/// The partitions followed from one source broker and their fetch state.
pub struct FetcherCore<L> {
    source: BrokerId,
    config: FetcherConfig,
    partitions: BTreeMap<TopicPartition, Followed<L>>,
}

impl<L: FollowerLog> FetcherCore<L> {
    /// A fetcher from `source` with nothing to fetch yet.
    pub fn new(source: BrokerId, config: FetcherConfig) -> FetcherCore<L> {
        FetcherCore {
            source,
            config,
            partitions: BTreeMap::new(),
        }
    }

    /// The source broker (the leader of every partition here).
    pub fn source(&self) -> BrokerId {
        self.source
    }

    /// Whether nothing is followed.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// How many partitions are followed.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// Every followed partition with its leader epoch.
    pub fn followed(&self) -> impl Iterator<Item = (&TopicPartition, i32)> {
        self.partitions
            .iter()
            .map(|(topic_partition, followed)| (topic_partition, followed.state.leader_epoch()))
    }

    /// The leader epoch a partition is followed at, if it is followed here.
    pub fn leader_epoch(&self, topic_partition: &TopicPartition) -> Option<i32> {
        self.partitions
            .get(topic_partition)
            .map(|followed| followed.state.leader_epoch())
    }

    /// The follower state of a partition.
    pub fn state(&self, topic_partition: &TopicPartition) -> Option<&FollowerState> {
        self.partitions
            .get(topic_partition)
            .map(|followed| &followed.state)
    }

    /// Starts following `topic_partition` at `leader_epoch` (replacing an
    /// earlier entry). No truncation happens here: the first fetch carries
    /// the epoch of the last local batch and the leader says where the
    /// logs diverge.
    pub fn add_partition(
        &mut self,
        topic_partition: TopicPartition,
        log: Arc<L>,
        leader_epoch: i32,
    ) -> Result<(), L::Error> {
        let offsets = log.offsets()?;
        let state = FollowerState::new(
            self.source,
            leader_epoch,
            offsets.log_end_offset,
            offsets.high_watermark,
        );
        let followed = Followed {
            log,
            state,
            retry_at_ms: i64::MIN,
            refusals_in_a_row: 0,
        };
        self.partitions.insert(topic_partition, followed);
        Ok(())
    }

    /// Stops following a partition; whether it was followed here.
    pub fn remove_partition(&mut self, topic_partition: &TopicPartition) -> bool {
        self.partitions.remove(topic_partition).is_some()
    }

    /// The earliest time a partition in back-off may be fetched again.
    pub fn next_retry_ms(&self, now_ms: i64) -> Option<i64> {
        self.partitions
            .values()
            .map(|followed| followed.retry_at_ms)
            .filter(|&retry_at_ms| retry_at_ms > now_ms)
            .min()
    }

    /// The next Fetch: every partition not in back-off; `None` if there is
    /// none. A partition whose log cannot be read backs off.
    pub fn next_request(&mut self, now_ms: i64) -> Option<ReplicaFetchRequest> {
        let backoff_ms = self.config.backoff_ms;
        let mut partitions = Vec::new();
        for (topic_partition, followed) in &mut self.partitions {
            if followed.retry_at_ms > now_ms {
                continue;
            }
            let Ok(offsets) = followed.log.offsets() else {
                followed.retry_at_ms = now_ms + backoff_ms;
                continue;
            };
            partitions.push(FetchPartition {
                topic_partition: topic_partition.clone(),
                fetch_offset: offsets.log_end_offset,
                current_leader_epoch: followed.state.leader_epoch(),
                last_fetched_epoch: offsets.latest_epoch.unwrap_or(-1),
                log_start_offset: offsets.log_start_offset,
                partition_max_bytes: self.config.partition_max_bytes,
            });
        }
        (!partitions.is_empty()).then_some(ReplicaFetchRequest {
            replica_id: self.config.replica_id,
            max_wait_ms: self.config.max_wait_ms,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.response_max_bytes,
            partitions,
        })
    }

    /// Puts every partition of `request` in back-off (the source could not
    /// be reached).
    pub fn handle_transport_failure(&mut self, request: &ReplicaFetchRequest, now_ms: i64) {
        for partition in &request.partitions {
            if let Some(followed) = self.partitions.get_mut(&partition.topic_partition) {
                followed.retry_at_ms = now_ms + self.config.backoff_ms;
            }
        }
    }

    /// Applies the leader's answer to `request`. A result for a partition
    /// no longer followed, followed at another epoch, or whose log moved
    /// since the request was built is ignored.
    pub fn handle_response(
        &mut self,
        request: &ReplicaFetchRequest,
        results: Vec<(TopicPartition, PartitionFetchResult)>,
        now_ms: i64,
    ) -> Vec<PartitionEvent> {
        let mut events = Vec::new();
        for (topic_partition, result) in results {
            let Some(sent) = request
                .partitions
                .iter()
                .find(|sent| sent.topic_partition == topic_partition)
            else {
                continue;
            };
            let backoff_ms = self.config.backoff_ms;
            let Some(followed) = self.partitions.get_mut(&topic_partition) else {
                continue;
            };
            if followed.state.leader_epoch() != sent.current_leader_epoch {
                continue;
            }
            let outcome = apply_result(followed, sent, result);
            match outcome {
                Ok(event) => {
                    followed.refusals_in_a_row = 0;
                    events.extend(event);
                }
                Err(reason) => {
                    let retry_at_ms = now_ms + retry_delay_ms(followed, &reason, backoff_ms);
                    followed.retry_at_ms = retry_at_ms;
                    events.push(PartitionEvent::BackingOff {
                        topic_partition,
                        reason,
                        retry_at_ms,
                    });
                }
            }
        }
        events
    }
}

/// Applies one partition's result; `Err` with the reason to back off.
fn apply_result<L: FollowerLog>(
    followed: &mut Followed<L>,
    sent: &FetchPartition,
    result: PartitionFetchResult,
) -> Result<Option<PartitionEvent>, FetchFailure> {
    let offsets = followed.log.offsets().map_err(FetchFailure::log)?;
    if offsets.log_end_offset != sent.fetch_offset {
        // The log moved since the request was built (a truncation).
        return Ok(None);
    }
    let topic_partition = sent.topic_partition.clone();
    match result {
        PartitionFetchResult::Records {
            records,
            high_watermark,
        } => {
            let log_end_offset = if records.is_empty() {
                offsets.log_end_offset
            } else {
                followed.log.append(records).map_err(FetchFailure::log)?
            };
            followed
                .state
                .on_fetch_response(log_end_offset, high_watermark);
            let high_watermark = followed.state.high_watermark();
            followed.log.set_high_watermark(high_watermark);
            Ok(Some(PartitionEvent::Appended {
                topic_partition,
                log_end_offset,
                high_watermark,
            }))
        }
        PartitionFetchResult::Diverging {
            epoch, end_offset, ..
        } => {
            let target = truncation_offset(followed.log.as_ref(), &offsets, epoch, end_offset)
                .map_err(FetchFailure::log)?;
            let log_end_offset = followed
                .log
                .truncate_to(target)
                .map_err(FetchFailure::log)?;
            followed.state.on_truncate(log_end_offset);
            followed
                .log
                .set_high_watermark(followed.state.high_watermark());
            Ok(Some(PartitionEvent::Truncated {
                topic_partition,
                log_end_offset,
            }))
        }
        PartitionFetchResult::Error(FetchPartitionError::OffsetOutOfRange {
            leader_log_start_offset,
        }) if leader_log_start_offset > offsets.log_end_offset => {
            restart_at(followed, topic_partition, leader_log_start_offset).map(Some)
        }
        PartitionFetchResult::Error(error) => Err(FetchFailure::Leader(error)),
    }
}

/// Everything the follower holds is below what the leader keeps
/// (retention, DeleteRecords, or a tiered log's local retention): its log
/// starts over at the leader's log start, as Kafka's fetcher does.
fn restart_at<L: FollowerLog>(
    followed: &mut Followed<L>,
    topic_partition: TopicPartition,
    leader_log_start_offset: i64,
) -> Result<PartitionEvent, FetchFailure> {
    followed
        .log
        .truncate_fully_and_start_at(leader_log_start_offset)
        .map_err(FetchFailure::log)?;
    followed.state.on_restart_at(leader_log_start_offset);
    followed
        .log
        .set_high_watermark(followed.state.high_watermark());
    Ok(PartitionEvent::Truncated {
        topic_partition,
        log_end_offset: leader_log_start_offset,
    })
}

/// Where a follower's log stops agreeing with the leader's, given the
/// leader's `(epoch, end_offset)` for the follower's last epoch (KIP-101,
/// KIP-279): if the follower holds `epoch` too, the smaller of the two end
/// offsets; if its largest epoch at or below is another one, that epoch's
/// end (the next fetch narrows it further). A leader without any epoch
/// (end offset -1) leaves only the high watermark to go by.
pub fn truncation_offset<L: FollowerLog>(
    log: &L,
    offsets: &LogOffsets,
    epoch: i32,
    end_offset: i64,
) -> Result<i64, L::Error> {
    let log_end_offset = offsets.log_end_offset;
    if epoch < 0 || end_offset < 0 {
        return Ok(offsets.high_watermark.min(log_end_offset));
    }
    let target = match log.end_offset_for_epoch(epoch)? {
        None => end_offset,
        Some((local_epoch, local_end)) if local_epoch == epoch => end_offset.min(local_end),
        Some((_, local_end)) => local_end,
    };
    Ok(target.min(log_end_offset).max(0))
}
