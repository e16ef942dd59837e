use strom_protocol::kafka::protocol::StrBytes;

use super::*;

fn key(topic: &'static str, partition: i32) -> PartitionKey {
    PartitionKey {
        topic_id: Uuid::nil(),
        topic: TopicName(StrBytes::from_static_str(topic)),
        partition,
    }
}

fn wanted(topic: &'static str, partition: i32, fetch_offset: i64) -> SessionPartition {
    SessionPartition {
        key: key(topic, partition),
        request: FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(fetch_offset)
            .with_partition_max_bytes(1 << 20),
    }
}

fn status(high_watermark: i64, has_records: bool) -> PartitionStatus {
    PartitionStatus {
        high_watermark,
        last_stable_offset: high_watermark,
        log_start_offset: 0,
        has_records,
        has_error: false,
    }
}

/// Opens a session over `partitions` (all with HW 10 and records).
fn open(cache: &FetchSessionCache, partitions: Vec<SessionPartition>, now_ms: i64) -> i32 {
    let fetch = cache
        .begin(0, INITIAL_EPOCH, partitions, &[], false, now_ms)
        .unwrap();
    assert_eq!(fetch.context, SessionContext::Full { privileged: false });
    let statuses = vec![status(10, true); fetch.partitions.len()];
    let (id, include) = cache.finish(fetch.context, &fetch.partitions, &statuses, now_ms);
    assert!(
        include.iter().all(|flag| *flag),
        "a full response has everything"
    );
    id
}

fn offsets(fetch: &SessionFetch) -> Vec<(i32, i64)> {
    fetch
        .partitions
        .iter()
        .map(|partition| (partition.key.partition, partition.request.fetch_offset))
        .collect()
}

#[test]
fn a_full_fetch_opens_a_session_and_incremental_ones_reuse_it() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(&cache, vec![wanted("t", 0, 0), wanted("t", 1, 0)], 0);
    assert!(id > 0);
    assert_eq!(cache.len(), 1);
    // Epoch 1 changes partition 1's offset only; the session reads both.
    let fetch = cache
        .begin(id, 1, vec![wanted("t", 1, 7)], &[], false, 1)
        .unwrap();
    assert_eq!(fetch.context, SessionContext::Incremental { id });
    assert_eq!(offsets(&fetch), vec![(0, 0), (1, 7)]);
    // Nothing new for partition 0; partition 1 has records.
    let statuses = [status(10, false), status(12, true)];
    let (same, include) = cache.finish(fetch.context, &fetch.partitions, &statuses, 1);
    assert_eq!(same, id);
    assert_eq!(include, vec![false, true]);
}

#[test]
fn a_changed_high_watermark_or_an_error_is_sent_once() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(&cache, vec![wanted("t", 0, 0)], 0);
    let mut epoch = 1;
    let mut step = |status: PartitionStatus| {
        let fetch = cache.begin(id, epoch, Vec::new(), &[], false, 0).unwrap();
        epoch += 1;
        cache
            .finish(fetch.context, &fetch.partitions, &[status], 0)
            .1[0]
    };
    assert!(!step(status(10, false)), "unchanged");
    assert!(step(status(11, false)), "the high watermark moved");
    assert!(!step(status(11, false)), "sent already");
    let mut failed = status(11, false);
    failed.has_error = true;
    assert!(step(failed), "errors are always sent");
    let mut moved_start = status(11, false);
    moved_start.log_start_offset = 5;
    assert!(step(moved_start), "the log start offset moved");
}

#[test]
fn unknown_ids_and_wrong_epochs_are_refused() {
    let cache = FetchSessionCache::new(10, 42);
    assert_eq!(
        cache.begin(99, 1, Vec::new(), &[], false, 0).unwrap_err(),
        FetchSessionError::IdNotFound { session_id: 99 }
    );
    let id = open(&cache, vec![wanted("t", 0, 0)], 0);
    assert_eq!(
        cache.begin(id, 2, Vec::new(), &[], false, 0).unwrap_err(),
        FetchSessionError::InvalidEpoch {
            session_id: id,
            expected: 1,
            received: 2
        }
    );
    // The refused request did not move the epoch.
    assert!(cache.begin(id, 1, Vec::new(), &[], false, 0).is_ok());
    assert!(
        cache.begin(id, 1, Vec::new(), &[], false, 0).is_err(),
        "a repeated epoch is refused"
    );
}

#[test]
fn forgotten_partitions_leave_the_session_and_new_ones_join_it() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(&cache, vec![wanted("a", 0, 0), wanted("a", 1, 0)], 0);
    let fetch = cache
        .begin(id, 1, vec![wanted("b", 0, 3)], &[key("a", 0)], false, 0)
        .unwrap();
    let keys: Vec<_> = fetch
        .partitions
        .iter()
        .map(|partition| (partition.key.topic.0.to_string(), partition.key.partition))
        .collect();
    assert_eq!(keys, vec![("a".to_owned(), 1), ("b".to_owned(), 0)]);
}

