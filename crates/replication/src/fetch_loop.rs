//! The async edge of follower fetching: `num.replica.fetchers` tasks per
//! source broker, each driving a [`FetcherCore`] over a [`FetchTransport`],
//! and a [`FetcherManager`] that moves partitions between those tasks as
//! leadership changes. A partition always goes to the same task of its
//! leader, chosen as Kafka chooses its fetcher thread:
//! `abs(31 * topic.hashCode() + partition) % num.replica.fetchers`.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use strom_clock::Clock;
use strom_storage::TopicPartition;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::fetcher::{
    FetchPartitionError, FetcherConfig, FetcherCore, FollowerLog, PartitionEvent,
    PartitionFetchResult, ReplicaFetchRequest,
};
use crate::BrokerId;

/// The longest an idle fetcher sleeps before looking again.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Sends a replica fetch to a leader and returns its per-partition results
/// (the broker implements it over TCP; tests with a fake).
pub trait FetchTransport: Send + Sync + 'static {
    /// Why the leader could not be asked.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Sends `request` to broker `leader`.
    fn fetch(
        &self,
        leader: BrokerId,
        request: ReplicaFetchRequest,
    ) -> impl Future<Output = Result<Vec<(TopicPartition, PartitionFetchResult)>, Self::Error>> + Send;
}

/// A partition to follow: its leader, the leader epoch, and the log.
pub struct FollowTarget<L> {
    /// The leader to fetch from.
    pub leader: BrokerId,
    /// The leader epoch from the metadata.
    pub leader_epoch: i32,
    /// The local log.
    pub log: Arc<L>,
}

struct Shared<L> {
    core: Mutex<FetcherCore<L>>,
    changed: Notify,
    stopped: std::sync::atomic::AtomicBool,
}

impl<L: FollowerLog> Shared<L> {
    fn core(&self) -> MutexGuard<'_, FetcherCore<L>> {
        // The core's maps are changed by single inserts and removes.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Acquire)
    }
}

struct Fetcher<L> {
    shared: Arc<Shared<L>>,
    task: JoinHandle<()>,
}

/// The follower fetchers of one broker, one per source broker.
pub struct FetcherManager<L, T> {
    config: FetcherConfig,
    transport: Arc<T>,
    clock: Arc<dyn Clock>,
    per_source: usize,
    fetchers: Mutex<HashMap<(BrokerId, usize), Fetcher<L>>>,
    paused: Arc<std::sync::atomic::AtomicBool>,
}

/// Which of a source broker's `per_source` fetchers follows
/// `topic_partition` (Kafka's `AbstractFetcherManager.getFetcherId`).
pub fn fetcher_index(topic_partition: &TopicPartition, per_source: usize) -> usize {
    // Java's String.hashCode over UTF-16 code units.
    let topic_hash = topic_partition
        .topic
        .encode_utf16()
        .fold(0i32, |hash, unit| {
            hash.wrapping_mul(31).wrapping_add(i32::from(unit))
        });
    let hash = topic_hash
        .wrapping_mul(31)
        .wrapping_add(topic_partition.partition);
    // Kafka's Utils.abs: i32::MIN maps to 0.
    let positive = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    positive as usize % per_source.max(1)
}

