//! Epochs: the salted multi-Bloom filter of one snapshot of S, its PIR
//! databases, and their persisted artifacts (SimplePIR paper §6–7).
//!
//! Building (`build_epoch`):
//! 1. [`snapshot`] reads per-log coverage *first*, then streams the active
//!    leaf hashes: anything committed in between only adds entries, so
//!    "every entry up to `ingested_until` is in S" stays true.
//! 2. Only then is the seed of the a filter hash functions drawn from the
//!    OS CSPRNG (Prop. 6.2 needs the hash functions chosen after S is
//!    fixed), and N = |S| rounded up to a multiple of 8, so each filter of
//!    k·N bits is whole 64-bit words. The bits are set by `fill`.
//! 3. Filters are grouped into PIR databases ([`plan_dbs`]): consecutive
//!    filters are concatenated until a database would exceed
//!    `db_bits_target`. At internet scale (k·N ≈ 2^35.2) every filter is its
//!    own database, as in the paper; for small sets grouping amortises the
//!    per-database fixed costs (packing precomputation, ~0.6 MB of packing
//!    key per query, one YPIR answer's fixed ~10 ms) at the price of
//!    scanning the group. The client reveals only which database — i.e.
//!    which group of filters — it probes; its filter index is uniformly
//!    random and independent of the certificate, so this leaks nothing.
//! 4. The layout (database shapes and sizes) follows from the plan, so the
//!    manifest is complete before any database is written. Each database
//!    gets its public seed and its YPIR DBSetup (pir-core); bitmap and NTT
//!    hint are written next to the manifest.
//!
//! Steps 2–4 are [`plan_manifest`] (everything but the bits) and
//! [`build_planned`] (the bits of a chosen set of databases): a single
//! server runs both ([`build_epoch`]); the shards of a sharded epoch share
//! one planned manifest and each builds its own databases
//! ([`crate::plan`]). Before building or loading, the memory the databases
//! need is checked against what is available ([`crate::memory`]); a build
//! that fails leaves no `.building-<id>` behind ([`build_into`]).
//!
//! Persistence: an epoch is built in `.building-<id>` and published by
//! renaming it to `epoch-<id>` after every file is fsynced, so a reader sees
//! either nothing or a complete epoch. What a builder killed mid-build
//! leaves behind is removed at the next start-up or prune
//! ([`crate::builddir`]). Each artifact carries a SHA-256
//! trailer; a restarted server reloads the newest epoch without
//! recomputing A1·D (`pir_core::server::Server::from_hint`).
//!
//! Binding: every bitmap file's header holds the SHA-256 of the exact
//! `manifest.json` bytes ([`manifest_digest`]), under its own checksum. The
//! manifest states everything that determines the bits — epoch, salt seed,
//! a, k, N, database grouping and shapes, PIR seed, coverage — so a
//! manifest edited or swapped after the build (one hex digit of the salt
//! seed is enough to make honest logs look like they omit entries), or a
//! missing one, makes [`load_epoch`] refuse the epoch instead of serving
//! bits that do not match it. This guards against accidental or careless
//! changes to the on-disk state; it is no authentication against someone
//! who can rewrite both the manifest and the bitmaps.
//!
//! Why no incremental update between epochs: salts and seeds are fresh
//! every epoch, so every bit of every filter and every column of A1·D
//! changes; `Server::update` (pir-core) would touch everything. Keeping
//! salts across epochs would let a log that has seen them grind new
//! certificates onto the bits of an entry it omits — exactly the attack
//! Prop. 6.2's fresh hash functions prevent.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use audit_proto::filter::FilterSpec;
use audit_proto::manifest::{
    encode_log_id, DbLayout, FillRatio, LogCoverage, Manifest, ManifestParts, PirSpec,
};
use futures_util::TryStreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, Params};
use pir_core::rns::Context;
use pir_core::sampler::PublicSeed;
use pir_core::server::Server;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{io, Error, Result};
use crate::shard::ShardConfig;

/// Magic of a bitmap artifact; the last byte is the on-disk format version.
const BITS_MAGIC: &[u8; 8] = b"CTAUBIT2";
/// Magic of format 1, which did not bind the manifest (refused).
const BITS_MAGIC_V1: &[u8; 8] = b"CTAUBIT1";
/// Header: magic, epoch u64, db u32, bits u64, manifest digest.
const BITS_HEADER: usize = 8 + 8 + 4 + 8 + 32;
/// The manifest's file name in an epoch directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Largest manifest file read back.
const MAX_MANIFEST_FILE: u64 = audit_proto::api::MAX_MANIFEST_BYTES as u64;

/// A fixed snapshot of S.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Entries active at this time (Unix seconds) are in S.
    pub now_s: i64,
    /// Leaf hashes of S, sorted and deduplicated.
    pub hashes: Vec<[u8; 32]>,
    /// Per-log coverage, read before the hashes.
    pub coverage: Vec<ct_store::Coverage>,
}

/// Reads a snapshot of S from the store (see the module docs for the
/// order of reads).
pub async fn snapshot(store: &ct_store::Store, now_s: i64) -> Result<Snapshot> {
    let coverage = store.coverage().await?;
    let mut hashes: Vec<[u8; 32]> = store.active_leaf_hashes(now_s).try_collect().await?;
    hashes.sort_unstable();
    hashes.dedup();
    Ok(Snapshot {
        now_s,
        hashes,
        coverage,
    })
}

