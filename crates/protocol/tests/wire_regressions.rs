//! Inputs the fuzzers found, kept as regression tests.

use bytes::{Bytes, BytesMut};
use strom_protocol::messages::{decode_request, encode_request};

fn fixture(name: &str) -> Bytes {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/regressions")
        .join(name);
    Bytes::from(std::fs::read(path).expect("fixture"))
}

/// Decoding must either fail or give a value that re-encodes and decodes to
/// itself.
fn assert_round_trips_or_fails(frame: Bytes) {
    let Ok(request) = decode_request(frame) else {
        return;
    };
    let mut encoded = BytesMut::new();
    encode_request(&request.header, &request.body, &mut encoded)
        .expect("a decoded request re-encodes");
    let again = decode_request(encoded.freeze()).expect("a re-encoded request decodes");
    assert_eq!(again, request);
}

#[test]
fn a_tagged_field_tag_beyond_i32_is_rejected() {
    // ApiVersions v3 whose header carries a tagged field with tag 0xFFFFFFFF:
    // kafka-protocol kept it as key -1, counted it on encode but never wrote
    // it, so the re-encoded request did not decode.
    let frame = fixture("request-tag-out-of-range.bin");
    assert!(decode_request(frame.clone()).is_err());
    assert_round_trips_or_fails(frame);
}
