//! `ct-store`: the SQL store of verified CT log entries: the active entry
//! set S and the per-log ingestion state. `ct-ingest` fills it,
//! `auditor-server` reads it to build epochs.
//!
//! Two backends behind one [`Store`]:
//!
//! * **SQLite** (`sqlite://path?mode=rwc`): the embedded default, one file,
//!   WAL mode. Migrations in `ct-store/migrations/sqlite/`.
//! * **PostgreSQL** (`postgres://…`, normally from `DATABASE_URL`): for the
//!   production volume (billions of rows). The `entries` table is
//!   range-partitioned by certificate `notAfter` into calendar months, so
//!   expiry drops whole partitions. Migrations in
//!   `ct-store/migrations/postgres/`.
//!
//! Each log has two positions (certspotter's design): the *downloaded*
//! position is advisory (how far the fetcher got), the *verified* position is
//! authoritative: entries `[0, verified)` have been verified against a signed
//! tree head and are in S (unless they had already expired). Entries enter S
//! only through [`Store::commit_verified`], in the same transaction that
//! advances the verified position, so a crash never leaves entries without
//! the position or the position without the entries. See `docs/storage.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::stream::{BoxStream, StreamExt};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// Rows per multi-row `INSERT` on SQLite (5 bound parameters per row; SQLite
/// allows 32766 parameters per statement). Full chunks reuse one cached
/// prepared statement.
const SQLITE_ROWS_PER_INSERT: usize = 512;
/// Rows per `INSERT … SELECT … FROM UNNEST(…)` on PostgreSQL (bounds the
/// size of one bind message to a few MB).
const PG_ROWS_PER_INSERT: usize = 16_384;
/// PostgreSQL `expiry_month` of 2100-01: entries whose `notAfter` is at or
/// beyond 2100-01-01T00:00:00Z live in the single partition `entries_pfar`
/// (created by the migration, never dropped).
const PG_FAR_MONTH: i64 = 2100 * 12;

/// The embedded SQLite file used when no database URL is configured
/// (`ct-ingest` and `auditor-server` default to the same store).
pub const DEFAULT_DATABASE_URL: &str = "sqlite://ct-ingest.db?mode=rwc";

/// A CT log's identifier: SHA-256 of its public key (RFC 6962 §3.2).
pub type LogId = [u8; 32];

/// Errors of the storage layer.
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
    /// The log has not been registered with [`Store::upsert_log`].
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
}

/// Which CT API a log speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// RFC 6962 `get-entries` API.
    Rfc6962,
    /// static-ct-api (tiled) log.
    Static,
}

impl LogKind {
    /// The value stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Rfc6962 => "rfc6962",
            LogKind::Static => "static",
        }
    }
}

impl FromStr for LogKind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, StoreError> {
        match s {
            "rfc6962" => Ok(LogKind::Rfc6962),
            "static" => Ok(LogKind::Static),
            other => Err(StoreError::Corrupt(format!("unknown log kind {other:?}"))),
        }
    }
}

/// Static description of a log (from the log list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogMeta {
    /// SHA-256 of the log's public key.
    pub log_id: LogId,
    /// Submission / monitoring URL prefix.
    pub url: String,
    /// Maximum merge delay in seconds.
    pub mmd_s: u64,
    /// API flavour.
    pub kind: LogKind,
}

/// Ingestion state of one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogState {
    /// The log's metadata.
    pub meta: LogMeta,
    /// Advisory: next leaf index the fetcher would download. Never below
    /// `verified_position` after a commit.
    pub downloaded_position: u64,
    /// Authoritative: entries `[0, verified_position)` are verified and
    /// stored (or were already expired when committed).
    pub verified_position: u64,
    /// Size of the latest verified tree head.
    pub verified_tree_size: u64,
    /// Root hash of the latest verified tree head (`None` before the first).
    pub verified_root_hash: Option<[u8; 32]>,
    /// Largest SCT timestamp (ms) such that every entry of the log up to it
    /// is stored.
    pub ingested_until_ms: u64,
}

/// One log entry as stored in S (the log id is given per batch).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Position in the log.
    pub leaf_index: u64,
    /// `SHA-256(0x00 ‖ MerkleTreeLeaf)`.
    pub leaf_hash: [u8; 32],
    /// SCT timestamp, ms since the Unix epoch.
    pub sct_timestamp_ms: u64,
    /// Certificate `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

/// What [`Store::commit_verified`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// Rows actually inserted into S.
    pub inserted: u64,
    /// Entries of the batch below the previous verified position (a replay
    /// after a crash): neither inserted again nor counted twice.
    pub replayed: u64,
    /// New entries not stored because their `notAfter` had already passed.
    pub expired: u64,
    /// The verified position after the commit.
    pub verified_position: u64,
}

/// Per-log coverage, for the epoch metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// The log.
    pub log_id: LogId,
    /// Size of the latest verified tree head.
    pub verified_tree_size: u64,
    /// Entries `[0, verified_position)` are in S (unless expired).
    pub verified_position: u64,
    /// Every entry with an SCT timestamp up to this (ms) is stored.
    pub ingested_until_ms: u64,
    /// The log's maximum merge delay (s).
    pub mmd_s: u64,
}

