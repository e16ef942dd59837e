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
pub fn scan(bytes: Bytes, visit: impl FnMut(&ScannedBatch<'_>)) -> SegmentScan {
    let total = bytes.len() as u64;
    // Reading from memory cannot fail.
    scan_reader(&bytes[..], total, visit).unwrap_or_default()
}

/// Bytes read from the file at a time: memory stays at about this much plus
/// the largest batch, whatever the segment's size.
const WINDOW_BYTES: usize = 8 * 1024 * 1024;

/// [`scan`] over a reader of `total` bytes (a `.log` file), holding only a
/// window of the file in memory at a time.
pub fn scan_reader(
    reader: impl std::io::Read,
    total: u64,
    visit: impl FnMut(&ScannedBatch<'_>),
) -> std::io::Result<SegmentScan> {
    scan_in_windows(reader, total, WINDOW_BYTES, visit)
}

fn scan_in_windows(
    mut reader: impl std::io::Read,
    total: u64,
    window_bytes: usize,
    mut visit: impl FnMut(&ScannedBatch<'_>),
) -> std::io::Result<SegmentScan> {
    let mut scan = SegmentScan::default();
    let mut state = ScanState {
        max_timestamp_so_far: i64::MIN,
        unreadable: false,
    };
    // `window` holds file bytes from `window_start` on.
    let mut window: Vec<u8> = Vec::new();
    let mut window_start = 0u64;
    let mut want = window_bytes;
    let mut at_end = false;
    while !at_end && !state.unreadable {
        at_end = fill(&mut reader, &mut window, want)?;
        let chunk = Bytes::from(std::mem::take(&mut window));
        let consumed = scan_window(&chunk, window_start, &mut scan, &mut state, &mut visit);
        // An incomplete batch at the window's end is kept and completed by
        // the next read; a window without one whole batch grows to the size
        // its length field declares, unless the file ends before that (a
        // torn tail, reported below without reading the rest into memory).
        let rest = chunk.get(consumed..).unwrap_or_default();
        want = window_bytes;
        if consumed == 0 {
            let declared = declared_batch_bytes(rest).unwrap_or(rest.len() + 1);
            if window_start + declared as u64 > total {
                break;
            }
            want = want.max(declared);
        }
        window = rest.to_vec();
        window_start += consumed as u64;
    }
    let tail = total.saturating_sub(scan.valid_bytes);
    if tail > 0 && !state.unreadable {
        scan.problems.push(Problem {
            position: scan.valid_bytes,
            description: format!(
                "{tail} trailing byte(s) do not form a whole batch (a torn write?)"
            ),
        });
    }
    Ok(scan)
}

/// The size a batch's length field declares (length field included), once
/// its first 12 bytes are there.
fn declared_batch_bytes(bytes: &[u8]) -> Option<usize> {
    let field: [u8; 4] = bytes.get(8..12)?.try_into().ok()?;
    let length = usize::try_from(i32::from_be_bytes(field)).ok()?;
    Some(length + 12)
}

/// What carries over from one window to the next.
struct ScanState {
    max_timestamp_so_far: i64,
    unreadable: bool,
}

/// Reads until `window` holds `want` bytes or the reader ends; returns
/// whether it ended.
fn fill(
    reader: &mut impl std::io::Read,
    window: &mut Vec<u8>,
    want: usize,
) -> std::io::Result<bool> {
    let mut filled = window.len();
    if filled >= want {
        return Ok(false);
    }
    window.resize(want, 0);
    let ended = loop {
        if filled == want {
            break false;
        }
        match reader.read(&mut window[filled..]) {
            Ok(0) => break true,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                window.truncate(filled);
                return Err(error);
            }
        }
    };
    window.truncate(filled);
    Ok(ended)
}

/// Scans the whole batches of `chunk` (file bytes from `start`); returns the
/// bytes they cover.
fn scan_window(
    chunk: &Bytes,
    start: u64,
    scan: &mut SegmentScan,
    state: &mut ScanState,
    visit: &mut impl FnMut(&ScannedBatch<'_>),
) -> usize {
    let mut batches = RecordBatches::new(chunk.clone());
    let mut consumed = 0usize;
    while let Some(next) = batches.next() {
        let position = start + consumed as u64;
        let batch = match next {
            Ok(batch) => batch,
            Err(error) => {
                scan.problems.push(Problem {
                    position,
                    description: format!(
                        "unreadable batch: {error}; the rest of the file is not read"
                    ),
                });
                state.unreadable = true;
                break;
            }
        };
        check_batch(&batch, position, scan);
        state.max_timestamp_so_far = state.max_timestamp_so_far.max(batch.max_timestamp());
        scan.batches.push(BatchExtent {
            position,
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            max_timestamp_so_far: state.max_timestamp_so_far,
        });
        let crc_valid = batch.validate_crc().is_ok();
        visit(&ScannedBatch {
            position,
            batch: &batch,
            crc_valid,
        });
        consumed = batches.position();
        scan.valid_bytes = start + consumed as u64;
    }
    consumed
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

    /// A reader that hands out at most 7 bytes per read.
    struct Trickle<'a>(&'a [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let count = buffer.len().min(7).min(self.0.len());
            buffer[..count].copy_from_slice(&self.0[..count]);
            self.0 = &self.0[count..];
            Ok(count)
        }
    }

    #[test]
    fn a_reader_scan_matches_the_in_memory_scan() {
        let mut bytes = Vec::new();
        for index in 0..50 {
            let value = "v".repeat(1 + index * 37);
            bytes.extend(batch(index as i64 * 2, &[value.as_str(), "x"]));
        }
        bytes.extend([0u8; 9]);
        let mut in_memory = Vec::new();
        let expected = scan(Bytes::from(bytes.clone()), |batch| {
            in_memory.push(batch.position)
        });
        assert_eq!(expected.batches.len(), 50);
        assert_eq!(expected.problems.len(), 1, "{:?}", expected.problems);
        // Windows smaller than many batches (they grow), about one batch,
        // and larger than the file.
        for window_bytes in [64, 1_000, 1 << 20] {
            let mut streamed = Vec::new();
            let found =
                scan_in_windows(Trickle(&bytes), bytes.len() as u64, window_bytes, |batch| {
                    streamed.push(batch.position)
                })
                .expect("reads");
            assert_eq!(found, expected, "window {window_bytes}");
            assert_eq!(streamed, in_memory, "window {window_bytes}");
        }
    }

    #[test]
    fn a_length_past_the_end_of_the_file_stops_the_scan() {
        let mut bytes = batch(0, &["a"]);
        let torn_at = bytes.len() as u64;
        let mut torn = batch(1, &["b"]);
        // A length field claiming 1 GiB in a small file.
        torn[8..12].copy_from_slice(&(1i32 << 30).to_be_bytes());
        bytes.extend(&torn);
        let found = scan_in_windows(&bytes[..], bytes.len() as u64, 16, |_| {}).expect("reads");
        assert_eq!(found.batches.len(), 1);
        assert_eq!(found.valid_bytes, torn_at);
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        assert_eq!(found.problems[0].position, torn_at);
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
