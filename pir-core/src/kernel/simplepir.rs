//! The SimplePIR pass c1ᵀ·D (YPIR Construction 3.1, Answer step 1): the
//! dispatch over the [`Kernel`] variants, the scalar twins, and the work
//! split across threads; the instruction-set variants are the submodules
//! `avx2` and `avx512`, the measured prefetch distance is [`tune`].
//!
//! Arithmetic: records are `i8` (representative in [−N/2, N/2)), c1 ∈
//! Z_{2^32}, and no reduction is ever needed because q1 = 2^32 is the
//! machine word (YPIR §4.1 "Modulus selection"). Three splittings of c1:
//!
//! * `pmaddwd` kernels (AVX2, AVX-512BW): c = lo + 2^16·hi with lo, hi
//!   signed 16-bit, so c·d = lo·d + 2^16·(hi·d) mod 2^32, and lo·d, hi·d
//!   fit in 23 bits;
//! * the AVX2 word kernel (groups of 4): the same halves of
//!   a = c_{2m} and b = c_{2m+1} − 2^8·c_{2m}, multiplied by a record
//!   word as stored (rows 2m, 2m + 1, its low byte biased by 2^7) and by
//!   its high byte, so that no record is widened ([`avx2::group_words`]);
//! * the AVX2 `vpmulld` kernel (groups of 4 and 5 where `vpmulld` is as
//!   fast as `vpmaddwd`, [`Avx2Batch`]): whole 32-bit coefficients
//!   c_0, c_1 − 2^8·c_0, c_2 − 2^8·c_1, c_3 − 2^8·c_2 against a column's
//!   quad D (its 4 records biased by 2^7) shifted right by 0, 8, 16 and 24
//!   bits ([`avx2::group_mulld`]);
//! * `vpdpbusd` kernel (AVX-512 VNNI): c = Σ_k 2^{8k}·u_k with u_k the
//!   unsigned bytes of c, and `vpdpbusd` multiplies 4 of them by 4 signed
//!   records and adds the 4 products to a wrapping 32-bit lane.
//!
//! The pass reads the database once, in storage order ([`crate::db`]):
//! panels of up to 2048 rows, tiles of 16 columns inside a panel, each a
//! run of 64-byte quads (4 rows × 16 columns, one column per 32-bit lane).
//! A kernel call takes a *slice* of a tile (a run of quads) and a group of
//! queries, and multiplies every quad by every query of the group, so the
//! slice of each query stays in L1 while the tiles stream past and a batch
//! shares each quad it loads (§4.3 cross-client batching). With
//! `vpdpbusd` a batch takes the same slice of two neighbouring tiles per
//! call ([`panels_pairs`]), so that each query digit it broadcasts feeds
//! two multiplies. A single query, bound by the stream alone, goes through
//! the `vpdpbusd` kernel a panel's tiles per call, so that nothing
//! interrupts the stream between tiles.

use super::Kernel;
#[cfg(target_arch = "x86_64")]
use super::{avx512, avx512_vnni};
use crate::db::GROUP_COLS;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub(super) mod peak;
pub(super) mod tune;

#[cfg(test)]
mod tests;

/// A SimplePIR query vector c1 in the forms the kernels read, zero-padded
/// to a multiple of 64 entries.
#[derive(Clone, Debug)]
pub(crate) struct SplitQuery {
    /// Signed 16-bit halves, `c1[r] ≡ lo[r] + 2^16·hi[r] (mod 2^32)`
    /// (`pmaddwd` kernels, the column-major tail).
    lo: Vec<i16>,
    hi: Vec<i16>,
    /// The same halves per 4-row quad, lo of rows 4i..4i+3 at entries
    /// 8i.., hi at 8i + 4.. (the AVX2 half-quad kernel, [`avx2::group`]:
    /// one pointer per query keeps a group's pointers and accumulators in
    /// registers).
    halves: Vec<i16>,
    /// The AVX2 word kernel's coefficients ([`avx2::group_words`]), four
    /// words per 4-row quad: with a_m = c1[4i + 2m] and
    /// b_m = c1[4i + 2m + 1] − 2^8·c1[4i + 2m] (m = 0, 1), each split as
    /// lo + 2^16·hi like `lo`/`hi`, word 0 packs lo(a_0) | lo(a_1) << 16,
    /// word 1 the two hi(a), words 2 and 3 the same of b.
    words: Vec<u32>,
    /// `even[i]` = Σ c1[r] over the even rows r < 4i, wrapping: the word
    /// kernel's bias over rows r0..r1 is 2^7·(even[r1/4] − even[r0/4]).
    even: Vec<u32>,
    /// The `vpmulld` kernel's coefficients ([`avx2::group_mulld`]), four
    /// per 4-row quad: with c_x = c1[4i + x], c_0, c_1 − 2^8·c_0,
    /// c_2 − 2^8·c_1, c_3 − 2^8·c_2 (wrapping).
    dwords: Vec<u32>,
    /// `all[i]` = Σ c1[r] over the rows r < 4i, wrapping: the `vpmulld`
    /// kernel's bias over rows r0..r1 is 2^7·(all[r1/4] − all[r0/4]).
    all: Vec<u32>,
    /// The bytes of c1 per 4-row quad, `c1[r] = Σ_k 2^{8k}·u_k[r]`: digit
    /// k of rows 4i..4i+3 at bytes 16i + 4k.. (`vpdpbusd` broadcasts one
    /// digit of a quad, 4 bytes, with one load).
    digits: Vec<u8>,
}

