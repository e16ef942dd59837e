//! The follower fetch core and loop driven without sockets: an in-memory
//! log stands for the partition's log and a fake leader answers fetches
//! the way a Strom or Kafka leader does (records from the fetch offset, or
//! the diverging epoch when the follower's last epoch ends earlier there).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use strom_clock::SystemClock;
use strom_replication::fetch_loop::fetcher_index;
use strom_replication::{
    FetchPartitionError, FetchTransport, FetcherConfig, FetcherCore, FetcherManager, FollowTarget,
    FollowerLog, LogOffsets, PartitionEvent, PartitionFetchResult, ReplicaFetchRequest,
};
use strom_storage::TopicPartition;

/// A batch of the fake log: base offset, leader epoch, record count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Batch {
    base: i64,
    epoch: i32,
    count: i32,
}

impl Batch {
    fn next(&self) -> i64 {
        self.base + i64::from(self.count)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("batch at {base} does not follow the log end {log_end}")]
struct FakeLogError {
    base: i64,
    log_end: i64,
}

#[derive(Debug, Default)]
struct FakeLog {
    /// The log start offset (where the first batch is, or the log end of
    /// an empty log).
    start: Mutex<i64>,
    batches: Mutex<Vec<Batch>>,
    high_watermark: Mutex<i64>,
    truncations: Mutex<Vec<i64>>,
}

impl FakeLog {
    fn with(batches: &[(i32, i32)]) -> Arc<FakeLog> {
        let log = FakeLog::default();
        let mut base = 0;
        for &(epoch, count) in batches {
            log.batches
                .lock()
                .unwrap()
                .push(Batch { base, epoch, count });
            base += i64::from(count);
        }
        Arc::new(log)
    }

    fn batches(&self) -> Vec<Batch> {
        self.batches.lock().unwrap().clone()
    }

    fn end(&self) -> i64 {
        self.batches()
            .last()
            .map_or(*self.start.lock().unwrap(), Batch::next)
    }

    fn start(&self) -> i64 {
        *self.start.lock().unwrap()
    }

    /// Retention: drops the batches wholly below `offset`.
    fn delete_before(&self, offset: i64) {
        self.batches
            .lock()
            .unwrap()
            .retain(|batch| batch.next() > offset);
        let first = self.batches().first().map_or(offset, |batch| batch.base);
        *self.start.lock().unwrap() = first;
    }

    fn push(&self, epoch: i32, count: i32) {
        let base = self.end();
        self.batches
            .lock()
            .unwrap()
            .push(Batch { base, epoch, count });
    }

    fn high_watermark(&self) -> i64 {
        *self.high_watermark.lock().unwrap()
    }

    fn set_hw(&self, high_watermark: i64) {
        *self.high_watermark.lock().unwrap() = high_watermark;
    }

    /// The epoch cache's answer: the largest epoch at or below `epoch` and
    /// its end offset (Kafka's `endOffsetFor`).
    fn epoch_end(&self, epoch: i32) -> Option<(i32, i64)> {
        let batches = self.batches();
        let first = batches.first()?;
        if epoch < first.epoch {
            return Some((epoch, first.base));
        }
        let found = batches.iter().rev().find(|batch| batch.epoch <= epoch)?;
        let end = batches
            .iter()
            .find(|batch| batch.epoch > found.epoch)
            .map_or(self.end(), |batch| batch.base);
        Some((found.epoch, end))
    }

    fn encode(batches: &[Batch]) -> Bytes {
        let mut bytes = BytesMut::new();
        for batch in batches {
            bytes.put_i64(batch.base);
            bytes.put_i32(batch.epoch);
            bytes.put_i32(batch.count);
        }
        bytes.freeze()
    }
}

impl FollowerLog for FakeLog {
    type Error = FakeLogError;

