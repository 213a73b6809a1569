//! DBSetup: A1·D with the NTT (App. B), the dense hint rows, H2 and the
//! packing precomputation (§4.2).

use std::sync::Arc;
use std::time::Instant;

use super::chunks::ChunkPlan;
use super::{a2_stride, Server};
use crate::arith::{small_residue, MODS, Q2};
use crate::db::Database;
use crate::digits::{ColumnBlockMut, DigitMatrix, BLOCK_COLS, CHUNK_COLS, QUAD_ROWS};
use crate::error::{Error, Result};
use crate::kernel;
use crate::packing::{Leaf, PackPrecomp};
use crate::params::{Layout, Params};
use crate::rns::{self, Context};
use crate::sampler::PublicSeed;

/// Time spent in each part of DBSetup (or of an update).
#[derive(Clone, Copy, Debug, Default)]
pub struct SetupTimings {
    /// A1·D with the NTT (App. B) and the dense hint rows; for an update,
    /// the column updates and re-packing; for [`Server::from_hint`], reading
    /// and checking the hint file and expanding a1.
    pub hint: f64,
    /// H2 in CDKS form (the leaf `a` parts).
    pub h2: f64,
    /// Packing precomputation (§4.2).
    pub packing: f64,
    /// Measuring the SimplePIR prefetch distance and single-query kernel
    /// ([`super::prefetch_tuning`]): at the 1st, 2nd, 4th, 8th, … large database
    /// of the process; 0 otherwise.
    pub tune: f64,
}

/// The leaves of the packing tree: dense hint rows and the κ rows of T at
/// their slots of `layout`, the rest zero.
pub(super) fn pack_leaves(params: &Params, layout: &Layout) -> Vec<Leaf> {
    let mut leaves = vec![Leaf::Zero; params.d2];
    for (r, &pos) in layout.pos_hint.iter().enumerate() {
        leaves[pos] = Leaf::Hint(r);
    }
    for (r, &pos) in layout.pos_t.iter().enumerate() {
        leaves[pos] = Leaf::T(r);
    }
    leaves
}

impl Server {
    /// DBSetup(1^λ, D) with the public seed `seed` (fresh per database
    /// version). Refuses shapes whose correctness error exceeds 2^-40.
    pub fn setup(params: Params, db: Database, seed: PublicSeed) -> Result<Server> {
        Self::setup_with_context(Arc::new(Context::new(params)), db, seed)
    }

    /// [`Server::setup`] reusing a prebuilt [`Context`].
    pub fn setup_with_context(ctx: Arc<Context>, db: Database, seed: PublicSeed) -> Result<Server> {
        Self::check_database(&ctx.params, &db)?;
        let t0 = Instant::now();
        let (hint, ad, a1) = Self::compute_hint(&ctx, &db, &seed);
        let hint_s = t0.elapsed().as_secs_f64();
        Ok(Self::assemble(ctx, db, seed, hint, ad, &a1, hint_s))
    }

    /// The shape and record size checks of DBSetup.
    pub(super) fn check_database(params: &Params, db: &Database) -> Result<()> {
        params.check_shape(db.shape())?;
        if db.record_bits() != params.record_bits {
            return Err(Error::InvalidParams("database record size differs from N"));
        }
        Ok(())
    }

    /// Builds the server from its hint rows: expands a2 and the packing key
    /// rows from the seed and runs the packing precomputation.
    pub(super) fn assemble(
        ctx: Arc<Context>,
        db: Database,
        seed: PublicSeed,
        hint: DigitMatrix,
        ad: Vec<u32>,
        a1: &[u32],
        hint_s: f64,
    ) -> Server {
        let params = ctx.params;
        let shape = db.shape();
        let layout = params.layout();
        let m2 = params.m2(shape);
        let a2 = Self::scaled_a2(&ctx, &seed.expand_a2(m2, params.d2));
        let pack_a =
            ctx.to_mont(&seed.expand_pack(params.log_d2(), params.gadget_len(), params.d2));
        let mut server = Server {
            seed_id: seed.id(),
            ctx,
            shape,
            seed,
            db,
            hint,
            a2,
            pack_a,
            pack: PackPrecomp::empty(),
            layout,
            a1_ext: a1
                .chunks(params.d1)
                .flat_map(|b| {
                    let rev = b.iter().rev().copied();
                    rev.clone().chain(rev.map(u32::wrapping_neg))
                })
                .collect(),
            ad,
            setup_timings: SetupTimings {
                hint: hint_s,
                ..Default::default()
            },
        };
        // The 1st, 2nd, 4th, … large database of the process: measure the
        // SimplePIR prefetch distance and single-query kernel on it
        // (kernel::tune_prefetch; ~0.1 s per kernel).
        let t_tune = Instant::now();
        if kernel::tune_prefetch(&server.db).is_some() {
            server.setup_timings.tune = t_tune.elapsed().as_secs_f64();
        }
        let (h2, packing) = server.rebuild_packing();
        server.setup_timings.h2 = h2;
        server.setup_timings.packing = packing;
        server
    }

