//! The negacyclic NTT over Z_p\[x\]/(x^n + 1) (conventions in
//! [`crate::ntt`]): the twiddle tables, the scalar transforms with Harvey's
//! lazy butterflies (the twins), their dispatch to the AVX-512 and AVX2
//! transforms (`avx512`, `avx2`), and the forward transform of reversed
//! 16-bit blocks that H2's rows take. [`NttTable`] is public as
//! [`crate::ntt::NttTable`], where its slot and automorphism maps live.

#[cfg(target_arch = "x86_64")]
use super::{simd_width, Simd};
use crate::arith::{csub, Modulus};

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;

#[cfg(test)]
mod tests;

/// Twiddle tables for one prime and one power-of-two dimension.
#[derive(Clone, Debug)]
pub struct NttTable {
    /// The prime modulus.
    pub m: Modulus,
    /// Ring dimension n (power of two).
    pub n: usize,
    pub(crate) log_n: u32,
    /// Primitive 2n-th root of unity ψ.
    pub psi: u32,
    pub(crate) psi_rev: Vec<u32>,
    pub(crate) psi_rev_shoup: Vec<u32>,
    pub(crate) ipsi_rev: Vec<u32>,
    pub(crate) ipsi_rev_shoup: Vec<u32>,
    pub(crate) n_inv: u32,
    pub(crate) n_inv_shoup: u32,
    /// Lane twiddles of the four smallest stages (half-size t = 8, 4, 2, 1)
    /// for the SIMD transforms: for each 32-element chunk, 16 lanes (the
    /// AVX-512 transform); the AVX2 transform reads the stages t = 4, 2, 1
    /// as 8 lanes per 16-element chunk. Unused where there is no SIMD
    /// transform, e.g. wasm32.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) small: SmallStages,
}

/// Per-lane twiddles (and Shoup quotients) of the stages whose butterflies
/// stay inside a 32-element chunk, indexed [stage][chunk·16 + lane] with
/// stage 0..4 ↔ t = 8, 4, 2, 1.
#[derive(Clone, Debug, Default)]
pub(crate) struct SmallStages {
    fwd: [Vec<u32>; 4],
    fwd_shoup: [Vec<u32>; 4],
    inv: [Vec<u32>; 4],
    inv_shoup: [Vec<u32>; 4],
}