#[derive(Clone, Debug)]
enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Handle on the entry store; cheap to clone (a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
}

/// The stored state a commit is planned against (columns 1.. of
/// [`SELECT_PREV`]; column 0, `log_no`, is decoded per backend).
struct PrevState {
    downloaded_position: u64,
    verified_position: u64,
    verified_tree_size: u64,
    verified_root_hash: Option<[u8; 32]>,
    ingested_until_ms: u64,
}

/// The commit's arguments, bundled.
struct Batch<'a> {
    log_id: &'a LogId,
    entries: &'a [Entry],
    tree_size: u64,
    root_hash: &'a [u8; 32],
    ingested_until_ms: u64,
    now_s: i64,
    /// CompactRange nodes of `[0, end of batch)`, stored with the position
    /// (`None`: the stored frontier is cleared when the position moves).
    frontier: Option<&'a [[u8; 32]]>,
}

/// How a commit ends: normally, or as if the process died before `COMMIT`
/// (test hook for crash simulation).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    Commit,
    Crash,
}

/// Row values to write, computed from the stored state and the batch.
struct Plan<'a> {
    /// New entries (at or past the previous verified position), still
    /// including expired ones.
    new_entries: &'a [Entry],
    replayed: u64,
    verified_position: u64,
    downloaded_position: u64,
    tree_size: u64,
    root_hash: Option<[u8; 32]>,
    ingested_until_ms: u64,
    /// `Some(value)`: write `frontier = value` (NULL if `value` is `None`);
    /// `None`: keep the stored frontier (the position did not move).
    frontier: Option<Option<Vec<u8>>>,
}

/// Column vectors of the rows to insert.
struct Columns<'a> {
    leaf_index: Vec<i64>,
    leaf_hash: Vec<&'a [u8]>,
    sct_timestamp_ms: Vec<i64>,
    not_after: Vec<i64>,
    /// PostgreSQL partition key ([`pg_month`]).
    expiry_month: Vec<i16>,
}

