//! Known-answer tests against real RFC 6962 responses of Google's "Icarus"
//! log (tests/data/icarus-2017-10.json): ECDSA P-256 tree-head signatures,
//! an RFC 9162 §2.1.4.2 consistency proof, an RFC 9162 §2.1.3.2 inclusion
//! proof and an `x509_entry` MerkleTreeLeaf.

mod common;

use ct_core::{
    cert_validity, entry_validity, verify_consistency, verify_inclusion, Error, Hash, KeyType,
    LogKey, MerkleTreeLeaf, SignedEntry, SignedTreeHead,
};
use serde_json::Value;

struct Icarus {
    key: LogKey,
    sth1: SignedTreeHead,
    sth2: SignedTreeHead,
    consistency: Vec<Hash>,
    leaf_index: u64,
    leaf_input: Vec<u8>,
    audit_path: Vec<Hash>,
}

fn hashes(v: &Value) -> Vec<Hash> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| common::b64_hash(h.as_str().unwrap()))
        .collect()
}

fn load() -> Icarus {
    let j: Value = serde_json::from_slice(&common::fixture("icarus-2017-10.json")).unwrap();
    let sth = |k: &str| SignedTreeHead::from_json(j[k].to_string().as_bytes()).unwrap();
    let inc = &j["inclusion"];
    assert_eq!(inc["tree_size"], j["sth2"]["tree_size"]);
    Icarus {
        key: LogKey::from_base64(j["key"].as_str().unwrap()).unwrap(),
        sth1: sth("sth1"),
        sth2: sth("sth2"),
        consistency: hashes(&j["consistency"]),
        leaf_index: inc["leaf_index"].as_u64().unwrap(),
        leaf_input: common::b64(inc["leaf_input"].as_str().unwrap()),
        audit_path: hashes(&inc["audit_path"]),
    }
}

#[test]
fn icarus_key_and_log_id() {
    let ic = load();
    assert_eq!(ic.key.key_type(), KeyType::EcdsaP256);
    // Icarus's log ID as published in Chrome's log list.
    assert_eq!(
        ic.key.log_id().to_base64(),
        "KTxRllTIOWW6qlD8WAfUt2+/WHopctykwwz05UVH9Hg="
    );
}

#[test]
fn real_tree_head_signatures_verify() {
    let ic = load();
    assert_eq!(ic.sth1.tree_size, 129_596_132);
    assert_eq!(ic.sth2.timestamp, 1_508_216_080_417);
    ic.sth1.verify(&ic.key).unwrap();
    ic.sth2.verify(&ic.key).unwrap();
    // Any change to the signed fields breaks the signature.
    for mutate in [
        |s: &mut SignedTreeHead| s.tree_size += 1,
        |s: &mut SignedTreeHead| s.timestamp -= 1,
        |s: &mut SignedTreeHead| s.root_hash[0] ^= 1,
    ] {
        let mut s = ic.sth1.clone();
        mutate(&mut s);
        assert!(matches!(s.verify(&ic.key), Err(Error::BadSignature { .. })));
    }
    // STH 2's signature does not cover STH 1.
    let mut s = ic.sth1.clone();
    s.signature = ic.sth2.signature.clone();
    assert!(s.verify(&ic.key).is_err());
    // JSON round trip.
    let again = SignedTreeHead::from_json(ic.sth1.to_json().unwrap().as_bytes()).unwrap();
    assert_eq!(again, ic.sth1);
}

#[test]
fn real_consistency_proof_verifies() {
    let ic = load();
    verify_consistency(
        ic.sth1.tree_size,
        ic.sth2.tree_size,
        &ic.consistency,
        &ic.sth1.root_hash,
        &ic.sth2.root_hash,
    )
    .unwrap();
    // Swapped roots, a dropped node, a flipped node: all fail.
    assert!(verify_consistency(
        ic.sth1.tree_size,
        ic.sth2.tree_size,
        &ic.consistency,
        &ic.sth2.root_hash,
        &ic.sth1.root_hash
    )
    .is_err());
    assert!(verify_consistency(
        ic.sth1.tree_size,
        ic.sth2.tree_size,
        &ic.consistency[1..],
        &ic.sth1.root_hash,
        &ic.sth2.root_hash
    )
    .is_err());
    let mut bad = ic.consistency.clone();
    bad[10][3] ^= 0x40;
    assert!(verify_consistency(
        ic.sth1.tree_size,
        ic.sth2.tree_size,
        &bad,
        &ic.sth1.root_hash,
        &ic.sth2.root_hash
    )
    .is_err());
}

#[test]
fn real_leaf_and_inclusion_proof() {
    let ic = load();
    let leaf = MerkleTreeLeaf::decode(&ic.leaf_input).unwrap();
    // Re-encoding reproduces the served bytes exactly.
    assert_eq!(leaf.encode().unwrap(), ic.leaf_input);
    let SignedEntry::X509(cert) = &leaf.timestamped_entry.signed_entry else {
        panic!("leaf 120000000 is an x509_entry");
    };
    // A Let's Encrypt certificate valid 2017-09-27T19:43:00Z..2017-12-26T19:43:00Z.
    let v = cert_validity(cert).unwrap();
    assert_eq!(v.not_before, 1_506_541_380);
    assert_eq!(v.not_after, 1_514_317_380);
    assert_eq!(
        entry_validity(&leaf.timestamped_entry.signed_entry).unwrap(),
        v
    );
    // DER with a trailing byte, or cut short, is rejected.
    let mut long = cert.clone();
    long.push(0);
    assert!(matches!(
        cert_validity(&long),
        Err(Error::TrailingBytes {
            what: "certificate",
            count: 1
        })
    ));
    assert!(matches!(
        cert_validity(&cert[..cert.len() - 1]),
        Err(Error::X509 { .. })
    ));
    assert!(leaf.timestamped_entry.extensions.is_empty());
    assert_eq!(
        leaf.timestamped_entry.leaf_index().unwrap_err().to_string(),
        "missing leaf_index extension"
    );

    let lh = leaf.leaf_hash().unwrap();
    verify_inclusion(
        &lh,
        ic.leaf_index,
        ic.sth2.tree_size,
        &ic.audit_path,
        &ic.sth2.root_hash,
    )
    .unwrap();
    assert!(matches!(
        verify_inclusion(
            &lh,
            ic.leaf_index + 1,
            ic.sth2.tree_size,
            &ic.audit_path,
            &ic.sth2.root_hash
        ),
        Err(Error::RootMismatch { .. })
    ));
    assert!(verify_inclusion(
        &lh,
        ic.leaf_index,
        ic.sth2.tree_size,
        &ic.audit_path,
        &ic.sth1.root_hash
    )
    .is_err());
    let mut other = leaf.clone();
    other.timestamped_entry.timestamp += 1;
    assert!(verify_inclusion(
        &other.leaf_hash().unwrap(),
        ic.leaf_index,
        ic.sth2.tree_size,
        &ic.audit_path,
        &ic.sth2.root_hash
    )
    .is_err());
}
