//! Log keys, `DigitallySigned`, signed tree heads and SCT signatures.
//!
//! * [`LogKey`]: a log's public key from its DER SubjectPublicKeyInfo. RFC
//!   6962 §2.1.4 allows ECDSA over NIST P-256 or RSA, both with SHA-256; the
//!   log ID is `SHA-256(SPKI)` (RFC 6962 §3.2).
//! * [`DigitallySigned`]: the TLS `digitally-signed` encoding (RFC 5246
//!   §4.7 and §7.4.1.4.1): `uint8 hash`, `uint8 signature`,
//!   `opaque signature<0..2^16-1>`. ECDSA signatures are DER
//!   `Ecdsa-Sig-Value`s; RSA signatures are PKCS#1 v1.5.
//! * [`SignedTreeHead`]: RFC 6962 §4.3 `get-sth` JSON and the §3.5
//!   `TreeHeadSignature` it signs.
//! * [`SignedCertificateTimestamp`] and [`verify_sct_signature`]: RFC 6962
//!   §3.2 SCTs and their signed struct.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use p256::ecdsa::signature::Verifier as _;
use p256::pkcs8::DecodePublicKey as _;
use rsa::traits::PublicKeyParts as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use x509_parser::prelude::FromDer as _;
use x509_parser::x509::SubjectPublicKeyInfo;

use crate::error::{Error, Result};
use crate::ids::LogId;
use crate::leaf::{SignedEntry, TimestampedEntry, VERSION_V1};
use crate::merkle::{Hash, HASH_LEN};
use crate::tls::{Reader, Writer};

/// `HashAlgorithm.sha256` (RFC 5246 §7.4.1.4.1).
pub const HASH_ALGORITHM_SHA256: u8 = 4;
/// `SignatureAlgorithm.rsa` (RFC 5246 §7.4.1.4.1).
pub const SIGNATURE_ALGORITHM_RSA: u8 = 1;
/// `SignatureAlgorithm.ecdsa` (RFC 5246 §7.4.1.4.1).
pub const SIGNATURE_ALGORITHM_ECDSA: u8 = 3;
/// `SignatureType.certificate_timestamp` (RFC 6962 §3.2).
pub const SIGNATURE_TYPE_CERTIFICATE_TIMESTAMP: u8 = 0;
/// `SignatureType.tree_hash` (RFC 6962 §3.2).
pub const SIGNATURE_TYPE_TREE_HASH: u8 = 1;

/// Largest SubjectPublicKeyInfo accepted (a 4096-bit RSA SPKI is ~550 bytes).
pub const MAX_SPKI_LEN: usize = 2048;
/// Smallest RSA modulus accepted, in bits.
pub const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted, in bits.
pub const MAX_RSA_BITS: usize = 4096;
/// Largest `get-sth` response accepted.
pub const MAX_STH_JSON_LEN: usize = 64 << 10;
/// Length of an RFC 6962 §3.5 `TreeHeadSignature` input.
pub const TREE_HEAD_SIGNATURE_INPUT_LEN: usize = 1 + 1 + 8 + 8 + HASH_LEN;

/// The algorithm of a [`LogKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// ECDSA on NIST P-256 with SHA-256.
    EcdsaP256,
    /// RSA PKCS#1 v1.5 with SHA-256.
    Rsa,
}

impl KeyType {
    /// The TLS `SignatureAlgorithm` value signatures by this key carry.
    pub fn signature_algorithm(self) -> u8 {
        match self {
            KeyType::EcdsaP256 => SIGNATURE_ALGORITHM_ECDSA,
            KeyType::Rsa => SIGNATURE_ALGORITHM_RSA,
        }
    }

    fn name(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ECDSA P-256",
            KeyType::Rsa => "RSA",
        }
    }
}

#[derive(Clone, Debug)]
enum Verifier {
    EcdsaP256(p256::ecdsa::VerifyingKey),
    Rsa(rsa::pkcs1v15::VerifyingKey<Sha256>),
}

/// A CT log's public key.
#[derive(Clone, Debug)]
pub struct LogKey {
    spki_der: Vec<u8>,
    log_id: LogId,
    verifier: Verifier,
}

