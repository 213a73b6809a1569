//! Setting the filters' bits: every entry of S into every filter a
//! database holds (the first step of building an epoch's databases).
//!
//! The entries arrive in chunks ([`Filler::add`]: a shard feeds the
//! snapshot's parts as they are verified; an in-memory build feeds slices
//! of its set), in any order — a bit is an OR, so the order does not
//! matter — and each chunk is processed in rounds of at most [`ROUND`]
//! entries, so the memory beside the bitmaps ([`fill_scratch`]) depends on
//! the round, never on |S|.
//!
//! A round goes through the filters one keystream block at a time (8
//! filters: under [`HashVersion::V2`] one ChaCha20 block, counter
//! `filter / 8`, yields the 8 filters' bit indexes of an entry), in two
//! parallel steps:
//!
//! 1. *hash*, parallel over the round's entries: each task takes a slice
//!    of the entries (their ChaCha20 keys computed once per round,
//!    [`EntryKeyer`], [`chacha20_lanes`] over [`LANES`] entries at once;
//!    under [`HashVersion::V1`] one SHA-256 per entry and filter) and
//!    sorts their bit indexes by (filter, 1 MiB region) with a counting
//!    sort into 32-bit offsets;
//! 2. *set*, parallel over the disjoint 1 MiB regions of the 8 bitmaps
//!    (`chunks_mut`): each region applies the offsets every task sorted
//!    into it, so its random writes stay within one huge page that stays
//!    in L2 and the TLB.
//!
//! So every core works in both steps whatever the shard owns, where one
//! task per 8-filter block would use at most (own filters / 8) cores.

use audit_proto::filter::{
    chacha20_lanes, mul_shift, EntryKeyer, FilterHasher, FilterSpec, HashVersion, KeyLanes, LANES,
};
use audit_proto::Manifest;
use indicatif::ProgressBar;
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Filters per ChaCha20 block (16 words, two per filter).
const PER_BLOCK: u32 = 8;
/// Entries a round hashes before it sets their bits.
pub(crate) const ROUND: usize = 1 << 20;
/// log2 of a region's bits: 2^23 bits = 1 MiB, about half an L2 cache.
const REGION_SHIFT: u32 = 23;
/// Bytes of a region.
const REGION_BYTES: usize = 1 << (REGION_SHIFT - 3);
/// Fewest entries a hash task takes (fewer tasks for a small round).
const MIN_TASK: usize = 1 << 12;

/// Zeroed bitmaps of the databases `own` of `manifest` (`result[d]` is
/// database d's bitmap, `None` for the databases of other shards), each
/// advised for huge pages before the filters write it, so the database
/// needs no page collapse later.
pub(crate) fn own_bitmaps(manifest: &Manifest, own: &[u32]) -> Result<Vec<Option<Vec<u8>>>> {
    let mut maps: Vec<Option<Vec<u8>>> = (0..manifest.dbs.len()).map(|_| None).collect();
    for &d in own {
        let spec = manifest.dbs.get(d as usize).ok_or_else(|| {
            Error::Config(format!(
                "database {d} out of range (epoch {} has {})",
                manifest.epoch,
                manifest.dbs.len()
            ))
        })?;
        maps[d as usize] = Some(pir_core::mem::zeroed_huge::<u8>((spec.bits / 8) as usize));
    }
    Ok(maps)
}

/// The filters of the bitmaps `maps` ([`own_bitmaps`]) as [`Filler`]
/// takes them: (filter index, its bitmap), ascending.
pub(crate) fn filters_of<'a>(
    manifest: &Manifest,
    maps: &'a mut [Option<Vec<u8>>],
) -> Vec<(u32, &'a mut [u8])> {
    let chunk = ((manifest.filter.bits / 8) as usize).max(1);
    let mut filters = Vec::new();
    for (d, map) in maps.iter_mut().enumerate() {
        if let (Some(map), Some(spec)) = (map, manifest.dbs.get(d)) {
            for (j, f) in map.chunks_mut(chunk).enumerate() {
                filters.push((spec.first_filter + j as u32, f));
            }
        }
    }
    filters
}

