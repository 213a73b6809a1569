//! Signature verification: log keys, get-sth JSON, static-ct-api checkpoints
//! and SCTs, with real vectors where available and the throwaway test keys
//! of tests/data otherwise.

mod common;

use ct_core::checkpoint::{MAX_NOTE_SIGNATURES, MAX_NOTE_SIZE};
use ct_core::sth::{HASH_ALGORITHM_SHA256, SIGNATURE_ALGORITHM_ECDSA, SIGNATURE_ALGORITHM_RSA};
use ct_core::{
    encode_leaf_index_extension, rfc6962_key_id, sct_signature_input, tree_head_signature_input,
    verify_checkpoint, Checkpoint, DigitallySigned, Error, Hash, KeyType, LogKey, NoteSignature,
    PreCert, Rfc6962NoteSignature, SignedCertificateTimestamp, SignedEntry, SignedNote,
    SignedTreeHead,
};
use p256::pkcs8::DecodePrivateKey as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use sha2::{Digest, Sha256};

const ORIGIN: &str = "static.example.test/2026h1";
const ROOT: Hash = [0x5a; 32];

/// A test signer: one of the throwaway fixture keys.
enum TestKey {
    P256(p256::ecdsa::SigningKey),
    Rsa(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
}

impl TestKey {
    fn p256() -> Self {
        TestKey::P256(
            p256::ecdsa::SigningKey::from_pkcs8_der(&common::fixture("test-p256.pk8.der")).unwrap(),
        )
    }

    fn rsa() -> Self {
        let k =
            rsa::RsaPrivateKey::from_pkcs8_der(&common::fixture("test-rsa2048.pk8.der")).unwrap();
        TestKey::Rsa(Box::new(rsa::pkcs1v15::SigningKey::new(k)))
    }

    fn public(&self) -> LogKey {
        LogKey::from_spki_der(&common::fixture(match self {
            TestKey::P256(_) => "test-p256.spki.der",
            TestKey::Rsa(_) => "test-rsa2048.spki.der",
        }))
        .unwrap()
    }

