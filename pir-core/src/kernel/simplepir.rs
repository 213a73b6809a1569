//! The SimplePIR pass c1ᵀ·D (YPIR Construction 3.1, Answer step 1): the
//! dispatch over the [`Kernel`] variants, the scalar twins, and the work
//! split across threads; the instruction-set variants are the submodules
//! `avx2` and `avx512`, the measured prefetch distance is [`tune`].
//!
//! Arithmetic: records are `i8` (representative in [−N/2, N/2)), c1 ∈
//! Z_{2^32}. Writing c = lo + 2^16·hi with lo, hi signed 16-bit, each
//! product c·d is lo·d + 2^16·(hi·d) mod 2^32, and lo·d, hi·d fit in 23
//! bits, so `pmaddwd` (16×16→32 with pairwise add) computes both halves
//! with plain wrapping 32-bit accumulators: no reduction is ever needed
//! because q1 = 2^32 is the machine word (YPIR §4.1 "Modulus selection").
//! The pass reads the database once, in storage order: panels of up to 2048
//! rows, tiles of 8 columns inside a panel ([`crate::db`]), so the slice of
//! query a panel needs stays in L1 while the tiles stream past.

use super::Kernel;
#[cfg(target_arch = "x86_64")]
use super::{avx512, avx512_vnni};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub(super) mod peak;
pub(super) mod tune;

#[cfg(test)]
mod tests;

/// A SimplePIR query vector c1 in the two forms the tile kernels read,
/// zero-padded to a multiple of 64 entries:
///
/// * signed 16-bit halves, `c1[i] ≡ lo[i] + 2^16·hi[i] (mod 2^32)`
///   (`pmaddwd`/`vpdpwssd` kernels);
/// * the four bytes of each `c1[i]`, `c1[i] = Σ_k 2^{8k}·u_k[i]`, laid out per
///   32-row block as `[u_0 of the block | u_1 | u_2 | u_3]` (32 bytes each),
///   so the `vpdpbusd` kernel broadcasts one limb of a block with one load.
#[derive(Clone, Debug)]
pub(crate) struct SplitQuery {
    lo: Vec<i16>,
    hi: Vec<i16>,
    bytes: Vec<u8>,
    /// Signed byte digits of c1 for the wide batch layout
    /// ([`panels_wide`]): `c1[r] = Σ_k 2^{8k}·s_k[r] mod 2^32`, s_k in
    /// [−128, 128), digit k of rows 4i..4i+3 at bytes 16i + 4k.. of it.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    quads: Vec<u8>,
    /// `csum[b] = Σ_{r < 32b} c1[r] mod 2^32`: the offset correction of a
    /// slice of whole 32-row blocks.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    csum: Vec<u32>,
    len: usize,
}

/// Bytes of [`SplitQuery::bytes`] per 32-row block (4 limbs × 32 rows).
const LIMB_BLOCK: usize = 4 * 32;

impl SplitQuery {
    /// Splits c1.
    pub(crate) fn new(c1: &[u32]) -> Self {
        let padded = c1.len().div_ceil(64) * 64;
        let mut lo = vec![0i16; padded];
        let mut hi = vec![0i16; padded];
        let mut bytes = vec![0u8; 4 * padded];
        let mut quads = vec![0u8; 4 * padded];
        let mut csum = vec![0u32; padded / 32 + 1];
        for (i, &c) in c1.iter().enumerate() {
            let mut v = i64::from(c);
            for k in 0..4 {
                let d = v as u8 as i8;
                quads[i / 4 * 16 + 4 * k + i % 4] = d as u8;
                v = (v - i64::from(d)) >> 8;
            }
            csum[i / 32 + 1] = csum[i / 32 + 1].wrapping_add(c);
            let l = c as u16 as i16;
            lo[i] = l;
            hi[i] = (c.wrapping_sub(l as i32 as u32) >> 16) as u16 as i16;
            let at = i / 32 * LIMB_BLOCK + i % 32;
            for (k, b) in c.to_le_bytes().into_iter().enumerate() {
                bytes[at + 32 * k] = b;
            }
        }
        for b in 1..csum.len() {
            csum[b] = csum[b].wrapping_add(csum[b - 1]);
        }
        SplitQuery {
            lo,
            hi,
            bytes,
            quads,
            csum,
            len: c1.len(),
        }
    }

