//! Arbitrary bytes as a request frame body: header and body decode for any
//! API key and version. Decoding must not panic; a request that decodes
//! must re-encode and decode to the same value and the same bytes.
//!
//! The same bytes also exercise the client side: the first four bytes name
//! an API key and version, and the rest is decoded as that API's response
//! frame body (response header, then body).
#![no_main]
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use strom_protocol::messages::{decode_request, decode_response, encode_request, encode_response};

fn check_request(frame: Bytes) {
    let Ok(request) = decode_request(frame) else {
        return;
    };
    let mut encoded = BytesMut::new();
    encode_request(&request.header, &request.body, &mut encoded).expect("a decoded request re-encodes");
    let encoded = encoded.freeze();
    let again = decode_request(encoded.clone()).expect("a re-encoded request decodes");
    assert_eq!(again, request);
    let mut twice = BytesMut::new();
    encode_request(&again.header, &again.body, &mut twice).expect("re-encodes");
    assert_eq!(twice.freeze(), encoded);
}

fn check_response(data: &[u8]) {
    let Some((selector, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let api_key = i16::from_be_bytes([selector[0], selector[1]]);
    let api_version = i16::from_be_bytes([selector[2], selector[3]]);
    let Ok((header, response)) = decode_response(Bytes::copy_from_slice(rest), api_key, api_version) else {
        return;
    };
    let mut encoded = BytesMut::new();
    encode_response(header.correlation_id, api_version, &response, &mut encoded)
        .expect("a decoded response re-encodes");
    let (again_header, again) =
        decode_response(encoded.freeze(), api_key, api_version).expect("a re-encoded response decodes");
    assert_eq!(again_header.correlation_id, header.correlation_id);
    assert_eq!(again, response);
}

fuzz_target!(|data: &[u8]| {
    check_request(Bytes::copy_from_slice(data));
    check_response(data);
});
