//! Sparse offset and time indexes of a segment (Kafka's `.index` and
//! `.timeindex`).
//!
//! `.index` entries are 8 bytes: offset relative to the segment's base offset
//! (u32) and byte position in the `.log` file (u32), both big-endian.
//! `.timeindex` entries are 12 bytes: timestamp (i64) and relative offset
//! (u32). Entries are appended in increasing order, so lookups are binary
//! searches over the mapped file.

use std::path::Path;

use crate::error::IndexError;
use crate::mapped::MappedEntries;

/// Bytes per offset index entry.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes per time index entry.
pub const TIME_ENTRY_BYTES: usize = 12;

/// An offset index entry: an absolute offset and its byte position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    /// Absolute offset.
    pub offset: i64,
    /// Byte position of the batch holding `offset` in the `.log` file.
    pub position: u32,
}

/// A time index entry: a timestamp and the offset where it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Largest timestamp seen up to `offset`.
    pub timestamp: i64,
    /// Absolute offset.
    pub offset: i64,
}

/// Index of the last entry whose key is `<= target`, by binary search.
fn last_at_most(entries: usize, target: i64, key_at: impl Fn(usize) -> i64) -> Option<usize> {
    let (mut low, mut high) = (0usize, entries);
    while low < high {
        let middle = low + (high - low) / 2;
        if key_at(middle) <= target {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low.checked_sub(1)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn i64_at(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

/// The sparse offset index of one segment.
#[derive(Debug)]
pub struct OffsetIndex {
    entries: MappedEntries,
    base_offset: i64,
}

impl OffsetIndex {
    /// Opens or creates the index at `path` for a segment starting at
    /// `base_offset`, sized for `max_index_bytes`.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<Self, IndexError> {
        let entries = MappedEntries::open(path, OFFSET_ENTRY_BYTES, max_index_bytes as usize)?;
        Ok(OffsetIndex {
            entries,
            base_offset,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.entries()
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no further entry fits.
    pub fn is_full(&self) -> bool {
        self.entries.is_full()
    }

    /// Path of the index file.
    pub fn path(&self) -> &Path {
        self.entries.path()
    }

    /// Entry number `index`.
    pub fn entry(&self, index: usize) -> Option<OffsetPosition> {
        self.entries.entry(index).map(|bytes| OffsetPosition {
            offset: self.base_offset + i64::from(u32_at(bytes, 0)),
            position: u32_at(bytes, 4),
        })
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<OffsetPosition> {
        self.len()
            .checked_sub(1)
            .and_then(|index| self.entry(index))
    }

    /// The entry with the largest offset `<= offset`, or the segment start.
    pub fn lookup(&self, offset: i64) -> OffsetPosition {
        let found = last_at_most(self.len(), offset, |index| {
            self.entry(index).map_or(i64::MAX, |entry| entry.offset)
        });
        found
            .and_then(|index| self.entry(index))
            .unwrap_or(OffsetPosition {
                offset: self.base_offset,
                position: 0,
            })
    }

    /// Appends an entry. Offsets must increase; returns `false` (and adds
    /// nothing) when the index is full or the offset does not increase.
    pub fn append(&mut self, offset: i64, position: u32) -> bool {
        let relative = offset - self.base_offset;
        if !(0..=i64::from(u32::MAX)).contains(&relative) {
            return false;
        }
        if self.last_entry().is_some_and(|last| last.offset >= offset) {
            return false;
        }
        let mut raw = [0u8; OFFSET_ENTRY_BYTES];
        raw[..4].copy_from_slice(&(relative as u32).to_be_bytes());
        raw[4..].copy_from_slice(&position.to_be_bytes());
        self.entries.push(&raw)
    }

    /// Removes every entry with offset `>= offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = last_at_most(self.len(), offset - 1, |index| {
            self.entry(index).map_or(i64::MAX, |entry| entry.offset)
        })
        .map_or(0, |index| index + 1);
        self.entries.truncate_entries(keep);
    }

    /// Removes all entries.
    pub fn reset(&mut self) {
        self.entries.truncate_entries(0);
    }

    /// Checks the structure: offsets strictly increase from the base offset
    /// and positions are below `log_bytes`.
    pub fn sanity_check(&self, log_bytes: u64) -> Result<(), IndexError> {
        let mut previous: Option<OffsetPosition> = None;
        for index in 0..self.len() {
            let Some(entry) = self.entry(index) else {
                break;
            };
            let ordered = previous.is_none_or(|before| {
                before.offset < entry.offset && before.position < entry.position
            });
            if !ordered || u64::from(entry.position) >= log_bytes.max(1) {
                return Err(IndexError::Corrupt {
                    path: self.path().to_path_buf(),
                    reason: "offset index entries out of order or past the log end",
                });
            }
            previous = Some(entry);
        }
        Ok(())
    }

    /// Writes dirty pages to disk.
    pub fn flush(&self) -> Result<(), IndexError> {
        self.entries.flush()
    }

    /// Trims the file to its entries (on roll and close).
    pub fn trim(&mut self) -> Result<(), IndexError> {
        self.entries.trim()
    }

    /// Grows the file back to `max_index_bytes` (when a segment becomes active again).
    pub fn resize(&mut self, max_index_bytes: u32) -> Result<(), IndexError> {
        self.entries.resize(max_index_bytes as usize)
    }

    /// Renames the index file.
    pub fn rename(&mut self, to: &Path) -> Result<(), IndexError> {
        self.entries.rename(to)
    }
}

/// The sparse time index of one segment.
#[derive(Debug)]
pub struct TimeIndex {
    entries: MappedEntries,
    base_offset: i64,
}

impl TimeIndex {
    /// Opens or creates the time index at `path`.
    pub fn open(path: &Path, base_offset: i64, max_index_bytes: u32) -> Result<Self, IndexError> {
        let entries = MappedEntries::open(path, TIME_ENTRY_BYTES, max_index_bytes as usize)?;
        Ok(TimeIndex {
            entries,
            base_offset,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.entries()
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no further entry fits.
    pub fn is_full(&self) -> bool {
        self.entries.is_full()
    }

    /// Path of the index file.
    pub fn path(&self) -> &Path {
        self.entries.path()
    }

    /// Entry number `index`.
    pub fn entry(&self, index: usize) -> Option<TimestampOffset> {
        self.entries.entry(index).map(|bytes| TimestampOffset {
            timestamp: i64_at(bytes, 0),
            offset: self.base_offset + i64::from(u32_at(bytes, 8)),
        })
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<TimestampOffset> {
        self.len()
            .checked_sub(1)
            .and_then(|index| self.entry(index))
    }

    /// The entry with the largest timestamp `<= timestamp`, or
    /// `(-1, base offset)` when every entry is later.
    pub fn lookup(&self, timestamp: i64) -> TimestampOffset {
        let found = last_at_most(self.len(), timestamp, |index| {
            self.entry(index).map_or(i64::MAX, |entry| entry.timestamp)
        });
        found
            .and_then(|index| self.entry(index))
            .unwrap_or(TimestampOffset {
                timestamp: -1,
                offset: self.base_offset,
            })
    }

    /// Appends an entry if `timestamp` is larger than the last one's
    /// (Kafka's `maybeAppend`); returns whether it was added.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> bool {
        let relative = offset - self.base_offset;
        if !(0..=i64::from(u32::MAX)).contains(&relative) {
            return false;
        }
        if let Some(last) = self.last_entry() {
            if timestamp <= last.timestamp || offset < last.offset {
                return false;
            }
        }
        let mut raw = [0u8; TIME_ENTRY_BYTES];
        raw[..8].copy_from_slice(&timestamp.to_be_bytes());
        raw[8..].copy_from_slice(&(relative as u32).to_be_bytes());
        self.entries.push(&raw)
    }

    /// Removes every entry with offset `>= offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let mut keep = self.len();
        while keep > 0
            && self
                .entry(keep - 1)
                .is_some_and(|entry| entry.offset >= offset)
        {
            keep -= 1;
        }
        self.entries.truncate_entries(keep);
    }

    /// Removes all entries.
    pub fn reset(&mut self) {
        self.entries.truncate_entries(0);
    }

    /// Checks that timestamps and offsets never decrease and offsets are
    /// below `next_offset`.
    pub fn sanity_check(&self, next_offset: i64) -> Result<(), IndexError> {
        let mut previous: Option<TimestampOffset> = None;
        for index in 0..self.len() {
            let Some(entry) = self.entry(index) else {
                break;
            };
            let ordered = previous.is_none_or(|before| {
                before.timestamp < entry.timestamp && before.offset <= entry.offset
            });
            if !ordered || entry.offset >= next_offset.max(self.base_offset + 1) {
                return Err(IndexError::Corrupt {
                    path: self.path().to_path_buf(),
                    reason: "time index entries out of order or past the log end",
                });
            }
            previous = Some(entry);
        }
        Ok(())
    }

    /// Writes dirty pages to disk.
    pub fn flush(&self) -> Result<(), IndexError> {
        self.entries.flush()
    }

    /// Trims the file to its entries.
    pub fn trim(&mut self) -> Result<(), IndexError> {
        self.entries.trim()
    }

    /// Grows the file back to `max_index_bytes`.
    pub fn resize(&mut self, max_index_bytes: u32) -> Result<(), IndexError> {
        self.entries.resize(max_index_bytes as usize)
    }

    /// Renames the index file.
    pub fn rename(&mut self, to: &Path) -> Result<(), IndexError> {
        self.entries.rename(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_append_truncate_trim() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000100.index");
        let mut index = OffsetIndex::open(&path, 100, 80).expect("open");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 80);
        assert_eq!(
            index.lookup(150),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        for step in 0..10u32 {
            assert!(!index.is_full(), "room for entry {step}");
            assert!(index.append(100 + i64::from(step) * 10, step * 1000));
        }
        assert!(index.is_full());
        assert!(!index.append(500, 99_999));
        assert!(!index.append(190, 99_999), "offsets must increase");
        assert_eq!(
            index.lookup(99),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            index.lookup(125),
            OffsetPosition {
                offset: 120,
                position: 2000
            }
        );
        assert_eq!(
            index.lookup(190),
            OffsetPosition {
                offset: 190,
                position: 9000
            }
        );
        assert_eq!(
            index.lookup(10_000),
            OffsetPosition {
                offset: 190,
                position: 9000
            }
        );
        index.truncate_to(150);
        assert_eq!(index.len(), 5);
        assert_eq!(index.last_entry().map(|entry| entry.offset), Some(140));
        index.trim().expect("trim");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 40);
        drop(index);

        let reopened = OffsetIndex::open(&path, 100, 80).expect("reopen");
        assert_eq!(reopened.len(), 5);
        reopened.sanity_check(5000).expect("sane");
        assert!(
            reopened.sanity_check(3000).is_err(),
            "position past the log end"
        );
        assert_eq!(
            reopened.lookup(145),
            OffsetPosition {
                offset: 140,
                position: 4000
            }
        );
    }

    #[test]
    fn offset_index_rejects_partial_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000000.index");
        std::fs::write(&path, [0u8; 13]).expect("write");
        assert!(matches!(
            OffsetIndex::open(&path, 0, 80),
            Err(IndexError::Corrupt { .. })
        ));
    }

    #[test]
    fn time_index_lookup_and_maybe_append() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("00000000000000000000.timeindex");
        let mut index = TimeIndex::open(&path, 0, 1200).expect("open");
        assert_eq!(
            index.lookup(5),
            TimestampOffset {
                timestamp: -1,
                offset: 0
            }
        );
        assert!(index.maybe_append(1000, 0));
        assert!(!index.maybe_append(1000, 5), "timestamp must grow");
        assert!(index.maybe_append(2000, 10));
        assert!(index.maybe_append(3000, 20));
        assert_eq!(index.lookup(999).offset, 0);
        assert_eq!(
            index.lookup(2500),
            TimestampOffset {
                timestamp: 2000,
                offset: 10
            }
        );
        assert_eq!(index.lookup(9999).offset, 20);
        index.sanity_check(21).expect("sane");
        index.truncate_to(10);
        assert_eq!(index.len(), 1);
        index.trim().expect("trim");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 12);
        index.resize(1200).expect("resize");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 1200);
        assert_eq!(index.len(), 1);
    }
}