impl PartialEq for LogKey {
    fn eq(&self, other: &Self) -> bool {
        self.spki_der == other.spki_der
    }
}

impl Eq for LogKey {}

impl LogKey {
    /// Parses a DER SubjectPublicKeyInfo (RFC 5280 §4.1.2.7), accepting
    /// `id-ecPublicKey` on P-256 and `rsaEncryption` with a 2048- to
    /// 4096-bit modulus. Trailing bytes are rejected.
    pub fn from_spki_der(der: &[u8]) -> Result<Self> {
        const WHAT: &str = "SubjectPublicKeyInfo";
        if der.len() > MAX_SPKI_LEN {
            return Err(Error::TooLarge {
                what: WHAT,
                len: der.len(),
                max: MAX_SPKI_LEN,
            });
        }
        let (rest, spki) = SubjectPublicKeyInfo::from_der(der).map_err(|e| Error::x509(WHAT, e))?;
        if !rest.is_empty() {
            return Err(Error::TrailingBytes {
                what: WHAT,
                count: rest.len(),
            });
        }
        let alg = &spki.algorithm.algorithm;
        let verifier = if *alg == x509_parser::oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY {
            let key = p256::ecdsa::VerifyingKey::from_public_key_der(der).map_err(|e| {
                Error::UnsupportedKey(format!("EC key is not a valid P-256 key: {e}"))
            })?;
            Verifier::EcdsaP256(key)
        } else if *alg == x509_parser::oid_registry::OID_PKCS1_RSAENCRYPTION {
            let key = rsa::RsaPublicKey::from_public_key_der(der)
                .map_err(|e| Error::UnsupportedKey(format!("invalid RSA key: {e}")))?;
            let bits = key.size() * 8;
            if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
                return Err(Error::UnsupportedKey(format!(
                    "RSA modulus of {bits} bits is outside {MIN_RSA_BITS}..={MAX_RSA_BITS}"
                )));
            }
            Verifier::Rsa(rsa::pkcs1v15::VerifyingKey::new(key))
        } else {
            return Err(Error::UnsupportedKey(format!(
                "algorithm {alg} is neither id-ecPublicKey nor rsaEncryption"
            )));
        };
        Ok(LogKey {
            spki_der: der.to_vec(),
            log_id: LogId::new(Sha256::digest(der).into()),
            verifier,
        })
    }

    /// Parses a base64 DER SubjectPublicKeyInfo, as in the log list's `key`.
    pub fn from_base64(b64: &str) -> Result<Self> {
        Self::from_spki_der(&decode_base64(b64, "log key", MAX_SPKI_LEN)?)
    }

    /// The log ID, `SHA-256(SubjectPublicKeyInfo)` (RFC 6962 §3.2).
    pub fn log_id(&self) -> LogId {
        self.log_id
    }

    /// The DER SubjectPublicKeyInfo.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki_der
    }

    /// The key's algorithm.
    pub fn key_type(&self) -> KeyType {
        match self.verifier {
            Verifier::EcdsaP256(_) => KeyType::EcdsaP256,
            Verifier::Rsa(_) => KeyType::Rsa,
        }
    }

    /// Verifies that `signature` is this key's signature over `message`.
    ///
    /// The algorithms in the `DigitallySigned` must be SHA-256 and the
    /// signature algorithm of this key type. `what` names the signed
    /// structure in the error.
    pub fn verify(
        &self,
        message: &[u8],
        signature: &DigitallySigned,
        what: &'static str,
    ) -> Result<()> {
        if signature.hash_algorithm != HASH_ALGORITHM_SHA256
            || !matches!(
                signature.signature_algorithm,
                SIGNATURE_ALGORITHM_RSA | SIGNATURE_ALGORITHM_ECDSA
            )
        {
            return Err(Error::UnsupportedSignatureAlgorithm {
                hash: signature.hash_algorithm,
                signature: signature.signature_algorithm,
            });
        }
        let key_type = self.key_type();
        if signature.signature_algorithm != key_type.signature_algorithm() {
            return Err(Error::SignatureKeyMismatch {
                signature: signature.signature_algorithm,
                key_type: key_type.name(),
            });
        }
        let bad = || Error::BadSignature { what };
        match &self.verifier {
            Verifier::EcdsaP256(key) => {
                let sig =
                    p256::ecdsa::Signature::from_der(&signature.signature).map_err(|_| bad())?;
                key.verify(message, &sig).map_err(|_| bad())
            }
            Verifier::Rsa(key) => {
                let sig = rsa::pkcs1v15::Signature::try_from(signature.signature.as_slice())
                    .map_err(|_| bad())?;
                key.verify(message, &sig).map_err(|_| bad())
            }
        }
    }
}

