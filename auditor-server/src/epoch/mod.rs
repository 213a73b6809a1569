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
//! 3. Filters are grouped into PIR databases ([`crate::layout::plan_dbs`]): consecutive
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
//! ([`crate::epochdir`]). Each artifact carries a SHA-256
//! trailer; a restarted server reloads the newest epoch without
//! recomputing A1·D (`pir_core::server::Server::from_hint`).
//!
//! Binding: every bitmap file's header holds the SHA-256 of the exact
//! `manifest.json` bytes ([`crate::layout::manifest_digest`]), under its own checksum. The
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

use audit_proto::Manifest;
use futures_util::TryStreamExt;
use pir_core::params::Params;
use pir_core::server::Server;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod artifacts;
mod build;
mod load;
mod sorted;

pub use artifacts::{read_db_bit, read_manifest};
pub use build::{
    build_epoch, build_into, build_next, build_planned, build_planned_with, plan_manifest,
    sample_fill_ratio, sample_fill_ratio_sorted, SAMPLE_WINDOW_BITS,
};
pub use load::load_epoch;
pub use sorted::{SortedReader, SortedSnapshot, DEFAULT_MAX_RUN};

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
/// order of reads). A store without an active entry is
/// [`Error::EmptyStore`]: no epoch is built from it.
pub async fn snapshot(store: &ct_store::Store, now_s: i64) -> Result<Snapshot> {
    let coverage = store.coverage().await?;
    let mut hashes: Vec<[u8; 32]> = store.active_leaf_hashes(now_s).try_collect().await?;
    if hashes.is_empty() {
        return Err(Error::EmptyStore {
            now_s,
            logs: coverage.len(),
        });
    }
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
    Ok(getrandom::getrandom(buf)?)
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

/// Unix time in seconds (the workspace's one clock helper).
pub use ct_core::civil::unix_now_s;
