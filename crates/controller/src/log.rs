//! The durable metadata log and its snapshot.
//!
//! A directory holds two files:
//!
//! - `metadata.log`: append-only frames, one per committed batch of
//!   records. A frame is `length: u32 BE | crc32c: u32 BE | payload`, where
//!   the payload is a `prost`-encoded [`MetadataBatch`] (base offset and
//!   records) of `length` bytes and the CRC-32C (Castagnoli) covers the
//!   payload. Every append is written in one `write` and `fsync`ed
//!   (`sync_data`) before it returns.
//! - `metadata.snapshot`: `magic "STROMSNP" | version: u32 BE (1) |
//!   length: u64 BE | crc32c: u32 BE | payload`, the payload a
//!   [`MetadataSnapshot`] (last included offset and the records that
//!   rebuild the image). It is written to `metadata.snapshot.tmp`,
//!   `fsync`ed, renamed over the old snapshot and the directory `fsync`ed;
//!   only then is the log truncated to empty.
//!
//! # Recovery
//!
//! Replay reads the log file whole; its size is bounded by the snapshot
//! interval, since every snapshot empties it.
//!
//! [`MetadataLog::open`] loads the snapshot (if any), then replays the log,
//! skipping batches the snapshot already covers. A damaged *last* frame
//! (a header cut short, a payload running past the end of the file, a CRC
//! mismatch on the frame that ends the file, or a zero-filled tail) is a
//! torn write: the file is truncated before it and recovery succeeds; the batch
//! was never acknowledged because its `fsync` did not complete. A CRC
//! mismatch with more frames after it cannot be a torn write and is an
//! error, as are offset gaps, a log that starts after offset 0 with no
//! snapshot, and a damaged snapshot: the controller refuses to start rather
//! than serve metadata with a hole in it. (One corruption recovery cannot
//! tell from a torn write: a damaged length field that points past the end
//! of the file. Kafka's log has the same blind spot.)

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use prost::Message as _;

use crate::error::{LogError, SnapshotProblem};
use crate::image::MetadataImage;
use crate::records::{MetadataBatch, MetadataRecord, MetadataSnapshot};

/// File name of the log inside the metadata directory.
pub const LOG_FILE_NAME: &str = "metadata.log";
/// File name of the snapshot inside the metadata directory.
pub const SNAPSHOT_FILE_NAME: &str = "metadata.snapshot";
/// File name of a snapshot being written.
pub const SNAPSHOT_TEMP_FILE_NAME: &str = "metadata.snapshot.tmp";
/// Largest frame payload accepted, in bytes.
pub const MAX_FRAME_BYTES: u64 = 64 * 1024 * 1024;

const FRAME_HEADER_BYTES: usize = 8;
const SNAPSHOT_MAGIC: &[u8; 8] = b"STROMSNP";
const SNAPSHOT_FORMAT_VERSION: u32 = 1;
const SNAPSHOT_HEADER_BYTES: usize = 8 + 4 + 8 + 4;

/// What recovery found when opening the log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecoveryReport {
    /// Last offset covered by the snapshot, if one was loaded.
    pub snapshot_offset: Option<u64>,
    /// Batches replayed from the log (not counting skipped ones).
    pub replayed_batches: usize,
    /// Bytes of torn tail removed from the log.
    pub truncated_bytes: u64,
}

/// The durable metadata log, open for appending.
#[derive(Debug)]
pub struct MetadataLog {
    directory: PathBuf,
    log_path: PathBuf,
    file: File,
    next_offset: u64,
    records_since_snapshot: u64,
}

