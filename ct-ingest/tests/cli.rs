//! The `ct-ingest` binary end to end, as a child process: a local test log
//! and a config file, then the store, the metrics file and the log lines
//! are checked: a successful `once`; failed runs (database unreachable or
//! unusable), which are logged with their cause once, counted in the
//! metrics and retried by `run`; a malformed database URL, fatal at
//! startup. No output may contain the database password.

use ct_store::Store;
use ct_testlog::{TestLog, TestLogConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_ingests_a_local_log_and_writes_metrics() -> Result<(), Box<dyn std::error::Error>> {
    let log = TestLog::start(TestLogConfig::default()).await?;
    let issued = log.add_entries(200, 0.5).await?;
    let dir = tempfile::tempdir()?;
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let db = dir.path().join("ct.db");
    let db_url = format!("sqlite://{}?mode=rwc", db.display());
    let config = dir.path().join("ct-ingest.toml");
    std::fs::write(
        &config,
        format!(
            "log_list = \"{}\"\ndatabase_url = \"{db_url}\"\n",
            list.display()
        ),
    )?;
    let metrics = dir.path().join("metrics.prom");
    let bin = env!("CARGO_BIN_EXE_ct-ingest");
    let run = |args: Vec<std::ffi::OsString>| {
        // the child talks to the log served by this runtime: run it off the
        // async workers
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(bin)
                .args(args)
                .env_remove("DATABASE_URL")
                .output()
        })
    };
    let out = run(vec![
        "once".into(),
        "--config".into(),
        config.clone().into(),
        "--metrics-file".into(),
        metrics.clone().into(),
    ])
    .await??;
    assert!(
        out.status.success(),
        "ct-ingest once failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&metrics)?;
    assert!(text.contains("ct_ingest_runs_total 1"), "{text}");
    assert!(text.contains("ct_ingest_log_errors_total 0"), "{text}");
    // the log is listed under both APIs; one of them is selected and fully read
    assert!(
        text.contains("ct_ingest_entries_inserted_total 200"),
        "{text}"
    );
    let store = Store::connect(&db_url).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    assert_eq!(store.count_active(now).await?, issued.len() as u64);
    store.close().await;

    // A misbehaving log makes the run fail with a non-zero status.
    log.set_misbehaviour(ct_testlog::Misbehaviour::WrongRoot);
    log.add_entries(10, 0.0).await?;
    let out = run(vec![
        "once".into(),
        "--config".into(),
        config.clone().into(),
    ])
    .await??;
    assert!(!out.status.success(), "a wrong root must fail the run");
    let store = Store::connect(&db_url).await?;
    assert_eq!(
        store.count_active(now).await?,
        issued.len() as u64,
        "nothing unverified stored"
    );
    store.close().await;
    log.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------
// Failed runs: logged with their cause, counted, never showing the password
// ---------------------------------------------------------------------------

const PASSWORD: &str = "Sekr1t-pw";
const EMPTY_LOG_LIST: &str = r#"{"version":"1","operators":[]}"#;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ct-ingest")
}

/// A port nobody listens on (bound, then released).
fn closed_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The value of an unlabelled metric in a Prometheus text file.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits (up to `secs`) until `path` holds metrics satisfying `ok`.
fn wait_for_metrics(
    path: &std::path::Path,
    secs: u64,
    ok: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if ok(&text) {
            return Ok(text);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("metrics not reached in {secs} s:\n{text}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// PostgreSQL unreachable: `once` fails with the cause on one line, each
/// cause once, and the metrics file says so; `run` keeps retrying with the
/// cause in every log line and rewrites the metrics after each failed run.
/// The URL's password shows nowhere.
#[test]
fn failed_runs_are_logged_counted_and_redacted() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, EMPTY_LOG_LIST)?;
    let url = format!("postgres://ct:{PASSWORD}@127.0.0.1:{}/ct", closed_port()?);
    let config = dir.path().join("ct-ingest.toml");
    std::fs::write(
        &config,
        format!(
            "log_list = \"{}\"\ndatabase_url = \"{url}\"\n[schedule]\nretry_seconds = 1\n",
            list.display()
        ),
    )?;
    let metrics = dir.path().join("metrics.prom");

    let out = std::process::Command::new(bin())
        .args(["once", "--config"])
        .arg(&config)
        .arg("--metrics-file")
        .arg(&metrics)
        .env_remove("DATABASE_URL")
        .env_remove("CT_INGEST_DATABASE_URL")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
    assert!(
        stderr.contains(
            "Error: ingest run failed: store: database error: error communicating with database: \
             Connection refused"
        ),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&metrics)?;
    assert_eq!(metric(&text, "ct_ingest_runs_total"), Some(1), "{text}");
    assert_eq!(
        metric(&text, "ct_ingest_runs_failed_total"),
        Some(1),
        "{text}"
    );
    assert_eq!(metric(&text, "ct_ingest_up"), Some(0), "{text}");
    assert_eq!(
        metric(&text, "ct_ingest_last_success_timestamp_seconds"),
        Some(0)
    );
    assert!(metric(&text, "ct_ingest_last_failure_timestamp_seconds").unwrap_or(0) > 1_700_000_000);
    std::fs::remove_file(&metrics)?;

    // `run`: retried after 1 s, 2 s, ... (not after the hour of --interval).
    let stderr_path = dir.path().join("run.stderr");
    let mut child = std::process::Command::new(bin())
        .args(["run", "--interval", "3600", "--config"])
        .arg(&config)
        .arg("--metrics-file")
        .arg(&metrics)
        .env_remove("DATABASE_URL")
        .env_remove("CT_INGEST_DATABASE_URL")
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()?;
    let waited = wait_for_metrics(&metrics, 30, |t| {
        metric(t, "ct_ingest_runs_failed_total").unwrap_or(0) >= 3
    });
    child.kill()?;
    child.wait()?;
    let text = waited?;
    assert_eq!(metric(&text, "ct_ingest_up"), Some(0), "{text}");
    let stderr = std::fs::read_to_string(&stderr_path)?;
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    let failures: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("run failed; retrying"))
        .collect();
    assert!(failures.len() >= 3, "{stderr}");
    for line in &failures {
        assert_eq!(line.matches("Connection refused").count(), 1, "{line}");
        assert_eq!(line.matches("database error: ").count(), 1, "{line}");
    }
    assert!(failures[0].contains("seconds=1 failures=1"), "{stderr}");
    assert!(failures[1].contains("seconds=2 failures=2"), "{stderr}");
    Ok(())
}

