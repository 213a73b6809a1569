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

/// Quads per loop step of [`group`] (steps of four run out of registers
/// for a group of 3).
const STEP: usize = 2;

/// The loop of a half pass over `$n` quads: a line of `$cursor` issued
/// every [`STEP`] quads while `$prefetch`, then `$body` for each quad `$u`
/// of the step.
macro_rules! steps {
    ($n:expr, $prefetch:expr, $cursor:ident, |$u:ident| $body:block) => {
        let mut t = 0;
        while t < $n {
            if $prefetch {
                $cursor.issue();
            }
            for $u in t..t + STEP $body
            t += STEP;
        }
    };
}

/// AVX2 slice kernel: `Q` queries (1 ≤ Q ≤ 3) over a slice of quads
/// (4 rows × 16 columns each, see [`crate::db`]), adding each query's 16
/// column sums to `out[q]`. The slice is taken half at a time (8 columns,
/// 32 bytes of each quad, as two quarters of 4 columns): `vpmovsxbw`
/// widens each quarter's 16 records once, so that word 4c + x is row x of
/// column c and 32-bit lane m holds rows 2(m mod 2), +1 of column
/// ⌊m/2⌋; the query's lo (then hi) entries of the quad's 4 rows,
/// broadcast as one 64-bit word, then multiply both quarters for every
/// query of the group (4·Q accumulators, 12 of the 16 ymm registers at
/// Q = 3, beside the two quarters and a broadcast). Both the widening,
/// on a port the adds share, and the broadcast, which is not free on
/// every core, are paid once per two `vpmaddwd` or more. Each query's
/// halves are one interleaved array
/// ([`super::SplitQuery`]): with one pointer per query the accumulators,
/// the records and the broadcast stay in registers. Where the slice and
/// the halves do not fit in L1 together (2048 rows), both half passes
/// read them from L2, which costs the loop almost nothing. The lines of
/// `ahead` are prefetched into L2, one per loop step
/// ([`super::Cursor`]), in the first half pass or, when there are more
/// lines than its steps, in both.
///
/// # Safety
/// The caller must have checked that the CPU supports AVX2; `data` holds
/// whole 64-byte quads, a multiple of 4 of them, and every `halves[q]` 8
/// entries per quad.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn group<const Q: usize>(
    data: &[u8],
    halves: [&[i16]; Q],
    ahead: &[u8],
    out: &mut [[u32; 16]; Q],
) {
    let n = data.len() / 64;
    assert!(
        data.len().is_multiple_of(64)
            && n.is_multiple_of(4)
            && halves.iter().all(|v| v.len() == 8 * n),
        "slice shape"
    );
    if Q == 1 {
        // SAFETY: as for this function, with Q = 1.
        unsafe { single(data, halves[0], ahead, &mut out[0]) };
        return;
    }
    let (passes, mut cursor) = half_pass_prefetch(ahead, n);
    let dp = data.as_ptr();
    let hp = halves.map(|v| v.as_ptr());
    for half in 0..2 {
        let mut acc_lo = [[_mm256_setzero_si256(); Q]; 2];
        let mut acc_hi = [[_mm256_setzero_si256(); Q]; 2];
        steps!(n, half < passes, cursor, |u| {
            // SAFETY: u < n (STEP divides n, asserted a multiple of
            // 4), so bytes [64u + 32·half, +32) are inside `data`,
            // and entries [8u, 8u + 8) inside every halves slice
            // (asserted above); the loads are unaligned.
            unsafe {
                let at = dp.add(64 * u + 32 * half);
                let d0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(at as *const __m128i));
                let d1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(at.add(16) as *const __m128i));
                for q in 0..Q {
                    let p = hp[q].add(8 * u) as *const i64;
                    let l = _mm256_set1_epi64x(p.read_unaligned());
                    acc_lo[0][q] = _mm256_add_epi32(acc_lo[0][q], _mm256_madd_epi16(d0, l));
                    acc_lo[1][q] = _mm256_add_epi32(acc_lo[1][q], _mm256_madd_epi16(d1, l));
                    let h = _mm256_set1_epi64x(p.add(1).read_unaligned());
                    acc_hi[0][q] = _mm256_add_epi32(acc_hi[0][q], _mm256_madd_epi16(d0, h));
                    acc_hi[1][q] = _mm256_add_epi32(acc_hi[1][q], _mm256_madd_epi16(d1, h));
                }
            }
        });
        for q in 0..Q {
            let (lo, hi) = (acc_lo.map(|a| a[q]), acc_hi.map(|a| a[q]));
            add_half(lo, hi, &mut out[q], half);
        }
    }
}

