//! Benchmarks (results and commands in docs/benchmarks.md). Both print
//! JSON; ratios are measured within one run.
//!
//! * `bench load`: one epoch whose single PIR database has 2^db_bits bits
//!   (|S| chosen so that a·k·N = 2^db_bits), served over real HTTP on
//!   127.0.0.1; c concurrent clients post precomputed queries for a fixed
//!   time; queries/s, p50/p99 latency and mean batch size per level, plus
//!   the in-process answer time of the same database for comparison
//!   (HTTP + batching overhead as a ratio).
//! * `bench soak`: honest clients and junk for minutes against a `serve`
//!   process ([`crate::soak`]; figures in docs/reliability.md).
//! * `bench build`: a SQLite store filled with n synthetic entries, then
//!   snapshot → filters → DBSetup → persist, and a reload of the persisted
//!   epoch (what a restart costs).
//! * `bench rehearse`: the sharded pipeline as separate processes of this
//!   binary on a synthetic store of n entries, with each process's peak
//!   memory against the bounds of the bounded-memory build
//!   ([`crate::rehearse`]; figures in docs/scale.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_core::client::Client;
use pir_core::sampler::PublicSeed;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::epoch::{self, BuildParams, Snapshot};
use crate::error::{Error, Result};
use crate::service::Service;

/// Which benchmark.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum BenchCmd {
    /// Queries/s and latency at several client concurrencies.
    Load {
        /// log2 of the database size in bits.
        #[arg(long, default_value_t = 30)]
        db_bits: u32,
        /// Concurrency levels.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        clients: Vec<usize>,
        /// Seconds per level.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Batch window (ms).
        #[arg(long, default_value_t = 2)]
        window_ms: u64,
        /// Largest batch.
        #[arg(long, default_value_t = 8)]
        max_batch: usize,
        /// Answer pool threads (0 = cores).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Honest clients verifying every bit, with junk mixed in, against a
    /// `serve` process under a lowered descriptor limit, a new epoch every
    /// minute ([`crate::soak`]).
    Soak(crate::soak::SoakArgs),
    /// Epoch build time from a store of n entries.
    Build {
        /// Store sizes.
        #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
        entries: Vec<u64>,
        /// Number of filters a (default: the configuration's, 768). Each
        /// filter costs the same per entry, so fewer filters measure the
        /// per-insertion cost of a large |S| in less time and memory.
        #[arg(long)]
        filters: Option<u32>,
    },
    /// One shard's build streamed from an object store, in a process of
    /// its own: its peak resident set against its databases' memory. Run
    /// once with `--prepare` (a synthetic snapshot of `--entries` leaf
    /// hashes, sorted on disk and prepared as `epoch prepare` does), then
    /// once per shard measured.
    ShardBuild {
        /// The object store (`file:///dir` or `s3://…`).
        #[arg(long)]
        object_store: String,
        /// Prepare the snapshot and spec instead of building.
        #[arg(long)]
        prepare: bool,
        /// |S| (with `--prepare`).
        #[arg(long, default_value_t = 1_000_000)]
        entries: u64,
        /// Filters a (with `--prepare`).
        #[arg(long, default_value_t = 16)]
        filters: u32,
        /// Shard count.
        #[arg(long, default_value_t = 4)]
        shards: u32,
        /// The shard built.
        #[arg(long, default_value_t = 0)]
        shard: u32,
        /// Parameter set (default the configuration's, Table 1).
        #[arg(long)]
        param_set: Option<String>,
        /// Bits per database (with `--prepare`; default the
        /// configuration's).
        #[arg(long)]
        db_bits_target: Option<u64>,
    },
    /// The sharded pipeline at scale on this machine: a synthetic store,
    /// `epoch prepare`, every shard's build and `epoch publish` as
    /// separate processes (peak memory of each), then audits of members
    /// and non-members against the served shards ([`crate::rehearse`]).
    Rehearse(crate::rehearse::RehearseArgs),
}

