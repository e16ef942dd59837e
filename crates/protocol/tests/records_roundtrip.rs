//! Property tests: build -> parse -> validate_crc -> records() gives back the input,
//! for every codec and attribute combination.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use strom_protocol::records::{
    BatchHeaderMut, Compression, Record, RecordBatch, RecordBatchBuilder, RecordBatches,
    TimestampType,
};

#[derive(Debug, Clone)]
struct RecordInput {
    offset_gap: i64,
    timestamp_ms: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone)]
struct BatchInput {
    compression: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer: (i64, i16, i32),
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    explicit_offsets: bool,
    records: Vec<RecordInput>,
}

fn payload() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => Just(None),
        3 => Just(Some(Vec::new())),
        10 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(Some),
        // Repetitive and large: crosses snappy's 32 KiB chunks and lz4's 64 KiB blocks.
        1 => (any::<u8>(), 30_000usize..70_000).prop_map(|(byte, length)| Some(vec![byte; length])),
        1 => proptest::collection::vec(any::<u8>(), 1_000..5_000).prop_map(Some),
    ]
}

fn timestamp() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 1_500_000_000_000i64..1_800_000_000_000,
        1 => any::<i64>(),
        1 => -5i64..5,
    ]
}

fn record_input() -> impl Strategy<Value = RecordInput> {
    let header = (
        proptest::collection::vec(any::<u8>(), 0..12),
        prop_oneof![
            Just(None),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Some)
        ],
    );
    (
        1i64..1_000,
        timestamp(),
        payload(),
        payload(),
        proptest::collection::vec(header, 0..4),
    )
        .prop_map(
            |(offset_gap, timestamp_ms, key, value, headers)| RecordInput {
                offset_gap,
                timestamp_ms,
                key,
                value,
                headers,
            },
        )
}

fn compression() -> impl Strategy<Value = Compression> {
    proptest::sample::select(Compression::ALL.to_vec())
}

fn batch_input() -> impl Strategy<Value = BatchInput> {
    (
        compression(),
        0i64..(1 << 40),
        -1i32..1_000,
        prop_oneof![
            Just((-1i64, -1i16, -1i32)),
            (0i64..1 << 50, 0i16..100, 0i32..i32::MAX)
        ],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(None), timestamp().prop_map(Some)],
        any::<bool>(),
        proptest::collection::vec(record_input(), 1..40),
    )
        .prop_map(
            |(
                compression,
                base_offset,
                partition_leader_epoch,
                producer,
                transactional,
                control,
                log_append_time,
                explicit_offsets,
                records,
            )| BatchInput {
                compression,
                base_offset,
                partition_leader_epoch,
                producer,
                transactional,
                control,
                log_append_time,
                explicit_offsets,
                records,
            },
        )
}

/// The offsets the records of `input` get.
fn expected_offsets(input: &BatchInput) -> Vec<i64> {
    let mut offset = input.base_offset;
    input
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| {
            if index > 0 {
                offset += if input.explicit_offsets {
                    record.offset_gap
                } else {
                    1
                };
            }
            offset
        })
        .collect()
}

fn build(input: &BatchInput) -> (Bytes, usize) {
    let (producer_id, producer_epoch, base_sequence) = input.producer;
    let mut builder = RecordBatchBuilder::new(input.compression)
        .with_base_offset(input.base_offset)
        .with_partition_leader_epoch(input.partition_leader_epoch)
        .with_producer(producer_id, producer_epoch, base_sequence)
        .with_transactional(input.transactional)
        .with_control(input.control);
    if let Some(log_append_time) = input.log_append_time {
        builder = builder.with_log_append_time(log_append_time);
    }
    for (record, offset) in input.records.iter().zip(expected_offsets(input)) {
        let headers: Vec<(&[u8], Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
            .collect();
        let assigned = if input.explicit_offsets {
            builder.append_with_offset(
                offset,
                record.timestamp_ms,
                record.key.as_deref(),
                record.value.as_deref(),
                &headers,
            )
        } else {
            builder.append(
                record.timestamp_ms,
                record.key.as_deref(),
                record.value.as_deref(),
                &headers,
            )
        };
        assert_eq!(assigned.expect("append"), offset);
    }
    assert_eq!(builder.len(), input.records.len());
    assert!(!builder.is_empty());
    let estimate = builder.estimated_size_in_bytes();
    (builder.build().expect("build"), estimate)
}

fn check_record(
    batch: &RecordBatch,
    record: &Record,
    input: &RecordInput,
    offset: i64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(record.offset(batch.base_offset()), offset);
    prop_assert_eq!(record.timestamp(batch.base_timestamp()), input.timestamp_ms);
    prop_assert_eq!(record.key().map(|key| key.to_vec()), input.key.clone());
    prop_assert_eq!(
        record.value().map(|value| value.to_vec()),
        input.value.clone()
    );
    prop_assert_eq!(record.headers().len(), input.headers.len());
    let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = record
        .headers()
        .iter()
        .map(|header| {
            (
                header.key.to_vec(),
                header.value.map(|value| value.to_vec()),
            )
        })
        .collect();
    prop_assert_eq!(&headers, &input.headers);
    Ok(())
}

fn check_header(batch: &RecordBatch, input: &BatchInput) -> Result<(), TestCaseError> {
    let offsets = expected_offsets(input);
    let last_offset = *offsets.last().expect("records");
    prop_assert_eq!(batch.base_offset(), input.base_offset);
    prop_assert_eq!(batch.last_offset(), last_offset);
    prop_assert_eq!(batch.next_offset(), last_offset + 1);
    prop_assert_eq!(batch.record_count() as usize, input.records.len());
    prop_assert_eq!(batch.partition_leader_epoch(), input.partition_leader_epoch);
    prop_assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        input.producer
    );
    let attributes = batch.attributes();
    prop_assert_eq!(attributes.compression(), input.compression);
    prop_assert_eq!(attributes.is_transactional(), input.transactional);
    prop_assert_eq!(attributes.is_control(), input.control);
    prop_assert_eq!(batch.base_timestamp(), input.records[0].timestamp_ms);
    let max_timestamp = match input.log_append_time {
        Some(log_append_time) => {
            prop_assert_eq!(attributes.timestamp_type(), TimestampType::LogAppendTime);
            log_append_time
        }
        None => {
            prop_assert_eq!(attributes.timestamp_type(), TimestampType::CreateTime);
            // Java's builder starts the max at -1 (NO_TIMESTAMP).
            input
                .records
                .iter()
                .map(|record| record.timestamp_ms)
                .fold(-1, i64::max)
        }
    };
    prop_assert_eq!(batch.max_timestamp(), max_timestamp);
    Ok(())
}

