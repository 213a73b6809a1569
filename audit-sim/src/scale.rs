//! The internet-scale bill beyond one query: cross-client batching priced
//! from a batch curve measured on this machine, and the fixed weekly costs
//! every client shares — the daily epoch build (filters + DBSetup) and the
//! server memory that holds an epoch plus its successor.
//!
//! Everything here is either measured in process on the machine making the
//! report ([`measure_batch_curve`], [`measure_filter_build`], the DBSetup
//! rate of [`crate::cost::measure_answer_times`]) or derived from those
//! measurements with the formulas written beside each field; the report
//! labels which.
//!
//! Notation: a = 768 filters of 8·|S| bits (SimplePIR §6–7), each its own
//! YPIR database at internet scale; k = queries answered in one pass over a
//! database (YPIR §4.5 "cross-client batching").

use std::time::Instant;

use audit_proto::filter::{FilterSpec, DEFAULT_FILTERS, DEFAULT_K};
use audit_proto::LeafHash;
use pir_core::bench::{paired_batch_rounds, BenchDb, PairedRounds};
use pir_core::db::BitDatabase;
use pir_core::params::{DbShape, TABLE1};
use pir_core::server::Server;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::machine::cpu_model;

pub use crate::machine::mem_available;

/// Active SCTs at internet scale (YPIR §4.5).
pub const INTERNET_SCALE_SCTS: u64 = 5_000_000_000;

/// Seconds per week.
pub const WEEK_S: f64 = 604_800.0;
/// Batch sizes [`measure_batch_curve`] times by default.
pub const DEFAULT_BATCH_KS: [usize; 5] = [1, 2, 4, 8, 16];
/// Largest batch a curve may hold (auditor-server's `max_batch` cap).
pub const MAX_BATCH_K: usize = 64;
/// How long a query may wait for others to the same database before the
/// pass starts, in the batching model of [`expected_batch`]: the
/// `batch_window_ms = 100` recommended for internet scale in
/// docs/operator.md ("Batching") and set by the Helm chart (deploy/helm/ct-auditor/files/auditor.toml).
pub const DEFAULT_BATCH_WINDOW_S: f64 = 0.1;
/// Entries [`measure_filter_build`] inserts by default: 2^22, so each
/// sampled filter (8·2^22 bits = 4 MiB) is past the per-core caches and
/// bit setting pays for misses as it does at internet scale.
pub const DEFAULT_BUILD_ENTRIES: u64 = 1 << 22;
/// Filters [`measure_filter_build`] fills by default: one ChaCha20 block
/// of the 768 (the cost per (entry, filter) does not depend on a).
pub const DEFAULT_BUILD_FILTERS: u32 = 8;

/// One batch size of a [`BatchCurve`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchPoint {
    /// Queries answered in one pass.
    pub k: usize,
    /// Median seconds for the whole batch on one core.
    pub batch_seconds: f64,
    /// Core-seconds per query relative to a single query:
    /// (batch_seconds / k) / t(1). Below 1 is the saving.
    pub per_query_ratio: f64,
}

/// Single-core answer time of batches of k queries at one database size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchCurve {
    /// Database bytes (records ℓ1·ℓ2) the curve was measured at.
    pub db_bytes: f64,
    /// The points, by increasing k; the first is k = 1.
    pub points: Vec<BatchPoint>,
    /// Where it was measured (CPU, kernel, size, trials).
    pub source: String,
}

impl BatchCurve {
    /// Per-query cost ratio at batch size `k`, linearly interpolated
    /// between measured sizes and held at the largest measured k beyond it
    /// (the pass is then bound by arithmetic, so the ratio is flat).
    pub fn ratio(&self, k: f64) -> f64 {
        let pts = &self.points;
        let Some(first) = pts.first() else {
            return 1.0;
        };
        if k <= first.k as f64 {
            return first.per_query_ratio;
        }
        for w in pts.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if k <= b.k as f64 {
                let t = (k - a.k as f64) / (b.k - a.k) as f64;
                return a.per_query_ratio + t * (b.per_query_ratio - a.per_query_ratio);
            }
        }
        pts.last().map_or(1.0, |p| p.per_query_ratio)
    }

    /// Largest k measured.
    pub fn max_k(&self) -> usize {
        self.points.last().map_or(1, |p| p.k)
    }
}

