use super::SplitQuery;
use std::arch::x86_64::*;

/// Software prefetch of the 256 bytes `pfd` past `blk` (four cache
/// lines; none when `pfd` is 0). Prefetches are hints: they never fault,
/// whatever the address (the pointer is only offset with `wrapping_add`).
#[inline(always)]
fn prefetch_block(blk: *const u8, pfd: usize) {
    if pfd != 0 {
        let pf = blk.wrapping_add(pfd);
        for line in [0, 64, 128, 192] {
            // SAFETY: a prefetch cannot fault; no memory is accessed.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(line) as *const i8) };
        }
    }
}

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

/// Tile kernel body: the 8 columns of a tile are interleaved in 32-row
/// blocks, so each step reads 256 contiguous bytes.
macro_rules! block_body {
    ($name:ident, $features:literal, $mac:expr) => {
        /// AVX-512 tile kernel (8 columns × 32 rows per step), adding
        /// into `out`.
        ///
        /// # Safety
        /// The caller must have checked the CPU features in the
        /// `target_feature` attribute at runtime; `lo` and `hi` have the
        /// same length, a multiple of 32, and `tile` 8 times as many bytes.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(tile: &[u8], lo: &[i16], hi: &[i16], out: &mut [u32; 8]) {
            let rows = lo.len();
            assert!(hi.len() == rows && rows.is_multiple_of(32) && tile.len() == 8 * rows);
            let base = tile.as_ptr();
            let pfd = super::tune::prefetch_distance();
            let mut acc_lo = [_mm512_setzero_si512(); 8];
            let mut acc_hi = [_mm512_setzero_si512(); 8];
            let mut i = 0;
            while i < rows {
                // SAFETY: i + 32 <= rows, so block i/32 spans bytes
                // [8i, 8i + 256) of the 8·rows-byte tile, and lo/hi hold
                // `rows` entries (asserted above).
                unsafe {
                    let l = _mm512_loadu_si512(lo.as_ptr().add(i) as *const __m512i);
                    let h = _mm512_loadu_si512(hi.as_ptr().add(i) as *const __m512i);
                    let blk = base.add(i * 8);
                    // Software prefetch ahead of the sequential stream
                    // (4 cache lines per step); a hint, it never faults.
                    prefetch_block(blk, pfd);
                    for c in 0..8 {
                        let d = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                            blk.add(c * 32) as *const __m256i
                        ));
                        acc_lo[c] = $mac(acc_lo[c], d, l);
                        acc_hi[c] = $mac(acc_hi[c], d, h);
                    }
                }
                i += 32;
            }
            for c in 0..8 {
                let l = _mm512_reduce_add_epi32(acc_lo[c]) as u32;
                let h = _mm512_reduce_add_epi32(acc_hi[c]) as u32;
                out[c] = out[c].wrapping_add(l.wrapping_add(h << 16));
            }
        }
    };
}

