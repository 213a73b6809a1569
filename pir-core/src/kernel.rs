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

#![allow(unsafe_code)]

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
            prefetch(out, k_out * 8 + OUT_PREFETCH_WORDS);
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
                    prefetch_l2(pf);
                    // SAFETY: avx512f and avx512bw were detected at
                    // runtime; `slices` keeps the tile shape asserted above.
                    unsafe { avx512::block_bw(sub, lo, hi, out) };
                }
                return;
            }
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                for (sub, lo, hi, pf) in slices(tile, q, ahead) {
                    prefetch_l2(pf);
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
    prefetch_l2(ahead);
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
mod avx2 {
    use super::SplitQuery;
    use std::arch::x86_64::*;

    /// Horizontal wrapping sum of eight i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: __m256i) -> u32 {
        let hi = _mm256_extracti128_si256(v, 1);
        let lo = _mm256_castsi256_si128(v);
        let s = _mm_add_epi32(hi, lo);
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        _mm_cvtsi128_si32(s) as u32
    }

    /// AVX2 tile kernel: two passes of 4 columns over the tile's 32-row
    /// blocks, 16 rows per step (16 ymm registers hold 8 accumulators, the
    /// two query halves and the records of one column). The second pass
    /// finds the tile and the query slice in L1. Prefetches are spread
    /// evenly over both passes, one cache line of the stream `prefetch_dist`
    /// ahead per step, so memory is busy during the second pass too; they
    /// are non-temporal (`prefetchnta`), which measured 5–10 % faster than
    /// `prefetcht0` here: the lines are read once, and the hint keeps them
    /// from displacing the tile and query slice the second pass reuses.
    ///
    /// # Safety
    /// The caller must have checked that the CPU supports AVX2; `lo` and
    /// `hi` have the same length, a multiple of 32, and `tile` holds 8 times
    /// as many bytes.
    #[target_feature(enable = "avx2")]
    pub unsafe fn block(tile: &[u8], lo: &[i16], hi: &[i16], out: &mut [u32; 8]) {
        let rows = lo.len();
        assert!(hi.len() == rows && rows.is_multiple_of(32) && tile.len() == 8 * rows);
        let base = tile.as_ptr();
        let pfd = super::prefetch_distance();
        let pf = base.wrapping_add(pfd);
        let steps = rows / 16;
        for pass in 0..2 {
            let mut acc_lo = [_mm256_setzero_si256(); 4];
            let mut acc_hi = [_mm256_setzero_si256(); 4];
            let mut i = 0;
            while i < rows {
                // SAFETY: i + 16 <= rows; the records of rows i..i+16 of
                // column 4·pass + c start at (i/32)·256 + (4·pass + c)·32 +
                // i%32, which plus 16 stays within the 8·rows-byte tile, and
                // lo/hi hold `rows` entries (asserted above). The prefetch is
                // a hint that never faults, whatever the address.
                unsafe {
                    let l = _mm256_loadu_si256(lo.as_ptr().add(i) as *const __m256i);
                    let h = _mm256_loadu_si256(hi.as_ptr().add(i) as *const __m256i);
                    let blk = base.add(i / 32 * 256 + i % 32 + pass * 128);
                    let line = pass * steps + i / 16;
                    if pfd != 0 {
                        _mm_prefetch::<_MM_HINT_NTA>(pf.wrapping_add(line * 64) as *const i8);
                    }
                    for c in 0..4 {
                        let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                            blk.add(c * 32) as *const __m128i
                        ));
                        acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                        acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                    }
                }
                i += 16;
            }
            // Σ_r (lo·d + 2^16·hi·d) per column, the four columns reduced
            // together (transposed: after the unpack levels each 128-bit
            // lane holds the four columns' partial sums) instead of eight
            // horizontal sums.
            let v: [__m256i; 4] = std::array::from_fn(|c| {
                _mm256_add_epi32(acc_lo[c], _mm256_slli_epi32::<16>(acc_hi[c]))
            });
            let t01 = _mm256_add_epi32(
                _mm256_unpacklo_epi32(v[0], v[1]),
                _mm256_unpackhi_epi32(v[0], v[1]),
            );
            let t23 = _mm256_add_epi32(
                _mm256_unpacklo_epi32(v[2], v[3]),
                _mm256_unpackhi_epi32(v[2], v[3]),
            );
            let u = _mm256_add_epi32(
                _mm256_unpacklo_epi64(t01, t23),
                _mm256_unpackhi_epi64(t01, t23),
            );
            let sums = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256::<1>(u));
            let o = &mut out[pass * 4..pass * 4 + 4];
            // SAFETY: `o` is 4 u32s, exactly one 128-bit vector.
            unsafe {
                let prev = _mm_loadu_si128(o.as_ptr() as *const __m128i);
                _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, _mm_add_epi32(prev, sums));
            }
        }
    }

    /// AVX2 kernel: four columns at a time, 16 rows per step, `pmaddwd` on
    /// sign-extended records against the lo/hi halves of c1.
    ///
    /// # Safety
    /// The caller must have checked that the CPU supports AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn columns(
        db: &[u8],
        ell1: usize,
        j0: usize,
        j1: usize,
        q: &SplitQuery,
        out: &mut [u32],
    ) {
        // SAFETY: every pointer offset below stays inside `db` (column
        // (j + c) spans [(j+c)·ell1, (j+c+1)·ell1) with j + c < j1 <= ell2 and
        // i + 16 <= n16 <= ell1) or inside q.lo / q.hi (length >= n16); the
        // loads are unaligned loads; AVX2 availability is the caller's contract.
        unsafe {
            let n16 = ell1 / 16 * 16;
            let lo = q.lo.as_ptr();
            let hi = q.hi.as_ptr();
            let mut j = j0;
            while j < j1 {
                let nc = (j1 - j).min(4);
                let mut acc_lo = [_mm256_setzero_si256(); 4];
                let mut acc_hi = [_mm256_setzero_si256(); 4];
                let base = db.as_ptr().add(j * ell1);
                let mut i = 0;
                if nc == 4 {
                    while i < n16 {
                        // SAFETY: i + 16 <= n16 <= ell1, so the 16-byte loads stay
                        // inside column j..j+4 (each ell1 bytes, in bounds because
                        // j + 4 <= j1 <= ell2), and lo/hi have ≥ n16 entries.
                        let l = _mm256_loadu_si256(lo.add(i) as *const __m256i);
                        let h = _mm256_loadu_si256(hi.add(i) as *const __m256i);
                        for c in 0..4 {
                            let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                base.add(c * ell1 + i) as *const __m128i
                            ));
                            acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                            acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                        }
                        i += 16;
                    }
                } else {
                    while i < n16 {
                        // SAFETY: as above, for the nc < 4 remaining columns.
                        let l = _mm256_loadu_si256(lo.add(i) as *const __m256i);
                        let h = _mm256_loadu_si256(hi.add(i) as *const __m256i);
                        for c in 0..nc {
                            let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                base.add(c * ell1 + i) as *const __m128i
                            ));
                            acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                            acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                        }
                        i += 16;
                    }
                }
                for c in 0..nc {
                    let mut l = hsum(acc_lo[c]);
                    let mut h = hsum(acc_hi[c]);
                    // scalar tail rows
                    let col = &db[(j + c) * ell1..(j + c + 1) * ell1];
                    for (r, &d) in col.iter().enumerate().skip(n16) {
                        let d = d as i8 as i32;
                        l = l.wrapping_add((q.lo[r] as i32 * d) as u32);
                        h = h.wrapping_add((q.hi[r] as i32 * d) as u32);
                    }
                    out[j - j0 + c] = l.wrapping_add(h << 16);
                }
                j += nc;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::SplitQuery;
    use std::arch::x86_64::*;

    /// Columns processed together: the lo/hi query loads are shared by all.
    const NC: usize = 8;

    /// The kernel body, instantiated once per feature set so that the
    /// non-VNNI variant never contains VNNI instructions.
    macro_rules! columns_body {
        ($name:ident, $features:literal, $mac:expr) => {
            /// AVX-512 kernel: NC columns at a time, 32 rows per step.
            ///
            /// # Safety
            /// The caller must have checked the CPU features in the
            /// `target_feature` attribute at runtime.
            #[target_feature(enable = $features)]
            pub unsafe fn $name(
                db: &[u8],
                ell1: usize,
                j0: usize,
                j1: usize,
                q: &SplitQuery,
                out: &mut [u32],
            ) {
                let n32 = ell1 / 32 * 32;
                let lo = q.lo.as_ptr();
                let hi = q.hi.as_ptr();
                let mut j = j0;
                while j < j1 {
                    let nc = (j1 - j).min(NC);
                    let mut acc_lo = [_mm512_setzero_si512(); NC];
                    let mut acc_hi = [_mm512_setzero_si512(); NC];
                    let base = db.as_ptr().wrapping_add(j * ell1);
                    let mut i = 0;
                    while i < n32 {
                        // SAFETY: i + 32 <= n32 <= ell1 and c < nc <= j1 - j,
                        // so each 32-byte load reads column j + c inside `db`;
                        // lo/hi hold at least n32 entries (padded to 64).
                        unsafe {
                            let l = _mm512_loadu_si512(lo.add(i) as *const __m512i);
                            let h = _mm512_loadu_si512(hi.add(i) as *const __m512i);
                            for c in 0..nc {
                                let d = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                    base.add(c * ell1 + i) as *const __m256i,
                                ));
                                acc_lo[c] = $mac(acc_lo[c], d, l);
                                acc_hi[c] = $mac(acc_hi[c], d, h);
                            }
                        }
                        i += 32;
                    }
                    for c in 0..nc {
                        let mut l = _mm512_reduce_add_epi32(acc_lo[c]) as u32;
                        let mut h = _mm512_reduce_add_epi32(acc_hi[c]) as u32;
                        let col = &db[(j + c) * ell1..(j + c + 1) * ell1];
                        for (r, &d) in col.iter().enumerate().skip(n32) {
                            let d = d as i8 as i32;
                            l = l.wrapping_add((q.lo[r] as i32 * d) as u32);
                            h = h.wrapping_add((q.hi[r] as i32 * d) as u32);
                        }
                        out[j - j0 + c] = l.wrapping_add(h << 16);
                    }
                    j += nc;
                }
            }
        };
    }

    /// Tile kernel body: the 8 columns of a tile are interleaved in 32-row
    /// blocks, so each step reads 256 contiguous bytes.
    macro_rules! block_body {
        ($name:ident, $features:literal, $mac:expr) => {
            /// AVX-512 tile kernel (8 columns × 32 rows per step), adding
            /// into `out`.
            ///
            /// # Safety
            /// The caller must have checked the CPU features in the
            /// `target_feature` attribute at runtime; `lo` and `hi` have the
            /// same length, a multiple of 32, and `tile` 8 times as many bytes.
            #[target_feature(enable = $features)]
            pub unsafe fn $name(tile: &[u8], lo: &[i16], hi: &[i16], out: &mut [u32; 8]) {
                let rows = lo.len();
                assert!(hi.len() == rows && rows.is_multiple_of(32) && tile.len() == 8 * rows);
                let base = tile.as_ptr();
                let pfd = super::prefetch_distance();
                let mut acc_lo = [_mm512_setzero_si512(); 8];
                let mut acc_hi = [_mm512_setzero_si512(); 8];
                let mut i = 0;
                while i < rows {
                    // SAFETY: i + 32 <= rows, so block i/32 spans bytes
                    // [8i, 8i + 256) of the 8·rows-byte tile, and lo/hi hold
                    // `rows` entries (asserted above).
                    unsafe {
                        let l = _mm512_loadu_si512(lo.as_ptr().add(i) as *const __m512i);
                        let h = _mm512_loadu_si512(hi.as_ptr().add(i) as *const __m512i);
                        let blk = base.add(i * 8);
                        // Software prefetch ahead of the sequential stream
                        // (4 cache lines per step); a hint, it never faults.
                        if pfd != 0 {
                            let pf = blk.wrapping_add(pfd);
                            _mm_prefetch::<_MM_HINT_T0>(pf as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64) as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128) as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(192) as *const i8);
                        }
                        for c in 0..8 {
                            let d = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                blk.add(c * 32) as *const __m256i
                            ));
                            acc_lo[c] = $mac(acc_lo[c], d, l);
                            acc_hi[c] = $mac(acc_hi[c], d, h);
                        }
                    }
                    i += 32;
                }
                for c in 0..8 {
                    let l = _mm512_reduce_add_epi32(acc_lo[c]) as u32;
                    let h = _mm512_reduce_add_epi32(acc_hi[c]) as u32;
                    out[c] = out[c].wrapping_add(l.wrapping_add(h << 16));
                }
            }
        };
    }

    /// AVX-512 VNNI tile kernel on bytes: `vpdpbusd` multiplies 4 unsigned
    /// query bytes by 4 signed records and adds the 4 products to a 32-bit
    /// lane, so one instruction covers 64 records of one query limb and no
    /// sign extension of the records is needed (the `vpdpwssd` kernel
    /// widens every record to 16 bits first, and the widening costs as
    /// much as a multiply here). With c1[r] = Σ_k 2^{8k}·u_k[r],
    /// Σ_r c1[r]·d[r] = Σ_k 2^{8k}·Σ_r u_k[r]·d[r] mod 2^32; `vpdpbusd`
    /// wraps mod 2^32 (it is the non-saturating form), so the four limb
    /// accumulators never need a reduction (YPIR §4.1: q1 = 2^32 is the
    /// machine word). A 64-byte load holds columns 2m and 2m + 1 of a
    /// 32-row block (lanes 0–7 and 8–15); the block's 32 limb bytes are
    /// broadcast to both halves. 16 accumulators + 4 limbs + 1 record
    /// vector stay in the 32 zmm registers. The cache lines of `ahead` (the
    /// batch's next run, see `panels_with`) are prefetched into L2 an equal
    /// number per step.
    ///
    /// # Safety
    /// The caller must have checked avx512f, avx512bw and avx512vnni at
    /// runtime; `tile.len()` is a multiple of 256 and `limbs` holds 128
    /// bytes per 256 bytes of tile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn block_vnni(tile: &[u8], limbs: &[u8], ahead: &[u8], out: &mut [u32; 8]) {
        let blocks = tile.len() / 256;
        let ahead_lines = ahead.len().div_ceil(64);
        let pf_per_block = ahead_lines.div_ceil(blocks.max(1));
        let ap = ahead.as_ptr();
        assert!(tile.len().is_multiple_of(256) && limbs.len() == blocks * super::LIMB_BLOCK);
        let base = tile.as_ptr();
        let pfd = super::prefetch_distance();
        let zero = _mm512_setzero_si512();
        let mut acc = [[zero; 4]; 4];
        for b in 0..blocks {
            // SAFETY: b < blocks, so bytes [256b, 256b + 256) of the tile
            // and [128b, 128b + 128) of the limbs are in bounds (asserted
            // above); 64·line < ahead.len() when line < ahead_lines, so the
            // `ahead` addresses are inside it. The prefetches are hints
            // that never fault.
            unsafe {
                let blk = base.add(b * 256);
                if pfd != 0 {
                    let pf = blk.wrapping_add(pfd);
                    _mm_prefetch::<_MM_HINT_T0>(pf as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(192) as *const i8);
                }
                for t in 0..pf_per_block {
                    let line = b * pf_per_block + t;
                    if line < ahead_lines {
                        _mm_prefetch::<_MM_HINT_T1>(ap.add(64 * line) as *const i8);
                    }
                }
                let lp = limbs.as_ptr().add(b * super::LIMB_BLOCK);
                let u: [__m512i; 4] = std::array::from_fn(|k| {
                    _mm512_broadcast_i64x4(_mm256_loadu_si256(lp.add(32 * k) as *const __m256i))
                });
                for (m, a) in acc.iter_mut().enumerate() {
                    let d = _mm512_loadu_si512(blk.add(64 * m) as *const __m512i);
                    for k in 0..4 {
                        a[k] = _mm512_dpbusd_epi32(a[k], u[k], d);
                    }
                }
            }
        }
        // Limbs combined per column pair: v[m] holds column 2m in lanes
        // 0–7 and column 2m + 1 in lanes 8–15.
        let v: [__m512i; 4] = std::array::from_fn(|m| {
            let a = &acc[m];
            _mm512_add_epi32(
                _mm512_add_epi32(a[0], _mm512_slli_epi32::<8>(a[1])),
                _mm512_add_epi32(_mm512_slli_epi32::<16>(a[2]), _mm512_slli_epi32::<24>(a[3])),
            )
        });
        // Transposed reduction: these few shuffles and adds replace eight
        // horizontal sums, which cost as much as a tenth of a tile's
        // `vpdpbusd`s (they share its vector pipes). After the two unpack
        // levels, 128-bit lane i of `u` holds [Σ v0, Σ v1, Σ v2, Σ v3] over
        // lanes 4i..4i+3; lanes 0 + 1 then belong to columns 0, 2, 4, 6 and
        // lanes 2 + 3 to columns 1, 3, 5, 7.
        let t01 = _mm512_add_epi32(
            _mm512_unpacklo_epi32(v[0], v[1]),
            _mm512_unpackhi_epi32(v[0], v[1]),
        );
        let t23 = _mm512_add_epi32(
            _mm512_unpacklo_epi32(v[2], v[3]),
            _mm512_unpackhi_epi32(v[2], v[3]),
        );
        let u = _mm512_add_epi32(
            _mm512_unpacklo_epi64(t01, t23),
            _mm512_unpackhi_epi64(t01, t23),
        );
        let w = _mm512_add_epi32(u, _mm512_shuffle_i64x2::<0b10_11_00_01>(u, u));
        let order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
        let sums = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, w));
        // SAFETY: `out` is 8 u32s, exactly one 256-bit vector.
        unsafe {
            let o = _mm256_loadu_si256(out.as_ptr() as *const __m256i);
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, _mm256_add_epi32(o, sums));
        }
    }

    block_body!(block_bw, "avx512f,avx512bw", |a, d, q| _mm512_add_epi32(
        a,
        _mm512_madd_epi16(d, q)
    ));

    columns_body!(columns_vnni, "avx512f,avx512bw,avx512vnni", |a, d, q| {
        _mm512_dpwssd_epi32(a, d, q)
    });
    columns_body!(columns_bw, "avx512f,avx512bw", |a, d, q| _mm512_add_epi32(
        a,
        _mm512_madd_epi16(d, q)
    ));
}

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
mod avx512_vnni_dp {
    use std::arch::x86_64::*;

