//! `auditor-server bench rehearse`: the sharded pipeline at scale on one
//! machine, each step a separate process of this binary so that its peak
//! memory is its own (figures in docs/scale.md).
//!
//! 1. A SQLite store in the work directory is filled with n synthetic,
//!    well-formed entries of one log (distinct leaf hashes, active
//!    timestamps) through the store's commit path, in batches of
//!    [`FILL_BATCH`] rows per transaction.
//! 2. `epoch prepare` (the coordinator) writes the snapshot and spec to a
//!    local-directory object store (`file://`).
//! 3. `epoch build --shard-index i` for each shard in turn (the builder
//!    of one group): builds that shard's databases from the object
//!    store's snapshot, streamed, uploads them, reports ready, exits.
//! 4. `epoch publish`.
//! 5. Each shard in turn is started with `serve` on 127.0.0.1 port 0 (it
//!    serves the published epoch from what it built, without building
//!    again), and sampled members and non-members whose probed filter is
//!    on that shard are audited over HTTP with browser-client's
//!    `Prober` and `Auditor`: every member must read 1, and the
//!    non-members that read 1 must be as many as the shard's fill ratio
//!    predicts (within 5 standard deviations).
//!
//! The peak resident set of each process is its `VmHWM`
//! (`/proc/<pid>/status`), sampled every [`SAMPLE_EVERY`] until it exits.
//! The bounds checked are those of the bounded-memory build: the
//! coordinator within [`HEADROOM_BYTES`], each shard within its databases
//! (as [`crate::memory::Need::serving`] states them) plus
//! [`HEADROOM_BYTES`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use audit_proto::Manifest;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::objstore::Objects;

/// What the coordinator may hold, and what a shard may hold beyond its
/// databases: 512 MiB.
pub const HEADROOM_BYTES: u64 = 512 << 20;

/// Rows per store transaction while filling.
pub const FILL_BATCH: u64 = 100_000;

/// How often a child's `VmHWM` is read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// Non-member read-1 counts further than this many standard deviations
/// (plus one) from the fill ratio's prediction are wrong.
const FP_SIGMAS: f64 = 5.0;

/// `bench rehearse` options.
#[derive(Clone, Debug, clap::Args)]
pub struct RehearseArgs {
    /// Entries in the synthetic store (|S|).
    #[arg(long)]
    pub entries: u64,
    /// Filters a of the epoch.
    #[arg(long, default_value_t = 32)]
    pub filters: u32,
    /// Shards the epoch is built by (each one process).
    #[arg(long, default_value_t = 4)]
    pub shards: u32,
    /// Members audited, and as many non-members.
    #[arg(long, default_value_t = 64)]
    pub audits: u32,
    /// YPIR parameter set (default: the configuration's). An insecure set
    /// is accepted, for tests at tiny size.
    #[arg(long)]
    pub param_set: Option<String>,
    /// Bits per PIR database (default: the configuration's, 2^30); the
    /// filters are grouped into databases of about this size.
    #[arg(long)]
    pub db_bits_target: Option<u64>,
    /// Where the work directory (store, object store, epoch directories,
    /// each process's log) is made (default: $TMPDIR).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// The coordinator's epoch directory, where `epoch prepare` sorts the
    /// snapshot on disk (64 B per entry at most while it runs; default:
    /// in the work directory). A directory of its own, created and removed
    /// by the rehearsal, e.g. on another disk.
    #[arg(long)]
    pub coordinator_dir: Option<PathBuf>,
    /// Delete the store once the coordinator has prepared the epoch (it
    /// is not read again; frees its disk before the shards build).
    #[arg(long)]
    pub drop_store: bool,
    /// Keep the work directory (its path is in the report).
    #[arg(long)]
    pub keep: bool,
    /// Print the report as one JSON line (else a summary).
    #[arg(long)]
    pub json: bool,
}