/// Mean batch size at a database receiving `rate` queries per second when
/// a pass waits up to `window_s` for more queries to the same database
/// (Poisson arrivals): 1 + rate·window, capped at `max_k`.
pub fn expected_batch(rate: f64, window_s: f64, max_k: usize) -> f64 {
    (1.0 + rate.max(0.0) * window_s.max(0.0)).min(max_k.max(1) as f64)
}

/// Queries per second reaching one of `filters` databases from `clients`
/// clients making `audits_per_week` audits each (uniform over filters: a
/// leaf's filter is chosen by the client at random, SimplePIR §6).
pub fn per_database_rate(clients: f64, audits_per_week: f64, filters: u32) -> f64 {
    clients * audits_per_week / WEEK_S / f64::from(filters.max(1))
}

/// Measures batches of each k in `ks` (each at most [`MAX_BATCH_K`]; 1 is
/// always included) at a random database of 2^`log2_bits` bits on one core
/// (a one-thread rayon pool), in `trials` rounds, with pir-core's
/// benchmark code: every batch of fresh queries is timed from the parsed
/// queries to the encoded responses and checked
/// (`pir_core::bench::BenchDb::time_batch`), and priced against single
/// queries timed just before and just after it, a round whose two single
/// queries disagree timed again (`pir_core::bench::paired_batch_rounds`).
pub fn measure_batch_curve(log2_bits: u32, ks: &[usize], trials: usize) -> Result<BatchCurve> {
    if trials == 0 {
        return Err(Error::Invalid("trials must be positive".into()));
    }
    if let Some(k) = ks.iter().find(|&&k| k == 0 || k > MAX_BATCH_K) {
        return Err(Error::Invalid(format!(
            "batch size {k}: expected 1..={MAX_BATCH_K}"
        )));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .map_err(|e| Error::Invalid(format!("cannot start a one-thread pool: {e}")))?;
    pool.install(|| {
        let mut db = BenchDb::random(log2_bits)?;
        let pass = |k: usize| -> Result<f64> {
            let batch = db.time_batch(k)?;
            if !batch.correct {
                return Err(Error::Invalid(format!(
                    "2^{log2_bits}-bit database: a batch of {k} decoded another bit than the one stored"
                )));
            }
            Ok(batch.seconds)
        };
        let PairedRounds { points, repeated } = paired_batch_rounds(ks, trials, pass)?;
        Ok(BatchCurve {
            db_bytes: db.shape.records() as f64,
            points: points
                .iter()
                .map(|p| BatchPoint {
                    k: p.k,
                    batch_seconds: p.batch_seconds,
                    per_query_ratio: p.per_query_ratio,
                })
                .collect(),
            source: format!(
                "measured here on {} ({} kernel; one core, a 2^{log2_bits}-bit database, median of {trials} round{}, each batch against the mean of the single queries timed just before and just after it; {})",
                cpu_model(),
                pir_core::server::simplepir_impl(),
                if trials == 1 { "" } else { "s" },
                repeated.describe(),
            ),
        })
    })
}

/// Measures the filter half of an epoch build on one thread: `entries`
/// random leaf hashes inserted into `filters` (rounded up to whole
/// ChaCha20 blocks of 8) filters of 8·`entries` bits with audit-proto's
/// HASH_V2 — one keyed SHA-256 per entry, one 16-lane ChaCha20 block per
/// 16 entries and 8 filters, the arrangement of auditor-server's fill —
/// writing each bit directly (the server also partitions its writes by
/// region, which helps when the filters outgrow the caches). Returns
/// nanoseconds per (entry, filter).
pub fn measure_filter_build(entries: u64, filters: u32) -> Result<f64> {
    use audit_proto::filter::{chacha20_lanes, derive_entry_key, mul_shift, EntryKeyer, LANES};
    if entries == 0 || filters == 0 {
        return Err(Error::Invalid(
            "the filter build needs at least one entry and one filter".into(),
        ));
    }
    let blocks = filters.div_ceil(8);
    let n = FilterSpec::capacity_for(entries);
    let bits = n * u64::from(DEFAULT_K);
    let bytes = usize::try_from(bits / 8)
        .map_err(|_| Error::Invalid(format!("{bits} bits do not fit in memory")))?;
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| Error::Random(e.to_string()))?;
    let mut rng = ChaCha20Rng::from_seed(seed);
    let leaves: Vec<LeafHash> = (0..entries)
        .map(|_| {
            let mut h = [0u8; 32];
            rng.fill_bytes(&mut h);
            LeafHash::new(h)
        })
        .collect();
    let mut maps: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; bytes]).collect();
    let t = Instant::now();
    let keyer = EntryKeyer::new(&derive_entry_key(&seed));
    let keys: Vec<[[u32; LANES]; 8]> = leaves
        .chunks(LANES)
        .map(|c| {
            let mut lanes = [[0u32; LANES]; 8];
            for (l, h) in c.iter().enumerate() {
                for (w, word) in keyer.key(h).into_iter().enumerate() {
                    lanes[w][l] = word;
                }
            }
            lanes
        })
        .collect();
    for g in 0..blocks {
        for (c, lanes) in keys.iter().enumerate() {
            let out = chacha20_lanes(lanes, g);
            let live = (entries as usize - c * LANES).min(LANES);
            for (f, map) in maps.iter_mut().enumerate() {
                let (lo, hi) = (&out[2 * f][..live], &out[2 * f + 1][..live]);
                for (&lo, &hi) in lo.iter().zip(hi) {
                    let x = u64::from(lo) | u64::from(hi) << 32;
                    let b = mul_shift(x, bits);
                    map[(b / 8) as usize] |= 1 << (b % 8);
                }
            }
        }
        std::hint::black_box(&maps);
    }
    Ok(t.elapsed().as_secs_f64() * 1e9 / (entries as f64 * f64::from(blocks * 8)))
}

