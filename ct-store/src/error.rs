//! The crate's one error type.

use std::fmt;

use crate::LogId;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database (driver, connection, SQL) failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the embedded migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The URL is neither `sqlite:` nor `postgres:`/`postgresql:`.
    #[error("unsupported database URL (expected sqlite:… or postgres://…): {0}")]
    UnsupportedUrl(String),
    /// The log has not been registered with [`Store::upsert_log`](crate::Store::upsert_log).
    #[error("unknown log {}", Hex(.0))]
    UnknownLog(LogId),
    /// The batch does not start at the log's verified position.
    #[error("gap in log {}: verified position is {verified_position}, batch starts at {first_leaf_index}", Hex(.log_id))]
    Gap {
        /// The log.
        log_id: LogId,
        /// The stored verified position (next leaf index expected).
        verified_position: u64,
        /// The leaf index of the batch's first entry.
        first_leaf_index: u64,
    },
    /// The batch's leaf indices are not consecutive.
    #[error("batch is not contiguous: expected leaf index {expected}, found {found}")]
    NotContiguous {
        /// The index that should have come next.
        expected: u64,
        /// The index found instead.
        found: u64,
    },
    /// The batch ends beyond the tree it was verified against.
    #[error("batch ends at {end} but the verified tree has only {tree_size} entries")]
    BeyondTree {
        /// One past the batch's last leaf index.
        end: u64,
        /// The tree size passed with the batch.
        tree_size: u64,
    },
    /// A tree head of the same size with a different root is already stored:
    /// the log presented two views (or the caller mixed logs up).
    #[error("log {} already has a verified tree of size {tree_size} with a different root hash", Hex(.log_id))]
    RootMismatch {
        /// The log.
        log_id: LogId,
        /// The size both tree heads have.
        tree_size: u64,
    },
    /// A value does not fit the database's signed 64-bit integers.
    #[error("{what} = {value} does not fit a signed 64-bit integer")]
    OutOfRange {
        /// Which value.
        what: &'static str,
        /// The value.
        value: u64,
    },
    /// The database holds a value this code cannot have written.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The frontier passed with a commit does not have one subtree root per
    /// set bit of the new verified position.
    #[error(
        "a frontier at verified position {position} needs {expected} subtree roots, got {found}"
    )]
    FrontierMismatch {
        /// The verified position after the commit.
        position: u64,
        /// `popcount(position)`.
        expected: u32,
        /// Number of roots passed.
        found: usize,
    },
    /// A commit ended as its [`FaultPlan`](crate::FaultPlan) said (feature
    /// `fault-injection`, for crash tests).
    #[cfg(any(test, feature = "fault-injection"))]
    #[error("injected fault: {fault} (the commit would have reported {outcome:?})")]
    InjectedFault {
        /// The fault.
        fault: crate::FaultPlan,
        /// What the commit reports when it completes normally.
        outcome: crate::CommitOutcome,
    },
}

/// A 32-byte id in hex, for messages.
pub(crate) struct Hex<'a>(pub(crate) &'a [u8; 32]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}
