//! Proof verification on hostile proofs (ct-core `merkle`): arbitrary tree
//! sizes, roots and proof hashes (as a log's `get-sth-consistency` and
//! `get-proof-by-hash` answers carry them) go through
//! `verify_consistency` and `root_from_inclusion_proof` without panicking,
//! and proofs longer than `MAX_PROOF_LEN` are refused.
//!
//! Input: `size1 ‖ size2 ‖ root1 ‖ root2` (u64 big-endian, 32-byte hashes)
//! then the proof as 32-byte hashes (a partial last hash is dropped).
#![no_main]

use ct_core::merkle::{
    root_from_inclusion_proof, verify_consistency, verify_inclusion, Hash, MAX_PROOF_LEN,
};
use ct_core::LeafHash;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 80 {
        return;
    }
    let size1 = u64::from_be_bytes(data[0..8].try_into().expect("8 bytes"));
    let size2 = u64::from_be_bytes(data[8..16].try_into().expect("8 bytes"));
    let root1: Hash = data[16..48].try_into().expect("32 bytes");
    let root2: Hash = data[48..80].try_into().expect("32 bytes");
    let proof: Vec<Hash> = data[80..]
        .chunks_exact(32)
        .map(|c| c.try_into().expect("32 bytes"))
        .collect();
    let ok = verify_consistency(size1, size2, &proof, &root1, &root2).is_ok();
    if ok {
        assert!(size1 <= size2 && proof.len() <= MAX_PROOF_LEN);
        if size1 == size2 {
            assert!(proof.is_empty() && root1 == root2);
        } else if size1 > 0 {
            assert!(!proof.is_empty());
        }
    }
    // The same bytes as an inclusion proof of leaf `size1` in `size2`.
    match root_from_inclusion_proof(&LeafHash::new(root1), size1, size2, &proof) {
        Ok(root) => {
            assert!(size1 < size2 && proof.len() <= MAX_PROOF_LEN);
            assert!(verify_inclusion(&LeafHash::new(root1), size1, size2, &proof, &root).is_ok());
        }
        Err(_) => {
            assert!(verify_inclusion(&LeafHash::new(root1), size1, size2, &proof, &root2).is_err())
        }
    }
});