impl Store {
    /// Connects to `url` and applies the embedded migrations.
    ///
    /// `sqlite://path/to/file.db?mode=rwc` (creates the file) or
    /// `postgres://user@host:port/db` (also `postgresql://`).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        let backend = if url.starts_with("sqlite:") {
            let mut opts = SqliteConnectOptions::from_str(url)?
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(60))
                .foreign_keys(true);
            // An in-memory database exists once per connection: keep one.
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            if in_memory {
                opts = opts.journal_mode(SqliteJournalMode::Memory);
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(if in_memory { 1 } else { 4 })
                .connect_with(opts)
                .await?;
            Backend::Sqlite(pool)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let opts = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new()
                .max_connections(8)
                .connect_with(opts)
                .await?;
            Backend::Postgres(pool)
        } else {
            return Err(StoreError::UnsupportedUrl(redact_url(url)));
        };
        let store = Store { backend };
        store.migrate().await?;
        Ok(store)
    }

    /// Connects to `DATABASE_URL` if it is set (and not empty), else to
    /// `default_url` (normally an embedded `sqlite://…?mode=rwc` file).
    pub async fn connect_from_env(default_url: &str) -> Result<Store, StoreError> {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => Store::connect(url.trim()).await,
            _ => Store::connect(default_url).await,
        }
    }

    /// Applies any migration not yet applied (idempotent; run by
    /// [`Store::connect`]).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(pool) => SQLITE_MIGRATOR.run(pool).await?,
            Backend::Postgres(pool) => POSTGRES_MIGRATOR.run(pool).await?,
        }
        Ok(())
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(pool) => pool.close().await,
            Backend::Postgres(pool) => pool.close().await,
        }
    }

    /// Registers a log or updates its metadata; positions are untouched.
    pub async fn upsert_log(&self, meta: &LogMeta) -> Result<(), StoreError> {
        let mmd = to_i64("mmd_s", meta.mmd_s)?;
        // UPDATE first: an INSERT … ON CONFLICT would consume a `log_no`
        // identity value on every call (a smallint on PostgreSQL).
        let updated = match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query("UPDATE logs SET url = ?, mmd_s = ?, kind = ? WHERE log_id = ?")
                    .bind(&meta.url)
                    .bind(mmd)
                    .bind(meta.kind.as_str())
                    .bind(&meta.log_id[..])
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            Backend::Postgres(pool) => {
                sqlx::query("UPDATE logs SET url = $1, mmd_s = $2, kind = $3 WHERE log_id = $4")
                    .bind(&meta.url)
                    .bind(mmd)
                    .bind(meta.kind.as_str())
                    .bind(&meta.log_id[..])
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
        };
        if updated > 0 {
            return Ok(());
        }
        match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query(
                    "INSERT INTO logs (log_id, url, mmd_s, kind) VALUES (?, ?, ?, ?) \
                     ON CONFLICT (log_id) DO UPDATE \
                     SET url = excluded.url, mmd_s = excluded.mmd_s, kind = excluded.kind",
                )
                .bind(&meta.log_id[..])
                .bind(&meta.url)
                .bind(mmd)
                .bind(meta.kind.as_str())
                .execute(pool)
                .await?;
            }
            Backend::Postgres(pool) => {
                sqlx::query(
                    "INSERT INTO logs (log_id, url, mmd_s, kind) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (log_id) DO UPDATE \
                     SET url = excluded.url, mmd_s = excluded.mmd_s, kind = excluded.kind",
                )
                .bind(&meta.log_id[..])
                .bind(&meta.url)
                .bind(mmd)
                .bind(meta.kind.as_str())
                .execute(pool)
                .await?;
            }
        }
        Ok(())
    }

    /// The stored state of one log ([`StoreError::UnknownLog`] if absent).
    pub async fn log_state(&self, log_id: &LogId) -> Result<LogState, StoreError> {
        const COLS: &str = "log_id, url, mmd_s, kind, downloaded_position, verified_position, \
                            verified_tree_size, verified_root_hash, ingested_until_ms";
        let row = match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query(&format!("SELECT {COLS} FROM logs WHERE log_id = ?"))
                    .bind(&log_id[..])
                    .fetch_optional(pool)
                    .await?
                    .map(|r| log_state_from_row(&r))
                    .transpose()?
            }
            Backend::Postgres(pool) => {
                sqlx::query(&format!("SELECT {COLS} FROM logs WHERE log_id = $1"))
                    .bind(&log_id[..])
                    .fetch_optional(pool)
                    .await?
                    .map(|r| log_state_from_row(&r))
                    .transpose()?
            }
        };
        row.ok_or(StoreError::UnknownLog(*log_id))
    }

    /// Records how far the fetcher has downloaded. Advisory only: it is not
    /// checked against, nor does it move, the verified position.
    pub async fn record_download(
        &self,
        log_id: &LogId,
        downloaded_position: u64,
    ) -> Result<(), StoreError> {
        let pos = to_i64("downloaded_position", downloaded_position)?;
        let affected = match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query("UPDATE logs SET downloaded_position = ? WHERE log_id = ?")
                    .bind(pos)
                    .bind(&log_id[..])
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            Backend::Postgres(pool) => {
                sqlx::query("UPDATE logs SET downloaded_position = $1 WHERE log_id = $2")
                    .bind(pos)
                    .bind(&log_id[..])
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
        };
        if affected == 0 {
            return Err(StoreError::UnknownLog(*log_id));
        }
        Ok(())
    }

    /// Adds a verified batch to S and advances the log's verified position,
    /// in one transaction. Entries already expired now (by the system clock)
    /// are counted in the position but not stored. See
    /// [`Store::commit_verified_at`].
    pub async fn commit_verified(
        &self,
        log_id: &LogId,
        entries: &[Entry],
        tree_size: u64,
        root_hash: &[u8; 32],
        ingested_until_ms: u64,
    ) -> Result<CommitOutcome, StoreError> {
        self.commit_verified_at(
            log_id,
            entries,
            tree_size,
            root_hash,
            ingested_until_ms,
            unix_now_s(),
        )
        .await
    }

    /// [`Store::commit_verified`] with an explicit clock: entries with
    /// `not_after < now_s` are not stored (they are not in S), though they
    /// count towards the verified position.
    ///
    /// `entries` must have consecutive leaf indices and start at the stored
    /// verified position; a later start is a [`StoreError::Gap`]. An earlier
    /// start is a replay (e.g. after a crash between the commit and the
    /// caller noticing it): the already-verified prefix is skipped, so a
    /// replay never duplicates rows nor moves the position back. Inserts use
    /// `ON CONFLICT DO NOTHING` as a second line of defence.
    ///
    /// `tree_size`/`root_hash` is the verified tree head the entries were
    /// checked against: the batch must end within it. The stored tree head
    /// only moves forward; a head of the same size with another root is a
    /// [`StoreError::RootMismatch`]. `ingested_until_ms` only moves forward.
    pub async fn commit_verified_at(
        &self,
        log_id: &LogId,
        entries: &[Entry],
        tree_size: u64,
        root_hash: &[u8; 32],
        ingested_until_ms: u64,
        now_s: i64,
    ) -> Result<CommitOutcome, StoreError> {
        let batch = Batch {
            log_id,
            entries,
            tree_size,
            root_hash,
            ingested_until_ms,
            now_s,
            frontier: None,
        };
        self.commit_impl(&batch, Finish::Commit).await
    }

    /// Test hook: does everything [`Store::commit_verified_at`] does, then
    /// drops the transaction instead of committing it, as a crash just
    /// before `COMMIT` would. Returns what the commit would have reported.
    #[doc(hidden)]
    pub async fn commit_verified_then_crash(
        &self,
        log_id: &LogId,
        entries: &[Entry],
        tree_size: u64,
        root_hash: &[u8; 32],
        ingested_until_ms: u64,
        now_s: i64,
    ) -> Result<CommitOutcome, StoreError> {
        let batch = Batch {
            log_id,
            entries,
            tree_size,
            root_hash,
            ingested_until_ms,
            now_s,
            frontier: None,
        };
        self.commit_impl(&batch, Finish::Crash).await
    }

    /// [`Store::commit_verified_at`] that also stores `frontier`, the
    /// `CompactRange` nodes (ct-core's `merkle::CompactRange`; largest subtree first) of the
    /// entries `[0, end of batch)`, in the same transaction as the new
    /// verified position, so that a restart can resume hashing where the
    /// verified prefix ends (see [`Store::verified_frontier`]).
    ///
    /// The frontier is written only if the commit moves the verified
    /// position (it then ends at the batch's end); it must hold
    /// `popcount(end)` roots, else [`StoreError::FrontierMismatch`] and
    /// nothing is written. A replay that does not move the position keeps
    /// the stored frontier. (Commits without a frontier clear it when they
    /// move the position, so a stored frontier always matches it.)
    #[allow(clippy::too_many_arguments)]
    pub async fn commit_verified_with_frontier_at(
        &self,
        log_id: &LogId,
        entries: &[Entry],
        tree_size: u64,
        root_hash: &[u8; 32],
        ingested_until_ms: u64,
        frontier: &[[u8; 32]],
        now_s: i64,
    ) -> Result<CommitOutcome, StoreError> {
        let batch = Batch {
            log_id,
            entries,
            tree_size,
            root_hash,
            ingested_until_ms,
            now_s,
            frontier: Some(frontier),
        };
        self.commit_impl(&batch, Finish::Commit).await
    }

    /// Test hook: [`Store::commit_verified_with_frontier_at`] that drops the
    /// transaction instead of committing it (a crash just before `COMMIT`).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub async fn commit_verified_with_frontier_then_crash(
        &self,
        log_id: &LogId,
        entries: &[Entry],
        tree_size: u64,
        root_hash: &[u8; 32],
        ingested_until_ms: u64,
        frontier: &[[u8; 32]],
        now_s: i64,
    ) -> Result<CommitOutcome, StoreError> {
        let batch = Batch {
            log_id,
            entries,
            tree_size,
            root_hash,
            ingested_until_ms,
            now_s,
            frontier: Some(frontier),
        };
        self.commit_impl(&batch, Finish::Crash).await
    }

    /// The log's verified position and the CompactRange nodes of
    /// `[0, verified_position)` stored with it, read together (`None` if no
    /// frontier is stored: before the first commit that supplied one).
    pub async fn verified_frontier(
        &self,
        log_id: &LogId,
    ) -> Result<(u64, Option<Vec<[u8; 32]>>), StoreError> {
        const Q: &str = "SELECT verified_position, frontier FROM logs WHERE log_id = ";
        let (pos, blob): (i64, Option<Vec<u8>>) = match &self.backend {
            Backend::Sqlite(pool) => sqlx::query_as(&format!("{Q}?"))
                .bind(&log_id[..])
                .fetch_optional(pool)
                .await?
                .ok_or(StoreError::UnknownLog(*log_id))?,
            Backend::Postgres(pool) => sqlx::query_as(&format!("{Q}$1"))
                .bind(&log_id[..])
                .fetch_optional(pool)
                .await?
                .ok_or(StoreError::UnknownLog(*log_id))?,
        };
        let pos = from_i64("verified_position", pos)?;
        let Some(blob) = blob else {
            return Ok((pos, None));
        };
        if blob.len() % 32 != 0 || blob.len() / 32 != pos.count_ones() as usize {
            return Err(StoreError::Corrupt(format!(
                "frontier of {} bytes at verified position {pos}",
                blob.len()
            )));
        }
        let nodes = blob
            .chunks_exact(32)
            .map(hash32)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((pos, Some(nodes)))
    }

    async fn commit_impl(
        &self,
        batch: &Batch<'_>,
        finish: Finish,
    ) -> Result<CommitOutcome, StoreError> {
        check_contiguous(batch.entries)?;
        match &self.backend {
            Backend::Sqlite(pool) => commit_sqlite(pool, batch, finish).await,
            Backend::Postgres(pool) => {
                // Outside the insert transaction, so that it holds no DDL lock.
                ensure_pg_partitions(pool, batch.entries, batch.now_s).await?;
                commit_pg(pool, batch, finish).await
            }
        }
    }

    /// Removes entries with `not_after < now_s` from S and returns how many.
    ///
    /// PostgreSQL: monthly partitions lying entirely before `now_s` are
    /// detached (`DETACH PARTITION … CONCURRENTLY`, which does not block
    /// readers or the ingester) and dropped; the remaining expired rows (in
    /// the current month) are deleted. SQLite: one indexed `DELETE`.
    pub async fn prune_expired(&self, now_s: i64) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(pool) => {
                let r = sqlx::query("DELETE FROM entries WHERE not_after < ?")
                    .bind(now_s)
                    .execute(pool)
                    .await?;
                Ok(r.rows_affected())
            }
            Backend::Postgres(pool) => prune_pg(pool, now_s).await,
        }
    }

    /// Number of entries in S at `now_s` (`not_after >= now_s`).
    pub async fn count_active(&self, now_s: i64) -> Result<u64, StoreError> {
        let n: i64 = match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query_scalar("SELECT count(*) FROM entries WHERE not_after >= ?")
                    .bind(now_s)
                    .fetch_one(pool)
                    .await?
            }
            Backend::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT count(*) FROM entries WHERE expiry_month >= $1 AND not_after >= $2",
                )
                .bind(pg_month(now_s))
                .bind(now_s)
                .fetch_one(pool)
                .await?
            }
        };
        from_i64("count", n)
    }

    /// Streams the leaf hashes of S at `now_s` (`not_after >= now_s`), in no
    /// particular order, for the epoch builder. One query, one snapshot:
    /// rows are decoded as they arrive, so memory stays bounded whatever the
    /// size of S. The stream holds one pooled connection until dropped.
    pub fn active_leaf_hashes(&self, now_s: i64) -> BoxStream<'_, Result<[u8; 32], StoreError>> {
        match &self.backend {
            Backend::Sqlite(pool) => {
                sqlx::query("SELECT leaf_hash FROM entries WHERE not_after >= ?")
                    .bind(now_s)
                    .fetch(pool)
                    .map(|row| hash_from_row(&row?))
                    .boxed()
            }
            Backend::Postgres(pool) => sqlx::query(
                "SELECT leaf_hash FROM entries WHERE expiry_month >= $1 AND not_after >= $2",
            )
            .bind(pg_month(now_s))
            .bind(now_s)
            .fetch(pool)
            .map(|row| hash_from_row(&row?))
            .boxed(),
        }
    }

    /// Per-log coverage (ordered by log id).
    pub async fn coverage(&self) -> Result<Vec<Coverage>, StoreError> {
        const Q: &str = "SELECT log_id, verified_tree_size, verified_position, \
                         ingested_until_ms, mmd_s FROM logs ORDER BY log_id";
        let rows = match &self.backend {
            Backend::Sqlite(pool) => sqlx::query(Q)
                .fetch_all(pool)
                .await?
                .iter()
                .map(coverage_from_row)
                .collect::<Result<Vec<_>, _>>()?,
            Backend::Postgres(pool) => sqlx::query(Q)
                .fetch_all(pool)
                .await?
                .iter()
                .map(coverage_from_row)
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(rows)
    }
}

