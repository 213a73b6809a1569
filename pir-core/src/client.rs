//! The client half: Query and Extract of YPIR Construction 3.1.
//!
//! A [`Client`] is bound to one database version (parameter set, shape,
//! public seed) and holds the public matrices expanded from the seed. Every
//! call to [`Client::query`] draws fresh secrets s1, s2 and errors from a
//! ChaCha20 stream keyed by the OS CSPRNG; nothing secret outlives the
//! [`QueryKey`], which is wiped on drop.
//!
//! Products with the public vectors use the NTT over the two CRT primes of
//! q2: for c1 (over Z_{2^32}) the exact integer product is recovered by CRT
//! because |s1·a1| ≤ d1·2^31·B < q2/2, then reduced mod 2^32.
//! Extraction avoids secret-dependent branches: centring and digit
//! arithmetic use masks, not `if`s.

use std::sync::Arc;

use crate::arith::{reduce_signed, round_pow2, Crt, MODS, Q2};
use crate::db::locate_bit;
use crate::error::{Error, Result};
use crate::params::{DbShape, Layout, Params};
use crate::rns::{self, Context};
use crate::sampler::{GaussianSampler, PublicSeed, SecretRng};
use crate::server::unpack_chunks;
use crate::wire::{Query, Response};

/// Client-side view of one database version.
pub struct Client {
    ctx: Arc<Context>,
    shape: DbShape,
    seed_id: [u8; 8],
    /// a1 blocks lifted to signed and transformed over both primes (dim d1).
    a1_ntt: Vec<u32>,
    /// a2 in NTT form.
    a2: Vec<u32>,
    /// Public random rows of the packing key (NTT form).
    pack_a: Vec<u32>,
    chi1: GaussianSampler,
    chi2: GaussianSampler,
    layout: Layout,
}

/// The query key qk = (s1, s2) plus the queried position. Wiped on drop.
pub struct QueryKey {
    s1: Vec<i64>,
    s2: Vec<i64>,
    row: usize,
    col: usize,
    seed_id: [u8; 8],
}

impl Drop for QueryKey {
    fn drop(&mut self) {
        for x in self.s1.iter_mut().chain(self.s2.iter_mut()) {
            // volatile so the wipe is not optimised away
            // SAFETY-free alternative: write then black_box.
            *x = 0;
        }
        std::hint::black_box(&self.s1);
        std::hint::black_box(&self.s2);
    }
}

impl QueryKey {
    /// The (row, column) this key can extract.
    pub fn position(&self) -> (usize, usize) {
        (self.row, self.col)
    }
}

/// Branch-free centred lift of x ∈ [0, q) to (−q/2, q/2].
#[inline(always)]
fn centre_ct(x: u64, q: u64) -> i64 {
    let over = ((q / 2).wrapping_sub(x) >> 63) as i64; // 1 if x > q/2
    x as i64 - (q as i64 & -over)
}

/// CDKS.Setup (Construction 2.8) with the random rows from the seed
/// (Remark A.4): for t = 1..log d2 and k < t_len, the b row
/// s2·a_{t,k} + e_{t,k} − τ_{2^t+1}(s2)·z^k of W_t, in NTT form.
pub(crate) fn packing_key(
    ctx: &Context,
    s2_ntt: &[u32],
    pack_a: &[u32],
    chi2: &GaussianSampler,
    rng: &mut SecretRng,
) -> Vec<u32> {
    let params = &ctx.params;
    let d2 = params.d2;
    let t_len = params.gadget_len();
    let n = 2 * d2;
    let mut pk_b = vec![0u32; params.log_d2() * t_len * n];
    let mut e_buf = vec![0i64; d2];
    let mut e_ntt = vec![0u32; n];
    for level in 1..=params.log_d2() {
        let perm = &ctx.levels[level - 1].perm;
        for k in 0..t_len {
            let off = ((level - 1) * t_len + k) * n;
            chi2.fill(rng, &mut e_buf);
            rns::from_signed(&e_buf, &mut e_ntt);
            rns::forward(&ctx.ntt2, &mut e_ntt);
            for h in 0..2 {
                let m = &MODS[h];
                let zk = ctx.z_pows[k][h];
                for i in 0..d2 {
                    let j = h * d2 + i;
                    let sa = m.mul(s2_ntt[j], pack_a[off + j]);
                    let tau_s = s2_ntt[h * d2 + perm[i] as usize];
                    let v = m.add(sa, e_ntt[j]);
                    pk_b[off + j] = m.sub(v, m.mul(tau_s, zk));
                }
            }
        }
    }
    e_buf.fill(0);
    e_ntt.fill(0);
    pk_b
}

