//! The DoublePIR pass c2ᵀ·[H; T]ᵀ (YPIR Construction 3.1, Answer step 2)
//! over the digit storage of [`crate::digits`]: dispatch, the scalar twin
//! on 64-bit residues, and the limb kernels (`avx512_vnni`: `vpdpwssd`,
//! `avx2`: `vpmaddwd`).

use super::Kernel;
#[cfg(target_arch = "x86_64")]
use super::{avx2 as has_avx2, avx512_vnni as has_avx512_vnni};
use crate::arith::{Crt, MOD0, MOD1, MODS, Q2};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512_vnni;

#[cfg(test)]
mod tests;

/// One query's c2 as the DoublePIR kernels consume it, zero-padded to the
/// matrix's padded column count.
enum DpQuery {
    /// Residues mod P0 and mod P1 widened to 64-bit lanes (the scalar
    /// kernel).
    Wide(Vec<u64>, Vec<u64>),
    /// The signed limbs of c2 mod Q2 ([`limbs_of`]) for `vpdpwssd` and
    /// `vpmaddwd`, interleaved per 32-column chunk: limb t of chunk c's
    /// columns at c·160 + 32·t, so one step reads 320 contiguous bytes
    /// (five separate limb arrays sit at the same offset modulo 4 KiB and
    /// fight over the same L1 sets).
    Limbs(Vec<i16>, DpLimbs),
}

/// Quads per turn of a batch in the DoublePIR pass: 32 quads of a
/// full-width block are 256 KiB of digits, which stay in L2 (512 KiB on
/// the smallest L2 of the cores this runs on) while every query of the
/// batch reads them.
const DP_RUN_QUADS: usize = 32;

/// How far ahead of the quad being multiplied the DoublePIR pass
/// prefetches the digits, in bytes ([`crate::mem::prefetch_page_starts`]). The hardware
/// streamer stops at every 4 KiB page, so each page's first two lines are
/// requested this far ahead and the streamer takes the rest (a prefetch
/// of every line would take the load slots the stream needs). The AVX2
/// kernel, bound by its multiplies, neither gains nor loses.
const PAGE_AHEAD: usize = 32 << 10;

/// Limbs per column of [`DpQuery::Limbs`].
const DP_LIMBS: usize = 5;

/// Bits of each limb below the top one.
const LIMB_BITS: u32 = 11;

/// Largest |top limb| of [`limbs_of`]: c centred mod Q2 has |c| ≤ Q2/2,
/// the four low limbs take away less than 2^44 in magnitude (each
/// |l_t| ≤ 2^10), and what is left is a multiple of 2^44. Q2 < 0.93·2^56
/// keeps it at 1904, below 2^11 (the kernels' bound, `avx512_vnni`).
pub(super) const TOP_LIMB_MAX: u64 = (Q2 / 2 + (1 << 44)) >> 44;

/// c mod Q2 (from its residues r0 mod P0, r1 mod P1) as five signed
/// limbs: centred c = Σ_t 2^{11t}·l_t with l_0..l_3 ∈ [−2^10, 2^10) and
/// |l_4| ≤ [`TOP_LIMB_MAX`]. One set of limbs serves both primes: a
/// row's sums Σ x·l_t are exact integers, reduced mod P0 and mod P1 only
/// at the end ([`DpQuery::reduce`]). Splitting each 28-bit residue into
/// three unsigned limbs instead took six multiplies per digit.
fn limbs_of(crt: &Crt, r0: u32, r1: u32) -> [i16; DP_LIMBS] {
    let mut v = crate::arith::centre(crt.combine(r0, r1), Q2);
    let mut l = [0i16; DP_LIMBS];
    for o in l.iter_mut().take(DP_LIMBS - 1) {
        let half = 1i64 << (LIMB_BITS - 1);
        let d = ((v & ((1 << LIMB_BITS) - 1)) ^ half) - half;
        *o = d as i16;
        v = (v - d) >> LIMB_BITS;
    }
    debug_assert!(v.unsigned_abs() <= TOP_LIMB_MAX);
    l[DP_LIMBS - 1] = v as i16;
    l
}

