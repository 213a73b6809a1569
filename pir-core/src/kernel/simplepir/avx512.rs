use super::SplitQuery;
use std::arch::x86_64::*;

/// Columns processed together: the lo/hi query loads are shared by all.
const NC: usize = 8;

/// The kernel body, instantiated once per feature set so that the
/// non-VNNI variant never contains VNNI instructions.
macro_rules! columns_body {
    ($name:ident, $features:literal, $mac:expr) => {
        /// AVX-512 kernel: NC columns at a time, 32 rows per step.
        ///
        /// # Safety
        /// The caller must have checked the CPU features in the
        /// `target_feature` attribute at runtime.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(
            db: &[u8],
            ell1: usize,
            j0: usize,
            j1: usize,
            q: &SplitQuery,
            out: &mut [u32],
        ) {
            let n32 = ell1 / 32 * 32;
            let lo = q.lo.as_ptr();
            let hi = q.hi.as_ptr();
            let mut j = j0;
            while j < j1 {
                let nc = (j1 - j).min(NC);
                let mut acc_lo = [_mm512_setzero_si512(); NC];
                let mut acc_hi = [_mm512_setzero_si512(); NC];
                let base = db.as_ptr().wrapping_add(j * ell1);
                let mut i = 0;
                while i < n32 {
                    // SAFETY: i + 32 <= n32 <= ell1 and c < nc <= j1 - j,
                    // so each 32-byte load reads column j + c inside `db`;
                    // lo/hi hold at least n32 entries (padded to 64).
                    unsafe {
                        let l = _mm512_loadu_si512(lo.add(i) as *const __m512i);
                        let h = _mm512_loadu_si512(hi.add(i) as *const __m512i);
                        for c in 0..nc {
                            let d = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                base.add(c * ell1 + i) as *const __m256i,
                            ));
                            acc_lo[c] = $mac(acc_lo[c], d, l);
                            acc_hi[c] = $mac(acc_hi[c], d, h);
                        }
                    }
                    i += 32;
                }
                for c in 0..nc {
                    let mut l = _mm512_reduce_add_epi32(acc_lo[c]) as u32;
                    let mut h = _mm512_reduce_add_epi32(acc_hi[c]) as u32;
                    let col = &db[(j + c) * ell1..(j + c + 1) * ell1];
                    for (r, &d) in col.iter().enumerate().skip(n32) {
                        let d = d as i8 as i32;
                        l = l.wrapping_add((q.lo[r] as i32 * d) as u32);
                        h = h.wrapping_add((q.hi[r] as i32 * d) as u32);
                    }
                    out[j - j0 + c] = l.wrapping_add(h << 16);
                }
                j += nc;
            }
        }
    };
}

/// `Σ_k 2^{8k}·a[k]` lane by lane (mod 2^32): one column pair's limb
/// accumulators combined.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn combine_limbs(a: &[__m512i; 4]) -> __m512i {
    _mm512_add_epi32(
        _mm512_add_epi32(a[0], _mm512_slli_epi32::<8>(a[1])),
        _mm512_add_epi32(_mm512_slli_epi32::<16>(a[2]), _mm512_slli_epi32::<24>(a[3])),
    )
}

