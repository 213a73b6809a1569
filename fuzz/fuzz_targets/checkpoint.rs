//! Signed notes and checkpoints (ct-core `checkpoint`), as served at a
//! static-ct-api log's `/checkpoint`: parsing never panics and is
//! canonical (note and checkpoint text print back byte for byte), each
//! signature line's RFC6962NoteSignature body re-encodes, and
//! verification against a real log's key (rome2024h1) fails on anything
//! but that log's real signature.
#![no_main]

use std::sync::OnceLock;

use ct_auditor_fuzz::fixtures;
use ct_core::{verify_checkpoint, Checkpoint, LogKey, Rfc6962NoteSignature, SignedNote};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static KEY: OnceLock<LogKey> = OnceLock::new();
    let key = KEY.get_or_init(fixtures::rome_key);
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(c) = Checkpoint::parse(s) {
            assert_eq!(c.to_text(), s);
        }
    }
    let Ok(note) = SignedNote::parse(data) else {
        assert!(verify_checkpoint(data, fixtures::ROME_ORIGIN, key).is_err());
        return;
    };
    assert_eq!(note.to_text().as_bytes(), data, "note does not print back");
    for s in &note.signatures {
        if let Ok(body) = Rfc6962NoteSignature::decode(&s.signature) {
            assert_eq!(body.encode().expect("re-encodes"), s.signature);
        }
    }
    if let Ok(v) = verify_checkpoint(data, fixtures::ROME_ORIGIN, key) {
        // Only the real checkpoint (or the same note with other signature
        // lines added) verifies.
        let real = SignedNote::parse(fixtures::ROME_CHECKPOINT).expect("fixture parses");
        assert_eq!(note.text, real.text, "a forged checkpoint verified");
        assert_eq!(v.to_signed_tree_head().verify(key).ok(), Some(()));
    }
});
