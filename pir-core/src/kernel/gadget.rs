//! The decomposition step of packing's key switching (CDKS, YPIR §4.2 /
//! App. A): the automorphism τ applied to a node's NTT slots, and the
//! gadget digits of coefficients given by their CRT residues; scalar twins
//! here, both SIMD widths in `simd`.

use super::keyswitch::SlotPerm;
#[cfg(target_arch = "x86_64")]
use super::{simd_width, Simd};

#[cfg(target_arch = "x86_64")]
mod simd;

#[cfg(test)]
mod tests;

/// `out[i] = src[perm[i]]`: τ of Automorph applied to NTT slots (the
/// digits of a packing node, §4.2). Runtime-dispatched like
/// [`add_permuted`](super::add_permuted) (block load + `vpermd` when the permutation is
/// block-structured, gathers otherwise); [`permute_scalar`] is the twin.
pub(crate) fn permute(src: &[u32], perm: &SlotPerm, out: &mut [u32]) {
    let n = perm.perm.len();
    assert!(src.len() == n && out.len() == n);
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected; SlotPerm guarantees every index
                // is < perm.len() = src.len().
                unsafe { simd::permute512(src, &perm.perm, perm.within16, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; SlotPerm guarantees every index is
                // < perm.len() = src.len().
                unsafe { simd::permute256(src, &perm.perm, perm.within8, out) };
                return;
            }
            Simd::None => {}
        }
    }
    permute_scalar(src, &perm.perm, out, 0);
}

/// Scalar twin of [`permute`] from slot `from`.
fn permute_scalar(src: &[u32], perm: &[u32], out: &mut [u32], from: usize) {
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
pub(crate) fn crt_gadget_digits(
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
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected; lengths asserted above.
                unsafe { simd::digits512(crt, res, log_z, t, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected; lengths asserted above.
                unsafe { simd::digits256(crt, res, log_z, t, out) };
                return;
            }
            Simd::None => {}
        }
    }
    crt_gadget_digits_scalar(crt, res, log_z, t, out, 0);
}

/// Scalar twin of [`crt_gadget_digits`] for coefficients `from..`: CRT
/// combination, [`crate::arith::gadget_decompose`], small residues.
fn crt_gadget_digits_scalar(
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
