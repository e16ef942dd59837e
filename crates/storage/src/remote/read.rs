//! Reading record batches and timestamps out of a remote segment through
//! the [`ChunkCache`], one chunk (plus the next, read ahead) per remote GET.

use bytes::{Bytes, BytesMut};
use strom_protocol::records::RecordBatch;

use super::{ChunkCache, IndexType, RemoteSegmentMetadata, RemoteStorageManager};
use crate::batch::{parse_header, BATCH_HEADER_BYTES};
use crate::error::RemoteReadError;
use crate::read::TimestampAndOffset;
use crate::topic_partition::TopicPartition;

/// Batches read from the remote tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRead {
    /// Whole record batches, as stored.
    pub records: Bytes,
    /// The base offset of the first batch.
    pub first_offset: i64,
    /// The offset after the last batch.
    pub next_offset: i64,
}

/// A timestamp lookup's answer from the remote tier (same shape as the
/// local one).
pub type RemoteTimestamp = TimestampAndOffset;

/// One remote segment read through the chunk cache.
pub(crate) struct SegmentReader<'a> {
    pub(crate) storage: &'a dyn RemoteStorageManager,
    pub(crate) cache: &'a ChunkCache,
    pub(crate) partition: &'a TopicPartition,
    pub(crate) segment: &'a RemoteSegmentMetadata,
}

impl SegmentReader<'_> {
    /// Chunk `chunk` from the cache or the store; a miss also fetches the
    /// next chunk (read-ahead) in the same round trip.
    async fn chunk(&self, chunk: u64) -> Result<Bytes, RemoteReadError> {
        let id = self.segment.id;
        if let Some(bytes) = self.cache.get(id, chunk) {
            return Ok(bytes);
        }
        let size = self.cache.chunk_bytes();
        let fetch = |number: u64| {
            self.storage.fetch_log_segment(
                self.partition,
                self.segment,
                number * size,
                (number + 1) * size,
            )
        };
        let next = chunk + 1;
        let read_ahead = next * size < self.segment.size_bytes && !self.cache.contains(id, next);
        let bytes = if read_ahead {
            let (this, ahead) = futures::join!(fetch(chunk), fetch(next));
            if let Ok(ahead) = ahead {
                self.cache.insert(id, next, &ahead);
            }
            this?
        } else {
            fetch(chunk).await?
        };
        self.cache.insert(id, chunk, &bytes);
        Ok(bytes)
    }

    /// `length` bytes from `position` (fewer at the segment's end).
    pub(crate) async fn read_at(
        &self,
        position: u64,
        length: u64,
    ) -> Result<Bytes, RemoteReadError> {
        let end = (position + length).min(self.segment.size_bytes);
        if position >= end {
            return Ok(Bytes::new());
        }
        let size = self.cache.chunk_bytes();
        let (first, last) = (position / size, (end - 1) / size);
        if first == last {
            let chunk = self.chunk(first).await?;
            let start = (position - first * size) as usize;
            let stop = (end - first * size) as usize;
            return chunk
                .get(start..stop)
                .map(Bytes::copy_from_slice)
                .ok_or(self.corrupt(position));
        }
        let mut out = BytesMut::with_capacity((end - position) as usize);
        for number in first..=last {
            let chunk = self.chunk(number).await?;
            let chunk_start = number * size;
            let from = position.max(chunk_start) - chunk_start;
            let to = end.min(chunk_start + size) - chunk_start;
            let part = chunk
                .get(from as usize..to as usize)
                .ok_or(self.corrupt(position))?;
            out.extend_from_slice(part);
        }
        Ok(out.freeze())
    }

    fn corrupt(&self, position: u64) -> RemoteReadError {
        RemoteReadError::Corrupt {
            segment: self.segment.id,
            position,
        }
    }

    /// The batch header at `position`: `(base offset, last offset, size, max timestamp)`.
    async fn header_at(&self, position: u64) -> Result<(i64, i64, u64, i64), RemoteReadError> {
        let bytes = self.read_at(position, BATCH_HEADER_BYTES as u64).await?;
        let header = parse_header(&bytes, position as usize).map_err(|_| self.corrupt(position))?;
        let size = header.size_in_bytes() as u64;
        if position + size > self.segment.size_bytes {
            return Err(self.corrupt(position));
        }
        Ok((
            header.base_offset,
            header.last_offset(),
            size,
            header.max_timestamp,
        ))
    }

    /// The position of the batch holding `offset` (or the first after it),
    /// starting the walk at the offset index's entry for it.
    async fn find_batch(
        &self,
        offset: i64,
        from: u64,
    ) -> Result<Option<(u64, i64)>, RemoteReadError> {
        let mut position = from;
        while position < self.segment.size_bytes {
            let (base, last, size, _) = self.header_at(position).await?;
            if last >= offset {
                return Ok(Some((position, base)));
            }
            position += size;
        }
        Ok(None)
    }

    /// Whole batches from the one holding `offset`, within `max_bytes`
    /// (at least one when `min_one_batch`).
    pub(crate) async fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<Option<RemoteRead>, RemoteReadError> {
        let index = self
            .storage
            .fetch_index(self.partition, self.segment, IndexType::Offset)
            .await?;
        let start = offset_index_position(&index, self.segment.base_offset, offset);
        let Some((first, first_offset)) = self.find_batch(offset, start).await? else {
            return Ok(None);
        };
        let (mut position, mut next_offset) = (first, first_offset);
        while position < self.segment.size_bytes {
            let (_, last, size, _) = self.header_at(position).await?;
            let length = position - first;
            if length + size > max_bytes && !(length == 0 && min_one_batch) {
                break;
            }
            position += size;
            next_offset = last + 1;
        }
        if position == first {
            return Ok(None);
        }
        let records = self.read_at(first, position - first).await?;
        Ok(Some(RemoteRead {
            records,
            first_offset,
            next_offset,
        }))
    }

    /// The first record whose timestamp is at least `timestamp`.
    pub(crate) async fn find_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampAndOffset>, RemoteReadError> {
        let time_index = self
            .storage
            .fetch_index(self.partition, self.segment, IndexType::Timestamp)
            .await?;
        let offset_index = self
            .storage
            .fetch_index(self.partition, self.segment, IndexType::Offset)
            .await?;
        let indexed = time_index_offset(&time_index, self.segment.base_offset, timestamp);
        let mut position = offset_index_position(&offset_index, self.segment.base_offset, indexed);
        while position < self.segment.size_bytes {
            let (base, _, size, max_timestamp) = self.header_at(position).await?;
            if max_timestamp >= timestamp {
                let bytes = self.read_at(position, size).await?;
                let found = first_record_at_or_after(bytes, timestamp);
                return Ok(Some(found.unwrap_or(TimestampAndOffset {
                    timestamp: max_timestamp,
                    offset: base,
                })));
            }
            position += size;
        }
        Ok(None)
    }
}

