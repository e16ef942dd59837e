//! Request and response headers.
//!
//! Layouts (all integers big-endian):
//!
//! ```text
//! request header v0:  api_key i16 | api_version i16 | correlation_id i32
//! request header v1:  v0 | client_id nullable STRING (i16 length, -1 = null)
//! request header v2:  v1 | tagged fields (flexible versions)
//! response header v0: correlation_id i32
//! response header v1: v0 | tagged fields (flexible versions)
//! ```
//!
//! Which header version goes with a message is fixed per API key and API
//! version exactly as in Kafka (the generated `header_version` of each
//! message): v2/v1 from the API's first flexible version on, v1/v0 before.
//! ApiVersions responses always use response header v0, whatever the request
//! version, so that a client that does not yet know the broker's versions can
//! read the answer. The client id of header v2 is still a classic (non-compact)
//! string.
//!
//! Decoding a request therefore peeks at the first four bytes (api key and
//! api version, see [`peek_request_prefix`]), chooses the header version,
//! decodes the header, then the body (see [`crate::messages`]).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::HeaderError;
use crate::kafka::messages::{ApiKey, RequestHeader, ResponseHeader};
use crate::kafka::protocol::buf::ByteBufMut;
use crate::kafka::protocol::{Decodable, Encodable};

/// Bytes of the fields every request header starts with: api key (2),
/// api version (2) and correlation id (4).
pub const REQUEST_PREFIX_BYTES: usize = 8;

/// The highest request header version Kafka defines.
pub const MAX_REQUEST_HEADER_VERSION: i16 = 2;

/// The highest response header version Kafka defines.
pub const MAX_RESPONSE_HEADER_VERSION: i16 = 1;

/// The fixed fields at the start of every request header, readable before
/// the API key and version are known to be served. A broker uses them to
/// answer a request it cannot decode (for example an ApiVersions request of
/// a version newer than it knows) with the right correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    /// The API key, as sent.
    pub api_key: i16,
    /// The API version, as sent.
    pub api_version: i16,
    /// The correlation id the response must echo.
    pub correlation_id: i32,
}

/// Reads the [`RequestPrefix`] of a request frame body without consuming it.
pub fn peek_request_prefix(body: &[u8]) -> Result<RequestPrefix, HeaderError> {
    let Some(mut prefix) = body.get(..REQUEST_PREFIX_BYTES) else {
        return Err(HeaderError::Truncated {
            needed_bytes: REQUEST_PREFIX_BYTES,
            available_bytes: body.len(),
        });
    };
    Ok(RequestPrefix {
        api_key: prefix.get_i16(),
        api_version: prefix.get_i16(),
        correlation_id: prefix.get_i32(),
    })
}

/// The request header version Kafka uses for `api_key` at `api_version`.
pub fn request_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    api_key.request_header_version(api_version)
}

/// The response header version Kafka uses for `api_key` at `api_version`
/// (always 0 for ApiVersions).
pub fn response_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    api_key.response_header_version(api_version)
}

/// Decodes a request header of `header_version` from the front of `buf`.
///
/// Header v0 has no client id; the returned header's `client_id` is `None`.
pub fn decode_request_header(
    buf: &mut Bytes,
    header_version: i16,
) -> Result<RequestHeader, HeaderError> {
    match header_version {
        0 => {
            let prefix = peek_request_prefix(buf)?;
            buf.advance(REQUEST_PREFIX_BYTES);
            Ok(RequestHeader::default()
                .with_request_api_key(prefix.api_key)
                .with_request_api_version(prefix.api_version)
                .with_correlation_id(prefix.correlation_id)
                .with_client_id(None))
        }
        1 | 2 => RequestHeader::decode(buf, header_version).map_err(|error| HeaderError::Decode {
            header_version,
            source: error.into(),
        }),
        _ => Err(HeaderError::UnknownHeaderVersion { header_version }),
    }
}

/// Appends `header` encoded at `header_version` to `dst`.
///
/// Header v0 carries neither the client id nor tagged fields; they are not
/// written.
pub fn encode_request_header(
    header: &RequestHeader,
    header_version: i16,
    dst: &mut BytesMut,
) -> Result<(), HeaderError> {
    match header_version {
        0 => {
            dst.put_i16(header.request_api_key);
            dst.put_i16(header.request_api_version);
            dst.put_i32(header.correlation_id);
            Ok(())
        }
        1 | 2 => header
            .encode(dst, header_version)
            .map_err(|error| HeaderError::Encode {
                header_version,
                source: error.into(),
            }),
        _ => Err(HeaderError::UnknownHeaderVersion { header_version }),
    }
}

