//! The crate's single error type.
//!
//! The test log produces CT data rather than parsing untrusted input, so
//! most failures here are local: the socket, certificate issuance, key
//! generation, writing the corpus. Errors of the parsing and encoding core
//! (`ct_core`) are carried unchanged in [`Error::Ct`] (`?` wraps them).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Convenience alias used by every fallible function of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong while running the test log.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Encoding or checking CT data failed (see [`ct_core::Error`]); also
    /// an invalid [`crate::TestLogConfig`] (`InvalidArgument`).
    #[error(transparent)]
    Ct(#[from] ct_core::Error),

    /// The server could not listen on its address.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The requested address.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },

    /// Issuing a certificate failed (certificate generation, a time out of
    /// range, no randomness for a serial number).
    #[error("certificate issuance: {0}")]
    Issue(String),

    /// Generating, deriving or encoding the log key failed.
    #[error("log key: {0}")]
    Key(String),

    /// Writing an output file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Serialising a corpus record failed.
    #[error("corpus record: {0}")]
    Json(#[from] serde_json::Error),

    /// A background task failed (a bug: it panicked) or an internal
    /// invariant did not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_failure() {
        let e = Error::Listen {
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        };
        assert!(
            e.to_string().starts_with("cannot listen on 127.0.0.1:1: "),
            "{e}"
        );
        let e = Error::from(ct_core::Error::InvalidArgument("x".into()));
        assert!(matches!(e, Error::Ct(ct_core::Error::InvalidArgument(_))));
        assert_eq!(
            Error::Issue("boom".into()).to_string(),
            "certificate issuance: boom"
        );
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<Error>();
    }
}
