//! Harvey's lazy NTT butterflies on 8 u32 lanes, the AVX2 twin of
//! `avx512`. Stages with half-size t ≥ 8 broadcast one twiddle per
//! block; the three smallest stages (t = 4, 2, 1) run on 16-element
//! chunks held in two registers X, Y, regrouped between stages by
//! in-lane shuffles so that lane l of X and Y always hold the two inputs
//! of the chunk's l-th butterfly (X lane l = element (l/t)·2t + l mod t).
//! In that order the lane twiddles are 8 consecutive entries of the
//! 16-lane tables in [`NttTable`]'s `small` field (their 32-element
//! chunks are two of ours). Every element goes through the same
//! butterflies as in the scalar transform, so the output is identical.
use super::NttTable;
use std::arch::x86_64::*;

/// x·w mod p in [0, 2p) (Shoup), lane-wise, any x < 2^32; `ws_even`
/// holds the Shoup quotients in the even lanes' low halves and `ws_odd`
/// those of the odd lanes (equal for a broadcast twiddle).
#[inline]
#[target_feature(enable = "avx2")]
fn mul_shoup_lazy(
    x: __m256i,
    w: __m256i,
    ws_even: __m256i,
    ws_odd: __m256i,
    p: __m256i,
) -> __m256i {
    let even = _mm256_srli_epi64(_mm256_mul_epu32(x, ws_even), 32);
    let odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), ws_odd);
    let q = _mm256_blend_epi32::<0xAA>(even, odd);
    _mm256_sub_epi32(_mm256_mullo_epi32(x, w), _mm256_mullo_epi32(q, p))
}

/// x − m if x ≥ m (unsigned lanes; also used by `keyswitch::avx2` and
/// `rns::simd`).
#[inline]
#[target_feature(enable = "avx2")]
pub(in crate::kernel) fn csub(x: __m256i, m: __m256i) -> __m256i {
    _mm256_min_epu32(x, _mm256_sub_epi32(x, m))
}

/// Lane twiddles of one small stage for 16-element chunk c:
/// (w, w' even, w' odd).
///
/// # Safety
/// AVX2 must be available; `tw` and `tws` hold ≥ 8c + 8 entries.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_tw(tw: &[u32], tws: &[u32], c: usize) -> (__m256i, __m256i, __m256i) {
    debug_assert!(tw.len() >= 8 * c + 8 && tws.len() >= 8 * c + 8);
    // SAFETY: 8c + 8 ≤ len of both tables (caller's contract).
    unsafe {
        let w = _mm256_loadu_si256(tw.as_ptr().add(8 * c) as *const __m256i);
        let ws = _mm256_loadu_si256(tws.as_ptr().add(8 * c) as *const __m256i);
        (w, ws, _mm256_srli_epi64(ws, 32))
    }
}

/// Forward (Cooley–Tukey) butterfly: (x, y) ← (x' + v, x' + 2p − v)
/// with x' = x mod 2p lazily, v = y·w mod p in [0, 2p).
#[inline]
#[target_feature(enable = "avx2")]
fn bfly_fwd(
    x: __m256i,
    y: __m256i,
    (w, wse, wso): (__m256i, __m256i, __m256i),
    p: __m256i,
    p2: __m256i,
) -> (__m256i, __m256i) {
    let u = csub(x, p2);
    let v = mul_shoup_lazy(y, w, wse, wso, p);
    (
        _mm256_add_epi32(u, v),
        _mm256_sub_epi32(_mm256_add_epi32(u, p2), v),
    )
}

/// Inverse (Gentleman–Sande) butterfly: (x, y) ← ((x + y) mod 2p,
/// (x + 2p − y)·w mod p in [0, 2p)).
#[inline]
#[target_feature(enable = "avx2")]
fn bfly_inv(
    x: __m256i,
    y: __m256i,
    (w, wse, wso): (__m256i, __m256i, __m256i),
    p: __m256i,
    p2: __m256i,
) -> (__m256i, __m256i) {
    (
        csub(_mm256_add_epi32(x, y), p2),
        mul_shoup_lazy(_mm256_sub_epi32(_mm256_add_epi32(x, p2), y), w, wse, wso, p),
    )
}

/// (X, Y) for t = 1 from the t = 2 order (X = 0,1,4,5, Y = 2,3,6,7 per
/// 128-bit lane) and back: even/odd 32-bit lanes swapped across X and Y.
#[inline]
#[target_feature(enable = "avx2")]
fn swap_odd_even(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
    (
        _mm256_blend_epi32::<0xAA>(x, _mm256_slli_epi64(y, 32)),
        _mm256_blend_epi32::<0xAA>(_mm256_srli_epi64(x, 32), y),
    )
}

