//! A fixed-entry-size file, memory-mapped and preallocated: the storage
//! under both index kinds.
//!
//! The file is grown to its maximum size when it is writable (so appends are
//! plain memory stores) and trimmed to the bytes of its valid entries when it
//! is sealed or closed, which is the length Kafka's tools expect. The file
//! descriptor is closed once the map exists; resizing reopens the file by path.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{IndexError, IoContext, IoError};

/// A memory-mapped file of fixed-size entries.
#[derive(Debug)]
pub(crate) struct MappedEntries {
    path: PathBuf,
    map: MmapMut,
    entry_bytes: usize,
    entries: usize,
}

fn map_file(path: &Path, length: usize) -> Result<MmapMut, IndexError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .at(path)?;
    file.set_len(length as u64).at(path)?;
    // SAFETY: the index file belongs to this partition directory, which the
    // log manager's lock file reserves for this process; nothing else writes
    // or truncates it while the map exists (the log owns the only map and
    // unmaps before any resize). The map's length equals the file length set
    // just above.
    let map = unsafe { MmapMut::map_mut(&file) }.at(path)?;
    // No read-ahead on faults: the file is mostly preallocated holes, and the
    // first touch of an entry page would otherwise read ahead (zero-fill) a
    // large run of pages past it. Only advice: a failure changes nothing but
    // speed, so it is ignored.
    let _ = map.advise(memmap2::Advice::Random);
    Ok(map)
}

impl MappedEntries {
    /// Opens (or creates) `path`. Existing files keep their whole entries;
    /// the file is then sized for `max_bytes` (rounded down to whole entries,
    /// and never below the existing entries).
    pub(crate) fn open(
        path: &Path,
        entry_bytes: usize,
        max_bytes: usize,
    ) -> Result<MappedEntries, IndexError> {
        let existing_bytes = match std::fs::metadata(path) {
            Ok(metadata) => metadata.len() as usize,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(IndexError::Io(IoError {
                    path: path.to_path_buf(),
                    source,
                }))
            }
        };
        if existing_bytes % entry_bytes != 0 {
            return Err(IndexError::Corrupt {
                path: path.to_path_buf(),
                reason: "file length is not a whole number of entries",
            });
        }
        let entries = existing_bytes / entry_bytes;
        let length = (max_bytes / entry_bytes).max(entries) * entry_bytes;
        let map = map_file(path, length)?;
        Ok(MappedEntries {
            path: path.to_path_buf(),
            map,
            entry_bytes,
            entries,
        })
    }

    /// The file path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Number of valid entries.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// Whether no further entry fits in the mapping (one more entry would
    /// pass its end; no division, as this is asked on every append).
    pub(crate) fn is_full(&self) -> bool {
        self.entries
            .checked_add(1)
            .and_then(|next| next.checked_mul(self.entry_bytes))
            .is_none_or(|needed| needed > self.map.len())
    }

    /// The bytes of entry `index`, if it is valid.
    pub(crate) fn entry(&self, index: usize) -> Option<&[u8]> {
        if index >= self.entries {
            return None;
        }
        let start = index * self.entry_bytes;
        self.map.get(start..start + self.entry_bytes)
    }

    /// Appends one entry; returns `false` when the file is full.
    pub(crate) fn push(&mut self, entry: &[u8]) -> bool {
        debug_assert_eq!(entry.len(), self.entry_bytes);
        if self.is_full() {
            return false;
        }
        let start = self.entries * self.entry_bytes;
        self.map[start..start + self.entry_bytes].copy_from_slice(entry);
        self.entries += 1;
        true
    }

    /// Forgets entries from `entries` on (they are zeroed).
    pub(crate) fn truncate_entries(&mut self, entries: usize) {
        if entries < self.entries {
            let start = entries * self.entry_bytes;
            let end = self.entries * self.entry_bytes;
            self.map[start..end].fill(0);
            self.entries = entries;
        }
    }

    /// Writes dirty pages to disk.
    pub(crate) fn flush(&self) -> Result<(), IndexError> {
        self.map.flush().at(&self.path)?;
        Ok(())
    }

    /// Resizes the file to hold `max_bytes` (never fewer than the valid entries).
    pub(crate) fn resize(&mut self, max_bytes: usize) -> Result<(), IndexError> {
        let length = (max_bytes / self.entry_bytes).max(self.entries) * self.entry_bytes;
        if length == self.map.len() {
            return Ok(());
        }
        // No msync first: the pages of a shared map stay in the page cache
        // (dirty until written back) when it is unmapped, so nothing is
        // lost, and a resize happens in a roll, on the append path. Making
        // them durable is the flush's job (`Segment::flush`, or the
        // background flush of a roll, which syncs the index files).
        // Replace the map with an empty anonymous one first so the file is
        // unmapped before its length changes.
        self.map = MmapMut::map_anon(0).at(&self.path)?;
        self.map = map_file(&self.path, length)?;
        Ok(())
    }

    /// Trims the file to exactly its valid entries.
    pub(crate) fn trim(&mut self) -> Result<(), IndexError> {
        self.resize(self.entries * self.entry_bytes)
    }

    /// Renames the file (the map stays valid).
    pub(crate) fn rename(&mut self, to: &Path) -> Result<(), IndexError> {
        std::fs::rename(&self.path, to).at(&self.path)?;
        self.path = to.to_path_buf();
        Ok(())
    }
}