/// Which of [`SplitQuery`]'s kernel-specific forms to build (`lo`/`hi`
/// always are: the column-major tail and the scalar twins read them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Forms {
    halves: bool,
    words: bool,
    dwords: bool,
    digits: bool,
}

impl Forms {
    const ALL: Forms = Forms {
        halves: true,
        words: true,
        dwords: true,
        digits: true,
    };

    /// The forms a pass of `nq` queries with kernel `k` reads
    /// ([`Forms::for_batch`] with this core's [`avx2_batch`]).
    fn for_pass(k: Kernel, nq: usize) -> Forms {
        Self::for_batch(k, avx2_batch(), nq)
    }

    /// The forms a pass of `nq` queries with kernel `k` reads, AVX2 groups
    /// of 4 and more going to kernel `big` ([`groups_with`]): with AVX2
    /// the half-quad form when a group has fewer than 4 queries and the
    /// word or `vpmulld` form when one has 4 or 5 (a batch of 4 needs only
    /// that one, and a split is mostly writes to fresh memory), the bytes
    /// with `vpdpbusd`.
    fn for_batch(k: Kernel, big: Avx2Batch, nq: usize) -> Forms {
        let groups = if k == Kernel::Avx2 {
            groups_with(k, big, nq)
        } else {
            Vec::new()
        };
        let grouped = groups.iter().any(|g| g.len() >= 4);
        Forms {
            halves: groups.iter().any(|g| g.len() < 4),
            words: grouped && big == Avx2Batch::Words,
            dwords: grouped && big == Avx2Batch::Mulld,
            digits: k == Kernel::Avx512Vnni,
        }
    }
}

impl SplitQuery {
    /// Splits c1 into every form (tests and the tuning, which try
    /// several kernels on one query).
    pub(crate) fn new(c1: &[u32]) -> Self {
        Self::with_forms(c1, Forms::ALL)
    }

    /// Splits c1 into `lo`/`hi` and the forms in `forms`, a 4-row quad at
    /// a time. A pass builds only the forms its kernel reads
    /// ([`Forms::for_pass`]): the split is mostly writes to fresh memory,
    /// so every form not read is time lost per query.
    fn with_forms(c1: &[u32], forms: Forms) -> Self {
        let padded = c1.len().div_ceil(64) * 64;
        let quads = padded / 4;
        let sized = |on: bool, per_row: usize| if on { per_row * padded } else { 0 };
        let mut lo = vec![0i16; padded];
        let mut hi = vec![0i16; padded];
        let mut halves = vec![0i16; sized(forms.halves, 2)];
        let mut digits = vec![0u8; sized(forms.digits, 4)];
        let mut words = vec![0u32; sized(forms.words, 1)];
        let mut even = Vec::with_capacity(if forms.words { quads + 1 } else { 0 });
        let mut sum = 0u32;
        let mut dwords = vec![0u32; sized(forms.dwords, 1)];
        let mut all = Vec::with_capacity(if forms.dwords { quads + 1 } else { 0 });
        let mut total = 0u32;
        for i in 0..quads {
            let c: [u32; 4] = std::array::from_fn(|x| c1.get(4 * i + x).copied().unwrap_or(0));
            let (l, h) = (&mut lo[4 * i..4 * i + 4], &mut hi[4 * i..4 * i + 4]);
            for x in 0..4 {
                (l[x], h[x]) = split16(c[x]);
            }
            if forms.halves {
                halves[8 * i..8 * i + 4].copy_from_slice(l);
                halves[8 * i + 4..8 * i + 8].copy_from_slice(h);
            }
            if forms.digits {
                for (x, v) in c.iter().enumerate() {
                    for (k, b) in v.to_le_bytes().into_iter().enumerate() {
                        digits[16 * i + 4 * k + x] = b;
                    }
                }
            }
            if forms.words {
                // a_m = c[2m], b_m = c[2m + 1] − 2^8·c[2m]
                let a = [c[0], c[2]];
                let b = [c[1].wrapping_sub(c[0] << 8), c[3].wrapping_sub(c[2] << 8)];
                for (j, v) in [a, b].into_iter().enumerate() {
                    let ((xl, xh), (yl, yh)) = (split16(v[0]), split16(v[1]));
                    words[4 * i + 2 * j] = u32::from(xl as u16) | u32::from(yl as u16) << 16;
                    words[4 * i + 2 * j + 1] = u32::from(xh as u16) | u32::from(yh as u16) << 16;
                }
                even.push(sum);
                sum = sum.wrapping_add(c[0]).wrapping_add(c[2]);
            }
            if forms.dwords {
                dwords[4 * i] = c[0];
                for x in 1..4 {
                    dwords[4 * i + x] = c[x].wrapping_sub(c[x - 1] << 8);
                }
                all.push(total);
                total = c.iter().fold(total, |t, &v| t.wrapping_add(v));
            }
        }
        if forms.words {
            even.push(sum);
        }
        if forms.dwords {
            all.push(total);
        }
        SplitQuery {
            lo,
            hi,
            halves,
            words,
            even,
            dwords,
            all,
            digits,
        }
    }

