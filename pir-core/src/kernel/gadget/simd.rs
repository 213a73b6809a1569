//! SIMD twins of [`super::permute`] and [`super::crt_gadget_digits`].
//! The digit kernels hold one coefficient per 64-bit lane: the CRT
//! value x < q2 < 2^56 and the offset value u < 2^63 need it.
use crate::arith::{Crt, P0, P1, Q2};
use crate::kernel::keyswitch::{avx2 as ks_avx2, avx512 as ks_avx512};
use std::arch::x86_64::*;

/// 16 slots per step (see `keyswitch::avx512::add_permuted`).
///
/// # Safety
/// avx512f must be available; every `perm` index < `src.len()` =
/// `out.len()` = `perm.len()`; with `within16` every aligned 16-slot
/// output block reads one aligned 16-slot input block.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn permute512(src: &[u32], perm: &[u32], within16: bool, out: &mut [u32]) {
    let n16 = out.len() / 16 * 16;
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 ≤ n16 ≤ n; indices < src.len() (caller); with
        // `within16` the block perm[i]/16·16 .. +16 is inside src.
        unsafe {
            let g = ks_avx512::slots16(src, perm, i, within16);
            _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, g);
        }
        i += 16;
    }
    super::permute_scalar(src, perm, out, n16);
}

/// 8 slots per step.
///
/// # Safety
/// avx2 must be available; as [`permute512`] with blocks of 8.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn permute256(src: &[u32], perm: &[u32], within8: bool, out: &mut [u32]) {
    let n8 = out.len() / 8 * 8;
    let mut i = 0;
    while i < n8 {
        // SAFETY: as in permute512 with 8 lanes.
        unsafe {
            let g = ks_avx2::slots8(src, perm, i, within8);
            _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, g);
        }
        i += 8;
    }
    super::permute_scalar(src, perm, out, n8);
}

/// The constant added before the digits are cut: Σ_{k<t−1} (z/2)·z^k + 2^62.
fn offset(log_z: u32, t: usize) -> u64 {
    let half = 1u64 << (log_z - 1);
    (0..t - 1).map(|k| half << (k as u32 * log_z)).sum::<u64>() + (1 << 62)
}

/// 8 coefficients per step.
///
/// # Safety
/// avx512f must be available; `res.len() = 2n`, `out.len() = t·2n`,
/// (t−1)·log z ≤ 62, residues < their primes.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn digits512(crt: &Crt, res: &[u32], log_z: u32, t: usize, out: &mut [u32]) {
    let n = res.len() / 2;
    let n8 = n / 8 * 8;
    let (w, ws) = crt.p0_inv();
    let (w, ws) = (_mm512_set1_epi64(w as i64), _mm512_set1_epi64(ws as i64));
    let p0 = _mm512_set1_epi64(P0 as i64);
    let p1 = _mm512_set1_epi64(P1 as i64);
    let q2 = _mm512_set1_epi64(Q2 as i64);
    let half_q2 = _mm512_set1_epi64((Q2 / 2) as i64);
    let off = _mm512_set1_epi64(offset(log_z, t) as i64);
    let mask_z = _mm512_set1_epi64((1i64 << log_z) - 1);
    let half_z = _mm512_set1_epi64(1i64 << (log_z - 1));
    let top_shift = (t - 1) as u32 * log_z;
    let top_bias = _mm512_set1_epi64(1i64 << (62 - top_shift));
    let (pp0, pp1) = (_mm256_set1_epi32(P0 as i32), _mm256_set1_epi32(P1 as i32));
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 ≤ n8 ≤ n: the loads read res[i..i+8] and
        // res[n+i..n+i+8]; the stores write out[k·2n + i..+8] and
        // out[k·2n + n + i..+8] for k < t, inside out (len t·2n).
        unsafe {
            let r0 =
                _mm512_cvtepu32_epi64(_mm256_loadu_si256(res.as_ptr().add(i) as *const __m256i));
            let r1 = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                res.as_ptr().add(n + i) as *const __m256i
            ));
            // Crt::combine: x = r0 + P0·((r1 − r0 mod P1)·P0^{-1} mod P1)
            let r0m = _mm512_min_epu64(r0, _mm512_sub_epi64(r0, p1));
            let diff = _mm512_sub_epi64(r1, r0m);
            let diff = _mm512_min_epu64(diff, _mm512_add_epi64(diff, p1));
            let q = _mm512_srli_epi64(_mm512_mul_epu32(diff, ws), 32);
            let k = _mm512_sub_epi64(_mm512_mul_epu32(diff, w), _mm512_mul_epu32(q, p1));
            let k = _mm512_min_epu64(k, _mm512_sub_epi64(k, p1));
            let x = _mm512_add_epi64(r0, _mm512_mul_epu32(k, p0));
            // centre and offset (see crt_gadget_digits)
            let above = _mm512_cmpgt_epu64_mask(x, half_q2);
            let u = _mm512_add_epi64(x, off);
            let u = _mm512_mask_sub_epi64(u, above, u, q2);
            for k in 0..t {
                let s = _mm_cvtsi32_si128((k as u32 * log_z) as i32);
                let v = _mm512_srl_epi64(u, s);
                let d = if k + 1 < t {
                    _mm512_sub_epi64(_mm512_and_si512(v, mask_z), half_z)
                } else {
                    _mm512_sub_epi64(v, top_bias)
                };
                // |digit| < 2^31: narrow, then the small residues
                let d = _mm512_cvtepi64_epi32(d);
                let neg = _mm256_srai_epi32(d, 31);
                let a0 = _mm256_add_epi32(d, _mm256_and_si256(neg, pp0));
                let a1 = _mm256_add_epi32(d, _mm256_and_si256(neg, pp1));
                let o = out.as_mut_ptr().add(k * 2 * n + i);
                _mm256_storeu_si256(o as *mut __m256i, a0);
                _mm256_storeu_si256(o.add(n) as *mut __m256i, a1);
            }
        }
        i += 8;
    }
    super::crt_gadget_digits_scalar(crt, res, log_z, t, out, n8);
}