/// Runs a benchmark; returns its JSON report.
pub async fn run(cmd: &BenchCmd) -> Result<serde_json::Value> {
    let v = match cmd {
        BenchCmd::Load {
            db_bits,
            clients,
            seconds,
            window_ms,
            max_batch,
            threads,
        } => serde_json::to_value(
            load(
                *db_bits, clients, *seconds, *window_ms, *max_batch, *threads,
            )
            .await?,
        ),
        BenchCmd::Soak(args) => {
            let report = crate::soak::run(args).await?;
            eprintln!("{}", crate::soak::summary(&report));
            serde_json::to_value(report)
        }
        BenchCmd::ShardBuild {
            object_store,
            prepare,
            entries,
            filters,
            shards,
            shard,
            param_set,
            db_bits_target,
        } => {
            let mut config = Config::default();
            config.epoch.filters = *filters;
            if let Some(t) = db_bits_target {
                config.epoch.db_bits_target = *t;
            }
            if let Some(p) = param_set {
                config.epoch.param_set = p.clone();
                config.epoch.allow_insecure_params = true;
            }
            config.shard.count = *shards;
            config.shard.index = *shard;
            config.shard.urls = (0..*shards)
                .map(|i| format!("http://s{i}.invalid"))
                .collect();
            let objects = crate::objstore::Objects::open(object_store)?;
            Ok(if *prepare {
                shard_prepare(&objects, &config, *entries).await?
            } else {
                shard_build(&objects, &config).await?
            })
        }
        BenchCmd::Build { entries, filters } => {
            let mut out = Vec::new();
            for &n in entries {
                out.push(build(n, *filters).await?);
            }
            serde_json::to_value(out)
        }
        BenchCmd::Rehearse(args) => serde_json::to_value(crate::rehearse::run(args).await?),
    };
    v.map_err(|e| Error::Internal(e.to_string()))
}

/// Deterministic distinct pseudo-random leaf hashes.
fn synthetic_hashes(n: u64, tag: &[u8]) -> Vec<[u8; 32]> {
    (0..n)
        .map(|i| {
            Sha256::new()
                .chain_update(tag)
                .chain_update(i.to_le_bytes())
                .finalize()
                .into()
        })
        .collect()
}

/// One concurrency level of the load benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct LoadLevel {
    /// Concurrent clients.
    pub clients: usize,
    /// Queries answered.
    pub queries: usize,
    /// Queries per second.
    pub qps: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Mean batch size reported by the server.
    pub mean_batch: f64,
    /// Database bytes scanned per second of wall time, per query answered
    /// (qps × DB bytes / 10^9).
    pub effective_gb_per_s: f64,
    /// Non-200 answers.
    pub errors: usize,
}

/// Load benchmark report.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Benchmark name.
    pub bench: &'static str,
    /// log2 database bits.
    pub db_bits: u32,
    /// |S| of the synthetic epoch.
    pub entries: u64,
    /// ℓ1 × ℓ2.
    pub shape: [usize; 2],
    /// Database bytes.
    pub db_bytes: u64,
    /// Query and response sizes.
    pub query_bytes: u64,
    /// Response bytes.
    pub response_bytes: u64,
    /// Answer pool threads.
    pub threads: usize,
    /// Batch window and max batch.
    pub window_ms: u64,
    /// Largest batch.
    pub max_batch: usize,
    /// In-process single answer (no HTTP), ms, median of 5.
    pub direct_answer_ms: f64,
    /// p50 latency at 1 client ÷ direct answer time.
    pub http_overhead_ratio: f64,
    /// Responses decoded and compared with the clear database.
    pub verified_answers: usize,
    /// Levels.
    pub levels: Vec<LoadLevel>,
    /// Epoch build report.
    pub build: epoch::BuildReport,
}

