//! The `RecordBatch` view, `BatchHeaderMut` and `RecordBatches` on hand-made inputs.

use bytes::{Bytes, BytesMut};
use strom_protocol::records::{
    BatchHeaderMut, Compression, RecordBatch, RecordBatchBuilder, RecordBatches, RecordError,
    TimestampType,
};

fn sample_batch(base_offset: i64, records: usize) -> Bytes {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_base_offset(base_offset)
        .with_producer(7, 3, 100);
    for index in 0..records {
        let value = format!("value-{index}");
        builder
            .append(
                1_000 + index as i64,
                Some(b"key"),
                Some(value.as_bytes()),
                &[],
            )
            .expect("append");
    }
    builder.build().expect("build")
}

#[test]
fn header_fields_read_back() {
    let batch = RecordBatch::parse(sample_batch(42, 3)).expect("parse");
    batch.validate_crc().expect("crc");
    assert_eq!(batch.base_offset(), 42);
    assert_eq!(batch.batch_length() as usize, batch.size_in_bytes() - 12);
    assert_eq!(batch.partition_leader_epoch(), -1);
    assert_eq!(batch.magic(), 2);
    assert_eq!(batch.attributes().compression(), Compression::None);
    assert_eq!(
        batch.attributes().timestamp_type(),
        TimestampType::CreateTime
    );
    assert_eq!(batch.last_offset_delta(), 2);
    assert_eq!(batch.base_timestamp(), 1_000);
    assert_eq!(batch.max_timestamp(), 1_002);
    assert_eq!(batch.producer_id(), 7);
    assert_eq!(batch.producer_epoch(), 3);
    assert_eq!(batch.base_sequence(), 100);
    assert_eq!(batch.last_sequence(), 102);
    assert_eq!(batch.record_count(), 3);
    assert_eq!(batch.last_offset(), 44);
    assert_eq!(batch.next_offset(), 45);
    assert_eq!(batch.compute_crc(), batch.crc());
}

#[test]
fn last_sequence_wraps_like_kafka() {
    let bytes = RecordBatchBuilder::new(Compression::None)
        .with_producer(1, 0, i32::MAX - 1)
        .build_with(4);
    let batch = RecordBatch::parse(bytes).expect("parse");
    // Sequences i32::MAX - 1, i32::MAX, 0, 1.
    assert_eq!(batch.last_sequence(), 1);
}

trait BuildWith {
    fn build_with(self, records: usize) -> Bytes;
}

impl BuildWith for RecordBatchBuilder {
    fn build_with(mut self, records: usize) -> Bytes {
        for _ in 0..records {
            self.append(5, None, Some(b"v"), &[]).expect("append");
        }
        self.build().expect("build")
    }
}

#[test]
fn parse_rejects_trailing_bytes_and_short_input() {
    let mut bytes = sample_batch(0, 1).to_vec();
    bytes.push(0);
    assert!(matches!(
        RecordBatch::parse(Bytes::from(bytes.clone())),
        Err(RecordError::TrailingBytes { trailing: 1 })
    ));
    bytes.truncate(bytes.len() - 2);
    assert!(matches!(
        RecordBatch::parse(Bytes::from(bytes)),
        Err(RecordError::Truncated { .. })
    ));
}

#[test]
fn legacy_and_unknown_magic_are_typed_errors() {
    for magic in [0u8, 1, 3, 0xff] {
        let mut bytes = sample_batch(0, 1).to_vec();
        bytes[16] = magic;
        let error = RecordBatch::parse(Bytes::from(bytes.clone())).expect_err("magic");
        match magic {
            0 | 1 => {
                assert!(matches!(error, RecordError::LegacyMagic { magic: m } if m as u8 == magic))
            }
            _ => assert!(
                matches!(error, RecordError::UnsupportedMagic { magic: m } if m as u8 == magic)
            ),
        }
        let mut batches = RecordBatches::new(Bytes::from(bytes));
        assert!(batches.next().expect("one item").is_err());
        assert!(batches.next().is_none());
    }
}

#[test]
fn setters_change_one_field_and_keep_the_crc_valid() {
    let original = sample_batch(0, 3);
    let mut buffer = BytesMut::from(&original[..]);
    {
        let mut header = BatchHeaderMut::new(&mut buffer).expect("header");
        header.set_base_offset(1_234_567);
        header.set_partition_leader_epoch(9);
    }
    let edited = RecordBatch::parse(buffer.clone().freeze()).expect("parse");
    edited.validate_crc().expect("crc still valid");
    assert_eq!(edited.base_offset(), 1_234_567);
    assert_eq!(edited.partition_leader_epoch(), 9);
    assert_eq!(buffer[16..], original[16..]);

    {
        let mut header = BatchHeaderMut::new(&mut buffer).expect("header");
        header.set_max_timestamp(TimestampType::LogAppendTime, 99_999);
        assert_eq!(header.compute_crc(), header.crc());
    }
    let edited = RecordBatch::parse(buffer.freeze()).expect("parse");
    edited.validate_crc().expect("crc recomputed");
    assert_eq!(edited.max_timestamp(), 99_999);
    assert_eq!(
        edited.attributes().timestamp_type(),
        TimestampType::LogAppendTime
    );
    let first = edited
        .records()
        .expect("records")
        .next()
        .expect("one")
        .expect("ok");
    assert_eq!(edited.record_timestamp(&first), 99_999);
    assert_eq!(first.timestamp(edited.base_timestamp()), 1_000);
}

#[test]
fn batches_iterates_concatenation_and_reports_truncated_tail() {
    let mut buffer = Vec::new();
    for (base_offset, count) in [(0, 2), (2, 5), (7, 1)] {
        buffer.extend_from_slice(&sample_batch(base_offset, count));
    }
    let whole = buffer.len();
    let tail = sample_batch(8, 2);
    buffer.extend_from_slice(&tail[..tail.len() - 3]);
    let mut batches = RecordBatches::new(Bytes::from(buffer));
    let offsets: Vec<(i64, i64)> = batches
        .by_ref()
        .map(|batch| {
            let batch = batch.expect("batch");
            batch.validate_crc().expect("crc");
            (batch.base_offset(), batch.last_offset())
        })
        .collect();
    assert_eq!(offsets, vec![(0, 1), (2, 6), (7, 7)]);
    assert_eq!(batches.position(), whole);
    assert_eq!(batches.truncated_tail(), tail.len() - 3);
}

#[test]
fn a_flipped_byte_fails_the_crc() {
    let mut bytes = sample_batch(0, 2).to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let batch = RecordBatch::parse(Bytes::from(bytes)).expect("parse");
    assert!(matches!(
        batch.validate_crc(),
        Err(RecordError::CrcMismatch { expected, computed }) if expected != computed
    ));
}

#[test]
fn set_producer_restamps_and_keeps_crc_valid() {
    let original = sample_batch(0, 3);
    let mut buffer = BytesMut::from(&original[..]);
    {
        let mut header = BatchHeaderMut::new(&mut buffer).expect("header");
        header.set_producer(4_000_000_001, 12, 77);
        assert_eq!(header.compute_crc(), header.crc());
    }
    let edited = RecordBatch::parse(buffer.freeze()).expect("parse");
    edited.validate_crc().expect("crc recomputed");
    assert_eq!(edited.producer_id(), 4_000_000_001);
    assert_eq!(edited.producer_epoch(), 12);
    assert_eq!(edited.base_sequence(), 77);
    assert_eq!(edited.last_sequence(), 79);
    assert_ne!(
        edited.crc(),
        RecordBatch::parse(original).expect("parse").crc()
    );
}
