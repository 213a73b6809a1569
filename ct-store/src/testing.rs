//! Test support (feature `testing`): one fresh database per test case on
//! SQLite (a temp file) and, when `TEST_DATABASE_URL` is set, on
//! PostgreSQL, for this crate's tests and for the crates that test
//! against a store (ct-ingest). `tests/pg.sh` starts a throwaway
//! PostgreSQL server. Its functions fail with a boxed error, as the tests
//! that call them do; nothing here is part of a production build.

/// Boxed error of the tests.
pub type BoxErr = Box<dyn std::error::Error + Send + Sync>;

enum Backend {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, db_name: String },
}

/// One fresh database of one backend.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    backend: Backend,
}

impl TestDb {
    /// A store on this database (migrations applied).
    pub async fn store(&self) -> Result<crate::store::Store, BoxErr> {
        Ok(crate::store::Store::connect(&self.url).await?)
    }

    /// SQLite always; PostgreSQL when `TEST_DATABASE_URL` is set (a fresh
    /// database named `ct_<prefix>_<case>_<pid>`). `TEST_REQUIRE_POSTGRES`
    /// turns a missing `TEST_DATABASE_URL` into an error.
    pub async fn all(prefix: &str, case: &str) -> Result<Vec<TestDb>, BoxErr> {
        let dir = tempfile::tempdir()?;
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join(format!("{prefix}.db")).display()
        );
        let mut dbs = vec![TestDb {
            url,
            backend: Backend::Sqlite(dir),
        }];
        match std::env::var("TEST_DATABASE_URL") {
            Ok(admin_url) if !admin_url.is_empty() => {
                let db_name = format!("ct_{}_{}_{}", prefix, case, std::process::id());
                let admin = sqlx::PgPool::connect(&admin_url).await?;
                sqlx::raw_sql(&format!(
                    "DROP DATABASE IF EXISTS \"{db_name}\" WITH (FORCE)"
                ))
                .execute(&admin)
                .await?;
                sqlx::raw_sql(&format!("CREATE DATABASE \"{db_name}\""))
                    .execute(&admin)
                    .await?;
                admin.close().await;
                dbs.push(TestDb {
                    url: with_database(&admin_url, &db_name),
                    backend: Backend::Postgres { admin_url, db_name },
                });
            }
            _ => {
                if std::env::var_os("TEST_REQUIRE_POSTGRES").is_some() {
                    return Err("TEST_REQUIRE_POSTGRES is set but TEST_DATABASE_URL is not".into());
                }
                eprintln!("{case}: TEST_DATABASE_URL unset, PostgreSQL skipped");
            }
        }
        Ok(dbs)
    }

    /// `sqlite` or `postgres`.
    pub fn name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// Whether this is the PostgreSQL backend.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres { .. })
    }

    /// Runs a query returning one integer, bypassing the Store.
    pub async fn scalar(&self, sql: &str) -> Result<i64, BoxErr> {
        Ok(match self.backend {
            Backend::Sqlite(_) => {
                let pool = sqlx::SqlitePool::connect(&self.url).await?;
                let v = sqlx::query_scalar(sql).fetch_one(&pool).await?;
                pool.close().await;
                v
            }
            Backend::Postgres { .. } => {
                let pool = sqlx::PgPool::connect(&self.url).await?;
                let v = sqlx::query_scalar(sql).fetch_one(&pool).await?;
                pool.close().await;
                v
            }
        })
    }

    /// Names of the `entries` partitions (PostgreSQL only), sorted.
    pub async fn partitions(&self) -> Result<Vec<String>, BoxErr> {
        let pool = sqlx::PgPool::connect(&self.url).await?;
        let mut names: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'entries'::regclass",
        )
        .fetch_all(&pool)
        .await?;
        pool.close().await;
        names.sort();
        Ok(names)
    }

    /// Drops the PostgreSQL database (SQLite's temp dir goes with `self`).
    pub async fn cleanup(self) -> Result<(), BoxErr> {
        if let Backend::Postgres { admin_url, db_name } = &self.backend {
            let admin = sqlx::PgPool::connect(admin_url).await?;
            sqlx::raw_sql(&format!(
                "DROP DATABASE IF EXISTS \"{db_name}\" WITH (FORCE)"
            ))
            .execute(&admin)
            .await?;
            admin.close().await;
        }
        Ok(())
    }
}

/// `url` with its database name replaced.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let prefix = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{prefix}/{db}?{q}"),
        None => format!("{prefix}/{db}"),
    }
}
