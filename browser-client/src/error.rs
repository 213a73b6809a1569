//! The crate's one error type.

/// Everything that can go wrong on the client side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A certificate, SCT or log list could not be parsed or verified.
    #[error("CT data: {0}")]
    Ct(String),
    /// The manifest is invalid.
    #[error("manifest: {0}")]
    Manifest(#[from] audit_proto::Error),
    /// pir-core refused something (query, response).
    #[error("pir: {0}")]
    Pir(#[from] pir_core::Error),
    /// The auditor answered with an error.
    #[error("auditor answered {status}: {code}: {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// Error code from the JSON body.
        code: String,
        /// Message.
        message: String,
    },
    /// Network failure talking to the auditor.
    #[error("network: {0}")]
    Network(String),
    /// No answer within the attempt's timeout.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Every attempt of a query failed (fallback bound or deadline
    /// reached, docs/protocol.md §7.1); the last attempt's error is the
    /// source.
    #[error("no database answered in {attempts} attempts ({reasons}); last: {last}")]
    Exhausted {
        /// Attempts made (sent or skipped).
        attempts: u32,
        /// Failed attempts by reason, e.g. `unreachable ×3, overloaded ×1`.
        reasons: String,
        /// The last attempt's error.
        #[source]
        last: Box<Error>,
    },
    /// A file could not be read or written.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// Bad input to the library or a CLI (arguments, files).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The OS random number generator failed.
    #[error("OS randomness unavailable: {0}")]
    Random(String),
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> Error {
        Error::Io {
            path: path.display().to_string(),
            why: e.to_string(),
        }
    }
}