/// Inputs of the fixed weekly costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRates {
    /// Filter insertion, ns per (entry, filter) on one core.
    pub ns_per_entry_filter: f64,
    /// Where that was measured.
    pub filter_source: String,
    /// DBSetup throughput on one core, bytes of records per second.
    pub setup_bytes_per_core_second: f64,
    /// Where that was measured.
    pub setup_source: String,
}

/// The fixed weekly costs of the internet-scale deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedCosts {
    /// |S|.
    pub entries: u64,
    /// a.
    pub filters: u32,
    /// Records (bytes) of one filter's database.
    pub db_bytes: u64,
    /// Core-seconds of one daily build: a·|S|·ns_per_entry_filter (filters)
    /// + a·db_bytes / setup rate (DBSetup).
    pub build_core_seconds_per_day: f64,
    /// Of which the filters.
    pub build_filter_core_seconds_per_day: f64,
    /// Server memory of one epoch: a × what a restarted server holds per
    /// database (`pir_core::server::Server::memory(..).after_load()`).
    pub epoch_memory_bytes: f64,
    /// Memory provisioned: two epochs (the next one is built, and the
    /// previous stays answerable for the grace period, while the current
    /// serves; machines are sized for that peak all week).
    pub provisioned_memory_bytes: f64,
    /// USD per week for the builds.
    pub build_usd_per_week: f64,
    /// USD per week for the memory.
    pub memory_usd_per_week: f64,
    /// Sum.
    pub usd_per_week: f64,
}

