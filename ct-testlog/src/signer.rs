//! The log's signing key: SCTs (RFC 6962 §3.2), tree heads (§3.5) and
//! static-ct-api checkpoints (`RFC6962NoteSignature`).
//!
//! Each signature is ECDSA P-256 over SHA-256 of the exact bytes that
//! [`ct_core::sth`] and [`ct_core::checkpoint`] verify, encoded as a TLS
//! `DigitallySigned` with a DER `Ecdsa-Sig-Value`. Nonces are RFC 6979
//! deterministic, so signing needs no randomness.

use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::EncodePublicKey as _;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use ct_core::checkpoint::{
    is_valid_key_name, rfc6962_key_id, Checkpoint, NoteSignature, Rfc6962NoteSignature, SignedNote,
};
use ct_core::leaf::SignedEntry;
use ct_core::merkle::Hash;
use ct_core::sth::{
    sct_signature_input, tree_head_signature_input, DigitallySigned, LogKey,
    SignedCertificateTimestamp, SignedTreeHead, HASH_ALGORITHM_SHA256, SIGNATURE_ALGORITHM_ECDSA,
};
use ct_core::LogId;

/// A CT log's ECDSA P-256 private key with its public [`LogKey`].
#[derive(Clone)]
pub struct LogSigner {
    key: SigningKey,
    log_key: LogKey,
}

impl std::fmt::Debug for LogSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSigner")
            .field("log_key", &self.log_key)
            .finish_non_exhaustive()
    }
}

impl LogSigner {
    /// A fresh random key (from the operating system's generator).
    pub fn generate() -> Result<Self> {
        for _ in 0..64 {
            let mut bytes = [0u8; 32];
            getrandom::getrandom(&mut bytes)
                .map_err(|e| Error::Key(format!("no randomness for the log key: {e}")))?;
            if let Ok(key) = SigningKey::from_slice(&bytes) {
                return Self::from_signing_key(key);
            }
        }
        Err(Error::Key("could not draw a valid P-256 scalar".into()))
    }

    /// A key derived deterministically from `seed` (the same seed always
    /// gives the same key, so a demo log keeps its log ID across restarts).
    /// For tests and demos only: a short seed is a weak key.
    pub fn from_seed(seed: &[u8]) -> Result<Self> {
        for counter in 0u32..64 {
            let mut h = Sha256::new();
            // Fixed domain separator: changing it changes every seeded log ID.
            h.update(b"ct-ingest testlog key\0");
            h.update(counter.to_be_bytes());
            h.update(seed);
            if let Ok(key) = SigningKey::from_slice(&h.finalize()) {
                return Self::from_signing_key(key);
            }
        }
        Err(Error::Key("could not derive a valid P-256 scalar".into()))
    }

    /// Wraps an existing P-256 signing key.
    pub fn from_signing_key(key: SigningKey) -> Result<Self> {
        let spki = p256::PublicKey::from(key.verifying_key())
            .to_public_key_der()
            .map_err(|e| Error::Key(format!("cannot encode the log key: {e}")))?;
        let log_key = LogKey::from_spki_der(spki.as_bytes())?;
        Ok(LogSigner { key, log_key })
    }

    /// The public key.
    pub fn log_key(&self) -> &LogKey {
        &self.log_key
    }

    /// The log ID, `SHA-256(SubjectPublicKeyInfo)`.
    pub fn log_id(&self) -> LogId {
        self.log_key.log_id()
    }

    /// ECDSA-SHA256 signature over `message` as a `DigitallySigned`.
    pub fn sign(&self, message: &[u8]) -> DigitallySigned {
        let sig: Signature = self.key.sign(message);
        DigitallySigned {
            hash_algorithm: HASH_ALGORITHM_SHA256,
            signature_algorithm: SIGNATURE_ALGORITHM_ECDSA,
            signature: sig.to_der().as_bytes().to_vec(),
        }
    }

    /// An SCT for `signed_entry` (RFC 6962 §3.2) with the given timestamp
    /// and raw `CtExtensions`.
    pub fn sign_sct(
        &self,
        timestamp: u64,
        signed_entry: &SignedEntry,
        extensions: Vec<u8>,
    ) -> Result<SignedCertificateTimestamp> {
        let input = sct_signature_input(timestamp, signed_entry, &extensions)?;
        Ok(SignedCertificateTimestamp {
            log_id: self.log_id(),
            timestamp,
            extensions,
            signature: self.sign(&input),
        })
    }