fn check_round_trip(input: &BatchInput) -> Result<Bytes, TestCaseError> {
    let (bytes, estimate) = build(input);
    let batch = RecordBatch::parse(bytes.clone()).expect("parse");
    prop_assert!(batch.validate_crc().is_ok());
    prop_assert_eq!(batch.size_in_bytes(), bytes.len());
    prop_assert_eq!(batch.batch_length() as usize + 12, bytes.len());
    if input.compression == Compression::None {
        prop_assert_eq!(estimate, bytes.len());
    }
    check_header(&batch, input)?;
    let offsets = expected_offsets(input);
    let mut records_bytes = 0;
    let mut count = 0;
    for (index, record) in batch.records().expect("records").enumerate() {
        let record = record.expect("record");
        prop_assert!(index < input.records.len());
        check_record(&batch, &record, &input.records[index], offsets[index])?;
        records_bytes += record.size_in_bytes();
        count += 1;
    }
    prop_assert_eq!(count, input.records.len());
    // The records' sizes add up to the uncompressed payload: the estimate minus the header.
    prop_assert_eq!(records_bytes, estimate - RecordBatch::HEADER_SIZE);
    Ok(bytes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn build_parse_iterate_round_trip(input in batch_input()) {
        check_round_trip(&input)?;
    }

    #[test]
    fn concatenated_batches_iterate_in_order(inputs in proptest::collection::vec(batch_input(), 1..5)) {
        let mut buffer = Vec::new();
        let mut sizes = Vec::new();
        for input in &inputs {
            let bytes = check_round_trip(input)?;
            sizes.push(bytes.len());
            buffer.extend_from_slice(&bytes);
        }
        let mut batches = RecordBatches::new(Bytes::from(buffer));
        let mut seen = 0;
        for (batch, (input, size)) in batches.by_ref().zip(inputs.iter().zip(&sizes)) {
            let batch = batch.expect("batch");
            prop_assert!(batch.validate_crc().is_ok());
            prop_assert_eq!(batch.size_in_bytes(), *size);
            prop_assert_eq!(batch.base_offset(), input.base_offset);
            prop_assert_eq!(batch.records().expect("records").count(), input.records.len());
            seen += 1;
        }
        prop_assert_eq!(seen, inputs.len());
        prop_assert!(batches.next().is_none());
        prop_assert_eq!(batches.truncated_tail(), 0);
        prop_assert_eq!(batches.position(), sizes.iter().sum::<usize>());
    }

    #[test]
    fn setters_keep_crc_and_change_only_their_field(
        input in batch_input(),
        base_offset in any::<i64>(),
        partition_leader_epoch in any::<i32>(),
        log_append_time in any::<bool>(),
        max_timestamp in any::<i64>(),
    ) {
        let (bytes, _) = build(&input);
        let mut buffer = BytesMut::from(&bytes[..]);
        BatchHeaderMut::new(&mut buffer).expect("header").set_base_offset(base_offset);
        prop_assert_eq!(&buffer[..8], &base_offset.to_be_bytes()[..]);
        prop_assert_eq!(&buffer[8..], &bytes[8..]);

        BatchHeaderMut::new(&mut buffer).expect("header").set_partition_leader_epoch(partition_leader_epoch);
        prop_assert_eq!(&buffer[12..16], &partition_leader_epoch.to_be_bytes()[..]);
        prop_assert_eq!(&buffer[16..], &bytes[16..]);
        prop_assert!(RecordBatch::parse(buffer.clone().freeze()).expect("parse").validate_crc().is_ok());

        let timestamp_type = if log_append_time { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
        BatchHeaderMut::new(&mut buffer).expect("header").set_max_timestamp(timestamp_type, max_timestamp);
        let edited = RecordBatch::parse(buffer.clone().freeze()).expect("parse");
        prop_assert!(edited.validate_crc().is_ok());
        prop_assert_eq!(edited.max_timestamp(), max_timestamp);
        prop_assert_eq!(edited.attributes().timestamp_type(), timestamp_type);
        prop_assert_eq!(edited.attributes().compression(), input.compression);
        prop_assert_eq!(edited.attributes().is_transactional(), input.transactional);
        // Outside attributes (21..23), the CRC (17..21) and max timestamp (35..43) nothing changed.
        prop_assert_eq!(&buffer[16..17], &bytes[16..17]);
        prop_assert_eq!(&buffer[23..35], &bytes[23..35]);
        prop_assert_eq!(&buffer[43..], &bytes[43..]);
    }
}
