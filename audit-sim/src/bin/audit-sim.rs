//! `audit-sim`: simulate a population of auditing browsers against a
//! running auditor, and turn the measurements into a cost report.
//!
//! ```sh
//! audit-sim simulate --server http://127.0.0.1:8080 --corpus corpus.jsonl \
//!     --log-list log_list.json --clients 50 --weeks 2 --out sim/
//! audit-sim cost-report --sim sim/sim-report.json --out sim/
//! audit-sim cost-report --sim sim/sim-report.json --out sim/ \
//!     --pir-bench b33.json --pir-bench b34.json --pir-bench b35.json
//! audit-sim batch-chart --title "Zen 3, AVX2" --out curve.svg b33-batch*.json
//! ```
//!
//! `cost-report` fits server answer times measured in process on this
//! machine (by default 2^20 … 2^30 bits, a few seconds), or, when
//! `--pir-bench` files are named, the times in those files only (add
//! `--measure-bits` to measure here as well). The report says which.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use audit_sim::cost::{self, Prices};
use audit_sim::sim::{self, SimConfig, SimReport};
use browser_client::net::RetryPolicy;
use browser_client::policy::AuditPolicy;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "Private SCT auditing: population simulator and cost report"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// M clients over W weeks, ≈ 20 audits a week each, over real HTTP.
    Simulate(SimulateArgs),
    /// Weekly cost per million clients from a simulation report.
    CostReport(CostArgs),
    /// The batch curve of `pir-bench --batch k --json` runs as an SVG chart.
    BatchChart(ChartArgs),
}