/// How a kernel of two half passes over `n` quads prefetches `ahead`, a
/// line per loop step: a share of at most a line per step of one half
/// pass goes out in the first pass, a larger one over both. Returns the
/// number of half passes that prefetch and their cursor.
fn half_pass_prefetch(ahead: &[u8], n: usize) -> (usize, super::Cursor) {
    let passes = if ahead.len().div_ceil(64) * STEP <= n {
        1
    } else {
        2
    };
    (passes, super::Cursor::new(ahead, passes * n / STEP))
}

/// [`group`] for one query: each quad is read once, all four quarters at
/// a time (8 accumulators), so a single query streams its slice in order.
///
/// # Safety
/// As for [`group`].
#[target_feature(enable = "avx2")]
unsafe fn single(data: &[u8], halves: &[i16], ahead: &[u8], out: &mut [u32; 16]) {
    let n = data.len() / 64;
    assert!(data.len().is_multiple_of(64) && halves.len() == 8 * n);
    let mut cursor = super::Cursor::new(ahead, n);
    let dp = data.as_ptr();
    let mut acc_lo = [_mm256_setzero_si256(); 4];
    let mut acc_hi = [_mm256_setzero_si256(); 4];
    for t in 0..n {
        cursor.issue();
        // SAFETY: t < n, so bytes [64t, 64t + 64) are inside `data` and
        // entries [8t, 8t + 8) inside `halves` (asserted above).
        unsafe {
            let p = halves.as_ptr().add(8 * t) as *const i64;
            let l = _mm256_set1_epi64x(p.read_unaligned());
            let h = _mm256_set1_epi64x(p.add(1).read_unaligned());
            for quarter in 0..4 {
                let d = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                    dp.add(64 * t + 16 * quarter) as *const __m128i
                ));
                acc_lo[quarter] = _mm256_add_epi32(acc_lo[quarter], _mm256_madd_epi16(d, l));
                acc_hi[quarter] = _mm256_add_epi32(acc_hi[quarter], _mm256_madd_epi16(d, h));
            }
        }
    }
    for half in 0..2 {
        let lo = [acc_lo[2 * half], acc_lo[2 * half + 1]];
        let hi = [acc_hi[2 * half], acc_hi[2 * half + 1]];
        add_half(lo, hi, out, half);
    }
}

/// Adds Σ_r (lo·d + 2^16·hi·d) of one half (columns 8·half..+8, its two
/// quarters' accumulators) to `out`. In a quarter's vector lanes 2c and
/// 2c + 1 hold column c, so `hadd` of the two quarters leaves columns
/// 0, 1, 4, 5 | 2, 3, 6, 7 of the half, which one 64-bit permute puts in
/// order: one 256-bit add per half, not two 128-bit ones (the reduction
/// is paid once per query and call).
#[inline]
#[target_feature(enable = "avx2")]
fn add_half(lo: [__m256i; 2], hi: [__m256i; 2], out: &mut [u32; 16], half: usize) {
    let v0 = _mm256_add_epi32(lo[0], _mm256_slli_epi32::<16>(hi[0]));
    let v1 = _mm256_add_epi32(lo[1], _mm256_slli_epi32::<16>(hi[1]));
    let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(v0, v1));
    let o = &mut out[8 * half..8 * half + 8];
    // SAFETY: `o` is 8 u32s, exactly one 256-bit vector; the loads and
    // stores are unaligned.
    unsafe {
        let prev = _mm256_loadu_si256(o.as_ptr() as *const __m256i);
        _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, _mm256_add_epi32(prev, s));
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