/// A malformed database URL (here from the environment, with the colon
/// after the scheme missing) is fatal at startup of `once` and `run`, with
/// the URL redacted.
#[test]
fn malformed_database_url_is_fatal_at_startup() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, EMPTY_LOG_LIST)?;
    let config = dir.path().join("ct-ingest.toml");
    std::fs::write(&config, format!("log_list = \"{}\"\n", list.display()))?;
    let bad = format!("postgres//ct:{PASSWORD}@db.internal:5432/ct");
    for args in [&["once"][..], &["run", "--interval", "1"][..]] {
        let started = std::time::Instant::now();
        let out = std::process::Command::new(bin())
            .args(args)
            .arg("--config")
            .arg(&config)
            .env("CT_INGEST_DATABASE_URL", &bad)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(started.elapsed().as_secs() < 20, "{args:?}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
        assert!(
            stderr.contains(
                "configuration: database_url: invalid database URL postgres//ct:***@db.internal:5432/ct"
            ),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.matches("configuration: ").count(), 1, "{stderr}");
    }
    Ok(())
}

/// A run that fails after successful ones turns `ct_ingest_up` and the
/// logs' `ct_ingest_log_up` to 0 (their other gauges stay), and the next
/// finished run turns them back to 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_gauges_fall_when_a_run_fails() -> Result<(), Box<dyn std::error::Error>> {
    let log = TestLog::start(TestLogConfig::default()).await?;
    log.add_entries(40, 0.5).await?;
    let dir = tempfile::tempdir()?;
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let db = dir.path().join("ct.db");
    let config = dir.path().join("ct-ingest.toml");
    std::fs::write(
        &config,
        format!(
            "log_list = \"{}\"\ndatabase_url = \"sqlite://{}?mode=rwc\"\n\
             [schedule]\nretry_seconds = 1\n",
            list.display(),
            db.display()
        ),
    )?;
    let metrics = dir.path().join("metrics.prom");
    let mut child = std::process::Command::new(bin())
        .args(["run", "--interval", "1", "--config"])
        .arg(&config)
        .arg("--metrics-file")
        .arg(&metrics)
        .env_remove("DATABASE_URL")
        .env_remove("CT_INGEST_DATABASE_URL")
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let result = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let log_up = |t: &str, v: u64| {
            t.lines()
                .any(|l| l.starts_with("ct_ingest_log_up{") && l.ends_with(&format!("}} {v}")))
        };
        let t = wait_for_metrics(&metrics, 60, |t| {
            metric(t, "ct_ingest_up") == Some(1) && log_up(t, 1)
        })?;
        assert_eq!(metric(&t, "ct_ingest_runs_failed_total"), Some(0), "{t}");
        // The database becomes unusable: a directory where the file was.
        // (The store is only open during a run; a run in progress may
        // still finish first.)
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        std::fs::create_dir(&db).map_err(|e| e.to_string())?;
        let t = wait_for_metrics(&metrics, 60, |t| {
            metric(t, "ct_ingest_runs_failed_total").unwrap_or(0) >= 1
        })?;
        assert_eq!(metric(&t, "ct_ingest_up"), Some(0), "{t}");
        assert!(log_up(&t, 0) && !log_up(&t, 1), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("ct_ingest_log_verified_size{") && l.ends_with("} 40")),
            "{t}"
        );
        assert!(metric(&t, "ct_ingest_last_failure_timestamp_seconds").unwrap_or(0) > 0);
        // Usable again: the next run recreates the store and ingests.
        std::fs::remove_dir(&db).map_err(|e| e.to_string())?;
        wait_for_metrics(&metrics, 60, |t| {
            metric(t, "ct_ingest_up") == Some(1) && log_up(t, 1)
        })?;
        Ok(())
    })
    .await?;
    child.kill()?;
    child.wait()?;
    log.shutdown().await;
    result?;
    Ok(())
}

