//! `audit-demo` (README command 1): the whole pipeline on the embedded
//! default, with progress: local test log → certificates with SCTs (some
//! omitted, some forged) → ct-ingest into SQLite → epoch → auditor-server
//! on 127.0.0.1 → simulated browsers auditing over HTTP → cost report.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use audit_demo::{auditor_config, ingest, issue_corpus, sqlite_url, start_log, RunningAuditor};
use audit_sim::cost::{self, Prices};
use audit_sim::sim::{self, SimConfig};
use browser_client::net::RetryPolicy;
use browser_client::policy::AuditPolicy;
use clap::Parser;

#[derive(Parser)]
#[command(about = "Run the private CT auditor end to end on this machine")]
struct Args {
    /// Output directory (wiped first).
    #[arg(long, default_value = "target/demo")]
    out: PathBuf,
    /// Certificates the log issues and logs.
    #[arg(long, default_value_t = 2000)]
    logged: usize,
    /// SCTs the log issues but never logs.
    #[arg(long, default_value_t = 100)]
    omitted: usize,
    /// Logged certificates whose TLS-delivered SCT is also offered forged.
    #[arg(long, default_value_t = 50)]
    forged: usize,
    /// Simulated browsers.
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Simulated weeks.
    #[arg(long, default_value_t = 2)]
    weeks: u32,
    /// Probability that an audited SCT is an omitted one.
    #[arg(long, default_value_t = 0.05)]
    omitted_fraction: f64,
    /// Probability that an audited SCT is forged.
    #[arg(long, default_value_t = 0.02)]
    forged_fraction: f64,
    /// Seconds between epoch builds while the demo runs (re-checks of
    /// NotFound results need a later epoch).
    #[arg(long, default_value_t = 20)]
    epoch_interval: u64,
    /// Database sizes (log2 bits) whose answers the cost report times on
    /// this machine, in process [default without --pir-bench: every other
    /// size from 2^20 up to the largest that fits comfortably in memory, at
    /// most 2^35 (about a minute); with --pir-bench: none].
    #[arg(long, value_delimiter = ',')]
    measure_bits: Option<Vec<u32>>,
    /// Measure up to 2^B bits instead of the comfortable default (36: the
    /// paper's 8 GiB, needs ~20 GiB free).
    #[arg(long, value_name = "B")]
    max_measure_bits: Option<u32>,
    /// `pir-bench --json` output to fit the server time to, instead of
    /// measuring here unless --measure-bits is also given (repeatable); the
    /// report names the files.
    #[arg(long)]
    pir_bench: Vec<PathBuf>,
}

struct Steps {
    t0: Instant,
    n: usize,
}

