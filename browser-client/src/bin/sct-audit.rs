//! `sct-audit`: inspect the SCTs of a certificate, or audit one privately.
//!
//! ```sh
//! sct-audit inspect --cert leaf.pem --issuer issuer.pem --log-list log_list.json
//! sct-audit check   --cert leaf.pem --issuer issuer.pem --server http://127.0.0.1:8080
//! ```
//!
//! `--log-list` (a file or URL) defaults to Chrome's log list;
//! `--queue pending.json` keeps SCTs that cannot be audited yet.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use browser_client::audit::{audit_now, Outcome};
use browser_client::policy::PendingQueue;
use browser_client::sct::{self, CheckedSct};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "Inspect and privately audit the SCTs of a certificate"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct CertArgs {
    /// Leaf certificate (PEM or DER); a PEM chain may also hold the issuer.
    #[arg(long)]
    cert: PathBuf,
    /// Issuer certificate (PEM or DER); needed for embedded SCTs.
    #[arg(long)]
    issuer: Option<PathBuf>,
    /// An SCT delivered by TLS/OCSP (TLS encoding, raw bytes) instead of
    /// the embedded ones.
    #[arg(long)]
    sct: Option<PathBuf>,
    /// Log list v3 (log keys and MMDs): a file, or an http(s) URL.
    #[arg(long, default_value = CHROME_LOG_LIST)]
    log_list: String,
}

/// Chrome's log list v3.
const CHROME_LOG_LIST: &str = "https://www.gstatic.com/ct/log_list/v3/log_list.json";

#[derive(Subcommand)]
enum Cmd {
    /// Print every SCT: log, timestamp, extensions, rebuilt leaf hash,
    /// signature check.
    Inspect {
        #[command(flatten)]
        cert: CertArgs,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Audit the certificate's SCTs privately against an auditor.
    Check {
        #[command(flatten)]
        cert: CertArgs,
        /// Auditor base URL.
        #[arg(long)]
        server: String,
        /// Persistent pending queue (SCTs not yet auditable, re-checks).
        #[arg(long)]
        queue: Option<PathBuf>,
        /// Clock for the MMD decision (ms since the Unix epoch; default now).
        #[arg(long)]
        now_ms: Option<u64>,
    },
}

fn read(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.len() > 16 << 20 {
        bail!("{} is larger than 16 MiB", path.display());
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The log list from a file or an http(s) URL (capped like the parser).
async fn log_list(src: &str) -> anyhow::Result<Vec<u8>> {
    if !(src.starts_with("https://") || src.starts_with("http://")) {
        return read(&PathBuf::from(src));
    }
    let max = ct_core::loglist::MAX_LOG_LIST_SIZE;
    let mut resp = reqwest::get(src)
        .await
        .with_context(|| format!("fetching {src}"))?
        .error_for_status()
        .with_context(|| format!("fetching {src}"))?;
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .with_context(|| format!("reading {src}"))?
    {
        if body.len() + chunk.len() > max {
            bail!("{src}: log list larger than {max} bytes");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// (chain, checked SCTs).
async fn load(c: &CertArgs) -> anyhow::Result<(Vec<Vec<u8>>, Vec<CheckedSct>)> {
    let list = sct::parse_log_list(&log_list(&c.log_list).await?)?;
    let mut chain = sct::parse_certificates(&read(&c.cert)?)?;
    if let Some(i) = &c.issuer {
        chain.extend(sct::parse_certificates(&read(i)?)?);
    }
    let leaf = chain[0].clone();
    let checked = match &c.sct {
        Some(p) => vec![sct::delivered_sct(&leaf, &read(p)?, &list)?],
        None => {
            let issuer = chain
                .get(1)
                .context("embedded SCTs need the issuer certificate (--issuer or a PEM chain)")?;
            sct::embedded_scts(&leaf, issuer, &list)?
        }
    };
    if checked.is_empty() {
        bail!("the certificate has no embedded SCTs (pass a TLS-delivered one with --sct)");
    }
    Ok((chain, checked))
}

fn print(s: &CheckedSct) {
    println!(
        "log id      {}  ({})",
        s.log_id,
        s.log_description
            .as_deref()
            .unwrap_or("not in the log list")
    );
    println!("timestamp   {} ms", s.timestamp_ms);
    println!(
        "extensions  {}",
        if s.extensions.is_empty() {
            "(none)"
        } else {
            &s.extensions
        }
    );
    if let Some(i) = s.leaf_index {
        println!("leaf_index  {i}");
    }
    println!("entry       {:?}", s.kind);
    println!("leaf hash   {}", s.leaf_hash);
    println!(
        "signature   {}",
        match &s.signature {
            sct::Signature::Valid => "verifies".to_owned(),
            sct::Signature::Invalid(why) => format!("DOES NOT VERIFY: {why}"),
            sct::Signature::UnknownLog => "unknown log (not checked)".to_owned(),
        }
    );
}

use ct_core::civil::unix_now_ms as now_ms;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Inspect { cert, json } => {
            let (_, checked) = load(&cert).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&checked)?);
            } else {
                for (i, s) in checked.iter().enumerate() {
                    if i > 0 {
                        println!();
                    }
                    print(s);
                }
            }
        }
        Cmd::Check {
            cert,
            server,
            queue,
            now_ms: now,
        } => {
            let now = now.unwrap_or_else(now_ms);
            let (chain, checked) = load(&cert).await?;
            let auditor = browser_client::net::Auditor::new(&server)?;
            let mut q = match &queue {
                Some(p) => {
                    let q = PendingQueue::open(p)?;
                    for r in q.repairs() {
                        eprintln!("sct-audit: queue {}: {r}", p.display());
                    }
                    if !q.repairs().is_empty() {
                        eprintln!(
                            "sct-audit: queue {}: repaired; the file as found is kept beside it (.bad-*)",
                            p.display()
                        );
                    }
                    q
                }
                None => PendingQueue::new(),
            };
            // Saved also after an error: audits queued or recorded before
            // it are kept, and the failed one is retried next time.
            let done = audit_now(&auditor, &mut q, &chain, &checked, now).await;
            q.save()?;
            let (outcomes, _) = done?;
            let mut failures = 0;
            for o in &outcomes {
                match o {
                    Outcome::NotAuditable { log_id, signature } => {
                        println!("{log_id}: not audited: signature {signature:?}")
                    }
                    Outcome::Pending { log_id, leaf_hash, waiting_for } => {
                        println!("{log_id} {leaf_hash}: pending, waiting for {waiting_for}")
                    }
                    Outcome::Logged { log_id, leaf_hash, epoch, filter, upload_bytes, download_bytes } => println!(
                        "{log_id} {leaf_hash}: LOGGED in epoch {epoch} (filter {filter}, {upload_bytes} B up, {download_bytes} B down)"
                    ),
                    Outcome::NotFound { log_id, leaf_hash, epoch, filter } => {
                        failures += 1;
                        println!(
                            "{log_id} {leaf_hash}: NOT FOUND in epoch {epoch} (filter {filter}); will re-check in a later epoch"
                        )
                    }
                    Outcome::Misbehaviour(r) => {
                        failures += 1;
                        println!("MISBEHAVIOUR REPORT:\n{}", serde_json::to_string_pretty(r)?)
                    }
                }
            }
            if failures > 0 {
                std::process::exit(2);
            }
        }
    }
    Ok(())
}
