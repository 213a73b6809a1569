//! A tlog-tiles hash tile body (ct-core `merkle::parse_hash_tile`): the
//! width comes from the first input byte (0 meaning 256), the body is the
//! rest. Parsing never panics, accepts exactly `32·width` bytes, and the
//! hashes concatenate back to the body; the Merkle root over the hashes
//! agrees with a compact range built from them.
#![no_main]

use ct_core::merkle::{parse_hash_tile, root_from_leaf_hashes, CompactRange};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&w, body)) = data.split_first() else {
        return;
    };
    let width = if w == 0 { 256 } else { u16::from(w) };
    match parse_hash_tile(body, width) {
        Ok(hashes) => {
            assert_eq!(body.len(), 32 * usize::from(width));
            assert_eq!(hashes.concat(), body);
            let mut range = CompactRange::new();
            range.extend(hashes.iter().copied()).expect("extends");
            assert_eq!(range.root(), root_from_leaf_hashes(&hashes));
        }
        Err(_) => assert_ne!(body.len(), 32 * usize::from(width)),
    }
});
