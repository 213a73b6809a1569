//! Rounding and chunk packing of the hint's columns (App. B): a column of
//! ⌊A1·D⌉_{q1,q̃1} becomes K_H = ⌈d1·log q̃1 / log p⌉ signed chunks of
//! log p bits ([`ChunkPlan`]), for DBSetup and for an update's touched
//! columns; the client unpacks them ([`unpack_chunks`]) and the answer
//! splits T into κ base-p digits ([`t_digits`]).

use crate::arith::round_pow2;
use crate::digits::{ColumnBlockMut, CHUNK_COLS};
use crate::kernel;
use crate::params::{Params, LOG_Q1};

/// Signed representative of a log p-bit chunk.
#[inline]
fn chunk_signed(c: u32, p_bits: u32) -> i16 {
    let p = 1i32 << p_bits;
    let c = c as i32;
    (if c >= p / 2 { c - p } else { c }) as i16
}

/// Packs `vals` (each `w` bits) into chunks of `pb` bits, LSB first, as one
/// bit stream: the reference for [`ChunkPlan`] and its fallback for widths
/// it does not plan.
pub(super) fn pack_chunks(vals: &[u32], w: u32, pb: u32, out: &mut [i16]) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    let mut k = 0;
    let mask = (1u64 << pb) - 1;
    for &v in vals {
        acc |= (v as u64) << nbits;
        nbits += w;
        while nbits >= pb {
            out[k] = chunk_signed((acc & mask) as u32, pb);
            k += 1;
            acc >>= pb;
            nbits -= pb;
        }
    }
    if nbits > 0 {
        out[k] = chunk_signed((acc & mask) as u32, pb);
        k += 1;
    }
    debug_assert_eq!(k, out.len());
}

/// Rounding and chunk packing of columns of A1·D (App. B: a column of
/// ⌊A1·D⌉_{q1,q̃1} becomes K_H = ⌈d1·log q̃1 / log p⌉ chunks of log p bits),
/// planned once per parameter set. This runs for every column at DBSetup
/// and for every dirty column at an update.
///
/// When a chunk is no wider than a value (log p ≤ log q̃1; Table 1: 15 ≤ 28)
/// every chunk lies inside two consecutive rounded values, so chunk k is
/// read straight out of the 64-bit window `r[i] | r[i+1]·2^log q̃1` at the
/// planned offset: iterations are independent and branch-free (the
/// bit-stream loop of [`pack_chunks`] mispredicts its refill branch).
pub(crate) struct ChunkPlan {
    /// log q̃1: width of a rounded value.
    w: u32,
    /// log p: width of a chunk.
    pb: u32,
    /// d1: values per column.
    d1: usize,
    /// Per chunk k: (i, off) with k·log p = i·log q̃1 + off, off < log q̃1.
    /// Empty when log p > log q̃1: [`pack_chunks`] runs instead.
    starts: Vec<(u32, u32)>,
    /// The same, eight chunks at a time, for [`kernel::pack_groups`]
    /// (the last `chunks mod 8` chunks are packed from `starts`).
    groups: Vec<kernel::PackGroup>,
    /// K_H.
    chunks: usize,
}

impl ChunkPlan {
    /// Plan for `d1` values rounded from 2^32 to 2^w, chunks of `pb` bits.
    pub(crate) fn new(d1: usize, w: u32, pb: u32) -> ChunkPlan {
        let chunks = (d1 * w as usize).div_ceil(pb as usize);
        assert!(w < LOG_Q1 && (1..=16).contains(&pb), "validated parameters");
        let starts = if pb <= w {
            (0..chunks)
                .map(|k| {
                    let bit = k * pb as usize;
                    ((bit / w as usize) as u32, (bit % w as usize) as u32)
                })
                .collect()
        } else {
            Vec::new()
        };
        let groups = starts
            .chunks_exact(8)
            .map(|g| {
                let base = g[0].0;
                let mut grp = kernel::PackGroup {
                    idx: [0; 16],
                    off: [0; 8],
                    base,
                };
                for (t, &(i, off)) in g.iter().enumerate() {
                    // 8 chunks of ≤ w bits span at most 9 values: i − base ≤ 8
                    grp.idx[t] = i - base;
                    grp.idx[t + 8] = i - base + 1;
                    grp.off[t] = u64::from(off);
                }
                grp
            })
            .collect();
        ChunkPlan {
            w,
            pb,
            d1,
            starts,
            groups,
            chunks,
        }
    }

