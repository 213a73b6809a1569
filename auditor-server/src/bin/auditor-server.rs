//! `auditor-server`: serve epochs, build one, or benchmark.
//!
//! ```sh
//! auditor-server serve --config auditor.toml
//! auditor-server build-epoch --database-url sqlite://ct-ingest.db --epoch-dir epochs
//! auditor-server epoch plan --config auditor.toml --out specs/next.json   # sharded mode
//! auditor-server build-epoch --config auditor.toml --shard-index 2 --epoch-spec specs/next.json
//! auditor-server reports list --status received   # misbehaviour reports in the store
//! auditor-server bench load --db-bits 30 --clients 1,4,16
//! auditor-server bench build --entries 100000,1000000
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use auditor_server::config::{redact_secrets, redact_url};
use auditor_server::error::error_chain;
use auditor_server::plan::{self, EpochSpec};
use auditor_server::{bench, epoch, memory, service::Service, Config};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "Private CT auditor: serves salted multi-Bloom filters over hintless YPIR"
)]
struct Cli {
    /// TOML configuration file (AUDITOR_* environment variables override it).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Entry store URL (overrides config and environment).
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Epoch directory (overrides config and environment).
    #[arg(long, global = true)]
    epoch_dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Shard overrides of `serve` and `build-epoch` (`[shard]`).
#[derive(clap::Args)]
struct ShardArgs {
    /// This server's shard number (overrides [shard] index).
    #[arg(long)]
    shard_index: Option<u32>,
    /// Number of shards (overrides [shard] count).
    #[arg(long)]
    shard_count: Option<u32>,
    /// Epoch spec file written by `epoch plan` (overrides [shard] epoch_spec).
    #[arg(long)]
    epoch_spec: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the newest epoch; build epochs on the configured schedule (or,
    /// sharded, those the epoch spec plans).
    Serve {
        /// Listen address (overrides config).
        #[arg(long)]
        bind: Option<String>,
        #[command(flatten)]
        shard: ShardArgs,
    },
    /// Build the next epoch from the store (with an epoch spec: this
    /// shard's databases of the planned epoch), persist it and exit (a
    /// running server picks it up at its next reload).
    BuildEpoch {
        /// Snapshot time (Unix seconds; default now; not with an epoch spec).
        #[arg(long)]
        now: Option<i64>,
        #[command(flatten)]
        shard: ShardArgs,
    },
    /// Epoch specs for sharded mode.
    Epoch {
        #[command(subcommand)]
        which: EpochCmd,
    },
    /// Misbehaviour reports (POST /v1/reports) stored in the entry store.
    Reports {
        #[command(subcommand)]
        which: ReportsCmd,
    },
    /// Benchmarks (JSON on stdout).
    Bench {
        #[command(subcommand)]
        which: bench::BenchCmd,
    },
}

#[derive(Subcommand)]
enum ReportsCmd {
    /// One line per report, oldest first: id, status (received, confirmed,
    /// refuted), received at, log, leaf hash, SCT timestamp, entry kind,
    /// epochs verified, confirmation attempts, the last attempt's note.
    List {
        /// Only reports with this status.
        #[arg(long, value_parser = ["received", "confirmed", "refuted"])]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 1000)]
        limit: u64,
    },
}

#[derive(Subcommand)]
enum EpochCmd {
    /// Snapshot the store, draw the epoch's salt and PIR seeds from the OS
    /// CSPRNG and write the epoch spec every shard builds from (its
    /// manifest with the shard map of [shard], and a digest of the set).
    /// Prints each shard's databases and memory estimate.
    Plan {
        /// Where to write the spec (default: [shard] epoch_spec).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Epoch id (default: one more than the spec already at --out, or
        /// than the newest epoch in the epoch directory, or 1).
        #[arg(long)]
        epoch: Option<u64>,
        /// Snapshot time (Unix seconds; default now).
        #[arg(long)]
        now: Option<i64>,
        /// Shard count (overrides [shard] count).
        #[arg(long)]
        shard_count: Option<u32>,
    },
}

impl ShardArgs {
    fn apply(&self, c: &mut Config) {
        if let Some(i) = self.shard_index {
            c.shard.index = i;
        }
        if let Some(n) = self.shard_count {
            c.shard.count = n;
        }
        if let Some(p) = &self.epoch_spec {
            c.shard.epoch_spec = Some(p.clone());
        }
    }
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut c = Config::load(cli.config.as_deref())?;
    if let Some(u) = &cli.database_url {
        c.database_url = Some(u.clone());
    }
    if let Some(d) = &cli.epoch_dir {
        c.epoch_dir = d.clone();
    }
    Ok(c)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // Every database URL the error could mention, for redaction.
    let mut urls: Vec<String> = cli.database_url.iter().cloned().collect();
    urls.extend(
        ["AUDITOR_DATABASE_URL", "DATABASE_URL"]
            .iter()
            .filter_map(|k| std::env::var(k).ok()),
    );
    match run(&cli, &mut urls).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = error_chain(e.as_ref());
            for u in &urls {
                msg = redact_secrets(&msg, u);
            }
            eprintln!("Error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// The command; `urls` collects the configured database URL once known.
async fn run(cli: &Cli, urls: &mut Vec<String>) -> anyhow::Result<()> {
    match &cli.cmd {
        Cmd::Serve { bind, shard } => {
            let mut config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            if let Some(b) = bind {
                config.bind = b.clone();
            }
            shard.apply(&mut config);
            config.validate()?;
            let listener = tokio::net::TcpListener::bind(&config.bind)
                .await
                .with_context(|| format!("binding {}", config.bind))?;
            let svc = Arc::new(Service::new(config)?);
            svc.run(listener, shutdown_signal()).await?;
            tracing::info!("shut down");
        }
        Cmd::BuildEpoch { now, shard } => {
            let mut config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            shard.apply(&mut config);
            config.validate()?;
            if config.shard.is_sharded() && config.shard.epoch_spec.is_none() {
                anyhow::bail!(
                    "shard {} of {}: a sharded build needs --epoch-spec (written by \
                     `auditor-server epoch plan`), so that every shard uses the same seeds",
                    config.shard.index,
                    config.shard.count
                );
            }
            if config.shard.epoch_spec.is_some() && now.is_some() {
                anyhow::bail!("--now does not apply with an epoch spec: its snapshot time does");
            }
            let store = ct_store::Store::connect(config.database_url())
                .await
                .with_context(|| {
                    format!(
                        "opening the entry store {}",
                        redact_url(config.database_url())
                    )
                })?;
            let dir = epoch::EpochDir::open(&config.epoch_dir)?;
            let mut bp = epoch::BuildParams::from_config(&config)?;
            bp.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let built = match &config.shard.epoch_spec {
                Some(p) => {
                    let (spec, _) = EpochSpec::read(p)?;
                    plan::build_from_spec(
                        &store,
                        &dir,
                        &spec,
                        &config.shard,
                        &bp,
                        config.epoch.keep,
                    )
                    .await
                }
                None => {
                    let now = now.unwrap_or_else(epoch::unix_now_s);
                    epoch::build_next(&store, &dir, bp, config.epoch.keep, now).await
                }
            };
            store.close().await;
            let (path, e) = built?;
            let report = serde_json::to_string_pretty(&e.report)?;
            println!("{report}");
            eprintln!("published {}", path.display());
        }
        Cmd::Epoch {
            which:
                EpochCmd::Plan {
                    out,
                    epoch: id,
                    now,
                    shard_count,
                },
        } => {
            let mut config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            if let Some(n) = shard_count {
                config.shard.count = *n;
            }
            config.shard.index = 0;
            config.validate()?;
            let out = out
                .clone()
                .or_else(|| config.shard.epoch_spec.clone())
                .context("no --out and no [shard] epoch_spec: where should the spec go?")?;
            let id = match id {
                Some(id) => *id,
                None => next_epoch_id(&out, &config)?,
            };
            let store = ct_store::Store::connect(config.database_url())
                .await
                .with_context(|| {
                    format!(
                        "opening the entry store {}",
                        redact_url(config.database_url())
                    )
                })?;
            let now = now.unwrap_or_else(epoch::unix_now_s);
            let spec = plan::plan_epoch(&store, &config, id, now).await;
            store.close().await;
            let spec = spec?;
            spec.write(&out)?;
            let m = &spec.manifest;
            let shards: Vec<serde_json::Value> = (0..config.shard.count)
                .map(|i| {
                    let own = match &m.shards {
                        Some(map) => map.databases_of(i, m.dbs.len() as u32),
                        None => (0..m.dbs.len() as u32).collect(),
                    };
                    let need = memory::need(m, &own, true)?;
                    Ok(serde_json::json!({
                        "shard": i,
                        "url": m.shards.as_ref().and_then(|s| s.urls.get(i as usize)),
                        "databases": own.len(),
                        "memory_serving_bytes": need.serving(),
                        "memory_build_peak_bytes": need.peak(),
                    }))
                })
                .collect::<anyhow::Result<_>>()?;
            let summary = serde_json::json!({
                "epoch": m.epoch,
                "snapshot_at": m.snapshot_at,
                "entries": m.entries,
                "databases": m.dbs.len(),
                "shards": shards,
            });
            println!("{}", serde_json::to_string_pretty(&summary)?);
            eprintln!("wrote {}", out.display());
        }
        Cmd::Reports {
            which: ReportsCmd::List { status, limit },
        } => {
            let config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            let status = status
                .as_deref()
                .map(str::parse::<ct_store::ReportStatus>)
                .transpose()?;
            let store = ct_store::Store::connect(config.database_url())
                .await
                .with_context(|| {
                    format!(
                        "opening the entry store {}",
                        redact_url(config.database_url())
                    )
                })?;
            let lines = auditor_server::reports::list(&store, status, *limit).await;
            store.close().await;
            let lines = lines?;
            for l in &lines {
                println!("{l}");
            }
            eprintln!("{} report(s)", lines.len());
        }
        Cmd::Bench { which } => {
            let out = bench::run(which).await?;
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
    }
    Ok(())
}

/// The id `epoch plan` gives the next epoch: one more than the spec
/// already at `out`, or than the newest epoch in the epoch directory, or 1.
fn next_epoch_id(out: &std::path::Path, config: &Config) -> anyhow::Result<u64> {
    let previous = match EpochSpec::read(out) {
        Ok((spec, _)) => Some(spec.manifest.epoch),
        Err(auditor_server::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            None
        }
        Err(e) => {
            return Err(e).with_context(|| format!("reading the previous spec {}", out.display()))
        }
    };
    let on_disk = if config.epoch_dir.is_dir() {
        epoch::EpochDir::open(&config.epoch_dir)?.latest()?
    } else {
        None
    };
    Ok(previous.max(on_disk).map_or(1, |n| n + 1))
}

/// Resolves on the first Ctrl-C or (on Unix) SIGTERM, what `docker stop`
/// and systemd send.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown requested: draining requests");
}
