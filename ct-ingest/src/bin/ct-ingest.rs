//! `ct-ingest`: pull the configured CT logs into the entry store.
//!
//! ```text
//! ct-ingest once  --config ct-ingest.toml
//! ct-ingest run   --config ct-ingest.toml [--daily HH:MM | --interval SECONDS]
//! ct-ingest bench --entries 100000 [--api rfc6962|static] [--database-url URL]
//! ```
//! `bench` exists only in a build with the `bench` feature (it brings in the
//! local test log, `ct-testlog`).
//! See docs/ingest.md for the configuration file and what each run verifies.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ct_ingest::config::{Config, Schedule};
use ct_ingest::ingest::{run_once, IngestOptions, RunSummary};

#[derive(Parser)]
#[command(about = "Ingest Certificate Transparency logs into the auditor's entry store")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
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
        /// `rfc6962` or `static`.
        #[arg(long, default_value = "rfc6962")]
        api: String,
        /// Store URL (default: a temporary SQLite file).
        #[arg(long)]
        database_url: Option<String>,
    },
}

fn print_summary(summary: &RunSummary) -> bool {
    let mut ok = true;
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
                ok = false;
                tracing::error!(log = %log.info.description, error = %e, "log refused");
            }
        }
    }
    tracing::info!(pruned = summary.pruned, "expired entries pruned");
    ok
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

async fn once(config: &Config, metrics_file: Option<&PathBuf>) -> Result<bool> {
    let opts = IngestOptions {
        progress: progress(),
        ..IngestOptions::default()
    };
    let summary = run_once(config, &opts).await.context("ingest run failed")?;
    ct_ingest::metrics::record_run(&summary, unix_now() as u64 * 1000);
    if let Some(path) = metrics_file {
        // write-then-rename so a scraper never reads a half-written file
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, ct_ingest::metrics::render_prometheus())
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(print_summary(&summary))
}

use ct_core::civil::unix_now_s as unix_now;

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().cmd {
        Cmd::Once {
            config,
            metrics_file,
        } => {
            let config =
                Config::load(&config).with_context(|| format!("loading {}", config.display()))?;
            if !once(&config, metrics_file.as_ref()).await? {
                bail!("at least one log was refused (see the log lines above)");
            }
        }
        Cmd::Run {
            config,
            daily,
            interval,
            metrics_file,
        } => {
            let mut config =
                Config::load(&config).with_context(|| format!("loading {}", config.display()))?;
            if daily.is_some() || interval.is_some() {
                config.schedule.daily = daily;
                config.schedule.interval_seconds = interval;
            }
            let schedule = config.schedule()?.unwrap_or(Schedule::Interval(3600));
            // One stop signal (Ctrl-C or SIGTERM) for the whole loop: during
            // a pass it abandons the pass (nothing is lost: the next run
            // resumes from the last verified commit), between passes it ends
            // the wait.
            let stop = ct_ingest::signal::stop_requested();
            tokio::pin!(stop);
            loop {
                let start = unix_now();
                tokio::select! {
                    r = once(&config, metrics_file.as_ref()) => {
                        if let Err(e) = r {
                            tracing::error!(error = %e, "run failed; retrying at the next scheduled time");
                        }
                    }
                    _ = &mut stop => {
                        tracing::info!("stop requested during a pass; it resumes from the last verified commit next time");
                        break;
                    }
                }
                let wait = schedule.seconds_until_next(unix_now(), Some(start));
                tracing::info!(seconds = wait, "next run scheduled");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(wait)) => {}
                    _ = &mut stop => {
                        tracing::info!("stop requested; exiting");
                        break;
                    }
                }
            }
        }
        #[cfg(feature = "bench")]
        Cmd::Bench {
            entries,
            api,
            database_url,
        } => {
            use ct_ingest::bench::{run, BenchOptions};
            use ct_store::LogKind;
            let api = match api.as_str() {
                "rfc6962" => LogKind::Rfc6962,
                "static" => LogKind::Static,
                other => bail!("unknown --api {other}: use rfc6962 or static"),
            };
            let report = run(&BenchOptions {
                entries,
                api,
                database_url,
                ..BenchOptions::default()
            })
            .await?;
            println!("{}", report.to_json());
        }
    }
    Ok(())
}
