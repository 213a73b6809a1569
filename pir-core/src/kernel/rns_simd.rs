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

/// [`super::mul_acc_blocks`] with AVX-512F: 64 slots (eight 8 × u64
/// accumulators) per step, summed over all blocks in registers.
///
/// # Safety
/// avx512f must be available; `a` and `x` hold ≥ (blocks − 1)·stride +
/// acc.len() words.
#[target_feature(enable = "avx512f")]
pub unsafe fn mul_acc_blocks_avx512(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    acc: &mut [u64],
) {
    const V: usize = 8;
    let n64 = acc.len() / (8 * V) * (8 * V);
    let (pa, px, pc) = (a.as_ptr(), x.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i < n64 {
        // SAFETY: i + 64 ≤ n64 ≤ acc.len(), and block b's slots i..i + 64
        // are at b·stride + i + 64 ≤ (blocks − 1)·stride + acc.len() ≤
        // a.len(), x.len().
        unsafe {
            let mut s = [_mm512_setzero_si512(); V];
            for b in 0..blocks {
                let o = b * stride + i;
                for (v, s) in s.iter_mut().enumerate() {
                    let y = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                        pa.add(o + 8 * v) as *const __m256i
                    ));
                    let z = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                        px.add(o + 8 * v) as *const __m256i
                    ));
                    *s = _mm512_add_epi64(*s, _mm512_mul_epu32(y, z));
                }
            }
            for (v, s) in s.iter().enumerate() {
                let c = pc.add(i + 8 * v) as *mut __m512i;
                _mm512_storeu_si512(c, _mm512_add_epi64(_mm512_loadu_si512(c), *s));
            }
        }
        i += 8 * V;
    }
    super::mul_acc_blocks_scalar(a, x, stride, blocks, acc, n64);
}

/// [`super::mul_acc_blocks`] with AVX2: 32 slots (eight 4 × u64
/// accumulators) per step.
///
/// # Safety
/// avx2 must be available; bounds as for [`mul_acc_blocks_avx512`].
#[target_feature(enable = "avx2")]
pub unsafe fn mul_acc_blocks_avx2(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    acc: &mut [u64],
) {
    const V: usize = 8;
    let n32 = acc.len() / (4 * V) * (4 * V);
    let (pa, px, pc) = (a.as_ptr(), x.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i < n32 {
        // SAFETY: as in mul_acc_blocks_avx512, with 32 slots per step.
        unsafe {
            let mut s = [_mm256_setzero_si256(); V];
            for b in 0..blocks {
                let o = b * stride + i;
                for (v, s) in s.iter_mut().enumerate() {
                    let y =
                        _mm256_cvtepu32_epi64(_mm_loadu_si128(pa.add(o + 4 * v) as *const __m128i));
                    let z =
                        _mm256_cvtepu32_epi64(_mm_loadu_si128(px.add(o + 4 * v) as *const __m128i));
                    *s = _mm256_add_epi64(*s, _mm256_mul_epu32(y, z));
                }
            }
            for (v, s) in s.iter().enumerate() {
                let c = pc.add(i + 4 * v) as *mut __m256i;
                _mm256_storeu_si256(c, _mm256_add_epi64(_mm256_loadu_si256(c), *s));
            }
        }
        i += 4 * V;
    }
    super::mul_acc_blocks_scalar(a, x, stride, blocks, acc, n32);
}
