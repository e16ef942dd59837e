//! Reading `.index` and `.timeindex` files in Kafka's layout (the entry
//! sizes and types of `strom-storage`'s index module) and checking them
//! against the segment's batches.
//!
//! Files are read, never opened through `strom-storage`'s mapped indexes:
//! those resize the file, and a dump must not change what it inspects.
//! An index that is still active is preallocated with zeros; an all-zero
//! entry after the first one ends the valid entries, as in Kafka.

use strom_storage::index::{OffsetPosition, TimestampOffset, OFFSET_ENTRY_BYTES, TIME_ENTRY_BYTES};

use super::segment::{batch_containing, BatchExtent, Problem};

/// The entries of an index file and what is wrong with its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntries<T> {
    /// The valid entries, in file order.
    pub entries: Vec<T>,
    /// Zero entries after the valid ones (preallocated space).
    pub padding_entries: usize,
    /// Problems with the file's shape.
    pub problems: Vec<Problem>,
}

fn be_u32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

fn be_i64(bytes: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

fn shape_problems(length: usize, entry_bytes: usize) -> Vec<Problem> {
    let remainder = length % entry_bytes;
    if remainder == 0 {
        return Vec::new();
    }
    vec![Problem {
        position: (length - remainder) as u64,
        description: format!(
            "file length {length} is not a whole number of {entry_bytes}-byte entries"
        ),
    }]
}

/// Parses an offset index of a segment starting at `base_offset`.
pub fn parse_offset_index(bytes: &[u8], base_offset: i64) -> IndexEntries<OffsetPosition> {
    let problems = shape_problems(bytes.len(), OFFSET_ENTRY_BYTES);
    let chunks: Vec<&[u8]> = bytes.chunks_exact(OFFSET_ENTRY_BYTES).collect();
    let valid = valid_entries(&chunks);
    let entries = chunks
        .iter()
        .take(valid)
        .filter_map(|chunk| {
            let relative = be_u32(chunk)?;
            let position = be_u32(chunk.get(4..)?)?;
            Some(OffsetPosition {
                offset: base_offset.saturating_add(i64::from(relative)),
                position,
            })
        })
        .collect();
    IndexEntries {
        entries,
        padding_entries: chunks.len() - valid,
        problems,
    }
}

/// Parses a time index of a segment starting at `base_offset`.
pub fn parse_time_index(bytes: &[u8], base_offset: i64) -> IndexEntries<TimestampOffset> {
    let problems = shape_problems(bytes.len(), TIME_ENTRY_BYTES);
    let chunks: Vec<&[u8]> = bytes.chunks_exact(TIME_ENTRY_BYTES).collect();
    let valid = valid_entries(&chunks);
    let entries = chunks
        .iter()
        .take(valid)
        .filter_map(|chunk| {
            let timestamp = be_i64(chunk)?;
            let relative = be_u32(chunk.get(8..)?)?;
            Some(TimestampOffset {
                timestamp,
                offset: base_offset.saturating_add(i64::from(relative)),
            })
        })
        .collect();
    IndexEntries {
        entries,
        padding_entries: chunks.len() - valid,
        problems,
    }
}

/// How many entries precede the zero padding: an all-zero entry after the
/// first ends them, provided every later entry is zero too.
fn valid_entries(chunks: &[&[u8]]) -> usize {
    let is_zero = |chunk: &&[u8]| chunk.iter().all(|byte| *byte == 0);
    let mut valid = chunks.len();
    while valid > 1 && chunks.get(valid - 1).is_some_and(is_zero) {
        valid -= 1;
    }
    if valid == 1 && chunks.first().is_some_and(is_zero) && chunks.len() > 1 {
        // Only zeros: an empty, preallocated index.
        return 0;
    }
    valid
}

/// Checks offset index entries: increasing, and each pointing at the start
/// of the batch that holds its offset.
pub fn verify_offset_index(
    entries: &[OffsetPosition],
    batches: Option<&[BatchExtent]>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (index, pair) in entries.windows(2).enumerate() {
        if let [previous, entry] = pair {
            if entry.offset <= previous.offset || entry.position <= previous.position {
                problems.push(Problem {
                    position: ((index + 1) * OFFSET_ENTRY_BYTES) as u64,
                    description: format!(
                        "entry {} (offset {}, position {}) does not increase over the previous \
                         (offset {}, position {})",
                        index + 1,
                        entry.offset,
                        entry.position,
                        previous.offset,
                        previous.position
                    ),
                });
            }
        }
    }
    let Some(batches) = batches else {
        return problems;
    };
    for (index, entry) in entries.iter().enumerate() {
        let at = batches.binary_search_by_key(&u64::from(entry.position), |batch| batch.position);
        let description = match at.ok().and_then(|found| batches.get(found)) {
            None => format!(
                "entry {index} (offset {}) points at position {}, which is not the start of a batch",
                entry.offset, entry.position
            ),
            Some(batch) if entry.offset < batch.base_offset || entry.offset > batch.last_offset => format!(
                "entry {index} (offset {}) points at position {}, whose batch holds offsets {}..={}",
                entry.offset, entry.position, batch.base_offset, batch.last_offset
            ),
            Some(_) => continue,
        };
        problems.push(Problem {
            position: (index * OFFSET_ENTRY_BYTES) as u64,
            description,
        });
    }
    problems
}

/// Checks time index entries: non-decreasing timestamps and offsets, each
/// offset in the log, each timestamp reached by the log at that offset.
pub fn verify_time_index(
    entries: &[TimestampOffset],
    batches: Option<&[BatchExtent]>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (index, pair) in entries.windows(2).enumerate() {
        if let [previous, entry] = pair {
            if entry.timestamp < previous.timestamp || entry.offset < previous.offset {
                problems.push(Problem {
                    position: ((index + 1) * TIME_ENTRY_BYTES) as u64,
                    description: format!(
                        "entry {} (timestamp {}, offset {}) goes back from the previous \
                         (timestamp {}, offset {})",
                        index + 1,
                        entry.timestamp,
                        entry.offset,
                        previous.timestamp,
                        previous.offset
                    ),
                });
            }
        }
    }
    let Some(batches) = batches else {
        return problems;
    };
    for (index, entry) in entries.iter().enumerate() {
        let description = match batch_containing(batches, entry.offset) {
            None => format!(
                "entry {index}: offset {} is in no batch of the log",
                entry.offset
            ),
            Some(batch) if entry.timestamp > batch.max_timestamp_so_far => format!(
                "entry {index}: timestamp {} is later than any record up to offset {} ({})",
                entry.timestamp, entry.offset, batch.max_timestamp_so_far
            ),
            Some(_) => continue,
        };
        problems.push(Problem {
            position: (index * TIME_ENTRY_BYTES) as u64,
            description,
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_entry(relative: u32, position: u32) -> Vec<u8> {
        let mut bytes = relative.to_be_bytes().to_vec();
        bytes.extend(position.to_be_bytes());
        bytes
    }

    fn batches() -> Vec<BatchExtent> {
        vec![
            BatchExtent {
                position: 0,
                base_offset: 100,
                last_offset: 104,
                max_timestamp_so_far: 50,
            },
            BatchExtent {
                position: 200,
                base_offset: 105,
                last_offset: 109,
                max_timestamp_so_far: 70,
            },
        ]
    }

    #[test]
    fn zero_padding_ends_the_entries() {
        let mut bytes = offset_entry(0, 0);
        bytes.extend(offset_entry(9, 200));
        bytes.extend([0u8; 16]);
        let parsed = parse_offset_index(&bytes, 100);
        assert_eq!(parsed.entries.len(), 2);
        assert_eq!(parsed.padding_entries, 2);
        assert_eq!(
            parsed.entries[1],
            OffsetPosition {
                offset: 109,
                position: 200
            }
        );
        assert!(verify_offset_index(&parsed.entries, Some(&batches())).is_empty());
        let empty = parse_offset_index(&[0u8; 32], 0);
        assert!(empty.entries.is_empty());
        assert_eq!(parse_offset_index(&[0u8; 8], 0).entries.len(), 1);
    }

    #[test]
    fn offset_index_problems_are_found() {
        let mut bytes = offset_entry(4, 0);
        bytes.extend(offset_entry(2, 150));
        bytes.extend([1, 2, 3]);
        let parsed = parse_offset_index(&bytes, 100);
        assert_eq!(parsed.problems.len(), 1, "a partial entry");
        let problems = verify_offset_index(&parsed.entries, Some(&batches()));
        let text: Vec<&str> = problems.iter().map(|p| p.description.as_str()).collect();
        assert_eq!(problems.len(), 2, "{text:?}");
        assert!(text[0].contains("does not increase"));
        assert!(text[1].contains("not the start of a batch"));
        let wrong_batch = [OffsetPosition {
            offset: 107,
            position: 0,
        }];
        assert_eq!(verify_offset_index(&wrong_batch, Some(&batches())).len(), 1);
    }

    #[test]
    fn time_index_entries_parse_and_verify() {
        let mut bytes = 40i64.to_be_bytes().to_vec();
        bytes.extend(2u32.to_be_bytes());
        bytes.extend(70i64.to_be_bytes());
        bytes.extend(9u32.to_be_bytes());
        let parsed = parse_time_index(&bytes, 100);
        assert_eq!(
            parsed.entries[1],
            TimestampOffset {
                timestamp: 70,
                offset: 109
            }
        );
        assert!(verify_time_index(&parsed.entries, Some(&batches())).is_empty());
        let bad = [
            TimestampOffset {
                timestamp: 60,
                offset: 101,
            },
            TimestampOffset {
                timestamp: 55,
                offset: 200,
            },
        ];
        let problems = verify_time_index(&bad, Some(&batches()));
        assert_eq!(problems.len(), 3, "{problems:?}");
    }
}
