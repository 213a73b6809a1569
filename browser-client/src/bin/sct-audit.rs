//! `sct-audit`: inspect the SCTs of a certificate, or audit one privately.
//!
//! ```sh
//! sct-audit inspect --cert leaf.pem --issuer issuer.pem --log-list log_list.json
//! sct-audit check   --cert leaf.pem --issuer issuer.pem --server http://127.0.0.1:8080
//! ```
//!
//! `--log-list` (a file or URL) defaults to Chrome's log list;
//! `--queue pending.json` keeps SCTs that cannot be audited yet.
//!
//! `check` exits with 0 (every SCT LOGGED), 1 (error), 2 (NOT FOUND or a
//! misbehaviour report), 3 (not auditable), 4 (pending) or 5 (the canaries
//! flag the auditor): [`EXIT_CODES`].

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use browser_client::audit::{audit_now, run_canaries, Outcome, Verdict, EXIT_ERROR};
use browser_client::canary::{CanaryTally, CanaryVerdict};
use browser_client::policy::PendingQueue;
use browser_client::probe::Prober;
use browser_client::sct::{self, CheckedSct};
use clap::{Parser, Subcommand};
use ct_core::loglist::LogList;

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

/// `sct-audit check`'s exit codes (its `--help`; browser-client's docs).
/// With several SCTs, the first that applies in the order 2, 3, 4, 0.
const EXIT_CODES: &str = "\
Exit codes (5 first; with several SCTs, the first that applies in the order 2, 3, 4, 0):
  0  LOGGED: every SCT audited was found in the auditor's epoch. One audit is
     probabilistic: a never-logged SCT passes it with probability about the
     epoch's fill ratio (printed; about 0.12 at k = 8), at most 1/2 against an
     adversarial log.
  1  error: bad input, or the auditor could not be asked.
  2  NOT FOUND (certain for that epoch; re-checked in a later epoch with
     --queue) or a misbehaviour report (NOT FOUND in two epochs).
  3  not auditable: an SCT's signature does not verify, its log is not in the
     log list, or this auditor does not track its log.
  4  pending: an SCT waits for the log's MMD, for the auditor's coverage, or
     for a later epoch (keep it with --queue and run again).
  5  the auditor is flagged: its canaries (random leaves no log holds, kept
     per auditor in the --queue file) answer LOGGED far more or far less
     often than the fill ratio it states; its answers cannot be trusted.";

/// Exit code when the canaries flag the auditor (before every other code).
const EXIT_AUDITOR_FLAGGED: i32 = 5;

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
    #[command(after_help = EXIT_CODES)]
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
        /// Send a misbehaviour report, if the audit produces one, to the
        /// auditor (`POST /v1/reports`). The report names the certificate:
        /// without this flag it is only printed.
        #[arg(long)]
        send_report: bool,
        /// Canary probes to send after the audits: random leaves no log
        /// holds, whose LOGGED rate must match the epoch's stated fill ratio
        /// (kept in the --queue file, per auditor, for the binomial test).
        #[arg(long, default_value_t = browser_client::audit::CANARIES_PER_STEP)]
        canaries: usize,
        /// When a query's group is unreachable, times out or answers 5xx,
        /// draw a fresh random database and ask it, at most this many
        /// times per query (docs/protocol.md §7.1; 0: never).
        #[arg(long, default_value_t = browser_client::fallback::MAX_REDRAWS)]
        max_redraws: u32,
        /// Deadline of one query with all its attempts (seconds).
        #[arg(long, default_value_t = 300)]
        query_deadline: u64,
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

/// (log list, chain, checked SCTs).
async fn load(c: &CertArgs) -> anyhow::Result<(LogList, Vec<Vec<u8>>, Vec<CheckedSct>)> {
    let list = sct::parse_log_list(&log_list(&c.log_list).await?)?;
    let mut chain = sct::parse_certificates(&read(&c.cert)?)?;
    if let Some(i) = &c.issuer {
        chain.extend(sct::parse_certificates(&read(i)?)?);
    }
    let leaf = chain[0].clone();
    let checked = match &c.sct {
        Some(p) => vec![sct::delivered_sct(&leaf, &read(p)?, &list)?],
        None if !sct::has_embedded_scts(&leaf)? => bail!(
            "the certificate has no embedded SCTs (its SCTs, if any, come by TLS or OCSP: \
             pass one with --sct)"
        ),
        None => {
            let issuer = chain.get(1).context(
                "the certificate's embedded SCTs need the issuer certificate to rebuild their \
                 leaf (--issuer, or a PEM chain in --cert)",
            )?;
            sct::embedded_scts(&leaf, issuer, &list)?
        }
    };
    if checked.is_empty() {
        bail!("the certificate's embedded SCT list is empty");
    }
    Ok((list, chain, checked))
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
        "signature   {}: {}",
        match &s.signature {
            sct::Signature::Valid => "verifies",
            sct::Signature::Invalid(_) => "DOES NOT VERIFY",
            sct::Signature::UnknownLog => "not checked",
        },
        s.signature
    );
}

