//! Rounding and chunk packing of A1·D columns into the hint's digits
//! (App. B; see `server::ChunkPlan`): eight chunks of a planned packing at a
//! time ([`pack_groups`]), and whole 32-column chunks of the hint written in
//! place ([`pack_columns`]); scalar twins here, both SIMD widths in `simd`.

#[cfg(target_arch = "x86_64")]
use super::{simd_width, Simd};
use crate::digits::RowStride;

#[cfg(target_arch = "x86_64")]
mod simd;

#[cfg(test)]
mod tests;

/// One chunk of a planned column packing: the `pb` bits at `off` of the
/// window `lo | hi·2^w`, sign-extended to [−2^(pb−1), 2^(pb−1)) (the
/// scalar step every packer shares; `off < w < 32`, `pb ≤ 16`).
#[inline]
pub(crate) fn window_chunk(lo: u32, hi: u32, w: u32, off: u32, pb: u32) -> i16 {
    let sh = 64 - pb;
    let win = u64::from(lo) | u64::from(hi) << w;
    (((win >> off) << sh) as i64 >> sh) as i16
}

/// Eight consecutive chunks of a planned column packing (App. B; see
/// `server::ChunkPlan`): chunk t's bits start in rounded value
/// `base + idx[t]` at bit `off[t]` of the window `r[i] | r[i+1]·2^w`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackGroup {
    /// Lanes 0..8: value index of chunk t relative to `base`; lanes 8..16:
    /// the same plus one (the window's upper value).
    pub(crate) idx: [u32; 16],
    /// Bit offset of chunk t in its window (< w).
    pub(crate) off: [u64; 8],
    /// Index of the group's first value.
    pub(crate) base: u32,
}

/// Writes chunk t of group g — the `pb` bits at `off` of the window
/// `r[i] | r[i+1]·2^w`, sign-extended to [−2^(pb−1), 2^(pb−1)) — to
/// `out[(8g + t)·stride]`. Runtime-dispatched: AVX-512F (one permute gathers
/// the 16 window values of a group, 64-bit variable shifts extract the eight
/// chunks) or AVX2 (two permutes and a blend per half of the window, 32-bit
/// variable shifts), with [`pack_groups_scalar`] as the twin.
///
/// # Panics
/// If `r` holds fewer than `base + 16` values for some group, an index is
/// ≥ 16, an offset is ≥ w, or `out` is too short (caller bugs: the plan is
/// built from the parameters).
pub(crate) fn pack_groups(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    assert!((1..=32).contains(&w) && (1..=16).contains(&pb) && stride >= 1);
    assert!(groups.iter().all(|g| g.idx.iter().all(|&i| i < 16)
        && g.off.iter().all(|&o| o < u64::from(w))
        && r.len() >= g.base as usize + 16));
    assert!(groups.is_empty() || out.len() > (8 * groups.len() - 1) * stride);
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; the bounds the loads
                // and stores rely on are asserted above.
                unsafe { simd::groups512(r, groups, w, pb, out, stride) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; the bounds the loads and
                // stores rely on, and off < w, are asserted above.
                unsafe { simd::groups256(r, groups, w, pb, out, stride) };
                return;
            }
            Simd::None => {}
        }
    }
    pack_groups_scalar(r, groups, w, pb, out, stride);
}

/// Scalar twin of [`pack_groups`].
fn pack_groups_scalar(
    r: &[u32],
    groups: &[PackGroup],
    w: u32,
    pb: u32,
    out: &mut [i16],
    stride: usize,
) {
    for (g, grp) in groups.iter().enumerate() {
        for t in 0..8 {
            let i = grp.base as usize + grp.idx[t] as usize;
            out[(8 * g + t) * stride] = window_chunk(r[i], r[i + 1], w, grp.off[t] as u32, pb);
        }
    }
}

/// Most columns [`pack_columns`] takes: one 32-column chunk of the hint's
/// storage (a row's 32 digits are one 64-byte line there).
pub(crate) const PACK_COLS_MAX: usize = 32;