    /// The interleaved halves of rows `r0..r1` (multiples of 4), the AVX2
    /// slice kernel's operand. Each kernel call takes only the slice its
    /// kernel reads, a few inlined instructions per query, where building a
    /// struct of every form through an out-of-line call costs a visible
    /// share of a short kernel call.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline]
    fn halves(&self, r0: usize, r1: usize) -> &[i16] {
        &self.halves[2 * r0..2 * r1]
    }

    /// The word kernel's coefficients of rows `r0..r1` (multiples of 4)
    /// and its bias over them ([`avx2::group_words`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline]
    fn words(&self, r0: usize, r1: usize) -> (&[u32], u32) {
        let bias = self.even[r1 / 4].wrapping_sub(self.even[r0 / 4]) << 7;
        (&self.words[r0..r1], bias)
    }

    /// The `vpmulld` kernel's coefficients of rows `r0..r1` (multiples of
    /// 4) and its bias over them ([`avx2::group_mulld`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline]
    fn dwords(&self, r0: usize, r1: usize) -> (&[u32], u32) {
        let bias = self.all[r1 / 4].wrapping_sub(self.all[r0 / 4]) << 7;
        (&self.dwords[r0..r1], bias)
    }

    /// The bytes of rows `r0..r1` (multiples of 4), the `vpdpbusd`
    /// kernels' operand (see [`SplitQuery::halves`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline]
    fn digits(&self, r0: usize, r1: usize) -> &[u8] {
        &self.digits[4 * r0..4 * r1]
    }

    /// The lo and hi entries of rows `r0..r1` (multiples of 4).
    fn rows(&self, r0: usize, r1: usize) -> QueryRows<'_> {
        debug_assert!(r0.is_multiple_of(4) && r1.is_multiple_of(4));
        QueryRows {
            lo: &self.lo[r0..r1],
            hi: &self.hi[r0..r1],
        }
    }
}

/// `c = lo + 2^16·hi (mod 2^32)` with lo and hi signed 16-bit.
fn split16(c: u32) -> (i16, i16) {
    let l = c as u16 as i16;
    (l, (c.wrapping_sub(l as i32 as u32) >> 16) as u16 as i16)
}

/// The lo and hi halves of a [`SplitQuery`] that one slice of a tile
/// multiplies (the AVX-512BW kernel and the scalar twin).
#[derive(Clone, Copy)]
struct QueryRows<'a> {
    lo: &'a [i16],
    hi: &'a [i16],
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
/// slice before the next one is loaded).
///
/// The tiled columns are walked panel by panel in storage order (see
/// [`crate::db`]): for a panel of P rows only P entries of each query are
/// live, so the query slice sits in L1 while the database streams past it.
/// Partial sums of successive panels are added mod 2^32.
pub(crate) fn simplepir(db: &crate::db::Database, c1s: &[&[u32]], out: &mut [Vec<u32>]) {
    let view = View::of(db);
    assert_eq!(c1s.len(), out.len());
    assert_eq!(view.data.len(), view.ell1 * view.ell2);
    // a single query with the kernel measured to stream it fastest
    let k = tune::pass_kernel(c1s.len());
    let forms = Forms::for_pass(k, c1s.len());
    let queries: Vec<SplitQuery> = c1s
        .iter()
        .map(|c1| {
            assert_eq!(c1.len(), view.ell1, "query length");
            SplitQuery::with_forms(c1, forms)
        })
        .collect();
    let queries = &queries[..];
    #[cfg(feature = "parallel")]
    {
        if rayon::current_num_threads() > 1 {
            simplepir_parallel(k, &view, queries, out);
            return;
        }
    }
    answer_with(k, &view, queries, out);
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

/// Most rows of a batch's slice: the slice (16 bytes per row) and one
/// group's digits (5 × 4 bytes per row) take 18 KiB of L1 at 512, and
/// the slice is read from memory once and from L1 by every further group
/// (shorter slices pay the per-call costs more often, longer ones gain
/// nothing). A single query takes a whole tile per call, or
/// with `vpdpbusd` all of a panel's tiles ([`avx512::run_vnni`]).
const SLICE_ROWS: usize = 512;

/// Most rows of a batch's slice with the AVX2 kernel: a whole panel of
/// 2048 (32 KiB of the tile, and 24 KiB of a group's halves), so that
/// the kernel's two half passes, loop exits and reductions are paid once
/// per group and tile. The slice and the halves no longer fit in L1
/// together, but the half-quad kernel reads them from L2 at almost its
/// L1 rate, so fewer, longer calls win.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const AVX2_SLICE_ROWS: usize = 2048;

/// Most queries of one group with the `vpdpbusd` kernel: 4 accumulators
/// each, 20 of the 32 zmm registers (a group of 6, with 24 accumulators,
/// leaves too few registers for the loads ahead and slows down).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const VNNI_GROUP: usize = 5;

/// Most queries of one group with the AVX2 half-quad kernel: 4
/// accumulators each ([`avx2::group`] takes the slice half at a time), 12
/// of the 16 ymm registers beside two quarters of records and a
/// broadcast.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const AVX2_HALF_QUAD_GROUP: usize = 3;

/// Most queries of one group with the AVX2 `vpmulld` kernel
/// ([`avx2::group_mulld`]): 2 accumulators each, 10 of the 16 ymm
/// registers beside the two halves of a quad, their shifts, a broadcast
/// and a product: the larger the group, the more queries share each
/// loaded quad and its shifts.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const AVX2_MULLD_GROUP: usize = 5;

/// Which AVX2 kernel takes the groups of 4 and more of a batch (smaller
/// groups always go to the half-quad kernel, [`avx2::group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Avx2Batch {
    /// The word kernel ([`avx2::group_words`]): groups of 4, `vpmaddwd`
    /// on the records as stored, every broadcast feeding one multiply.
    Words,
    /// The `vpmulld` kernel ([`avx2::group_mulld`]): groups of 4 and 5,
    /// a whole quad per step, every broadcast feeding two multiplies.
    Mulld,
}