/// AVX-512BW slice kernel (one query): a quad is taken in two halves of
/// 8 columns (32 bytes), each widened by `vpmovsxbw` so that 32-bit lane
/// m holds rows 2(m mod 2), +1 of column ⌊m/2⌋, and multiplied with
/// `vpmaddwd` by the query's lo and hi entries of the quad's 4 rows,
/// broadcast as one 64-bit word (4 accumulators). Adds the 16 column sums
/// to `out`; prefetches the lines of `ahead` into L2, spread over the
/// loop.
///
/// # Safety
/// The caller must have checked avx512f and avx512bw at runtime; `data`
/// holds whole 64-byte quads and `lo`, `hi` 4 entries per quad.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn slice_bw(
    data: &[u8],
    lo: &[i16],
    hi: &[i16],
    ahead: &[u8],
    out: &mut [u32; 16],
) {
    let n = data.len() / 64;
    assert!(
        data.len().is_multiple_of(64) && lo.len() == 4 * n && hi.len() == 4 * n,
        "slice shape"
    );
    let mut spread = super::Spread::new(ahead.len(), n);
    let dp = data.as_ptr();
    let mut acc_lo = [_mm512_setzero_si512(); 2];
    let mut acc_hi = [_mm512_setzero_si512(); 2];
    for t in 0..n {
        spread.issue(ahead);
        // SAFETY: t < n, so bytes [64t, 64t + 64) are inside `data` and
        // entries [4t, 4t + 4) inside `lo` and `hi` (asserted above).
        unsafe {
            let l = _mm512_set1_epi64((lo.as_ptr().add(4 * t) as *const i64).read_unaligned());
            let h = _mm512_set1_epi64((hi.as_ptr().add(4 * t) as *const i64).read_unaligned());
            for half in 0..2 {
                let d = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                    dp.add(64 * t + 32 * half) as *const __m256i
                ));
                acc_lo[half] = _mm512_add_epi32(acc_lo[half], _mm512_madd_epi16(d, l));
                acc_hi[half] = _mm512_add_epi32(acc_hi[half], _mm512_madd_epi16(d, h));
            }
        }
    }
    // Σ_r (lo·d + 2^16·hi·d); lanes 2c and 2c + 1 of half h belong to
    // column 8h + c: one pairwise add of the two halves' lanes leaves the
    // 16 column sums in order.
    let v: [__m512i; 2] =
        std::array::from_fn(|h| _mm512_add_epi32(acc_lo[h], _mm512_slli_epi32::<16>(acc_hi[h])));
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let sums = _mm512_add_epi32(
        _mm512_permutex2var_epi32(v[0], even, v[1]),
        _mm512_permutex2var_epi32(v[0], odd, v[1]),
    );
    // SAFETY: `out` is 16 u32s, exactly one 512-bit vector.
    unsafe {
        let p = out.as_mut_ptr() as *mut __m512i;
        _mm512_storeu_si512(p, _mm512_add_epi32(_mm512_loadu_si512(p), sums));
    }
}

/// Quads [`group_vnni`] loads ahead of the one it multiplies: the
/// multiplies of a quad then never wait in the scheduler for its load
/// from L2, where they would stall the prefetches issued between them.
const PIPE: usize = 4;

