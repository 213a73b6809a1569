use std::arch::x86_64::*;

/// 8 slots per step as two 4 × u64 halves.
///
/// # Safety
/// avx2 must be available; a and b hold ≥ acc.len() words.
#[target_feature(enable = "avx2")]
pub unsafe fn mul_acc_lazy_avx2(a: &[u32], b: &[u32], acc: &mut [u64]) {
    let n8 = acc.len() / 8 * 8;
    let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 <= n8 <= acc.len() <= a.len(), b.len().
        unsafe {
            for h in [0, 4] {
                let x = _mm256_cvtepu32_epi64(_mm_loadu_si128(pa.add(i + h) as *const __m128i));
                let y = _mm256_cvtepu32_epi64(_mm_loadu_si128(pb.add(i + h) as *const __m128i));
                let c = _mm256_loadu_si256(pc.add(i + h) as *const __m256i);
                let s = _mm256_add_epi64(c, _mm256_mul_epu32(x, y));
                _mm256_storeu_si256(pc.add(i + h) as *mut __m256i, s);
            }
        }
        i += 8;
    }
    super::mul_acc_lazy_scalar(a, b, acc, n8);
}

/// 16 slots per step as two 8 × u64 halves.
///
/// # Safety
/// avx512f must be available; a and b hold ≥ acc.len() words.
#[target_feature(enable = "avx512f")]
pub unsafe fn mul_acc_lazy_avx512(a: &[u32], b: &[u32], acc: &mut [u64]) {
    let n16 = acc.len() / 16 * 16;
    let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 <= n16 <= acc.len() <= a.len(), b.len().
        unsafe {
            for h in [0, 8] {
                let x = _mm512_cvtepu32_epi64(_mm256_loadu_si256(pa.add(i + h) as *const __m256i));
                let y = _mm512_cvtepu32_epi64(_mm256_loadu_si256(pb.add(i + h) as *const __m256i));
                let c = _mm512_loadu_si512(pc.add(i + h) as *const __m512i);
                let s = _mm512_add_epi64(c, _mm512_mul_epu32(x, y));
                _mm512_storeu_si512(pc.add(i + h) as *mut __m512i, s);
            }
        }
        i += 16;
    }
    super::mul_acc_lazy_scalar(a, b, acc, n16);
}