/// The AVX2 batch kernel of this core: `PIR_AVX2_BATCH` (`words` or
/// `mulld`) if set, else [`Avx2Batch::Mulld`] where `vpmulld` runs as
/// fast as `vpmaddwd` (`peak::mulld_as_fast`, measured once).
///
/// Both kernels issue 8 multiplies and 8 adds per 64 multiply-accumulates
/// and query; the `vpmulld` kernel needs half the broadcasts and reads
/// each quad once instead of once per half, so it is faster where
/// `vpmulld` is one µop (AMD Zen 4); on cores that split it into two
/// (Intel) it would run at half the rate, hence the measurement.
pub(crate) fn avx2_batch() -> Avx2Batch {
    static B: std::sync::OnceLock<Avx2Batch> = std::sync::OnceLock::new();
    *B.get_or_init(|| match std::env::var("PIR_AVX2_BATCH").as_deref() {
        Ok("words") => Avx2Batch::Words,
        Ok("mulld") => Avx2Batch::Mulld,
        _ => {
            #[cfg(target_arch = "x86_64")]
            if peak::mulld_as_fast() {
                return Avx2Batch::Mulld;
            }
            Avx2Batch::Words
        }
    })
}

/// How many slices ahead of the one being multiplied a batch prefetches
/// the database into L2: the L2 streamer stops at every 4 KiB page, so
/// without it the pass waits for memory, and two slices cover the
/// memory latency with the most room in L2 to spare.
const AHEAD_STEPS: usize = 2;

/// The most queries kernel `k` multiplies per call ([`group_with`]).
fn group_max(k: Kernel) -> usize {
    match k {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512Vnni => VNNI_GROUP,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => match avx2_batch() {
            Avx2Batch::Words => 4,
            Avx2Batch::Mulld => AVX2_MULLD_GROUP,
        },
        // the AVX-512BW kernel takes one query per call; a batch's further
        // queries find the slice in L1
        Kernel::Avx512Bw => 1,
        _ => 4,
    }
}

/// Adds panels p0..p1 of the tiled region to `out[q][..tiled_cols]`, in
/// storage order (§4.3 cross-client batching). Each tile is taken a slice
/// at a time ([`slice_rows_max`] rows for a batch, the whole tile for one
/// query); the queries are split into balanced groups of at most
/// [`group_max`], and every group multiplies the slice in turn: the first
/// group reads it from L2 (where it was prefetched) a line at a time
/// between its multiplies, the others from L1 where it fits beside their
/// operands (the AVX2 kernel's whole-panel slice, [`AVX2_SLICE_ROWS`],
/// every group reads from L2). Meanwhile the slice
/// [`AHEAD_STEPS`] ahead is prefetched into L2, a share per group and one
/// line at a time (a burst fills the miss buffers and stalls the loads).
/// A single query prefetches at the measured distance, with the kernel
/// measured with it ([`tune`]), instead.
/// A batch with the `vpdpbusd` kernel takes the tiles in pairs
/// ([`panels_pairs`]); a last odd tile of each panel goes one tile at a
/// time afterwards (database shapes are powers of two, so it is rare).
fn panels_with(
    k: Kernel,
    view: &View<'_>,
    p0: usize,
    p1: usize,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
) {
    let tiles = view.tiled_cols / GROUP_COLS;
    if tiles == 0 || queries.is_empty() || p0 >= p1 {
        return;
    }
    if pairs_for(k, queries.len()) {
        panels_pairs(view, p0, p1, tiles / 2, queries, out);
        tiles_with(k, view, p0, p1, tiles / 2 * 2..tiles, queries, out);
    } else {
        tiles_with(k, view, p0, p1, 0..tiles, queries, out);
    }
}

