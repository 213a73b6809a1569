//! The client's leaf rebuild (browser-client `sct`, over ct-core
//! `precert`): a certificate, its issuer and a TLS-delivered SCT
//! (input split by 2-byte length prefixes, see `ct_auditor_fuzz::split_n`)
//! are turned into RFC 6962 leaves and their SCTs checked against the test
//! log's log list. Nothing panics, every checked SCT's leaf hash is the
//! hash of the leaf rebuilt from its parts, and an SCT signature is valid
//! only over exactly what the test log signed (its certificates and SCT
//! fields; ECDSA signatures themselves may be re-encoded).
#![no_main]

use std::sync::OnceLock;

use browser_client::sct::{delivered_sct, embedded_scts, parse_log_list, Signature};
use ct_auditor_fuzz::{fixtures, split_n};
use ct_core::leaf::{MerkleTreeLeaf, PreCert, SignedEntry};
use ct_core::precert::{final_cert_tbs, issuer_key_hash, precert_entry_from_precert};
use ct_core::{LogList, SignedCertificateTimestamp};
use libfuzzer_sys::fuzz_target;

struct Ctx {
    list: LogList,
    /// TBS (SCT list removed) of the test log's certificate with embedded
    /// SCTs, and its issuer's key hash.
    embedded_tbs: Vec<u8>,
    issuer_key_hash: [u8; 32],
    tls_cert: Vec<u8>,
    tls_sct: SignedCertificateTimestamp,
}

fn ctx() -> &'static Ctx {
    static C: OnceLock<Ctx> = OnceLock::new();
    C.get_or_init(|| {
        let leaf = &fixtures::pem_certs(fixtures::TESTLOG_LEAF_PEM)[0];
        let issuer = &fixtures::pem_certs(fixtures::TESTLOG_ISSUER_PEM)[0];
        Ctx {
            list: parse_log_list(fixtures::TESTLOG_LOG_LIST).expect("fixture"),
            embedded_tbs: final_cert_tbs(leaf).expect("fixture").0,
            issuer_key_hash: issuer_key_hash(issuer).expect("fixture"),
            tls_cert: fixtures::pem_certs(fixtures::TESTLOG_TLS_LEAF_PEM)[0].clone(),
            tls_sct: SignedCertificateTimestamp::decode(fixtures::TESTLOG_TLS_SCT)
                .expect("fixture"),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let c = ctx();
    let parts = split_n(data, 3);
    let (cert, issuer, sct) = (parts[0], parts[1], parts[2]);
    if let Ok(checked) = embedded_scts(cert, issuer, &c.list) {
        if !checked.is_empty() {
            let (tbs, scts) = final_cert_tbs(cert).expect("accepted above");
            let entry = SignedEntry::Precert(PreCert {
                issuer_key_hash: issuer_key_hash(issuer).expect("accepted above"),
                tbs_certificate: tbs,
            });
            for (ch, sct) in checked.iter().zip(&scts) {
                let leaf = MerkleTreeLeaf::new(sct.timestamped_entry(entry.clone()));
                assert_eq!(ch.leaf_hash, leaf.leaf_hash().expect("hashes"));
                if ch.signature == Signature::Valid {
                    let SignedEntry::Precert(p) = &entry else {
                        unreachable!()
                    };
                    assert_eq!(p.tbs_certificate, c.embedded_tbs, "forged precert entry");
                    assert_eq!(p.issuer_key_hash, c.issuer_key_hash, "forged issuer");
                }
            }
        }
    }
    if let Ok(ch) = delivered_sct(cert, sct, &c.list) {
        let s = SignedCertificateTimestamp::decode(sct).expect("accepted above");
        let leaf = MerkleTreeLeaf::new(s.timestamped_entry(SignedEntry::X509(cert.to_vec())));
        assert_eq!(ch.leaf_hash, leaf.leaf_hash().expect("hashes"));
        if ch.signature == Signature::Valid {
            assert_eq!(cert, &c.tls_cert[..], "forged x509 entry");
            assert_eq!(
                (s.log_id, s.timestamp, &s.extensions),
                (c.tls_sct.log_id, c.tls_sct.timestamp, &c.tls_sct.extensions),
                "forged SCT fields"
            );
        }
    }
    let _ = precert_entry_from_precert(cert, issuer);
});
