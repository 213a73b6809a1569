//! `auditor-server bench soak`: honest clients and junk against a real
//! `auditor-server serve` process, with a new epoch every minute.
//!
//! The server runs as a child process (this executable, `serve`) under a
//! lowered descriptor limit (`ulimit -n`, [`SoakArgs::server_nofile`]),
//! reloading epochs from its epoch directory every second, as a server
//! does whose epochs are built elsewhere (`auditor-server build-epoch`).
//! This process builds the epochs beforehand (one PIR database of
//! 2^db_bits bits over synthetic leaf hashes, fresh salts and seeds each
//! time, so that its builds do not compete with the server for the cores
//! during the run), publishes one every [`SoakArgs::epoch_every`] seconds
//! into that directory, and drives:
//!
//! * **honest clients** ([`SoakArgs::clients`]), each in a closed loop:
//!   fetch the manifest (again every 10 s, and when the epoch is no longer
//!   served), post a YPIR query for one bit of a filter, decode the answer
//!   and compare the bit with the filter built in the clear from the leaf
//!   hashes and the manifest's salts (half the bits at members' positions,
//!   half anywhere). A 503 with `Retry-After` is counted apart and retried
//!   after the delay it names; anything else that is not a correct answer
//!   is a failed query;
//! * **junk**, during the second phase only: random bytes, truncated and
//!   oversized bodies, a `Content-Length` far above the cap, wrong content
//!   types, queries for unknown epochs and databases, bad paths
//!   ([`SoakArgs::junk_tasks`] closed loops), slow-drip bodies (one byte
//!   every 2 s after a valid head), slowloris heads (one byte every 2 s),
//!   and more idle connections than the server's descriptor limit, each
//!   reopened when the server closes it.
//!
//! Phases: a warm-up (not counted), then [`SoakArgs::phase_seconds`]
//! without junk, then as long with junk. The report gives, per phase,
//! honest p50/p99/max latency and throughput, failed queries, 503s
//! retried, wrong bits, the server's peak RSS, open connections and
//! descriptors; and the junk sent and what it got back.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use audit_proto::api::{ErrorBody, OCTET_STREAM};
use audit_proto::{LeafHash, Manifest};
use ct_core::splitmix::SplitMix64;
use pir_core::client::{Client, QueryKey};
use pir_core::params::DbShape;
use pir_core::sampler::PublicSeed;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::config::Config;
use crate::epoch::{self, BuildParams, Snapshot};
use crate::epochdir::EpochDir;
use crate::error::{Error, Result};

/// Options of the soak run.
#[derive(Clone, Debug, clap::Args)]
pub struct SoakArgs {
    /// log2 of the database size in bits.
    #[arg(long, default_value_t = 30)]
    pub db_bits: u32,
    /// Honest clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of each phase (without junk, then with junk).
    #[arg(long, default_value_t = 300)]
    pub phase_seconds: u64,
    /// Warm-up seconds before the first phase (not counted).
    #[arg(long, default_value_t = 15)]
    pub warmup_seconds: u64,
    /// A new epoch every this many seconds.
    #[arg(long, default_value_t = 60)]
    pub epoch_every: u64,
    /// Slow-drip bodies (one byte every 2 s).
    #[arg(long, default_value_t = 64)]
    pub slow_drip: usize,
    /// Slowloris heads (one byte every 2 s).
    #[arg(long, default_value_t = 64)]
    pub slowloris: usize,
    /// Idle connections (0: the server's descriptor limit + 256).
    #[arg(long, default_value_t = 0)]
    pub idle: usize,
    /// The server's descriptor limit (`ulimit -n`).
    #[arg(long, default_value_t = 1024)]
    pub server_nofile: u64,
    /// Closed loops sending junk requests.
    #[arg(long, default_value_t = 8)]
    pub junk_tasks: usize,
    /// Pause between two junk requests of one loop (ms).
    #[arg(long, default_value_t = 20)]
    pub junk_pause_ms: u64,
    /// Answer pool threads of the server (0 = cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// The server's connection cap (`[limits] max_connections`).
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// The server's header, idle and body timeouts (ms).
    #[arg(long, value_delimiter = ',', default_value = "10000,30000,20000")]
    pub timeouts_ms: Vec<u64>,
    /// Tiny sizes for CI: 2^16-bit epochs, 8 clients, 8 s phases, a new
    /// epoch every 4 s, 8 slow bodies and heads, a server limit of 128
    /// descriptors, 1-2 s timeouts.
    #[arg(long)]
    pub tiny: bool,
}

impl SoakArgs {
    fn tiny(mut self) -> SoakArgs {
        if self.tiny {
            self.db_bits = 16;
            self.clients = 8;
            self.phase_seconds = 8;
            self.warmup_seconds = 2;
            self.epoch_every = 4;
            self.slow_drip = 8;
            self.slowloris = 8;
            self.idle = 0;
            self.server_nofile = 128;
            self.junk_tasks = 4;
            self.junk_pause_ms = 20;
            self.max_connections = 48;
            self.timeouts_ms = vec![1000, 2000, 1500];
        }
        self
    }
}