/// Sets, for every leaf hash in `hashes`, its bit in each filter of
/// `filters`: (filter index in `spec`, its bitmap of `spec.bits / 8`
/// bytes, bit b at byte b/8, bit b%8), in ascending filter order.
/// Advances `pb` by one per filter. CPU-bound; uses all cores.
pub(crate) fn fill_filters(
    spec: &FilterSpec,
    hashes: &[[u8; 32]],
    filters: Vec<(u32, &mut [u8])>,
    pb: &ProgressBar,
) -> Result<()> {
    let n = filters.len() as u64;
    let mut f = Filler::new(spec, filters)?;
    f.add(hashes);
    pb.inc(n);
    Ok(())
}

/// The filters of one keystream block: its counter, and (filter, bitmap).
type Group<'a> = (u32, Vec<(u32, &'a mut [u8])>);

/// Fills a set of filters from chunks of leaf hashes, as they arrive.
pub(crate) struct Filler<'a> {
    spec: &'a FilterSpec,
    keyer: Option<EntryKeyer>,
    groups: Vec<Group<'a>>,
    regions: usize,
    round: usize,
    entries: u64,
}

impl<'a> Filler<'a> {
    /// A filler of `filters` (filter index in `spec`, its bitmap of
    /// `spec.bits / 8` bytes), ascending.
    pub(crate) fn new(spec: &'a FilterSpec, filters: Vec<(u32, &'a mut [u8])>) -> Result<Self> {
        let bits = spec.bits;
        if filters.windows(2).any(|w| w[0].0 >= w[1].0)
            || filters.last().is_some_and(|(f, _)| *f >= spec.a)
        {
            return Err(Error::Internal(
                "filters out of the spec's range or order".into(),
            ));
        }
        if filters.iter().any(|(_, f)| f.len() as u64 * 8 != bits) {
            return Err(Error::Internal("a filter bitmap of the wrong size".into()));
        }
        let keyer = match spec.hash {
            HashVersion::V1 => None,
            HashVersion::V2 => {
                Some(EntryKeyer::new(spec.entry_key.as_ref().ok_or_else(
                    || Error::Internal("V2 spec without its entry key".into()),
                )?))
            }
        };
        let mut groups: Vec<Group<'a>> = Vec::new();
        for (filter, map) in filters {
            let g = filter / PER_BLOCK;
            match groups.last_mut() {
                Some((last, v)) if *last == g => v.push((filter, map)),
                _ => groups.push((g, vec![(filter, map)])),
            }
        }
        Ok(Filler {
            spec,
            keyer,
            groups,
            regions: bits.div_ceil(1 << REGION_SHIFT) as usize,
            round: ROUND,
            entries: 0,
        })
    }

    /// Entries added so far.
    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    /// Sets the bits of `hashes` (any chunk of the set, in any order).
    pub(crate) fn add(&mut self, hashes: &[[u8; 32]]) {
        for round in hashes.chunks(self.round.max(1)) {
            self.add_round(round);
        }
        self.entries += hashes.len() as u64;
    }

    fn add_round(&mut self, hashes: &[[u8; 32]]) {
        let n = hashes.len();
        if n == 0 {
            return;
        }
        let keys = match &self.keyer {
            Some(k) => entry_keys(k, hashes),
            None => Vec::new(),
        };
        let threads = rayon::current_num_threads().max(1);
        let per_task = n
            .div_ceil(threads)
            .max(MIN_TASK)
            .next_multiple_of(LANES)
            .min(n.next_multiple_of(LANES));
        let (spec, regions) = (self.spec, self.regions);
        for (g, maps) in &mut self.groups {
            let filters: Vec<u32> = maps.iter().map(|(f, _)| *f).collect();
            let tasks: Vec<Buckets> = (0..n.div_ceil(per_task))
                .into_par_iter()
                .map(|t| {
                    let range = t * per_task..(n.min((t + 1) * per_task));
                    let bits = match spec.hash {
                        HashVersion::V2 => bits_v2(&keys, range, *g, &filters, spec.bits),
                        HashVersion::V1 => bits_v1(spec, &hashes[range], &filters),
                    };
                    Buckets::sort(&bits, filters.len(), regions)
                })
                .collect();
            let mut jobs: Vec<(usize, usize, &mut [u8])> = Vec::with_capacity(maps.len() * regions);
            for (j, (_, map)) in maps.iter_mut().enumerate() {
                for (r, region) in map.chunks_mut(REGION_BYTES).enumerate() {
                    jobs.push((j, r, region));
                }
            }
            jobs.into_par_iter().for_each(|(j, r, region)| {
                let k = j * regions + r;
                for b in &tasks {
                    let (s, e) = (b.starts[k] as usize, b.starts[k + 1] as usize);
                    for &off in &b.offs[s..e] {
                        region[(off / 8) as usize] |= 1 << (off % 8);
                    }
                }
            });
        }
    }
}