/// Decodes standard base64 (RFC 4648 §4, padded), refusing to decode text
/// that would exceed `max` bytes ([`Error::TooLarge`]); invalid text is
/// [`Error::Base64`]. `what` names the field in the error.
///
/// Public so that the log clients built on this crate (ct-ingest's
/// `get-entries` and `get-sth-consistency` parsers, its configuration) decode
/// base64 with the same caps.
pub fn decode_base64(text: &str, what: &'static str, max: usize) -> Result<Vec<u8>> {
    // Padded base64 of at most `max` bytes is at most 4·⌈max/3⌉ characters;
    // refuse longer text before decoding anything.
    if text.len() > max.div_ceil(3).saturating_mul(4) {
        return Err(Error::TooLarge {
            what,
            len: text.len() / 4 * 3,
            max,
        });
    }
    let out = BASE64
        .decode(text)
        .map_err(|source| Error::Base64 { what, source })?;
    if out.len() > max {
        return Err(Error::TooLarge {
            what,
            len: out.len(),
            max,
        });
    }
    Ok(out)
}

/// A TLS `digitally-signed` value (RFC 5246 §4.7, as used by RFC 6962).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigitallySigned {
    /// `HashAlgorithm` (4 = SHA-256).
    pub hash_algorithm: u8,
    /// `SignatureAlgorithm` (1 = RSA, 3 = ECDSA).
    pub signature_algorithm: u8,
    /// The signature bytes (DER for ECDSA).
    pub signature: Vec<u8>,
}

impl DigitallySigned {
    /// Decodes from a reader, leaving following bytes unread.
    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self> {
        let hash_algorithm = r.read_u8("DigitallySigned.hash_algorithm")?;
        let signature_algorithm = r.read_u8("DigitallySigned.signature_algorithm")?;
        let signature = r.read_opaque16("DigitallySigned.signature")?.to_vec();
        Ok(DigitallySigned {
            hash_algorithm,
            signature_algorithm,
            signature,
        })
    }

    /// Decodes a complete value, rejecting trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let d = Self::decode_from(&mut r)?;
        r.finish("DigitallySigned")?;
        Ok(d)
    }

    /// Appends the TLS encoding.
    pub fn encode_into(&self, w: &mut Writer) -> Result<()> {
        w.put_u8(self.hash_algorithm);
        w.put_u8(self.signature_algorithm);
        w.put_opaque16(&self.signature, "DigitallySigned.signature")
    }

    /// The TLS encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(4 + self.signature.len());
        self.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }
}

/// The RFC 6962 §3.5 `TreeHeadSignature` input a log signs:
/// `version (v1) ‖ signature_type (tree_hash) ‖ uint64 timestamp ‖
/// uint64 tree_size ‖ sha256_root_hash[32]`.
pub fn tree_head_signature_input(
    timestamp: u64,
    tree_size: u64,
    root_hash: &Hash,
) -> [u8; TREE_HEAD_SIGNATURE_INPUT_LEN] {
    let mut out = [0u8; TREE_HEAD_SIGNATURE_INPUT_LEN];
    out[0] = VERSION_V1;
    out[1] = SIGNATURE_TYPE_TREE_HASH;
    out[2..10].copy_from_slice(&timestamp.to_be_bytes());
    out[10..18].copy_from_slice(&tree_size.to_be_bytes());
    out[18..].copy_from_slice(root_hash);
    out
}

/// A signed tree head (RFC 6962 §3.5, served by §4.3 `get-sth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedTreeHead {
    /// Number of entries in the tree.
    pub tree_size: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// The Merkle Tree Hash at `tree_size`.
    pub root_hash: Hash,
    /// The log's signature over the `TreeHeadSignature`.
    pub signature: DigitallySigned,
}