    fn offsets(&self) -> Result<LogOffsets, FakeLogError> {
        Ok(LogOffsets {
            log_start_offset: self.start(),
            log_end_offset: self.end(),
            high_watermark: self.high_watermark(),
            latest_epoch: self.batches().last().map(|batch| batch.epoch),
        })
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Result<Option<(i32, i64)>, FakeLogError> {
        Ok(self.epoch_end(epoch))
    }

    fn append(&self, mut records: Bytes) -> Result<i64, FakeLogError> {
        while records.remaining() >= 16 {
            let batch = Batch {
                base: records.get_i64(),
                epoch: records.get_i32(),
                count: records.get_i32(),
            };
            let log_end = self.end();
            if batch.base != log_end {
                return Err(FakeLogError {
                    base: batch.base,
                    log_end,
                });
            }
            self.batches.lock().unwrap().push(batch);
        }
        Ok(self.end())
    }

    fn truncate_to(&self, offset: i64) -> Result<i64, FakeLogError> {
        self.truncations.lock().unwrap().push(offset);
        self.batches
            .lock()
            .unwrap()
            .retain(|batch| batch.next() <= offset);
        let end = self.end();
        let mut high_watermark = self.high_watermark.lock().unwrap();
        *high_watermark = (*high_watermark).min(end);
        Ok(end)
    }

    fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), FakeLogError> {
        self.batches.lock().unwrap().clear();
        *self.start.lock().unwrap() = offset;
        Ok(())
    }

