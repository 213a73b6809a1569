//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// `ct-core/tests/data`.
pub(crate) fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Reads a fixture from `tests/data`.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let p = data_dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", p.display()))
}

/// The real static-ct-api tiles of the Let's Encrypt staging log
/// navigli2025h2 (`tests/data/navigli2025h2/`, see its README for provenance
/// and licence). Fails loudly if they are missing: these known-answer tests
/// must never be skipped silently.
pub(crate) fn navigli_dir() -> PathBuf {
    let p = data_dir().join("navigli2025h2");
    assert!(
        p.join("tile").is_dir(),
        "known-answer test data not found at {} (expected tile/data/000 ... \
         tile/0/003.p/10 from the repository)",
        p.display()
    );
    p
}

/// Standard base64 decode that panics on bad test data.
pub(crate) fn b64(s: &str) -> Vec<u8> {
    STANDARD.decode(s).expect("test base64")
}

/// Standard base64 encode.
pub(crate) fn b64e(b: &[u8]) -> String {
    STANDARD.encode(b)
}

/// A 32-byte hash from base64.
pub(crate) fn b64_hash(s: &str) -> [u8; 32] {
    b64(s).try_into().expect("32-byte hash")
}

/// Lowercase hex.
pub(crate) fn hex(b: &[u8]) -> String {
    ct_core::hex::encode(b)
}
