//! `demo-server`: the demo pipeline without the simulation, left running
//! for an external client (the browser extension's end-to-end test,
//! `browser-client/extension/test/run.sh`).
//!
//! Starts the local CT test log, issues a corpus (logged, omitted and
//! forged SCTs), ingests it into SQLite, builds an epoch and serves it on
//! 127.0.0.1. Writes `corpus.jsonl`, `log_list.json` and `https_sites.json`
//! (below) into `--out`,
//! prints one line `AUDITOR_URL=http://127.0.0.1:PORT` on stdout once the
//! auditor answers, and serves until stdin reaches end of file, or SIGTERM
//! or SIGINT arrives; then shuts down gracefully.
//!
//! `https_sites.json` holds two certificates with embedded SCTs together
//! with their private keys, for a test that serves them over HTTPS to a
//! real browser: `{"logged": S, "unlogged": S}`, where `S` is
//! `{"cert", "issuer", "key"}` (base64 DER; `key` is PKCS #8) plus the
//! `leaf_hash` (hex) the SCT promises. The first is a logged entry, the
//! second an SCT the log signed and never logged.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use audit_demo::{auditor_config, ingest, issue_corpus, sqlite_url, start_log, RunningAuditor};
use base64::Engine as _;
use clap::Parser;
use ct_testlog::IssuedEntry;

#[derive(Parser)]
#[command(about = "Run test log + ct-ingest + auditor-server on 127.0.0.1 until stdin closes")]
struct Args {
    /// Output directory (created; must be empty if it exists).
    #[arg(long)]
    out: PathBuf,
    /// Certificates the log issues and logs (half embedded SCTs, half
    /// TLS-delivered).
    #[arg(long, default_value_t = 200)]
    logged: usize,
    /// SCTs the log issues but never logs.
    #[arg(long, default_value_t = 20)]
    omitted: usize,
    /// TLS-delivered SCTs also offered with a forged signature.
    #[arg(long, default_value_t = 10)]
    forged: usize,
    /// Build a new epoch every this many seconds (needed to re-check a
    /// NotFound in a later epoch); none by default.
    #[arg(long)]
    epoch_interval: Option<u64>,
}

/// Writes `https_sites.json` (see the module documentation).
fn write_https_sites(path: &std::path::Path, issued: &audit_demo::Issued) -> anyhow::Result<()> {
    let site = |e: &IssuedEntry| {
        let b64 = base64::engine::general_purpose::STANDARD;
        let hex = e.leaf_hash.to_hex();
        serde_json::json!({
            "cert": b64.encode(&e.cert_der),
            "issuer": b64.encode(&e.issuer_der),
            "key": b64.encode(&e.key_pkcs8_der),
            "leaf_hash": hex,
        })
    };
    let logged = issued.logged.iter().find(|e| e.embedded).context(
        "https_sites.json needs a logged entry with an embedded SCT (--logged 2 or more)",
    )?;
    let unlogged = issued
        .omitted
        .first()
        .context("https_sites.json needs an omitted entry (--omitted 1 or more)")?;
    let json = serde_json::json!({ "logged": site(logged), "unlogged": site(unlogged) });
    std::fs::write(path, serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Resolves when stdin reaches end of file (or fails).
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    rx
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    bin_support::init_tracing("warn");
    let a = Args::parse();
    if a.out.exists() && std::fs::read_dir(&a.out)?.next().is_some() {
        anyhow::bail!("{} exists and is not empty", a.out.display());
    }
    std::fs::create_dir_all(&a.out)?;
    let out = a.out.canonicalize()?;

    let log = start_log().await?;
    eprintln!("demo-server: test log at {}", log.base_url());
    let issued = issue_corpus(&log, a.logged, a.omitted, a.forged).await?;
    ct_testlog::corpus::write_jsonl(&out.join("corpus.jsonl"), &issued.records)?;
    write_https_sites(&out.join("https_sites.json"), &issued)?;
    let db_url = sqlite_url(&out);
    // Also writes out/log_list.json.
    ingest(&log, &out, &db_url).await?;
    let auditor = RunningAuditor::start(auditor_config(&out, &db_url, a.epoch_interval))
        .await
        .context("starting the auditor")?;
    eprintln!(
        "demo-server: {} corpus entries ({} logged, {} omitted, {} forged) in {}",
        issued.corpus.len(),
        issued.logged.len(),
        issued.omitted.len(),
        issued.corpus.len() - issued.logged.len() - issued.omitted.len(),
        out.display()
    );
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "AUDITOR_URL={}", auditor.url())?;
        stdout.flush()?;
    }

    let why = tokio::select! {
        _ = stdin_closed() => "stdin closed",
        signal = bin_support::stop_requested() => signal,
    };
    eprintln!("demo-server: {why}, shutting down");
    auditor.stop().await?;
    log.shutdown().await;
    Ok(())
}
