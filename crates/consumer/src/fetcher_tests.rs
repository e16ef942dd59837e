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
