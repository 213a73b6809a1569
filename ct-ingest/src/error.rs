//! The crate's single error type.
//!
//! Every parser in this crate and in `ct_core` takes untrusted bytes from the
//! network, so every failure is reported as a value of [`Error`]; nothing
//! panics on bad input. Parsing and verification failures (including the
//! checks this crate makes itself, such as a response body above its cap or a
//! recomputed root that differs from the signed one) are [`ct_core::Error`]
//! values carried unchanged in [`Error::Ct`]: `?` wraps them, and their
//! messages and sources are shown as they are. The other variants are this
//! crate's own failures: HTTP and network ([`Error::Http`],
//! [`Error::Timeout`], [`Error::RateLimited`], [`Error::Network`]),
//! configuration and local files ([`Error::Config`], [`Error::Io`]), the
//! entry store ([`Error::Store`]), the benchmark's test log (feature
//! `bench`) and internal failures.
//!
//! Each message is complete and says each thing once: a variant that wraps
//! another error includes the inner message in its own and does not return
//! it again as [`source`](std::error::Error::source). Errors of other crates
//! do not all follow that rule (some include their source's message *and*
//! return the source), so whatever prints an error with its causes should
//! use [`chain`], which drops a cause that the text before it already says.
//!
//! A caller that reacts to the kind of parse or verify failure, say "the log
//! served garbage" versus "the log misbehaved cryptographically", matches on
//! the [`ct_core::Error`] inside [`Error::Ct`], for example
//! `Error::Ct(ct_core::Error::RootMismatch { .. })`.

/// Convenience alias used by every fallible function of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong while downloading, verifying and storing CT
/// logs.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Parsing or verifying CT data failed (see [`ct_core::Error`]). The
    /// message and source are the core error's.
    #[error(transparent)]
    Ct(#[from] ct_core::Error),

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

    /// A background task of the ingester failed (a bug: it panicked) or an
    /// internal invariant did not hold.
    #[error("internal error: {0}")]
    Internal(String),

    /// Reading a local file failed.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },

    /// The benchmark's local test log (feature `bench`) failed: binding
    /// its socket, issuing a certificate, or an internal task.
    #[cfg(feature = "bench")]
    #[error("test log: {0}")]
    TestLog(ct_testlog::Error),

    /// The entry store failed (database error, refused batch, ...); the
    /// store's own variants say which (see [`ct_store::StoreError`]).
    #[error("store: {0}")]
    Store(ct_store::StoreError),
}

#[cfg(feature = "bench")]
impl From<ct_testlog::Error> for Error {
    fn from(e: ct_testlog::Error) -> Self {
        Error::TestLog(e)
    }
}

impl From<ct_store::StoreError> for Error {
    fn from(e: ct_store::StoreError) -> Self {
        Error::Store(e)
    }
}

impl Error {
    /// Whether trying again later may succeed without anyone changing
    /// anything: the database could not be reached or failed, or its
    /// verified position is not where this run left it (a
    /// [`Gap`](ct_store::StoreError::Gap): a database that acknowledged
    /// commits it lost in a crash, e.g. with `synchronous_commit = off`; a
    /// new run resumes from the stored position), or a log could not be
    /// reached, timed out, rate-limited or answered 5xx. Verification
    /// failures, bad data and configuration errors are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Store(ct_store::StoreError::Gap { .. }) => true,
            Error::Store(e) => e.is_transient(),
            Error::Network { .. } | Error::Timeout { .. } | Error::RateLimited { .. } => true,
            Error::Http { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// A failure only an operator can fix, which no retry will cure: the
    /// store refused the credentials or a grant, or its URL is invalid.
    /// `ct-ingest run` exits on it instead of retrying. (A schema that is
    /// missing, behind or ahead is retried, its message naming `ct-ingest
    /// migrate`, so that the owner's migration lets the runs resume.)
    pub fn needs_operator(&self) -> bool {
        match self {
            Error::Store(e) => {
                e.is_auth_failure()
                    || e.is_permission_denied()
                    || matches!(e, ct_store::StoreError::InvalidUrl { .. })
            }
            _ => false,
        }
    }

    /// Shorthand for [`ct_core::Error::Malformed`] wrapped in [`Error::Ct`].
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Ct(ct_core::Error::Malformed {
            what,
            reason: reason.into(),
        })
    }
}

