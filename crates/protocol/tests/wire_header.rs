//! Request headers v0-v2 and response headers v0-v1 round trip.

use bytes::BytesMut;
use proptest::prelude::*;
use strom_protocol::header::*;
use strom_protocol::kafka::messages::{RequestHeader, ResponseHeader};
use strom_protocol::kafka::protocol::StrBytes;

fn tagged_fields() -> impl Strategy<Value = std::collections::BTreeMap<i32, bytes::Bytes>> {
    proptest::collection::btree_map(
        0i32..1000,
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(bytes::Bytes::from),
        0..3,
    )
}

fn request_header_at(version: i16) -> impl Strategy<Value = RequestHeader> {
    let client_id = proptest::option::of("[ -~]{0,40}".prop_map(StrBytes::from_string));
    (
        any::<i16>(),
        any::<i16>(),
        any::<i32>(),
        client_id,
        tagged_fields(),
    )
        .prop_map(
            move |(api_key, api_version, correlation_id, client_id, tagged)| {
                let header = RequestHeader::default()
                    .with_request_api_key(api_key)
                    .with_request_api_version(api_version)
                    .with_correlation_id(correlation_id);
                match version {
                    0 => header.with_client_id(None),
                    1 => header.with_client_id(client_id),
                    _ => header
                        .with_client_id(client_id)
                        .with_unknown_tagged_fields(tagged),
                }
            },
        )
}

proptest! {
    #[test]
    fn request_headers_round_trip((version, header) in (0i16..=MAX_REQUEST_HEADER_VERSION).prop_flat_map(|v| (Just(v), request_header_at(v))), trailing in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut dst = BytesMut::new();
        encode_request_header(&header, version, &mut dst).unwrap();
        prop_assert_eq!(request_header_size(&header, version).unwrap(), dst.len());
        let header_bytes = dst.len();
        dst.extend_from_slice(&trailing);
        let mut bytes = dst.freeze();
        let prefix = peek_request_prefix(&bytes).unwrap();
        prop_assert_eq!(prefix.api_key, header.request_api_key);
        prop_assert_eq!(prefix.correlation_id, header.correlation_id);
        let decoded = decode_request_header(&mut bytes, version).unwrap();
        prop_assert_eq!(decoded, header);
        prop_assert_eq!(bytes.len(), trailing.len());
        prop_assert!(header_bytes >= REQUEST_PREFIX_BYTES);
    }

    #[test]
    fn response_headers_round_trip(version in 0i16..=MAX_RESPONSE_HEADER_VERSION, correlation_id in any::<i32>(), tagged in tagged_fields()) {
        let mut header = ResponseHeader::default().with_correlation_id(correlation_id);
        if version == 1 {
            header = header.with_unknown_tagged_fields(tagged);
        }
        let mut dst = BytesMut::new();
        encode_response_header(&header, version, &mut dst).unwrap();
        prop_assert_eq!(response_header_size(&header, version).unwrap(), dst.len());
        let mut bytes = dst.freeze();
        prop_assert_eq!(decode_response_header(&mut bytes, version).unwrap(), header);
        prop_assert!(bytes.is_empty());
    }

    #[test]
    fn arbitrary_header_bytes_never_panic(version in -1i16..4, bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
        let mut input = bytes::Bytes::from(bytes.clone());
        let _ = decode_request_header(&mut input, version);
        let mut input = bytes::Bytes::from(bytes);
        let _ = decode_response_header(&mut input, version);
    }
}
