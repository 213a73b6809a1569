//! Setting the filters' bits: every entry of S into every filter a
//! database holds (the first step of building an epoch's databases).
//!
//! Under [`HashVersion::V2`] the work is arranged around the hash: each
//! entry's ChaCha20 key is computed once ([`EntryKeyer`], one SHA-256
//! compression), stored 16 entries to a word-major [`KeyLanes`], and then
//! every group of 8 consecutive filters (one keystream block, counter
//! `filter / 8`) is one task that runs [`chacha20_lanes`] over all
//! entries and sets the 8 bits each block yields. A task therefore writes
//! into 8 filters only (8·k·N bits: 80 MB at |S| = 10^7, while all a
//! filters are 7.7 GB), whose huge pages stay in the TLB, instead of
//! touching all a filters per entry; within the task the bit indexes are
//! partitioned by 1 MiB region before they are written
//! ([`fill_block_v2`]).
//!
//! Under [`HashVersion::V1`] (epochs planned by an older server) each
//! filter is one task with one SHA-256 compression per entry.

use audit_proto::filter::{
    chacha20_lanes, mul_shift, EntryKeyer, FilterHasher, FilterSpec, HashVersion, KeyLanes, LANES,
};
use audit_proto::{LeafHash, Manifest};
use indicatif::ProgressBar;
use rayon::prelude::*;

use crate::error::{Error, Result};

/// A filter of one keystream block: its first word in the block, its
/// bitmap.
type BlockFilter<'a> = (usize, &'a mut [u8]);

/// Filters per ChaCha20 block (16 words, two per filter).
const PER_BLOCK: u32 = 8;

/// The bitmaps of the databases `own` of `manifest`, filled with the
/// leaf hashes `hashes` (`result[d]` is database d's bitmap, `None` for
/// the databases of other shards). Each bitmap is zeroed and advised for
/// huge pages before the filters write it, so the database needs no page
/// collapse later. Advances `pb` by one per filter.
pub(crate) fn fill_databases(
    manifest: &Manifest,
    own: &[u32],
    hashes: &[[u8; 32]],
    pb: &ProgressBar,
) -> Result<Vec<Option<Vec<u8>>>> {
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
    let chunk = (manifest.filter.bits / 8) as usize;
    let mut filters: Vec<(u32, &mut [u8])> = Vec::new();
    for (d, map) in maps.iter_mut().enumerate() {
        if let (Some(map), Some(spec)) = (map, manifest.dbs.get(d)) {
            for (j, f) in map.chunks_mut(chunk).enumerate() {
                filters.push((spec.first_filter + j as u32, f));
            }
        }
    }
    fill_filters(&manifest.filter, hashes, filters, pb)?;
    Ok(maps)
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
    fill_filters_in_rounds(spec, hashes, filters, pb, ROUND)
}

