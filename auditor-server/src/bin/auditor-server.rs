//! `auditor-server`: serve epochs, build one, or benchmark.
//!
//! ```sh
//! auditor-server serve --config auditor.toml
//! auditor-server build-epoch --database-url sqlite://ct-ingest.db --epoch-dir epochs
//! auditor-server epoch plan --config auditor.toml --out specs/next.json   # sharded mode
//! auditor-server build-epoch --config auditor.toml --shard-index 2 --epoch-spec specs/next.json
//! auditor-server epoch prepare --object-store s3://bucket/prefix        # coordinator
//! auditor-server serve --shard-index 2 --object-store s3://bucket/prefix
//! auditor-server epoch publish --object-store s3://bucket/prefix --timeout-seconds 14400
//! auditor-server reports list --status received   # misbehaviour reports in the store
//! auditor-server bench load --db-bits 30 --clients 1,4,16   # with --features bench
//! auditor-server bench build --entries 100000,1000000
//! auditor-server bench rehearse --entries 20000000 --filters 32 --shards 4 --json
//! ```
//!
//! `bench` exists only in a build with the `bench` feature (it brings in an
//! HTTP client the server does not need):
//! `cargo run --release -p auditor-server --features bench -- bench …`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
#[cfg(feature = "bench")]
use auditor_server::bench;
use auditor_server::config::{redact_secrets, redact_url};
use auditor_server::epochdir::EpochDir;
use auditor_server::error::error_chain;
use auditor_server::plan::{self, EpochSpec};
use auditor_server::service::{GroupBuild, Service};
use auditor_server::{epoch, Config};
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
    /// Object store of prepared epochs, file:///dir or s3://bucket/prefix
    /// (overrides [shard] object_store and AUDITOR_OBJECT_STORE).
    #[arg(long, global = true)]
    object_store: Option<String>,
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
        /// Never build: download this group's databases once a builder
        /// (`epoch build`) has uploaded them ([shard] build = false; needs
        /// an object store, read-only access suffices).
        #[arg(long)]
        no_build: bool,
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
    /// Epochs of sharded mode: specs, and the coordinator's object-store
    /// steps.
    Epoch {
        #[command(subcommand)]
        which: EpochCmd,
    },
    /// Misbehaviour reports (POST /v1/reports) stored in the entry store.
    Reports {
        #[command(subcommand)]
        which: ReportsCmd,
    },
    /// Benchmarks (JSON on stdout; built with `--features bench`).
    #[cfg(feature = "bench")]
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
    /// Coordinator: snapshot the store once, draw the epoch's seeds and
    /// write the sorted, checksummed snapshot and the epoch spec to the
    /// object store. The shards build their databases from it. Prints
    /// each shard's databases and memory estimate.
    Prepare {
        /// Epoch id (default: one more than the newest in the object store
        /// or the epoch directory, or 1).
        #[arg(long)]
        epoch: Option<u64>,
        /// Snapshot time (Unix seconds; default now).
        #[arg(long)]
        now: Option<i64>,
        /// Shard count (overrides [shard] count).
        #[arg(long)]
        shard_count: Option<u32>,
        /// Prepared epochs kept in the object store (older ones are
        /// deleted, never the newest published one).
        #[arg(long, default_value_t = 3)]
        keep: usize,
    },
    /// Builder of one group (e.g. one index of a Kubernetes Indexed Job):
    /// build this group's databases of the newest prepared epoch from the
    /// object store's snapshot, upload them and report the group ready,
    /// then exit. If the group is ready in it already, wait up to
    /// --wait-seconds for a newer prepared epoch (a builder started with
    /// the coordinator builds what it prepares). Prints what it did as
    /// JSON; exit status 0 also when nothing was left to build.
    Build {
        /// The group (overrides [shard] index).
        #[arg(long)]
        shard_index: Option<u32>,
        /// Number of groups (overrides [shard] count).
        #[arg(long)]
        shard_count: Option<u32>,
        /// How long to wait for a prepared epoch this group is not ready in.
        #[arg(long, default_value_t = 0)]
        wait_seconds: u64,
        /// How often to look.
        #[arg(long, default_value_t = 10)]
        poll_seconds: u64,
    },
    /// Coordinator: mark the newest prepared epoch published once every
    /// shard has reported ready, waiting up to --timeout-seconds. Exit
    /// status 0: published (or already was); 2: not every shard ready in
    /// time (the epoch stays unpublished, the shards keep serving the
    /// previous one); 1: any other error.
    Publish {
        /// The epoch (default: the newest prepared; an older one is refused).
        #[arg(long)]
        epoch: Option<u64>,
        /// How long to wait for the shards (0: check once).
        #[arg(long, default_value_t = 0)]
        timeout_seconds: u64,
        /// How often to look.
        #[arg(long, default_value_t = 10)]
        poll_seconds: u64,
    },
}