    fn set_high_watermark(&self, high_watermark: i64) {
        self.set_hw(high_watermark);
    }
}

/// A leader's answer to one partition of a replica fetch, as Strom's
/// Fetch handler gives it (KIP-320's divergence check first).
fn leader_answer(
    leader: &FakeLog,
    leader_epoch: i32,
    sent: &strom_replication::FetchPartition,
) -> PartitionFetchResult {
    if sent.current_leader_epoch < leader_epoch {
        return PartitionFetchResult::Error(FetchPartitionError::FencedLeaderEpoch);
    }
    if sent.current_leader_epoch > leader_epoch {
        return PartitionFetchResult::Error(FetchPartitionError::UnknownLeaderEpoch);
    }
    let high_watermark = leader.high_watermark();
    if sent.last_fetched_epoch >= 0 {
        let (epoch, end_offset) = leader
            .epoch_end(sent.last_fetched_epoch)
            .unwrap_or((-1, -1));
        if epoch < sent.last_fetched_epoch || end_offset < sent.fetch_offset {
            return PartitionFetchResult::Diverging {
                epoch,
                end_offset,
                high_watermark,
            };
        }
    }
    if sent.fetch_offset > leader.end() || sent.fetch_offset < leader.start() {
        return PartitionFetchResult::Error(FetchPartitionError::OffsetOutOfRange {
            leader_log_start_offset: leader.start(),
        });
    }
    let batches: Vec<Batch> = leader
        .batches()
        .into_iter()
        .filter(|batch| batch.base >= sent.fetch_offset)
        .take(2)
        .collect();
    PartitionFetchResult::Records {
        records: FakeLog::encode(&batches),
        high_watermark,
    }
}

fn partition() -> TopicPartition {
    TopicPartition::new("events".to_owned(), 0)
}

/// Fetches until the follower has nothing new to take (or 50 rounds).
fn fetch_until_caught_up(
    core: &mut FetcherCore<FakeLog>,
    leader: &FakeLog,
    leader_epoch: i32,
) -> Vec<PartitionEvent> {
    let mut events = Vec::new();
    for round in 0..50 {
        let request = core.next_request(round).expect("a partition to fetch");
        let results = request
            .partitions
            .iter()
            .map(|sent| {
                (
                    sent.topic_partition.clone(),
                    leader_answer(leader, leader_epoch, sent),
                )
            })
            .collect();
        let handled = core.handle_response(&request, results, round);
        let idle = handled.iter().all(|event| {
            matches!(event, PartitionEvent::Appended { log_end_offset, .. } if *log_end_offset == request.partitions[0].fetch_offset)
        });
        events.extend(handled);
        if idle {
            break;
        }
    }
    events
}

#[test]
fn a_follower_appends_with_the_leaders_offsets_and_takes_its_high_watermark() {
    let leader = FakeLog::with(&[(0, 3), (0, 2), (1, 4)]);
    leader.set_hw(5);
    let follower = FakeLog::with(&[]);
    let mut core = FetcherCore::new(1, FetcherConfig::new(2));
    core.add_partition(partition(), Arc::clone(&follower), 1)
        .expect("readable");
    let request = core.next_request(0).expect("a request");
    assert_eq!(request.replica_id, 2, "fetches as replica 2");
    assert_eq!(request.partitions[0].fetch_offset, 0);
    assert_eq!(request.partitions[0].current_leader_epoch, 1);
    assert_eq!(request.partitions[0].last_fetched_epoch, -1);
    fetch_until_caught_up(&mut core, &leader, 1);
    assert_eq!(follower.batches(), leader.batches(), "offsets kept");
    assert_eq!(follower.high_watermark(), 5, "the leader's HW");
    assert_eq!(
        core.state(&partition()).expect("followed").fetch_offset(),
        9
    );
    // The HW never passes what the follower holds.
    leader.set_hw(9);
    leader.push(1, 5);
    leader.set_hw(14);
    let mut small = FetcherCore::new(1, FetcherConfig::new(2));
    let fresh = FakeLog::with(&[]);
    small
        .add_partition(partition(), Arc::clone(&fresh), 1)
        .expect("readable");
    let request = small.next_request(0).expect("a request");
    let results = vec![(
        partition(),
        leader_answer(&leader, 1, &request.partitions[0]),
    )];
    small.handle_response(&request, results, 0);
    assert_eq!(fresh.end(), 5, "two batches per answer");
    assert_eq!(fresh.high_watermark(), 5, "capped by the local log");
}

#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    // The leader deleted everything below 20 (retention, or local
    // retention of a tiered log) while the follower was away at 10.
    let leader = FakeLog::with(&[(0, 10), (0, 10), (1, 10), (1, 10)]);
    leader.set_hw(40);
    leader.delete_before(20);
    let follower = FakeLog::with(&[(0, 10)]);
    let mut core = FetcherCore::new(1, FetcherConfig::new(2));
    core.add_partition(partition(), Arc::clone(&follower), 1)
        .expect("readable");
    let events = fetch_until_caught_up(&mut core, &leader, 1);
    assert!(
        events.iter().any(|event| matches!(
            event,
            PartitionEvent::Truncated {
                log_end_offset: 20,
                ..
            }
        )),
        "{events:?}"
    );
    assert_eq!(follower.start(), 20);
    assert_eq!(follower.batches(), leader.batches());
    assert_eq!(follower.high_watermark(), 40);
    // A follower ahead of the leader's log start is never emptied by an
    // out-of-range answer (it backs off instead).
    let ahead = FakeLog::with(&[(0, 10), (0, 10), (1, 5)]);
    let mut other = FetcherCore::new(1, FetcherConfig::new(2));
    other
        .add_partition(partition(), Arc::clone(&ahead), 1)
        .expect("readable");
    let request = other.next_request(0).expect("a request");
    let refused = vec![(
        partition(),
        PartitionFetchResult::Error(FetchPartitionError::OffsetOutOfRange {
            leader_log_start_offset: 20,
        }),
    )];
    let events = other.handle_response(&request, refused, 0);
    assert!(
        events
            .iter()
            .all(|event| matches!(event, PartitionEvent::BackingOff { .. })),
        "{events:?}"
    );
    assert_eq!(ahead.end(), 25, "nothing removed");
}

#[test]
fn a_divergent_suffix_is_truncated_and_nothing_before_it() {
    // The follower led epoch 1 and wrote 3 records nobody else has; the new
    // leader wrote epoch 2 from offset 5.
    let follower = FakeLog::with(&[(0, 5), (1, 3)]);
    follower.set_hw(2);
    let leader = FakeLog::with(&[(0, 5), (2, 6)]);
    leader.set_hw(11);
    let mut core = FetcherCore::new(3, FetcherConfig::new(1));
    core.add_partition(partition(), Arc::clone(&follower), 2)
        .expect("readable");
    let events = fetch_until_caught_up(&mut core, &leader, 2);
    assert!(
        events.iter().any(|event| matches!(
            event,
            PartitionEvent::Truncated {
                log_end_offset: 5,
                ..
            }
        )),
        "truncated to the end of epoch 0: {events:?}"
    );
    assert_eq!(
        *follower.truncations.lock().unwrap(),
        vec![5],
        "never down to the HW (2)"
    );
    assert_eq!(follower.batches(), leader.batches());
    assert_eq!(follower.high_watermark(), 11);
}