async fn load(
    db_bits: u32,
    clients: &[usize],
    seconds: f64,
    window_ms: u64,
    max_batch: usize,
    threads: usize,
) -> Result<LoadReport> {
    if !(10..=36).contains(&db_bits) {
        return Err(Error::Config("--db-bits must be in 10..=36".into()));
    }
    let mut config = Config::default();
    let tmp = tempfile::tempdir().map_err(crate::error::io(std::path::Path::new("tmp")))?;
    config.epoch_dir = tmp.path().join("epochs");
    config.limits.batch_window_ms = window_ms;
    config.limits.max_batch = max_batch;
    config.limits.threads = threads;
    config.limits.max_concurrent_queries = 256;
    config.epoch.db_bits_target = 1 << db_bits;
    let a = u64::from(config.epoch.filters);
    let k = u64::from(config.epoch.k);
    let entries = ((1u64 << db_bits) / (a * k)) / 8 * 8;
    let snap = Snapshot {
        now_s: epoch::unix_now_s(),
        hashes: synthetic_hashes(entries.max(8), b"bench-load"),
        coverage: Vec::new(),
    };
    let svc = Arc::new(Service::new(config.clone())?);
    let mut bp = BuildParams::from_config(&config)?;
    bp.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let dir = svc.epoch_dir().clone();
    let out = dir.begin(1)?;
    eprintln!("building a 2^{db_bits}-bit epoch ({entries} entries)…");
    let built = tokio::task::spawn_blocking(move || epoch::build_epoch(&snap, 1, &bp, &out))
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    let build = built.report.clone().unwrap_or_default();
    if built.servers.len() != 1 {
        return Err(Error::Internal(format!(
            "expected one database, got {}",
            built.servers.len()
        )));
    }
    let spec = built.manifest.dbs[0].clone();
    let params = pir_core::params::by_id(built.manifest.pir.param_set)?;
    let server0 = built
        .server(0)
        .ok_or_else(|| Error::Internal("database 0 was not built".into()))?;
    let shape = server0.shape();
    // Precomputed queries with their expected bits (from the clear DB).
    let client = Client::new(params, shape, PublicSeed(spec.seed))?;
    let mut queries = Vec::new();
    let n_queries = 32usize;
    for i in 0..n_queries {
        let bit = (i as u64 * 0x9E37_79B9_7F4A_7C15) % spec.bits;
        let (q, key, b) = client.query_bit(spec.bits, bit)?;
        let loc = pir_core::db::locate_bit(shape, spec.bits, bit)?;
        let want = server0.database().get(loc.row, loc.col)? >> loc.bit & 1 == 1;
        queries.push((q.to_bytes(), key, b, want));
    }
    let mut direct = Vec::new();
    for (q, _, _, _) in queries.iter().take(5) {
        let t = Instant::now();
        server0.answer_bytes(q)?;
        direct.push(t.elapsed().as_secs_f64() * 1e3);
    }
    direct.sort_by(f64::total_cmp);
    let direct_answer_ms = direct[direct.len() / 2];
    let db_bytes = server0.database().as_bytes().len() as u64;
    svc.publish(built)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Internal(e.to_string()))?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(svc.clone().run(listener, async {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}/v1/epochs/1/dbs/0/query");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .map_err(|e| Error::Internal(e.to_string()))?;
    // Correctness: decode a few answers.
    let mut verified = 0;
    for (q, key, b, want) in queries.iter().take(8) {
        let resp = post(&http, &url, q.clone()).await?;
        let r = pir_core::wire::Response::from_bytes(&resp.0)?;
        if client.extract_bit(key, &r, *b)? != *want {
            return Err(Error::Internal(
                "a decoded answer differs from the database".into(),
            ));
        }
        verified += 1;
    }
    let queries: Arc<Vec<Vec<u8>>> = Arc::new(queries.into_iter().map(|q| q.0).collect());
    let mut levels = Vec::new();
    for &c in clients {
        eprintln!("{c} concurrent clients for {seconds} s…");
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let mut tasks = Vec::new();
        for t in 0..c {
            let (http, url, queries) = (http.clone(), url.clone(), queries.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut batches = Vec::new();
                let mut errors = 0usize;
                let mut i = t;
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    match post(&http, &url, queries[i % queries.len()].clone()).await {
                        Ok((_, batch)) => {
                            lat.push(t0.elapsed().as_secs_f64() * 1e3);
                            batches.push(batch);
                        }
                        Err(_) => errors += 1,
                    }
                    i += 1;
                }
                (lat, batches, errors)
            }));
        }
        let t0 = Instant::now();
        let mut lat = Vec::new();
        let mut batches = Vec::new();
        let mut errors = 0;
        for t in tasks {
            let (l, b, e) = t.await.map_err(|e| Error::Internal(e.to_string()))?;
            lat.extend(l);
            batches.extend(b);
            errors += e;
        }
        let wall = t0.elapsed().as_secs_f64();
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if lat.is_empty() {
                0.0
            } else {
                lat[((lat.len() - 1) as f64 * p).round() as usize]
            }
        };
        let qps = lat.len() as f64 / wall;
        levels.push(LoadLevel {
            clients: c,
            queries: lat.len(),
            qps,
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
            mean_batch: batches.iter().sum::<usize>() as f64 / batches.len().max(1) as f64,
            effective_gb_per_s: qps * db_bytes as f64 / 1e9,
            errors,
        });
    }
    let _ = stop_tx.send(());
    let _ = server_task.await;
    let p50_1 = levels
        .iter()
        .find(|l| l.clients == 1)
        .map_or(0.0, |l| l.p50_ms);
    Ok(LoadReport {
        bench: "auditor-load",
        db_bits,
        entries,
        shape: [shape.ell1, shape.ell2],
        db_bytes,
        query_bytes: spec.query_bytes,
        response_bytes: spec.response_bytes,
        threads: if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        },
        window_ms,
        max_batch,
        direct_answer_ms,
        http_overhead_ratio: if direct_answer_ms > 0.0 {
            p50_1 / direct_answer_ms
        } else {
            0.0
        },
        verified_answers: verified,
        levels,
        build,
    })
}