/// A quad's four rows of partial sums in the form of its query
/// ([`DpQuery::reduce`] reads them back): for [`DpQuery::Wide`], `lm[i]`
/// = (Σ x·c2 over the P0 residues, over the P1 residues); for
/// [`DpQuery::Limbs`], `lm[i]` = (Σ x·l_0 + 2^11·Σ x·l_1, Σ x·l_2 +
/// 2^11·Σ x·l_3) and `hi[i]` = Σ x·l_4. The `lm` pair is one 512-bit
/// vector, which the `vpdpwssd` kernel adds to in one instruction.
#[derive(Clone, Copy, Default)]
pub(super) struct QuadSums {
    pub(super) lm: [[i64; 2]; 4],
    pub(super) hi: [i64; 4],
}

/// One row's sums: [`QuadSums`] row i as (lm[i][0], lm[i][1], hi[i]).
/// Every entry is below 2^18 · 2^14 · 2^11 · 2^11 = 2^54 in magnitude (at
/// most 2^18 columns, |x| ≤ 2^14, |l_t| < 2^11, weights 1 and 2^11): no
/// overflow in i64.
type RowSums = [i64; 3];

/// The weights of `RowSums` entries 1 and 2, 2^22 and 2^44, mod each
/// prime of [`MODS`].
const LIMB_WEIGHTS: [[u32; 2]; 2] = [limb_weights(MODS[0].p), limb_weights(MODS[1].p)];

/// 2^22 and 2^44 mod p.
const fn limb_weights(p: u32) -> [u32; 2] {
    [
        ((1u64 << (2 * LIMB_BITS)) % p as u64) as u32,
        ((1u64 << (4 * LIMB_BITS)) % p as u64) as u32,
    ]
}