/// The encoded size of `header` at `header_version`.
pub fn request_header_size(
    header: &RequestHeader,
    header_version: i16,
) -> Result<usize, HeaderError> {
    match header_version {
        0 => Ok(REQUEST_PREFIX_BYTES),
        1 | 2 => header
            .compute_size(header_version)
            .map_err(|error| HeaderError::Encode {
                header_version,
                source: error.into(),
            }),
        _ => Err(HeaderError::UnknownHeaderVersion { header_version }),
    }
}

/// Decodes a response header of `header_version` from the front of `buf`.
pub fn decode_response_header(
    buf: &mut Bytes,
    header_version: i16,
) -> Result<ResponseHeader, HeaderError> {
    check_response_header_version(header_version)?;
    ResponseHeader::decode(buf, header_version).map_err(|error| HeaderError::Decode {
        header_version,
        source: error.into(),
    })
}

/// Appends `header` encoded at `header_version` to `dst`.
pub fn encode_response_header<B: ByteBufMut>(
    header: &ResponseHeader,
    header_version: i16,
    dst: &mut B,
) -> Result<(), HeaderError> {
    check_response_header_version(header_version)?;
    header
        .encode(dst, header_version)
        .map_err(|error| HeaderError::Encode {
            header_version,
            source: error.into(),
        })
}

/// The encoded size of `header` at `header_version`.
pub fn response_header_size(
    header: &ResponseHeader,
    header_version: i16,
) -> Result<usize, HeaderError> {
    check_response_header_version(header_version)?;
    header
        .compute_size(header_version)
        .map_err(|error| HeaderError::Encode {
            header_version,
            source: error.into(),
        })
}

fn check_response_header_version(header_version: i16) -> Result<(), HeaderError> {
    if (0..=MAX_RESPONSE_HEADER_VERSION).contains(&header_version) {
        Ok(())
    } else {
        Err(HeaderError::UnknownHeaderVersion { header_version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::protocol::StrBytes;

    #[test]
    fn header_versions_follow_kafka() {
        assert_eq!(request_header_version(ApiKey::Produce, 8), 1);
        assert_eq!(request_header_version(ApiKey::Produce, 9), 2);
        assert_eq!(request_header_version(ApiKey::Metadata, 8), 1);
        assert_eq!(request_header_version(ApiKey::Metadata, 9), 2);
        assert_eq!(request_header_version(ApiKey::ApiVersions, 3), 2);
        assert_eq!(response_header_version(ApiKey::Metadata, 9), 1);
        assert_eq!(response_header_version(ApiKey::Metadata, 8), 0);
        for version in 0..=4 {
            assert_eq!(response_header_version(ApiKey::ApiVersions, version), 0);
        }
    }

    #[test]
    fn request_header_v1_layout() {
        let header = RequestHeader::default()
            .with_request_api_key(3)
            .with_request_api_version(1)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("ab")));
        let mut dst = BytesMut::new();
        encode_request_header(&header, 1, &mut dst).unwrap();
        assert_eq!(&dst[..], &[0, 3, 0, 1, 0, 0, 0, 7, 0, 2, b'a', b'b'][..]);
        assert_eq!(request_header_size(&header, 1).unwrap(), dst.len());
        let decoded = decode_request_header(&mut dst.freeze(), 1).unwrap();
        assert_eq!(decoded, header);
    }

    #[test]
    fn request_header_v0_has_no_client_id() {
        let mut buf = Bytes::from_static(&[0, 18, 0, 0, 0, 0, 0, 9, 0xaa]);
        let header = decode_request_header(&mut buf, 0).unwrap();
        assert_eq!((header.request_api_key, header.correlation_id), (18, 9));
        assert_eq!(header.client_id, None);
        assert_eq!(&buf[..], &[0xaa][..]);
    }

    #[test]
    fn truncated_and_unknown_versions_are_errors() {
        let mut short = Bytes::from_static(&[0, 1, 0]);
        assert!(matches!(
            decode_request_header(&mut short, 0),
            Err(HeaderError::Truncated {
                needed_bytes: 8,
                available_bytes: 3
            })
        ));
        let mut short = Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 1, 0]);
        assert!(matches!(
            decode_request_header(&mut short, 1),
            Err(HeaderError::Decode { .. })
        ));
        let mut any = Bytes::from_static(&[0; 16]);
        assert!(matches!(
            decode_request_header(&mut any, 3),
            Err(HeaderError::UnknownHeaderVersion { header_version: 3 })
        ));
        assert!(matches!(
            decode_response_header(&mut any, 2),
            Err(HeaderError::UnknownHeaderVersion { header_version: 2 })
        ));
    }
}
