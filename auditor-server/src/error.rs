//! The crate's one error type (HTTP errors are `crate::http::ApiError`).

/// Errors of epoch building, loading and serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration (file, environment or command line).
    #[error("configuration: {0}")]
    Config(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A persisted epoch artifact is damaged or inconsistent.
    #[error("epoch artifact {path}: {why}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The entry store failed.
    #[error("entry store: {0}")]
    Store(#[from] ct_store::StoreError),
    /// The PIR layer refused something (e.g. a shape whose error bound
    /// exceeds 2^-40).
    #[error("pir: {0}")]
    Pir(#[from] pir_core::Error),
    /// A manifest is invalid.
    #[error("manifest: {0}")]
    Manifest(#[from] audit_proto::Error),
    /// The configuration file is not valid TOML for this configuration.
    #[error("configuration: {0}")]
    ConfigFile(#[from] toml::de::Error),
    /// The OS random number generator failed.
    #[error("OS randomness unavailable: {0}")]
    Random(#[from] getrandom::Error),
    /// The store no longer holds the set an epoch spec was planned from
    /// (entries were committed or pruned since), so this shard's databases
    /// would not match the other shards'.
    #[error(
        "epoch {epoch}: the store's snapshot at {snapshot_at} is not the planned set \
         ({want_entries} entries, SHA-256 {want}; the store now gives {got_entries} entries, \
         SHA-256 {got}): the store changed since `epoch plan` (ingest committed or pruned \
         entries); plan the epoch again with ingest paused until every shard has built it"
    )]
    SnapshotMismatch {
        /// The epoch.
        epoch: u64,
        /// Its snapshot time.
        snapshot_at: i64,
        /// |S| planned.
        want_entries: u64,
        /// Digest planned (hex).
        want: String,
        /// |S| found.
        got_entries: u64,
        /// Digest found (hex).
        got: String,
    },
    /// The store holds no active entry: an epoch of it would tell every
    /// client that no SCT was ever logged.
    #[error(
        "the store holds no active entries at {now_s} ({logs} logs registered): refusing to \
         build an empty epoch (is ct-ingest filling this database?)"
    )]
    EmptyStore {
        /// The snapshot time (Unix seconds).
        now_s: i64,
        /// Logs in the store.
        logs: usize,
    },
    /// An epoch's databases would not fit in the memory available
    /// ([`crate::memory::check`]); the message says what would fit.
    #[error("not enough memory: {0}")]
    Memory(String),
    /// The object store of prepared epochs failed (unreachable, denied,
    /// ...).
    #[error("object store: {what}: {source}")]
    ObjectStore {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: object_store::Error,
    },
    /// Another coordinator prepared this epoch first (its spec was created
    /// between this coordinator's check and its write); nothing of this
    /// coordinator's attempt is left in the store.
    #[error(
        "epoch {epoch} was prepared by another coordinator at the same time; this one \
         wrote nothing (run `epoch prepare` again for the next epoch if one is due)"
    )]
    EpochTaken {
        /// The epoch.
        epoch: u64,
    },
    /// A blocking task (a build, a load) panicked or was cancelled.
    #[error("worker task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The answer thread pool could not start.
    #[error("answer thread pool: {0}")]
    Pool(#[from] rayon::ThreadPoolBuildError),
    /// A JSON document could not be written or read.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A worker thread or task died.
    #[error("internal: {0}")]
    Internal(String),
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// `e` and its sources as one line, `outer: inner: …`, leaving out a
/// source whose message the text already contains (error types here print
/// their source in their own message, so a plain walk would repeat it).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let m = s.to_string();
        if !out.contains(&m) {
            out.push_str(": ");
            out.push_str(&m);
        }
        cur = s.source();
    }
    out
}

impl Error {
    /// The entry store could not be reached (refused, cut, timed out):
    /// `auditor_store_up` 0, and worth retrying.
    pub fn store_unreachable(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_unreachable())
    }

    /// A failure no retry cures, which `serve` exits on: the store refused
    /// the credentials or a grant. (A schema that is missing, behind or
    /// ahead is retried: the owner's `ct-ingest migrate` fixes it while the
    /// server waits, each attempt logging what to run.)
    pub fn needs_operator(&self) -> bool {
        matches!(self, Error::Store(e) if e.is_auth_failure() || e.is_permission_denied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn chain_lists_each_cause_once() {
        let io = || std::io::Error::other("disk on fire");
        let e = Error::Io {
            path: "/x".into(),
            source: io(),
        };
        assert_eq!(error_chain(&e), "/x: disk on fire");
        assert_eq!(error_chain(&Outer(io())), "outer: disk on fire");
        let e = Error::Config("bad".into());
        assert_eq!(error_chain(&e), "configuration: bad");
    }
}
