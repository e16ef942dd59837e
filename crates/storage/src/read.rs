//! Reads: whole batches from an offset up to a byte limit, and offset lookups
//! by timestamp.
//!
//! A read returns a [`LogSlice`]: a shared handle to one segment's `.log`
//! file with a byte range of whole batches. The broker can `sendfile` that
//! range or call [`LogSlice::to_bytes`] (one `pread`). Like Kafka, one read
//! returns data from one segment only, and the batch holding the requested
//! offset is returned whole (clients skip the records before it).

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use strom_protocol::records::RecordBatch;

use crate::error::{IoContext, ReadError};
use crate::log::Log;
use crate::segment::{BatchLocation, Segment};

/// `ListOffsets` timestamp for the latest offset (the log end).
pub const LATEST_TIMESTAMP: i64 = -1;
/// `ListOffsets` timestamp for the earliest offset (the log start).
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// `ListOffsets` timestamp for the offset with the largest timestamp (KIP-734).
pub const MAX_TIMESTAMP: i64 = -3;

/// A byte range of whole batches in one segment file.
#[derive(Debug, Clone)]
pub struct LogSlice {
    file: Arc<File>,
    path: PathBuf,
    position: u64,
    length: u64,
    first_offset: i64,
    next_offset: i64,
}

impl LogSlice {
    /// The segment file (kept open even if the segment is deleted meanwhile).
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Byte position of the first batch in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Number of bytes.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether the slice is empty (never true for a slice returned by a read).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Base offset of the first batch.
    pub fn first_offset(&self) -> i64 {
        self.first_offset
    }

    /// Offset after the last record of the last batch.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Sends the range from byte `sent` of it on to the socket (or any
    /// descriptor) `out` with one `sendfile` call, straight from the page
    /// cache, and returns how many bytes went. A non-blocking socket that
    /// is full gives [`std::io::ErrorKind::WouldBlock`]. `Ok(0)` while bytes
    /// remain means the file ended early (it was truncated since the read):
    /// the caller cannot finish the frame and must close the connection.
    pub fn send_to(&self, out: BorrowedFd<'_>, sent: u64) -> std::io::Result<usize> {
        /// Linux moves at most this much per call.
        const MAX_SENDFILE_BYTES: u64 = 0x7fff_f000;
        let remaining = self.length.saturating_sub(sent);
        if remaining == 0 {
            return Ok(0);
        }
        let count = remaining.min(MAX_SENDFILE_BYTES) as usize;
        crate::sys::send_file(out, &self.file, self.position + sent, count)
    }

    /// Whether every page of the range is in the page cache, from one
    /// `cachestat` call (Linux 6.5 and later); `None` when the kernel cannot
    /// tell. A range that is not must come from the disk, which blocks
    /// whoever reads or `sendfile`s it: see
    /// [`load_into_page_cache`](Self::load_into_page_cache).
    pub fn is_cached(&self) -> Option<bool> {
        crate::sys::is_range_cached(&self.file, self.position, self.length)
    }

    /// Reads the range through the page cache in small pieces, keeping
    /// nothing, so that a `sendfile` of it right after does not wait for
    /// the disk. It blocks for as long as the disk takes: call it off the
    /// async workers.
    pub fn load_into_page_cache(&self) -> Result<(), ReadError> {
        const PIECE_BYTES: u64 = 256 * 1024;
        let mut buffer = vec![0u8; PIECE_BYTES.min(self.length) as usize];
        let mut done = 0;
        while done < self.length {
            let piece = (self.length - done).min(PIECE_BYTES) as usize;
            self.file
                .read_exact_at(&mut buffer[..piece], self.position + done)
                .at(&self.path)?;
            done += piece as u64;
        }
        Ok(())
    }

    /// Reads the range into memory (one `pread`).
    pub fn to_bytes(&self) -> Result<Bytes, ReadError> {
        let mut buffer = BytesMut::zeroed(self.length as usize);
        self.file
            .read_exact_at(&mut buffer, self.position)
            .at(&self.path)?;
        Ok(buffer.freeze())
    }
}

/// The result of a read.
#[derive(Debug, Clone)]
pub struct ReadInfo {
    /// The batches read, or `None` when there is nothing to return yet.
    pub records: Option<LogSlice>,
    /// Log start offset at the time of the read.
    pub log_start_offset: i64,
    /// Log end offset at the time of the read.
    pub log_end_offset: i64,
    /// High watermark at the time of the read.
    pub high_watermark: i64,
}

/// A timestamp and the offset where it is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    /// The timestamp (-1 when the answer is not tied to a batch).
    pub timestamp: i64,
    /// The offset.
    pub offset: i64,
}

