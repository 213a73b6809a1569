//! Harvey's lazy NTT butterflies on 16 u32 lanes. Stages with half-size
//! t ≥ 16 broadcast one twiddle per block; the four smallest stages work
//! on 32-element chunks split into butterfly halves with `vpermt2d`.
use super::NttTable;
use std::arch::x86_64::*;

/// x·w mod p in [0, 2p) (Shoup), lane-wise; any x < 2^32.
#[inline]
#[target_feature(enable = "avx512f")]
fn mul_shoup_lazy(x: __m512i, w: __m512i, ws: __m512i, p: __m512i) -> __m512i {
    let even = _mm512_srli_epi64(_mm512_mul_epu32(x, ws), 32);
    let odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(ws, 32));
    let q = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    _mm512_sub_epi32(_mm512_mullo_epi32(x, w), _mm512_mullo_epi32(q, p))
}

/// x − m if x ≥ m (unsigned lanes; also used by `rns::simd`).
#[inline]
#[target_feature(enable = "avx512f")]
pub(in crate::kernel) fn csub(x: __m512i, m: __m512i) -> __m512i {
    _mm512_min_epu32(x, _mm512_sub_epi32(x, m))
}

/// (X, Y) lane indices of the butterflies of a 32-element chunk for
/// half-size t, and the inverse placement.
fn split_idx(t: usize) -> ([i32; 16], [i32; 16], [i32; 16], [i32; 16]) {
    let mut x = [0i32; 16];
    let mut y = [0i32; 16];
    for l in 0..16 {
        x[l] = ((l / t) * 2 * t + l % t) as i32;
        y[l] = x[l] + t as i32;
    }
    // element e comes from X lane l (index l) or Y lane l (index 16 + l)
    let mut src = [0i32; 32];
    for l in 0..16 {
        src[x[l] as usize] = l as i32;
        src[y[l] as usize] = 16 + l as i32;
    }
    let mut a = [0i32; 16];
    let mut b = [0i32; 16];
    a.copy_from_slice(&src[..16]);
    b.copy_from_slice(&src[16..]);
    (x, y, a, b)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn load_idx(v: &[i32; 16]) -> __m512i {
    // SAFETY: reading 64 bytes from a 16 × i32 array.
    unsafe { _mm512_loadu_si512(v.as_ptr() as *const __m512i) }
}

/// # Safety
/// avx512f must be available; `a.len() == t.n`, n ≥ 32 a power of two.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn forward(t: &NttTable, a: &mut [u32]) {
    assert!(a.len() == t.n && t.n >= 32);
    // SAFETY: avx512f/avx512bw available (caller), lengths asserted.
    unsafe { forward_from(t, a, t.n / 2, 1) };
}

/// The forward transform of the residues mod p of `src` reversed
/// (`a[m] = src[n − 1 − m] mod p`): H2's row blocks (App. B's reversed
/// d̂), with the first stage reading the digits directly instead of a
/// residue pass writing them out and the transform reading them back.
///
/// # Safety
/// avx512f and avx512bw must be available; `src.len() == a.len() == t.n`,
/// n ≥ 32 a power of two.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn forward_reversed_i16(t: &NttTable, src: &[i16], a: &mut [u32]) {
    let n = t.n;
    assert!(a.len() == n && src.len() == n && n >= 32);
    let p = _mm512_set1_epi32(t.m.p as i32);
    let p2 = _mm512_set1_epi32(2 * t.m.p as i32);
    let rev = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    // residues in [0, p) of a[m .. m + 16] = src[n − 16 − m .. n − m] reversed
    let residues = |m: usize| {
        // SAFETY: m + 16 ≤ n, so the load reads src[n − m − 16 .. n − m].
        let v = unsafe { _mm256_loadu_si256(src.as_ptr().add(n - m - 16) as *const __m256i) };
        let v = _mm512_permutexvar_epi32(rev, _mm512_cvtepi16_epi32(v));
        _mm512_add_epi32(v, _mm512_and_si512(_mm512_srai_epi32(v, 31), p))
    };
    // the first stage (half = n/2, twiddle ψ[1]), inputs already in [0, p)
    let half = n / 2;
    let (w, ws) = (
        _mm512_set1_epi32(t.psi_rev[1] as i32),
        _mm512_set1_epi32(t.psi_rev_shoup[1] as i32),
    );
    let ptr = a.as_mut_ptr();
    let mut j = 0;
    while j < half {
        let (x, y) = (residues(j), residues(j + half));
        let v = mul_shoup_lazy(y, w, ws, p);
        // SAFETY: j + 16 ≤ half and j + half + 16 ≤ n.
        unsafe {
            _mm512_storeu_si512(ptr.add(j) as *mut __m512i, _mm512_add_epi32(x, v));
            _mm512_storeu_si512(
                ptr.add(j + half) as *mut __m512i,
                _mm512_sub_epi32(_mm512_add_epi32(x, p2), v),
            );
        }
        j += 16;
    }
    // SAFETY: as above; the remaining stages start at half = n/4, m = 2.
    unsafe { forward_from(t, a, n / 4, 2) };
}

