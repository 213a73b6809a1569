//! Answer (YPIR Construction 3.1 steps 1–4), one query or a batch of
//! queries with one pass over the database (§4.3).

use std::time::Instant;

use super::chunks::t_digits;
use super::Server;
use crate::arith::{round_mod, round_pow2, MODS, Q2};
use crate::digits::DigitMatrix;
use crate::error::{Error, Result};
use crate::kernel;
use crate::packing::{PackInputs, StaticKs};
use crate::params::LOG_Q1;
use crate::rns;
use crate::sampler::hex;
use crate::wire::{Query, Response};

/// Time spent in each step of one (batched) answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnswerTimings {
    /// Step 1: c1ᵀ·D (all queries of the batch), from the start of the scan
    /// to its end (with more than one thread the query-only work of steps
    /// 2–3 runs beside it: [`AnswerTimings::overlapped`]).
    pub simplepir: f64,
    /// Step 2: c2ᵀ·[H; T]ᵀ and the T leaves.
    pub doublepir: f64,
    /// Steps 3–4: packing and modulus switching.
    pub packing: f64,
    /// The part of `doublepir` and `packing` that ran beside the scan (the
    /// hint rows' DoublePIR pass and the packing tree's static subtrees):
    /// zero on one thread, where the steps run in order.
    pub overlapped: f64,
}

impl Server {
    /// Bytes one answer (or one batch) streams from memory: the database,
    /// the dense hint rows (DoublePIR pass) and the packing tree's cached
    /// digits. A memory-bound answer takes at least this ÷ the bandwidth.
    pub fn answer_stream_bytes(&self) -> usize {
        self.db.as_bytes().len() + self.hint.storage_bytes() + self.pack.size_bytes()
    }

    /// Whether `q` was built for this database. Its section lengths then
    /// match too: a [`Query`] always has the lengths of its own parameter
    /// set and shape.
    fn check_query(&self, q: &Query) -> Result<()> {
        let params = &self.ctx.params;
        if q.param_id() != params.id {
            return Err(Error::WrongParamSet {
                expected: params.id,
                got: q.param_id(),
            });
        }
        if q.seed_id() != self.seed_id {
            return Err(Error::WrongSeed {
                expected: hex(&self.seed_id),
                got: hex(&q.seed_id()),
            });
        }
        if q.shape() != self.shape {
            return Err(Error::WrongShape {
                ell1: self.shape.ell1,
                ell2: self.shape.ell2,
                got_ell1: q.shape().ell1,
                got_ell2: q.shape().ell2,
            });
        }
        Ok(())
    }

    /// Answer(dbp, q) on wire bytes.
    pub fn answer_bytes(&self, query: &[u8]) -> Result<Vec<u8>> {
        let q = Query::from_bytes(query)?;
        Ok(self.answer(&q)?.to_bytes())
    }

    /// Answer(dbp, q).
    pub fn answer(&self, q: &Query) -> Result<Response> {
        Ok(self.answer_batch(std::slice::from_ref(q))?.remove(0))
    }

    /// Answers k queries with one pass over the database (§4.3).
    pub fn answer_batch(&self, qs: &[Query]) -> Result<Vec<Response>> {
        Ok(self.answer_batch_timed(qs)?.0)
    }