    /// Recomputes H2 (leaf `a` parts) from the hint rows and the packing
    /// precomputation; returns the seconds spent in each.
    pub(super) fn rebuild_packing(&mut self) -> (f64, f64) {
        let params = self.ctx.params;
        let t0 = Instant::now();
        let kh = params.hint_rows();
        debug_assert_eq!(self.hint.rows(), kh);
        let hint_a = Self::rows_a(&self.ctx, &self.hint, &self.a2);
        let h2 = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let leaves = pack_leaves(&params, &self.layout);
        let old = std::mem::replace(&mut self.pack, PackPrecomp::empty());
        self.pack = old.rebuild(&self.ctx, leaves, hint_a, &self.pack_a);
        (h2, t1.elapsed().as_secs_f64())
    }

    /// Time spent in each part of DBSetup.
    pub fn setup_timings(&self) -> SetupTimings {
        self.setup_timings
    }

    /// Dense hint: K_H × ℓ2 chunks of ⌊A1·D⌉_{q1,q̃1} (App. B), in the
    /// DoublePIR layout ([`DigitMatrix`]).
    /// Returns (dense hint rows, unrounded A1·D column-major d1 × ℓ2, a1).
    #[allow(clippy::type_complexity)]
    pub(super) fn compute_hint(
        ctx: &Context,
        db: &Database,
        seed: &PublicSeed,
    ) -> (DigitMatrix, Vec<u32>, Vec<u32>) {
        let params = ctx.params;
        let shape = db.shape();
        let (d1, ell1, ell2) = (params.d1, shape.ell1, shape.ell2);
        let m1 = params.m1(shape);
        let kh = params.hint_rows();
        // a1 lifted to (−2^31, 2^31] and transformed over both primes
        let (a1, a1_ntt) = ctx.a1_ntt(seed, m1);
        // Blocks summed per inverse NTT so that |Σ| ≤ G·d1·2^31·2^7 < q2/2.
        let group = ((1usize << 16) / d1).max(1);
        let column = |j: usize, hsum: &mut [u32]| {
            let mut col = vec![0u8; ell1];
            db.column_into(j, &mut col);
            let mut buf = vec![0u32; 2 * d1];
            let mut acc = vec![0u64; 2 * d1];
            hsum.fill(0);
            let mut b = 0;
            while b < m1 {
                let b_end = (b + group).min(m1);
                acc.iter_mut().for_each(|x| *x = 0);
                for blk in b..b_end {
                    // d̂ with NCoeffs(d̂) = rows blk·d1 .. of column j
                    let src = &col[blk * d1..((blk + 1) * d1).min(ell1)];
                    reversed_record_residues(src, &mut buf);
                    rns::forward(&ctx.ntt1, &mut buf);
                    rns::mul_acc_lazy(&a1_ntt[blk * 2 * d1..(blk + 1) * 2 * d1], &buf, &mut acc);
                }
                rns::reduce_acc(&acc, &mut buf);
                rns::inverse(&ctx.ntt1, &mut buf);
                for i in 0..d1 {
                    let x = ctx.crt.combine(buf[i], buf[d1 + i]);
                    let v = crate::arith::centre(x, Q2) as u64 as u32; // mod 2^32
                    hsum[d1 - 1 - i] = hsum[d1 - 1 - i].wrapping_add(v);
                }
                b = b_end;
            }
        };
        let mut hint = DigitMatrix::zeros(kh, ell2);
        // read and written 4 KiB column by column by `update`: ordinary pages
        let mut ad = vec![0u32; d1 * ell2];
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            ad.par_chunks_mut(d1)
                .enumerate()
                .for_each(|(j, h)| column(j, h));
        }
        #[cfg(not(feature = "parallel"))]
        for (j, h) in ad.chunks_mut(d1).enumerate() {
            column(j, h);
        }
        // then round and pack every column into the hint, block by block
        // (as `update` packs the columns it touched)
        let plan = ChunkPlan::for_params(&params);
        let pack_block = |(blk_ad, mut blk): (&[u32], ColumnBlockMut<'_>)| {
            let (mut values, mut column) = (Vec::new(), Vec::new());
            let all = [true; kernel::PACK_COLS_MAX];
            for (g, group) in blk_ad.chunks(CHUNK_COLS * d1).enumerate() {
                let (j, n) = (blk.c0 + CHUNK_COLS * g, group.len() / d1);
                plan.pack_group(group, &all[..n], &mut blk, j, (&mut values, &mut column));
            }
        };
        let blocks: Vec<(&[u32], ColumnBlockMut<'_>)> = ad
            .chunks(BLOCK_COLS * d1)
            .zip(hint.column_blocks_mut())
            .collect();
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            blocks.into_par_iter().for_each(pack_block);
        }
        #[cfg(not(feature = "parallel"))]
        blocks.into_iter().for_each(pack_block);
        (hint, ad, a1)
    }

    /// a2 ⊙ NTT(−x·d2^{-1}) block by block (NTT form): the constant factor
    /// of every CDKS input a-part folded into a2 once ([`Server::rows_a`]).
    fn scaled_a2(ctx: &Context, a2: &[u32]) -> Vec<u32> {
        let n = 2 * ctx.params.d2;
        let stride = a2_stride(ctx.params.d2);
        let mut out = vec![0u32; a2.len() / n * stride];
        for (o, a) in out.chunks_exact_mut(stride).zip(a2.chunks_exact(n)) {
            rns::mul(a, &ctx.neg_x_dinv, &mut o[..n]);
        }
        out
    }

    /// CDKS input a-parts ã = d2^{-1}·(−x)·Σ_b a2,b·ĥ_b of rows (NTT form),
    /// given `a2s` = [`Server::scaled_a2`].
    pub(super) fn rows_a(ctx: &Context, rows: &DigitMatrix, a2s: &[u32]) -> Vec<Vec<u32>> {
        let (n_rows, ell2) = (rows.rows(), rows.cols());
        let d2 = ctx.params.d2;
        let m2 = ell2.div_ceil(d2);
        // Rows are read a quad at a time (one pass over its storage). Each
        // row's m2 blocks are transformed first, prime by prime, the
        // transform reading the block's reversed digits itself
        // (kernel::ntt_forward_reversed_i16), then summed against a2s
        // (kernel::mul_sum_blocks_mod keeps the 64-bit sums in registers
        // across the blocks and reduces them there; both inputs are
        // residues below 2^28).
        let stride = a2_stride(d2);
        let scratch = || (vec![0i16; QUAD_ROWS * ell2], vec![0u32; m2 * stride]);
        let quad = |(quad, ntts): &mut (Vec<i16>, Vec<u32>), q: usize| {
            rows.read_quad(q, quad);
            let in_quad = n_rows.min((q + 1) * QUAD_ROWS) - q * QUAD_ROWS;
            quad.chunks_exact(ell2)
                .take(in_quad)
                .map(|row| {
                    for (b, buf) in ntts.chunks_exact_mut(stride).enumerate() {
                        let src = &row[b * d2..((b + 1) * d2).min(ell2)];
                        for (h, buf) in buf[..2 * d2].chunks_exact_mut(d2).enumerate() {
                            kernel::ntt_forward_reversed_i16(&ctx.ntt2.t[h], src, buf);
                        }
                    }
                    let mut out = vec![0u32; 2 * d2];
                    for (h, o) in out.chunks_exact_mut(d2).enumerate() {
                        let at = h * d2;
                        let (a, x) = (&a2s[at..], &ntts[at..]);
                        kernel::mul_sum_blocks_mod(a, x, stride, m2, MODS[h].p, o);
                    }
                    out
                })
                .collect::<Vec<_>>()
        };
        let n_quads = n_rows.div_ceil(QUAD_ROWS);
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            (0..n_quads)
                .into_par_iter()
                .map_init(scratch, quad)
                .flatten_iter()
                .collect()
        }
        #[cfg(not(feature = "parallel"))]
        {
            let mut s = scratch();
            (0..n_quads).flat_map(|q| quad(&mut s, q)).collect()
        }
    }
}

