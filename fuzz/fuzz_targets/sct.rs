//! A TLS-encoded `SignedCertificateTimestamp` (ct-core `sth`), as
//! delivered in a TLS extension or OCSP response: decoding never panics
//! and is canonical (re-encoding gives the same bytes); its extensions'
//! `leaf_index` and its signature check against a real log key run
//! without panicking.
#![no_main]

use std::sync::OnceLock;

use ct_core::leaf::SignedEntry;
use ct_core::{DigitallySigned, LogKey, SignedCertificateTimestamp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static KEY: OnceLock<LogKey> = OnceLock::new();
    let key = KEY.get_or_init(ct_auditor_fuzz::fixtures::icarus_key);
    if let Ok(d) = DigitallySigned::decode(data) {
        assert_eq!(d.encode().expect("re-encodes"), data);
    }
    let Ok(sct) = SignedCertificateTimestamp::decode(data) else {
        return;
    };
    assert_eq!(sct.encode().expect("re-encodes"), data);
    let _ = ct_core::leaf::leaf_index_from_extensions(&sct.extensions);
    let entry = SignedEntry::X509(vec![0x30, 0x00]);
    assert!(sct.verify(key, &entry).is_err(), "a forged SCT verified");
    let te = sct.timestamped_entry(entry);
    let _ = ct_core::MerkleTreeLeaf::new(te).leaf_hash();
});