/// [`panels_with`] over the tiles `tiles` of every panel, one tile at a
/// time.
fn tiles_with(
    k: Kernel,
    view: &View<'_>,
    p0: usize,
    p1: usize,
    tiles: std::ops::Range<usize>,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
) {
    let panel = view.panel;
    let nq = queries.len();
    #[cfg(target_arch = "x86_64")]
    if nq == 1 && k == Kernel::Avx512Vnni && avx512_vnni() {
        // one query with `vpdpbusd`: each panel's tiles in one call
        let region = &view.data[..view.panels() * panel * view.tiled_cols];
        let cols = tiles.start * GROUP_COLS..tiles.end * GROUP_COLS;
        let ahead = tune::prefetch_distance();
        for p in p0..p1 {
            let at = (p * view.tiled_cols + cols.start) * panel;
            let data = &region[at..at + cols.len() * panel];
            let digits = queries[0].digits(p * panel, (p + 1) * panel);
            // SAFETY: avx512f, avx512bw and avx512vnni were detected at
            // runtime; a panel is a multiple of 32 rows, so `digits` holds
            // 16 bytes for each of an even number of quads, `data` whole
            // tiles of that many quads, and `out` 16 words per tile.
            unsafe { avx512::run_vnni(data, digits, ahead, &mut out[0][cols.clone()]) };
        }
        return;
    }
    let slice = if nq == 1 {
        panel
    } else {
        batch_slice_rows(panel, slice_rows_max(k))
    };
    let step = GROUP_COLS * slice;
    let region = &view.data[..view.panels() * panel * view.tiled_cols];
    let ahead_at = if nq == 1 {
        tune::prefetch_distance()
    } else {
        AHEAD_STEPS * step
    };
    // 16 queries in groups of at most 3 are 3, 3, 3, 3, 2, 2, not
    // `chunks(3)`'s 3, 3, 3, 3, 3, 1: a lone query leaves the kernel's
    // widening unshared
    let groups = groups_for(k, nq);
    let mut sums = vec![[0u32; GROUP_COLS]; nq];
    for p in p0..p1 {
        for g in tiles.clone() {
            let cols = g * GROUP_COLS..(g + 1) * GROUP_COLS;
            // the next tile's partial sums (k lines, each in L3 since the
            // last panel) on their way while this tile computes
            for o in out.iter() {
                crate::mem::prefetch(o, cols.end);
            }
            for (sum, o) in sums.iter_mut().zip(out.iter()) {
                sum.copy_from_slice(&o[cols.clone()]);
            }
            for s in 0..panel / slice {
                let at = (p * view.tiled_cols + g * GROUP_COLS) * panel + s * step;
                let data = &region[at..at + step];
                let ahead = match ahead_at {
                    0 => &[][..],
                    d => {
                        let a = (at + d).min(region.len());
                        &region[a..(a + step).min(region.len())]
                    }
                };
                let r0 = p * panel + s * slice;
                for (gi, gq) in groups.iter().enumerate() {
                    let (qs, ss) = (&queries[gq.clone()], &mut sums[gq.clone()]);
                    let share = line_share(ahead, groups.len(), gi);
                    group_with(k, data, qs, (r0, r0 + slice), share, ss);
                }
            }
            for (sum, o) in sums.iter().zip(out.iter_mut()) {
                o[cols.clone()].copy_from_slice(sum);
            }
        }
    }
}

/// The rows of a batch's slice in a panel of `panel` rows: the largest
/// multiple of 32 up to `most` that divides the panel.
fn batch_slice_rows(panel: usize, most: usize) -> usize {
    (1..=most / 32)
        .rev()
        .map(|b| 32 * b)
        .find(|s| panel.is_multiple_of(*s))
        .unwrap_or(32)
}

/// Most rows of a batch's slice with kernel `k`.
fn slice_rows_max(k: Kernel) -> usize {
    match k {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => AVX2_SLICE_ROWS,
        _ => SLICE_ROWS,
    }
}

/// Whether kernel `k` takes a batch of `nq` two tiles at a time
/// ([`panels_pairs`]): the `vpdpbusd` kernel for two queries or more.
fn pairs_for(k: Kernel, nq: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        k == Kernel::Avx512Vnni && avx512_vnni() && nq >= 2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (k, nq);
        false
    }
}

/// Most queries of one group of [`avx512::pair_vnni`]: 8 accumulators
/// each, 24 of the 32 zmm registers beside 2 × [`avx512::PAIR_PIPE`]
/// quads and a broadcast. One query alone is latency-bound (8
/// accumulator chains), so a batch is split into groups of 2 and 3
/// ([`balanced_groups`]).
const PAIR_GROUP: usize = 3;

/// The query groups of a batch of `nq` with kernel `k` on this core
/// ([`groups_with`] and [`avx2_batch`]).
fn groups_for(k: Kernel, nq: usize) -> Vec<std::ops::Range<usize>> {
    groups_with(k, avx2_batch(), nq)
}

/// The query groups of a batch of `nq` with kernel `k`, AVX2 groups of 4
/// and more going to kernel `big`: balanced groups of at most
/// [`group_max`], except with AVX2. There, with the `vpmulld` kernel,
/// balanced groups of at most 5, those of 3 and fewer to the half-quad
/// kernel ([`avx2::group`]); with the word kernel ([`avx2::group_words`])
/// the balanced groups of at most 3 are kept and a last two groups of 2
/// become one group of 4: the word kernel pays a broadcast per
/// `vpmaddwd` where the half-quad kernel pays one per two, so it beats a
/// pair of 2s but not groups of 3.
fn groups_with(k: Kernel, big: Avx2Batch, nq: usize) -> Vec<std::ops::Range<usize>> {
    #[cfg(target_arch = "x86_64")]
    if k == Kernel::Avx2 {
        if big == Avx2Batch::Mulld {
            return balanced_groups(nq, AVX2_MULLD_GROUP).collect();
        }
        let mut groups: Vec<_> = balanced_groups(nq, AVX2_HALF_QUAD_GROUP).collect();
        if let [.., a, b] = groups.as_slice() {
            if a.len() == 2 && b.len() == 2 {
                let merged = a.start..b.end;
                groups.truncate(groups.len() - 2);
                groups.push(merged);
            }
        }
        return groups;
    }
    let _ = big;
    balanced_groups(nq, group_max(k)).collect()
}

