//! Tests of the real `auditor-server` binary: `build-epoch` on a SQLite store
//! filled by ct-ingest from the local test log, `serve` on 127.0.0.1 port 0
//! (address read from its log line), HTTP checks, graceful shutdown on
//! SIGTERM, a bad configuration refused with a clear message, and a
//! sharded epoch planned with `epoch plan` and built shard by shard.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use audit_proto::Manifest;
use ct_ingest::ingest::{run_once, IngestOptions};
use ct_testlog::{TestLog, TestLogConfig};

use common::{auditor, listening_addr, wait_with_timeout, BoxErr, Served};

/// Entries in the test store.
const ENTRIES: usize = 40;

/// Fills a fresh SQLite store in `dir` with `n` entries of a local test log
/// (through ct-ingest, as in production) and returns its URL.
async fn filled_store(dir: &Path, n: usize) -> Result<String, BoxErr> {
    let log = TestLog::start(TestLogConfig {
        mmd_seconds: 3600,
        ..TestLogConfig::default()
    })
    .await?;
    log.add_entries(n, 0.5).await?;
    let list = dir.join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let db_url = format!("sqlite://{}?mode=rwc", dir.join("ct.db").display());
    let toml = format!(
        "log_list = {:?}\ndatabase_url = {:?}\n",
        list.display().to_string(),
        db_url
    );
    let config = ct_ingest::config::Config::from_toml(&toml)?;
    let summary = run_once(&config, &IngestOptions::default()).await?;
    for (_, r) in &summary.logs {
        r.as_ref().map_err(|e| e.to_string())?;
    }
    log.shutdown().await;
    Ok(db_url)
}

#[tokio::test]
async fn build_epoch_then_serve_then_sigterm() -> Result<(), BoxErr> {
    let dir = tempfile::tempdir()?;
    let db_url = filled_store(dir.path(), ENTRIES).await?;
    let epochs = dir.path().join("epochs");

    // build-epoch: JSON build report on stdout, epoch 1 on disk.
    let out = auditor()
        .args(["build-epoch", "--database-url", &db_url, "--epoch-dir"])
        .arg(&epochs)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "build-epoch failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("stdout is not JSON ({e}): {:?}", out.stdout))?;
    assert_eq!(report["epoch"], 1, "{report}");
    assert_eq!(report["entries"], ENTRIES as u64, "{report}");
    assert_eq!(report["filters"], 768, "{report}");
    assert!(report["dbs"].as_u64().is_some_and(|d| d >= 1), "{report}");
    assert!(stderr.contains("published"), "{stderr}");
    let manifest_path = epochs.join("epoch-000000000001").join("manifest.json");
    assert!(
        manifest_path.is_file(),
        "{} missing",
        manifest_path.display()
    );

    // serve: loads the persisted epoch; the address comes from the log.
    let mut cmd = auditor();
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--database-url",
        &db_url,
        "--epoch-dir",
    ])
    .arg(&epochs);
    let mut served = Served::spawn(cmd)?;
    let line = served.wait_for("listening", Duration::from_secs(120))?;
    assert!(line.contains("auditor-server listening"), "{line}");
    assert!(
        !line.contains('\u{1b}'),
        "ANSI codes in a piped log: {line:?}"
    );
    let addr = listening_addr(&line)?;
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let joined = served.log.join("\n");
    assert!(
        joined.contains("serving persisted epoch"),
        "did not load the built epoch:\n{joined}"
    );

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let resp = http.get(format!("http://{addr}/healthz")).send().await?;
    assert_eq!(resp.status(), 200);
    let health: serde_json::Value = serde_json::from_slice(&resp.bytes().await?)?;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["epoch"], 1, "{health}");

    let resp = http
        .get(format!("http://{addr}/v1/manifest"))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    let served_manifest = Manifest::from_json(&resp.bytes().await?)?;
    assert_eq!(served_manifest.epoch, 1);
    assert_eq!(served_manifest.entries, ENTRIES as u64);
    assert_eq!(served_manifest.filter.a, 768);
    let on_disk = Manifest::from_json(&std::fs::read(&manifest_path)?)?;
    assert_eq!(
        served_manifest, on_disk,
        "served manifest differs from disk"
    );

    // SIGTERM: drains and exits 0 within a few seconds.
    let pid = served.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status()?;
    assert!(kill.success(), "kill -TERM {pid} failed");
    let status = wait_with_timeout(&mut served.child, Duration::from_secs(10))?;
    let log = served.rest();
    assert!(
        status.success(),
        "exit status {status} after SIGTERM:\n{log}"
    );
    assert!(
        log.contains("shutdown requested"),
        "no shutdown log line:\n{log}"
    );
    assert!(log.contains("shut down"), "no final log line:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    Ok(())
}