/// The byte position of the offset index's last entry at or below
/// `offset` (0 when there is none). Entries are 8 bytes: relative offset
/// and position, both big-endian 32-bit.
pub(crate) fn offset_index_position(index: &[u8], base_offset: i64, offset: i64) -> u64 {
    let mut position = 0u64;
    for entry in index.chunks_exact(8) {
        let relative = i64::from(i32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]));
        let at = u32::from_be_bytes([entry[4], entry[5], entry[6], entry[7]]);
        if base_offset + relative > offset {
            break;
        }
        position = u64::from(at);
    }
    position
}

/// The offset of the time index's last entry whose timestamp is below
/// `timestamp` (the segment's base offset when there is none). Entries are
/// 12 bytes: timestamp (64-bit) and relative offset (32-bit), big-endian.
pub(crate) fn time_index_offset(index: &[u8], base_offset: i64, timestamp: i64) -> i64 {
    let mut offset = base_offset;
    for entry in index.chunks_exact(12) {
        let mut stamp = [0u8; 8];
        stamp.copy_from_slice(&entry[..8]);
        let relative = i32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]);
        if i64::from_be_bytes(stamp) >= timestamp {
            break;
        }
        offset = base_offset + i64::from(relative);
    }
    offset
}

/// Decodes one batch and returns its first record at or after `timestamp`.
fn first_record_at_or_after(bytes: Bytes, timestamp: i64) -> Option<TimestampAndOffset> {
    let batch = RecordBatch::parse(bytes).ok()?;
    let base_offset = batch.base_offset();
    for record in batch.records().ok()? {
        let record = record.ok()?;
        let record_timestamp = batch.record_timestamp(&record);
        if record_timestamp >= timestamp {
            return Some(TimestampAndOffset {
                timestamp: record_timestamp,
                offset: record.offset(base_offset),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_takes_the_last_entry_at_or_below() {
        let mut index = Vec::new();
        for (relative, position) in [(0i32, 0u32), (10, 400), (20, 900)] {
            index.extend_from_slice(&relative.to_be_bytes());
            index.extend_from_slice(&position.to_be_bytes());
        }
        index.extend_from_slice(&[1, 2, 3]); // a torn tail is ignored
        assert_eq!(offset_index_position(&index, 100, 99), 0);
        assert_eq!(offset_index_position(&index, 100, 115), 400);
        assert_eq!(offset_index_position(&index, 100, 500), 900);
        assert_eq!(offset_index_position(&[], 100, 500), 0);
    }

    #[test]
    fn time_index_lookup_stays_below_the_timestamp() {
        let mut index = Vec::new();
        for (stamp, relative) in [(1_000i64, 0i32), (2_000, 5), (3_000, 9)] {
            index.extend_from_slice(&stamp.to_be_bytes());
            index.extend_from_slice(&relative.to_be_bytes());
        }
        assert_eq!(time_index_offset(&index, 50, 500), 50);
        assert_eq!(time_index_offset(&index, 50, 2_500), 55);
        assert_eq!(time_index_offset(&index, 50, 2_000), 50);
        assert_eq!(time_index_offset(&index, 50, 9_000), 59);
    }
}