    /// A signed tree head (RFC 6962 §3.5 `TreeHeadSignature`).
    pub fn sign_tree_head(
        &self,
        timestamp: u64,
        tree_size: u64,
        root_hash: Hash,
    ) -> SignedTreeHead {
        let signature = self.sign(&tree_head_signature_input(timestamp, tree_size, &root_hash));
        SignedTreeHead {
            tree_size,
            timestamp,
            root_hash,
            signature,
        }
    }

    /// A static-ct-api checkpoint: the note text for (`origin`, size, root)
    /// signed with an `RFC6962NoteSignature` whose key name is `origin` and
    /// key ID `SHA-256(origin ‖ 0x0A ‖ 0x05 ‖ LogID)[:4]`
    /// (c2sp.org/static-ct-api "Checkpoints").
    pub fn sign_checkpoint(
        &self,
        origin: &str,
        timestamp: u64,
        tree_size: u64,
        root_hash: Hash,
    ) -> Result<String> {
        self.checkpoint_for(
            origin,
            &self.sign_tree_head(timestamp, tree_size, root_hash),
        )
    }

    /// The checkpoint carrying an already signed tree head (the conversion
    /// c2sp.org/static-ct-api notes needs no private key; the key is only
    /// used here for the log ID).
    pub fn checkpoint_for(&self, origin: &str, sth: &SignedTreeHead) -> Result<String> {
        if !is_valid_key_name(origin) {
            return Err(ct_core::Error::InvalidArgument(format!(
                "checkpoint origin {origin:?} is not a valid note key name"
            ))
            .into());
        }
        let text = Checkpoint {
            origin: origin.to_owned(),
            tree_size: sth.tree_size,
            root_hash: sth.root_hash,
            extensions: Vec::new(),
        }
        .to_text();
        let body = Rfc6962NoteSignature {
            timestamp: sth.timestamp,
            signature: sth.signature.clone(),
        }
        .encode()?;
        Ok(SignedNote {
            text,
            signatures: vec![NoteSignature {
                name: origin.to_owned(),
                key_id: rfc6962_key_id(origin, &self.log_id()),
                signature: body,
            }],
        }
        .to_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ct_core::checkpoint::verify_checkpoint;
    use ct_core::leaf::encode_leaf_index_extension;

    #[test]
    fn signatures_verify_with_the_crate_verifiers() {
        let s = LogSigner::from_seed(b"unit").unwrap();
        assert_eq!(
            s.log_key(),
            LogSigner::from_seed(b"unit").unwrap().log_key()
        );
        assert_ne!(
            s.log_key(),
            LogSigner::from_seed(b"other").unwrap().log_key()
        );
        let root = [9u8; 32];
        let sth = s.sign_tree_head(1234, 5, root);
        sth.verify(s.log_key()).unwrap();
        let parsed = SignedTreeHead::from_json(sth.to_json().unwrap().as_bytes()).unwrap();
        assert_eq!(parsed, sth);

        let note = s.sign_checkpoint("example.com/log", 1234, 5, root).unwrap();
        let v = verify_checkpoint(note.as_bytes(), "example.com/log", s.log_key()).unwrap();
        assert_eq!(v.checkpoint.tree_size, 5);
        assert_eq!(v.checkpoint.root_hash, root);
        assert_eq!(v.timestamp, 1234);
        assert!(s.sign_checkpoint("bad origin", 1, 1, root).is_err());

        let entry = SignedEntry::X509(vec![1, 2, 3]);
        let sct = s
            .sign_sct(77, &entry, encode_leaf_index_extension(3).unwrap())
            .unwrap();
        sct.verify(s.log_key(), &entry).unwrap();
        assert!(sct
            .verify(s.log_key(), &SignedEntry::X509(vec![1, 2, 4]))
            .is_err());
        let g = LogSigner::generate().unwrap();
        assert!(sct.verify(g.log_key(), &entry).is_err());
    }
}