/// The fixed weekly costs at |S| = 5·10⁹ with a = 768, k = 8, priced at
/// `usd_per_core_second` and `usd_per_gib_hour`.
pub fn fixed_costs(
    rates: &BuildRates,
    usd_per_core_second: f64,
    usd_per_gib_hour: f64,
) -> Result<FixedCosts> {
    let entries = INTERNET_SCALE_SCTS;
    let filters = DEFAULT_FILTERS;
    let bits = FilterSpec::capacity_for(entries) * u64::from(DEFAULT_K);
    let shape = DbShape::for_bits(bits, BitDatabase::RECORD_BITS);
    TABLE1.check_shape(shape)?;
    let db_bytes = shape.records() as u64;
    if !(rates.ns_per_entry_filter.is_finite()
        && rates.ns_per_entry_filter > 0.0
        && rates.setup_bytes_per_core_second.is_finite()
        && rates.setup_bytes_per_core_second > 0.0)
    {
        return Err(Error::Invalid(format!(
            "build rates must be positive and finite: {rates:?}"
        )));
    }
    let a = f64::from(filters);
    let build_filter = a * entries as f64 * rates.ns_per_entry_filter * 1e-9;
    let build_setup = a * db_bytes as f64 / rates.setup_bytes_per_core_second;
    let per_db = Server::memory(&TABLE1, shape).after_load() as f64;
    let epoch_memory_bytes = a * per_db;
    let provisioned = 2.0 * epoch_memory_bytes;
    let build_usd = 7.0 * (build_filter + build_setup) * usd_per_core_second;
    let memory_usd = provisioned / GIB * (WEEK_S / 3600.0) * usd_per_gib_hour;
    Ok(FixedCosts {
        entries,
        filters,
        db_bytes,
        build_core_seconds_per_day: build_filter + build_setup,
        build_filter_core_seconds_per_day: build_filter,
        epoch_memory_bytes,
        provisioned_memory_bytes: provisioned,
        build_usd_per_week: build_usd,
        memory_usd_per_week: memory_usd,
        usd_per_week: build_usd + memory_usd,
    })
}

const GIB: f64 = 1_073_741_824.0;

/// The machine a deployment is sized for. Default: AWS r6i.16xlarge, the
/// instance the YPIR authors benchmarked on (64 vCPUs, 512 GiB).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineSize {
    /// Name shown in the report.
    pub name: String,
    /// Memory (GiB).
    pub memory_gib: f64,
    /// Cores (vCPUs) that answer or build.
    pub cores: f64,
    /// Memory read bandwidth of the whole machine (GB/s) — an assumption
    /// (not measurable from here): all cores scanning at once share it.
    pub memory_gb_s: f64,
    /// Network bandwidth (Gbit/s) for streaming the snapshot.
    pub network_gbit_s: f64,
}

impl Default for MachineSize {
    fn default() -> Self {
        MachineSize {
            name: "r6i.16xlarge-like (64 vCPUs, 512 GiB, 150 GB/s of memory, 25 Gbit/s)".into(),
            memory_gib: 512.0,
            cores: 64.0,
            memory_gb_s: 150.0,
            network_gbit_s: 25.0,
        }
    }
}

/// Fraction of a machine's memory the auditor's databases may use (the
/// rest: OS, HTTP, batching buffers, the snapshot being streamed).
pub const USABLE_MEMORY_FRACTION: f64 = 0.85;
/// Bytes per leaf hash in the epoch snapshot object.
pub const SNAPSHOT_BYTES_PER_ENTRY: f64 = 32.0;
/// Bytes per entry a shard holds while it fills its filters: the leaf hash
/// and its HASH_V2 ChaCha20 key (auditor-server's `memory` module).
pub const BUILD_BYTES_PER_ENTRY: f64 = 64.0;