/// `nq` queries split into the fewest groups of at most `max`, their sizes
/// differing by at most one (7 by 3: 3, 2, 2, never 3, 3, 1): the query
/// ranges of the groups.
fn balanced_groups(nq: usize, max: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let n = nq.div_ceil(max.max(1));
    let (base, extra) = (nq / n.max(1), nq % n.max(1));
    (0..n).scan(0, move |at, g| {
        let len = base + usize::from(g < extra);
        let r = *at..*at + len;
        *at += len;
        Some(r)
    })
}

/// [`panels_with`] for a batch with the two-tile kernel, over the first
/// `pairs` tile pairs of every panel: a slice of both tiles at a time,
/// and while a pair is multiplied the next pair is prefetched into L2, a
/// slice's share per slice. The first group of each slice, which reads it
/// from L2, also stages it into L1 a little ahead of its loads
/// ([`avx512::pair_vnni`]'s `S`).
fn panels_pairs(
    view: &View<'_>,
    p0: usize,
    p1: usize,
    pairs: usize,
    queries: &[SplitQuery],
    out: &mut [Vec<u32>],
) {
    let panel = view.panel;
    let slice = batch_slice_rows(panel, SLICE_ROWS);
    let step = GROUP_COLS * slice;
    let tile_len = GROUP_COLS * panel;
    let region = &view.data[..view.panels() * panel * view.tiled_cols];
    let groups: Vec<_> = balanced_groups(queries.len(), PAIR_GROUP).collect();
    let mut sums = vec![[[0u32; GROUP_COLS]; 2]; queries.len()];
    for p in p0..p1 {
        for g in (0..pairs).map(|pair| 2 * pair) {
            let cols = g * GROUP_COLS..(g + 2) * GROUP_COLS;
            for o in out.iter() {
                crate::mem::prefetch(o, cols.end);
                crate::mem::prefetch(o, cols.end + GROUP_COLS);
            }
            for (sum, o) in sums.iter_mut().zip(out.iter()) {
                sum[0].copy_from_slice(&o[cols.start..cols.start + GROUP_COLS]);
                sum[1].copy_from_slice(&o[cols.start + GROUP_COLS..cols.end]);
            }
            let unit = (p * view.tiled_cols + g * GROUP_COLS) * panel;
            for s in 0..panel / slice {
                let a = (unit + 2 * tile_len + 2 * s * step).min(region.len());
                let ahead = &region[a..(a + 2 * step).min(region.len())];
                let r0 = p * panel + s * slice;
                let at = unit + s * step;
                let data = [
                    &region[at..at + step],
                    &region[at + tile_len..at + tile_len + step],
                ];
                for (gi, gq) in groups.iter().enumerate() {
                    let (qs, ss) = (&queries[gq.clone()], &mut sums[gq.clone()]);
                    let share = line_share(ahead, groups.len(), gi);
                    pair_with(data, qs, (r0, r0 + slice), share, gi == 0, ss);
                }
            }
            for (sum, o) in sums.iter().zip(out.iter_mut()) {
                o[cols.start..cols.start + GROUP_COLS].copy_from_slice(&sum[0]);
                o[cols.start + GROUP_COLS..cols.end].copy_from_slice(&sum[1]);
            }
        }
    }
}

