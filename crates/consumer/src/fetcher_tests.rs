use bytes::{Bytes, BytesMut};
use strom_protocol::kafka::messages::fetch_response::FetchableTopicResponse;
use strom_protocol::kafka::messages::ProducerId;
use strom_protocol::records::{Compression, RecordBatchBuilder};

use super::*;

fn settings() -> FetchSettings {
    FetchSettings {
        min_bytes: 1,
        max_wait: Duration::from_millis(500),
        max_bytes: 1 << 20,
        max_partition_bytes: 1 << 16,
        isolation_level: IsolationLevel::ReadUncommitted,
        check_crcs: true,
        offset_reset: OffsetReset::Earliest,
        rack_id: String::new(),
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

fn batch(base_offset: i64, count: usize, compression: Compression) -> Bytes {
    let mut builder = RecordBatchBuilder::new(compression).with_base_offset(base_offset);
    for index in 0..count {
        let value = format!("v{}", base_offset + index as i64);
        builder
            .append(
                1_000 + index as i64,
                Some(b"k"),
                Some(value.as_bytes()),
                &[],
            )
            .unwrap();
    }
    builder.build().unwrap()
}

fn concat(parts: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for part in parts {
        out.extend_from_slice(part);
    }
    out.freeze()
}

fn partition_data(partition: i32, error: ErrorCode, records: Bytes) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(error.code())
        .with_high_watermark(100)
        .with_records(Some(records))
}

fn response(partitions: Vec<PartitionData>) -> FetchResponse {
    FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(topic_name("t"))
        .with_partitions(partitions)])
}

/// Partition 0 and 2 on broker 1, partition 1 on broker 2.
fn leader(tp: &TopicPartition) -> Option<(i32, i32)> {
    Some((if tp.partition == 1 { 2 } else { 1 }, 0))
}

fn fetcher_at(partitions: &[(i32, i64)]) -> Fetcher {
    let mut fetcher = Fetcher::new(settings());
    fetcher.assign(
        partitions.iter().map(|(p, _)| tp(*p)),
        Position::AwaitingCommitted,
    );
    for (partition, offset) in partitions {
        fetcher
            .seek(&tp(*partition), Position::At(*offset))
            .unwrap();
    }
    fetcher
}

fn values(records: &[ConsumerRecord]) -> Vec<i64> {
    records.iter().map(|record| record.offset).collect()
}

#[test]
fn one_request_per_leader_and_none_while_in_flight() {
    let mut fetcher = fetcher_at(&[(0, 0), (1, 0), (2, 0)]);
    let (plans, leaderless) = fetcher.prepare_fetches(leader);
    assert!(leaderless.is_empty());
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0].broker_id, 1);
    assert_eq!(plans[0].offsets.len(), 2);
    let request = &plans[0].request;
    assert_eq!((request.session_id, request.session_epoch), (0, 0));
    assert_eq!(request.max_wait_ms, 500);
    assert_eq!(request.topics[0].partitions[0].partition_max_bytes, 1 << 16);
    let (again, _) = fetcher.prepare_fetches(leader);
    assert!(again.is_empty(), "a fetch is already in flight per leader");
    assert!(fetcher.in_flight());
}

#[test]
fn response_records_are_drained_and_positions_advance() {
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let plan = &plans[0];
    let outcome = fetcher.handle_response(
        plan,
        response(vec![partition_data(
            0,
            ErrorCode::None,
            concat(&[
                batch(0, 3, Compression::None),
                batch(3, 2, Compression::Lz4),
            ]),
        )]),
    );
    assert_eq!(outcome, FetchOutcome::default());
    assert!(fetcher.has_buffered());
    let records = fetcher.drain(100);
    assert_eq!(values(&records), [0, 1, 2, 3, 4]);
    assert_eq!(records[4].value.as_deref(), Some(&b"v4"[..]));
    assert_eq!(records[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(5)));
    assert_eq!(fetcher.high_watermark(&tp(0)), Some(100));
    let (plans, _) = fetcher.prepare_fetches(leader);
    assert_eq!(plans[0].offsets.get(&tp(0)), Some(&5));
}