/// Machines for one population.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PopulationSize {
    /// Clients.
    pub clients: f64,
    /// Cores answering (core-seconds of queries per second).
    pub answering_cores: f64,
    /// Database bytes scanned per second (queries/s × bytes ÷ batch).
    pub scan_gb_s: f64,
    /// Machines the cores need.
    pub machines_for_cores: f64,
    /// Machines the scan bandwidth needs.
    pub machines_for_bandwidth: f64,
    /// Machines: the most of shards (memory), cores and bandwidth.
    pub machines: f64,
}

/// The internet-scale deployment on [`MachineSize`] machines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// The machine.
    pub machine: MachineSize,
    /// Databases one shard holds, with room for a second epoch and the
    /// build's snapshot.
    pub databases_per_shard: u32,
    /// Bytes a shard holds while building beside its databases: every
    /// leaf hash and its key ([`BUILD_BYTES_PER_ENTRY`] × |S|).
    pub build_transient_bytes: f64,
    /// Shards (machines) memory alone needs.
    pub shards: u32,
    /// Bytes of one epoch's snapshot object (every shard streams all of
    /// it: every filter holds every entry).
    pub snapshot_bytes: f64,
    /// Bytes moved from the object store per day.
    pub snapshot_bytes_per_day: f64,
    /// Wall seconds of the daily build's computation when every shard
    /// builds its own databases on all its cores (a share of the filters
    /// and DBSetup; the per-entry key is computed by every shard).
    pub build_compute_s: f64,
    /// Wall seconds for a shard to download the snapshot.
    pub snapshot_download_s: f64,
    /// Per population.
    pub populations: Vec<PopulationSize>,
}

/// Sizes the deployment of `fixed` on `machine`s for populations of
/// `(clients, answering_cores, scan_gb_s)`.
pub fn deployment(
    fixed: &FixedCosts,
    machine: &MachineSize,
    populations: &[(f64, f64, f64)],
) -> Result<Deployment> {
    if !(machine.memory_gib > 0.0 && machine.cores >= 1.0 && machine.memory_gb_s > 0.0) {
        return Err(Error::Invalid(format!(
            "machine sizes must be positive: {machine:?}"
        )));
    }
    let per_db = fixed.epoch_memory_bytes / f64::from(fixed.filters.max(1));
    let build_transient_bytes = fixed.entries as f64 * BUILD_BYTES_PER_ENTRY;
    let usable = machine.memory_gib * GIB * USABLE_MEMORY_FRACTION - build_transient_bytes;
    let per_shard = (usable / (2.0 * per_db)).floor();
    if per_shard < 1.0 {
        return Err(Error::Invalid(format!(
            "a {} GiB machine cannot hold the build's {} bytes of leaf hashes and keys and two \
             copies of one {}-byte database",
            machine.memory_gib, build_transient_bytes, per_db
        )));
    }
    let databases_per_shard = per_shard.min(f64::from(fixed.filters)) as u32;
    let shards = fixed.filters.div_ceil(databases_per_shard);
    let snapshot_bytes = fixed.entries as f64 * SNAPSHOT_BYTES_PER_ENTRY;
    let build_compute_s = fixed.build_core_seconds_per_day / (f64::from(shards) * machine.cores);
    let snapshot_download_s = fixed.entries as f64 * SNAPSHOT_BYTES_PER_ENTRY * 8.0
        / (machine.network_gbit_s.max(1e-9) * 1e9);
    let populations = populations
        .iter()
        .map(|&(clients, cores, scan)| {
            let for_cores = (cores / machine.cores).ceil();
            let for_bw = (scan / machine.memory_gb_s).ceil();
            PopulationSize {
                clients,
                answering_cores: cores,
                scan_gb_s: scan,
                machines_for_cores: for_cores,
                machines_for_bandwidth: for_bw,
                machines: for_cores.max(for_bw).max(f64::from(shards)),
            }
        })
        .collect();
    Ok(Deployment {
        machine: machine.clone(),
        databases_per_shard,
        build_transient_bytes,
        shards,
        snapshot_bytes,
        snapshot_bytes_per_day: snapshot_bytes * f64::from(shards),
        build_compute_s,
        snapshot_download_s,
        populations,
    })
}