#[test]
fn bad_config_is_refused_without_panic() -> Result<(), BoxErr> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("auditor.toml");
    std::fs::write(&config, "[epoch]\nfilters = 0\n")?;
    let db_url = format!("sqlite://{}?mode=rwc", dir.path().join("ct.db").display());
    let mut child = auditor()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .args(["--database-url", &db_url, "--epoch-dir"])
        .arg(dir.path().join("epochs"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let status = wait_with_timeout(&mut child, Duration::from_secs(30))?;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().ok_or("no stderr")?, &mut stderr)?;
    assert!(!status.success(), "serve accepted filters = 0:\n{stderr}");
    assert_eq!(status.code(), Some(1), "{status}:\n{stderr}");
    assert!(
        stderr.contains("[epoch] filters must be in 1..=4096"),
        "unclear message:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
    // Nothing was started: no store and no epoch directory were created.
    assert!(!dir.path().join("epochs").exists());

    // An unknown key is refused the same way, naming the key.
    std::fs::write(&config, "[epoch]\nfilterz = 768\n")?;
    let out = auditor()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("filterz"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    Ok(())
}

/// A malformed database URL is a configuration error: `serve` exits 1
/// before listening, naming the key, without the password.
#[test]
fn malformed_database_url_is_fatal_and_redacted() -> Result<(), BoxErr> {
    let dir = tempfile::tempdir()?;
    for url in [
        "postgres://ct:hunter2@db:notaport/ct",
        "mysql://ct:hunter2@db/ct",
    ] {
        let mut child = auditor()
            .args(["serve", "--bind", "127.0.0.1:0", "--database-url", url])
            .arg("--epoch-dir")
            .arg(dir.path().join("epochs"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let status = wait_with_timeout(&mut child, Duration::from_secs(30))?;
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().ok_or("no stderr")?, &mut stderr)?;
        assert_eq!(status.code(), Some(1), "{url}: {status}\n{stderr}");
        assert!(stderr.contains("database_url"), "{stderr}");
        assert!(stderr.contains("ct:***@db"), "{stderr}");
        assert!(!stderr.contains("hunter2"), "password leaked:\n{stderr}");
        assert!(!stderr.contains("listening"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(
            stderr.matches("configuration:").count(),
            1,
            "repeated cause:\n{stderr}"
        );
    }
    assert!(!dir.path().join("epochs").exists());
    Ok(())
}

/// The database URL a server logs has its password redacted.
#[test]
fn logged_database_url_is_redacted() -> Result<(), BoxErr> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("auditor.toml");
    // No epoch and no build: the server starts and never touches the store.
    std::fs::write(&config, "[schedule]\nbuild_if_missing = false\n")?;
    let mut cmd = auditor();
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .args(["--epoch-dir"])
        .arg(dir.path().join("epochs"))
        .env(
            "AUDITOR_DATABASE_URL",
            "postgres://ct:hunter2@127.0.0.1:1/ct",
        );
    let mut served = Served::spawn(cmd)?;
    served.wait_for("listening", Duration::from_secs(60))?;
    let log = served.log.join("\n");
    assert!(log.contains("postgres://ct:***@127.0.0.1:1/ct"), "{log}");
    assert!(!log.contains("hunter2"), "password leaked:\n{log}");
    Ok(())
}

/// Sharded mode through the binary: `epoch plan` writes the spec and
/// prints each shard's share and memory estimate; `build-epoch` builds one
/// shard's databases of it (environment shard settings, flag overrides);
/// a shard index outside the count and a sharded build without a spec are
/// refused with clear messages.
#[tokio::test]
async fn epoch_plan_then_shard_builds() -> Result<(), BoxErr> {
    let dir = tempfile::tempdir()?;
    let db_url = filled_store(dir.path(), ENTRIES).await?;
    let config = dir.path().join("auditor.toml");
    std::fs::write(
        &config,
        "[epoch]\nparam_set = \"toy-insecure-d64\"\nallow_insecure_params = true\n\
         filters = 8\ndb_bits_target = 640\n",
    )?;
    let spec = dir.path().join("spec.json");
    let sharded = |cmd: &mut Command| {
        cmd.arg("--config")
            .arg(&config)
            .args(["--database-url", &db_url])
            .env("AUDITOR_SHARD_COUNT", "2")
            .env("AUDITOR_SHARD_URL_TEMPLATE", "http://auditor-{i}.test:8080")
            .stdin(Stdio::null());
    };

    let mut plan = auditor();
    plan.args(["epoch", "plan", "--out"]).arg(&spec);
    sharded(&mut plan);
    let out = plan.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "epoch plan failed: {stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(summary["epoch"], 1, "{summary}");
    assert_eq!(summary["databases"], 4, "{summary}");
    assert_eq!(summary["shards"][1]["url"], "http://auditor-1.test:8080");
    assert_eq!(summary["shards"][1]["databases"], 2, "{summary}");
    assert!(summary["shards"][0]["memory_build_peak_bytes"].as_u64() > Some(0));
    let text = std::fs::read_to_string(&spec)?;
    assert!(text.contains("\"set_sha256\""), "{text}");

    for shard in ["1", "0"] {
        let epochs = dir.path().join(format!("shard-{shard}"));
        let mut build = auditor();
        build
            .args(["build-epoch", "--shard-index", shard, "--epoch-spec"])
            .arg(&spec)
            .arg("--epoch-dir")
            .arg(&epochs);
        sharded(&mut build);
        let out = build.output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "shard {shard}: {stderr}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert_eq!(
            (report["epoch"].as_u64(), report["dbs"].as_u64()),
            (Some(1), Some(2))
        );
        let epoch = epochs.join("epoch-000000000001");
        let own = if shard == "1" { [1, 3] } else { [0, 2] };
        for d in 0..4 {
            let held = epoch.join(format!("db-{d:04}.bits")).is_file();
            assert_eq!(held, own.contains(&d), "shard {shard}, database {d}");
        }
        let served = Manifest::from_json(&std::fs::read(epoch.join("manifest.json"))?)?;
        assert_eq!(served.shard_url(3), Some("http://auditor-1.test:8080"));
    }

    for (args, says) in [
        (
            vec!["--shard-index", "2"],
            "index = 2 must be below count = 2",
        ),
        (vec!["--shard-index", "1"], "needs --epoch-spec"),
    ] {
        let mut build = auditor();
        build.arg("build-epoch").args(&args);
        build.arg("--epoch-dir").arg(dir.path().join("bad"));
        sharded(&mut build);
        let out = build.output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    Ok(())
}
