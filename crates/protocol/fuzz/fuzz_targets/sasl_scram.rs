//! Arbitrary bytes as every SCRAM and PLAIN message: no parser panics, and
//! a server exchange fed the bytes as client-first then client-final never
//! authenticates (the proof cannot match a credential the fuzzer does not
//! know) and never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use strom_protocol::sasl::plain::PlainMessage;
use strom_protocol::sasl::scram::{
    ClientFinal, ClientFirst, ScramCredential, ScramMechanism, ScramServer, ServerFinal,
    ServerFirst, ServerStep,
};

fuzz_target!(|data: &[u8]| {
    let _ = ClientFirst::parse(data);
    let _ = ClientFinal::parse(data);
    let _ = ServerFirst::parse(data);
    let _ = ServerFinal::parse(data);
    let _ = PlainMessage::parse(data);
    let split = data.iter().position(|&byte| byte == 0).unwrap_or(data.len());
    let (first, last) = data.split_at(split);
    let last = last.get(1..).unwrap_or_default();
    for mechanism in ScramMechanism::ALL {
        let credential = ScramCredential::from_password(mechanism, "secret", b"salt", 4096)
            .expect("a valid credential");
        let mut server = ScramServer::new(mechanism, "servernonce".to_owned());
        if let Ok(ServerStep::Continue(_)) = server.step(first, |_| Some(credential.clone())) {
            let outcome = server.step(last, |_| None);
            assert!(!matches!(outcome, Ok(ServerStep::Authenticated { .. })));
        }
    }
});
