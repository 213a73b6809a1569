use crate::kernel::ntt::{avx2 as ntt_avx2, avx512 as ntt_avx512};
use std::arch::x86_64::*;

/// 8 slots per step as two 4 × u64 halves.
///
/// # Safety
/// avx2 must be available; a and b hold ≥ acc.len() words.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_acc_lazy_avx2(a: &[u32], b: &[u32], acc: &mut [u64]) {
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
pub(super) unsafe fn mul_acc_lazy_avx512(a: &[u32], b: &[u32], acc: &mut [u64]) {
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

/// Shoup constants of the reduction of a 64-bit sum mod p (see
/// [`super::mul_sum_blocks_mod`]): 2^32 mod p, ⌊(2^32 mod p)·2^32/p⌋ and
/// ⌊2^32/p⌋.
struct Fold {
    c: i64,
    c_shoup: i64,
    one_shoup: i64,
}

impl Fold {
    fn new(p: u32) -> Self {
        let m = crate::arith::Modulus::new(p);
        let c = ((1u64 << 32) % p as u64) as u32;
        Fold {
            c: c as i64,
            c_shoup: m.shoup(c) as i64,
            one_shoup: m.shoup(1) as i64,
        }
    }
}

/// x mod p in [0, 4p) for 64-bit lanes x = h·2^32 + l: h·(2^32 mod p)
/// and l·1, each by a Shoup multiplication (in [0, 2p) for any u32 h, l).
#[inline]
#[target_feature(enable = "avx512f")]
fn fold512(x: __m512i, c: __m512i, c_shoup: __m512i, one_shoup: __m512i, p: __m512i) -> __m512i {
    let h = _mm512_srli_epi64(x, 32);
    let qh = _mm512_srli_epi64(_mm512_mul_epu32(h, c_shoup), 32);
    let rh = _mm512_sub_epi64(_mm512_mul_epu32(h, c), _mm512_mul_epu32(qh, p));
    let ql = _mm512_srli_epi64(_mm512_mul_epu32(x, one_shoup), 32);
    let l = _mm512_and_si512(x, _mm512_set1_epi64(0xffff_ffff));
    let rl = _mm512_sub_epi64(l, _mm512_mul_epu32(ql, p));
    _mm512_add_epi64(rh, rl)
}

/// [`super::mul_sum_blocks_mod`] with AVX-512F: 64 slots per step, each
/// 16-slot vector summed as its even and odd lanes (`vpmuludq` reads the
/// low half of each 64-bit lane, so the odd lanes are shifted down instead
/// of widening every load), eight 8 × u64 sums kept in registers across
/// all the blocks, then folded mod p and interleaved back.
///
/// # Safety
/// avx512f must be available; `a` and `x` hold ≥ (blocks − 1)·stride +
/// out.len() words, each < 2^28, and blocks ≤ [`super::SUM_BLOCKS_MAX`].
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn mul_sum_blocks_mod_avx512(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
) {
    const V: usize = 4;
    let n64 = out.len() / (16 * V) * (16 * V);
    let f = Fold::new(p);
    let (c, cs, os) = (
        _mm512_set1_epi64(f.c),
        _mm512_set1_epi64(f.c_shoup),
        _mm512_set1_epi64(f.one_shoup),
    );
    let (p64, p32, p2) = (
        _mm512_set1_epi64(p as i64),
        _mm512_set1_epi32(p as i32),
        _mm512_set1_epi32(2 * p as i32),
    );
    let (pa, px, po) = (a.as_ptr(), x.as_ptr(), out.as_mut_ptr());
    let mut i = 0;
    while i < n64 {
        // SAFETY: i + 64 ≤ n64 ≤ out.len(), and block b's slots i..i + 64
        // are at b·stride + i + 64 ≤ (blocks − 1)·stride + out.len() ≤
        // a.len(), x.len().
        unsafe {
            let mut even = [_mm512_setzero_si512(); V];
            let mut odd = [_mm512_setzero_si512(); V];
            for b in 0..blocks {
                let o = b * stride + i;
                for v in 0..V {
                    let y = _mm512_loadu_si512(pa.add(o + 16 * v) as *const __m512i);
                    let z = _mm512_loadu_si512(px.add(o + 16 * v) as *const __m512i);
                    even[v] = _mm512_add_epi64(even[v], _mm512_mul_epu32(y, z));
                    let (yo, zo) = (_mm512_srli_epi64(y, 32), _mm512_srli_epi64(z, 32));
                    odd[v] = _mm512_add_epi64(odd[v], _mm512_mul_epu32(yo, zo));
                }
            }
            for v in 0..V {
                let e = fold512(even[v], c, cs, os, p64);
                let o = fold512(odd[v], c, cs, os, p64);
                // [e0, o0, e1, o1, …]: the slots in their order, in [0, 4p)
                let r = _mm512_or_si512(e, _mm512_slli_epi64(o, 32));
                let r = ntt_avx512::csub(ntt_avx512::csub(r, p2), p32);
                _mm512_storeu_si512(po.add(i + 16 * v) as *mut __m512i, r);
            }
        }
        i += 16 * V;
    }
    super::mul_sum_blocks_mod_scalar(a, x, stride, blocks, p, out, n64);
}

/// x mod p in [0, 4p) for 64-bit lanes, as [`fold512`].
#[inline]
#[target_feature(enable = "avx2")]
fn fold256(x: __m256i, c: __m256i, c_shoup: __m256i, one_shoup: __m256i, p: __m256i) -> __m256i {
    let h = _mm256_srli_epi64(x, 32);
    let qh = _mm256_srli_epi64(_mm256_mul_epu32(h, c_shoup), 32);
    let rh = _mm256_sub_epi64(_mm256_mul_epu32(h, c), _mm256_mul_epu32(qh, p));
    let ql = _mm256_srli_epi64(_mm256_mul_epu32(x, one_shoup), 32);
    let l = _mm256_and_si256(x, _mm256_set1_epi64x(0xffff_ffff));
    let rl = _mm256_sub_epi64(l, _mm256_mul_epu32(ql, p));
    _mm256_add_epi64(rh, rl)
}

/// [`super::mul_sum_blocks_mod`] with AVX2: 32 slots per step (eight
/// 4 × u64 sums, even and odd lanes as in [`mul_sum_blocks_mod_avx512`]).
///
/// # Safety
/// avx2 must be available; bounds as for [`mul_sum_blocks_mod_avx512`].
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mul_sum_blocks_mod_avx2(
    a: &[u32],
    x: &[u32],
    stride: usize,
    blocks: usize,
    p: u32,
    out: &mut [u32],
) {
    const V: usize = 4;
    let n32 = out.len() / (8 * V) * (8 * V);
    let f = Fold::new(p);
    let (c, cs, os) = (
        _mm256_set1_epi64x(f.c),
        _mm256_set1_epi64x(f.c_shoup),
        _mm256_set1_epi64x(f.one_shoup),
    );
    let (p64, p32, p2) = (
        _mm256_set1_epi64x(p as i64),
        _mm256_set1_epi32(p as i32),
        _mm256_set1_epi32(2 * p as i32),
    );
    let (pa, px, po) = (a.as_ptr(), x.as_ptr(), out.as_mut_ptr());
    let mut i = 0;
    while i < n32 {
        // SAFETY: as in mul_sum_blocks_mod_avx512, with 32 slots per step.
        unsafe {
            let mut even = [_mm256_setzero_si256(); V];
            let mut odd = [_mm256_setzero_si256(); V];
            for b in 0..blocks {
                let o = b * stride + i;
                for v in 0..V {
                    let y = _mm256_loadu_si256(pa.add(o + 8 * v) as *const __m256i);
                    let z = _mm256_loadu_si256(px.add(o + 8 * v) as *const __m256i);
                    even[v] = _mm256_add_epi64(even[v], _mm256_mul_epu32(y, z));
                    let (yo, zo) = (_mm256_srli_epi64(y, 32), _mm256_srli_epi64(z, 32));
                    odd[v] = _mm256_add_epi64(odd[v], _mm256_mul_epu32(yo, zo));
                }
            }
            for v in 0..V {
                let e = fold256(even[v], c, cs, os, p64);
                let o = fold256(odd[v], c, cs, os, p64);
                let r = _mm256_or_si256(e, _mm256_slli_epi64(o, 32));
                let r = ntt_avx2::csub(ntt_avx2::csub(r, p2), p32);
                _mm256_storeu_si256(po.add(i + 8 * v) as *mut __m256i, r);
            }
        }
        i += 8 * V;
    }
    super::mul_sum_blocks_mod_scalar(a, x, stride, blocks, p, out, n32);
}