    /// The plan of a parameter set.
    pub(crate) fn for_params(params: &Params) -> ChunkPlan {
        ChunkPlan::new(params.d1, params.q1_tilde_bits, params.p_bits)
    }

    /// Rounds `ad_col` (d1 values mod q1 = 2^32) to q̃1 and writes chunk k
    /// to `out[k·stride]`; `scratch` is reused between calls.
    pub(crate) fn pack(
        &self,
        ad_col: &[u32],
        scratch: &mut Vec<u32>,
        out: &mut [i16],
        stride: usize,
    ) {
        debug_assert_eq!(ad_col.len(), self.d1);
        scratch.clear();
        scratch.extend(
            ad_col
                .iter()
                .map(|&h| round_pow2(h as u64, LOG_Q1, self.w) as u32),
        );
        if self.starts.is_empty() {
            let mut chunks = vec![0i16; self.chunks];
            pack_chunks(scratch, self.w, self.pb, &mut chunks);
            for (k, c) in chunks.into_iter().enumerate() {
                out[k * stride] = c;
            }
            return;
        }
        // the window of the last chunk reads one value past the end, a
        // group's load sixteen
        scratch.resize(self.d1 + 16, 0);
        let r = &scratch[..];
        kernel::pack_groups(r, &self.groups, self.w, self.pb, out, stride);
        // the last `chunks mod 8` chunks; each is the representative in
        // [−p/2, p/2) of the window's log p bits at `off` (`chunk_signed`)
        let done = 8 * self.groups.len();
        for (k, &(i, off)) in self.starts.iter().enumerate().skip(done) {
            let i = i as usize;
            out[k * stride] = kernel::window_chunk(r[i], r[i + 1], self.w, off, self.pb);
        }
    }

    /// Rounds and packs into the hint block `blk` the columns j + t of
    /// `group` (up to [`kernel::PACK_COLS_MAX`] = 32 columns of A1·D,
    /// column-major, starting at a column j that is a multiple of 32, so
    /// all of them lie in one 32-column chunk of the hint's storage) that
    /// are `touched[t]`. When all are touched (and their number is a
    /// multiple of 8) they are packed in place in one
    /// `kernel::pack_columns` call, which fills each row's 64-byte line of
    /// the chunk at once; otherwise each eight-column run that is all
    /// touched goes in place on its own, and the remaining touched columns
    /// one by one. `values` and `column` are scratch reused between calls.
    /// DBSetup packs every column this way, an update its touched ones.
    pub(crate) fn pack_group(
        &self,
        group: &[u32],
        touched: &[bool],
        blk: &mut ColumnBlockMut<'_>,
        j: usize,
        (values, column): (&mut Vec<u32>, &mut Vec<i16>),
    ) {
        let d1 = self.d1;
        let n = group.len() / d1;
        assert!(n <= kernel::PACK_COLS_MAX && touched.len() == n && j.is_multiple_of(CHUNK_COLS));
        let col = |t: usize| &group[t * d1..(t + 1) * d1];
        let cols: [&[u32]; kernel::PACK_COLS_MAX] =
            std::array::from_fn(|t| if t < n { col(t) } else { &[] });
        let in_place = !self.starts.is_empty();
        if in_place && n.is_multiple_of(8) && n > 0 && touched.iter().all(|&t| t) {
            let (out, stride) = blk.column_run(j);
            kernel::pack_columns(
                &cols[..n],
                self.w,
                self.pb,
                &self.starts,
                values,
                out,
                stride,
            );
            return;
        }
        for t0 in (0..n).step_by(8) {
            let run = t0..(t0 + 8).min(n);
            if in_place && run.len() == 8 && touched[run.clone()].iter().all(|&t| t) {
                let (out, stride) = blk.column_run(j + t0);
                let eight = &cols[run];
                kernel::pack_columns(eight, self.w, self.pb, &self.starts, values, out, stride);
                continue;
            }
            column.resize(self.chunks, 0);
            for t in run.filter(|&t| touched[t]) {
                self.pack(col(t), values, column, 1);
                for (r, &v) in column.iter().enumerate() {
                    blk.set(r, j + t, v);
                }
            }
        }
    }
}

