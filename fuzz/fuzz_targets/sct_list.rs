//! The TLS-encoded `SignedCertificateTimestampList` (ct-core `precert`),
//! bare and wrapped in the X.509 extension's OCTET STRING: decoding never
//! panics, the SCT count is capped, and re-encoding a decoded list gives
//! the same bytes.
#![no_main]

use ct_core::precert::{
    decode_sct_list, decode_sct_list_extension, encode_sct_list, sct_list_extension_value,
    MAX_EMBEDDED_SCTS,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(list) = decode_sct_list(data) {
        assert!(!list.is_empty() && list.len() <= MAX_EMBEDDED_SCTS);
        assert_eq!(encode_sct_list(&list).expect("re-encodes"), data);
    }
    if let Ok(list) = decode_sct_list_extension(data) {
        assert!(!list.is_empty() && list.len() <= MAX_EMBEDDED_SCTS);
        assert_eq!(sct_list_extension_value(&list).expect("re-encodes"), data);
    }
});
