//! The server's inner loops: the SimplePIR pass c1ᵀ·D (YPIR Construction
//! 3.1, Answer step 1) and the DoublePIR pass c2ᵀ·[H; T]ᵀ (step 2), plus the
//! NTT, key-switching and node-combination loops of packing, the column
//! update and chunk packing of `Server::update` (App. B), and the
//! transparent-huge-page advice for the buffers those passes stream.
//!
//! This is the only module allowed to use `unsafe`: each SIMD kernel is
//! selected by runtime CPU-feature detection and has a scalar twin that the
//! tests compare it against. The default build runs on any x86-64 and on
//! wasm32 (scalar).
//!
//! SimplePIR and DoublePIR pick one of the [`Kernel`] variants. The other
//! kernels (NTT, key switching, node combination, slot permutation and
//! gadget digits of packing, chunk packing, the residues and lazy products
//! of the hint and of H2) come in an AVX-512 version (16 u32 lanes) and an
//! AVX2 version (8 lanes), chosen from the selected
//! [`Kernel`] (see `simd`): AVX-512 when an AVX-512 variant is selected,
//! AVX2 for any other SIMD variant, the scalar twins under
//! `PIR_KERNEL=scalar` (`PIR_KERNEL=avx2` runs the AVX2 versions on an
//! AVX-512 machine).
//!
//! SimplePIR arithmetic: records are `i8` (representative in [−N/2, N/2)),
//! c1 ∈ Z_{2^32}. Writing c = lo + 2^16·hi with lo, hi signed 16-bit, each
//! product c·d is lo·d + 2^16·(hi·d) mod 2^32, and lo·d, hi·d fit in 23 bits,
//! so `pmaddwd` (16×16→32 with pairwise add) computes both halves with plain
//! wrapping 32-bit accumulators: no reduction is ever needed because q1 = 2^32
//! is the machine word (YPIR §4.1 "Modulus selection"). The pass reads the
//! database once, in storage order: panels of up to 2048 rows, tiles of 8
//! columns inside a panel ([`crate::db`]), so the slice of query a panel
//! needs stays in L1 while the tiles stream past.
//!
//! Layout: this file holds the dispatch (feature detection, [`Kernel`]
//! selection, work splitting across threads) and the scalar twins; each
//! instruction-set variant is a private submodule in `kernel/`:
//!
//! | submodule | what |
//! |---|---|
//! | `avx2`, `avx512` | SimplePIR tile and column kernels (`pmaddwd`, `vpmaddwd`, `vpdpbusd`, `vpdpwssd`) |
//! | `avx512_vnni_dp`, `avx2_dp` | DoublePIR limb kernels over a quad of digit rows |
//! | `avx512_ks`, `avx2_ks` | packing: key-switch accumulation, node combination, slot permutation |
//! | `ntt_avx512`, `ntt_avx2` | negacyclic NTTs (Harvey butterflies) |
//! | `rns_simd`, `runs_simd`, `pack_simd`, `digits_simd` | lazy RNS products, update runs, chunk packing, gadget digits |
//! | `tests` | every fast path against its scalar twin |

#![allow(unsafe_code)]

use crate::digits::RowStride;

/// A SimplePIR query vector c1 in the two forms the tile kernels read,
/// zero-padded to a multiple of 64 entries:
///
/// * signed 16-bit halves, `c1[i] ≡ lo[i] + 2^16·hi[i] (mod 2^32)`
///   (`pmaddwd`/`vpdpwssd` kernels);
/// * the four bytes of each `c1[i]`, `c1[i] = Σ_k 2^{8k}·u_k[i]`, laid out per
///   32-row block as `[u_0 of the block | u_1 | u_2 | u_3]` (32 bytes each),
///   so the `vpdpbusd` kernel broadcasts one limb of a block with one load.
#[derive(Clone, Debug)]
pub struct SplitQuery {
    lo: Vec<i16>,
    hi: Vec<i16>,
    bytes: Vec<u8>,
    len: usize,
}

/// Bytes of [`SplitQuery::bytes`] per 32-row block (4 limbs × 32 rows).
const LIMB_BLOCK: usize = 4 * 32;

impl SplitQuery {
    /// Splits c1.
    pub fn new(c1: &[u32]) -> Self {
        let padded = c1.len().div_ceil(64) * 64;
        let mut lo = vec![0i16; padded];
        let mut hi = vec![0i16; padded];
        let mut bytes = vec![0u8; 4 * padded];
        for (i, &c) in c1.iter().enumerate() {
            let l = c as u16 as i16;
            lo[i] = l;
            hi[i] = (c.wrapping_sub(l as i32 as u32) >> 16) as u16 as i16;
            let at = i / 32 * LIMB_BLOCK + i % 32;
            for (k, b) in c.to_le_bytes().into_iter().enumerate() {
                bytes[at + 32 * k] = b;
            }
        }
        SplitQuery {
            lo,
            hi,
            bytes,
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

/// Which implementation [`simplepir`] uses on this machine.
pub fn simplepir_impl() -> &'static str {
    Kernel::selected().name()
}

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

#[cfg(target_arch = "x86_64")]
fn avx512_vnni() -> bool {
    avx512() && std::arch::is_x86_feature_detected!("avx512vnni")
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Vector width of the kernels outside SimplePIR (NTT, key switching, node
/// combination, chunk packing).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simd {
    /// 16 u32 lanes (AVX-512F/BW).
    Avx512,
    /// 8 u32 lanes (AVX2).
    Avx2,
    /// The scalar twins.
    None,
}

/// AVX-512 when the selected [`Kernel`] is an AVX-512 one, AVX2 when it is
/// any other SIMD kernel (so `PIR_KERNEL=avx2` exercises the AVX2 paths on
/// an AVX-512 machine), scalar under `PIR_KERNEL=scalar` or without AVX2.
#[cfg(target_arch = "x86_64")]
fn simd() -> Simd {
    match Kernel::selected() {
        Kernel::Scalar => Simd::None,
        Kernel::Avx512Bw | Kernel::Avx512Vnni if avx512() => Simd::Avx512,
        _ if avx2() => Simd::Avx2,
        _ => Simd::None,
    }
}

/// Scalar reference: `out[j] = Σ_i c1[i]·D[i][j] mod 2^32` over columns
/// `cols` (each ℓ1 bytes, column-major slices of the database).
pub fn simplepir_scalar(db: &[u8], ell1: usize, c1: &[u32], out: &mut [u32]) {
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
pub fn simplepir(db: &crate::db::Database, queries: &[SplitQuery], out: &mut [Vec<u32>]) {
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
/// storage order. A batch takes turns per run of [`BATCH_RUN_BYTES`]:
/// each run is read once from memory and then from L2 by every other query
/// (§4.3).
fn panels_with(
    k: Kernel,
    view: &View<'_>,
    p0: usize,
    p1: usize,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
) {
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
            let mut g0 = 0;
            while g0 < groups {
                let g1 = (g0 + run_groups).min(groups);
                let run_end = (p * view.tiled_cols + g1 * 8) * view.panel;
                let next_end = (run_end + (g1 - g0) * 8 * view.panel).min(tiled_end);
                let next = &view.data[run_end.min(next_end)..next_end];
                for (i, (q, o)) in queries.iter().zip(out.iter_mut()).enumerate() {
                    let ahead = match i {
                        0 => &[][..],
                        _ => line_share(next, queries.len() - 1, i - 1),
                    };
                    tile_with(k, view, p, g0, g1, q, ahead, &mut o[g0 * 8..g1 * 8]);
                }
                g0 = g1;
            }
        }
    }
}

/// Bytes per turn of a batch in the SimplePIR pass (whole tiles, at least
/// one; 8 tiles of 2048 rows): the run being read and the next one being
/// prefetched take half of a 512 KiB L2 (session 4's AVX2 EPYC). On the
/// 1 MiB L2 of Zen 4, 128 and 256 KiB runs measured the same (batch of 4,
/// B = 33: 90.5 and 90.7 ms, session 7).
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

/// SimplePIR kernel variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Portable scalar twin (lo/hi split, same arithmetic).
    Scalar,
    /// AVX2 `pmaddwd`, 4 columns × 16 rows per step.
    Avx2,
    /// AVX-512BW `vpmaddwd`, 8 columns × 32 rows per step.
    Avx512Bw,
    /// AVX-512 VNNI: tiles with `vpdpbusd` on the query's bytes (8 columns
    /// × 32 rows per step), the column-major tail with `vpdpwssd`.
    Avx512Vnni,
}

impl Kernel {
    /// Variants this CPU can run, fastest last.
    pub fn available() -> Vec<Kernel> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut v = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Kernel::Avx2);
            }
            if avx512() {
                v.push(Kernel::Avx512Bw);
            }
            if avx512_vnni() {
                v.push(Kernel::Avx512Vnni);
            }
        }
        v
    }

    /// The variant used: the fastest available, or `PIR_KERNEL` if set to
    /// an available one.
    pub fn selected() -> Kernel {
        static K: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *K.get_or_init(|| {
            let avail = Kernel::available();
            let forced = match std::env::var("PIR_KERNEL").ok().as_deref() {
                Some("scalar") => Some(Kernel::Scalar),
                Some("avx2") => Some(Kernel::Avx2),
                Some("avx512bw") => Some(Kernel::Avx512Bw),
                Some("avx512-vnni") => Some(Kernel::Avx512Vnni),
                _ => None,
            };
            match forced {
                Some(k) if avail.contains(&k) => k,
                _ => *avail.last().unwrap_or(&Kernel::Scalar),
            }
        })
    }

    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512Bw => "avx512bw",
            Kernel::Avx512Vnni => "avx512-vnni",
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

