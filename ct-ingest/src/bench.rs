//! End-to-end ingestion benchmark against a local [`TestLog`] (feature
//! `bench`, off by default; the test log is the `ct-testlog` crate): fills a fresh test log with `entries` certificates, then
//! times [`ingest_log`] from an empty store to the log's head over real HTTP
//! on 127.0.0.1 (download, decode, `notAfter`, leaf hashes, Merkle
//! verification, commits), into the given database.
//!
//! Only the ingestion is timed; issuing the test certificates (done by the
//! test log, with real signatures) is reported separately as `fill_seconds`.
//! The client and the test log share the machine's cores.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ct_testlog::{TestLog, TestLogConfig};
use serde::Serialize;

use crate::config::{Config, LogLimits, LogSelector, SelectedLog};
use crate::error::{Error, Result};
use crate::http::{HttpClient, HttpSettings};
use crate::ingest::{ingest_log, IngestOptions};
use ct_core::loglist::LogList;
use ct_store::{LogKind, Store};

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Entries to fill the test log with and ingest.
    pub entries: u64,
    /// Database (`None`: a temporary SQLite file, deleted afterwards).
    pub database_url: Option<String>,
    /// Which API to ingest through.
    pub api: LogKind,
    /// Fraction of precertificate entries.
    pub precert_fraction: f64,
    /// The ingester's limits for the log.
    pub limits: LogLimits,
    /// The test log's `get-entries` cap.
    pub max_get_entries: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            entries: 100_000,
            database_url: None,
            api: LogKind::Rfc6962,
            precert_fraction: 0.5,
            limits: LogLimits {
                batch_size: 1024,
                concurrency: 4,
                requests_per_second: None,
                commit_every: 65_536,
            },
            max_get_entries: 1024,
        }
    }
}

/// The result, printed as JSON by `ct-ingest bench`.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Entries ingested.
    pub entries: u64,
    /// `"rfc6962"` or `"static"`.
    pub api: &'static str,
    /// `"sqlite"` or `"postgres"`.
    pub backend: &'static str,
    /// Seconds the test log took to issue the entries (not part of the rate).
    pub fill_seconds: f64,
    /// Seconds from an empty store to the verified head.
    pub ingest_seconds: f64,
    /// `entries / ingest_seconds`.
    pub entries_per_second: f64,
    /// Transactions committed.
    pub commits: u64,
    /// Rows inserted.
    pub inserted: u64,
    /// HTTP requests made.
    pub http_requests: u64,
    /// Response bytes read.
    pub http_bytes: u64,
}

impl BenchReport {
    /// One-line JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Runs the benchmark (see the module documentation).
pub async fn run(opts: &BenchOptions) -> Result<BenchReport> {
    let log = TestLog::start(TestLogConfig {
        max_get_entries: opts.max_get_entries,
        ..TestLogConfig::default()
    })
    .await?;
    let fill_start = Instant::now();
    let mut left = opts.entries;
    while left > 0 {
        let n = left.min(10_000);
        log.add_entries(n as usize, opts.precert_fraction).await?;
        left -= n;
    }
    let fill_seconds = fill_start.elapsed().as_secs_f64();

    let temp_db = match &opts.database_url {
        Some(_) => None,
        None => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            Some(
                std::env::temp_dir()
                    .join(format!("ct-ingest-bench-{}-{nanos}.db", std::process::id())),
            )
        }
    };
    let url = match (&opts.database_url, &temp_db) {
        (Some(u), _) => u.clone(),
        (None, Some(p)) => format!("sqlite://{}?mode=rwc", p.display()),
        (None, None) => return Err(Error::Internal("no database".into())),
    };
    let result = async {
        let store = Store::connect(&url).await?;
        let http = HttpClient::new(&HttpSettings::default())?;
        let log_sel = select(&log, opts)?;
        let t = Instant::now();
        let report = ingest_log(&store, &http, &log_sel, &IngestOptions::default()).await?;
        let ingest_seconds = t.elapsed().as_secs_f64();
        let backend = store.backend_name();
        store.close().await;
        if report.verified_position != opts.entries {
            return Err(Error::Internal(format!(
                "verified {} of {} entries",
                report.verified_position, opts.entries
            )));
        }
        let c = http.counters();
        Ok(BenchReport {
            entries: opts.entries,
            api: opts.api.as_str(),
            backend,
            fill_seconds,
            ingest_seconds,
            entries_per_second: opts.entries as f64 / ingest_seconds.max(1e-9),
            commits: report.commits,
            inserted: report.inserted,
            http_requests: c.requests.load(std::sync::atomic::Ordering::Relaxed),
            http_bytes: c.bytes.load(std::sync::atomic::Ordering::Relaxed),
        })
    }
    .await;
    log.shutdown().await;
    if let Some(p) = temp_db {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
        }
    }
    result
}

/// The test log as a [`SelectedLog`] for `opts.api`, through the log list
/// and the configuration's selection.
fn select(log: &TestLog, opts: &BenchOptions) -> Result<SelectedLog> {
    let list = LogList::from_json(log.log_list_json().as_bytes())?;
    let config = Config {
        logs: vec![LogSelector {
            id: Some(ct_core::hex::encode(log.log_id().as_bytes())),
            api: Some(opts.api.as_str().to_owned()),
            batch_size: Some(opts.limits.batch_size),
            concurrency: Some(opts.limits.concurrency),
            requests_per_second: opts.limits.requests_per_second,
            commit_every: Some(opts.limits.commit_every),
            ..LogSelector::default()
        }],
        ..Config::default()
    };
    config
        .select_logs(&list, 0)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Config("the test log was not selected".into()))
}
