//! The JSON error body of the HTTP API (audit-proto `api::ErrorBody`), as
//! a client reads a 4xx/5xx answer: parsing never panics, a parsed body
//! round-trips through JSON, and a known code maps to one 4xx/5xx status
//! and back.
#![no_main]

use audit_proto::api::{ErrorBody, ErrorCode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(e) = serde_json::from_slice::<ErrorBody>(data) else {
        return;
    };
    let json = serde_json::to_vec(&e).expect("serializes");
    let back: ErrorBody = serde_json::from_slice(&json).expect("its own JSON parses");
    assert_eq!(back, e);
    if let Some(code) = ErrorCode::parse(&e.error) {
        assert_eq!(code.as_str(), e.error);
        assert!((400..600).contains(&code.http_status()));
    }
});