/// One shard's part of the rehearsal.
#[derive(Clone, Debug, Serialize)]
pub struct ShardRun {
    /// Shard index.
    pub shard: u32,
    /// Its databases.
    pub databases: Vec<u32>,
    /// Filters in them.
    pub filters: u32,
    /// Wall seconds of its `epoch build` process.
    pub build_seconds: f64,
    /// Of which hashing entries into its filters (the build report).
    pub filters_seconds: f64,
    /// Of which YPIR DBSetup.
    pub setup_seconds: f64,
    /// Peak resident set of the build process (bytes).
    pub peak_rss_bytes: u64,
    /// Its databases as served (`memory::need(…).serving()`, bytes).
    pub database_bytes: u64,
    /// `database_bytes` + [`HEADROOM_BYTES`] − `peak_rss_bytes`
    /// (negative: over the bound).
    pub margin_bytes: i64,
    /// Wall nanoseconds of filling per entry and filter of this shard.
    pub fill_ns_per_entry_filter: f64,
    /// Fraction of its filters' bits set.
    pub fill_ratio: f64,
    /// Peak resident set of its `serve` process while audited (bytes).
    pub serve_peak_rss_bytes: u64,
    /// Members audited on this shard, and found.
    pub members_audited: u32,
    /// Members that read 1.
    pub members_found: u32,
    /// Non-members audited on this shard.
    pub non_members_audited: u32,
    /// Non-members that read 1.
    pub non_member_positives: u32,
}

/// The rehearsal's report.
#[derive(Clone, Debug, Serialize)]
pub struct Rehearsal {
    /// Benchmark name.
    pub bench: &'static str,
    /// |S|.
    pub entries: u64,
    /// Filters a.
    pub filters: u32,
    /// Shards.
    pub shards: u32,
    /// PIR databases of the epoch.
    pub databases: usize,
    /// YPIR parameter set.
    pub param_set: String,
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Cores available to this process.
    pub cores: usize,
    /// The machine's memory (`MemTotal`, bytes).
    pub memory_bytes: u64,
    /// Wall seconds filling the store.
    pub store_fill_seconds: f64,
    /// The store's size on disk (bytes).
    pub store_bytes: u64,
    /// Wall seconds of `epoch prepare`.
    pub prepare_seconds: f64,
    /// Peak resident set of `epoch prepare` (bytes).
    pub coordinator_peak_rss_bytes: u64,
    /// The snapshot object's size (bytes).
    pub snapshot_bytes: u64,
    /// Wall seconds of the slowest shard's build.
    pub build_seconds: f64,
    /// Wall seconds of every shard's build, one after another.
    pub build_seconds_total: f64,
    /// The largest peak resident set of a shard's build (bytes).
    pub shard_peak_rss_bytes: u64,
    /// That shard's databases (`memory::need(…).serving()`, bytes).
    pub shard_database_bytes: u64,
    /// The smallest margin of a shard under its bound (bytes; negative:
    /// over it).
    pub shard_margin_bytes: i64,
    /// Wall nanoseconds of filling per entry and filter, over all shards.
    pub fill_ns_per_entry_filter: f64,
    /// Wall seconds of `epoch publish`.
    pub publish_seconds: f64,
    /// Wall seconds of the audits (starting each shard's `serve` included).
    pub audit_seconds: f64,
    /// Members audited.
    pub members_audited: u32,
    /// Members that read 1.
    pub members_found: u32,
    /// Non-members audited.
    pub non_members_audited: u32,
    /// Non-members that read 1.
    pub non_member_positives: u32,
    /// Non-members expected to read 1 (the audited shards' fill ratios).
    pub non_member_positives_expected: f64,
    /// Every member found, and the non-members' positives consistent
    /// with the fill ratio.
    pub all_correct: bool,
    /// The object store's size after publishing (snapshot, spec,
    /// uploaded databases; bytes).
    pub object_store_bytes: u64,
    /// Per shard.
    pub shard: Vec<ShardRun>,
    /// The bounds broken (empty: none).
    pub violations: Vec<String>,
    /// The work directory, when kept.
    pub work_dir: Option<String>,
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error::Internal(e.to_string())
}