/// How epochs are built.
#[derive(Clone, Debug)]
pub struct BuildParams {
    /// a.
    pub filters: u32,
    /// k.
    pub k: u32,
    /// Group filters into databases of at most this many bits.
    pub db_bits_target: u64,
    /// PIR parameter set.
    pub params: Params,
    /// Show progress bars (on a terminal).
    pub progress: bool,
    /// The shard map a single server publishes (count 1 with a configured
    /// URL); sharded epochs take theirs from the epoch spec.
    pub shards: Option<audit_proto::ShardMap>,
    /// The memory a build may use ([`crate::memory::check`]).
    pub budget: crate::memory::Budget,
}

impl BuildParams {
    /// From the configuration.
    pub fn from_config(c: &crate::config::Config) -> Result<BuildParams> {
        Ok(BuildParams {
            filters: c.epoch.filters,
            k: c.epoch.k,
            db_bits_target: c.epoch.db_bits_target,
            params: c.params()?,
            progress: false,
            shards: if c.shard.is_sharded() {
                None
            } else {
                c.shard.map()
            },
            budget: crate::memory::Budget {
                max_bytes: (c.epoch.max_memory_bytes > 0).then_some(c.epoch.max_memory_bytes),
                held: 0,
            },
        })
    }
}

/// Partition of `a` filters of `filter_bits` bits into consecutive groups
/// of at most `target` bits (at least one filter each), sizes balanced:
/// returns (first filter, count) per database.
pub fn plan_dbs(a: u32, filter_bits: u64, target: u64) -> Vec<(u32, u32)> {
    let per = (target / filter_bits.max(1)).clamp(1, u64::from(a)) as u32;
    let n = a.div_ceil(per);
    let (base, extra) = (a / n, a % n);
    let mut out = Vec::with_capacity(n as usize);
    let mut first = 0;
    for i in 0..n {
        let count = base + u32::from(i < extra);
        out.push((first, count));
        first += count;
    }
    out
}

/// Timings and sizes of one build (written as `build.json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BuildReport {
    /// Epoch id.
    pub epoch: u64,
    /// |S|.
    pub entries: u64,
    /// a.
    pub filters: u32,
    /// Bits per filter.
    pub filter_bits: u64,
    /// Number of PIR databases built (a shard's own; all on one server).
    pub dbs: usize,
    /// Total bytes of the databases built.
    pub db_bytes: u64,
    /// Seconds hashing entries into filters (all cores).
    pub filters_s: f64,
    /// CPU seconds of the process while hashing into filters (user +
    /// system, all threads; 0 where not measurable).
    #[serde(default)]
    pub filters_cpu_s: f64,
    /// Seconds in YPIR DBSetup.
    pub setup_s: f64,
    /// Seconds writing artifacts (including fsync).
    pub persist_s: f64,
    /// Whole build after the snapshot.
    pub total_s: f64,
    /// Fraction of the built filters' bits set (expected ≈ 1 − e^{−|S|/(kN)}).
    pub fill_ratio: f64,
}

/// An epoch in memory: its manifest and one YPIR server per database this
/// shard holds.
pub struct Epoch {
    /// The manifest (the whole epoch, every shard's databases).
    pub manifest: Manifest,
    /// `servers[i]` answers database `i` (`None`: another shard's).
    pub servers: Vec<Option<Server>>,
    /// Build report (`None` if the file was missing).
    pub report: Option<BuildReport>,
}

impl std::fmt::Debug for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epoch")
            .field("epoch", &self.manifest.epoch)
            .field("dbs", &self.servers.len())
            .field("own", &self.own().len())
            .finish()
    }
}

impl Epoch {
    /// The YPIR server of database `db`, if this shard holds it.
    pub fn server(&self, db: u32) -> Option<&Server> {
        self.servers.get(db as usize).and_then(Option::as_ref)
    }

    /// The databases this shard holds, ascending.
    pub fn own(&self) -> Vec<u32> {
        (0..self.servers.len() as u32)
            .filter(|&d| self.server(d).is_some())
            .collect()
    }
}

fn os_random(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf).map_err(|e| Error::Random(e.to_string()))
}

fn bar(show: bool, len: u64, what: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_owned());
    pb
}

/// What fixes an epoch's manifest besides the snapshot's leaf hashes:
/// its id, times, coverage, seeds and shard map.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// Epoch id.
    pub epoch: u64,
    /// When the epoch was planned (Unix s).
    pub created_at: i64,
    /// The snapshot time.
    pub snapshot_at: i64,
    /// |S|.
    pub entries: u64,
    /// Per-log coverage, read before the leaf hashes.
    pub coverage: Vec<ct_store::Coverage>,
    /// Seed of the filter salts.
    pub salt_seed: [u8; 32],
    /// Public seed of the PIR databases.
    pub pir_seed: [u8; 32],
    /// Which base URL serves which database (`None`: one server).
    pub shards: Option<audit_proto::ShardMap>,
}

