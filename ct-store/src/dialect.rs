//! The one place where SQLite and PostgreSQL differ.
//!
//! Every [`Store`](crate::Store) operation is written once, with `$1, $2, …`
//! placeholders (both drivers accept them), and compiled for each backend
//! by `with_dialect!` in `lib.rs`. What cannot be the same SQL is a
//! [`Dialect`] item, implemented for [`sqlx::Sqlite`] and
//! [`sqlx::Postgres`]:
//!
//! | item | SQLite | PostgreSQL |
//! |---|---|---|
//! | migrations | `migrations/sqlite` | `migrations/postgres` |
//! | commit transaction | `BEGIN IMMEDIATE` (write lock up front) | `BEGIN` + `SELECT … FOR UPDATE` on the log's row |
//! | active-set filter | `not_after >= $2` | `expiry_month >= $1 AND not_after >= $2` (partition pruning) |
//! | before a commit | nothing | create the monthly partitions of the batch |
//! | bulk insert | multi-row `VALUES`, 512 rows per statement | `UNNEST` of column arrays, 16,384 rows per statement |
//! | expiry | one indexed `DELETE` | detach and drop whole monthly partitions, then `DELETE` in the current month |

use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::SqliteConnection;
use sqlx::{PgPool, Pool, Postgres, Row, Sqlite, SqlitePool};

use crate::commit::Columns;
use crate::convert::from_i64;
use crate::error::StoreError;
use crate::model::Entry;
use crate::month::{month_start, partition_month, pg_month, PG_FAR_MONTH};
use crate::schema::{Applied, PG_SCHEMA};

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// Rows per multi-row `INSERT` on SQLite (5 bound parameters per row; SQLite
/// allows 32766 parameters per statement). Full chunks reuse one cached
/// prepared statement.
const SQLITE_ROWS_PER_INSERT: usize = 512;
/// Rows per `INSERT … SELECT … FROM UNNEST(…)` on PostgreSQL (bounds the
/// size of one bind message to a few MB).
const PG_ROWS_PER_INSERT: usize = 16_384;

/// What differs between the backends (see the module documentation).
pub(crate) trait Dialect: sqlx::Database {
    /// The backend's name, as in [`Store::backend_name`](crate::Store::backend_name).
    const NAME: &'static str;
    /// Opens a commit's transaction.
    const BEGIN: &'static str;
    /// Appended to the `SELECT` of the log's row in a commit, to serialise
    /// concurrent commits of one log (SQLite: `BEGIN` already did).
    const LOCK_LOG_ROW: &'static str;
    /// Counts S: `$1` is [`pg_month`] of the clock, `$2` the clock.
    const COUNT_ACTIVE: &'static str;
    /// The leaf hashes of S, with the parameters of
    /// [`Dialect::COUNT_ACTIVE`].
    const ACTIVE_LEAF_HASHES: &'static str;

    /// The embedded migrations.
    fn migrator() -> &'static Migrator;

    /// The rows of `_sqlx_migrations` (none if the table does not exist),
    /// read-only.
    async fn applied_migrations(pool: &Pool<Self>) -> Result<Vec<Applied>, StoreError>;

    /// The owner's work after the migrations ([`Store::migrate`](crate::Store::migrate)).
    async fn after_migrate(pool: &Pool<Self>, now_s: i64) -> Result<(), StoreError>;

    /// Runs before a commit's transaction, outside it (so that it holds no
    /// DDL lock).
    async fn prepare_commit(
        pool: &Pool<Self>,
        entries: &[Entry],
        now_s: i64,
    ) -> Result<(), StoreError>;

    /// Inserts the rows of `log_no` in the commit's transaction (`ON
    /// CONFLICT DO NOTHING`); returns how many were inserted.
    async fn insert_entries(
        conn: &mut Self::Connection,
        log_no: i64,
        cols: &Columns<'_>,
    ) -> Result<u64, StoreError>;

    /// Removes the entries with `not_after < now_s`; returns how many.
    async fn prune(pool: &Pool<Self>, now_s: i64) -> Result<u64, StoreError>;
}

// ---------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------

impl Dialect for Sqlite {
    const NAME: &'static str = "sqlite";
    // IMMEDIATE: take the write lock up front (a deferred transaction that
    // reads first can fail to upgrade with SQLITE_BUSY, bypassing the busy
    // timeout); this also serialises concurrent commits of one log.
    const BEGIN: &'static str = "BEGIN IMMEDIATE";
    const LOCK_LOG_ROW: &'static str = "";
    const COUNT_ACTIVE: &'static str = "SELECT count(*) FROM entries WHERE not_after >= $2";
    const ACTIVE_LEAF_HASHES: &'static str = "SELECT leaf_hash FROM entries WHERE not_after >= $2";