/// Leaf hash of synthetic entry `i` (members: `tag` = [`MEMBER_TAG`]).
fn leaf_hash(tag: &[u8], i: u64) -> [u8; 32] {
    Sha256::new()
        .chain_update(tag)
        .chain_update(i.to_le_bytes())
        .finalize()
        .into()
}

const MEMBER_TAG: &[u8] = b"auditor-rehearse/member";
const NON_MEMBER_TAG: &[u8] = b"auditor-rehearse/non-member";

/// Runs the rehearsal.
pub async fn run(args: &RehearseArgs) -> Result<Rehearsal> {
    if args.entries == 0 {
        return Err(Error::Config("--entries must be at least 1".into()));
    }
    if args.filters == 0 || args.filters > audit_proto::filter::MAX_FILTERS {
        return Err(Error::Config(format!(
            "--filters must be in 1..={}",
            audit_proto::filter::MAX_FILTERS
        )));
    }
    if args.shards == 0 || args.shards > 1024 {
        return Err(Error::Config("--shards must be in 1..=1024".into()));
    }
    let base = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).map_err(crate::error::io(&base))?;
    let tmp = tempfile::Builder::new()
        .prefix("rehearse-")
        .tempdir_in(&base)
        .map_err(crate::error::io(&base))?;
    let work = Work::new(tmp.path(), args)?;
    let out = work.run(args).await;
    let kept = if args.keep {
        Some(tmp.keep().display().to_string())
    } else {
        None
    };
    if let (Err(_), Some(p)) = (&out, &kept) {
        eprintln!("work directory kept: {p}");
    }
    let mut r = out?;
    r.work_dir = kept;
    Ok(r)
}

/// The files of one rehearsal.
struct Work {
    dir: PathBuf,
    exe: PathBuf,
    config: PathBuf,
    db_url: String,
    objects_url: String,
    /// The coordinator's epoch directory, and whether the rehearsal made
    /// it outside the work directory (then it removes it).
    coordinator: (PathBuf, Option<tempfile::TempDir>),
}

impl Work {
    fn new(dir: &Path, args: &RehearseArgs) -> Result<Work> {
        let exe = std::env::current_exe().map_err(internal)?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(crate::error::io(&logs))?;
        let objects = dir.join("objects");
        std::fs::create_dir_all(&objects).map_err(crate::error::io(&objects))?;
        // The shard map's URLs are placeholders: each shard is audited at
        // the address its `serve` reports, one shard at a time.
        let urls: Vec<String> = (0..args.shards)
            .map(|i| format!("\"http://shard-{i}.rehearsal.invalid:8080\""))
            .collect();
        let mut toml = format!("[epoch]\nfilters = {}\n", args.filters);
        if let Some(b) = args.db_bits_target {
            toml += &format!("db_bits_target = {b}\n");
        }
        if let Some(p) = &args.param_set {
            toml += &format!("param_set = {p:?}\nallow_insecure_params = true\n");
        }
        toml += &format!(
            "[schedule]\nreload_seconds = 1\n[shard]\ncount = {}\nurls = [{}]\n",
            args.shards,
            urls.join(", ")
        );
        let config = dir.join("auditor.toml");
        std::fs::write(&config, toml).map_err(crate::error::io(&config))?;
        let coordinator = match &args.coordinator_dir {
            Some(base) => {
                std::fs::create_dir_all(base).map_err(crate::error::io(base))?;
                let t = tempfile::Builder::new()
                    .prefix("rehearse-coordinator-")
                    .tempdir_in(base)
                    .map_err(crate::error::io(base))?;
                (t.path().to_owned(), Some(t))
            }
            None => (dir.join("coordinator"), None),
        };
        Ok(Work {
            coordinator,
            exe,
            config,
            db_url: format!("sqlite://{}?mode=rwc", dir.join("store.db").display()),
            objects_url: format!("file://{}", objects.display()),
            dir: dir.to_owned(),
        })
    }

