//! A TLS-encoded `TimestampedEntry` and a static-ct-api `TileLeaf`
//! (ct-core `leaf`): decoding never panics and is canonical; a tile
//! leaf's hash is the RFC 6962 hash of its entry, and rebuilding it with
//! `TileLeaf::new` from its parts gives the same leaf.
#![no_main]

use ct_core::leaf::{leaf_hash_of_encoded_entry, TileLeaf, TimestampedEntry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(te) = TimestampedEntry::decode(data) {
        let enc = te.encode().expect("re-encodes");
        assert_eq!(enc, data);
        let _ = te.parsed_extensions();
        let _ = te.leaf_index();
    }
    if let Ok(leaf) = TileLeaf::decode(data) {
        assert_eq!(leaf.encode().expect("re-encodes"), data);
        let te = leaf.timestamped_entry().encode().expect("entry re-encodes");
        assert_eq!(leaf.leaf_hash(), leaf_hash_of_encoded_entry(&te));
        assert_eq!(
            leaf.leaf_hash(),
            leaf.merkle_tree_leaf().leaf_hash().expect("hashes")
        );
        let (te, pre, chain) = leaf.clone().into_parts();
        let rebuilt = TileLeaf::new(te, pre, chain).expect("rebuilds from its parts");
        assert_eq!(rebuilt, leaf);
    }
});