impl MetadataLog {
    /// Opens (creating if needed) the log in `directory` and rebuilds the
    /// image from the snapshot and the log.
    pub fn open(directory: &Path) -> Result<(Self, MetadataImage, RecoveryReport), LogError> {
        fs::create_dir_all(directory).map_err(io_error(directory))?;
        remove_stale_temp(directory)?;
        let mut report = RecoveryReport::default();
        let snapshot_path = directory.join(SNAPSHOT_FILE_NAME);
        let mut image = read_snapshot(&snapshot_path)?;
        report.snapshot_offset = image.last_offset();
        let log_path = directory.join(LOG_FILE_NAME);
        let replay = replay_log(&log_path, &mut image)?;
        report.replayed_batches = replay.replayed_batches;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_error(&log_path))?;
        let file_length = file.metadata().map_err(io_error(&log_path))?.len();
        if file_length > replay.valid_bytes {
            report.truncated_bytes = file_length - replay.valid_bytes;
            file.set_len(replay.valid_bytes)
                .map_err(io_error(&log_path))?;
            file.sync_all().map_err(io_error(&log_path))?;
            tracing::warn!(path = %log_path.display(), bytes = report.truncated_bytes, "truncated torn tail of the metadata log");
        }
        sync_directory(directory)?;
        let log = Self {
            directory: directory.to_path_buf(),
            log_path,
            file,
            next_offset: image.next_offset(),
            records_since_snapshot: replay.replayed_records,
        };
        Ok((log, image, report))
    }

    /// The offset the next appended record gets.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Records appended (or replayed) since the last snapshot.
    pub fn records_since_snapshot(&self) -> u64 {
        self.records_since_snapshot
    }

    /// Appends `records` as one batch and `fsync`s it; returns the offset
    /// of the first record. An empty slice appends nothing.
    pub fn append(&mut self, records: &[MetadataRecord]) -> Result<u64, LogError> {
        let base_offset = self.next_offset;
        if records.is_empty() {
            return Ok(base_offset);
        }
        let batch = MetadataBatch {
            base_offset,
            records: records.to_vec(),
        };
        let frame = encode_frame(&batch.encode_to_vec())?;
        self.file
            .write_all(&frame)
            .map_err(io_error(&self.log_path))?;
        self.file.sync_data().map_err(io_error(&self.log_path))?;
        let count = u64::try_from(records.len()).unwrap_or(u64::MAX);
        self.next_offset = base_offset.saturating_add(count);
        self.records_since_snapshot = self.records_since_snapshot.saturating_add(count);
        Ok(base_offset)
    }

    /// Writes `image` as the snapshot and empties the log. The image must
    /// include every appended record.
    pub fn write_snapshot(&mut self, image: &MetadataImage) -> Result<(), LogError> {
        let Some(last_offset) = image.last_offset() else {
            return Ok(());
        };
        debug_assert_eq!(
            image.next_offset(),
            self.next_offset,
            "snapshot of a stale image"
        );
        let snapshot = MetadataSnapshot {
            last_offset,
            records: image.to_snapshot_records(),
        };
        let temp_path = self.directory.join(SNAPSHOT_TEMP_FILE_NAME);
        let final_path = self.directory.join(SNAPSHOT_FILE_NAME);
        write_synced(&temp_path, &encode_snapshot(&snapshot.encode_to_vec()))?;
        fs::rename(&temp_path, &final_path).map_err(io_error(&final_path))?;
        sync_directory(&self.directory)?;
        self.file.set_len(0).map_err(io_error(&self.log_path))?;
        self.file.sync_all().map_err(io_error(&self.log_path))?;
        self.records_since_snapshot = 0;
        tracing::info!(last_offset, path = %final_path.display(), "wrote metadata snapshot");
        Ok(())
    }
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn sync_directory(directory: &Path) -> Result<(), LogError> {
    File::open(directory)
        .and_then(|handle| handle.sync_all())
        .map_err(io_error(directory))
}

pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let mut file = File::create(path).map_err(io_error(path))?;
    file.write_all(bytes).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))
}

fn remove_stale_temp(directory: &Path) -> Result<(), LogError> {
    let temp_path = directory.join(SNAPSHOT_TEMP_FILE_NAME);
    match fs::remove_file(&temp_path) {
        Ok(()) => {
            tracing::warn!(path = %temp_path.display(), "removed an incomplete snapshot");
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(LogError::Io {
            path: temp_path,
            source,
        }),
    }
}

pub(crate) fn encode_frame(payload: &[u8]) -> Result<Vec<u8>, LogError> {
    let length = u32::try_from(payload.len())
        .ok()
        .filter(|length| u64::from(*length) <= MAX_FRAME_BYTES)
        .ok_or(LogError::RecordTooLarge {
            length: payload.len(),
            max_bytes: MAX_FRAME_BYTES,
        })?;
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    frame.extend_from_slice(payload);
    Ok(frame)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let slice = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(slice.try_into().ok()?))
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let slice = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_be_bytes(slice.try_into().ok()?))
}

/// How far replay got.
struct Replay {
    valid_bytes: u64,
    replayed_batches: usize,
    replayed_records: u64,
}

/// One frame's outcome.
pub(crate) enum Frame<'a> {
    /// A whole, checksummed payload and the position after it.
    Complete { payload: &'a [u8], end: usize },
    /// The file ends inside this frame (or its last frame is damaged).
    TornTail,
}

pub(crate) fn next_frame<'a>(
    path: &Path,
    bytes: &'a [u8],
    position: usize,
) -> Result<Frame<'a>, LogError> {
    let (Some(length), Some(stored)) = (read_u32(bytes, position), read_u32(bytes, position + 4))
    else {
        return Ok(Frame::TornTail);
    };
    if length == 0 || u64::from(length) > MAX_FRAME_BYTES {
        // No writer produces such a frame. A zero-filled tail (space the
        // file system allocated but the crash left unwritten) is torn;
        // anything else is corruption.
        let rest = bytes.get(position..).unwrap_or_default();
        if rest.iter().all(|byte| *byte == 0) {
            return Ok(Frame::TornTail);
        }
        return Err(LogError::InvalidFrameLength {
            path: path.to_path_buf(),
            position: position as u64,
            length,
            max_bytes: MAX_FRAME_BYTES,
        });
    }
    let start = position + FRAME_HEADER_BYTES;
    let end = start.saturating_add(usize::try_from(length).unwrap_or(usize::MAX));
    let Some(payload) = bytes.get(start..end) else {
        return Ok(Frame::TornTail);
    };
    let is_last = end == bytes.len();
    let computed = crc32c::crc32c(payload);
    if computed != stored {
        if is_last {
            return Ok(Frame::TornTail);
        }
        return Err(LogError::CrcMismatch {
            path: path.to_path_buf(),
            position: position as u64,
            stored,
            computed,
        });
    }
    Ok(Frame::Complete { payload, end })
}

