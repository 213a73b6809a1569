use super::PackGroup;
use std::arch::x86_64::*;

/// Rounding and interleaving step of [`super::pack_columns`] for the
/// first n/8·8 values: eight values of each column are rounded
/// (`(h + 2^{31−w}) ≫ (32 − w)`) and transposed as an 8×8 block, so
/// value i of column c lands at `scratch[8i + c]` with 8-word stores.
/// Returns the number of values done (the caller rounds the rest).
///
/// # Safety
/// avx2 must be available; every column has n values, `scratch` has at
/// least 8n words and 1 ≤ w < 32.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave_round8(cols: [&[u32]; 8], w: u32, scratch: &mut [u32]) -> usize {
    let n = cols[0].len();
    assert!(cols.iter().all(|c| c.len() == n) && scratch.len() >= 8 * n);
    let n8 = n / 8 * 8;
    let half = _mm256_set1_epi32((1u32 << (31 - w)) as i32);
    let shift = _mm_cvtsi32_si128((32 - w) as i32);
    let mut i = 0;
    while i < n8 {
        // SAFETY: i + 8 ≤ n8 ≤ n: each load reads cols[c][i..i+8]; the
        // stores write scratch[8i..8i+64] ⊆ scratch[..8n].
        unsafe {
            let r: [__m256i; 8] = std::array::from_fn(|c| {
                let v = _mm256_loadu_si256(cols[c].as_ptr().add(i) as *const __m256i);
                _mm256_srl_epi32(_mm256_add_epi32(v, half), shift)
            });
            // 8×8 transpose: 32-bit, 64-bit, then 128-bit interleaves
            let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
            let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
            let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
            let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
            let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
            let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
            let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
            let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
            let u0 = _mm256_unpacklo_epi64(t0, t2);
            let u1 = _mm256_unpackhi_epi64(t0, t2);
            let u2 = _mm256_unpacklo_epi64(t1, t3);
            let u3 = _mm256_unpackhi_epi64(t1, t3);
            let u4 = _mm256_unpacklo_epi64(t4, t6);
            let u5 = _mm256_unpackhi_epi64(t4, t6);
            let u6 = _mm256_unpacklo_epi64(t5, t7);
            let u7 = _mm256_unpackhi_epi64(t5, t7);
            let o = scratch.as_mut_ptr().add(8 * i) as *mut __m256i;
            _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u4, 0x20));
            _mm256_storeu_si256(o.add(1), _mm256_permute2x128_si256(u1, u5, 0x20));
            _mm256_storeu_si256(o.add(2), _mm256_permute2x128_si256(u2, u6, 0x20));
            _mm256_storeu_si256(o.add(3), _mm256_permute2x128_si256(u3, u7, 0x20));
            _mm256_storeu_si256(o.add(4), _mm256_permute2x128_si256(u0, u4, 0x31));
            _mm256_storeu_si256(o.add(5), _mm256_permute2x128_si256(u1, u5, 0x31));
            _mm256_storeu_si256(o.add(6), _mm256_permute2x128_si256(u2, u6, 0x31));
            _mm256_storeu_si256(o.add(7), _mm256_permute2x128_si256(u3, u7, 0x31));
        }
        i += 8;
    }
    n8
}