    /// A command of this binary with the rehearsal's configuration; its
    /// stdout and stderr go to `logs/<name>.out` and `logs/<name>.log`.
    fn command(&self, name: &str, epoch_dir: &Path) -> Result<Command> {
        let out = self.dir.join(format!("logs/{name}.out"));
        let log = self.dir.join(format!("logs/{name}.log"));
        let mut c = Command::new(&self.exe);
        c.current_dir(&self.dir)
            .arg("--config")
            .arg(&self.config)
            .args(["--object-store", &self.objects_url])
            .arg("--epoch-dir")
            .arg(epoch_dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("AUDITOR_SHARD_URLS")
            .env_remove("AUDITOR_SHARD_COUNT")
            .env_remove("AUDITOR_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).map_err(crate::error::io(&out))?)
            .stderr(std::fs::File::create(&log).map_err(crate::error::io(&log))?);
        Ok(c)
    }

    /// Runs `c` to its end, sampling its peak memory.
    async fn measured(&self, name: &str, c: Command) -> Result<Measured> {
        let t = Instant::now();
        let mut child = spawn(c, name)?;
        let pid = child.id();
        let status = tokio::task::spawn_blocking(move || {
            let mut peak = 0u64;
            loop {
                peak = peak.max(peak_rss(pid).unwrap_or(0));
                match child.try_wait() {
                    Ok(Some(status)) => return Ok((status, peak)),
                    Ok(None) => std::thread::sleep(SAMPLE_EVERY),
                    Err(e) => return Err(e),
                }
            }
        })
        .await?
        .map_err(internal)?;
        let seconds = t.elapsed().as_secs_f64();
        let stdout = self.read_log(&format!("{name}.out"));
        if !status.0.success() {
            return Err(Error::Internal(format!(
                "{name} failed ({}):\n{}",
                status.0,
                tail(&self.read_log(&format!("{name}.log")), 30)
            )));
        }
        Ok(Measured {
            seconds,
            peak_rss_bytes: status.1,
            stdout,
        })
    }

    fn read_log(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join("logs").join(file)).unwrap_or_default()
    }

    async fn run(&self, args: &RehearseArgs) -> Result<Rehearsal> {
        let n = args.entries;
        let store_fill_seconds = self.fill_store(n).await?;
        let store_bytes = dir_bytes(&self.dir.join("store.db"))
            + ["store.db-wal", "store.db-shm"]
                .iter()
                .map(|f| dir_bytes(&self.dir.join(f)))
                .sum::<u64>();

        let bar = phase_bar("epoch prepare (coordinator)");
        let mut c = self.command("prepare", &self.coordinator.0)?;
        c.args(["--database-url", &self.db_url, "epoch", "prepare"])
            .args(["--shard-count", &args.shards.to_string()]);
        let prepare = self.measured("prepare", c).await?;
        bar.finish();
        let summary: serde_json::Value = serde_json::from_str(&prepare.stdout)?;
        let id = summary["epoch"]
            .as_u64()
            .ok_or_else(|| internal(format!("epoch prepare printed no epoch: {summary}")))?;
        let snapshot_bytes = summary["snapshot_bytes"].as_u64().unwrap_or(0);
        tracing::info!(
            epoch = id,
            seconds = prepare.seconds,
            peak_rss_mib = prepare.peak_rss_bytes >> 20,
            "prepared"
        );

        if args.drop_store {
            for f in ["store.db", "store.db-wal", "store.db-shm"] {
                let p = self.dir.join(f);
                if p.exists() {
                    std::fs::remove_file(&p).map_err(crate::error::io(&p))?;
                }
            }
        }
        let objects = Objects::open(&self.objects_url)?;
        let spec = objects
            .spec(id)
            .await?
            .ok_or_else(|| internal(format!("epoch {id} has no spec in the object store")))?;
        let m = spec.manifest;
        if m.entries != n {
            return Err(internal(format!(
                "the epoch has {} entries, the store {n}",
                m.entries
            )));
        }
        let mut shards = Vec::new();
        for i in 0..args.shards {
            let own = match &m.shards {
                Some(map) => map.databases_of(i, m.dbs.len() as u32),
                None => (0..m.dbs.len() as u32).collect(),
            };
            let database_bytes = crate::memory::need(&m, &own, false)?.serving();
            let filters: u32 = own.iter().map(|&d| m.dbs[d as usize].filters).sum();
            let bar = phase_bar(&format!("shard {i}: epoch build"));
            let name = format!("build-{i}");
            let mut c = self.command(&name, &self.dir.join(format!("shard-{i}")))?;
            c.args(["epoch", "build", "--shard-index", &i.to_string()])
                .args(["--shard-count", &args.shards.to_string()]);
            let built = self.measured(&name, c).await?;
            bar.finish();
            let out: serde_json::Value = serde_json::from_str(&built.stdout)?;
            let report = &out["report"];
            let f = |k: &str| report[k].as_f64().unwrap_or(0.0);
            let pairs = n as f64 * f64::from(filters);
            let run = ShardRun {
                shard: i,
                filters,
                build_seconds: built.seconds,
                filters_seconds: f("filters_s"),
                setup_seconds: f("setup_s"),
                peak_rss_bytes: built.peak_rss_bytes,
                database_bytes,
                margin_bytes: (database_bytes + HEADROOM_BYTES) as i64
                    - built.peak_rss_bytes as i64,
                fill_ns_per_entry_filter: if pairs > 0.0 {
                    f("filters_s") * 1e9 / pairs
                } else {
                    0.0
                },
                fill_ratio: f("fill_ratio"),
                databases: own,
                serve_peak_rss_bytes: 0,
                members_audited: 0,
                members_found: 0,
                non_members_audited: 0,
                non_member_positives: 0,
            };
            tracing::info!(
                shard = i,
                seconds = run.build_seconds,
                peak_rss_mib = run.peak_rss_bytes >> 20,
                databases_mib = run.database_bytes >> 20,
                "shard built"
            );
            shards.push(run);
        }

        let bar = phase_bar("epoch publish");
        let mut c = self.command("publish", &self.coordinator.0)?;
        c.args(["epoch", "publish", "--timeout-seconds", "0"]);
        let publish = self.measured("publish", c).await?;
        bar.finish();

        let t = Instant::now();
        let mut expected = 0.0;
        let mut variance = 0.0;
        for run in &mut shards {
            if run.databases.is_empty() {
                continue;
            }
            self.audit_shard(&m, run, args).await?;
            let p = run.fill_ratio;
            expected += f64::from(run.non_members_audited) * p;
            variance += f64::from(run.non_members_audited) * p * (1.0 - p);
        }
        let audit_seconds = t.elapsed().as_secs_f64();
        let sum = |g: fn(&ShardRun) -> u32| shards.iter().map(g).sum::<u32>();
        let members_audited = sum(|s| s.members_audited);
        let members_found = sum(|s| s.members_found);
        let non_members_audited = sum(|s| s.non_members_audited);
        let non_member_positives = sum(|s| s.non_member_positives);
        let fp_ok =
            (f64::from(non_member_positives) - expected).abs() <= FP_SIGMAS * variance.sqrt() + 1.0;
        let all_correct = members_audited > 0 && members_found == members_audited && fp_ok;

        let worst = shards
            .iter()
            .max_by_key(|s| s.peak_rss_bytes)
            .ok_or_else(|| internal("no shard"))?;
        let fill_s: f64 = shards.iter().map(|s| s.filters_seconds).sum();
        let mut violations = Vec::new();
        if prepare.peak_rss_bytes > HEADROOM_BYTES {
            violations.push(format!(
                "the coordinator peaked at {} MiB (bound {} MiB)",
                prepare.peak_rss_bytes >> 20,
                HEADROOM_BYTES >> 20
            ));
        }
        for s in &shards {
            if s.margin_bytes < 0 {
                violations.push(format!(
                    "shard {} peaked at {} MiB, over its databases' {} MiB + {} MiB",
                    s.shard,
                    s.peak_rss_bytes >> 20,
                    s.database_bytes >> 20,
                    HEADROOM_BYTES >> 20
                ));
            }
        }
        if members_found != members_audited {
            violations.push(format!(
                "{} of {members_audited} members not found",
                members_audited - members_found
            ));
        }
        if !fp_ok {
            violations.push(format!(
                "{non_member_positives} of {non_members_audited} non-members read 1, \
                 {expected:.1} expected from the fill ratio"
            ));
        }
        Ok(Rehearsal {
            bench: "auditor-rehearse",
            entries: n,
            filters: m.filter.a,
            shards: args.shards,
            databases: m.dbs.len(),
            param_set: pir_core::params::by_id(m.pir.param_set)?.name.to_string(),
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |c| c.get()),
            memory_bytes: mem_total(),
            store_fill_seconds,
            store_bytes,
            prepare_seconds: prepare.seconds,
            coordinator_peak_rss_bytes: prepare.peak_rss_bytes,
            snapshot_bytes,
            build_seconds: shards.iter().map(|s| s.build_seconds).fold(0.0, f64::max),
            build_seconds_total: shards.iter().map(|s| s.build_seconds).sum(),
            shard_peak_rss_bytes: worst.peak_rss_bytes,
            shard_database_bytes: worst.database_bytes,
            shard_margin_bytes: shards.iter().map(|s| s.margin_bytes).min().unwrap_or(0),
            fill_ns_per_entry_filter: fill_s * 1e9 / (n as f64 * f64::from(m.filter.a)),
            publish_seconds: publish.seconds,
            audit_seconds,
            members_audited,
            members_found,
            non_members_audited,
            non_member_positives,
            non_member_positives_expected: expected,
            all_correct,
            object_store_bytes: dir_bytes(&self.dir.join("objects")),
            shard: shards,
            violations,
            work_dir: None,
        })
    }

