//! Products of residue vectors mod the CRT primes: the lazy 64-bit
//! accumulation of DBSetup's hint (App. B) and the block sums of H2 reduced
//! in registers (YPIR §4.2); scalar twins here, both SIMD widths in `simd`.

#[cfg(target_arch = "x86_64")]
use super::{simd_width, Simd};

#[cfg(target_arch = "x86_64")]
mod simd;

#[cfg(test)]
mod tests;

/// `acc[i] += a[i]·b[i]` with 64-bit lazy accumulators, no reduction (the
/// block products of DBSetup's hint, App. B: each term < 2^56, at most
/// 2^16/d1 of them summed before [`crate::rns::reduce_acc`]). Over the first
/// `acc.len()` slots; runtime-dispatched: AVX-512F or AVX2 (`vpmuludq` on
/// zero-extended lanes), with [`mul_acc_lazy_scalar`] as the twin.
///
/// # Panics
/// If `a` or `b` is shorter than `acc`.
pub(crate) fn mul_acc_lazy(a: &[u32], b: &[u32], acc: &mut [u64]) {
    assert!(a.len() >= acc.len() && b.len() >= acc.len());
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; a and b hold ≥
                // acc.len() words (asserted above).
                unsafe { simd::mul_acc_lazy_avx512(a, b, acc) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; a and b hold ≥ acc.len()
                // words (asserted above).
                unsafe { simd::mul_acc_lazy_avx2(a, b, acc) };
                return;
            }
            Simd::None => {}
        }
    }
    mul_acc_lazy_scalar(a, b, acc, 0);
}

/// Scalar twin of [`mul_acc_lazy`] from slot `from`.
fn mul_acc_lazy_scalar(a: &[u32], b: &[u32], acc: &mut [u64], from: usize) {
    for ((o, &x), &y) in acc.iter_mut().zip(a).zip(b).skip(from) {
        *o += x as u64 * y as u64;
    }
}

/// Most blocks one pass of [`mul_sum_blocks_mod`] sums before reducing:
/// 256 terms below (2^28)^2 stay below 2^64.
const SUM_BLOCKS_MAX: usize = 256;

/// `out[l] = Σ_{b < blocks} a[b·stride + l]·x[b·stride + l] mod p` for
/// every slot l of `out`, for inputs below 2^28 (residues mod a CRT prime):
/// a row's sum over its blocks in H2 (`Server::rows_a`, YPIR §4.2). The
/// 64-bit sums stay in registers across all the blocks (64 slots per step
/// with AVX-512, 32 with AVX2) and are reduced there, so nothing but the
/// result is stored. More than [`SUM_BLOCKS_MAX`] blocks are summed in
/// runs, each reduced, then added mod p. Scalar twin:
/// [`mul_sum_blocks_mod_scalar`].
///
/// # Panics
/// If `a` or `x` is shorter than `(blocks − 1)·stride + out.len()`, or p
/// is not in (1, 2^28].
pub(crate) fn mul_sum_blocks_mod(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
) {
    assert!(p > 1 && p <= 1 << 28, "modulus out of range");
    if blocks == 0 {
        out.fill(0);
        return;
    }
    let need = (blocks - 1) * stride + out.len();
    assert!(a.len() >= need && x.len() >= need, "blocks past the inputs");
    if blocks > SUM_BLOCKS_MAX {
        let mut part = vec![0u32; out.len()];
        mul_sum_blocks_mod(a, x, stride, SUM_BLOCKS_MAX, p, out);
        let o = SUM_BLOCKS_MAX * stride;
        mul_sum_blocks_mod(
            &a[o..],
            &x[o..],
            stride,
            blocks - SUM_BLOCKS_MAX,
            p,
            &mut part,
        );
        for (s, t) in out.iter_mut().zip(&part) {
            *s = crate::arith::csub(*s + t, p);
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; every block's slots
                // are inside `a` and `x` (asserted above), blocks ≤
                // SUM_BLOCKS_MAX; inputs < 2^28 is the caller's contract
                // (a larger input gives a wrong sum, never a memory error).
                unsafe { simd::mul_sum_blocks_mod_avx512(a, x, stride, blocks, p, out) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; bounds as above.
                unsafe { simd::mul_sum_blocks_mod_avx2(a, x, stride, blocks, p, out) };
                return;
            }
            Simd::None => {}
        }
    }
    mul_sum_blocks_mod_scalar(a, x, stride, blocks, p, out, 0);
}

/// Scalar twin of [`mul_sum_blocks_mod`] for slots `from..`.
///
/// # Panics
/// If blocks > [`SUM_BLOCKS_MAX`] (the 64-bit sums could wrap; the
/// dispatcher splits longer sums), or the inputs are too short.
fn mul_sum_blocks_mod_scalar(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
    from: usize,
) {
    assert!(blocks <= SUM_BLOCKS_MAX, "too many blocks for one sum");
    let Some(out) = out.get_mut(from..) else {
        return;
    };
    let mut acc = vec![0u64; out.len()];
    for b in 0..blocks {
        let o = b * stride + from;
        for (s, (&y, &z)) in acc.iter_mut().zip(a[o..].iter().zip(&x[o..])) {
            *s += y as u64 * z as u64;
        }
    }
    for (o, s) in out.iter_mut().zip(acc) {
        *o = (s % p as u64) as u32;
    }
}