/// Peak bytes of measuring a 2^`log2_bits`-bit database in process: the
/// random bitmap plus DBSetup's peak.
pub fn measure_peak_bytes(log2_bits: u32) -> u64 {
    let shape = DbShape::for_bits(1u64 << log2_bits, BitDatabase::RECORD_BITS);
    (Server::memory(&TABLE1, shape).setup_peak() + shape.records()) as u64
}

/// The largest database (log2 bits, 20..=`ceiling`) whose measurement
/// fits comfortably in `available` bytes: its peak at most half of them.
pub fn comfortable_max_bits(available: u64, ceiling: u32) -> u32 {
    (20..=ceiling.max(20))
        .rev()
        .find(|&b| measure_peak_bytes(b).saturating_mul(2) <= available)
        .unwrap_or(20)
}

/// The sizes the report measures by default: every other size from 2^20
/// up to `max_bits`, and `max_bits` itself.
pub fn default_measure_bits(max_bits: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (20..=max_bits).step_by(2).collect();
    if v.last() != Some(&max_bits) {
        v.push(max_bits);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(usize, f64)]) -> BatchCurve {
        BatchCurve {
            db_bytes: 1.0,
            points: points
                .iter()
                .map(|&(k, r)| BatchPoint {
                    k,
                    batch_seconds: r * k as f64,
                    per_query_ratio: r,
                })
                .collect(),
            source: "synthetic".into(),
        }
    }

    #[test]
    fn ratio_interpolates_and_holds_past_the_last_point() {
        let c = curve(&[(1, 1.0), (2, 0.8), (4, 0.5), (16, 0.2)]);
        assert_eq!(c.ratio(1.0), 1.0);
        assert!((c.ratio(3.0) - 0.65).abs() < 1e-12);
        assert!((c.ratio(10.0) - 0.35).abs() < 1e-12);
        assert_eq!(c.ratio(64.0), 0.2);
        assert_eq!(c.ratio(0.5), 1.0);
        assert_eq!(c.max_k(), 16);
        assert_eq!(curve(&[]).ratio(4.0), 1.0);
    }

    #[test]
    fn expected_batch_grows_with_rate_and_window_and_is_capped() {
        assert_eq!(expected_batch(0.0, 0.25, 16), 1.0);
        assert!((expected_batch(4.0, 0.25, 16) - 2.0).abs() < 1e-12);
        assert_eq!(expected_batch(1e6, 0.25, 16), 16.0);
        // 10^9 clients × 20 audits a week over 768 databases: ≈ 43 q/s each.
        let r = per_database_rate(1e9, 20.0, 768);
        assert!((r - 43.06).abs() < 0.01, "{r}");
    }

    #[test]
    fn fixed_costs_follow_the_formulas() {
        let rates = BuildRates {
            ns_per_entry_filter: 10.0,
            filter_source: "t".into(),
            setup_bytes_per_core_second: 1e9,
            setup_source: "t".into(),
        };
        let f = fixed_costs(&rates, 1e-5, 0.01).unwrap();
        let a = 768.0;
        let filt = a * 5e9 * 10e-9;
        assert!((f.build_filter_core_seconds_per_day - filt).abs() < 1e-6 * filt);
        let setup = a * f.db_bytes as f64 / 1e9;
        assert!((f.build_core_seconds_per_day - filt - setup).abs() < 1e-6 * filt);
        // 4.66 GiB per filter at 5·10^9 entries, plus the fixed parts.
        assert!(
            (4.6..4.8).contains(&(f.db_bytes as f64 / GIB)),
            "{}",
            f.db_bytes
        );
        assert!(f.epoch_memory_bytes > a * f.db_bytes as f64);
        assert_eq!(f.provisioned_memory_bytes, 2.0 * f.epoch_memory_bytes);
        let mem = f.provisioned_memory_bytes / GIB * 168.0 * 0.01;
        assert!((f.memory_usd_per_week - mem).abs() < 1e-9 * mem);
        assert!((f.usd_per_week - f.memory_usd_per_week - f.build_usd_per_week).abs() < 1e-9);
        let bad = BuildRates {
            ns_per_entry_filter: 0.0,
            ..rates
        };
        assert!(fixed_costs(&bad, 1e-5, 0.01).is_err());
    }

    #[test]
    fn deployment_fits_two_epochs_per_shard_and_takes_the_binding_resource() {
        let rates = BuildRates {
            ns_per_entry_filter: 5.0,
            filter_source: "t".into(),
            setup_bytes_per_core_second: 3e8,
            setup_source: "t".into(),
        };
        let f = fixed_costs(&rates, 1e-5, 0.01).unwrap();
        let m = MachineSize::default();
        let d = deployment(&f, &m, &[(1e8, 100.0, 100.0), (1e9, 1000.0, 20_000.0)]).unwrap();
        let per_db = f.epoch_memory_bytes / 768.0;
        let n = f64::from(d.databases_per_shard);
        let usable = 512.0 * GIB * USABLE_MEMORY_FRACTION - 64.0 * 5e9;
        assert_eq!(d.build_transient_bytes, 64.0 * 5e9);
        assert!(2.0 * n * per_db <= usable);
        assert!(2.0 * (n + 1.0) * per_db > usable);
        assert_eq!(d.shards, 768u32.div_ceil(d.databases_per_shard));
        assert_eq!(d.snapshot_bytes, 5e9 * 32.0);
        assert_eq!(
            d.snapshot_bytes_per_day,
            d.snapshot_bytes * f64::from(d.shards)
        );
        let wall = f.build_core_seconds_per_day / (f64::from(d.shards) * 64.0);
        assert!((d.build_compute_s - wall).abs() < 1e-9);
        assert!((d.snapshot_download_s - 5e9 * 32.0 * 8.0 / 25e9).abs() < 1e-9);
        // 10^8: memory binds; 10^9: bandwidth (20,000 GB/s ÷ 150).
        assert_eq!(d.populations[0].machines, f64::from(d.shards));
        assert_eq!(d.populations[1].machines_for_cores, 16.0);
        assert_eq!(d.populations[1].machines, (20_000.0f64 / 150.0).ceil());
        let tiny = MachineSize {
            memory_gib: 4.0,
            ..m
        };
        assert!(deployment(&f, &tiny, &[]).is_err());
    }

    #[test]
    fn comfortable_sizes_leave_half_the_memory_free() {
        let b = comfortable_max_bits(24 << 30, 36);
        assert!(measure_peak_bytes(b) * 2 <= 24 << 30);
        assert!(measure_peak_bytes(b + 1) * 2 > 24 << 30);
        assert_eq!(comfortable_max_bits(0, 36), 20);
        assert_eq!(default_measure_bits(25), vec![20, 22, 24, 25]);
        assert_eq!(default_measure_bits(24), vec![20, 22, 24]);
    }

    #[test]
    fn tiny_measurements_run() {
        let c = measure_batch_curve(16, &[2, 4], 1).unwrap();
        assert_eq!(c.points.iter().map(|p| p.k).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(c.points[0].per_query_ratio, 1.0);
        assert!(c.points.iter().all(|p| p.batch_seconds > 0.0));
        assert!(measure_batch_curve(16, &[65], 1).is_err());
        let ns = measure_filter_build(1 << 12, 2).unwrap();
        assert!(ns.is_finite() && ns > 0.0);
        assert!(measure_filter_build(0, 2).is_err());
    }
}
