//! [`Store`]: the connection pool and every operation on logs and entries,
//! each written once for both backends (`with_dialect!`).

use std::str::FromStr;
use std::time::Duration;

use ct_core::civil::unix_now_s;
use futures_util::stream::{BoxStream, StreamExt};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};

use crate::commit::{check_contiguous, columns, outcome, plan, Commit, PrevState};
use crate::convert::{from_i64, hash32, to_i64};
use crate::dialect::Dialect;
use crate::error::StoreError;
#[cfg(any(test, feature = "fault-injection"))]
use crate::model::FaultPlan;
use ct_core::LogId;

use crate::model::{CommitOutcome, Coverage, LogKind, LogMeta, LogState};
use crate::month::pg_month;
use crate::url::{DatabaseUrl, Scheme};

#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Evaluates `$body` with `$pool` bound to the backend's pool and (if named)
/// `$D` to its sqlx database type, a [`Dialect`]: each operation is written
/// once and compiled for both backends.
macro_rules! with_dialect {
    ($backend:expr, |$pool:ident| $body:expr) => {
        match $backend {
            $crate::store::Backend::Sqlite($pool) => $body,
            $crate::store::Backend::Postgres($pool) => $body,
        }
    };
    ($backend:expr, |$pool:ident, $D:ident| $body:expr) => {
        match $backend {
            $crate::store::Backend::Sqlite($pool) => {
                type $D = sqlx::Sqlite;
                $body
            }
            $crate::store::Backend::Postgres($pool) => {
                type $D = sqlx::Postgres;
                $body
            }
        }
    };
}
pub(crate) use with_dialect;

/// Handle on the entry store; cheap to clone (a connection pool).
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) backend: Backend,
    probe: Option<Probe>,
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

/// How long a pooled operation waits for a connection before it fails
/// (and [`Store::diagnose`] asks the server why).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Store::ping`] waits for the server.
const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// PostgreSQL connection options kept for [`Store::ping`]'s direct
/// connection; `Debug` does not show them (they hold the password).
#[derive(Clone)]
pub(crate) struct Probe(PgConnectOptions);

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probe(..)")
    }
}