impl Steps {
    fn step(&mut self, what: &str) {
        self.n += 1;
        eprintln!(
            "[{:>6.1} s] {}. {what}",
            self.t0.elapsed().as_secs_f64(),
            self.n
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    let mut s = Steps {
        t0: Instant::now(),
        n: 0,
    };
    if a.out.exists() {
        std::fs::remove_dir_all(&a.out).with_context(|| format!("cleaning {}", a.out.display()))?;
    }
    std::fs::create_dir_all(&a.out)?;
    let out = a.out.canonicalize()?;

    s.step("starting the local CT test log on 127.0.0.1");
    let log = start_log().await?;
    eprintln!("           {} (static-ct-api and RFC 6962)", log.base_url());

    s.step(&format!(
        "issuing {} omitted SCTs, then {} logged certificates ({} forged copies)",
        a.omitted, a.logged, a.forged
    ));
    let issued = issue_corpus(&log, a.logged, a.omitted, a.forged).await?;
    let corpus_path = out.join("corpus.jsonl");
    ct_testlog::corpus::write_jsonl(&corpus_path, &issued.records)?;

    s.step("ct-ingest: verifying and storing the log in SQLite");
    let db_url = sqlite_url(&out);
    let summary = ingest(&log, &out, &db_url).await?;
    for (sel, r) in &summary.logs {
        if let Ok(r) = r {
            eprintln!(
                "           {}: {} entries verified",
                sel.info.description, r.verified_position
            );
        }
    }

    s.step("auditor-server: building epoch 1 (768 salted filters, YPIR DBSetup) and serving it");
    let auditor =
        RunningAuditor::start(auditor_config(&out, &db_url, Some(a.epoch_interval))).await?;
    let served = auditor
        .service
        .state()
        .registry
        .current()
        .context("no epoch")?;
    if let Some(r) = &served.report {
        eprintln!(
            "           epoch {}: |S| = {}, {} database(s) of {:.1} MB, fill {:.4}, built in {:.2} s; {}",
            r.epoch, r.entries, r.dbs, r.db_bytes as f64 / 1e6 / r.dbs as f64, r.fill_ratio, r.total_s, auditor.url()
        );
    }
    drop(served);

    s.step(&format!(
        "simulating {} browsers for {} weeks (≈ 20 audits/week each) over HTTP",
        a.clients, a.weeks
    ));
    let list = browser_client::sct::parse_log_list(log.log_list_json().as_bytes())?;
    let sim_dir = out.join("sim");
    let cfg = SimConfig {
        server: auditor.url(),
        clients: a.clients,
        weeks: a.weeks,
        policy: AuditPolicy::default(),
        omitted_fraction: a.omitted_fraction,
        forged_fraction: a.forged_fraction,
        concurrency: 8,
        seed: 1,
        fill_probes: 200,
        recheck_timeout: Duration::from_secs(a.epoch_interval * 3 + 30),
        queue_dir: Some(sim_dir.clone()),
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        retry: RetryPolicy::default(),
        fallback: browser_client::fallback::FallbackPolicy::default(),
    };
    let report = sim::simulate(cfg, issued.corpus.clone(), list).await?;
    std::fs::write(
        sim_dir.join("sim-report.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    auditor.stop().await?;
    log.shutdown().await;

    let measure_bits =
        cost::measure_bits_for(a.measure_bits.as_deref(), a.max_measure_bits, &a.pir_bench);
    s.step(&if measure_bits.is_empty() {
        "cost report: fitting the named pir-bench answer times and extrapolating to 2^36 bits"
            .to_owned()
    } else {
        format!(
            "cost report: timing answers on this machine at {} database sizes and extrapolating to 2^36 bits",
            measure_bits.len()
        )
    });
    let times = tokio::task::spawn_blocking({
        let files = a.pir_bench.clone();
        move || -> anyhow::Result<cost::AnswerTimes> {
            let mut times = cost::answer_times(&measure_bits, 3, &files)?;
            if times.source.measured_here.is_some() {
                cost::measure_scale(
                    &mut times,
                    &audit_sim::scale::DEFAULT_BATCH_KS,
                    audit_sim::scale::DEFAULT_BUILD_ENTRIES,
                    3,
                )?;
            }
            Ok(times)
        }
    })
    .await??;
    eprintln!("           server answer times {}", times.source.describe());
    let cr = cost::build_report(&report.measured, &times, &Prices::default(), 36)?;
    let paths = cost::write_report(&cr, &out)?;

    let d = &report.detection;
    println!();
    println!(
        "== audit results ({} clients × {} weeks, epochs {:?}) ==",
        a.clients, a.weeks, report.epochs
    );
    println!(
        "logged SCTs audited      {:>5}   found: {} (must be all)",
        d.logged_audits, d.logged_found
    );
    println!(
        "omitted SCTs audited     {:>5}   caught at first audit: {} = {:.1} % (expected 1 − fill = {:.1} %, fill {:.3} ± {:.3} measured by {} private probes)",
        d.omitted_audits, d.omitted_caught, 100.0 * d.catch_rate_per_audit, 100.0 * d.expected_catch_rate, report.fill_ratio, report.fill_ratio_stderr, report.fill_probes
    );
    println!(
        "client-weeks with one    {:>5}   caught that week: {} = {:.1} %",
        d.client_weeks_with_omitted,
        d.client_weeks_caught,
        100.0 * d.catch_rate_per_client_week
    );
    println!(
        "re-checks in a later epoch {:>3}   misbehaviour reports: {} (false: {})",
        d.rechecks, d.reports, d.false_reports
    );
    println!(
        "forged SCTs              {:>5}   rejected by signature, not audited (accepted: {})",
        d.forged_rejected, d.forged_accepted
    );
    println!(
        "per query                {:.0} B up, {:.0} B down, server {:.2} ms (mean batch {:.2}), client {:.2} ms",
        report.measured.upload_bytes_per_query,
        report.measured.download_bytes_per_query,
        report.measured.server_core_seconds_per_query * 1e3,
        report.measured.mean_batch,
        report.measured.client_seconds_per_audit * 1e3
    );
    if report.retries > 0 {
        println!(
            "overloaded answers       {:>5}   retried after waiting {:.1} s in total (503/429, Retry-After)",
            report.retries, report.retry_wait_seconds
        );
    }
    println!();
    println!("== weekly cost per million clients ==");
    for row in &cr.rows {
        if let Some(usd) = row.usd_per_million_clients_week {
            println!("  {:<64} ${usd:>9.0}", row.scheme);
        }
    }
    println!();
    println!("cost report: {}", paths.markdown.display());
    println!(
        "             {} (chart), {} (data)",
        paths.svg.display(),
        paths.json.display()
    );
    println!("simulation:  {}", sim_dir.join("sim-report.json").display());
    if !report.report_files.is_empty() {
        println!(
            "misbehaviour reports: {} in {}",
            report.report_files.len(),
            sim_dir.join("reports").display()
        );
    }
    eprintln!("[{:>6.1} s] done", s.t0.elapsed().as_secs_f64());
    Ok(())
}