fn replay_log(path: &Path, image: &mut MetadataImage) -> Result<Replay, LogError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => {
            return Err(LogError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut replay = Replay {
        valid_bytes: 0,
        replayed_batches: 0,
        replayed_records: 0,
    };
    let mut position = 0;
    while position < bytes.len() {
        let Frame::Complete { payload, end } = next_frame(path, &bytes, position)? else {
            break;
        };
        let expected = image.next_offset();
        let batch = MetadataBatch::decode_from(payload).map_err(|source| LogError::Record {
            path: path.to_path_buf(),
            offset: expected,
            source,
        })?;
        let applied = apply_batch(path, image, &batch)?;
        if applied > 0 {
            replay.replayed_records += applied;
            replay.replayed_batches += 1;
        }
        position = end;
        replay.valid_bytes = end as u64;
    }
    Ok(replay)
}

/// Applies the records of `batch` the image does not have yet; returns how
/// many were applied.
fn apply_batch(
    path: &Path,
    image: &mut MetadataImage,
    batch: &MetadataBatch,
) -> Result<u64, LogError> {
    let expected = image.next_offset();
    if batch.base_offset > expected {
        return Err(if image.last_offset().is_none() {
            LogError::MissingSnapshot {
                first_log_offset: batch.base_offset,
            }
        } else {
            LogError::OffsetGap {
                path: path.to_path_buf(),
                expected,
                found: batch.base_offset,
            }
        });
    }
    let fresh = batch
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| (batch.base_offset.saturating_add(index as u64), record))
        .filter(|(offset, _)| *offset >= expected);
    let before = image.next_offset();
    *image = image.apply_all(fresh).map_err(|source| LogError::Apply {
        offset: expected,
        source,
    })?;
    Ok(image.next_offset() - before)
}

pub(crate) fn encode_snapshot(payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + payload.len());
    bytes.extend_from_slice(SNAPSHOT_MAGIC);
    bytes.extend_from_slice(&SNAPSHOT_FORMAT_VERSION.to_be_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn read_snapshot(path: &Path) -> Result<MetadataImage, LogError> {
    let Some(payload) = read_snapshot_payload(path)? else {
        return Ok(MetadataImage::empty());
    };
    let corrupt = |problem| LogError::CorruptSnapshot {
        path: path.to_path_buf(),
        problem,
    };
    let snapshot = MetadataSnapshot::decode_from(&payload)
        .map_err(|_| corrupt(SnapshotProblem::Undecodable))?;
    MetadataImage::from_snapshot_records(snapshot.last_offset, &snapshot.records)
        .map_err(|_| corrupt(SnapshotProblem::DoesNotApply))
}

/// Reads a file written with [`encode_snapshot`] and checks its header and
/// CRC; `None` if the file does not exist.
pub(crate) fn read_snapshot_payload(path: &Path) -> Result<Option<Vec<u8>>, LogError> {
    let mut bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(LogError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let corrupt = |problem| LogError::CorruptSnapshot {
        path: path.to_path_buf(),
        problem,
    };
    if bytes.get(..8) != Some(SNAPSHOT_MAGIC.as_slice())
        || read_u32(&bytes, 8) != Some(SNAPSHOT_FORMAT_VERSION)
    {
        return Err(corrupt(SnapshotProblem::BadMagic));
    }
    let length = read_u64(&bytes, 12).ok_or(corrupt(SnapshotProblem::Truncated))?;
    let stored = read_u32(&bytes, 20).ok_or(corrupt(SnapshotProblem::Truncated))?;
    let end = usize::try_from(length)
        .ok()
        .and_then(|length| SNAPSHOT_HEADER_BYTES.checked_add(length))
        .filter(|end| *end <= bytes.len())
        .ok_or(corrupt(SnapshotProblem::Truncated))?;
    if crc32c::crc32c(&bytes[SNAPSHOT_HEADER_BYTES..end]) != stored {
        return Err(corrupt(SnapshotProblem::CrcMismatch));
    }
    bytes.truncate(end);
    bytes.drain(..SNAPSHOT_HEADER_BYTES);
    Ok(Some(bytes))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
