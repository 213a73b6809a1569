use std::arch::x86_64::*;

/// 16-lane twin of [`super::add_scaled_runs`]: 128 entries of `col` at a
/// time in eight accumulators, each term's run read as 512 contiguous bytes
/// per step (the ~32 runs of a column stream from L2, and longer
/// contiguous reads per run keep that stream closer to the L2
/// bandwidth), then 16 at a time.
///
/// # Safety
/// avx512f must be available; `g.len() ≥ o + col.len()` for every term.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn runs512(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    const V: usize = 8;
    let n128 = col.len() / (16 * V) * (16 * V);
    let n16 = col.len() / 16 * 16;
    let mut k = 0;
    while k < n128 {
        // SAFETY: k + 128 ≤ n128 ≤ col.len(), and each run o.. has ≥
        // col.len() elements, so every 16-lane load and store (at k + 16v,
        // v < 8) stays inside `g` and `col`.
        unsafe {
            let mut acc = [_mm512_setzero_si512(); V];
            for (v, a) in acc.iter_mut().enumerate() {
                *a = _mm512_loadu_si512(col.as_ptr().add(k + 16 * v) as *const __m512i);
            }
            for &(d, o) in terms {
                let dd = _mm512_set1_epi32(d as i32);
                let run = g.as_ptr().add(o + k);
                for (v, a) in acc.iter_mut().enumerate() {
                    let x = _mm512_loadu_si512(run.add(16 * v) as *const __m512i);
                    *a = _mm512_add_epi32(*a, _mm512_mullo_epi32(dd, x));
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm512_storeu_si512(col.as_mut_ptr().add(k + 16 * v) as *mut __m512i, *a);
            }
        }
        k += 16 * V;
    }
    while k < n16 {
        // SAFETY: k + 16 ≤ n16 ≤ col.len(); runs as above.
        unsafe {
            let mut acc = _mm512_loadu_si512(col.as_ptr().add(k) as *const __m512i);
            for &(d, o) in terms {
                let x = _mm512_loadu_si512(g.as_ptr().add(o + k) as *const __m512i);
                acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(d as i32), x));
            }
            _mm512_storeu_si512(col.as_mut_ptr().add(k) as *mut __m512i, acc);
        }
        k += 16;
    }
    super::add_scaled_runs_scalar(col, terms, g, n16);
}

/// 8-lane twin of [`super::add_scaled_runs`] (four accumulators: 32
/// entries of `col` per step, as [`runs512`] does with eight).
///
/// # Safety
/// avx2 must be available; `g.len() ≥ o + col.len()` for every term.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn runs256(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    const V: usize = 4;
    let n32 = col.len() / (8 * V) * (8 * V);
    let n8 = col.len() / 8 * 8;
    let mut k = 0;
    while k < n32 {
        // SAFETY: as in runs512, with 8 lanes and four vectors per step.
        unsafe {
            let mut acc = [_mm256_setzero_si256(); V];
            for (v, a) in acc.iter_mut().enumerate() {
                *a = _mm256_loadu_si256(col.as_ptr().add(k + 8 * v) as *const __m256i);
            }
            for &(d, o) in terms {
                let dd = _mm256_set1_epi32(d as i32);
                let run = g.as_ptr().add(o + k);
                for (v, a) in acc.iter_mut().enumerate() {
                    let x = _mm256_loadu_si256(run.add(8 * v) as *const __m256i);
                    *a = _mm256_add_epi32(*a, _mm256_mullo_epi32(dd, x));
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm256_storeu_si256(col.as_mut_ptr().add(k + 8 * v) as *mut __m256i, *a);
            }
        }
        k += 8 * V;
    }
    while k < n8 {
        // SAFETY: as in runs512, with 8 lanes.
        unsafe {
            let mut acc = _mm256_loadu_si256(col.as_ptr().add(k) as *const __m256i);
            for &(d, o) in terms {
                let x = _mm256_loadu_si256(g.as_ptr().add(o + k) as *const __m256i);
                acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_set1_epi32(d as i32), x));
            }
            _mm256_storeu_si256(col.as_mut_ptr().add(k) as *mut __m256i, acc);
        }
        k += 8;
    }
    super::add_scaled_runs_scalar(col, terms, g, n8);
}
