//! Records inside a batch: [`Record`], its [`RecordHeaders`], and the
//! [`Records`] iterator.
//!
//! Layout of one record (Kafka's `DefaultRecord`; varints are zigzag):
//!
//! ```text
//! length          varint   bytes after this field
//! attributes      int8     unused, 0
//! timestampDelta  varlong  relative to the batch's base timestamp
//! offsetDelta     varint   relative to the batch's base offset
//! keyLength       varint   -1 for a null key
//! key             bytes
//! valueLength     varint   -1 for a null value
//! value           bytes
//! headerCount     varint
//! headers         headerKeyLength varint, headerKey bytes,
//!                 headerValueLength varint (-1 = null), headerValue bytes
//! ```
//!
//! A [`Record`] is one [`Bytes`] slice of the batch (or of its decompressed
//! payload) plus the positions of its fields: reading a record copies
//! nothing, allocates nothing and costs one reference count. Keys and values
//! are borrowed as `&[u8]` or sliced out as `Bytes` on demand; headers are
//! checked when the record is read and decoded lazily by
//! [`RecordHeaders::iter`].

use std::ops::Range;

use bytes::Bytes;

use super::varint::{read_varint, read_varlong};
use super::{compression, Compression, RecordError, RecordField};

/// One record of a batch: a [`Bytes`] slice of the batch (one reference
/// count, no copy) and the positions of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    bytes: Bytes,
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    headers: Range<usize>,
    header_count: usize,
}

impl Record {
    /// The record attributes byte (unused by Kafka, normally 0).
    pub fn attributes(&self) -> i8 {
        self.attributes
    }

    /// Timestamp relative to the batch's base timestamp.
    pub fn timestamp_delta(&self) -> i64 {
        self.timestamp_delta
    }

    /// Offset relative to the batch's base offset.
    pub fn offset_delta(&self) -> i32 {
        self.offset_delta
    }

    /// The record's offset given the batch's base offset.
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset.wrapping_add(i64::from(self.offset_delta))
    }

    /// The record's create timestamp given the batch's base timestamp (see
    /// [`RecordBatch::record_timestamp`](super::RecordBatch::record_timestamp) for LogAppendTime batches).
    pub fn timestamp(&self, base_timestamp: i64) -> i64 {
        base_timestamp.wrapping_add(self.timestamp_delta)
    }

    /// The key, `None` when null.
    pub fn key(&self) -> Option<&[u8]> {
        self.field(&self.key)
    }

    /// The value, `None` when null (a tombstone).
    pub fn value(&self) -> Option<&[u8]> {
        self.field(&self.value)
    }

    /// The key as a [`Bytes`] slice of the batch (no copy).
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.key.clone().map(|range| self.bytes.slice(range))
    }

    /// The value as a [`Bytes`] slice of the batch (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.value.clone().map(|range| self.bytes.slice(range))
    }

    /// The headers, decoded as they are iterated.
    pub fn headers(&self) -> RecordHeaders<'_> {
        RecordHeaders {
            bytes: self.bytes.get(self.headers.clone()).unwrap_or_default(),
            count: self.header_count,
        }
    }

    /// The encoded record, length prefix included.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Encoded size of the record, length prefix included.
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    fn field(&self, range: &Option<Range<usize>>) -> Option<&[u8]> {
        // Ranges were checked against the record when it was decoded.
        range.clone().and_then(|range| self.bytes.get(range))
    }
}

/// The headers of a record, checked when the record was read and decoded
/// only when iterated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordHeaders<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> RecordHeaders<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Iterates the headers in order.
    pub fn iter(&self) -> RecordHeadersIter<'a> {
        RecordHeadersIter {
            bytes: self.bytes,
            position: 0,
            remaining: self.count,
        }
    }
}

impl<'a> IntoIterator for RecordHeaders<'a> {
    type Item = Header<'a>;
    type IntoIter = RecordHeadersIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// One record header, borrowed from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The key (Kafka clients write UTF-8).
    pub key: &'a [u8],
    /// The value, `None` when null.
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// The key as UTF-8 text.
    pub fn key_str(&self) -> Result<&'a str, std::str::Utf8Error> {
        std::str::from_utf8(self.key)
    }
}