    /// Most 32-column steps before the 32-bit accumulators could overflow:
    /// one `vpdpwssd` adds two products |x·l| ≤ 2^14·(2^10 − 1) per lane
    /// (x: signed digit |x| ≤ 2^14; limbs < 2^10), i.e. < 2^25, so 60 steps
    /// stay below 2^31 (60 · 2 · 2^14 · 1023 ≈ 2^30.9). A block has at most
    /// BLOCK_COLS / 32 = 32 steps, so a quad never needs an intermediate
    /// flush.
    pub(super) const FLUSH: usize = 60;
    const _: () = assert!(crate::digits::BLOCK_COLS / 32 <= FLUSH);

    /// Sum of the 16 i32 lanes of `v` as 8 i64 lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn widen(v: __m512i) -> __m512i {
        let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
        let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v));
        _mm512_add_epi64(lo, hi)
    }

    /// DoublePIR on one quad with `vpdpwssd`: `limbs` = (P0: bits 0–9,
    /// 10–19, 20–27; P1: same) of the block's c2 residues (< 2^28),
    /// interleaved per chunk, so Σ x·c2 = Σ x·l0 + 2^10·Σ x·l1 + 2^20·Σ x·l2
    /// per prime. Each step loads the six limb vectors once for the four
    /// rows: 24 accumulators + 6 limbs + 1 digit vector = 31 zmm registers.
    ///
    /// # Safety
    /// avx512f, avx512bw and avx512vnni must be available; `quad` holds
    /// 4·w digits in chunk order and `limbs` 6·w entries, w a multiple of
    /// 32 and at most 32·FLUSH.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut [[i64; 2]; 4]) {
        let chunks = quad.len() / 128;
        assert!(
            quad.len() == chunks * 128 && limbs.len() == chunks * 192 && chunks <= FLUSH,
            "quad shape"
        );
        if chunks == 0 {
            return;
        }
        // The loop is written in assembly: with 24 accumulators (four rows
        // × six limbs) + 6 limbs + 1 digit vector = 31 of the 32 zmm
        // registers, LLVM's allocator spills accumulators to the stack on
        // every step (even with named variables, and even for two rows),
        // and the pass ran at half speed.
        let z = _mm512_setzero_si512();
        let (mut a00, mut a01, mut a02, mut a03, mut a04, mut a05) = (z, z, z, z, z, z);
        let (mut a10, mut a11, mut a12, mut a13, mut a14, mut a15) = (z, z, z, z, z, z);
        let (mut a20, mut a21, mut a22, mut a23, mut a24, mut a25) = (z, z, z, z, z, z);
        let (mut a30, mut a31, mut a32, mut a33, mut a34, mut a35) = (z, z, z, z, z, z);
        // SAFETY: the loop runs `chunks` ≥ 1 times; iteration c reads the
        // 384 bytes at limbs + 384c (limb t of chunk c at 64t) and the 256
        // bytes at quad + 256c (row i at 64i), all inside the slices
        // (asserted above). It writes only its register operands, touches
        // no stack and leaves the flags clobbered (declared by default).
        unsafe {
            std::arch::asm!(
                "2:",
                "vmovdqu64 zmm0, [{lp}]",
                "vmovdqu64 zmm1, [{lp} + 64]",
                "vmovdqu64 zmm2, [{lp} + 128]",
                "vmovdqu64 zmm3, [{lp} + 192]",
                "vmovdqu64 zmm4, [{lp} + 256]",
                "vmovdqu64 zmm5, [{lp} + 320]",
                "vmovdqu64 zmm6, [{xp}]",
                "vpdpwssd zmm7, zmm6, zmm0",
                "vpdpwssd zmm8, zmm6, zmm1",
                "vpdpwssd zmm9, zmm6, zmm2",
                "vpdpwssd zmm10, zmm6, zmm3",
                "vpdpwssd zmm11, zmm6, zmm4",
                "vpdpwssd zmm12, zmm6, zmm5",
                "vmovdqu64 zmm6, [{xp} + 64]",
                "vpdpwssd zmm13, zmm6, zmm0",
                "vpdpwssd zmm14, zmm6, zmm1",
                "vpdpwssd zmm15, zmm6, zmm2",
                "vpdpwssd zmm16, zmm6, zmm3",
                "vpdpwssd zmm17, zmm6, zmm4",
                "vpdpwssd zmm18, zmm6, zmm5",
                "vmovdqu64 zmm6, [{xp} + 128]",
                "vpdpwssd zmm19, zmm6, zmm0",
                "vpdpwssd zmm20, zmm6, zmm1",
                "vpdpwssd zmm21, zmm6, zmm2",
                "vpdpwssd zmm22, zmm6, zmm3",
                "vpdpwssd zmm23, zmm6, zmm4",
                "vpdpwssd zmm24, zmm6, zmm5",
                "vmovdqu64 zmm6, [{xp} + 192]",
                "vpdpwssd zmm25, zmm6, zmm0",
                "vpdpwssd zmm26, zmm6, zmm1",
                "vpdpwssd zmm27, zmm6, zmm2",
                "vpdpwssd zmm28, zmm6, zmm3",
                "vpdpwssd zmm29, zmm6, zmm4",
                "vpdpwssd zmm30, zmm6, zmm5",
                "add {lp}, 384",
                "add {xp}, 256",
                "dec {n}",
                "jnz 2b",
                lp = inout(reg) limbs.as_ptr() => _,
                xp = inout(reg) quad.as_ptr() => _,
                n = inout(reg) chunks => _,
                out("zmm0") _,
                out("zmm1") _,
                out("zmm2") _,
                out("zmm3") _,
                out("zmm4") _,
                out("zmm5") _,
                out("zmm6") _,
                inout("zmm7") a00,
                inout("zmm8") a01,
                inout("zmm9") a02,
                inout("zmm10") a03,
                inout("zmm11") a04,
                inout("zmm12") a05,
                inout("zmm13") a10,
                inout("zmm14") a11,
                inout("zmm15") a12,
                inout("zmm16") a13,
                inout("zmm17") a14,
                inout("zmm18") a15,
                inout("zmm19") a20,
                inout("zmm20") a21,
                inout("zmm21") a22,
                inout("zmm22") a23,
                inout("zmm23") a24,
                inout("zmm24") a25,
                inout("zmm25") a30,
                inout("zmm26") a31,
                inout("zmm27") a32,
                inout("zmm28") a33,
                inout("zmm29") a34,
                inout("zmm30") a35,
                options(nostack, readonly),
            );
        }
        let a = [
            [a00, a01, a02, a03, a04, a05],
            [a10, a11, a12, a13, a14, a15],
            [a20, a21, a22, a23, a24, a25],
            [a30, a31, a32, a33, a34, a35],
        ];
        // x[2i + h]: row i, prime h, limbs combined in 8 i64 lanes.
        let x: [__m512i; 8] = std::array::from_fn(|k| {
            let (ai, h) = (&a[k / 2], k % 2);
            _mm512_add_epi64(
                widen(ai[3 * h]),
                _mm512_add_epi64(
                    _mm512_slli_epi64::<10>(widen(ai[3 * h + 1])),
                    _mm512_slli_epi64::<20>(widen(ai[3 * h + 2])),
                ),
            )
        });
        // Transposed reduction of the eight vectors to their eight lane
        // sums, in the order of `acc` (row-major [row][prime]): fewer
        // shuffles than eight horizontal sums, which share the vector pipes
        // with the next quad's `vpdpwssd`s. 128-bit lane j of p[m] holds
        // [x[2m], x[2m + 1]] summed over lanes 2j, 2j + 1; each
        // shuffle-and-add level then adds 128-bit lanes in pairs.
        let p: [__m512i; 4] = std::array::from_fn(|m| {
            let (e, o) = (x[2 * m], x[2 * m + 1]);
            _mm512_add_epi64(_mm512_unpacklo_epi64(e, o), _mm512_unpackhi_epi64(e, o))
        });
        let pairs = |a: __m512i, b: __m512i| {
            _mm512_add_epi64(
                _mm512_shuffle_i64x2::<0b10_00_10_00>(a, b),
                _mm512_shuffle_i64x2::<0b11_01_11_01>(a, b),
            )
        };
        let sums = pairs(pairs(p[0], p[1]), pairs(p[2], p[3]));
        let flat = acc.as_mut_ptr() as *mut __m512i;
        // SAFETY: `acc` is 4 × 2 i64, exactly one 512-bit vector.
        unsafe { _mm512_storeu_si512(flat, _mm512_add_epi64(_mm512_loadu_si512(flat), sums)) };
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_dp {
    use std::arch::x86_64::*;

    // The same bound as for `vpdpwssd`: `vpmaddwd` adds the same two
    // products per lane.
    use super::avx512_vnni_dp::FLUSH;

    /// Sum of the 4 i64 lanes of the widened i32 lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn widen(v: __m256i) -> __m256i {
        let lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
        let hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(v));
        _mm256_add_epi64(lo, hi)
    }

    /// DoublePIR on one quad with `vpmaddwd`, the AVX2 twin of
    /// `avx512_vnni_dp::quad_limbs` on the same limbs: per row and prime
    /// Σ x·c2 = Σ x·l0 + 2^10·Σ x·l1 + 2^20·Σ x·l2. Two rows at a time:
    /// 12 accumulators + 2 digit vectors + 1 limb vector = 15 of the 16
    /// ymm registers; the quad's second row pair re-reads the block's limbs
    /// from L1. Six `vpmaddwd` + six adds per 16 digits and row; the
    /// `vpmuldq` kernel on 64-bit residue lanes it replaced needed four sign
    /// extensions, eight multiplies and eight adds.
    ///
    /// # Safety
    /// avx2 must be available; `quad` holds 4·w digits in chunk order and
    /// `limbs` 6·w entries, w a multiple of 32 and at most 32·FLUSH.
    #[target_feature(enable = "avx2")]
    pub unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut [[i64; 2]; 4]) {
        let chunks = quad.len() / 128;
        assert!(
            quad.len() == chunks * 128 && limbs.len() == chunks * 192 && chunks <= FLUSH,
            "quad shape"
        );
        for pair in 0..2 {
            let mut a = [[_mm256_setzero_si256(); 6]; 2];
            for c in 0..chunks {
                for half in 0..2 {
                    // SAFETY: c < chunks; row 2·pair + i of chunk c is at
                    // c·128 + 32·(2·pair + i), limb t at c·192 + 32·t, and
                    // the 16 entries from + 16·half stay inside (asserted).
                    unsafe {
                        let xp = quad.as_ptr().add(c * 128 + 64 * pair + 16 * half);
                        let x0 = _mm256_loadu_si256(xp as *const __m256i);
                        let x1 = _mm256_loadu_si256(xp.add(32) as *const __m256i);
                        let lp = limbs.as_ptr().add(c * 192 + 16 * half);
                        for t in 0..6 {
                            let l = _mm256_loadu_si256(lp.add(32 * t) as *const __m256i);
                            a[0][t] = _mm256_add_epi32(a[0][t], _mm256_madd_epi16(x0, l));
                            a[1][t] = _mm256_add_epi32(a[1][t], _mm256_madd_epi16(x1, l));
                        }
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for h in 0..2 {
                    let s = _mm256_add_epi64(
                        widen(ai[3 * h]),
                        _mm256_add_epi64(
                            _mm256_slli_epi64::<10>(widen(ai[3 * h + 1])),
                            _mm256_slli_epi64::<20>(widen(ai[3 * h + 2])),
                        ),
                    );
                    let mut lanes = [0i64; 4];
                    // SAFETY: storing 32 bytes into a 4 × i64 array.
                    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, s) };
                    acc[2 * pair + i][h] += lanes.iter().sum::<i64>();
                }
            }
        }
    }
}

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

/// Residues of a reversed block of signed 16-bit values (a hint or T row
/// chunk, the coefficients d̂ of NCyclicMat products, App. B): with
/// `d = out.len()/2` and `pad = d − src.len()`, `out[h·d + m] = 0` for
/// m < pad and `src[src.len() − 1 − (m − pad)] mod P_h` otherwise, in
/// [0, P_h). Runtime-dispatched; [`reversed_residues_i16_scalar`] is the twin.
pub fn reversed_residues_i16(src: &[i16], out: &mut [u32]) {
    let d = out.len() / 2;
    assert!(out.len() == 2 * d && src.len() <= d);
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f/avx512bw detected; lengths asserted above.
                unsafe { digits_simd::reversed512(src, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; lengths asserted above.
                unsafe { digits_simd::reversed256(src, out) };
                return;
            }
            Simd::None => {}
        }
    }
    reversed_residues_i16_scalar(src, out, 0);
}

