//! The whole pipeline on PostgreSQL with exactly the three roles of
//! docs/operator.md ("PostgreSQL on bare metal"), made by running that
//! document's SQL: the owner migrates (what `ct-ingest migrate` runs), the
//! ingest role ingests a local test log, the auditor role builds epochs
//! with `auditor-server build-epoch` and serves them with `serve`, and
//! takes a misbehaviour report from a client that audited an SCT the log
//! never logged. The auditor role owns a schema of its own, first on its
//! search path: it reads the store in `public` all the same, and nothing is
//! created in its schema. Runs with `TEST_DATABASE_URL` (a superuser URL of a
//! cluster started by `ct-store/tests/pg.sh`); `TEST_REQUIRE_POSTGRES=1`
//! makes its absence a failure.
#![cfg(unix)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use browser_client::audit::{audit_now, Outcome};
use browser_client::net::Auditor;
use browser_client::policy::PendingQueue;
use browser_client::sct::{delivered_sct, embedded_scts, parse_log_list};
use common::{auditor, listening_addr, BoxErr, Served, TestResult};
use ct_store::testing::Roles;
use ct_store::Store;
use ct_testlog::{CorpusSpec, TestLog, TestLogConfig};

fn build_epoch(url: &str, config: &std::path::Path) -> Result<serde_json::Value, BoxErr> {
    let out = auditor()
        .args(["build-epoch", "--config"])
        .arg(config)
        .env("AUDITOR_DATABASE_URL", url)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("build-epoch failed:\n{stderr}").into());
    }
    assert!(!stderr.contains(Roles::PASSWORD), "{stderr}");
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_roles_migrate_ingest_build_serve_report() -> TestResult {
    // The owner's migration (Store::connect_and_migrate, as `ct-ingest
    // migrate` runs it) and the grants, from the document.
    let Some(roles) = Roles::create("pipeline").await? else {
        return Ok(());
    };
    let result = pipeline(&roles).await;
    roles.cleanup().await?;
    result
}

async fn pipeline(roles: &Roles) -> TestResult {
    let dir = tempfile::tempdir()?;
    let log = TestLog::start(TestLogConfig {
        mmd_seconds: 2,
        ..TestLogConfig::default()
    })
    .await?;
    let corpus = ct_testlog::issue_corpus(
        &log,
        &CorpusSpec {
            logged: 30,
            omitted: 4,
            forged: 0,
            precert_fraction: 0.5,
        },
    )
    .await?;
    log.publish_covering_head().await?;

    // Ingest, as the ingest role.
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let toml = format!(
        "log_list = {:?}\ndatabase_url = {:?}\n[[log]]\napi = \"rfc6962\"\n",
        list.display().to_string(),
        roles.ingest_url
    );
    let config = ct_ingest::config::Config::from_toml(&toml)?;
    let summary =
        ct_ingest::ingest::run_once(&config, &ct_ingest::ingest::IngestOptions::default()).await?;
    for (_, r) in &summary.logs {
        r.as_ref().map_err(|e| e.to_string())?;
    }

    // The auditor role owns a schema of its own name, first on
    // PostgreSQL's default search path, and may create tables in it.
    let role = format!("ct_auditor_{}", roles.suffix);
    roles
        .admin_sql(&format!(
            "CREATE SCHEMA {role} AUTHORIZATION {role}; GRANT CREATE ON DATABASE ct_{} TO {role}",
            roles.suffix
        ))
        .await?;

    // Build and serve, as the auditor role.
    let epochs = dir.path().join("epochs");
    let auditor_toml = dir.path().join("auditor.toml");
    std::fs::write(
        &auditor_toml,
        format!(
            "epoch_dir = {:?}\n[schedule]\nreload_seconds = 1\n[reports]\nper_ip_burst = 100\n",
            epochs.display().to_string()
        ),
    )?;
    let report = build_epoch(&roles.auditor_url, &auditor_toml)?;
    assert_eq!(report["entries"], 30, "{report}");
    let mut cmd = auditor();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&auditor_toml)
        .env("AUDITOR_DATABASE_URL", &roles.auditor_url);
    let mut served = Served::spawn(cmd)?;
    let addr = listening_addr(&served.wait_for("listening", Duration::from_secs(120))?)?;
    let base = format!("http://{addr}");

    // A client audits the SCTs the log never logged: not found…
    let list = parse_log_list(log.log_list_json().as_bytes())?;
    let client = Auditor::new(&base)?;
    let mut queue = PendingQueue::open(&dir.path().join("pending.json"))?;
    let now = ct_core::civil::unix_now_ms();
    for o in &corpus.omitted {
        let chain = vec![o.cert_der.clone(), o.issuer_der.clone()];
        let checked = if o.embedded {
            embedded_scts(&o.cert_der, &o.issuer_der, &list)?
        } else {
            vec![delivered_sct(&o.cert_der, &o.sct.encode()?, &list)?]
        };
        audit_now(&client, &mut queue, &chain, &checked, now).await?;
    }
    assert!(!queue.items.is_empty(), "no omitted SCT was NOT FOUND");
    // …and again in the next epoch (built by the auditor role, picked up by
    // the server's reload): a misbehaviour report, taken and stored.
    build_epoch(&roles.auditor_url, &auditor_toml)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.manifest().await?.0.epoch < 2 {
        if Instant::now() > deadline {
            return Err("the server did not load epoch 2".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (out, _) = audit_now(&client, &mut queue, &[], &[], now).await?;
    let report = out
        .into_iter()
        .find_map(|o| match o {
            Outcome::Misbehaviour(r) => Some(*r),
            _ => None,
        })
        .ok_or("no misbehaviour report")?;
    let receipt = client.send_report(&report).await?;
    assert_eq!(receipt.status, "received");

    // The owner sees it stored; the ingest role confirms it with the log.
    let owner = Store::connect(&roles.owner_url).await?;
    let stored = owner.reports(None, 10).await?;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(&stored[0].report.leaf_hash, report.leaf_hash.as_bytes());
    let summary =
        ct_ingest::ingest::run_once(&config, &ct_ingest::ingest::IngestOptions::default()).await?;
    assert_eq!(summary.reports.len(), 1, "{:?}", summary.reports);
    owner.close().await;

    // Nothing was created in the auditor's own schema.
    roles
        .admin_sql(&format!(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n \
             ON n.oid = c.relnamespace WHERE n.nspname = '{role}') THEN \
             RAISE EXCEPTION 'objects created in schema {role}'; END IF; END $$"
        ))
        .await?;

    served.kill()?;
    let log_text = served.drain();
    assert!(!log_text.contains(Roles::PASSWORD), "{log_text}");
    log.shutdown().await;
    Ok(())
}
