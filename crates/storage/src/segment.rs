//! One segment: a `.log` file of record batches, its two sparse indexes
//! and its aborted-transaction index.
//!
//! Files are named by the segment's base offset as 20 zero-padded digits
//! (`00000000000000000000.log`, `.index`, `.timeindex`, and `.txnindex`
//! once a transaction was aborted in the segment). Writes are
//! positional (`pwrite`) at the segment's valid size, so truncation is a
//! `set_len` and concurrent readers holding the shared file handle see only
//! whole appends below the size they were given.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::FileBackend;
use crate::batch::{BatchHeader, BATCH_HEADER_BYTES};
use crate::error::{BatchError, IndexError, IoContext, IoError, RecoveryError};
use crate::index::{OffsetIndex, TimeIndex};
use crate::txn_index::{AbortedTxnEntry, TransactionIndex, TXN_INDEX_SUFFIX};

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_SUFFIX: &str = ".index";
/// Suffix of time index files.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Suffix of files waiting for asynchronous deletion.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Chunk size used when re-validating batches during recovery.
const RECOVERY_CHUNK_BYTES: usize = 64 * 1024;

/// The file name stem of a segment: its base offset as 20 digits.
pub fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// Parses a 20-digit base offset from a segment file name with `suffix`.
pub fn parse_base_offset(file_name: &str, suffix: &str) -> Option<i64> {
    let stem = file_name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Where a batch sits in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLocation {
    /// Byte position in the `.log` file.
    pub position: u64,
    /// The batch header.
    pub header: BatchHeader,
}

/// Bytes read at once while walking batch headers: a tail read scans up to
/// `index.interval.bytes` (4 KiB by default) past its index entry.
const HEADER_SCAN_CHUNK_BYTES: usize = 8 * 1024;

/// The batches of a segment from a position on; see [`Segment::batches_from`].
#[derive(Debug)]
pub struct BatchCursor<'a> {
    segment: &'a Segment,
    position: u64,
    /// File bytes `chunk_start..chunk_start + chunk.len()`.
    chunk: Vec<u8>,
    chunk_start: u64,
    /// Bytes read at once (at least one header).
    chunk_bytes: usize,
}

impl BatchCursor<'_> {
    /// The batch at the cursor's position, moving past it; `None` at the
    /// end of the segment. Errors as [`Segment::batch_at`] does (the cursor
    /// does not move on an error).
    pub fn next_batch(&mut self) -> Result<Option<BatchLocation>, BatchError> {
        let size_bytes = self.segment.size_bytes;
        let position = self.position;
        if position >= size_bytes {
            return Ok(None);
        }
        let at = position as usize;
        if size_bytes - position < BATCH_HEADER_BYTES as u64 {
            return Err(BatchError::Truncated { position: at });
        }
        let header_bytes = self.header_bytes(position, size_bytes)?;
        let header = crate::batch::parse_header(header_bytes, at)?;
        let batch_bytes = header.size_in_bytes() as u64;
        if position + batch_bytes > size_bytes {
            return Err(BatchError::Truncated { position: at });
        }
        self.position = position + batch_bytes;
        Ok(Some(BatchLocation { position, header }))
    }

    /// The header bytes at `position`, from the chunk or a new read.
    fn header_bytes(&mut self, position: u64, size_bytes: u64) -> Result<&[u8], BatchError> {
        let chunk_end = self.chunk_start + self.chunk.len() as u64;
        let cached =
            position >= self.chunk_start && position + BATCH_HEADER_BYTES as u64 <= chunk_end;
        if !cached {
            let length = (size_bytes - position).min(self.chunk_bytes as u64) as usize;
            self.chunk.resize(length, 0);
            self.chunk_start = position;
            if self
                .segment
                .file
                .read_exact_at(&mut self.chunk, position)
                .is_err()
            {
                self.chunk.clear();
                return Err(BatchError::Truncated {
                    position: position as usize,
                });
            }
        }
        let offset = (position - self.chunk_start) as usize;
        self.chunk
            .get(offset..offset + BATCH_HEADER_BYTES)
            .ok_or(BatchError::Truncated {
                position: position as usize,
            })
    }
}

