use super::*;
use crate::batch::validate_batch_at;

fn marker(kind: MarkerKind) -> TransactionMarker {
    TransactionMarker {
        bumps_epoch: false,
        producer_id: 4242,
        producer_epoch: 7,
        coordinator_epoch: 3,
        kind,
    }
}

/// The bytes Kafka's `MemoryRecords.withEndTransactionMarker` writes,
/// assembled field by field.
fn expected_batch(type_id: i16, now_ms: i64) -> Vec<u8> {
    let mut record = vec![0u8, 0, 0]; // attributes, timestamp delta, offset delta
    record.push(8); // key length 4, zig-zag
    record.extend_from_slice(&[0, 0]);
    record.extend_from_slice(&type_id.to_be_bytes());
    record.push(12); // value length 6, zig-zag
    record.extend_from_slice(&[0, 0, 0, 0, 0, 3]);
    record.push(0); // no headers
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&((61 - 12 + 1 + record.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.push(2);
    batch.extend_from_slice(&[0; 4]);
    batch.extend_from_slice(&0x30i16.to_be_bytes()); // transactional | control
    batch.extend_from_slice(&0i32.to_be_bytes());
    batch.extend_from_slice(&now_ms.to_be_bytes());
    batch.extend_from_slice(&now_ms.to_be_bytes());
    batch.extend_from_slice(&4242i64.to_be_bytes());
    batch.extend_from_slice(&7i16.to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.extend_from_slice(&1i32.to_be_bytes());
    batch.push((record.len() as u8) << 1);
    batch.extend_from_slice(&record);
    let crc = strom_protocol::crc::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn marker_batches_are_kafkas_bytes() {
    for (kind, type_id) in [(MarkerKind::Abort, 0), (MarkerKind::Commit, 1)] {
        let built = build_marker_batch(&marker(kind), 1_700_000_000_000).expect("build");
        assert_eq!(
            built.as_ref(),
            &expected_batch(type_id, 1_700_000_000_000)[..]
        );
        let header = validate_batch_at(&built, 0).expect("valid batch");
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(header.base_sequence, -1);
        assert_eq!(
            marker_of_control_batch(built).expect("marker"),
            ControlMarker {
                kind,
                coordinator_epoch: 3
            }
        );
    }
}

#[test]
fn control_records_parse() {
    let key = control_record_key(MarkerKind::Commit);
    let value = marker_value(-1);
    assert_eq!(
        parse_control_record(&key, &value).expect("commit"),
        ControlMarker {
            kind: MarkerKind::Commit,
            coordinator_epoch: -1
        }
    );
    // A later version is read by its version-0 prefix.
    let newer_value = [0, 1, 0, 0, 0, 9, 0xff];
    let newer_key = [0, 1, 0, 0];
    assert_eq!(
        parse_control_record(&newer_key, &newer_value).expect("abort"),
        ControlMarker {
            kind: MarkerKind::Abort,
            coordinator_epoch: 9
        }
    );
}

#[test]
fn bad_control_records_are_refused() {
    let value = marker_value(0);
    assert!(matches!(
        parse_control_record(&[0, 0, 0], &value),
        Err(ControlRecordError::KeyTooShort { length: 3 })
    ));
    assert!(matches!(
        parse_control_record(&[], &value),
        Err(ControlRecordError::KeyTooShort { length: 0 })
    ));
    assert!(matches!(
        parse_control_record(&[0xff, 0xff, 0, 1], &value),
        Err(ControlRecordError::InvalidKeyVersion { version: -1 })
    ));
    // Type 2 is KRaft's leader change record, not a transaction marker.
    assert!(matches!(
        parse_control_record(&[0, 0, 0, 2], &value),
        Err(ControlRecordError::UnknownType { type_id: 2 })
    ));
    let key = control_record_key(MarkerKind::Abort);
    assert!(matches!(
        parse_control_record(&key, &[0, 0, 0, 0, 1]),
        Err(ControlRecordError::ValueTooShort { length: 5 })
    ));
    assert!(matches!(
        parse_control_record(&key, &[0x80, 0, 0, 0, 0, 1]),
        Err(ControlRecordError::InvalidValueVersion { .. })
    ));
}

#[test]
fn control_batches_without_a_marker_are_refused() {
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(1, 0, -1)
        .with_transactional(true)
        .with_control(true);
    builder
        .append(0, Some(&[0, 0, 0, 5]), Some(&marker_value(0)), &[])
        .expect("append");
    let unknown = builder.build().expect("build");
    assert!(matches!(
        marker_of_control_batch(unknown),
        Err(ControlRecordError::UnknownType { type_id: 5 })
    ));
    let huge = Bytes::from(vec![0u8; MAX_MARKER_BATCH_BYTES + 1]);
    assert!(matches!(
        marker_of_control_batch(huge),
        Err(ControlRecordError::TooLarge { .. })
    ));
    assert!(matches!(
        marker_of_control_batch(Bytes::from_static(&[0; 10])),
        Err(ControlRecordError::Record(_))
    ));
}