    fn sign(&self, msg: &[u8]) -> DigitallySigned {
        match self {
            TestKey::P256(k) => {
                let s: p256::ecdsa::Signature = k.sign(msg);
                DigitallySigned {
                    hash_algorithm: HASH_ALGORITHM_SHA256,
                    signature_algorithm: SIGNATURE_ALGORITHM_ECDSA,
                    signature: s.to_der().as_bytes().to_vec(),
                }
            }
            TestKey::Rsa(k) => DigitallySigned {
                hash_algorithm: HASH_ALGORITHM_SHA256,
                signature_algorithm: SIGNATURE_ALGORITHM_RSA,
                signature: k.sign(msg).to_vec(),
            },
        }
    }
}

// --- LogKey -----------------------------------------------------------------

#[test]
fn log_keys_parse_and_hash_to_their_log_id() {
    for (file, kind) in [
        ("test-p256.spki.der", KeyType::EcdsaP256),
        ("test-rsa2048.spki.der", KeyType::Rsa),
    ] {
        let der = common::fixture(file);
        let k = LogKey::from_spki_der(&der).unwrap();
        assert_eq!(k.key_type(), kind);
        assert_eq!(k.spki_der(), &der[..]);
        let want: [u8; 32] = Sha256::digest(&der).into();
        assert_eq!(k.log_id(), want, "RFC 6962 §3.2 log ID");
        assert_eq!(LogKey::from_base64(&common::b64e(&der)).unwrap(), k);
    }
}

#[test]
fn unsupported_and_malformed_keys_are_rejected() {
    for file in [
        "test-rsa1024.spki.der",
        "test-p384.spki.der",
        "test-ed25519.spki.der",
    ] {
        let r = LogKey::from_spki_der(&common::fixture(file));
        assert!(matches!(r, Err(Error::UnsupportedKey(_))), "{file}: {r:?}");
    }
    assert!(matches!(
        LogKey::from_spki_der(b"garbage"),
        Err(Error::X509 { .. })
    ));
    assert!(matches!(
        LogKey::from_spki_der(&[]),
        Err(Error::X509 { .. })
    ));
    let mut trailing = common::fixture("test-p256.spki.der");
    trailing.push(0);
    assert!(matches!(
        LogKey::from_spki_der(&trailing),
        Err(Error::TrailingBytes { count: 1, .. })
    ));
    let mut truncated = common::fixture("test-p256.spki.der");
    truncated.pop();
    assert!(LogKey::from_spki_der(&truncated).is_err());
    assert!(matches!(
        LogKey::from_spki_der(&vec![0x30; 4096]),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        LogKey::from_base64("%%%"),
        Err(Error::Base64 { .. })
    ));
    assert!(matches!(
        LogKey::from_base64(&"A".repeat(10_000)),
        Err(Error::TooLarge { .. })
    ));
}

// --- get-sth ----------------------------------------------------------------

fn sth_json(key: &TestKey, tree_size: u64, timestamp: u64) -> String {
    let sig = key.sign(&tree_head_signature_input(timestamp, tree_size, &ROOT));
    SignedTreeHead {
        tree_size,
        timestamp,
        root_hash: ROOT,
        signature: sig,
    }
    .to_json()
    .unwrap()
}

#[test]
fn tree_head_signature_input_layout() {
    // RFC 6962 §3.5: v1, tree_hash, timestamp, tree_size, root.
    let b = tree_head_signature_input(0x0102030405060708, 0x1112131415161718, &[0xee; 32]);
    assert_eq!(&b[..2], &[0, 1]);
    assert_eq!(&b[2..10], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(
        &b[10..18],
        &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
    );
    assert_eq!(&b[18..], &[0xee; 32]);
}

#[test]
fn sth_signatures_verify_with_the_right_key_only() {
    let (ec, rsa) = (TestKey::p256(), TestKey::rsa());
    for (signer, other_type) in [(&ec, &rsa), (&rsa, &ec)] {
        let sth = SignedTreeHead::from_json(sth_json(signer, 1234, 1_700_000_000_000).as_bytes())
            .unwrap();
        assert_eq!(sth.tree_size, 1234);
        assert_eq!(sth.root_hash, ROOT);
        sth.verify(&signer.public()).unwrap();
        // Key of the other algorithm.
        assert!(matches!(
            sth.verify(&other_type.public()),
            Err(Error::SignatureKeyMismatch { .. })
        ));
        // Tampered tree size.
        let mut t = sth.clone();
        t.tree_size += 1;
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::BadSignature { what: "tree head" })
        ));
        // Corrupted signature bytes.
        let mut t = sth.clone();
        let n = t.signature.signature.len();
        t.signature.signature[n - 3] ^= 0x10;
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::BadSignature { .. })
        ));
        // Unsupported hash algorithm (SHA-1 = 2).
        let mut t = sth.clone();
        t.signature.hash_algorithm = 2;
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::UnsupportedSignatureAlgorithm { hash: 2, .. })
        ));
        // Unknown signature algorithm (DSA = 2).
        let mut t = sth.clone();
        t.signature.signature_algorithm = 2;
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::UnsupportedSignatureAlgorithm { signature: 2, .. })
        ));
        // Empty and garbage signatures.
        let mut t = sth.clone();
        t.signature.signature.clear();
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::BadSignature { .. })
        ));
        t.signature.signature = vec![0x30, 0x03, 0x02, 0x01];
        assert!(matches!(
            t.verify(&signer.public()),
            Err(Error::BadSignature { .. })
        ));
    }
    // Wrong key of the same type: a real log's key.
    let icarus = LogKey::from_base64(
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAETtK8v7MICve56qTHHDhhBOuV4IlUaESxZryCfk9QbG9co/CqPvTsgPDbCpp6oFtyAHwlDhnvr7JijXRD9Cb2FA==",
    )
    .unwrap();
    let sth = SignedTreeHead::from_json(sth_json(&ec, 1, 2).as_bytes()).unwrap();
    assert!(matches!(
        sth.verify(&icarus),
        Err(Error::BadSignature { .. })
    ));
}