/// [`fill_filters`] with V2 rounds of `round` entries.
fn fill_filters_in_rounds(
    spec: &FilterSpec,
    hashes: &[[u8; 32]],
    filters: Vec<(u32, &mut [u8])>,
    pb: &ProgressBar,
    round: usize,
) -> Result<()> {
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
    match spec.hash {
        HashVersion::V1 => {
            filters.into_par_iter().for_each(|(filter, words)| {
                let hasher = FilterHasher::new(&spec.salts[filter as usize]);
                for h in hashes {
                    let b = hasher.bit(&LeafHash::new(*h), bits);
                    words[(b / 8) as usize] |= 1 << (b % 8);
                }
                pb.inc(1);
            });
        }
        HashVersion::V2 => {
            let key64 = spec
                .entry_key
                .as_ref()
                .ok_or_else(|| Error::Internal("V2 spec without its entry key".into()))?;
            let keys = entry_keys(&EntryKeyer::new(key64), hashes);
            // Group the filters by keystream block: block g holds the
            // words of filters 8g..8g+8.
            let mut groups: Vec<(u32, Vec<BlockFilter<'_>>)> = Vec::new();
            for (filter, map) in filters {
                let (g, word) = (filter / PER_BLOCK, 2 * (filter % PER_BLOCK) as usize);
                match groups.last_mut() {
                    Some((last, v)) if *last == g => v.push((word, map)),
                    _ => groups.push((g, vec![(word, map)])),
                }
            }
            let n = hashes.len();
            groups.into_par_iter().for_each(|(g, mut maps)| {
                fill_block_v2(&keys, n, g, &mut maps, bits, round);
                pb.inc(maps.len() as u64);
            });
        }
    }
    Ok(())
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
                    for (w, word) in keyer.key(&LeafHash::new(*h)).into_iter().enumerate() {
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
                    .map(move |h| (j, hasher.bit(&LeafHash::new(*h), bits)))
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

/// Entries a task hashes before it sets their bits (one round).
const ROUND: usize = 1 << 20;

/// The most scratch memory filling takes beside the bitmaps, the leaf
/// hashes and their keys: each task in flight (one per 8-filter block, at
/// most one per thread of the pool) holds the buckets of one round, a
/// 4-byte offset per entry and filter of the round, with 1/4 headroom.
pub(crate) fn fill_scratch(entries: u64, own_filters: u64) -> u64 {
    let tasks = own_filters
        .div_ceil(u64::from(PER_BLOCK))
        .min(rayon::current_num_threads() as u64);
    let per_task = u64::from(PER_BLOCK) * 4 * (entries.min(ROUND as u64)) * 5 / 4;
    tasks * per_task
}
/// log2 of a region's bits: 2^23 bits = 1 MiB, about half an L2 cache.
const REGION_SHIFT: u32 = 23;

/// Sets the bits of the `n` entries (keys in `keys`) in the filters of
/// keystream block `g`: `maps` holds (first word of the filter in the
/// block, its bitmap).
///
/// Partitioned: a round of `round` ([`ROUND`]) entries is hashed first, each bit
/// index appended to the bucket of its filter and 1 MiB region (a 32-bit
/// offset, written sequentially); then the buckets are applied one region
/// at a time, so the random writes of a bucket hit a region that stays
/// in L2 (at |S| = 10^6 each region line takes ~64 writes per round, at
/// 10^7 ~6) instead of missing the cache on nearly every write into the
/// task's 8 filters.
fn fill_block_v2(
    keys: &[KeyLanes],
    n: usize,
    g: u32,
    maps: &mut [BlockFilter<'_>],
    bits: u64,
    round: usize,
) {
    let regions = bits.div_ceil(1 << REGION_SHIFT) as usize;
    let lanes_per_round = (round / LANES).max(1);
    let cap = round.min(n) / regions * 5 / 4 + 64;
    let mut buckets: Vec<Vec<u32>> = (0..maps.len() * regions)
        .map(|_| Vec::with_capacity(cap))
        .collect();
    let mask = (1u64 << REGION_SHIFT) - 1;
    for (r, round) in keys.chunks(lanes_per_round).enumerate() {
        for (c, lanes) in round.iter().enumerate() {
            let valid = (n - (r * lanes_per_round + c) * LANES).min(LANES);
            let block = chacha20_lanes(lanes, g);
            for (j, (w, _)) in maps.iter().enumerate() {
                let (lo, hi) = (&block[*w], &block[*w + 1]);
                let own = &mut buckets[j * regions..(j + 1) * regions];
                for l in 0..valid {
                    let b = mul_shift(u64::from(lo[l]) | u64::from(hi[l]) << 32, bits);
                    own[(b >> REGION_SHIFT) as usize].push((b & mask) as u32);
                }
            }
        }
        for (i, bucket) in buckets.iter_mut().enumerate() {
            let (j, region) = (i / regions, i % regions);
            let start = region << (REGION_SHIFT - 3);
            let map = &mut maps[j].1[start..];
            for &off in bucket.iter() {
                map[(off / 8) as usize] |= 1 << (off % 8);
            }
            bucket.clear();
        }
    }
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
                        let b = spec.bit(first + j as u32, &LeafHash::new(*h)).unwrap();
                        want[(b / 8) as usize] |= 1 << (b % 8);
                    }
                    assert_eq!(map, &want, "{version:?} n={n} filter {}", first + j as u32);
                }
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
                        let b = spec.bit(j as u32, &LeafHash::new(*h)).unwrap();
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
        fill_filters_in_rounds(&spec, &hs, refs, &ProgressBar::hidden(), 48).unwrap();
        for (j, map) in maps.iter().enumerate() {
            let mut want = vec![0u8; map.len()];
            for h in &hs {
                let b = spec.bit(6 + j as u32, &LeafHash::new(*h)).unwrap();
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