/// Draws a fresh 32-byte seed from the OS CSPRNG.
pub fn fresh_seed() -> Result<[u8; 32]> {
    let mut seed = [0u8; 32];
    os_random(&mut seed)?;
    Ok(seed)
}

/// The manifest of an epoch: filters of k·N bits (N from |S|), grouped
/// into databases by [`plan_dbs`], with the seeds and shard map of `input`.
/// Everything a shard needs to build its own databases bit for bit like
/// every other shard, given the same leaf hashes.
pub fn plan_manifest(input: PlanInput, bp: &BuildParams) -> Result<Manifest> {
    let params = bp.params;
    let entries = input.entries;
    let n = FilterSpec::capacity_for(entries);
    let filter_bits = n
        .checked_mul(u64::from(bp.k))
        .filter(|&b| b <= audit_proto::filter::MAX_FILTER_BITS)
        .ok_or_else(|| Error::Config(format!("k·N too large for |S| = {entries}")))?;
    let filter = FilterSpec::new(bp.filters, bp.k, n, input.salt_seed)?;
    let plan = plan_dbs(bp.filters, filter_bits, bp.db_bits_target);
    // The layout follows from the plan alone, so the manifest is fixed
    // before any database is written and every bitmap file can carry its
    // digest.
    let layout: Vec<DbLayout> = plan
        .iter()
        .map(|&(_, count)| {
            let shape = DbShape::for_bits(u64::from(count) * filter_bits, BitDatabase::RECORD_BITS);
            DbLayout {
                filters: count,
                rows: shape.ell1 as u64,
                cols: shape.ell2 as u64,
                query_bytes: pir_core::wire::query_len(&params, shape) as u64,
                response_bytes: pir_core::wire::response_len(&params) as u64,
            }
        })
        .collect();
    let logs = input
        .coverage
        .iter()
        .map(|c| LogCoverage {
            log_id: encode_log_id(&c.log_id),
            verified_tree_size: c.verified_tree_size,
            verified_position: c.verified_position,
            ingested_until_ms: c.ingested_until_ms,
            mmd_s: c.mmd_s,
        })
        .collect();
    let pir = PirSpec {
        scheme: "ypir".to_owned(),
        param_set: params.id,
        param_name: params.name.to_owned(),
        wire_version: pir_core::wire::VERSION,
        seed: input.pir_seed,
    };
    Ok(Manifest::new(ManifestParts {
        epoch: input.epoch,
        created_at: input.created_at,
        snapshot_at: input.snapshot_at,
        entries,
        logs,
        filter,
        pir,
        layout: &layout,
        shards: input.shards,
    })?)
}

/// The fill ratio of the first `sample` filters of the planned epoch
/// `manifest` over the leaf hashes `hashes` (one filter in memory at a
/// time): what `epoch plan` states for a sharded epoch, whose databases no
/// single server builds. The filters' ratios differ by a few times
/// 1/√(k·N), so a few filters measure the epoch's.
pub fn sample_fill_ratio(
    manifest: &Manifest,
    hashes: &[[u8; 32]],
    sample: u32,
) -> Result<FillRatio> {
    let filter_bits = manifest.filter.bits;
    let n = sample.clamp(1, manifest.filter.a);
    let mut words = vec![0u8; (filter_bits / 8) as usize];
    let mut set = 0u64;
    for j in 0..n {
        words.fill(0);
        crate::fill::fill_filters(
            &manifest.filter,
            hashes,
            vec![(j, &mut words[..])],
            &indicatif::ProgressBar::hidden(),
        )?;
        set += words.iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
    }
    Ok(FillRatio::from_counts(
        set,
        filter_bits.saturating_mul(u64::from(n)),
    )?)
}

/// Builds epoch `epoch` from `snap` into the directory `out` (created by
/// the caller, e.g. [`EpochDir::begin`]) on one server: fresh seeds,
/// every database, the shard map of `bp` (if any). CPU-bound; call from a
/// blocking thread.
pub fn build_epoch(snap: &Snapshot, epoch: u64, bp: &BuildParams, out: &Path) -> Result<Epoch> {
    let t_all = Instant::now();
    // Fresh salts (derived from a fresh seed), drawn now that S is fixed
    // (Prop. 6.2), and a fresh public seed for the PIR databases.
    let manifest = plan_manifest(
        PlanInput {
            epoch,
            created_at: unix_now_s(),
            snapshot_at: snap.now_s,
            entries: snap.hashes.len() as u64,
            coverage: snap.coverage.clone(),
            salt_seed: fresh_seed()?,
            pir_seed: fresh_seed()?,
            shards: bp.shards.clone(),
        },
        bp,
    )?;
    let all: Vec<u32> = (0..manifest.dbs.len() as u32).collect();
    crate::memory::check(&manifest, &all, (0, 1), true, &bp.budget)?;
    build_planned(manifest, &snap.hashes, &all, bp, out, t_all)
}