/// Scalar twin of [`reversed_residues_i16`] for output slots `from..d`.
pub fn reversed_residues_i16_scalar(src: &[i16], out: &mut [u32], from: usize) {
    use crate::arith::{small_residue, MODS};
    let d = out.len() / 2;
    let (len, pad) = (src.len(), d - src.len());
    for m in from..d {
        let (r0, r1) = if m < pad {
            (0, 0)
        } else {
            let v = src[len - 1 - (m - pad)] as i64;
            (small_residue(&MODS[0], v), small_residue(&MODS[1], v))
        };
        out[m] = r0;
        out[d + m] = r1;
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
mod avx512_ks {
    use super::Mont;
    use std::arch::x86_64::*;

    /// Prefetch distance (words) of the digit stream for t rows of
    /// `stride` words; shared with the AVX2 kernel. The packing tree's
    /// cached digits are laid out node after node in the order the online
    /// pass visits them (t·stride words per node), so the same row of the
    /// node [`super::KS_NODES_AHEAD`] ahead is where this stream will be
    /// then. The hint is `prefetcht1` (into L2): with `prefetcht0` 2 KiB
    /// ahead (sessions 3–6), 2,000 key switches over 94 MB of digits
    /// streamed at 14 GB/s (6.4–6.7 ms, against 3.3 ms with the digits in
    /// cache); into L2 three nodes ahead, 3.8–4.1 ms (min of 3 runs each,
    /// four alternating rounds, Zen 4). `PIR_KSPF=<words>` overrides it.
    pub(super) fn ks_prefetch(t: usize, stride: usize) -> usize {
        static D: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        D.get_or_init(|| std::env::var("PIR_KSPF").ok().and_then(|v| v.parse().ok()))
            .unwrap_or(super::KS_NODES_AHEAD * t * stride)
    }

    /// REDC of eight 64-bit lanes (values < p·2^32) to [0, p).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn redc(x: __m512i, p: __m512i, pinv: __m512i) -> __m512i {
        let m = _mm512_mul_epu32(x, pinv); // low 32 bits of x times −p^{-1}
        let t = _mm512_srli_epi64(_mm512_add_epi64(x, _mm512_mul_epu32(m, p)), 32);
        _mm512_min_epu64(t, _mm512_sub_epi64(t, p))
    }

    /// `src[perm[i..i+16]]`: with `within16`, one aligned block load and
    /// `vpermd` (which reads the low 4 bits of each index: the lane inside
    /// the source block), otherwise a gather.
    ///
    /// # Safety
    /// avx512f must be available; i + 16 ≤ perm.len(); every index in
    /// perm[i..i+16] is < src.len(); with `within16` they all lie in the
    /// aligned 16-slot block of perm[i] and src.len() is a multiple of 16.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn slots16(src: &[u32], perm: &[u32], i: usize, within16: bool) -> __m512i {
        // SAFETY: the caller's bounds above.
        unsafe {
            let idx = _mm512_loadu_si512(perm.as_ptr().add(i) as *const __m512i);
            if within16 {
                let b = *perm.get_unchecked(i) as usize / 16 * 16;
                _mm512_permutexvar_epi32(
                    idx,
                    _mm512_loadu_si512(src.as_ptr().add(b) as *const __m512i),
                )
            } else {
                _mm512_i32gather_epi32::<4>(idx, src.as_ptr() as *const i32)
            }
        }
    }

    /// 16 slots per step: even lanes with `vpmuludq` directly, odd lanes
    /// after a 32-bit shift; both REDC'd and re-interleaved.
    ///
    /// # Safety
    /// avx512f and avx512bw must be available; the slices must hold
    /// (t−1)·stride + n words and `out` n words.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn keyswitch_acc(
        m: &Mont,
        w: &[u32],
        g: &[u32],
        t: usize,
        stride: usize,
        n: usize,
        out: &mut [u32],
    ) {
        let n16 = n / 16 * 16;
        let p = _mm512_set1_epi64(m.p as i64);
        let pinv = _mm512_set1_epi64(m.pinv_neg as i64);
        let p32 = _mm512_set1_epi32(m.p as i32);
        let pf = ks_prefetch(t, stride);
        let mut i = 0;
        while i < n16 {
            // SAFETY: i + 16 <= n16 <= n; every row k < t of w and g has n
            // words starting at k·stride, and out has n words.
            unsafe {
                let mut even = _mm512_setzero_si512();
                let mut odd = _mm512_setzero_si512();
                for k in 0..t {
                    // the digits stream from memory: prefetch ahead into L2
                    // (a hint, it never faults)
                    _mm_prefetch::<_MM_HINT_T1>(
                        g.as_ptr().wrapping_add(k * stride + i + pf) as *const i8
                    );
                    let a = _mm512_loadu_si512(w.as_ptr().add(k * stride + i) as *const __m512i);
                    let b = _mm512_loadu_si512(g.as_ptr().add(k * stride + i) as *const __m512i);
                    even = _mm512_add_epi64(even, _mm512_mul_epu32(a, b));
                    odd = _mm512_add_epi64(
                        odd,
                        _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32)),
                    );
                }
                let re = redc(even, p, pinv);
                let ro = redc(odd, p, pinv);
                let r = _mm512_or_si512(re, _mm512_slli_epi64(ro, 32));
                let o = _mm512_loadu_si512(out.as_ptr().add(i) as *const __m512i);
                let s = _mm512_add_epi32(o, r);
                let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p32));
                _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, s);
            }
            i += 16;
        }
        super::keyswitch_acc_scalar(m, w, g, t, stride, n16, n, out);
    }

    /// # Safety
    /// avx512f and avx512bw must be available; all slices have e.len() words.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn plus_minus(
        m: &Mont,
        e: &[u32],
        o: &[u32],
        mono: &[u32],
        plus: &mut [u32],
        minus: &mut [u32],
    ) {
        let n = e.len();
        let n16 = n / 16 * 16;
        let p = _mm512_set1_epi64(m.p as i64);
        let pinv = _mm512_set1_epi64(m.pinv_neg as i64);
        let p32 = _mm512_set1_epi32(m.p as i32);
        let mut i = 0;
        while i < n16 {
            // SAFETY: i + 16 <= n16 <= n = length of every slice.
            unsafe {
                let ov = _mm512_loadu_si512(o.as_ptr().add(i) as *const __m512i);
                let mv = _mm512_loadu_si512(mono.as_ptr().add(i) as *const __m512i);
                let even = redc(_mm512_mul_epu32(ov, mv), p, pinv);
                let odd = redc(
                    _mm512_mul_epu32(_mm512_srli_epi64(ov, 32), _mm512_srli_epi64(mv, 32)),
                    p,
                    pinv,
                );
                let xo = _mm512_or_si512(even, _mm512_slli_epi64(odd, 32));
                let ev = _mm512_loadu_si512(e.as_ptr().add(i) as *const __m512i);
                let s = _mm512_add_epi32(ev, xo);
                let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p32));
                let d = _mm512_sub_epi32(_mm512_add_epi32(ev, p32), xo);
                let d = _mm512_min_epu32(d, _mm512_sub_epi32(d, p32));
                _mm512_storeu_si512(plus.as_mut_ptr().add(i) as *mut __m512i, s);
                _mm512_storeu_si512(minus.as_mut_ptr().add(i) as *mut __m512i, d);
            }
            i += 16;
        }
        super::plus_minus_scalar(m, e, o, mono, plus, minus, n16, n);
    }

    /// # Safety
    /// avx512f must be available; every perm[i] < minus.len(); plus, perm
    /// and out have the same length.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn add_permuted(
        p: u32,
        plus: &[u32],
        minus: &[u32],
        perm: &[u32],
        within16: bool,
        out: &mut [u32],
    ) {
        let n = plus.len();
        let n16 = n / 16 * 16;
        let p32 = _mm512_set1_epi32(p as i32);
        let mut i = 0;
        while i < n16 {
            // SAFETY: i + 16 <= n16 <= n; gathered indices are < minus.len()
            // (checked by the caller); with `within16` (SlotPerm checked it)
            // the block perm[i]/16·16 .. +16 lies inside minus (n is a
            // multiple of 16) and holds every index of this output block.
            unsafe {
                let g = slots16(minus, perm, i, within16);
                let a = _mm512_loadu_si512(plus.as_ptr().add(i) as *const __m512i);
                let s = _mm512_add_epi32(a, g);
                let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p32));
                _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, s);
            }
            i += 16;
        }
        super::add_permuted_scalar(p, plus, minus, perm, out, n16);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_ks {
    //! AVX2 twins of `avx512_ks` (the online packing of YPIR §4.2): 8 slots
    //! per step, 32×32→64 products on the even and odd lanes with
    //! `vpmuludq`.
    use super::Mont;
    use std::arch::x86_64::*;

    /// x − m if x ≥ m (unsigned 32-bit lanes).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn csub(x: __m256i, m: __m256i) -> __m256i {
        _mm256_min_epu32(x, _mm256_sub_epi32(x, m))
    }

    /// `src[perm[i..i+8]]`: with `within8`, one aligned block load and
    /// `vpermd` (low 3 bits of each index), otherwise a gather.
    ///
    /// # Safety
    /// avx2 must be available; as `avx512_ks::slots16` with blocks of 8.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn slots8(src: &[u32], perm: &[u32], i: usize, within8: bool) -> __m256i {
        // SAFETY: the caller's bounds above.
        unsafe {
            let idx = _mm256_loadu_si256(perm.as_ptr().add(i) as *const __m256i);
            if within8 {
                let b = *perm.get_unchecked(i) as usize / 8 * 8;
                _mm256_permutevar8x32_epi32(
                    _mm256_loadu_si256(src.as_ptr().add(b) as *const __m256i),
                    idx,
                )
            } else {
                _mm256_i32gather_epi32::<4>(src.as_ptr() as *const i32, idx)
            }
        }
    }

    /// REDC of two vectors of four 64-bit lanes (values < p·2^32): `even`
    /// holds the sums of slots 0, 2, 4, 6 and `odd` those of 1, 3, 5, 7;
    /// returns the eight results in [0, p) as 32-bit lanes in slot order.
    /// x + m·p has the result in its high half, which is already the odd
    /// slot's position.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn redc2(even: __m256i, odd: __m256i, p: __m256i, pinv: __m256i) -> __m256i {
        let te = _mm256_add_epi64(even, _mm256_mul_epu32(_mm256_mul_epu32(even, pinv), p));
        let to = _mm256_add_epi64(odd, _mm256_mul_epu32(_mm256_mul_epu32(odd, pinv), p));
        csub(_mm256_blend_epi32::<0xAA>(_mm256_srli_epi64(te, 32), to), p)
    }

    /// # Safety
    /// avx2 must be available; the slices must hold (t−1)·stride + n words
    /// and `out` n words.
    #[target_feature(enable = "avx2")]
    pub unsafe fn keyswitch_acc(
        m: &Mont,
        w: &[u32],
        g: &[u32],
        t: usize,
        stride: usize,
        n: usize,
        out: &mut [u32],
    ) {
        let n8 = n / 8 * 8;
        let p = _mm256_set1_epi32(m.p as i32);
        let pinv = _mm256_set1_epi32(m.pinv_neg as i32);
        let pf = super::avx512_ks::ks_prefetch(t, stride);
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 <= n8 <= n; every row k < t of w and g has n
            // words starting at k·stride, and out has n words.
            unsafe {
                let mut even = _mm256_setzero_si256();
                let mut odd = _mm256_setzero_si256();
                for k in 0..t {
                    // the digits stream from memory: prefetch ahead into L2
                    // (a hint, it never faults)
                    _mm_prefetch::<_MM_HINT_T1>(
                        g.as_ptr().wrapping_add(k * stride + i + pf) as *const i8
                    );
                    let a = _mm256_loadu_si256(w.as_ptr().add(k * stride + i) as *const __m256i);
                    let b = _mm256_loadu_si256(g.as_ptr().add(k * stride + i) as *const __m256i);
                    even = _mm256_add_epi64(even, _mm256_mul_epu32(a, b));
                    odd = _mm256_add_epi64(
                        odd,
                        _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32)),
                    );
                }
                let r = redc2(even, odd, p, pinv);
                let o = _mm256_loadu_si256(out.as_ptr().add(i) as *const __m256i);
                let s = csub(_mm256_add_epi32(o, r), p);
                _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, s);
            }
            i += 8;
        }
        super::keyswitch_acc_scalar(m, w, g, t, stride, n8, n, out);
    }

    /// # Safety
    /// avx2 must be available; all slices have e.len() words.
    #[target_feature(enable = "avx2")]
    pub unsafe fn plus_minus(
        m: &Mont,
        e: &[u32],
        o: &[u32],
        mono: &[u32],
        plus: &mut [u32],
        minus: &mut [u32],
    ) {
        let n = e.len();
        let n8 = n / 8 * 8;
        let p = _mm256_set1_epi32(m.p as i32);
        let pinv = _mm256_set1_epi32(m.pinv_neg as i32);
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 <= n8 <= n = length of every slice.
            unsafe {
                let ov = _mm256_loadu_si256(o.as_ptr().add(i) as *const __m256i);
                let mv = _mm256_loadu_si256(mono.as_ptr().add(i) as *const __m256i);
                let even = _mm256_mul_epu32(ov, mv);
                let odd = _mm256_mul_epu32(_mm256_srli_epi64(ov, 32), _mm256_srli_epi64(mv, 32));
                let xo = redc2(even, odd, p, pinv);
                let ev = _mm256_loadu_si256(e.as_ptr().add(i) as *const __m256i);
                let s = csub(_mm256_add_epi32(ev, xo), p);
                let d = csub(_mm256_sub_epi32(_mm256_add_epi32(ev, p), xo), p);
                _mm256_storeu_si256(plus.as_mut_ptr().add(i) as *mut __m256i, s);
                _mm256_storeu_si256(minus.as_mut_ptr().add(i) as *mut __m256i, d);
            }
            i += 8;
        }
        super::plus_minus_scalar(m, e, o, mono, plus, minus, n8, n);
    }

    /// # Safety
    /// avx2 must be available; every perm[i] < minus.len(); plus, perm and
    /// out have the same length; `within8` only if every aligned block of 8
    /// outputs reads one aligned block of 8 inputs and n is a multiple of 8.
    #[target_feature(enable = "avx2")]
    pub unsafe fn add_permuted(
        p: u32,
        plus: &[u32],
        minus: &[u32],
        perm: &[u32],
        within8: bool,
        out: &mut [u32],
    ) {
        let n = plus.len();
        let n8 = n / 8 * 8;
        let p32 = _mm256_set1_epi32(p as i32);
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 <= n8 <= n; gathered indices are < minus.len()
            // (checked by the caller); with `within8` the block
            // perm[i]/8·8 .. +8 lies inside minus and holds every index of
            // this output block.
            unsafe {
                let g = slots8(minus, perm, i, within8);
                let a = _mm256_loadu_si256(plus.as_ptr().add(i) as *const __m256i);
                let s = csub(_mm256_add_epi32(a, g), p32);
                _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, s);
            }
            i += 8;
        }
        super::add_permuted_scalar(p, plus, minus, perm, out, n8);
    }
}

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

#[cfg(target_arch = "x86_64")]
mod rns_simd {
    use std::arch::x86_64::*;

    /// 8 slots per step as two 4 × u64 halves.
    ///
    /// # Safety
    /// avx2 must be available; a and b hold ≥ acc.len() words.
    #[target_feature(enable = "avx2")]
    pub unsafe fn mul_acc_lazy_avx2(a: &[u32], b: &[u32], acc: &mut [u64]) {
        let n8 = acc.len() / 8 * 8;
        let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), acc.as_mut_ptr());
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 <= n8 <= acc.len() <= a.len(), b.len().
            unsafe {
                for h in [0, 4] {
                    let x = _mm256_cvtepu32_epi64(_mm_loadu_si128(pa.add(i + h) as *const __m128i));
                    let y = _mm256_cvtepu32_epi64(_mm_loadu_si128(pb.add(i + h) as *const __m128i));
                    let c = _mm256_loadu_si256(pc.add(i + h) as *const __m256i);
                    let s = _mm256_add_epi64(c, _mm256_mul_epu32(x, y));
                    _mm256_storeu_si256(pc.add(i + h) as *mut __m256i, s);
                }
            }
            i += 8;
        }
        super::mul_acc_lazy_scalar(a, b, acc, n8);
    }

    /// 16 slots per step as two 8 × u64 halves.
    ///
    /// # Safety
    /// avx512f must be available; a and b hold ≥ acc.len() words.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn mul_acc_lazy_avx512(a: &[u32], b: &[u32], acc: &mut [u64]) {
        let n16 = acc.len() / 16 * 16;
        let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), acc.as_mut_ptr());
        let mut i = 0;
        while i < n16 {
            // SAFETY: i + 16 <= n16 <= acc.len() <= a.len(), b.len().
            unsafe {
                for h in [0, 8] {
                    let x =
                        _mm512_cvtepu32_epi64(_mm256_loadu_si256(pa.add(i + h) as *const __m256i));
                    let y =
                        _mm512_cvtepu32_epi64(_mm256_loadu_si256(pb.add(i + h) as *const __m256i));
                    let c = _mm512_loadu_si512(pc.add(i + h) as *const __m512i);
                    let s = _mm512_add_epi64(c, _mm512_mul_epu32(x, y));
                    _mm512_storeu_si512(pc.add(i + h) as *mut __m512i, s);
                }
            }
            i += 16;
        }
        super::mul_acc_lazy_scalar(a, b, acc, n16);
    }
}

/// Large read-mostly buffers (the database, the hint rows) are scanned once
/// per answer; with 4 KiB pages a 1 GiB scan crosses 262,144 pages, each a
/// TLB miss that the hardware prefetcher cannot run ahead of. Below this
/// size huge pages do not matter.
const HUGE_PAGE_MIN: usize = 4 << 20;
/// Transparent huge page size on x86-64 and aarch64 Linux.
const HUGE_PAGE: usize = 2 << 20;

/// How the operating system was asked to back a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageAdvice {
    /// Not attempted (small buffer, or not Linux).
    Skipped,
    /// The kernel accepted the request.
    Accepted,
    /// The kernel refused (e.g. THP disabled, or an old kernel without
    /// `MADV_COLLAPSE`); the buffer works as before, with 4 KiB pages.
    Refused,
}

/// The 2 MiB-aligned interior of `buf` as (address, length), if any.
/// `PIR_HUGE_PAGES=0` turns the advice off (for A/B benchmarks).
fn huge_range<T>(buf: &mut [T]) -> Option<(usize, usize)> {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *ON.get_or_init(|| std::env::var("PIR_HUGE_PAGES").map_or(true, |v| v != "0"));
    let bytes = std::mem::size_of_val(buf);
    if !on || bytes < HUGE_PAGE_MIN {
        return None;
    }
    let p = buf.as_mut_ptr() as usize;
    let start = p.checked_add(HUGE_PAGE - 1)? & !(HUGE_PAGE - 1);
    let end = (p + bytes) & !(HUGE_PAGE - 1);
    (end > start).then_some((start, end - start))
}

#[cfg(target_os = "linux")]
fn madvise(range: (usize, usize), advice: libc::c_int) -> PageAdvice {
    // SAFETY: `range` lies inside a live allocation we hold a unique borrow
    // of (`huge_range`), aligned to 2 MiB. MADV_HUGEPAGE and MADV_COLLAPSE are
    // hints about backing only: they never change the contents or the
    // validity of the mapping (a collapse copies the data into a huge page
    // and remaps it atomically), so no Rust-visible memory changes.
    let r = unsafe { libc::madvise(range.0 as *mut libc::c_void, range.1, advice) };
    if r == 0 {
        PageAdvice::Accepted
    } else {
        PageAdvice::Refused
    }
}

/// Asks for transparent huge pages for the pages of `buf` that are not yet
/// touched: call it right after allocating a zeroed buffer and before
/// writing it (`MADV_HUGEPAGE`). A hint; no-op off Linux.
pub fn advise_huge_pages<T>(buf: &mut [T]) -> PageAdvice {
    match huge_range(buf) {
        #[cfg(target_os = "linux")]
        Some(r) => madvise(r, libc::MADV_HUGEPAGE),
        _ => PageAdvice::Skipped,
    }
}