/// AVX-512 VNNI tile kernel on bytes: `vpdpbusd` multiplies 4 unsigned
/// query bytes by 4 signed records and adds the 4 products to a 32-bit
/// lane, so one instruction covers 64 records of one query limb and no
/// sign extension of the records is needed (the `vpdpwssd` kernel
/// widens every record to 16 bits first, and the widening costs as
/// much as a multiply here). With `c1[r] = Σ_k 2^{8k}·u_k[r]`,
/// `Σ_r c1[r]·d[r] = Σ_k 2^{8k}·Σ_r u_k[r]·d[r] mod 2^32`; `vpdpbusd`
/// wraps mod 2^32 (it is the non-saturating form), so the four limb
/// accumulators never need a reduction (YPIR §4.1: q1 = 2^32 is the
/// machine word). A 64-byte load holds columns 2m and 2m + 1 of a
/// 32-row block (lanes 0–7 and 8–15); the block's 32 limb bytes are
/// broadcast to both halves. 16 accumulators + 4 limbs + 1 record
/// vector stay in the 32 zmm registers. The cache lines of `ahead` (the
/// batch's next run, see `panels_with`) are prefetched into L2 an equal
/// number per step.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni at
/// runtime; `tile.len()` is a multiple of 256 and `limbs` holds 128
/// bytes per 256 bytes of tile.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn block_vnni(tile: &[u8], limbs: &[u8], ahead: &[u8], out: &mut [u32; 8]) {
    let blocks = tile.len() / 256;
    let ahead_lines = ahead.len().div_ceil(64);
    let pf_per_block = ahead_lines.div_ceil(blocks.max(1));
    let ap = ahead.as_ptr();
    assert!(tile.len().is_multiple_of(256) && limbs.len() == blocks * super::LIMB_BLOCK);
    let base = tile.as_ptr();
    let pfd = super::tune::prefetch_distance();
    let zero = _mm512_setzero_si512();
    let mut acc = [[zero; 4]; 4];
    for b in 0..blocks {
        // SAFETY: b < blocks, so bytes [256b, 256b + 256) of the tile
        // and [128b, 128b + 128) of the limbs are in bounds (asserted
        // above); 64·line < ahead.len() when line < ahead_lines, so the
        // `ahead` addresses are inside it. The prefetches are hints
        // that never fault.
        unsafe {
            let blk = base.add(b * 256);
            prefetch_block(blk, pfd);
            for t in 0..pf_per_block {
                let line = b * pf_per_block + t;
                if line < ahead_lines {
                    _mm_prefetch::<_MM_HINT_T1>(ap.add(64 * line) as *const i8);
                }
            }
            let lp = limbs.as_ptr().add(b * super::LIMB_BLOCK);
            let u: [__m512i; 4] = std::array::from_fn(|k| {
                _mm512_broadcast_i64x4(_mm256_loadu_si256(lp.add(32 * k) as *const __m256i))
            });
            for (m, a) in acc.iter_mut().enumerate() {
                let d = _mm512_loadu_si512(blk.add(64 * m) as *const __m512i);
                for k in 0..4 {
                    a[k] = _mm512_dpbusd_epi32(a[k], u[k], d);
                }
            }
        }
    }
    // Limbs combined per column pair: v[m] holds column 2m in lanes
    // 0–7 and column 2m + 1 in lanes 8–15.
    let v: [__m512i; 4] = std::array::from_fn(|m| combine_limbs(&acc[m]));
    add_column_sums(v, out);
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

/// Adds the eight column sums of a tile to `out`, where `v[m]` holds the
/// partial sums of column 2m in lanes 0–7 and of column 2m + 1 in lanes
/// 8–15.
///
/// Transposed reduction: these few shuffles and adds replace eight
/// horizontal sums, which cost as much as a tenth of a tile's `vpdpbusd`s
/// (they share its vector pipes). After the two unpack levels, 128-bit
/// lane i of `u` holds [Σ v0, Σ v1, Σ v2, Σ v3] over lanes 4i..4i+3;
/// lanes 0 + 1 then belong to columns 0, 2, 4, 6 and lanes 2 + 3 to
/// columns 1, 3, 5, 7.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn add_column_sums(v: [__m512i; 4], out: &mut [u32; 8]) {
    let t01 = _mm512_add_epi32(
        _mm512_unpacklo_epi32(v[0], v[1]),
        _mm512_unpackhi_epi32(v[0], v[1]),
    );
    let t23 = _mm512_add_epi32(
        _mm512_unpacklo_epi32(v[2], v[3]),
        _mm512_unpackhi_epi32(v[2], v[3]),
    );
    let u = _mm512_add_epi32(
        _mm512_unpacklo_epi64(t01, t23),
        _mm512_unpackhi_epi64(t01, t23),
    );
    let w = _mm512_add_epi32(u, _mm512_shuffle_i64x2::<0b10_11_00_01>(u, u));
    let order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    let sums = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, w));
    // SAFETY: `out` is 8 u32s, exactly one 256-bit vector.
    unsafe {
        let o = _mm256_loadu_si256(out.as_ptr() as *const __m256i);
        _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, _mm256_add_epi32(o, sums));
    }
}