#[test]
fn a_follower_that_agrees_with_the_leader_is_not_truncated() {
    let follower = FakeLog::with(&[(0, 5), (1, 3)]);
    follower.set_hw(0);
    let leader = FakeLog::with(&[(0, 5), (1, 3), (2, 4)]);
    leader.set_hw(12);
    let mut core = FetcherCore::new(3, FetcherConfig::new(1));
    core.add_partition(partition(), Arc::clone(&follower), 2)
        .expect("readable");
    fetch_until_caught_up(&mut core, &leader, 2);
    assert!(follower.truncations.lock().unwrap().is_empty());
    assert_eq!(follower.batches(), leader.batches());
}

#[test]
fn an_epoch_the_leader_never_saw_truncates_in_two_steps() {
    // Follower: epochs 0, 1, 3; leader: epochs 0, 2 (1 and 3 never reached
    // it). The first answer names epoch 2's predecessor; then epoch 0's end.
    let follower = FakeLog::with(&[(0, 4), (1, 2), (3, 2)]);
    let leader = FakeLog::with(&[(0, 4), (2, 5)]);
    leader.set_hw(9);
    let mut core = FetcherCore::new(3, FetcherConfig::new(1));
    core.add_partition(partition(), Arc::clone(&follower), 4)
        .expect("readable");
    fetch_until_caught_up(&mut core, &leader, 4);
    let truncations = follower.truncations.lock().unwrap().clone();
    assert_eq!(truncations.last(), Some(&4), "{truncations:?}");
    assert!(truncations.iter().all(|&offset| offset >= 4));
    assert_eq!(follower.batches(), leader.batches());
}

#[test]
fn errors_back_off_and_a_stale_answer_is_ignored() {
    let follower = FakeLog::with(&[]);
    let mut config = FetcherConfig::new(2);
    config.backoff_ms = 100;
    let mut core = FetcherCore::new(1, config);
    core.add_partition(partition(), Arc::clone(&follower), 3)
        .expect("readable");
    let request = core.next_request(1_000).expect("a request");
    let refused = vec![(
        partition(),
        PartitionFetchResult::Error(FetchPartitionError::FencedLeaderEpoch),
    )];
    let events = core.handle_response(&request, refused, 1_000);
    assert!(matches!(
        events.as_slice(),
        [PartitionEvent::BackingOff {
            retry_at_ms: 1_100,
            ..
        }]
    ));
    assert_eq!(core.next_request(1_050), None, "backing off");
    assert_eq!(core.next_retry_ms(1_050), Some(1_100));
    let request = core.next_request(1_100).expect("retried");
    core.handle_transport_failure(&request, 1_100);
    assert_eq!(
        core.next_request(1_150),
        None,
        "connection refused backs off too"
    );
    // A newer epoch re-targets: an answer to the old request is ignored.
    let old = core.next_request(1_200).expect("retried");
    core.add_partition(partition(), Arc::clone(&follower), 4)
        .expect("readable");
    let records = vec![(
        partition(),
        PartitionFetchResult::Records {
            records: FakeLog::encode(&[Batch {
                base: 0,
                epoch: 3,
                count: 1,
            }]),
            high_watermark: 1,
        },
    )];
    assert!(core.handle_response(&old, records, 1_200).is_empty());
    assert_eq!(follower.end(), 0, "nothing appended from the stale answer");
    assert_eq!(
        core.next_request(1_200).expect("fetches").partitions[0].current_leader_epoch,
        4
    );
}