impl Client {
    /// Binds a client to the database published as (`params`, `shape`,
    /// `seed`); expands the public vectors (Remark 3.2, Remark A.4).
    pub fn new(params: Params, shape: DbShape, seed: PublicSeed) -> Result<Client> {
        Self::with_context(Arc::new(Context::new(params)), shape, seed)
    }

    /// [`Client::new`] reusing a prebuilt [`Context`].
    pub fn with_context(ctx: Arc<Context>, shape: DbShape, seed: PublicSeed) -> Result<Client> {
        let params = ctx.params;
        params.check_shape(shape)?;
        let (_, a1_ntt) = ctx.a1_ntt(&seed, params.m1(shape));
        Ok(Client {
            a2: seed.expand_a2(params.m2(shape), params.d2),
            pack_a: seed.expand_pack(params.log_d2(), params.gadget_len(), params.d2),
            chi1: GaussianSampler::new(params.s1),
            chi2: GaussianSampler::new(params.s2),
            layout: params.layout(),
            seed_id: seed.id(),
            a1_ntt,
            ctx,
            shape,
        })
    }

    /// The parameter set.
    pub fn params(&self) -> &Params {
        &self.ctx.params
    }

    /// The database shape.
    pub fn shape(&self) -> DbShape {
        self.shape
    }

    /// Query(pp, (row, col)) with fresh OS randomness.
    pub fn query(&self, row: usize, col: usize) -> Result<(Query, QueryKey)> {
        let mut rng = SecretRng::from_os()?;
        self.query_with_rng(row, col, &mut rng)
    }

    /// Query for one bit of a bit database of `bits` bits (see
    /// [`crate::db::BitDatabase`]); returns the bit position within the
    /// record for [`Client::extract_bit`].
    pub fn query_bit(&self, bits: u64, bit: u64) -> Result<(Query, QueryKey, u32)> {
        let loc = locate_bit(self.shape, bits, bit)?;
        let (q, k) = self.query(loc.row, loc.col)?;
        Ok((q, k, loc.bit))
    }