/// Iterator over [`RecordHeaders`].
#[derive(Debug, Clone)]
pub struct RecordHeadersIter<'a> {
    bytes: &'a [u8],
    position: usize,
    remaining: usize,
}

impl<'a> Iterator for RecordHeadersIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.remaining == 0 {
            return None;
        }
        let mut cursor = Cursor::new(self.bytes, self.position);
        // The headers were checked when the record was read; a failure here
        // would be a bug, so it ends the iteration rather than panicking.
        let (key, value) = cursor.header().ok()?;
        self.position = cursor.position;
        self.remaining -= 1;
        Some(Header {
            key: self.bytes.get(key)?,
            value: match value {
                Some(range) => Some(self.bytes.get(range)?),
                None => None,
            },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for RecordHeadersIter<'_> {}

/// Iterator over the records of a batch; yields each decoding error once and then stops.
///
/// Uncompressed batches are read in place; compressed ones are decompressed
/// once, up front, into a single buffer the records then slice.
#[derive(Debug, Clone)]
pub struct Records {
    data: Bytes,
    position: usize,
    declared: i32,
    read: i32,
    finished: bool,
}

impl Records {
    /// The records of a batch: its records section `payload` (compressed
    /// with `codec`) holding `declared` records.
    pub(crate) fn new(
        payload: Bytes,
        codec: Compression,
        declared: i32,
        max_decompressed_bytes: usize,
    ) -> Result<Records, RecordError> {
        let data = match codec {
            Compression::None => payload,
            codec => compression::decompress(codec, &payload, max_decompressed_bytes)?,
        };
        Ok(Records {
            data,
            position: 0,
            declared,
            read: 0,
            finished: false,
        })
    }

    /// Records not read yet, as declared by the batch.
    pub fn remaining(&self) -> usize {
        if self.finished {
            0
        } else {
            (self.declared - self.read) as usize
        }
    }

    fn read_next(&mut self) -> Result<Option<Record>, RecordError> {
        let available = self.data.len() - self.position;
        if self.read == self.declared {
            if available > 0 {
                return Err(RecordError::TrailingRecordBytes {
                    remaining: available,
                });
            }
            return Ok(None);
        }
        if available == 0 {
            return Err(RecordError::RecordCountMismatch {
                declared: self.declared,
                found: self.read,
            });
        }
        let (record, end) = decode_record(&self.data, self.position)?;
        self.position = end;
        self.read += 1;
        Ok(Some(record))
    }
}

impl Iterator for Records {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.read_next() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(error) => {
                self.finished = true;
                Some(Err(error))
            }
        }
    }
}

impl std::iter::FusedIterator for Records {}

/// Decodes the record starting at `start`; returns it and where it ends.
fn decode_record(data: &Bytes, start: usize) -> Result<(Record, usize), RecordError> {
    let fields = parse_record(data, start)?;
    let rebase = |range: Range<usize>| range.start - start..range.end - start;
    let record = Record {
        bytes: data.slice(start..fields.end),
        attributes: fields.attributes,
        timestamp_delta: fields.timestamp_delta,
        offset_delta: fields.offset_delta,
        key: fields.key.map(rebase),
        value: fields.value.map(rebase),
        headers: rebase(fields.headers),
        header_count: fields.header_count,
    };
    Ok((record, fields.end))
}

/// The fields of one encoded record, as positions in the buffer it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordFields {
    /// Where the record ends (its length prefix included).
    pub(crate) end: usize,
    pub(crate) attributes: i8,
    pub(crate) timestamp_delta: i64,
    pub(crate) offset_delta: i32,
    pub(crate) key: Option<Range<usize>>,
    pub(crate) value: Option<Range<usize>>,
    pub(crate) headers: Range<usize>,
    pub(crate) header_count: usize,
}

