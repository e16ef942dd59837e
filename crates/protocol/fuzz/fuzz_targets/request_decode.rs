//! Arbitrary bytes as a request frame body: header and body decode for any
//! API key and version. Decoding must not panic; a request that decodes
//! must re-encode and decode to the same value and the same bytes.
#![no_main]
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use strom_protocol::messages::{decode_request, encode_request};

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
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
});
