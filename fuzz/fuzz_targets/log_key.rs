//! A log's public key (ct-core `LogKey::from_spki_der`, as found in log
//! lists and configuration) and signature bytes checked against real keys:
//! parsing never panics, an accepted key keeps its exact DER and its log
//! ID is SHA-256 of it; arbitrary bytes as an ECDSA or RSA signature are
//! rejected without panicking.
#![no_main]

use std::sync::OnceLock;

use ct_auditor_fuzz::fixtures;
use ct_core::{DigitallySigned, LogKey};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    static KEYS: OnceLock<[LogKey; 2]> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        [
            LogKey::from_spki_der(fixtures::TEST_P256_SPKI).expect("fixture"),
            LogKey::from_spki_der(fixtures::TEST_RSA2048_SPKI).expect("fixture"),
        ]
    });
    if let Ok(k) = LogKey::from_spki_der(data) {
        assert_eq!(k.spki_der(), data);
        assert_eq!(k.log_id(), <[u8; 32]>::from(Sha256::digest(data)));
    }
    for k in keys {
        let sig = DigitallySigned {
            hash_algorithm: 4,
            signature_algorithm: k.key_type().signature_algorithm(),
            signature: data.to_vec(),
        };
        assert!(
            k.verify(b"fuzz", &sig, "fuzz").is_err(),
            "a forged signature verified"
        );
    }
});