use ct_core::civil::unix_now_ms as now_ms;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    // Usage errors exit with EXIT_ERROR, not clap's 2 (NOT FOUND here).
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        let _ = e.print();
        std::process::exit(if e.use_stderr() { EXIT_ERROR } else { 0 })
    });
    match cli.cmd {
        Cmd::Inspect { cert, json } => {
            let (_, _, checked) = load(&cert).await?;
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
            send_report,
            canaries,
            max_redraws,
            query_deadline,
        } => {
            let now = now.unwrap_or_else(now_ms);
            let (list, chain, checked) = load(&cert).await?;
            let auditor = browser_client::net::Auditor::new(&server)?.with_fallback(
                browser_client::fallback::FallbackPolicy {
                    max_redraws,
                    deadline_ms: query_deadline.saturating_mul(1000),
                    ..Default::default()
                },
            );
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
            let canary = if canaries > 0 {
                let (manifest, _) = auditor.manifest().await?;
                let prober = Prober::new(std::sync::Arc::new(manifest));
                let mut tally = q
                    .canaries
                    .take()
                    .unwrap_or_else(|| CanaryTally::new(auditor.base()));
                let run = run_canaries(&auditor, &prober, &mut tally, canaries).await;
                q.canaries = Some(tally);
                q.save()?;
                Some(run?)
            } else {
                None
            };
            for o in &outcomes {
                let log_id = o.log_id();
                let name = list
                    .find_by_log_id(log_id.as_bytes())
                    .map(|l| l.description.as_str());
                let leaf = match o {
                    Outcome::Pending { leaf_hash, .. }
                    | Outcome::Logged { leaf_hash, .. }
                    | Outcome::NotFound { leaf_hash, .. } => format!(" leaf {leaf_hash}"),
                    Outcome::Misbehaviour(r) => format!(" leaf {}", r.leaf_hash),
                    Outcome::NotAuditable { .. } => String::new(),
                };
                println!(
                    "log {}{leaf}:\n  {}",
                    name.map_or_else(|| log_id.to_string(), |n| format!("{n} ({log_id})")),
                    o.message(name)
                );
                match o {
                    Outcome::Logged {
                        filter,
                        upload_bytes,
                        download_bytes,
                        ..
                    } => println!(
                        "  (filter {filter}, {upload_bytes} B up, {download_bytes} B down)"
                    ),
                    Outcome::NotFound { filter, .. } => println!(
                        "  (filter {filter}{})",
                        if queue.is_some() {
                            ""
                        } else {
                            "; without --queue nothing remembers the re-check"
                        }
                    ),
                    Outcome::Misbehaviour(r) => {
                        println!("MISBEHAVIOUR REPORT:\n{}", serde_json::to_string_pretty(r)?);
                        if send_report {
                            match auditor.send_report(r).await {
                                Ok(receipt) => println!(
                                    "report sent to {}: {}{}",
                                    auditor.base(),
                                    receipt.status,
                                    if receipt.duplicate {
                                        " (already reported)"
                                    } else {
                                        ""
                                    }
                                ),
                                Err(e) => eprintln!("sct-audit: the report was not accepted: {e}"),
                            }
                        } else {
                            println!(
                                "not sent (it names the certificate): pass --send-report, or POST the JSON above to {}{}",
                                auditor.base(),
                                audit_proto::report::REPORTS_PATH
                            );
                        }
                    }
                    _ => {}
                }
            }
            if let Some(run) = &canary {
                println!(
                    "auditor check ({} canaries this run, {} failed):\n  {}",
                    run.answered, run.failed, run.check.message
                );
            }
            let fb = auditor.fallback_stats();
            if fb.fallbacks > 0 {
                let reasons: Vec<String> = fb
                    .failures
                    .iter()
                    .map(|(k, v)| format!("{k} ×{v}"))
                    .collect();
                eprintln!(
                    "sct-audit: {} of {} attempts failed ({}); each query that failed was redrawn in a fresh random database",
                    fb.failures.values().sum::<u64>(),
                    fb.attempts,
                    reasons.join(", ")
                );
            }
            let flagged = canary
                .as_ref()
                .is_some_and(|r| r.check.verdict != CanaryVerdict::Consistent);
            let code = if flagged {
                EXIT_AUDITOR_FLAGGED
            } else {
                Verdict::of_all(&outcomes).exit_code()
            };
            if code != 0 {
                std::process::exit(code);
            }
        }
    }
    Ok(())
}