/// Builds the databases `own` of the planned epoch `manifest` from the
/// snapshot's leaf hashes `hashes` (sorted, deduplicated, exactly
/// `manifest.entries` of them) into `out`: filters, DBSetup, artifacts and
/// the manifest. The other databases are left to the other shards.
/// CPU-bound; call from a blocking thread.
pub fn build_planned(
    manifest: Manifest,
    hashes: &[[u8; 32]],
    own: &[u32],
    bp: &BuildParams,
    out: &Path,
    t_all: Instant,
) -> Result<Epoch> {
    if hashes.len() as u64 != manifest.entries {
        return Err(Error::Internal(format!(
            "{} leaf hashes for a manifest of |S| = {}",
            hashes.len(),
            manifest.entries
        )));
    }
    let params = pir_core::params::by_id(manifest.pir.param_set)?;
    let epoch = manifest.epoch;
    let filter_bits = manifest.filter.bits;
    let ctx = Arc::new(Context::new(params));
    let own_filters: u64 = own
        .iter()
        .filter_map(|&d| manifest.dbs.get(d as usize))
        .map(|d| u64::from(d.filters))
        .sum();
    let mut report = BuildReport {
        epoch,
        entries: manifest.entries,
        filters: manifest.filter.a,
        filter_bits,
        dbs: own.len(),
        ..Default::default()
    };
    let mut servers: Vec<Option<Server>> = (0..manifest.dbs.len()).map(|_| None).collect();
    // First every filter (their bits do not depend on the manifest's
    // bytes), so that the measured fill ratio can go into the manifest
    // before its digest is written into the bitmap files.
    let pb = bar(bp.progress, own_filters, "hashing into filters");
    let (t, cpu) = (Instant::now(), crate::fill::cpu_seconds());
    let mut filled = crate::fill::fill_databases(&manifest, own, hashes, &pb)?;
    report.filters_cpu_s = cpu
        .zip(crate::fill::cpu_seconds())
        .map_or(0.0, |(a, b)| b - a);
    let mut set_bits = 0u64;
    let mut bitmaps = Vec::with_capacity(own.len());
    for &d in own {
        let bitmap = filled
            .get_mut(d as usize)
            .and_then(Option::take)
            .ok_or_else(|| Error::Internal(format!("database {d} listed twice")))?;
        set_bits += bitmap
            .par_iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>();
        bitmaps.push((d, bitmap));
    }
    report.filters_s += t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let own_bits = filter_bits.saturating_mul(own_filters);
    report.fill_ratio = set_bits as f64 / own_bits.max(1) as f64;
    // A server that builds every database measures the whole epoch; the
    // shards of a planned epoch serve the ratio `epoch plan` measured.
    let manifest = if manifest.fill_ratio.is_none() && own_filters == u64::from(manifest.filter.a) {
        manifest.with_fill_ratio(FillRatio::from_counts(set_bits, own_bits)?)?
    } else {
        manifest
    };
    let manifest_json = manifest.to_json();
    let digest = manifest_digest(&manifest_json);
    for (d, bitmap) in bitmaps {
        let id = d as usize;
        let spec = &manifest.dbs[id];
        let bits = spec.bits;
        let t = Instant::now();
        let header = BitsHeader {
            epoch,
            db: d,
            bits,
            manifest: digest,
        };
        write_bits(&out.join(bits_name(id)), &header, &bitmap)?;
        report.persist_s += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let seed = PublicSeed(spec.seed);
        let db = BitDatabase::from_bitmap_owned(bits, bitmap)?.into_database();
        report.db_bytes += db.as_bytes().len() as u64;
        let server = Server::setup_with_context(ctx.clone(), db, seed)?;
        report.setup_s += t.elapsed().as_secs_f64();
        let want = DbShape {
            ell1: spec.rows as usize,
            ell2: spec.cols as usize,
        };
        if server.shape() != want {
            return Err(Error::Internal(format!(
                "database {id}: pir-core chose another shape than DbShape::for_bits"
            )));
        }

        let t = Instant::now();
        let hint_path = out.join(hint_name(id));
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(&hint_path).map_err(io(&hint_path))?);
        server
            .write_hint(&mut f)
            .map_err(|e| hint_write_error(&hint_path, e))?;
        let f = f.into_inner().map_err(|e| Error::Io {
            path: hint_path.display().to_string(),
            source: e.into_error(),
        })?;
        f.sync_all().map_err(io(&hint_path))?;
        report.persist_s += t.elapsed().as_secs_f64();
        // Epochs are rebuilt, never updated: serve what a restart from the
        // hint file would (crate::memory).
        let mut server = server;
        server.release_update_state();
        servers[id] = Some(server);
    }
    log_prefetch_choice();
    report.total_s = t_all.elapsed().as_secs_f64();
    let t = Instant::now();
    write_synced(&out.join(MANIFEST_FILE), &manifest_json)?;
    report.persist_s += t.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&report).map_err(|e| Error::Internal(e.to_string()))?;
    write_synced(&out.join("build.json"), &json)?;
    Ok(Epoch {
        manifest,
        servers,
        report: Some(report),
    })
}