// ---------------------------------------------------------------------------
// Commit
// ---------------------------------------------------------------------------

fn check_contiguous(entries: &[Entry]) -> Result<(), StoreError> {
    for pair in entries.windows(2) {
        let expected = pair[0]
            .leaf_index
            .checked_add(1)
            .ok_or(StoreError::OutOfRange {
                what: "leaf_index",
                value: pair[0].leaf_index,
            })?;
        if pair[1].leaf_index != expected {
            return Err(StoreError::NotContiguous {
                expected,
                found: pair[1].leaf_index,
            });
        }
    }
    Ok(())
}

/// Checks the batch against the stored state and computes the new state.
fn plan<'a>(prev: &PrevState, batch: &Batch<'a>) -> Result<Plan<'a>, StoreError> {
    let (new_entries, replayed, end) = match batch.entries.first() {
        None => (batch.entries, 0, prev.verified_position),
        Some(first) => {
            let first = first.leaf_index;
            if first > prev.verified_position {
                return Err(StoreError::Gap {
                    log_id: *batch.log_id,
                    verified_position: prev.verified_position,
                    first_leaf_index: first,
                });
            }
            let len = batch.entries.len() as u64;
            let end = first.checked_add(len).ok_or(StoreError::OutOfRange {
                what: "leaf_index",
                value: first,
            })?;
            // Entries below the verified position were committed before.
            let replayed = (prev.verified_position - first).min(len);
            let skip = usize::try_from(replayed).map_err(|_| StoreError::OutOfRange {
                what: "replayed",
                value: replayed,
            })?;
            (&batch.entries[skip..], replayed, end)
        }
    };
    if end > batch.tree_size {
        return Err(StoreError::BeyondTree {
            end,
            tree_size: batch.tree_size,
        });
    }
    let (tree_size, root_hash) = if batch.tree_size > prev.verified_tree_size {
        (batch.tree_size, Some(*batch.root_hash))
    } else if batch.tree_size == prev.verified_tree_size {
        match prev.verified_root_hash {
            Some(stored) if stored != *batch.root_hash => {
                return Err(StoreError::RootMismatch {
                    log_id: *batch.log_id,
                    tree_size: batch.tree_size,
                })
            }
            _ => (batch.tree_size, Some(*batch.root_hash)),
        }
    } else {
        // Verified against an older head: fine for the entries (checked
        // above that they lie within it), but the stored head stays.
        (prev.verified_tree_size, prev.verified_root_hash)
    };
    let verified_position = end.max(prev.verified_position);
    let frontier = if verified_position > prev.verified_position {
        match batch.frontier {
            Some(nodes) => {
                if nodes.len() != verified_position.count_ones() as usize {
                    return Err(StoreError::FrontierMismatch {
                        position: verified_position,
                        expected: verified_position.count_ones(),
                        found: nodes.len(),
                    });
                }
                Some(Some(nodes.concat()))
            }
            None => Some(None),
        }
    } else {
        None
    };
    Ok(Plan {
        new_entries,
        replayed,
        verified_position,
        downloaded_position: prev.downloaded_position.max(verified_position),
        tree_size,
        root_hash,
        ingested_until_ms: prev.ingested_until_ms.max(batch.ingested_until_ms),
        frontier,
    })
}

