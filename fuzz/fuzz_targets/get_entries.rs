//! An RFC 6962 `get-entries` response body, through ct-ingest's own
//! response handling (`rfc6962::parse_get_entries`: JSON, base64,
//! `MerkleTreeLeaf`, `extra_data` chains, X.509 `notAfter`), and a
//! `get-sth-consistency` body (`rfc6962::parse_consistency`). The first
//! input byte is the number of entries requested (1..=256). Nothing
//! panics; accepted entries are numbered from the start index and carry
//! the leaf hash of the exact `leaf_input` bytes served.
#![no_main]

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ct_ingest::rfc6962::{parse_consistency, parse_get_entries};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, body)) = data.split_first() else {
        return;
    };
    let requested = u64::from(n) + 1;
    let start = 1_000_000;
    if let Ok(entries) = parse_get_entries(body, start, requested) {
        assert!(!entries.is_empty() && entries.len() as u64 <= requested);
        let j: serde_json::Value = serde_json::from_slice(body).expect("accepted body is JSON");
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.leaf_index, start + i as u64);
            let leaf = BASE64
                .decode(j["entries"][i]["leaf_input"].as_str().expect("string"))
                .expect("base64");
            assert_eq!(e.leaf_hash, ct_core::leaf_hash(&leaf));
        }
    }
    if let Ok(proof) = parse_consistency(body) {
        assert!(proof.len() <= ct_core::merkle::MAX_PROOF_LEN);
    }
});