/// The `vpdpbusd` slice kernel: `Q` queries (1 ≤ Q ≤ 5) over a slice of
/// quads (4 rows × 16 columns, one column per 32-bit lane: see
/// [`crate::db`]). With `c1[r] = Σ_k 2^{8k}·u_k[r]` (the bytes of c1),
/// `Σ_r c1[r]·d[r] = Σ_k 2^{8k}·Σ_r u_k[r]·d[r] mod 2^32`; one
/// `vpdpbusd` multiplies a quad (the signed records, all 16 columns) by
/// digit k of its 4 rows (4 unsigned bytes broadcast to every lane) and
/// adds each column's 4 products to its lane. It wraps mod 2^32 (the
/// non-saturating form), so the 4·Q digit accumulators never need a
/// reduction (YPIR §4.1: q1 = 2^32 is the machine word). Each quad is
/// loaded once and feeds 4·Q `vpdpbusd` (20 accumulators at Q = 5, within
/// the 32 zmm registers); it is loaded [`PIPE`] quads ahead, one line at a
/// time between the multiplies. Quad i goes to accumulator set i mod `U`
/// (U = 2 for Q ≤ 2, so that 8 chains hide the `vpdpbusd` latency). Adds
/// the 16 column sums to `out[q]`; prefetches the lines of `ahead` into
/// L2, spread over the loop.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni at
/// runtime; `data` holds whole quads, a positive multiple of [`PIPE`] of
/// them, and every `digits[q]` 16 bytes per quad.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn group_vnni<const Q: usize, const U: usize>(
    data: &[u8],
    digits: [&[u8]; Q],
    ahead: &[u8],
    out: &mut [[u32; 16]; Q],
) {
    let n = data.len() / 64;
    assert!(
        data.len().is_multiple_of(64)
            && n >= PIPE
            && n.is_multiple_of(PIPE)
            && PIPE.is_multiple_of(U)
            && digits.iter().all(|d| d.len() == 16 * n),
        "slice shape"
    );
    let mut spread = super::Spread::new(ahead.len(), n / PIPE);
    let zero = _mm512_setzero_si512();
    let mut acc = [[[zero; 4]; Q]; U];
    let dp = data.as_ptr();
    let qp: [*const u8; Q] = digits.map(|d| d.as_ptr());
    // SAFETY: n ≥ PIPE (asserted above), so quads 0..PIPE are in `data`.
    let mut pipe: [__m512i; PIPE] =
        std::array::from_fn(|j| unsafe { _mm512_loadu_si512(dp.add(64 * j) as *const __m512i) });
    // the PIPE quads from quad i, loading the next PIPE quads when `$load`
    // (every step but the last, so that no load needs a bound check)
    macro_rules! step {
        ($i:expr, $load:expr) => {{
            let i = $i;
            spread.issue(ahead);
            for (j, d) in pipe.iter_mut().enumerate() {
                let quad = *d;
                // SAFETY: i + j < n, so bytes [64(i+j), +64) of `data` and
                // [16(i+j), +16) of every digit slice are in bounds; the
                // quad PIPE ahead is loaded only when i + PIPE < n, so
                // i + j + PIPE < n (n a multiple of PIPE, asserted above).
                unsafe {
                    if $load {
                        *d = _mm512_loadu_si512(dp.add(64 * (i + j + PIPE)) as *const __m512i);
                    }
                    for (q, a) in acc[j % U].iter_mut().enumerate() {
                        for (k, a) in a.iter_mut().enumerate() {
                            let s =
                                (qp[q].add(16 * (i + j) + 4 * k) as *const i32).read_unaligned();
                            *a = _mm512_dpbusd_epi32(*a, _mm512_set1_epi32(s), quad);
                        }
                    }
                }
            }
        }};
    }
    let mut i = 0;
    while i + PIPE < n {
        step!(i, true);
        i += PIPE;
    }
    step!(i, false);
    for (q, o) in out.iter_mut().enumerate() {
        let mut v = combine_limbs(&acc[0][q]);
        for a in acc.iter().skip(1) {
            v = _mm512_add_epi32(v, combine_limbs(&a[q]));
        }
        // SAFETY: `o` is 16 u32s, exactly one 512-bit vector.
        unsafe {
            let p = o.as_mut_ptr() as *mut __m512i;
            _mm512_storeu_si512(p, _mm512_add_epi32(_mm512_loadu_si512(p), v));
        }
    }
}

