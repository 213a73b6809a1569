//! The epoch manifest (audit-proto `Manifest::from_json`), as a client
//! reads `GET /v1/manifest`: parsing never panics; a parsed manifest
//! serializes to JSON that parses back to the same manifest; every filter
//! and bit maps into a database; and for the TOY parameter set the
//! browser client's prober builds a query from it (the path a malicious
//! auditor's manifest takes into the client).
#![no_main]

use std::sync::Arc;

use audit_proto::Manifest;
use browser_client::probe::Prober;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = Manifest::from_json(data) else {
        return;
    };
    let json = m.to_json();
    let back = Manifest::from_json(&json).expect("a manifest's own JSON parses");
    assert_eq!(back, m, "JSON round trip changed the manifest");
    assert_eq!(back.to_json(), json);
    let leaf = audit_proto::LeafHash::new([0x5a; 32]);
    for f in [0, m.filter.a / 2, m.filter.a - 1, m.filter.a] {
        match m.probe(f, &leaf) {
            Ok(p) => {
                assert!(f < m.filter.a);
                let db = &m.dbs[p.db as usize];
                assert!(p.bit < db.bits);
            }
            Err(_) => assert!(f >= m.filter.a),
        }
    }
    let _ = m.locate(0, m.filter.bits);
    let _ = m.coverage(&audit_proto::LogId::new([0; 32]));
    if m.pir.param_set == pir_core::params::TOY.id {
        let prober = Prober::new(Arc::new(m));
        if let Ok(q) = prober.prepare_in(0, &leaf) {
            let _ = q.decode(&vec![0u8; q.response_bytes.min(1 << 16)]);
        }
    }
});