#[test]
fn a_leader_not_caught_up_with_the_metadata_is_asked_again_soon_then_less_often() {
    // The metadata named broker 1 leader at epoch 3 before broker 1 applied
    // it: its refusals are retried after 50, 100, 200 ms..., never later
    // than replica.fetch.backoff.ms, and an answer with records resets it.
    let follower = FakeLog::with(&[]);
    let mut config = FetcherConfig::new(2);
    config.backoff_ms = 300;
    let mut core = FetcherCore::new(1, config);
    core.add_partition(partition(), Arc::clone(&follower), 3)
        .expect("readable");
    let mut now = 1_000;
    let mut delays = Vec::new();
    for error in [
        FetchPartitionError::NotLeaderOrFollower,
        FetchPartitionError::UnknownLeaderEpoch,
        FetchPartitionError::NotLeaderOrFollower,
        FetchPartitionError::NotLeaderOrFollower,
    ] {
        let request = core.next_request(now).expect("a request");
        let events = core.handle_response(
            &request,
            vec![(partition(), PartitionFetchResult::Error(error))],
            now,
        );
        let [PartitionEvent::BackingOff { retry_at_ms, .. }] = events.as_slice() else {
            panic!("expected a back-off, got {events:?}");
        };
        delays.push(retry_at_ms - now);
        now = *retry_at_ms;
    }
    assert_eq!(delays, [50, 100, 200, 300]);
    let request = core.next_request(now).expect("a request");
    let answered = vec![(
        partition(),
        PartitionFetchResult::Records {
            records: FakeLog::encode(&[]),
            high_watermark: 0,
        },
    )];
    core.handle_response(&request, answered, now);
    let request = core.next_request(now).expect("fetches again at once");
    let refused = vec![(
        partition(),
        PartitionFetchResult::Error(FetchPartitionError::NotLeaderOrFollower),
    )];
    let events = core.handle_response(&request, refused, now);
    assert!(
        matches!(events.as_slice(), [PartitionEvent::BackingOff { retry_at_ms, .. }] if *retry_at_ms == now + 50),
        "{events:?}"
    );
}

/// Leaders by broker id, each with its epoch, answering over no socket.
#[derive(Default)]
struct FakeTransport {
    leaders: Mutex<HashMap<i32, (Arc<FakeLog>, i32)>>,
}

#[derive(Debug, thiserror::Error)]
#[error("connection refused by broker {broker}")]
struct Refused {
    broker: i32,
}

impl FetchTransport for FakeTransport {
    type Error = Refused;