async fn post(http: &reqwest::Client, url: &str, body: Vec<u8>) -> Result<(Vec<u8>, usize)> {
    let resp = http
        .post(url)
        .header("content-type", audit_proto::api::OCTET_STREAM)
        .body(body)
        .send()
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    let status = resp.status();
    let batch = resp
        .headers()
        .get(audit_proto::api::BATCH_SIZE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    if !status.is_success() {
        return Err(Error::Internal(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        )));
    }
    Ok((bytes.to_vec(), batch))
}

/// Build benchmark result for one store size.
#[derive(Clone, Debug, Serialize)]
pub struct BuildBench {
    /// Benchmark name.
    pub bench: &'static str,
    /// Entries in the store.
    pub entries: u64,
    /// Seconds filling the store (not part of the build).
    pub fill_store_s: f64,
    /// Seconds reading the snapshot from SQLite.
    pub snapshot_s: f64,
    /// The build report (filters, DBSetup, persist).
    pub build: epoch::BuildReport,
    /// Snapshot + build, seconds.
    pub epoch_total_s: f64,
    /// Filter insertions per second (a·|S| / filters_s).
    pub hashes_per_s: f64,
    /// CPU nanoseconds per insertion of one entry into one filter
    /// (`build.filters_cpu_s` / (a·|S|)): core-seconds, whatever else
    /// runs on the machine.
    pub filter_cpu_ns_per_insert: f64,
    /// Threads of the build pool.
    pub threads: usize,
    /// Peak resident set of the process so far (`VmHWM`, bytes; 0 where
    /// not measurable): run one size per process for a per-size figure.
    pub peak_rss_bytes: u64,
    /// 1-minute load average before and after (`/proc/loadavg`).
    pub load_avg: [f64; 2],
    /// DBSetup throughput, MB/s.
    pub setup_mb_per_s: f64,
    /// Seconds to load the persisted epoch (a restart).
    pub reload_s: f64,
}

/// The 1-minute load average (0 where not readable).
fn load_avg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The process's peak resident set (`VmHWM`), bytes (0 where not
/// readable).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

