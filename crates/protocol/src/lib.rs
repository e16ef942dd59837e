//! The Kafka wire protocol as Strom speaks it.
//!
//! `strom-protocol` owns everything between a socket's bytes and typed values:
//! size-prefixed [frames](frame), request and response [headers](header), the
//! [table of supported API versions](api) (the single source for ApiVersions),
//! typed [`messages`], Kafka [error codes](error_code) and [ACL codes](acl),
//! and the record

//! batch v2 format with its [compression codecs](records), and the [SASL](sasl)
//! PLAIN and SCRAM messages. It also holds
//! the [table of topic-level configurations](topic_config) (names, types,
//! ranges, defaults, broker synonyms), Kafka's public contract that the
//! controller, storage and broker all derive from.
//!
//! It deliberately does no I/O: no sockets, no runtime, no clock. Callers hand
//! it bytes and get bytes or typed values back, which is what lets the broker,
//! the clients and the fuzzers share one implementation.
//!
//! Two decisions a newcomer must know:
//!
//! * Message schemas come from the `kafka-protocol` crate (generated from
//!   Kafka's own JSON descriptors). It is re-exported as [`kafka`]; crates above
//!   this one never import `kafka-protocol` directly.
//! * Record batches are our own code: `records::RecordBatch` is a zero-copy
//!   view over [`bytes::Bytes`] so that a produced batch can be validated and
//!   stored without being re-encoded. This crate is the one owner of the
//!   format's rules: the header's checks (`records::BatchHeader::decode`),
//!   the CRC-32C ([`crc`]) and the records' structure
//!   (`records::check_records`); the log in `strom-storage` calls them and
//!   adds the topic's policy.

pub mod acl;
pub mod api;
pub mod broker_config;
pub mod chunked;
pub mod config_source;
pub mod crc;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod messages;
pub mod records;
pub mod sasl;

pub mod topic_config;

/// The `kafka-protocol` crate, re-exported so that upper layers reach the
/// generated message types only through `strom-protocol`.
pub use kafka_protocol as kafka;

pub use error::{FrameError, HeaderError, MessageError};
pub use error_code::ErrorCode;
pub use frame::FrameDecoder;
pub use messages::{DecodedRequest, Request, Response};