/// `ct-ingest migrate` is the owner's step: on SQLite it creates the
/// schema a reader then accepts; on PostgreSQL (with `TEST_DATABASE_URL`)
/// the owner migrates, the ingest role of docs/operator.md cannot (no DDL)
/// but ingests with `once`, and neither output shows a password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_is_the_owners_step() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let dir = tempfile::tempdir()?;
    let db_url = format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display());
    let e = Store::connect(&db_url).await.expect_err("no schema yet");
    assert!(e.to_string().contains("ct-ingest migrate"), "{e}");
    let out = std::process::Command::new(bin())
        .args(["migrate", "--database-url", &db_url])
        .env_remove("DATABASE_URL")
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Store::connect(&db_url).await?.close().await;

    let Some(roles) = ct_store::testing::Roles::create("cli_migrate").await? else {
        return Ok(());
    };
    let result = async {
        let log = TestLog::start(TestLogConfig::default()).await?;
        log.add_entries(50, 0.5).await?;
        let list = dir.path().join("log_list.json");
        std::fs::write(&list, log.log_list_json())?;
        let config = dir.path().join("ingest.toml");
        std::fs::write(&config, format!("log_list = \"{}\"\n", list.display()))?;
        let pw = ct_store::testing::Roles::PASSWORD;
        let run = |args: Vec<String>, url: String| {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(bin())
                    .args(args)
                    .env("DATABASE_URL", url)
                    .output()
            })
        };
        let migrate = || vec!["migrate".to_string()];
        let out = run(migrate(), roles.owner_url.clone()).await??;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run(migrate(), roles.ingest_url.clone()).await??;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("permission denied"), "{err}");
        assert!(!err.contains(pw), "{err}");
        let once = vec![
            "once".to_string(),
            "--config".to_string(),
            config.display().to_string(),
        ];
        let out = run(once, roles.ingest_url.clone()).await??;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains(pw), "{err}");
        let store = Store::connect(&roles.auditor_url).await?;
        assert_eq!(store.count_active(0).await?, 50);
        store.close().await;
        log.shutdown().await;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    roles.cleanup().await?;
    result
}

/// No output shows a database password, whatever the URL looks like
/// (malformed scheme, unencoded `#` or `/` in the password, `?password=`)
/// and wherever it comes from (the configuration file and the environment
/// for `once`, the flag for `migrate`).
#[test]
fn database_passwords_are_redacted_everywhere() -> Result<(), Box<dyn std::error::Error>> {
    const PW: &str = "Zq9kX";
    let dir = tempfile::tempdir()?;
    let list = dir.path().join("log_list.json");
    std::fs::write(&list, r#"{"version":"3","operators":[]}"#)?;
    let port = closed_port()?;
    for (url, parses) in [
        (format!("postgres//ct:{PW}@127.0.0.1:{port}/ct"), false),
        (format!("postgres://ct:{PW}#1@127.0.0.1:{port}/ct"), false),
        (format!("postgres://ct:{PW}/1@127.0.0.1:{port}/ct"), false),
        (
            format!("postgres://ct@127.0.0.1:{port}/ct?password={PW}"),
            true,
        ),
    ] {
        for source in ["file", "env", "flag"] {
            let config = dir.path().join("c.toml");
            let mut toml = format!("log_list = {:?}\n", list.display().to_string());
            if source == "file" {
                toml.push_str(&format!("database_url = {url:?}\n"));
            }
            std::fs::write(&config, toml)?;
            let mut cmd = std::process::Command::new(bin());
            cmd.env_remove("DATABASE_URL")
                .env_remove("CT_INGEST_DATABASE_URL");
            match source {
                "flag" => cmd.args(["migrate", "--database-url", &url]),
                "env" => cmd
                    .args(["once", "--config"])
                    .arg(&config)
                    .env("CT_INGEST_DATABASE_URL", &url),
                _ => cmd.args(["once", "--config"]).arg(&config),
            };
            let out = cmd.output()?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            let what = format!("{url} from {source}");
            assert!(!out.status.success(), "{what}:\n{text}");
            assert!(!text.contains(PW), "{what}: password shown:\n{text}");
            if parses {
                assert!(text.to_lowercase().contains("refused"), "{what}:\n{text}");
            } else {
                assert!(text.contains("***"), "{what}:\n{text}");
            }
        }
    }
    Ok(())
}
