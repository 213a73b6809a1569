//! How much memory an epoch's databases need, checked before a build or
//! a load (`docs/operator.md` §Sizing).
//!
//! Each database a server holds costs its records (ℓ1·ℓ2 bytes) plus its
//! YPIR state ([`pir_core::server::Server::memory`]): the hint rows
//! (2·K_H bytes per column), the expanded public randomness, and the §4.2
//! packing precomputation — the cached gadget digits of every static node
//! of the packing tree, 100,237,312 bytes (≈ 96 MiB) under YPIR Table 1
//! *whatever the database's size*. An epoch of 768 one-filter databases
//! therefore needs ≈ 77 GB before its first record; a server that cannot
//! hold that is killed by the kernel partway through the build. So the
//! estimate is compared with the memory available before anything is
//! allocated, and a build (or load) that does not fit is refused with the
//! shard count or `db_bits_target` that would fit.
//!
//! While building, a server also fills its bitmaps from the snapshot's
//! leaf hashes. A shard of a prepared epoch streams them from the object
//! store ([`need_streamed`]): it holds a few verified snapshot parts
//! ([`crate::snapshot::PARTS_IN_FLIGHT`] fetched, one queued, one being
//! filled, 32 MiB each) and the scratch of one fill round
//! (`fill::fill_scratch`), whatever |S|. A build from hashes in memory
//! ([`need`] with `building`: a single server, or a shard building from a
//! spec file) also holds all of them, 32 bytes per entry of S, until its
//! last database is set up. Setting up a database takes DBSetup's
//! transient buffers and the unrounded A1·D (released once its hint is
//! written).
//!
//! A build has two peaks ([`Need::peak`]): while the filters are filled,
//! every bitmap of the shard (they become its databases' records, in
//! place) beside the leaf hashes held and the fill's scratch; and while
//! the databases are set up one by one, the records and YPIR state of
//! every database beside the leaf hashes held and one database's
//! transients.

use audit_proto::Manifest;
use pir_core::params::{DbShape, Params};
use pir_core::server::Server;

use crate::error::{Error, Result};
use crate::layout::plan_dbs;

/// What an epoch's databases on one server need (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// Databases held.
    pub dbs: usize,
    /// Their records.
    pub records: u64,
    /// Their YPIR state beyond the records while served (hint rows,
    /// public randomness, packing precomputation).
    pub state: u64,
    /// The largest per-database transient of a build or load (DBSetup
    /// buffers, unrounded A1·D, the files read back).
    pub transient: u64,
    /// The snapshot's leaf hashes held while building (0 when loading or
    /// streaming).
    pub snapshot: u64,
    /// The scratch of filling the filters beside the bitmaps, and the
    /// snapshot parts in flight of a streamed build (0 when loading).
    pub fill: u64,
    /// The part of the fill's scratch the allocator may keep resident
    /// after the fill (pieces below glibc's 32 MiB mmap threshold are
    /// freed to its heap, not to the kernel): counted while the databases
    /// are set up (0 when loading).
    pub kept: u64,
}

impl Need {
    /// Held while serving.
    pub fn serving(&self) -> u64 {
        self.records + self.state
    }

    /// The most held at once while building or loading: filling (every
    /// bitmap, i.e. the records, beside the leaf hashes held and the
    /// fill's scratch) or setting up (everything served, the leaf hashes
    /// held, one database's transients, the fill scratch the allocator
    /// kept).
    pub fn peak(&self) -> u64 {
        let setting_up = self.serving() + self.transient + self.snapshot + self.kept;
        let filling = self.records + self.snapshot + self.fill;
        setting_up.max(filling)
    }
}

/// How an epoch's databases come to a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// Loaded from its files.
    Load,
    /// Built from leaf hashes held in memory.
    Memory,
    /// Built from the object store's snapshot, streamed part by part.
    Stream,
}

impl How {
    fn of(building: bool) -> How {
        if building {
            How::Memory
        } else {
            How::Load
        }
    }
}

/// What the databases `own` of `m` need on one server; `building`: built
/// from a snapshot of `m.entries` leaf hashes held in memory (else loaded
/// from disk).
pub fn need(m: &Manifest, own: &[u32], building: bool) -> Result<Need> {
    need_how(m, own, How::of(building))
}

/// What building the databases `own` of `m` on one server needs when the
/// snapshot streams from the object store: no term grows with |S|.
pub fn need_streamed(m: &Manifest, own: &[u32]) -> Result<Need> {
    need_how(m, own, How::Stream)
}