/// a − p if a ≥ p, for 64-bit lanes below 2^63 (signed compare).
#[inline]
#[target_feature(enable = "avx2")]
fn csub64(a: __m256i, p: __m256i, p_minus_1: __m256i) -> __m256i {
    _mm256_sub_epi64(a, _mm256_and_si256(_mm256_cmpgt_epi64(a, p_minus_1), p))
}

/// 4 coefficients per step.
///
/// # Safety
/// avx2 must be available; as [`digits512`].
#[target_feature(enable = "avx2")]
pub(super) unsafe fn digits256(crt: &Crt, res: &[u32], log_z: u32, t: usize, out: &mut [u32]) {
    let n = res.len() / 2;
    let n4 = n / 4 * 4;
    let (w, ws) = crt.p0_inv();
    let (w, ws) = (_mm256_set1_epi64x(w as i64), _mm256_set1_epi64x(ws as i64));
    let p0 = _mm256_set1_epi64x(P0 as i64);
    let p1 = _mm256_set1_epi64x(P1 as i64);
    let p1m = _mm256_set1_epi64x(P1 as i64 - 1);
    let q2 = _mm256_set1_epi64x(Q2 as i64);
    let half_q2 = _mm256_set1_epi64x((Q2 / 2) as i64);
    let off = _mm256_set1_epi64x(offset(log_z, t) as i64);
    let mask_z = _mm256_set1_epi64x((1i64 << log_z) - 1);
    let half_z = _mm256_set1_epi64x(1i64 << (log_z - 1));
    let top_shift = (t - 1) as u32 * log_z;
    let top_bias = _mm256_set1_epi64x(1i64 << (62 - top_shift));
    let (pp0, pp1) = (_mm_set1_epi32(P0 as i32), _mm_set1_epi32(P1 as i32));
    let evens = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
    let mut i = 0;
    while i < n4 {
        // SAFETY: i + 4 ≤ n4 ≤ n, as in digits512 with 4 lanes.
        unsafe {
            let r0 = _mm256_cvtepu32_epi64(_mm_loadu_si128(res.as_ptr().add(i) as *const __m128i));
            let r1 =
                _mm256_cvtepu32_epi64(_mm_loadu_si128(res.as_ptr().add(n + i) as *const __m128i));
            // every lane stays below 2^63 until u, so signed compares
            // order them; a "negative" lane is a wrapped difference
            let r0m = csub64(r0, p1, p1m);
            let diff = _mm256_sub_epi64(r1, r0m);
            let diff = _mm256_add_epi64(
                diff,
                _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), diff), p1),
            );
            let q = _mm256_srli_epi64(_mm256_mul_epu32(diff, ws), 32);
            let k = _mm256_sub_epi64(_mm256_mul_epu32(diff, w), _mm256_mul_epu32(q, p1));
            let k = csub64(k, p1, p1m);
            let x = _mm256_add_epi64(r0, _mm256_mul_epu32(k, p0));
            let above = _mm256_cmpgt_epi64(x, half_q2);
            let u = _mm256_sub_epi64(_mm256_add_epi64(x, off), _mm256_and_si256(above, q2));
            for k in 0..t {
                let s = _mm_cvtsi32_si128((k as u32 * log_z) as i32);
                let v = _mm256_srl_epi64(u, s);
                let d = if k + 1 < t {
                    _mm256_sub_epi64(_mm256_and_si256(v, mask_z), half_z)
                } else {
                    _mm256_sub_epi64(v, top_bias)
                };
                let d = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(d, evens));
                let neg = _mm_srai_epi32(d, 31);
                let a0 = _mm_add_epi32(d, _mm_and_si128(neg, pp0));
                let a1 = _mm_add_epi32(d, _mm_and_si128(neg, pp1));
                let o = out.as_mut_ptr().add(k * 2 * n + i);
                _mm_storeu_si128(o as *mut __m128i, a0);
                _mm_storeu_si128(o.add(n) as *mut __m128i, a1);
            }
        }
        i += 4;
    }
    super::crt_gadget_digits_scalar(crt, res, log_z, t, out, n4);
}