/// `epoch publish` gave up: not every shard reported ready in time (exit
/// status 2).
#[derive(Debug)]
struct PublishTimedOut(String);

impl std::fmt::Display for PublishTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PublishTimedOut {}

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
    if let Some(u) = &cli.object_store {
        c.shard.object_store = Some(u.clone());
    }
    Ok(c)
}

/// The configuration of a coordinator command (`epoch plan`, `epoch
/// prepare`): it acts as shard 0 of `--shard-count` (or `[shard] count`).
/// Its database URL goes into `urls`, for redaction from error messages.
fn load_coordinator_config(
    cli: &Cli,
    shard_count: Option<u32>,
    urls: &mut Vec<String>,
) -> anyhow::Result<Config> {
    let mut config = load_config(cli)?;
    urls.push(config.database_url().to_owned());
    if let Some(n) = shard_count {
        config.shard.count = n;
    }
    config.shard.index = 0;
    config.validate()?;
    Ok(config)
}

#[tokio::main]
async fn main() -> ExitCode {
    bin_support::init_tracing("info");
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
            if e.downcast_ref::<PublishTimedOut>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The command; `urls` collects the configured database URL once known.
async fn run(cli: &Cli, urls: &mut Vec<String>) -> anyhow::Result<()> {
    match &cli.cmd {
        Cmd::Serve {
            bind,
            no_build,
            shard,
        } => {
            let mut config = load_config(cli)?;
            urls.push(config.database_url().to_owned());
            if let Some(b) = bind {
                config.bind = b.clone();
            }
            if *no_build {
                config.shard.build = false;
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
            let store = open_store(&config).await?;
            let dir = EpochDir::open(&config.epoch_dir)?;
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
            let config = load_coordinator_config(cli, *shard_count, urls)?;
            let out = out
                .clone()
                .or_else(|| config.shard.epoch_spec.clone())
                .context("no --out and no [shard] epoch_spec: where should the spec go?")?;
            let id = match id {
                Some(id) => *id,
                None => next_epoch_id(&out, &config)?,
            };
            let store = open_store(&config).await?;
            let now = now.unwrap_or_else(epoch::unix_now_s);
            let spec = plan::plan_epoch(&store, &config, id, now).await;
            store.close().await;
            let spec = spec?;
            spec.write(&out)?;
            let summary = plan::shard_summary(&spec.manifest)?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            eprintln!("wrote {}", out.display());
        }
        Cmd::Epoch {
            which:
                EpochCmd::Prepare {
                    epoch: id,
                    now,
                    shard_count,
                    keep,
                },
        } => {
            let config = load_coordinator_config(cli, *shard_count, urls)?;
            let objects = open_objects(&config)?;
            // The snapshot first, then the id: a coordinator that took
            // long over its snapshot does not reuse an id another has
            // prepared meanwhile (and if two race, the spec is created
            // once: the loser fails with `EpochTaken`, having written
            // nothing).
            // Sorted on local disk (under the epoch directory), so the
            // coordinator's memory does not grow with |S|.
            let store = open_store(&config).await?;
            let now = now.unwrap_or_else(epoch::unix_now_s);
            let snap = epoch::SortedSnapshot::from_store(
                &store,
                now,
                &config.epoch_dir,
                epoch::DEFAULT_MAX_RUN,
            )
            .await;
            store.close().await;
            let snap = snap?;
            let id = match id {
                Some(id) => *id,
                None => {
                    let in_store = objects.epoch_ids().await?.last().copied();
                    let on_disk = if config.epoch_dir.is_dir() {
                        EpochDir::open(&config.epoch_dir)?.latest()?
                    } else {
                        None
                    };
                    in_store.max(on_disk).map_or(1, |n| n + 1)
                }
            };
            let spec = plan::plan_sorted(&snap, &config, id)?;
            let bytes = objects.prepare_sorted(&spec, &snap).await?;
            let gone = objects.prune((*keep).max(2)).await?;
            let mut summary = plan::shard_summary_for(&spec.manifest, true)?;
            summary["snapshot_bytes"] = bytes.into();
            summary["object_store"] = objects.to_string().into();
            summary["pruned_epochs"] = gone.into();
            println!("{}", serde_json::to_string_pretty(&summary)?);
            eprintln!("prepared epoch {id} in {objects}");
        }
        Cmd::Epoch {
            which:
                EpochCmd::Build {
                    shard_index,
                    shard_count,
                    wait_seconds,
                    poll_seconds,
                },
        } => {
            let mut config = load_config(cli)?;
            if let Some(i) = shard_index {
                config.shard.index = *i;
            }
            if let Some(n) = shard_count {
                config.shard.count = *n;
            }
            config.shard.build = true;
            config.validate()?;
            let (group, store) = (config.shard.index, open_objects(&config)?.to_string());
            let svc = Service::new(config)?;
            let done = svc
                .build_group(
                    std::time::Duration::from_secs(*wait_seconds),
                    std::time::Duration::from_secs((*poll_seconds).max(1)),
                )
                .await?;
            let (epoch, built) = match done {
                GroupBuild::Built { epoch } => (Some(epoch), true),
                GroupBuild::AlreadyReady { epoch } => (Some(epoch), false),
                _ => (None, false),
            };
            println!(
                "{}",
                serde_json::json!({
                    "group": group,
                    "epoch": epoch,
                    "built": built,
                    "report": built.then(|| svc.staged_report()).flatten(),
                })
            );
            match done {
                GroupBuild::Built { epoch } => {
                    eprintln!("group {group}: built epoch {epoch} and reported ready in {store}")
                }
                GroupBuild::AlreadyReady { epoch } => {
                    eprintln!("group {group}: already ready in epoch {epoch}; nothing to build")
                }
                _ => eprintln!("no epoch prepared in {store}; nothing to build"),
            }
        }
        Cmd::Epoch {
            which:
                EpochCmd::Publish {
                    epoch: id,
                    timeout_seconds,
                    poll_seconds,
                },
        } => {
            let config = load_config(cli)?;
            let objects = open_objects(&config)?;
            publish(&objects, *id, *timeout_seconds, *poll_seconds).await?;
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
            let store = open_store(&config).await?;
            let lines = auditor_server::reports::list(&store, status, *limit).await;
            store.close().await;
            let lines = lines?;
            for l in &lines {
                println!("{l}");
            }
            eprintln!("{} report(s)", lines.len());
        }
        #[cfg(feature = "bench")]
        Cmd::Bench {
            which: bench::BenchCmd::Rehearse(args),
        } => {
            let r = auditor_server::rehearse::run(args).await?;
            if args.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("{}", auditor_server::rehearse::summary(&r));
            }
            if !r.violations.is_empty() {
                anyhow::bail!(
                    "the rehearsal broke a bound of the bounded-memory build: {}",
                    r.violations.join("; ")
                );
            }
        }
        #[cfg(feature = "bench")]
        Cmd::Bench { which } => {
            let out = bench::run(which).await?;
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
    }
    Ok(())
}

/// Opens the entry store `config` names; errors name it without its password.
async fn open_store(config: &Config) -> anyhow::Result<ct_store::Store> {
    ct_store::Store::connect(config.database_url())
        .await
        .with_context(|| {
            format!(
                "opening the entry store {}",
                redact_url(config.database_url())
            )
        })
}

fn open_objects(config: &Config) -> anyhow::Result<auditor_server::objstore::Objects> {
    let url = config.shard.object_store.as_deref().context(
        "no object store: pass --object-store file:///dir or s3://bucket/prefix \
         (or set AUDITOR_OBJECT_STORE, or [shard] object_store)",
    )?;
    Ok(auditor_server::objstore::Objects::open(url)?)
}

/// `epoch publish`: waits up to `timeout_s` for every shard's ready
/// marker of epoch `id` (default: the newest prepared), then writes the
/// published marker. Object store failures while waiting are retried
/// until the deadline.
async fn publish(
    objects: &auditor_server::objstore::Objects,
    id: Option<u64>,
    timeout_s: u64,
    poll_s: u64,
) -> anyhow::Result<()> {
    use auditor_server::objstore::{PublishedMarker, TimedOutMarker};
    let newest = objects
        .newest_prepared()
        .await?
        .with_context(|| format!("no prepared epoch in {objects}"))?;
    let id = id.unwrap_or(newest);
    if id < newest {
        anyhow::bail!(
            "epoch {id} is older than the newest prepared epoch {newest}: only the newest is published"
        );
    }
    if objects.is_published(id).await? {
        eprintln!("epoch {id} is already published");
        return Ok(());
    }
    let spec = objects
        .spec(id)
        .await?
        .with_context(|| format!("epoch {id} is not prepared in {objects}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_s);
    let mut last = (Vec::new(), Vec::new());
    loop {
        match objects.ready_markers(&spec).await {
            Ok((ready, missing)) if missing.is_empty() => {
                let files = ready.iter().flat_map(|r| r.artifacts.clone()).collect();
                objects
                    .write_published(&PublishedMarker::for_spec(
                        &spec,
                        ready.len() as u32,
                        files,
                        epoch::unix_now_s(),
                    ))
                    .await?;
                println!(
                    "{}",
                    serde_json::json!({ "epoch": id, "published": true, "shards": ready.len() })
                );
                eprintln!("published epoch {id}: all {} shard(s) ready", ready.len());
                return Ok(());
            }
            Ok((ready, missing)) => last = (ready.iter().map(|r| r.shard).collect(), missing),
            Err(e) => tracing::warn!(error = %error_chain(&e), "object store: retrying"),
        }
        if std::time::Instant::now() >= deadline {
            break;
        }
        tracing::info!(epoch = id, ready = ?last.0, missing = ?last.1, "waiting for shards");
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        tokio::time::sleep(std::time::Duration::from_secs(poll_s.max(1)).min(left)).await;
    }
    let (ready, missing) = last;
    let marker = TimedOutMarker {
        epoch: id,
        ready,
        missing: missing.clone(),
        at: epoch::unix_now_s(),
    };
    if let Err(e) = objects.write_timed_out(&marker).await {
        tracing::warn!(error = %error_chain(&e), "could not record the timeout");
    }
    Err(PublishTimedOut(format!(
        "epoch {id} not published: shard(s) {missing:?} not ready after {timeout_s} s \
         (the shards keep serving the previous epoch)"
    ))
    .into())
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
        EpochDir::open(&config.epoch_dir)?.latest()?
    } else {
        None
    };
    Ok(previous.max(on_disk).map_or(1, |n| n + 1))
}

/// Resolves on the first Ctrl-C or (on Unix) SIGTERM, what `docker stop`
/// and systemd send.
async fn shutdown_signal() {
    let signal = bin_support::stop_requested().await;
    tracing::info!(signal, "shutdown requested: draining requests");
}