    pub(crate) fn query_with_rng(
        &self,
        row: usize,
        col: usize,
        rng: &mut SecretRng,
    ) -> Result<(Query, QueryKey)> {
        let params = &self.ctx.params;
        let (ell1, ell2) = (self.shape.ell1, self.shape.ell2);
        if row >= ell1 || col >= ell2 {
            return Err(Error::IndexOutOfRange {
                index: (col * ell1 + row) as u64,
                len: (ell1 * ell2) as u64,
            });
        }
        let (d1, d2) = (params.d1, params.d2);
        // 1. Key generation: s1 ← χ1, s2 ← χ2.
        let mut s1 = vec![0i64; d1];
        self.chi1.fill(rng, &mut s1);
        let mut s2 = vec![0i64; d2];
        self.chi2.fill(rng, &mut s2);

        // 2. c1 = Coeffs(s1·a1 + e1 + Δ1·x^β1·u_α1) ∈ Z_{2^32}^{ℓ1}.
        let mut s1_ntt = vec![0u32; 2 * d1];
        rns::from_signed(&s1, &mut s1_ntt);
        rns::forward(&self.ctx.ntt1, &mut s1_ntt);
        let mut c1 = Vec::with_capacity(ell1);
        let mut buf = vec![0u32; 2 * d1];
        let crt = Crt::new();
        let m1 = params.m1(self.shape);
        for b in 0..m1 {
            rns::mul(
                &self.a1_ntt[b * 2 * d1..(b + 1) * 2 * d1],
                &s1_ntt,
                &mut buf,
            );
            rns::inverse(&self.ctx.ntt1, &mut buf);
            for i in 0..d1 {
                let idx = b * d1 + i;
                if idx >= ell1 {
                    break;
                }
                let prod = centre_ct(crt.combine(buf[i], buf[d1 + i]), Q2) as u32;
                let e = self.chi1.sample(rng) as u32;
                let msg = params.delta1() & 0u32.wrapping_sub((idx == row) as u32);
                c1.push(prod.wrapping_add(e).wrapping_add(msg));
            }
        }

        // c2 = Coeffs(s2·a2 + e2 + Δ2·x^β2·u_α2) ∈ Z_{q2}^{ℓ2} (residues).
        let mut s2_ntt = vec![0u32; 2 * d2];
        rns::from_signed(&s2, &mut s2_ntt);
        rns::forward(&self.ctx.ntt2, &mut s2_ntt);
        let delta2 = params.delta2();
        let delta2_res = [MODS[0].reduce(delta2), MODS[1].reduce(delta2)];
        let mut c2 = vec![0u32; 2 * ell2];
        let mut buf2 = vec![0u32; 2 * d2];
        for b in 0..params.m2(self.shape) {
            rns::mul(&self.a2[b * 2 * d2..(b + 1) * 2 * d2], &s2_ntt, &mut buf2);
            rns::inverse(&self.ctx.ntt2, &mut buf2);
            for i in 0..d2 {
                let idx = b * d2 + i;
                if idx >= ell2 {
                    break;
                }
                let e = self.chi2.sample(rng);
                let hit = 0u32.wrapping_sub((idx == col) as u32);
                for h in 0..2 {
                    let m = &MODS[h];
                    let v = m.add(buf2[h * d2 + i], reduce_signed(m, e));
                    c2[h * ell2 + idx] = m.add(v, delta2_res[h] & hit);
                }
            }
        }

        // Packing key (CDKS.Setup).
        let pk_b = packing_key(&self.ctx, &s2_ntt, &self.pack_a, &self.chi2, rng);
        s1_ntt.fill(0);
        s2_ntt.fill(0);
        Ok((
            Query::new(params.id, self.seed_id, self.shape, pk_b, c1, c2)?,
            QueryKey {
                s1,
                s2,
                row,
                col,
                seed_id: self.seed_id,
            },
        ))
    }

    fn check_response(&self, key: &QueryKey, resp: &Response) -> Result<()> {
        let params = &self.ctx.params;
        if resp.param_id != params.id {
            return Err(Error::WrongParamSet {
                expected: params.id,
                got: resp.param_id,
            });
        }
        if resp.seed_id != key.seed_id {
            return Err(Error::WrongSeed {
                expected: crate::sampler::hex(&key.seed_id),
                got: crate::sampler::hex(&resp.seed_id),
            });
        }
        let (d2, n_used) = (params.d2, self.layout.n_used);
        if resp.c0.len() != d2 || resp.c1.len() != n_used {
            return Err(Error::LengthMismatch {
                expected: d2 + n_used,
                got: resp.c0.len() + resp.c1.len(),
            });
        }
        Ok(())
    }

    /// v'_i = ⌊−s2·c0⌉_{q̃21,q̃22} + c1 (mod q̃22) for the used slots.
    /// The product is exact over the CRT primes (|s2·c0| ≤ d2·2^27·B2 < q2/2).
    fn phase(&self, key: &QueryKey, resp: &Response) -> Vec<u64> {
        let params = &self.ctx.params;
        let d2 = params.d2;
        let (b21, b22) = (params.q2_1_tilde_bits, params.q2_2_tilde_bits);
        let q21 = 1u64 << b21;
        let c0_signed: Vec<i64> = resp
            .c0
            .iter()
            .map(|&x| centre_ct(x as u64 & (q21 - 1), q21))
            .collect();
        let mut c0n = vec![0u32; 2 * d2];
        rns::from_signed(&c0_signed, &mut c0n);
        rns::forward(&self.ctx.ntt2, &mut c0n);
        let mut s2n = vec![0u32; 2 * d2];
        rns::from_signed(&key.s2, &mut s2n);
        rns::forward(&self.ctx.ntt2, &mut s2n);
        let mut prod = vec![0u32; 2 * d2];
        rns::mul(&c0n, &s2n, &mut prod);
        rns::inverse(&self.ctx.ntt2, &mut prod);
        s2n.fill(0);
        let crt = Crt::new();
        (0..self.layout.n_used)
            .map(|i| {
                let sc = centre_ct(crt.combine(prod[i], prod[d2 + i]), Q2);
                let neg = (sc.wrapping_neg() as u64) & (q21 - 1);
                let r = round_pow2(neg, b21, b22);
                (r + resp.c1[i] as u64) & ((1u64 << b22) - 1)
            })
            .collect()
    }