/// Segment-level settings: indexing and the file backend.
#[derive(Debug, Clone)]
pub struct SegmentSettings {
    /// `segment.index.bytes`.
    pub index_bytes: u32,
    /// `index.interval.bytes`.
    pub index_interval_bytes: u32,
    /// Where data writes, syncs and truncations go.
    pub backend: Arc<dyn FileBackend>,
}

/// A segment of a partition log.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    file: Arc<File>,
    size_bytes: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    settings: SegmentSettings,
    bytes_since_last_index_entry: u64,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    created_ms: i64,
}

fn index_paths(dir: &Path, base_offset: i64, suffix: &str) -> (PathBuf, PathBuf, PathBuf) {
    let stem = file_stem(base_offset);
    (
        dir.join(format!("{stem}{LOG_SUFFIX}{suffix}")),
        dir.join(format!("{stem}{INDEX_SUFFIX}{suffix}")),
        dir.join(format!("{stem}{TIME_INDEX_SUFFIX}{suffix}")),
    )
}

fn txn_index_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{TXN_INDEX_SUFFIX}{suffix}",
        file_stem(base_offset)
    ))
}

impl Segment {
    /// Creates a new, empty segment (files are created, existing ones truncated).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        settings: SegmentSettings,
        now_ms: i64,
    ) -> Result<Segment, IndexError> {
        Segment::create_with_suffix(dir, base_offset, settings, now_ms, "")
    }

    /// Creates a new, empty segment whose file names end in `suffix`
    /// (e.g. `.cleaned` for compaction output).
    pub fn create_with_suffix(
        dir: &Path,
        base_offset: i64,
        settings: SegmentSettings,
        now_ms: i64,
        suffix: &str,
    ) -> Result<Segment, IndexError> {
        let (log_path, index_path, time_index_path) = index_paths(dir, base_offset, suffix);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)
            .at(&log_path)?;
        for path in [&index_path, &time_index_path] {
            crate::error::remove_file_if_exists(path)?;
        }
        let offset_index = OffsetIndex::open(&index_path, base_offset, settings.index_bytes)?;
        let time_index = TimeIndex::open(&time_index_path, base_offset, settings.index_bytes)?;
        let txn_index = TransactionIndex::create(&txn_index_path(dir, base_offset, suffix))?;
        Ok(Segment {
            base_offset,
            log_path,
            file: Arc::new(file),
            size_bytes: 0,
            offset_index,
            time_index,
            txn_index,
            settings,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            created_ms: now_ms,
        })
    }

    /// Opens an existing segment. Indexes that are missing or fail their
    /// structural check are reported through the returned flag so the caller
    /// can rebuild them with [`Segment::recover`]; a corrupt transaction
    /// index is emptied and reported the same way (the log rebuilds it
    /// from the markers, see [`Segment::reset_txn_index`]).
    pub fn open(
        dir: &Path,
        base_offset: i64,
        settings: SegmentSettings,
        now_ms: i64,
    ) -> Result<(Segment, bool), IndexError> {
        let (log_path, index_path, time_index_path) = index_paths(dir, base_offset, "");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .at(&log_path)?;
        let size_bytes = file.metadata().at(&log_path)?.len();
        let mut needs_rebuild = !index_path.exists() || !time_index_path.exists();
        let (offset_index, time_index) = match (
            OffsetIndex::open(&index_path, base_offset, 0),
            TimeIndex::open(&time_index_path, base_offset, 0),
        ) {
            (Ok(offsets), Ok(times)) => (offsets, times),
            (Err(IndexError::Corrupt { .. }), _) | (_, Err(IndexError::Corrupt { .. })) => {
                needs_rebuild = true;
                std::fs::remove_file(&index_path).ok();
                std::fs::remove_file(&time_index_path).ok();
                (
                    OffsetIndex::open(&index_path, base_offset, 0)?,
                    TimeIndex::open(&time_index_path, base_offset, 0)?,
                )
            }
            (Err(error), _) | (_, Err(error)) => return Err(error),
        };
        let txn_path = txn_index_path(dir, base_offset, "");
        let txn_index = match TransactionIndex::open(&txn_path) {
            Ok(index) => index,
            Err(IndexError::Corrupt { .. }) => {
                needs_rebuild = true;
                TransactionIndex::create(&txn_path)?
            }
            Err(error) => return Err(error),
        };
        let mut segment = Segment {
            base_offset,
            log_path,
            file: Arc::new(file),
            size_bytes,
            offset_index,
            time_index,
            txn_index,
            settings,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            created_ms: now_ms,
        };
        if !needs_rebuild {
            needs_rebuild = segment.load_tail_state().is_err();
        }
        Ok((segment, needs_rebuild))
    }

    /// Reads the state not kept in the indexes (next offset, max timestamp)
    /// by scanning from the last index entry; fails if the indexes disagree
    /// with the log.
    fn load_tail_state(&mut self) -> Result<(), IndexError> {
        self.offset_index.sanity_check(self.size_bytes)?;
        let start = self
            .offset_index
            .last_entry()
            .map_or(0, |entry| entry.position);
        let mut next_offset = self.base_offset;
        if let Some(last) = self.offset_index.last_entry() {
            next_offset = last.offset + 1;
        }
        let mut position = u64::from(start);
        let mut bytes_since_index = 0u64;
        while let Ok(Some(location)) = self.batch_at(position) {
            next_offset = location.header.next_offset();
            if location.header.max_timestamp > self.max_timestamp {
                self.max_timestamp = location.header.max_timestamp;
                self.offset_of_max_timestamp = location.header.last_offset();
            }
            position += location.header.size_in_bytes() as u64;
            bytes_since_index += location.header.size_in_bytes() as u64;
        }
        if position != self.size_bytes {
            return Err(IndexError::Corrupt {
                path: self.log_path.clone(),
                reason: "log tail does not end on a batch boundary",
            });
        }
        self.next_offset = next_offset;
        self.time_index.sanity_check(next_offset)?;
        if let Some(last) = self.time_index.last_entry() {
            if last.timestamp > self.max_timestamp {
                self.max_timestamp = last.timestamp;
                self.offset_of_max_timestamp = last.offset;
            }
        }
        self.bytes_since_last_index_entry = bytes_since_index;
        Ok(())
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Valid bytes in the `.log` file.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Offset after the last batch (the base offset when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Largest batch max timestamp, or -1 when no batch carries one.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Offset of the batch with the largest timestamp (batch granularity).
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// When the segment was created or loaded (for `segment.ms`).
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The shared `.log` file handle (for zero-copy reads).
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// The offset index.
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    /// The time index.
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    /// The aborted-transaction index.
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// Records a transaction aborted by a marker in this segment.
    pub fn append_aborted_txn(&mut self, entry: AbortedTxnEntry) -> Result<(), IoError> {
        self.txn_index.append(entry)
    }

    /// Empties the aborted-transaction index, for the log to rebuild it
    /// from the segment's markers (after [`Segment::recover`]).
    pub fn reset_txn_index(&mut self) -> Result<(), IoError> {
        self.txn_index.reset()
    }

    /// Whether either index is full.
    pub fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Whether the segment holds no batch.
    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// The batch header at `position`, or `None` at (or past) the end.
    /// A header that is cut off or implausible is an error.
    pub fn batch_at(&self, position: u64) -> Result<Option<BatchLocation>, BatchError> {
        // One header's bytes read, no chunk.
        BatchCursor {
            segment: self,
            position,
            chunk: Vec::new(),
            chunk_start: 0,
            chunk_bytes: BATCH_HEADER_BYTES,
        }
        .next_batch()
    }

    /// The first batch whose last offset is `>= offset`, starting the scan at
    /// the index entry below it.
    pub fn find_batch(&self, offset: i64) -> Result<Option<BatchLocation>, BatchError> {
        let mut cursor = self.batches_from(u64::from(self.offset_index.lookup(offset).position));
        while let Some(location) = cursor.next_batch()? {
            if location.header.last_offset() >= offset {
                return Ok(Some(location));
            }
        }
        Ok(None)
    }

    /// Walks the batch headers from `position` (a batch boundary) like
    /// repeated [`Segment::batch_at`] calls, reading the file in chunks
    /// rather than one small read per batch.
    pub fn batches_from(&self, position: u64) -> BatchCursor<'_> {
        BatchCursor {
            segment: self,
            position,
            chunk: Vec::new(),
            chunk_start: 0,
            chunk_bytes: HEADER_SCAN_CHUNK_BYTES,
        }
    }

    /// Appends already-validated batches (`bytes`), described by `batches`
    /// (header and position inside `bytes`), indexing every
    /// `index.interval.bytes`.
    pub fn append(
        &mut self,
        bytes: &[u8],
        batches: &[(BatchHeader, usize)],
    ) -> Result<(), IoError> {
        self.append_parts(&[bytes], batches)
    }

    /// Like [`Segment::append`] for batches given as consecutive `parts`
    /// (positions in `batches` count from the start of the first part).
    /// Nothing counts as written unless every part is.
    pub fn append_parts(
        &mut self,
        parts: &[&[u8]],
        batches: &[(BatchHeader, usize)],
    ) -> Result<(), IoError> {
        let mut position = self.size_bytes;
        for part in parts {
            self.settings
                .backend
                .write_all_at(&self.log_path, &self.file, part, position)
                .at(&self.log_path)?;
            position += part.len() as u64;
        }
        self.index_batches(self.size_bytes, batches);
        self.size_bytes = position;
        Ok(())
    }

    /// Fsyncs the `.log` file and flushes both index maps.
    pub fn flush(&self) -> Result<(), IndexError> {
        self.settings
            .backend
            .sync_data(&self.log_path, &self.file)
            .at(&self.log_path)?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()?;
        Ok(())
    }

    /// Seals the segment when a new one is rolled: records the final time
    /// index entry and trims both indexes to their entries.
    pub fn seal(&mut self) -> Result<(), IndexError> {
        // A failed (torn) append may have left bytes past the valid size.
        if self.file.metadata().at(&self.log_path)?.len() > self.size_bytes {
            self.settings
                .backend
                .set_len(&self.log_path, &self.file, self.size_bytes)
                .at(&self.log_path)?;
        }
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.offset_index.trim()?;
        self.time_index.trim()?;
        Ok(())
    }

    /// Grows the indexes back to `segment.index.bytes` (the active segment).
    pub fn make_active(&mut self) -> Result<(), IndexError> {
        self.offset_index.resize(self.settings.index_bytes)?;
        self.time_index.resize(self.settings.index_bytes)?;
        Ok(())
    }

    /// Re-validates every batch (header, size, CRC, increasing offsets no
    /// lower than `expected_offset`), rebuilds both indexes, and truncates
    /// the file at the first invalid byte. Returns the bytes removed. The
    /// indexes are left at full size; [`Segment::seal`] trims them.
    pub fn recover(&mut self, expected_offset: i64) -> Result<u64, IndexError> {
        self.make_active()?;
        self.offset_index.reset();
        self.time_index.reset();
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.next_offset = self.base_offset;
        let file_bytes = self.file.metadata().at(&self.log_path)?.len();
        self.size_bytes = file_bytes;
        let mut position = 0u64;
        let mut expected = expected_offset.max(self.base_offset);
        let mut buffer = vec![0u8; RECOVERY_CHUNK_BYTES];
        while let Ok(Some(location)) = self.batch_at(position) {
            let header = location.header;
            let relative = header.last_offset() - self.base_offset;
            if header.base_offset < expected || relative > i64::from(u32::MAX) {
                break;
            }
            if !self.crc_matches(position, &header, &mut buffer) {
                break;
            }
            let batch_bytes = header.size_in_bytes() as u64;
            let single = [(header, 0usize)];
            self.index_batches(position, &single);
            expected = header.next_offset();
            position += batch_bytes;
        }
        let removed = file_bytes - position;
        if removed > 0 {
            self.settings
                .backend
                .set_len(&self.log_path, &self.file, position)
                .at(&self.log_path)?;
        }
        self.size_bytes = position;
        Ok(removed)
    }

    /// Index bookkeeping for batches already in the file at `start`.
    fn index_batches(&mut self, start: u64, batches: &[(BatchHeader, usize)]) {
        for (header, position) in batches {
            if header.max_timestamp > self.max_timestamp {
                self.max_timestamp = header.max_timestamp;
                self.offset_of_max_timestamp = header.last_offset();
            }
            if self.bytes_since_last_index_entry > u64::from(self.settings.index_interval_bytes) {
                self.offset_index
                    .append(header.last_offset(), (start + *position as u64) as u32);
                self.time_index
                    .maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
                self.bytes_since_last_index_entry = 0;
            }
            self.bytes_since_last_index_entry += header.size_in_bytes() as u64;
            self.next_offset = header.next_offset();
        }
    }

    /// Streams the batch at `position` through CRC-32C in chunks (no
    /// allocation sized by the untrusted length field).
    fn crc_matches(&self, position: u64, header: &BatchHeader, buffer: &mut [u8]) -> bool {
        let end = position + header.size_in_bytes() as u64;
        let mut at = position + 21;
        let mut crc = 0u32;
        while at < end {
            let chunk = ((end - at) as usize).min(buffer.len());
            if self.file.read_exact_at(&mut buffer[..chunk], at).is_err() {
                return false;
            }
            crc = strom_protocol::crc::crc32c_append(crc, &buffer[..chunk]);
            at += chunk as u64;
        }
        crc == header.crc
    }

    /// Removes every batch whose last offset is `>= offset` (a batch that
    /// straddles `offset` goes too). Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, IndexError> {
        let position = match self.find_batch(offset) {
            Ok(Some(location)) => location.position,
            Ok(None) => return Ok(0),
            Err(_) => self.size_bytes,
        };
        let removed = self.size_bytes - position;
        self.settings
            .backend
            .set_len(&self.log_path, &self.file, position)
            .at(&self.log_path)?;
        self.size_bytes = position;
        self.offset_index.truncate_to(offset);
        self.time_index.truncate_to(offset);
        self.txn_index.truncate_to(offset)?;
        // Rescan the tail to restore next offset and max timestamp.
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.load_tail_state()
            .or_else(|_| self.recover(self.base_offset).map(|_| ()))?;
        Ok(removed)
    }

    /// Renames the segment's files to `<base>.<kind><suffix>` (an empty
    /// suffix gives the live names) and returns the new paths (the
    /// `.txnindex` one only if that file exists). Index files move
    /// first and the `.log` last, so a crash in between is recognised by the
    /// `.log` name alone.
    pub fn set_suffix(&mut self, suffix: &str) -> Result<Vec<PathBuf>, IndexError> {
        let dir = self
            .log_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let stem = file_stem(self.base_offset);
        let index_target = dir.join(format!("{stem}{INDEX_SUFFIX}{suffix}"));
        self.offset_index.rename(&index_target)?;
        let time_target = dir.join(format!("{stem}{TIME_INDEX_SUFFIX}{suffix}"));
        self.time_index.rename(&time_target)?;
        let txn_target = txn_index_path(&dir, self.base_offset, suffix);
        let txn_moved = self.txn_index.rename(&txn_target)?;
        let log_target = dir.join(format!("{stem}{LOG_SUFFIX}{suffix}"));
        std::fs::rename(&self.log_path, &log_target).at(&self.log_path)?;
        self.log_path = log_target.clone();
        let mut paths = vec![log_target, index_target, time_target];
        if txn_moved {
            paths.push(txn_target);
        }
        Ok(paths)
    }
}

