//! `auditor-server`: serve epochs, build one, or benchmark.
//!
//! ```sh
//! auditor-server serve --config auditor.toml
//! auditor-server build-epoch --database-url sqlite://ct-ingest.db --epoch-dir epochs
//! auditor-server bench load --db-bits 30 --clients 1,4,16
//! auditor-server bench build --entries 100000,1000000
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use auditor_server::config::{redact_secrets, redact_url};
use auditor_server::error::error_chain;
use auditor_server::{bench, epoch, service::Service, Config};
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

#[derive(Subcommand)]
enum Cmd {
    /// Serve the newest epoch; build epochs on the configured schedule.
    Serve {
        /// Listen address (overrides config).
        #[arg(long)]
        bind: Option<String>,
    },
    /// Build the next epoch from the store, persist it and exit (a running
    /// server picks it up at its next reload).
    BuildEpoch {
        /// Snapshot time (Unix seconds; default now).
        #[arg(long)]
        now: Option<i64>,
    },
    /// Benchmarks (JSON on stdout).
    Bench {
        #[command(subcommand)]
        which: bench::BenchCmd,
    },
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
        Cmd::Serve { bind } => {
            let mut config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            if let Some(b) = bind {
                config.bind = b.clone();
            }
            config.validate()?;
            let listener = tokio::net::TcpListener::bind(&config.bind)
                .await
                .with_context(|| format!("binding {}", config.bind))?;
            let svc = Arc::new(Service::new(config)?);
            svc.run(listener, shutdown_signal()).await?;
            tracing::info!("shut down");
        }
        Cmd::BuildEpoch { now } => {
            let config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
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
            let now = now.unwrap_or_else(epoch::unix_now_s);
            let (path, e) = epoch::build_next(&store, &dir, bp, config.epoch.keep, now).await?;
            store.close().await;
            let report = serde_json::to_string_pretty(&e.report)?;
            println!("{report}");
            eprintln!("published {}", path.display());
        }
        Cmd::Bench { which } => {
            let out = bench::run(which).await?;
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
    }
    Ok(())
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
