//! The three PostgreSQL roles of docs/operator.md ("PostgreSQL on bare
//! metal"), made with that document's own SQL: the owner migrates, the
//! ingest role writes data without owning anything, the auditor reads and
//! inserts reports, and a reader refuses a schema that is missing, behind
//! or ahead. Runs only with `TEST_DATABASE_URL` (a superuser URL of a
//! cluster started by `tests/pg.sh`); `TEST_REQUIRE_POSTGRES=1` makes its
//! absence a failure.

use ct_store::testing::{BoxErr, Roles};
use ct_store::{Commit, Entry, LogKind, LogMeta, NewReport, Store, StoreError};
use futures_util::TryStreamExt;

type TestResult = Result<(), BoxErr>;

/// 2026-11-22T01:02:53Z.
const NOW: i64 = 1_795_309_373;

fn entries(n: u64, not_after: i64) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry {
            leaf_index: i,
            leaf_hash: [i as u8 + 1; 32].into(),
            sct_timestamp_ms: 1_700_000_000_000 + i,
            not_after,
        })
        .collect()
}

fn meta() -> LogMeta {
    LogMeta {
        log_id: [9; 32].into(),
        url: "https://log.example/".into(),
        mmd_s: 86_400,
        kind: LogKind::Rfc6962,
    }
}

fn report() -> NewReport {
    NewReport {
        log_id: [9; 32].into(),
        leaf_hash: [0xee; 32].into(),
        sct_timestamp_ms: 1_700_000_000_000,
        mmd_s: 86_400,
        kind: "x509".into(),
        sct: vec![1, 2, 3],
        chain: vec![vec![4, 5]],
        epochs: vec![1],
        not_after: NOW + 86_400,
        received_at_ms: 1_700_000_000_000,
    }
}

fn denied(e: &StoreError) -> bool {
    e.to_string().contains("permission denied")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_roles_least_privilege() -> TestResult {
    let Some(roles) = Roles::create("roles").await? else {
        return Ok(());
    };
    let result = async {
        // Ingest: data rights only. Its first commit needs a partition of
        // a month the migration did not create ahead (2035): created with
        // the owner's rights by ct_ensure_entries_partitions.
        let ingest = Store::connect(&roles.ingest_url).await?;
        ingest.upsert_log(&meta()).await?;
        let far = 2_066_000_000; // 2035-06
        let batch = [entries(3, NOW + 86_400), entries(5, far)[3..].to_vec()].concat();
        ingest
            .commit(
                Commit::new(&[9; 32].into(), 5, &[1; 32])
                    .entries(&batch)
                    .now_s(NOW),
            )
            .await?;
        ingest.set_log_key(&[9; 32].into(), &[0x30, 0x01]).await?;
        // Prune as a non-owner: no DDL, no error.
        ingest.prune_expired(NOW).await?;
        assert!(denied(
            &ingest.migrate().await.expect_err("ingest runs no DDL")
        ));

        // Auditor: reads, inserts reports, writes nothing else.
        let auditor = Store::connect(&roles.auditor_url).await?;
        assert_eq!(auditor.count_active(NOW).await?, 5);
        let hashes: Vec<[u8; 32]> = auditor.active_leaf_hashes(NOW).try_collect().await?;
        assert_eq!(hashes.len(), 5);
        assert_eq!(auditor.coverage().await?.len(), 1);
        assert!(auditor.log_key(&[9; 32].into()).await?.is_some());
        assert!(auditor.insert_report(&report()).await?);
        assert_eq!(auditor.reports(None, 10).await?.len(), 1);
        let e = auditor
            .commit(Commit::new(&[9; 32].into(), 6, &[2; 32]).now_s(NOW))
            .await
            .expect_err("the auditor cannot write the store");
        assert!(denied(&e), "{e}");
        assert!(denied(
            &auditor
                .upsert_log(&meta())
                .await
                .expect_err("no INSERT on logs")
        ));
        assert!(denied(&auditor.migrate().await.expect_err("no DDL")));
        // The ingest role records what the log said about the report.
        let id = ingest.reports(None, 1).await?[0].id;
        ingest
            .record_report_check(id, ct_store::ReportStatus::Refuted, "held", 1)
            .await?;
        auditor.close().await;
        ingest.close().await;
        Ok::<(), BoxErr>(())
    }
    .await;
    roles.cleanup().await?;
    result
}

/// A role owning a schema of its own name (first on PostgreSQL's default
/// search path) reads the store in `public`, and nothing is created in its
/// schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_schema_does_not_shadow_the_store() -> TestResult {
    let Some(roles) = Roles::create("shadow").await? else {
        return Ok(());
    };
    let result = async {
        let ingest = Store::connect(&roles.ingest_url).await?;
        ingest.upsert_log(&meta()).await?;
        ingest
            .commit(
                Commit::new(&[9; 32].into(), 4, &[1; 32])
                    .entries(&entries(4, NOW + 86_400))
                    .now_s(NOW),
            )
            .await?;
        ingest.close().await;
        let role = format!("ct_auditor_{}", roles.suffix);
        roles
            .admin_sql(&format!(
                "CREATE SCHEMA {role} AUTHORIZATION {role}; GRANT CREATE ON DATABASE ct_{} TO {role}",
                roles.suffix
            ))
            .await?;
        let auditor = Store::connect(&roles.auditor_url).await?;
        assert_eq!(auditor.count_active(NOW).await?, 4);
        assert!(auditor.insert_report(&report()).await?);
        auditor.close().await;
        let owner = sqlx::PgPool::connect(&roles.owner_url).await?;
        let in_own: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1",
        )
        .bind(&role)
        .fetch_one(&owner)
        .await?;
        owner.close().await;
        assert_eq!(in_own, 0, "objects created in the auditor's own schema");
        Ok::<(), BoxErr>(())
    }
    .await;
    roles.cleanup().await?;
    result
}