/// Rows of a tile the `pmaddwd` kernels (AVX2, AVX-512BW) take at a time
/// ([`slices`]). The AVX2 kernel reads its tile twice and needs tile and
/// query slice in L1 for the second pass: with 512 rows they take 4 + 2 KiB;
/// whole 2048-row tiles (16 + 8 KiB) ran its single-query pass at half
/// speed, and both kernels' batches were 4–18 % slower with one prefetch
/// burst per tall tile (`docs/benchmarks.md`, session 8).
#[cfg(target_arch = "x86_64")]
const SLICE_ROWS: usize = 512;

/// How far ahead of the current tile its partial sums are prefetched.
const OUT_PREFETCH_WORDS: usize = 8 * 16;

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

/// Software-prefetch distances (bytes ahead of the tile being read) that
/// [`tune_prefetch`] tries; 0 issues no prefetch instruction and leaves the
/// stream to the hardware prefetchers.
///
/// Which is best depends on the core, not on the code: on the AVX2-only
/// EPYC of session 4 `prefetchnta` 24 KiB ahead beat the alternatives; on
/// the Zen 4 EPYC of session 5 any software prefetch cost 10–35 % of the
/// pass (0.60–0.74 of bandwidth with it, 0.91–0.94 without; see
/// `docs/benchmarks.md`). So the distance is measured on the machine, like
/// an FFT plan, rather than fixed at compile time.
pub const PREFETCH_CANDIDATES: [usize; 4] = [0, 4096, 8192, 24576];

/// How much faster than no software prefetch a distance must measure to be
/// chosen (see [`measure_prefetch`]).
const PREFETCH_MARGIN: f64 = 0.02;

/// The distance used until [`tune_prefetch`] has measured one (and for
/// databases too small to measure on): hardware prefetch only.
const PREFETCH_DEFAULT: usize = 0;

/// Most bytes of database [`tune_prefetch`] streams per timed pass.
const TUNE_BYTES: usize = 256 << 20;

/// The smallest tiled region [`tune_prefetch`] measures on: 64 MiB, twice
/// the last-level cache of the machines measured so far, so the timed
/// passes stream from memory (a smaller database is mostly served from the
/// cache, where prefetching hardly matters). The auditor's databases are
/// 2^30 bits (128 MiB) each.
const MIN_TUNE_BYTES: usize = 64 << 20;

/// Not yet initialised (from `PIR_PF` or the default).
const PF_UNSET: usize = usize::MAX;

static PF_DIST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(PF_UNSET);

/// `PIR_PF` (bytes), if set: fixes the distance and disables tuning.
fn prefetch_forced() -> Option<usize> {
    static F: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *F.get_or_init(|| std::env::var("PIR_PF").ok().and_then(|v| v.parse().ok()))
}

/// Software prefetch distance in bytes of the SimplePIR stream: how far
/// ahead of the tile being read the kernels request cache lines (0: none).
/// `PIR_PF` if set, else what [`tune_prefetch`] chose, else 0.
pub fn prefetch_distance() -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    match PF_DIST.load(Relaxed) {
        PF_UNSET => {
            let d = prefetch_forced().unwrap_or(PREFETCH_DEFAULT);
            PF_DIST.store(d, Relaxed);
            d
        }
        d => d,
    }
}

/// What [`tune_prefetch`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefetchTuning {
    /// The distance chosen (bytes; 0 = no software prefetch).
    pub chosen: usize,
    /// Set by `PIR_PF`: nothing was measured.
    pub forced: bool,
    /// Best single-thread SimplePIR throughput (GB/s) of each candidate
    /// over the same span of the database.
    pub candidates: Vec<(usize, f64)>,
    /// Bytes streamed per timed pass.
    pub span_bytes: usize,
}

static TUNING: std::sync::Mutex<Option<PrefetchTuning>> = std::sync::Mutex::new(None);

