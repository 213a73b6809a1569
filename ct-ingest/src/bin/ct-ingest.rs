//! `ct-ingest`: pull the configured CT logs into the entry store.
//!
//! ```text
//! ct-ingest migrate [--config ct-ingest.toml] [--database-url URL]
//! ct-ingest once  --config ct-ingest.toml
//! ct-ingest run   --config ct-ingest.toml [--daily HH:MM | --interval SECONDS]
//! ct-ingest bench --entries 100000 [--api rfc6962|static|both] [--database-url URL]
//! ```
//! `bench` exists only in a build with the `bench` feature (it brings in the
//! local test log, `ct-testlog`).
//! See docs/ingest.md for the configuration file and what each run verifies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ct_ingest::config::{Config, Schedule};
use ct_ingest::error::chain;
use ct_ingest::ingest::{run_once, IngestOptions, RunSummary, StoreHealth};

#[derive(Parser)]
#[command(about = "Ingest Certificate Transparency logs into the auditor's entry store")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Apply the store's migrations (DDL, for the owner role), create the
    /// monthly partitions ahead and drop the expired ones; then exit. Run
    /// it at installation, after each upgrade and monthly (docs/operator.md,
    /// "PostgreSQL on bare metal").
    Migrate {
        /// TOML configuration: its `database_url` (and the environment's
        /// `CT_INGEST_DATABASE_URL` / `DATABASE_URL`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The owner role's URL (overrides the configuration).
        #[arg(long)]
        database_url: Option<String>,
    },
    /// Ingest every selected log up to its current signed head, then prune
    /// expired entries.
    Once {
        /// TOML configuration (log list, database, per-log limits).
        #[arg(long)]
        config: PathBuf,
        /// Write Prometheus metrics here after the run (textfile collector).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
    },
    /// Ingest continuously: once now, then on a schedule (flags override the
    /// configuration's `[schedule]`). Ctrl-C stops between runs; an
    /// interrupted run resumes from the last verified position next time.
    Run {
        /// TOML configuration.
        #[arg(long)]
        config: PathBuf,
        /// Run daily at this UTC time (HH:MM).
        #[arg(long, conflicts_with = "interval")]
        daily: Option<String>,
        /// Run every N seconds.
        #[arg(long)]
        interval: Option<u64>,
        /// Write Prometheus metrics here after every run (textfile collector).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
    },
    /// Fill a local test log and measure entries/s ingested (JSON on stdout;
    /// built with `--features bench` only).
    #[cfg(feature = "bench")]
    Bench {
        /// Entries to issue and ingest.
        #[arg(long, default_value_t = 100_000)]
        entries: u64,
        /// `rfc6962`, `static` or `both` (one JSON line per API).
        #[arg(long, default_value = "rfc6962")]
        api: String,
        /// Store URL (default: a temporary SQLite file).
        #[arg(long)]
        database_url: Option<String>,
    },
}

/// How the logs of a finished run fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Logs {
    /// Every selected log was ingested.
    AllIngested,
    /// At least one was refused; `transient`: one of them for a reason that
    /// may go away by itself (database or log unreachable).
    Refused { transient: bool },
}

fn print_summary(summary: &RunSummary) -> Logs {
    let mut outcome = Logs::AllIngested;
    for (log, res) in &summary.logs {
        match res {
            Ok(r) => tracing::info!(
                log = %log.info.description,
                verified = r.verified_position,
                head = r.head_tree_size,
                inserted = r.inserted,
                "log ingested"
            ),
            Err(e) => {
                let transient =
                    e.is_transient() || matches!(outcome, Logs::Refused { transient: true });
                outcome = Logs::Refused { transient };
                tracing::error!(log = %log.info.description, error = %chain(e), "log refused");
            }
        }
    }
    tracing::info!(pruned = summary.pruned, "expired entries pruned");
    outcome
}