/// [`block_vnni`] for two queries at once: each record vector loaded is
/// multiplied by both queries' limbs, so a batch reads the tile once per
/// pair of queries instead of once per query. Two queries' accumulators
/// for a whole tile (2 × 16) exceed the 32 zmm registers, so the tile is
/// taken in two halves of four columns (column pairs 0–1, then 2–3: 16
/// accumulators, 4 limb and 2 record vectors live); the second half finds
/// the tile in L1 (the first half prefetches its lines, so the memory
/// stream stays sequential). Per 128 bytes of a half: 2 record loads, 8
/// limb broadcasts and 16 `vpdpbusd`, so the loads (1.25 per cycle at two
/// `vpdpbusd` per cycle) stay below the two vector loads a cycle.
///
/// # Safety
/// As for [`block_vnni`]; `la` and `lb` each hold 128 bytes per 256 bytes
/// of tile.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn block_vnni2(
    tile: &[u8],
    la: &[u8],
    lb: &[u8],
    ahead: &[u8],
    out_a: &mut [u32; 8],
    out_b: &mut [u32; 8],
) {
    let blocks = tile.len() / 256;
    assert!(
        tile.len().is_multiple_of(256)
            && la.len() == blocks * super::LIMB_BLOCK
            && lb.len() == blocks * super::LIMB_BLOCK
    );
    let ahead_lines = ahead.len().div_ceil(64);
    let pf_per_block = ahead_lines.div_ceil(2 * blocks.max(1));
    let ap = ahead.as_ptr();
    let base = tile.as_ptr();
    let pfd = super::tune::prefetch_distance();
    let zero = _mm512_setzero_si512();
    let mut first = [[zero; 2]; 2];
    for half in 0..2 {
        // acc[query][column pair of the half][limb]
        let mut acc = [[[zero; 4]; 2]; 2];
        for b in 0..blocks {
            // SAFETY: b < blocks, so bytes [256b, 256b + 256) of the tile
            // and [128b, 128b + 128) of each limb slice are in bounds
            // (asserted above); 64·line < ahead.len() when line <
            // ahead_lines. Prefetches are hints that never fault.
            unsafe {
                let blk = base.add(b * 256);
                if half == 0 {
                    prefetch_block(blk, pfd);
                    // the lines the second half reads, into L1 now
                    _mm_prefetch::<_MM_HINT_T0>(blk.add(128) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(blk.add(192) as *const i8);
                }
                for t in 0..pf_per_block {
                    let line = (half * blocks + b) * pf_per_block + t;
                    if line < ahead_lines {
                        _mm_prefetch::<_MM_HINT_T1>(ap.add(64 * line) as *const i8);
                    }
                }
                let d0 = _mm512_loadu_si512(blk.add(128 * half) as *const __m512i);
                let d1 = _mm512_loadu_si512(blk.add(128 * half + 64) as *const __m512i);
                for (a, l) in acc.iter_mut().zip([la, lb]) {
                    let lp = l.as_ptr().add(b * super::LIMB_BLOCK);
                    for k in 0..4 {
                        let u = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                            lp.add(32 * k) as *const __m256i
                        ));
                        a[0][k] = _mm512_dpbusd_epi32(a[0][k], u, d0);
                        a[1][k] = _mm512_dpbusd_epi32(a[1][k], u, d1);
                    }
                }
            }
        }
        if half == 0 {
            for (f, a) in first.iter_mut().zip(&acc) {
                *f = [combine_limbs(&a[0]), combine_limbs(&a[1])];
            }
        } else {
            for ((f, a), o) in first.iter().zip(&acc).zip([&mut *out_a, &mut *out_b]) {
                let v = [f[0], f[1], combine_limbs(&a[0]), combine_limbs(&a[1])];
                add_column_sums(v, o);
            }
        }
    }
}

