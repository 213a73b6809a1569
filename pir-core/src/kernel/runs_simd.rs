use std::arch::x86_64::*;

/// 16-lane twin of [`super::add_scaled_runs`].
///
/// # Safety
/// avx512f must be available; `g.len() ≥ o + col.len()` for every term.
#[target_feature(enable = "avx512f")]
pub unsafe fn runs512(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    let n16 = col.len() / 16 * 16;
    let mut k = 0;
    while k < n16 {
        // SAFETY: k + 16 ≤ n16 ≤ col.len(), and each run o.. has ≥
        // col.len() elements, so every 16-lane load and the store stay
        // inside `g` and `col`.
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

/// 8-lane twin of [`super::add_scaled_runs`].
///
/// # Safety
/// avx2 must be available; `g.len() ≥ o + col.len()` for every term.
#[target_feature(enable = "avx2")]
pub unsafe fn runs256(col: &mut [u32], terms: &[(u32, usize)], g: &[u32]) {
    let n8 = col.len() / 8 * 8;
    let mut k = 0;
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
