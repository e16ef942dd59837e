//! Helpers shared by the `wire_*` integration tests.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use strom_protocol::frame::FrameDecoder;
use strom_protocol::kafka::messages::{BrokerId, GroupId, TopicName};
use strom_protocol::kafka::protocol::StrBytes;
use strom_protocol::messages::{
    decode_request, decode_response, encode_request_frame, encode_response_frame, request_header,
};
use strom_protocol::{Request, Response};

/// Body round trip: the reported size is the written size, the decode
/// consumes every byte and gives back the value.
pub fn assert_request_round_trip(request: &Request, version: i16) {
    let api_key = request.api_key() as i16;
    let size = request.compute_size(version).expect("compute_size");
    let mut buf = BytesMut::new();
    request.encode(version, &mut buf).expect("encode");
    assert_eq!(buf.len(), size, "compute_size of {api_key} v{version}");
    let mut bytes = buf.freeze();
    let decoded = Request::decode(api_key, version, &mut bytes).expect("decode");
    assert_eq!(&decoded, request, "{api_key} v{version}");
    // The same through a whole frame with its header.
    let header = request_header(request, version, 0x0102_0304, Some("round-trip"));
    let mut wire = BytesMut::new();
    encode_request_frame(&header, request, &mut wire).expect("encode frame");
    let frame = FrameDecoder::default()
        .decode(&mut wire)
        .expect("frame")
        .expect("whole frame");
    assert!(wire.is_empty());
    let decoded = decode_request(frame).expect("decode frame");
    assert_eq!(decoded.header, header);
    assert_eq!(&decoded.body, request);
}

/// As [`assert_request_round_trip`], for responses.
pub fn assert_response_round_trip(response: &Response, version: i16) {
    let api_key = response.api_key() as i16;
    let size = response.compute_size(version).expect("compute_size");
    let mut buf = BytesMut::new();
    response.encode(version, &mut buf).expect("encode");
    assert_eq!(buf.len(), size, "compute_size of {api_key} v{version}");
    let mut bytes = buf.freeze();
    let decoded = Response::decode(api_key, version, &mut bytes).expect("decode");
    assert_eq!(&decoded, response, "{api_key} v{version}");
    let mut wire = BytesMut::new();
    encode_response_frame(-7, version, response, &mut wire).expect("encode frame");
    let frame = FrameDecoder::default()
        .decode(&mut wire)
        .expect("frame")
        .expect("whole frame");
    let (header, decoded) = decode_response(frame, api_key, version).expect("decode frame");
    assert_eq!(header.correlation_id, -7);
    assert_eq!(&decoded, response);
}

/// Encodes a request body at `version`.
pub fn encode_request_body(request: &Request, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    request.encode(version, &mut buf).expect("encode");
    buf.freeze()
}

/// Short printable strings (names, ids).
pub fn text() -> impl Strategy<Value = StrBytes> {
    "[a-zA-Z0-9._-]{0,24}".prop_map(StrBytes::from_string)
}

/// Optional short strings.
pub fn optional_text() -> impl Strategy<Value = Option<StrBytes>> {
    proptest::option::of(text())
}

/// Topic names.
pub fn topic_name() -> impl Strategy<Value = TopicName> {
    "[a-zA-Z0-9._-]{1,40}".prop_map(|name| TopicName(StrBytes::from_string(name)))
}

/// Group ids.
pub fn group_id() -> impl Strategy<Value = GroupId> {
    text().prop_map(GroupId)
}

/// Broker ids.
pub fn broker_id() -> impl Strategy<Value = BrokerId> {
    any::<i32>().prop_map(BrokerId)
}

/// Opaque byte strings (record batches, assignments).
pub fn blob() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

/// Random UUIDs.
pub fn uuid() -> impl Strategy<Value = uuid::Uuid> {
    any::<u128>().prop_map(uuid::Uuid::from_u128)
}
