//! Polynomials over R_{d,q2} in residue (CRT) form, and the per-parameter-set
//! context of precomputed tables shared by client and server.
//!
//! An "RNS polynomial" is a `[u32]` of length 2d: residues mod P0 in the
//! first half and mod P1 in the second, either coefficients (natural order)
//! or NTT slots (bit-reversed order, see [`crate::ntt`]).

use crate::arith::{Crt, Modulus, MODS};
use crate::ntt::CrtNtt;
use crate::params::Params;

/// Forward NTT of both halves.
pub fn forward(ntt: &CrtNtt, a: &mut [u32]) {
    let n = ntt.n();
    let (a0, a1) = a.split_at_mut(n);
    ntt.t[0].forward(a0);
    ntt.t[1].forward(a1);
}

/// Inverse NTT of both halves.
pub fn inverse(ntt: &CrtNtt, a: &mut [u32]) {
    let n = ntt.n();
    let (a0, a1) = a.split_at_mut(n);
    ntt.t[0].inverse(a0);
    ntt.t[1].inverse(a1);
}

/// Writes the residues of signed coefficients into an RNS polynomial.
pub fn from_signed(coeffs: &[i64], out: &mut [u32]) {
    let n = coeffs.len();
    for (h, m) in MODS.iter().enumerate() {
        for (o, &c) in out[h * n..(h + 1) * n].iter_mut().zip(coeffs) {
            *o = crate::arith::reduce_signed(m, c);
        }
    }
}

/// out = a ⊙ b (pointwise, NTT domain).
pub fn mul(a: &[u32], b: &[u32], out: &mut [u32]) {
    let n = a.len() / 2;
    for (h, m) in MODS.iter().enumerate() {
        let r = h * n..(h + 1) * n;
        for ((o, &x), &y) in out[r.clone()].iter_mut().zip(&a[r.clone()]).zip(&b[r]) {
            *o = m.mul(x, y);
        }
    }
}

/// acc += a ⊙ b with 64-bit lazy accumulators (caller reduces; each term < 2^56).
/// SIMD kernel: `kernel::mul_acc_lazy`.
pub fn mul_acc_lazy(a: &[u32], b: &[u32], acc: &mut [u64]) {
    let n = acc.len().min(a.len()).min(b.len());
    crate::kernel::mul_acc_lazy(a, b, &mut acc[..n]);
}

/// Reduces lazy accumulators into an RNS polynomial.
pub fn reduce_acc(acc: &[u64], out: &mut [u32]) {
    let n = acc.len() / 2;
    for (h, m) in MODS.iter().enumerate() {
        for (o, &x) in out[h * n..(h + 1) * n]
            .iter_mut()
            .zip(&acc[h * n..(h + 1) * n])
        {
            *o = m.reduce(x);
        }
    }
}

/// a += b.
pub fn add_assign(a: &mut [u32], b: &[u32]) {
    let n = a.len() / 2;
    for (h, m) in MODS.iter().enumerate() {
        let r = h * n..(h + 1) * n;
        for (x, &y) in a[r.clone()].iter_mut().zip(&b[r]) {
            *x = m.add(*x, y);
        }
    }
}

/// Coefficients mod q2 (in [0, q2)) of an RNS polynomial in coefficient form.
pub fn to_q2(crt: &Crt, a: &[u32], out: &mut [u64]) {
    let n = a.len() / 2;
    for (i, o) in out.iter_mut().enumerate().take(n) {
        *o = crt.combine(a[i], a[n + i]);
    }
}

/// Constants of one level t of the CDKS tree (YPIR Construction 2.8):
/// the automorphism τ_{2^t+1} as an NTT-slot permutation and the monomial
/// x^{d2/2^t} in NTT form with Shoup quotients.
#[derive(Clone, Debug)]
pub struct LevelConsts {
    /// Automorphism exponent g = 2^t + 1.
    pub g: usize,
    /// `τ_g(f)[i] = f[perm[i]]` (same for both primes).
    pub(crate) perm: crate::kernel::SlotPerm,
    /// NTT(x^{d2/2^t}), RNS layout.
    pub mono: Vec<u32>,
    /// Shoup quotients of `mono`.
    pub mono_shoup: Vec<u32>,
    /// `mono` in Montgomery form (·2^32 mod p).
    pub mono_mont: Vec<u32>,
}

