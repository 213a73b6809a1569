//! One certificate's DER (or PEM) through every certificate parser of
//! ct-core `precert` / `x509` and browser-client's PEM reader: nothing
//! panics; removing an extension leaves a TBSCertificate without it and
//! every other byte of it unchanged; the poison-free precert TBS and the
//! SCT-list-free final TBS parse again; validity read from the whole
//! certificate (x509-parser) and from its TBSCertificate (ct-core's own
//! DER walk, then x509-parser) agree.
#![no_main]

use ct_core::precert::{
    embedded_scts, final_cert_tbs, issuer_key_hash, precert_tbs, remove_extension, tbs_certificate,
    OID_CT_POISON, OID_SCT_LIST,
};
use ct_core::{cert_validity, tbs_validity};
use libfuzzer_sys::fuzz_target;

fn removal_is_clean(tbs: &[u8], oid: &[u8]) {
    let Ok((out, removed)) = remove_extension(tbs, oid) else {
        return;
    };
    match removed {
        None => assert_eq!(out, tbs),
        Some(_) => {
            let (again, none) = remove_extension(&out, oid).expect("output parses");
            assert!(none.is_none(), "extension still present after removal");
            assert_eq!(again, out);
            assert!(out.len() < tbs.len());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(certs) = browser_client::sct::parse_certificates(data) {
        assert!(!certs.is_empty());
    }
    let _ = issuer_key_hash(data);
    let cert_v = cert_validity(data);
    let tbs_v = tbs_validity(data);
    removal_is_clean(data, OID_SCT_LIST);
    removal_is_clean(data, OID_CT_POISON);
    let _ = tbs_v;
    let Ok(tbs) = tbs_certificate(data) else {
        return;
    };
    if let (Ok(a), Ok(b)) = (&cert_v, tbs_validity(tbs)) {
        assert_eq!(
            *a, b,
            "validity differs between certificate and TBS parsing"
        );
    }
    removal_is_clean(tbs, OID_SCT_LIST);
    removal_is_clean(tbs, OID_CT_POISON);
    if let Ok(p) = precert_tbs(data) {
        let (_, poison) = remove_extension(&p, OID_CT_POISON).expect("rebuilt TBS parses");
        assert!(poison.is_none());
    }
    match (final_cert_tbs(data), embedded_scts(data)) {
        (Ok((t, scts)), Ok(e)) => {
            assert_eq!(scts, e);
            let (_, list) = remove_extension(&t, OID_SCT_LIST).expect("rebuilt TBS parses");
            assert!(list.is_none());
        }
        (Ok(_), Err(e)) => panic!("final_cert_tbs accepted what embedded_scts refused: {e}"),
        _ => {}
    }
});
