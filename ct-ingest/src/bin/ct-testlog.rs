//! `ct-testlog`: runs the local CT test log (`ct_ingest::testlog`) until
//! killed.
//!
//! It logs `--entries` certificates, writes a Chrome v3 log list naming the
//! log (under both `logs` and `tiled_logs`) and the test CA certificate to
//! `--out-dir`, prints the URL, the file paths, the origin, the log ID and
//! the key, and keeps serving; with `--grow-by` it keeps issuing entries.
//!
//! ```text
//! ct-testlog --addr 127.0.0.1:8962 --entries 1000 --key-seed demo
//! ```

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::Parser;

use ct_ingest::testlog::{Misbehaviour, StartOptions, TestLog, TestLogConfig};

/// A local Certificate Transparency log (RFC 6962 and static-ct-api) for
/// tests and demos.
#[derive(Parser, Debug)]
#[command(name = "ct-testlog", version)]
struct Args {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Entries to log before serving.
    #[arg(long, short = 'n', default_value_t = 1000)]
    entries: usize,
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
    /// Validity of issued certificates, days (0 or less: already expired).
    #[arg(long, default_value_t = 90, allow_negative_numbers = true)]
    cert_lifetime_days: i64,
    /// Derive the log key from this seed, so the log ID is the same on
    /// every run (default: a random key).
    #[arg(long)]
    key_seed: Option<String>,
    /// Where to write log_list.json and issuer.pem / issuer.der (default:
    /// a ct-testlog-PORT directory under the system's temporary directory).
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

fn parse_misbehaviour(s: &str) -> Result<Misbehaviour, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |p: &str| {
        p.parse::<u64>()
            .map_err(|_| format!("{p:?} is not a number"))
    };
    Ok(match parts.as_slice() {
        ["none"] => Misbehaviour::None,
        ["rate-limit", n, secs] => Misbehaviour::RateLimit {
            every_nth: u32::try_from(num(n)?).map_err(|_| "rate-limit N too large")?,
            retry_after_s: u32::try_from(num(secs)?).map_err(|_| "SECONDS too large")?,
        },
        ["truncate", n] => Misbehaviour::TruncateBatches {
            max: usize::try_from(num(n)?).map_err(|_| "truncate N too large")?,
        },
        ["wrong-root"] => Misbehaviour::WrongRoot,
        ["fork"] => Misbehaviour::ForkedTree,
        ["garbage"] => Misbehaviour::Garbage,
        _ => return Err(format!("unknown misbehaviour {s:?}")),
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

async fn run(args: Args) -> Result<(), String> {
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
    let log = TestLog::start_with(cfg, opts)
        .await
        .map_err(|e| e.to_string())?;
    log.add_entries(args.entries, args.precert_fraction)
        .await
        .map_err(|e| e.to_string())?;
    log.set_misbehaviour(misbehaviour.clone());

    let dir = args.out_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ct-testlog-{}", log.local_addr().port()))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, String> {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(p)
    };
    let list = write("log_list.json", log.log_list_json().as_bytes())?;
    let issuer_pem = write(
        "issuer.pem",
        pem("CERTIFICATE", &log.issuer_der()).as_bytes(),
    )?;
    write("issuer.der", &log.issuer_der())?;

    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "url: {}", log.base_url());
    let _ = writeln!(out, "log_list: {}", list.display());
    let _ = writeln!(out, "issuer: {}", issuer_pem.display());
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
        log.add_entries(args.grow_by, args.precert_fraction)
            .await
            .map_err(|e| e.to_string())?;
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
            eprintln!("ct-testlog: {e}");
            ExitCode::FAILURE
        }
    }
}
