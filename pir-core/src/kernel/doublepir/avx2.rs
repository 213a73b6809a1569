use std::arch::x86_64::*;

// The same bound as for `vpdpwssd`: `vpmaddwd` adds the same two
// products per lane.
use super::avx512_vnni::FLUSH;

/// Sum of the 4 i64 lanes of the widened i32 lanes of `v`.
#[inline]
#[target_feature(enable = "avx2")]
fn widen(v: __m256i) -> __m256i {
    let lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
    let hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(v));
    _mm256_add_epi64(lo, hi)
}

/// DoublePIR on one quad with `vpmaddwd`, the AVX2 twin of
/// `avx512_vnni::quad_limbs` on the same limbs: per row and prime
/// Σ x·c2 = Σ x·l0 + 2^10·Σ x·l1 + 2^20·Σ x·l2. Two rows at a time:
/// 12 accumulators + 2 digit vectors + 1 limb vector = 15 of the 16
/// ymm registers; the quad's second row pair re-reads the block's limbs
/// from L1. Six `vpmaddwd` + six adds per 16 digits and row; the
/// `vpmuldq` kernel on 64-bit residue lanes it replaced needed four sign
/// extensions, eight multiplies and eight adds.
///
/// # Safety
/// avx2 must be available; `quad` holds 4·w digits in chunk order and
/// `limbs` 6·w entries, w a multiple of 32 and at most 32·FLUSH.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut [[i64; 2]; 4]) {
    let chunks = quad.len() / 128;
    assert!(
        quad.len() == chunks * 128 && limbs.len() == chunks * 192 && chunks <= FLUSH,
        "quad shape"
    );
    for pair in 0..2 {
        let mut a = [[_mm256_setzero_si256(); 6]; 2];
        for c in 0..chunks {
            for half in 0..2 {
                // SAFETY: c < chunks; row 2·pair + i of chunk c is at
                // c·128 + 32·(2·pair + i), limb t at c·192 + 32·t, and
                // the 16 entries from + 16·half stay inside (asserted).
                unsafe {
                    let xp = quad.as_ptr().add(c * 128 + 64 * pair + 16 * half);
                    let x0 = _mm256_loadu_si256(xp as *const __m256i);
                    let x1 = _mm256_loadu_si256(xp.add(32) as *const __m256i);
                    let lp = limbs.as_ptr().add(c * 192 + 16 * half);
                    for t in 0..6 {
                        let l = _mm256_loadu_si256(lp.add(32 * t) as *const __m256i);
                        a[0][t] = _mm256_add_epi32(a[0][t], _mm256_madd_epi16(x0, l));
                        a[1][t] = _mm256_add_epi32(a[1][t], _mm256_madd_epi16(x1, l));
                    }
                }
            }
        }
        for (i, ai) in a.iter().enumerate() {
            for h in 0..2 {
                let s = _mm256_add_epi64(
                    widen(ai[3 * h]),
                    _mm256_add_epi64(
                        _mm256_slli_epi64::<10>(widen(ai[3 * h + 1])),
                        _mm256_slli_epi64::<20>(widen(ai[3 * h + 2])),
                    ),
                );
                let mut lanes = [0i64; 4];
                // SAFETY: storing 32 bytes into a 4 × i64 array.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, s) };
                acc[2 * pair + i][h] += lanes.iter().sum::<i64>();
            }
        }
    }
}
