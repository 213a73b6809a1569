//! The `ct-ingest` binary end to end: a local test log, a config file, one
//! `ct-ingest once` run as a child process, then the store and the metrics
//! file are checked.

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