/// [`avx512::pair_vnni`] for a group of at most [`PAIR_GROUP`] queries
/// (the caller checked the CPU); `stage` for the first group of a slice.
fn pair_with(
    data: [&[u8]; 2],
    queries: &[SplitQuery],
    (r0, r1): (usize, usize),
    ahead: &[u8],
    stage: bool,
    out: &mut [[[u32; GROUP_COLS]; 2]],
) {
    assert!(
        queries.len() == out.len()
            && data[0].len() == GROUP_COLS * (r1 - r0)
            && data[1].len() == data[0].len()
            && r0.is_multiple_of(32)
            && r1.is_multiple_of(32),
        "slice shape"
    );
    #[cfg(target_arch = "x86_64")]
    {
        assert!(avx512_vnni());
        macro_rules! call {
            ($q:literal, $c:literal, $s:literal) => {{
                let digits: [&[u8]; $q] = std::array::from_fn(|i| queries[i].digits(r0, r1));
                let out: &mut [[[u32; 16]; 2]; $q] = out.try_into().expect("group size");
                // SAFETY: avx512f, avx512bw and avx512vnni were detected
                // above; both slices are whole quads, r1 − r0 a multiple
                // of 32 rows (8 quads), and every digit slice holds 16
                // bytes per quad.
                unsafe { avx512::pair_vnni::<$q, $c, $s>(data, digits, ahead, out) }
            }};
        }
        // one prefetch per quad pair ([`Cursor`]) for a group of up to 2
        // with a share of at least a line per quad pair, else [`Spread`]
        let cursor = ahead.len().div_ceil(64) >= data[0].len() / 64;
        match (queries.len(), cursor, stage) {
            (1, true, _) => call!(1, true, false),
            (1, false, _) => call!(1, false, false),
            (2, true, false) => call!(2, true, false),
            (2, true, true) => call!(2, true, true),
            (2, false, false) => call!(2, false, false),
            (2, false, true) => call!(2, false, true),
            (3, _, false) => call!(3, false, false),
            (3, _, true) => call!(3, false, true),
            (n, _, _) => unreachable!("a group of {n} queries"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, ahead, stage, out);
}

/// The shape every slice kernel relies on: as many sums as queries, and
/// `data` whole quads of rows r0..r1, both multiples of 32.
fn assert_slice_shape(data: &[u8], queries: usize, sums: usize, (r0, r1): (usize, usize)) {
    assert!(
        queries == sums
            && data.len() == GROUP_COLS * (r1 - r0)
            && r0.is_multiple_of(32)
            && r1.is_multiple_of(32),
        "slice shape"
    );
}

/// Adds `Σ_r c1_q[r]·D[r][c]` over the rows r0..r1 of one slice of a tile
/// (`data`, its quads) to `out[q][c]` for the queries of a group (at most
/// [`group_max`]), with kernel `k`; prefetches the lines of `ahead` into
/// L2 on the way.
fn group_with(
    k: Kernel,
    data: &[u8],
    queries: &[SplitQuery],
    (r0, r1): (usize, usize),
    ahead: &[u8],
    out: &mut [[u32; GROUP_COLS]],
) {
    assert_slice_shape(data, queries.len(), out.len(), (r0, r1));
    assert!(queries.len() <= group_max(k), "group size");
    #[cfg(target_arch = "x86_64")]
    {
        match k {
            Kernel::Avx512Vnni if avx512_vnni() => {
                macro_rules! call {
                    ($q:literal, $u:literal) => {{
                        let digits: [&[u8]; $q] =
                            std::array::from_fn(|i| queries[i].digits(r0, r1));
                        let out: &mut [[u32; 16]; $q] = out.try_into().expect("group size");
                        // SAFETY: avx512f, avx512bw and avx512vnni were
                        // detected at runtime; `data` is whole quads and
                        // every digit slice holds 16 bytes per quad (4
                        // bytes per row, rows r0..r1), r1 − r0 a multiple
                        // of 32 (asserted above).
                        unsafe { avx512::group_vnni::<$q, $u>(data, digits, ahead, out) }
                    }};
                }
                match queries.len() {
                    1 => call!(1, 2),
                    2 => call!(2, 2),
                    3 => call!(3, 1),
                    4 => call!(4, 1),
                    5 => call!(5, 1),
                    n => unreachable!("a group of {n} queries"),
                }
                return;
            }
            Kernel::Avx512Bw if avx512() => {
                for (q, o) in queries.iter().zip(out.iter_mut()) {
                    let rows = q.rows(r0, r1);
                    // SAFETY: avx512f and avx512bw were detected at
                    // runtime; `data` holds 16 bytes per row of `rows`
                    // (asserted above).
                    unsafe { avx512::slice_bw(data, rows.lo, rows.hi, ahead, o) };
                }
                return;
            }
            Kernel::Avx2 if super::avx2() => {
                avx2_group(avx2_batch(), data, queries, (r0, r1), ahead, out);
                return;
            }
            _ => {}
        }
    }
    let _ = k;
    crate::mem::prefetch_l2(ahead);
    for (q, o) in queries.iter().zip(out.iter_mut()) {
        group_scalar(data, q.rows(r0, r1), o);
    }
}

/// [`group_with`] for the AVX2 kernels, groups of 4 and 5 going to kernel
/// `big` (groups of 5 only with [`Avx2Batch::Mulld`]).
#[cfg(target_arch = "x86_64")]
fn avx2_group(
    big: Avx2Batch,
    data: &[u8],
    queries: &[SplitQuery],
    (r0, r1): (usize, usize),
    ahead: &[u8],
    out: &mut [[u32; GROUP_COLS]],
) {
    assert_slice_shape(data, queries.len(), out.len(), (r0, r1));
    assert!(super::avx2(), "AVX2 kernels without AVX2");
    macro_rules! halves {
        ($q:literal) => {{
            let halves: [&[i16]; $q] = std::array::from_fn(|i| queries[i].halves(r0, r1));
            let out: &mut [[u32; 16]; $q] = out.try_into().expect("group size");
            // SAFETY: avx2 was detected at runtime; `data` holds 16 bytes
            // per row and every `halves` 2 entries per row, rows r0..r1
            // (asserted above).
            unsafe { avx2::group::<$q>(data, halves, ahead, out) }
        }};
    }
    // the word and `vpmulld` kernels: one coefficient word per row and a
    // bias per query
    macro_rules! coefficients {
        ($form:ident, $kernel:ident, $q:literal) => {{
            let wb: [(&[u32], u32); $q] = std::array::from_fn(|i| queries[i].$form(r0, r1));
            let (words, bias) = (wb.map(|w| w.0), wb.map(|w| w.1));
            let out: &mut [[u32; 16]; $q] = out.try_into().expect("group size");
            // SAFETY: avx2 was detected at runtime; `data` holds 16 bytes
            // per row and every `words` one word per row, rows r0..r1
            // (asserted above).
            unsafe { avx2::$kernel::<$q>(data, words, bias, ahead, out) }
        }};
    }
    match (queries.len(), big) {
        (1, _) => halves!(1),
        (2, _) => halves!(2),
        (3, _) => halves!(3),
        (4, Avx2Batch::Words) => coefficients!(words, group_words, 4),
        (4, Avx2Batch::Mulld) => coefficients!(dwords, group_mulld, 4),
        (5, Avx2Batch::Mulld) => coefficients!(dwords, group_mulld, 5),
        (n, b) => unreachable!("a group of {n} queries for {b:?}"),
    }
}

/// Scalar twin of the slice kernels: quad t holds rows 4t..4t+3, column c
/// at bytes 4c..4c+3 of it.
fn group_scalar(data: &[u8], q: QueryRows<'_>, out: &mut [u32; GROUP_COLS]) {
    for (t, quad) in data.chunks_exact(64).enumerate() {
        for (c, o) in out.iter_mut().enumerate() {
            for x in 0..4 {
                let d = quad[4 * c + x] as i8 as i32;
                let (l, h) = (q.lo[4 * t + x] as i32, q.hi[4 * t + x] as i32);
                let v = (l.wrapping_mul(d) as u32).wrapping_add((h.wrapping_mul(d) as u32) << 16);
                *o = o.wrapping_add(v);
            }
        }
    }
}

/// How a kernel spreads the prefetch of `lines` cache lines over `iters`
/// iterations of its loop: evenly, in order, each line once; iteration i
/// issues the lines up to ⌊(i + 1)·lines/iters⌋ (16.16 fixed point), so
/// with more lines than iterations the bursts differ by at most one line
/// and with fewer the lines are evenly apart: the stream wants an even
/// cadence over the whole loop, not a burst at its start.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
struct Spread {
    lines: usize,
    /// Lines per iteration, 16.16 fixed point.
    rate: usize,
    /// Position, 16.16 fixed point.
    pos: usize,
    /// Lines issued so far.
    next: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Spread {
    fn new(bytes: usize, iters: usize) -> Self {
        let lines = bytes.div_ceil(64);
        Spread {
            lines,
            rate: (lines << 16).div_ceil(iters.max(1)),
            pos: 0,
            next: 0,
        }
    }

    /// The lines to prefetch in this iteration (none, one or a few).
    #[inline(always)]
    fn due(&mut self) -> std::ops::Range<usize> {
        if self.next >= self.lines {
            return 0..0;
        }
        self.pos += self.rate;
        let from = self.next;
        self.next = (self.pos >> 16).min(self.lines);
        from..self.next
    }

    /// Prefetches into L2 the lines of `ahead` due in this iteration
    /// ([`Spread::due`]). Every line is prefetched: the hardware
    /// prefetchers (adjacent line, L2 streamer) do not keep up with a
    /// batch's stream. The lines go out through
    /// [`crate::mem::prefetch_lines_l2`], without a bounds-checked slice
    /// per line: between the multiplies, that bookkeeping costs more than
    /// the prefetches themselves.
    #[inline(always)]
    fn issue(&mut self, ahead: &[u8]) {
        let lines = self.due();
        if !lines.is_empty() {
            crate::mem::prefetch_lines_l2(ahead, lines);
        }
    }
}

/// One prefetch per loop iteration, branch-free: iteration i prefetches
/// line ⌊i·⌈lines/iters⌉⌋ of `ahead` (in 16.16 fixed point), so the lines
/// go out in order and evenly spread, each once or, when there are fewer
/// lines than iterations, several times in a row (the repeats find the
/// line in flight or in L2). The AVX2 kernels, which have load slots to
/// spare but not vector-ALU slots, use it instead of [`Spread`], whose
/// bookkeeping and branch are scalar work on the ports the multiplies
/// use. The two-tile `vpdpbusd` kernel uses it for groups of up to 2
/// with at least a line to prefetch per quad pair; with smaller shares
/// the repeats, and in groups of 3 every extra load, cost it load slots
/// it lacks, so those use [`Spread`]. With more lines than iterations
/// the lines in between are skipped, not bunched.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
struct Cursor {
    base: *const u8,
    /// Lines per iteration, 16.16 fixed point.
    rate: usize,
    last: usize,
    /// Position, 16.16 fixed point.
    pos: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Cursor {
    fn new(ahead: &[u8], iters: usize) -> Self {
        let lines = ahead.len().div_ceil(64);
        Cursor {
            base: ahead.as_ptr(),
            rate: (lines << 16).div_ceil(iters.max(1)),
            last: lines.saturating_sub(1),
            pos: 0,
        }
    }

    /// The line of this iteration (the last line once past the end; a
    /// rate of 0 when there is nothing to prefetch).
    #[inline(always)]
    fn line(&mut self) -> usize {
        let l = (self.pos >> 16).min(self.last);
        self.pos += self.rate;
        l
    }

    /// Prefetches this iteration's line into L2 (nothing when `ahead` was
    /// empty).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn issue(&mut self) {
        if self.rate == 0 {
            return;
        }
        let l = self.line();
        // SAFETY: prefetch is a hint that cannot fault; l ≤ last, so the
        // address is inside `ahead` anyway (computed without `add`'s
        // in-bounds requirement all the same).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                self.base.wrapping_add(64 * l) as *const i8,
            )
        };
    }
}

/// Share `i` of `parts` near-equal shares of `data` in whole 64-byte cache
/// lines (the last ones shorter or empty): how the prefetch of a slice
/// ahead is split over the groups of a batch.
fn line_share(data: &[u8], parts: usize, i: usize) -> &[u8] {
    let per = data.len().div_ceil(64).div_ceil(parts.max(1)) * 64;
    let a = (i * per).min(data.len());
    &data[a..(a + per).min(data.len())]
}

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
/// leading columns are tiled in 16-column groups, and the panel height P
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
            tiled_cols: if db.is_tiled() {
                shape.ell2 / GROUP_COLS * GROUP_COLS
            } else {
                0
            },
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