/// Readers refuse a schema that is missing, behind or ahead, with the
/// command that fixes it; they create nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_check_the_schema_version() -> TestResult {
    let Some(roles) = Roles::create("version").await? else {
        return Ok(());
    };
    let result = async {
        roles
            .admin_sql("UPDATE _sqlx_migrations SET version = 99 WHERE version = 5")
            .await?;
        let e = Store::connect(&roles.auditor_url).await.expect_err("ahead");
        assert!(
            matches!(e, StoreError::SchemaNewer { found: 99, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("upgrade this program"), "{e}");
        roles
            .admin_sql("DELETE FROM _sqlx_migrations WHERE version = 99")
            .await?;
        let e = Store::connect(&roles.ingest_url).await.expect_err("behind");
        assert!(
            matches!(
                e,
                StoreError::SchemaOutdated {
                    found: 4,
                    needed: 5
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("ct-ingest migrate"), "{e}");
        // The owner brings it up to date; then readers connect.
        Store::connect_and_migrate(&roles.owner_url)
            .await?
            .close()
            .await;
        Store::connect(&roles.auditor_url).await?.close().await;
        roles.admin_sql("DROP TABLE _sqlx_migrations").await?;
        let e = Store::connect(&roles.auditor_url)
            .await
            .expect_err("missing");
        assert!(matches!(e, StoreError::SchemaMissing), "{e}");
        assert!(e.to_string().contains("ct-ingest migrate"), "{e}");
        Ok::<(), BoxErr>(())
    }
    .await;
    roles.cleanup().await?;
    result
}

/// A wrong password is an authentication failure, not a transient error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_not_transient() -> TestResult {
    let Some(roles) = Roles::create("auth").await? else {
        return Ok(());
    };
    let url = roles.auditor_url.replace(Roles::PASSWORD, "wrong-pw");
    let e = Store::connect(&url).await.expect_err("wrong password");
    roles.cleanup().await?;
    assert!(e.is_auth_failure(), "{e:?}");
    assert!(!e.is_transient(), "{e:?}");
    assert!(
        e.to_string().contains("password authentication failed"),
        "{e}"
    );
    assert!(!e.to_string().contains("wrong-pw"), "{e}");
    Ok(())
}
