//! The whole private-auditing pipeline on one machine, used by the
//! `audit-demo` binary (README command 1) and by the end-to-end tests:
//!
//! 1. a local CT log (`ct_ingest::testlog`) issues certificates with SCTs —
//!    logged ones, ones it "forgets" to log (omitted), and some whose SCT
//!    signature is forged — and the corpus is written for the simulator;
//! 2. `ct-ingest` verifies and stores the log in SQLite;
//! 3. `auditor-server` builds an epoch and serves it on 127.0.0.1;
//! 4. `audit-sim` simulates browsers (the `browser-client` library) auditing
//!    over HTTP;
//! 5. the cost report turns the measurements into dollars per million
//!    clients.
//!
//! This crate depends on everything; nothing depends on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use audit_sim::sim::{CorpusEntry, Truth};
use auditor_server::service::Service;
use base64::Engine as _;
use ct_ingest::testlog::{IssuedEntry, TestLog, TestLogConfig};

/// The test log's maximum merge delay in the demo: 2 s instead of a day,
/// so that the demo's SCTs are covered by an epoch seconds after issuance
/// (ct-ingest records `ingested_until = head timestamp − MMD`).
pub const DEMO_MMD_S: u64 = 2;

/// Starts a local test log with an MMD of [`DEMO_MMD_S`].
pub async fn start_log() -> anyhow::Result<TestLog> {
    Ok(TestLog::start(TestLogConfig {
        mmd_seconds: DEMO_MMD_S,
        ..TestLogConfig::default()
    })
    .await?)
}

/// What [`issue_corpus`] issued.
pub struct Issued {
    /// Logged entries.
    pub logged: Vec<IssuedEntry>,
    /// Entries whose SCT the log issued but never logged.
    pub omitted: Vec<IssuedEntry>,
    /// The simulator's corpus (with ground truth).
    pub corpus: Vec<CorpusEntry>,
}

fn corpus_entry(e: &IssuedEntry, truth: Truth, forge: bool) -> anyhow::Result<CorpusEntry> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let tls_sct = if e.embedded {
        None
    } else {
        let mut sct = e.sct.clone();
        if forge {
            let sig = &mut sct.signature.signature;
            let last = sig.len() - 1;
            sig[last] ^= 0x01;
        }
        Some(b64.encode(sct.encode()?))
    };
    Ok(CorpusEntry {
        cert: b64.encode(&e.cert_der),
        issuer: b64.encode(&e.issuer_der),
        tls_sct,
        truth,
    })
}

/// Issues `omitted` unlogged SCTs first (so that the log's ingested-until
/// covers them once later entries are logged), then `logged` entries (half
/// with embedded SCTs, half with TLS-delivered ones); `forged` of the
/// TLS-delivered ones also appear in the corpus with a corrupted signature.
pub async fn issue_corpus(
    log: &TestLog,
    logged: usize,
    omitted: usize,
    forged: usize,
) -> anyhow::Result<Issued> {
    let mut om = Vec::with_capacity(omitted);
    for _ in 0..omitted {
        om.push(log.issue_unlogged().await?);
    }
    let lg = log.add_entries(logged, 0.5).await?;
    // One MMD later the log signs a newer head (with one more entry): every
    // SCT above is then older than head − MMD, i.e. covered once ingested.
    tokio::time::sleep(std::time::Duration::from_millis(DEMO_MMD_S * 1000 + 200)).await;
    log.add_entries(1, 0.0).await?;
    let mut corpus = Vec::new();
    for e in &lg {
        corpus.push(corpus_entry(e, Truth::Logged, false)?);
    }
    for e in &om {
        corpus.push(corpus_entry(e, Truth::Omitted, false)?);
    }
    for e in lg.iter().filter(|e| !e.embedded).take(forged) {
        corpus.push(corpus_entry(e, Truth::Forged, true)?);
    }
    Ok(Issued {
        logged: lg,
        omitted: om,
        corpus,
    })
}

/// Writes the corpus as JSON lines.
pub fn write_corpus(path: &Path, corpus: &[CorpusEntry]) -> anyhow::Result<()> {
    let mut out = String::new();
    for e in corpus {
        out.push_str(&serde_json::to_string(e)?);
        out.push('\n');
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

/// Runs ct-ingest once: the log (via its log list, written to `dir`) into
/// the SQLite database `db_url`.
pub async fn ingest(
    log: &TestLog,
    dir: &Path,
    db_url: &str,
) -> anyhow::Result<ct_ingest::ingest::RunSummary> {
    let list = dir.join("log_list.json");
    std::fs::write(&list, log.log_list_json())?;
    let toml = format!(
        "log_list = {:?}\ndatabase_url = {:?}\n",
        list.display().to_string(),
        db_url
    );
    let config = ct_ingest::config::Config::from_toml(&toml)?;
    let summary =
        ct_ingest::ingest::run_once(&config, &ct_ingest::ingest::IngestOptions::default()).await?;
    for (sel, r) in &summary.logs {
        r.as_ref()
            .map_err(|e| anyhow::anyhow!("ingesting {}: {e}", sel.info.description))?;
    }
    Ok(summary)
}

/// A running auditor on 127.0.0.1.
pub struct RunningAuditor {
    /// Its address.
    pub addr: SocketAddr,
    /// The service (publish, build, state).
    pub service: Arc<Service>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<auditor_server::Result<()>>,
}

impl RunningAuditor {
    /// Starts `config` on 127.0.0.1 port 0 (builds the first epoch if the
    /// epoch directory has none) and waits until it serves.
    pub async fn start(config: auditor_server::Config) -> anyhow::Result<RunningAuditor> {
        let service = Arc::new(Service::new(config)?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(service.clone().run(listener, async {
            let _ = rx.await;
        }));
        let r = RunningAuditor {
            addr,
            service,
            stop: Some(tx),
            task,
        };
        let url = format!("{}/healthz", r.url());
        for _ in 0..1200 {
            if let Ok(resp) = reqwest_get(&url).await {
                if resp == 200 {
                    return Ok(r);
                }
            }
            if r.task.is_finished() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        anyhow::bail!("auditor did not become healthy")
    }

    /// Base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Graceful shutdown.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await??;
        Ok(())
    }
}

async fn reqwest_get(url: &str) -> anyhow::Result<u16> {
    Ok(reqwest::get(url).await?.status().as_u16())
}

/// An auditor configuration for the demo and tests: SQLite store at
/// `db_url`, epochs under `dir/epochs`, a build every `interval_s` seconds
/// (so re-checks meet a later epoch), short grace period.
pub fn auditor_config(dir: &Path, db_url: &str, interval_s: Option<u64>) -> auditor_server::Config {
    let mut c = auditor_server::Config {
        database_url: Some(db_url.to_owned()),
        epoch_dir: dir.join("epochs"),
        bind: "127.0.0.1:0".into(),
        ..Default::default()
    };
    c.schedule.interval_seconds = interval_s;
    c.schedule.reload_seconds = 0;
    c.epoch.grace_seconds = 120;
    c
}

/// `sqlite://…?mode=rwc` URL of a file in `dir`.
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", dir.join("ct-ingest.db").display())
}

/// Default output directory of the demo.
pub fn default_out_dir() -> PathBuf {
    PathBuf::from("target/demo")
}
