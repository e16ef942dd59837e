//! Kafka's aborted-transaction index: one `<20-digit base offset>.txnindex`
//! file per segment, listing the transactions aborted by markers in that
//! segment.
//!
//! Entries are 34 bytes, big-endian: version i16 (0), producer id i64,
//! first offset i64 (the transaction's first record), last offset i64 (the
//! abort marker's offset) and last stable offset i64 (the first offset of
//! the earliest transaction of another producer still ongoing when this one
//! ended, else the marker's offset + 1). Like Kafka's, the file is created
//! with its first entry and only ever appended to or cut back; a file whose
//! size is not a whole number of entries or with an unknown version is
//! corrupt, and the segment is then recovered (which rebuilds it).
//!
//! The entries are also kept in memory: there are few (one per aborted
//! transaction), and read_committed fetches ask for them on every read.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IndexError, IoContext, IoError};

/// Suffix of aborted-transaction index files.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Bytes of one entry.
pub const TXN_INDEX_ENTRY_BYTES: usize = 34;
/// The entry version written and understood.
const TXN_INDEX_VERSION: i16 = 0;

/// One aborted transaction, as the index stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxnEntry {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first record in this partition.
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
    /// The last stable offset once the abort was written.
    pub last_stable_offset: i64,
}

impl AbortedTxnEntry {
    /// The entry's 34 bytes.
    pub fn to_bytes(&self) -> [u8; TXN_INDEX_ENTRY_BYTES] {
        let mut bytes = [0u8; TXN_INDEX_ENTRY_BYTES];
        bytes[0..2].copy_from_slice(&TXN_INDEX_VERSION.to_be_bytes());
        bytes[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        bytes[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        bytes[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        bytes[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        bytes
    }

    /// Reads an entry; `None` for an unknown version.
    pub fn from_bytes(bytes: &[u8; TXN_INDEX_ENTRY_BYTES]) -> Option<AbortedTxnEntry> {
        let field = |at: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(raw)
        };
        (i16::from_be_bytes([bytes[0], bytes[1]]) == TXN_INDEX_VERSION).then(|| AbortedTxnEntry {
            producer_id: field(2),
            first_offset: field(10),
            last_offset: field(18),
            last_stable_offset: field(26),
        })
    }
}

/// What a read_committed consumer needs of an aborted transaction
/// (FetchResponse's `aborted_transactions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first record.
    pub first_offset: i64,
}

/// The aborted-transaction index of one segment.
#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    entries: Vec<AbortedTxnEntry>,
    /// Open for appends once the file exists.
    file: Option<File>,
}

impl TransactionIndex {
    /// An index with no entries at `path`; an existing file there is removed.
    pub fn create(path: &Path) -> Result<TransactionIndex, IoError> {
        crate::error::remove_file_if_exists(path)?;
        Ok(TransactionIndex {
            path: path.to_path_buf(),
            entries: Vec::new(),
            file: None,
        })
    }

    /// Reads the index at `path` (no file: no entries). A size that is not
    /// a multiple of [`TXN_INDEX_ENTRY_BYTES`] or an unknown entry version
    /// is [`IndexError::Corrupt`].
    pub fn open(path: &Path) -> Result<TransactionIndex, IndexError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(IndexError::Io(IoError {
                    path: path.to_path_buf(),
                    source,
                }))
            }
        };
        let corrupt = |reason| IndexError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() % TXN_INDEX_ENTRY_BYTES != 0 {
            return Err(corrupt("size is not a multiple of the 34-byte entry"));
        }
        let mut entries = Vec::with_capacity(bytes.len() / TXN_INDEX_ENTRY_BYTES);
        for raw in bytes.chunks_exact(TXN_INDEX_ENTRY_BYTES) {
            let mut entry = [0u8; TXN_INDEX_ENTRY_BYTES];
            entry.copy_from_slice(raw);
            entries
                .push(AbortedTxnEntry::from_bytes(&entry).ok_or(corrupt("unknown entry version"))?);
        }
        Ok(TransactionIndex {
            path: path.to_path_buf(),
            entries,
            file: None,
        })
    }

    /// The file's path (it exists only once an entry was written).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, in marker order.
    pub fn entries(&self) -> &[AbortedTxnEntry] {
        &self.entries
    }

    /// Whether the index holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends `entry` (its marker follows every indexed one) to the file.
    pub fn append(&mut self, entry: AbortedTxnEntry) -> Result<(), IoError> {
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|last| last.last_offset < entry.last_offset));
        if self.file.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .at(&self.path)?;
            self.file = Some(file);
        }
        if let Some(file) = &mut self.file {
            file.write_all(&entry.to_bytes()).at(&self.path)?;
        }
        self.entries.push(entry);
        Ok(())
    }

    /// Drops the entries whose marker is at or after `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), IoError> {
        let kept = self
            .entries
            .iter()
            .take_while(|entry| entry.last_offset < offset)
            .count();
        if kept == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(kept);
        self.rewrite_length()
    }

    /// Drops every entry (the segment is being rebuilt).
    pub fn reset(&mut self) -> Result<(), IoError> {
        self.entries.clear();
        self.file = None;
        crate::error::remove_file_if_exists(&self.path)
    }

    /// Cuts the file to the entries kept in memory.
    fn rewrite_length(&mut self) -> Result<(), IoError> {
        let length = (self.entries.len() * TXN_INDEX_ENTRY_BYTES) as u64;
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .at(&self.path)?;
        file.set_len(length).at(&self.path)?;
        self.file = None;
        Ok(())
    }

    /// Fsyncs the file, if it exists.
    pub fn flush(&self) -> Result<(), IoError> {
        if let Some(file) = &self.file {
            file.sync_data().at(&self.path)?;
        }
        Ok(())
    }

    /// Moves the file (if it exists) to `target`; returns whether it existed.
    pub fn rename(&mut self, target: &Path) -> Result<bool, IoError> {
        let moved = match std::fs::rename(&self.path, target) {
            Ok(()) => true,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(IoError {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        self.path = target.to_path_buf();
        Ok(moved)
    }

    /// Adds to `out` the aborted transactions that overlap
    /// `[start_offset, upper_bound_offset)` (marker at or after the start,
    /// first record before the bound). Returns `true` when no later index
    /// can hold one: an entry whose last stable offset reaches the bound
    /// means every later abort began at or after the bound (Kafka's
    /// `TransactionIndex.collectAbortedTxns`).
    pub fn collect(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTransaction>,
    ) -> bool {
        for entry in &self.entries {
            if entry.last_offset >= start_offset && entry.first_offset < upper_bound_offset {
                out.push(AbortedTransaction {
                    producer_id: entry.producer_id,
                    first_offset: entry.first_offset,
                });
            }
            if entry.last_stable_offset >= upper_bound_offset {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
#[path = "txn_index_tests.rs"]
mod tests;