/// One hash task's bit indexes, sorted by (filter, region): the offsets
/// within the region of bucket k are `offs[starts[k]..starts[k + 1]]`,
/// k = filter position · regions + region.
struct Buckets {
    starts: Vec<u32>,
    offs: Vec<u32>,
}

impl Buckets {
    /// Sorts `bits` (filter-major: `bits[j·m + e]`, m entries per filter)
    /// by (filter, region).
    fn sort(bits: &[u64], filters: usize, regions: usize) -> Buckets {
        let m = bits.len() / filters.max(1);
        let mut starts = vec![0u32; filters * regions + 1];
        for (j, row) in bits.chunks(m.max(1)).enumerate() {
            for &b in row {
                starts[j * regions + (b >> REGION_SHIFT) as usize + 1] += 1;
            }
        }
        for k in 1..starts.len() {
            starts[k] += starts[k - 1];
        }
        let mut at = starts.clone();
        let mut offs = vec![0u32; bits.len()];
        let mask = (1u64 << REGION_SHIFT) - 1;
        for (j, row) in bits.chunks(m.max(1)).enumerate() {
            for &b in row {
                let k = j * regions + (b >> REGION_SHIFT) as usize;
                offs[at[k] as usize] = (b & mask) as u32;
                at[k] += 1;
            }
        }
        Buckets { starts, offs }
    }
}

/// The V2 bit indexes of the entries `range` (keys in `keys`, [`LANES`]
/// per [`KeyLanes`]; `range` starts at a multiple of [`LANES`]) in the
/// `filters` of keystream block `g`, filter-major.
fn bits_v2(
    keys: &[KeyLanes],
    range: std::ops::Range<usize>,
    g: u32,
    filters: &[u32],
    bits: u64,
) -> Vec<u64> {
    let m = range.len();
    let mut out = vec![0u64; m * filters.len()];
    let first = range.start / LANES;
    for (c, lanes) in keys[first..range.end.div_ceil(LANES)].iter().enumerate() {
        let valid = (m - c * LANES).min(LANES);
        let block = chacha20_lanes(lanes, g);
        for (j, &f) in filters.iter().enumerate() {
            let w = 2 * (f % PER_BLOCK) as usize;
            let (lo, hi) = (&block[w], &block[w + 1]);
            let row = &mut out[j * m + c * LANES..j * m + c * LANES + valid];
            for (l, b) in row.iter_mut().enumerate() {
                *b = mul_shift(u64::from(lo[l]) | u64::from(hi[l]) << 32, bits);
            }
        }
    }
    out
}

/// The V1 bit indexes of `hashes` in `filters`, filter-major.
fn bits_v1(spec: &FilterSpec, hashes: &[[u8; 32]], filters: &[u32]) -> Vec<u64> {
    let mut out = Vec::with_capacity(hashes.len() * filters.len());
    for &f in filters {
        let hasher = FilterHasher::new(&spec.salts[f as usize]);
        out.extend(hashes.iter().map(|h| hasher.bit(h, spec.bits)));
    }
    out
}