impl Log {
    /// Reads whole batches starting with the one that holds `fetch_offset`,
    /// up to `max_bytes` (but at least one batch when `min_one_batch`), and
    /// only batches that end before `max_offset` (the high watermark for
    /// consumers, the log end for followers).
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo, ReadError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                requested: fetch_offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        let mut info = ReadInfo {
            records: None,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
        };
        let max_offset = max_offset.min(self.log_end_offset);
        if fetch_offset >= max_offset {
            return Ok(info);
        }
        let start = self
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(self.log_start_offset, |(base, _)| *base);
        for segment in self.segments.range(start..).map(|(_, segment)| segment) {
            let Ok(Some(first)) = segment.find_batch(fetch_offset) else {
                continue;
            };
            info.records = slice_from(segment, first, max_bytes, max_offset, min_one_batch);
            break;
        }
        Ok(info)
    }

    /// `ListOffsets`: `EARLIEST_TIMESTAMP`, `LATEST_TIMESTAMP`,
    /// `MAX_TIMESTAMP` (the first record carrying the largest timestamp), or
    /// the first record whose timestamp is at least `timestamp`. Batches are
    /// located by the indexes and only the one batch that holds the answer is
    /// decoded. `None` when no record is that late.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<TimestampAndOffset> {
        match timestamp {
            EARLIEST_TIMESTAMP => Some(TimestampAndOffset {
                timestamp: -1,
                offset: self.log_start_offset,
            }),
            LATEST_TIMESTAMP => Some(TimestampAndOffset {
                timestamp: -1,
                offset: self.log_end_offset,
            }),
            MAX_TIMESTAMP => self.find_max_timestamp(),
            _ => self.find_by_timestamp(timestamp),
        }
    }

    fn find_by_timestamp(&self, timestamp: i64) -> Option<TimestampAndOffset> {
        let segment = self
            .segments
            .values()
            .find(|segment| !segment.is_empty() && segment.max_timestamp() >= timestamp)?;
        let indexed = segment.time_index().lookup(timestamp);
        let mut batches = segment.batches_from(u64::from(
            segment.offset_index().lookup(indexed.offset).position,
        ));
        while let Ok(Some(location)) = batches.next_batch() {
            let header = location.header;
            if header.max_timestamp >= timestamp && header.last_offset() >= self.log_start_offset {
                let found =
                    first_record_at_or_after(segment, &location, timestamp, self.log_start_offset);
                return Some(found.unwrap_or(TimestampAndOffset {
                    timestamp: header.max_timestamp,
                    offset: header.base_offset.max(self.log_start_offset),
                }));
            }
        }
        None
    }

    /// The record with the largest timestamp (KIP-734): its segment and
    /// batch are known from the segment's running maximum; the record is
    /// found by decoding that one batch.
    fn find_max_timestamp(&self) -> Option<TimestampAndOffset> {
        let segment = self
            .segments
            .values()
            .filter(|segment| !segment.is_empty())
            .max_by_key(|segment| segment.max_timestamp())?;
        let batch_level = TimestampAndOffset {
            timestamp: segment.max_timestamp(),
            offset: segment.offset_of_max_timestamp(),
        };
        let Ok(Some(location)) = segment.find_batch(segment.offset_of_max_timestamp()) else {
            return Some(batch_level);
        };
        Some(
            first_record_at_or_after(
                segment,
                &location,
                segment.max_timestamp(),
                self.log_start_offset,
            )
            .unwrap_or(batch_level),
        )
    }
}

/// Decodes the batch at `location` and returns its first record (at or
/// after `log_start_offset`) whose timestamp is at least `timestamp`.
fn first_record_at_or_after(
    segment: &Segment,
    location: &BatchLocation,
    timestamp: i64,
    log_start_offset: i64,
) -> Option<TimestampAndOffset> {
    let mut buffer = BytesMut::zeroed(location.header.size_in_bytes());
    segment
        .file()
        .read_exact_at(&mut buffer, location.position)
        .ok()?;
    let batch = RecordBatch::parse(buffer.freeze()).ok()?;
    let base_offset = batch.base_offset();
    let records = batch.records().ok()?;
    for record in records {
        let record = record.ok()?;
        let offset = record.offset(base_offset);
        let record_timestamp = batch.record_timestamp(&record);
        if offset >= log_start_offset && record_timestamp >= timestamp {
            return Some(TimestampAndOffset {
                timestamp: record_timestamp,
                offset,
            });
        }
    }
    None
}

/// Whole batches from `first` on, within `max_bytes` and below `max_offset`.
fn slice_from(
    segment: &Segment,
    first: BatchLocation,
    max_bytes: u64,
    max_offset: i64,
    min_one_batch: bool,
) -> Option<LogSlice> {
    let mut length = 0u64;
    let mut next_offset = first.header.base_offset;
    let mut batches = segment.batches_from(first.position);
    while let Ok(Some(location)) = batches.next_batch() {
        let size = location.header.size_in_bytes() as u64;
        let fits = length + size <= max_bytes || (length == 0 && min_one_batch);
        if location.header.last_offset() >= max_offset || !fits {
            break;
        }
        length += size;
        next_offset = location.header.next_offset();
    }
    (length > 0).then(|| LogSlice {
        file: Arc::clone(segment.file()),
        path: segment.log_path().to_path_buf(),
        position: first.position,
        length,
        first_offset: first.header.base_offset,
        next_offset,
    })
}