    /// The query entries of rows `r0..r1` (r0 a multiple of 32).
    fn rows(&self, r0: usize, r1: usize) -> QueryRows<'_> {
        debug_assert!(r0.is_multiple_of(32));
        QueryRows {
            lo: &self.lo[r0..r1],
            hi: &self.hi[r0..r1],
            bytes: &self.bytes[r0 / 32 * LIMB_BLOCK..r1.div_ceil(32) * LIMB_BLOCK],
        }
    }
}

/// The slice of a [`SplitQuery`] that one panel's tiles multiply.
#[derive(Clone, Copy)]
struct QueryRows<'a> {
    lo: &'a [i16],
    hi: &'a [i16],
    bytes: &'a [u8],
}

/// Which implementation the SimplePIR pass uses on this machine: `scalar`,
/// `avx2`, `avx512bw` or `avx512-vnni` (`PIR_KERNEL` forces one this CPU
/// has).
pub fn simplepir_impl() -> &'static str {
    Kernel::selected().name()
}

/// Scalar reference (tests): `out[j] = Σ_i c1[i]·D[i][j] mod 2^32` over
/// the columns of a column-major database (each ℓ1 bytes).
#[cfg(test)]
fn simplepir_scalar(db: &[u8], ell1: usize, c1: &[u32], out: &mut [u32]) {
    for (j, o) in out.iter_mut().enumerate() {
        let col = &db[j * ell1..(j + 1) * ell1];
        let mut acc = 0u32;
        for (&d, &c) in col.iter().zip(c1) {
            acc = acc.wrapping_add(c.wrapping_mul(d as i8 as i32 as u32));
        }
        *o = acc;
    }
}

/// Bytes of the column-major tail processed per work item (the tail is
/// read column by column, so a batch shares each such span through L2).
const BATCH_TILE_BYTES: usize = 256 * 1024;

/// `out[q][j] = Σ_i c1_q[i]·D[i][j] mod 2^32` for every query q, with one pass
/// over the database (§4.3 cross-client batching: every query consumes a
/// tile before the next one is loaded).
///
/// The tiled columns are walked panel by panel in storage order (see
/// [`crate::db`]): for a panel of P rows only P entries of each query are
/// live, so the query slice sits in L1 while the database streams past it.
/// Partial sums of successive panels are added mod 2^32.
pub(crate) fn simplepir(db: &crate::db::Database, queries: &[SplitQuery], out: &mut [Vec<u32>]) {
    let view = View::of(db);
    assert_eq!(queries.len(), out.len());
    assert_eq!(view.data.len(), view.ell1 * view.ell2);
    for q in queries {
        debug_assert_eq!(q.len, view.ell1);
        assert!(q.lo.len() >= view.ell1);
    }
    #[cfg(feature = "parallel")]
    {
        if rayon::current_num_threads() > 1 {
            simplepir_parallel(Kernel::selected(), &view, queries, out);
            return;
        }
    }
    answer_with(Kernel::selected(), &view, queries, out);
}

/// Column spans of the column-major tail (columns past the tiled region),
/// about [`BATCH_TILE_BYTES`] each.
fn tail_spans(view: &View<'_>) -> Vec<(usize, usize)> {
    let cols = (BATCH_TILE_BYTES / view.ell1.max(1)).max(1);
    (view.tiled_cols..view.ell2)
        .step_by(cols)
        .map(|j0| (j0, (j0 + cols).min(view.ell2)))
        .collect()
}