/// Loads a published epoch directory: manifest, bitmaps (checksummed, and
/// bound to the manifest by its digest) and NTT hints (checksummed;
/// recomputed with a warning if damaged). Refuses the epoch if the
/// manifest is missing, or differs from the one its bitmaps were built
/// with, or a bitmap is damaged or of an older format, or the epoch was
/// planned for another shard layout than `shard`. Loads only the databases
/// `shard` holds.
pub fn load_epoch(
    dir: &Path,
    shard: &ShardConfig,
    budget: &crate::memory::Budget,
) -> Result<Epoch> {
    let t = Instant::now();
    let mpath = dir.join(MANIFEST_FILE);
    let json = match read_capped(&mpath, MAX_MANIFEST_FILE) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(corrupt(
                &mpath,
                "missing: without its manifest the epoch's databases cannot be checked or served"
                    .into(),
            ))
        }
        r => r?,
    };
    let digest = manifest_digest(&json);
    let manifest = Manifest::from_json(&json).map_err(|e| corrupt(&mpath, e.to_string()))?;
    let params = pir_core::params::by_id(manifest.pir.param_set)?;
    let ctx = Arc::new(Context::new(params));
    let own = shard.own_databases(&manifest)?;
    crate::memory::check(&manifest, &own, (shard.index, shard.count), false, budget)?;
    let mut servers: Vec<Option<Server>> = (0..manifest.dbs.len()).map(|_| None).collect();
    for spec in own.iter().filter_map(|&d| manifest.dbs.get(d as usize)) {
        let id = spec.id as usize;
        let bpath = dir.join(bits_name(id));
        let header = BitsHeader {
            epoch: manifest.epoch,
            db: spec.id,
            bits: spec.bits,
            manifest: digest,
        };
        let bitmap = read_bits(&bpath, &header, &mpath)?;
        let db = BitDatabase::from_bitmap_owned(spec.bits, bitmap)?.into_database();
        let shape = db.shape();
        if shape
            != (DbShape {
                ell1: spec.rows as usize,
                ell2: spec.cols as usize,
            })
        {
            return Err(corrupt(
                &mpath,
                format!("database {id}: shape differs from the manifest"),
            ));
        }
        let seed = PublicSeed(spec.seed);
        let hpath = dir.join(hint_name(id));
        let hint = read_capped(&hpath, Server::hint_file_len(&params, shape) as u64)
            .map_err(|e| e.to_string());
        let server = match hint.and_then(|h| {
            Server::from_hint(ctx.clone(), db.clone(), seed, &h).map_err(|e| e.to_string())
        }) {
            Ok(s) => s,
            Err(why) => {
                tracing::warn!(path = %hpath.display(), %why, "hint unusable; recomputing DBSetup");
                Server::setup_with_context(ctx.clone(), db, seed)?
            }
        };
        servers[id] = Some(server);
    }
    log_prefetch_choice();
    let report = read_capped(&dir.join("build.json"), 1 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    tracing::info!(
        epoch = manifest.epoch,
        dbs = own.len(),
        of = servers.len(),
        seconds = t.elapsed().as_secs_f64(),
        "epoch loaded"
    );
    Ok(Epoch {
        manifest,
        servers,
        report,
    })
}

/// The digest that binds an epoch's bitmaps to its manifest: SHA-256 of
/// the exact bytes of `manifest.json` (what clients are served).
pub fn manifest_digest(manifest_json: &[u8]) -> [u8; 32] {
    Sha256::digest(manifest_json).into()
}

/// Logs the SimplePIR software-prefetch distance and single-query kernel
/// pir-core chose (`pir_core::server::prefetch_tuning`) each time it has
/// measured again (at the 1st, 2nd, 4th, 8th, … database large enough to
/// measure on): it depends on the machine, so an operator comparing hosts
/// should see it.
fn log_prefetch_choice() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // measurements logged so far, plus one (0: nothing logged yet)
    static LOGGED: AtomicUsize = AtomicUsize::new(0);
    if let Some(t) = pir_core::server::prefetch_tuning() {
        if LOGGED.swap(t.measurements + 1, Ordering::Relaxed) != t.measurements + 1 {
            tracing::info!(
                bytes = t.chosen,
                single_query_kernel = t.kernel,
                forced = t.forced,
                measurements = t.measurements,
                candidates_gb_s = ?t.candidates,
                "SimplePIR prefetch distance"
            );
        }
    }
}

fn bits_name(id: usize) -> String {
    format!("db-{id:04}.bits")
}

fn hint_name(id: usize) -> String {
    format!("db-{id:04}.hint")
}

/// A failed hint write as an I/O error naming the file (pir-core's error
/// keeps the kind, e.g. `StorageFull`, but knows no path).
fn hint_write_error(path: &Path, e: pir_core::Error) -> Error {
    match e {
        pir_core::Error::Io { kind, message } => Error::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(kind, message),
        },
        e => e.into(),
    }
}

fn corrupt(path: &Path, why: String) -> Error {
    Error::Corrupt {
        path: path.display().to_string(),
        why,
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(io(path))?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(io(path))?;
    if buf.len() as u64 > max {
        return Err(corrupt(path, format!("longer than {max} bytes")));
    }
    Ok(buf)
}

/// What a bitmap file's header states: which epoch and database it is,
/// its size in bits, and the digest of the manifest it was built with
/// ([`manifest_digest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BitsHeader {
    epoch: u64,
    db: u32,
    bits: u64,
    manifest: [u8; 32],
}

