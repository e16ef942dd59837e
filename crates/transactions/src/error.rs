//! The crate's errors. Kafka error codes are chosen by the broker from these;
//! each variant's doc names the code Kafka answers with.

pub use crate::state::IllegalTransition;

/// A `__transaction_state` key or value that cannot be decoded. Kafka skips
/// records with an unknown key or value version on load and fails on the
/// rest; the loader decides which to skip from the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("truncated {field}: {needed} bytes needed, {remaining} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// The bytes the field needs.
        needed: usize,
        /// The bytes left in the input.
        remaining: usize,
    },
    /// A length or count below -1 (or -1 where null is not allowed).
    #[error("invalid length {length} for {field}")]
    InvalidLength {
        /// The field being read.
        field: &'static str,
        /// The length read.
        length: i64,
    },
    /// A length or count larger than the rest of the input can hold.
    #[error("{field} claims {length} bytes or elements, only {remaining} bytes left")]
    LengthOverInput {
        /// The field being read.
        field: &'static str,
        /// The length or count read.
        length: u64,
        /// The bytes left in the input.
        remaining: usize,
    },
    /// An unsigned varint longer than five bytes or over `u32::MAX`.
    #[error("malformed unsigned varint in {field}")]
    MalformedVarint {
        /// The field being read.
        field: &'static str,
    },
    /// A string that is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field being read.
        field: &'static str,
    },
    /// A key version other than 0 (`TransactionLogKey`).
    #[error("unknown __transaction_state key version {version}")]
    UnknownKeyVersion {
        /// The version read.
        version: i16,
    },
    /// A value version other than 0 and 1.
    #[error("unknown __transaction_state value version {version}")]
    UnknownValueVersion {
        /// The version read.
        version: i16,
    },
    /// A transaction status that names no state.
    #[error("unknown transaction status {id}")]
    UnknownStatus {
        /// The status id read.
        id: i8,
    },
    /// A known tagged field whose size is not its type's.
    #[error("tagged field {tag} has {size} bytes, {expected} expected")]
    TaggedFieldSize {
        /// The tag.
        tag: u32,
        /// The size read.
        size: u32,
        /// The size of the field's type.
        expected: u32,
    },
    /// Bytes left after the last field.
    #[error("{remaining} bytes after the end of the record")]
    TrailingBytes {
        /// The bytes left.
        remaining: usize,
    },
}

/// A key or value that cannot be written in the version asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A value version other than 0 and 1.
    #[error("unsupported __transaction_state value version {version}")]
    UnsupportedVersion {
        /// The version asked for.
        version: i16,
    },
    /// A field that only version 1 carries (a tagged field) is set to a
    /// value other than its default, and version 0 was asked for.
    #[error("{field} is set but value version 0 cannot carry it")]
    FieldNotInVersion {
        /// The field.
        field: &'static str,
    },
    /// A string longer than the schema's length field can express.
    #[error("{field} is {length} bytes, over the limit of {limit}")]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        length: usize,
        /// The largest length the encoding allows.
        limit: usize,
    },
    /// An array with more elements than the schema's count can express.
    #[error("{field} has {count} elements, over the limit of {limit}")]
    ArrayTooLong {
        /// The field.
        field: &'static str,
        /// Its element count.
        count: usize,
        /// The largest count the encoding allows.
        limit: usize,
    },
}
