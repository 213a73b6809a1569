//! A TLS-encoded `MerkleTreeLeaf` (ct-core `leaf`), as served in
//! `get-entries` `leaf_input`: decoding never panics and is canonical;
//! the leaf hash of the decoded value equals the hash over the bytes
//! served; its `CtExtensions` parse or fail cleanly; and the entry's
//! validity period (X.509 `notAfter`) is read without panicking.
#![no_main]

use ct_core::leaf::{leaf_hash_of_encoded_entry, MerkleTreeLeaf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(leaf) = MerkleTreeLeaf::decode(data) else {
        return;
    };
    assert_eq!(leaf.encode().expect("re-encodes"), data);
    let hash = leaf.leaf_hash().expect("hashes");
    assert_eq!(hash, ct_core::leaf_hash(data));
    assert_eq!(hash, leaf_hash_of_encoded_entry(&data[2..]));
    let te = &leaf.timestamped_entry;
    if let Ok(exts) = te.parsed_extensions() {
        let idx = te.leaf_index();
        match exts.iter().find(|e| e.extension_type == 0) {
            None => assert!(idx.is_err()),
            Some(e) => assert_eq!(idx.is_ok(), e.data.len() == 5),
        }
    }
    let _ = ct_core::entry_validity(&te.signed_entry);
});