block_body!(block_bw, "avx512f,avx512bw", |a, d, q| _mm512_add_epi32(
    a,
    _mm512_madd_epi16(d, q)
));

columns_body!(columns_vnni, "avx512f,avx512bw,avx512vnni", |a, d, q| {
    _mm512_dpwssd_epi32(a, d, q)
});
columns_body!(columns_bw, "avx512f,avx512bw", |a, d, q| _mm512_add_epi32(
    a,
    _mm512_madd_epi16(d, q)
));

/// Transposes one 32-row block of two tiles into the wide layout of a
/// batch (see `panels_wide`): `a` and `b` are the tiles' 256-byte blocks
/// (8 columns × 32 rows each, column-major inside the block), `b` absent
/// for a last, unpaired tile (its columns read as zero). Writes 8 vectors
/// of 64 bytes to `dst`: vector t holds rows 4t..4t+3 of the 16 columns,
/// 4 bytes per column (lane j = column j), each record offset to unsigned
/// (d + 128, i.e. d ^ 0x80) so that it can be `vpdpbusd`'s unsigned
/// operand. Three rounds of `vpermt2d` (8 each) move dwords: pairs of
/// column pairs, then halves of 8 columns, then the two tiles.
///
/// # Safety
/// The caller must have checked avx512f and avx512bw at runtime.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn transpose_pair(a: &[u8; 256], b: Option<&[u8; 256]>, dst: &mut [u8; 512]) {
    // R[m]: dword t = column 2m, rows 4t..4t+3; dword 8 + t = column 2m + 1.
    let mut r = [_mm512_setzero_si512(); 8];
    for (m, v) in r.iter_mut().enumerate().take(4) {
        // SAFETY: m < 4, so the load reads bytes [64m, 64m + 64) of `a`.
        *v = unsafe { _mm512_loadu_si512(a.as_ptr().add(64 * m) as *const __m512i) };
    }
    if let Some(b) = b {
        for (m, v) in r.iter_mut().skip(4).enumerate() {
            // SAFETY: m < 4, so the load reads bytes [64m, 64m + 64) of `b`.
            *v = unsafe { _mm512_loadu_si512(b.as_ptr().add(64 * m) as *const __m512i) };
        }
    }
    // Round 1: columns 4n..4n+3 of row quads 0..3 (lo) and 4..7 (hi),
    // dword 4t' + c = column 4n + c of quad t' (+4 for hi).
    let i1lo = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    let i1hi = _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31);
    let mut s = [[_mm512_setzero_si512(); 2]; 4];
    for (n, sn) in s.iter_mut().enumerate() {
        sn[0] = _mm512_permutex2var_epi32(r[2 * n], i1lo, r[2 * n + 1]);
        sn[1] = _mm512_permutex2var_epi32(r[2 * n], i1hi, r[2 * n + 1]);
    }
    // Round 2: 8 columns (half h) of two quads, dword 8t'' + c;
    // u[h][j] holds quads 2j, 2j + 1 of columns 8h..8h+7.
    let i2a = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    let i2b = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    let mut u = [[_mm512_setzero_si512(); 4]; 2];
    for (h, uh) in u.iter_mut().enumerate() {
        let (x, y) = (s[2 * h], s[2 * h + 1]);
        uh[0] = _mm512_permutex2var_epi32(x[0], i2a, y[0]);
        uh[1] = _mm512_permutex2var_epi32(x[0], i2b, y[0]);
        uh[2] = _mm512_permutex2var_epi32(x[1], i2a, y[1]);
        uh[3] = _mm512_permutex2var_epi32(x[1], i2b, y[1]);
    }
    // Round 3: the 16 columns of one quad.
    let i3e = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    let i3o = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    let bias = _mm512_set1_epi8(-128);
    for t in 0..8 {
        let idx = if t % 2 == 0 { i3e } else { i3o };
        let v = _mm512_permutex2var_epi32(u[0][t / 2], idx, u[1][t / 2]);
        let v = _mm512_xor_si512(v, bias);
        // SAFETY: t < 8, so the store covers bytes [64t, 64t + 64) of the
        // 512-byte `dst`.
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().add(64 * t) as *mut __m512i, v) };
    }
}

