//! Packing's key-switching and node-combination loops in the NTT domain
//! (CDKS, YPIR §4.2): Montgomery key-switch accumulation, the two sides of
//! a node, and the automorphism as a slot permutation ([`SlotPerm`]);
//! scalar twins here, variants in `avx512` and `avx2`.

#[cfg(target_arch = "x86_64")]
use super::{simd_width, Simd};

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;

#[cfg(test)]
mod tests;

/// Montgomery constants of a CRT prime for R = 2^32.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mont {
    /// The prime p.
    pub(crate) p: u32,
    /// −p^{-1} mod 2^32.
    pub(crate) pinv_neg: u32,
    /// R mod p (to convert into Montgomery form).
    pub(crate) r_mod_p: u32,
}

impl Mont {
    /// Constants for the odd prime `p` < 2^30.
    pub(crate) const fn new(p: u32) -> Mont {
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
    fn redc(&self, x: u64) -> u32 {
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
pub(crate) fn keyswitch_acc(
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
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f and avx512bw were detected at runtime;
                // lengths were checked above.
                unsafe { avx512::keyswitch_acc(m, w, g, t, stride, n, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 was detected at runtime; lengths were checked
                // above.
                unsafe { avx2::keyswitch_acc(m, w, g, t, stride, n, out) };
                return;
            }
            Simd::None => {}
        }
    }
    keyswitch_acc_scalar(m, w, g, t, stride, 0, n, out);
}

/// Scalar twin of [`keyswitch_acc`] for slots `from..n`.
#[allow(clippy::too_many_arguments)]
fn keyswitch_acc_scalar(
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
pub(crate) fn plus_minus(
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
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f/avx512bw detected at runtime; all slices
                // have n words (asserted above).
                unsafe { avx512::plus_minus(m, e, o, mono_mont, plus, minus) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; all slices have n words
                // (asserted above).
                unsafe { avx2::plus_minus(m, e, o, mono_mont, plus, minus) };
                return;
            }
            Simd::None => {}
        }
    }
    plus_minus_scalar(m, e, o, mono_mont, plus, minus, 0, n);
}

/// Scalar twin of [`plus_minus`] for slots `from..n`.
#[allow(clippy::too_many_arguments)]
fn plus_minus_scalar(
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
/// `vpermd`, instead of a gather (`vpgatherdd`, several times slower).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotPerm {
    pub(super) perm: Vec<u32>,
    /// Every aligned 16-slot output block reads one aligned 16-slot input
    /// block (and n is a multiple of 16).
    pub(super) within16: bool,
    /// The same for blocks of 8.
    pub(super) within8: bool,
}

impl SlotPerm {
    /// Wraps `perm`; panics unless it is a permutation of 0..perm.len()
    /// (perms are built from parameters at startup, never from input).
    pub(crate) fn new(perm: Vec<u32>) -> SlotPerm {
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
pub(crate) fn add_permuted(p: u32, plus: &[u32], minus: &[u32], perm: &SlotPerm, out: &mut [u32]) {
    let n = perm.perm.len();
    assert!(plus.len() == n && minus.len() == n && out.len() == n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f/avx512bw detected; SlotPerm guarantees every
                // gather index is < perm.len() = minus.len().
                unsafe { avx512::add_permuted(p, plus, minus, &perm.perm, perm.within16, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; SlotPerm guarantees every gather
                // index is < perm.len() = minus.len().
                unsafe { avx2::add_permuted(p, plus, minus, &perm.perm, perm.within8, out) };
                return;
            }
            Simd::None => {}
        }
    }
    add_permuted_scalar(p, plus, minus, &perm.perm, out, 0);
}

/// Scalar twin of [`add_permuted`] from slot `from`.
fn add_permuted_scalar(
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