/// The stages of [`forward`] from the one with half-size `half` (and `m`
/// = n / (2·half) twiddle blocks) on.
///
/// # Safety
/// avx512f and avx512bw must be available; `a.len() == t.n`, n ≥ 32.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn forward_from(t: &NttTable, a: &mut [u32], half: usize, m: usize) {
    let n = t.n;
    assert!(a.len() == n && n >= 32 && 2 * half * m == n);
    let p = _mm512_set1_epi32(t.m.p as i32);
    let p2 = _mm512_set1_epi32(2 * t.m.p as i32);
    let ptr = a.as_mut_ptr();
    // large stages
    let (mut half, mut m) = (half, m);
    while half >= 16 {
        for i in 0..m {
            let w = _mm512_set1_epi32(t.psi_rev[m + i] as i32);
            let ws = _mm512_set1_epi32(t.psi_rev_shoup[m + i] as i32);
            let j1 = 2 * i * half;
            let mut j = j1;
            while j < j1 + half {
                // SAFETY: j + 16 <= j1 + half and j + half + 16 <= j1 + 2·half <= n.
                unsafe {
                    let xv = csub(_mm512_loadu_si512(ptr.add(j) as *const __m512i), p2);
                    let yv = _mm512_loadu_si512(ptr.add(j + half) as *const __m512i);
                    let v = mul_shoup_lazy(yv, w, ws, p);
                    _mm512_storeu_si512(ptr.add(j) as *mut __m512i, _mm512_add_epi32(xv, v));
                    _mm512_storeu_si512(
                        ptr.add(j + half) as *mut __m512i,
                        _mm512_sub_epi32(_mm512_add_epi32(xv, p2), v),
                    );
                }
                j += 16;
            }
        }
        half /= 2;
        m *= 2;
    }
    // small stages t = 8, 4, 2, 1 on 32-element chunks
    for (st, tt) in [8usize, 4, 2, 1].into_iter().enumerate() {
        let (ix, iy, ia, ib) = split_idx(tt);
        let (ix, iy, ia, ib) = (load_idx(&ix), load_idx(&iy), load_idx(&ia), load_idx(&ib));
        let tw = &t.small.fwd[st];
        let tws = &t.small.fwd_shoup[st];
        for c in 0..n / 32 {
            // SAFETY: chunk c spans a[32c .. 32c + 32] ⊂ a; the twiddle
            // tables hold n/32 · 16 entries.
            unsafe {
                let av = _mm512_loadu_si512(ptr.add(32 * c) as *const __m512i);
                let bv = _mm512_loadu_si512(ptr.add(32 * c + 16) as *const __m512i);
                let xv = csub(_mm512_permutex2var_epi32(av, ix, bv), p2);
                let yv = _mm512_permutex2var_epi32(av, iy, bv);
                let w = _mm512_loadu_si512(tw.as_ptr().add(16 * c) as *const __m512i);
                let ws = _mm512_loadu_si512(tws.as_ptr().add(16 * c) as *const __m512i);
                let v = mul_shoup_lazy(yv, w, ws, p);
                let x2 = _mm512_add_epi32(xv, v);
                let y2 = _mm512_sub_epi32(_mm512_add_epi32(xv, p2), v);
                let mut oa = _mm512_permutex2var_epi32(x2, ia, y2);
                let mut ob = _mm512_permutex2var_epi32(x2, ib, y2);
                if st == 3 {
                    // final reduction [0, 4p) → [0, p)
                    oa = csub(csub(oa, p2), p);
                    ob = csub(csub(ob, p2), p);
                }
                _mm512_storeu_si512(ptr.add(32 * c) as *mut __m512i, oa);
                _mm512_storeu_si512(ptr.add(32 * c + 16) as *mut __m512i, ob);
            }
        }
    }
}