/// Honest figures of one phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PhaseReport {
    /// Phase name.
    pub phase: String,
    /// Seconds.
    pub seconds: f64,
    /// Correct answers received.
    pub queries: usize,
    /// Answers per second.
    pub qps: f64,
    /// Median latency of a query (ms, request to decoded answer).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Slowest query (ms).
    pub max_ms: f64,
    /// Queries that failed (not a 503 with Retry-After, not a correct
    /// answer).
    pub failed: usize,
    /// 503 answers with Retry-After, retried.
    pub retried_503: usize,
    /// `unknown_epoch` answers to a query for an epoch seen in the manifest
    /// (retired after its grace period), retried with a fresh manifest.
    pub stale_epoch: usize,
    /// Decoded bits that differ from the clear filter.
    pub wrong_bits: usize,
    /// Queries whose connection failed (reset, closed), retried once on a
    /// new connection; a second failure counts as failed.
    pub connection_errors_retried: usize,
    /// Some of those connection errors.
    pub connection_error_samples: Vec<String>,
    /// Epochs the honest clients queried.
    pub epochs_seen: Vec<u64>,
    /// The server's largest resident set (MiB), sampled twice a second.
    pub server_max_rss_mib: f64,
    /// The server's open connections (`auditor_open_connections`): max.
    pub open_connections_max: i64,
    /// The server's open descriptors (`/proc/<pid>/fd`): max.
    pub server_fds_max: usize,
    /// Some failures, for the record.
    pub failure_samples: Vec<String>,
}

/// Junk sent during the junk phase, by kind: requests and the statuses
/// they got (or `io` for a connection error).
#[derive(Clone, Debug, Default, Serialize)]
pub struct JunkReport {
    /// Kind → status → count.
    pub requests: BTreeMap<String, BTreeMap<String, usize>>,
    /// Answers that junk must never get (200, or a 5xx other than 503).
    pub unexpected: usize,
    /// Slow-drip connections opened (reopened after the server closed one).
    pub slow_drip_opened: usize,
    /// Slowloris connections opened.
    pub slowloris_opened: usize,
    /// Idle connections opened.
    pub idle_opened: usize,
    /// Idle connections the server closed.
    pub idle_closed_by_server: usize,
    /// Junk connections that could not even connect in 3 s (the listen
    /// backlog full).
    pub connect_timeouts: usize,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// Benchmark name.
    pub bench: &'static str,
    /// Options.
    pub db_bits: u32,
    /// |S| of each epoch.
    pub entries: u64,
    /// Database bytes (one database).
    pub db_bytes: u64,
    /// Query bytes.
    pub query_bytes: u64,
    /// Honest clients.
    pub clients: usize,
    /// Seconds between epochs.
    pub epoch_every_s: u64,
    /// Epochs published during the run (after the first).
    pub epochs_published: usize,
    /// Seconds each build took in this process (filters + DBSetup +
    /// persist), before the run.
    pub build_s: Vec<f64>,
    /// The server's descriptor limit.
    pub server_nofile: u64,
    /// The server's connection cap.
    pub max_connections: usize,
    /// Idle junk connections held.
    pub idle_connections: usize,
    /// Slow-drip and slowloris connections.
    pub slow_drip: usize,
    /// Slowloris connections.
    pub slowloris: usize,
    /// The memory bound the server's RSS must stay below (MiB), and how it
    /// follows from the configuration.
    pub rss_bound_mib: f64,
    /// How the bound is computed.
    pub rss_bound: String,
    /// Phases.
    pub phases: Vec<PhaseReport>,
    /// Junk.
    pub junk: JunkReport,
    /// p99 with junk ÷ p99 without.
    pub p99_ratio: f64,
    /// Whether every bar held: 0 failed, 0 wrong bits, p99 ratio ≤ 2, RSS
    /// within its bound, no unexpected junk answer.
    pub pass: bool,
}

/// The load's randomness (which leaf, which junk): SplitMix64 seeded by
/// the OS.
fn os_rng() -> SplitMix64 {
    let mut b = [0u8; 8];
    let _ = getrandom::getrandom(&mut b);
    SplitMix64(u64::from_le_bytes(b))
}

