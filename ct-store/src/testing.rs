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
        Ok(crate::store::Store::connect_and_migrate(&self.url).await?)
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

/// The three database roles of docs/operator.md ("Database roles") on a
/// database of their own, made by running that document's SQL with the
/// names made unique (`ct_owner` → `ct_owner_<tag>_<pid>`, `ct` →
/// `ct_<tag>_<pid>`), and the store migrated by the owner: what a test of
/// least privilege runs against. PostgreSQL only.
pub struct Roles {
    /// The owner (migrations).
    pub owner_url: String,
    /// The ingest role (data rights only).
    pub ingest_url: String,
    /// The auditor role (SELECT, INSERT on reports).
    pub auditor_url: String,
    /// The unique suffix of every name.
    pub suffix: String,
    admin_url: String,
}

/// The SQL of the fenced block of docs/operator.md whose first line is
/// `first_line`.
pub fn operator_doc_sql(first_line: &str) -> Result<String, BoxErr> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operator.md"),
    )?;
    let mut blocks = doc.split("```sql\n").skip(1);
    blocks
        .find_map(|b| {
            let body = b.split("```").next()?;
            body.starts_with(first_line).then(|| body.to_owned())
        })
        .ok_or_else(|| {
            format!("no ```sql block starting {first_line:?} in docs/operator.md").into()
        })
}

/// The statements of `sql`, one per `;`-terminated line group, comments
/// and `\c` lines dropped.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in sql.lines() {
        let line = line.split("--").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('\\') {
            continue;
        }
        cur.push_str(line);
        cur.push(' ');
        if line.ends_with(';') {
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

impl Roles {
    /// Passwords of the roles (the tests' URLs carry them).
    pub const PASSWORD: &'static str = "Rol3-pw";

    /// The roles and their database on the cluster of `TEST_DATABASE_URL`
    /// (a superuser URL), `None` when it is unset (an error with
    /// `TEST_REQUIRE_POSTGRES`).
    pub async fn create(tag: &str) -> Result<Option<Roles>, BoxErr> {
        let admin_url = match std::env::var("TEST_DATABASE_URL") {
            Ok(u) if !u.is_empty() => u,
            _ => {
                if std::env::var_os("TEST_REQUIRE_POSTGRES").is_some() {
                    return Err("TEST_REQUIRE_POSTGRES is set but TEST_DATABASE_URL is not".into());
                }
                eprintln!("{tag}: TEST_DATABASE_URL unset, PostgreSQL skipped");
                return Ok(None);
            }
        };
        let suffix = format!("{tag}_{}", std::process::id());
        let roles = Roles {
            owner_url: Self::url(&admin_url, "ct_owner", &suffix),
            ingest_url: Self::url(&admin_url, "ct_ingest", &suffix),
            auditor_url: Self::url(&admin_url, "ct_auditor", &suffix),
            suffix,
            admin_url,
        };
        roles.drop_all().await?;
        let admin = sqlx::PgPool::connect(&roles.admin_url).await?;
        for s in statements(&roles.rename(&operator_doc_sql("-- as a superuser")?)) {
            sqlx::raw_sql(&s).execute(&admin).await?;
        }
        admin.close().await;
        crate::store::Store::connect_and_migrate(&roles.owner_url)
            .await?
            .close()
            .await;
        let owner = sqlx::PgPool::connect(&roles.owner_url).await?;
        for s in statements(&roles.rename(&operator_doc_sql("-- as ct_owner")?)) {
            sqlx::raw_sql(&s).execute(&owner).await?;
        }
        owner.close().await;
        Ok(Some(roles))
    }

    fn url(admin_url: &str, role: &str, suffix: &str) -> String {
        let base = with_database(admin_url, &format!("ct_{suffix}"));
        let rest = base.split_once('@').map_or(&base[..], |(_, r)| r);
        let scheme = base.split("://").next().unwrap_or("postgres");
        format!("{scheme}://{role}_{suffix}:{}@{rest}", Self::PASSWORD)
    }

    /// The document's SQL with this test's names and password.
    fn rename(&self, sql: &str) -> String {
        let s = &self.suffix;
        let mut out = sql.to_owned();
        for role in ["ct_owner", "ct_ingest", "ct_auditor"] {
            out = out.replace(role, &format!("{role}_{s}"));
        }
        // The database `ct` (as a whole word) and the example passwords.
        let out = out
            .replace("DATABASE ct ", &format!("DATABASE ct_{s} "))
            .replace("DATABASE ct;", &format!("DATABASE ct_{s};"));
        regex_free_passwords(&out, Self::PASSWORD)
    }

    /// A role of this test's own (`LOGIN`, [`Roles::PASSWORD`]) and its URL.
    pub async fn extra_role(&self, name: &str) -> Result<String, BoxErr> {
        let admin = sqlx::PgPool::connect(&self.admin_url).await?;
        let role = format!("{name}_{}", self.suffix);
        sqlx::raw_sql(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN PASSWORD '{}'",
            Self::PASSWORD
        ))
        .execute(&admin)
        .await?;
        admin.close().await;
        Ok(self
            .owner_url
            .replacen(&format!("ct_owner_{}", self.suffix), &role, 1))
    }

    /// Runs `sql` as the superuser in the roles' database.
    pub async fn admin_sql(&self, sql: &str) -> Result<(), BoxErr> {
        let url = with_database(&self.admin_url, &format!("ct_{}", self.suffix));
        let pool = sqlx::PgPool::connect(&url).await?;
        sqlx::raw_sql(sql).execute(&pool).await?;
        pool.close().await;
        Ok(())
    }

    async fn drop_all(&self) -> Result<(), BoxErr> {
        let admin = sqlx::PgPool::connect(&self.admin_url).await?;
        let s = &self.suffix;
        sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS ct_{s} WITH (FORCE)"))
            .execute(&admin)
            .await?;
        let roles: Vec<String> =
            sqlx::query_scalar("SELECT rolname::text FROM pg_roles WHERE rolname LIKE $1")
                .bind(format!("%\\_{s}"))
                .fetch_all(&admin)
                .await?;
        for r in roles {
            sqlx::raw_sql(&format!("DROP OWNED BY {r}; DROP ROLE {r}"))
                .execute(&admin)
                .await
                .ok();
            sqlx::raw_sql(&format!("DROP ROLE IF EXISTS {r}"))
                .execute(&admin)
                .await?;
        }
        admin.close().await;
        Ok(())
    }

    /// Drops the database and the roles.
    pub async fn cleanup(self) -> Result<(), BoxErr> {
        self.drop_all().await
    }
}

/// Every `PASSWORD '…'` literal replaced by `PASSWORD 'pw'`.
fn regex_free_passwords(sql: &str, pw: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(i) = rest.find("PASSWORD '") {
        out.push_str(&rest[..i + "PASSWORD '".len()]);
        rest = &rest[i + "PASSWORD '".len()..];
        let end = rest.find('\'').unwrap_or(rest.len());
        out.push_str(pw);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
