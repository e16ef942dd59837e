//! Errors of the wire layer, split by where callers react differently.
//!
//! * [`FrameError`]: the size prefix of a frame is unusable; the connection
//!   must be closed (the stream can no longer be resynchronised).
//! * [`HeaderError`]: a request or response header is malformed.
//! * [`MessageError`]: the message layer: an API key Strom does not serve, a
//!   version outside the supported table, or a body that does not decode
//!   (or encode) at the version the header names.
//!
//! Failures of the generated `kafka-protocol` codecs are kept as the
//! [`source`](std::error::Error::source) of the structured variant that says
//! which API, version and header they concern.

use crate::api::api_name;

/// The error type the generated `kafka-protocol` codecs report, boxed so that
/// it can be a `#[source]`.
pub type CodecError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A frame's size prefix cannot be accepted.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The size prefix is negative.
    #[error("frame size prefix {length_bytes} is negative")]
    NegativeLength {
        /// The size read from the wire.
        length_bytes: i32,
    },
    /// The size prefix exceeds the configured maximum frame size.
    #[error(
        "frame of {length_bytes} bytes exceeds the maximum frame size of {max_frame_bytes} bytes"
    )]
    TooLarge {
        /// The size read from the wire (or of the body to encode).
        length_bytes: u64,
        /// The configured maximum.
        max_frame_bytes: usize,
    },
}

/// A request or response header cannot be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The buffer ends before the fixed header prefix (api key, api version,
    /// correlation id).
    #[error("header needs {needed_bytes} bytes but only {available_bytes} are present")]
    Truncated {
        /// Bytes the fixed prefix needs.
        needed_bytes: usize,
        /// Bytes present.
        available_bytes: usize,
    },
    /// The header version is not one Kafka defines for this kind of header
    /// (request headers are v0 to v2, response headers v0 and v1).
    #[error("header version {header_version} does not exist")]
    UnknownHeaderVersion {
        /// The header version asked for.
        header_version: i16,
    },
    /// The header's fields do not decode.
    #[error("malformed header (header version {header_version})")]
    Decode {
        /// The header version that was decoded.
        header_version: i16,
        /// The generated codec's error.
        #[source]
        source: CodecError,
    },
    /// The header does not encode (for instance a client id longer than a
    /// 16-bit length allows).
    #[error("header does not encode at header version {header_version}")]
    Encode {
        /// The header version that was encoded.
        header_version: i16,
        /// The generated codec's error.
        #[source]
        source: CodecError,
    },
}

/// A message cannot be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// The request or response header is malformed.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The API key is not one Strom serves (unknown to Kafka, or known but not
    /// in [`SUPPORTED_APIS`](crate::api::SUPPORTED_APIS)).
    #[error("API key {api_key} is not served")]
    UnknownApiKey {
        /// The API key read from the wire or asked for.
        api_key: i16,
    },
    /// The API is served, but not at this version.
    #[error("{} (API key {api_key}) version {version} is not supported (supported {min}..={max})", api_name(*api_key))]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
        /// The lowest supported version.
        min: i16,
        /// The highest supported version.
        max: i16,
    },
    /// The body does not decode at the version the header names.
    #[error("malformed {} (API key {api_key}) v{api_version} body", api_name(*api_key))]
    Decode {
        /// The API key.
        api_key: i16,
        /// The version decoded.
        api_version: i16,
        /// The generated codec's error.
        #[source]
        source: CodecError,
    },
    /// The body decoded but bytes are left over after it.
    #[error("{remaining_bytes} bytes left after the {} (API key {api_key}) v{api_version} body", api_name(*api_key))]
    TrailingBytes {
        /// The API key.
        api_key: i16,
        /// The version decoded.
        api_version: i16,
        /// Bytes left unread.
        remaining_bytes: usize,
    },
    /// The value does not encode at this version (a field that the version
    /// cannot carry is set, or a length overflows).
    #[error("{} (API key {api_key}) does not encode at version {api_version}", api_name(*api_key))]
    Encode {
        /// The API key.
        api_key: i16,
        /// The version encoded.
        api_version: i16,
        /// The generated codec's error.
        #[source]
        source: CodecError,
    },
    /// A request header names a different API than the body it goes with.
    #[error("header names API key {header_api_key} but the body is API key {body_api_key}")]
    ApiKeyMismatch {
        /// The API key in the header.
        header_api_key: i16,
        /// The API key of the body.
        body_api_key: i16,
    },
    /// The encoded message does not fit in a frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A stand-in for record bytes (see
    /// [`chunked::stand_in`](crate::chunked::stand_in)) would have been
    /// copied into the frame instead of being replaced by its region, or has
    /// no region: encoding refuses rather than send the stand-in's zeros.
    #[error("a stand-in for {length_bytes} record bytes has no region to send in its place")]
    StandInNotReplaced {
        /// The stand-in's length.
        length_bytes: usize,
    },
}
