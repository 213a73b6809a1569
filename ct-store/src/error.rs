//! The crate's one error type.

use ct_core::LogId;

/// Errors of the store.
///
/// Each message is complete: a variant that wraps another error (sqlx's)
/// includes its message and does not also return it as
/// [`source`](std::error::Error::source), so a printed cause chain never
/// says the same thing twice. No message contains a database password
/// (URLs are shown through [`redact_url`](crate::redact_url)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database (driver, connection, SQL) failed.
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// The database reported that its storage is full (SQLite
    /// `SQLITE_FULL`, PostgreSQL `disk_full`). The transaction was rolled
    /// back: what was committed before is intact.
    #[error("database storage full (free space, then run again; committed data is intact): {0}")]
    StorageFull(sqlx::Error),
    /// Applying the embedded migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// The database has no store schema (no `_sqlx_migrations`): the owner
    /// role has not run the migrations yet.
    #[error(
        "the database holds no ct-store schema: run `ct-ingest migrate` as the owner role first \
         (docs/operator.md, \"Database roles\")"
    )]
    SchemaMissing,
    /// The store's schema is older than this build needs.
    #[error(
        "the store schema is at migration {found}, this program needs {needed}: \
         run `ct-ingest migrate` as the owner role"
    )]
    SchemaOutdated {
        /// The newest migration applied.
        found: i64,
        /// The newest migration this build embeds.
        needed: i64,
    },
    /// The store's schema is newer than this build knows.
    #[error(
        "the store schema is at migration {found}, newer than this program knows ({known}): \
         upgrade this program"
    )]
    SchemaNewer {
        /// The newest migration applied.
        found: i64,
        /// The newest migration this build embeds.
        known: i64,
    },
    /// The applied migrations are not the ones this build embeds (a failed
    /// or changed migration).
    #[error("the store schema does not match this program: {0}")]
    SchemaMismatch(String),
    /// The database URL is not a usable `sqlite:` or `postgres://` URL
    /// (see [`DatabaseUrl::parse`](crate::DatabaseUrl::parse)).
    #[error("invalid database URL {url}: {reason}")]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The log has not been registered with [`Store::upsert_log`](crate::Store::upsert_log).
    #[error("unknown log {}", .0)]
    UnknownLog(LogId),
    /// The batch does not start at the log's verified position.
    #[error("gap in log {}: verified position is {verified_position}, batch starts at {first_leaf_index}", .log_id)]
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
    #[error("log {} already has a verified tree of size {tree_size} with a different root hash", .log_id)]
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
        fault: crate::model::FaultPlan,
        /// What the commit reports when it completes normally.
        outcome: crate::model::CommitOutcome,
    },
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_storage_full(&e) {
            StoreError::StorageFull(e)
        } else {
            StoreError::Database(e)
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        match e {
            sqlx::migrate::MigrateError::Execute(inner) if is_storage_full(&inner) => {
                StoreError::StorageFull(inner)
            }
            other => StoreError::Migrate(other),
        }
    }
}

impl StoreError {
    /// The database could not be reached or talked to: refused or cut
    /// connections, TLS, no free connection in time, or a server shutting
    /// down, starting up or out of connection slots. May go away by itself.
    pub fn is_unreachable(&self) -> bool {
        let StoreError::Database(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => db.code().is_some_and(|c| {
                // connection_exception; admin/crash shutdown, cannot connect
                // now; too many connections
                c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03" | "53300")
            }),
            _ => false,
        }
    }

    /// A failure that may go away by itself ([`StoreError::is_unreachable`],
    /// a serialization failure or deadlock): worth retrying. An
    /// authentication failure, a missing grant or a schema mismatch is not.
    pub fn is_transient(&self) -> bool {
        if self.is_unreachable() {
            return true;
        }
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("40001" | "40P01"))
            }
            _ => false,
        }
    }

    /// The role lacks a privilege (PostgreSQL `insufficient_privilege`,
    /// 42501), also inside a failed migration.
    pub fn is_permission_denied(&self) -> bool {
        let db = match self {
            StoreError::Database(sqlx::Error::Database(db)) => db,
            StoreError::Migrate(
                sqlx::migrate::MigrateError::Execute(sqlx::Error::Database(db))
                | sqlx::migrate::MigrateError::ExecuteMigration(sqlx::Error::Database(db), _),
            ) => db,
            _ => return false,
        };
        db.code().as_deref() == Some("42501")
    }

    /// The database refused the credentials (PostgreSQL SQLSTATE class 28:
    /// wrong password, unknown role, no `pg_hba.conf` entry). Retrying
    /// cannot help; an operator must fix the URL or the role.
    pub fn is_auth_failure(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => {
                db.code().is_some_and(|c| c.starts_with("28"))
            }
            _ => false,
        }
    }
}

/// SQLite `SQLITE_FULL` (13) or PostgreSQL `disk_full` (53100).
fn is_storage_full(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("13" | "53100")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A wrapped error's message appears once: in the Display, not again as
    /// a source.
    #[test]
    fn wrapped_errors_are_not_repeated_as_sources() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let cases = [
            StoreError::from(sqlx::Error::Io(io())),
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::from(sqlx::migrate::MigrateError::Execute(sqlx::Error::Io(io()))),
            StoreError::from(sqlx::migrate::MigrateError::VersionMissing(3)),
        ];
        for e in cases {
            assert!(e.source().is_none(), "{e}: source {:?}", e.source());
        }
        let e = StoreError::from(sqlx::Error::Io(io()));
        assert_eq!(
            e.to_string(),
            "database error: error communicating with database: refused"
        );
    }
}