/// Everything derived from a parameter set alone.
#[derive(Clone, Debug)]
pub struct Context {
    /// The parameter set.
    pub params: Params,
    /// NTT tables at dimension d1 (hint over the CRT primes; client c1).
    pub ntt1: CrtNtt,
    /// NTT tables at dimension d2.
    pub ntt2: CrtNtt,
    /// CRT helper for q2.
    pub crt: Crt,
    /// Levels t = 1..=log d2 (index t−1).
    pub levels: Vec<LevelConsts>,
    /// NTT(δ · (−x)) with δ = d2^{-1} mod q2: maps the NTT of h = A2-product
    /// polynomial to the CDKS input ã (see `server` module docs).
    pub neg_x_dinv: Vec<u32>,
    /// z^k mod (P0, P1) for k < t.
    pub z_pows: Vec<[u32; 2]>,
    /// Montgomery constants of (P0, P1) for the key-switching kernel.
    pub(crate) mont: [crate::kernel::Mont; 2],
}

impl Context {
    /// Builds all tables for `params`.
    pub fn new(params: Params) -> Self {
        let d2 = params.d2;
        let ntt1 = CrtNtt::new(params.d1);
        let ntt2 = CrtNtt::new(d2);
        let levels = (1..=params.log_d2())
            .map(|t| {
                let g = (1 << t) + 1;
                let k = d2 >> t;
                let mut mono = Vec::with_capacity(2 * d2);
                let mut mono_shoup = Vec::with_capacity(2 * d2);
                for h in 0..2 {
                    let m = ntt2.t[h].monomial(k);
                    mono_shoup.extend(m.iter().map(|&w| MODS[h].shoup(w)));
                    mono.extend(m);
                }
                let mut mono_mont = Vec::with_capacity(2 * d2);
                for h in 0..2 {
                    let r = ((1u64 << 32) % MODS[h].p as u64) as u32;
                    mono_mont.extend(
                        mono[h * d2..(h + 1) * d2]
                            .iter()
                            .map(|&x| MODS[h].mul(x, r)),
                    );
                }
                LevelConsts {
                    g,
                    perm: crate::kernel::SlotPerm::new(ntt2.t[0].automorphism_perm(g)),
                    mono,
                    mono_shoup,
                    mono_mont,
                }
            })
            .collect();
        let mut neg_x_dinv = Vec::with_capacity(2 * d2);
        for h in 0..2 {
            let m: Modulus = MODS[h];
            let dinv = m.inv(d2 as u32 % m.p);
            let mono = ntt2.t[h].monomial(1);
            neg_x_dinv.extend(mono.iter().map(|&x| m.neg(m.mul(x, dinv))));
        }
        let z = params.z() % crate::arith::Q2;
        let z_pows = (0..params.gadget_len())
            .map(|k| {
                let mut r = [1u32; 2];
                for (h, m) in MODS.iter().enumerate() {
                    r[h] = m.pow(m.reduce(z), k as u64);
                }
                r
            })
            .collect();
        Context {
            params,
            ntt1,
            ntt2,
            crt: Crt::new(),
            levels,
            neg_x_dinv,
            z_pows,
            mont: [
                crate::kernel::Mont::new(MODS[0].p),
                crate::kernel::Mont::new(MODS[1].p),
            ],
        }
    }

    /// a1 (`m1` blocks from the seed) lifted to (−2^31, 2^31] and transformed
    /// over both CRT primes (dimension d1): exact integer products with it
    /// are recovered by CRT (App. B hint on the server, c1 on the client).
    /// Returns (a1 coefficients mod 2^32, a1 in NTT form).
    pub fn a1_ntt(&self, seed: &crate::sampler::PublicSeed, m1: usize) -> (Vec<u32>, Vec<u32>) {
        let d1 = self.params.d1;
        let a1 = seed.expand_a1(m1, d1);
        let mut a1_ntt = vec![0u32; m1 * 2 * d1];
        for (block, dst) in a1.chunks(d1).zip(a1_ntt.chunks_mut(2 * d1)) {
            let signed: Vec<i64> = block.iter().map(|&x| x as i32 as i64).collect();
            from_signed(&signed, dst);
            forward(&self.ntt1, dst);
        }
        (a1, a1_ntt)
    }

    /// Converts a sequence of RNS polynomials of dimension d2 (NTT form)
    /// to Montgomery form (x·2^32 mod p per half), as the key-switching
    /// kernel expects for W rows.
    pub fn to_mont(&self, polys: &[u32]) -> Vec<u32> {
        let d2 = self.params.d2;
        let mut out = Vec::with_capacity(polys.len());
        for poly in polys.chunks(2 * d2) {
            for (h, half) in poly.chunks(d2).enumerate() {
                let m = MODS[h];
                let r = self.mont[h].r_mod_p;
                let rs = m.shoup(r);
                out.extend(half.iter().map(|&x| m.mul_shoup(x, r, rs)));
            }
        }
        out
    }
}