impl DpQuery {
    fn new(c2: &[u32], cols: usize, limbs: Option<DpLimbs>) -> DpQuery {
        use crate::digits::{DigitMatrix, CHUNK_COLS};
        let cols_pad = DigitMatrix::padded_cols(cols);
        let (c0, c1) = c2.split_at(cols);
        if let Some(kind) = limbs {
            let crt = Crt::new();
            let mut l = vec![0i16; cols_pad * DP_LIMBS];
            for (j, (&r0, &r1)) in c0.iter().zip(c1).enumerate() {
                let at = j / CHUNK_COLS * CHUNK_COLS * DP_LIMBS + j % CHUNK_COLS;
                for (t, &v) in limbs_of(&crt, r0, r1).iter().enumerate() {
                    l[at + t * CHUNK_COLS] = v;
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

    /// A row's sums reduced to (mod P0, mod P1).
    fn reduce(&self, s: RowSums) -> [u32; 2] {
        use crate::arith::reduce_signed;
        match self {
            DpQuery::Wide(..) => [reduce_signed(&MOD0, s[0]), reduce_signed(&MOD1, s[1])],
            DpQuery::Limbs(..) => std::array::from_fn(|i| {
                // s0 + 2^22·s1 + 2^44·s2 mod p
                let (m, w) = (&MODS[i], LIMB_WEIGHTS[i]);
                let r = m.add(reduce_signed(m, s[0]), m.mul(reduce_signed(m, s[1]), w[0]));
                m.add(r, m.mul(reduce_signed(m, s[2]), w[1]))
            }),
        }
    }
}

/// DoublePIR pass (YPIR Construction 3.1, Answer step 2): for each row r of
/// `m` (signed digits |x| ≤ p/2), `out[q][r] = (Σ_j c2[j]·x[r][j] mod P0,
/// … mod P1)` for every query q, where `c2s[q]` holds the ℓ2 residues mod
/// P0 followed by the ℓ2 residues mod P1 (each < 2^28). Sums stay exact
/// in i64 (the scalar kernel's products are < 2^42, the limb kernels'
/// within [`RowSums`]' bound, and at most 2^18 are summed) and are
/// reduced once per row (YPIR §4, footnote 8: reduce only when a sum could
/// overflow).
///
/// The matrix is read from memory once, front to back, in its storage
/// order ([`crate::digits`]): column block by column block, quad of rows by
/// quad; the other queries of a batch re-read each run of quads from L2,
/// so a batch shares the scan (§4.3). Workers take ranges of quads.
pub(crate) fn doublepir(m: &crate::digits::DigitMatrix, c2s: &[&[u32]], out: &mut [Vec<[u32; 2]>]) {
    doublepir_with(Kernel::selected(), m, c2s, out)
}

/// [`doublepir`] with an explicit kernel variant (tests).
fn doublepir_with(
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
    let task = |q0: usize, q1: usize| -> Vec<Vec<RowSums>> {
        let mut sums = vec![vec![[0i64; 3]; (q1 - q0) * QUAD_ROWS]; preps.len()];
        // Block by block, and inside a block by runs of DP_RUN_QUADS
        // quads (≤ 256 KiB); each query walks a run in turn. The run comes
        // from memory for the first query and from L2 for the others,
        // while a query's limbs for the block (10 KiB) stay in L1 (with the
        // queries interleaved per quad, four queries' limbs would not fit).
        // Whole blocks per turn (≤ 4 MB) would leave the other queries
        // reading the last-level cache, at about the cost of memory.
        for (c0, w, blk) in m.blocks() {
            for r0 in (q0..q1).step_by(DP_RUN_QUADS) {
                let r1 = (r0 + DP_RUN_QUADS).min(q1);
                for (i, (p, s)) in preps.iter().zip(sums.iter_mut()).enumerate() {
                    for q in r0..r1 {
                        let quad = &blk[q * QUAD_ROWS * w..(q + 1) * QUAD_ROWS * w];
                        // only the first query reads the run from memory
                        if i == 0 {
                            let bytes = std::mem::size_of_val(quad);
                            crate::mem::prefetch_page_starts(
                                quad.as_ptr().cast(),
                                bytes,
                                PAGE_AHEAD,
                            );
                        }
                        let mut acc = QuadSums::default();
                        quad_with(quad, p, c0, w, &mut acc);
                        let rows = s[(q - q0) * QUAD_ROWS..].iter_mut();
                        for (t, (a, h)) in rows.zip(acc.lm.iter().zip(&acc.hi)) {
                            // within RowSums' bound: no overflow in i64
                            t[0] += a[0];
                            t[1] += a[1];
                            t[2] += h;
                        }
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
    let parts: Vec<Vec<Vec<RowSums>>> = {
        use rayon::prelude::*;
        if threads > 1 {
            ranges.par_iter().map(|&(a, b)| task(a, b)).collect()
        } else {
            ranges.iter().map(|&(a, b)| task(a, b)).collect()
        }
    };
    #[cfg(not(feature = "parallel"))]
    let parts: Vec<Vec<Vec<RowSums>>> = ranges.iter().map(|&(a, b)| task(a, b)).collect();
    for (&(q0, _), part) in ranges.iter().zip(&parts) {
        for ((o, sums), p) in out.iter_mut().zip(part).zip(&preps) {
            for (i, &a) in sums.iter().enumerate() {
                let r = q0 * QUAD_ROWS + i;
                if r < rows {
                    o[r] = p.reduce(a);
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
/// kernel on [`DpQuery::Wide`]). 16-bit limbs multiply a 64-byte line of
/// digits in far fewer instructions than `vpmuldq` on 64-bit residue
/// lanes.
fn dp_limbs(k: Kernel) -> Option<DpLimbs> {
    #[cfg(target_arch = "x86_64")]
    {
        match k {
            Kernel::Avx512Vnni if has_avx512_vnni() => return Some(DpLimbs::Vnni),
            Kernel::Avx2 | Kernel::Avx512Bw if has_avx2() => return Some(DpLimbs::Avx2),
            _ => {}
        }
    }
    let _ = k;
    None
}

/// Adds the dot products of one quad (4 rows × `w` columns starting at
/// column `c0`, in chunk order) with query `p` to `acc`.
fn quad_with(quad: &[i16], p: &DpQuery, c0: usize, w: usize, acc: &mut QuadSums) {
    use crate::digits::{CHUNK_COLS, QUAD_ROWS};
    assert!(
        w.is_multiple_of(CHUNK_COLS) && quad.len() == QUAD_ROWS * w,
        "quad shape"
    );
    match p {
        DpQuery::Wide(w0, w1) => {
            quad_scalar(quad, &w0[c0..c0 + w], &w1[c0..c0 + w], &mut acc.lm);
        }
        DpQuery::Limbs(l, kind) => {
            let l = &l[c0 * DP_LIMBS..(c0 + w) * DP_LIMBS];
            // no limb kernel off x86-64: `kind` has no value there
            #[cfg(not(target_arch = "x86_64"))]
            let _ = l;
            match *kind {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `dp_limbs` found the kernel's CPU
                // features at runtime before these limbs were prepared; the
                // quad holds 4·w digits and the limb slice 5·w entries, w a
                // multiple of 32 and at most BLOCK_COLS (asserted inside).
                DpLimbs::Vnni => unsafe { avx512_vnni::quad_limbs(quad, l, acc) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as for the arm above.
                DpLimbs::Avx2 => unsafe { avx2::quad_limbs(quad, l, acc) },
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
