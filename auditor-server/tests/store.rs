//! The auditor and its entry store, through the real binary: it runs no
//! DDL and refuses a store without the schema; it builds no epoch from a
//! store without entries, and a failed start-up build is retried until the
//! store has entries; `auditor_store_up` says whether the store answers; a
//! wrong password (PostgreSQL, with `TEST_DATABASE_URL`) stops `serve`
//! with the server's message instead of being retried.
#![cfg(unix)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{auditor, listening_addr, wait_with_timeout, BoxErr, Served, TestResult};
use ct_store::{Commit, Entry, LogKind, LogMeta, Store, StoreError};

/// A migrated store in `dir` with `n` active entries; its URL.
async fn store_with(dir: &std::path::Path, n: u64) -> Result<String, BoxErr> {
    let url = format!("sqlite://{}?mode=rwc", dir.join("ct.db").display());
    let store = Store::connect_and_migrate(&url).await?;
    fill(&store, n).await?;
    store.close().await;
    Ok(url)
}

async fn fill(store: &Store, n: u64) -> TestResult {
    let log_id = [7u8; 32];
    store
        .upsert_log(&LogMeta {
            log_id: log_id.into(),
            url: "http://store.invalid/".into(),
            mmd_s: 86_400,
            kind: LogKind::Rfc6962,
        })
        .await?;
    let now = ct_core::civil::unix_now_s();
    let entries: Vec<Entry> = (0..n)
        .map(|i| Entry {
            leaf_index: i,
            leaf_hash: [i as u8 + 1; 32].into(),
            sct_timestamp_ms: (now as u64 - 3600) * 1000,
            not_after: now + 90 * 86_400,
        })
        .collect();
    store
        .commit(Commit::new(&log_id.into(), n, &[0; 32]).entries(&entries))
        .await?;
    Ok(())
}

fn build_epoch(url: &str, epochs: &std::path::Path) -> Result<(bool, String), BoxErr> {
    let out = auditor()
        .args(["build-epoch", "--database-url", url, "--epoch-dir"])
        .arg(epochs)
        .stdin(Stdio::null())
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A store without the schema is refused with the command that makes it,
/// and nothing is created: the auditor runs no DDL.
#[tokio::test]
async fn missing_schema_is_refused_and_nothing_created() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("ct.db").display());
    let (ok, stderr) = build_epoch(&url, &dir.path().join("epochs"))?;
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("ct-ingest migrate"), "{stderr}");
    assert!(
        matches!(Store::connect(&url).await, Err(StoreError::SchemaMissing)),
        "the auditor created the schema"
    );
    Ok(())
}

/// No epoch from an empty store: `build-epoch` exits 1 saying so; `serve`
/// keeps retrying its start-up build (store up, no epoch) and builds the
/// epoch once entries arrive.
#[tokio::test]
async fn empty_store_is_refused_then_retried() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = store_with(dir.path(), 0).await?;
    let epochs = dir.path().join("epochs");
    let (ok, stderr) = build_epoch(&url, &epochs)?;
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("no active entries"), "{stderr}");
    assert!(!epochs.join("epoch-000000000001").exists());

    let mut cmd = auditor();
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &url,
        "--epoch-dir",
    ])
    .arg(&epochs);
    let mut served = Served::spawn(cmd)?;
    let addr = listening_addr(&served.wait_for("listening", Duration::from_secs(60))?)?;
    served.find("retrying the start-up epoch build", Duration::from_secs(60))?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let metrics = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    assert!(metrics.contains("\nauditor_store_up 1"), "{metrics}");
    assert_eq!(
        http.get(format!("http://{addr}/v1/manifest"))
            .send()
            .await?
            .status(),
        503
    );
    // Entries arrive; a retry builds the epoch.
    let store = Store::connect(&url).await?;
    fill(&store, 30).await?;
    store.close().await;
    served.wait_for("epoch published", Duration::from_secs(120))?;
    // Written, then swapped in: the manifest follows within moments.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let resp = loop {
        let resp = http
            .get(format!("http://{addr}/v1/manifest"))
            .send()
            .await?;
        if resp.status() == 200 || std::time::Instant::now() > deadline {
            break resp;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(resp.status(), 200);
    let m = audit_proto::Manifest::from_json(&resp.bytes().await?)?;
    assert_eq!(m.entries, 30);
    served.kill()?;
    Ok(())
}

/// A wrong password is not retried: `build-epoch` and `serve` exit 1 with
/// the server's message, and without the password.
#[tokio::test]
async fn wrong_password_stops_serve() -> TestResult {
    let Some(roles) = ct_store::testing::Roles::create("auditor_auth").await? else {
        return Ok(());
    };
    let result = async {
        let dir = tempfile::tempdir()?;
        let pw = "Wr0ng-pw";
        let url = roles
            .auditor_url
            .replace(ct_store::testing::Roles::PASSWORD, pw);
        let epochs = dir.path().join("epochs");
        let (ok, stderr) = build_epoch(&url, &epochs)?;
        assert!(!ok, "{stderr}");
        assert!(
            stderr.contains("password authentication failed"),
            "{stderr}"
        );
        assert!(!stderr.contains(pw), "{stderr}");
        let mut child = auditor()
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--database-url",
                &url,
                "--epoch-dir",
            ])
            .arg(&epochs)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let status = wait_with_timeout(&mut child, Duration::from_secs(60))?;
        let mut log = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().ok_or("stderr")?, &mut log)?;
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(log.contains("password authentication failed"), "{log}");
        assert!(!log.contains("retrying"), "retried:\n{log}");
        assert!(!log.contains(pw), "{log}");
        Ok::<(), BoxErr>(())
    }
    .await;
    roles.cleanup().await?;
    result
}
