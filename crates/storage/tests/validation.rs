//! The leader's checks of produced batches (Kafka's `LogValidator`) and the
//! conversion to the topic's `compression.type`, on hand-built batches: each
//! refusal carries its typed error and stores nothing.

use crate::common;

use bytes::{BufMut, Bytes, BytesMut};
use common::{open, partition_dir, small_config};
use strom_protocol::records::compression::compress;
use strom_protocol::records::varint::{write_varint, write_varlong};
use strom_protocol::records::{
    BatchAttributes, Compression, RecordBatch, RecordBatchBuilder, RecordError, TimestampType,
};
use strom_storage::config::{CleanupPolicy, CompressionType, MessageTimestampType};
use strom_storage::error::{AppendError, ClientBatchRule, RefusalReason};
use strom_storage::{Log, LogConfig};

const NOW_MS: i64 = 1_700_000_000_000;

/// One encoded record: `offset_delta`, a timestamp delta, an optional key.
fn raw_record(offset_delta: i32, timestamp_delta: i64, key: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![0u8];
    write_varlong(&mut body, timestamp_delta);
    write_varint(&mut body, offset_delta);
    match key {
        Some(key) => {
            write_varint(&mut body, key.len() as i32);
            body.extend_from_slice(key);
        }
        None => write_varint(&mut body, -1),
    }
    write_varint(&mut body, 5);
    body.extend_from_slice(b"value");
    write_varint(&mut body, 0);
    let mut out = Vec::new();
    write_varint(&mut out, body.len() as i32);
    out.extend_from_slice(&body);
    out
}

/// Header fields of a hand-built batch.
struct Spec {
    codec: Compression,
    record_count: i32,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    attributes_extra: i16,
}

impl Spec {
    fn new(codec: Compression, records: i32) -> Spec {
        Spec {
            codec,
            record_count: records,
            last_offset_delta: records - 1,
            base_timestamp: NOW_MS,
            max_timestamp: NOW_MS,
            attributes_extra: 0,
        }
    }
}

/// A batch around already-encoded records, compressed by `spec.codec`,
/// with a correct CRC whatever the records hold.
fn hand_built(spec: &Spec, records: &[u8]) -> Bytes {
    let payload = compress(spec.codec, records).expect("compress");
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((61 - 12 + payload.len()) as i32);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(BatchAttributes::new(spec.codec).bits() | spec.attributes_extra);
    out.put_i32(spec.last_offset_delta);
    out.put_i64(spec.base_timestamp);
    out.put_i64(spec.max_timestamp);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(spec.record_count);
    out.extend_from_slice(&payload);
    let crc = strom_protocol::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// `count` well-formed records, keyed, timestamps `NOW_MS + index`.
fn records(count: i32) -> Vec<u8> {
    (0..count)
        .flat_map(|index| raw_record(index, i64::from(index), Some(b"key")))
        .collect()
}

fn log_with(config: LogConfig) -> (tempfile::TempDir, Log) {
    let root = tempfile::tempdir().expect("tempdir");
    let log = open(&partition_dir(root.path()), &config, true, 0);
    (root, log)
}

/// Appends `batch` and expects a refusal; checks nothing was stored.
fn refused(log: &mut Log, batch: Bytes) -> AppendError {
    let end_before = log.log_end_offset();
    let size_before = log.size_bytes();
    let error = log
        .append_as_leader(batch, 0, NOW_MS)
        .expect_err("the batch must be refused");
    assert_eq!(log.log_end_offset(), end_before, "log end moved: {error}");
    assert_eq!(log.size_bytes(), size_before, "bytes were written: {error}");
    error
}

/// The stored batches from offset 0, parsed (one read per segment).
fn stored(log: &Log) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let info = log
            .read(offset, 1 << 20, log.log_end_offset(), true)
            .expect("read");
        let slice = info.records.expect("records");
        let bytes = slice.to_bytes().expect("bytes");
        batches.extend(
            strom_protocol::records::RecordBatches::new(bytes)
                .map(|batch| batch.expect("stored batch parses")),
        );
        offset = slice.next_offset();
    }
    batches
}