fn need_how(m: &Manifest, own: &[u32], how: How) -> Result<Need> {
    let params = pir_core::params::by_id(m.pir.param_set)?;
    let shapes = own
        .iter()
        .filter_map(|&d| m.dbs.get(d as usize))
        .map(|d| DbShape {
            ell1: usize::try_from(d.rows).unwrap_or(usize::MAX),
            ell2: usize::try_from(d.cols).unwrap_or(usize::MAX),
        });
    let mut n = need_for_shapes(&params, shapes, how != How::Load);
    let filters: u64 = own
        .iter()
        .filter_map(|&d| m.dbs.get(d as usize))
        .map(|d| u64::from(d.filters))
        .sum();
    add_build(&mut n, m, filters, how);
    Ok(n)
}

/// Adds to `n` what building `filters` filters of `m` holds beside the
/// databases.
fn add_build(n: &mut Need, m: &Manifest, filters: u64, how: How) {
    let scratch = crate::fill::fill_scratch(m.entries, m.filter.bits, filters);
    match how {
        How::Load => {}
        How::Memory => {
            n.snapshot = m.entries.saturating_mul(32);
            n.fill = scratch;
            n.kept = scratch;
        }
        How::Stream => {
            let part =
                crate::snapshot::part_len(m.entries.min(u64::from(crate::snapshot::PART_ENTRIES)));
            let parts = crate::snapshot::PARTS_IN_FLIGHT as u64 + 2;
            n.fill = scratch + parts * part;
            n.kept = scratch;
        }
    }
}

fn need_for_shapes(params: &Params, shapes: impl Iterator<Item = DbShape>, building: bool) -> Need {
    let mut n = Need::default();
    for shape in shapes {
        let mem = Server::memory(params, shape);
        n.dbs += 1;
        n.records += mem.records as u64;
        n.state += (mem.after_load() - mem.records) as u64;
        let transient = if building {
            mem.unrounded + mem.setup_transient
        } else {
            // the bitmap and hint files are read whole before the server
            // takes them over
            mem.records + mem.hint + mem.setup_transient
        };
        n.transient = n.transient.max(transient as u64);
    }
    n
}

/// Memory this server may use for a new epoch: the configured budget
/// minus what the epochs it already holds use, and (on Linux) at most
/// what the kernel reports available (`/proc/meminfo` MemAvailable) and
/// what the cgroup allows (`memory.max − memory.current`, cgroup v2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// `[epoch] max_memory_bytes` (`None`: only what the system reports).
    pub max_bytes: Option<u64>,
    /// Estimated memory of the epochs this process already holds.
    pub held: u64,
}

/// The memory available and where the figure comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u64,
    /// `"max_memory_bytes"`, `"MemAvailable"` or `"cgroup memory.max"`.
    pub source: &'static str,
}