impl BitsHeader {
    fn to_bytes(self) -> Vec<u8> {
        let mut h = Vec::with_capacity(BITS_HEADER);
        h.extend_from_slice(BITS_MAGIC);
        h.extend_from_slice(&self.epoch.to_le_bytes());
        h.extend_from_slice(&self.db.to_le_bytes());
        h.extend_from_slice(&self.bits.to_le_bytes());
        h.extend_from_slice(&self.manifest);
        h
    }
}

/// Bitmap file (format 2): magic `CTAUBIT2` ‖ epoch u64 ‖ db u32 ‖ bits
/// u64 (LE) ‖ SHA-256 of manifest.json ‖ ⌈bits/8⌉ bytes ‖ SHA-256 of all
/// before.
fn write_bits(path: &Path, header: &BitsHeader, bitmap: &[u8]) -> Result<()> {
    let header = header.to_bytes();
    let digest = Sha256::new()
        .chain_update(&header)
        .chain_update(bitmap)
        .finalize();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(io(path))?);
    f.write_all(&header).map_err(io(path))?;
    f.write_all(bitmap).map_err(io(path))?;
    f.write_all(&digest).map_err(io(path))?;
    let f = f.into_inner().map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e.into_error(),
    })?;
    f.sync_all().map_err(io(path))
}

/// Reads the bitmap of a file whose header must equal `want`, taken from
/// the manifest at `manifest` (named in the errors: either file may be the
/// wrong one).
fn read_bits(path: &Path, want: &BitsHeader, manifest: &Path) -> Result<Vec<u8>> {
    let body = want.bits.div_ceil(8);
    let len = BITS_HEADER as u64 + body + 32;
    let mut buf = read_capped(path, len)?;
    match buf.get(..8) {
        Some(m) if m == BITS_MAGIC => {}
        Some(m) if m == BITS_MAGIC_V1 => {
            return Err(corrupt(
                path,
                "on-disk format 1 (written by an older auditor-server, without the \
                 manifest binding): refused; rebuild the epoch"
                    .into(),
            ))
        }
        _ => return Err(corrupt(path, "not an epoch bitmap file (bad magic)".into())),
    }
    if buf.len() as u64 != len {
        return Err(corrupt(
            path,
            format!("{} bytes, expected {len}", buf.len()),
        ));
    }
    let (data, digest) = buf.split_at(buf.len() - 32);
    if Sha256::digest(data).as_slice() != digest {
        return Err(corrupt(path, "checksum mismatch".into()));
    }
    let expected = want.to_bytes();
    let (fields, bound) = (
        &data[..BITS_HEADER - 32],
        &data[BITS_HEADER - 32..BITS_HEADER],
    );
    if fields != &expected[..BITS_HEADER - 32] {
        let le = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(&fields[r]);
            u64::from_le_bytes(b)
        };
        return Err(corrupt(
            path,
            format!(
                "header (epoch {}, database {}, {} bits) does not match {} (epoch {}, \
                 database {}, {} bits): a file of another epoch or database",
                le(8..16),
                le(16..20),
                le(20..28),
                manifest.display(),
                want.epoch,
                want.db,
                want.bits
            ),
        ));
    }
    if bound != want.manifest {
        return Err(corrupt(
            path,
            format!(
                "built for another manifest: {} has SHA-256 {}, this database was \
                 built with {} (the manifest changed after the build, or belongs to \
                 another one)",
                manifest.display(),
                audit_proto::hex::encode(&want.manifest),
                audit_proto::hex::encode(bound)
            ),
        ));
    }
    buf.truncate(BITS_HEADER + body as usize);
    buf.drain(..BITS_HEADER);
    Ok(buf)
}

/// Reads bit `bit` of database `db`'s bitmap in the published epoch
/// directory `dir` of `manifest` (misbehaviour reports,
/// [`crate::reports`]): `None` if this server does not hold the file (a
/// shard holds only its own databases). The header must name this epoch,
/// database and size; the checksum is not recomputed (that would read the
/// whole file), loading the epoch checked it.
pub fn read_db_bit(dir: &Path, manifest: &Manifest, db: u32, bit: u64) -> Result<Option<bool>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let spec = manifest
        .dbs
        .get(db as usize)
        .ok_or_else(|| Error::Internal(format!("no database {db} in the manifest")))?;
    if bit >= spec.bits {
        return Err(Error::Internal(format!(
            "bit {bit} beyond database {db}'s {} bits",
            spec.bits
        )));
    }
    let path = dir.join(bits_name(db as usize));
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let mut header = [0u8; BITS_HEADER];
    f.read_exact(&mut header).map_err(io(&path))?;
    let want = BitsHeader {
        epoch: manifest.epoch,
        db,
        bits: spec.bits,
        manifest: [0; 32],
    }
    .to_bytes();
    if header[..BITS_HEADER - 32] != want[..BITS_HEADER - 32] {
        return Err(corrupt(
            &path,
            "header (magic, epoch, database, size) does not match the manifest".into(),
        ));
    }
    f.seek(SeekFrom::Start(BITS_HEADER as u64 + bit / 8))
        .map_err(io(&path))?;
    let mut byte = [0u8; 1];
    f.read_exact(&mut byte).map_err(io(&path))?;
    Ok(Some(byte[0] >> (bit % 8) & 1 == 1))
}