/// Moves an already written buffer onto huge pages now (`MADV_HUGEPAGE`
/// then `MADV_COLLAPSE`, Linux ≥ 6.1): a copy of the buffer, 2 MiB at a
/// time, so no second buffer is ever allocated. Pages already huge are
/// left alone. A hint; no-op off Linux.
pub fn collapse_huge_pages<T>(buf: &mut [T]) -> PageAdvice {
    match huge_range(buf) {
        #[cfg(target_os = "linux")]
        Some(r) => {
            madvise(r, libc::MADV_HUGEPAGE);
            madvise(r, libc::MADV_COLLAPSE)
        }
        _ => PageAdvice::Skipped,
    }
}

/// A zeroed vector of `len` integers whose pages are advised to be huge
/// before they are first touched (see [`advise_huge_pages`]).
pub fn zeroed_huge<T: Copy + Default>(len: usize) -> Vec<T> {
    // `vec![0; n]` of an integer type is a zeroed allocation: for large n,
    // fresh untouched pages, so the advice applies when they are first
    // written.
    let mut v = vec![T::default(); len];
    advise_huge_pages(&mut v);
    v
}

/// Prefetch hint for `data[index]` (no effect if out of range or on other
/// architectures; never faults).
#[inline]
pub fn prefetch<T>(data: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if index < data.len() {
            // SAFETY: prefetch is a hint that cannot fault; the address is
            // inside `data` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    data.as_ptr().add(index) as *const i8,
                )
            };
        }
    }
    let _ = (data, index);
}

/// Prefetch hints into L2 for every cache line of `data` (no effect on other
/// architectures; never faults).
#[inline]
fn prefetch_l2(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        for at in (0..data.len()).step_by(64) {
            // SAFETY: prefetch is a hint that cannot fault; the address is
            // inside `data` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    data.as_ptr().add(at) as *const i8,
                )
            };
        }
    }
    let _ = data;
}

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
mod runs_simd {
    use std::arch::x86_64::*;

    /// 16-lane twin of [`super::add_scaled_runs`].
    ///
    /// # Safety
    /// avx512f must be available; `g.len() ≥ o + col.len()` for every term.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn runs512(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
        let n16 = col.len() / 16 * 16;
        let mut k = 0;
        while k < n16 {
            // SAFETY: k + 16 ≤ n16 ≤ col.len(), and each run o.. has ≥
            // col.len() elements, so every 16-lane load and the store stay
            // inside `g` and `col`.
            unsafe {
                let mut acc = _mm512_loadu_si512(col.as_ptr().add(k) as *const __m512i);
                for &(d, o) in terms {
                    let x = _mm512_loadu_si512(g.as_ptr().add(o + k) as *const __m512i);
                    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(d as i32), x));
                }
                _mm512_storeu_si512(col.as_mut_ptr().add(k) as *mut __m512i, acc);
            }
            k += 16;
        }
        super::add_scaled_runs_scalar(col, terms, g, n16);
    }

    /// 8-lane twin of [`super::add_scaled_runs`].
    ///
    /// # Safety
    /// avx2 must be available; `g.len() ≥ o + col.len()` for every term.
    #[target_feature(enable = "avx2")]
    pub unsafe fn runs256(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
        let n8 = col.len() / 8 * 8;
        let mut k = 0;
        while k < n8 {
            // SAFETY: as in runs512, with 8 lanes.
            unsafe {
                let mut acc = _mm256_loadu_si256(col.as_ptr().add(k) as *const __m256i);
                for &(d, o) in terms {
                    let x = _mm256_loadu_si256(g.as_ptr().add(o + k) as *const __m256i);
                    acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_set1_epi32(d as i32), x));
                }
                _mm256_storeu_si256(col.as_mut_ptr().add(k) as *mut __m256i, acc);
            }
            k += 8;
        }
        super::add_scaled_runs_scalar(col, terms, g, n8);
    }
}

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
mod pack_simd {
    use super::PackGroup;
    use std::arch::x86_64::*;

    /// Rounding and interleaving step of [`super::pack_columns8`] for the
    /// first n/8·8 values: eight values of each column are rounded
    /// (`(h + 2^{31−w}) ≫ (32 − w)`) and transposed as an 8×8 block, so
    /// value i of column c lands at `scratch[8i + c]` with 8-word stores.
    /// Returns the number of values done (the caller rounds the rest).
    ///
    /// # Safety
    /// avx2 must be available; every column has n values, `scratch` has at
    /// least 8n words and 1 ≤ w < 32.
    #[target_feature(enable = "avx2")]
    pub unsafe fn interleave_round8(cols: [&[u32]; 8], w: u32, scratch: &mut [u32]) -> usize {
        let n = cols[0].len();
        assert!(cols.iter().all(|c| c.len() == n) && scratch.len() >= 8 * n);
        let n8 = n / 8 * 8;
        let half = _mm256_set1_epi32((1u32 << (31 - w)) as i32);
        let shift = _mm_cvtsi32_si128((32 - w) as i32);
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 ≤ n8 ≤ n: each load reads cols[c][i..i+8]; the
            // stores write scratch[8i..8i+64] ⊆ scratch[..8n].
            unsafe {
                let r: [__m256i; 8] = std::array::from_fn(|c| {
                    let v = _mm256_loadu_si256(cols[c].as_ptr().add(i) as *const __m256i);
                    _mm256_srl_epi32(_mm256_add_epi32(v, half), shift)
                });
                // 8×8 transpose: 32-bit, 64-bit, then 128-bit interleaves
                let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
                let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
                let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
                let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
                let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
                let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
                let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
                let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
                let u0 = _mm256_unpacklo_epi64(t0, t2);
                let u1 = _mm256_unpackhi_epi64(t0, t2);
                let u2 = _mm256_unpacklo_epi64(t1, t3);
                let u3 = _mm256_unpackhi_epi64(t1, t3);
                let u4 = _mm256_unpacklo_epi64(t4, t6);
                let u5 = _mm256_unpackhi_epi64(t4, t6);
                let u6 = _mm256_unpacklo_epi64(t5, t7);
                let u7 = _mm256_unpackhi_epi64(t5, t7);
                let o = scratch.as_mut_ptr().add(8 * i) as *mut __m256i;
                _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u4, 0x20));
                _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256(u1, u5, 0x20));
                _mm256_storeu_si256(o.add(2), _mm256_permute2x128_si256(u2, u6, 0x20));
                _mm256_storeu_si256(o.add(3), _mm256_permute2x128_si256(u3, u7, 0x20));
                _mm256_storeu_si256(o.add(4), _mm256_permute2x128_si256(u0, u4, 0x31));
                _mm256_storeu_si256(o.add(5), _mm256_permute2x128_si256(u1, u5, 0x31));
                _mm256_storeu_si256(o.add(6), _mm256_permute2x128_si256(u2, u6, 0x31));
                _mm256_storeu_si256(o.add(7), _mm256_permute2x128_si256(u3, u7, 0x31));
            }
            i += 8;
        }
        n8
    }

    /// AVX-512F chunk step of [`super::pack_columns8`]: lanes are columns,
    /// so every chunk is two 8-word loads, a few 64-bit shifts and one
    /// 16-byte store.
    ///
    /// # Safety
    /// avx512f must be available, and the bounds asserted by
    /// [`super::pack_columns8`] must hold.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn columns8_512(
        r: &[u32],
        w: u32,
        pb: u32,
        starts: &[(u32, u32)],
        out: &mut [i16],
        stride: usize,
    ) {
        let wc = _mm_cvtsi32_si128(w as i32);
        let sh = _mm_cvtsi32_si128(64 - pb as i32);
        for (k, &(i, off)) in starts.iter().enumerate() {
            let i = i as usize;
            // SAFETY: 8(i + 1) + 8 ≤ r.len() and k·stride + 8 ≤ out.len()
            // (asserted by the caller).
            unsafe {
                let lo = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                    r.as_ptr().add(8 * i) as *const __m256i
                ));
                let hi = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                    r.as_ptr().add(8 * (i + 1)) as *const __m256i
                ));
                let win = _mm512_or_si512(lo, _mm512_sll_epi64(hi, wc));
                let x = _mm512_srl_epi64(win, _mm_cvtsi32_si128(off as i32));
                let c = _mm512_sra_epi64(_mm512_sll_epi64(x, sh), sh);
                _mm_storeu_si128(
                    out.as_mut_ptr().add(k * stride) as *mut __m128i,
                    _mm512_cvtepi64_epi16(c),
                );
            }
        }
    }

    /// AVX-512F twin of [`super::pack_groups`].
    ///
    /// # Safety
    /// avx512f must be available, and the bounds asserted by
    /// [`super::pack_groups`] must hold.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn groups512(
        r: &[u32],
        groups: &[PackGroup],
        w: u32,
        pb: u32,
        out: &mut [i16],
        stride: usize,
    ) {
        let wc = _mm_cvtsi32_si128(w as i32);
        let sh = _mm_cvtsi32_si128(64 - pb as i32);
        for (g, grp) in groups.iter().enumerate() {
            // SAFETY: r[base..base + 16] is in bounds and idx/off are plain
            // arrays of 16 u32 / 8 u64 (asserted by the caller).
            let (lo, hi, off) = unsafe {
                let v = _mm512_loadu_si512(r.as_ptr().add(grp.base as usize) as *const __m512i);
                let idx = _mm512_loadu_si512(grp.idx.as_ptr() as *const __m512i);
                let p = _mm512_permutexvar_epi32(idx, v);
                let lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(p));
                let hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(p));
                let off = _mm512_loadu_si512(grp.off.as_ptr() as *const __m512i);
                (lo, hi, off)
            };
            let win = _mm512_or_si512(lo, _mm512_sll_epi64(hi, wc));
            let c = _mm512_sra_epi64(_mm512_sll_epi64(_mm512_srlv_epi64(win, off), sh), sh);
            let words = _mm512_cvtepi64_epi16(c);
            if stride == 1 {
                // SAFETY: out has ≥ 8g + 8 entries (asserted by the caller).
                unsafe { _mm_storeu_si128(out.as_mut_ptr().add(8 * g) as *mut __m128i, words) };
            } else {
                let mut tmp = [0i16; 8];
                // SAFETY: tmp is 16 bytes.
                unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, words) };
                for (t, &x) in tmp.iter().enumerate() {
                    out[(8 * g + t) * stride] = x;
                }
            }
        }
    }

    /// Eight chunks on 32-bit lanes: the `pb` bits at `off` of the windows
    /// `lo | hi·2^w`, sign-extended, as eight i16. Only the low 32 bits of
    /// `window >> off` matter (pb ≤ 16), and they are
    /// `(lo >> off) | (hi << (w − off))`: with off < w ≤ 32 the second
    /// count is in [1, 32], and AVX2 variable shifts give 0 for a count of
    /// 32, as the 64-bit window does.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn chunks8(lo: __m256i, hi: __m256i, off: __m256i, w: __m256i, sh: __m128i) -> __m128i {
        let x = _mm256_or_si256(
            _mm256_srlv_epi32(lo, off),
            _mm256_sllv_epi32(hi, _mm256_sub_epi32(w, off)),
        );
        // sign-extend from pb bits (sh = 32 − pb ∈ [16, 31]); the values
        // fit in i16, so the saturating pack is exact
        let c = _mm256_sra_epi32(_mm256_sll_epi32(x, sh), sh);
        _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c))
    }

    /// AVX2 chunk step of [`super::pack_columns8`]: lanes are columns, so
    /// every chunk is two 8-word loads, a few 32-bit shifts and one 16-byte
    /// store.
    ///
    /// # Safety
    /// avx2 must be available, and the bounds asserted by
    /// [`super::pack_columns8`] must hold (including off < w < 32).
    #[target_feature(enable = "avx2")]
    pub unsafe fn columns8_256(
        r: &[u32],
        w: u32,
        pb: u32,
        starts: &[(u32, u32)],
        out: &mut [i16],
        stride: usize,
    ) {
        let wv = _mm256_set1_epi32(w as i32);
        let sh = _mm_cvtsi32_si128(32 - pb as i32);
        for (k, &(i, off)) in starts.iter().enumerate() {
            let i = i as usize;
            // SAFETY: 8(i + 1) + 8 ≤ r.len() and k·stride + 8 ≤ out.len()
            // (asserted by the caller).
            unsafe {
                let lo = _mm256_loadu_si256(r.as_ptr().add(8 * i) as *const __m256i);
                let hi = _mm256_loadu_si256(r.as_ptr().add(8 * (i + 1)) as *const __m256i);
                let c = chunks8(lo, hi, _mm256_set1_epi32(off as i32), wv, sh);
                _mm_storeu_si128(out.as_mut_ptr().add(k * stride) as *mut __m128i, c);
            }
        }
    }

    /// AVX2 twin of [`super::pack_groups`]: the 16 window values of a group
    /// are two registers, and each chunk's lower and upper value is picked
    /// from them with two `vpermd` and a blend on the index's bit 3.
    ///
    /// # Safety
    /// avx2 must be available, and the bounds asserted by
    /// [`super::pack_groups`] must hold (including off < w ≤ 32).
    #[target_feature(enable = "avx2")]
    pub unsafe fn groups256(
        r: &[u32],
        groups: &[PackGroup],
        w: u32,
        pb: u32,
        out: &mut [i16],
        stride: usize,
    ) {
        let wv = _mm256_set1_epi32(w as i32);
        let sh = _mm_cvtsi32_si128(32 - pb as i32);
        let seven = _mm256_set1_epi32(7);
        for (g, grp) in groups.iter().enumerate() {
            // SAFETY: r[base..base + 16] is in bounds and idx/off are plain
            // arrays of 16 u32 / 8 u64 (asserted by the caller).
            let (lo, hi, off) = unsafe {
                let v0 = _mm256_loadu_si256(r.as_ptr().add(grp.base as usize) as *const __m256i);
                let v1 =
                    _mm256_loadu_si256(r.as_ptr().add(grp.base as usize + 8) as *const __m256i);
                let pick = |i: __m256i| {
                    _mm256_blendv_epi8(
                        _mm256_permutevar8x32_epi32(v0, i),
                        _mm256_permutevar8x32_epi32(v1, i),
                        _mm256_cmpgt_epi32(i, seven),
                    )
                };
                let il = _mm256_loadu_si256(grp.idx.as_ptr() as *const __m256i);
                let ih = _mm256_loadu_si256(grp.idx.as_ptr().add(8) as *const __m256i);
                // offsets (< 32) from 64-bit to 32-bit lanes: the low
                // halves, then qwords reordered 0, 2, 1, 3
                let o0 = _mm256_loadu_si256(grp.off.as_ptr() as *const __m256i);
                let o1 = _mm256_loadu_si256(grp.off.as_ptr().add(4) as *const __m256i);
                let o = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(
                    _mm256_castsi256_ps(o0),
                    _mm256_castsi256_ps(o1),
                ));
                (pick(il), pick(ih), _mm256_permute4x64_epi64::<0xD8>(o))
            };
            let words = chunks8(lo, hi, off, wv, sh);
            if stride == 1 {
                // SAFETY: out has ≥ 8g + 8 entries (asserted by the caller).
                unsafe { _mm_storeu_si128(out.as_mut_ptr().add(8 * g) as *mut __m128i, words) };
            } else {
                let mut tmp = [0i16; 8];
                // SAFETY: tmp is 16 bytes.
                unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, words) };
                for (t, &x) in tmp.iter().enumerate() {
                    out[(8 * g + t) * stride] = x;
                }
            }
        }
    }
}