/// Times the first `panels` panels of `view` with kernel `k` at every
/// [`PREFETCH_CANDIDATES`] distance, three interleaved rounds, and returns
/// the fastest (the earlier candidate on a tie). Leaves the process-wide
/// distance at the last candidate; the caller sets it.
fn measure_prefetch(k: Kernel, view: &View<'_>, panels: usize) -> PrefetchTuning {
    use std::sync::atomic::Ordering::Relaxed;
    let panels = panels.min(view.panels());
    let span_bytes = panels * view.panel * view.tiled_cols;
    // The values do not change the work: time the pass with c1 = 0.
    let q = [SplitQuery::new(&vec![0u32; view.ell1])];
    let mut out = vec![vec![0u32; view.ell2]];
    let mut best = [f64::INFINITY; PREFETCH_CANDIDATES.len()];
    for _round in 0..3 {
        for (b, &d) in best.iter_mut().zip(&PREFETCH_CANDIDATES) {
            PF_DIST.store(d, Relaxed);
            let t = std::time::Instant::now();
            panels_with(k, view, 0, panels, &q, &mut out);
            *b = b.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
    }
    // The fastest, but software prefetch (candidates past the first, 0)
    // only when it beats none by more than PREFETCH_MARGIN: a wrong
    // distance costs up to a third of the pass (24 KiB on Zen 4), so noise
    // between close candidates should not pick one.
    let mut chosen = 0;
    for i in 1..best.len() {
        if best[i] < best[chosen] && best[i] * (1.0 + PREFETCH_MARGIN) < best[0] {
            chosen = i;
        }
    }
    PrefetchTuning {
        chosen: PREFETCH_CANDIDATES[chosen],
        forced: false,
        candidates: PREFETCH_CANDIDATES
            .iter()
            .zip(&best)
            .map(|(&d, &s)| (d, span_bytes as f64 / s.max(1e-9) / 1e9))
            .collect(),
        span_bytes,
    }
}

/// The measurement [`tune_prefetch`] made in this process, if any.
pub fn prefetch_tuning() -> Option<PrefetchTuning> {
    TUNING.lock().map(|t| t.clone()).unwrap_or(None)
}

/// Measures the SimplePIR pass of the selected kernel over the first
/// 256 MiB of `db` (all of it if smaller) with every
/// [`PREFETCH_CANDIDATES`] distance (three
/// interleaved rounds, best time of each), and keeps the fastest (a
/// distance only if it beats none by more than 2 %) for the
/// rest of the process. Runs once per process (later calls return the
/// first result); returns `None` without measuring when the tiled region of
/// `db` is smaller than 64 MiB or the kernel is scalar (no
/// prefetch), so a later, larger database can still tune. About 12 passes
/// of 256 MiB: ~0.1 s at 30 GB/s, paid at the first DBSetup.
pub fn tune_prefetch(db: &crate::db::Database) -> Option<PrefetchTuning> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut slot = TUNING.lock().ok()?;
    if let Some(t) = slot.as_ref() {
        return Some(t.clone());
    }
    if let Some(d) = prefetch_forced() {
        let t = PrefetchTuning {
            chosen: d,
            forced: true,
            candidates: Vec::new(),
            span_bytes: 0,
        };
        *slot = Some(t.clone());
        return Some(t);
    }
    let k = Kernel::selected();
    let view = View::of(db);
    let panel_bytes = view.panel * view.tiled_cols;
    if k == Kernel::Scalar || panel_bytes == 0 || view.panels() * panel_bytes < MIN_TUNE_BYTES {
        return None;
    }
    let t = measure_prefetch(k, &view, TUNE_BYTES.div_ceil(panel_bytes));
    PF_DIST.store(t.chosen, Relaxed);
    *slot = Some(t.clone());
    Some(t)
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// One query's c2 as the DoublePIR kernels consume it, zero-padded to the
/// matrix's padded column count.
enum DpQuery {
    /// Residues mod P0 and mod P1 widened to 64-bit lanes (the scalar
    /// kernel).
    Wide(Vec<u64>, Vec<u64>),
    /// 10/10/8-bit limbs of the residues mod P0, then mod P1 (`vpdpwssd`,
    /// `vpmaddwd`),
    /// interleaved per 32-column chunk: limb t of chunk c's columns at
    /// c·192 + 32·t, so one step reads 384 contiguous bytes (six separate
    /// limb arrays sit at the same offset modulo 4 KiB and fight over the
    /// same L1 sets).
    Limbs(Vec<i16>, DpLimbs),
}

/// Limbs per column of [`DpQuery::Limbs`].
const DP_LIMBS: usize = 6;

impl DpQuery {
    fn new(c2: &[u32], cols: usize, limbs: Option<DpLimbs>) -> DpQuery {
        use crate::digits::{DigitMatrix, CHUNK_COLS};
        let cols_pad = DigitMatrix::padded_cols(cols);
        let (c0, c1) = c2.split_at(cols);
        if let Some(kind) = limbs {
            let mut l = vec![0i16; cols_pad * DP_LIMBS];
            for (h, half) in [c0, c1].into_iter().enumerate() {
                for (j, &x) in half.iter().enumerate() {
                    let at = j / CHUNK_COLS * CHUNK_COLS * DP_LIMBS + j % CHUNK_COLS;
                    for (k, (shift, bits)) in [(0, 10), (10, 10), (20, 8)].into_iter().enumerate() {
                        l[at + (3 * h + k) * CHUNK_COLS] =
                            ((x >> shift) & ((1 << bits) - 1)) as i16;
                    }
                }
            }
            DpQuery::Limbs(l, kind)
        } else {
            let wide = |half: &[u32]| {
                let mut v = vec![0u64; cols_pad];
                for (o, &x) in v.iter_mut().zip(half) {
                    *o = x as u64;
                }
                v
            };
            DpQuery::Wide(wide(c0), wide(c1))
        }
    }
}

/// DoublePIR pass (YPIR Construction 3.1, Answer step 2): for each row r of
/// `m` (signed digits |x| ≤ p/2), `out[q][r] = (Σ_j c2[j]·x[r][j] mod P0,
/// … mod P1)` for every query q, where `c2s[q]` holds the ℓ2 residues mod
/// P0 followed by the ℓ2 residues mod P1 (each < 2^28). Products are
/// < 2^42 and at most 2^18 are summed, so signed 64-bit sums never
/// overflow and are reduced once per row (YPIR §4, footnote 8: reduce only
/// when a sum could overflow).
///
/// The matrix is read from memory once, front to back, in its storage
/// order ([`crate::digits`]): column block by column block, quad of rows by
/// quad; the other queries of a batch re-read each block from the
/// last-level cache, so a batch shares the scan (§4.3). Workers take ranges
/// of quads.
pub fn doublepir(m: &crate::digits::DigitMatrix, c2s: &[&[u32]], out: &mut [Vec<[u32; 2]>]) {
    doublepir_with(Kernel::selected(), m, c2s, out)
}

/// [`doublepir`] with an explicit kernel variant (tests).
pub fn doublepir_with(
    k: Kernel,
    m: &crate::digits::DigitMatrix,
    c2s: &[&[u32]],
    out: &mut [Vec<[u32; 2]>],
) {
    use crate::digits::{DigitMatrix, QUAD_ROWS};
    let (rows, cols) = (m.rows(), m.cols());
    assert_eq!(c2s.len(), out.len(), "one output per query");
    for (c2, o) in c2s.iter().zip(out.iter()) {
        assert!(
            c2.len() == 2 * cols && o.len() >= rows,
            "c2 and output lengths"
        );
    }
    if rows == 0 || c2s.is_empty() {
        return;
    }
    let limbs = dp_limbs(k);
    let preps: Vec<DpQuery> = c2s.iter().map(|c2| DpQuery::new(c2, cols, limbs)).collect();
    let quads = DigitMatrix::padded_rows(rows) / QUAD_ROWS;
    let task = |q0: usize, q1: usize| -> Vec<Vec<[i64; 2]>> {
        let mut sums = vec![vec![[0i64; 2]; (q1 - q0) * QUAD_ROWS]; preps.len()];
        // Block by block; inside a block each query walks the task's
        // quads in turn. The block (≤ 4 MB at Table 1) comes from memory
        // for the first query and from the last-level cache for the others,
        // while a query's limbs for the block (12 KiB) stay in L1; with the
        // queries interleaved per quad, four queries' limbs (48 KiB) did
        // not fit and a batch of 4 took 22 ms instead of 18 at B = 33.
        for (c0, w, blk) in m.blocks() {
            for (p, s) in preps.iter().zip(sums.iter_mut()) {
                for q in q0..q1 {
                    let quad = &blk[q * QUAD_ROWS * w..(q + 1) * QUAD_ROWS * w];
                    let mut acc = [[0i64; 2]; QUAD_ROWS];
                    quad_with(quad, p, c0, w, &mut acc);
                    for (t, a) in s[(q - q0) * QUAD_ROWS..].iter_mut().zip(&acc) {
                        // |sums| < 2^18 · 2^42: no overflow in i64.
                        t[0] += a[0];
                        t[1] += a[1];
                    }
                }
            }
        }
        sums
    };
    #[cfg(feature = "parallel")]
    let threads = rayon::current_num_threads();
    #[cfg(not(feature = "parallel"))]
    let threads = 1;
    // a few ranges per thread, so a slow core does not hold up the pass
    let per = if threads > 1 {
        quads.div_ceil(4 * threads).max(1)
    } else {
        quads
    };
    let ranges: Vec<(usize, usize)> = (0..quads)
        .step_by(per)
        .map(|q0| (q0, (q0 + per).min(quads)))
        .collect();
    #[cfg(feature = "parallel")]
    let parts: Vec<Vec<Vec<[i64; 2]>>> = {
        use rayon::prelude::*;
        if threads > 1 {
            ranges.par_iter().map(|&(a, b)| task(a, b)).collect()
        } else {
            ranges.iter().map(|&(a, b)| task(a, b)).collect()
        }
    };
    #[cfg(not(feature = "parallel"))]
    let parts: Vec<Vec<Vec<[i64; 2]>>> = ranges.iter().map(|&(a, b)| task(a, b)).collect();
    for (&(q0, _), part) in ranges.iter().zip(&parts) {
        for (o, sums) in out.iter_mut().zip(part) {
            for (i, a) in sums.iter().enumerate() {
                let r = q0 * QUAD_ROWS + i;
                if r < rows {
                    o[r] = [
                        crate::arith::reduce_signed(&crate::arith::MOD0, a[0]),
                        crate::arith::reduce_signed(&crate::arith::MOD1, a[1]),
                    ];
                }
            }
        }
    }
}

/// The limb kernels of the DoublePIR pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DpLimbs {
    /// `vpdpwssd`, four rows at a time (AVX-512 VNNI).
    #[cfg(target_arch = "x86_64")]
    Vnni,
    /// `vpmaddwd` + `vpaddd`, two rows at a time (AVX2; also the
    /// AVX-512BW variant without VNNI).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

/// Which limb kernel variant `k` runs on this CPU (None: the scalar
/// kernel on [`DpQuery::Wide`]). The limb kernels replaced `vpmuldq`
/// kernels on 64-bit residue lanes (session 8, B = 33 DoublePIR pass: AVX2
/// 8.1–8.4 → 6.3–6.5 ms, AVX-512BW 7.2–7.5 → 6.2–6.4 ms on the Zen 4).
fn dp_limbs(k: Kernel) -> Option<DpLimbs> {
    #[cfg(target_arch = "x86_64")]
    {
        match k {
            Kernel::Avx512Vnni if avx512_vnni() => return Some(DpLimbs::Vnni),
            Kernel::Avx2 | Kernel::Avx512Bw if avx2() => return Some(DpLimbs::Avx2),
            _ => {}
        }
    }
    let _ = k;
    None
}

/// Adds the dot products of one quad (4 rows × `w` columns starting at
/// column `c0`, in chunk order) with query `p` to `acc`.
fn quad_with(quad: &[i16], p: &DpQuery, c0: usize, w: usize, acc: &mut [[i64; 2]; 4]) {
    use crate::digits::{CHUNK_COLS, QUAD_ROWS};
    assert!(
        w.is_multiple_of(CHUNK_COLS) && quad.len() == QUAD_ROWS * w,
        "quad shape"
    );
    match p {
        DpQuery::Wide(w0, w1) => {
            quad_scalar(quad, &w0[c0..c0 + w], &w1[c0..c0 + w], acc);
        }
        DpQuery::Limbs(l, kind) => {
            let l = &l[c0 * DP_LIMBS..(c0 + w) * DP_LIMBS];
            #[cfg(not(target_arch = "x86_64"))]
            let _ = l; // no limb kernel off x86-64: `kind` has no value there
                       // SAFETY (both arms): `dp_limbs` found the kernel's CPU features
                       // at runtime before these limbs were prepared; the quad holds
                       // 4·w digits and the limb slice 6·w entries, w a multiple of 32
                       // and at most BLOCK_COLS (asserted inside).
            match *kind {
                #[cfg(target_arch = "x86_64")]
                DpLimbs::Vnni => unsafe { avx512_vnni_dp::quad_limbs(quad, l, acc) },
                #[cfg(target_arch = "x86_64")]
                DpLimbs::Avx2 => unsafe { avx2_dp::quad_limbs(quad, l, acc) },
            }
        }
    }
}

/// Scalar twin of the quad kernels.
fn quad_scalar(quad: &[i16], w0: &[u64], w1: &[u64], acc: &mut [[i64; 2]; 4]) {
    use crate::digits::{CHUNK_COLS, QUAD_ROWS};
    for (c, chunk) in quad.chunks_exact(QUAD_ROWS * CHUNK_COLS).enumerate() {
        for (i, a) in acc.iter_mut().enumerate() {
            let x = &chunk[i * CHUNK_COLS..(i + 1) * CHUNK_COLS];
            for (l, &d) in x.iter().enumerate() {
                let col = c * CHUNK_COLS + l;
                a[0] += d as i64 * w0[col] as i64;
                a[1] += d as i64 * w1[col] as i64;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512_vnni_dp;

#[cfg(target_arch = "x86_64")]
mod avx2_dp;

/// Montgomery constants of a CRT prime for R = 2^32.
#[derive(Clone, Copy, Debug)]
pub struct Mont {
    /// The prime p.
    pub p: u32,
    /// −p^{-1} mod 2^32.
    pub pinv_neg: u32,
    /// R mod p (to convert into Montgomery form).
    pub r_mod_p: u32,
}

impl Mont {
    /// Constants for the odd prime `p` < 2^30.
    pub const fn new(p: u32) -> Mont {
        // Newton iteration for p^{-1} mod 2^32.
        let mut inv = 1u32;
        let mut i = 0;
        while i < 5 {
            inv = inv.wrapping_mul(2u32.wrapping_sub(p.wrapping_mul(inv)));
            i += 1;
        }
        Mont {
            p,
            pinv_neg: inv.wrapping_neg(),
            r_mod_p: ((1u64 << 32) % p as u64) as u32,
        }
    }

    /// R^{-1} mod p (tests).
    #[cfg(test)]
    fn pinv_inv_r(&self) -> u64 {
        crate::arith::Modulus::new(self.p).inv(self.r_mod_p) as u64
    }

    /// REDC: x·R^{-1} mod p for x < p·2^32, result in [0, p).
    #[inline(always)]
    pub fn redc(&self, x: u64) -> u32 {
        let m = (x as u32).wrapping_mul(self.pinv_neg);
        let t = ((x + m as u64 * self.p as u64) >> 32) as u32;
        crate::arith::csub(t, self.p)
    }
}

/// Nodes of the packing tree's digit stream that [`keyswitch_acc`]
/// prefetches ahead.
#[cfg(target_arch = "x86_64")]
const KS_NODES_AHEAD: usize = 3;

/// Key-switching accumulation of one CRT half (Eq. 2.2, the W·g_z^{-1}(τ(c0))
/// product of Automorph in the NTT domain):
/// `out[i] = out[i] + Σ_k w[k][i]·g[k][i] mod p` where `w` is in Montgomery
/// form (w·R mod p), so a single REDC of the 64-bit sum yields the product.
/// `w` and `g` hold `t` rows of stride `stride`; each row's first `n` words
/// are used. Σ of t ≤ 4 products < 4·2^56 < p·2^32, as REDC requires.
/// The per-node cost of the online packing (YPIR §4.2). Runtime-dispatched:
/// AVX-512F/BW or AVX2, with [`keyswitch_acc_scalar`] as the twin.
///
/// # Panics
/// If t > 4 or a row or `out` is shorter than described.
pub fn keyswitch_acc(
    m: &Mont,
    w: &[u32],
    g: &[u32],
    t: usize,
    stride: usize,
    n: usize,
    out: &mut [u32],
) {
    // (checked in release builds too: the SIMD kernels rely on it)
    let rows = t.saturating_sub(1) * stride + n;
    assert!(t <= 4 && w.len() >= rows && g.len() >= rows && out.len() >= n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f and avx512bw were detected at runtime;
                // lengths were checked above.
                unsafe { avx512_ks::keyswitch_acc(m, w, g, t, stride, n, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 was detected at runtime; lengths were checked
                // above.
                unsafe { avx2_ks::keyswitch_acc(m, w, g, t, stride, n, out) };
                return;
            }
            Simd::None => {}
        }
    }
    keyswitch_acc_scalar(m, w, g, t, stride, 0, n, out);
}

/// Scalar twin of [`keyswitch_acc`] for slots `from..n`.
#[allow(clippy::too_many_arguments)]
pub fn keyswitch_acc_scalar(
    m: &Mont,
    w: &[u32],
    g: &[u32],
    t: usize,
    stride: usize,
    from: usize,
    n: usize,
    out: &mut [u32],
) {
    for i in from..n {
        let mut acc = 0u64;
        for k in 0..t {
            acc += w[k * stride + i] as u64 * g[k * stride + i] as u64;
        }
        out[i] = crate::arith::csub(out[i] + m.redc(acc), m.p);
    }
}

/// One CDKS node side in the NTT domain (Construction 2.8), one CRT half:
/// `plus[i] = e[i] + x^k·o[i]`, `minus[i] = e[i] − x^k·o[i]` (mod p), with
/// the monomial x^k given in Montgomery form. Runtime-dispatched:
/// AVX-512F/BW or AVX2, with [`plus_minus_scalar`] as the twin.
///
/// # Panics
/// If the slices differ in length.
pub fn plus_minus(
    m: &Mont,
    e: &[u32],
    o: &[u32],
    mono_mont: &[u32],
    plus: &mut [u32],
    minus: &mut [u32],
) {
    let n = e.len();
    assert!(o.len() == n && mono_mont.len() == n && plus.len() == n && minus.len() == n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f/avx512bw detected at runtime; all slices
                // have n words (asserted above).
                unsafe { avx512_ks::plus_minus(m, e, o, mono_mont, plus, minus) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; all slices have n words
                // (asserted above).
                unsafe { avx2_ks::plus_minus(m, e, o, mono_mont, plus, minus) };
                return;
            }
            Simd::None => {}
        }
    }
    plus_minus_scalar(m, e, o, mono_mont, plus, minus, 0, n);
}

/// Scalar twin of [`plus_minus`] for slots `from..n`.
#[allow(clippy::too_many_arguments)]
pub fn plus_minus_scalar(
    m: &Mont,
    e: &[u32],
    o: &[u32],
    mono_mont: &[u32],
    plus: &mut [u32],
    minus: &mut [u32],
    from: usize,
    n: usize,
) {
    for i in from..n {
        let xo = m.redc(o[i] as u64 * mono_mont[i] as u64);
        plus[i] = crate::arith::csub(e[i] + xo, m.p);
        minus[i] = crate::arith::csub(e[i] + m.p - xo, m.p);
    }
}

/// A permutation of 0..n, checked once at construction so the kernels can
/// rely on every index being in range.
///
/// The automorphisms of CDKS packing permute NTT slots within aligned
/// blocks: every aligned block of 16 (and of 8) output slots reads one
/// aligned block of input slots (checked here, true of every level at
/// Table 1). Then the permutation is a block load and one in-register
/// `vpermd`, instead of a gather (`vpgatherdd`, several times slower on
/// the Zen 4 EPYC of session 5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotPerm {
    perm: Vec<u32>,
    /// Every aligned 16-slot output block reads one aligned 16-slot input
    /// block (and n is a multiple of 16).
    within16: bool,
    /// The same for blocks of 8.
    within8: bool,
}

impl SlotPerm {
    /// Wraps `perm`; panics unless it is a permutation of 0..perm.len()
    /// (perms are built from parameters at startup, never from input).
    pub fn new(perm: Vec<u32>) -> SlotPerm {
        let mut seen = vec![false; perm.len()];
        for &j in &perm {
            assert!(
                (j as usize) < perm.len() && !seen[j as usize],
                "not a permutation"
            );
            seen[j as usize] = true;
        }
        let within = |w: usize| {
            perm.len().is_multiple_of(w)
                && perm
                    .chunks_exact(w)
                    .all(|b| b.iter().all(|&j| j as usize / w == b[0] as usize / w))
        };
        SlotPerm {
            within16: within(16),
            within8: within(8),
            perm,
        }
    }
}

impl std::ops::Index<usize> for SlotPerm {
    type Output = u32;
    fn index(&self, i: usize) -> &u32 {
        &self.perm[i]
    }
}

/// `out[i] = plus[i] + minus[perm[i]] mod p` (the τ of Automorph applied in
/// the NTT domain as a slot permutation). Runtime-dispatched: AVX-512F or
/// AVX2 gathers, with [`add_permuted_scalar`] as the twin.
pub fn add_permuted(p: u32, plus: &[u32], minus: &[u32], perm: &SlotPerm, out: &mut [u32]) {
    let n = perm.perm.len();
    assert!(plus.len() == n && minus.len() == n && out.len() == n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f/avx512bw detected; SlotPerm guarantees every
                // gather index is < perm.len() = minus.len().
                unsafe { avx512_ks::add_permuted(p, plus, minus, &perm.perm, perm.within16, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; SlotPerm guarantees every gather
                // index is < perm.len() = minus.len().
                unsafe { avx2_ks::add_permuted(p, plus, minus, &perm.perm, perm.within8, out) };
                return;
            }
            Simd::None => {}
        }
    }
    add_permuted_scalar(p, plus, minus, &perm.perm, out, 0);
}

/// Scalar twin of [`add_permuted`] from slot `from`.
pub fn add_permuted_scalar(
    p: u32,
    plus: &[u32],
    minus: &[u32],
    perm: &[u32],
    out: &mut [u32],
    from: usize,
) {
    for i in from..plus.len() {
        out[i] = crate::arith::csub(plus[i] + minus[perm[i] as usize], p);
    }
}

/// `out[i] = src[perm[i]]`: τ of Automorph applied to NTT slots (the
/// digits of a packing node, §4.2). Runtime-dispatched like
/// [`add_permuted`] (block load + `vpermd` when the permutation is
/// block-structured, gathers otherwise); [`permute_scalar`] is the twin.
pub fn permute(src: &[u32], perm: &SlotPerm, out: &mut [u32]) {
    let n = perm.perm.len();
    assert!(src.len() == n && out.len() == n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected; SlotPerm guarantees every index
                // is < perm.len() = src.len().
                unsafe { digits_simd::permute512(src, &perm.perm, perm.within16, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; SlotPerm guarantees every index is
                // < perm.len() = src.len().
                unsafe { digits_simd::permute256(src, &perm.perm, perm.within8, out) };
                return;
            }
            Simd::None => {}
        }
    }
    permute_scalar(src, &perm.perm, out, 0);
}

/// Scalar twin of [`permute`] from slot `from`.
pub fn permute_scalar(src: &[u32], perm: &[u32], out: &mut [u32], from: usize) {
    for i in from..out.len() {
        out[i] = src[perm[i] as usize];
    }
}

/// Gadget digits of coefficients given by their CRT residues (the
/// decomposition step of CDKS key switching, §4.2 / App. A):
/// `res = [x mod P0 (n) | x mod P1 (n)]` with residues in [0, p), and for
/// each coefficient x ∈ Z_q2 the t balanced base-z digits of its centred
/// representative ([`crate::arith::gadget_decompose`]) are written as
/// residues: digit k of coefficient i at `out[k·2n + i]` (mod P0) and
/// `out[k·2n + n + i]` (mod P1). `out.len()` must be `t·res.len()`.
///
/// The SIMD versions work on 64-bit lanes and avoid the signed carries of
/// the scalar loop: with u = x − q2·[x > q2/2] + Σ_{k<t−1} (z/2)·z^k + 2^62
/// (non-negative, below 2^63), digit k < t−1 is ((u ≫ k·log z) mod z) − z/2
/// and the top digit is (u ≫ (t−1)·log z) − 2^{62−(t−1)·log z}: the same
/// representatives as the scalar decomposition (each digit is the unique
/// one in [−z/2, z/2) congruent to the remaining value).
pub fn crt_gadget_digits(
    crt: &crate::arith::Crt,
    res: &[u32],
    log_z: u32,
    t: usize,
    out: &mut [u32],
) {
    let n = res.len() / 2;
    assert!(res.len() == 2 * n && out.len() == t * 2 * n && t >= 1);
    // the offset trick needs (t−1)·log z ≤ 62 and |digits| below the primes
    // (Params::validate: z ≤ 2^27, top digit < P1)
    assert!((t - 1) as u32 * log_z <= 62 && (1..=27).contains(&log_z));
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected; lengths asserted above.
                unsafe { digits_simd::digits512(crt, res, log_z, t, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; lengths asserted above.
                unsafe { digits_simd::digits256(crt, res, log_z, t, out) };
                return;
            }
            Simd::None => {}
        }
    }
    crt_gadget_digits_scalar(crt, res, log_z, t, out, 0);
}

/// Scalar twin of [`crt_gadget_digits`] for coefficients `from..`: CRT
/// combination, [`crate::arith::gadget_decompose`], small residues.
pub fn crt_gadget_digits_scalar(
    crt: &crate::arith::Crt,
    res: &[u32],
    log_z: u32,
    t: usize,
    out: &mut [u32],
    from: usize,
) {
    use crate::arith::{small_residue, MODS, Q2};
    let n = res.len() / 2;
    let mut digits = [0i64; 64];
    for i in from..n {
        let x = crt.combine(res[i], res[n + i]);
        crate::arith::gadget_decompose(x, Q2, log_z, t, &mut digits[..t]);
        for (k, &dg) in digits[..t].iter().enumerate() {
            out[k * 2 * n + i] = small_residue(&MODS[0], dg);
            out[k * 2 * n + n + i] = small_residue(&MODS[1], dg);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512_ks;

#[cfg(target_arch = "x86_64")]
mod avx2_ks;

/// `acc[i] += a[i]·b[i]` with 64-bit lazy accumulators, no reduction (the
/// block products of DBSetup's hint, App. B: each term < 2^56, at most
/// 2^16/d1 of them summed before [`crate::rns::reduce_acc`]). Over the first
/// `acc.len()` slots; runtime-dispatched: AVX-512F or AVX2 (`vpmuludq` on
/// zero-extended lanes), with [`mul_acc_lazy_scalar`] as the twin.
///
/// # Panics
/// If `a` or `b` is shorter than `acc`.
pub fn mul_acc_lazy(a: &[u32], b: &[u32], acc: &mut [u64]) {
    assert!(a.len() >= acc.len() && b.len() >= acc.len());
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; a and b hold ≥
                // acc.len() words (asserted above).
                unsafe { rns_simd::mul_acc_lazy_avx512(a, b, acc) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; a and b hold ≥ acc.len()
                // words (asserted above).
                unsafe { rns_simd::mul_acc_lazy_avx2(a, b, acc) };
                return;
            }
            Simd::None => {}
        }
    }
    mul_acc_lazy_scalar(a, b, acc, 0);
}

/// Scalar twin of [`mul_acc_lazy`] from slot `from`.
pub fn mul_acc_lazy_scalar(a: &[u32], b: &[u32], acc: &mut [u64], from: usize) {
    for ((o, &x), &y) in acc.iter_mut().zip(a).zip(b).skip(from) {
        *o += x as u64 * y as u64;
    }
}

/// Most blocks one pass of [`mul_sum_blocks_mod`] sums before reducing:
/// 256 terms below (2^28)^2 stay below 2^64.
pub const SUM_BLOCKS_MAX: usize = 256;

/// `out[l] = Σ_{b < blocks} a[b·stride + l]·x[b·stride + l] mod p` for
/// every slot l of `out`, for inputs below 2^28 (residues mod a CRT prime):
/// a row's sum over its blocks in H2 (`Server::rows_a`, YPIR §4.2). The
/// 64-bit sums stay in registers across all the blocks (64 slots per step
/// with AVX-512, 32 with AVX2) and are reduced there, so nothing but the
/// result is stored. More than [`SUM_BLOCKS_MAX`] blocks are summed in
/// runs, each reduced, then added mod p. Scalar twin:
/// [`mul_sum_blocks_mod_scalar`].
///
/// # Panics
/// If `a` or `x` is shorter than `(blocks − 1)·stride + out.len()`, or p
/// is not in (1, 2^28].
pub fn mul_sum_blocks_mod(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
) {
    assert!(p > 1 && p <= 1 << 28, "modulus out of range");
    if blocks == 0 {
        out.fill(0);
        return;
    }
    let need = (blocks - 1) * stride + out.len();
    assert!(a.len() >= need && x.len() >= need, "blocks past the inputs");
    if blocks > SUM_BLOCKS_MAX {
        let mut part = vec![0u32; out.len()];
        mul_sum_blocks_mod(a, x, stride, SUM_BLOCKS_MAX, p, out);
        let o = SUM_BLOCKS_MAX * stride;
        mul_sum_blocks_mod(
            &a[o..],
            &x[o..],
            stride,
            blocks - SUM_BLOCKS_MAX,
            p,
            &mut part,
        );
        for (s, t) in out.iter_mut().zip(&part) {
            *s = crate::arith::csub(*s + t, p);
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; every block's slots
                // are inside `a` and `x` (asserted above), blocks ≤
                // SUM_BLOCKS_MAX; inputs < 2^28 is the caller's contract
                // (a larger input gives a wrong sum, never a memory error).
                unsafe { rns_simd::mul_sum_blocks_mod_avx512(a, x, stride, blocks, p, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; bounds as above.
                unsafe { rns_simd::mul_sum_blocks_mod_avx2(a, x, stride, blocks, p, out) };
                return;
            }
            Simd::None => {}
        }
    }
    mul_sum_blocks_mod_scalar(a, x, stride, blocks, p, out, 0);
}

/// Scalar twin of [`mul_sum_blocks_mod`] for slots `from..`.
///
/// # Panics
/// If blocks > [`SUM_BLOCKS_MAX`] (the 64-bit sums could wrap; the
/// dispatcher splits longer sums), or the inputs are too short.
pub fn mul_sum_blocks_mod_scalar(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
    from: usize,
) {
    assert!(blocks <= SUM_BLOCKS_MAX, "too many blocks for one sum");
    let Some(out) = out.get_mut(from..) else {
        return;
    };
    let mut acc = vec![0u64; out.len()];
    for b in 0..blocks {
        let o = b * stride + from;
        for (s, (&y, &z)) in acc.iter_mut().zip(a[o..].iter().zip(&x[o..])) {
            *s += y as u64 * z as u64;
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        *o = (s % p as u64) as u32;
    }
}

#[cfg(target_arch = "x86_64")]
mod rns_simd;

/// `col[k] += Σ_t δ_t·g[o_t + k]` (mod 2^32) for every k, with `terms` the
/// pairs (δ_t, o_t): every change of one column of A1·D at once
/// (`Server::update`). Each term is a contiguous run of `g`, the doubled and
/// reversed a1 blocks, so that a column of NCyclicMat(a1,b) is one forward
/// slice with its negacyclic sign already applied. The column is read and
/// written once; each 16-row block is accumulated in a register over all
/// terms. Runtime-dispatched: AVX-512F or AVX2 (`vpmulld`), with
/// [`add_scaled_runs_scalar`] as the twin.
///
/// # Panics
/// If a run `g[o_t .. o_t + col.len()]` is out of bounds (a caller bug: the
/// offsets are computed from validated rows).
pub fn add_scaled_runs(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    let n = col.len();
    assert!(
        terms.iter().all(|&(_, o)| o <= g.len() && g.len() - o >= n),
        "run outside g"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(Kernel::selected(), Kernel::Avx512Bw | Kernel::Avx512Vnni) && avx512() {
            // SAFETY: avx512f detected at runtime; every run has ≥ n
            // elements (asserted above).
            unsafe { runs_simd::runs512(col, terms, g) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && Kernel::selected() != Kernel::Scalar {
            // SAFETY: avx2 detected at runtime; every run has ≥ n elements.
            unsafe { runs_simd::runs256(col, terms, g) };
            return;
        }
    }
    add_scaled_runs_scalar(col, terms, g, 0);
}

/// Scalar twin of [`add_scaled_runs`] for rows `from..`.
pub fn add_scaled_runs_scalar(col: &mut [u32], terms: &[(u32, usize)], g: &[u32], from: usize) {
    for (k, c) in col.iter_mut().enumerate().skip(from) {
        for &(d, o) in terms {
            *c = c.wrapping_add(d.wrapping_mul(g[o + k]));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod runs_simd;

/// One chunk of a planned column packing: the `pb` bits at `off` of the
/// window `lo | hi·2^w`, sign-extended to [−2^(pb−1), 2^(pb−1)) (the
/// scalar step every packer shares; `off < w < 32`, `pb ≤ 16`).
#[inline]
pub fn window_chunk(lo: u32, hi: u32, w: u32, off: u32, pb: u32) -> i16 {
    let sh = 64 - pb;
    let win = u64::from(lo) | u64::from(hi) << w;
    (((win >> off) << sh) as i64 >> sh) as i16
}

/// Eight consecutive chunks of a planned column packing (App. B; see
/// `server::ChunkPlan`): chunk t's bits start in rounded value
/// `base + idx[t]` at bit `off[t]` of the window `r[i] | r[i+1]·2^w`.
#[derive(Clone, Copy, Debug)]
pub struct PackGroup {
    /// Lanes 0..8: value index of chunk t relative to `base`; lanes 8..16:
    /// the same plus one (the window's upper value).
    pub idx: [u32; 16],
    /// Bit offset of chunk t in its window (< w).
    pub off: [u64; 8],
    /// Index of the group's first value.
    pub base: u32,
}

/// Writes chunk t of group g — the `pb` bits at `off` of the window
/// `r[i] | r[i+1]·2^w`, sign-extended to [−2^(pb−1), 2^(pb−1)) — to
/// `out[(8g + t)·stride]`. Runtime-dispatched: AVX-512F (one permute gathers
/// the 16 window values of a group, 64-bit variable shifts extract the eight
/// chunks) or AVX2 (two permutes and a blend per half of the window, 32-bit
/// variable shifts), with [`pack_groups_scalar`] as the twin.
///
/// # Panics
/// If `r` holds fewer than `base + 16` values for some group, an index is
/// ≥ 16, an offset is ≥ w, or `out` is too short (caller bugs: the plan is
/// built from the parameters).
pub fn pack_groups(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    assert!((1..=32).contains(&w) && (1..=16).contains(&pb) && stride >= 1);
    assert!(groups.iter().all(|g| g.idx.iter().all(|&i| i < 16)
        && g.off.iter().all(|&o| o < u64::from(w))
        && r.len() >= g.base as usize + 16));
    assert!(groups.is_empty() || out.len() > (8 * groups.len() - 1) * stride);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; the bounds the loads
                // and stores rely on are asserted above.
                unsafe { pack_simd::groups512(r, groups, w, pb, out, stride) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; the bounds the loads and
                // stores rely on, and off < w, are asserted above.
                unsafe { pack_simd::groups256(r, groups, w, pb, out, stride) };
                return;
            }
            Simd::None => {}
        }
    }
    pack_groups_scalar(r, groups, w, pb, out, stride);
}

/// Scalar twin of [`pack_groups`].
pub fn pack_groups_scalar(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    for (g, grp) in groups.iter().enumerate() {
        for t in 0..8 {
            let i = grp.base as usize + grp.idx[t] as usize;
            out[(8 * g + t) * stride] = window_chunk(r[i], r[i + 1], w, grp.off[t] as u32, pb);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod pack_simd;

/// Most columns [`pack_columns`] takes: one 32-column chunk of the hint's
/// storage (a row's 32 digits are one 64-byte line there).
pub const PACK_COLS_MAX: usize = 32;

/// Rounds 8·G columns of A1·D (G = 1..=4) from 2^32 to 2^w and packs each
/// into `starts.len()` chunks of `pb` bits (App. B; see
/// `server::ChunkPlan`): chunk k of column c — the `pb` bits at `off_k` of
/// the window `r[i_k] | r[i_k+1]·2^w`, sign-extended — goes to
/// `out[stride.at(k) + c]`. Eight columns at a time make each chunk index
/// one 16-byte store instead of eight 2-byte stores eight rows apart; all
/// 32 columns of a hint chunk at once make each row's stores fill its
/// 64-byte line before the next row's (eight at a time, each line was
/// written in four visits a full pass over the rows apart, and the lines,
/// one quad stride = a multiple of 4 KiB apart, were evicted in between).
/// `scratch` holds each group's rounded values interleaved (value i of
/// column 8g + c at g·8(n + 1) + 8i + c). Runtime-dispatched: AVX-512F or
/// AVX2, with [`pack_columns_scalar`] as the twin.
///
/// # Panics
/// If `cols.len()` is not 8, 16, 24 or 32, the columns differ in length, a
/// window reads past the last value + 1, `w ∉ [1, 32)`, `pb ∉ [1, 16]`,
/// rows of `stride` overlap (`row < cols.len()` or
/// `quad < 3·row + cols.len()`), or `out` is too short (caller bugs).
pub fn pack_columns(
    cols: &[&[u32]],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    scratch: &mut Vec<u32>,
    out: &mut [i16],
    stride: RowStride,
) {
    let width = cols.len();
    assert!(width.is_multiple_of(8) && (8..=PACK_COLS_MAX).contains(&width));
    let n = cols[0].len();
    assert!(cols.iter().all(|c| c.len() == n));
    assert!((1..32).contains(&w) && (1..=16).contains(&pb));
    // (rows do not overlap, and the last row is the furthest)
    assert!(stride.row >= width && stride.quad >= 3 * stride.row + width);
    assert!(starts
        .iter()
        .all(|&(i, off)| (i as usize) < n.max(1) && off < w));
    assert!(starts.is_empty() || out.len() >= stride.at(starts.len() - 1) + width);
    // interleave and round each group, plus one zero row for the last
    // window (every other word is written below: no need to clear the rest)
    let len = 8 * (n + 1);
    if scratch.len() != width / 8 * len {
        scratch.clear();
        scratch.resize(width / 8 * len, 0);
    }
    let (shift, half) = (32 - w, 1u32 << (31 - w));
    for (group, r) in cols.chunks_exact(8).zip(scratch.chunks_exact_mut(len)) {
        let group: [&[u32]; 8] = std::array::from_fn(|c| group[c]);
        r[8 * n..].fill(0);
        #[cfg(target_arch = "x86_64")]
        let from = if simd() != Simd::None {
            // SAFETY: avx2 detected (any SIMD selection implies it); the
            // columns have n values each and r holds 8(n + 1).
            unsafe { pack_simd::interleave_round8(group, w, r) }
        } else {
            0
        };
        #[cfg(not(target_arch = "x86_64"))]
        let from = 0;
        for (c, col) in group.iter().enumerate() {
            for (i, &h) in col.iter().enumerate().skip(from) {
                // round_pow2 from q1 = 2^32: the carry out of bit 31 is
                // the wrap-around mod 2^w
                r[8 * i + c] = h.wrapping_add(half) >> shift;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; every window row
                // i + 1 ≤ n of every group is inside `scratch` (width/8
                // runs of 8(n + 1) values) and every store inside `out`
                // (asserted above).
                unsafe { pack_simd::columns8_512(scratch, len, w, pb, starts, out, stride) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; bounds and off < w as
                // for the AVX-512 kernel (asserted above).
                unsafe { pack_simd::columns8_256(scratch, len, w, pb, starts, out, stride) };
                return;
            }
            Simd::None => {}
        }
    }
    pack_columns_chunks(scratch, len, w, pb, starts, out, stride);
}

/// Scalar twin of [`pack_columns`] (rounding included).
pub fn pack_columns_scalar(
    cols: &[&[u32]],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: RowStride,
) {
    let n = cols[0].len();
    let len = 8 * (n + 1);
    let mut r = vec![0u32; cols.len() / 8 * len];
    for (g, group) in cols.chunks(8).enumerate() {
        for (c, col) in group.iter().enumerate() {
            for (i, &h) in col.iter().enumerate() {
                r[g * len + 8 * i + c] = crate::arith::round_pow2(u64::from(h), 32, w) as u32;
            }
        }
    }
    pack_columns_chunks(&r, len, w, pb, starts, out, stride);
}

/// The chunk step of [`pack_columns`] on interleaved rounded values: group
/// g's values at `r[g·len..]`, len = 8(n + 1).
fn pack_columns_chunks(
    r: &[u32],
    len: usize,
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: RowStride,
) {
    for (k, &(i, off)) in starts.iter().enumerate() {
        let i = i as usize;
        for (g, r) in r.chunks_exact(len).enumerate() {
            for c in 0..8 {
                let v = window_chunk(r[8 * i + c], r[8 * (i + 1) + c], w, off, pb);
                out[stride.at(k) + 8 * g + c] = v;
            }
        }
    }
}

/// Forward NTT with AVX-512 or AVX2 when the selected kernel allows it
/// (see [`simd`]); returns false (untouched input) when the caller should
/// use the scalar twin. Both SIMD transforms need n ≥ 32 (the lane twiddle
/// tables of [`crate::ntt::NttTable`] exist from there on).
pub(crate) fn ntt_forward(t: &crate::ntt::NttTable, a: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && a.len() == t.n {
            match simd() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime; a.len() = n ≥ 32.
                    unsafe { ntt_avx512::forward(t, a) };
                    return true;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; a.len() = n ≥ 32.
                    unsafe { ntt_avx2::forward(t, a) };
                    return true;
                }
                Simd::None => {}
            }
        }
    }
    let _ = (t, a);
    false
}

/// Forward NTT (table `t`, one prime) of the residues of a reversed block
/// of signed 16-bit values, zero-padded in front: with n = `out.len()` =
/// t.n and pad = n − src.len(), the transform of `r[m] = 0` for m < pad and
/// `src[src.len() − 1 − (m − pad)] mod p` otherwise (H2's row blocks,
/// `Server::rows_a`: the coefficients d̂ of NCyclicMat products, App. B,
/// for one prime). A whole block (src.len() = n ≥ 32) goes through the SIMD
/// transform whose first stage reads the digits themselves (no residue
/// pass written out and read back); a ragged one, or no SIMD, through the
/// residues then [`crate::ntt::NttTable::forward`]. Scalar twin:
/// [`ntt_forward_reversed_i16_scalar`].
///
/// # Panics
/// If `out.len() != t.n` or `src` is longer than `out`.
pub fn ntt_forward_reversed_i16(t: &crate::ntt::NttTable, src: &[i16], out: &mut [u32]) {
    assert!(out.len() == t.n && src.len() <= t.n, "block length");
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && src.len() == t.n {
            match simd() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime;
                    // src.len() = out.len() = n ≥ 32.
                    unsafe { ntt_avx512::forward_reversed_i16(t, src, out) };
                    return;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; lengths as above.
                    unsafe { ntt_avx2::forward_reversed_i16(t, src, out) };
                    return;
                }
                Simd::None => {}
            }
        }
    }
    reversed_residues_one(t.m.p, src, out);
    t.forward(out);
}

/// Scalar twin of [`ntt_forward_reversed_i16`].
pub fn ntt_forward_reversed_i16_scalar(t: &crate::ntt::NttTable, src: &[i16], out: &mut [u32]) {
    assert!(out.len() == t.n && src.len() <= t.n, "block length");
    reversed_residues_one(t.m.p, src, out);
    t.forward_scalar(out);
}

/// The residues mod p of `src` reversed, zero-padded in front.
fn reversed_residues_one(p: u32, src: &[i16], out: &mut [u32]) {
    let pad = out.len() - src.len();
    out[..pad].fill(0);
    for (o, &v) in out[pad..].iter_mut().zip(src.iter().rev()) {
        // v mod p for |v| < 2^15 < p: add p to a negative value
        *o = (v as i32 as u32).wrapping_add(p & ((v >> 15) as i32 as u32));
    }
}

/// Inverse NTT with AVX-512 or AVX2 when available (see [`ntt_forward`]).
pub(crate) fn ntt_inverse(t: &crate::ntt::NttTable, a: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && a.len() == t.n {
            match simd() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime; a.len() = n ≥ 32.
                    unsafe { ntt_avx512::inverse(t, a) };
                    return true;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; a.len() = n ≥ 32.
                    unsafe { ntt_avx2::inverse(t, a) };
                    return true;
                }
                Simd::None => {}
            }
        }
    }
    let _ = (t, a);
    false
}

#[cfg(target_arch = "x86_64")]
mod ntt_avx512;

#[cfg(target_arch = "x86_64")]
mod ntt_avx2;

#[cfg(target_arch = "x86_64")]
mod digits_simd;

#[cfg(test)]
mod tests;