#[test]
fn partitions_that_returned_records_move_to_the_back() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(
        &cache,
        vec![wanted("t", 0, 0), wanted("t", 1, 0), wanted("t", 2, 0)],
        0,
    );
    // The full response returned records for all three, in order: the order stays.
    let fetch = cache.begin(id, 1, Vec::new(), &[], false, 0).unwrap();
    assert_eq!(offsets(&fetch), vec![(0, 0), (1, 0), (2, 0)]);
    let statuses = [status(10, true), status(10, false), status(10, false)];
    cache.finish(fetch.context, &fetch.partitions, &statuses, 0);
    let fetch = cache.begin(id, 2, Vec::new(), &[], false, 0).unwrap();
    assert_eq!(offsets(&fetch), vec![(1, 0), (2, 0), (0, 0)]);
}

#[test]
fn the_final_epoch_closes_the_session_and_the_initial_one_replaces_it() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(&cache, vec![wanted("t", 0, 0)], 0);
    let fetch = cache
        .begin(id, FINAL_EPOCH, vec![wanted("t", 0, 5)], &[], false, 0)
        .unwrap();
    assert_eq!(fetch.context, SessionContext::Sessionless);
    assert_eq!(offsets(&fetch), vec![(0, 5)]);
    assert!(cache.is_empty());
    let first = open(&cache, vec![wanted("t", 0, 0)], 0);
    let fetch = cache
        .begin(first, INITIAL_EPOCH, vec![wanted("t", 0, 0)], &[], false, 0)
        .unwrap();
    assert!(cache.is_empty(), "the old session is closed");
    let statuses = [status(1, false)];
    let (second, _) = cache.finish(fetch.context, &fetch.partitions, &statuses, 0);
    assert!(second > 0 && second != first);
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_full_cache_evicts_an_idle_session_first() {
    let cache = FetchSessionCache::new(2, 42);
    let idle = open(&cache, vec![wanted("t", 0, 0), wanted("t", 1, 0)], 0);
    let busy = open(
        &cache,
        vec![wanted("t", 0, 0), wanted("t", 1, 0), wanted("t", 2, 0)],
        EVICTION_IDLE_MS,
    );
    // One partition: smaller than both, but `idle` has been idle too long.
    let newest = open(&cache, vec![wanted("u", 0, 0)], EVICTION_IDLE_MS + 1);
    assert!(newest > 0);
    assert_eq!(
        cache.begin(idle, 1, Vec::new(), &[], false, 0).unwrap_err(),
        FetchSessionError::IdNotFound { session_id: idle }
    );
    assert!(cache.begin(busy, 1, Vec::new(), &[], false, 0).is_ok());
}

#[test]
fn a_full_cache_evicts_a_smaller_session_but_not_a_larger_one() {
    let cache = FetchSessionCache::new(1, 42);
    let small = open(&cache, vec![wanted("t", 0, 0)], 0);
    let fetch = cache
        .begin(0, INITIAL_EPOCH, vec![wanted("t", 0, 0)], &[], false, 1)
        .unwrap();
    let (refused, _) = cache.finish(fetch.context, &fetch.partitions, &[status(1, false)], 1);
    assert_eq!(refused, NO_SESSION_ID, "equal size does not evict");
    let larger = open(&cache, vec![wanted("t", 0, 0), wanted("t", 1, 0)], 2);
    assert!(larger > 0);
    assert!(cache.begin(small, 1, Vec::new(), &[], false, 3).is_err());
    // A privileged (follower) session outranks a larger consumer one.
    let fetch = cache
        .begin(0, INITIAL_EPOCH, vec![wanted("t", 0, 0)], &[], true, 4)
        .unwrap();
    let (follower, _) = cache.finish(fetch.context, &fetch.partitions, &[status(1, false)], 4);
    assert!(follower > 0);
    assert!(cache.begin(larger, 1, Vec::new(), &[], false, 5).is_err());
}

#[test]
fn zero_slots_disable_sessions() {
    let cache = FetchSessionCache::new(0, 42);
    let fetch = cache
        .begin(0, INITIAL_EPOCH, vec![wanted("t", 0, 0)], &[], false, 0)
        .unwrap();
    assert_eq!(fetch.context, SessionContext::Sessionless);
}

#[test]
fn epochs_wrap_to_one() {
    assert_eq!(next_epoch(INITIAL_EPOCH), 1);
    assert_eq!(next_epoch(41), 42);
    assert_eq!(next_epoch(i32::MAX), 1);
}

#[test]
fn a_panic_holding_the_cache_drops_every_session_instead_of_serving_them() {
    let cache = FetchSessionCache::new(10, 42);
    let id = open(&cache, vec![wanted("t", 0, 0), wanted("t", 1, 0)], 0);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _state = cache.state.lock();
        panic!("injected panic while changing a session");
    }));
    assert!(panicked.is_err());
    assert_eq!(cache.len(), 0, "the sessions are dropped");
    assert!(
        cache.begin(id, 1, Vec::new(), &[], false, 1).is_err(),
        "the old session is unknown now"
    );
    // The cache works again: a new full fetch opens a new session.
    let reopened = open(&cache, vec![wanted("t", 0, 0)], 2);
    assert!(reopened > 0);
    assert_eq!(cache.len(), 1);
}