/// `n` junk bytes.
fn junk(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

/// One precomputed honest query with the bit the clear filter has there.
struct HonestQuery {
    db: u32,
    body: Vec<u8>,
    client: Arc<Client>,
    key: QueryKey,
    bit: u32,
    want: bool,
}

/// An epoch's honest queries.
struct EpochData {
    queries: Vec<HonestQuery>,
}

type EpochMap = Arc<RwLock<HashMap<u64, Arc<EpochData>>>>;

fn internal(e: impl std::fmt::Display) -> Error {
    Error::Internal(e.to_string())
}

/// Builds epoch `id` into `dir` (not yet published) and its honest
/// queries: `n` bits of 8 filters, checked against those filters built in
/// the clear.
fn build_one(
    dir: &EpochDir,
    id: u64,
    snap: &Snapshot,
    bp: &BuildParams,
    n: usize,
) -> Result<(PathBuf, EpochData, f64, u64)> {
    let out = dir.begin(id)?;
    let t = Instant::now();
    let built = epoch::build_epoch(snap, id, bp, &out)?;
    let build_s = t.elapsed().as_secs_f64();
    let m = built.manifest.clone();
    let db_bytes = built
        .server(0)
        .map_or(0, |s| s.database().as_bytes().len() as u64);
    drop(built);
    let mut rng = os_rng();
    let params = pir_core::params::by_id(m.pir.param_set)?;
    let filters: Vec<u32> = (0..8)
        .map(|_| rng.below(u64::from(m.filter.a)) as u32)
        .collect();
    let clear: Vec<Vec<bool>> = filters
        .iter()
        .map(|&f| {
            let mut bits = vec![false; m.filter.bits as usize];
            for h in &snap.hashes {
                if let Ok(b) = m.filter.bit(f, &LeafHash::new(*h)) {
                    bits[b as usize] = true;
                }
            }
            bits
        })
        .collect();
    let clients: Vec<Arc<Client>> = m
        .dbs
        .iter()
        .map(|d| {
            Client::new(
                params,
                DbShape {
                    ell1: d.rows as usize,
                    ell2: d.cols as usize,
                },
                PublicSeed(d.seed),
            )
            .map(Arc::new)
        })
        .collect::<std::result::Result<_, _>>()?;
    let mut queries = Vec::with_capacity(n);
    for i in 0..n {
        let j = i % filters.len();
        let f = filters[j];
        let bit = if i % 2 == 0 {
            let h = &snap.hashes[rng.below(snap.hashes.len() as u64) as usize];
            m.filter.bit(f, &LeafHash::new(*h))?
        } else {
            rng.below(m.filter.bits)
        };
        let (db, at) = m.locate(f, bit)?;
        let client = clients[db as usize].clone();
        let (q, key, b) = client.query_bit(m.dbs[db as usize].bits, at)?;
        queries.push(HonestQuery {
            db,
            body: q.to_bytes(),
            client,
            key,
            bit: b,
            want: clear[j][bit as usize],
        });
    }
    Ok((out, EpochData { queries }, build_s, db_bytes))
}

/// What the honest clients and samplers record, per phase.
#[derive(Default)]
struct PhaseAcc {
    lat_ms: Vec<f64>,
    failed: usize,
    retried_503: usize,
    stale_epoch: usize,
    wrong_bits: usize,
    epochs: std::collections::BTreeSet<u64>,
    max_rss_kib: u64,
    open_max: i64,
    fds_max: usize,
    samples: Vec<String>,
    transport_retried: usize,
    transport_samples: Vec<String>,
}

/// Shared run state.
struct Run {
    base: String,
    /// 0 warm-up, 1 without junk, 2 with junk, 3 done.
    phase: AtomicUsize,
    phases: Mutex<[PhaseAcc; 3]>,
    epochs: EpochMap,
    junk: Mutex<JunkReport>,
    junk_on: AtomicBool,
    open_now: AtomicU64,
}

impl Run {
    fn acc<R>(&self, phase: usize, f: impl FnOnce(&mut PhaseAcc) -> R) -> R {
        let mut g = self.phases.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g[phase.min(2)])
    }

    fn done(&self) -> bool {
        self.phase.load(Ordering::Relaxed) >= 3
    }

    fn junk_count(&self, kind: &str, status: String) {
        let mut j = self.junk.lock().unwrap_or_else(|p| p.into_inner());
        let unexpected = status == "200"
            || (status.starts_with('5') && status != "503")
            || status == "io-after-head";
        if unexpected {
            j.unexpected += 1;
        }
        *j.requests
            .entry(kind.to_owned())
            .or_default()
            .entry(status)
            .or_default() += 1;
    }

    fn junk_stat(&self, f: impl FnOnce(&mut JunkReport)) {
        f(&mut self.junk.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Runs the soak; returns its report.
pub async fn run(args: &SoakArgs) -> Result<SoakReport> {
    let args = args.clone().tiny();
    if !(12..=34).contains(&args.db_bits) {
        return Err(Error::Config("--db-bits must be in 12..=34".into()));
    }
    let [header_ms, idle_ms, body_ms] = args.timeouts_ms[..] else {
        return Err(Error::Config(
            "--timeouts-ms takes three values: header, idle, body".into(),
        ));
    };
    let idle_conns = if args.idle == 0 {
        args.server_nofile as usize + 256
    } else {
        args.idle
    };
    let tmp = tempfile::tempdir().map_err(crate::error::io(Path::new("tmp")))?;
    let epochs_dir = tmp.path().join("epochs");
    let dir = EpochDir::open(&epochs_dir)?;

    // The epochs: one database of 2^db_bits bits (a·k·N = 2^db_bits).
    let mut config = Config::default();
    config.epoch.db_bits_target = 1 << args.db_bits;
    let a = u64::from(config.epoch.filters);
    let k = u64::from(config.epoch.k);
    let entries = (((1u64 << args.db_bits) / (a * k)) / 8 * 8).max(8);
    let snap = Arc::new(Snapshot {
        now_s: epoch::unix_now_s(),
        hashes: (0..entries)
            .map(|i| {
                Sha256::new()
                    .chain_update(b"bench-soak")
                    .chain_update(i.to_le_bytes())
                    .finalize()
                    .into()
            })
            .collect(),
        coverage: Vec::new(),
    });
    let bp = BuildParams::from_config(&config)?;
    let n_queries = if args.tiny { 16 } else { 64 };
    let epochs: EpochMap = Arc::new(RwLock::new(HashMap::new()));
    eprintln!(
        "building epoch 1 (2^{} bits, {entries} entries)…",
        args.db_bits
    );
    let (out, data, first_build_s, db_bytes) = {
        let (dir, snap, bp) = (dir.clone(), snap.clone(), bp.clone());
        tokio::task::spawn_blocking(move || build_one(&dir, 1, &snap, &bp, n_queries))
            .await
            .map_err(internal)??
    };
    let query_bytes = data.queries.first().map_or(0, |q| q.body.len() as u64);
    epochs
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(1, Arc::new(data));
    dir.commit(1, &out)?;
    // The epochs published during the run, built beforehand so that the
    // run measures the server (loading and swapping epochs under load),
    // not this process's builds competing with it for the cores.
    let swaps = (args.warmup_seconds + 2 * args.phase_seconds) / args.epoch_every.max(1);
    let mut build_s = vec![first_build_s];
    let mut prebuilt = Vec::new();
    for id in 2..=swaps + 1 {
        eprintln!("building epoch {id} of {}…", swaps + 1);
        let (dir, snap, bp) = (dir.clone(), snap.clone(), bp.clone());
        let (out, data, secs, _) =
            tokio::task::spawn_blocking(move || build_one(&dir, id, &snap, &bp, n_queries))
                .await
                .map_err(internal)??;
        build_s.push(secs);
        prebuilt.push((id, out, data));
    }

    // The server, under its own descriptor limit.
    let cfg_path = tmp.path().join("auditor.toml");
    let grace = (args.epoch_every * 2).max(10);
    std::fs::write(
        &cfg_path,
        format!(
            "[epoch]\nkeep = 3\ngrace_seconds = {grace}\n\
             [schedule]\nbuild_if_missing = false\nreload_seconds = 1\n\
             [limits]\nthreads = {}\nmax_connections = {}\nheader_timeout_ms = {header_ms}\n\
             idle_timeout_ms = {idle_ms}\nbody_timeout_ms = {body_ms}\n",
            args.threads, args.max_connections
        ),
    )
    .map_err(crate::error::io(&cfg_path))?;
    let exe = std::env::current_exe().map_err(internal)?;
    let db_url = format!(
        "sqlite://{}?mode=rwc",
        tmp.path().join("unused.db").display()
    );
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {} && exec \"$0\" \"$@\"",
            args.server_nofile
        ))
        .arg(&exe)
        .arg("--config")
        .arg(&cfg_path)
        .args(["--database-url", &db_url, "--epoch-dir"])
        .arg(&epochs_dir)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("RUST_LOG", "warn,auditor_server::service=info")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(internal)?;
    let pid = child.id();
    let stderr = child.stderr.take().ok_or_else(|| internal("no stderr"))?;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<String>();
    let server_log = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let server_log = server_log.clone();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(a) = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("addr="))
                {
                    let _ = addr_tx.send(a.to_owned());
                }
                let mut g = server_log.lock().unwrap_or_else(|p| p.into_inner());
                if g.len() < 10_000 {
                    g.push(line);
                }
            }
        });
    }
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(300))
        .map_err(|_| internal("the server did not start listening"))?;
    let run = Arc::new(Run {
        base: format!("http://{addr}"),
        phase: AtomicUsize::new(0),
        phases: Mutex::new(Default::default()),
        epochs: epochs.clone(),
        junk: Mutex::new(JunkReport::default()),
        junk_on: AtomicBool::new(false),
        open_now: AtomicU64::new(0),
    });
    let result = drive(&run, &args, pid, &dir, prebuilt, idle_conns).await;
    let _ = child.kill();
    let _ = child.wait();
    let published = result?;

    // Report.
    let names = ["warm-up", "without junk", "with junk"];
    let mut phases = Vec::new();
    for (i, name) in names.iter().enumerate().skip(1) {
        let mut acc = run.acc(i, std::mem::take);
        acc.lat_ms.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if acc.lat_ms.is_empty() {
                0.0
            } else {
                acc.lat_ms[((acc.lat_ms.len() - 1) as f64 * p).round() as usize]
            }
        };
        phases.push(PhaseReport {
            phase: (*name).to_owned(),
            seconds: args.phase_seconds as f64,
            queries: acc.lat_ms.len(),
            qps: acc.lat_ms.len() as f64 / args.phase_seconds as f64,
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
            max_ms: acc.lat_ms.last().copied().unwrap_or(0.0),
            failed: acc.failed,
            retried_503: acc.retried_503,
            stale_epoch: acc.stale_epoch,
            wrong_bits: acc.wrong_bits,
            connection_errors_retried: acc.transport_retried,
            connection_error_samples: acc.transport_samples,
            epochs_seen: acc.epochs.iter().copied().collect(),
            server_max_rss_mib: acc.max_rss_kib as f64 / 1024.0,
            open_connections_max: acc.open_max,
            server_fds_max: acc.fds_max,
            failure_samples: acc.samples,
        });
    }
    let junk = run.junk.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let p99_ratio = if phases[0].p99_ms > 0.0 {
        phases[1].p99_ms / phases[0].p99_ms
    } else {
        0.0
    };
    // The bound: what the epochs held need (current, previous during its
    // grace period, and one being loaded), every connection's request
    // body at its largest (a query), and 256 MiB for the runtime, the
    // answer pool and the allocator.
    let m = Manifest::from_json(
        &std::fs::read(dir.path(1).join(crate::layout::MANIFEST_FILE))
            .or_else(|_| {
                let newest = dir.latest().ok().flatten().unwrap_or(1);
                std::fs::read(dir.path(newest).join(crate::layout::MANIFEST_FILE))
            })
            .map_err(internal)?,
    )?;
    let need = crate::memory::need(&m, &[0], false)?;
    let bound = 3 * need.serving()
        + need.transient
        + args.max_connections as u64 * query_bytes
        + (256 << 20);
    let rss_bound = format!(
        "3 epochs × {:.0} MiB served (current, previous in its grace period, one loading) + \
         {:.0} MiB load transient + {} connections × {:.2} MiB body + 256 MiB",
        need.serving() as f64 / 1048576.0,
        need.transient as f64 / 1048576.0,
        args.max_connections,
        query_bytes as f64 / 1048576.0
    );
    let rss_max = phases
        .iter()
        .map(|p| p.server_max_rss_mib)
        .fold(0.0, f64::max);
    let pass = phases.iter().all(|p| p.failed == 0 && p.wrong_bits == 0)
        && p99_ratio <= 2.0
        && rss_max <= bound as f64 / 1048576.0
        && junk.unexpected == 0;
    Ok(SoakReport {
        bench: "auditor-soak",
        db_bits: args.db_bits,
        entries,
        db_bytes,
        query_bytes,
        clients: args.clients,
        epoch_every_s: args.epoch_every,
        epochs_published: published,
        build_s,
        server_nofile: args.server_nofile,
        max_connections: args.max_connections,
        idle_connections: idle_conns,
        slow_drip: args.slow_drip,
        slowloris: args.slowloris,
        rss_bound_mib: bound as f64 / 1048576.0,
        rss_bound,
        phases,
        junk,
        p99_ratio,
        pass,
    })
}