/// `batch-chart` options.
#[derive(clap::Args)]
pub struct ChartArgs {
    /// The chart's heading (name the machine here).
    #[arg(long, default_value = "SimplePIR batches on one core")]
    title: String,
    /// The SVG file to write.
    #[arg(long)]
    out: PathBuf,
    /// `pir-bench --batch k --json` files of one database size, one or
    /// more runs each, one run per k.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// `simulate` options.
#[derive(clap::Args)]
pub struct SimulateArgs {
    /// Auditor base URL.
    #[arg(long)]
    server: String,
    /// Corpus of certificates (JSON lines; see audit_sim::sim::CorpusEntry).
    #[arg(long)]
    corpus: PathBuf,
    /// Log list v3 (log keys and MMDs).
    #[arg(long)]
    log_list: PathBuf,
    /// Simulated clients.
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Simulated weeks.
    #[arg(long, default_value_t = 2)]
    weeks: u32,
    /// TLS connections per client-week.
    #[arg(long, default_value_t = 1e4)]
    connections_per_week: f64,
    /// Fraction of connections audited.
    #[arg(long, default_value_t = 1e-3)]
    sampled_fraction: f64,
    /// SCTs audited per sampled connection.
    #[arg(long, default_value_t = 2)]
    audits_per_sample: u32,
    /// Probability that an audited SCT is one the log omitted.
    #[arg(long, default_value_t = 0.05)]
    omitted_fraction: f64,
    /// Probability that an audited SCT is forged.
    #[arg(long, default_value_t = 0.02)]
    forged_fraction: f64,
    /// Clients running concurrently.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Private random-bit probes to measure the fill ratio.
    #[arg(long, default_value_t = 200)]
    fill_probes: usize,
    /// Seconds to wait for a later epoch for re-checks.
    #[arg(long, default_value_t = 60)]
    recheck_timeout: u64,
    /// Seed of the simulation's choices (not of any cryptography).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Retries of a manifest request the auditor answers with 503 or 429.
    #[arg(long, default_value_t = 3)]
    max_retries: u32,
    /// Redraws of a query whose group is unreachable, times out or answers
    /// 5xx: a fresh query to a fresh random database (docs/protocol.md
    /// §7.1; 0: never).
    #[arg(long, default_value_t = browser_client::fallback::MAX_REDRAWS)]
    max_redraws: u32,
    /// Longest wait before a retry (s), whatever Retry-After says.
    #[arg(long, default_value_t = 30.0)]
    max_retry_wait: f64,
    /// Output directory (sim-report.json, queues/, reports/).
    #[arg(long, default_value = "sim")]
    out: PathBuf,
}

/// `cost-report` options.
#[derive(clap::Args)]
pub struct CostArgs {
    /// The simulator's sim-report.json.
    #[arg(long)]
    sim: PathBuf,
    /// Output directory (cost-report.md, .json, .svg).
    #[arg(long, default_value = "sim")]
    out: PathBuf,
    /// Database sizes (log2 bits) to time answers at on this machine, in
    /// process, for the fit [default without --pir-bench: every other size
    /// from 2^20 up to the largest that fits comfortably in this machine's
    /// memory (at most 2^35); with --pir-bench: none].
    #[arg(long, value_delimiter = ',')]
    measure_bits: Option<Vec<u32>>,
    /// Go further (or stay smaller) than the comfortable default: measure
    /// up to 2^B bits (e.g. 36 for the paper's 8 GiB; needs ~2.3× that in
    /// free memory).
    #[arg(long, value_name = "B")]
    max_measure_bits: Option<u32>,
    /// Batch sizes whose single-core pass is timed at the largest measured
    /// database, to price cross-client batching (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    batch_ks: Vec<usize>,
    /// Entries of the filter-build measurement behind the daily build cost.
    #[arg(long, default_value_t = audit_sim::scale::DEFAULT_BUILD_ENTRIES)]
    build_entries: u64,
    /// Answers timed per measured size, and rounds of the batch curve.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// `pir-bench --json` output with single-thread answer times to fit
    /// (repeatable); the report names the files.
    #[arg(long)]
    pir_bench: Vec<PathBuf>,
    /// USD per outbound GB.
    #[arg(long, default_value_t = 0.09)]
    usd_per_gb: f64,
    /// USD per core-second.
    #[arg(long, default_value_t = 1.5e-5)]
    usd_per_core_second: f64,
    /// USD per GiB-hour of server memory (fixed costs).
    #[arg(long, default_value_t = cost::DEFAULT_USD_PER_GIB_HOUR)]
    usd_per_gib_hour: f64,
    /// Extrapolation target: log2 of the filter size in bits.
    #[arg(long, default_value_t = 36)]
    target_db_bits: u32,
}

/// Runs the simulation and writes `out/sim-report.json`.
pub async fn simulate(a: &SimulateArgs) -> anyhow::Result<SimReport> {
    let list = browser_client::sct::parse_log_list(
        &std::fs::read(&a.log_list).with_context(|| format!("reading {}", a.log_list.display()))?,
    )?;
    let corpus = sim::read_corpus(&a.corpus)?;
    std::fs::create_dir_all(&a.out)?;
    let cfg = SimConfig {
        server: a.server.clone(),
        clients: a.clients,
        weeks: a.weeks,
        policy: AuditPolicy {
            connections_per_week: a.connections_per_week,
            sampled_fraction: a.sampled_fraction,
            audits_per_sample: a.audits_per_sample,
        },
        omitted_fraction: a.omitted_fraction,
        forged_fraction: a.forged_fraction,
        concurrency: a.concurrency,
        seed: a.seed,
        fill_probes: a.fill_probes,
        recheck_timeout: Duration::from_secs(a.recheck_timeout),
        queue_dir: Some(a.out.join("queues")),
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        retry: RetryPolicy {
            max_retries: a.max_retries,
            max_wait: Duration::try_from_secs_f64(a.max_retry_wait)
                .context("--max-retry-wait must be a non-negative number of seconds")?,
            ..RetryPolicy::default()
        },
        fallback: browser_client::fallback::FallbackPolicy {
            max_redraws: a.max_redraws,
            ..Default::default()
        },
    };
    let report = sim::simulate(cfg, corpus, list).await?;
    let path = a.out.join("sim-report.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    eprintln!("wrote {}", path.display());
    Ok(report)
}

/// Builds and writes the cost report.
pub fn cost_report(a: &CostArgs) -> anyhow::Result<cost::CostReport> {
    let sim: SimReport = serde_json::from_slice(
        &std::fs::read(&a.sim).with_context(|| format!("reading {}", a.sim.display()))?,
    )?;
    let measure_bits =
        cost::measure_bits_for(a.measure_bits.as_deref(), a.max_measure_bits, &a.pir_bench);
    let mut times = cost::answer_times(&measure_bits, a.trials, &a.pir_bench)?;
    eprintln!("server answer times {}", times.source.describe());
    if times.source.measured_here.is_some() {
        cost::measure_scale(&mut times, &a.batch_ks, a.build_entries, a.trials)?;
    }
    let prices = Prices {
        usd_per_outbound_gb: a.usd_per_gb,
        usd_per_core_second: a.usd_per_core_second,
        usd_per_gib_hour: a.usd_per_gib_hour,
    };
    let r = cost::build_report(&sim.measured, &times, &prices, a.target_db_bits)?;
    let paths = cost::write_report(&r, &a.out)?;
    eprintln!(
        "wrote {}, {}, {}",
        paths.markdown.display(),
        paths.json.display(),
        paths.svg.display()
    );
    Ok(r)
}

fn print_summary(r: &SimReport) {
    let d = &r.detection;
    println!("epochs seen            {:?}", r.epochs);
    println!(
        "audits (PIR queries)   {} ({:.1} per client-week)",
        d.logged_audits + d.omitted_audits + d.rechecks,
        r.measured.audits_per_client_week
    );
    println!(
        "logged SCTs found      {}/{}",
        d.logged_found, d.logged_audits
    );
    println!("omitted SCTs caught    {}/{} per audit = {:.3} (expected 1 − fill = {:.3}; fill {:.3} ± {:.3})", d.omitted_caught, d.omitted_audits, d.catch_rate_per_audit, d.expected_catch_rate, r.fill_ratio, r.fill_ratio_stderr);
    println!(
        "per client-week        {}/{} = {:.3}",
        d.client_weeks_caught, d.client_weeks_with_omitted, d.catch_rate_per_client_week
    );
    println!(
        "re-checks / reports    {} / {} (false reports {})",
        d.rechecks, d.reports, d.false_reports
    );
    println!(
        "forged SCTs rejected   {} (accepted {})",
        d.forged_rejected, d.forged_accepted
    );
    println!(
        "bytes per query        {:.0} up, {:.0} down",
        r.measured.upload_bytes_per_query, r.measured.download_bytes_per_query
    );
    println!(
        "server per query       {:.2} ms (mean batch {:.2})",
        r.measured.server_core_seconds_per_query * 1e3,
        r.measured.mean_batch
    );
    println!(
        "client per audit       {:.2} ms",
        r.measured.client_seconds_per_audit * 1e3
    );
    println!(
        "503/429 retries        {} ({:.1} s waited)",
        r.retries, r.retry_wait_seconds
    );
    let fb = &r.fallback;
    let reasons: Vec<String> = fb
        .failures
        .iter()
        .map(|(k, v)| format!("{k} ×{v}"))
        .collect();
    println!(
        "fallbacks              {} of {} attempts ({}); {} queries gave up; {:.1} s waited",
        fb.fallbacks,
        fb.attempts,
        if reasons.is_empty() {
            "none".to_owned()
        } else {
            reasons.join(", ")
        },
        fb.gave_up,
        fb.wait_seconds
    );
    let failed: Vec<String> = r
        .audit_failures
        .iter()
        .map(|(k, v)| format!("{k} ×{v}"))
        .collect();
    println!(
        "failed audits          {}{}",
        r.audits_failed,
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed.join(", "))
        }
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().cmd {
        Cmd::Simulate(a) => {
            let r = simulate(&a).await?;
            print_summary(&r);
        }
        Cmd::BatchChart(a) => {
            let curve = audit_sim::chart::load_batch_curve(&a.files)?;
            let svg = audit_sim::chart::render_batch_svg(&curve, &a.title);
            std::fs::write(&a.out, svg).with_context(|| format!("writing {}", a.out.display()))?;
            println!(
                "{}: {} runs of 2^{} bits, k = {}",
                a.out.display(),
                curve.points.len(),
                curve.db_bits,
                curve
                    .points
                    .iter()
                    .map(|p| p.k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Cmd::CostReport(a) => {
            let r = tokio::task::spawn_blocking(move || cost_report(&a)).await??;
            for row in &r.rows {
                if let Some(usd) = row.usd_per_million_clients_week {
                    println!(
                        "{:<60} ${usd:>10.0} per million clients per week",
                        row.scheme
                    );
                }
            }
        }
    }
    Ok(())
}