    /// Fills the store with `n` entries of one log; returns the seconds.
    async fn fill_store(&self, n: u64) -> Result<f64> {
        use ct_store::{Commit, Entry, LogKind, LogMeta, Store};
        let store = Store::connect_and_migrate(&self.db_url).await?;
        let log_id = <[u8; 32]>::from(Sha256::digest(b"auditor-rehearse/log")).into();
        store
            .upsert_log(&LogMeta {
                log_id,
                url: "https://rehearsal.invalid/log/".into(),
                mmd_s: 86_400,
                kind: LogKind::Rfc6962,
            })
            .await?;
        let bar = ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "filling the store {bar:40} {human_pos}/{human_len} entries, {per_sec}, eta {eta}",
            )
            .map_err(internal)?,
        );
        let t = Instant::now();
        let now = crate::epoch::unix_now_s();
        let logged_ms = (now as u64).saturating_sub(86_400) * 1000;
        let root = [0u8; 32];
        let mut start = 0u64;
        while start < n {
            let end = (start + FILL_BATCH).min(n);
            let entries: Vec<Entry> = tokio::task::spawn_blocking(move || {
                use rayon::prelude::*;
                (start..end)
                    .into_par_iter()
                    .map(|i| Entry {
                        leaf_index: i,
                        leaf_hash: leaf_hash(MEMBER_TAG, i).into(),
                        sct_timestamp_ms: logged_ms,
                        not_after: now + 90 * 86_400,
                    })
                    .collect()
            })
            .await?;
            store
                .commit(
                    Commit::new(&log_id, n, &root)
                        .entries(&entries)
                        .ingested_until_ms(logged_ms),
                )
                .await?;
            bar.set_position(end);
            start = end;
        }
        let active = store.count_active(now).await;
        store.close().await;
        bar.finish();
        if active? != n {
            return Err(internal("the store does not hold every entry as active"));
        }
        let s = t.elapsed().as_secs_f64();
        tracing::info!(entries = n, seconds = s, "store filled");
        Ok(s)
    }

    /// Serves shard `run.shard` and audits the members and non-members
    /// whose probed filter it holds.
    async fn audit_shard(
        &self,
        m: &Manifest,
        run: &mut ShardRun,
        args: &RehearseArgs,
    ) -> Result<()> {
        use browser_client::net::Auditor;
        use browser_client::probe::Prober;
        let i = run.shard;
        let bar = phase_bar(&format!("shard {i}: serve and audit"));
        let name = format!("serve-{i}");
        let mut c = self.command(&name, &self.dir.join(format!("shard-{i}")))?;
        c.args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--shard-index",
            &i.to_string(),
        ])
        .args(["--shard-count", &args.shards.to_string()]);
        let child = spawn(c, &name)?;
        let served = Served::watch(child);
        let result = async {
            let log = self.dir.join(format!("logs/{name}.log"));
            let base = self.wait_listening(&log, &served).await?;
            let auditor = Auditor::new(&base).map_err(internal)?;
            wait_serving(&auditor, m.epoch, &served, &log).await?;
            let (served_m, _) = auditor.manifest().await.map_err(internal)?;
            if &served_m != m {
                return Err(internal(format!(
                    "shard {i} serves another manifest than the spec's"
                )));
            }
            let prober = Prober::new(Arc::new(served_m));
            let own_filters: Vec<u32> = (0..m.filter.a)
                .filter(|&f| {
                    m.locate(f, 0)
                        .is_ok_and(|(db, _)| run.databases.contains(&db))
                })
                .collect();
            // Audit j probes filter j mod a; those on this shard are audited
            // here, each with a member and a non-member.
            let n = m.entries;
            for j in 0..u64::from(args.audits) {
                let f = (j % u64::from(m.filter.a)) as u32;
                if !own_filters.contains(&f) {
                    continue;
                }
                let member = leaf_hash(MEMBER_TAG, j * n / u64::from(args.audits));
                let outsider = leaf_hash(NON_MEMBER_TAG, j);
                for (h, is_member) in [(member, true), (outsider, false)] {
                    let mut q = prober.prepare_in(f, &h.into()).map_err(internal)?;
                    q.shard_url = None;
                    let (bit, _) = auditor.query(&q).await.map_err(internal)?;
                    if is_member {
                        run.members_audited += 1;
                        run.members_found += u32::from(bit);
                    } else {
                        run.non_members_audited += 1;
                        run.non_member_positives += u32::from(bit);
                    }
                }
            }
            Ok(())
        }
        .await;
        run.serve_peak_rss_bytes = served.stop();
        bar.finish();
        tracing::info!(
            shard = i,
            members = run.members_audited,
            found = run.members_found,
            non_members = run.non_members_audited,
            positives = run.non_member_positives,
            "shard audited"
        );
        result
    }

    /// The base URL `serve` reports listening on.
    async fn wait_listening(&self, log: &Path, served: &Served) -> Result<String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(addr) = text
                .lines()
                .filter(|l| l.contains("auditor-server listening"))
                .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("addr=")))
            {
                return Ok(format!("http://{addr}"));
            }
            if served.exited() || Instant::now() > deadline {
                return Err(internal(format!(
                    "serve did not listen:\n{}",
                    tail(&text, 30)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits until the shard serves epoch `id` (`/readyz`), however long
/// loading its databases takes, while the process lives.
async fn wait_serving(
    auditor: &browser_client::net::Auditor,
    id: u64,
    served: &Served,
    log: &Path,
) -> Result<()> {
    let url = format!("{}/readyz", auditor.base());
    let http = reqwest::Client::new();
    loop {
        if let Ok(r) = http.get(&url).send().await {
            if r.status().is_success() {
                let body = r.bytes().await.unwrap_or_default();
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                if v["epoch"].as_u64() == Some(id) {
                    return Ok(());
                }
            }
        }
        if served.exited() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(internal(format!(
                "serve exited before serving epoch {id}:\n{}",
                tail(&text, 30)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A finished child process.
struct Measured {
    seconds: f64,
    peak_rss_bytes: u64,
    stdout: String,
}

fn spawn(mut c: Command, name: &str) -> Result<Child> {
    c.spawn()
        .map_err(|e| internal(format!("starting {name}: {e}")))
}

/// A running `serve` process whose peak memory is sampled until it is
/// stopped.
struct Served {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    exited: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Served {
    fn watch(mut child: Child) -> Served {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let exited = Arc::new(AtomicBool::new(false));
        let (p, s, x) = (peak.clone(), stop.clone(), exited.clone());
        let thread = std::thread::spawn(move || {
            let pid = child.id();
            loop {
                p.fetch_max(peak_rss(pid).unwrap_or(0), Ordering::Relaxed);
                if !matches!(child.try_wait(), Ok(None)) {
                    x.store(true, Ordering::Relaxed);
                    return;
                }
                if s.load(Ordering::Relaxed) {
                    let _ = child.kill();
                    let _ = child.wait();
                    x.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(SAMPLE_EVERY * 10);
            }
        });
        Served {
            peak,
            stop,
            exited,
            thread,
        }
    }

    fn exited(&self) -> bool {
        self.exited.load(Ordering::Relaxed)
    }

    /// Stops the process; returns its peak resident set.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak.load(Ordering::Relaxed)
    }
}

fn phase_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner().with_message(what.to_owned());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `VmHWM` of process `pid` (bytes), while it runs.
fn peak_rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let kib: u64 = s
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// Bytes of the files under `p` (a file: its size; missing: 0).
fn dir_bytes(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(p)
        .map(|d| d.flatten().map(|e| dir_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A few lines for people.
pub fn summary(r: &Rehearsal) -> String {
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let mut s = format!(
        "{} entries, {} filters in {} databases, {} shards ({}; {} cores)\n\
         store fill {:.1} s; prepare {:.1} s, coordinator peak {:.0} MiB (bound {:.0} MiB)\n",
        r.entries,
        r.filters,
        r.databases,
        r.shards,
        r.cpu,
        r.cores,
        r.store_fill_seconds,
        r.prepare_seconds,
        mib(r.coordinator_peak_rss_bytes),
        mib(HEADROOM_BYTES),
    );
    for sh in &r.shard {
        s += &format!(
            "shard {}: {} databases, build {:.1} s, peak {:.0} MiB, databases {:.0} MiB, margin {:.0} MiB\n",
            sh.shard,
            sh.databases.len(),
            sh.build_seconds,
            mib(sh.peak_rss_bytes),
            mib(sh.database_bytes),
            sh.margin_bytes as f64 / f64::from(1u32 << 20),
        );
    }
    s += &format!(
        "publish {:.1} s; audits {:.1} s: {}/{} members found, {}/{} non-members read 1 ({:.1} expected); all correct: {}",
        r.publish_seconds,
        r.audit_seconds,
        r.members_found,
        r.members_audited,
        r.non_member_positives,
        r.non_members_audited,
        r.non_member_positives_expected,
        r.all_correct
    );
    if !r.violations.is_empty() {
        s += &format!("\nbounds broken: {}", r.violations.join("; "));
    }
    s
}