#[test]
fn get_sth_json_errors() {
    let ec = TestKey::p256();
    let good: serde_json::Value = serde_json::from_str(&sth_json(&ec, 5, 6)).unwrap();
    let with = |field: &str, v: serde_json::Value| {
        let mut j = good.clone();
        j[field] = v;
        j.to_string()
    };
    let without = |field: &str| {
        let mut j = good.clone();
        j.as_object_mut().unwrap().remove(field);
        j.to_string()
    };
    // Unknown fields are ignored.
    assert!(SignedTreeHead::from_json(with("extra", 7.into()).as_bytes()).is_ok());

    let json_err = |s: String| {
        let r = SignedTreeHead::from_json(s.as_bytes());
        assert!(matches!(r, Err(Error::Json { .. })), "{s}: {r:?}");
    };
    json_err(without("tree_size"));
    json_err(without("tree_head_signature"));
    json_err(with("tree_size", (-1).into()));
    json_err(with("tree_size", 1.5.into()));
    json_err(with("tree_size", "5".into()));
    json_err(with("timestamp", serde_json::json!(18446744073709551616.0)));
    json_err("not json".into());
    json_err("[]".into());
    json_err(String::new());

    let r = SignedTreeHead::from_json(with("sha256_root_hash", "!!!!".into()).as_bytes());
    assert!(
        matches!(
            r,
            Err(Error::Base64 {
                what: "sha256_root_hash",
                ..
            })
        ),
        "{r:?}"
    );
    let r = SignedTreeHead::from_json(
        with("sha256_root_hash", common::b64e(&[1; 31]).into()).as_bytes(),
    );
    assert!(matches!(r, Err(Error::TooSmall { len: 31, .. })), "{r:?}");
    let r = SignedTreeHead::from_json(
        with("sha256_root_hash", common::b64e(&[1; 33]).into()).as_bytes(),
    );
    assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");

    // DigitallySigned with trailing bytes, truncated.
    let sig = common::b64(good["tree_head_signature"].as_str().unwrap());
    let mut long = sig.clone();
    long.push(0);
    let r = SignedTreeHead::from_json(
        with("tree_head_signature", common::b64e(&long).into()).as_bytes(),
    );
    assert!(
        matches!(
            r,
            Err(Error::TrailingBytes {
                what: "DigitallySigned",
                ..
            })
        ),
        "{r:?}"
    );
    let r = SignedTreeHead::from_json(
        with(
            "tree_head_signature",
            common::b64e(&sig[..sig.len() - 1]).into(),
        )
        .as_bytes(),
    );
    assert!(matches!(r, Err(Error::Truncated { .. })), "{r:?}");

    // Oversize body.
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(70_000));
    assert!(matches!(
        SignedTreeHead::from_json(big.as_bytes()),
        Err(Error::TooLarge {
            what: "get-sth response",
            ..
        })
    ));
}

#[test]
fn digitally_signed_round_trip() {
    let d = DigitallySigned {
        hash_algorithm: 4,
        signature_algorithm: 3,
        signature: vec![1, 2, 3],
    };
    let enc = d.encode().unwrap();
    assert_eq!(enc, vec![4, 3, 0, 3, 1, 2, 3]);
    assert_eq!(DigitallySigned::decode(&enc).unwrap(), d);
    assert!(DigitallySigned::decode(&enc[..2]).is_err());
    let too_long = DigitallySigned {
        signature: vec![0; 70_000],
        ..d
    };
    assert!(matches!(too_long.encode(), Err(Error::TooLarge { .. })));
}

// --- checkpoints --------------------------------------------------------------

#[test]
fn real_static_ct_checkpoint_verifies() {
    // rome.ct.filippo.io/2024h1, a Sunlight log.
    let note = common::fixture("rome2024h1.checkpoint");
    let key_b64 = String::from_utf8(common::fixture("rome2024h1.key.b64")).unwrap();
    let key = LogKey::from_base64(key_b64.trim()).unwrap();
    let origin = "rome.ct.filippo.io/2024h1";
    // c2sp.org/static-ct-api: key ID = SHA-256(name ‖ 0x0A ‖ 0x05 ‖ LogID)[:4].
    assert_eq!(rfc6962_key_id(origin, &key.log_id()), 0x78f4_abae);
    let v = verify_checkpoint(&note, origin, &key).unwrap();
    assert_eq!(v.checkpoint.tree_size, 115_474_666);
    assert_eq!(
        common::b64e(&v.checkpoint.root_hash),
        "2q1K6aiIJR+F7TyhiWOghoWOjY0/3dVBLsBbAvB4xCw="
    );
    assert_eq!(v.timestamp, 0x018e_7e81_5952);
    // The equivalent get-sth verifies as an RFC 6962 STH.
    v.to_signed_tree_head().verify(&key).unwrap();
    // Re-serialising the parsed note reproduces it byte for byte.
    assert_eq!(
        SignedNote::parse(&note).unwrap().to_text().as_bytes(),
        &note[..]
    );
    // Tampering with the size breaks it.
    let bad = String::from_utf8(note.clone())
        .unwrap()
        .replace("115474666", "115474667");
    assert!(matches!(
        verify_checkpoint(bad.as_bytes(), origin, &key),
        Err(Error::BadSignature { what: "checkpoint" })
    ));
}