/// The most scratch memory filling takes beside the bitmaps and the
/// chunk being added: a round's keys (32 bytes an entry), and for the 8
/// filters of one keystream block each task's bit indexes (8 bytes) and
/// their sorted offsets (4 bytes) per entry and filter, its bucket starts
/// (two 4-byte counters per filter and region) and the region list, with
/// 1/4 headroom. `entries` is the most a round holds (|S| or less).
pub(crate) fn fill_scratch(entries: u64, filter_bits: u64, own_filters: u64) -> u64 {
    if own_filters == 0 {
        return 0;
    }
    let round = entries.min(ROUND as u64).next_multiple_of(LANES as u64);
    let f = own_filters.min(u64::from(PER_BLOCK));
    let regions = filter_bits.div_ceil(1 << REGION_SHIFT);
    let tasks = rayon::current_num_threads() as u64;
    let keys = 32 * round;
    let bits = 12 * f * round;
    let starts = tasks * 2 * 4 * (f * regions + 1);
    let jobs = f * regions * 40;
    (keys + bits + starts + jobs) * 5 / 4
}

/// CPU seconds this process has used (user + system, all threads), from
/// `/proc/self/stat` in USER_HZ = 100 ticks; `None` where that is not
/// readable (not Linux). On a shared machine this counts the core-seconds
/// a build phase cost, which wall time × cores does not.
pub(crate) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name (which may hold spaces):
    // state is field 3, utime and stime fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The V2 keys of `hashes`, [`LANES`] per [`KeyLanes`] (the last one
/// padded with zero keys, whose bits are never set).
fn entry_keys(keyer: &EntryKeyer, hashes: &[[u8; 32]]) -> Vec<KeyLanes> {
    hashes
        .par_chunks(LANES * 64)
        .flat_map_iter(|chunk| {
            chunk.chunks(LANES).map(|c| {
                let mut lanes: KeyLanes = [[0; LANES]; 8];
                for (l, h) in c.iter().enumerate() {
                    for (w, word) in keyer.key(h).into_iter().enumerate() {
                        lanes[w][l] = word;
                    }
                }
                lanes
            })
        })
        .collect()
}