    /// Extract(qk, resp): the record `D[row][col]` ∈ Z_N.
    pub fn extract(&self, key: &QueryKey, resp: &Response) -> Result<u8> {
        self.check_response(key, resp)?;
        let params = &self.ctx.params;
        let pb = params.p_bits;
        let phase = self.phase(key, resp);
        // Integrity of the transport, not against a malicious server: an
        // honest answer's phases sit within a few σ_double of a multiple of
        // the step q̃22/p (Theorem 3.4 makes |e| < step/2 except with
        // probability δ ≤ 2^-40, so its variance is far below step²/200),
        // while bytes that are not an answer to this query (garbage, a
        // truncated-and-padded body, an answer to another client's key)
        // give phases uniform over the step, variance step²/12. Refusing
        // above step²/48 turns such a response into an error instead of a
        // random bit, so a broken auditor cannot produce false NOT FOUNDs.
        let variance = phase_noise_variance(&phase, params.q2_2_tilde_bits - pb);
        let step = (1u64 << (params.q2_2_tilde_bits - pb)) as f64;
        let limit = step * step / 48.0;
        if variance.is_nan() || variance > limit {
            return Err(Error::NoisyResponse { variance, limit });
        }
        let w: Vec<u32> = phase
            .iter()
            .map(|&v| round_pow2(v, params.q2_2_tilde_bits, pb) as u32)
            .collect();
        // Decode the dense hint chunks and the T digits.
        let chunks: Vec<u32> = self.layout.pos_hint.iter().map(|&p| w[p]).collect();
        let mut h = vec![0u32; params.d1];
        unpack_chunks(&chunks, params.q1_tilde_bits, pb, &mut h);
        let q1t = 1u64 << params.q1_tilde_bits;
        let p = 1u64 << pb;
        let mut y = 0i64;
        for (k, &pos) in self.layout.pos_t.iter().enumerate() {
            // signed digit in [−p/2, p/2]
            let d = centre_ct(w[pos] as u64, p);
            y += d << (pb as usize * k);
        }
        // μ' = y − ⟨s1, h⟩ mod q̃1, μ = ⌊μ'⌉_{q̃1,N}
        let mut acc = y;
        for (s, &hv) in key.s1.iter().zip(&h) {
            acc = acc.wrapping_sub(s.wrapping_mul(hv as i64));
        }
        let mu_prime = (acc as u64) & (q1t - 1);
        Ok(round_pow2(mu_prime, params.q1_tilde_bits, params.record_bits) as u8)
    }

    /// Diagnostic: the empirical variance (in units of q̃_{2,2}, squared) of
    /// the decryption noise of a response, i.e. of v' minus the nearest
    /// multiple of q̃_{2,2}/p over the used slots. While decoding succeeds
    /// this is exactly the noise Theorem 3.4 bounds by σ_double²/(2π).
    pub fn noise_variance(&self, key: &QueryKey, resp: &Response) -> Result<f64> {
        self.check_response(key, resp)?;
        let params = &self.ctx.params;
        Ok(phase_noise_variance(
            &self.phase(key, resp),
            params.q2_2_tilde_bits - params.p_bits,
        ))
    }

    /// Extract one bit of a bit database.
    pub fn extract_bit(&self, key: &QueryKey, resp: &Response, bit: u32) -> Result<bool> {
        Ok(self.extract(key, resp)? >> bit & 1 == 1)
    }
}

