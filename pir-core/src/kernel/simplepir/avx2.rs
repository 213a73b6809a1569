use super::SplitQuery;
use std::arch::x86_64::*;

/// Horizontal wrapping sum of eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn hsum(v: __m256i) -> u32 {
    let hi = _mm256_extracti128_si256(v, 1);
    let lo = _mm256_castsi256_si128(v);
    let s = _mm_add_epi32(hi, lo);
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s) as u32
}

/// AVX2 tile kernel: two passes of 4 columns over the tile's 32-row
/// blocks, 16 rows per step (16 ymm registers hold 8 accumulators, the
/// two query halves and the records of one column). The second pass
/// finds the tile and the query slice in L1. Prefetches are spread
/// evenly over both passes, one cache line of the stream `prefetch_dist`
/// ahead per step, so memory is busy during the second pass too; they
/// are non-temporal (`prefetchnta`), which measured 5–10 % faster than
/// `prefetcht0` here: the lines are read once, and the hint keeps them
/// from displacing the tile and query slice the second pass reuses.
///
/// # Safety
/// The caller must have checked that the CPU supports AVX2; `lo` and
/// `hi` have the same length, a multiple of 32, and `tile` holds 8 times
/// as many bytes.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block(tile: &[u8], lo: &[i16], hi: &[i16], out: &mut [u32; 8]) {
    let rows = lo.len();
    assert!(hi.len() == rows && rows.is_multiple_of(32) && tile.len() == 8 * rows);
    let base = tile.as_ptr();
    let pfd = super::tune::prefetch_distance();
    let pf = base.wrapping_add(pfd);
    let steps = rows / 16;
    for pass in 0..2 {
        let mut acc_lo = [_mm256_setzero_si256(); 4];
        let mut acc_hi = [_mm256_setzero_si256(); 4];
        let mut i = 0;
        while i < rows {
            // SAFETY: i + 16 <= rows; the records of rows i..i+16 of
            // column 4·pass + c start at (i/32)·256 + (4·pass + c)·32 +
            // i%32, which plus 16 stays within the 8·rows-byte tile, and
            // lo/hi hold `rows` entries (asserted above). The prefetch is
            // a hint that never faults, whatever the address.
            unsafe {
                let l = _mm256_loadu_si256(lo.as_ptr().add(i) as *const __m256i);
                let h = _mm256_loadu_si256(hi.as_ptr().add(i) as *const __m256i);
                let blk = base.add(i / 32 * 256 + i % 32 + pass * 128);
                let line = pass * steps + i / 16;
                if pfd != 0 {
                    _mm_prefetch::<_MM_HINT_NTA>(pf.wrapping_add(line * 64) as *const i8);
                }
                for c in 0..4 {
                    let d =
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(blk.add(c * 32) as *const __m128i));
                    acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                    acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                }
            }
            i += 16;
        }
        // Σ_r (lo·d + 2^16·hi·d) per column, the four columns reduced
        // together (transposed: after the unpack levels each 128-bit
        // lane holds the four columns' partial sums) instead of eight
        // horizontal sums.
        let v: [__m256i; 4] = std::array::from_fn(|c| {
            _mm256_add_epi32(acc_lo[c], _mm256_slli_epi32::<16>(acc_hi[c]))
        });
        let t01 = _mm256_add_epi32(
            _mm256_unpacklo_epi32(v[0], v[1]),
            _mm256_unpackhi_epi32(v[0], v[1]),
        );
        let t23 = _mm256_add_epi32(
            _mm256_unpacklo_epi32(v[2], v[3]),
            _mm256_unpackhi_epi32(v[2], v[3]),
        );
        let u = _mm256_add_epi32(
            _mm256_unpacklo_epi64(t01, t23),
            _mm256_unpackhi_epi64(t01, t23),
        );
        let sums = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256::<1>(u));
        let o = &mut out[pass * 4..pass * 4 + 4];
        // SAFETY: `o` is 4 u32s, exactly one 128-bit vector.
        unsafe {
            let prev = _mm_loadu_si128(o.as_ptr() as *const __m128i);
            _mm_storeu_si128(o.as_mut_ptr() as *mut __m128i, _mm_add_epi32(prev, sums));
        }
    }
}

/// AVX2 kernel: four columns at a time, 16 rows per step, `pmaddwd` on
/// sign-extended records against the lo/hi halves of c1.
///
/// # Safety
/// The caller must have checked that the CPU supports AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn columns(
    db: &[u8],
    ell1: usize,
    j0: usize,
    j1: usize,
    q: &SplitQuery,
    out: &mut [u32],
) {
    // SAFETY: every pointer offset below stays inside `db` (column
    // (j + c) spans [(j+c)·ell1, (j+c+1)·ell1) with j + c < j1 <= ell2 and
    // i + 16 <= n16 <= ell1) or inside q.lo / q.hi (length >= n16); the
    // loads are unaligned loads; AVX2 availability is the caller's contract.
    unsafe {
        let n16 = ell1 / 16 * 16;
        let lo = q.lo.as_ptr();
        let hi = q.hi.as_ptr();
        let mut j = j0;
        while j < j1 {
            let nc = (j1 - j).min(4);
            let mut acc_lo = [_mm256_setzero_si256(); 4];
            let mut acc_hi = [_mm256_setzero_si256(); 4];
            let base = db.as_ptr().add(j * ell1);
            let mut i = 0;
            if nc == 4 {
                while i < n16 {
                    // SAFETY: i + 16 <= n16 <= ell1, so the 16-byte loads stay
                    // inside column j..j+4 (each ell1 bytes, in bounds because
                    // j + 4 <= j1 <= ell2), and lo/hi have ≥ n16 entries.
                    let l = _mm256_loadu_si256(lo.add(i) as *const __m256i);
                    let h = _mm256_loadu_si256(hi.add(i) as *const __m256i);
                    for c in 0..4 {
                        let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                            base.add(c * ell1 + i) as *const __m128i
                        ));
                        acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                        acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                    }
                    i += 16;
                }
            } else {
                while i < n16 {
                    // SAFETY: as above, for the nc < 4 remaining columns.
                    let l = _mm256_loadu_si256(lo.add(i) as *const __m256i);
                    let h = _mm256_loadu_si256(hi.add(i) as *const __m256i);
                    for c in 0..nc {
                        let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                            base.add(c * ell1 + i) as *const __m128i
                        ));
                        acc_lo[c] = _mm256_add_epi32(acc_lo[c], _mm256_madd_epi16(d, l));
                        acc_hi[c] = _mm256_add_epi32(acc_hi[c], _mm256_madd_epi16(d, h));
                    }
                    i += 16;
                }
            }
            for c in 0..nc {
                let mut l = hsum(acc_lo[c]);
                let mut h = hsum(acc_hi[c]);
                // scalar tail rows
                let col = &db[(j + c) * ell1..(j + c + 1) * ell1];
                for (r, &d) in col.iter().enumerate().skip(n16) {
                    let d = d as i8 as i32;
                    l = l.wrapping_add((q.lo[r] as i32 * d) as u32);
                    h = h.wrapping_add((q.hi[r] as i32 * d) as u32);
                }
                out[j - j0 + c] = l.wrapping_add(h << 16);
            }
            j += nc;
        }
    }
}
