//! Reading a `.log` segment: every batch, its records, and what is wrong
//! with them. Parsing uses `strom-protocol`'s v2 batch code only, so it
//! reads segments written by Strom and by Apache Kafka alike.

use bytes::Bytes;
use strom_protocol::records::{RecordBatch, RecordBatches, TimestampType};

/// Where one batch sits, for checking indexes against the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchExtent {
    /// Byte position of the batch in the file.
    pub position: u64,
    /// Its first offset.
    pub base_offset: i64,
    /// Its last offset.
    pub last_offset: i64,
    /// The largest timestamp of this batch and every batch before it.
    pub max_timestamp_so_far: i64,
}

/// Something wrong found while reading a segment or an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Byte position in the file it was found at.
    pub position: u64,
    /// What is wrong.
    pub description: String,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentScan {
    /// Every batch read, in file order.
    pub batches: Vec<BatchExtent>,
    /// Records read in all batches.
    pub records: u64,
    /// Problems found.
    pub problems: Vec<Problem>,
    /// Bytes of whole, readable batches from the start of the file.
    pub valid_bytes: u64,
}

/// A batch as the scan hands it to the printer.
#[derive(Debug)]
pub struct ScannedBatch<'a> {
    /// Byte position in the file.
    pub position: u64,
    /// The batch.
    pub batch: &'a RecordBatch,
    /// Whether the stored CRC matches.
    pub crc_valid: bool,
}

/// Reads every batch of `bytes` (a whole `.log` file), calling `visit` for
/// each, and checks CRCs, record counts and offset order.
pub fn scan(bytes: Bytes, mut visit: impl FnMut(&ScannedBatch<'_>)) -> SegmentScan {
    let total = bytes.len() as u64;
    let mut scan = SegmentScan::default();
    let mut batches = RecordBatches::new(bytes);
    let mut position = 0u64;
    let mut max_timestamp_so_far = i64::MIN;
    let mut unreadable = false;
    while let Some(next) = batches.next() {
        let batch = match next {
            Ok(batch) => batch,
            Err(error) => {
                scan.problems.push(Problem {
                    position,
                    description: format!(
                        "unreadable batch: {error}; the rest of the file is not read"
                    ),
                });
                unreadable = true;
                break;
            }
        };
        check_batch(&batch, position, &mut scan);
        max_timestamp_so_far = max_timestamp_so_far.max(batch.max_timestamp());
        scan.batches.push(BatchExtent {
            position,
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            max_timestamp_so_far,
        });
        let crc_valid = batch.validate_crc().is_ok();
        visit(&ScannedBatch {
            position,
            batch: &batch,
            crc_valid,
        });
        position = batches.position() as u64;
        scan.valid_bytes = position;
    }
    let tail = total.saturating_sub(scan.valid_bytes);
    if tail > 0 && !unreadable {
        scan.problems.push(Problem {
            position: scan.valid_bytes,
            description: format!(
                "{tail} trailing byte(s) do not form a whole batch (a torn write?)"
            ),
        });
    }
    scan
}

fn check_batch(batch: &RecordBatch, position: u64, scan: &mut SegmentScan) {
    if let Err(error) = batch.validate_crc() {
        scan.problems.push(Problem {
            position,
            description: format!("batch at offset {}: {error}", batch.base_offset()),
        });
    }
    if let Some(previous) = scan.batches.last() {
        if batch.base_offset() <= previous.last_offset {
            scan.problems.push(Problem {
                position,
                description: format!(
                    "batch base offset {} is not after the previous batch's last offset {}",
                    batch.base_offset(),
                    previous.last_offset
                ),
            });
        }
    }
    match batch.records() {
        Ok(records) => {
            let mut count = 0u64;
            for record in records {
                match record {
                    Ok(_) => count += 1,
                    Err(error) => {
                        scan.problems.push(Problem {
                            position,
                            description: format!(
                                "batch at offset {}: record {count} unreadable: {error}",
                                batch.base_offset()
                            ),
                        });
                        break;
                    }
                }
            }
            scan.records += count;
        }
        Err(error) => scan.problems.push(Problem {
            position,
            description: format!(
                "batch at offset {}: records unreadable: {error}",
                batch.base_offset()
            ),
        }),
    }
}

/// The name Kafka prints for a timestamp type.
pub fn timestamp_type_name(timestamp_type: TimestampType) -> &'static str {
    match timestamp_type {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// The batch containing `offset`, by binary search over file-ordered batches.
pub fn batch_containing(batches: &[BatchExtent], offset: i64) -> Option<&BatchExtent> {
    let index = batches.partition_point(|batch| batch.last_offset < offset);
    batches
        .get(index)
        .filter(|batch| batch.base_offset <= offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strom_protocol::records::{Compression, RecordBatchBuilder};

    fn batch(base_offset: i64, values: &[&str]) -> Vec<u8> {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(base_offset);
        for (index, value) in values.iter().enumerate() {
            builder
                .append(1_000 + index as i64, None, Some(value.as_bytes()), &[])
                .expect("append");
        }
        builder.build().expect("build").to_vec()
    }

    #[test]
    fn a_clean_segment_has_no_problems() {
        let mut bytes = batch(0, &["a", "b"]);
        let second_position = bytes.len() as u64;
        bytes.extend(batch(2, &["c"]));
        let mut seen = Vec::new();
        let scan = scan(Bytes::from(bytes), |batch| {
            seen.push((batch.position, batch.crc_valid))
        });
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        assert_eq!(scan.records, 3);
        assert_eq!(seen, [(0, true), (second_position, true)]);
        assert_eq!(
            batch_containing(&scan.batches, 1).map(|b| b.position),
            Some(0)
        );
        assert_eq!(
            batch_containing(&scan.batches, 2).map(|b| b.position),
            Some(second_position)
        );
        assert!(batch_containing(&scan.batches, 3).is_none());
    }

    #[test]
    fn corruption_and_disorder_are_reported() {
        let mut bytes = batch(5, &["a"]);
        let second_position = bytes.len();
        bytes.extend(batch(3, &["b"]));
        // A byte of the second batch's max timestamp, which the CRC covers.
        bytes[second_position + 40] ^= 0xff;
        bytes.extend([0u8; 7]);
        let scan = scan(Bytes::from(bytes), |_| {});
        let text: Vec<&str> = scan
            .problems
            .iter()
            .map(|p| p.description.as_str())
            .collect();
        assert_eq!(scan.problems.len(), 3, "{text:?}");
        assert!(
            text[0].contains("CRC") || text[0].contains("crc"),
            "{text:?}"
        );
        assert!(text[1].contains("not after"), "{text:?}");
        assert!(text[2].contains("trailing"), "{text:?}");
    }
}