/// Column vectors of the entries still active at `now_s`.
fn columns(entries: &[Entry], now_s: i64) -> Result<Columns<'_>, StoreError> {
    let mut c = Columns {
        leaf_index: Vec::with_capacity(entries.len()),
        leaf_hash: Vec::with_capacity(entries.len()),
        sct_timestamp_ms: Vec::with_capacity(entries.len()),
        not_after: Vec::with_capacity(entries.len()),
        expiry_month: Vec::with_capacity(entries.len()),
    };
    for e in entries.iter().filter(|e| e.not_after >= now_s) {
        c.leaf_index.push(to_i64("leaf_index", e.leaf_index)?);
        c.leaf_hash.push(&e.leaf_hash[..]);
        c.sct_timestamp_ms
            .push(to_i64("sct_timestamp_ms", e.sct_timestamp_ms)?);
        c.not_after.push(e.not_after);
        c.expiry_month.push(pg_month(e.not_after));
    }
    Ok(c)
}

fn outcome(plan: &Plan<'_>, stored: usize, inserted: u64) -> CommitOutcome {
    CommitOutcome {
        inserted,
        replayed: plan.replayed,
        expired: (plan.new_entries.len() - stored) as u64,
        verified_position: plan.verified_position,
    }
}

fn prev_from_row<R>(row: &R) -> Result<PrevState, StoreError>
where
    R: Row,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<&'r [u8]>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    Ok(PrevState {
        downloaded_position: from_i64("downloaded_position", row.try_get(1)?)?,
        verified_position: from_i64("verified_position", row.try_get(2)?)?,
        verified_tree_size: from_i64("verified_tree_size", row.try_get(3)?)?,
        verified_root_hash: row
            .try_get::<Option<&[u8]>, _>(4)?
            .map(hash32)
            .transpose()?,
        ingested_until_ms: from_i64("ingested_until_ms", row.try_get(5)?)?,
    })
}