/// Rounds eight columns of A1·D from 2^32 to 2^w and packs each into
/// `starts.len()` chunks of `pb` bits (App. B; see `server::ChunkPlan`):
/// chunk k of column c — the `pb` bits at `off_k` of the window
/// `r[i_k] | r[i_k+1]·2^w`, sign-extended — goes to `out[k·stride + c]`.
/// Eight columns at a time so that each chunk index is one 16-byte store
/// into the row-major hint rows instead of eight 2-byte stores eight rows
/// apart. `scratch` holds the rounded values interleaved (value i of column
/// c at 8i + c). Runtime-dispatched: AVX-512F or AVX2, with
/// [`pack_columns8_scalar`] as the twin.
///
/// # Panics
/// If the columns differ in length, a window reads past the last value + 1,
/// `w ∉ [1, 32)`, `pb ∉ [1, 16]`, or `out` is too short (caller bugs).
pub fn pack_columns8(
    cols: [&[u32]; 8],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    scratch: &mut Vec<u32>,
    out: &mut [i16],
    stride: usize,
) {
    let n = cols[0].len();
    assert!(cols.iter().all(|c| c.len() == n));
    assert!((1..32).contains(&w) && (1..=16).contains(&pb) && stride >= 8);
    assert!(starts
        .iter()
        .all(|&(i, off)| (i as usize) < n.max(1) && off < w));
    assert!(starts.is_empty() || out.len() >= (starts.len() - 1) * stride + 8);
    // interleave and round, plus one zero row for the last window (every
    // other word is written below: no need to clear the rest)
    if scratch.len() != 8 * (n + 1) {
        scratch.clear();
        scratch.resize(8 * (n + 1), 0);
    }
    scratch[8 * n..].fill(0);
    #[cfg(target_arch = "x86_64")]
    let from = if simd() != Simd::None {
        // SAFETY: avx2 detected (any SIMD selection implies it); the
        // columns have n values each and scratch holds 8(n + 1).
        unsafe { pack_simd::interleave_round8(cols, w, scratch) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let from = 0;
    let (shift, half) = (32 - w, 1u32 << (31 - w));
    for (c, col) in cols.iter().enumerate() {
        for (i, &h) in col.iter().enumerate().skip(from) {
            // round_pow2 from q1 = 2^32: the carry out of bit 31 is the
            // wrap-around mod 2^w
            scratch[8 * i + c] = h.wrapping_add(half) >> shift;
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        match simd() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; every window row
                // i + 1 ≤ n is inside `scratch` (8(n + 1) values) and every
                // 8-word store inside `out` (asserted above).
                unsafe { pack_simd::columns8_512(scratch, w, pb, starts, out, stride) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; bounds and off < w as
                // for the AVX-512 kernel (asserted above).
                unsafe { pack_simd::columns8_256(scratch, w, pb, starts, out, stride) };
                return;
            }
            Simd::None => {}
        }
    }
    pack_columns8_chunks(scratch, w, pb, starts, out, stride);
}

/// Scalar twin of [`pack_columns8`] (rounding included).
pub fn pack_columns8_scalar(
    cols: [&[u32]; 8],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: usize,
) {
    let n = cols[0].len();
    let mut r = vec![0u32; 8 * (n + 1)];
    for (c, col) in cols.iter().enumerate() {
        for (i, &h) in col.iter().enumerate() {
            r[8 * i + c] = crate::arith::round_pow2(u64::from(h), 32, w) as u32;
        }
    }
    pack_columns8_chunks(&r, w, pb, starts, out, stride);
}

/// The chunk step of [`pack_columns8`] on interleaved rounded values.
fn pack_columns8_chunks(
    r: &[u32],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: usize,
) {
    for (k, &(i, off)) in starts.iter().enumerate() {
        let i = i as usize;
        for c in 0..8 {
            out[k * stride + c] = window_chunk(r[8 * i + c], r[8 * (i + 1) + c], w, off, pb);
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
mod ntt_avx512 {
    //! Harvey's lazy NTT butterflies on 16 u32 lanes. Stages with half-size
    //! t ≥ 16 broadcast one twiddle per block; the four smallest stages work
    //! on 32-element chunks split into butterfly halves with `vpermt2d`.
    use crate::ntt::NttTable;
    use std::arch::x86_64::*;

    /// x·w mod p in [0, 2p) (Shoup), lane-wise; any x < 2^32.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn mul_shoup_lazy(x: __m512i, w: __m512i, ws: __m512i, p: __m512i) -> __m512i {
        let even = _mm512_srli_epi64(_mm512_mul_epu32(x, ws), 32);
        let odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(ws, 32));
        let q = _mm512_mask_blend_epi32(0xAAAA, even, odd);
        _mm512_sub_epi32(_mm512_mullo_epi32(x, w), _mm512_mullo_epi32(q, p))
    }

    /// x − m if x ≥ m (unsigned lanes).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn csub(x: __m512i, m: __m512i) -> __m512i {
        _mm512_min_epu32(x, _mm512_sub_epi32(x, m))
    }

    /// (X, Y) lane indices of the butterflies of a 32-element chunk for
    /// half-size t, and the inverse placement.
    fn split_idx(t: usize) -> ([i32; 16], [i32; 16], [i32; 16], [i32; 16]) {
        let mut x = [0i32; 16];
        let mut y = [0i32; 16];
        for l in 0..16 {
            x[l] = ((l / t) * 2 * t + l % t) as i32;
            y[l] = x[l] + t as i32;
        }
        // element e comes from X lane l (index l) or Y lane l (index 16 + l)
        let mut src = [0i32; 32];
        for l in 0..16 {
            src[x[l] as usize] = l as i32;
            src[y[l] as usize] = 16 + l as i32;
        }
        let mut a = [0i32; 16];
        let mut b = [0i32; 16];
        a.copy_from_slice(&src[..16]);
        b.copy_from_slice(&src[16..]);
        (x, y, a, b)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load_idx(v: &[i32; 16]) -> __m512i {
        // SAFETY: reading 64 bytes from a 16 × i32 array.
        unsafe { _mm512_loadu_si512(v.as_ptr() as *const __m512i) }
    }

    /// # Safety
    /// avx512f must be available; `a.len() == t.n`, n ≥ 32 a power of two.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn forward(t: &NttTable, a: &mut [u32]) {
        let n = t.n;
        assert!(a.len() == n && n >= 32);
        let p = _mm512_set1_epi32(t.m.p as i32);
        let p2 = _mm512_set1_epi32(2 * t.m.p as i32);
        let ptr = a.as_mut_ptr();
        // large stages
        let mut half = n / 2;
        let mut m = 1;
        while half >= 16 {
            for i in 0..m {
                let w = _mm512_set1_epi32(t.psi_rev[m + i] as i32);
                let ws = _mm512_set1_epi32(t.psi_rev_shoup[m + i] as i32);
                let j1 = 2 * i * half;
                let mut j = j1;
                while j < j1 + half {
                    // SAFETY: j + 16 <= j1 + half and j + half + 16 <= j1 + 2·half <= n.
                    unsafe {
                        let xv = csub(_mm512_loadu_si512(ptr.add(j) as *const __m512i), p2);
                        let yv = _mm512_loadu_si512(ptr.add(j + half) as *const __m512i);
                        let v = mul_shoup_lazy(yv, w, ws, p);
                        _mm512_storeu_si512(ptr.add(j) as *mut __m512i, _mm512_add_epi32(xv, v));
                        _mm512_storeu_si512(
                            ptr.add(j + half) as *mut __m512i,
                            _mm512_sub_epi32(_mm512_add_epi32(xv, p2), v),
                        );
                    }
                    j += 16;
                }
            }
            half /= 2;
            m *= 2;
        }
        // small stages t = 8, 4, 2, 1 on 32-element chunks
        for (st, tt) in [8usize, 4, 2, 1].into_iter().enumerate() {
            let (ix, iy, ia, ib) = split_idx(tt);
            let (ix, iy, ia, ib) = (load_idx(&ix), load_idx(&iy), load_idx(&ia), load_idx(&ib));
            let tw = &t.small.fwd[st];
            let tws = &t.small.fwd_shoup[st];
            for c in 0..n / 32 {
                // SAFETY: chunk c spans a[32c .. 32c + 32] ⊂ a; the twiddle
                // tables hold n/32 · 16 entries.
                unsafe {
                    let av = _mm512_loadu_si512(ptr.add(32 * c) as *const __m512i);
                    let bv = _mm512_loadu_si512(ptr.add(32 * c + 16) as *const __m512i);
                    let xv = csub(_mm512_permutex2var_epi32(av, ix, bv), p2);
                    let yv = _mm512_permutex2var_epi32(av, iy, bv);
                    let w = _mm512_loadu_si512(tw.as_ptr().add(16 * c) as *const __m512i);
                    let ws = _mm512_loadu_si512(tws.as_ptr().add(16 * c) as *const __m512i);
                    let v = mul_shoup_lazy(yv, w, ws, p);
                    let x2 = _mm512_add_epi32(xv, v);
                    let y2 = _mm512_sub_epi32(_mm512_add_epi32(xv, p2), v);
                    let mut oa = _mm512_permutex2var_epi32(x2, ia, y2);
                    let mut ob = _mm512_permutex2var_epi32(x2, ib, y2);
                    if st == 3 {
                        // final reduction [0, 4p) → [0, p)
                        oa = csub(csub(oa, p2), p);
                        ob = csub(csub(ob, p2), p);
                    }
                    _mm512_storeu_si512(ptr.add(32 * c) as *mut __m512i, oa);
                    _mm512_storeu_si512(ptr.add(32 * c + 16) as *mut __m512i, ob);
                }
            }
        }
    }

    /// # Safety
    /// avx512f must be available; `a.len() == t.n`, n ≥ 32 a power of two.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn inverse(t: &NttTable, a: &mut [u32]) {
        let n = t.n;
        assert!(a.len() == n && n >= 32);
        let p = _mm512_set1_epi32(t.m.p as i32);
        let p2 = _mm512_set1_epi32(2 * t.m.p as i32);
        let ptr = a.as_mut_ptr();
        // small stages first: t = 1, 2, 4, 8
        for (st, tt) in [8usize, 4, 2, 1].into_iter().enumerate().rev() {
            let (ix, iy, ia, ib) = split_idx(tt);
            let (ix, iy, ia, ib) = (load_idx(&ix), load_idx(&iy), load_idx(&ia), load_idx(&ib));
            let tw = &t.small.inv[st];
            let tws = &t.small.inv_shoup[st];
            for c in 0..n / 32 {
                // SAFETY: as in `forward`.
                unsafe {
                    let av = _mm512_loadu_si512(ptr.add(32 * c) as *const __m512i);
                    let bv = _mm512_loadu_si512(ptr.add(32 * c + 16) as *const __m512i);
                    let xv = _mm512_permutex2var_epi32(av, ix, bv);
                    let yv = _mm512_permutex2var_epi32(av, iy, bv);
                    let w = _mm512_loadu_si512(tw.as_ptr().add(16 * c) as *const __m512i);
                    let ws = _mm512_loadu_si512(tws.as_ptr().add(16 * c) as *const __m512i);
                    let x2 = csub(_mm512_add_epi32(xv, yv), p2);
                    let y2 =
                        mul_shoup_lazy(_mm512_sub_epi32(_mm512_add_epi32(xv, p2), yv), w, ws, p);
                    _mm512_storeu_si512(
                        ptr.add(32 * c) as *mut __m512i,
                        _mm512_permutex2var_epi32(x2, ia, y2),
                    );
                    _mm512_storeu_si512(
                        ptr.add(32 * c + 16) as *mut __m512i,
                        _mm512_permutex2var_epi32(x2, ib, y2),
                    );
                }
            }
        }
        // large stages: half = 16 .. n/2
        let mut half = 16;
        let mut m = n / 32;
        while m >= 1 {
            for i in 0..m {
                let w = _mm512_set1_epi32(t.ipsi_rev[m + i] as i32);
                let ws = _mm512_set1_epi32(t.ipsi_rev_shoup[m + i] as i32);
                let j1 = 2 * i * half;
                let mut j = j1;
                while j < j1 + half {
                    // SAFETY: j + 16 <= j1 + half, j + half + 16 <= n.
                    unsafe {
                        let xv = _mm512_loadu_si512(ptr.add(j) as *const __m512i);
                        let yv = _mm512_loadu_si512(ptr.add(j + half) as *const __m512i);
                        let x2 = csub(_mm512_add_epi32(xv, yv), p2);
                        let y2 = mul_shoup_lazy(
                            _mm512_sub_epi32(_mm512_add_epi32(xv, p2), yv),
                            w,
                            ws,
                            p,
                        );
                        _mm512_storeu_si512(ptr.add(j) as *mut __m512i, x2);
                        _mm512_storeu_si512(ptr.add(j + half) as *mut __m512i, y2);
                    }
                    j += 16;
                }
            }
            half *= 2;
            m /= 2;
        }
        // scale by n^{-1}, full reduction
        let ni = _mm512_set1_epi32(t.n_inv as i32);
        let nis = _mm512_set1_epi32(t.n_inv_shoup as i32);
        let mut j = 0;
        while j < n {
            // SAFETY: j + 16 <= n.
            unsafe {
                let v = _mm512_loadu_si512(ptr.add(j) as *const __m512i);
                let r = csub(mul_shoup_lazy(v, ni, nis, p), p);
                _mm512_storeu_si512(ptr.add(j) as *mut __m512i, r);
            }
            j += 16;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod ntt_avx2 {
    //! Harvey's lazy NTT butterflies on 8 u32 lanes, the AVX2 twin of
    //! `ntt_avx512`. Stages with half-size t ≥ 8 broadcast one twiddle per
    //! block; the three smallest stages (t = 4, 2, 1) run on 16-element
    //! chunks held in two registers X, Y, regrouped between stages by
    //! in-lane shuffles so that lane l of X and Y always hold the two inputs
    //! of the chunk's l-th butterfly (X lane l = element (l/t)·2t + l mod t).
    //! In that order the lane twiddles are 8 consecutive entries of the
    //! 16-lane tables in [`NttTable`]'s `small` field (their 32-element
    //! chunks are two of ours). Every element goes through the same
    //! butterflies as in the scalar transform, so the output is identical.
    use crate::ntt::NttTable;
    use std::arch::x86_64::*;

    /// x·w mod p in [0, 2p) (Shoup), lane-wise, any x < 2^32; `ws_even`
    /// holds the Shoup quotients in the even lanes' low halves and `ws_odd`
    /// those of the odd lanes (equal for a broadcast twiddle).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mul_shoup_lazy(
        x: __m256i,
        w: __m256i,
        ws_even: __m256i,
        ws_odd: __m256i,
        p: __m256i,
    ) -> __m256i {
        let even = _mm256_srli_epi64(_mm256_mul_epu32(x, ws_even), 32);
        let odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), ws_odd);
        let q = _mm256_blend_epi32::<0xAA>(even, odd);
        _mm256_sub_epi32(_mm256_mullo_epi32(x, w), _mm256_mullo_epi32(q, p))
    }

    /// x − m if x ≥ m (unsigned lanes).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn csub(x: __m256i, m: __m256i) -> __m256i {
        _mm256_min_epu32(x, _mm256_sub_epi32(x, m))
    }

    /// Lane twiddles of one small stage for 16-element chunk c:
    /// (w, w' even, w' odd).
    ///
    /// # Safety
    /// AVX2 must be available; `tw` and `tws` hold ≥ 8c + 8 entries.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn lane_tw(tw: &[u32], tws: &[u32], c: usize) -> (__m256i, __m256i, __m256i) {
        debug_assert!(tw.len() >= 8 * c + 8 && tws.len() >= 8 * c + 8);
        // SAFETY: 8c + 8 ≤ len of both tables (caller's contract).
        unsafe {
            let w = _mm256_loadu_si256(tw.as_ptr().add(8 * c) as *const __m256i);
            let ws = _mm256_loadu_si256(tws.as_ptr().add(8 * c) as *const __m256i);
            (w, ws, _mm256_srli_epi64(ws, 32))
        }
    }

    /// Forward (Cooley–Tukey) butterfly: (x, y) ← (x' + v, x' + 2p − v)
    /// with x' = x mod 2p lazily, v = y·w mod p in [0, 2p).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bfly_fwd(
        x: __m256i,
        y: __m256i,
        (w, wse, wso): (__m256i, __m256i, __m256i),
        p: __m256i,
        p2: __m256i,
    ) -> (__m256i, __m256i) {
        let u = csub(x, p2);
        let v = mul_shoup_lazy(y, w, wse, wso, p);
        (
            _mm256_add_epi32(u, v),
            _mm256_sub_epi32(_mm256_add_epi32(u, p2), v),
        )
    }

    /// Inverse (Gentleman–Sande) butterfly: (x, y) ← ((x + y) mod 2p,
    /// (x + 2p − y)·w mod p in [0, 2p)).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bfly_inv(
        x: __m256i,
        y: __m256i,
        (w, wse, wso): (__m256i, __m256i, __m256i),
        p: __m256i,
        p2: __m256i,
    ) -> (__m256i, __m256i) {
        (
            csub(_mm256_add_epi32(x, y), p2),
            mul_shoup_lazy(_mm256_sub_epi32(_mm256_add_epi32(x, p2), y), w, wse, wso, p),
        )
    }

    /// (X, Y) for t = 1 from the t = 2 order (X = 0,1,4,5, Y = 2,3,6,7 per
    /// 128-bit lane) and back: even/odd 32-bit lanes swapped across X and Y.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn swap_odd_even(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
        (
            _mm256_blend_epi32::<0xAA>(x, _mm256_slli_epi64(y, 32)),
            _mm256_blend_epi32::<0xAA>(_mm256_srli_epi64(x, 32), y),
        )
    }

    /// # Safety
    /// AVX2 must be available; `a.len() == t.n`, n ≥ 32 a power of two.
    #[target_feature(enable = "avx2")]
    pub unsafe fn forward(t: &NttTable, a: &mut [u32]) {
        let n = t.n;
        assert!(a.len() == n && n >= 32);
        let p = _mm256_set1_epi32(t.m.p as i32);
        let p2 = _mm256_set1_epi32(2 * t.m.p as i32);
        let ptr = a.as_mut_ptr();
        // large stages: half = n/2 .. 8
        let mut half = n / 2;
        let mut m = 1;
        while half >= 8 {
            for i in 0..m {
                let w = _mm256_set1_epi32(t.psi_rev[m + i] as i32);
                let ws = _mm256_set1_epi32(t.psi_rev_shoup[m + i] as i32);
                let j1 = 2 * i * half;
                let mut j = j1;
                while j < j1 + half {
                    // SAFETY: j + 8 <= j1 + half and j + half + 8 <= j1 + 2·half <= n.
                    unsafe {
                        let xv = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
                        let yv = _mm256_loadu_si256(ptr.add(j + half) as *const __m256i);
                        let (x2, y2) = bfly_fwd(xv, yv, (w, ws, ws), p, p2);
                        _mm256_storeu_si256(ptr.add(j) as *mut __m256i, x2);
                        _mm256_storeu_si256(ptr.add(j + half) as *mut __m256i, y2);
                    }
                    j += 8;
                }
            }
            half /= 2;
            m *= 2;
        }
        // small stages t = 4, 2, 1 (tables 1, 2, 3) on 16-element chunks
        let s = &t.small;
        for c in 0..n / 16 {
            // SAFETY: chunk c spans a[16c .. 16c + 16] ⊂ a; the small-stage
            // tables hold n/2 = 8 · (n/16) entries.
            unsafe {
                let av = _mm256_loadu_si256(ptr.add(16 * c) as *const __m256i);
                let bv = _mm256_loadu_si256(ptr.add(16 * c + 8) as *const __m256i);
                // t = 4: X = 0..4 | 8..12, Y = 4..8 | 12..16
                let x = _mm256_permute2x128_si256::<0x20>(av, bv);
                let y = _mm256_permute2x128_si256::<0x31>(av, bv);
                let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[1], &s.fwd_shoup[1], c), p, p2);
                // t = 2: X = 0,1,4,5 | 8,9,12,13, Y = 2,3,6,7 | 10,11,14,15
                let (x, y) = (_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
                let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[2], &s.fwd_shoup[2], c), p, p2);
                // t = 1: X = even elements, Y = odd elements
                let (x, y) = swap_odd_even(x, y);
                let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[3], &s.fwd_shoup[3], c), p, p2);
                // final reduction [0, 4p) → [0, p), back to natural order
                let x = csub(csub(x, p2), p);
                let y = csub(csub(y, p2), p);
                let lo = _mm256_unpacklo_epi32(x, y); // 0..4 | 8..12
                let hi = _mm256_unpackhi_epi32(x, y); // 4..8 | 12..16
                _mm256_storeu_si256(
                    ptr.add(16 * c) as *mut __m256i,
                    _mm256_permute2x128_si256::<0x20>(lo, hi),
                );
                _mm256_storeu_si256(
                    ptr.add(16 * c + 8) as *mut __m256i,
                    _mm256_permute2x128_si256::<0x31>(lo, hi),
                );
            }
        }
    }

    /// # Safety
    /// AVX2 must be available; `a.len() == t.n`, n ≥ 32 a power of two.
    #[target_feature(enable = "avx2")]
    pub unsafe fn inverse(t: &NttTable, a: &mut [u32]) {
        let n = t.n;
        assert!(a.len() == n && n >= 32);
        let p = _mm256_set1_epi32(t.m.p as i32);
        let p2 = _mm256_set1_epi32(2 * t.m.p as i32);
        let ptr = a.as_mut_ptr();
        // small stages first: t = 1, 2, 4 (tables 3, 2, 1)
        let s = &t.small;
        for c in 0..n / 16 {
            // SAFETY: as in `forward`.
            unsafe {
                let av = _mm256_loadu_si256(ptr.add(16 * c) as *const __m256i);
                let bv = _mm256_loadu_si256(ptr.add(16 * c + 8) as *const __m256i);
                let lo = _mm256_castsi256_ps(_mm256_permute2x128_si256::<0x20>(av, bv));
                let hi = _mm256_castsi256_ps(_mm256_permute2x128_si256::<0x31>(av, bv));
                // t = 1: X = even elements, Y = odd elements
                let x = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(lo, hi));
                let y = _mm256_castps_si256(_mm256_shuffle_ps::<0xDD>(lo, hi));
                let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[3], &s.inv_shoup[3], c), p, p2);
                // t = 2: X = 0,1,4,5 | 8,9,12,13, Y = 2,3,6,7 | 10,11,14,15
                let (x, y) = swap_odd_even(x, y);
                let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[2], &s.inv_shoup[2], c), p, p2);
                // t = 4: X = 0..4 | 8..12, Y = 4..8 | 12..16
                let (x, y) = (_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
                let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[1], &s.inv_shoup[1], c), p, p2);
                _mm256_storeu_si256(
                    ptr.add(16 * c) as *mut __m256i,
                    _mm256_permute2x128_si256::<0x20>(x, y),
                );
                _mm256_storeu_si256(
                    ptr.add(16 * c + 8) as *mut __m256i,
                    _mm256_permute2x128_si256::<0x31>(x, y),
                );
            }
        }
        // large stages: half = 8 .. n/2
        let mut half = 8;
        let mut m = n / 16;
        while m >= 1 {
            for i in 0..m {
                let w = _mm256_set1_epi32(t.ipsi_rev[m + i] as i32);
                let ws = _mm256_set1_epi32(t.ipsi_rev_shoup[m + i] as i32);
                let j1 = 2 * i * half;
                let mut j = j1;
                while j < j1 + half {
                    // SAFETY: j + 8 <= j1 + half, j + half + 8 <= n.
                    unsafe {
                        let xv = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
                        let yv = _mm256_loadu_si256(ptr.add(j + half) as *const __m256i);
                        let (x2, y2) = bfly_inv(xv, yv, (w, ws, ws), p, p2);
                        _mm256_storeu_si256(ptr.add(j) as *mut __m256i, x2);
                        _mm256_storeu_si256(ptr.add(j + half) as *mut __m256i, y2);
                    }
                    j += 8;
                }
            }
            half *= 2;
            m /= 2;
        }
        // scale by n^{-1}, full reduction
        let ni = _mm256_set1_epi32(t.n_inv as i32);
        let nis = _mm256_set1_epi32(t.n_inv_shoup as i32);
        let mut j = 0;
        while j < n {
            // SAFETY: j + 8 <= n.
            unsafe {
                let v = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
                let r = csub(mul_shoup_lazy(v, ni, nis, nis, p), p);
                _mm256_storeu_si256(ptr.add(j) as *mut __m256i, r);
            }
            j += 8;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod digits_simd {
    //! SIMD twins of [`super::permute`] and [`super::crt_gadget_digits`].
    //! The digit kernels hold one coefficient per 64-bit lane: the CRT
    //! value x < q2 < 2^56 and the offset value u < 2^63 need it.
    use crate::arith::{Crt, P0, P1, Q2};
    use std::arch::x86_64::*;

    /// 16 slots per step (see `avx512_ks::add_permuted`).
    ///
    /// # Safety
    /// avx512f must be available; every `perm` index < `src.len()` =
    /// `out.len()` = `perm.len()`; with `within16` every aligned 16-slot
    /// output block reads one aligned 16-slot input block.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn permute512(src: &[u32], perm: &[u32], within16: bool, out: &mut [u32]) {
        let n16 = out.len() / 16 * 16;
        let mut i = 0;
        while i < n16 {
            // SAFETY: i + 16 ≤ n16 ≤ n; indices < src.len() (caller); with
            // `within16` the block perm[i]/16·16 .. +16 is inside src.
            unsafe {
                let g = super::avx512_ks::slots16(src, perm, i, within16);
                _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, g);
            }
            i += 16;
        }
        super::permute_scalar(src, perm, out, n16);
    }

    /// 8 slots per step.
    ///
    /// # Safety
    /// avx2 must be available; as [`permute512`] with blocks of 8.
    #[target_feature(enable = "avx2")]
    pub unsafe fn permute256(src: &[u32], perm: &[u32], within8: bool, out: &mut [u32]) {
        let n8 = out.len() / 8 * 8;
        let mut i = 0;
        while i < n8 {
            // SAFETY: as in permute512 with 8 lanes.
            unsafe {
                let g = super::avx2_ks::slots8(src, perm, i, within8);
                _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, g);
            }
            i += 8;
        }
        super::permute_scalar(src, perm, out, n8);
    }

    /// 16 values per step: sign-extend, reverse with `vpermd`, add P where
    /// negative.
    ///
    /// # Safety
    /// avx512f and avx512bw must be available; `out.len() = 2d`,
    /// `src.len() ≤ d`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub unsafe fn reversed512(src: &[i16], out: &mut [u32]) {
        let d = out.len() / 2;
        let (len, pad) = (src.len(), d - src.len());
        out[..pad].fill(0);
        out[d..d + pad].fill(0);
        let n16 = len / 16 * 16;
        let rev = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        let (p0, p1) = (_mm512_set1_epi32(P0 as i32), _mm512_set1_epi32(P1 as i32));
        let mut m = 0;
        while m < n16 {
            // SAFETY: m + 16 ≤ n16 ≤ len: the load reads src[len−m−16..len−m];
            // the stores write out[pad+m..+16] and out[d+pad+m..+16], inside
            // out since pad + len = d.
            unsafe {
                let v = _mm256_loadu_si256(src.as_ptr().add(len - m - 16) as *const __m256i);
                let v = _mm512_permutexvar_epi32(rev, _mm512_cvtepi16_epi32(v));
                let neg = _mm512_srai_epi32(v, 31);
                let o = out.as_mut_ptr().add(pad + m);
                _mm512_storeu_si512(
                    o as *mut __m512i,
                    _mm512_add_epi32(v, _mm512_and_si512(neg, p0)),
                );
                _mm512_storeu_si512(
                    o.add(d) as *mut __m512i,
                    _mm512_add_epi32(v, _mm512_and_si512(neg, p1)),
                );
            }
            m += 16;
        }
        super::reversed_residues_i16_scalar(src, out, pad + n16);
    }

    /// 8 values per step.
    ///
    /// # Safety
    /// avx2 must be available; as [`reversed512`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn reversed256(src: &[i16], out: &mut [u32]) {
        let d = out.len() / 2;
        let (len, pad) = (src.len(), d - src.len());
        out[..pad].fill(0);
        out[d..d + pad].fill(0);
        let n8 = len / 8 * 8;
        let rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        let (p0, p1) = (_mm256_set1_epi32(P0 as i32), _mm256_set1_epi32(P1 as i32));
        let mut m = 0;
        while m < n8 {
            // SAFETY: as in reversed512 with 8 values.
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(len - m - 8) as *const __m128i);
                let v = _mm256_permutevar8x32_epi32(_mm256_cvtepi16_epi32(v), rev);
                let neg = _mm256_srai_epi32(v, 31);
                let o = out.as_mut_ptr().add(pad + m);
                _mm256_storeu_si256(
                    o as *mut __m256i,
                    _mm256_add_epi32(v, _mm256_and_si256(neg, p0)),
                );
                _mm256_storeu_si256(
                    o.add(d) as *mut __m256i,
                    _mm256_add_epi32(v, _mm256_and_si256(neg, p1)),
                );
            }
            m += 8;
        }
        super::reversed_residues_i16_scalar(src, out, pad + n8);
    }

    /// The constant added before the digits are cut: Σ_{k<t−1} (z/2)·z^k + 2^62.
    fn offset(log_z: u32, t: usize) -> u64 {
        let half = 1u64 << (log_z - 1);
        (0..t - 1).map(|k| half << (k as u32 * log_z)).sum::<u64>() + (1 << 62)
    }

    /// 8 coefficients per step.
    ///
    /// # Safety
    /// avx512f must be available; `res.len() = 2n`, `out.len() = t·2n`,
    /// (t−1)·log z ≤ 62, residues < their primes.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn digits512(crt: &Crt, res: &[u32], log_z: u32, t: usize, out: &mut [u32]) {
        let n = res.len() / 2;
        let n8 = n / 8 * 8;
        let (w, ws) = crt.p0_inv();
        let (w, ws) = (_mm512_set1_epi64(w as i64), _mm512_set1_epi64(ws as i64));
        let p0 = _mm512_set1_epi64(P0 as i64);
        let p1 = _mm512_set1_epi64(P1 as i64);
        let q2 = _mm512_set1_epi64(Q2 as i64);
        let half_q2 = _mm512_set1_epi64((Q2 / 2) as i64);
        let off = _mm512_set1_epi64(offset(log_z, t) as i64);
        let mask_z = _mm512_set1_epi64((1i64 << log_z) - 1);
        let half_z = _mm512_set1_epi64(1i64 << (log_z - 1));
        let top_shift = (t - 1) as u32 * log_z;
        let top_bias = _mm512_set1_epi64(1i64 << (62 - top_shift));
        let (pp0, pp1) = (_mm256_set1_epi32(P0 as i32), _mm256_set1_epi32(P1 as i32));
        let mut i = 0;
        while i < n8 {
            // SAFETY: i + 8 ≤ n8 ≤ n: the loads read res[i..i+8] and
            // res[n+i..n+i+8]; the stores write out[k·2n + i..+8] and
            // out[k·2n + n + i..+8] for k < t, inside out (len t·2n).
            unsafe {
                let r0 = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                    res.as_ptr().add(i) as *const __m256i
                ));
                let r1 = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                    res.as_ptr().add(n + i) as *const __m256i
                ));
                // Crt::combine: x = r0 + P0·((r1 − r0 mod P1)·P0^{-1} mod P1)
                let r0m = _mm512_min_epu64(r0, _mm512_sub_epi64(r0, p1));
                let diff = _mm512_sub_epi64(r1, r0m);
                let diff = _mm512_min_epu64(diff, _mm512_add_epi64(diff, p1));
                let q = _mm512_srli_epi64(_mm512_mul_epu32(diff, ws), 32);
                let k = _mm512_sub_epi64(_mm512_mul_epu32(diff, w), _mm512_mul_epu32(q, p1));
                let k = _mm512_min_epu64(k, _mm512_sub_epi64(k, p1));
                let x = _mm512_add_epi64(r0, _mm512_mul_epu32(k, p0));
                // centre and offset (see crt_gadget_digits)
                let above = _mm512_cmpgt_epu64_mask(x, half_q2);
                let u = _mm512_add_epi64(x, off);
                let u = _mm512_mask_sub_epi64(u, above, u, q2);
                for k in 0..t {
                    let s = _mm_cvtsi32_si128((k as u32 * log_z) as i32);
                    let v = _mm512_srl_epi64(u, s);
                    let d = if k + 1 < t {
                        _mm512_sub_epi64(_mm512_and_si512(v, mask_z), half_z)
                    } else {
                        _mm512_sub_epi64(v, top_bias)
                    };
                    // |digit| < 2^31: narrow, then the small residues
                    let d = _mm512_cvtepi64_epi32(d);
                    let neg = _mm256_srai_epi32(d, 31);
                    let a0 = _mm256_add_epi32(d, _mm256_and_si256(neg, pp0));
                    let a1 = _mm256_add_epi32(d, _mm256_and_si256(neg, pp1));
                    let o = out.as_mut_ptr().add(k * 2 * n + i);
                    _mm256_storeu_si256(o as *mut __m256i, a0);
                    _mm256_storeu_si256(o.add(n) as *mut __m256i, a1);
                }
            }
            i += 8;
        }
        super::crt_gadget_digits_scalar(crt, res, log_z, t, out, n8);
    }

    /// a − p if a ≥ p, for 64-bit lanes below 2^63 (signed compare).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn csub64(a: __m256i, p: __m256i, p_minus_1: __m256i) -> __m256i {
        _mm256_sub_epi64(a, _mm256_and_si256(_mm256_cmpgt_epi64(a, p_minus_1), p))
    }

    /// 4 coefficients per step.
    ///
    /// # Safety
    /// avx2 must be available; as [`digits512`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn digits256(crt: &Crt, res: &[u32], log_z: u32, t: usize, out: &mut [u32]) {
        let n = res.len() / 2;
        let n4 = n / 4 * 4;
        let (w, ws) = crt.p0_inv();
        let (w, ws) = (_mm256_set1_epi64x(w as i64), _mm256_set1_epi64x(ws as i64));
        let p0 = _mm256_set1_epi64x(P0 as i64);
        let p1 = _mm256_set1_epi64x(P1 as i64);
        let p1m = _mm256_set1_epi64x(P1 as i64 - 1);
        let q2 = _mm256_set1_epi64x(Q2 as i64);
        let half_q2 = _mm256_set1_epi64x((Q2 / 2) as i64);
        let off = _mm256_set1_epi64x(offset(log_z, t) as i64);
        let mask_z = _mm256_set1_epi64x((1i64 << log_z) - 1);
        let half_z = _mm256_set1_epi64x(1i64 << (log_z - 1));
        let top_shift = (t - 1) as u32 * log_z;
        let top_bias = _mm256_set1_epi64x(1i64 << (62 - top_shift));
        let (pp0, pp1) = (_mm_set1_epi32(P0 as i32), _mm_set1_epi32(P1 as i32));
        let evens = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
        let mut i = 0;
        while i < n4 {
            // SAFETY: i + 4 ≤ n4 ≤ n, as in digits512 with 4 lanes.
            unsafe {
                let r0 =
                    _mm256_cvtepu32_epi64(_mm_loadu_si128(res.as_ptr().add(i) as *const __m128i));
                let r1 = _mm256_cvtepu32_epi64(_mm_loadu_si128(
                    res.as_ptr().add(n + i) as *const __m128i
                ));
                // every lane stays below 2^63 until u, so signed compares
                // order them; a "negative" lane is a wrapped difference
                let r0m = csub64(r0, p1, p1m);
                let diff = _mm256_sub_epi64(r1, r0m);
                let diff = _mm256_add_epi64(
                    diff,
                    _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), diff), p1),
                );
                let q = _mm256_srli_epi64(_mm256_mul_epu32(diff, ws), 32);
                let k = _mm256_sub_epi64(_mm256_mul_epu32(diff, w), _mm256_mul_epu32(q, p1));
                let k = csub64(k, p1, p1m);
                let x = _mm256_add_epi64(r0, _mm256_mul_epu32(k, p0));
                let above = _mm256_cmpgt_epi64(x, half_q2);
                let u = _mm256_sub_epi64(_mm256_add_epi64(x, off), _mm256_and_si256(above, q2));
                for k in 0..t {
                    let s = _mm_cvtsi32_si128((k as u32 * log_z) as i32);
                    let v = _mm256_srl_epi64(u, s);
                    let d = if k + 1 < t {
                        _mm256_sub_epi64(_mm256_and_si256(v, mask_z), half_z)
                    } else {
                        _mm256_sub_epi64(v, top_bias)
                    };
                    let d = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(d, evens));
                    let neg = _mm_srai_epi32(d, 31);
                    let a0 = _mm_add_epi32(d, _mm_and_si128(neg, pp0));
                    let a1 = _mm_add_epi32(d, _mm_and_si128(neg, pp1));
                    let o = out.as_mut_ptr().add(k * 2 * n + i);
                    _mm_storeu_si128(o as *mut __m128i, a0);
                    _mm_storeu_si128(o.add(n) as *mut __m128i, a1);
                }
            }
            i += 4;
        }
        super::crt_gadget_digits_scalar(crt, res, log_z, t, out, n4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 16
    }

    /// Runs `f` if this CPU has AVX2; otherwise notes the skip.
    fn with_avx2(name: &str, f: impl FnOnce()) {
        #[cfg(target_arch = "x86_64")]
        {
            if avx2() {
                f();
                return;
            }
        }
        let _ = f;
        eprintln!("{name}: skipped, no AVX2 on this machine");
    }

    #[test]
    fn ntt_avx2_matches_scalar() {
        with_avx2("ntt_avx2_matches_scalar", || {
            #[cfg(target_arch = "x86_64")]
            {
                use crate::arith::{Modulus, P0, P1};
                use crate::ntt::NttTable;
                let mut s = 21;
                for n in [32usize, 64, 128, 256, 1024, 2048, 4096] {
                    for p in [P0, P1] {
                        let tab = NttTable::new(Modulus::new(p), n);
                        let r = |s: &mut u64, bound: u32| -> Vec<u32> {
                            (0..n).map(|_| (lcg(s) % bound as u64) as u32).collect()
                        };
                        for _ in 0..3 {
                            // forward inputs anywhere in [0, 4p) exercise the lazy ranges
                            let a = r(&mut s, 4 * p);
                            let (mut f, mut g) = (a.clone(), a.clone());
                            // SAFETY: AVX2 was detected; a.len() = n ≥ 32.
                            unsafe { ntt_avx2::forward(&tab, &mut f) };
                            tab.forward_scalar(&mut g);
                            assert_eq!(f, g, "forward n={n} p={p}");
                            // inverse of the transform, and of arbitrary slots in [0, p)
                            for b in [f, r(&mut s, p)] {
                                let (mut fi, mut gi) = (b.clone(), b.clone());
                                // SAFETY: as above.
                                unsafe { ntt_avx2::inverse(&tab, &mut fi) };
                                tab.inverse_scalar(&mut gi);
                                assert_eq!(fi, gi, "inverse n={n} p={p}");
                            }
                            let mut rt = a.clone();
                            // SAFETY: as above.
                            unsafe {
                                ntt_avx2::forward(&tab, &mut rt);
                                ntt_avx2::inverse(&tab, &mut rt);
                            }
                            assert_eq!(rt, a.iter().map(|&x| x % p).collect::<Vec<_>>());
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn simd_kernel_matches_scalar_reference() {
        use crate::db::Database;
        use crate::params::DbShape;
        let mut s = 1;
        for (ell1, ell2) in [
            (1usize, 1usize),
            (16, 4),
            (17, 5),
            (31, 9),
            (32, 8),
            (33, 17),
            (64, 19),
            (100, 9),
            (1024, 13),
            (4096, 64),
            (4160, 23),
            (130, 7),
            (2048, 19),
            (1056, 9),
            (3072, 8),
            // more than BATCH_GROUPS tile groups: a batch takes turns and
            // prefetches the next run (across panels in the second shape)
            (64, BATCH_RUN_BYTES / 64 + 100),
            (1024, BATCH_RUN_BYTES / 1024 * 8 + 100),
        ] {
            let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
            let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
            let view = View::of(&db);
            for nq in [1, 2, 3] {
                let qs: Vec<Vec<u32>> = (0..nq)
                    .map(|_| (0..ell1).map(|_| lcg(&mut s) as u32).collect())
                    .collect();
                let split: Vec<SplitQuery> = qs.iter().map(|q| SplitQuery::new(q)).collect();
                let mut out = vec![vec![0u32; ell2]; nq];
                simplepir(&db, &split, &mut out);
                for (q, o) in qs.iter().zip(&out) {
                    let mut want = vec![0u32; ell2];
                    simplepir_scalar(&cm, ell1, q, &mut want);
                    assert_eq!(o, &want, "{ell1}x{ell2} via {}", simplepir_impl());
                }
                for k in Kernel::available() {
                    let mut twin = vec![vec![7u32; ell2]; nq];
                    answer_with(k, &view, &split, &mut twin);
                    assert_eq!(twin, out, "{ell1}x{ell2}, {nq} queries via {k:?}");
                }
            }
        }
    }

    #[test]
    fn tile_kernels_match_scalar_twin() {
        let mut s = 11;
        for rows in [32usize, 64, 352, 1024] {
            let tile: Vec<u8> = (0..8 * rows).map(|_| lcg(&mut s) as u8).collect();
            let mut c1: Vec<u32> = (0..rows).map(|_| lcg(&mut s) as u32).collect();
            // extreme entries: every byte limb at 0 and 255, both halves ±2^15
            c1[0] = u32::MAX;
            c1[1] = 0x8000_8000;
            c1[2] = 0x7fff_7fff;
            let q = SplitQuery::new(&c1);
            let view = q.rows(0, rows);
            let start: [u32; 8] = std::array::from_fn(|_| lcg(&mut s) as u32);
            let mut want = start;
            block_scalar(&tile, view.lo, view.hi, &mut want);
            // naive: Σ c·d added to the start values
            for (c, &w) in want.iter().enumerate() {
                let mut acc = start[c];
                for (r, &q) in c1.iter().enumerate() {
                    let d = tile[r / 32 * 256 + c * 32 + r % 32] as i8 as i32 as u32;
                    acc = acc.wrapping_add(q.wrapping_mul(d));
                }
                assert_eq!(w, acc, "rows {rows} column {c}");
            }
            for k in Kernel::available() {
                let mut got = start;
                block_with(k, &tile, view, &tile[..tile.len().min(300)], &mut got);
                assert_eq!(got, want, "rows {rows} via {k:?}");
            }
        }
        // records at the extremes (−128, 127) against the extreme entries
        let rows = 64;
        let tile: Vec<u8> = (0..8 * rows)
            .map(|i| if i % 3 == 0 { 0x80 } else { 0x7f })
            .collect();
        let c1: Vec<u32> = (0..rows as u32)
            .map(|i| if i % 2 == 0 { u32::MAX } else { 0xff00_ff00 })
            .collect();
        let q = SplitQuery::new(&c1);
        let mut want = [0u32; 8];
        block_scalar(&tile, q.rows(0, rows).lo, q.rows(0, rows).hi, &mut want);
        for k in Kernel::available() {
            let mut got = [0u32; 8];
            block_with(k, &tile, q.rows(0, rows), &[], &mut got);
            assert_eq!(got, want, "extremes via {k:?}");
        }
    }

    #[test]
    fn kernels_agree_at_every_prefetch_distance() {
        use crate::db::Database;
        use crate::params::DbShape;
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = 5;
        let (ell1, ell2) = (2048usize, 40usize);
        let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
        let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
        let c1: Vec<u32> = (0..ell1).map(|_| lcg(&mut s) as u32).collect();
        let mut want = vec![0u32; ell2];
        simplepir_scalar(&cm, ell1, &c1, &mut want);
        let split = [SplitQuery::new(&c1)];
        let view = View::of(&db);
        for &d in &PREFETCH_CANDIDATES {
            // Other tests may run meanwhile: the distance only changes
            // speed, never results, so sharing the global is harmless.
            PF_DIST.store(d, Relaxed);
            for k in Kernel::available() {
                let mut got = vec![vec![0u32; ell2]];
                answer_with(k, &view, &split, &mut got);
                assert_eq!(got[0], want, "distance {d} via {k:?}");
            }
        }
        PF_DIST.store(PREFETCH_DEFAULT, Relaxed);
    }

    #[test]
    fn prefetch_measurement_reports_every_candidate() {
        use crate::db::Database;
        use crate::params::DbShape;
        let shape = DbShape {
            ell1: 4096,
            ell2: 64,
        };
        let db = Database::zeros(shape, 8);
        let view = View::of(&db);
        assert!(view.panels() > 1);
        let t = measure_prefetch(Kernel::selected(), &view, 2);
        assert_eq!(t.span_bytes, 2 * view.panel * view.tiled_cols);
        assert_eq!(
            t.candidates.iter().map(|c| c.0).collect::<Vec<_>>(),
            PREFETCH_CANDIDATES
        );
        assert!(t.candidates.iter().all(|c| c.1 > 0.0));
        let fastest = t.candidates.iter().map(|c| c.1).fold(0.0, f64::max);
        let chosen = t.candidates.iter().find(|c| c.0 == t.chosen).unwrap();
        let none = t.candidates[0].1;
        if t.chosen == 0 {
            // none, unless a distance beat it by more than the margin
            assert!(fastest <= none * (1.0 + PREFETCH_MARGIN) + 1e-9);
        } else {
            assert_eq!(chosen.1, fastest);
            assert!(chosen.1 > none);
        }
        // too small to measure on: no tuning, nothing cached
        assert_eq!(
            tune_prefetch(&db).filter(|t| !t.forced && t.span_bytes < MIN_TUNE_BYTES),
            None
        );
        PF_DIST.store(PREFETCH_DEFAULT, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn montgomery_keyswitch_matches_naive() {
        let mut s = 3;
        for p in [crate::arith::P0, crate::arith::P1] {
            let m = Mont::new(p);
            assert_eq!(m.p.wrapping_mul(m.pinv_neg), u32::MAX); // p·(−p^{-1}) = −1
            for n in [1usize, 15, 16, 33, 2048] {
                let t = 3;
                let stride = n + 5;
                let w: Vec<u32> = (0..t * stride)
                    .map(|_| (lcg(&mut s) % p as u64) as u32)
                    .collect();
                let g: Vec<u32> = (0..t * stride)
                    .map(|_| (lcg(&mut s) % p as u64) as u32)
                    .collect();
                let wm: Vec<u32> = w
                    .iter()
                    .map(|&x| (x as u64 * m.r_mod_p as u64 % p as u64) as u32)
                    .collect();
                let init: Vec<u32> = (0..n).map(|_| (lcg(&mut s) % p as u64) as u32).collect();
                let want: Vec<u32> = (0..n)
                    .map(|i| {
                        let mut a = init[i] as u128;
                        for k in 0..t {
                            a += w[k * stride + i] as u128 * g[k * stride + i] as u128;
                        }
                        (a % p as u128) as u32
                    })
                    .collect();
                let mut fast = init.clone();
                keyswitch_acc(&m, &wm, &g, t, stride, n, &mut fast);
                let mut slow = init.clone();
                keyswitch_acc_scalar(&m, &wm, &g, t, stride, 0, n, &mut slow);
                assert_eq!(fast, want, "p={p} n={n}");
                assert_eq!(slow, want);
            }
        }
    }

    #[test]
    fn node_combination_kernels_match_scalar() {
        let mut s = 8;
        for p in [crate::arith::P0, crate::arith::P1] {
            let m = Mont::new(p);
            for n in [5usize, 16, 2048] {
                let r = |s: &mut u64| {
                    (0..n)
                        .map(|_| (lcg(s) % p as u64) as u32)
                        .collect::<Vec<u32>>()
                };
                let (e, o, mono) = (r(&mut s), r(&mut s), r(&mut s));
                let (mut p1, mut m1, mut p2, mut m2) =
                    (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
                plus_minus(&m, &e, &o, &mono, &mut p1, &mut m1);
                plus_minus_scalar(&m, &e, &o, &mono, &mut p2, &mut m2, 0, n);
                assert_eq!((&p1, &m1), (&p2, &m2));
                for i in 0..n {
                    let xo = (o[i] as u64 * mono[i] as u64 % p as u64 * Mont::new(p).pinv_inv_r()
                        % p as u64) as u32;
                    assert_eq!(p1[i] as u64, (e[i] as u64 + xo as u64) % p as u64);
                }
                // reversal: block-structured when 16 | n (vpermd path)
                let perm: Vec<u32> = (0..n as u32).rev().collect();
                let sp = SlotPerm::new(perm.clone());
                assert_eq!(sp.within16, n % 16 == 0);
                let (mut a, mut b) = (vec![0; n], vec![0; n]);
                add_permuted(p, &p1, &m1, &sp, &mut a);
                add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
                assert_eq!(a, b);
                assert_eq!(a[0] as u64, (p1[0] as u64 + m1[n - 1] as u64) % p as u64);
                // a random permutation: not block-structured (gather path)
                let mut perm: Vec<u32> = (0..n as u32).collect();
                for i in (1..n).rev() {
                    perm.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
                }
                let sp = SlotPerm::new(perm.clone());
                assert!(n <= 16 || !sp.within16);
                add_permuted(p, &p1, &m1, &sp, &mut a);
                add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
                assert_eq!(a, b, "random permutation n={n}");
            }
            // the automorphisms of every packing level (block-structured)
            let ctx = crate::rns::Context::new(crate::params::TABLE1);
            let n = ctx.params.d2;
            let r = |s: &mut u64| {
                (0..n)
                    .map(|_| (lcg(s) % p as u64) as u32)
                    .collect::<Vec<u32>>()
            };
            for lc in &ctx.levels {
                assert!(lc.perm.within16 && lc.perm.within8);
                let (plus, minus) = (r(&mut s), r(&mut s));
                let (mut a, mut b) = (vec![0; n], vec![0; n]);
                add_permuted(p, &plus, &minus, &lc.perm, &mut a);
                add_permuted_scalar(p, &plus, &minus, &lc.perm.perm, &mut b, 0);
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn crt_gadget_digits_match_scalar() {
        use crate::arith::{small_residue, Crt, MODS, Q2};
        let crt = Crt::new();
        let mut s = 77;
        for (log_z, t) in [(19u32, 3usize), (27, 3), (14, 4), (10, 6)] {
            let (z, half) = (1u64 << log_z, 1u64 << (log_z - 1));
            let edges = [
                0,
                1,
                half - 1,
                half,
                z - 1,
                z,
                Q2 / 2 - 1,
                Q2 / 2,
                Q2 / 2 + 1,
                Q2 - half,
                Q2 - half - 1,
                Q2 - 1,
            ];
            for n in [1usize, 5, 8, 13, 64, 2048] {
                let xs: Vec<u64> = (0..n)
                    .map(|i| edges.get(i).copied().unwrap_or_else(|| lcg(&mut s) % Q2))
                    .collect();
                let mut res = vec![0u32; 2 * n];
                for (i, &x) in xs.iter().enumerate() {
                    (res[i], res[n + i]) = Crt::split(x);
                }
                let mut want = vec![0u32; t * 2 * n];
                crt_gadget_digits_scalar(&crt, &res, log_z, t, &mut want, 0);
                // the scalar twin: digits in range that recombine to x
                for (i, &x) in xs.iter().enumerate() {
                    let mut sum = 0i128;
                    for k in (0..t).rev() {
                        let r = want[k * 2 * n + i];
                        let p = MODS[0].p;
                        let d = if r > p / 2 {
                            r as i64 - p as i64
                        } else {
                            r as i64
                        };
                        assert_eq!(want[k * 2 * n + n + i], small_residue(&MODS[1], d));
                        if k + 1 < t {
                            assert!(-(half as i64) <= d && d < half as i64);
                        }
                        sum = sum * z as i128 + d as i128;
                    }
                    assert_eq!(sum.rem_euclid(Q2 as i128) as u64, x);
                }
                let mut got = vec![0u32; t * 2 * n];
                crt_gadget_digits(&crt, &res, log_z, t, &mut got);
                assert_eq!(got, want, "dispatched log_z={log_z} t={t} n={n}");
                #[cfg(target_arch = "x86_64")]
                if avx2() {
                    got.fill(0);
                    // SAFETY: avx2 detected; lengths as crt_gadget_digits asserts.
                    unsafe { digits_simd::digits256(&crt, &res, log_z, t, &mut got) };
                    assert_eq!(got, want, "avx2 log_z={log_z} t={t} n={n}");
                }
            }
        }
    }

    #[test]
    fn reversed_residues_match_scalar() {
        use crate::arith::{P0, P1};
        let mut s = 79;
        for (len, d) in [
            (0usize, 4usize),
            (1, 1),
            (7, 8),
            (8, 8),
            (15, 19),
            (16, 16),
            (17, 40),
            (100, 128),
            (2048, 2048),
            (2045, 2048),
        ] {
            let src: Vec<i16> = (0..len)
                .map(|i| match i % 5 {
                    0 => i16::MIN,
                    1 => i16::MAX,
                    2 => -1,
                    _ => lcg(&mut s) as i16,
                })
                .collect();
            let mut want = vec![7u32; 2 * d];
            reversed_residues_i16_scalar(&src, &mut want, 0);
            for m in 0..d {
                let v = if m < d - len {
                    0
                } else {
                    src[len - 1 - (m - (d - len))] as i64
                };
                assert_eq!(want[m] as i64, v.rem_euclid(P0 as i64));
                assert_eq!(want[d + m] as i64, v.rem_euclid(P1 as i64));
            }
            let mut got = vec![7u32; 2 * d];
            reversed_residues_i16(&src, &mut got);
            assert_eq!(got, want, "dispatched len={len} d={d}");
            #[cfg(target_arch = "x86_64")]
            if avx2() {
                got.fill(7);
                // SAFETY: avx2 detected; src.len() ≤ d.
                unsafe { digits_simd::reversed256(&src, &mut got) };
                assert_eq!(got, want, "avx2 len={len} d={d}");
            }
        }
    }

    #[test]
    fn permute_matches_scalar() {
        let mut s = 78;
        let ctx = crate::rns::Context::new(crate::params::TABLE1);
        let n = ctx.params.d2;
        let src: Vec<u32> = (0..n).map(|_| lcg(&mut s) as u32).collect();
        let mut perms: Vec<SlotPerm> = ctx.levels.iter().map(|lc| lc.perm.clone()).collect();
        // and one that is not block-structured (gathers)
        let mut random: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            random.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
        }
        perms.push(SlotPerm::new(random));
        for sp in &perms {
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            permute(&src, sp, &mut a);
            permute_scalar(&src, &sp.perm, &mut b, 0);
            assert_eq!(a, b);
            assert!((0..n).all(|i| a[i] == src[sp[i] as usize]));
            #[cfg(target_arch = "x86_64")]
            if avx2() {
                a.fill(0);
                // SAFETY: avx2 detected; sp is a permutation of 0..n.
                unsafe { digits_simd::permute256(&src, &sp.perm, sp.within8, &mut a) };
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn keyswitch_avx2_kernels_match_scalar() {
        with_avx2("keyswitch_avx2_kernels_match_scalar", || {
            #[cfg(target_arch = "x86_64")]
            {
                let mut s = 31;
                for p in [crate::arith::P0, crate::arith::P1] {
                    let m = Mont::new(p);
                    for n in [1usize, 7, 8, 9, 15, 16, 33, 1000, 2048] {
                        let r = |s: &mut u64, len: usize| -> Vec<u32> {
                            (0..len).map(|_| (lcg(s) % p as u64) as u32).collect()
                        };
                        // keyswitch_acc: t rows of stride n + 5 (w in Montgomery form)
                        for t in 1..=3 {
                            let stride = n + 5;
                            let (w, g) = (r(&mut s, t * stride), r(&mut s, t * stride));
                            let init = r(&mut s, n);
                            let (mut a, mut b) = (init.clone(), init.clone());
                            // SAFETY: AVX2 detected; rows and out have the lengths required.
                            unsafe { avx2_ks::keyswitch_acc(&m, &w, &g, t, stride, n, &mut a) };
                            keyswitch_acc_scalar(&m, &w, &g, t, stride, 0, n, &mut b);
                            assert_eq!(a, b, "keyswitch p={p} n={n} t={t}");
                        }
                        // plus_minus
                        let (e, o, mono) = (r(&mut s, n), r(&mut s, n), r(&mut s, n));
                        let (mut p1, mut m1, mut p2, mut m2) =
                            (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
                        // SAFETY: AVX2 detected; all slices have n words.
                        unsafe { avx2_ks::plus_minus(&m, &e, &o, &mono, &mut p1, &mut m1) };
                        plus_minus_scalar(&m, &e, &o, &mono, &mut p2, &mut m2, 0, n);
                        assert_eq!((&p1, &m1), (&p2, &m2), "plus_minus p={p} n={n}");
                        // add_permuted with a random permutation
                        let mut perm: Vec<u32> = (0..n as u32).collect();
                        for i in (1..n).rev() {
                            perm.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
                        }
                        let (mut a, mut b) = (vec![0; n], vec![0; n]);
                        // SAFETY: AVX2 detected; perm is a permutation of 0..n
                        // (random: the gather path).
                        unsafe { avx2_ks::add_permuted(p, &p1, &m1, &perm, false, &mut a) };
                        add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
                        assert_eq!(a, b, "add_permuted p={p} n={n}");
                        // block-structured (reversal, 8 | n): the vpermd path
                        if n % 8 == 0 {
                            let rev: Vec<u32> = (0..n as u32).rev().collect();
                            assert!(SlotPerm::new(rev.clone()).within8);
                            // SAFETY: AVX2 detected; the reversal maps aligned
                            // blocks of 8 onto aligned blocks of 8, 8 | n.
                            unsafe { avx2_ks::add_permuted(p, &p1, &m1, &rev, true, &mut a) };
                            add_permuted_scalar(p, &p1, &m1, &rev, &mut b, 0);
                            assert_eq!(a, b, "add_permuted (blocks) p={p} n={n}");
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn pack_columns8_matches_scalar() {
        let mut s = 12;
        // one scratch for every call: reused at equal n (stale words from
        // the previous call must not leak into the chunks), regrown otherwise
        let mut scratch = Vec::new();
        for (w, pb) in [(28u32, 15u32), (31, 16), (9, 9), (20, 3)] {
            for n in [1usize, 5, 8, 13, 64, 64, 1024] {
                let cols: Vec<Vec<u32>> = (0..8)
                    .map(|_| (0..n).map(|_| lcg(&mut s) as u32).collect())
                    .collect();
                let chunks = (n * w as usize).div_ceil(pb as usize);
                let starts: Vec<(u32, u32)> = (0..chunks)
                    .map(|k| {
                        (
                            (k * pb as usize / w as usize) as u32,
                            (k * pb as usize % w as usize) as u32,
                        )
                    })
                    .filter(|&(i, _)| (i as usize) < n)
                    .collect();
                let refs: [&[u32]; 8] = std::array::from_fn(|c| cols[c].as_slice());
                for stride in [8usize, 13] {
                    let len = starts.len() * stride;
                    let (mut a, mut b) = (vec![0i16; len], vec![0i16; len]);
                    pack_columns8(refs, w, pb, &starts, &mut scratch, &mut a, stride);
                    pack_columns8_scalar(refs, w, pb, &starts, &mut b, stride);
                    assert_eq!(a, b, "w={w} pb={pb} n={n} stride={stride}");
                }
            }
        }
    }

    #[test]
    fn pack_groups_matches_scalar() {
        let mut s = 11;
        for (w, pb) in [(28u32, 15u32), (32, 16), (9, 9), (20, 3)] {
            let r: Vec<u32> = (0..200)
                .map(|_| (lcg(&mut s) as u32) & (((1u64 << w) - 1) as u32))
                .collect();
            let groups: Vec<PackGroup> = (0..20)
                .map(|_| {
                    let mut g = PackGroup {
                        idx: [0; 16],
                        off: [0; 8],
                        base: (lcg(&mut s) % 180) as u32,
                    };
                    for t in 0..8 {
                        g.idx[t] = (lcg(&mut s) % 9) as u32;
                        g.idx[t + 8] = g.idx[t] + 1;
                        g.off[t] = lcg(&mut s) % w as u64;
                    }
                    g
                })
                .collect();
            for stride in [1usize, 5] {
                let n = 8 * groups.len() * stride;
                let (mut a, mut b) = (vec![0i16; n], vec![0i16; n]);
                pack_groups(&r, &groups, w, pb, &mut a, stride);
                pack_groups_scalar(&r, &groups, w, pb, &mut b, stride);
                assert_eq!(a, b, "w={w} pb={pb} stride={stride}");
            }
        }
    }

    #[test]
    fn pack_avx2_kernels_match_scalar() {
        with_avx2("pack_avx2_kernels_match_scalar", || {
            #[cfg(target_arch = "x86_64")]
            {
                let mut s = 13;
                for (w, pb) in [(28u32, 15u32), (31, 16), (32, 16), (9, 9), (20, 3), (1, 1)] {
                    let mask = ((1u64 << w) - 1) as u32;
                    // pack_groups: random groups over 200 values, as in
                    // pack_groups_matches_scalar, plus offsets up to w − 1
                    let r: Vec<u32> = (0..200).map(|_| (lcg(&mut s) as u32) & mask).collect();
                    for ng in [0usize, 1, 3, 20] {
                        let groups: Vec<PackGroup> = (0..ng)
                            .map(|_| {
                                let mut g = PackGroup {
                                    idx: [0; 16],
                                    off: [0; 8],
                                    base: (lcg(&mut s) % 180) as u32,
                                };
                                for t in 0..8 {
                                    g.idx[t] = (lcg(&mut s) % 15) as u32;
                                    g.idx[t + 8] = g.idx[t] + 1;
                                    g.off[t] = lcg(&mut s) % w as u64;
                                }
                                g.off[0] = w as u64 - 1;
                                g
                            })
                            .collect();
                        for stride in [1usize, 5] {
                            let len = (8 * ng * stride).max(1);
                            let (mut a, mut b) = (vec![0i16; len], vec![0i16; len]);
                            // SAFETY: AVX2 detected; r holds base + 16 values,
                            // indices < 16, offsets < w, out long enough.
                            unsafe { pack_simd::groups256(&r, &groups, w, pb, &mut a, stride) };
                            pack_groups_scalar(&r, &groups, w, pb, &mut b, stride);
                            assert_eq!(a, b, "groups w={w} pb={pb} ng={ng} stride={stride}");
                        }
                    }
                    // pack_columns8's chunk step on interleaved values
                    if w == 32 {
                        continue; // pack_columns8 takes w < 32
                    }
                    for n in [1usize, 5, 64, 300] {
                        let r: Vec<u32> = (0..8 * (n + 1))
                            .map(|_| (lcg(&mut s) as u32) & mask)
                            .collect();
                        let starts: Vec<(u32, u32)> = (0..(n * w as usize).div_ceil(pb as usize))
                            .map(|k| {
                                let bit = k * pb as usize;
                                ((bit / w as usize) as u32, (bit % w as usize) as u32)
                            })
                            .filter(|&(i, _)| (i as usize) < n)
                            .collect();
                        for stride in [8usize, 13] {
                            let len = starts.len() * stride;
                            let (mut a, mut b) = (vec![0i16; len], vec![0i16; len]);
                            // SAFETY: AVX2 detected; every window i + 1 ≤ n is
                            // inside r, every store inside out, off < w.
                            unsafe { pack_simd::columns8_256(&r, w, pb, &starts, &mut a, stride) };
                            pack_columns8_chunks(&r, w, pb, &starts, &mut b, stride);
                            assert_eq!(a, b, "columns8 w={w} pb={pb} n={n} stride={stride}");
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn mul_acc_lazy_avx2_matches_scalar() {
        with_avx2("mul_acc_lazy_avx2_matches_scalar", || {
            #[cfg(target_arch = "x86_64")]
            {
                let mut s = 17;
                for n in [0usize, 1, 7, 8, 9, 31, 1024, 2048, 2053] {
                    let r = |s: &mut u64, len: usize| -> Vec<u32> {
                        (0..len).map(|_| (lcg(s) % (1 << 28)) as u32).collect()
                    };
                    // a and b may be longer than acc
                    let (a, b) = (r(&mut s, n + 3), r(&mut s, n));
                    let init: Vec<u64> = (0..n).map(|_| lcg(&mut s) >> 2).collect();
                    let (mut x, mut y) = (init.clone(), init.clone());
                    let mut z = init.clone();
                    for _ in 0..3 {
                        // SAFETY: AVX2 detected; a, b hold ≥ n words.
                        unsafe { rns_simd::mul_acc_lazy_avx2(&a, &b, &mut x) };
                        mul_acc_lazy_scalar(&a, &b, &mut y, 0);
                        if avx512() {
                            // SAFETY: AVX-512F detected; a, b hold ≥ n words.
                            unsafe { rns_simd::mul_acc_lazy_avx512(&a, &b, &mut z) };
                        }
                    }
                    assert_eq!(x, y, "n={n}");
                    if avx512() {
                        assert_eq!(z, y, "avx512 n={n}");
                    }
                    for i in 0..n {
                        assert_eq!(y[i], init[i] + 3 * a[i] as u64 * b[i] as u64);
                    }
                }
            }
        });
    }

    #[test]
    fn add_scaled_runs_matches_scalar() {
        let mut s = 4;
        for n in [0usize, 7, 8, 17, 1023, 1024] {
            let g: Vec<u32> = (0..3 * n + 5).map(|_| lcg(&mut s) as u32).collect();
            let init: Vec<u32> = (0..n).map(|_| lcg(&mut s) as u32).collect();
            for nt in [0usize, 1, 2, 33] {
                let terms: Vec<(u32, usize)> = (0..nt)
                    .map(|_| (lcg(&mut s) as u32, (lcg(&mut s) as usize) % (2 * n + 6)))
                    .collect();
                let (mut a, mut b) = (init.clone(), init.clone());
                add_scaled_runs(&mut a, &terms, &g);
                add_scaled_runs_scalar(&mut b, &terms, &g, 0);
                assert_eq!(a, b, "n={n} terms={nt}");
                // and the naive sum, term by term
                let mut c = init.clone();
                for &(d, o) in &terms {
                    for (k, x) in c.iter_mut().enumerate() {
                        *x = x.wrapping_add(d.wrapping_mul(g[o + k]));
                    }
                }
                assert_eq!(a, c);
            }
        }
    }

    #[test]
    fn doublepir_matches_wide_arithmetic() {
        use crate::digits::DigitMatrix;
        let mut s = 9;
        // (rows, ℓ2, extreme): rows not a multiple of 4, ℓ2 not a multiple
        // of 32 and past one or several 1024-column blocks (ragged last
        // block); `extreme` uses the largest digits and residues.
        for (n_rows, ell2, extreme) in [
            (1usize, 1usize, false),
            (3, 301, false),
            (5, 2000, false),
            (4, 2000, true),
            (9, 1024, false),
            (6, 545, true),
            (2, 3100, false),
        ] {
            let rows: Vec<i16> = (0..n_rows * ell2)
                .map(|_| {
                    if extreme {
                        -16384
                    } else {
                        (lcg(&mut s) % 32768) as i16 - 16384
                    }
                })
                .collect();
            let m = DigitMatrix::from_row_major(n_rows, ell2, &rows);
            let residue = |s: &mut u64, p: u32| {
                if extreme {
                    p - 1
                } else {
                    (lcg(s) % p as u64) as u32
                }
            };
            let mut c2s: Vec<Vec<u32>> = Vec::new();
            for _ in 0..3 {
                let mut c2: Vec<u32> = (0..ell2)
                    .map(|_| residue(&mut s, crate::arith::P0))
                    .collect();
                c2.extend((0..ell2).map(|_| residue(&mut s, crate::arith::P1)));
                c2s.push(c2);
            }
            let refs: Vec<&[u32]> = c2s.iter().map(|c| c.as_slice()).collect();
            for k in Kernel::available() {
                // one query, and a batch of three
                for nq in [1, 3] {
                    let mut out = vec![vec![[0u32; 2]; n_rows]; nq];
                    doublepir_with(k, &m, &refs[..nq], &mut out);
                    for (q, o) in out.iter().enumerate() {
                        for r in 0..n_rows {
                            for (h, p) in [crate::arith::P0, crate::arith::P1].iter().enumerate() {
                                let want: i128 = (0..ell2)
                                    .map(|j| {
                                        rows[r * ell2 + j] as i128 * c2s[q][h * ell2 + j] as i128
                                    })
                                    .sum();
                                assert_eq!(
                                    o[r][h] as i128,
                                    want.rem_euclid(*p as i128),
                                    "{k:?} {n_rows}x{ell2} query {q} row {r}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn huge_range_is_the_aligned_interior() {
        let mut small = vec![0u8; HUGE_PAGE_MIN - 1];
        assert_eq!(huge_range(&mut small), None);
        let mut v = vec![0u8; 3 * HUGE_PAGE + 12345];
        let p = v.as_ptr() as usize;
        let (start, len) = huge_range(&mut v).expect("large enough");
        assert_eq!(start % HUGE_PAGE, 0);
        assert_eq!(len % HUGE_PAGE, 0);
        assert!(start >= p && start - p < HUGE_PAGE);
        assert!(start + len <= p + v.len() && p + v.len() - (start + len) < HUGE_PAGE);
    }

    #[test]
    fn huge_page_advice_keeps_contents() {
        // zeroed before and after the advice, writable afterwards
        let mut v = zeroed_huge::<u32>(3 << 20);
        assert!(v.iter().all(|&x| x == 0));
        for (i, x) in v.iter_mut().enumerate() {
            *x = (i as u32).wrapping_mul(2654435761);
        }
        // collapsing written pages must not change a byte, whatever the
        // kernel answers
        let _ = collapse_huge_pages(&mut v);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u32).wrapping_mul(2654435761)));
        let mut small = vec![7u8; 100];
        assert_eq!(collapse_huge_pages(&mut small), PageAdvice::Skipped);
        assert_eq!(small, vec![7u8; 100]);
    }
}