/// # Safety
/// avx512f must be available; `a.len() == t.n`, n ≥ 32 a power of two.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn inverse(t: &NttTable, a: &mut [u32]) {
    let n = t.n;
    assert!(a.len() == n && n >= 32);
    let p = _mm512_set1_epi32(t.m.p as i32);
    let p2 = _mm512_set1_epi32(2 * t.m.p as i32);
    let ptr = a.as_mut_ptr();
    // small stages first: t = 1, 2, 4, 8
    for (st, tt) in [8usize, 4, 2, 1].into_iter().enumerate().rev() {
        let (ix, iy, ia, ib) = split_idx(tt);
        let (ix, iy, ia, ib) = (load_idx(&ix), load_idx(&iy), load_idx(&ia), load_idx(&ib));
        let tw = &t.small.inv[st];
        let tws = &t.small.inv_shoup[st];
        for c in 0..n / 32 {
            // SAFETY: as in `forward`.
            unsafe {
                let av = _mm512_loadu_si512(ptr.add(32 * c) as *const __m512i);
                let bv = _mm512_loadu_si512(ptr.add(32 * c + 16) as *const __m512i);
                let xv = _mm512_permutex2var_epi32(av, ix, bv);
                let yv = _mm512_permutex2var_epi32(av, iy, bv);
                let w = _mm512_loadu_si512(tw.as_ptr().add(16 * c) as *const __m512i);
                let ws = _mm512_loadu_si512(tws.as_ptr().add(16 * c) as *const __m512i);
                let x2 = csub(_mm512_add_epi32(xv, yv), p2);
                let y2 = mul_shoup_lazy(_mm512_sub_epi32(_mm512_add_epi32(xv, p2), yv), w, ws, p);
                _mm512_storeu_si512(
                    ptr.add(32 * c) as *mut __m512i,
                    _mm512_permutex2var_epi32(x2, ia, y2),
                );
                _mm512_storeu_si512(
                    ptr.add(32 * c + 16) as *mut __m512i,
                    _mm512_permutex2var_epi32(x2, ib, y2),
                );
            }
        }
    }
    // large stages: half = 16 .. n/2
    let mut half = 16;
    let mut m = n / 32;
    while m >= 1 {
        for i in 0..m {
            let w = _mm512_set1_epi32(t.ipsi_rev[m + i] as i32);
            let ws = _mm512_set1_epi32(t.ipsi_rev_shoup[m + i] as i32);
            let j1 = 2 * i * half;
            let mut j = j1;
            while j < j1 + half {
                // SAFETY: j + 16 <= j1 + half, j + half + 16 <= n.
                unsafe {
                    let xv = _mm512_loadu_si512(ptr.add(j) as *const __m512i);
                    let yv = _mm512_loadu_si512(ptr.add(j + half) as *const __m512i);
                    let x2 = csub(_mm512_add_epi32(xv, yv), p2);
                    let y2 =
                        mul_shoup_lazy(_mm512_sub_epi32(_mm512_add_epi32(xv, p2), yv), w, ws, p);
                    _mm512_storeu_si512(ptr.add(j) as *mut __m512i, x2);
                    _mm512_storeu_si512(ptr.add(j + half) as *mut __m512i, y2);
                }
                j += 16;
            }
        }
        half *= 2;
        m /= 2;
    }
    // scale by n^{-1}, full reduction
    let ni = _mm512_set1_epi32(t.n_inv as i32);
    let nis = _mm512_set1_epi32(t.n_inv_shoup as i32);
    let mut j = 0;
    while j < n {
        // SAFETY: j + 16 <= n.
        unsafe {
            let v = _mm512_loadu_si512(ptr.add(j) as *const __m512i);
            let r = csub(mul_shoup_lazy(v, ni, nis, p), p);
            _mm512_storeu_si512(ptr.add(j) as *mut __m512i, r);
        }
        j += 16;
    }
}