/// Builds a checkpoint note signed by `key` (plus `extra` signature lines).
fn signed_checkpoint(
    key: &TestKey,
    origin: &str,
    size: u64,
    timestamp: u64,
    extensions: &[&str],
    extra: Vec<NoteSignature>,
) -> Vec<u8> {
    let cp = Checkpoint {
        origin: origin.into(),
        tree_size: size,
        root_hash: ROOT,
        extensions: extensions.iter().map(|s| s.to_string()).collect(),
    };
    let body = Rfc6962NoteSignature {
        timestamp,
        signature: key.sign(&tree_head_signature_input(timestamp, size, &ROOT)),
    };
    let mut signatures = extra;
    signatures.push(NoteSignature {
        name: origin.into(),
        key_id: rfc6962_key_id(origin, &key.public().log_id()),
        signature: body.encode().unwrap(),
    });
    SignedNote {
        text: cp.to_text(),
        signatures,
    }
    .to_text()
    .into_bytes()
}

#[test]
fn checkpoint_signatures_verify_for_both_key_types() {
    for key in [TestKey::p256(), TestKey::rsa()] {
        let note = signed_checkpoint(&key, ORIGIN, 99, 1_700_000_000_123, &[], vec![]);
        let v = verify_checkpoint(&note, ORIGIN, &key.public()).unwrap();
        assert_eq!(v.checkpoint.tree_size, 99);
        assert_eq!(v.checkpoint.root_hash, ROOT);
        assert_eq!(v.timestamp, 1_700_000_000_123);
    }
}

#[test]
fn unknown_signatures_are_ignored() {
    let key = TestKey::p256();
    let id = rfc6962_key_id(ORIGIN, &key.public().log_id());
    let extra = vec![
        // A witness cosignature.
        NoteSignature {
            name: "witness.example/w1".into(),
            key_id: 0x0102_0304,
            signature: vec![9; 72],
        },
        // Same name, another key ID (e.g. the log's Ed25519 key).
        NoteSignature {
            name: ORIGIN.into(),
            key_id: id ^ 1,
            signature: vec![7; 64],
        },
        // Same key ID, another name.
        NoteSignature {
            name: "other.example/log".into(),
            key_id: id,
            signature: vec![5; 80],
        },
    ];
    let note = signed_checkpoint(&key, ORIGIN, 7, 8, &[], extra);
    assert_eq!(SignedNote::parse(&note).unwrap().signatures.len(), 4);
    verify_checkpoint(&note, ORIGIN, &key.public()).unwrap();
}

#[test]
fn checkpoint_verification_errors() {
    let key = TestKey::p256();
    let public = key.public();
    let note = signed_checkpoint(&key, ORIGIN, 7, 8, &[], vec![]);

    // Expected origin differs from the origin line.
    assert!(matches!(
        verify_checkpoint(&note, "static.example.test/2026h2", &public),
        Err(Error::OriginMismatch { .. })
    ));
    // Wrong key: no signature from it (its key ID differs).
    assert!(matches!(
        verify_checkpoint(&note, ORIGIN, &TestKey::rsa().public()),
        Err(Error::NoKnownSignature { .. })
    ));
    // Key name differing from the origin line is not the log's signature.
    let other_name = signed_checkpoint(&key, "static.example.test/other", 7, 8, &[], vec![]);
    let cp_text = String::from_utf8(other_name).unwrap().replacen(
        "static.example.test/other\n",
        &format!("{ORIGIN}\n"),
        1,
    );
    assert!(matches!(
        verify_checkpoint(cp_text.as_bytes(), ORIGIN, &public),
        Err(Error::NoKnownSignature { .. })
    ));
    // Extension lines are forbidden with RFC 6962 signatures.
    let ext = signed_checkpoint(&key, ORIGIN, 7, 8, &["extra line"], vec![]);
    assert!(matches!(
        verify_checkpoint(&ext, ORIGIN, &public),
        Err(Error::Malformed {
            what: "checkpoint",
            ..
        })
    ));
    // A signature from the right key that fails rejects the whole note,
    // even next to a valid one.
    let mut parsed = SignedNote::parse(&note).unwrap();
    let mut bad = parsed.signatures[0].clone();
    let mut body = Rfc6962NoteSignature::decode(&bad.signature).unwrap();
    body.timestamp += 1;
    bad.signature = body.encode().unwrap();
    parsed.signatures.push(bad);
    assert!(matches!(
        verify_checkpoint(parsed.to_text().as_bytes(), ORIGIN, &public),
        Err(Error::BadSignature { .. })
    ));
    // Trailing bytes after the RFC6962NoteSignature.
    let mut parsed = SignedNote::parse(&note).unwrap();
    parsed.signatures[0].signature.push(0);
    assert!(matches!(
        verify_checkpoint(parsed.to_text().as_bytes(), ORIGIN, &public),
        Err(Error::TrailingBytes {
            what: "RFC6962NoteSignature",
            ..
        })
    ));
    // Truncated RFC6962NoteSignature.
    let mut parsed = SignedNote::parse(&note).unwrap();
    parsed.signatures[0].signature.truncate(9);
    assert!(matches!(
        verify_checkpoint(parsed.to_text().as_bytes(), ORIGIN, &public),
        Err(Error::Truncated { .. })
    ));
}