/// Per-log progress bars on a terminal; nothing otherwise (tracing logs
/// carry the same information).
fn progress() -> ct_ingest::ingest::Progress {
    use std::collections::HashMap;
    use std::sync::Mutex;
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return ct_ingest::ingest::Progress::default();
    }
    let multi = indicatif::MultiProgress::new();
    let bars: Mutex<HashMap<String, indicatif::ProgressBar>> = Mutex::new(HashMap::new());
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:40} [{bar:30}] {pos}/{len} entries ({per_sec}, eta {eta})",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    ct_ingest::ingest::Progress::new(move |log, done, total| {
        let mut bars = bars.lock().unwrap_or_else(|p| p.into_inner());
        let bar = bars.entry(log.to_owned()).or_insert_with(|| {
            let b = multi.add(indicatif::ProgressBar::new(total));
            b.set_style(style.clone());
            b.set_prefix(log.chars().take(40).collect::<String>());
            b
        });
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            bar.finish();
        }
    })
}

/// One run: ingest, record the metrics (failed or not) and write them to
/// `metrics_file`. A run that could not finish is an `Err` carrying its
/// full cause (the caller logs it, once).
async fn once(config: &Config, metrics_file: Option<&Path>) -> Result<Logs> {
    let file = metrics_file.map(Path::to_path_buf);
    let opts = IngestOptions {
        progress: progress(),
        // The store's gauge, in the metrics file within seconds of a change.
        store_health: StoreHealth::new(move |up| {
            ct_ingest::metrics::set_store_up(up);
            if let Some(path) = &file {
                save_metrics(path);
            }
        }),
        ..IngestOptions::default()
    };
    let result = run_once(config, &opts).await;
    let now_ms = unix_now() as u64 * 1000;
    match &result {
        Ok(summary) => ct_ingest::metrics::record_run(summary, now_ms),
        Err(e) => {
            if let ct_ingest::Error::Store(s) = e {
                if s.is_unreachable() || s.is_auth_failure() {
                    ct_ingest::metrics::set_store_up(false);
                }
            }
            ct_ingest::metrics::record_failed_run(now_ms)
        }
    }
    if let Some(path) = metrics_file {
        save_metrics(path);
    }
    match result {
        Ok(summary) => Ok(print_summary(&summary)),
        Err(e) if e.needs_operator() => Err(anyhow::Error::new(NeedsOperator(e))),
        Err(e) => Err(e.into()),
    }
}

/// A run failure that no retry cures (see `Error::needs_operator`): `run`
/// exits with it.
#[derive(Debug)]
struct NeedsOperator(ct_ingest::Error);

impl std::fmt::Display for NeedsOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for NeedsOperator {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Writes the metrics file; a failure is logged, not fatal (the ingest
/// itself is unaffected).
fn save_metrics(path: &Path) {
    if let Err(e) = write_metrics(path) {
        tracing::error!(error = %chain(e.as_ref()), "cannot write the metrics file");
    }
}

/// Writes the metrics to `path`, through a temporary file and a rename so
/// that a scraper never reads a half-written file.
fn write_metrics(path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, ct_ingest::metrics::render_prometheus())
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("writing {}", path.display()))
}

fn load_config(path: &Path) -> Result<Config> {
    Config::load(path).with_context(|| format!("loading {}", path.display()))
}

use ct_core::civil::unix_now_s as unix_now;

