//! Arbitrary bytes as a body of every served API at every advertised
//! version: decoding never panics, and whenever it succeeds the value
//! re-encodes to a body that decodes to the same value with the same size.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use strom_protocol::api::SUPPORTED_APIS;
use strom_protocol::{MessageError, Request, Response};

fn api_version() -> impl Strategy<Value = (i16, i16)> {
    proptest::sample::select(SUPPORTED_APIS)
        .prop_flat_map(|api| (Just(api.api_key as i16), api.min_version..=api.max_version))
}

/// Mostly short bodies with small counts, so that a fair share decodes.
fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(0u8..4, 0..48),
        proptest::collection::vec(any::<u8>(), 0..96),
    ]
}

fn check_request(api_key: i16, version: i16, bytes: &[u8]) -> bool {
    let mut input = Bytes::copy_from_slice(bytes);
    let Ok(first) = Request::decode(api_key, version, &mut input) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    first
        .encode(version, &mut encoded)
        .expect("a decoded value re-encodes");
    assert_eq!(first.compute_size(version).unwrap(), encoded.len());
    let length = encoded.len();
    let mut encoded = encoded.freeze();
    let second = Request::decode(api_key, version, &mut encoded).expect("re-decodes");
    assert_eq!(second, first);
    let mut again = BytesMut::new();
    second.encode(version, &mut again).unwrap();
    assert_eq!(again.len(), length);
    true
}

fn check_response(api_key: i16, version: i16, bytes: &[u8]) -> bool {
    let mut input = Bytes::copy_from_slice(bytes);
    let Ok(first) = Response::decode(api_key, version, &mut input) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    first
        .encode(version, &mut encoded)
        .expect("a decoded value re-encodes");
    assert_eq!(first.compute_size(version).unwrap(), encoded.len());
    let mut encoded = encoded.freeze();
    let second = Response::decode(api_key, version, &mut encoded).expect("re-decodes");
    assert_eq!(second, first);
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn decoded_requests_re_encode_identically((api_key, version) in api_version(), bytes in body_bytes()) {
        check_request(api_key, version, &bytes);
    }

    #[test]
    fn decoded_responses_re_encode_identically((api_key, version) in api_version(), bytes in body_bytes()) {
        check_response(api_key, version, &bytes);
    }
}

/// The property above is only meaningful if arbitrary bytes do decode
/// sometimes: a body of zero bytes in the right places decodes for many APIs.
#[test]
fn some_arbitrary_bodies_decode() {
    let mut decoded = 0;
    for api in SUPPORTED_APIS {
        for version in api.min_version..=api.max_version {
            for length in 0..24 {
                let zeros = vec![0u8; length];
                if check_request(api.api_key as i16, version, &zeros) {
                    decoded += 1;
                }
                if check_response(api.api_key as i16, version, &zeros) {
                    decoded += 1;
                }
            }
        }
    }
    assert!(decoded > 100, "only {decoded} bodies decoded");
}

#[test]
fn decode_errors_are_typed() {
    let mut truncated = Bytes::from_static(&[0, 1]);
    let error = Request::decode(0, 9, &mut truncated).unwrap_err();
    assert!(
        matches!(
            error,
            MessageError::Decode {
                api_key: 0,
                api_version: 9,
                ..
            }
        ),
        "{error}"
    );
}