/// Adds panels p0..p1 of the tiled region to `out[q][..tiled_cols]`, in
/// storage order. With the AVX-512 VNNI kernel a batch takes the wide path
/// ([`panels_wide`]); with the others it takes turns per run of
/// [`BATCH_RUN_BYTES`]: each run is read once from memory and then from L2
/// by every other query (§4.3).
fn panels_with(
    k: Kernel,
    view: &View<'_>,
    p0: usize,
    p1: usize,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if k == Kernel::Avx512Vnni && avx512_vnni() && queries.len() >= WIDE_MIN_BATCH {
            panels_wide(view, p0, p1, queries, out, true);
            return;
        }
    }
    let groups = view.tiled_cols / 8;
    for p in p0..p1 {
        if let [q] = queries {
            tile_with(k, view, p, 0, groups, q, &[], &mut out[0][..groups * 8]);
        } else {
            // A batch takes turns per run of BATCH_RUN_BYTES (128 KiB): the
            // first query reads the run from memory, the others from L2,
            // each with the single-query loop. Taking turns per 4 KiB tile
            // instead (from L1) measured 5 % slower for a batch of 4 at
            // B = 33: the per-tile switch between queries costs more than
            // L2 reads.
            //
            // While the other queries work on a run from L2, the next run
            // (the next bytes in storage order) is prefetched, a share per
            // query, so the first query finds it in cache too: the memory
            // stream then overlaps the batch's compute instead of
            // alternating with it. The `vpdpbusd` kernel spreads its share
            // over its 256-byte steps (a burst per tile filled the miss
            // buffers and stalled it; the `pmaddwd` kernels take a burst
            // per 512-row slice).
            let tiled_end = view.panels() * view.panel * view.tiled_cols;
            let run_groups = (BATCH_RUN_BYTES / (8 * view.panel)).max(1);
            // Queries take their turns in pairs ([`block_with2`]: one
            // record load serves both), the last one alone when the batch
            // is odd.
            let turns = queries.len().div_ceil(2);
            let mut g0 = 0;
            while g0 < groups {
                let g1 = (g0 + run_groups).min(groups);
                let run_end = (p * view.tiled_cols + g1 * 8) * view.panel;
                let next_end = (run_end + (g1 - g0) * 8 * view.panel).min(tiled_end);
                let next = &view.data[run_end.min(next_end)..next_end];
                for (i, (qs, os)) in queries.chunks(2).zip(out.chunks_mut(2)).enumerate() {
                    let ahead = match i {
                        0 => &[][..],
                        _ => line_share(next, turns - 1, i - 1),
                    };
                    match (qs, os) {
                        ([qa, qb], [oa, ob]) => tile_with2(
                            k,
                            view,
                            p,
                            (g0, g1),
                            [qa, qb],
                            ahead,
                            [&mut oa[g0 * 8..g1 * 8], &mut ob[g0 * 8..g1 * 8]],
                        ),
                        (qs, os) => tile_with(
                            k,
                            view,
                            p,
                            g0,
                            g1,
                            &qs[0],
                            ahead,
                            &mut os[0][g0 * 8..g1 * 8],
                        ),
                    }
                }
                g0 = g1;
            }
        }
    }
}

/// Smallest batch that takes the wide path ([`panels_wide`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
const WIDE_MIN_BATCH: usize = 2;

/// Most rows of a wide slice: the transposed slice (16 bytes per row) and
/// one group's digits (5 × 4 bytes per row) take 18 KiB of L1 at 512
/// (128 and 256 rows measured 10–25 % slower in L2, 1024 and 2048 no
/// faster).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
const WIDE_SLICE_ROWS: usize = 512;

/// Most queries of one wide group: 4 accumulators each, 20 of the 32 zmm
/// registers. In L1 the kernel runs at 0.94–1.0 of the `vpdpbusd` peak
/// for groups of 3 to 5 and at 0.72 for 6 (24 accumulators), hence 5.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
const WIDE_GROUP: usize = 5;

/// How many steps (slices of a tile pair) ahead of the transposition the
/// database is prefetched into L2: 1 to 8 measured the same, none 20 %
/// slower (batch of 8, B = 33).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
const WIDE_AHEAD_STEPS: usize = 2;