/// Inverse of [`pack_chunks`] on unsigned chunk values.
pub(crate) fn unpack_chunks(chunks: &[u32], w: u32, pb: u32, out: &mut [u32]) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    let mut it = chunks.iter();
    let mask = (1u64 << w) - 1;
    for o in out.iter_mut() {
        while nbits < w {
            acc |= (*it.next().unwrap_or(&0) as u64) << nbits;
            nbits += pb;
        }
        *o = (acc & mask) as u32;
        acc >>= w;
        nbits -= w;
    }
}

/// Signed base-p digits (κ of them) of a centred value in Z_{q̃1}.
#[inline]
pub(crate) fn t_digits(y: u32, q1t_bits: u32, p_bits: u32, kappa: usize, out: &mut [i16]) {
    let q = 1i64 << q1t_bits;
    let mut v = y as i64;
    if v >= q / 2 {
        v -= q;
    }
    let p = 1i64 << p_bits;
    for (k, o) in out.iter_mut().enumerate().take(kappa) {
        if k + 1 == kappa {
            *o = v as i16;
        } else {
            let mut d = v & (p - 1);
            if d >= p / 2 {
                d -= p;
            }
            *o = d as i16;
            v = (v - d) >> p_bits;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_plan_equals_bit_stream() {
        let mut x = 0x9e3779b97f4a7c15u64;
        // (log q̃1, log p): the planned case log p ≤ log q̃1, including equal
        // widths and log q̃1 = 31, and the fallback log p > log q̃1
        for (w, pb) in [
            (28u32, 15u32),
            (28, 16),
            (20, 7),
            (31, 13),
            (9, 9),
            (12, 16),
            (5, 16),
        ] {
            for n in [1usize, 2, 3, 7, 64, 1024] {
                let ad: Vec<u32> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u32
                    })
                    .collect();
                let rounded: Vec<u32> = ad
                    .iter()
                    .map(|&h| round_pow2(h as u64, LOG_Q1, w) as u32)
                    .collect();
                let plan = ChunkPlan::new(n, w, pb);
                assert_eq!(plan.starts.is_empty(), pb > w);
                let k = plan.chunks;
                let mut want = vec![0i16; k];
                pack_chunks(&rounded, w, pb, &mut want);
                let mut scratch = Vec::new();
                for stride in [1usize, 3] {
                    let mut got = vec![i16::MIN; k * stride];
                    plan.pack(&ad, &mut scratch, &mut got, stride);
                    let got: Vec<i16> = got.iter().step_by(stride).copied().collect();
                    assert_eq!(got, want, "w={w} pb={pb} n={n} stride={stride}");
                }
            }
        }
    }

    #[test]
    fn chunk_packing_round_trip() {
        let vals: Vec<u32> = (0..64u32)
            .map(|i| i.wrapping_mul(2654435761u32) >> 4)
            .collect();
        let n = (64 * 28usize).div_ceil(15);
        let mut chunks = vec![0i16; n];
        pack_chunks(&vals, 28, 15, &mut chunks);
        let unsigned: Vec<u32> = chunks
            .iter()
            .map(|&c| (c as i32).rem_euclid(1 << 15) as u32)
            .collect();
        let mut back = vec![0u32; 64];
        unpack_chunks(&unsigned, 28, 15, &mut back);
        assert_eq!(back, vals);
        assert!(chunks
            .iter()
            .all(|&c| (-(1 << 14)..(1 << 14)).contains(&(c as i32))));
    }

    #[test]
    fn t_digits_round_trip() {
        let mut dg = [0i16; 2];
        for y in [
            0u32,
            1,
            (1 << 27) - 1,
            1 << 27,
            (1 << 27) + 1,
            (1 << 28) - 1,
            12345678,
        ] {
            t_digits(y, 28, 15, 2, &mut dg);
            let v = dg[0] as i64 + ((dg[1] as i64) << 15);
            assert_eq!(v.rem_euclid(1 << 28) as u32, y);
            assert!(dg
                .iter()
                .all(|&d| (-(1 << 14)..(1 << 14)).contains(&(d as i32))));
        }
    }
}