async fn build(n: u64, filters: Option<u32>) -> Result<BuildBench> {
    let load_before = load_avg();
    use ct_store::{Commit, Entry, LogKind, LogMeta, Store};
    let tmp = tempfile::tempdir().map_err(crate::error::io(std::path::Path::new("tmp")))?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        tmp.path().join("bench.db").display()
    );
    let store = Store::connect_and_migrate(&url).await?;
    let log_id = ct_core::LogId::new([7u8; 32]);
    store
        .upsert_log(&LogMeta {
            log_id,
            url: "http://bench.invalid/".into(),
            mmd_s: 86_400,
            kind: LogKind::Rfc6962,
        })
        .await?;
    eprintln!("filling a SQLite store with {n} entries…");
    let t = Instant::now();
    let now = epoch::unix_now_s();
    let hashes = synthetic_hashes(n, b"bench-build");
    for (c, chunk) in hashes.chunks(50_000).enumerate() {
        let start = (c * 50_000) as u64;
        let entries: Vec<Entry> = chunk
            .iter()
            .enumerate()
            .map(|(i, h)| Entry {
                leaf_index: start + i as u64,
                leaf_hash: ct_core::LeafHash::new(*h),
                sct_timestamp_ms: (now as u64 - 3600) * 1000,
                not_after: now + 90 * 86_400,
            })
            .collect();
        store
            .commit(
                Commit::new(&log_id, n, &[0; 32])
                    .entries(&entries)
                    .ingested_until_ms((now as u64 - 3600) * 1000),
            )
            .await?;
    }
    let fill_store_s = t.elapsed().as_secs_f64();
    drop(hashes);
    let mut config = Config {
        epoch_dir: tmp.path().join("epochs"),
        ..Config::default()
    };
    if let Some(a) = filters {
        if a == 0 || a > audit_proto::filter::MAX_FILTERS {
            return Err(Error::Config(format!(
                "--filters must be in 1..={}",
                audit_proto::filter::MAX_FILTERS
            )));
        }
        config.epoch.filters = a;
    }
    let dir = crate::epochdir::EpochDir::open(&config.epoch_dir)?;
    let mut bp = BuildParams::from_config(&config)?;
    bp.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    eprintln!("building the epoch…");
    let t = Instant::now();
    let (path, e) = epoch::build_next(&store, &dir, bp, 3, now).await?;
    let epoch_total_s = t.elapsed().as_secs_f64();
    store.close().await;
    let report = e.report.clone().unwrap_or_default();
    let snapshot_s = epoch_total_s - report.total_s - 0.0;
    drop(e);
    let t = Instant::now();
    let reloaded = tokio::task::spawn_blocking(move || {
        epoch::load_epoch(&path, &Default::default(), &Default::default())
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))??;
    let reload_s = t.elapsed().as_secs_f64();
    drop(reloaded);
    Ok(BuildBench {
        bench: "auditor-build",
        entries: n,
        fill_store_s,
        snapshot_s,
        hashes_per_s: f64::from(report.filters) * n as f64 / report.filters_s.max(1e-9),
        filter_cpu_ns_per_insert: report.filters_cpu_s * 1e9
            / (f64::from(report.filters) * n as f64).max(1.0),
        threads: rayon::current_num_threads(),
        peak_rss_bytes: peak_rss_bytes(),
        load_avg: [load_before, load_avg()],
        setup_mb_per_s: report.db_bytes as f64 / 1e6 / report.setup_s.max(1e-9),
        epoch_total_s,
        reload_s,
        build: report,
    })
}

/// `bench shard-build --prepare`: a snapshot of `n` synthetic leaf hashes
/// sorted on disk, planned and prepared as `epoch prepare` does.
async fn shard_prepare(
    objects: &crate::objstore::Objects,
    config: &Config,
    n: u64,
) -> Result<serde_json::Value> {
    let run = async {
        let tmp = tempfile::tempdir().map_err(crate::error::io(std::path::Path::new("tmp")))?;
        let t = Instant::now();
        let hashes = (0..n).map(|i| -> [u8; 32] {
            Sha256::new()
                .chain_update(b"bench-shard-build")
                .chain_update(i.to_le_bytes())
                .finalize()
                .into()
        });
        let snap = epoch::SortedSnapshot::from_hashes(
            hashes,
            epoch::unix_now_s(),
            tmp.path(),
            epoch::DEFAULT_MAX_RUN,
        )?;
        let id = objects.epoch_ids().await?.last().map_or(1, |l| l + 1);
        let spec = crate::plan::plan_sorted(&snap, config, id)?;
        let bytes = objects.prepare_sorted(&spec, &snap).await?;
        Ok::<_, Error>(serde_json::json!({
            "bench": "auditor-shard-prepare",
            "epoch": id,
            "entries": n,
            "filters": spec.manifest.filter.a,
            "filter_bits": spec.manifest.filter.bits,
            "databases": spec.manifest.dbs.len(),
            "shards": crate::objstore::shard_count(&spec.manifest),
            "snapshot_bytes": bytes,
            "seconds": t.elapsed().as_secs_f64(),
            "peak_rss_bytes": peak_rss_bytes(),
        }))
    };
    run.await
}

