//! Byte offsets of the record batch v2 header (all fields big-endian).
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            int64
//!      8     4  batchLength           int32  (bytes after this field)
//!     12     4  partitionLeaderEpoch  int32
//!     16     1  magic                 int8   (2)
//!     17     4  crc                   uint32 (CRC-32C of bytes 21..end)
//!     21     2  attributes            int16
//!     23     4  lastOffsetDelta       int32
//!     27     8  baseTimestamp         int64
//!     35     8  maxTimestamp          int64
//!     43     8  producerId            int64
//!     51     2  producerEpoch         int16
//!     53     4  baseSequence          int32
//!     57     4  recordCount           int32
//!     61     -  records
//! ```
//!
//! Legacy message sets (magic 0 and 1) put their magic byte at the same
//! offset 16, which is how they are recognised and rejected.

/// Offset of `baseOffset`.
pub const BASE_OFFSET: usize = 0;
/// Offset of `batchLength`.
pub const BATCH_LENGTH: usize = 8;
/// Offset of `partitionLeaderEpoch`.
pub const PARTITION_LEADER_EPOCH: usize = 12;
/// Offset of `magic`.
pub const MAGIC: usize = 16;
/// Offset of `crc`.
pub const CRC: usize = 17;
/// Offset of `attributes`; the CRC covers this byte to the end of the batch.
pub const ATTRIBUTES: usize = 21;
/// Offset of `lastOffsetDelta`.
pub const LAST_OFFSET_DELTA: usize = 23;
/// Offset of `baseTimestamp`.
pub const BASE_TIMESTAMP: usize = 27;
/// Offset of `maxTimestamp`.
pub const MAX_TIMESTAMP: usize = 35;
/// Offset of `producerId`.
pub const PRODUCER_ID: usize = 43;
/// Offset of `producerEpoch`.
pub const PRODUCER_EPOCH: usize = 51;
/// Offset of `baseSequence`.
pub const BASE_SEQUENCE: usize = 53;
/// Offset of `recordCount`.
pub const RECORD_COUNT: usize = 57;
/// Offset of the first record; also the size of the header.
pub const RECORDS: usize = 61;
/// Bytes before the part that `batchLength` counts (`baseOffset` and `batchLength`).
pub const LOG_OVERHEAD: usize = 12;
/// The smallest valid `batchLength`: a header without records.
pub const MIN_BATCH_LENGTH: i32 = (RECORDS - LOG_OVERHEAD) as i32;
/// The magic byte of record batch v2.
pub const MAGIC_V2: i8 = 2;