impl Budget {
    /// What is available now (`None`: no limit known).
    pub fn available(&self) -> Option<Available> {
        let mut best: Option<Available> = self.max_bytes.map(|m| Available {
            bytes: m.saturating_sub(self.held),
            source: "max_memory_bytes",
        });
        let system = [
            (mem_available(), "MemAvailable"),
            (cgroup_available(), "cgroup memory.max"),
        ];
        for (bytes, source) in system {
            if let Some(bytes) = bytes {
                if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                    best = Some(Available { bytes, source });
                }
            }
        }
        best
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `memory.max − memory.current` of this process's cgroup (v2), if it
/// has a limit.
fn cgroup_available() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max": no limit
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

/// Bytes in GB with one decimal (MB below 1 GB).
fn gb(b: u64) -> String {
    if b < 1_000_000_000 {
        format!("{:.0} MB", b as f64 / 1e6)
    } else {
        format!("{:.1} GB", b as f64 / 1e9)
    }
}

/// Refuses (with [`Error::Memory`]) a build or load of the databases
/// `own` of `m` by shard `index` of `count` that would not fit in what
/// `budget` leaves. Without any known limit the check passes.
pub fn check(
    m: &Manifest,
    own: &[u32],
    (index, count): (u32, u32),
    building: bool,
    budget: &Budget,
) -> Result<Need> {
    check_how(m, own, (index, count), How::of(building), budget)
}

/// [`check`] of a build that streams the snapshot from the object store
/// ([`need_streamed`]).
pub fn check_streamed(
    m: &Manifest,
    own: &[u32],
    (index, count): (u32, u32),
    budget: &Budget,
) -> Result<Need> {
    check_how(m, own, (index, count), How::Stream, budget)
}

fn check_how(
    m: &Manifest,
    own: &[u32],
    (index, count): (u32, u32),
    how: How,
    budget: &Budget,
) -> Result<Need> {
    let Some(avail) = budget.available() else {
        tracing::warn!(
            "no memory limit known (no /proc/meminfo, no max_memory_bytes): not checked"
        );
        return need_how(m, own, how);
    };
    check_against_how(m, own, (index, count), how, &avail)
}

/// [`check`] against a given amount of available memory.
pub fn check_against(
    m: &Manifest,
    own: &[u32],
    (index, count): (u32, u32),
    building: bool,
    avail: &Available,
) -> Result<Need> {
    check_against_how(m, own, (index, count), How::of(building), avail)
}

fn check_against_how(
    m: &Manifest,
    own: &[u32],
    (index, count): (u32, u32),
    how: How,
    avail: &Available,
) -> Result<Need> {
    let building = how != How::Load;
    let n = need_how(m, own, how)?;
    if n.peak() <= avail.bytes {
        return Ok(n);
    }
    let params = pir_core::params::by_id(m.pir.param_set)?;
    let fixed = Server::memory(&params, DbShape { ell1: 1, ell2: 1 }).after_load() as u64;
    let what = if building { "build" } else { "load" };
    let mut msg = format!(
        "epoch {}: shard {index} of {count} needs ≈ {} to {what} its {} of {} databases \
         ({} of records, {} of YPIR state — at least {} per database, the packing \
         precomputation{}), but {} is available ({}); refused rather than running out of memory.",
        m.epoch,
        gb(n.peak()),
        n.dbs,
        m.dbs.len(),
        gb(n.records),
        gb(n.state),
        format_args!("{:.0} MB", fixed as f64 / 1e6),
        match how {
            How::Load => String::new(),
            How::Memory => format!(", plus {} of leaf hashes", gb(n.snapshot)),
            How::Stream => format!(", plus {} of snapshot parts and fill scratch", gb(n.fill)),
        },
        gb(avail.bytes),
        avail.source,
    );
    let mut fixes = Vec::new();
    if let Some(shards) = shards_that_fit(m, &params, how, avail.bytes) {
        fixes.push(format!("on {shards} shards ([shard] count = {shards})"));
    }
    if let Some((target, per, dbs)) = target_that_fits(m, &params, (index, count), how, avail.bytes)
    {
        fixes.push(format!(
            "with [epoch] db_bits_target = {target} ({per} filters per database, {dbs} databases)"
        ));
    }
    if fixes.is_empty() {
        msg.push_str(" Not even one database fits: give this server more memory.");
    } else {
        msg.push_str(&format!(" It would fit {}.", fixes.join(", or ")));
    }
    Err(Error::Memory(msg))
}

/// The fewest shards (rule `d mod n`, at least the epoch's planned count)
/// whose largest share fits in `avail`.
fn shards_that_fit(m: &Manifest, params: &Params, how: How, avail: u64) -> Option<u32> {
    let total = m.dbs.len() as u32;
    let planned = m.shards.as_ref().map_or(1, |s| s.count());
    (planned.max(1)..=total).find(|&n| {
        // shard 0 has the most databases under the rule
        let share = m.dbs.iter().filter(|d| d.id % n == 0);
        let filters = share.clone().map(|d| u64::from(d.filters)).sum();
        let shapes = share.map(|d| DbShape {
            ell1: d.rows as usize,
            ell2: d.cols as usize,
        });
        let mut need = need_for_shapes(params, shapes, how != How::Load);
        add_build(&mut need, m, filters, how);
        need.peak() <= avail
    })
}

/// The smallest `db_bits_target` (as whole filters per database) whose
/// layout gives this shard a share that fits in `avail`, if any: fewer,
/// larger databases pay the fixed part fewer times.
fn target_that_fits(
    m: &Manifest,
    params: &Params,
    (index, count): (u32, u32),
    how: How,
    avail: u64,
) -> Option<(u64, u32, usize)> {
    let (a, fb) = (m.filter.a, m.filter.bits);
    let now = m.dbs.iter().map(|d| d.filters).max().unwrap_or(1);
    (now + 1..=a).find_map(|per| {
        let target = u64::from(per).checked_mul(fb)?;
        let plan = plan_dbs(a, fb, target);
        let shapes: Vec<DbShape> = plan
            .iter()
            .map(|&(_, c)| {
                DbShape::for_bits(u64::from(c) * fb, pir_core::db::BitDatabase::RECORD_BITS)
            })
            .collect();
        if shapes.iter().any(|&s| params.check_shape(s).is_err()) {
            return None;
        }
        let mine = |d: usize| d as u32 % count.max(1) == index;
        let share = shapes
            .iter()
            .enumerate()
            .filter(|(d, _)| mine(*d))
            .map(|(_, s)| *s);
        let filters = plan
            .iter()
            .enumerate()
            .filter(|(d, _)| mine(*d))
            .map(|(_, &(_, c))| u64::from(c))
            .sum();
        let mut need = need_for_shapes(params, share, how != How::Load);
        add_build(&mut need, m, filters, how);
        (need.peak() <= avail).then_some((target, per, plan.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_parsed() {
        let text = "MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   21000000 kB\n";
        assert_eq!(parse_meminfo(text), Some(21_000_000 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: lots kB\n"), None);
    }

    /// The outside run: 768 one-filter databases under Table 1 do not fit
    /// in 24 GB whatever their size; the estimate says so and names fixes.
    #[test]
    fn internet_layout_on_a_small_machine_is_refused_with_fixes() {
        use audit_proto::filter::FilterSpec;
        use audit_proto::manifest::{DbLayout, ManifestParts, PirSpec};
        let params = pir_core::params::TABLE1;
        let entries = 1u64 << 20;
        let filter = FilterSpec::new(768, 8, entries, [1; 32]).unwrap();
        let shape = DbShape::for_bits(filter.bits, 8);
        let layout = vec![
            DbLayout {
                filters: 1,
                rows: shape.ell1 as u64,
                cols: shape.ell2 as u64,
                query_bytes: pir_core::wire::query_len(&params, shape) as u64,
                response_bytes: pir_core::wire::response_len(&params) as u64,
            };
            768
        ];
        let m = Manifest::new(ManifestParts {
            epoch: 9,
            created_at: 0,
            snapshot_at: 0,
            entries,
            logs: vec![],
            filter,
            pir: PirSpec {
                scheme: "ypir".into(),
                param_set: params.id,
                param_name: params.name.into(),
                wire_version: pir_core::wire::VERSION,
                seed: [2; 32],
            },
            layout: &layout,
            shards: None,
        })
        .unwrap();
        let all: Vec<u32> = (0..768).collect();
        let n = need(&m, &all, true).unwrap();
        assert_eq!(n.dbs, 768);
        // ≈ 106 MB per database of 2^23 bits (1 MB of records): ≈ 81 GB
        assert!((78e9..84e9).contains(&(n.serving() as f64)), "{n:?}");
        let gb24 = Available {
            bytes: 24_000_000_000,
            source: "max_memory_bytes",
        };
        let e = check_against(&m, &all, (0, 1), true, &gb24)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "not enough memory: epoch 9: shard 0 of 1 needs ≈ 81.5 GB to build its 768 of \
             768 databases (805 MB of records, 80.4 GB of YPIR state — at least 101 MB per \
             database, the packing precomputation, plus 34 MB of leaf hashes), but 24.0 GB is \
             available (max_memory_bytes); refused rather than running out of memory. It \
             would fit on 4 shards ([shard] count = 4), or with [epoch] db_bits_target = \
             33554432 (4 filters per database, 192 databases)."
        );
        // What fits passes.
        let exact = Available {
            bytes: n.peak(),
            source: "max_memory_bytes",
        };
        assert_eq!(check_against(&m, &all, (0, 1), true, &exact).unwrap(), n);
        let short = Available {
            bytes: n.peak() - 1,
            ..exact.clone()
        };
        assert!(check_against(&m, &all, (0, 1), true, &short).is_err());
        // Nothing fits in 50 MB.
        let tiny = Available {
            bytes: 50_000_000,
            ..exact
        };
        let e = check_against(&m, &all, (0, 1), true, &tiny)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Not even one database fits"), "{e}");
        // The configured budget counts what is held and is capped by the
        // system's figures.
        let budget = Budget {
            max_bytes: Some(1 << 40),
            held: (1 << 40) - 1000,
        };
        assert!(budget.available().is_some_and(|a| a.bytes <= 1000));
        // A quarter of the databases on shard 1 of 4 fits in 24 GB.
        let own: Vec<u32> = (0..768).filter(|d| d % 4 == 1).collect();
        let quarter = need(&m, &own, true).unwrap();
        assert!(quarter.peak() < 24_000_000_000, "{quarter:?}");
    }
}