    /// [`Server::answer_batch`] with a per-step time breakdown.
    pub fn answer_batch_timed(&self, qs: &[Query]) -> Result<(Vec<Response>, AnswerTimings)> {
        if qs.is_empty() {
            return Err(Error::InvalidBatch("no queries"));
        }
        for q in qs {
            self.check_query(q)?;
        }
        let params = &self.ctx.params;
        let ell2 = self.shape.ell2;
        let kappa = params.kappa();
        let mut tm = AnswerTimings::default();
        let c2s: Vec<&[u32]> = qs.iter().map(|q| q.c2()).collect();

        // The query-only work: the DoublePIR pass over the hint rows (step
        // 2) and the packing tree's static subtrees (step 3, §4.2) depend
        // on the query and the setup state but not on step 1's result.
        let query_only = || {
            let t = Instant::now();
            let mut yh = vec![vec![[0u32; 2]; params.hint_rows()]; qs.len()];
            kernel::doublepir(&self.hint, &c2s, &mut yh);
            let dp_secs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let wbs: Vec<Vec<u32>> = qs.iter().map(|q| self.ctx.to_mont(q.pk_b())).collect();
            let wb_refs: Vec<&[u32]> = wbs.iter().map(Vec::as_slice).collect();
            let sks = self.pack.static_ks(&self.ctx, &wb_refs);
            QueryOnly {
                yh,
                wbs,
                sks,
                dp_secs,
                pack_secs: t.elapsed().as_secs_f64(),
            }
        };
        // Step 1: SimplePIR pass, one scan for the whole batch.
        let scan = || {
            let t = Instant::now();
            let c1s: Vec<&[u32]> = qs.iter().map(|q| q.c1()).collect();
            let mut y1 = vec![vec![0u32; ell2]; qs.len()];
            kernel::simplepir(&self.db, &c1s, &mut y1);
            (y1, t.elapsed().as_secs_f64())
        };
        // With more than one thread the memory-bound scan runs beside the
        // query-only work: the thread that takes the latter leaves the
        // other reading the database at one core's bandwidth, then joins
        // the scan by work stealing. One thread keeps the steps in order,
        // so its time breakdown compares with the paper's.
        let (((y1, scan_secs), qo), overlapped) = crate::join_if(true, scan, query_only);
        if overlapped {
            tm.overlapped = qo.dp_secs + qo.pack_secs;
        }
        // T = g_p^{-1}(⌊c1ᵀD⌉_{q1,q̃1}), κ rows × ℓ2 per query.
        let t0 = Instant::now();
        let t_rows: Vec<DigitMatrix> = y1
            .iter()
            .map(|y| {
                let mut t = vec![0i16; kappa * ell2];
                let mut dg = vec![0i16; kappa];
                for (j, &v) in y.iter().enumerate() {
                    let r = round_pow2(v as u64, LOG_Q1, params.q1_tilde_bits) as u32;
                    t_digits(r, params.q1_tilde_bits, params.p_bits, kappa, &mut dg);
                    for k in 0..kappa {
                        t[k * ell2 + j] = dg[k];
                    }
                }
                DigitMatrix::from_row_major(kappa, ell2, &t)
            })
            .collect();
        tm.simplepir = scan_secs + t0.elapsed().as_secs_f64();

        // Step 2: DoublePIR pass over each query's T rows (the hint rows
        // were done above, for the whole batch in one scan).
        let t1 = Instant::now();
        let mut yt = Vec::with_capacity(qs.len());
        let mut t_leaf_a = Vec::with_capacity(qs.len());
        for (q, t) in qs.iter().zip(&t_rows) {
            let mut o = vec![vec![[0u32; 2]; kappa]];
            kernel::doublepir(t, &[q.c2()], &mut o);
            yt.push(o.remove(0));
            t_leaf_a.push(Self::rows_a(&self.ctx, t, &self.a2));
        }
        tm.doublepir = qo.dp_secs + t1.elapsed().as_secs_f64();

        // Steps 3–4: packing with the §4.2 precomputation, modulus switching.
        let t2 = Instant::now();
        let d2 = params.d2;
        let mut out = Vec::with_capacity(qs.len());
        let inputs: Vec<PackInputs<'_>> = qo
            .wbs
            .iter()
            .zip(&t_leaf_a)
            .map(|(wb, ta)| PackInputs {
                wb,
                wa: &self.pack_a,
                t_leaf_a: ta,
            })
            .collect();
        let packed_all = self.pack.pack_dynamic(&self.ctx, &inputs, &qo.sks);
        for ((i, q), packed) in qs.iter().enumerate().zip(packed_all) {
            let mut a = packed.a;
            rns::inverse(&self.ctx.ntt2, &mut a);
            let mut b = packed.ks;
            rns::inverse(&self.ctx.ntt2, &mut b);
            // leaf part d2·Σ b_i x^i = Σ_i y_i x^i (the d2^{-1} of Eq. 3.2 cancels)
            for (r, &pos) in self.layout.pos_hint.iter().enumerate() {
                for h in 0..2 {
                    b[h * d2 + pos] = MODS[h].add(b[h * d2 + pos], qo.yh[i][r][h]);
                }
            }
            for (r, &pos) in self.layout.pos_t.iter().enumerate() {
                for h in 0..2 {
                    b[h * d2 + pos] = MODS[h].add(b[h * d2 + pos], yt[i][r][h]);
                }
            }
            let q21 = 1u64 << params.q2_1_tilde_bits;
            let q22 = 1u64 << params.q2_2_tilde_bits;
            let c0 = (0..d2)
                .map(|k| round_mod(self.ctx.crt.combine(a[k], a[d2 + k]), Q2, q21) as u32)
                .collect();
            let c1 = (0..self.layout.n_used)
                .map(|k| round_mod(self.ctx.crt.combine(b[k], b[d2 + k]), Q2, q22) as u32)
                .collect();
            out.push(Response {
                param_id: q.param_id(),
                seed_id: self.seed_id,
                c0,
                c1,
            });
        }
        tm.packing = qo.pack_secs + t2.elapsed().as_secs_f64();
        Ok((out, tm))
    }
}

/// The query-only part of steps 2–3 of one (batched) answer, with the time
/// each took.
struct QueryOnly {
    /// c2ᵀ·H per query: the hint rows' DoublePIR outputs.
    yh: Vec<Vec<[u32; 2]>>,
    /// Each query's W_b rows in Montgomery form.
    wbs: Vec<Vec<u32>>,
    /// The static subtrees' key-switching sums.
    sks: StaticKs,
    dp_secs: f64,
    pack_secs: f64,
}