#[test]
fn records_before_the_position_inside_a_batch_are_skipped() {
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Zstd,
    ] {
        let mut fetcher = fetcher_at(&[(0, 3)]);
        let (plans, _) = fetcher.prepare_fetches(leader);
        fetcher.handle_response(
            &plans[0],
            response(vec![partition_data(
                0,
                ErrorCode::None,
                batch(0, 6, compression),
            )]),
        );
        assert_eq!(values(&fetcher.drain(100)), [3, 4, 5], "{compression:?}");
        assert_eq!(fetcher.position(&tp(0)), Some(Position::At(6)));
    }
}

#[test]
fn max_poll_records_bounds_each_drain() {
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::None,
            batch(0, 5, Compression::None),
        )]),
    );
    assert_eq!(values(&fetcher.drain(2)), [0, 1]);
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(2)));
    let (plans, _) = fetcher.prepare_fetches(leader);
    assert!(
        plans.is_empty(),
        "buffered partitions are not fetched again"
    );
    assert_eq!(values(&fetcher.drain(2)), [2, 3]);
    assert_eq!(values(&fetcher.drain(2)), [4]);
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(5)));
}

#[test]
fn buffered_partitions_wait_while_others_are_prefetched() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::None,
            batch(0, 2, Compression::None),
        )]),
    );
    let (plans, _) = fetcher.prepare_fetches(leader);
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].offsets.keys().collect::<Vec<_>>(), [&tp(2)]);
}

#[test]
fn crc_errors_are_reported_only_when_checked() {
    let mut corrupted = BytesMut::from(&batch(0, 2, Compression::None)[..]);
    let last = corrupted.len() - 2;
    corrupted[last] ^= 0x01;
    let corrupted = corrupted.freeze();
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(0, ErrorCode::None, corrupted.clone())]),
    );
    assert!(matches!(
        fetcher.take_error(),
        Some(ConsumerError::CorruptRecord { .. })
    ));
    assert!(fetcher.drain(10).is_empty());

    let mut fetcher = Fetcher::new(FetchSettings {
        check_crcs: false,
        ..settings()
    });
    fetcher.assign([tp(0)], Position::At(0));
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(0, ErrorCode::None, corrupted)]),
    );
    assert!(fetcher.take_error().is_none());
    assert_eq!(fetcher.drain(10).len(), 2);
}

#[test]
fn a_truncated_tail_batch_is_ignored_but_a_lone_partial_batch_is_too_large() {
    let second = batch(2, 2, Compression::None);
    let partial = second.slice(..second.len() / 2);
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::None,
            concat(&[batch(0, 2, Compression::None), partial.clone()]),
        )]),
    );
    assert!(fetcher.take_error().is_none());
    assert_eq!(values(&fetcher.drain(10)), [0, 1]);
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(2)));

    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(0, ErrorCode::None, partial)]),
    );
    assert!(matches!(
        fetcher.take_error(),
        Some(ConsumerError::RecordTooLarge { offset: 2, .. })
    ));
}

#[test]
fn offset_out_of_range_follows_auto_offset_reset() {
    let mut fetcher = fetcher_at(&[(0, 50)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let outcome = fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::OffsetOutOfRange,
            Bytes::new(),
        )]),
    );
    assert_eq!(outcome.reset_needed, [tp(0)]);
    assert_eq!(
        fetcher.position(&tp(0)),
        Some(Position::AwaitingReset(OffsetReset::Earliest))
    );
    assert_eq!(fetcher.awaiting(false), [tp(0)]);

    let mut fetcher = Fetcher::new(FetchSettings {
        offset_reset: OffsetReset::None,
        ..settings()
    });
    fetcher.assign([tp(0)], Position::At(50));
    let (plans, _) = fetcher.prepare_fetches(leader);
    let outcome = fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::OffsetOutOfRange,
            Bytes::new(),
        )]),
    );
    assert!(outcome.reset_needed.is_empty());
    assert!(matches!(
        fetcher.take_error(),
        Some(ConsumerError::OffsetOutOfRange { offset: 50, .. })
    ));
}

#[test]
fn leadership_errors_ask_for_metadata() {
    for code in [
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::FencedLeaderEpoch,
    ] {
        let mut fetcher = fetcher_at(&[(0, 0)]);
        let (plans, _) = fetcher.prepare_fetches(leader);
        let outcome = fetcher.handle_response(
            &plans[0],
            response(vec![partition_data(0, code, Bytes::new())]),
        );
        assert!(outcome.refresh_metadata, "{code}");
        assert!(!fetcher.in_flight());
        assert_eq!(fetcher.position(&tp(0)), Some(Position::At(0)));
    }
}