/// # Safety
/// AVX2 must be available; `a.len() == t.n`, n ≥ 32 a power of two.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn forward(t: &NttTable, a: &mut [u32]) {
    assert!(a.len() == t.n && t.n >= 32);
    // SAFETY: AVX2 available (caller), lengths asserted.
    unsafe { forward_from(t, a, t.n / 2, 1) };
}

/// The AVX2 twin of `avx512::forward_reversed_i16`: the transform of
/// the residues of `src` reversed, the first stage reading the digits.
///
/// # Safety
/// AVX2 must be available; `src.len() == a.len() == t.n`, n ≥ 32 a power
/// of two.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn forward_reversed_i16(t: &NttTable, src: &[i16], a: &mut [u32]) {
    let n = t.n;
    assert!(a.len() == n && src.len() == n && n >= 32);
    let p = _mm256_set1_epi32(t.m.p as i32);
    let p2 = _mm256_set1_epi32(2 * t.m.p as i32);
    let rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    // residues in [0, p) of a[m .. m + 8] = src[n − 8 − m .. n − m] reversed
    let residues = |m: usize| {
        // SAFETY: m + 8 ≤ n, so the load reads src[n − m − 8 .. n − m].
        let v = unsafe { _mm_loadu_si128(src.as_ptr().add(n - m - 8) as *const __m128i) };
        let v = _mm256_permutevar8x32_epi32(_mm256_cvtepi16_epi32(v), rev);
        _mm256_add_epi32(v, _mm256_and_si256(_mm256_srai_epi32(v, 31), p))
    };
    let half = n / 2;
    let w = _mm256_set1_epi32(t.psi_rev[1] as i32);
    let ws = _mm256_set1_epi32(t.psi_rev_shoup[1] as i32);
    let ptr = a.as_mut_ptr();
    let mut j = 0;
    while j < half {
        // inputs in [0, p): the butterfly's lazy csub is a no-op on them
        let (x2, y2) = bfly_fwd(residues(j), residues(j + half), (w, ws, ws), p, p2);
        // SAFETY: j + 8 ≤ half and j + half + 8 ≤ n.
        unsafe {
            _mm256_storeu_si256(ptr.add(j) as *mut __m256i, x2);
            _mm256_storeu_si256(ptr.add(j + half) as *mut __m256i, y2);
        }
        j += 8;
    }
    // SAFETY: as above; the remaining stages start at half = n/4, m = 2.
    unsafe { forward_from(t, a, n / 4, 2) };
}

/// The stages of [`forward`] from the one with half-size `half` (and `m`
/// = n / (2·half) twiddle blocks) on.
///
/// # Safety
/// AVX2 must be available; `a.len() == t.n`, n ≥ 32.
#[target_feature(enable = "avx2")]
unsafe fn forward_from(t: &NttTable, a: &mut [u32], half: usize, m: usize) {
    let n = t.n;
    assert!(a.len() == n && n >= 32 && 2 * half * m == n);
    let p = _mm256_set1_epi32(t.m.p as i32);
    let p2 = _mm256_set1_epi32(2 * t.m.p as i32);
    let ptr = a.as_mut_ptr();
    // large stages: half = n/2 .. 8
    let (mut half, mut m) = (half, m);
    while half >= 8 {
        for i in 0..m {
            let w = _mm256_set1_epi32(t.psi_rev[m + i] as i32);
            let ws = _mm256_set1_epi32(t.psi_rev_shoup[m + i] as i32);
            let j1 = 2 * i * half;
            let mut j = j1;
            while j < j1 + half {
                // SAFETY: j + 8 <= j1 + half and j + half + 8 <= j1 + 2·half <= n.
                unsafe {
                    let xv = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
                    let yv = _mm256_loadu_si256(ptr.add(j + half) as *const __m256i);
                    let (x2, y2) = bfly_fwd(xv, yv, (w, ws, ws), p, p2);
                    _mm256_storeu_si256(ptr.add(j) as *mut __m256i, x2);
                    _mm256_storeu_si256(ptr.add(j + half) as *mut __m256i, y2);
                }
                j += 8;
            }
        }
        half /= 2;
        m *= 2;
    }
    // small stages t = 4, 2, 1 (tables 1, 2, 3) on 16-element chunks
    let s = &t.small;
    for c in 0..n / 16 {
        // SAFETY: chunk c spans a[16c .. 16c + 16] ⊂ a; the small-stage
        // tables hold n/2 = 8 · (n/16) entries.
        unsafe {
            let av = _mm256_loadu_si256(ptr.add(16 * c) as *const __m256i);
            let bv = _mm256_loadu_si256(ptr.add(16 * c + 8) as *const __m256i);
            // t = 4: X = 0..4 | 8..12, Y = 4..8 | 12..16
            let x = _mm256_permute2x128_si256::<0x20>(av, bv);
            let y = _mm256_permute2x128_si256::<0x31>(av, bv);
            let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[1], &s.fwd_shoup[1], c), p, p2);
            // t = 2: X = 0,1,4,5 | 8,9,12,13, Y = 2,3,6,7 | 10,11,14,15
            let (x, y) = (_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
            let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[2], &s.fwd_shoup[2], c), p, p2);
            // t = 1: X = even elements, Y = odd elements
            let (x, y) = swap_odd_even(x, y);
            let (x, y) = bfly_fwd(x, y, lane_tw(&s.fwd[3], &s.fwd_shoup[3], c), p, p2);
            // final reduction [0, 4p) → [0, p), back to natural order
            let x = csub(csub(x, p2), p);
            let y = csub(csub(y, p2), p);
            let lo = _mm256_unpacklo_epi32(x, y); // 0..4 | 8..12
            let hi = _mm256_unpackhi_epi32(x, y); // 4..8 | 12..16
            _mm256_storeu_si256(
                ptr.add(16 * c) as *mut __m256i,
                _mm256_permute2x128_si256::<0x20>(lo, hi),
            );
            _mm256_storeu_si256(
                ptr.add(16 * c + 8) as *mut __m256i,
                _mm256_permute2x128_si256::<0x31>(lo, hi),
            );
        }
    }
}

