//! The crate's single error type (the store's failures are carried in
//! [`Error::Store`]).
//!
//! Every parser in this crate and in `ct_core` takes untrusted bytes from the
//! network, so every failure is reported as a value of [`Error`]; nothing
//! panics on bad input. The parse and verify variants ([`Error::Truncated`]
//! through [`Error::InvalidArgument`]) are those of [`ct_core::Error`], with
//! the same names, fields and messages: `From<ct_core::Error>` maps each onto
//! its namesake, so `?` carries the core's errors into this type unchanged.
//! The variants are grouped by the kind of failure rather than by module, so a
//! caller can react to, say, "the log served garbage" ([`Error::Truncated`],
//! [`Error::TrailingBytes`], [`Error::Malformed`], ...) differently from "the
//! log misbehaved cryptographically" ([`Error::BadSignature`],
//! [`Error::InvalidProof`], [`Error::RootMismatch`], ...).

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
    /// An HTTP request got a status that is not retried (e.g. 404), or a
    /// retried status (5xx) that persisted after every retry.
    #[error("HTTP status {status} from {url}")]
    Http {
        /// The requested URL.
        url: String,
        /// The HTTP status code.
        status: u16,
    },

    /// A request (connect, headers and body) did not finish within its
    /// timeout, after every retry.
    #[error("timeout after {timeout_ms} ms requesting {url}")]
    Timeout {
        /// The requested URL.
        url: String,
        /// The per-request timeout.
        timeout_ms: u64,
    },

    /// The log kept answering 429 Too Many Requests after every retry, or
    /// asked to wait longer than the configured maximum.
    #[error("rate limited by {url} (Retry-After: {retry_after_s:?} s)")]
    RateLimited {
        /// The requested URL.
        url: String,
        /// The last `Retry-After` in seconds, if the log sent one.
        retry_after_s: Option<u64>,
    },

    /// A transport failure (connection refused or reset, TLS, invalid URL,
    /// ...), after every retry.
    #[error("network error requesting {url}: {reason}")]
    Network {
        /// The requested URL.
        url: String,
        /// The client's description of the failure.
        reason: String,
    },

    /// The configuration (file, environment, log selection) is invalid.
    #[error("configuration: {0}")]
    Config(String),

    /// A background task of the ingester failed (a bug: it panicked), or
    /// [`ct_core::Error`] gained a variant this version has no namesake for
    /// (also a bug; the message is the core error's).
    #[error("internal error: {0}")]
    Internal(String),

    /// Reading a local file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The local test log (feature `testlog`) failed: binding its socket,
    /// issuing a certificate, or an internal task.
    #[error("test log: {0}")]
    TestLog(String),

    /// The entry store failed (database error, refused batch, ...); the
    /// store's own variants say which (see [`crate::store::StoreError`]).
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
}

impl Error {
    /// Shorthand for [`Error::Malformed`].
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Malformed {
            what,
            reason: reason.into(),
        }
    }
}