/// Writes the RNS residues (both halves of `buf`, d entries each) of the
/// polynomial whose NCoeffs are the record block `src` (records as `i8`,
/// their representative in [−N/2, N/2)): coefficient i is
/// `src[d − 1 − i]`, and entries past the end of the block (a ragged last
/// block) are zero. Reversed iteration over the slice, so the loop
/// vectorises. (Hint and T rows: [`kernel::ntt_forward_reversed_i16`].)
#[inline]
fn reversed_record_residues(src: &[u8], buf: &mut [u32]) {
    let d = buf.len() / 2;
    let (r0, r1) = buf.split_at_mut(d);
    let pad = d - src.len();
    r0[..pad].fill(0);
    r1[..pad].fill(0);
    for ((o0, o1), &v) in r0[pad..]
        .iter_mut()
        .zip(&mut r1[pad..])
        .zip(src.iter().rev())
    {
        let v = v as i8 as i64;
        *o0 = small_residue(&MODS[0], v);
        *o1 = small_residue(&MODS[1], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::arith::round_pow2;
    use crate::params::{DbShape, TOY};
    use crate::server::chunks::pack_chunks;

    /// Entry (i, j) of NCyclicMat(g) (YPIR §2): α_{j−i} for j ≥ i, −α_{d+j−i} otherwise.
    fn ncyclic(g: &[i128], i: usize, j: usize) -> i128 {
        let d = g.len();
        if j >= i {
            g[j - i]
        } else {
            -g[d + j - i]
        }
    }

    #[test]
    fn ntt_hint_equals_naive_product() {
        // Ragged shape (not multiples of d1 = 64, d2 = 128): Remark 3.3.
        let params = TOY;
        let shape = DbShape {
            ell1: 150,
            ell2: 300,
        };
        let mut s = 5u64;
        let db = Database::from_fn(shape, 8, |_, _| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .unwrap();
        let seed = PublicSeed([3u8; 32]);
        let ctx = Context::new(params);
        let (hint, _, _) = Server::compute_hint(&ctx, &db, &seed);
        let (d1, d2) = (params.d1, params.d2);
        let m1 = params.m1(shape);
        let a1: Vec<i128> = seed.expand_a1(m1, d1).iter().map(|&x| x as i128).collect();
        let kh = params.hint_rows();
        for j in 0..shape.ell2 {
            // naive A1·D[:, j] with A1 = [NCyclicMat(a1,1) | … ] truncated to ℓ1 columns
            let mut col = vec![0u32; d1];
            for (k, c) in col.iter_mut().enumerate() {
                let mut acc = 0i128;
                for i in 0..shape.ell1 {
                    let (b, ii) = (i / d1, i % d1);
                    let a = ncyclic(&a1[b * d1..(b + 1) * d1], k, ii);
                    acc += a * db.get(i, j).unwrap() as i8 as i128;
                }
                *c = round_pow2(acc.rem_euclid(1 << 32) as u64, 32, params.q1_tilde_bits) as u32;
            }
            let mut want = vec![0i16; kh];
            pack_chunks(&col, params.q1_tilde_bits, params.p_bits, &mut want);
            let got: Vec<i16> = (0..kh).map(|r| hint.get(r, j)).collect();
            assert_eq!(got, want, "column {j}");
        }

        // H2 = A2·Hᵀ: the CDKS input ã_r must be d2^{-1}·Σ_j α_{r,j} x^{−j}
        // with α_r = A2·(row r of H)ᵀ computed naively.
        let m2 = params.m2(shape);
        let a2_ntt = seed.expand_a2(m2, d2);
        let first3: Vec<i16> = (0..3 * shape.ell2)
            .map(|i| hint.get(i / shape.ell2, i % shape.ell2))
            .collect();
        let rows_a = Server::rows_a(
            &ctx,
            &DigitMatrix::from_row_major(3, shape.ell2, &first3),
            &Server::scaled_a2(&ctx, &a2_ntt),
        );
        for (r, ra) in rows_a.iter().enumerate() {
            let mut coeffs = ra.clone();
            rns::inverse(&ctx.ntt2, &mut coeffs);
            for h in 0..2 {
                let m = MODS[h];
                let mut a2c = a2_ntt.clone();
                // coefficient form of a2 mod this prime
                let polys: Vec<Vec<i128>> = (0..m2)
                    .map(|b| {
                        let mut v = a2c[b * 2 * d2 + h * d2..b * 2 * d2 + (h + 1) * d2].to_vec();
                        ctx.ntt2.t[h].inverse(&mut v);
                        v.iter().map(|&x| x as i128).collect()
                    })
                    .collect();
                a2c.clear();
                let dinv = m.inv(d2 as u32) as i128;
                for k in 0..d2 {
                    // α_{r,k} = Σ_j A2[k][j]·H[r][j]
                    let mut alpha = 0i128;
                    for j in 0..shape.ell2 {
                        alpha += ncyclic(&polys[j / d2], k, j % d2) * hint.get(r, j) as i128;
                    }
                    // coefficient of x^{−k}: x^0 for k = 0, −x^{d−k} otherwise
                    let (pos, sign) = if k == 0 { (0, 1) } else { (d2 - k, -1) };
                    let want = (sign * alpha * dinv).rem_euclid(m.p as i128) as u32;
                    assert_eq!(coeffs[h * d2 + pos], want, "row {r} k {k}");
                }
            }
        }
    }
}
