use super::QuadSums;
use std::arch::x86_64::*;

/// Chunks (32 columns) between flushes of the 32-bit accumulators into
/// the 64-bit sums: a ymm lane takes two `vpmaddwd` pairs per chunk (the
/// chunk's two 16-column halves), four products |x·l| ≤ 2^14·1904, so 16
/// chunks stay below 2^31 (16 · 4 · 2^14 · 1904 ≈ 2^30.9). (Twice the
/// products per lane and chunk of the `vpdpwssd` kernel, whose zmm lanes
/// cover a whole chunk.)
const FLUSH: usize = 16;
const _: () = assert!(FLUSH as u64 * 4 * (1 << 14) * super::TOP_LIMB_MAX < 1 << 31);

/// Sum of the 4 i64 lanes of the widened i32 lanes of `v`.
#[inline]
#[target_feature(enable = "avx2")]
fn widen(v: __m256i) -> __m256i {
    let lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
    let hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(v));
    _mm256_add_epi64(lo, hi)
}

/// Horizontal sum of 4 i64 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn lane_sum(v: __m256i) -> i64 {
    let mut lanes = [0i64; 4];
    // SAFETY: storing 32 bytes into a 4 × i64 array.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, v) };
    lanes.iter().sum()
}

/// DoublePIR on one quad with `vpmaddwd`, the AVX2 twin of
/// `avx512_vnni::quad_limbs` on the same five limbs of c2 mod Q2,
/// added to `acc` as [`QuadSums`] lays it out. Two rows at a time:
/// 10 accumulators + 2 digit vectors + 1 limb vector = 13 of the 16
/// ymm registers; the quad's second row pair re-reads the block's limbs
/// from L1. Five `vpmaddwd` + five adds per 16 digits and row (six with
/// three unsigned limbs per prime).
///
/// # Safety
/// avx2 must be available; `quad` holds 4·w digits in chunk order and
/// `limbs` 5·w entries, w a multiple of 32.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut QuadSums) {
    let chunks = quad.len() / 128;
    assert!(
        quad.len() == chunks * 128 && limbs.len() == chunks * 160,
        "quad shape"
    );
    for pair in 0..2 {
        // per row: the 64-bit sums (l_0 + 2^11·l_1, l_2 + 2^11·l_3, l_4)
        let mut wide = [[_mm256_setzero_si256(); 3]; 2];
        let mut c0 = 0;
        while c0 < chunks {
            let c1 = (c0 + FLUSH).min(chunks);
            let mut a = [[_mm256_setzero_si256(); 5]; 2];
            for c in c0..c1 {
                for half in 0..2 {
                    // SAFETY: c < chunks; row 2·pair + i of chunk c is at
                    // c·128 + 32·(2·pair + i), limb t at c·160 + 32·t, and
                    // the 16 entries from + 16·half stay inside (asserted).
                    unsafe {
                        let xp = quad.as_ptr().add(c * 128 + 64 * pair + 16 * half);
                        let x0 = _mm256_loadu_si256(xp as *const __m256i);
                        let x1 = _mm256_loadu_si256(xp.add(32) as *const __m256i);
                        let lp = limbs.as_ptr().add(c * 160 + 16 * half);
                        for t in 0..5 {
                            let l = _mm256_loadu_si256(lp.add(32 * t) as *const __m256i);
                            a[0][t] = _mm256_add_epi32(a[0][t], _mm256_madd_epi16(x0, l));
                            a[1][t] = _mm256_add_epi32(a[1][t], _mm256_madd_epi16(x1, l));
                        }
                    }
                }
            }
            for (w, ai) in wide.iter_mut().zip(&a) {
                for h in 0..2 {
                    let s = _mm256_add_epi64(
                        widen(ai[2 * h]),
                        _mm256_slli_epi64::<11>(widen(ai[2 * h + 1])),
                    );
                    w[h] = _mm256_add_epi64(w[h], s);
                }
                w[2] = _mm256_add_epi64(w[2], widen(ai[4]));
            }
            c0 = c1;
        }
        for (i, w) in wide.iter().enumerate() {
            let row = 2 * pair + i;
            acc.lm[row][0] += lane_sum(w[0]);
            acc.lm[row][1] += lane_sum(w[1]);
            acc.hi[row] += lane_sum(w[2]);
        }
    }
}