#[test]
fn a_seek_while_in_flight_discards_the_response() {
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.seek(&tp(0), Position::At(10)).unwrap();
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::None,
            batch(0, 3, Compression::None),
        )]),
    );
    assert!(fetcher.drain(10).is_empty());
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(10)));
}

#[test]
fn paused_partitions_are_neither_fetched_nor_returned() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![partition_data(
            0,
            ErrorCode::None,
            batch(0, 2, Compression::None),
        )]),
    );
    fetcher.set_paused(&tp(0), true).unwrap();
    assert!(fetcher.drain(10).is_empty());
    assert!(!fetcher.has_buffered());
    fetcher.set_paused(&tp(2), true).unwrap();
    assert!(fetcher.prepare_fetches(leader).0.is_empty());
    assert_eq!(fetcher.paused(), [tp(0), tp(2)]);
    fetcher.set_paused(&tp(0), false).unwrap();
    assert_eq!(values(&fetcher.drain(10)), [0, 1]);
}

#[test]
fn read_committed_skips_aborted_transactions_and_control_batches() {
    let transactional = |base: i64, count: usize, producer_id: i64| {
        let mut builder = RecordBatchBuilder::new(Compression::None)
            .with_base_offset(base)
            .with_producer(producer_id, 0, 0)
            .with_transactional(true);
        for _ in 0..count {
            builder.append(1, None, Some(b"x"), &[]).unwrap();
        }
        builder.build().unwrap()
    };
    let marker = |offset: i64, producer_id: i64| {
        let mut builder = RecordBatchBuilder::new(Compression::None)
            .with_base_offset(offset)
            .with_producer(producer_id, 0, -1)
            .with_transactional(true)
            .with_control(true);
        builder
            .append(1, Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[])
            .unwrap();
        builder.build().unwrap()
    };
    // Producer 7 aborts offsets 0-1 (marker at 2); producer 8 commits 3-4 (marker at 5).
    let bytes = concat(&[
        transactional(0, 2, 7),
        marker(2, 7),
        transactional(3, 2, 8),
        marker(5, 8),
    ]);
    let aborted = vec![AbortedTransaction::default()
        .with_producer_id(ProducerId(7))
        .with_first_offset(0)];
    for (isolation_level, expected) in [
        (IsolationLevel::ReadCommitted, vec![3, 4]),
        (IsolationLevel::ReadUncommitted, vec![0, 1, 3, 4]),
    ] {
        let mut fetcher = Fetcher::new(FetchSettings {
            isolation_level,
            ..settings()
        });
        fetcher.assign([tp(0)], Position::At(0));
        let (plans, _) = fetcher.prepare_fetches(leader);
        assert_eq!(plans[0].request.isolation_level, isolation_level.code());
        let mut data = partition_data(0, ErrorCode::None, bytes.clone());
        data.aborted_transactions = Some(aborted.clone());
        fetcher.handle_response(&plans[0], response(vec![data]));
        assert_eq!(values(&fetcher.drain(10)), expected);
        assert_eq!(fetcher.position(&tp(0)), Some(Position::At(6)));
    }
}

#[test]
fn sessions_send_only_changed_partitions() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let mut first = response(vec![partition_data(
        0,
        ErrorCode::None,
        batch(0, 1, Compression::None),
    )]);
    first.session_id = 9;
    fetcher.handle_response(&plans[0], first);
    assert_eq!(
        fetcher.session_ids(),
        BTreeMap::from([(plans[0].broker_id, 9)])
    );
    fetcher.drain(10);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let request = &plans[0].request;
    assert_eq!((request.session_id, request.session_epoch), (9, 1));
    let sent: Vec<i32> = request.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition)
        .collect();
    assert_eq!(
        sent,
        [0],
        "partition 2 is unchanged and stays in the session"
    );
    assert_eq!(plans[0].offsets.len(), 2);
    fetcher.handle_failure(&plans[0]);
    assert_eq!(
        fetcher.session_ids(),
        BTreeMap::from([(plans[0].broker_id, 0)])
    );
    let (plans, _) = fetcher.prepare_fetches(leader);
    assert_eq!(plans[0].request.session_id, 0);
    assert_eq!(plans[0].request.topics[0].partitions.len(), 2);
}