/// Rounds 8·G columns of A1·D (G = 1..=4) from 2^32 to 2^w and packs each
/// into `starts.len()` chunks of `pb` bits (App. B; see
/// `server::ChunkPlan`): chunk k of column c — the `pb` bits at `off_k` of
/// the window `r[i_k] | r[i_k+1]·2^w`, sign-extended — goes to
/// `out[stride.at(k) + c]`. Eight columns at a time make each chunk index
/// one 16-byte store instead of eight 2-byte stores eight rows apart; all
/// 32 columns of a hint chunk at once make each row's stores fill its
/// 64-byte line before the next row's (eight at a time, each line would
/// be written in four visits a full pass over the rows apart, and the
/// lines, a multiple of 4 KiB apart, evicted in between).
/// `scratch` holds each group's rounded values interleaved (value i of
/// column 8g + c at g·8(n + 1) + 8i + c). Runtime-dispatched: AVX-512F or
/// AVX2, with `pack_columns_scalar` (tests) as the twin.
///
/// # Panics
/// If `cols.len()` is not 8, 16, 24 or 32, the columns differ in length, a
/// window reads past the last value + 1, `w ∉ [1, 32)`, `pb ∉ [1, 16]`,
/// rows of `stride` overlap (`row < cols.len()` or
/// `quad < 3·row + cols.len()`), or `out` is too short (caller bugs).
pub(crate) fn pack_columns(
    cols: &[&[u32]],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    scratch: &mut Vec<u32>,
    out: &mut [i16],
    stride: RowStride,
) {
    let width = cols.len();
    assert!(width.is_multiple_of(8) && (8..=PACK_COLS_MAX).contains(&width));
    let n = cols[0].len();
    assert!(cols.iter().all(|c| c.len() == n));
    assert!((1..32).contains(&w) && (1..=16).contains(&pb));
    // (rows do not overlap, and the last row is the furthest)
    assert!(stride.row >= width && stride.quad >= 3 * stride.row + width);
    assert!(starts
        .iter()
        .all(|&(i, off)| (i as usize) < n.max(1) && off < w));
    assert!(starts.is_empty() || out.len() >= stride.at(starts.len() - 1) + width);
    // interleave and round each group, plus one zero row for the last
    // window (every other word is written below: no need to clear the rest)
    let len = 8 * (n + 1);
    if scratch.len() != width / 8 * len {
        scratch.clear();
        scratch.resize(width / 8 * len, 0);
    }
    let (shift, half) = (32 - w, 1u32 << (31 - w));
    for (group, r) in cols.chunks_exact(8).zip(scratch.chunks_exact_mut(len)) {
        let group: [&[u32]; 8] = std::array::from_fn(|c| group[c]);
        r[8 * n..].fill(0);
        #[cfg(target_arch = "x86_64")]
        let from = if simd_width() != Simd::None {
            // SAFETY: avx2 detected (any SIMD selection implies it); the
            // columns have n values each and r holds 8(n + 1).
            unsafe { simd::interleave_round8(group, w, r) }
        } else {
            0
        };
        #[cfg(not(target_arch = "x86_64"))]
        let from = 0;
        for (c, col) in group.iter().enumerate() {
            for (i, &h) in col.iter().enumerate().skip(from) {
                // round_pow2 from q1 = 2^32: the carry out of bit 31 is
                // the wrap-around mod 2^w
                r[8 * i + c] = h.wrapping_add(half) >> shift;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        match simd_width() {
            Simd::Avx512 => {
                // SAFETY: avx512f detected at runtime; every window row
                // i + 1 ≤ n of every group is inside `scratch` (width/8
                // runs of 8(n + 1) values) and every store inside `out`
                // (asserted above).
                unsafe { simd::columns8_512(scratch, len, w, pb, starts, out, stride) };
                return;
            }
            Simd::Avx2 => {
                // SAFETY: avx2 detected at runtime; bounds and off < w as
                // for the AVX-512 kernel (asserted above).
                unsafe { simd::columns8_256(scratch, len, w, pb, starts, out, stride) };
                return;
            }
            Simd::None => {}
        }
    }
    pack_columns_chunks(scratch, len, w, pb, starts, out, stride);
}

/// Scalar twin of [`pack_columns`] (rounding included).
#[cfg(test)]
fn pack_columns_scalar(
    cols: &[&[u32]],
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: RowStride,
) {
    let n = cols[0].len();
    let len = 8 * (n + 1);
    let mut r = vec![0u32; cols.len() / 8 * len];
    for (g, group) in cols.chunks(8).enumerate() {
        for (c, col) in group.iter().enumerate() {
            for (i, &h) in col.iter().enumerate() {
                r[g * len + 8 * i + c] = crate::arith::round_pow2(u64::from(h), 32, w) as u32;
            }
        }
    }
    pack_columns_chunks(&r, len, w, pb, starts, out, stride);
}

/// The chunk step of [`pack_columns`] on interleaved rounded values: group
/// g's values at `r[g·len..]`, len = 8(n + 1).
fn pack_columns_chunks(
    r: &[u32],
    len: usize,
    w: u32,
    pb: u32,
    starts: &[(u32, u32)],
    out: &mut [i16],
    stride: RowStride,
) {
    for (k, &(i, off)) in starts.iter().enumerate() {
        let i = i as usize;
        for (g, r) in r.chunks_exact(len).enumerate() {
            for c in 0..8 {
                let v = window_chunk(r[8 * i + c], r[8 * (i + 1) + c], w, off, pb);
                out[stride.at(k) + 8 * g + c] = v;
            }
        }
    }
}
