use super::Mont;
use std::arch::x86_64::*;

/// Prefetch distance (words) of the digit stream for t rows of
/// `stride` words; shared with the AVX2 kernel. The packing tree's
/// cached digits are laid out node after node in the order the online
/// pass visits them (t·stride words per node), so the same row of the
/// node [`super::KS_NODES_AHEAD`] ahead is where this stream will be
/// then. The hint is `prefetcht1` (into L2), nodes rather than bytes
/// ahead, so the digits arrive in L2 in time without pushing the node
/// being switched out of L1. `PIR_KSPF=<words>` overrides it.
pub(super) fn ks_prefetch(t: usize, stride: usize) -> usize {
    static D: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    D.get_or_init(|| std::env::var("PIR_KSPF").ok().and_then(|v| v.parse().ok()))
        .unwrap_or(super::KS_NODES_AHEAD * t * stride)
}

/// REDC of the 64-bit sums of 16 slots (each < p·2^32): `even` holds
/// slots 0, 2, …, 14 and `odd` slots 1, 3, …, 15 (the 64-bit lanes of
/// `vpmuludq` on the even and the odd 32-bit lanes); returns the 16
/// results in [0, p) as 32-bit lanes in slot order. x + m·p has its
/// result in the high half, which for the odd slots is already their lane
/// (as the AVX2 `redc2` blends): 10 instructions per 16 slots instead of
/// 14 for two 64-bit reductions shifted and or'ed together (the key
/// switch is bound by its loads either way).
#[inline]
#[target_feature(enable = "avx512f")]
fn redc16(even: __m512i, odd: __m512i, p: __m512i, pinv: __m512i) -> __m512i {
    let te = _mm512_add_epi64(even, _mm512_mul_epu32(_mm512_mul_epu32(even, pinv), p));
    let to = _mm512_add_epi64(odd, _mm512_mul_epu32(_mm512_mul_epu32(odd, pinv), p));
    let r = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<32>(te), to);
    _mm512_min_epu32(r, _mm512_sub_epi32(r, p))
}

/// `src[perm[i..i+16]]`: with `within16`, one aligned block load and
/// `vpermd` (which reads the low 4 bits of each index: the lane inside
/// the source block), otherwise a gather.
///
/// # Safety
/// avx512f must be available; i + 16 ≤ perm.len(); every index in
/// perm[i..i+16] is < src.len(); with `within16` they all lie in the
/// aligned 16-slot block of `perm[i]` and `src.len()` is a multiple of 16.
#[inline]
#[target_feature(enable = "avx512f")]
pub(in crate::kernel) unsafe fn slots16(
    src: &[u32],
    perm: &[u32],
    i: usize,
    within16: bool,
) -> __m512i {
    // SAFETY: the caller's bounds above.
    unsafe {
        let idx = _mm512_loadu_si512(perm.as_ptr().add(i) as *const __m512i);
        if within16 {
            let b = *perm.get_unchecked(i) as usize / 16 * 16;
            _mm512_permutexvar_epi32(
                idx,
                _mm512_loadu_si512(src.as_ptr().add(b) as *const __m512i),
            )
        } else {
            _mm512_i32gather_epi32::<4>(idx, src.as_ptr() as *const i32)
        }
    }
}