#[test]
fn a_record_count_that_disagrees_with_the_offset_range_is_refused() {
    let (_root, mut log) = log_with(small_config());
    let mut spec = Spec::new(Compression::None, 3);
    spec.record_count = 2;
    let error = refused(&mut log, hand_built(&spec, &records(3)));
    assert!(matches!(
        error,
        AppendError::InvalidClientBatch {
            rule: ClientBatchRule::RecordCountMismatch {
                record_count: 2,
                last_offset_delta: 2
            },
            ..
        }
    ));
}

#[test]
fn records_fewer_or_more_than_declared_are_refused_in_every_codec() {
    for codec in Compression::ALL {
        let (_root, mut log) = log_with(small_config());
        let error = refused(&mut log, hand_built(&Spec::new(codec, 4), &records(3)));
        assert!(
            matches!(
                error,
                AppendError::MalformedRecords {
                    source: RecordError::RecordCountMismatch {
                        declared: 4,
                        found: 3
                    },
                    ..
                }
            ),
            "{codec}: {error:?}"
        );
        let error = refused(&mut log, hand_built(&Spec::new(codec, 2), &records(3)));
        assert!(
            matches!(
                error,
                AppendError::MalformedRecords {
                    source: RecordError::TrailingRecordBytes { .. },
                    ..
                }
            ),
            "{codec}: {error:?}"
        );
    }
}

#[test]
fn offset_deltas_out_of_order_are_refused_in_every_codec() {
    for codec in Compression::ALL {
        let (_root, mut log) = log_with(small_config());
        let mut data = raw_record(0, 0, Some(b"a"));
        data.extend(raw_record(2, 0, Some(b"b")));
        data.extend(raw_record(1, 0, Some(b"c")));
        let error = refused(&mut log, hand_built(&Spec::new(codec, 3), &data));
        assert!(
            matches!(
                error,
                AppendError::MalformedRecords {
                    source: RecordError::OffsetDeltaMismatch {
                        batch_index: 1,
                        offset_delta: 2
                    },
                    ..
                }
            ),
            "{codec}: {error:?}"
        );
    }
}