/// Adds panels p0..p1 of the tiled region to `out[q][..tiled_cols]` for a
/// batch (§4.3 cross-client batching), in the wide layout: each slice of
/// up to [`WIDE_SLICE_ROWS`] rows of two neighbouring tiles (16 columns)
/// is transposed once into 4-row × 16-column vectors ([`avx512::
/// transpose_pair`]) in a scratch buffer that stays in L1, and every
/// group of up to [`WIDE_GROUP`] queries then multiplies it with
/// [`avx512::group_vnni`]: a record vector loaded from L1 feeds 4 `vpdpbusd`
/// per query of the group, against 8 per load for the pair kernel
/// ([`block_with2`]) reading its tiles from L2. The database is read once,
/// in storage order (two tile streams of a panel side by side), and the
/// slice two steps ahead is prefetched into L2 while the groups compute.
/// `simd` false runs the scalar twins of both kernels (tests).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
fn panels_wide(
    view: &View<'_>,
    p0: usize,
    p1: usize,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
    simd: bool,
) {
    let panel = view.panel;
    let tiles = view.tiled_cols / 8;
    if tiles == 0 {
        return;
    }
    let slice = (1..=WIDE_SLICE_ROWS / 32)
        .rev()
        .map(|b| 32 * b)
        .find(|s| panel.is_multiple_of(*s))
        .unwrap_or(32);
    let slices = panel / slice;
    let pairs = tiles.div_ceil(2);
    let ngroups = queries.len().div_ceil(WIDE_GROUP);
    // balanced groups of at most WIDE_GROUP queries
    let group = queries.len().div_ceil(ngroups.max(1));
    let mut scratch = vec![0u8; 16 * slice];
    // Bytes of tile g's slice s in panel p.
    let span = |p: usize, g: usize, s: usize| -> std::ops::Range<usize> {
        let at = p * panel * view.tiled_cols + g * 8 * panel + s * 8 * slice;
        at..at + 8 * slice
    };
    // The step `ahead` steps after (pair pr, slice s) of panel p, as its
    // two tile spans (empty past the end of the tiled region).
    let step_spans = |p: usize, pr: usize, s: usize, ahead: usize| -> [&[u8]; 2] {
        let n = (p * pairs + pr) * slices + s + ahead;
        let (p, rest) = (n / (pairs * slices), n % (pairs * slices));
        if p >= view.panels() {
            return [&[], &[]];
        }
        let (pr, s) = (rest / slices, rest % slices);
        let b = if 2 * pr + 1 < tiles {
            &view.data[span(p, 2 * pr + 1, s)]
        } else {
            &[][..]
        };
        [&view.data[span(p, 2 * pr, s)], b]
    };
    // Tile pairs outer, slices inner: the database is read in storage
    // order. (Slices outer, which keeps one slice's digits in L1 across
    // the panel, read 4 KiB pieces 16 KiB apart and was 3–8 % slower at
    // B = 33.)
    for p in p0..p1 {
        for pr in 0..pairs {
            let (ga, gb) = (2 * pr, 2 * pr + 1);
            let cols = if gb < tiles { 16 } else { 8 };
            // the next pair's partial sums (k lines, each in L3 since the
            // last panel) on their way while this pair computes
            for o in out.iter() {
                crate::mem::prefetch(o, 16 * (pr + 1));
            }
            for s in 0..slices {
                let r0 = p * panel + s * slice;
                let a = &view.data[span(p, ga, s)];
                let b = (gb < tiles).then(|| &view.data[span(p, gb, s)]);
                for (blk, dst) in scratch.chunks_exact_mut(512).enumerate() {
                    let ta: &[u8; 256] = a[256 * blk..256 * blk + 256].try_into().expect("block");
                    let tb: Option<&[u8; 256]> =
                        b.map(|b| b[256 * blk..256 * blk + 256].try_into().expect("block"));
                    let dst: &mut [u8; 512] = dst.try_into().expect("512 bytes");
                    wide_transpose(simd, ta, tb, dst);
                }
                let ahead = step_spans(p, pr, s, WIDE_AHEAD_STEPS);
                for (gi, (qs, os)) in queries.chunks(group).zip(out.chunks_mut(group)).enumerate() {
                    let share = [
                        line_share(ahead[0], ngroups, gi),
                        line_share(ahead[1], ngroups, gi),
                    ];
                    let mut sums = [[0u32; 16]; WIDE_GROUP];
                    for (sum, o) in sums.iter_mut().zip(os.iter()) {
                        sum[..cols].copy_from_slice(&o[16 * pr..16 * pr + cols]);
                    }
                    let mut quads: [&[u8]; WIDE_GROUP] = [&[]; WIDE_GROUP];
                    let mut corr = [0u32; WIDE_GROUP];
                    for ((d, c), q) in quads.iter_mut().zip(corr.iter_mut()).zip(qs) {
                        *d = &q.quads[4 * r0..4 * (r0 + slice)];
                        *c = q.csum[(r0 + slice) / 32]
                            .wrapping_sub(q.csum[r0 / 32])
                            .wrapping_mul(128);
                    }
                    let n = qs.len();
                    wide_group(
                        simd,
                        &scratch,
                        &quads[..n],
                        &corr[..n],
                        share,
                        &mut sums[..n],
                    );
                    for (sum, o) in sums.iter().zip(os.iter_mut()) {
                        o[16 * pr..16 * pr + cols].copy_from_slice(&sum[..cols]);
                    }
                }
            }
        }
    }
}

/// [`avx512::transpose_pair`] or its scalar twin.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
fn wide_transpose(simd: bool, a: &[u8; 256], b: Option<&[u8; 256]>, dst: &mut [u8; 512]) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd && avx512() {
            // SAFETY: avx512f and avx512bw were detected at runtime.
            unsafe { avx512::transpose_pair(a, b, dst) };
            return;
        }
    }
    let _ = simd;
    transpose_scalar(a, b.unwrap_or(&[0; 256]), dst);
}

