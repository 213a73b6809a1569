//! The crate's one error type.

/// Everything that can go wrong in the simulator or the cost report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client library failed (HTTP, auditor error, CT data, queue).
    #[error(transparent)]
    Client(#[from] browser_client::Error),
    /// pir-core refused something (parameters, database, query, response).
    #[error("pir: {0}")]
    Pir(#[from] pir_core::Error),
    /// A manifest could not be built or parsed.
    #[error("manifest: {0}")]
    Manifest(#[from] audit_proto::Error),
    /// A file could not be read or written.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// Bad input (settings, corpus, pir-bench files, measurements).
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