#[test]
fn latest_of_several_valid_signatures_is_reported() {
    let key = TestKey::p256();
    let a = signed_checkpoint(&key, ORIGIN, 7, 100, &[], vec![]);
    let b = signed_checkpoint(&key, ORIGIN, 7, 200, &[], vec![]);
    let mut note = SignedNote::parse(&b).unwrap();
    note.signatures
        .extend(SignedNote::parse(&a).unwrap().signatures);
    let v = verify_checkpoint(note.to_text().as_bytes(), ORIGIN, &key.public()).unwrap();
    assert_eq!(v.timestamp, 200);
}

#[test]
fn malformed_notes_are_rejected() {
    let sig = "\u{2014} example.com/log AQIDBAU=\n";
    let ok = format!("a\nb\n\n{sig}");
    SignedNote::parse(ok.as_bytes()).unwrap();
    let bad: Vec<(&str, String)> = vec![
        ("no blank line", format!("a\nb\n{sig}")),
        ("no signatures", "a\nb\n\n".into()),
        ("no final newline", format!("a\nb\n\n{}", sig.trim_end())),
        ("carriage return", format!("a\r\nb\n\n{sig}")),
        ("tab", format!("a\tb\n\n{sig}")),
        ("ascii dash", "a\n\n-- example.com/log AQIDBAU=\n".into()),
        ("no space", "a\n\n\u{2014}example.com/log AQIDBAU=\n".into()),
        ("plus in name", "a\n\n\u{2014} ex+ample AQIDBAU=\n".into()),
        ("empty name", "a\n\n\u{2014}  AQIDBAU=\n".into()),
        (
            "unicode space in name",
            "a\n\n\u{2014} ex\u{00a0}ample AQIDBAU=\n".into(),
        ),
        (
            "bad base64",
            "a\n\n\u{2014} example.com/log AQID*AU=\n".into(),
        ),
        (
            "key id only",
            "a\n\n\u{2014} example.com/log AQIDBA==\n".into(),
        ),
        ("too short", "a\n\n\u{2014} example.com/log AQI=\n".into()),
        (
            "trailing space",
            "a\n\n\u{2014} example.com/log AQIDBAU= \n".into(),
        ),
        ("blank after sigs", format!("a\n\n{sig}\n")),
    ];
    for (why, note) in bad {
        assert!(
            SignedNote::parse(note.as_bytes()).is_err(),
            "{why}: {note:?}"
        );
    }
    assert!(
        SignedNote::parse(b"a\n\n\xff\xfe\n").is_err(),
        "invalid UTF-8"
    );

    // Size and signature-count caps.
    let big = format!("{}\n\n{sig}", "a".repeat(MAX_NOTE_SIZE));
    assert!(matches!(
        SignedNote::parse(big.as_bytes()),
        Err(Error::TooLarge { .. })
    ));
    let many = format!("a\n\n{}", sig.repeat(MAX_NOTE_SIGNATURES + 1));
    assert!(matches!(
        SignedNote::parse(many.as_bytes()),
        Err(Error::TooLarge { .. })
    ));
    let enough = format!("a\n\n{}", sig.repeat(MAX_NOTE_SIGNATURES));
    assert_eq!(
        SignedNote::parse(enough.as_bytes())
            .unwrap()
            .signatures
            .len(),
        MAX_NOTE_SIGNATURES
    );
    // The text may hold blank lines: the last one separates the signatures.
    let n = SignedNote::parse(format!("a\n\nb\n\n{sig}").as_bytes()).unwrap();
    assert_eq!(n.text, "a\n\nb\n");
}

