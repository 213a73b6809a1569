//! YPIR response wire format (pir-core `wire::Response`), as a client
//! reads an answer: parsing is canonical (re-encoding gives the same
//! bytes), and extracting a record from any parsed response with a real
//! query key returns a value or an error, never a panic.
#![no_main]

use ct_auditor_fuzz::tiny_pir;
use libfuzzer_sys::fuzz_target;
use pir_core::wire::Response;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = Response::from_bytes(data) else {
        return;
    };
    assert_eq!(
        r.to_bytes(),
        data,
        "re-encoding a parsed response changed it"
    );
    assert_eq!(Response::from_bytes(&r.to_bytes()).ok(), Some(r.clone()));
    let pir = tiny_pir();
    if let Ok(v) = pir.client.extract(&pir.key, &r) {
        assert!(u32::from(v) < pir.client.params().record_modulus());
    }
    let _ = pir.client.extract_bit(&pir.key, &r, 7);
    let _ = pir.client.noise_variance(&pir.key, &r);
});
