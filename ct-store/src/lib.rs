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
//! Every operation is written once; what differs between the two (SQL
//! dialect, bulk insert, partitions) is the `dialect` module's `Dialect`
//! trait.
//!
//! Each log has two positions (certspotter's design): the *downloaded*
//! position is advisory (how far the fetcher got), the *verified* position is
//! authoritative: entries `[0, verified)` have been verified against a signed
//! tree head and are in S (unless they had already expired). Entries enter S
//! only through [`Store::commit`], in the same transaction that advances the
//! verified position, so a crash never leaves entries without the position
//! or the position without the entries. See `docs/storage.md`.
//!
//! Misbehaviour reports that the auditor verified live in the `reports`
//! table ([`Store::insert_report`], [`Store::reports`]); the logs' public
//! keys the auditor verifies them with in `logs.public_key`
//! ([`Store::set_log_key`], [`Store::log_key`]).
//!
//! Database URLs are checked without connecting by [`DatabaseUrl::parse`]
//! and shown without their password by [`redact_url`] (and
//! `DatabaseUrl`'s `Display`); no [`StoreError`] message contains a
//! password.
//!
//! # Feature `fault-injection`
//!
//! Off by default; crash tests turn it on (as a dev-dependency feature).
//! It adds `FaultPlan`, `Commit::fault` and `StoreError::InjectedFault`:
//! a commit that does all its work and then drops its transaction, or
//! commits and then fails, as a crash just before or just after `COMMIT`
//! would.
//!
//! # Feature `testing`
//!
//! Off by default; tests turn it on. It adds the module `testing`: a fresh SQLite
//! database per test case, and a fresh PostgreSQL database when
//! `TEST_DATABASE_URL` is set.

mod commit;
mod dialect;
mod error;
mod url;

#[cfg(feature = "testing")]
pub mod testing;

use std::str::FromStr;
use std::time::Duration;

use futures_util::stream::{BoxStream, StreamExt};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};

pub use commit::Commit;
#[cfg(any(test, feature = "fault-injection"))]
pub use commit::FaultPlan;
pub use error::StoreError;
pub use url::{redact_url, DatabaseUrl};

use commit::{check_contiguous, columns, outcome, plan, to_i64, PrevState};
use dialect::{pg_month, Dialect};
use url::Scheme;

/// The embedded SQLite file used when no database URL is configured
/// (`ct-ingest` and `auditor-server` default to the same store).
pub const DEFAULT_DATABASE_URL: &str = "sqlite://ct-ingest.db?mode=rwc";

/// A CT log's identifier: SHA-256 of its public key (RFC 6962 §3.2).
pub type LogId = [u8; 32];

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

/// What [`Store::commit`] did.
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

/// Evaluates `$body` with `$pool` bound to the backend's pool and (if named)
/// `$D` to its sqlx database type, a [`Dialect`]: each operation is written
/// once and compiled for both backends.
macro_rules! with_dialect {
    ($backend:expr, |$pool:ident| $body:expr) => {
        match $backend {
            Backend::Sqlite($pool) => $body,
            Backend::Postgres($pool) => $body,
        }
    };
    ($backend:expr, |$pool:ident, $D:ident| $body:expr) => {
        match $backend {
            Backend::Sqlite($pool) => {
                type $D = sqlx::Sqlite;
                $body
            }
            Backend::Postgres($pool) => {
                type $D = sqlx::Postgres;
                $body
            }
        }
    };
}

mod reports;
pub use reports::{NewReport, ReportStatus, StoredReport, MAX_PUBLIC_KEY_BYTES};

/// Handle on the entry store; cheap to clone (a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
}

const LOG_STATE_COLUMNS: &str = "log_id, url, mmd_s, kind, downloaded_position, \
                                 verified_position, verified_tree_size, verified_root_hash, \
                                 ingested_until_ms";

/// The log's row as a commit sees it (decoded by [`prev_from_row`]).
const SELECT_PREV: &str = "SELECT CAST(log_no AS BIGINT), downloaded_position, \
                           verified_position, verified_tree_size, verified_root_hash, \
                           ingested_until_ms FROM logs WHERE log_id = $1";

const UPDATE_AFTER_COMMIT: &str = "UPDATE logs SET verified_position = $1, \
                                   downloaded_position = $2, verified_tree_size = $3, \
                                   verified_root_hash = $4, ingested_until_ms = $5, \
                                   frontier = CASE WHEN $6 THEN $7 ELSE frontier END \
                                   WHERE log_no = $8";

