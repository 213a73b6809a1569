//! `ct-testlog`: runs the local CT test log (the `ct_testlog` crate) until
//! killed.
//!
//! It issues `--omitted` SCTs it never logs, then logs `--entries`
//! certificates, and writes to `--out-dir`:
//!
//! | file | what |
//! |---|---|
//! | `log_list.json` | a Chrome v3 log list naming the log (under both `logs` and `tiled_logs`), written last |
//! | `issuer.pem`, `issuer.der` | the test CA certificate that issued every entry |
//! | `corpus.jsonl` | every issued certificate with its ground truth (`logged`, `omitted`, and `--forged` copies of separately delivered SCTs with a corrupted signature): the corpus `audit-sim simulate --corpus` reads |
//!
//! It prints the URL, the file paths, the origin, the log ID, the key and
//! the corpus counts, and keeps serving; with `--grow-by` it keeps issuing
//! entries (those are not added to the corpus). With `--wait-mmd` it first
//! waits one MMD and signs a new head, so an ingester's first pass already
//! counts every corpus SCT as due (use a short `--mmd`).
//!
//! ```text
//! ct-testlog --addr 127.0.0.1:8962 --entries 1000 --key-seed demo
//! ct-testlog --addr 127.0.0.1:8962 --entries 200 --mmd 10 --wait-mmd --out-dir /tmp/ct
//! ```

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::Parser;

use ct_testlog::corpus::{write_file, write_jsonl};
use ct_testlog::{
    issue_corpus, CorpusSpec, Misbehaviour, StartOptions, TestLog, TestLogConfig, Truth,
};

/// A local Certificate Transparency log (RFC 6962 and static-ct-api) that
/// issues real certificates and SCTs, for tests, demos and benchmarks.
#[derive(Parser, Debug)]
#[command(name = "ct-testlog", version)]
struct Args {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Entries to log before serving (all listed in the corpus).
    #[arg(long, short = 'n', default_value_t = 1000)]
    entries: usize,
    /// SCTs to issue but never log (precertificate-based certificates with
    /// an embedded SCT), listed in the corpus as `omitted`.
    #[arg(long, default_value_t = 20)]
    omitted: usize,
    /// Separately delivered SCTs of logged entries to list again with a
    /// corrupted signature, as `forged` (at most the number of those).
    #[arg(long, default_value_t = 10)]
    forged: usize,
    /// Fraction of entries issued as precertificates (final certificates
    /// with embedded SCTs); the rest are x509 entries.
    #[arg(long, default_value_t = 0.5)]
    precert_fraction: f64,
    /// Checkpoint origin; empty: the listening address (`127.0.0.1:PORT`),
    /// which makes the log list's submission URL the real one.
    #[arg(long, default_value = "")]
    origin: String,
    /// Most entries one get-entries answers.
    #[arg(long, default_value_t = 256)]
    max_get_entries: usize,
    /// Maximum merge delay announced in the log list, seconds.
    #[arg(long, default_value_t = 86_400)]
    mmd: u64,
    /// Before writing the output files, wait one MMD after the newest SCT
    /// and sign a new head, so the first head an ingester sees covers every
    /// corpus SCT. Use with a short --mmd.
    #[arg(long)]
    wait_mmd: bool,
    /// Validity of issued certificates, days (0 or less: already expired).
    #[arg(long, default_value_t = 90, allow_negative_numbers = true)]
    cert_lifetime_days: i64,
    /// Derive the log key from this seed, so the log ID is the same on
    /// every run (default: a random key).
    #[arg(long)]
    key_seed: Option<String>,
    /// Where to write log_list.json, issuer.pem / issuer.der and
    /// corpus.jsonl (default: a ct-testlog-PORT directory under the
    /// system's temporary directory).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Keep issuing: this many entries every --grow-interval-s seconds.
    #[arg(long, default_value_t = 0)]
    grow_by: usize,
    /// Seconds between growth steps.
    #[arg(long, default_value_t = 10)]
    grow_interval_s: u64,
    /// Misbehave from the start: none, rate-limit:N:SECONDS, truncate:N,
    /// wrong-root, fork, garbage.
    #[arg(long, default_value = "none")]
    misbehave: String,
}