/// Scalar twin of [`avx512::transpose_pair`]: byte x of column j of
/// vector t is row 4t + x of column j, plus 128.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
fn transpose_scalar(a: &[u8; 256], b: &[u8; 256], dst: &mut [u8; 512]) {
    for t in 0..8 {
        for j in 0..16 {
            let tile = if j < 8 { a } else { b };
            for x in 0..4 {
                dst[64 * t + 4 * j + x] = tile[32 * (j % 8) + 4 * t + x] ^ 0x80;
            }
        }
    }
}

/// [`avx512::group_vnni`] for a group of 1..=[`WIDE_GROUP`] queries, or
/// its scalar twin.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
fn wide_group(
    simd: bool,
    scratch: &[u8],
    quads: &[&[u8]],
    corr: &[u32],
    ahead: [&[u8]; 2],
    out: &mut [[u32; 16]],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd && avx512_vnni() {
            macro_rules! call {
                ($q:literal) => {{
                    let quads: [&[u8]; $q] = quads.try_into().expect("group size");
                    let corr: [u32; $q] = corr.try_into().expect("group size");
                    let out: &mut [[u32; 16]; $q] = out.try_into().expect("group size");
                    // SAFETY: avx512f, avx512bw and avx512vnni were
                    // detected at runtime; every quads slice holds 16
                    // bytes per 64 bytes of scratch (the caller takes 4
                    // bytes per row of the slice).
                    unsafe { avx512::group_vnni::<$q>(scratch, quads, corr, ahead, out) }
                }};
            }
            match quads.len() {
                1 => call!(1),
                2 => call!(2),
                3 => call!(3),
                4 => call!(4),
                5 => call!(5),
                n => unreachable!("a wide group of {n} queries"),
            }
            return;
        }
    }
    let _ = (simd, ahead);
    group_scalar(scratch, quads, corr, out);
}

/// Scalar twin of [`avx512::group_vnni`] (same digits, offset records and
/// correction).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the wide path is x86-64 only
fn group_scalar(scratch: &[u8], quads: &[&[u8]], corr: &[u32], out: &mut [[u32; 16]]) {
    for ((q, &c), o) in quads.iter().zip(corr).zip(out.iter_mut()) {
        for (j, o) in o.iter_mut().enumerate() {
            let mut acc = 0u32;
            for (i, v) in scratch.chunks_exact(64).enumerate() {
                for k in 0..4 {
                    let mut dot = 0i32;
                    for x in 0..4 {
                        let u = i32::from(v[4 * j + x]);
                        let s = i32::from(q[16 * i + 4 * k + x] as i8);
                        dot += u * s;
                    }
                    acc = acc.wrapping_add((dot as u32) << (8 * k));
                }
            }
            *o = o.wrapping_add(acc).wrapping_sub(c);
        }
    }
}

/// Bytes per turn of a batch in the SimplePIR pass (whole tiles, at least
/// one; 8 tiles of 2048 rows): the run being read and the next one being
/// prefetched take half of a 512 KiB L2 (an AVX2-only EPYC). On the
/// 1 MiB L2 of Zen 4, 128 and 256 KiB runs measured the same (batch of 4,
/// B = 33: 90.5 and 90.7 ms).
const BATCH_RUN_BYTES: usize = 128 * 1024;

/// One pass with kernel `k` on the calling thread: the tiled region in
/// storage order, then the column-major tail.
fn answer_with(k: Kernel, view: &View<'_>, queries: &[SplitQuery], out: &mut [Vec<u32>]) {
    for o in out.iter_mut() {
        o[..view.tiled_cols].fill(0);
    }
    panels_with(k, view, 0, view.panels(), queries, out);
    for (j0, j1) in tail_spans(view) {
        for (q, o) in queries.iter().zip(out.iter_mut()) {
            column_major_with(k, view.data, view.ell1, j0, j1, q, &mut o[j0..j1]);
        }
    }
}