    fn migrator() -> &'static Migrator {
        &SQLITE_MIGRATOR
    }

    async fn applied_migrations(pool: &SqlitePool) -> Result<Vec<Applied>, StoreError> {
        let exists: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM main.sqlite_master \
             WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_one(pool)
        .await?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_as(
            "SELECT version, success, checksum FROM main._sqlx_migrations ORDER BY version",
        )
        .fetch_all(pool)
        .await?)
    }

    async fn after_migrate(_: &SqlitePool, _: i64) -> Result<(), StoreError> {
        Ok(())
    }

    async fn prepare_commit(_: &SqlitePool, _: &[Entry], _: i64) -> Result<(), StoreError> {
        Ok(())
    }

    async fn insert_entries(
        conn: &mut SqliteConnection,
        log_no: i64,
        cols: &Columns<'_>,
    ) -> Result<u64, StoreError> {
        let mut inserted = 0u64;
        let mut start = 0;
        while start < cols.len() {
            let end = (start + SQLITE_ROWS_PER_INSERT).min(cols.len());
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
            inserted += q.execute(&mut *conn).await?.rows_affected();
            start = end;
        }
        Ok(inserted)
    }

    async fn prune(pool: &SqlitePool, now_s: i64) -> Result<u64, StoreError> {
        let r = sqlx::query("DELETE FROM entries WHERE not_after < $1")
            .bind(now_s)
            .execute(pool)
            .await?;
        Ok(r.rows_affected())
    }
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

// ---------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------

impl Dialect for Postgres {
    const NAME: &'static str = "postgres";
    const BEGIN: &'static str = "BEGIN";
    // The row lock serialises concurrent commits of one log: the second
    // sees the first's position and treats the overlap as a replay.
    const LOCK_LOG_ROW: &'static str = " FOR UPDATE";
    // The expiry_month bound lets the planner skip expired partitions.
    const COUNT_ACTIVE: &'static str =
        "SELECT count(*) FROM entries WHERE expiry_month >= $1 AND not_after >= $2";
    const ACTIVE_LEAF_HASHES: &'static str =
        "SELECT leaf_hash FROM entries WHERE expiry_month >= $1 AND not_after >= $2";

    fn migrator() -> &'static Migrator {
        &POSTGRES_MIGRATOR
    }

    /// Reads `PG_SCHEMA._sqlx_migrations` by its qualified name.
    async fn applied_migrations(pool: &PgPool) -> Result<Vec<Applied>, StoreError> {
        let table = format!("{PG_SCHEMA}._sqlx_migrations");
        let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(&table)
            .fetch_one(pool)
            .await?;
        if !exists {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_as(&format!(
            "SELECT version, success, checksum FROM {table} ORDER BY version"
        ))
        .fetch_all(pool)
        .await?)
    }

    /// Drops the expired monthly partitions (as the owner).
    async fn after_migrate(pool: &PgPool, now_s: i64) -> Result<(), StoreError> {
        Self::prune(pool, now_s).await?;
        Ok(())
    }

    /// Creates the monthly partitions that the active entries need.
    /// `CREATE TABLE` + `ATTACH PARTITION` (in the migration's function)
    /// takes only `SHARE UPDATE EXCLUSIVE` on `entries`.
    async fn prepare_commit(
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

    async fn insert_entries(
        conn: &mut PgConnection,
        log_no: i64,
        cols: &Columns<'_>,
    ) -> Result<u64, StoreError> {
        let log_no = i16::try_from(log_no)
            .map_err(|_| StoreError::Corrupt(format!("log_no {log_no} is not a smallint")))?;
        let mut inserted = 0u64;
        let mut start = 0;
        while start < cols.len() {
            let end = (start + PG_ROWS_PER_INSERT).min(cols.len());
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
            .execute(&mut *conn)
            .await?
            .rows_affected();
            start = end;
        }
        Ok(inserted)
    }

    /// Monthly partitions lying entirely before `now_s` are detached
    /// (`DETACH PARTITION … CONCURRENTLY`, which does not block readers or
    /// the ingester) and dropped; the remaining expired rows (in the current
    /// month) are deleted.
    async fn prune(pool: &PgPool, now_s: i64) -> Result<u64, StoreError> {
        // Detaching and dropping needs ownership of `entries`. A role
        // without it (the ingest role) deletes the expired rows of the
        // current month only: older months are already outside every read
        // (their expiry_month is below the active-set bound), and the owner's
        // `ct-ingest migrate` drops their partitions.
        let owner: bool = sqlx::query_scalar(
            "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = 'entries'::regclass",
        )
        .fetch_one(pool)
        .await?;
        if !owner {
            let r = sqlx::query("DELETE FROM entries WHERE expiry_month = $1 AND not_after < $2")
                .bind(pg_month(now_s))
                .bind(now_s)
                .execute(pool)
                .await?;
            return Ok(r.rows_affected());
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_insert_statement() {
        assert_eq!(
            sqlite_insert_sql(2),
            "INSERT INTO entries (log_no, leaf_index, leaf_hash, sct_timestamp_ms, not_after) \
             VALUES (?, ?, ?, ?, ?),(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        );
    }
}