const SELECT_PREV: &str = "SELECT log_no, downloaded_position, verified_position, \
                           verified_tree_size, verified_root_hash, ingested_until_ms \
                           FROM logs WHERE log_id = ";

async fn commit_sqlite(
    pool: &SqlitePool,
    batch: &Batch<'_>,
    finish: Finish,
) -> Result<CommitOutcome, StoreError> {
    // IMMEDIATE: take the write lock up front (a deferred transaction that
    // reads first can fail to upgrade with SQLITE_BUSY, bypassing the busy
    // timeout); this also serialises concurrent commits of one log.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let row = sqlx::query(&format!("{SELECT_PREV}?"))
        .bind(&batch.log_id[..])
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::UnknownLog(*batch.log_id))?;
    let log_no: i64 = row.try_get(0)?;
    let prev = prev_from_row(&row)?;
    let plan = plan(&prev, batch)?;
    let cols = columns(plan.new_entries, batch.now_s)?;

    let mut inserted = 0u64;
    let mut start = 0;
    while start < cols.leaf_index.len() {
        let end = (start + SQLITE_ROWS_PER_INSERT).min(cols.leaf_index.len());
        let sql = sqlite_insert_sql(end - start);
        let mut q = sqlx::query(&sql);
        for i in start..end {
            q = q
                .bind(log_no)
                .bind(cols.leaf_index[i])
                .bind(cols.leaf_hash[i])
                .bind(cols.sct_timestamp_ms[i])
                .bind(cols.not_after[i]);
        }
        inserted += q.execute(&mut *tx).await?.rows_affected();
        start = end;
    }

    sqlx::query(
        "UPDATE logs SET verified_position = ?, downloaded_position = ?, \
         verified_tree_size = ?, verified_root_hash = ?, ingested_until_ms = ?, \
         frontier = CASE WHEN ? THEN ? ELSE frontier END \
         WHERE log_no = ?",
    )
    .bind(to_i64("verified_position", plan.verified_position)?)
    .bind(to_i64("downloaded_position", plan.downloaded_position)?)
    .bind(to_i64("verified_tree_size", plan.tree_size)?)
    .bind(plan.root_hash.as_ref().map(|h| &h[..]))
    .bind(to_i64("ingested_until_ms", plan.ingested_until_ms)?)
    .bind(plan.frontier.is_some())
    .bind(plan.frontier.as_ref().and_then(|f| f.as_deref()))
    .bind(log_no)
    .execute(&mut *tx)
    .await?;

    match finish {
        Finish::Commit => tx.commit().await?,
        Finish::Crash => drop(tx),
    }
    Ok(outcome(&plan, cols.leaf_index.len(), inserted))
}

fn sqlite_insert_sql(rows: usize) -> String {
    const HEAD: &str =
        "INSERT INTO entries (log_no, leaf_index, leaf_hash, sct_timestamp_ms, not_after) VALUES ";
    const TUPLE: &str = "(?, ?, ?, ?, ?)";
    let mut sql = String::with_capacity(HEAD.len() + rows * (TUPLE.len() + 1) + 32);
    sql.push_str(HEAD);
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(TUPLE);
    }
    sql.push_str(" ON CONFLICT DO NOTHING");
    sql
}