/// The batch kernel of the wide layout: `Q` queries (1 ≤ Q ≤ 5) over a
/// slice of transposed rows ([`transpose_pair`]'s vectors, one per 4 rows
/// × 16 columns). Each query's c1 is split into four signed
/// byte digits, `c1[r] = Σ_k 2^{8k}·s_k[r] mod 2^32`, stored per 4-row
/// quad as 16 bytes (`quads[q]`: digit k of rows 4i..4i+3 at 16i + 4k),
/// so one `vpdpbusd` with an embedded `{1to16}` broadcast of those 4
/// bytes multiplies a quad of all 16 columns by one digit: each 64-byte
/// record vector feeds 4·Q `vpdpbusd` from 4·Q accumulators (20 at
/// Q = 5, beside the record vector, within the 32 zmm registers). As the
/// records are offset by +128, `Σ_k 2^{8k}·Σ_r s_k[r]·(d[r] + 128)` =
/// `Σ_r c1[r]·d[r] + 128·Σ_r c1[r]`, and the caller's `corr[q]` (128 ×
/// that slice's Σ c1, mod 2^32) is subtracted. Adds the 16 column sums
/// to `out[q]`; prefetches the lines of both `ahead` spans into L2,
/// spread over the quads.
///
/// # Safety
/// The caller must have checked avx512f, avx512bw and avx512vnni at
/// runtime; `scratch` holds 64·n bytes and every `quads[q]` 16·n bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn group_vnni<const Q: usize>(
    scratch: &[u8],
    quads: [&[u8]; Q],
    corr: [u32; Q],
    ahead: [&[u8]; 2],
    out: &mut [[u32; 16]; Q],
) {
    let n = scratch.len() / 64;
    assert!(quads.iter().all(|q| q.len() == 16 * n));
    let ahead_lines = ahead[0].len().max(ahead[1].len()).div_ceil(64);
    // one line of each span every `step` quads: spread evenly, as a burst
    // would fill the miss buffers and stall the loads
    let step = n.div_ceil(ahead_lines.max(1)).max(1);
    let zero = _mm512_setzero_si512();
    let mut acc = [[zero; 4]; Q];
    let sp = scratch.as_ptr();
    let qp: [*const u8; Q] = quads.map(|q| q.as_ptr());
    let mut i0 = 0;
    let mut line = 0;
    while i0 < n {
        for span in ahead {
            if 64 * line < span.len() {
                // SAFETY: a prefetch is a hint that never faults; the
                // address is inside `span` anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(span.as_ptr().add(64 * line) as *const i8) };
            }
        }
        line += 1;
        for i in i0..(i0 + step).min(n) {
            // SAFETY: i < n, so bytes [64i, 64i + 64) of the scratch and
            // [16i, 16i + 16) of every quads slice are in bounds
            // (asserted above).
            unsafe {
                let d = _mm512_loadu_si512(sp.add(64 * i) as *const __m512i);
                for q in 0..Q {
                    for (k, a) in acc[q].iter_mut().enumerate() {
                        let s = (qp[q].add(16 * i + 4 * k) as *const i32).read_unaligned();
                        *a = _mm512_dpbusd_epi32(*a, d, _mm512_set1_epi32(s));
                    }
                }
            }
        }
        i0 += step;
    }
    for ((a, c), o) in acc.iter().zip(corr).zip(out.iter_mut()) {
        let v = _mm512_sub_epi32(combine_limbs(a), _mm512_set1_epi32(c as i32));
        // SAFETY: `o` is 16 u32s, exactly one 512-bit vector.
        unsafe {
            let p = o.as_mut_ptr() as *mut __m512i;
            _mm512_storeu_si512(p, _mm512_add_epi32(_mm512_loadu_si512(p), v));
        }
    }
}