/// Reads the manifest of the published epoch directory `dir`.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let json = read_capped(&path, MAX_MANIFEST_FILE)?;
    Manifest::from_json(&json).map_err(|e| corrupt(&path, e.to_string()))
}

/// Unix time in seconds (the workspace's one clock helper).
pub use ct_core::civil::unix_now_s;

/// The directory of persisted epochs.
#[derive(Clone, Debug)]
pub struct EpochDir {
    root: PathBuf,
}

impl EpochDir {
    /// Opens (creating) `root`.
    pub fn open(root: &Path) -> Result<EpochDir> {
        std::fs::create_dir_all(root).map_err(io(root))?;
        Ok(EpochDir {
            root: root.to_owned(),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Published epoch ids (`epoch-<id>` directories), ascending.
    pub fn list(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for e in std::fs::read_dir(&self.root).map_err(io(&self.root))? {
            let e = e.map_err(io(&self.root))?;
            let name = e.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("epoch-"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                // Listed with or without a manifest: a published epoch that
                // lost it must be refused loudly, not skipped.
                if e.path().is_dir() {
                    ids.push(id);
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// The newest published epoch.
    pub fn latest(&self) -> Result<Option<u64>> {
        Ok(self.list()?.last().copied())
    }

    /// Directory of published epoch `id`.
    pub fn path(&self, id: u64) -> PathBuf {
        self.root.join(format!("epoch-{id:012}"))
    }

    /// Starts building epoch `id`: an empty private directory, claimed by
    /// this process until [`EpochDir::commit`] (or a failed build's
    /// removal) releases it ([`crate::builddir`]). Fails if another living
    /// process is building `id` here; a directory left by a dead builder
    /// is removed.
    pub fn begin(&self, id: u64) -> Result<PathBuf> {
        let tmp = self.root.join(format!(".building-{id:012}"));
        crate::builddir::claim(&tmp)?;
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        Ok(tmp)
    }

    /// Publishes a built directory atomically (rename; fails if another
    /// builder published `id` first).
    pub fn commit(&self, id: u64, tmp: &Path) -> Result<PathBuf> {
        let dst = self.path(id);
        if dst.exists() {
            return Err(Error::Config(format!(
                "{} exists: another builder published epoch {id} first",
                dst.display()
            )));
        }
        std::fs::rename(tmp, &dst).map_err(io(&dst))?;
        crate::builddir::release(tmp);
        std::fs::File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.root))?;
        Ok(dst)
    }

    /// Deletes all but the newest `keep` epochs, and the build directories
    /// of dead builders ([`EpochDir::remove_stale_builds`]).
    pub fn prune(&self, keep: usize) -> Result<()> {
        let ids = self.list()?;
        for id in ids.iter().take(ids.len().saturating_sub(keep)) {
            let p = self.path(*id);
            std::fs::remove_dir_all(&p).map_err(io(&p))?;
        }
        self.remove_stale_builds()?;
        Ok(())
    }
}

/// Snapshot of the store at `now_s`, build of the next epoch, publication
/// and pruning: what `auditor-server build-epoch` and the schedule run.
pub async fn build_next(
    store: &ct_store::Store,
    dir: &EpochDir,
    bp: BuildParams,
    keep: usize,
    now_s: i64,
) -> Result<(PathBuf, Epoch)> {
    let t = Instant::now();
    let snap = snapshot(store, now_s).await?;
    let snap_s = t.elapsed().as_secs_f64();
    let id = dir.latest()?.map_or(1, |l| l + 1);
    tracing::info!(
        epoch = id,
        entries = snap.hashes.len(),
        snapshot_s = snap_s,
        "building epoch"
    );
    build_into(dir, id, keep, move |out| build_epoch(&snap, id, &bp, out)).await
}

/// Runs `build` on a blocking thread into the private directory of epoch
/// `id`, then publishes it and prunes old epochs. A failed build leaves no
/// `.building-*` directory behind.
pub async fn build_into<F>(
    dir: &EpochDir,
    id: u64,
    keep: usize,
    build: F,
) -> Result<(PathBuf, Epoch)>
where
    F: FnOnce(&Path) -> Result<Epoch> + Send + 'static,
{
    let tmp = dir.begin(id)?;
    let tmp2 = tmp.clone();
    let built = tokio::task::spawn_blocking(move || build(&tmp2))
        .await
        .map_err(|e| Error::Internal(e.to_string()))
        .and_then(|r| r);
    let epoch = match built {
        Ok(e) => e,
        Err(e) => {
            if let Err(rm) = std::fs::remove_dir_all(&tmp) {
                tracing::warn!(dir = %tmp.display(), error = %rm, "could not remove a failed build");
            }
            crate::builddir::release(&tmp);
            return Err(e);
        }
    };
    let path = dir.commit(id, &tmp)?;
    dir.prune(keep)?;
    if let Some(r) = &epoch.report {
        tracing::info!(
            epoch = id,
            dbs = r.dbs,
            of = epoch.manifest.dbs.len(),
            db_bytes = r.db_bytes,
            total_s = r.total_s,
            fill = r.fill_ratio,
            "epoch published"
        );
    }
    Ok((path, epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_partitions_in_order() {
        for (a, fb, target) in [
            (768, 1000, 1 << 30),
            (768, 1 << 20, 1 << 26),
            (768, 1 << 35, 1 << 30),
            (5, 10, 25),
            (1, 8, 8),
        ] {
            let plan = plan_dbs(a, fb, target);
            let mut next = 0;
            for &(first, count) in &plan {
                assert_eq!(first, next);
                assert!(count >= 1);
                assert!(count == 1 || u64::from(count) * fb <= target);
                next += count;
            }
            assert_eq!(next, a);
            let max = plan.iter().map(|p| p.1).max().unwrap();
            let min = plan.iter().map(|p| p.1).min().unwrap();
            assert!(max - min <= 1, "balanced: {plan:?}");
        }
        assert_eq!(plan_dbs(768, 1 << 35, 1 << 30).len(), 768);
        assert_eq!(plan_dbs(768, 1000, 1 << 30).len(), 1);
    }

    /// A single server measures the fill ratio of every filter and states
    /// it in the manifest its bitmap files are bound to; the ratio of a
    /// planned epoch comes from a sample of its filters.
    #[test]
    fn the_manifest_states_the_measured_fill_ratio() {
        let hashes: Vec<[u8; 32]> = (0..40u32)
            .map(|i| Sha256::digest(i.to_le_bytes()).into())
            .collect();
        let snap = Snapshot {
            now_s: 1_700_000_000,
            hashes,
            coverage: Vec::new(),
        };
        let bp = BuildParams {
            filters: 6,
            k: 8,
            db_bits_target: 1 << 10,
            params: pir_core::params::TOY,
            progress: false,
            shards: None,
            budget: crate::memory::Budget::default(),
        };
        let dir = tempfile::tempdir().unwrap();
        let built = build_epoch(&snap, 1, &bp, dir.path()).unwrap();
        let m = &built.manifest;
        assert!(m.dbs.len() > 1, "{}", m.dbs.len());
        let ratio = m.fill_ratio.expect("fill ratio in the manifest");
        let report = built.report.as_ref().unwrap().fill_ratio;
        assert!((ratio.get() - report).abs() < 1e-6, "{ratio:?} {report}");
        // 40 entries in 320-bit filters: some bits collide, none is lost.
        assert!(
            ratio.get() > 0.1 && ratio.get() <= 40.0 / 320.0,
            "{ratio:?}"
        );
        assert_eq!(sample_fill_ratio(m, &snap.hashes, 6).unwrap(), ratio);
        // The bitmaps are bound to the manifest with the ratio…
        let loaded = load_epoch(dir.path(), &ShardConfig::default(), &bp.budget).unwrap();
        assert_eq!(&loaded.manifest, m);
        // …and a manifest whose ratio was edited is refused.
        let path = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replacen(
            &format!("\"fill_ratio\":{}", ratio.get()),
            "\"fill_ratio\":0.01",
            1,
        );
        assert_ne!(edited, text);
        std::fs::write(&path, edited).unwrap();
        let e = load_epoch(dir.path(), &ShardConfig::default(), &bp.budget).unwrap_err();
        assert!(e.to_string().contains("another manifest"), "{e}");
    }

    #[test]
    fn bits_file_round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.bits");
        let bitmap: Vec<u8> = (0..100u8).collect();
        let h = BitsHeader {
            epoch: 3,
            db: 1,
            bits: 800,
            manifest: [7; 32],
        };
        write_bits(&p, &h, &bitmap).unwrap();
        assert_eq!(
            read_bits(&p, &h, Path::new("manifest.json")).unwrap(),
            bitmap
        );
        for other in [
            BitsHeader { epoch: 4, ..h },
            BitsHeader { db: 0, ..h },
            BitsHeader { bits: 792, ..h },
        ] {
            assert!(read_bits(&p, &other, Path::new("manifest.json")).is_err());
        }
        let err = read_bits(
            &p,
            &BitsHeader {
                manifest: [8; 32],
                ..h
            },
            Path::new("manifest.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("built for another manifest"), "{err}");
        let mut raw = std::fs::read(&p).unwrap();
        raw[70] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        assert!(matches!(
            read_bits(&p, &h, Path::new("manifest.json")),
            Err(Error::Corrupt { .. })
        ));
    }

    /// A format-1 file (no manifest digest) is refused with a message that
    /// names the format, not accepted or reported as mere damage.
    #[test]
    fn old_format_bits_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.bits");
        let bitmap = [0xA5u8; 100];
        let mut data = Vec::new();
        data.extend_from_slice(BITS_MAGIC_V1);
        data.extend_from_slice(&3u64.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&800u64.to_le_bytes());
        data.extend_from_slice(&bitmap);
        let digest = Sha256::digest(&data);
        data.extend_from_slice(&digest);
        std::fs::write(&p, &data).unwrap();
        let h = BitsHeader {
            epoch: 3,
            db: 1,
            bits: 800,
            manifest: [0; 32],
        };
        let err = read_bits(&p, &h, Path::new("manifest.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("format 1") && err.contains("rebuild"), "{err}");
        std::fs::write(&p, b"garbage").unwrap();
        let err = read_bits(&p, &h, Path::new("manifest.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad magic"), "{err}");
    }
}