#[test]
fn leaderless_partitions_are_reported() {
    let mut fetcher = fetcher_at(&[(0, 0), (1, 0)]);
    let (plans, leaderless) = fetcher.prepare_fetches(|tp| (tp.partition == 0).then_some((1, 0)));
    assert_eq!(plans.len(), 1);
    assert_eq!(leaderless, [tp(1)]);
}

/// Every partition on broker 1.
fn one_leader(_: &TopicPartition) -> Option<(i32, i32)> {
    Some((1, 0))
}

/// `records` of `partition` from `base`, with the log ending at `end`.
fn data_to(partition: i32, base: i64, records: usize, end: i64) -> PartitionData {
    let bytes = if records == 0 {
        Bytes::new()
    } else {
        batch(base, records, Compression::None)
    };
    partition_data(partition, ErrorCode::None, bytes).with_high_watermark(end)
}

fn fetched(plan: &FetchPlan) -> Vec<(i32, i64)> {
    plan.offsets
        .iter()
        .map(|(tp, offset)| (tp.partition, *offset))
        .collect()
}

#[test]
fn a_drained_partition_waits_for_the_buffered_ones_instead_of_long_polling() {
    let mut fetcher = fetcher_at(&[(0, 0), (1, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![
            data_to(0, 0, 2, 2),
            data_to(1, 0, 2, 100),
            data_to(2, 0, 2, 100),
        ]),
    );
    assert_eq!(values(&fetcher.drain(2)), [0, 1]);
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(2)));
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert!(
        plans.is_empty(),
        "partition 0 is at its end: alone it would only long-poll"
    );
    assert_eq!(values(&fetcher.drain(2)), [0, 1]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert_eq!(plans.len(), 1);
    assert_eq!(fetched(&plans[0]), [(0, 2), (1, 2)]);
    assert_eq!(plans[0].request.max_wait_ms, 500);
}

#[test]
fn a_leader_with_nothing_buffered_is_long_polled() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![data_to(0, 0, 2, 2), data_to(2, 0, 0, 0)]),
    );
    assert_eq!(values(&fetcher.drain(10)), [0, 1]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert_eq!(plans.len(), 1, "every partition is at its end: wait there");
    assert_eq!(fetched(&plans[0]), [(0, 2), (2, 0)]);
}