impl From<ct_core::Error> for Error {
    /// Maps every [`ct_core::Error`] variant onto the variant of the same name
    /// and fields.
    fn from(e: ct_core::Error) -> Self {
        use ct_core::Error as C;
        match e {
            C::Truncated {
                what,
                needed,
                available,
            } => Error::Truncated {
                what,
                needed,
                available,
            },
            C::TrailingBytes { what, count } => Error::TrailingBytes { what, count },
            C::UnknownEnum { what, value } => Error::UnknownEnum { what, value },
            C::TooLarge { what, len, max } => Error::TooLarge { what, len, max },
            C::TooSmall { what, len, min } => Error::TooSmall { what, len, min },
            C::Malformed { what, reason } => Error::Malformed { what, reason },
            C::DuplicateExtension { extension_type } => {
                Error::DuplicateExtension { extension_type }
            }
            C::MissingLeafIndex => Error::MissingLeafIndex,
            C::LeafIndexMismatch { expected, found } => {
                Error::LeafIndexMismatch { expected, found }
            }
            C::Decompress(source) => Error::Decompress(source),
            C::Base64 { what, source } => Error::Base64 { what, source },
            C::Json { what, source } => Error::Json { what, source },
            C::X509 { what, reason } => Error::X509 { what, reason },
            C::UnsupportedKey(reason) => Error::UnsupportedKey(reason),
            C::UnsupportedSignatureAlgorithm { hash, signature } => {
                Error::UnsupportedSignatureAlgorithm { hash, signature }
            }
            C::SignatureKeyMismatch {
                signature,
                key_type,
            } => Error::SignatureKeyMismatch {
                signature,
                key_type,
            },
            C::BadSignature { what } => Error::BadSignature { what },
            C::NoKnownSignature { name, key_id } => Error::NoKnownSignature { name, key_id },
            C::LogIdMismatch { what } => Error::LogIdMismatch { what },
            C::OriginMismatch { expected, found } => Error::OriginMismatch { expected, found },
            C::InvalidProof(reason) => Error::InvalidProof(reason),
            C::RootMismatch { what } => Error::RootMismatch { what },
            C::InvalidArgument(reason) => Error::InvalidArgument(reason),
            // `ct_core::Error` is `#[non_exhaustive]`; a variant added there
            // must get a namesake here (the test below lists them all).
            other => Error::Internal(format!("unmapped ct-core error: {other}")),
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

    /// Every ct-core variant becomes its namesake, fields, message and source
    /// included.
    #[test]
    fn core_errors_map_onto_namesakes() {
        use std::error::Error as _;
        use std::io::Read as _;
        let decompress = {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&b"not gzip"[..])
                .read_to_end(&mut out)
                .unwrap_err()
        };
        let base64 = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode("!")
                .unwrap_err()
        };
        let json = serde_json::from_slice::<u8>(b"x").unwrap_err();
        /// A ct-core error and a check that its conversion is the namesake.
        type Case = (ct_core::Error, fn(&Error) -> bool);
        let cases: Vec<Case> = vec![
            (
                ct_core::Error::Truncated {
                    what: "w",
                    needed: 2,
                    available: 1,
                },
                |e| {
                    matches!(
                        e,
                        Error::Truncated {
                            what: "w",
                            needed: 2,
                            available: 1
                        }
                    )
                },
            ),
            (
                ct_core::Error::TrailingBytes {
                    what: "w",
                    count: 3,
                },
                |e| {
                    matches!(
                        e,
                        Error::TrailingBytes {
                            what: "w",
                            count: 3
                        }
                    )
                },
            ),
            (
                ct_core::Error::UnknownEnum {
                    what: "w",
                    value: 9,
                },
                |e| {
                    matches!(
                        e,
                        Error::UnknownEnum {
                            what: "w",
                            value: 9
                        }
                    )
                },
            ),
            (
                ct_core::Error::TooLarge {
                    what: "w",
                    len: 5,
                    max: 4,
                },
                |e| {
                    matches!(
                        e,
                        Error::TooLarge {
                            what: "w",
                            len: 5,
                            max: 4
                        }
                    )
                },
            ),
            (
                ct_core::Error::TooSmall {
                    what: "w",
                    len: 1,
                    min: 2,
                },
                |e| {
                    matches!(
                        e,
                        Error::TooSmall {
                            what: "w",
                            len: 1,
                            min: 2
                        }
                    )
                },
            ),
            (
                ct_core::Error::Malformed {
                    what: "w",
                    reason: "r".into(),
                },
                |e| matches!(e, Error::Malformed { what: "w", reason } if reason == "r"),
            ),
            (
                ct_core::Error::DuplicateExtension { extension_type: 7 },
                |e| matches!(e, Error::DuplicateExtension { extension_type: 7 }),
            ),
            (ct_core::Error::MissingLeafIndex, |e| {
                matches!(e, Error::MissingLeafIndex)
            }),
            (
                ct_core::Error::LeafIndexMismatch {
                    expected: 1,
                    found: 2,
                },
                |e| {
                    matches!(
                        e,
                        Error::LeafIndexMismatch {
                            expected: 1,
                            found: 2
                        }
                    )
                },
            ),
            (ct_core::Error::Decompress(decompress), |e| {
                matches!(e, Error::Decompress(_))
            }),
            (
                ct_core::Error::Base64 {
                    what: "w",
                    source: base64,
                },
                |e| matches!(e, Error::Base64 { what: "w", .. }),
            ),
            (
                ct_core::Error::Json {
                    what: "w",
                    source: json,
                },
                |e| matches!(e, Error::Json { what: "w", .. }),
            ),
            (
                ct_core::Error::X509 {
                    what: "w",
                    reason: "r".into(),
                },
                |e| matches!(e, Error::X509 { what: "w", reason } if reason == "r"),
            ),
            (
                ct_core::Error::UnsupportedKey("k".into()),
                |e| matches!(e, Error::UnsupportedKey(k) if k == "k"),
            ),
            (
                ct_core::Error::UnsupportedSignatureAlgorithm {
                    hash: 4,
                    signature: 9,
                },
                |e| {
                    matches!(
                        e,
                        Error::UnsupportedSignatureAlgorithm {
                            hash: 4,
                            signature: 9
                        }
                    )
                },
            ),
            (
                ct_core::Error::SignatureKeyMismatch {
                    signature: 1,
                    key_type: "RSA",
                },
                |e| {
                    matches!(
                        e,
                        Error::SignatureKeyMismatch {
                            signature: 1,
                            key_type: "RSA"
                        }
                    )
                },
            ),
            (ct_core::Error::BadSignature { what: "w" }, |e| {
                matches!(e, Error::BadSignature { what: "w" })
            }),
            (
                ct_core::Error::NoKnownSignature {
                    name: "n".into(),
                    key_id: 0xdeadbeef,
                },
                |e| matches!(e, Error::NoKnownSignature { name, key_id: 0xdeadbeef } if name == "n"),
            ),
            (
                ct_core::Error::LogIdMismatch { what: "w".into() },
                |e| matches!(e, Error::LogIdMismatch { what } if what == "w"),
            ),
            (
                ct_core::Error::OriginMismatch {
                    expected: "a".into(),
                    found: "b".into(),
                },
                |e| matches!(e, Error::OriginMismatch { expected, found } if expected == "a" && found == "b"),
            ),
            (
                ct_core::Error::InvalidProof("p".into()),
                |e| matches!(e, Error::InvalidProof(p) if p == "p"),
            ),
            (ct_core::Error::RootMismatch { what: "w" }, |e| {
                matches!(e, Error::RootMismatch { what: "w" })
            }),
            (
                ct_core::Error::InvalidArgument("a".into()),
                |e| matches!(e, Error::InvalidArgument(a) if a == "a"),
            ),
        ];
        assert_eq!(cases.len(), 23, "one case per ct_core::Error variant");
        for (core, is_namesake) in cases {
            let message = core.to_string();
            let had_source = core.source().is_some();
            let e = Error::from(core);
            assert!(is_namesake(&e), "{e:?} is not the namesake of {message}");
            assert_eq!(e.to_string(), message);
            assert_eq!(e.source().is_some(), had_source, "{message}");
        }
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<Error>();
    }
}