/// AVX-512F chunk step of [`super::pack_columns`]: lanes are columns,
/// so every chunk of a group is two 8-word loads, a few 64-bit shifts and
/// one 16-byte store; a row's groups are stored one after the other.
///
/// # Safety
/// avx512f must be available, and the bounds asserted by
/// [`super::pack_columns`] must hold (`r` is its scratch, `len` = 8(n + 1)
/// words per group).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn columns8_512(
    r: &[u32],
    len: usize,
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: super::RowStride,
) {
    let wc = _mm_cvtsi32_si128(w as i32);
    let sh = _mm_cvtsi32_si128(64 - pb as i32);
    let groups = r.len() / len;
    for (k, &(i, off)) in starts.iter().enumerate() {
        let i = i as usize;
        let offc = _mm_cvtsi32_si128(off as i32);
        for g in 0..groups {
            // SAFETY: g·len + 8(i + 1) + 8 ≤ (g + 1)·len ≤ r.len() and
            // stride.at(k) + 8g + 8 ≤ out.len() (asserted by the caller).
            unsafe {
                let at = r.as_ptr().add(g * len + 8 * i);
                let lo = _mm512_cvtepu32_epi64(_mm256_loadu_si256(at as *const __m256i));
                let hi = _mm512_cvtepu32_epi64(_mm256_loadu_si256(at.add(8) as *const __m256i));
                let win = _mm512_or_si512(lo, _mm512_sll_epi64(hi, wc));
                let x = _mm512_srl_epi64(win, offc);
                let c = _mm512_sra_epi64(_mm512_sll_epi64(x, sh), sh);
                _mm_storeu_si128(
                    out.as_mut_ptr().add(stride.at(k) + 8 * g) as *mut __m128i,
                    _mm512_cvtepi64_epi16(c),
                );
            }
        }
    }
}

/// AVX-512F twin of [`super::pack_groups`].
///
/// # Safety
/// avx512f must be available, and the bounds asserted by
/// [`super::pack_groups`] must hold.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn groups512(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    let wc = _mm_cvtsi32_si128(w as i32);
    let sh = _mm_cvtsi32_si128(64 - pb as i32);
    for (g, grp) in groups.iter().enumerate() {
        // SAFETY: r[base..base + 16] is in bounds and idx/off are plain
        // arrays of 16 u32 / 8 u64 (asserted by the caller).
        let (lo, hi, off) = unsafe {
            let v = _mm512_loadu_si512(r.as_ptr().add(grp.base as usize) as *const __m512i);
            let idx = _mm512_loadu_si512(grp.idx.as_ptr() as *const __m512i);
            let p = _mm512_permutexvar_epi32(idx, v);
            let lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(p));
            let hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(p));
            let off = _mm512_loadu_si512(grp.off.as_ptr() as *const __m512i);
            (lo, hi, off)
        };
        let win = _mm512_or_si512(lo, _mm512_sll_epi64(hi, wc));
        let c = _mm512_sra_epi64(_mm512_sll_epi64(_mm512_srlv_epi64(win, off), sh), sh);
        let words = _mm512_cvtepi64_epi16(c);
        if stride == 1 {
            // SAFETY: out has ≥ 8g + 8 entries (asserted by the caller).
            unsafe { _mm_storeu_si128(out.as_mut_ptr().add(8 * g) as *mut __m128i, words) };
        } else {
            let mut tmp = [0i16; 8];
            // SAFETY: tmp is 16 bytes.
            unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, words) };
            for (t, &x) in tmp.iter().enumerate() {
                out[(8 * g + t) * stride] = x;
            }
        }
    }
}

/// Eight chunks on 32-bit lanes: the `pb` bits at `off` of the windows
/// `lo | hi·2^w`, sign-extended, as eight i16. Only the low 32 bits of
/// `window >> off` matter (pb ≤ 16), and they are
/// `(lo >> off) | (hi << (w − off))`: with off < w ≤ 32 the second
/// count is in [1, 32], and AVX2 variable shifts give 0 for a count of
/// 32, as the 64-bit window does.
#[inline]
#[target_feature(enable = "avx2")]
fn chunks8(lo: __m256i, hi: __m256i, off: __m256i, w: __m256i, sh: __m128i) -> __m128i {
    let x = _mm256_or_si256(
        _mm256_srlv_epi32(lo, off),
        _mm256_sllv_epi32(hi, _mm256_sub_epi32(w, off)),
    );
    // sign-extend from pb bits (sh = 32 − pb ∈ [16, 31]); the values
    // fit in i16, so the saturating pack is exact
    let c = _mm256_sra_epi32(_mm256_sll_epi32(x, sh), sh);
    _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c))
}