#[derive(Deserialize)]
struct GetSthJson {
    tree_size: u64,
    timestamp: u64,
    sha256_root_hash: String,
    tree_head_signature: String,
}

impl SignedTreeHead {
    /// Parses an RFC 6962 §4.3 `get-sth` response body.
    ///
    /// Inputs over [`MAX_STH_JSON_LEN`] are refused before parsing; all four
    /// fields are required, numbers must be non-negative integers that fit in
    /// a `u64`, the root hash must be 32 bytes and the signature a complete
    /// `DigitallySigned`. Unknown extra fields are ignored (forward
    /// compatibility); anything else malformed is an error.
    pub fn from_json(body: &[u8]) -> Result<Self> {
        if body.len() > MAX_STH_JSON_LEN {
            return Err(Error::TooLarge {
                what: "get-sth response",
                len: body.len(),
                max: MAX_STH_JSON_LEN,
            });
        }
        let j: GetSthJson = serde_json::from_slice(body).map_err(|source| Error::Json {
            what: "get-sth response",
            source,
        })?;
        let root = decode_base64(&j.sha256_root_hash, "sha256_root_hash", HASH_LEN)?;
        let root_hash: Hash = root.as_slice().try_into().map_err(|_| Error::TooSmall {
            what: "sha256_root_hash",
            len: root.len(),
            min: HASH_LEN,
        })?;
        let sig = decode_base64(
            &j.tree_head_signature,
            "tree_head_signature",
            crate::tls::MAX_U16_LEN + 4,
        )?;
        Ok(SignedTreeHead {
            tree_size: j.tree_size,
            timestamp: j.timestamp,
            root_hash,
            signature: DigitallySigned::decode(&sig)?,
        })
    }

    /// Serialises as an RFC 6962 §4.3 `get-sth` response body.
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::json!({
            "tree_size": self.tree_size,
            "timestamp": self.timestamp,
            "sha256_root_hash": BASE64.encode(self.root_hash),
            "tree_head_signature": BASE64.encode(self.signature.encode()?),
        })
        .to_string())
    }

    /// The bytes the signature covers (RFC 6962 §3.5).
    pub fn signature_input(&self) -> [u8; TREE_HEAD_SIGNATURE_INPUT_LEN] {
        tree_head_signature_input(self.timestamp, self.tree_size, &self.root_hash)
    }

    /// Verifies the tree head signature with the log's key.
    pub fn verify(&self, key: &LogKey) -> Result<()> {
        key.verify(&self.signature_input(), &self.signature, "tree head")
    }
}

/// The RFC 6962 §3.2 input of an SCT signature:
///
/// ```text
/// digitally-signed struct {
///     Version sct_version;                      // v1
///     SignatureType signature_type = certificate_timestamp;
///     uint64 timestamp;
///     LogEntryType entry_type;
///     select(entry_type) { ASN.1Cert | PreCert } signed_entry;
///     CtExtensions extensions;
/// };
/// ```
///
/// which is `0x00 ‖ 0x00 ‖ TimestampedEntry`.
pub fn sct_signature_input(
    timestamp: u64,
    signed_entry: &SignedEntry,
    extensions: &[u8],
) -> Result<Vec<u8>> {
    let mut w = Writer::new();
    w.put_u8(VERSION_V1);
    w.put_u8(SIGNATURE_TYPE_CERTIFICATE_TIMESTAMP);
    w.put_u64(timestamp);
    signed_entry.encode_into(&mut w)?;
    w.put_opaque16(extensions, "SCT extensions")?;
    Ok(w.into_bytes())
}

/// Verifies an SCT signature over `signed_entry` (RFC 6962 §3.2). For a
/// logged entry, `timestamp` and `extensions` are those of its
/// `TimestampedEntry`, which carries the same fields as the SCT.
pub fn verify_sct_signature(
    key: &LogKey,
    timestamp: u64,
    signed_entry: &SignedEntry,
    extensions: &[u8],
    signature: &DigitallySigned,
) -> Result<()> {
    let input = sct_signature_input(timestamp, signed_entry, extensions)?;
    key.verify(&input, signature, "SCT")
}