async fn commit_pg(
    pool: &PgPool,
    batch: &Batch<'_>,
    finish: Finish,
) -> Result<CommitOutcome, StoreError> {
    let mut tx = pool.begin().await?;
    // The row lock serialises concurrent commits of one log: the second sees
    // the first's position and treats the overlap as a replay.
    let row = sqlx::query(&format!("{SELECT_PREV}$1 FOR UPDATE"))
        .bind(&batch.log_id[..])
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::UnknownLog(*batch.log_id))?;
    let log_no: i16 = row.try_get(0)?;
    let prev = prev_from_row(&row)?;
    let plan = plan(&prev, batch)?;
    let cols = columns(plan.new_entries, batch.now_s)?;

    let mut inserted = 0u64;
    let mut start = 0;
    while start < cols.leaf_index.len() {
        let end = (start + PG_ROWS_PER_INSERT).min(cols.leaf_index.len());
        inserted += sqlx::query(
            "INSERT INTO entries \
                 (log_no, leaf_index, leaf_hash, sct_timestamp_ms, not_after, expiry_month) \
             SELECT $1, t.leaf_index, t.leaf_hash, t.sct_timestamp_ms, t.not_after, t.m \
             FROM UNNEST($2::int8[], $3::bytea[], $4::int8[], $5::int8[], $6::int2[]) \
                  AS t (leaf_index, leaf_hash, sct_timestamp_ms, not_after, m) \
             ON CONFLICT DO NOTHING",
        )
        .bind(log_no)
        .bind(&cols.leaf_index[start..end])
        .bind(&cols.leaf_hash[start..end])
        .bind(&cols.sct_timestamp_ms[start..end])
        .bind(&cols.not_after[start..end])
        .bind(&cols.expiry_month[start..end])
        .execute(&mut *tx)
        .await?
        .rows_affected();
        start = end;
    }

    sqlx::query(
        "UPDATE logs SET verified_position = $1, downloaded_position = $2, \
         verified_tree_size = $3, verified_root_hash = $4, ingested_until_ms = $5, \
         frontier = CASE WHEN $6 THEN $7 ELSE frontier END \
         WHERE log_no = $8",
    )
    .bind(to_i64("verified_position", plan.verified_position)?)
    .bind(to_i64("downloaded_position", plan.downloaded_position)?)
    .bind(to_i64("verified_tree_size", plan.tree_size)?)
    .bind(plan.root_hash.as_ref().map(|h| &h[..]))
    .bind(to_i64("ingested_until_ms", plan.ingested_until_ms)?)
    .bind(plan.frontier.is_some())
    .bind(plan.frontier.as_ref().and_then(|f| f.as_deref()))
    .bind(log_no)
    .execute(&mut *tx)
    .await?;

    match finish {
        Finish::Commit => tx.commit().await?,
        Finish::Crash => drop(tx),
    }
    Ok(outcome(&plan, cols.leaf_index.len(), inserted))
}

// ---------------------------------------------------------------------------
// PostgreSQL partitions
// ---------------------------------------------------------------------------

/// A calendar month (UTC) as `year * 12 + (month - 1)`.
fn month_of(unix_s: i64) -> i64 {
    let (y, m, _) = civil_from_days(unix_s.div_euclid(86_400));
    y * 12 + (m - 1)
}

/// First second of month `idx` (see [`month_of`]).
fn month_start(idx: i64) -> i64 {
    days_from_civil(idx.div_euclid(12), idx.rem_euclid(12) + 1, 1) * 86_400
}

/// PostgreSQL `expiry_month` of a `notAfter`: [`month_of`] clamped to
/// `[0, PG_FAR_MONTH]` (see `migrations/postgres`).
fn pg_month(not_after: i64) -> i16 {
    i16::try_from(month_of(not_after).clamp(0, PG_FAR_MONTH)).unwrap_or(i16::MAX)
}