/// `e` and its causes, joined with ": ", each said once: a cause whose
/// message the text so far already contains (an error that prints its
/// source and also returns it) is left out. For logging an error with
/// everything that led to it on one line.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !msg.is_empty() && !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field() {
        let e = Error::from(ct_core::Error::Truncated {
            what: "TimestampedEntry.timestamp",
            needed: 8,
            available: 3,
        });
        assert_eq!(
            e.to_string(),
            "truncated input: TimestampedEntry.timestamp needs 8 bytes but only 3 remain"
        );
        let e = Error::Http {
            url: "https://log.example/ct/v1/get-sth".into(),
            status: 404,
        };
        assert_eq!(
            e.to_string(),
            "HTTP status 404 from https://log.example/ct/v1/get-sth"
        );
    }

    /// A core error keeps its variant, message and source when `?` wraps it.
    #[test]
    fn core_errors_are_carried_unchanged() {
        use std::error::Error as _;
        use std::io::Read as _;
        let decompress = {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&b"not gzip"[..])
                .read_to_end(&mut out)
                .unwrap_err()
        };
        let json = serde_json::from_slice::<u8>(b"x").unwrap_err();
        let cases = vec![
            ct_core::Error::Decompress(decompress),
            ct_core::Error::Json {
                what: "w",
                source: json,
            },
            ct_core::Error::NoKnownSignature {
                name: "example.com/log".into(),
                key_id: 0xdeadbeef,
            },
            ct_core::Error::RootMismatch { what: "w" },
        ];
        for core in cases {
            let message = core.to_string();
            let source = core.source().map(|s| s.to_string());
            let wrapped = || -> Result<()> { Err(core)? };
            let e = wrapped().unwrap_err();
            assert!(matches!(e, Error::Ct(_)), "{e:?}");
            assert_eq!(e.to_string(), message);
            assert_eq!(e.source().map(|s| s.to_string()), source, "{message}");
        }
        assert!(matches!(
            Error::malformed("w", "r"),
            Error::Ct(ct_core::Error::Malformed { what: "w", reason }) if reason == "r"
        ));
    }

    /// The cause chain of a failed run (a store error inside this crate's
    /// error inside the binary's context) says each layer's words once.
    #[test]
    fn cause_chain_has_no_repetition() {
        use std::error::Error as _;
        let refused = || {
            std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "Connection refused (os error 111)",
            )
        };
        let store = |e| Error::from(ct_store::StoreError::from(e));
        // As the binary sees it: anyhow context around this crate's error.
        let run_failed =
            anyhow::Error::new(store(sqlx::Error::Io(refused()))).context("ingest run failed");
        let text = chain(run_failed.as_ref());
        assert_eq!(
            text,
            "ingest run failed: store: database error: error communicating with database: \
             Connection refused (os error 111)"
        );
        // This crate's and ct-store's layers return no source that repeats
        // their message.
        for e in [
            store(sqlx::Error::Io(refused())),
            store(sqlx::Error::PoolTimedOut),
            Error::from(ct_store::StoreError::InvalidUrl {
                url: "postgres//ct:***@h/db".into(),
                reason: "expected sqlite:… or postgres://…".into(),
            }),
            Error::Io {
                path: "/etc/x.toml".into(),
                error: refused(),
            },
            Error::Config("[defaults] batch_size must be in 1..=1048576, got 0".into()),
        ] {
            if let Some(s) = e.source() {
                assert!(!e.to_string().contains(&s.to_string()), "{e}");
            }
            let text = chain(&e);
            for phrase in [
                "store: ",
                "database error: ",
                "configuration: ",
                "cannot read ",
            ] {
                assert!(text.matches(phrase).count() <= 1, "{text}");
            }
        }
        // Another crate's error that prints its source and also returns it
        // (ct-core's JSON error) is said once.
        let json = serde_json::from_slice::<u8>(b"x").unwrap_err();
        let json_msg = json.to_string();
        let e = Error::from(ct_core::Error::Json {
            what: "get-sth",
            source: json,
        });
        assert_eq!(chain(&e).matches(&json_msg).count(), 1, "{}", chain(&e));
        // A source that adds something is kept.
        let outer = anyhow::Error::new(refused()).context("connecting");
        assert_eq!(
            chain(outer.as_ref()),
            "connecting: Connection refused (os error 111)"
        );
    }

    #[test]
    fn transient_errors() {
        let store = |e| Error::from(ct_store::StoreError::from(e));
        assert!(store(sqlx::Error::PoolTimedOut).is_transient());
        assert!(Error::Http {
            url: String::new(),
            status: 503
        }
        .is_transient());
        assert!(!Error::Http {
            url: String::new(),
            status: 404
        }
        .is_transient());
        assert!(!Error::from(ct_core::Error::RootMismatch { what: "w" }).is_transient());
        assert!(!Error::Config("x".into()).is_transient());
        // The store's position behind this run's (a commit lost in a crash).
        assert!(Error::from(ct_store::StoreError::Gap {
            log_id: [0; 32].into(),
            verified_position: 900,
            first_leaf_index: 1000,
        })
        .is_transient());
        assert!(!Error::from(ct_store::StoreError::RootMismatch {
            log_id: [0; 32].into(),
            tree_size: 5,
        })
        .is_transient());
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<Error>();
    }
}
