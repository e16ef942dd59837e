//! Golden bytes: batches derived by hand from the record batch v2 layout in
//! Kafka's protocol guide (see docs/protocol.md, "Record batch v2"), pinning the builder's
//! output and the decoder's reading of it.
//!
//! The CRCs were computed outside this code base, with a bit-by-bit CRC-32C
//! (reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF)
//! over bytes 21..end, the same function that gives 0xE3069283 for "123456789".

use bytes::Bytes;
use strom_protocol::records::{Compression, RecordBatch, RecordBatchBuilder, TimestampType};

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// One record: timestamp 1000, key "k", value "hello", header "h" = "v".
///
/// Record body (zigzag varints): attributes 00, timestampDelta 0 -> 00,
/// offsetDelta 0 -> 00, keyLength 1 -> 02, "k" 6b, valueLength 5 -> 0a,
/// "hello", headerCount 1 -> 02, header key length 1 -> 02, "h" 68, header
/// value length 1 -> 02, "v" 76: 16 bytes, so the length prefix is 16 -> 0x20.
/// Batch: 61 + 17 = 78 bytes, batchLength 78 - 12 = 66 = 0x42.
const SINGLE_RECORD: &str = "
    0000000000000000  baseOffset 0
    00000042          batchLength 66
    ffffffff          partitionLeaderEpoch -1
    02                magic
    d404bf63          crc
    0000              attributes: none, CreateTime
    00000000          lastOffsetDelta 0
    00000000000003e8  baseTimestamp 1000
    00000000000003e8  maxTimestamp 1000
    ffffffffffffffff  producerId -1
    ffff              producerEpoch -1
    ffffffff          baseSequence -1
    00000001          recordCount 1
    20 00 00 00 02 6b 0a 68656c6c6f 02 02 68 02 76";

/// Transactional producer 5, epoch 1, base sequence 10, leader epoch 3, base
/// offset 100. Record at offset 100, timestamp 2000, key "a", value "x", no
/// headers: 00 00 00 02 61 02 78 00 (8 bytes, prefix 0x10). Record at offset
/// 103 (delta 3 -> 06), timestamp 1990 (delta -10 -> zigzag 19 = 0x13), null
/// key 01, null value 01, one header "k" (02 6b) with null value 01: 9 bytes,
/// prefix 0x12. Batch: 61 + 9 + 10 = 80 bytes, batchLength 68 = 0x44.
const TRANSACTIONAL_WITH_GAP: &str = "
    0000000000000064  baseOffset 100
    00000044          batchLength 68
    00000003          partitionLeaderEpoch 3
    02                magic
    b84340a9          crc
    0010              attributes: transactional
    00000003          lastOffsetDelta 3
    00000000000007d0  baseTimestamp 2000
    00000000000007d0  maxTimestamp 2000
    0000000000000005  producerId 5
    0001              producerEpoch 1
    0000000a          baseSequence 10
    00000002          recordCount 2
    10 00 00 00 02 61 02 78 00
    12 00 13 06 01 01 02 02 6b 01";

fn strip_comments(golden: &str) -> String {
    golden
        .lines()
        .map(|line| {
            // Keep the hex columns only: drop the words after two spaces.
            line.trim()
                .split("  ")
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn crc32c_known_vector() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
}

#[test]
fn builder_writes_single_record_golden() {
    let expected = hex(&strip_comments(SINGLE_RECORD));
    assert_eq!(expected.len(), 78);
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder
        .append(1_000, Some(b"k"), Some(b"hello"), &[(b"h", Some(b"v"))])
        .expect("append");
    let built = builder.build().expect("build");
    assert_eq!(built.as_ref(), expected.as_slice());
}

#[test]
fn builder_writes_transactional_golden_with_offset_gap() {
    let expected = hex(&strip_comments(TRANSACTIONAL_WITH_GAP));
    assert_eq!(expected.len(), 80);
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_base_offset(100)
        .with_partition_leader_epoch(3)
        .with_producer(5, 1, 10)
        .with_transactional(true);
    builder
        .append_with_offset(100, 2_000, Some(b"a"), Some(b"x"), &[])
        .expect("append");
    builder
        .append_with_offset(103, 1_990, None, None, &[(b"k", None)])
        .expect("append");
    let built = builder.build().expect("build");
    assert_eq!(built.as_ref(), expected.as_slice());
}

#[test]
fn golden_batches_decode_to_their_fields() {
    let batch = RecordBatch::parse(Bytes::from(hex(&strip_comments(TRANSACTIONAL_WITH_GAP))))
        .expect("parse");
    batch.validate_crc().expect("crc");
    assert_eq!(batch.crc(), 0xb843_40a9);
    assert!(batch.attributes().is_transactional());
    assert_eq!(
        batch.attributes().timestamp_type(),
        TimestampType::CreateTime
    );
    assert_eq!((batch.base_offset(), batch.last_offset()), (100, 103));
    assert_eq!(batch.last_sequence(), 13);
    let records: Vec<_> = batch
        .records()
        .expect("records")
        .collect::<Result<_, _>>()
        .expect("decode");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].key(), Some(&b"a"[..]));
    assert_eq!(records[0].value(), Some(&b"x"[..]));
    assert_eq!(records[0].size_in_bytes(), 9);
    assert_eq!(records[1].offset(batch.base_offset()), 103);
    assert_eq!(records[1].timestamp(batch.base_timestamp()), 1_990);
    assert!(records[1].key().is_none() && records[1].value().is_none());
    let header = records[1].headers().iter().next().expect("header");
    assert_eq!(header.key_str(), Ok("k"));
    assert_eq!(header.value, None);
    assert_eq!(records[1].size_in_bytes(), 10);

    let single =
        RecordBatch::parse(Bytes::from(hex(&strip_comments(SINGLE_RECORD)))).expect("parse");
    single.validate_crc().expect("crc");
    let record = single
        .records()
        .expect("records")
        .next()
        .expect("one")
        .expect("ok");
    let header = record.headers().iter().next().expect("header");
    assert_eq!((header.key, header.value), (&b"h"[..], Some(&b"v"[..])));
}