/// AVX2 word kernel: `Q` queries over a slice of quads without widening
/// the records. Each 16-bit word w of a half quad holds rows 2m, 2m + 1
/// of one column (low byte r_{2m}, high byte r_{2m+1}, both signed); with
/// x = w ⊕ 2^7 (the low byte biased to r_{2m} + 2^7 ∈ [0, 2^8)) and
/// y = w >> 8 (arithmetic, r_{2m+1}), and a = c_{2m},
/// b = c_{2m+1} − 2^8·c_{2m}:
///
/// ```text
/// x·a + y·b = (r_{2m} + 2^7)·c_{2m} + 2^8·r_{2m+1}·c_{2m} + r_{2m+1}·(c_{2m+1} − 2^8·c_{2m})
///           = r_{2m}·c_{2m} + r_{2m+1}·c_{2m+1} + 2^7·c_{2m}
/// ```
///
/// So `vpmaddwd` of x with (a_0, a_1) plus `vpmaddwd` of y with
/// (b_0, b_1), each in lo and hi halves, gives one column's four rows in
/// one 32-bit lane, over by the bias 2^7·Σ c_{even} that `bias[q]`
/// removes once per call. A query needs two accumulators per half quad
/// (lo, hi) against four in [`group`], and the two operations that stand
/// in for the widening (`vpxor`, `vpsraw`) are paid once per half quad
/// for the whole group; in exchange every `vpmaddwd` takes its own
/// broadcast, where [`group`] shares one between two.
///
/// It takes the groups of 4 ([`super::groups_for`]): one group of 4
/// loads each quad once for all four queries and widens nothing, where
/// two groups of 2 of [`group`] load and widen it twice.
///
/// # Safety
/// The caller must have checked that the CPU supports AVX2; `data` holds
/// whole 64-byte quads, a multiple of [`STEP`] of them, and every
/// `words[q]` 4 words per quad.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn group_words<const Q: usize>(
    data: &[u8],
    words: [&[u32]; Q],
    bias: [u32; Q],
    ahead: &[u8],
    out: &mut [[u32; 16]; Q],
) {
    let n = data.len() / 64;
    assert!(
        data.len().is_multiple_of(64)
            && n.is_multiple_of(STEP)
            && words.iter().all(|v| v.len() == 4 * n),
        "slice shape"
    );
    let (passes, mut cursor) = half_pass_prefetch(ahead, n);
    let dp = data.as_ptr();
    let wp = words.map(|v| v.as_ptr());
    let flip = _mm256_set1_epi16(0x80);
    for half in 0..2 {
        let mut lo = [_mm256_setzero_si256(); Q];
        let mut hi = [_mm256_setzero_si256(); Q];
        steps!(n, half < passes, cursor, |u| {
            // SAFETY: u < n (STEP divides n, asserted), so bytes
            // [64u + 32·half, +32) are inside `data` and words
            // [4u, 4u + 4) inside every `words` slice, which
            // `word_macs` reads; the loads are unaligned.
            unsafe {
                let w = _mm256_loadu_si256(dp.add(64 * u + 32 * half) as *const __m256i);
                let x = _mm256_xor_si256(w, flip);
                let y = _mm256_srai_epi16::<8>(w);
                for q in 0..Q {
                    word_macs(wp[q].add(4 * u), x, y, &mut lo[q], &mut hi[q]);
                }
            }
        });
        for q in 0..Q {
            let v = _mm256_add_epi32(lo[q], _mm256_slli_epi32::<16>(hi[q]));
            let v = _mm256_sub_epi32(v, _mm256_set1_epi32(bias[q] as i32));
            let o = &mut out[q][8 * half..8 * half + 8];
            // SAFETY: `o` is 8 u32s, exactly one 256-bit vector; the loads
            // and stores are unaligned.
            unsafe {
                let prev = _mm256_loadu_si256(o.as_ptr() as *const __m256i);
                _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, _mm256_add_epi32(prev, v));
            }
        }
    }
}