#[test]
fn truncated_and_overlong_varints_inside_records_are_refused_in_every_codec() {
    for codec in Compression::ALL {
        let (_root, mut log) = log_with(small_config());
        // The second record's length says more bytes than follow.
        let mut data = records(1);
        let mut cut = raw_record(1, 1, Some(b"key"));
        cut.truncate(cut.len() - 3);
        data.extend(cut);
        let error = refused(&mut log, hand_built(&Spec::new(codec, 2), &data));
        assert!(
            matches!(
                error,
                AppendError::MalformedRecords {
                    source: RecordError::RecordTruncated { .. },
                    ..
                }
            ),
            "{codec}: {error:?}"
        );
        // A record length of six continuation bytes.
        let mut data = records(1);
        data.extend([0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        let error = refused(&mut log, hand_built(&Spec::new(codec, 2), &data));
        assert!(
            matches!(
                error,
                AppendError::MalformedRecords {
                    source: RecordError::VarintTooLong { .. },
                    ..
                }
            ),
            "{codec}: {error:?}"
        );
    }
}

#[test]
fn compressed_data_that_does_not_decompress_is_refused() {
    let (_root, mut log) = log_with(small_config());
    let mut batch = BytesMut::from(&hand_built(&Spec::new(Compression::Gzip, 3), &records(3))[..]);
    for byte in batch[61 + 10..].iter_mut() {
        *byte = 0x5a;
    }
    let crc = strom_protocol::crc::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let error = refused(&mut log, batch.freeze());
    assert!(
        matches!(
            error,
            AppendError::MalformedRecords {
                source: RecordError::Decompression { .. },
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn clients_may_not_write_control_batches() {
    let (_root, mut log) = log_with(small_config());
    let mut spec = Spec::new(Compression::None, 1);
    spec.attributes_extra = BatchAttributes::CONTROL_BIT;
    let error = refused(&mut log, hand_built(&spec, &records(1)));
    assert!(matches!(
        error,
        AppendError::InvalidClientBatch {
            rule: ClientBatchRule::ControlBatch,
            ..
        }
    ));
}

fn compacted() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        ..small_config()
    }
}

#[test]
fn compacted_topics_refuse_records_without_a_key_and_name_each() {
    for codec in Compression::ALL {
        let (_root, mut log) = log_with(compacted());
        let mut data = raw_record(0, 0, Some(b"a"));
        data.extend(raw_record(1, 0, None));
        data.extend(raw_record(2, 0, Some(b"")));
        data.extend(raw_record(3, 0, None));
        let error = refused(&mut log, hand_built(&Spec::new(codec, 4), &data));
        let AppendError::RecordsRefused { refusals } = error else {
            panic!("{codec}: {error:?}");
        };
        let named: Vec<(i32, RefusalReason)> = refusals
            .iter()
            .map(|refusal| (refusal.batch_index, refusal.reason))
            .collect();
        assert_eq!(
            named,
            vec![
                (1, RefusalReason::MissingKey),
                (3, RefusalReason::MissingKey)
            ],
            "{codec}"
        );
        // Keyed records (an empty key is a key) are stored.
        let keyed = hand_built(&Spec::new(codec, 3), &records(3));
        log.append_as_leader(keyed, 0, NOW_MS)
            .expect("keyed records");
        assert_eq!(log.log_end_offset(), 3);
    }
}

#[test]
fn timestamps_outside_the_bounds_are_refused() {
    let config = LogConfig {
        message_timestamp_before_max_ms: Some(1_000),
        message_timestamp_after_max_ms: Some(500),
        ..small_config()
    };
    let (_root, mut log) = log_with(config);
    let mut spec = Spec::new(Compression::Lz4, 3);
    spec.base_timestamp = NOW_MS - 1_000;
    // Deltas 0 (at the lower bound), 1_501 (past the upper one), 1_500 (at it).
    let mut data = raw_record(0, 0, Some(b"a"));
    data.extend(raw_record(1, 1_501, Some(b"b")));
    data.extend(raw_record(2, 1_500, Some(b"c")));
    let error = refused(&mut log, hand_built(&spec, &data));
    let AppendError::RecordsRefused { refusals } = error else {
        panic!("{error:?}");
    };
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].batch_index, 1);
    assert_eq!(
        refusals[0].reason,
        RefusalReason::TimestampOutOfRange {
            timestamp: NOW_MS + 501,
            earliest: NOW_MS - 1_000,
            latest: NOW_MS + 500
        }
    );
    spec.base_timestamp = NOW_MS - 1_001;
    let error = refused(&mut log, hand_built(&spec, &records(3)));
    assert!(matches!(error, AppendError::RecordsRefused { .. }));
    spec.base_timestamp = NOW_MS - 1_000;
    log.append_as_leader(hand_built(&spec, &records(3)), 0, NOW_MS)
        .expect("within bounds");
}

#[test]
fn the_deprecated_difference_bounds_both_sides_when_the_others_are_unset() {
    let config = LogConfig {
        message_timestamp_difference_max_ms: Some(100),
        ..small_config()
    };
    let (_root, mut log) = log_with(config);
    for base_timestamp in [NOW_MS - 101, NOW_MS + 101] {
        let mut spec = Spec::new(Compression::None, 1);
        spec.base_timestamp = base_timestamp;
        let error = refused(&mut log, hand_built(&spec, &records(1)));
        assert!(matches!(error, AppendError::RecordsRefused { .. }));
    }
}

#[test]
fn log_append_time_topics_refuse_producer_log_append_time_and_stamp_the_rest() {
    let config = LogConfig {
        message_timestamp_type: MessageTimestampType::LogAppendTime,
        message_timestamp_before_max_ms: Some(1),
        ..small_config()
    };
    let (_root, mut log) = log_with(config);
    let mut spec = Spec::new(Compression::None, 2);
    spec.attributes_extra = BatchAttributes::TIMESTAMP_TYPE_BIT;
    let error = refused(&mut log, hand_built(&spec, &records(2)));
    let AppendError::RecordsRefused { refusals } = error else {
        panic!("{error:?}");
    };
    assert!(refusals
        .iter()
        .all(|refusal| refusal.reason == RefusalReason::LogAppendTimeFromProducer));
    // Old CreateTime timestamps are not bounded on a LogAppendTime topic.
    let mut old = Spec::new(Compression::None, 2);
    old.base_timestamp = 5;
    let info = log
        .append_as_leader(hand_built(&old, &records(2)), 0, NOW_MS)
        .expect("stamped");
    assert_eq!(info.log_append_time_ms, Some(NOW_MS));
    let batch = &stored(&log)[0];
    batch.validate_crc().expect("valid CRC");
    assert_eq!(
        batch.attributes().timestamp_type(),
        TimestampType::LogAppendTime
    );
    assert_eq!(batch.max_timestamp(), NOW_MS);
}

#[test]
fn a_wrong_max_timestamp_is_replaced_by_the_records_largest() {
    let (_root, mut log) = log_with(small_config());
    let mut spec = Spec::new(Compression::None, 3);
    spec.max_timestamp = NOW_MS + 99;
    let info = log
        .append_as_leader(hand_built(&spec, &records(3)), 0, NOW_MS)
        .expect("append");
    assert_eq!(info.max_timestamp, NOW_MS + 2);
    let batch = &stored(&log)[0];
    batch.validate_crc().expect("CRC rebuilt");
    assert_eq!(batch.max_timestamp(), NOW_MS + 2);
}

/// A batch as a producer builds it, with keys, values and headers.
fn producer_batch(codec: Compression, count: i64) -> Bytes {
    let mut builder = RecordBatchBuilder::new(codec);
    for index in 0..count {
        let key = format!("key-{index}");
        let value = format!("value-{index}-{}", "x".repeat(index as usize % 50));
        builder
            .append(
                NOW_MS + index,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &[(b"h".as_slice(), Some(b"v".as_slice()))],
            )
            .expect("append");
    }
    builder.build().expect("build")
}

fn compression_type(codec: Compression) -> CompressionType {
    match codec {
        Compression::None => CompressionType::Uncompressed,
        Compression::Gzip => CompressionType::Gzip,
        Compression::Snappy => CompressionType::Snappy,
        Compression::Lz4 => CompressionType::Lz4,
        Compression::Zstd => CompressionType::Zstd,
    }
}

#[test]
fn compression_type_converts_every_codec_to_every_other() {
    for source in Compression::ALL {
        for target in Compression::ALL {
            let config = LogConfig {
                compression_type: compression_type(target),
                segment_bytes: 1 << 20,
                ..small_config()
            };
            let (_root, mut log) = log_with(config);
            log.append_as_leader(producer_batch(source, 5), 3, NOW_MS)
                .expect("first append");
            let info = log
                .append_as_leader(producer_batch(source, 40), 3, NOW_MS)
                .expect("append");
            assert_eq!((info.first_offset, info.last_offset), (5, 44));
            let batches = stored(&log);
            assert_eq!(batches.len(), 2);
            let expected =
                RecordBatch::parse(producer_batch(Compression::None, 40)).expect("parse");
            let batch = &batches[1];
            batch.validate_crc().expect("valid CRC");
            assert_eq!(
                batch.attributes().compression(),
                target,
                "{source} -> {target}"
            );
            assert_eq!(
                (batch.base_offset(), batch.partition_leader_epoch()),
                (5, 3)
            );
            assert_eq!(batch.record_count(), 40);
            assert_eq!(batch.max_timestamp(), NOW_MS + 39);
            let read: Vec<_> = batch
                .records()
                .expect("records")
                .map(|r| r.expect("record"))
                .collect();
            let original: Vec<_> = expected
                .records()
                .expect("records")
                .map(|r| r.expect("record"))
                .collect();
            assert_eq!(read, original, "{source} -> {target}");
        }
    }
}

#[test]
fn producer_compression_keeps_the_producers_bytes() {
    for codec in Compression::ALL {
        let (_root, mut log) = log_with(small_config());
        let batch = producer_batch(codec, 10);
        log.append_as_leader(batch.clone(), 0, NOW_MS)
            .expect("append");
        let stored = stored(&log);
        // Only the base offset and leader epoch (outside the CRC) differ.
        assert_eq!(stored[0].as_bytes()[16..], batch[16..], "{codec}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn codec() -> impl Strategy<Value = Compression> {
        prop::sample::select(Compression::ALL.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// On a compacted topic a batch is stored whole when every record
        /// has a key, else refused with exactly the keyless records named
        /// and nothing stored; whatever the codecs.
        #[test]
        fn a_compacted_topic_stores_all_or_names_every_keyless_record(
            keys in prop::collection::vec(any::<bool>(), 1..40),
            source in codec(),
            target in codec(),
        ) {
            let config = LogConfig {
                compression_type: compression_type(target),
                segment_bytes: 1 << 20,
                ..compacted()
            };
            let (_root, mut log) = log_with(config);
            let data: Vec<u8> = keys
                .iter()
                .enumerate()
                .flat_map(|(index, keyed)| {
                    raw_record(index as i32, index as i64, keyed.then_some(b"k".as_slice()))
                })
                .collect();
            let batch = hand_built(&Spec::new(source, keys.len() as i32), &data);
            let keyless: Vec<i32> = keys
                .iter()
                .enumerate()
                .filter(|(_, keyed)| !**keyed)
                .map(|(index, _)| index as i32)
                .collect();
            match log.append_as_leader(batch, 0, NOW_MS) {
                Ok(info) => {
                    prop_assert!(keyless.is_empty());
                    prop_assert_eq!(info.last_offset + 1, keys.len() as i64);
                    let stored = stored(&log);
                    prop_assert_eq!(stored[0].attributes().compression(), target);
                    prop_assert!(stored[0].validate_crc().is_ok());
                    prop_assert_eq!(stored[0].records().expect("records").count(), keys.len());
                }
                Err(AppendError::RecordsRefused { refusals }) => {
                    let named: Vec<i32> = refusals.iter().map(|refusal| refusal.batch_index).collect();
                    prop_assert_eq!(named, keyless);
                    prop_assert_eq!(log.log_end_offset(), 0);
                    prop_assert_eq!(log.size_bytes(), 0);
                }
                Err(other) => prop_assert!(false, "unexpected refusal {other}"),
            }
        }

        /// Any single byte flipped in the records of a batch (CRC fixed up)
        /// is stored whole or refused with nothing stored, never a panic.
        #[test]
        fn a_flipped_record_byte_is_refused_or_stored_whole(
            count in 1i32..10,
            source in codec(),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let (_root, mut log) = log_with(small_config());
            let mut batch = BytesMut::from(&hand_built(&Spec::new(source, count), &records(count))[..]);
            let position = 61 + at.index(batch.len() - 61);
            batch[position] ^= flip;
            let crc = strom_protocol::crc::crc32c(&batch[21..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            match log.append_as_leader(batch.freeze(), 0, NOW_MS) {
                Ok(info) => prop_assert_eq!(log.log_end_offset(), info.last_offset + 1),
                Err(_) => {
                    prop_assert_eq!(log.log_end_offset(), 0);
                    prop_assert_eq!(log.size_bytes(), 0);
                }
            }
        }
    }
}
