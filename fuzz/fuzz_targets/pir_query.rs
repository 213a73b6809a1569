//! YPIR query wire format (pir-core `wire::Query`), as a server reads a
//! request body. Parsing never panics, and the format is canonical: a
//! parsed query re-encodes to exactly the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_core::wire::Query;

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = Query::from_bytes(data) {
        assert_eq!(q.to_bytes(), data, "re-encoding a parsed query changed it");
        assert_eq!(Query::from_bytes(&q.to_bytes()).ok(), Some(q));
    }
});