/// The month of a monthly partition's name, `entries_pYYYYMM` (`None` for
/// other tables).
fn partition_month(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("entries_p")?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let y: i64 = digits[..4].parse().ok()?;
    let m: i64 = digits[4..].parse().ok()?;
    (1..=12).contains(&m).then_some(y * 12 + m - 1)
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic
/// Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month 1..=12, day) → days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Creates the monthly partitions that the active entries of `entries` need.
async fn ensure_pg_partitions(
    pool: &PgPool,
    entries: &[Entry],
    now_s: i64,
) -> Result<(), StoreError> {
    let mut months: Vec<i32> = entries
        .iter()
        .filter(|e| e.not_after >= now_s)
        .map(|e| i32::from(pg_month(e.not_after)))
        .filter(|&m| i64::from(m) < PG_FAR_MONTH)
        .collect();
    months.sort_unstable();
    months.dedup();
    if months.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT ct_ensure_entries_partitions($1)")
        .bind(&months)
        .execute(pool)
        .await?;
    Ok(())
}

async fn prune_pg(pool: &PgPool, now_s: i64) -> Result<u64, StoreError> {
    // Monthly tables in our schema, attached or left detached by an
    // interrupted earlier prune.
    let tables = sqlx::query(
        "SELECT c.relname::text, i.inhrelid IS NOT NULL, coalesce(i.inhdetachpending, false) \
         FROM pg_class c \
         LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = 'entries'::regclass \
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' \
           AND c.relname ~ '^entries_p[0-9]{6}$'",
    )
    .fetch_all(pool)
    .await?;

    let mut pruned = 0u64;
    for t in &tables {
        let name: String = t.try_get(0)?;
        let attached: bool = t.try_get(1)?;
        let detach_pending: bool = t.try_get(2)?;
        let Some(month) = partition_month(&name) else {
            continue;
        };
        // Every row has not_after < month_start(month + 1) <= now_s.
        if month_start(month + 1) > now_s {
            continue;
        }
        // `name` matched ^entries_p[0-9]{6}$: safe to splice, quoted anyway.
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM \"{name}\""))
            .fetch_one(pool)
            .await?;
        if attached {
            let how = if detach_pending {
                "FINALIZE"
            } else {
                "CONCURRENTLY"
            };
            // Not in a transaction block (required by CONCURRENTLY).
            sqlx::raw_sql(&format!(
                "ALTER TABLE entries DETACH PARTITION \"{name}\" {how}"
            ))
            .execute(pool)
            .await?;
        }
        sqlx::raw_sql(&format!("DROP TABLE IF EXISTS \"{name}\""))
            .execute(pool)
            .await?;
        pruned += from_i64("count", n)?;
    }

    // The rest: expired rows of the partly expired current month (the
    // expiry_month bound lets the planner skip every other partition).
    let r = sqlx::query("DELETE FROM entries WHERE expiry_month <= $1 AND not_after < $2")
        .bind(pg_month(now_s))
        .bind(now_s)
        .execute(pool)
        .await?;
    Ok(pruned + r.rows_affected())
}

// ---------------------------------------------------------------------------
// Row decoding and conversions
// ---------------------------------------------------------------------------

fn log_state_from_row<R>(row: &R) -> Result<LogState, StoreError>
where
    R: Row,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r [u8]: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<&'r [u8]>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    Ok(LogState {
        meta: LogMeta {
            log_id: hash32(row.try_get(0)?)?,
            url: row.try_get::<&str, _>(1)?.to_owned(),
            mmd_s: from_i64("mmd_s", row.try_get(2)?)?,
            kind: row.try_get::<&str, _>(3)?.parse()?,
        },
        downloaded_position: from_i64("downloaded_position", row.try_get(4)?)?,
        verified_position: from_i64("verified_position", row.try_get(5)?)?,
        verified_tree_size: from_i64("verified_tree_size", row.try_get(6)?)?,
        verified_root_hash: row
            .try_get::<Option<&[u8]>, _>(7)?
            .map(hash32)
            .transpose()?,
        ingested_until_ms: from_i64("ingested_until_ms", row.try_get(8)?)?,
    })
}

fn coverage_from_row<R>(row: &R) -> Result<Coverage, StoreError>
where
    R: Row,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r [u8]: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    Ok(Coverage {
        log_id: hash32(row.try_get(0)?)?,
        verified_tree_size: from_i64("verified_tree_size", row.try_get(1)?)?,
        verified_position: from_i64("verified_position", row.try_get(2)?)?,
        ingested_until_ms: from_i64("ingested_until_ms", row.try_get(3)?)?,
        mmd_s: from_i64("mmd_s", row.try_get(4)?)?,
    })
}

fn hash_from_row<R>(row: &R) -> Result<[u8; 32], StoreError>
where
    R: Row,
    for<'r> &'r [u8]: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    hash32(row.try_get(0)?)
}

fn hash32(bytes: &[u8]) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map_err(|_| StoreError::Corrupt(format!("expected 32 bytes, found {}", bytes.len())))
}

fn to_i64(what: &'static str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::OutOfRange { what, value })
}

fn from_i64(what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

fn unix_now_s() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// The URL without its password, for error messages.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

struct Hex<'a>(&'a [u8; 32]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in (-800_000..3_000_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn months_and_partition_names() {
        // 2026-11-22T01:02:53Z
        let t = 1_795_309_373;
        let m = month_of(t);
        assert_eq!(partition_month("entries_p202611"), Some(m));
        assert_eq!(month_start(m), 1_793_491_200); // 2026-11-01
        assert_eq!(month_start(m + 1), 1_796_083_200); // 2026-12-01
        assert_eq!(month_of(month_start(m + 1)), m + 1);
        assert_eq!(month_of(month_start(m + 1) - 1), m);
        assert_eq!(partition_month("entries_pfar"), None);
        assert_eq!(partition_month("entries_p202613"), None);
        assert_eq!(month_start(PG_FAR_MONTH), 4_102_444_800); // 2100-01-01
        assert_eq!(i64::from(pg_month(253_402_300_799)), PG_FAR_MONTH);
        assert_eq!(i64::from(pg_month(4_102_444_799)), PG_FAR_MONTH - 1);
        assert_eq!(pg_month(-1), 1969 * 12 + 11);
        assert_eq!(pg_month(i64::MIN / 2), 0);
        assert_eq!(i64::from(pg_month(t)), m);
    }

    #[test]
    fn redacts_password() {
        assert_eq!(
            redact_url("mysql://u:secret@h/db"),
            "mysql://u:***@h/db".to_owned()
        );
        assert_eq!(redact_url("foo:bar"), "foo:bar".to_owned());
    }
}
