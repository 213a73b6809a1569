//! The crate's one error type.

/// Everything that can be wrong with a manifest or a filter position.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The manifest is not valid JSON of the expected form.
    #[error("manifest is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The manifest exceeds [`crate::api::MAX_MANIFEST_BYTES`].
    #[error("manifest is {len} bytes, more than the {max} allowed")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// A manifest field is out of range or inconsistent with another.
    #[error("invalid manifest: {0}")]
    Invalid(String),
    /// A hex or base64 string does not decode to the expected length.
    #[error("bad encoding of {what}: {why}")]
    Encoding {
        /// Which field.
        what: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// A misbehaviour report that is not of the required form
    /// ([`crate::report`]).
    #[error("invalid report: {0}")]
    InvalidReport(String),
    /// A filter index or bit index outside the epoch's filters.
    #[error("{what} {index} out of range (< {len})")]
    OutOfRange {
        /// Which index.
        what: &'static str,
        /// The index.
        index: u64,
        /// The bound.
        len: u64,
    },
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
