//! The crate's single error type.
//!
//! Every parser in this crate takes untrusted bytes from the network, so every
//! failure is reported as a value of [`Error`]; nothing panics on bad input.
//! The variants are grouped by the kind of failure rather than by module, so a
//! caller can react to, say, "the log served garbage" ([`Error::Truncated`],
//! [`Error::TrailingBytes`], [`Error::Malformed`], ...) differently from "the
//! log misbehaved cryptographically" ([`Error::BadSignature`],
//! [`Error::InvalidProof`], [`Error::RootMismatch`], ...).
//!
//! ct-ingest's own error type carries this one unchanged in its `Ct` variant
//! (next to its network, configuration and store failures), so `?` carries
//! these errors across with their messages.

/// Convenience alias used by every fallible function of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong while parsing or verifying CT data.
///
/// `what` fields name the structure being decoded (for example
/// `"TimestampedEntry.extensions"`) so that an error read in a log line points
/// at the offending field.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input ended before a field could be read completely.
    #[error("truncated input: {what} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },

    /// A structure was decoded but bytes were left over after it.
    #[error("{count} trailing bytes after {what}")]
    TrailingBytes {
        /// The structure that should have consumed the whole input.
        what: &'static str,
        /// Number of unconsumed bytes.
        count: usize,
    },

    /// An enumerated field holds a value this crate does not know.
    #[error("unknown value {value} for {what}")]
    UnknownEnum {
        /// The enumerated field.
        what: &'static str,
        /// The value found on the wire.
        value: u64,
    },

    /// A length is above the maximum this crate accepts for that field.
    #[error("{what} is {len} bytes long, above the maximum of {max}")]
    TooLarge {
        /// The field or input whose length is capped.
        what: &'static str,
        /// Its length (or a lower bound of it, for streamed input).
        len: usize,
        /// The cap.
        max: usize,
    },

    /// A length is below the minimum the specification allows.
    #[error("{what} is {len} bytes long, below the minimum of {min}")]
    TooSmall {
        /// The field whose length is bounded below.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },

    /// The input is structurally wrong in a way not covered by a more
    /// specific variant.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// The structure being parsed.
        what: &'static str,
        /// Human-readable description of the problem.
        reason: String,
    },

    /// The same extension type appears twice in one `CtExtensions` field
    /// (forbidden by c2sp.org/static-ct-api "SCT Extension").
    #[error("duplicate extension of type {extension_type} in CtExtensions")]
    DuplicateExtension {
        /// The repeated `ExtensionType`.
        extension_type: u8,
    },

    /// A static-ct-api entry lacks the mandatory `leaf_index` extension.
    #[error("missing leaf_index extension")]
    MissingLeafIndex,

    /// The `leaf_index` extension does not match the entry's position.
    #[error("leaf_index extension says {found} but the entry is at index {expected}")]
    LeafIndexMismatch {
        /// Position of the entry in the log.
        expected: u64,
        /// Value carried by the extension.
        found: u64,
    },

    /// A gzip stream could not be decompressed.
    #[error("gzip decompression failed: {0}")]
    Decompress(#[source] std::io::Error),

    /// Base64 text could not be decoded.
    #[error("invalid base64 in {what}: {source}")]
    Base64 {
        /// The field holding the base64 text.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },

    /// JSON could not be parsed into the expected shape.
    #[error("invalid JSON for {what}: {source}")]
    Json {
        /// The document being parsed.
        what: &'static str,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },

    /// An X.509 certificate, TBSCertificate or SubjectPublicKeyInfo could not
    /// be parsed.
    #[error("invalid X.509 {what}: {reason}")]
    X509 {
        /// The DER structure being parsed.
        what: &'static str,
        /// The parser's description of the problem.
        reason: String,
    },

    /// A public key uses an algorithm or parameters this crate does not
    /// support (RFC 6962 §2.1.4 allows only ECDSA P-256 and RSA).
    #[error("unsupported public key: {0}")]
    UnsupportedKey(String),

    /// A `DigitallySigned` names a hash or signature algorithm that is not
    /// SHA-256 with ECDSA or RSA.
    #[error("unsupported signature algorithm (hash {hash}, signature {signature})")]
    UnsupportedSignatureAlgorithm {
        /// `HashAlgorithm` value (RFC 5246 §7.4.1.4.1).
        hash: u8,
        /// `SignatureAlgorithm` value (RFC 5246 §7.4.1.4.1).
        signature: u8,
    },

    /// The signature algorithm of a `DigitallySigned` does not match the
    /// type of the key it is verified with.
    #[error("signature algorithm {signature} does not match the {key_type} key")]
    SignatureKeyMismatch {
        /// `SignatureAlgorithm` value found in the signature.
        signature: u8,
        /// Type of the key ("ECDSA P-256" or "RSA").
        key_type: &'static str,
    },

    /// A signature failed cryptographic verification.
    #[error("signature verification failed for {what}")]
    BadSignature {
        /// What was signed.
        what: &'static str,
    },

    /// No signature of a signed note comes from the expected key.
    #[error("no signature from key {name:?} (key ID {key_id:08x}) in the note")]
    NoKnownSignature {
        /// Key name that was looked for.
        name: String,
        /// Key ID that was looked for.
        key_id: u32,
    },

    /// A log ID does not equal SHA-256 of the log's key (RFC 6962 §3.2).
    #[error("log ID mismatch for {what}: the key hashes to a different log ID")]
    LogIdMismatch {
        /// Which log or structure carried the wrong ID.
        what: String,
    },

    /// A checkpoint's origin line is not the expected one.
    #[error("checkpoint origin {found:?} is not the expected {expected:?}")]
    OriginMismatch {
        /// The origin that was expected.
        expected: String,
        /// The origin found in the checkpoint.
        found: String,
    },

    /// A Merkle inclusion or consistency proof does not verify.
    #[error("invalid Merkle proof: {0}")]
    InvalidProof(String),

    /// A recomputed Merkle root differs from the one that was claimed.
    #[error("Merkle root mismatch for {what}")]
    RootMismatch {
        /// What root was being checked.
        what: &'static str,
    },

    /// A caller-supplied argument is out of range (for example a tile level
    /// above 63 or a leaf index beyond the tree size).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Shorthand for [`Error::Malformed`].
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Malformed {
            what,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::X509`].
    pub(crate) fn x509(what: &'static str, reason: impl std::fmt::Display) -> Self {
        Error::X509 {
            what,
            reason: reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field() {
        let e = Error::Truncated {
            what: "TimestampedEntry.timestamp",
            needed: 8,
            available: 3,
        };
        assert_eq!(
            e.to_string(),
            "truncated input: TimestampedEntry.timestamp needs 8 bytes but only 3 remain"
        );
        let e = Error::TooLarge {
            what: "note",
            len: 2,
            max: 1,
        };
        assert!(e.to_string().contains("above the maximum of 1"));
        let e = Error::NoKnownSignature {
            name: "example.com/log".into(),
            key_id: 0xdeadbeef,
        };
        assert!(e.to_string().contains("deadbeef"));
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<Error>();
    }
}