/// Sets, in `maps[j]` (a bitmap of `window` bits, `window` a multiple of
/// 8 and at most `spec.bits`), the bits below `window` that `hashes` set
/// in filter j, for the first `maps.len()` ≤ 8 filters: one window of each
/// filter, which fills like the whole filter (the filter hash is uniform),
/// in memory independent of the filter's size. Call once per chunk of the
/// entries; the bitmaps accumulate.
pub(crate) fn fill_window(
    spec: &FilterSpec,
    hashes: &[[u8; 32]],
    maps: &mut [Vec<u8>],
    window: u64,
) -> Result<()> {
    let n = maps.len();
    if n > PER_BLOCK as usize
        || n > spec.a as usize
        || window > spec.bits
        || !window.is_multiple_of(8)
        || maps.iter().any(|m| m.len() as u64 * 8 != window)
    {
        return Err(Error::Internal(
            "a fill window out of the spec's range".into(),
        ));
    }
    let bits = spec.bits;
    // Only bit indexes inside the window are kept: a fraction window/bits
    // of the chunk's, so the list stays small.
    let hits: Vec<(usize, u64)> = match spec.hash {
        HashVersion::V1 => (0..n)
            .into_par_iter()
            .flat_map_iter(|j| {
                let hasher = FilterHasher::new(&spec.salts[j]);
                hashes
                    .iter()
                    .map(move |h| (j, hasher.bit(h, bits)))
                    .filter(|&(_, b)| b < window)
                    .collect::<Vec<_>>()
            })
            .collect(),
        HashVersion::V2 => {
            let key64 = spec
                .entry_key
                .as_ref()
                .ok_or_else(|| Error::Internal("V2 spec without its entry key".into()))?;
            let keys = entry_keys(&EntryKeyer::new(key64), hashes);
            let total = hashes.len();
            keys.par_iter()
                .enumerate()
                .flat_map_iter(|(c, lanes)| {
                    let valid = (total - c * LANES).min(LANES);
                    let block = chacha20_lanes(lanes, 0);
                    let mut out = Vec::new();
                    for j in 0..n {
                        let (lo, hi) = (&block[2 * j], &block[2 * j + 1]);
                        for l in 0..valid {
                            let b = mul_shift(u64::from(lo[l]) | u64::from(hi[l]) << 32, bits);
                            if b < window {
                                out.push((j, b));
                            }
                        }
                    }
                    out
                })
                .collect()
        }
    };
    for (j, b) in hits {
        maps[j][(b / 8) as usize] |= 1 << (b % 8);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(n: u32) -> Vec<[u8; 32]> {
        (0..n)
            .map(|i| {
                core::array::from_fn(|b| {
                    (i.wrapping_mul(2_654_435_761) >> (b % 4 * 8)) as u8 ^ b as u8
                })
            })
            .collect()
    }

    /// The fast fill sets exactly the bits `FilterSpec::bit` names, for
    /// both hashes, any sub-range of filters (block-aligned or not) and
    /// entry counts that do and do not fill the last lane group.
    #[test]
    fn fill_matches_spec_bits() {
        for version in [HashVersion::V1, HashVersion::V2] {
            let spec = FilterSpec::with_hash(version, 21, 2, 40, [5; 32]).unwrap();
            for (n, first, count) in [(37u32, 0u32, 21u32), (16, 3, 7), (1, 8, 8), (100, 13, 8)] {
                let hs = hashes(n);
                let mut maps = vec![vec![0u8; (spec.bits / 8) as usize]; count as usize];
                let refs: Vec<(u32, &mut [u8])> = maps
                    .iter_mut()
                    .enumerate()
                    .map(|(j, m)| (first + j as u32, m.as_mut_slice()))
                    .collect();
                fill_filters(&spec, &hs, refs, &ProgressBar::hidden()).unwrap();
                for (j, map) in maps.iter().enumerate() {
                    let mut want = vec![0u8; map.len()];
                    for h in &hs {
                        let b = spec.bit(first + j as u32, h).unwrap();
                        want[(b / 8) as usize] |= 1 << (b % 8);
                    }
                    assert_eq!(map, &want, "{version:?} n={n} filter {}", first + j as u32);
                }
            }
        }
    }

    /// The bits `FilterSpec::bit` names for `hs` in `count` filters from
    /// `first`: the naive reference.
    fn reference(spec: &FilterSpec, hs: &[[u8; 32]], first: u32, count: u32) -> Vec<Vec<u8>> {
        (first..first + count)
            .map(|f| {
                let mut want = vec![0u8; (spec.bits / 8) as usize];
                for h in hs {
                    let b = spec.bit(f, h).unwrap();
                    want[(b / 8) as usize] |= 1 << (b % 8);
                }
                want
            })
            .collect()
    }

    /// Filled in chunks of 1, 7 or many entries, in rounds smaller than a
    /// chunk or not, with chunks in reverse order: the same bits as the
    /// reference, for both hashes, over filters of several regions and
    /// two keystream blocks.
    #[test]
    fn streamed_fill_matches_spec_bits_in_any_chunking() {
        let hs = hashes(300);
        for version in [HashVersion::V1, HashVersion::V2] {
            let spec =
                FilterSpec::with_hash(version, 20, 1, (2 << REGION_SHIFT) + 40, [4; 32]).unwrap();
            let (first, count) = (5u32, 6u32); // filters 5..11: blocks 0 and 1
            let want = reference(&spec, &hs, first, count);
            for (chunk, round, reverse) in [
                (1usize, ROUND, false),
                (7, ROUND, true),
                (300, ROUND, false),
                (128, 40, true),
                (300, 17, false),
            ] {
                let mut maps = vec![vec![0u8; (spec.bits / 8) as usize]; count as usize];
                let refs: Vec<(u32, &mut [u8])> = maps
                    .iter_mut()
                    .enumerate()
                    .map(|(j, m)| (first + j as u32, m.as_mut_slice()))
                    .collect();
                let mut f = Filler::new(&spec, refs).unwrap();
                f.round = round;
                let mut chunks: Vec<&[[u8; 32]]> = hs.chunks(chunk).collect();
                if reverse {
                    chunks.reverse();
                }
                for c in chunks {
                    f.add(c);
                }
                assert_eq!(f.entries(), 300);
                drop(f);
                assert!(
                    maps == want,
                    "{version:?}: chunks of {chunk}, rounds of {round}, reversed {reverse}"
                );
            }
        }
    }

    /// A window of the first filters, filled chunk by chunk, holds exactly
    /// the bits below the window that `FilterSpec::bit` names, for both
    /// hashes; a window of the whole filter is the whole filter.
    #[test]
    fn windows_match_spec_bits() {
        for version in [HashVersion::V1, HashVersion::V2] {
            let spec = FilterSpec::with_hash(version, 12, 8, 800, [3; 32]).unwrap();
            let hs = hashes(777);
            for window in [spec.bits / 2 / 8 * 8, spec.bits] {
                let mut maps = vec![vec![0u8; (window / 8) as usize]; 8];
                for chunk in hs.chunks(100) {
                    fill_window(&spec, chunk, &mut maps, window).unwrap();
                }
                for (j, map) in maps.iter().enumerate() {
                    let mut want = vec![0u8; map.len()];
                    for h in &hs {
                        let b = spec.bit(j as u32, h).unwrap();
                        if b < window {
                            want[(b / 8) as usize] |= 1 << (b % 8);
                        }
                    }
                    assert_eq!(map, &want, "{version:?} window {window} filter {j}");
                }
            }
            let mut nine = vec![vec![0u8; 8]; 9];
            assert!(fill_window(&spec, &hs, &mut nine, 64).is_err());
        }
    }

    /// Filters of several 1 MiB regions, filled in rounds smaller than the
    /// set: the partitioned writes land where `FilterSpec::bit` says.
    #[test]
    fn partitioned_rounds_match_spec_bits() {
        let n_cap = (3 << REGION_SHIFT) + 8; // 3 regions and a bit
        let spec = FilterSpec::new(10, 1, n_cap, [9; 32]).unwrap();
        let hs = hashes(300);
        let mut maps = vec![vec![0u8; (spec.bits / 8) as usize]; 3];
        let refs: Vec<(u32, &mut [u8])> = maps
            .iter_mut()
            .enumerate()
            .map(|(j, m)| (6 + j as u32, m.as_mut_slice()))
            .collect();
        let mut f = Filler::new(&spec, refs).unwrap();
        f.round = 48;
        f.add(&hs);
        for (j, map) in maps.iter().enumerate() {
            let mut want = vec![0u8; map.len()];
            for h in &hs {
                let b = spec.bit(6 + j as u32, h).unwrap();
                want[(b / 8) as usize] |= 1 << (b % 8);
            }
            assert!(map == &want, "filter {}", 6 + j);
        }
    }

    /// The process's CPU time grows while it computes (on a loaded
    /// machine a thread may get a small share of a core, so this waits
    /// for 50 ms of CPU time rather than timing wall-clock work).
    #[test]
    fn cpu_seconds_advance() {
        let Some(a) = cpu_seconds() else { return };
        let t = std::time::Instant::now();
        let mut x = 0u64;
        loop {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let b = cpu_seconds().unwrap();
            assert!(b >= a, "{a} → {b}");
            if b - a >= 0.05 {
                break;
            }
            assert!(
                t.elapsed().as_secs() < 120,
                "no CPU time counted: {a} → {b}"
            );
        }
    }

    #[test]
    fn fill_refuses_bad_ranges() {
        let spec = FilterSpec::new(4, 1, 8, [1; 32]).unwrap();
        let mut a = [0u8; 1];
        let mut b = [0u8; 2];
        let pb = ProgressBar::hidden();
        assert!(fill_filters(&spec, &hashes(3), vec![(4, &mut a[..])], &pb).is_err());
        assert!(fill_filters(&spec, &hashes(3), vec![(0, &mut b[..])], &pb).is_err());
        let mut c = [0u8; 1];
        assert!(fill_filters(
            &spec,
            &hashes(3),
            vec![(2, &mut c[..]), (1, &mut a[..])],
            &pb
        )
        .is_err());
        assert!(fill_filters(&spec, &hashes(3), vec![(3, &mut a[..])], &pb).is_ok());
    }
}