/// 16 slots per step: even lanes with `vpmuludq` directly, odd lanes
/// after a 32-bit shift; both REDC'd and re-interleaved.
///
/// # Safety
/// avx512f and avx512bw must be available; the slices must hold
/// (t−1)·stride + n words and `out` n words.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn keyswitch_acc(
    m: &Mont,
    w: &[u32],
    g: &[u32],
    t: usize,
    stride: usize,
    n: usize,
    out: &mut [u32],
) {
    let n16 = n / 16 * 16;
    // p and −p^{-1} in every 32-bit lane: `vpmuludq` reads the low one of
    // each 64-bit lane, the 32-bit reductions all of them
    let p = _mm512_set1_epi32(m.p as i32);
    let pinv = _mm512_set1_epi32(m.pinv_neg as i32);
    let pf = ks_prefetch(t, stride);
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 <= n16 <= n; every row k < t of w and g has n
        // words starting at k·stride, and out has n words.
        unsafe {
            let mut even = _mm512_setzero_si512();
            let mut odd = _mm512_setzero_si512();
            for k in 0..t {
                // the digits stream from memory: prefetch ahead into L2
                // (a hint, it never faults)
                _mm_prefetch::<_MM_HINT_T1>(
                    g.as_ptr().wrapping_add(k * stride + i + pf) as *const i8
                );
                let a = _mm512_loadu_si512(w.as_ptr().add(k * stride + i) as *const __m512i);
                let b = _mm512_loadu_si512(g.as_ptr().add(k * stride + i) as *const __m512i);
                even = _mm512_add_epi64(even, _mm512_mul_epu32(a, b));
                odd = _mm512_add_epi64(
                    odd,
                    _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32)),
                );
            }
            let r = redc16(even, odd, p, pinv);
            let o = _mm512_loadu_si512(out.as_ptr().add(i) as *const __m512i);
            let s = _mm512_add_epi32(o, r);
            let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p));
            _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, s);
        }
        i += 16;
    }
    super::keyswitch_acc_scalar(m, w, g, t, stride, n16, n, out);
}

/// # Safety
/// avx512f and avx512bw must be available; all slices have e.len() words.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn plus_minus(
    m: &Mont,
    e: &[u32],
    o: &[u32],
    mono: &[u32],
    plus: &mut [u32],
    minus: &mut [u32],
) {
    let n = e.len();
    let n16 = n / 16 * 16;
    let p32 = _mm512_set1_epi32(m.p as i32);
    let pinv = _mm512_set1_epi32(m.pinv_neg as i32);
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 <= n16 <= n = length of every slice.
        unsafe {
            let ov = _mm512_loadu_si512(o.as_ptr().add(i) as *const __m512i);
            let mv = _mm512_loadu_si512(mono.as_ptr().add(i) as *const __m512i);
            let xo = redc16(
                _mm512_mul_epu32(ov, mv),
                _mm512_mul_epu32(_mm512_srli_epi64(ov, 32), _mm512_srli_epi64(mv, 32)),
                p32,
                pinv,
            );
            let ev = _mm512_loadu_si512(e.as_ptr().add(i) as *const __m512i);
            let s = _mm512_add_epi32(ev, xo);
            let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p32));
            let d = _mm512_sub_epi32(_mm512_add_epi32(ev, p32), xo);
            let d = _mm512_min_epu32(d, _mm512_sub_epi32(d, p32));
            _mm512_storeu_si512(plus.as_mut_ptr().add(i) as *mut __m512i, s);
            _mm512_storeu_si512(minus.as_mut_ptr().add(i) as *mut __m512i, d);
        }
        i += 16;
    }
    super::plus_minus_scalar(m, e, o, mono, plus, minus, n16, n);
}

/// # Safety
/// avx512f must be available; every `perm[i] < minus.len()`; plus, perm
/// and out have the same length.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn add_permuted(
    p: u32,
    plus: &[u32],
    minus: &[u32],
    perm: &[u32],
    within16: bool,
    out: &mut [u32],
) {
    let n = plus.len();
    let n16 = n / 16 * 16;
    let p32 = _mm512_set1_epi32(p as i32);
    let mut i = 0;
    while i < n16 {
        // SAFETY: i + 16 <= n16 <= n; gathered indices are < minus.len()
        // (checked by the caller); with `within16` (SlotPerm checked it)
        // the block perm[i]/16·16 .. +16 lies inside minus (n is a
        // multiple of 16) and holds every index of this output block.
        unsafe {
            let g = slots16(minus, perm, i, within16);
            let a = _mm512_loadu_si512(plus.as_ptr().add(i) as *const __m512i);
            let s = _mm512_add_epi32(a, g);
            let s = _mm512_min_epu32(s, _mm512_sub_epi32(s, p32));
            _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, s);
        }
        i += 16;
    }
    super::add_permuted_scalar(p, plus, minus, perm, out, n16);
}
