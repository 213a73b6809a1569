//! The whole private-auditing pipeline on one machine, used by the
//! `audit-demo` binary (README command 1) and by the end-to-end tests:
//!
//! 1. a local CT log (`ct-testlog`) issues certificates with SCTs —
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

use audit_sim::sim::{CorpusEntry, Truth};
use auditor_server::service::Service;
use ct_testlog::{CorpusRecord, CorpusSpec, IssuedEntry, TestLog, TestLogConfig};

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
    /// The corpus as ct-testlog writes it (`corpus.jsonl`).
    pub records: Vec<CorpusRecord>,
    /// The same corpus as the simulator reads it (with ground truth).
    pub corpus: Vec<CorpusEntry>,
}

/// A ct-testlog corpus record as the simulator's corpus entry (the same
/// fields; `corpus.jsonl` carries either).
pub fn sim_entry(r: &CorpusRecord) -> CorpusEntry {
    CorpusEntry {
        cert: r.cert.clone(),
        issuer: r.issuer.clone(),
        tls_sct: r.tls_sct.clone(),
        truth: match r.truth {
            ct_testlog::Truth::Logged => Truth::Logged,
            ct_testlog::Truth::Omitted => Truth::Omitted,
            ct_testlog::Truth::Forged => Truth::Forged,
        },
    }
}

/// Issues the corpus with [`ct_testlog::issue_corpus`]: `omitted`
/// unlogged SCTs first, then `logged` entries (half with embedded SCTs,
/// half with TLS-delivered ones), and `forged` of the TLS-delivered ones
/// again with a corrupted signature. Then waits one MMD and has the log
/// sign a newer head ([`TestLog::publish_covering_head`]), so that every
/// SCT is covered once that head is ingested.
pub async fn issue_corpus(
    log: &TestLog,
    logged: usize,
    omitted: usize,
    forged: usize,
) -> anyhow::Result<Issued> {
    let spec = CorpusSpec {
        logged,
        omitted,
        forged,
        precert_fraction: 0.5,
    };
    let c = ct_testlog::issue_corpus(log, &spec).await?;
    log.publish_covering_head().await?;
    let corpus = c.records.iter().map(sim_entry).collect();
    Ok(Issued {
        logged: c.logged,
        omitted: c.omitted,
        records: c.records,
        corpus,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// ct-testlog writes the corpus; browser-client's simulator reads it
    /// back with the same certificates, SCTs and truth labels.
    #[tokio::test]
    async fn testlog_corpus_reads_with_the_simulator_reader() {
        let log = TestLog::start(TestLogConfig::default()).await.unwrap();
        let spec = CorpusSpec {
            logged: 6,
            omitted: 2,
            forged: 2,
            precert_fraction: 0.5,
        };
        let c = ct_testlog::issue_corpus(&log, &spec).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corpus.jsonl");
        ct_testlog::corpus::write_jsonl(&path, &c.records).unwrap();
        let read = audit_sim::sim::read_corpus(&path).unwrap();
        assert_eq!(read.len(), 10);
        assert_eq!(read.len(), c.records.len());
        for (entry, record) in read.iter().zip(&c.records) {
            let expected = sim_entry(record);
            assert_eq!(entry.cert, expected.cert);
            assert_eq!(entry.issuer, expected.issuer);
            assert_eq!(entry.tls_sct, expected.tls_sct);
            assert_eq!(entry.truth, expected.truth);
        }
        let truths: Vec<Truth> = read.iter().map(|e| e.truth).collect();
        assert_eq!(truths.iter().filter(|t| **t == Truth::Logged).count(), 6);
        assert_eq!(truths.iter().filter(|t| **t == Truth::Omitted).count(), 2);
        assert_eq!(truths.iter().filter(|t| **t == Truth::Forged).count(), 2);
        // The labels serialise identically on both sides.
        for t in [
            ct_testlog::Truth::Logged,
            ct_testlog::Truth::Omitted,
            ct_testlog::Truth::Forged,
        ] {
            let sim = sim_entry(&CorpusRecord {
                cert: String::new(),
                issuer: String::new(),
                tls_sct: None,
                truth: t,
            })
            .truth;
            assert_eq!(
                serde_json::to_string(&t).unwrap(),
                serde_json::to_string(&sim).unwrap()
            );
        }
        log.shutdown().await;
    }
}