/// One pass split over the rayon pool. Workers take ranges of panels, each
/// a contiguous stretch of the database read as one stream, and keep
/// partial sums for every tiled column; the partial sums are added at the
/// end (ℓ2 words per query and worker). Tail columns are split by column.
#[cfg(feature = "parallel")]
fn simplepir_parallel(k: Kernel, view: &View<'_>, queries: &[SplitQuery], out: &mut [Vec<u32>]) {
    use rayon::prelude::*;
    let panels = view.panels();
    let tiled = view.tiled_cols;
    let nq = queries.len();
    // a few ranges per thread, so a slow core does not hold up the pass
    let per = panels.div_ceil(4 * rayon::current_num_threads()).max(1);
    let ranges: Vec<(usize, usize)> = (0..panels)
        .step_by(per)
        .map(|p0| (p0, (p0 + per).min(panels)))
        .collect();
    let sums = ranges
        .par_iter()
        .map(|&(p0, p1)| {
            let mut part = vec![vec![0u32; tiled]; nq];
            panels_with(k, view, p0, p1, queries, &mut part);
            part
        })
        .reduce(
            || vec![vec![0u32; tiled]; nq],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    for (u, v) in x.iter_mut().zip(y) {
                        *u = u.wrapping_add(*v);
                    }
                }
                a
            },
        );
    for (o, s) in out.iter_mut().zip(&sums) {
        o[..tiled].copy_from_slice(s);
    }
    let spans = tail_spans(view);
    let tails: Vec<Vec<u32>> = spans
        .par_iter()
        .map(|&(j0, j1)| {
            let w = j1 - j0;
            let mut buf = vec![0u32; nq * w];
            for (q, b) in queries.iter().zip(buf.chunks_mut(w)) {
                column_major_with(k, view.data, view.ell1, j0, j1, q, b);
            }
            buf
        })
        .collect();
    for (&(j0, j1), buf) in spans.iter().zip(&tails) {
        for (o, b) in out.iter_mut().zip(buf.chunks(j1 - j0)) {
            o[j0..j1].copy_from_slice(b);
        }
    }
}

/// The database as the kernels see it: storage bytes, ℓ1 × ℓ2, how many
/// leading columns are tiled in 8-column groups, and the panel height P
/// (see [`crate::db`]).
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [u8],
    ell1: usize,
    ell2: usize,
    tiled_cols: usize,
    panel: usize,
}

impl<'a> View<'a> {
    fn of(db: &'a crate::db::Database) -> Self {
        let shape = db.shape();
        View {
            data: db.as_bytes(),
            ell1: shape.ell1,
            ell2: shape.ell2,
            tiled_cols: if db.is_tiled() { shape.ell2 / 8 * 8 } else { 0 },
            panel: crate::db::panel_rows(shape),
        }
    }

    /// Number of row panels of the tiled region.
    fn panels(&self) -> usize {
        if self.tiled_cols == 0 {
            0
        } else {
            self.ell1 / self.panel
        }
    }
}

/// Adds panel `p` of groups g0..g1 to `out` (8 columns per group): each tile
/// is 8·P contiguous bytes, and the query slice is rows pP..(p+1)P. The
/// cache lines of `ahead` are prefetched into L2 along the way, an equal
/// share before each tile.
#[allow(clippy::too_many_arguments)]
fn tile_with(
    k: Kernel,
    view: &View<'_>,
    p: usize,
    g0: usize,
    g1: usize,
    q: &SplitQuery,
    ahead: &[u8],
    out: &mut [u32],
) {
    let panel = view.panel;
    let rows = q.rows(p * panel, (p + 1) * panel);
    let base = p * panel * view.tiled_cols;
    prefetch_head(out);
    for (k_out, g) in (g0..g1).enumerate() {
        let share = line_share(ahead, g1 - g0, k_out);
        // The partial sums of a panel sweep through ℓ2 words (256 KiB at
        // ℓ2 = 2^16), which the database stream evicts from L2 between
        // panels: fetch them a few tiles ahead instead of stalling on each.
        if k_out.is_multiple_of(2) {
            crate::mem::prefetch(out, k_out * 8 + OUT_PREFETCH_WORDS);
        }
        let tile = &view.data[base + g * 8 * panel..base + (g + 1) * 8 * panel];
        let o: &mut [u32; 8] = (&mut out[k_out * 8..k_out * 8 + 8])
            .try_into()
            .expect("8 outputs");
        block_with(k, tile, rows, share, o);
    }
}

/// [`tile_with`] for two queries at once ([`block_with2`]).
fn tile_with2(
    k: Kernel,
    view: &View<'_>,
    p: usize,
    (g0, g1): (usize, usize),
    q: [&SplitQuery; 2],
    ahead: &[u8],
    out: [&mut [u32]; 2],
) {
    let panel = view.panel;
    let rows = q.map(|q| q.rows(p * panel, (p + 1) * panel));
    let base = p * panel * view.tiled_cols;
    let [oa, ob] = out;
    prefetch_head(oa);
    prefetch_head(ob);
    for (k_out, g) in (g0..g1).enumerate() {
        let share = line_share(ahead, g1 - g0, k_out);
        if k_out.is_multiple_of(2) {
            crate::mem::prefetch(oa, k_out * 8 + OUT_PREFETCH_WORDS);
            crate::mem::prefetch(ob, k_out * 8 + OUT_PREFETCH_WORDS);
        }
        let tile = &view.data[base + g * 8 * panel..base + (g + 1) * 8 * panel];
        let a: &mut [u32; 8] = (&mut oa[k_out * 8..k_out * 8 + 8])
            .try_into()
            .expect("8 outputs");
        let b: &mut [u32; 8] = (&mut ob[k_out * 8..k_out * 8 + 8])
            .try_into()
            .expect("8 outputs");
        block_with2(k, tile, rows, share, [a, b]);
    }
}