/// A `SignedCertificateTimestamp` (RFC 6962 §3.2), version v1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedCertificateTimestamp {
    /// `SHA-256` of the log's SubjectPublicKeyInfo.
    pub log_id: LogId,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Raw `CtExtensions` (without length prefix).
    pub extensions: Vec<u8>,
    /// The log's signature.
    pub signature: DigitallySigned,
}

impl SignedCertificateTimestamp {
    /// Decodes the TLS encoding of an SCT, rejecting versions other than v1
    /// and trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let version = r.read_u8("SignedCertificateTimestamp.sct_version")?;
        if version != VERSION_V1 {
            return Err(Error::UnknownEnum {
                what: "SignedCertificateTimestamp.sct_version",
                value: u64::from(version),
            });
        }
        let log_id = LogId::new(r.read_array::<32>("SignedCertificateTimestamp.id")?);
        let timestamp = r.read_u64("SignedCertificateTimestamp.timestamp")?;
        let extensions = r
            .read_opaque16("SignedCertificateTimestamp.extensions")?
            .to_vec();
        let signature = DigitallySigned::decode_from(&mut r)?;
        r.finish("SignedCertificateTimestamp")?;
        Ok(SignedCertificateTimestamp {
            log_id,
            timestamp,
            extensions,
            signature,
        })
    }

    /// The TLS encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        w.put_u8(VERSION_V1);
        w.put_bytes(self.log_id.as_bytes());
        w.put_u64(self.timestamp);
        w.put_opaque16(&self.extensions, "SignedCertificateTimestamp.extensions")?;
        self.signature.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }

    /// Verifies this SCT for `signed_entry` with `key`, checking first that
    /// the SCT names the key's log ID.
    pub fn verify(&self, key: &LogKey, signed_entry: &SignedEntry) -> Result<()> {
        if self.log_id != key.log_id() {
            return Err(Error::LogIdMismatch { what: "SCT".into() });
        }
        verify_sct_signature(
            key,
            self.timestamp,
            signed_entry,
            &self.extensions,
            &self.signature,
        )
    }

    /// The `TimestampedEntry` a log must have logged for this SCT.
    pub fn timestamped_entry(&self, signed_entry: SignedEntry) -> TimestampedEntry {
        TimestampedEntry {
            timestamp: self.timestamp,
            signed_entry,
            extensions: self.extensions.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths_are_capped_exactly() {
        for n in 0..12usize {
            let text = BASE64.encode(vec![0xa5u8; n]);
            for max in 0..12usize {
                let r = decode_base64(&text, "x", max);
                if n <= max {
                    assert_eq!(r.unwrap().len(), n);
                } else {
                    assert!(matches!(r, Err(Error::TooLarge { .. })), "n={n} max={max}");
                }
            }
        }
        // Unpadded or non-canonical text is an error, not a guess.
        assert!(matches!(
            decode_base64("AQI", "x", 8),
            Err(Error::Base64 { .. })
        ));
        assert!(matches!(
            decode_base64("AB==", "x", 8),
            Err(Error::Base64 { .. })
        ));
        assert!(matches!(
            decode_base64("AQ I=", "x", 8),
            Err(Error::Base64 { .. })
        ));
    }

    #[test]
    fn key_type_algorithms() {
        assert_eq!(
            KeyType::EcdsaP256.signature_algorithm(),
            SIGNATURE_ALGORITHM_ECDSA
        );
        assert_eq!(KeyType::Rsa.signature_algorithm(), SIGNATURE_ALGORITHM_RSA);
    }

    #[test]
    fn digitally_signed_rejects_truncation_and_trailing_bytes() {
        let enc = [4u8, 3, 0, 2, 0xaa, 0xbb];
        assert!(DigitallySigned::decode(&enc).is_ok());
        for cut in 0..enc.len() {
            assert!(matches!(
                DigitallySigned::decode(&enc[..cut]),
                Err(Error::Truncated { .. })
            ));
        }
        let mut long = enc.to_vec();
        long.push(0);
        assert!(matches!(
            DigitallySigned::decode(&long),
            Err(Error::TrailingBytes { .. })
        ));
    }
}
