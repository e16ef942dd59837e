//! Record batch v2: the zero-copy [`RecordBatch`] view, in-place header edits
//! ([`BatchHeaderMut`]), iteration over concatenated batches
//! ([`RecordBatches`]) and over records ([`Records`]), the
//! [`RecordBatchBuilder`], the record-level checks a broker makes before
//! appending ([`check_records`], [`RecordBatch::check_records`]), the
//! conversion of a batch to another codec ([`RecordBatch::recompress`]), and
//! the gzip/snappy/lz4/zstd [`compression`] codecs.
//!
//! The byte layout is in [`layout`] and [`record`]. Design points:
//!
//! * A batch is read in place: [`RecordBatch::parse`] decodes the 61-byte
//!   header and keeps the [`bytes::Bytes`]; keys, values and headers of
//!   records are `Bytes` slices of it, so iterating an uncompressed batch
//!   allocates nothing per record. Compressed batches are decompressed once,
//!   with a cap on the output ([`DEFAULT_MAX_DECOMPRESSED_BYTES`]).
//! * The CRC-32C ([`crate::crc`], hardware accelerated) is checked only
//!   on request ([`RecordBatch::validate_crc`]).
//! * Legacy message sets (magic 0 and 1) are recognised and rejected with
//!   [`RecordError::LegacyMagic`], never misparsed.

mod attributes;
mod batch;
mod batches;
mod builder;
mod check;
pub mod compression;
mod compression_type;
mod error;
pub mod layout;
pub mod record;
pub mod varint;

pub use attributes::{BatchAttributes, TimestampType};
pub use batch::{
    BatchHeader, BatchHeaderMut, RecordBatch, DEFAULT_MAX_DECOMPRESSED_BYTES,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
};
pub use batches::RecordBatches;
pub use builder::{HeaderInput, RecordBatchBuilder};
pub use check::{check_records, CheckedRecords, RecordSummary};
pub use compression_type::Compression;
pub use error::{RecordError, RecordField};
pub use record::{Header, Record, RecordHeaders, RecordHeadersIter, Records};