    async fn fetch(
        &self,
        leader: i32,
        request: ReplicaFetchRequest,
    ) -> Result<Vec<(TopicPartition, PartitionFetchResult)>, Refused> {
        let found = self.leaders.lock().unwrap().get(&leader).cloned();
        let Some((log, epoch)) = found else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            return Err(Refused { broker: leader });
        };
        Ok(request
            .partitions
            .iter()
            .map(|sent| {
                (
                    sent.topic_partition.clone(),
                    leader_answer(&log, epoch, sent),
                )
            })
            .collect())
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_leader_retargets_the_fetcher() {
    let transport = Arc::new(FakeTransport::default());
    let first = FakeLog::with(&[(0, 4), (1, 3)]);
    first.set_hw(7);
    transport
        .leaders
        .lock()
        .unwrap()
        .insert(1, (Arc::clone(&first), 1));
    let mut config = FetcherConfig::new(3);
    config.backoff_ms = 20;
    let manager = FetcherManager::new(config, Arc::clone(&transport), Arc::new(SystemClock), 1);
    let follower = FakeLog::with(&[]);
    let target = |leader, leader_epoch| {
        BTreeMap::from([(
            partition(),
            FollowTarget {
                leader,
                leader_epoch,
                log: Arc::clone(&follower),
            },
        )])
    };
    manager.follow(target(1, 1));
    eventually("the follower copies broker 1", || follower.end() == 7).await;
    assert_eq!(follower.high_watermark(), 7);
    // Broker 2 takes over at epoch 2, having only the first 4 records, and
    // writes on; broker 1 is gone (refuses connections).
    let second = FakeLog::with(&[(0, 4), (2, 6)]);
    second.set_hw(10);
    {
        let mut leaders = transport.leaders.lock().unwrap();
        leaders.remove(&1);
        leaders.insert(2, (Arc::clone(&second), 2));
    }
    manager.follow(target(2, 2));
    assert_eq!(
        manager.followed(),
        BTreeMap::from([(2, 1)]),
        "one fetcher, on broker 2"
    );
    eventually("the follower copies broker 2", || {
        follower.batches() == second.batches()
    })
    .await;
    assert_eq!(*follower.truncations.lock().unwrap(), vec![4]);
    assert_eq!(follower.high_watermark(), 10);
    manager.follow(BTreeMap::new());
    assert!(manager.followed().is_empty(), "idle fetchers stop");
    manager.shutdown().await;
}

#[test]
fn a_partition_goes_to_the_fetcher_kafka_would_pick() {
    // abs(31 * topic.hashCode() + partition) % fetchers, with Java's
    // String.hashCode ("orders" hashes negative).
    let pick = |topic: &str, partition, fetchers| {
        fetcher_index(&TopicPartition::new(topic.to_owned(), partition), fetchers)
    };
    assert_eq!(pick("test", 0, 3), 1);
    assert_eq!(pick("test", 0, 4), 2);
    assert_eq!(pick("orders", 7, 3), 1);
    assert_eq!(pick("__consumer_offsets", 13, 4), 2);
    assert_eq!(pick("test", 1, 1), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn num_replica_fetchers_splits_one_leaders_partitions_across_tasks() {
    let transport = Arc::new(FakeTransport::default());
    let leader = FakeLog::with(&[(0, 4), (1, 3)]);
    leader.set_hw(7);
    transport
        .leaders
        .lock()
        .unwrap()
        .insert(1, (Arc::clone(&leader), 1));
    let manager = FetcherManager::new(
        FetcherConfig::new(3),
        Arc::clone(&transport),
        Arc::new(SystemClock),
        2,
    );
    // test-0 and test-1 go to fetchers 0 and 1 of broker 1.
    let followers = [FakeLog::with(&[]), FakeLog::with(&[])];
    let wanted = (0..2)
        .map(|index| {
            (
                TopicPartition::new("test".to_owned(), index),
                FollowTarget {
                    leader: 1,
                    leader_epoch: 1,
                    log: Arc::clone(&followers[index as usize]),
                },
            )
        })
        .collect();
    manager.follow(wanted);
    assert_eq!(manager.fetcher_counts(), BTreeMap::from([(1, 2)]));
    assert_eq!(manager.followed(), BTreeMap::from([(1, 2)]));
    for follower in &followers {
        eventually("each fetcher copies the leader", || follower.end() == 7).await;
    }
    manager.shutdown().await;
}

proptest::proptest! {
    /// Any follower log that shares a prefix of whole batches with the
    /// leader's, then diverges with epochs the leader never wrote past that
    /// prefix, ends equal to the leader's log and is never truncated below
    /// the shared prefix.
    #[test]
    fn a_follower_converges_and_keeps_the_shared_prefix(
        shared in proptest::collection::vec(1i32..4, 0..5),
        leader_tail in proptest::collection::vec(1i32..4, 0..5),
        follower_tail in proptest::collection::vec(1i32..4, 0..5),
    ) {
        // Shared batches use epochs 0..; the tails continue with disjoint
        // epochs (the follower's older than the leader's), as two leaders
        // of successive epochs would write them.
        let base_epoch = shared.len() as i32;
        let shared_batches: Vec<(i32, i32)> = shared.iter().enumerate().map(|(index, &count)| (index as i32, count)).collect();
        let mut leader_batches = shared_batches.clone();
        leader_batches.extend(leader_tail.iter().map(|&count| (base_epoch + 2, count)));
        let mut follower_batches = shared_batches;
        follower_batches.extend(follower_tail.iter().map(|&count| (base_epoch + 1, count)));
        let leader = FakeLog::with(&leader_batches);
        leader.set_hw(leader.end());
        let follower = FakeLog::with(&follower_batches);
        let prefix_end: i64 = shared.iter().map(|&count| i64::from(count)).sum();
        let mut core = FetcherCore::new(1, FetcherConfig::new(2));
        core.add_partition(partition(), Arc::clone(&follower), base_epoch + 2).expect("readable");
        fetch_until_caught_up(&mut core, &leader, base_epoch + 2);
        proptest::prop_assert_eq!(follower.batches(), leader.batches());
        for offset in follower.truncations.lock().unwrap().iter() {
            proptest::prop_assert!(*offset >= prefix_end, "truncated to {} below the prefix end {}", offset, prefix_end);
        }
        proptest::prop_assert_eq!(follower.high_watermark(), leader.end());
    }
}
