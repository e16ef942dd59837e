//! Bad input: every malformed batch or record is a typed error, never a panic.

use bytes::Bytes;
use strom_protocol::records::{
    BatchHeaderMut, Compression, RecordBatch, RecordBatchBuilder, RecordBatches, RecordError,
    RecordField,
};

/// A batch around hand-written records bytes, with a correct length and CRC.
fn craft(records: &[u8], record_count: i32, attributes: i16) -> Bytes {
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.push(2);
    batch.extend_from_slice(&[0; 4]);
    batch.extend_from_slice(&attributes.to_be_bytes());
    batch.extend_from_slice(&(record_count - 1).max(0).to_be_bytes());
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&(-1i64).to_be_bytes());
    batch.extend_from_slice(&(-1i16).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes());
    batch.extend_from_slice(&record_count.to_be_bytes());
    batch.extend_from_slice(records);
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// Parses, checks the CRC and reads every record; returns the first error.
fn read_all(bytes: Bytes) -> Result<usize, RecordError> {
    let batch = RecordBatch::parse(bytes)?;
    batch.validate_crc()?;
    let mut count = 0;
    for record in batch.records()? {
        let record = record?;
        count += record.headers().iter().count();
        count += 1;
    }
    Ok(count)
}

fn valid_batches() -> Vec<Bytes> {
    Compression::ALL
        .iter()
        .map(|compression| {
            let mut builder = RecordBatchBuilder::new(*compression).with_producer(1, 1, 1);
            for index in 0..5 {
                builder
                    .append(
                        index,
                        Some(b"key"),
                        Some(&[index as u8; 40]),
                        &[(b"h", None)],
                    )
                    .expect("append");
            }
            builder.build().expect("build")
        })
        .collect()
}

#[test]
fn truncation_at_every_byte_is_a_truncated_error() {
    for bytes in valid_batches() {
        for cut in 0..bytes.len() {
            let prefix = bytes.slice(..cut);
            assert!(
                matches!(RecordBatch::parse(prefix.clone()), Err(RecordError::Truncated { available, .. }) if available == cut),
                "cut at {cut}"
            );
            let mut batches = RecordBatches::new(prefix);
            assert!(batches.next().is_none());
            assert_eq!(batches.truncated_tail(), cut);
        }
        assert!(read_all(bytes).is_ok());
    }
}

#[test]
fn bad_batch_lengths() {
    let valid = valid_batches().remove(0);
    for (batch_length, truncated) in [
        (-1, false),
        (i32::MIN, false),
        (0, false),
        (48, false),
        (i32::MAX, true),
    ] {
        let mut bytes = valid.to_vec();
        bytes[8..12].copy_from_slice(&batch_length.to_be_bytes());
        let error = RecordBatch::parse(Bytes::from(bytes.clone())).expect_err("length");
        if truncated {
            assert!(
                matches!(error, RecordError::Truncated { .. }),
                "{batch_length}: {error}"
            );
        } else {
            assert!(
                matches!(error, RecordError::InvalidBatchLength { .. }),
                "{batch_length}: {error}"
            );
        }
        let mut batches = RecordBatches::new(Bytes::from(bytes.clone()));
        assert_eq!(batches.next().is_some(), !truncated);
        assert!(batches.next().is_none());
        assert!(BatchHeaderMut::new(&mut bytes).is_err());
    }
}

#[test]
fn record_count_disagreeing_with_records() {
    // Two valid records: length 7, attributes, ts 0, offset delta 0/1, null key, empty value, no headers.
    let two = [0x0c, 0, 0, 0, 1, 0, 0, 0x0c, 0, 0, 2, 1, 0, 0];
    assert_eq!(read_all(craft(&two, 2, 0)).expect("valid"), 2);
    assert!(matches!(
        read_all(craft(&two, 3, 0)),
        Err(RecordError::RecordCountMismatch {
            declared: 3,
            found: 2
        })
    ));
    assert!(matches!(
        read_all(craft(&two, 1, 0)),
        Err(RecordError::TrailingRecordBytes { remaining: 7 })
    ));
    assert!(matches!(
        read_all(craft(&two, -1, 0)),
        Err(RecordError::InvalidRecordCount { record_count: -1 })
    ));
    assert!(matches!(
        read_all(craft(&two, i32::MAX, 0)),
        Err(RecordError::RecordCountMismatch { found: 2, .. })
    ));
}