/// AVX2 chunk step of [`super::pack_columns`]: lanes are columns, so
/// every chunk of a group is two 8-word loads, a few 32-bit shifts and
/// one 16-byte store.
///
/// # Safety
/// avx2 must be available, and the bounds asserted by
/// [`super::pack_columns`] must hold (including off < w < 32; `len` as
/// for [`columns8_512`]).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn columns8_256(
    r: &[u32],
    len: usize,
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: super::RowStride,
) {
    let wv = _mm256_set1_epi32(w as i32);
    let sh = _mm_cvtsi32_si128(32 - pb as i32);
    let groups = r.len() / len;
    for (k, &(i, off)) in starts.iter().enumerate() {
        let i = i as usize;
        let offv = _mm256_set1_epi32(off as i32);
        for g in 0..groups {
            // SAFETY: as in columns8_512.
            unsafe {
                let at = r.as_ptr().add(g * len + 8 * i);
                let lo = _mm256_loadu_si256(at as *const __m256i);
                let hi = _mm256_loadu_si256(at.add(8) as *const __m256i);
                let c = chunks8(lo, hi, offv, wv, sh);
                _mm_storeu_si128(
                    out.as_mut_ptr().add(stride.at(k) + 8 * g) as *mut __m128i,
                    c,
                );
            }
        }
    }
}

/// AVX2 twin of [`super::pack_groups`]: the 16 window values of a group
/// are two registers, and each chunk's lower and upper value is picked
/// from them with two `vpermd` and a blend on the index's bit 3.
///
/// # Safety
/// avx2 must be available, and the bounds asserted by
/// [`super::pack_groups`] must hold (including off < w ≤ 32).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn groups256(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    let wv = _mm256_set1_epi32(w as i32);
    let sh = _mm_cvtsi32_si128(32 - pb as i32);
    let seven = _mm256_set1_epi32(7);
    for (g, grp) in groups.iter().enumerate() {
        // SAFETY: r[base..base + 16] is in bounds and idx/off are plain
        // arrays of 16 u32 / 8 u64 (asserted by the caller).
        let (lo, hi, off) = unsafe {
            let v0 = _mm256_loadu_si256(r.as_ptr().add(grp.base as usize) as *const __m256i);
            let v1 = _mm256_loadu_si256(r.as_ptr().add(grp.base as usize + 8) as *const __m256i);
            let pick = |i: __m256i| {
                _mm256_blendv_epi8(
                    _mm256_permutevar8x32_epi32(v0, i),
                    _mm256_permutevar8x32_epi32(v1, i),
                    _mm256_cmpgt_epi32(i, seven),
                )
            };
            let il = _mm256_loadu_si256(grp.idx.as_ptr() as *const __m256i);
            let ih = _mm256_loadu_si256(grp.idx.as_ptr().add(8) as *const __m256i);
            // offsets (< 32) from 64-bit to 32-bit lanes: the low
            // halves, then qwords reordered 0, 2, 1, 3
            let o0 = _mm256_loadu_si256(grp.off.as_ptr() as *const __m256i);
            let o1 = _mm256_loadu_si256(grp.off.as_ptr().add(4) as *const __m256i);
            let o = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(
                _mm256_castsi256_ps(o0),
                _mm256_castsi256_ps(o1),
            ));
            (pick(il), pick(ih), _mm256_permute4x64_epi64::<0xD8>(o))
        };
        let words = chunks8(lo, hi, off, wv, sh);
        if stride == 1 {
            // SAFETY: out has ≥ 8g + 8 entries (asserted by the caller).
            unsafe { _mm_storeu_si128(out.as_mut_ptr().add(8 * g) as *mut __m128i, words) };
        } else {
            let mut tmp = [0i16; 8];
            // SAFETY: tmp is 16 bytes.
            unsafe { _mm_storeu_si128(tmp.as_mut_ptr() as *mut __m128i, words) };
            for (t, &x) in tmp.iter().enumerate() {
                out[(8 * g + t) * stride] = x;
            }
        }
    }
}