#[tokio::main]
async fn main() -> ExitCode {
    bin_support::init_tracing("info");
    match run_command(Cli::parse().cmd).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole cause chain on one line, each cause once.
            eprintln!("Error: {}", chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

async fn run_command(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Migrate {
            config,
            database_url,
        } => {
            let mut cfg = match &config {
                Some(path) => load_config(path)?,
                None => {
                    let mut c = Config::default();
                    c.apply_env(|k| std::env::var(k).ok())?;
                    c
                }
            };
            if let Some(url) = database_url {
                cfg.database_url = Some(url);
            }
            let url = ct_store::DatabaseUrl::parse(cfg.database_url()).context("database URL")?;
            let store = ct_store::Store::connect_and_migrate(url.expose())
                .await
                .with_context(|| format!("migrating the store at {url}"))?;
            store.close().await;
            tracing::info!(database = %url, "store schema up to date");
        }
        Cmd::Once {
            config,
            metrics_file,
        } => {
            let config = load_config(&config)?;
            match once(&config, metrics_file.as_deref())
                .await
                .context("ingest run failed")?
            {
                Logs::AllIngested => {}
                Logs::Refused { .. } => {
                    bail!("at least one log was refused (see the log lines above)")
                }
            }
        }
        Cmd::Run {
            config,
            daily,
            interval,
            metrics_file,
        } => {
            let mut config = load_config(&config)?;
            if daily.is_some() || interval.is_some() {
                config.schedule.daily = daily;
                config.schedule.interval_seconds = interval;
            }
            let schedule = config.schedule()?.unwrap_or(Schedule::Interval(3600));
            run_loop(&config, schedule, metrics_file.as_deref()).await?;
        }
        #[cfg(feature = "bench")]
        Cmd::Bench {
            entries,
            api,
            database_url,
        } => {
            use ct_ingest::bench::{run, BenchOptions};
            use ct_store::LogKind;
            let apis = match api.as_str() {
                "rfc6962" => vec![LogKind::Rfc6962],
                "static" => vec![LogKind::Static],
                "both" => vec![LogKind::Rfc6962, LogKind::Static],
                other => bail!("unknown --api {other}: use rfc6962, static or both"),
            };
            if let Some(url) = &database_url {
                ct_store::DatabaseUrl::parse(url).context("--database-url")?;
            }
            for api in apis {
                let report = run(&BenchOptions {
                    entries,
                    api,
                    database_url: database_url.clone(),
                    ..BenchOptions::default()
                })
                .await?;
                println!("{}", report.to_json());
            }
        }
    }
    Ok(())
}

/// `ct-ingest run`: a run now, then one per `schedule`, until a stop
/// signal. A run that fails, or in which a log is refused for a transient
/// reason (database or log unreachable), is retried sooner, after
/// `[schedule] retry_seconds` doubling per consecutive failure up to
/// `retry_max_seconds` (never later than the next scheduled run). A failure
/// no retry cures (wrong password, missing grant, schema to migrate) ends
/// the loop with that error.
async fn run_loop(config: &Config, schedule: Schedule, metrics_file: Option<&Path>) -> Result<()> {
    // One stop signal (Ctrl-C or SIGTERM) for the whole loop: during a run
    // it abandons the run (nothing is lost: the next one resumes from the
    // last verified commit), between runs it ends the wait.
    let stop = bin_support::stop_requested();
    tokio::pin!(stop);
    let mut failures = 0u32;
    loop {
        let start = unix_now();
        let outcome = tokio::select! {
            r = once(config, metrics_file) => r,
            _ = &mut stop => {
                tracing::info!("stop requested during a run; it resumes from the last verified commit next time");
                return Ok(());
            }
        };
        if matches!(&outcome, Err(e) if e.downcast_ref::<NeedsOperator>().is_some()) {
            // Wrong credentials, a missing grant, a schema to migrate:
            // retrying cannot help. Exit, so that the supervisor shows it.
            if let Err(e) = outcome {
                return Err(e.context("ingest run failed"));
            }
        }
        let next = schedule.seconds_until_next(unix_now(), Some(start));
        let wait = match outcome {
            Ok(Logs::AllIngested | Logs::Refused { transient: false }) => {
                failures = 0;
                tracing::info!(seconds = next, "next run scheduled");
                next
            }
            Ok(Logs::Refused { transient: true }) => {
                failures = failures.saturating_add(1);
                let wait = config.schedule.retry_delay(failures).min(next);
                tracing::warn!(
                    seconds = wait,
                    failures,
                    "a log was refused for a transient reason; retrying"
                );
                wait
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let wait = config.schedule.retry_delay(failures).min(next);
                tracing::error!(seconds = wait, failures, error = %chain(e.as_ref()), "run failed; retrying");
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(wait)) => {}
            _ = &mut stop => {
                tracing::info!("stop requested; exiting");
                return Ok(());
            }
        }
    }
}