#[test]
fn overlong_varints() {
    // Record length as a 6-byte varint.
    let record = [0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::VarintTooLong { max_bytes: 5 })
    ));
    // Timestamp delta as an 11-byte varlong inside a record of 12 bytes.
    let mut record = vec![0x18, 0x00];
    record.extend_from_slice(&[0xff; 10]);
    record.push(0x01);
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::VarintTooLong { max_bytes: 10 })
    ));
}

#[test]
fn bad_field_lengths() {
    let cases: [(&[u8], RecordField); 4] = [
        // Record length -1.
        (&[0x01], RecordField::RecordLength),
        // Key length -2.
        (&[0x0a, 0, 0, 0, 0x03, 0], RecordField::Key),
        // Value length -3 after a null key.
        (&[0x0a, 0, 0, 0, 0x01, 0x05], RecordField::Value),
        // Header count -1.
        (&[0x0c, 0, 0, 0, 0x01, 0x01, 0x01], RecordField::HeaderCount),
    ];
    for (record, field) in cases {
        let error = read_all(craft(record, 1, 0)).expect_err("bad length");
        assert!(
            matches!(&error, RecordError::InvalidLength { field: found, .. } if *found == field),
            "{field}: {error}"
        );
    }
    // Header key length -1 (keys cannot be null).
    let record = [0x0e, 0, 0, 0, 0x01, 0x01, 0x02, 0x01];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::InvalidLength {
            field: RecordField::HeaderKey,
            ..
        })
    ));
}

#[test]
fn record_size_disagreeing_with_fields() {
    // Declares 7 body bytes but the fields take 6, then one stray byte.
    let record = [0x0e, 0, 0, 0, 0x01, 0x01, 0x00, 0x00];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::RecordSizeMismatch {
            declared: 7,
            actual: 6
        })
    ));
    // Declares 5 body bytes but the fields need 6.
    let record = [0x0a, 0, 0, 0, 0x01, 0x01, 0x00];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::RecordTruncated { .. })
    ));
    // A key that runs past the end of the record.
    let record = [0x0c, 0, 0, 0, 0x14, 0, 0];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::RecordTruncated {
            needed: 10,
            available: 2
        })
    ));
    // Declares more bytes than the batch holds.
    let record = [0x7e, 0, 0, 0];
    assert!(matches!(
        read_all(craft(&record, 1, 0)),
        Err(RecordError::RecordTruncated {
            needed: 63,
            available: 3
        })
    ));
}

#[test]
fn unknown_codecs_are_rejected_at_parse() {
    for code in 5..=7 {
        assert!(matches!(
            read_all(craft(&[], 0, code)),
            Err(RecordError::UnknownCompression { code: found }) if i16::from(found) == code
        ));
    }
}

#[test]
fn every_single_byte_corruption_is_handled() {
    for bytes in valid_batches() {
        for position in 0..bytes.len() {
            for replacement in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
                let mut corrupt = bytes.to_vec();
                corrupt[position] = replacement;
                // CRC-covered changes must be caught by the CRC; the rest must not panic.
                let result = read_all(Bytes::from(corrupt.clone()));
                if position >= 21 && corrupt[position] != bytes[position] {
                    assert!(result.is_err(), "corruption at {position} not detected");
                }
                // Without the CRC check, record decoding alone must not panic either.
                if let Ok(batch) = RecordBatch::parse(Bytes::from(corrupt)) {
                    if let Ok(records) = batch.records_with_limit(1 << 20) {
                        for record in records {
                            let _ = record.map(|record| record.headers().iter().count());
                        }
                    }
                }
            }
        }
    }
}