/// The `vpdpbusd` kernel of a single query over a run of whole tiles of
/// one panel (`data`, each tile `digits.len() / 16` quads; `digits` the
/// query's digits of the panel's rows, 16 bytes per quad as for
/// [`group_vnni`]): adds each tile's 16 column sums to its 16 words of
/// `out`. Each quad feeds 4 `vpdpbusd`, one per digit, into two sets of
/// 4 accumulators (8 chains hide the latency).
///
/// One query needs 4 `vpdpbusd` per 64 bytes, half the time a core's
/// memory stream takes to deliver them, so the pass is bound by the
/// stream alone, and what it needs is that nothing interrupts it: the
/// whole run goes through one loop, not one call per tile (each call
/// leaves a bubble in the stream), and the software prefetch is two
/// lines at the start of each 4 KiB page, `ahead` bytes on (0: none),
/// which restarts the hardware streamer where a page boundary stops it
/// (a prefetch of every line, as [`Spread`](super::Spread) issues it,
/// takes load slots and miss buffers the stream needs).
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni at
/// runtime; `digits` holds 16 bytes for each of an even, positive number
/// n of quads, `data` whole tiles of n quads, and `out` 16 words per tile.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn run_vnni(data: &[u8], digits: &[u8], ahead: usize, out: &mut [u32]) {
    let n = digits.len() / 16;
    assert!(
        n >= 2
            && n.is_multiple_of(2)
            && digits.len() == 16 * n
            && data.len().is_multiple_of(64 * n)
            && out.len() == 16 * (data.len() / (64 * n)),
        "run shape"
    );
    let qp = digits.as_ptr();
    for (tile, o) in data.chunks_exact(64 * n).zip(out.chunks_exact_mut(16)) {
        let dp = tile.as_ptr();
        let zero = _mm512_setzero_si512();
        let mut acc = [[zero; 4]; 2];
        let mut t = 0;
        while t < n {
            if ahead > 0 {
                // a page `ahead` bytes on that starts within this step's
                // 128 bytes: its first two lines
                crate::mem::prefetch_page_starts(dp.wrapping_add(64 * t), 128, ahead);
            }
            for (u, a) in acc.iter_mut().enumerate() {
                // SAFETY: t + u < n (t even, n even), so bytes
                // [64(t+u), +64) of the tile and [16(t+u), +16) of
                // `digits` are in bounds (asserted above).
                unsafe {
                    let quad = _mm512_loadu_si512(dp.add(64 * (t + u)) as *const __m512i);
                    for (k, a) in a.iter_mut().enumerate() {
                        let s = (qp.add(16 * (t + u) + 4 * k) as *const i32).read_unaligned();
                        *a = _mm512_dpbusd_epi32(*a, _mm512_set1_epi32(s), quad);
                    }
                }
            }
            t += 2;
        }
        let v = _mm512_add_epi32(combine_limbs(&acc[0]), combine_limbs(&acc[1]));
        // SAFETY: `o` is 16 u32s, exactly one 512-bit vector.
        unsafe {
            let p = o.as_mut_ptr() as *mut __m512i;
            _mm512_storeu_si512(p, _mm512_add_epi32(_mm512_loadu_si512(p), v));
        }
    }
}

columns_body!(columns_vnni, "avx512f,avx512bw,avx512vnni", |a, d, q| {
    _mm512_dpwssd_epi32(a, d, q)
});
columns_body!(columns_bw, "avx512f,avx512bw", |a, d, q| _mm512_add_epi32(
    a,
    _mm512_madd_epi16(d, q)
));

/// Quads [`pair_vnni`] loads ahead of the pair it multiplies.
pub(super) const PAIR_PIPE: usize = 2;

/// `prefetcht0` of the line at `p`, whatever the address. A plain
/// function, so that the call needs its `unsafe` block on every supported
/// toolchain (inside a `target_feature` function newer ones call it safe,
/// the MSRV does not).
#[inline(always)]
fn stage_l1(p: *const u8) {
    // SAFETY: a prefetch is a hint; it cannot fault or change memory,
    // whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
}

/// Quads ahead of the pair it multiplies that [`pair_vnni`] stages into
/// L1 (`prefetcht0`, both tiles) when it is the first group over a slice
/// and so reads the slice from L2: the loads [`PAIR_PIPE`] ahead then
/// find their lines in L1. The pipe cannot simply be longer: a group of
/// 3 holds 24 accumulators and 2 × [`PAIR_PIPE`] quads in the 32 zmm
/// registers.
const STAGE_AHEAD: usize = 16;

