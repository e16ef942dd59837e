//! Errors of the record batch layer.

use super::compression_type::Compression;

/// A field of a record whose length prefix was out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordField {
    /// The record's own length prefix.
    RecordLength,
    /// The record key.
    Key,
    /// The record value.
    Value,
    /// The number of headers of a record.
    HeaderCount,
    /// A header key.
    HeaderKey,
    /// A header value.
    HeaderValue,
}

impl std::fmt::Display for RecordField {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            RecordField::RecordLength => "record length",
            RecordField::Key => "key",
            RecordField::Value => "value",
            RecordField::HeaderCount => "header count",
            RecordField::HeaderKey => "header key",
            RecordField::HeaderValue => "header value",
        };
        formatter.write_str(name)
    }
}

/// Everything that can go wrong reading, editing or building a record batch.
///
/// Decoding errors correspond to Kafka's `CORRUPT_MESSAGE` (bad CRC, bad
/// lengths) or `INVALID_RECORD`/`UNSUPPORTED_COMPRESSION_TYPE`; the broker
/// picks the error code at its edge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The buffer ends before the batch does.
    #[error("record batch truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the batch needs (header or declared length).
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The batch length field is negative or smaller than a v2 header.
    #[error("invalid batch length {batch_length} (a v2 batch is at least {minimum} bytes after the length field)")]
    InvalidBatchLength {
        /// The declared `batchLength`.
        batch_length: i32,
        /// The smallest valid value.
        minimum: i32,
    },
    /// The buffer holds more bytes than the single batch it should contain.
    #[error("{trailing} bytes after the end of the record batch")]
    TrailingBytes {
        /// Bytes after the batch's declared end.
        trailing: usize,
    },
    /// A legacy message set (magic 0 or 1): recognised and rejected.
    #[error("legacy message set with magic {magic} is not supported (only record batch v2)")]
    LegacyMagic {
        /// The magic byte found.
        magic: i8,
    },
    /// A magic byte that is neither legacy nor 2.
    #[error("unsupported record batch magic {magic}")]
    UnsupportedMagic {
        /// The magic byte found.
        magic: i8,
    },
    /// The stored CRC-32C does not match the bytes.
    #[error("record batch CRC mismatch: stored {expected:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The CRC stored in the batch header.
        expected: u32,
        /// The CRC computed over attributes..end.
        computed: u32,
    },
    /// Attribute bits 0-2 name no known codec.
    #[error("unknown compression codec {code}")]
    UnknownCompression {
        /// The codec number from the attributes.
        code: u8,
    },
    /// The last offset delta field is negative.
    #[error("invalid last offset delta {last_offset_delta}")]
    InvalidLastOffsetDelta {
        /// The declared `lastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// The record count field is negative.
    #[error("invalid record count {record_count}")]
    InvalidRecordCount {
        /// The declared record count.
        record_count: i32,
    },
    /// The records data ended before the declared number of records.
    #[error("batch declares {declared} records but its data ends after {found}")]
    RecordCountMismatch {
        /// The declared record count.
        declared: i32,
        /// Records read before the data ended.
        found: i32,
    },
    /// A record's offset delta is not its position in the batch (Kafka
    /// writes deltas 0, 1, .., n-1).
    #[error("record {batch_index} of the batch has offset delta {offset_delta}")]
    OffsetDeltaMismatch {
        /// Position of the record in the batch.
        batch_index: i32,
        /// The offset delta it carries.
        offset_delta: i32,
    },
    /// Bytes remain after the last declared record.
    #[error("{remaining} bytes remain after the last declared record")]
    TrailingRecordBytes {
        /// Bytes left over.
        remaining: usize,
    },
    /// A varint longer than 5 bytes or a varlong longer than 10.
    #[error("varint longer than {max_bytes} bytes")]
    VarintTooLong {
        /// The longest legal encoding.
        max_bytes: usize,
    },
    /// A record's data ends before one of its fields does.
    #[error("record truncated: {needed} bytes needed, {available} available")]
    RecordTruncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes present in the record.
        available: usize,
    },
    /// The record's length prefix disagrees with the size of its fields.
    #[error("record declares {declared} bytes but its fields take {actual}")]
    RecordSizeMismatch {
        /// Size from the record's length prefix.
        declared: usize,
        /// Size of the fields actually read.
        actual: usize,
    },
    /// A length prefix out of range (below -1, or negative where null is not allowed).
    #[error("invalid {field} length {length}")]
    InvalidLength {
        /// Which field.
        field: RecordField,
        /// The length read.
        length: i64,
    },
    /// Decompressed data exceeds the allowed maximum (a decompression bomb or an oversized batch).
    #[error("{compression} data decompresses to more than {limit_bytes} bytes")]
    DecompressedTooLarge {
        /// The codec.
        compression: Compression,
        /// The maximum allowed.
        limit_bytes: usize,
    },
    /// The compressed payload is not valid for its codec.
    #[error("invalid {compression} data")]
    Decompression {
        /// The codec.
        compression: Compression,
        /// What the codec reported.
        #[source]
        source: std::io::Error,
    },
    /// The codec failed while compressing.
    #[error("{compression} compression failed")]
    Compression {
        /// The codec.
        compression: Compression,
        /// What the codec reported.
        #[source]
        source: std::io::Error,
    },
    /// `build` was called on a builder without records.
    #[error("a record batch needs at least one record")]
    EmptyBatch,
    /// `append_with_offset` got an offset not above the previous one.
    #[error("offset {offset} is not above the last appended offset {last_offset}")]
    OffsetNotIncreasing {
        /// The offset given.
        offset: i64,
        /// The previous record's offset.
        last_offset: i64,
    },
    /// An offset outside `base_offset ..= base_offset + i32::MAX`.
    #[error("offset {offset} is out of range for base offset {base_offset}")]
    OffsetOutOfRange {
        /// The offset given.
        offset: i64,
        /// The builder's base offset.
        base_offset: i64,
    },
    /// The batch would be larger than a batch length field can describe.
    #[error("record batch of {size_bytes} bytes is too large")]
    BatchTooLarge {
        /// The size the batch would have.
        size_bytes: usize,
    },
    /// A key, value or header longer than `i32::MAX` bytes.
    #[error("{field} of {length} bytes is too long")]
    FieldTooLong {
        /// Which field.
        field: RecordField,
        /// Its length.
        length: usize,
    },
}
