//! Bad input anywhere is an error, never a panic or an unbounded allocation.

use bytes::{BufMut, Bytes, BytesMut};
use strom_protocol::kafka::messages::MetadataRequest;
use strom_protocol::messages::{decode_request, decode_response, encode_request, request_header};
use strom_protocol::{HeaderError, MessageError, Request};

/// A request frame body: header v1 (api key, version, correlation id, client
/// id "c") followed by `body`.
fn header_v1(api_key: i16, version: i16, body: &[u8]) -> Bytes {
    let mut frame = BytesMut::new();
    frame.put_i16(api_key);
    frame.put_i16(version);
    frame.put_i32(1);
    frame.put_i16(1);
    frame.put_u8(b'c');
    frame.put_slice(body);
    frame.freeze()
}

/// As [`header_v1`] with header v2 (no tagged fields).
fn header_v2(api_key: i16, version: i16, body: &[u8]) -> Bytes {
    let mut frame = BytesMut::from(&header_v1(api_key, version, &[])[..]);
    frame.put_u8(0);
    frame.put_slice(body);
    frame.freeze()
}

fn assert_decode_error(result: Result<strom_protocol::DecodedRequest, MessageError>) {
    match result {
        Err(MessageError::Decode { .. }) | Err(MessageError::Header(_)) => {}
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn every_truncation_of_a_valid_request_is_an_error() {
    let topic = strom_protocol::kafka::messages::metadata_request::MetadataRequestTopic::default()
        .with_name(Some(strom_protocol::kafka::messages::TopicName(
            "orders".into(),
        )));
    for version in [1, 9, 12] {
        let body = Request::from(MetadataRequest::default().with_topics(Some(vec![topic.clone()])));
        let mut wire = BytesMut::new();
        encode_request(
            &request_header(&body, version, 5, Some("client")),
            &body,
            &mut wire,
        )
        .unwrap();
        let wire = wire.freeze();
        assert!(decode_request(wire.clone()).is_ok());
        for length in 0..wire.len() {
            let result = decode_request(wire.slice(..length));
            assert!(
                result.is_err(),
                "prefix of {length} bytes of v{version} decoded"
            );
        }
    }
}

#[test]
fn truncated_header_prefix() {
    let result = decode_request(Bytes::from_static(&[0, 3, 0]));
    assert!(matches!(
        result,
        Err(MessageError::Header(HeaderError::Truncated {
            needed_bytes: 8,
            available_bytes: 3
        }))
    ));
}

#[test]
fn unknown_api_keys() {
    for api_key in [-1i16, 38, 67, 1000, i16::MAX, i16::MIN] {
        let result = decode_request(header_v1(api_key, 0, &[]));
        assert!(
            matches!(result, Err(MessageError::UnknownApiKey { api_key: key }) if key == api_key)
        );
    }
}

#[test]
fn unsupported_versions() {
    for (api_key, version) in [
        (1i16, 3i16),
        (1, 19),
        (0, 0),
        (0, 14),
        (18, 5),
        (18, -1),
        (3, i16::MAX),
    ] {
        let result = decode_request(header_v1(api_key, version, &[]));
        assert!(
            matches!(result, Err(MessageError::UnsupportedVersion { api_key: key, version: v, .. }) if key == api_key && v == version),
            "{api_key} v{version}: {result:?}"
        );
    }
    assert!(matches!(
        decode_response(Bytes::from_static(&[0, 0, 0, 1]), 1, 2),
        Err(MessageError::UnsupportedVersion {
            api_key: 1,
            version: 2,
            min: 4,
            max: 18
        })
    ));
}

#[test]
fn negative_string_length() {
    // Metadata v1: topics array of one topic whose name has length -5.
    let body = [0, 0, 0, 1, 0xff, 0xfb];
    assert_decode_error(decode_request(header_v1(3, 1, &body)));
    // A client id of length -2 in the header.
    let mut frame = BytesMut::new();
    frame.put_slice(&[0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xfe]);
    frame.put_slice(&[0, 0, 0, 0]);
    assert_decode_error(decode_request(frame.freeze()));
}

#[test]
fn huge_array_counts_do_not_allocate() {
    // Produce v3: null transactional id, acks, timeout, then 2^31 - 1 topics.
    let body = [0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30, 0x7f, 0xff, 0xff, 0xff];
    assert_decode_error(decode_request(header_v1(0, 3, &body)));
    // Negative array count other than -1 (null) in a non-nullable array.
    let body = [0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30, 0x80, 0, 0, 0];
    assert_decode_error(decode_request(header_v1(0, 3, &body)));
    // Metadata v12: compact topics array declaring 2^32 - 2 entries.
    let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0];
    assert_decode_error(decode_request(header_v2(3, 12, &body)));
}

#[test]
fn huge_bytes_length_does_not_allocate() {
    // Produce v3, one topic "t", one partition 0, records of 2^31 - 1 bytes.
    let mut body = BytesMut::new();
    body.put_slice(&[0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30]);
    body.put_slice(&[0, 0, 0, 1, 0, 1, b't']);
    body.put_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    body.put_slice(&[0x7f, 0xff, 0xff, 0xff, 1, 2, 3]);
    assert_decode_error(decode_request(header_v1(0, 3, &body)));
}

#[test]
fn bad_varints() {
    // An unsigned varint that never ends (continuation bit on every byte).
    let body = [0xff; 12];
    assert_decode_error(decode_request(header_v2(3, 12, &body)));
    // Tagged-field count in the header that never ends.
    let mut frame = BytesMut::from(&header_v1(3, 12, &[])[..]);
    frame.put_slice(&[0x80; 10]);
    assert_decode_error(decode_request(frame.freeze()));
}

#[test]
fn invalid_utf8_in_a_string() {
    // Metadata v1: one topic named with an invalid UTF-8 byte.
    let body = [0, 0, 0, 1, 0, 2, 0xc3, 0x28];
    assert_decode_error(decode_request(header_v1(3, 1, &body)));
}

#[test]
fn encoding_a_field_the_version_cannot_carry_is_an_error() {
    // Cluster authorized operations only exist in Metadata v8 to v10.
    let body =
        Request::from(MetadataRequest::default().with_include_cluster_authorized_operations(true));
    let mut dst = BytesMut::new();
    let result = body.encode(11, &mut dst);
    assert!(
        matches!(
            result,
            Err(MessageError::Encode {
                api_key: 3,
                api_version: 11,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(body.encode(10, &mut dst).is_ok());
}