/// The run itself: clients, samplers, junk and epoch swaps (publishing
/// the `prebuilt` epochs one by one) through the phases. Returns the
/// number of epochs published after the first.
async fn drive(
    run: &Arc<Run>,
    args: &SoakArgs,
    pid: u32,
    dir: &EpochDir,
    prebuilt: Vec<(u64, PathBuf, EpochData)>,
    idle_conns: usize,
) -> Result<usize> {
    let mut tasks = Vec::new();
    // Wait for epoch 1.
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(1)
        .build()
        .map_err(internal)?;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok(r) = probe.get(format!("{}/healthz", run.base)).send().await {
            if r.status() == 200 {
                break;
            }
        }
        if Instant::now() > deadline {
            return Err(internal("the server did not serve epoch 1"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Samplers: RSS and descriptors from /proc, open connections from
    // /metrics over one kept-alive connection (opened before the junk).
    {
        let run2 = run.clone();
        tasks.push(tokio::spawn(async move {
            let run = run2;
            while !run.done() {
                let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("VmRSS:"))
                            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                    })
                    .unwrap_or(0u64);
                let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
                let open = run.open_now.load(Ordering::Relaxed) as i64;
                let ph = run.phase.load(Ordering::Relaxed);
                run.acc(ph, |a| {
                    a.max_rss_kib = a.max_rss_kib.max(rss);
                    a.fds_max = a.fds_max.max(fds);
                    a.open_max = a.open_max.max(open);
                });
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
        let run = run.clone();
        let probe = probe.clone();
        tasks.push(tokio::spawn(async move {
            while !run.done() {
                if let Ok(r) = probe.get(format!("{}/metrics", run.base)).send().await {
                    if let Ok(t) = r.text().await {
                        if let Some(v) = t.lines().find_map(|l| {
                            l.strip_prefix("auditor_open_connections ")?
                                .trim()
                                .parse::<f64>()
                                .ok()
                        }) {
                            run.open_now.store(v as u64, Ordering::Relaxed);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
        }));
    }
    // Honest clients.
    for c in 0..args.clients {
        let run = run.clone();
        let idle_ms = args.timeouts_ms[1];
        tasks.push(tokio::spawn(async move { honest(run, c, idle_ms).await }));
    }
    // Epoch swaps.
    let swaps = {
        let run = run.clone();
        let (dir, every) = (dir.clone(), args.epoch_every);
        tokio::spawn(async move {
            let mut published = 0usize;
            let mut next_at = Instant::now() + Duration::from_secs(every);
            for (id, out, data) in prebuilt {
                tokio::time::sleep_until(next_at.into()).await;
                if run.done() {
                    break;
                }
                {
                    let mut g = run.epochs.write().unwrap_or_else(|p| p.into_inner());
                    g.insert(id, Arc::new(data));
                    g.retain(|&e, _| e + 3 >= id);
                }
                if let Err(e) = dir.commit(id, &out).and_then(|_| dir.prune(3)) {
                    eprintln!("soak: publishing epoch {id} failed: {e}");
                    return published;
                }
                published += 1;
                next_at += Duration::from_secs(every);
            }
            published
        })
    };
    // Phases.
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.warmup_seconds)).await;
    run.phase.store(1, Ordering::Relaxed);
    eprintln!(
        "soak: {} honest clients, {} s without junk…",
        args.clients, args.phase_seconds
    );
    tokio::time::sleep(Duration::from_secs(args.phase_seconds)).await;
    run.phase.store(2, Ordering::Relaxed);
    run.junk_on.store(true, Ordering::Relaxed);
    eprintln!(
        "soak: {} s with junk ({} slow-drip bodies, {} slowloris heads, {idle_conns} idle connections, \
         {} junk loops)…",
        args.phase_seconds, args.slow_drip, args.slowloris, args.junk_tasks
    );
    let query_len = run
        .epochs
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .next()
        .and_then(|d| d.queries.first().map(|q| q.body.len()))
        .unwrap_or(1024);
    let mut junk = Vec::new();
    for i in 0..args.junk_tasks {
        let (run, pause) = (run.clone(), args.junk_pause_ms);
        junk.push(tokio::spawn(
            async move { junk_requests(run, i, pause).await },
        ));
    }
    for _ in 0..args.slow_drip {
        let run = run.clone();
        junk.push(tokio::spawn(async move { slow_drip(run, query_len).await }));
    }
    for _ in 0..args.slowloris {
        let run = run.clone();
        junk.push(tokio::spawn(async move { slowloris(run).await }));
    }
    for _ in 0..idle_conns {
        let run = run.clone();
        junk.push(tokio::spawn(async move { idle(run).await }));
    }
    tokio::time::sleep(Duration::from_secs(args.phase_seconds)).await;
    run.junk_on.store(false, Ordering::Relaxed);
    run.phase.store(3, Ordering::Relaxed);
    eprintln!("soak: done after {:.0} s", t0.elapsed().as_secs_f64());
    for t in junk {
        t.abort();
    }
    for t in tasks {
        t.abort();
    }
    swaps.await.map_err(internal)
}

/// One honest client.
async fn honest(run: Arc<Run>, seed: usize, idle_ms: u64) {
    // A kept-alive connection is not reused once the server may be closing
    // it (its idle timeout), as browsers do.
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_millis(idle_ms / 2))
        .build()
    {
        Ok(h) => h,
        Err(_) => return,
    };
    let mut rng = os_rng();
    rng.0 ^= seed as u64;
    let mut manifest: Option<(u64, Instant)> = None;
    let mut retried = false;
    while !run.done() {
        let phase = run.phase.load(Ordering::Relaxed);
        let fail = |why: String| {
            run.acc(phase, |a| {
                a.failed += 1;
                if a.samples.len() < 20 {
                    a.samples.push(why);
                }
            })
        };
        // The manifest: again every 10 s.
        let epoch = match manifest {
            Some((e, at)) if at.elapsed() < Duration::from_secs(10) => e,
            _ => {
                let got = async {
                    let r = http
                        .get(format!("{}/v1/manifest", run.base))
                        .send()
                        .await
                        .map_err(|e| chain(&e))?;
                    let status = r.status();
                    let b = r.bytes().await.map_err(|e| e.to_string())?;
                    if status != 200 {
                        return Err(format!("manifest: HTTP {status}"));
                    }
                    Manifest::from_json(&b).map_err(|e| e.to_string())
                }
                .await;
                match got {
                    Ok(m) => {
                        manifest = Some((m.epoch, Instant::now()));
                        m.epoch
                    }
                    Err(e) => {
                        fail(e);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                }
            }
        };
        let data = run
            .epochs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&epoch)
            .cloned();
        let Some(data) = data else {
            fail(format!(
                "the manifest names epoch {epoch}, which was not published"
            ));
            manifest = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let q = &data.queries[rng.below(data.queries.len() as u64) as usize];
        let t = Instant::now();
        let sent = http
            .post(format!("{}/v1/epochs/{epoch}/dbs/{}/query", run.base, q.db))
            .header("content-type", OCTET_STREAM)
            .body(q.body.clone())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => {
                retried = false;
                r
            }
            Err(e) if !retried => {
                // A connection error: retried once on a new connection,
                // as a browser would, and counted apart.
                retried = true;
                run.acc(phase, |a| {
                    a.transport_retried += 1;
                    if a.transport_samples.len() < 10 {
                        a.transport_samples
                            .push(format!("epoch {epoch}: {}", chain(&e)));
                    }
                });
                continue;
            }
            Err(e) => {
                retried = false;
                fail(format!("epoch {epoch} (after a retry): {}", chain(&e)));
                continue;
            }
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => {
                fail(format!("epoch {epoch}: reading the answer: {e}"));
                continue;
            }
        };
        match status {
            200 => {
                let decoded = pir_core::wire::Response::from_bytes(&body)
                    .map_err(|e| e.to_string())
                    .and_then(|r| {
                        q.client
                            .extract_bit(&q.key, &r, q.bit)
                            .map_err(|e| e.to_string())
                    });
                let ms = t.elapsed().as_secs_f64() * 1e3;
                match decoded {
                    Ok(b) => run.acc(phase, |a| {
                        if b == q.want {
                            a.lat_ms.push(ms);
                            a.epochs.insert(epoch);
                        } else {
                            a.wrong_bits += 1;
                        }
                    }),
                    Err(e) => fail(format!("epoch {epoch}: undecodable answer: {e}")),
                }
            }
            503 if retry_after.is_some() => {
                run.acc(phase, |a| a.retried_503 += 1);
                let s = retry_after.unwrap_or(1).min(30);
                tokio::time::sleep(Duration::from_secs(s)).await;
            }
            404 if serde_json::from_slice::<ErrorBody>(&body)
                .is_ok_and(|b| b.error == audit_proto::api::ErrorCode::UnknownEpoch.as_str()) =>
            {
                run.acc(phase, |a| a.stale_epoch += 1);
                manifest = None;
            }
            s => fail(format!(
                "epoch {epoch}: HTTP {s}: {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            )),
        }
    }
}

/// An error and its sources, one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    crate::error::error_chain(e)
}

/// Connects with a 3 s timeout (a full listen backlog drops SYNs).
async fn connect(run: &Run) -> Option<TcpStream> {
    let addr = run.base.trim_start_matches("http://").to_owned();
    match tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr)).await {
        Ok(Ok(s)) => Some(s),
        _ => {
            run.junk_stat(|j| j.connect_timeouts += 1);
            tokio::time::sleep(Duration::from_millis(200)).await;
            None
        }
    }
}

/// Junk requests of every kind, in turn.
async fn junk_requests(run: Arc<Run>, seed: usize, pause_ms: u64) {
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
    {
        Ok(h) => h,
        Err(_) => return,
    };
    let mut rng = os_rng();
    rng.0 ^= seed as u64;
    let mut i = seed;
    while run.junk_on.load(Ordering::Relaxed) {
        let valid = {
            let g = run.epochs.read().unwrap_or_else(|p| p.into_inner());
            let newest = g.keys().max().copied();
            newest.and_then(|e| g.get(&e).map(|d| (e, d.clone())))
        };
        let Some((epoch, data)) = valid else { break };
        let q = &data.queries[rng.below(data.queries.len() as u64) as usize];
        let url = |e: u64, d: u32| format!("{}/v1/epochs/{e}/dbs/{d}/query", run.base);
        let kind = i % 9;
        i += 1;
        let (name, req) = match kind {
            0 => {
                let n = rng.below(q.body.len() as u64 + 1) as usize;
                (
                    "random-bytes",
                    http.post(url(epoch, q.db)).body(junk(&mut rng, n)),
                )
            }
            1 => {
                let n = rng.below(q.body.len() as u64) as usize;
                (
                    "truncated",
                    http.post(url(epoch, q.db)).body(q.body[..n].to_vec()),
                )
            }
            2 => {
                let mut b = q.body.clone();
                let n = 1 + rng.below(4096) as usize;
                b.extend(junk(&mut rng, n));
                ("oversized", http.post(url(epoch, q.db)).body(b))
            }
            3 => (
                "content-type-text",
                http.post(url(epoch, q.db))
                    .header("content-type", "text/plain")
                    .body(q.body.clone()),
            ),
            4 => (
                "content-type-json",
                http.post(url(epoch, q.db))
                    .header("content-type", "application/json")
                    .body(q.body.clone()),
            ),
            5 => (
                "unknown-epoch",
                http.post(url(epoch + 1_000_000, q.db)).body(q.body.clone()),
            ),
            6 => (
                "unknown-db",
                http.post(url(epoch, 4242)).body(q.body.clone()),
            ),
            7 => (
                "bad-path",
                http.get(format!("{}/v1/epochs/x%ff/dbs/-1/query", run.base)),
            ),
            _ => {
                // A Content-Length far above the cap: refused before the
                // body (which never comes).
                let status = huge_length(&run, epoch, q.db).await;
                run.junk_count("content-length-1e12", status);
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                continue;
            }
        };
        let req = if kind <= 2 || kind >= 5 {
            req.header("content-type", OCTET_STREAM)
        } else {
            req
        };
        let status = match req.send().await {
            Ok(r) => {
                let s = r.status().as_u16().to_string();
                let _ = r.bytes().await;
                s
            }
            Err(_) => "io".to_owned(),
        };
        run.junk_count(name, status);
        tokio::time::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// A head with `Content-Length: 10^12`; returns the status received.
async fn huge_length(run: &Run, epoch: u64, db: u32) -> String {
    let Some(mut s) = connect(run).await else {
        return "connect-timeout".into();
    };
    let head = format!(
        "POST /v1/epochs/{epoch}/dbs/{db}/query HTTP/1.1\r\nhost: soak\r\ncontent-type: {OCTET_STREAM}\r\n\
         content-length: 1000000000000\r\n\r\n"
    );
    if s.write_all(head.as_bytes()).await.is_err() {
        return "io".into();
    }
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
        Ok(Ok(n)) if n >= 12 => String::from_utf8_lossy(&buf[9..12]).into_owned(),
        Ok(_) => "io".into(),
        Err(_) => "no-answer-30s".into(),
    }
}

/// A valid head, then one body byte every 2 s, reconnecting when the
/// server closes.
async fn slow_drip(run: Arc<Run>, query_len: usize) {
    while run.junk_on.load(Ordering::Relaxed) {
        let Some(mut s) = connect(&run).await else {
            continue;
        };
        run.junk_stat(|j| j.slow_drip_opened += 1);
        let epoch = run
            .epochs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .max()
            .copied()
            .unwrap_or(1);
        let head = format!(
            "POST /v1/epochs/{epoch}/dbs/0/query HTTP/1.1\r\nhost: soak\r\ncontent-type: {OCTET_STREAM}\r\n\
             content-length: {query_len}\r\n\r\n"
        );
        if s.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        while run.junk_on.load(Ordering::Relaxed) {
            if s.write_all(&[0x5a]).await.is_err() {
                break;
            }
            let mut buf = [0u8; 512];
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {
                    // The server answered (408) and closes.
                    let status = String::from_utf8_lossy(&buf[9.min(n)..12.min(n)]).into_owned();
                    run.junk_count("slow-drip", status);
                    break;
                }
                Ok(_) => break,
                Err(_) => {}
            }
        }
    }
}

/// A head sent one byte every 2 s, reconnecting when the server closes.
async fn slowloris(run: Arc<Run>) {
    let head = b"GET /healthz HTTP/1.1\r\nhost: soak\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    while run.junk_on.load(Ordering::Relaxed) {
        let Some(mut s) = connect(&run).await else {
            continue;
        };
        run.junk_stat(|j| j.slowloris_opened += 1);
        let mut i = 0;
        while run.junk_on.load(Ordering::Relaxed) {
            if s.write_all(&[head[i % head.len()]]).await.is_err() {
                break;
            }
            i += 1;
            let mut buf = [0u8; 512];
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    run.junk_count("slowloris", "closed".into());
                    break;
                }
                Ok(Ok(n)) => {
                    let status = String::from_utf8_lossy(&buf[9.min(n)..12.min(n)]).into_owned();
                    run.junk_count("slowloris", status);
                    break;
                }
                Err(_) => {}
            }
        }
    }
}

/// A connection that sends nothing, reopened when the server closes it.
async fn idle(run: Arc<Run>) {
    while run.junk_on.load(Ordering::Relaxed) {
        let Some(mut s) = connect(&run).await else {
            continue;
        };
        run.junk_stat(|j| j.idle_opened += 1);
        let mut buf = [0u8; 64];
        loop {
            match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
                Ok(_) => {
                    run.junk_stat(|j| j.idle_closed_by_server += 1);
                    break;
                }
                Err(_) if !run.junk_on.load(Ordering::Relaxed) => return,
                Err(_) => {}
            }
        }
    }
}

