//! The crate's single error type.

/// Everything that can go wrong in pir-core. Parsing untrusted bytes returns
/// one of the wire variants; nothing in this crate panics on input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The parameter-set id is not one this build knows.
    #[error("unknown parameter set id {0:#06x}")]
    UnknownParamSet(u16),
    /// The parameter set violates a structural constraint.
    #[error("parameter set {0} is inconsistent")]
    InvalidParams(&'static str),
    /// ℓ1 or ℓ2 is zero or above 2^18.
    #[error("database shape {ell1}x{ell2} outside 1..=2^18 per dimension")]
    ShapeTooLarge {
        /// ℓ1
        ell1: usize,
        /// ℓ2
        ell2: usize,
    },
    /// The correctness bound (Theorem 3.4) exceeds 2^-40 for this shape.
    #[error("database shape {ell1}x{ell2} has correctness error 2^{log2_delta:.1} > 2^-40")]
    CorrectnessBound {
        /// ℓ1
        ell1: usize,
        /// ℓ2
        ell2: usize,
        /// log2 of the bound
        log2_delta: f64,
    },
    /// A record is not in Z_N.
    #[error("record value {value} at index {index} is not below N = {modulus}")]
    RecordOutOfRange {
        /// flat index
        index: usize,
        /// value
        value: u8,
        /// N
        modulus: u32,
    },
    /// Data length does not match the declared shape.
    #[error("expected {expected} records, got {got}")]
    LengthMismatch {
        /// expected
        expected: usize,
        /// got
        got: usize,
    },
    /// A row/column/bit index is outside the database.
    #[error("index {index} outside database of {len}")]
    IndexOutOfRange {
        /// requested
        index: u64,
        /// size
        len: u64,
    },
    /// Wire: the first bytes are not a pir-core message of this kind.
    #[error("not a {0} message (bad magic)")]
    BadMagic(&'static str),
    /// Wire: unknown format version.
    #[error("unsupported wire version {0}")]
    UnsupportedVersion(u8),
    /// Wire: the message was built for another parameter set.
    #[error("message is for parameter set {got:#06x}, expected {expected:#06x}")]
    WrongParamSet {
        /// ours
        expected: u16,
        /// theirs
        got: u16,
    },
    /// Wire: the message was built for another public seed (database version).
    #[error("message was built for public seed {got}, the database uses {expected}")]
    WrongSeed {
        /// ours (hex)
        expected: String,
        /// theirs (hex)
        got: String,
    },
    /// Wire: the message was built for another database shape.
    #[error("message is for a {got_ell1}x{got_ell2} database, expected {ell1}x{ell2}")]
    WrongShape {
        /// ours
        ell1: usize,
        /// ours
        ell2: usize,
        /// theirs
        got_ell1: usize,
        /// theirs
        got_ell2: usize,
    },
    /// Wire: the message ends early.
    #[error("message truncated: need {needed} bytes, have {have}")]
    Truncated {
        /// bytes needed
        needed: usize,
        /// bytes available
        have: usize,
    },
    /// Wire: bytes after the end of the message.
    #[error("{0} trailing bytes after the message")]
    TrailingBytes(usize),
    /// Wire: a coefficient is not reduced (≥ its modulus) or padding bits are set.
    #[error("{field}[{index}] out of range")]
    OutOfRange {
        /// which field
        field: &'static str,
        /// element index
        index: usize,
    },
    /// Wire: the unused bits at the end of a section are not zero.
    #[error("non-zero padding bits after {0}")]
    NonZeroPadding(&'static str),
    /// A batch of queries was empty or mixed databases.
    #[error("invalid batch: {0}")]
    InvalidBatch(&'static str),
    /// A hint file (see `server::Server::write_hint`) is internally
    /// inconsistent: bad checksum or a header field that contradicts the
    /// parameter set.
    #[error("corrupt hint file: {0}")]
    CorruptHint(&'static str),
    /// Writing a hint file failed.
    #[error("I/O error ({kind:?}): {message}")]
    Io {
        /// `std::io::Error::kind`
        kind: std::io::ErrorKind,
        /// the error's message
        message: String,
    },
    /// The operating system's random number generator failed.
    #[error("OS random number generator failed: {0}")]
    Rng(String),
    /// A response whose decryption noise is far above what an honest
    /// answer can have (see `Client::extract`): not an answer to this query.
    #[error(
        "response is not an answer to this query: its decryption noise \
         (variance {variance:.3e}) exceeds {limit:.3e}"
    )]
    NoisyResponse {
        /// empirical noise variance of the response's slots
        variance: f64,
        /// the largest variance accepted
        limit: f64,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}