/// Mean squared distance of `phase` values to the nearest multiple of
/// 2^`step_bits` (0 for no values).
fn phase_noise_variance(phase: &[u64], step_bits: u32) -> f64 {
    if phase.is_empty() {
        return 0.0;
    }
    let step = 1i64 << step_bits;
    let sum: f64 = phase
        .iter()
        .map(|&x| {
            let r = (x as i64).rem_euclid(step);
            let e = if r >= step / 2 { r - step } else { r };
            (e * e) as f64
        })
        .sum();
    sum / phase.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::round_mod;
    use crate::params::TABLE1;
    use rand_core::RngCore;

    /// Lemma 2.4: ModReduce_{q̃21,q̃22} of an RLWE encoding of Δ2·μ leaves
    /// error e' = e'_1 + e'_2 with |e'_1| ≤ ½(2 + q̃22 mod p + (q̃22/q2)(q2 mod p))
    /// and e'_2 subgaussian with σ'² = (q̃22/q̃21)²·d2·s2²/4 + (q̃22/q2)²·σ_e².
    #[test]
    fn modulus_switching_error_within_lemma_2_4() {
        let params = TABLE1;
        let shape = DbShape { ell1: 64, ell2: 64 };
        let client = Client::new(params, shape, PublicSeed([1u8; 32])).unwrap();
        let ctx = &client.ctx;
        let d2 = params.d2;
        let mut rng = SecretRng::from_test_seed(3);
        let mut s2 = vec![0i64; d2];
        client.chi2.fill(&mut rng, &mut s2);
        let mut e = vec![0i64; d2];
        client.chi2.fill(&mut rng, &mut e);
        let mu: Vec<u64> = (0..d2).map(|_| rng.next_u64() % params.p()).collect();
        // b = s·a + Δ2·μ + e over R_{q2}
        let a: Vec<u64> = (0..d2).map(|_| rng.next_u64() % Q2).collect();
        let mut a_rns = vec![0u32; 2 * d2];
        let mut s_rns = vec![0u32; 2 * d2];
        for i in 0..d2 {
            a_rns[i] = MODS[0].reduce(a[i]);
            a_rns[d2 + i] = MODS[1].reduce(a[i]);
        }
        rns::from_signed(&s2, &mut s_rns);
        rns::forward(&ctx.ntt2, &mut a_rns);
        rns::forward(&ctx.ntt2, &mut s_rns);
        let mut sa = vec![0u32; 2 * d2];
        rns::mul(&a_rns, &s_rns, &mut sa);
        rns::inverse(&ctx.ntt2, &mut sa);
        let crt = Crt::new();
        let delta = params.delta2() as u128;
        let b: Vec<u64> = (0..d2)
            .map(|i| {
                let v = crt.combine(sa[i], sa[d2 + i]) as u128
                    + delta * mu[i] as u128
                    + e[i].rem_euclid(Q2 as i64) as u128;
                (v % Q2 as u128) as u64
            })
            .collect();
        let (q21, q22) = (
            1u64 << params.q2_1_tilde_bits,
            1u64 << params.q2_2_tilde_bits,
        );
        let layout = params.layout();
        let resp = Response {
            param_id: params.id,
            seed_id: client.seed_id,
            c0: a.iter().map(|&x| round_mod(x, Q2, q21) as u32).collect(),
            c1: b[..layout.n_used]
                .iter()
                .map(|&x| round_mod(x, Q2, q22) as u32)
                .collect(),
        };
        let key = QueryKey {
            s1: vec![0; params.d1],
            s2: s2.clone(),
            row: 0,
            col: 0,
            seed_id: client.seed_id,
        };
        let v = client.phase(&key, &resp);
        let step = (q22 / params.p()) as i64; // ⌊q̃22/p⌋
        let q2f = Q2 as f64;
        let e1 = 0.5 * (2.0 + 0.0 + (q22 as f64 / q2f) * (Q2 % params.p()) as f64);
        let sig_e_sq = params.s2 * params.s2;
        let sigma = ((q22 as f64 / q21 as f64).powi(2) * d2 as f64 * params.s2 * params.s2 / 4.0
            + (q22 as f64 / q2f).powi(2) * sig_e_sq)
            .sqrt();
        let mut max = 0f64;
        for (i, &vi) in v.iter().enumerate() {
            let err = crate::arith::centre((vi + q22 - (step as u64 * mu[i]) % q22) % q22, q22);
            max = max.max(err.abs() as f64);
        }
        // Pr[|e'_2| > 4σ'] ≤ 2·exp(−16π) per coefficient.
        assert!(
            max <= e1 + 4.0 * sigma,
            "max {max} bound {}",
            e1 + 4.0 * sigma
        );
    }

    #[test]
    fn centre_is_branch_free_and_correct() {
        for q in [1u64 << 20, Q2] {
            for x in [0, 1, q / 2 - 1, q / 2, q / 2 + 1, q - 1] {
                assert_eq!(centre_ct(x, q), crate::arith::centre(x, q));
            }
        }
    }
}