/// The human summary of a report.
pub fn summary(r: &SoakReport) -> String {
    let mut s = format!(
        "soak: 2^{} bits ({} entries), {} honest clients, a new epoch every {} s ({} published, builds {:.1}–{:.1} s)\n",
        r.db_bits,
        r.entries,
        r.clients,
        r.epoch_every_s,
        r.epochs_published,
        r.build_s.iter().copied().fold(f64::INFINITY, f64::min),
        r.build_s.iter().copied().fold(0.0, f64::max),
    );
    for p in &r.phases {
        s += &format!(
            "  {:<13} {:>7} queries, {:>6.1} q/s, p50 {:>7.1} ms, p99 {:>7.1} ms, max {:>7.1} ms; failed {}, \
             503 retried {}, connection errors retried {}, stale epoch {}, wrong bits {}; server RSS ≤ {:.0} MiB, open connections ≤ {}, fds ≤ {}\n",
            p.phase,
            p.queries,
            p.qps,
            p.p50_ms,
            p.p99_ms,
            p.max_ms,
            p.failed,
            p.retried_503,
            p.connection_errors_retried,
            p.stale_epoch,
            p.wrong_bits,
            p.server_max_rss_mib,
            p.open_connections_max,
            p.server_fds_max
        );
    }
    let j = &r.junk;
    let total: usize = j.requests.values().flat_map(|m| m.values()).sum();
    s += &format!(
        "  junk: {total} requests ({} unexpected answers), slow-drip {} opened, slowloris {} opened, idle {} opened / {} closed by the server (server limit {} descriptors, cap {} connections), {} connects timed out\n",
        j.unexpected,
        j.slow_drip_opened,
        j.slowloris_opened,
        j.idle_opened,
        j.idle_closed_by_server,
        r.server_nofile,
        r.max_connections,
        j.connect_timeouts
    );
    s += &format!(
        "  p99 with junk / without: {:.2} (bar ≤ 2); RSS bound {:.0} MiB = {}\n  {}",
        r.p99_ratio,
        r.rss_bound_mib,
        r.rss_bound,
        if r.pass { "PASS" } else { "FAIL" }
    );
    s
}