/// [`block_with`] for two queries: the AVX-512 VNNI kernel multiplies
/// each record vector it loads by both queries' limbs
/// ([`avx512::block_vnni2`]); the other variants take the queries one
/// after the other, each with half of `ahead` to prefetch (a two-query
/// AVX2 kernel sharing each sign extension measured 0.70–0.72 of the
/// `vpmaddwd` ceiling against 0.74–0.77 for one query at a time:
/// `docs/benchmarks.md`).
fn block_with2(
    k: Kernel,
    tile: &[u8],
    q: [QueryRows<'_>; 2],
    ahead: &[u8],
    out: [&mut [u32; 8]; 2],
) {
    let [oa, ob] = out;
    #[cfg(target_arch = "x86_64")]
    {
        if k == Kernel::Avx512Vnni && avx512_vnni() {
            let blocks = tile.len() / 256;
            assert!(
                tile.len().is_multiple_of(256)
                    && q.iter().all(|q| q.bytes.len() == blocks * LIMB_BLOCK),
                "tile shape"
            );
            // SAFETY: avx512f, avx512bw and avx512vnni were detected at
            // runtime; the tile and limb shapes were asserted above.
            unsafe { avx512::block_vnni2(tile, q[0].bytes, q[1].bytes, ahead, oa, ob) };
            return;
        }
    }
    block_with(k, tile, q[0], line_share(ahead, 2, 0), oa);
    block_with(k, tile, q[1], line_share(ahead, 2, 1), ob);
}

/// Rows of a tile the `pmaddwd` kernels (AVX2, AVX-512BW) take at a time
/// ([`slices`]). The AVX2 kernel reads its tile twice and needs tile and
/// query slice in L1 for the second pass: with 512 rows they take 4 + 2 KiB;
/// whole 2048-row tiles (16 + 8 KiB) ran its single-query pass at half
/// speed, and both kernels' batches were 4–18 % slower with one prefetch
/// burst per tall tile (`docs/benchmarks.md`).
#[cfg(target_arch = "x86_64")]
const SLICE_ROWS: usize = 512;

/// How far ahead of the current tile its partial sums are prefetched.
const OUT_PREFETCH_WORDS: usize = 8 * 16;

/// Prefetches the first [`OUT_PREFETCH_WORDS`] partial sums of `out`, the
/// ones the lookahead inside the tile loops does not reach. A batch's turn
/// covers only 64 words per query (one run), so without this its partial
/// sums, which sweep through k·ℓ2 words per panel (8 MiB at k = 64,
/// ℓ2 = 2^15) and live in L3, were read with a demand miss per tile.
fn prefetch_head(out: &[u32]) {
    for w in (0..out.len().min(OUT_PREFETCH_WORDS)).step_by(16) {
        crate::mem::prefetch(out, w);
    }
}

/// `out[c] += Σ_r c1[r]·D[r][c] mod 2^32` for one tile of 8 columns ×
/// `q.lo.len()` rows (a multiple of 32) in 32-row blocks, prefetching the
/// cache lines of `ahead` into L2 on the way (a batch's next run).
fn block_with(k: Kernel, tile: &[u8], q: QueryRows<'_>, ahead: &[u8], out: &mut [u32; 8]) {
    let rows = q.lo.len();
    assert!(
        q.hi.len() == rows
            && rows.is_multiple_of(32)
            && q.bytes.len() == rows / 32 * LIMB_BLOCK
            && tile.len() == 8 * rows,
        "tile shape"
    );
    #[cfg(target_arch = "x86_64")]
    {
        match k {
            Kernel::Avx512Vnni if avx512_vnni() => {
                // SAFETY: avx512f, avx512bw and avx512vnni were detected at
                // runtime; the tile and limb shapes were asserted above.
                unsafe { avx512::block_vnni(tile, q.bytes, ahead, out) };
                return;
            }
            Kernel::Avx512Bw if avx512() => {
                for (sub, lo, hi, pf) in slices(tile, q, ahead) {
                    crate::mem::prefetch_l2(pf);
                    // SAFETY: avx512f and avx512bw were detected at
                    // runtime; `slices` keeps the tile shape asserted above.
                    unsafe { avx512::block_bw(sub, lo, hi, out) };
                }
                return;
            }
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                for (sub, lo, hi, pf) in slices(tile, q, ahead) {
                    crate::mem::prefetch_l2(pf);
                    // SAFETY: avx2 was detected at runtime; `slices` keeps
                    // the tile shape asserted above.
                    unsafe { avx2::block(sub, lo, hi, out) };
                }
                return;
            }
            _ => {}
        }
    }
    let _ = k;
    crate::mem::prefetch_l2(ahead);
    block_scalar(tile, q.lo, q.hi, out);
}