/// Bit reversal of the low `bits` bits of `x`.
#[inline]
pub fn bit_reverse(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Smallest primitive root modulo the prime p (public constant).
fn smallest_primitive_root(m: &Modulus) -> u32 {
    let p = m.p;
    let mut factors = Vec::new();
    let mut r = p - 1;
    let mut f = 2;
    while f * f <= r {
        if r.is_multiple_of(f) {
            factors.push(f);
            while r.is_multiple_of(f) {
                r /= f;
            }
        }
        f += 1;
    }
    if r > 1 {
        factors.push(r);
    }
    (2..p)
        .find(|&g| factors.iter().all(|&q| m.pow(g, ((p - 1) / q) as u64) != 1))
        .expect("a prime has a primitive root")
}

impl NttTable {
    /// Builds the tables for prime modulus `m` and dimension `n`
    /// (requires 2n | p − 1).
    pub fn new(m: Modulus, n: usize) -> Self {
        assert!(n.is_power_of_two() && n >= 2);
        assert_eq!(
            (m.p as usize - 1) % (2 * n),
            0,
            "p is not NTT-friendly for n"
        );
        let log_n = n.trailing_zeros();
        let g = smallest_primitive_root(&m);
        let psi = m.pow(g, ((m.p - 1) as usize / (2 * n)) as u64);
        let ipsi = m.inv(psi);
        let mut psi_rev = vec![0u32; n];
        let mut ipsi_rev = vec![0u32; n];
        for (i, (pr, ipr)) in psi_rev.iter_mut().zip(ipsi_rev.iter_mut()).enumerate() {
            let e = bit_reverse(i, log_n) as u64;
            *pr = m.pow(psi, e);
            *ipr = m.pow(ipsi, e);
        }
        let psi_rev_shoup = psi_rev.iter().map(|&w| m.shoup(w)).collect();
        let ipsi_rev_shoup = ipsi_rev.iter().map(|&w| m.shoup(w)).collect();
        let n_inv = m.inv(n as u32);
        let mut small = SmallStages::default();
        if n >= 32 {
            for (st, t) in [8usize, 4, 2, 1].into_iter().enumerate() {
                let blocks = n / (2 * t);
                for c in 0..n / 32 {
                    for l in 0..16 {
                        let idx = blocks + c * (16 / t) + l / t;
                        small.fwd[st].push(psi_rev[idx]);
                        small.fwd_shoup[st].push(m.shoup(psi_rev[idx]));
                        small.inv[st].push(ipsi_rev[idx]);
                        small.inv_shoup[st].push(m.shoup(ipsi_rev[idx]));
                    }
                }
            }
        }
        NttTable {
            m,
            n,
            log_n,
            psi,
            psi_rev,
            psi_rev_shoup,
            ipsi_rev,
            ipsi_rev_shoup,
            n_inv,
            n_inv_shoup: m.shoup(n_inv),
            small,
        }
    }

    /// In-place forward negacyclic NTT. Input coefficients in [0, 4p), output
    /// slots in [0, p), bit-reversed order.
    pub fn forward(&self, a: &mut [u32]) {
        assert_eq!(a.len(), self.n);
        if simd_forward(self, a) {
            return;
        }
        self.forward_scalar(a);
    }

    /// Scalar twin of [`NttTable::forward`].
    pub fn forward_scalar(&self, a: &mut [u32]) {
        let p = self.m.p;
        let two_p = 2 * p;
        let n = self.n;
        let mut t = n;
        let mut m = 1;
        while m < n {
            t >>= 1;
            for i in 0..m {
                let w = self.psi_rev[m + i];
                let ws = self.psi_rev_shoup[m + i];
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = csub(*x, two_p);
                    let v = self.m.mul_shoup_lazy(*y, w, ws);
                    *x = u + v;
                    *y = u + two_p - v;
                }
            }
            m <<= 1;
        }
        for x in a.iter_mut() {
            *x = csub(csub(*x, two_p), p);
        }
    }

    /// In-place inverse negacyclic NTT (bit-reversed slots in [0, p) to
    /// natural-order coefficients in [0, p)).
    pub fn inverse(&self, a: &mut [u32]) {
        assert_eq!(a.len(), self.n);
        if simd_inverse(self, a) {
            return;
        }
        self.inverse_scalar(a);
    }

    /// Scalar twin of [`NttTable::inverse`].
    pub fn inverse_scalar(&self, a: &mut [u32]) {
        let p = self.m.p;
        let two_p = 2 * p;
        let mut t = 1;
        let mut m = self.n;
        while m > 1 {
            let h = m >> 1;
            for i in 0..h {
                let w = self.ipsi_rev[h + i];
                let ws = self.ipsi_rev_shoup[h + i];
                let j1 = 2 * i * t;
                let (lo, hi) = a[j1..j1 + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let u = *x;
                    let v = *y;
                    *x = csub(u + v, two_p);
                    *y = self.m.mul_shoup_lazy(u + two_p - v, w, ws);
                }
            }
            t <<= 1;
            m = h;
        }
        for x in a.iter_mut() {
            *x = self.m.mul_shoup(*x, self.n_inv, self.n_inv_shoup);
        }
    }
}

/// Forward NTT with AVX-512 or AVX2 when the selected kernel allows it
/// (see `simd_width`); returns false (untouched input) when the caller should
/// use the scalar twin. Both SIMD transforms need n ≥ 32 (the lane twiddle
/// tables of [`NttTable`] exist from there on).
fn simd_forward(t: &NttTable, a: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && a.len() == t.n {
            match simd_width() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime; a.len() = n ≥ 32.
                    unsafe { avx512::forward(t, a) };
                    return true;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; a.len() = n ≥ 32.
                    unsafe { avx2::forward(t, a) };
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
/// residues then [`NttTable::forward`]. Scalar twin:
/// `ntt_forward_reversed_i16_scalar` (tests).
///
/// # Panics
/// If `out.len() != t.n` or `src` is longer than `out`.
pub(crate) fn ntt_forward_reversed_i16(t: &NttTable, src: &[i16], out: &mut [u32]) {
    assert!(out.len() == t.n && src.len() <= t.n, "block length");
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && src.len() == t.n {
            match simd_width() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime;
                    // src.len() = out.len() = n ≥ 32.
                    unsafe { avx512::forward_reversed_i16(t, src, out) };
                    return;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; lengths as above.
                    unsafe { avx2::forward_reversed_i16(t, src, out) };
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
#[cfg(test)]
fn ntt_forward_reversed_i16_scalar(t: &NttTable, src: &[i16], out: &mut [u32]) {
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

/// Inverse NTT with AVX-512 or AVX2 when available (see [`simd_forward`]).
fn simd_inverse(t: &NttTable, a: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if t.n >= 32 && a.len() == t.n {
            match simd_width() {
                Simd::Avx512 => {
                    // SAFETY: avx512f/avx512bw detected at runtime; a.len() = n ≥ 32.
                    unsafe { avx512::inverse(t, a) };
                    return true;
                }
                Simd::Avx2 => {
                    // SAFETY: avx2 detected at runtime; a.len() = n ≥ 32.
                    unsafe { avx2::inverse(t, a) };
                    return true;
                }
                Simd::None => {}
            }
        }
    }
    let _ = (t, a);
    false
}
