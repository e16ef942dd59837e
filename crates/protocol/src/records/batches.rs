//! [`RecordBatches`]: the batches concatenated in one buffer.

use bytes::Bytes;

use super::batch::batch_extent;
use super::{RecordBatch, RecordError};

/// Iterates the record batches concatenated in a buffer: a Produce request's
/// `records` field, a slice of a log segment, a Fetch response partition.
///
/// A trailing batch cut short (Fetch responses may end mid-batch) ends the
/// iteration without an error; [`truncated_tail`](Self::truncated_tail) then
/// says how many bytes were left. Any other problem (bad length, legacy magic,
/// unknown codec) is yielded once as an error and ends the iteration.
#[derive(Debug, Clone)]
pub struct RecordBatches {
    bytes: Bytes,
    position: usize,
    truncated_tail: usize,
    finished: bool,
}

impl RecordBatches {
    /// Iterates the batches in `bytes`.
    pub fn new(bytes: Bytes) -> RecordBatches {
        RecordBatches {
            bytes,
            position: 0,
            truncated_tail: 0,
            finished: false,
        }
    }

    /// Bytes of an incomplete batch left at the end (0 unless iteration stopped at one).
    pub fn truncated_tail(&self) -> usize {
        self.truncated_tail
    }

    /// Bytes of whole batches yielded so far (the offset of the next batch).
    pub fn position(&self) -> usize {
        self.position
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        if rest.is_empty() {
            self.finished = true;
            return None;
        }
        let size = match batch_extent(rest) {
            Ok(size) => size,
            Err(RecordError::Truncated { .. }) => {
                self.truncated_tail = rest.len();
                self.finished = true;
                return None;
            }
            Err(error) => {
                self.finished = true;
                return Some(Err(error));
            }
        };
        let start = self.position;
        self.position += size;
        let batch = RecordBatch::parse(self.bytes.slice(start..self.position));
        if batch.is_err() {
            self.finished = true;
        }
        Some(batch)
    }
}

impl std::iter::FusedIterator for RecordBatches {}