/// # Safety
/// AVX2 must be available; `a.len() == t.n`, n ≥ 32 a power of two.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn inverse(t: &NttTable, a: &mut [u32]) {
    let n = t.n;
    assert!(a.len() == n && n >= 32);
    let p = _mm256_set1_epi32(t.m.p as i32);
    let p2 = _mm256_set1_epi32(2 * t.m.p as i32);
    let ptr = a.as_mut_ptr();
    // small stages first: t = 1, 2, 4 (tables 3, 2, 1)
    let s = &t.small;
    for c in 0..n / 16 {
        // SAFETY: as in `forward`.
        unsafe {
            let av = _mm256_loadu_si256(ptr.add(16 * c) as *const __m256i);
            let bv = _mm256_loadu_si256(ptr.add(16 * c + 8) as *const __m256i);
            let lo = _mm256_castsi256_ps(_mm256_permute2x128_si256::<0x20>(av, bv));
            let hi = _mm256_castsi256_ps(_mm256_permute2x128_si256::<0x31>(av, bv));
            // t = 1: X = even elements, Y = odd elements
            let x = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(lo, hi));
            let y = _mm256_castps_si256(_mm256_shuffle_ps::<0xDD>(lo, hi));
            let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[3], &s.inv_shoup[3], c), p, p2);
            // t = 2: X = 0,1,4,5 | 8,9,12,13, Y = 2,3,6,7 | 10,11,14,15
            let (x, y) = swap_odd_even(x, y);
            let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[2], &s.inv_shoup[2], c), p, p2);
            // t = 4: X = 0..4 | 8..12, Y = 4..8 | 12..16
            let (x, y) = (_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
            let (x, y) = bfly_inv(x, y, lane_tw(&s.inv[1], &s.inv_shoup[1], c), p, p2);
            _mm256_storeu_si256(
                ptr.add(16 * c) as *mut __m256i,
                _mm256_permute2x128_si256::<0x20>(x, y),
            );
            _mm256_storeu_si256(
                ptr.add(16 * c + 8) as *mut __m256i,
                _mm256_permute2x128_si256::<0x31>(x, y),
            );
        }
    }
    // large stages: half = 8 .. n/2
    let mut half = 8;
    let mut m = n / 16;
    while m >= 1 {
        for i in 0..m {
            let w = _mm256_set1_epi32(t.ipsi_rev[m + i] as i32);
            let ws = _mm256_set1_epi32(t.ipsi_rev_shoup[m + i] as i32);
            let j1 = 2 * i * half;
            let mut j = j1;
            while j < j1 + half {
                // SAFETY: j + 8 <= j1 + half, j + half + 8 <= n.
                unsafe {
                    let xv = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
                    let yv = _mm256_loadu_si256(ptr.add(j + half) as *const __m256i);
                    let (x2, y2) = bfly_inv(xv, yv, (w, ws, ws), p, p2);
                    _mm256_storeu_si256(ptr.add(j) as *mut __m256i, x2);
                    _mm256_storeu_si256(ptr.add(j + half) as *mut __m256i, y2);
                }
                j += 8;
            }
        }
        half *= 2;
        m /= 2;
    }
    // scale by n^{-1}, full reduction
    let ni = _mm256_set1_epi32(t.n_inv as i32);
    let nis = _mm256_set1_epi32(t.n_inv_shoup as i32);
    let mut j = 0;
    while j < n {
        // SAFETY: j + 8 <= n.
        unsafe {
            let v = _mm256_loadu_si256(ptr.add(j) as *const __m256i);
            let r = csub(mul_shoup_lazy(v, ni, nis, nis, p), p);
            _mm256_storeu_si256(ptr.add(j) as *mut __m256i, r);
        }
        j += 8;
    }
}