fn parse_misbehaviour(s: &str) -> anyhow::Result<Misbehaviour> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |p: &str| {
        p.parse::<u64>()
            .with_context(|| format!("{p:?} is not a number"))
    };
    Ok(match parts.as_slice() {
        ["none"] => Misbehaviour::None,
        ["rate-limit", n, secs] => Misbehaviour::RateLimit {
            every_nth: u32::try_from(num(n)?).context("rate-limit N too large")?,
            retry_after_s: u32::try_from(num(secs)?).context("SECONDS too large")?,
        },
        ["truncate", n] => Misbehaviour::TruncateBatches {
            max: usize::try_from(num(n)?).context("truncate N too large")?,
        },
        ["wrong-root"] => Misbehaviour::WrongRoot,
        ["fork"] => Misbehaviour::ForkedTree,
        ["garbage"] => Misbehaviour::Garbage,
        _ => bail!("unknown misbehaviour {s:?}"),
    })
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = BASE64.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

async fn run(args: Args) -> anyhow::Result<()> {
    let misbehaviour = parse_misbehaviour(&args.misbehave)?;
    let cfg = TestLogConfig {
        origin: args.origin.clone(),
        max_get_entries: args.max_get_entries,
        mmd_seconds: args.mmd,
        cert_lifetime_days: args.cert_lifetime_days,
    };
    let opts = StartOptions {
        bind: args.addr,
        key_seed: args.key_seed.as_ref().map(|s| s.as_bytes().to_vec()),
    };
    let log = TestLog::start_with(cfg, opts).await?;
    let corpus = issue_corpus(
        &log,
        &CorpusSpec {
            logged: args.entries,
            omitted: args.omitted,
            forged: args.forged,
            precert_fraction: args.precert_fraction,
        },
    )
    .await?;
    if args.wait_mmd {
        log.publish_covering_head().await?;
    }
    log.set_misbehaviour(misbehaviour.clone());

    let dir = args.out_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ct-testlog-{}", log.local_addr().port()))
    });
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = |name: &str| -> PathBuf { dir.join(name) };
    let issuer_pem = path("issuer.pem");
    write_file(
        &issuer_pem,
        pem("CERTIFICATE", &log.issuer_der()).as_bytes(),
    )?;
    write_file(&path("issuer.der"), &log.issuer_der())?;
    let corpus_path = path("corpus.jsonl");
    write_jsonl(&corpus_path, &corpus.records)?;
    // Last: its appearance tells a waiting consumer that the rest is there.
    let list = path("log_list.json");
    write_file(&list, log.log_list_json().as_bytes())?;

    let counts = [Truth::Logged, Truth::Omitted, Truth::Forged].map(|t| corpus.count(t));
    drop(corpus);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "url: {}", log.base_url());
    let _ = writeln!(out, "log_list: {}", list.display());
    let _ = writeln!(out, "issuer: {}", issuer_pem.display());
    let _ = writeln!(out, "corpus: {}", corpus_path.display());
    let _ = writeln!(
        out,
        "corpus_entries: logged={} omitted={} forged={}",
        counts[0], counts[1], counts[2]
    );
    let _ = writeln!(out, "origin: {}", log.origin());
    let _ = writeln!(out, "log_id: {}", BASE64.encode(log.log_id()));
    let _ = writeln!(out, "key: {}", BASE64.encode(log.log_key_spki_der()));
    let _ = writeln!(out, "entries: {}", log.tree_size());
    let _ = writeln!(out, "misbehaviour: {misbehaviour:?}");
    let _ = out.flush();
    drop(out);

    if args.grow_by == 0 {
        std::future::pending::<()>().await;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(args.grow_interval_s.max(1)));
    tick.tick().await;
    loop {
        tick.tick().await;
        log.add_entries(args.grow_by, args.precert_fraction).await?;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "entries: {}", log.tree_size());
        let _ = out.flush();
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ct-testlog: {e:#}");
            ExitCode::FAILURE
        }
    }
}