/// One query's four `vpmaddwd` + `vpaddd` pairs of [`group_words`] over
/// one half quad (x, y) with the query's four words at `p`. Written as
/// one assembly block because the compiler, given the same intrinsics,
/// reassociates the sums of a loop step into trees and spills the
/// accumulators of a group of 4 to the stack.
///
/// # Safety
/// `p` points to 4 readable `u32`s.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn word_macs(p: *const u32, x: __m256i, y: __m256i, lo: &mut __m256i, hi: &mut __m256i) {
    // SAFETY: the caller's contract; the block reads 16 bytes at `p` and
    // changes only `lo`, `hi` and its scratch register.
    unsafe {
        std::arch::asm!(
            "vpbroadcastd {t}, dword ptr [{p}]",
            "vpmaddwd {t}, {x}, {t}",
            "vpaddd {lo}, {lo}, {t}",
            "vpbroadcastd {t}, dword ptr [{p} + 4]",
            "vpmaddwd {t}, {x}, {t}",
            "vpaddd {hi}, {hi}, {t}",
            "vpbroadcastd {t}, dword ptr [{p} + 8]",
            "vpmaddwd {t}, {y}, {t}",
            "vpaddd {lo}, {lo}, {t}",
            "vpbroadcastd {t}, dword ptr [{p} + 12]",
            "vpmaddwd {t}, {y}, {t}",
            "vpaddd {hi}, {hi}, {t}",
            p = in(reg) p,
            x = in(ymm_reg) x,
            y = in(ymm_reg) y,
            lo = inout(ymm_reg) *lo,
            hi = inout(ymm_reg) *hi,
            t = out(ymm_reg) _,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
}

/// AVX2 `vpmulld` kernel: `Q` queries (4 or 5) over a slice of quads, a
/// whole quad per step and one accumulator per query and half quad. A
/// column's quad is one 32-bit lane D = Σ_x 2^{8x}·b_x with b_x = r_x + 2^7
/// (its 4 records biased into [0, 2^8) by one `vpxor`), and with
/// w_0 = c_0, w_x = c_x − 2^8·c_{x−1} (x = 1, 2, 3; `SplitQuery::dwords`)
///
/// ```text
/// D·w_0 + (D ≫ 8)·w_1 + (D ≫ 16)·w_2 + (D ≫ 24)·w_3 ≡ Σ_x b_x·c_x (mod 2^32)
/// ```
///
/// (logical shifts: the coefficient of b_x telescopes to c_x), which is
/// Σ_x r_x·c_x plus the bias 2^7·Σ_x c_x that `bias[q]` removes once per
/// call. Each broadcast w_x multiplies both halves of the quad (8 columns
/// each), so a step of Q queries takes 4Q broadcasts, 8Q `vpmulld` and 8Q
/// `vpaddd` for 64Q multiply-accumulates, against 8Q broadcasts and two
/// loads of every line for the word kernel over two half passes
/// ([`group_words`]); the 3 shifts of each half are shared by the group.
/// Where `vpmulld` is one µop, as on AMD Zen 4 (as many `vpmulld` +
/// `vpaddd` pairs per second as `vpmaddwd` + `vpaddd`), this is the
/// faster of the two; see `super::avx2_batch`.
///
/// # Safety
/// The caller must have checked that the CPU supports AVX2; `data` holds
/// whole 64-byte quads and every `dwords[q]` 4 words per quad.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn group_mulld<const Q: usize>(
    data: &[u8],
    dwords: [&[u32]; Q],
    bias: [u32; Q],
    ahead: &[u8],
    out: &mut [[u32; 16]; Q],
) {
    let n = data.len() / 64;
    assert!(
        data.len().is_multiple_of(64) && dwords.iter().all(|v| v.len() == 4 * n),
        "slice shape"
    );
    // a line of `ahead` per quad, one pass
    let mut cursor = super::Cursor::new(ahead, n);
    let dp = data.as_ptr();
    let wp = dwords.map(|v| v.as_ptr());
    let flip = _mm256_set1_epi8(0x80u8 as i8);
    let mut acc = [[_mm256_setzero_si256(); 2]; Q];
    for u in 0..n {
        cursor.issue();
        // SAFETY: u < n, so bytes [64u, 64u + 64) are inside `data` and
        // words [4u, 4u + 4) inside every `dwords` slice (asserted
        // above), which `mulld_macs` reads; the loads are unaligned.
        unsafe {
            let at = dp.add(64 * u);
            let d0 = _mm256_xor_si256(_mm256_loadu_si256(at as *const __m256i), flip);
            let d1 = _mm256_xor_si256(_mm256_loadu_si256(at.add(32) as *const __m256i), flip);
            let w = wp.map(|p| p.add(4 * u));
            for (q, [a0, a1]) in acc.iter_mut().enumerate() {
                mulld_macs::<0>(w[q], d0, d1, a0, a1);
            }
            let (s0, s1) = shifted::<8>(d0, d1);
            for (q, [a0, a1]) in acc.iter_mut().enumerate() {
                mulld_macs::<4>(w[q], s0, s1, a0, a1);
            }
            let (s0, s1) = shifted::<16>(d0, d1);
            for (q, [a0, a1]) in acc.iter_mut().enumerate() {
                mulld_macs::<8>(w[q], s0, s1, a0, a1);
            }
            let (s0, s1) = shifted::<24>(d0, d1);
            for (q, [a0, a1]) in acc.iter_mut().enumerate() {
                mulld_macs::<12>(w[q], s0, s1, a0, a1);
            }
        }
    }
    for (q, halves) in acc.iter().enumerate() {
        let b = _mm256_set1_epi32(bias[q] as i32);
        for (half, &a) in halves.iter().enumerate() {
            let o = &mut out[q][8 * half..8 * half + 8];
            // SAFETY: `o` is 8 u32s, exactly one 256-bit vector; the loads
            // and stores are unaligned.
            unsafe {
                let prev = _mm256_loadu_si256(o.as_ptr() as *const __m256i);
                let v = _mm256_add_epi32(prev, _mm256_sub_epi32(a, b));
                _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, v);
            }
        }
    }
}

