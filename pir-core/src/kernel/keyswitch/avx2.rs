//! AVX2 twins of `avx512` (the online packing of YPIR §4.2): 8 slots
//! per step, 32×32→64 products on the even and odd lanes with
//! `vpmuludq`.
use super::Mont;
use crate::kernel::ntt::avx2::csub;
use std::arch::x86_64::*;

/// `src[perm[i..i+8]]`: with `within8`, one aligned block load and
/// `vpermd` (low 3 bits of each index), otherwise a gather.
///
/// # Safety
/// avx2 must be available; as `avx512::slots16` with blocks of 8.
#[inline]
#[target_feature(enable = "avx2")]
pub(in crate::kernel) unsafe fn slots8(
    src: &[u32],
    perm: &[u32],
    i: usize,
    within8: bool,
) -> __m256i {
    // SAFETY: the caller's bounds above.
    unsafe {
        let idx = _mm256_loadu_si256(perm.as_ptr().add(i) as *const __m256i);
        if within8 {
            let b = *perm.get_unchecked(i) as usize / 8 * 8;
            _mm256_permutevar8x32_epi32(
                _mm256_loadu_si256(src.as_ptr().add(b) as *const __m256i),
                idx,
            )
        } else {
            _mm256_i32gather_epi32::<4>(src.as_ptr() as *const i32, idx)
        }
    }
}

/// REDC of two vectors of four 64-bit lanes (values < p·2^32): `even`
/// holds the sums of slots 0, 2, 4, 6 and `odd` those of 1, 3, 5, 7;
/// returns the eight results in [0, p) as 32-bit lanes in slot order.
/// x + m·p has the result in its high half, which is already the odd
/// slot's position.
#[inline]
#[target_feature(enable = "avx2")]
fn redc2(even: __m256i, odd: __m256i, p: __m256i, pinv: __m256i) -> __m256i {
    let te = _mm256_add_epi64(even, _mm256_mul_epu32(_mm256_mul_epu32(even, pinv), p));
    let to = _mm256_add_epi64(odd, _mm256_mul_epu32(_mm256_mul_epu32(odd, pinv), p));
    csub(_mm256_blend_epi32::<0xAA>(_mm256_srli_epi64(te, 32), to), p)
}

/// # Safety
/// avx2 must be available; the slices must hold (t−1)·stride + n words
/// and `out` n words.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn keyswitch_acc(
    m: &Mont,
    w: &[u32],
    g: &[u32],
    t: usize,
    stride: usize,
    n: usize,
    out: &mut [u32],
) {
    let n8 = n / 8 * 8;
    let p = _mm256_set1_epi32(m.p as i32);
    let pinv = _mm256_set1_epi32(m.pinv_neg as i32);
    let pf = super::avx512::ks_prefetch(t, stride);
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 <= n8 <= n; every row k < t of w and g has n
        // words starting at k·stride, and out has n words.
        unsafe {
            let mut even = _mm256_setzero_si256();
            let mut odd = _mm256_setzero_si256();
            for k in 0..t {
                // the digits stream from memory: prefetch ahead into L2
                // (a hint, it never faults)
                _mm_prefetch::<_MM_HINT_T1>(
                    g.as_ptr().wrapping_add(k * stride + i + pf) as *const i8
                );
                let a = _mm256_loadu_si256(w.as_ptr().add(k * stride + i) as *const __m256i);
                let b = _mm256_loadu_si256(g.as_ptr().add(k * stride + i) as *const __m256i);
                even = _mm256_add_epi64(even, _mm256_mul_epu32(a, b));
                odd = _mm256_add_epi64(
                    odd,
                    _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32)),
                );
            }
            let r = redc2(even, odd, p, pinv);
            let o = _mm256_loadu_si256(out.as_ptr().add(i) as *const __m256i);
            let s = csub(_mm256_add_epi32(o, r), p);
            _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, s);
        }
        i += 8;
    }
    super::keyswitch_acc_scalar(m, w, g, t, stride, n8, n, out);
}

/// # Safety
/// avx2 must be available; all slices have e.len() words.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn plus_minus(
    m: &Mont,
    e: &[u32],
    o: &[u32],
    mono: &[u32],
    plus: &mut [u32],
    minus: &mut [u32],
) {
    let n = e.len();
    let n8 = n / 8 * 8;
    let p = _mm256_set1_epi32(m.p as i32);
    let pinv = _mm256_set1_epi32(m.pinv_neg as i32);
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 <= n8 <= n = length of every slice.
        unsafe {
            let ov = _mm256_loadu_si256(o.as_ptr().add(i) as *const __m256i);
            let mv = _mm256_loadu_si256(mono.as_ptr().add(i) as *const __m256i);
            let even = _mm256_mul_epu32(ov, mv);
            let odd = _mm256_mul_epu32(_mm256_srli_epi64(ov, 32), _mm256_srli_epi64(mv, 32));
            let xo = redc2(even, odd, p, pinv);
            let ev = _mm256_loadu_si256(e.as_ptr().add(i) as *const __m256i);
            let s = csub(_mm256_add_epi32(ev, xo), p);
            let d = csub(_mm256_sub_epi32(_mm256_add_epi32(ev, p), xo), p);
            _mm256_storeu_si256(plus.as_mut_ptr().add(i) as *mut __m256i, s);
            _mm256_storeu_si256(minus.as_mut_ptr().add(i) as *mut __m256i, d);
        }
        i += 8;
    }
    super::plus_minus_scalar(m, e, o, mono, plus, minus, n8, n);
}

/// # Safety
/// avx2 must be available; every `perm[i] < minus.len()`; plus, perm and
/// out have the same length; `within8` only if every aligned block of 8
/// outputs reads one aligned block of 8 inputs and n is a multiple of 8.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn add_permuted(
    p: u32,
    plus: &[u32],
    minus: &[u32],
    perm: &[u32],
    within8: bool,
    out: &mut [u32],
) {
    let n = plus.len();
    let n8 = n / 8 * 8;
    let p32 = _mm256_set1_epi32(p as i32);
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 <= n8 <= n; gathered indices are < minus.len()
        // (checked by the caller); with `within8` the block
        // perm[i]/8·8 .. +8 lies inside minus and holds every index of
        // this output block.
        unsafe {
            let g = slots8(minus, perm, i, within8);
            let a = _mm256_loadu_si256(plus.as_ptr().add(i) as *const __m256i);
            let s = csub(_mm256_add_epi32(a, g), p32);
            _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, s);
        }
        i += 8;
    }
    super::add_permuted_scalar(p, plus, minus, perm, out, n8);
}