/// A tall tile as the `pmaddwd` kernels take it: slices of
/// [`SLICE_ROWS`] rows (each a contiguous 8·rows-byte stretch, as 32-row
/// blocks are stored in order) with their lo/hi query entries and an equal
/// share of the `ahead` lines to prefetch.
#[cfg(target_arch = "x86_64")]
fn slices<'a>(
    tile: &'a [u8],
    q: QueryRows<'a>,
    ahead: &'a [u8],
) -> impl Iterator<Item = (&'a [u8], &'a [i16], &'a [i16], &'a [u8])> {
    let n = tile.len().div_ceil(8 * SLICE_ROWS);
    tile.chunks(8 * SLICE_ROWS)
        .enumerate()
        .map(move |(i, sub)| {
            let (r0, r1) = (i * SLICE_ROWS, i * SLICE_ROWS + sub.len() / 8);
            (sub, &q.lo[r0..r1], &q.hi[r0..r1], line_share(ahead, n, i))
        })
}

/// Share `i` of `parts` near-equal shares of `data` in whole 64-byte cache
/// lines (the last ones shorter or empty): how the prefetch of a batch's
/// next run is split over queries, tiles and slices.
fn line_share(data: &[u8], parts: usize, i: usize) -> &[u8] {
    let per = data.len().div_ceil(64).div_ceil(parts.max(1)) * 64;
    let a = (i * per).min(data.len());
    &data[a..(a + per).min(data.len())]
}

/// Scalar twin of the tile kernels.
fn block_scalar(tile: &[u8], lo: &[i16], hi: &[i16], out: &mut [u32; 8]) {
    for (c, o) in out.iter_mut().enumerate() {
        let (mut l, mut h) = (0i32, 0i32);
        for r in 0..lo.len() {
            let d = tile[r / 32 * 256 + c * 32 + r % 32] as i8 as i32;
            l = l.wrapping_add(lo[r] as i32 * d);
            h = h.wrapping_add(hi[r] as i32 * d);
        }
        *o = o.wrapping_add((l as u32).wrapping_add((h as u32) << 16));
    }
}

/// Column-major columns j0..j1 with one variant.
fn column_major_with(
    k: Kernel,
    db: &[u8],
    ell1: usize,
    j0: usize,
    j1: usize,
    q: &SplitQuery,
    out: &mut [u32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        match k {
            Kernel::Avx512Vnni if avx512_vnni() => {
                // SAFETY: avx512f, avx512bw and avx512vnni were detected at runtime.
                unsafe { avx512::columns_vnni(db, ell1, j0, j1, q, out) };
                return;
            }
            Kernel::Avx512Bw if avx512() => {
                // SAFETY: avx512f and avx512bw were detected at runtime.
                unsafe { avx512::columns_bw(db, ell1, j0, j1, q, out) };
                return;
            }
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                // SAFETY: the avx2 feature was detected at runtime.
                unsafe { avx2::columns(db, ell1, j0, j1, q, out) };
                return;
            }
            _ => {}
        }
    }
    let _ = k;
    columns_split_scalar(db, ell1, j0, j1, q, out);
}

/// Scalar twin of the SIMD kernel using the same lo/hi split.
fn columns_split_scalar(
    db: &[u8],
    ell1: usize,
    j0: usize,
    j1: usize,
    q: &SplitQuery,
    out: &mut [u32],
) {
    for (j, o) in (j0..j1).zip(out.iter_mut()) {
        let col = &db[j * ell1..(j + 1) * ell1];
        let (mut lo, mut hi) = (0i32, 0i32);
        for (i, &d) in col.iter().enumerate() {
            let d = d as i8 as i32;
            lo = lo.wrapping_add(q.lo[i] as i32 * d);
            hi = hi.wrapping_add(q.hi[i] as i32 * d);
        }
        *o = (lo as u32).wrapping_add((hi as u32) << 16);
    }
}