impl Store {
    /// Connects to `url` and applies the embedded migrations.
    ///
    /// `sqlite://path/to/file.db?mode=rwc` (creates the file) or
    /// `postgres://user@host:port/db` (also `postgresql://`). A URL that
    /// does not parse is [`StoreError::InvalidUrl`] (checked before any
    /// connection, as [`DatabaseUrl::parse`] does); a database that cannot
    /// be reached is the driver's error for the first connection (e.g.
    /// "Connection refused"), not a pool timeout. No error shows the URL's
    /// password.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_url(&DatabaseUrl::parse(url)?).await
    }

    /// [`Store::connect`] with an already checked URL.
    pub async fn connect_url(url: &DatabaseUrl) -> Result<Store, StoreError> {
        let backend = match url.scheme() {
            Scheme::Sqlite => {
                let url = url.expose();
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
            }
            Scheme::Postgres => {
                let opts = PgConnectOptions::from_str(url.expose())?;
                // One connection first: the pool retries a refused
                // connection until its acquire timeout and then reports
                // only "pool timed out"; this reports the cause at once.
                opts.connect().await?.close().await?;
                let pool = PgPoolOptions::new()
                    .max_connections(8)
                    .connect_with(opts)
                    .await?;
                Backend::Postgres(pool)
            }
        };
        let store = Store { backend };
        store.migrate().await?;
        Ok(store)
    }

    /// Connects to `DATABASE_URL` if it is set (and not empty), else to
    /// `default_url` (normally [`DEFAULT_DATABASE_URL`]).
    pub async fn connect_from_env(default_url: &str) -> Result<Store, StoreError> {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => Store::connect(url.trim()).await,
            _ => Store::connect(default_url).await,
        }
    }

    /// Applies any migration not yet applied (idempotent; run by
    /// [`Store::connect`]).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        with_dialect!(&self.backend, |pool, D| D::migrator().run(pool).await?);
        Ok(())
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        with_dialect!(&self.backend, |_pool, D| D::NAME)
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        with_dialect!(&self.backend, |pool| pool.close().await)
    }

    /// Registers a log or updates its metadata; positions are untouched.
    pub async fn upsert_log(&self, meta: &LogMeta) -> Result<(), StoreError> {
        let mmd = to_i64("mmd_s", meta.mmd_s)?;
        with_dialect!(&self.backend, |pool| {
            // UPDATE first: an INSERT … ON CONFLICT would consume a `log_no`
            // identity value on every call (a smallint on PostgreSQL).
            let updated =
                sqlx::query("UPDATE logs SET url = $1, mmd_s = $2, kind = $3 WHERE log_id = $4")
                    .bind(&meta.url)
                    .bind(mmd)
                    .bind(meta.kind.as_str())
                    .bind(&meta.log_id[..])
                    .execute(pool)
                    .await?
                    .rows_affected();
            if updated == 0 {
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
        });
        Ok(())
    }

    /// The stored state of one log ([`StoreError::UnknownLog`] if absent).
    pub async fn log_state(&self, log_id: &LogId) -> Result<LogState, StoreError> {
        let state = with_dialect!(&self.backend, |pool| {
            sqlx::query(&format!(
                "SELECT {LOG_STATE_COLUMNS} FROM logs WHERE log_id = $1"
            ))
            .bind(&log_id[..])
            .fetch_optional(pool)
            .await?
            .map(|r| log_state_from_row(&r))
            .transpose()?
        });
        state.ok_or(StoreError::UnknownLog(*log_id))
    }

    /// Records how far the fetcher has downloaded. Advisory only: it is not
    /// checked against, nor does it move, the verified position.
    pub async fn record_download(
        &self,
        log_id: &LogId,
        downloaded_position: u64,
    ) -> Result<(), StoreError> {
        let pos = to_i64("downloaded_position", downloaded_position)?;
        let affected = with_dialect!(&self.backend, |pool| {
            sqlx::query("UPDATE logs SET downloaded_position = $1 WHERE log_id = $2")
                .bind(pos)
                .bind(&log_id[..])
                .execute(pool)
                .await?
                .rows_affected()
        });
        if affected == 0 {
            return Err(StoreError::UnknownLog(*log_id));
        }
        Ok(())
    }

    /// Adds a verified batch to S and advances the log's verified position
    /// (and tree head, frontier, "ingested until") in one transaction; see
    /// [`Commit`] for what is checked and how replays are handled. Nothing is
    /// written when it fails.
    pub async fn commit(&self, commit: Commit<'_>) -> Result<CommitOutcome, StoreError> {
        check_contiguous(commit.entries)?;
        let now_s = commit.now_s.unwrap_or_else(unix_now_s);
        let log_id = commit.log_id;
        with_dialect!(&self.backend, |pool, D| {
            D::prepare_commit(pool, commit.entries, now_s).await?;
            let mut tx = pool.begin_with(D::BEGIN).await?;
            let row = sqlx::query(&format!("{SELECT_PREV}{}", D::LOCK_LOG_ROW))
                .bind(&log_id[..])
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::UnknownLog(*log_id))?;
            let log_no: i64 = row.try_get(0)?;
            let prev = prev_from_row(&row)?;
            let plan = plan(&prev, &commit)?;
            let cols = columns(plan.new_entries, now_s)?;
            let inserted = D::insert_entries(&mut tx, log_no, &cols).await?;
            sqlx::query(UPDATE_AFTER_COMMIT)
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
            let out = outcome(&plan, cols.len(), inserted);
            #[cfg(any(test, feature = "fault-injection"))]
            if let Some(fault) = commit.fault {
                match fault {
                    // Dropping the transaction rolls it back.
                    FaultPlan::CrashBeforeCommit => drop(tx),
                    FaultPlan::CrashAfterCommit => tx.commit().await?,
                }
                return Err(StoreError::InjectedFault {
                    fault,
                    outcome: out,
                });
            }
            tx.commit().await?;
            Ok(out)
        })
    }

    /// The log's verified position and the CompactRange nodes of
    /// `[0, verified_position)` stored with it, read together (`None` if no
    /// frontier is stored: before the first commit that supplied one).
    pub async fn verified_frontier(
        &self,
        log_id: &LogId,
    ) -> Result<(u64, Option<Vec<[u8; 32]>>), StoreError> {
        let (pos, blob): (i64, Option<Vec<u8>>) = with_dialect!(&self.backend, |pool| {
            sqlx::query_as("SELECT verified_position, frontier FROM logs WHERE log_id = $1")
                .bind(&log_id[..])
                .fetch_optional(pool)
                .await?
                .ok_or(StoreError::UnknownLog(*log_id))?
        });
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

    /// Removes entries with `not_after < now_s` from S and returns how many.
    ///
    /// PostgreSQL: monthly partitions lying entirely before `now_s` are
    /// detached (`DETACH PARTITION … CONCURRENTLY`, which does not block
    /// readers or the ingester) and dropped; the remaining expired rows (in
    /// the current month) are deleted. SQLite: one indexed `DELETE`.
    pub async fn prune_expired(&self, now_s: i64) -> Result<u64, StoreError> {
        with_dialect!(&self.backend, |pool, D| D::prune(pool, now_s).await)
    }

    /// Number of entries in S at `now_s` (`not_after >= now_s`).
    pub async fn count_active(&self, now_s: i64) -> Result<u64, StoreError> {
        let n: i64 = with_dialect!(&self.backend, |pool, D| {
            sqlx::query_scalar(D::COUNT_ACTIVE)
                .bind(pg_month(now_s))
                .bind(now_s)
                .fetch_one(pool)
                .await?
        });
        from_i64("count", n)
    }

    /// Streams the leaf hashes of S at `now_s` (`not_after >= now_s`), in no
    /// particular order, for the epoch builder. One query, one snapshot:
    /// rows are decoded as they arrive, so memory stays bounded whatever the
    /// size of S. The stream holds one pooled connection until dropped.
    pub fn active_leaf_hashes(&self, now_s: i64) -> BoxStream<'_, Result<[u8; 32], StoreError>> {
        with_dialect!(&self.backend, |pool, D| {
            sqlx::query(D::ACTIVE_LEAF_HASHES)
                .bind(pg_month(now_s))
                .bind(now_s)
                .fetch(pool)
                .map(|row| hash32(row?.try_get(0)?))
                .boxed()
        })
    }

    /// Per-log coverage (ordered by log id).
    pub async fn coverage(&self) -> Result<Vec<Coverage>, StoreError> {
        const Q: &str = "SELECT log_id, verified_tree_size, verified_position, \
                         ingested_until_ms, mmd_s FROM logs ORDER BY log_id";
        let rows = with_dialect!(&self.backend, |pool| {
            sqlx::query(Q)
                .fetch_all(pool)
                .await?
                .iter()
                .map(coverage_from_row)
                .collect::<Result<Vec<_>, _>>()?
        });
        Ok(rows)
    }
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

/// Columns 1.. of [`SELECT_PREV`] (column 0 is `log_no`).
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

fn hash32(bytes: &[u8]) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map_err(|_| StoreError::Corrupt(format!("expected 32 bytes, found {}", bytes.len())))
}

fn from_i64(what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {what}: {value}")))
}

use ct_core::civil::unix_now_s;