/// Both halves of a quad shifted right by `S` bits in each 32-bit lane,
/// for [`group_mulld`]: an assembly block, so that the shifts stay
/// between the multiplies that read them (see [`mulld_macs`]).
#[inline]
#[target_feature(enable = "avx2")]
fn shifted<const S: u32>(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    let (x, y);
    // SAFETY: two register-only shifts; no memory is touched.
    unsafe {
        std::arch::asm!(
            "vpsrld {x}, {a}, {s}",
            "vpsrld {y}, {b}, {s}",
            a = in(ymm_reg) a,
            b = in(ymm_reg) b,
            s = const S,
            x = out(ymm_reg) x,
            y = out(ymm_reg) y,
            options(nomem, nostack, preserves_flags),
        );
    }
    (x, y)
}

/// One query's two `vpmulld` + `vpaddd` pairs of [`group_mulld`]: the
/// word at `p + OFF` bytes, broadcast, times both halves (a, b) of a
/// quad's shifted records. One assembly block, as [`word_macs`], and not
/// marked pure, so that the compiler keeps the blocks in program order:
/// with `pure` it hoisted every shift of a step to its start and spilled
/// them to the stack.
///
/// # Safety
/// `p + OFF` bytes points to a readable `u32`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mulld_macs<const OFF: usize>(
    p: *const u32,
    a: __m256i,
    b: __m256i,
    acc0: &mut __m256i,
    acc1: &mut __m256i,
) {
    // SAFETY: the caller's contract; the block reads 4 bytes at
    // `p + OFF` and changes only `acc0`, `acc1` and its scratch
    // registers.
    unsafe {
        std::arch::asm!(
            "vpbroadcastd {t}, dword ptr [{p} + {off}]",
            "vpmulld {u}, {a}, {t}",
            "vpaddd {acc0}, {acc0}, {u}",
            "vpmulld {t}, {b}, {t}",
            "vpaddd {acc1}, {acc1}, {t}",
            p = in(reg) p,
            a = in(ymm_reg) a,
            b = in(ymm_reg) b,
            off = const OFF,
            acc0 = inout(ymm_reg) *acc0,
            acc1 = inout(ymm_reg) *acc1,
            t = out(ymm_reg) _,
            u = out(ymm_reg) _,
            options(readonly, nostack, preserves_flags),
        );
    }
}