/// Deletes a segment's files (missing ones are fine).
pub(crate) fn remove_segment_files(dir: &Path, base_offset: i64) -> Result<(), RecoveryError> {
    let stem = file_stem(base_offset);
    for suffix in [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ] {
        let path: PathBuf = dir.join(format!("{stem}{suffix}"));
        crate::error::remove_file_if_exists(&path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::OsBackend;
    use crate::batch::validate_batch_at;
    use crate::testing::{simple_batch, BatchSpec};

    fn settings() -> SegmentSettings {
        SegmentSettings {
            index_bytes: 1024 * 1024,
            index_interval_bytes: 4096,
            backend: Arc::new(OsBackend),
        }
    }

    /// Every batch by repeated `batch_at`, and the error that ends the walk.
    fn walk_by_single_reads(segment: &Segment) -> (Vec<BatchLocation>, Option<BatchError>) {
        let mut found = Vec::new();
        let mut position = 0;
        loop {
            match segment.batch_at(position) {
                Ok(Some(location)) => {
                    position += location.header.size_in_bytes() as u64;
                    found.push(location);
                }
                Ok(None) => return (found, None),
                Err(error) => return (found, Some(error)),
            }
        }
    }

    fn walk_by_cursor(segment: &Segment) -> (Vec<BatchLocation>, Option<BatchError>) {
        let mut found = Vec::new();
        let mut cursor = segment.batches_from(0);
        loop {
            match cursor.next_batch() {
                Ok(Some(location)) => found.push(location),
                Ok(None) => return (found, None),
                Err(error) => return (found, Some(error)),
            }
        }
    }

    #[test]
    fn the_cursor_walks_the_same_batches_as_single_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segment = Segment::create(dir.path(), 0, settings(), 0).expect("create");
        // Small batches, batches larger than a read chunk, and batches that
        // straddle chunk boundaries.
        let mut offset = 0;
        for (index, (records, value_bytes)) in [(1, 10), (3, 5_000), (1, 100), (2, 9_000)]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            let bytes = simple_batch(&BatchSpec {
                base_offset: offset,
                records: *records,
                base_timestamp: index as i64,
                value_bytes: *value_bytes,
                ..BatchSpec::default()
            });
            let header = validate_batch_at(&bytes, 0).expect("valid batch");
            segment.append(&bytes, &[(header, 0)]).expect("append");
            offset = header.next_offset();
        }
        let (expected, end) = walk_by_single_reads(&segment);
        assert_eq!(expected.len(), 40);
        assert!(end.is_none());
        assert_eq!(walk_by_cursor(&segment), (expected.clone(), None));
        // A start in the middle sees the rest.
        let mut cursor = segment.batches_from(expected[17].position);
        assert_eq!(cursor.next_batch().expect("batch"), Some(expected[17]));
        assert_eq!(cursor.next_batch().expect("batch"), Some(expected[18]));
    }

    #[test]
    fn the_cursor_reports_a_torn_tail_where_single_reads_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut segment = Segment::create(dir.path(), 0, settings(), 0).expect("create");
        let mut offset = 0;
        for _ in 0..5 {
            let bytes = simple_batch(&BatchSpec {
                base_offset: offset,
                records: 2,
                value_bytes: 300,
                ..BatchSpec::default()
            });
            let header = validate_batch_at(&bytes, 0).expect("valid batch");
            segment.append(&bytes, &[(header, 0)]).expect("append");
            offset = header.next_offset();
        }
        // The segment claims more bytes than its last batch holds: a batch
        // cut short after its header.
        let full = segment.size_bytes();
        segment.size_bytes = full - 50;
        let (single, single_end) = walk_by_single_reads(&segment);
        let (cursor, cursor_end) = walk_by_cursor(&segment);
        assert_eq!(single.len(), 4);
        assert_eq!(cursor, single);
        assert_eq!(
            cursor_end.map(|error| error.to_string()),
            single_end.map(|error| error.to_string())
        );
    }
}