/// `bench shard-build`: shard `config.shard.index`'s databases of the
/// newest prepared epoch, built as a shard builds them (the snapshot
/// streamed and verified part by part) into a temporary directory; its
/// peak resident set against what `Server::memory` states for them.
async fn shard_build(
    objects: &crate::objstore::Objects,
    config: &Config,
) -> Result<serde_json::Value> {
    let run = async {
        let id = objects
            .newest_prepared()
            .await?
            .ok_or_else(|| Error::Config("no prepared epoch: run with --prepare first".into()))?;
        let spec = objects
            .spec(id)
            .await?
            .ok_or_else(|| Error::Config(format!("epoch {id} has no spec")))?;
        let mut bp = BuildParams::from_config(config)?;
        bp.params = pir_core::params::by_id(spec.manifest.pir.param_set)?;
        let own = crate::plan::check_spec_streamed(&spec, &config.shard, &bp)?;
        let need = crate::memory::need_streamed(&spec.manifest, &own)?;
        let tmp = tempfile::tempdir().map_err(crate::error::io(std::path::Path::new("tmp")))?;
        let rss_before = current_rss_bytes();
        let (t, cpu) = (Instant::now(), crate::fill::cpu_seconds());
        let stream = objects.open_snapshot(&spec).await?;
        let built = crate::objstore::build_streamed(
            stream,
            spec.manifest.clone(),
            own.clone(),
            bp,
            tmp.path().to_owned(),
            t,
        )
        .await?;
        let seconds = t.elapsed().as_secs_f64();
        let cpu_s = cpu
            .zip(crate::fill::cpu_seconds())
            .map_or(0.0, |(a, b)| b - a);
        let report = built.report.clone().unwrap_or_default();
        let own_filters: u64 = own
            .iter()
            .map(|&d| u64::from(spec.manifest.dbs[d as usize].filters))
            .sum();
        let inserts = (own_filters * spec.manifest.entries).max(1) as f64;
        Ok::<_, Error>(serde_json::json!({
            "bench": "auditor-shard-build",
            "epoch": id,
            "entries": spec.manifest.entries,
            "filters": spec.manifest.filter.a,
            "filter_bits": spec.manifest.filter.bits,
            "shards": crate::objstore::shard_count(&spec.manifest),
            "shard": config.shard.index,
            "databases": own.len(),
            "snapshot_parts": crate::snapshot::part_count(spec.manifest.entries, crate::snapshot::PART_ENTRIES),
            "shard_database_bytes": need.serving(),
            "shard_records_bytes": need.records,
            "model_peak_bytes": need.peak(),
            "rss_before_bytes": rss_before,
            "peak_rss_bytes": peak_rss_bytes(),
            "peak_rss_above_databases_bytes": peak_rss_bytes() as i64 - need.serving() as i64,
            "seconds": seconds,
            "cpu_seconds": cpu_s,
            "fill_seconds": report.filters_s,
            "fill_cpu_seconds": report.filters_cpu_s,
            "fill_ns_per_entry_filter": report.filters_s * 1e9 / inserts,
            "fill_cpu_ns_per_entry_filter": report.filters_cpu_s * 1e9 / inserts,
            "setup_seconds": report.setup_s,
            "threads": rayon::current_num_threads(),
            "cpu": cpu_model(),
        }))
    };
    run.await
}

/// The process's resident set now (`VmRSS`), bytes (0 where not readable).
fn current_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// The CPU's model name (`/proc/cpuinfo`; empty where not readable).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("model name"))?;
            Some(line.split_once(':')?.1.trim().to_owned())
        })
        .unwrap_or_default()
}