impl<L: FollowerLog, T: FetchTransport> FetcherManager<L, T> {
    /// A manager with no fetchers yet, which will run `per_source`
    /// fetchers (`num.replica.fetchers`, at least 1) per source broker.
    pub fn new(
        config: FetcherConfig,
        transport: Arc<T>,
        clock: Arc<dyn Clock>,
        per_source: usize,
    ) -> Self {
        FetcherManager {
            config,
            transport,
            clock,
            per_source: per_source.max(1),
            fetchers: Mutex::new(HashMap::new()),
            paused: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// Stops (or resumes) every fetch without forgetting what is followed:
    /// a paused follower stands for a stuck one (the leader's lag check
    /// then removes it from the ISR). Once it returns, no answer to a
    /// fetch is applied until resumed (one already being applied
    /// finishes).
    pub fn set_paused(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::Release);
        for fetcher in self.fetchers().values() {
            fetcher.shared.changed.notify_one();
        }
    }

    fn fetchers(&self) -> MutexGuard<'_, HashMap<(BrokerId, usize), Fetcher<L>>> {
        self.fetchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Follows exactly `wanted`: partitions no longer wanted, or wanted
    /// from another leader or at another epoch, are removed from their
    /// fetcher; new ones are added to the fetcher of their leader (started
    /// if needed). Fetchers left with nothing stop. Must run inside a
    /// tokio runtime.
    pub fn follow(&self, wanted: BTreeMap<TopicPartition, FollowTarget<L>>) {
        let mut fetchers = self.fetchers();
        for ((source, _), fetcher) in fetchers.iter() {
            let mut core = fetcher.shared.core();
            let doomed: Vec<TopicPartition> = wanted_removals(&core, *source, &wanted);
            for topic_partition in doomed {
                core.remove_partition(&topic_partition);
            }
        }
        for (topic_partition, target) in wanted {
            let index = fetcher_index(&topic_partition, self.per_source);
            let fetcher = fetchers
                .entry((target.leader, index))
                .or_insert_with(|| self.spawn(target.leader));
            let mut core = fetcher.shared.core();
            if core.leader_epoch(&topic_partition) == Some(target.leader_epoch) {
                continue;
            }
            if let Err(error) =
                core.add_partition(topic_partition.clone(), target.log, target.leader_epoch)
            {
                tracing::warn!(%topic_partition, %error, "cannot follow partition");
            }
            drop(core);
            fetcher.shared.changed.notify_one();
        }
        let idle: Vec<(BrokerId, usize)> = fetchers
            .iter()
            .filter(|(_, fetcher)| fetcher.shared.core().is_empty())
            .map(|(key, _)| *key)
            .collect();
        for source in idle {
            if let Some(fetcher) = fetchers.remove(&source) {
                stop(&fetcher);
            }
        }
    }

    /// The partitions followed from each source broker.
    pub fn followed(&self) -> BTreeMap<BrokerId, usize> {
        let mut followed = BTreeMap::new();
        for ((source, _), fetcher) in self.fetchers().iter() {
            *followed.entry(*source).or_default() += fetcher.shared.core().len();
        }
        followed
    }

    /// How many fetch tasks run, per source broker.
    pub fn fetcher_counts(&self) -> BTreeMap<BrokerId, usize> {
        let mut counts = BTreeMap::new();
        for (source, _) in self.fetchers().keys() {
            *counts.entry(*source).or_default() += 1;
        }
        counts
    }

    /// Stops every fetcher and waits for their tasks.
    pub async fn shutdown(&self) {
        let fetchers: Vec<Fetcher<L>> = self.fetchers().drain().map(|(_, f)| f).collect();
        for fetcher in fetchers {
            stop(&fetcher);
            let _ = fetcher.task.await;
        }
    }

    fn spawn(&self, source: BrokerId) -> Fetcher<L> {
        let shared = Arc::new(Shared {
            core: Mutex::new(FetcherCore::new(source, self.config)),
            changed: Notify::new(),
            stopped: std::sync::atomic::AtomicBool::new(false),
        });
        let task = tokio::spawn(run(
            Arc::clone(&shared),
            Arc::clone(&self.transport),
            Arc::clone(&self.clock),
            Arc::clone(&self.paused),
        ));
        Fetcher { shared, task }
    }
}

fn wanted_removals<L: FollowerLog>(
    core: &FetcherCore<L>,
    source: BrokerId,
    wanted: &BTreeMap<TopicPartition, FollowTarget<L>>,
) -> Vec<TopicPartition> {
    core.followed()
        .filter(|(topic_partition, epoch)| {
            wanted
                .get(*topic_partition)
                .is_none_or(|target| target.leader != source || target.leader_epoch != *epoch)
        })
        .map(|(topic_partition, _)| topic_partition.clone())
        .collect()
}

fn stop<L: FollowerLog>(fetcher: &Fetcher<L>) {
    fetcher
        .shared
        .stopped
        .store(true, std::sync::atomic::Ordering::Release);
    fetcher.shared.changed.notify_one();
}

/// One source broker's fetch loop: fetch, apply off the async workers,
/// back off on errors, sleep when there is nothing to fetch.
async fn run<L: FollowerLog, T: FetchTransport>(
    shared: Arc<Shared<L>>,
    transport: Arc<T>,
    clock: Arc<dyn Clock>,
    paused: Arc<std::sync::atomic::AtomicBool>,
) {
    let source = shared.core().source();
    while !shared.stopped() {
        if paused.load(std::sync::atomic::Ordering::Acquire) {
            let _ = tokio::time::timeout(IDLE_WAIT, shared.changed.notified()).await;
            continue;
        }
        let now_ms = clock.wall_ms();
        let request = shared.core().next_request(now_ms);
        let Some(request) = request else {
            let retry_in = shared
                .core()
                .next_retry_ms(now_ms)
                .map_or(IDLE_WAIT, |retry_at_ms| {
                    Duration::from_millis((retry_at_ms - now_ms).max(1) as u64).min(IDLE_WAIT)
                });
            let _ = tokio::time::timeout(retry_in, shared.changed.notified()).await;
            continue;
        };
        let answer = tokio::select! {
            answer = transport.fetch(source, request.clone()) => answer,
            () = shared.changed.notified() => continue,
        };
        // An answer that arrived together with a pause (both ready at one
        // poll, and the select took the answer) is not applied: once
        // `set_paused(true)` has returned, nothing fetched after it lands.
        if paused.load(std::sync::atomic::Ordering::Acquire) {
            continue;
        }
        let handled = {
            let shared = Arc::clone(&shared);
            let clock = Arc::clone(&clock);
            tokio::task::spawn_blocking(move || {
                let now_ms = clock.wall_ms();
                match answer {
                    Ok(results) => shared.core().handle_response(&request, results, now_ms),
                    Err(error) => {
                        tracing::debug!(source, %error, "replica fetch failed; backing off");
                        shared.core().handle_transport_failure(&request, now_ms);
                        Vec::new()
                    }
                }
            })
            .await
        };
        for event in handled.unwrap_or_default() {
            log_event(source, &event);
        }
    }
}

fn log_event(source: BrokerId, event: &PartitionEvent) {
    match event {
        PartitionEvent::Truncated {
            topic_partition,
            log_end_offset,
        } => {
            tracing::info!(%topic_partition, source, log_end_offset, "truncated the divergent suffix")
        }
        PartitionEvent::BackingOff {
            topic_partition,
            reason,
            ..
        } => match reason {
            crate::fetcher::FetchFailure::Leader(
                FetchPartitionError::NotLeaderOrFollower
                | FetchPartitionError::FencedLeaderEpoch
                | FetchPartitionError::UnknownLeaderEpoch,
            ) => {
                tracing::debug!(%topic_partition, source, %reason, "replica fetch refused; backing off")
            }
            _ => {
                tracing::warn!(%topic_partition, source, %reason, "replica fetch failed; backing off")
            }
        },
        PartitionEvent::Appended { .. } => {}
    }
}