impl Store {
    /// Connects to `url` and checks, read-only, that the database holds the
    /// schema this build needs ([`StoreError::SchemaMissing`],
    /// [`StoreError::SchemaOutdated`], [`StoreError::SchemaNewer`],
    /// [`StoreError::SchemaMismatch`] otherwise). Runs no DDL: applying
    /// migrations is [`Store::connect_and_migrate`], the owner role's job.
    ///
    /// `sqlite://path/to/file.db?mode=rwc` (creates the file) or
    /// `postgres://user@host:port/db` (also `postgresql://`). A URL that
    /// does not parse is [`StoreError::InvalidUrl`] (checked before any
    /// connection, as [`DatabaseUrl::parse`] does); a database that cannot
    /// be reached is the driver's error for the first connection (e.g.
    /// "Connection refused"), not a pool timeout. No error shows the URL's
    /// password. On PostgreSQL every connection's `search_path` is
    /// [`PG_SCHEMA`](crate::PG_SCHEMA) alone.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_url(&DatabaseUrl::parse(url)?).await
    }

    /// [`Store::connect`] with an already checked URL.
    pub async fn connect_url(url: &DatabaseUrl) -> Result<Store, StoreError> {
        let store = Store::open(url).await?;
        store.check_schema().await?;
        Ok(store)
    }

    /// Connects to `url` and applies the embedded migrations that are not
    /// applied yet ([`Store::migrate`]): for the owner role, e.g.
    /// `ct-ingest migrate`, and for tests.
    pub async fn connect_and_migrate(url: &str) -> Result<Store, StoreError> {
        let store = Store::open(&DatabaseUrl::parse(url)?).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// The pool, without any schema check.
    async fn open(url: &DatabaseUrl) -> Result<Store, StoreError> {
        let (backend, probe) = match url.scheme() {
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
                (Backend::Sqlite(pool), None)
            }
            Scheme::Postgres => {
                let opts = PgConnectOptions::from_str(url.expose())?
                    .options([("search_path", crate::schema::PG_SCHEMA)]);
                // One connection first: the pool retries a refused
                // connection until its acquire timeout and then reports
                // only "pool timed out"; this reports the cause at once.
                opts.connect().await?.close().await?;
                let pool = PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(opts.clone())
                    .await?;
                (Backend::Postgres(pool), Some(Probe(opts)))
            }
        };
        Ok(Store { backend, probe })
    }

    /// Connects to `DATABASE_URL` if it is set (and not empty), else to
    /// `default_url` (normally [`DEFAULT_DATABASE_URL`](crate::DEFAULT_DATABASE_URL)),
    /// as [`Store::connect`] does.
    pub async fn connect_from_env(default_url: &str) -> Result<Store, StoreError> {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => Store::connect(url.trim()).await,
            _ => Store::connect(default_url).await,
        }
    }

    /// Applies any migration not yet applied (idempotent): DDL, for the
    /// owner role. On PostgreSQL it then runs [`Store::prune_expired`] as
    /// the owner, which drops the monthly partitions that hold only expired
    /// entries (the ingest role, which owns nothing, cannot).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        with_dialect!(&self.backend, |pool, D| {
            // On a connection of its own: the migrator takes a session
            // advisory lock and does not release it when it fails (e.g. a
            // role without CREATE); closing the connection does.
            let mut conn = pool.acquire().await?;
            if let Err(e) = D::migrator().run(&mut *conn).await {
                conn.close_on_drop();
                return Err(e.into());
            }
            drop(conn);
            D::after_migrate(pool, unix_now_s()).await?;
        });
        Ok(())
    }

    /// Checks, read-only, that the database holds the schema this build
    /// needs (as [`Store::connect`] does).
    pub async fn check_schema(&self) -> Result<(), StoreError> {
        with_dialect!(&self.backend, |pool, D| {
            let applied = D::applied_migrations(pool).await?;
            crate::schema::check(&applied, D::migrator())
        })
    }

    /// Whether the database answers now: on PostgreSQL a fresh connection
    /// (not the pool, which would retry a refused connection until its
    /// timeout) and `SELECT 1`, within 5 s. The error is the cause:
    /// "Connection refused", an authentication failure, a timeout.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match (&self.backend, &self.probe) {
            (Backend::Postgres(_), Some(Probe(opts))) => {
                let attempt = async {
                    let mut c = opts.connect().await?;
                    sqlx::query("SELECT 1").execute(&mut c).await?;
                    c.close().await?;
                    Ok::<(), StoreError>(())
                };
                match tokio::time::timeout(PING_TIMEOUT, attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(StoreError::Database(sqlx::Error::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {} s", PING_TIMEOUT.as_secs()),
                    )))),
                }
            }
            _ => {
                with_dialect!(&self.backend, |pool| {
                    sqlx::query("SELECT 1").execute(pool).await?;
                });
                Ok(())
            }
        }
    }

    /// `e`, or, if it is only "pool timed out", the cause [`Store::ping`]
    /// finds (e.g. "Connection refused"): for messages that name why the
    /// store is unavailable.
    pub async fn diagnose(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Database(sqlx::Error::PoolTimedOut)) {
            if let Err(cause) = self.ping().await {
                return cause;
            }
        }
        e
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
                    .bind(&meta.log_id.as_bytes()[..])
                    .execute(pool)
                    .await?
                    .rows_affected();
            if updated == 0 {
                sqlx::query(
                    "INSERT INTO logs (log_id, url, mmd_s, kind) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (log_id) DO UPDATE \
                     SET url = excluded.url, mmd_s = excluded.mmd_s, kind = excluded.kind",
                )
                .bind(&meta.log_id.as_bytes()[..])
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
            .bind(&log_id.as_bytes()[..])
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
                .bind(&log_id.as_bytes()[..])
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
                .bind(&log_id.as_bytes()[..])
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
                .bind(&log_id.as_bytes()[..])
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
            log_id: hash32(row.try_get(0)?)?.into(),
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
        log_id: hash32(row.try_get(0)?)?.into(),
        verified_tree_size: from_i64("verified_tree_size", row.try_get(1)?)?,
        verified_position: from_i64("verified_position", row.try_get(2)?)?,
        ingested_until_ms: from_i64("ingested_until_ms", row.try_get(3)?)?,
        mmd_s: from_i64("mmd_s", row.try_get(4)?)?,
    })
}

/// The `kind` column.
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