#[test]
fn checkpoint_text_parsing() {
    let root = common::b64e(&ROOT);
    let cp = Checkpoint::parse(&format!("o\n0\n{root}\n")).unwrap();
    assert_eq!(cp.tree_size, 0);
    let cp = Checkpoint::parse(&format!("o\n18446744073709551615\n{root}\next1\next2\n")).unwrap();
    assert_eq!(cp.tree_size, u64::MAX);
    assert_eq!(cp.extensions, vec!["ext1", "ext2"]);
    assert_eq!(Checkpoint::parse(&cp.to_text()).unwrap(), cp);
    for bad in [
        format!("o\n01\n{root}\n"),
        format!("o\n+1\n{root}\n"),
        format!("o\n-1\n{root}\n"),
        format!("o\n1 \n{root}\n"),
        format!("o\n18446744073709551616\n{root}\n"),
        format!("o\n\n{root}\n"),
        format!("\n1\n{root}\n"),
        format!("o\n1\n{root}"),
        format!("o\n1\n{root}\n\nx\n"),
        "o\n1\n".to_string(),
        "o\n".to_string(),
        String::new(),
        format!("o\n1\n{}\n", common::b64e(&[1; 31])),
        format!("o\n1\n{}\n", common::b64e(&[1; 33])),
        "o\n1\nnot base64!\n".to_string(),
    ] {
        assert!(Checkpoint::parse(&bad).is_err(), "{bad:?}");
    }
}

// --- SCTs -----------------------------------------------------------------------

fn entries() -> Vec<SignedEntry> {
    vec![
        SignedEntry::X509(b"a certificate".to_vec()),
        SignedEntry::Precert(PreCert {
            issuer_key_hash: [3; 32],
            tbs_certificate: b"a tbs".to_vec(),
        }),
    ]
}

#[test]
fn sct_signatures_verify() {
    for key in [TestKey::p256(), TestKey::rsa()] {
        let public = key.public();
        for entry in entries() {
            let ext = encode_leaf_index_extension(42).unwrap();
            let input = sct_signature_input(1_700_000_000_000, &entry, &ext).unwrap();
            // RFC 6962 §3.2: v1, certificate_timestamp, then a TimestampedEntry.
            assert_eq!(&input[..2], &[0, 0]);
            let sct = SignedCertificateTimestamp {
                log_id: public.log_id(),
                timestamp: 1_700_000_000_000,
                extensions: ext.clone(),
                signature: key.sign(&input),
            };
            let te = sct.timestamped_entry(entry.clone());
            assert_eq!(&input[2..], &te.encode().unwrap()[..]);
            let decoded = SignedCertificateTimestamp::decode(&sct.encode().unwrap()).unwrap();
            assert_eq!(decoded, sct);
            decoded.verify(&public, &entry).unwrap();

            // Another entry.
            let other = SignedEntry::X509(b"another".to_vec());
            assert!(matches!(
                decoded.verify(&public, &other),
                Err(Error::BadSignature { what: "SCT" })
            ));
            // Other extensions.
            let mut t = decoded.clone();
            t.extensions = encode_leaf_index_extension(43).unwrap();
            assert!(t.verify(&public, &entry).is_err());
            // Wrong log ID.
            let mut t = decoded.clone();
            let mut id = t.log_id.to_bytes();
            id[0] ^= 1;
            t.log_id = id.into();
            assert!(matches!(
                t.verify(&public, &entry),
                Err(Error::LogIdMismatch { .. })
            ));
        }
    }
}

#[test]
fn sct_decoding_errors() {
    let key = TestKey::p256();
    let entry = &entries()[0];
    let input = sct_signature_input(5, entry, &[]).unwrap();
    let sct = SignedCertificateTimestamp {
        log_id: key.public().log_id(),
        timestamp: 5,
        extensions: vec![],
        signature: key.sign(&input),
    };
    let enc = sct.encode().unwrap();
    let mut v1 = enc.clone();
    v1[0] = 1;
    assert!(matches!(
        SignedCertificateTimestamp::decode(&v1),
        Err(Error::UnknownEnum { value: 1, .. })
    ));
    let mut long = enc.clone();
    long.push(0);
    assert!(matches!(
        SignedCertificateTimestamp::decode(&long),
        Err(Error::TrailingBytes { .. })
    ));
    for cut in 0..enc.len() {
        assert!(matches!(
            SignedCertificateTimestamp::decode(&enc[..cut]),
            Err(Error::Truncated { .. })
        ));
    }
}