/// Reads and checks the record starting at `start` of `data` without
/// copying or allocating: every length and varint inside the record, and
/// that its fields fill exactly its declared length. The one parser of a
/// record's layout ([`Records`] and [`super::check_records`] both use it).
pub(crate) fn parse_record(data: &[u8], start: usize) -> Result<RecordFields, RecordError> {
    let mut cursor = Cursor::new(data, start);
    let length = cursor.varint()?;
    if length < 0 {
        return Err(RecordError::InvalidLength {
            field: RecordField::RecordLength,
            length: i64::from(length),
        });
    }
    let length = length as usize;
    let body_start = cursor.position;
    let available = data.len().saturating_sub(body_start);
    if length > available {
        return Err(RecordError::RecordTruncated {
            needed: length,
            available,
        });
    }
    let end = body_start + length;
    let mut body = Cursor::new(data.get(..end).unwrap_or_default(), body_start);
    let attributes = body.byte()? as i8;
    let timestamp_delta = body.varlong()?;
    let offset_delta = body.varint()?;
    let key = body.nullable(RecordField::Key)?;
    let value = body.nullable(RecordField::Value)?;
    let (headers, header_count) = body.headers()?;
    if body.position != end {
        return Err(RecordError::RecordSizeMismatch {
            declared: length,
            actual: body.position - body_start,
        });
    }
    Ok(RecordFields {
        end,
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
        header_count,
    })
}

/// A read position in a byte slice that only hands out checked ranges.
struct Cursor<'a> {
    data: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn new(data: &'a [u8], position: usize) -> Cursor<'a> {
        Cursor { data, position }
    }

    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.data.get(self.position..).unwrap_or_default()
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, RecordError> {
        let byte = self
            .rest()
            .first()
            .copied()
            .ok_or(RecordError::RecordTruncated {
                needed: 1,
                available: 0,
            })?;
        self.position += 1;
        Ok(byte)
    }

    #[inline]
    fn varint(&mut self) -> Result<i32, RecordError> {
        let (value, size) = read_varint(self.rest())?;
        self.position += size;
        Ok(value)
    }

    #[inline]
    fn varlong(&mut self) -> Result<i64, RecordError> {
        let (value, size) = read_varlong(self.rest())?;
        self.position += size;
        Ok(value)
    }

    #[inline]
    fn bytes(&mut self, length: usize) -> Result<Range<usize>, RecordError> {
        let available = self.rest().len();
        if length > available {
            return Err(RecordError::RecordTruncated {
                needed: length,
                available,
            });
        }
        let range = self.position..self.position + length;
        self.position += length;
        Ok(range)
    }

    /// A length-prefixed field where -1 means null.
    #[inline]
    fn nullable(&mut self, field: RecordField) -> Result<Option<Range<usize>>, RecordError> {
        match self.varint()? {
            -1 => Ok(None),
            length if length < 0 => Err(RecordError::InvalidLength {
                field,
                length: i64::from(length),
            }),
            length => self.bytes(length as usize).map(Some),
        }
    }

    /// One header: key range and optional value range.
    fn header(&mut self) -> Result<(Range<usize>, Option<Range<usize>>), RecordError> {
        let key_length = self.varint()?;
        if key_length < 0 {
            return Err(RecordError::InvalidLength {
                field: RecordField::HeaderKey,
                length: i64::from(key_length),
            });
        }
        let key = self.bytes(key_length as usize)?;
        let value = self.nullable(RecordField::HeaderValue)?;
        Ok((key, value))
    }

    /// Checks the header count and every header; returns their range and count.
    #[inline]
    fn headers(&mut self) -> Result<(Range<usize>, usize), RecordError> {
        let count = self.varint()?;
        if count < 0 {
            return Err(RecordError::InvalidLength {
                field: RecordField::HeaderCount,
                length: i64::from(count),
            });
        }
        let start = self.position;
        for _ in 0..count {
            self.header()?;
        }
        Ok((start..self.position, count as usize))
    }
}