#[test]
fn only_records_buffered_from_the_same_leader_hold_a_long_poll() {
    let mut fetcher = fetcher_at(&[(0, 0), (1, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let on = |broker_id: i32| plans.iter().find(|plan| plan.broker_id == broker_id);
    fetcher.handle_response(
        on(1).unwrap(),
        response(vec![data_to(0, 0, 2, 2), data_to(2, 0, 0, 0)]),
    );
    fetcher.handle_response(on(2).unwrap(), response(vec![data_to(1, 0, 2, 100)]));
    assert_eq!(values(&fetcher.drain(2)), [0, 1]);
    let (plans, _) = fetcher.prepare_fetches(leader);
    let sent: Vec<(i32, Vec<(i32, i64)>)> = plans
        .iter()
        .map(|plan| (plan.broker_id, fetched(plan)))
        .collect();
    assert_eq!(
        sent,
        [(1, vec![(0, 2), (2, 0)])],
        "broker 1 has nothing buffered; its long poll holds up no other broker"
    );
}

#[test]
fn paused_buffered_partitions_do_not_hold_a_fetch() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    fetcher.handle_response(
        &plans[0],
        response(vec![data_to(0, 0, 2, 100), data_to(2, 0, 0, 0)]),
    );
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert!(plans.is_empty());
    fetcher.set_paused(&tp(0), true).unwrap();
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert_eq!(
        fetched(&plans[0]),
        [(2, 0)],
        "paused records are not handed out"
    );
}

#[test]
fn a_partition_never_fetched_counts_as_having_records() {
    let mut fetcher = fetcher_at(&[(0, 0), (2, 0)]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    fetcher.handle_response(&plans[0], response(vec![data_to(0, 0, 2, 100)]));
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert_eq!(fetched(&plans[0]), [(2, 0)]);
}

#[test]
fn read_committed_fetches_read_to_the_last_stable_offset() {
    for (isolation_level, held) in [
        (IsolationLevel::ReadCommitted, true),
        (IsolationLevel::ReadUncommitted, false),
    ] {
        let mut fetcher = Fetcher::new(FetchSettings {
            isolation_level,
            ..settings()
        });
        fetcher.assign([tp(0), tp(2)], Position::At(0));
        let (plans, _) = fetcher.prepare_fetches(one_leader);
        let stable_at = |data: PartitionData, offset: i64| data.with_last_stable_offset(offset);
        fetcher.handle_response(
            &plans[0],
            response(vec![
                stable_at(data_to(0, 0, 2, 100), 100),
                stable_at(data_to(2, 0, 0, 100), 0),
            ]),
        );
        let (plans, _) = fetcher.prepare_fetches(one_leader);
        assert_eq!(plans.is_empty(), held, "{isolation_level:?}");
    }
}

#[test]
fn a_fetch_of_control_batches_only_moves_the_position() {
    let mut fetcher = fetcher_at(&[(0, 0)]);
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    let mut marker = RecordBatchBuilder::new(Compression::None)
        .with_base_offset(0)
        .with_producer(7, 0, -1)
        .with_transactional(true)
        .with_control(true);
    marker
        .append(1, Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .unwrap();
    let data = partition_data(0, ErrorCode::None, marker.build().unwrap());
    fetcher.handle_response(&plans[0], response(vec![data]));
    assert!(!fetcher.has_buffered());
    assert_eq!(fetcher.position(&tp(0)), Some(Position::At(1)));
    let (plans, _) = fetcher.prepare_fetches(one_leader);
    assert_eq!(fetched(&plans[0]), [(0, 1)]);
}

/// A broker with `ends[p]` records in partition p that answers every fetch
/// with up to `per_partition` records of each partition asked for.
struct ModelBroker {
    ends: Vec<i64>,
    per_partition: i64,
}

impl ModelBroker {
    /// Whether `plan` would wait on the broker for `fetch.max.wait.ms`.
    fn long_polls(&self, plan: &FetchPlan) -> bool {
        plan.offsets
            .iter()
            .all(|(tp, offset)| *offset >= self.ends[tp.partition as usize])
    }

    fn answer(&self, plan: &FetchPlan) -> FetchResponse {
        response(
            plan.offsets
                .iter()
                .map(|(tp, offset)| {
                    let end = self.ends[tp.partition as usize];
                    let count = (end - offset).clamp(0, self.per_partition);
                    data_to(tp.partition, *offset, count as usize, end)
                })
                .collect(),
        )
    }
}

/// Polls of `max_poll_records` from partitions of the sizes in `ends`, each
/// answer arriving at the next poll, until every record is read; returns
/// the records read per partition (in order) and the number of requests
/// sent that long-polled while records were still buffered.
fn consume_all(ends: &[i64], max_poll_records: usize) -> (Vec<Vec<i64>>, usize) {
    let broker = ModelBroker {
        ends: ends.to_vec(),
        per_partition: 30,
    };
    let partitions: Vec<(i32, i64)> = (0..ends.len() as i32).map(|p| (p, 0)).collect();
    let mut fetcher = fetcher_at(&partitions);
    let mut read = vec![Vec::new(); ends.len()];
    let total: usize = ends.iter().map(|end| *end as usize).sum();
    let (mut pending, mut stalls, mut polls) = (Vec::new(), 0, 0);
    while read.iter().map(Vec::len).sum::<usize>() < total {
        polls += 1;
        assert!(polls < 10_000, "no progress");
        for plan in pending.drain(..) {
            let answer = broker.answer(&plan);
            fetcher.handle_response(&plan, answer);
        }
        for record in fetcher.drain(max_poll_records) {
            read[record.partition as usize].push(record.offset);
        }
        let (plans, _) = fetcher.prepare_fetches(one_leader);
        for plan in &plans {
            if broker.long_polls(plan) && fetcher.has_buffered() {
                stalls += 1;
            }
        }
        pending = plans;
    }
    (read, stalls)
}

#[test]
fn uneven_partitions_are_read_without_a_long_poll_while_records_wait() {
    for ends in [
        vec![40, 55, 70, 85, 100, 115, 130, 145],
        vec![100; 8],
        vec![0, 0, 300, 1],
    ] {
        for max_poll_records in [1, 7, 50, 1_000] {
            let (read, stalls) = consume_all(&ends, max_poll_records);
            for (partition, offsets) in read.iter().enumerate() {
                let expected: Vec<i64> = (0..ends[partition]).collect();
                assert_eq!(offsets, &expected, "partition {partition}");
            }
            assert_eq!(stalls, 0, "{ends:?} by {max_poll_records}");
        }
    }
}