/// [`group_vnni`] over the same rows of two tiles at once (`data[0]`,
/// `data[1]`, the slices of two neighbouring tiles): each broadcast digit
/// of a query feeds two `vpdpbusd`, one per tile. A quad pair then costs
/// 4Q + 2 loads for 8Q multiplies (Q = 3: 14 for 24) against 4Q + 1 for
/// 4Q with one tile (21 for 20 at Q = 5). In L1 both run near the
/// `vpdpbusd` peak, but with a load per multiply the one-tile kernel has
/// no load slot to spare for what the pass adds: the first group's loads
/// from L2, the digits of a large batch from L2, and the prefetches.
/// `Q` ≤ 3: 8Q accumulators and the pipe in the 32 zmm registers. The
/// lines of `ahead` are prefetched into L2 one per quad pair
/// ([`super::Cursor`]) when `C`, else spread over the loop
/// ([`super::Spread`]); when `S`, the slices are also staged into L1
/// [`STAGE_AHEAD`] quads ahead.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni at
/// runtime; both slices hold the same whole number of quads, a positive
/// multiple of [`PAIR_PIPE`], and every `digits[q]` 16 bytes per quad.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn pair_vnni<const Q: usize, const C: bool, const S: bool>(
    data: [&[u8]; 2],
    digits: [&[u8]; Q],
    ahead: &[u8],
    out: &mut [[[u32; 16]; 2]; Q],
) {
    let n = data[0].len() / 64;
    assert!(
        data[0].len().is_multiple_of(64)
            && data[1].len() == data[0].len()
            && n >= PAIR_PIPE
            && n.is_multiple_of(PAIR_PIPE)
            && digits.iter().all(|d| d.len() == 16 * n),
        "slice shape"
    );
    let per = ahead.len().div_ceil(64).div_ceil(n).max(1);
    let mut cursor = super::Cursor::new(if C { ahead } else { &ahead[..0] }, n * per);
    let mut spread = super::Spread::new(if C { 0 } else { ahead.len() }, n / PAIR_PIPE);
    let zero = _mm512_setzero_si512();
    let mut acc = [[[zero; 4]; Q]; 2];
    let dp = data.map(|d| d.as_ptr());
    let qp: [*const u8; Q] = digits.map(|d| d.as_ptr());
    let mut pipe: [[__m512i; 2]; PAIR_PIPE] = std::array::from_fn(|j| {
        std::array::from_fn(|t| {
            // SAFETY: n ≥ PAIR_PIPE (asserted above), so quads
            // 0..PAIR_PIPE are in both slices.
            unsafe { _mm512_loadu_si512(dp[t].add(64 * j) as *const __m512i) }
        })
    });
    macro_rules! step {
        ($i:expr, $load:expr) => {{
            let i = $i;
            if !C {
                spread.issue(ahead);
            }
            for (j, pair) in pipe.iter_mut().enumerate() {
                if C {
                    for _ in 0..per {
                        cursor.issue();
                    }
                }
                let quads = *pair;
                if S {
                    for p in dp {
                        // past the slice's end this names the next bytes
                        // of the database (the tile's next slice), hence
                        // `wrapping_add`
                        stage_l1(p.wrapping_add(64 * (i + j + STAGE_AHEAD)));
                    }
                }
                // SAFETY: i + j < n, so bytes [64(i+j), +64) of both slices
                // and [16(i+j), +16) of every digit slice are in bounds;
                // the pair PAIR_PIPE ahead is loaded only when
                // i + PAIR_PIPE < n (n a multiple of PAIR_PIPE).
                unsafe {
                    if $load {
                        for (t, d) in pair.iter_mut().enumerate() {
                            *d = _mm512_loadu_si512(
                                dp[t].add(64 * (i + j + PAIR_PIPE)) as *const __m512i
                            );
                        }
                    }
                    for q in 0..Q {
                        for k in 0..4 {
                            let s =
                                (qp[q].add(16 * (i + j) + 4 * k) as *const i32).read_unaligned();
                            let b = _mm512_set1_epi32(s);
                            acc[0][q][k] = _mm512_dpbusd_epi32(acc[0][q][k], b, quads[0]);
                            acc[1][q][k] = _mm512_dpbusd_epi32(acc[1][q][k], b, quads[1]);
                        }
                    }
                }
            }
        }};
    }
    let mut i = 0;
    while i + PAIR_PIPE < n {
        step!(i, true);
        i += PAIR_PIPE;
    }
    step!(i, false);
    for (q, o) in out.iter_mut().enumerate() {
        for (t, o) in o.iter_mut().enumerate() {
            let v = combine_limbs(&acc[t][q]);
            // SAFETY: `o` is 16 u32s, exactly one 512-bit vector.
            unsafe {
                let p = o.as_mut_ptr() as *mut __m512i;
                _mm512_storeu_si512(p, _mm512_add_epi32(_mm512_loadu_si512(p), v));
            }
        }
    }
}
