//! An RFC 6962 `get-sth` response body (ct-core `SignedTreeHead::from_json`):
//! parsing never panics, a parsed tree head serializes to JSON that parses
//! back to it, and signature verification with a real log key (Icarus)
//! fails for any tree head that log did not sign.
#![no_main]

use std::sync::OnceLock;

use ct_core::{LogKey, SignedTreeHead};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static KEY: OnceLock<(LogKey, Vec<SignedTreeHead>)> = OnceLock::new();
    let (key, real) = KEY.get_or_init(|| {
        let j: serde_json::Value =
            serde_json::from_slice(ct_auditor_fuzz::fixtures::ICARUS_JSON).expect("fixture");
        let real = ["sth1", "sth2"]
            .iter()
            .map(|k| SignedTreeHead::from_json(j[k].to_string().as_bytes()).expect("fixture"))
            .collect();
        (ct_auditor_fuzz::fixtures::icarus_key(), real)
    });
    let Ok(sth) = SignedTreeHead::from_json(data) else {
        return;
    };
    let json = sth.to_json().expect("serializes");
    assert_eq!(
        SignedTreeHead::from_json(json.as_bytes()).ok(),
        Some(sth.clone())
    );
    if sth.verify(key).is_ok() {
        assert!(
            real.iter()
                .any(|r| r.signature_input() == sth.signature_input()),
            "a forged tree head verified"
        );
    }
});
