use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

#[test]
fn pack_columns_matches_scalar() {
    let mut s = 12;
    // one scratch for every call: reused at equal n and width (stale words
    // from the previous call must not leak into the chunks), regrown
    // otherwise
    let mut scratch = Vec::new();
    for (w, pb) in [(28u32, 15u32), (31, 16), (9, 9), (20, 3)] {
        for n in [1usize, 5, 8, 13, 64, 64, 1024] {
            for width in [8usize, 16, 32, 32, 24] {
                let cols: Vec<Vec<u32>> = (0..width)
                    .map(|_| (0..n).map(|_| lcg(&mut s) as u32).collect())
                    .collect();
                let chunks = (n * w as usize).div_ceil(pb as usize);
                let starts: Vec<(u32, u32)> = (0..chunks)
                    .map(|k| {
                        (
                            (k * pb as usize / w as usize) as u32,
                            (k * pb as usize % w as usize) as u32,
                        )
                    })
                    .filter(|&(i, _)| (i as usize) < n)
                    .collect();
                let refs: Vec<&[u32]> = cols.iter().map(|c| c.as_slice()).collect();
                // naive: column by column, chunk k of column c at width·k + c
                let mut packed = vec![0i16; width * starts.len()];
                for (c, col) in cols.iter().enumerate() {
                    let r: Vec<u32> = col
                        .iter()
                        .map(|&h| crate::arith::round_pow2(u64::from(h), 32, w) as u32)
                        .chain([0])
                        .collect();
                    for (k, &(i, off)) in starts.iter().enumerate() {
                        let (i, o) = (i as usize, off);
                        packed[width * k + c] = window_chunk(r[i], r[i + 1], w, o, pb);
                    }
                }
                // row-major buffers, and the hint's quad layout (a 32-column
                // block, a 1024-column one)
                let quads = [
                    RowStride { row: 32, quad: 128 },
                    RowStride {
                        row: 32,
                        quad: 4096,
                    },
                ];
                for stride in [RowStride::plain(width), RowStride::plain(width + 5)]
                    .into_iter()
                    .chain(quads)
                {
                    let what = format!("w={w} pb={pb} n={n} width={width} stride={stride:?}");
                    let len = stride.at(starts.len());
                    let (mut a, mut b) = (vec![0i16; len], vec![0i16; len]);
                    pack_columns(&refs, w, pb, &starts, &mut scratch, &mut a, stride);
                    pack_columns_scalar(&refs, w, pb, &starts, &mut b, stride);
                    assert_eq!(a, b, "{what}");
                    // chunk k of column c at stride.at(k) + c, nothing else
                    let mut want = vec![0i16; len];
                    for k in 0..starts.len() {
                        want[stride.at(k)..stride.at(k) + width]
                            .copy_from_slice(&packed[width * k..width * (k + 1)]);
                    }
                    assert_eq!(a, want, "{what}");
                }
            }
        }
    }
}

#[test]
fn pack_columns_refuses_bad_widths_and_strides() {
    let col = vec![1u32; 4];
    let starts = [(0u32, 0u32)];
    let mut scratch = Vec::new();
    let mut out = vec![0i16; 1 << 12];
    for (width, stride) in [
        (0usize, RowStride::plain(8)),
        (4, RowStride::plain(8)),
        (40, RowStride::plain(40)),
        (16, RowStride::plain(8)),
        (32, RowStride { row: 32, quad: 100 }),
    ] {
        let cols = vec![col.as_slice(); width];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pack_columns(&cols, 20, 10, &starts, &mut scratch, &mut out, stride)
        }));
        assert!(r.is_err(), "width={width} stride={stride:?}");
    }
}

#[test]
fn pack_groups_matches_scalar() {
    let mut s = 11;
    for (w, pb) in [(28u32, 15u32), (32, 16), (9, 9), (20, 3)] {
        let r: Vec<u32> = (0..200)
            .map(|_| (lcg(&mut s) as u32) & (((1u64 << w) - 1) as u32))
            .collect();
        let groups: Vec<PackGroup> = (0..20)
            .map(|_| {
                let mut g = PackGroup {
                    idx: [0; 16],
                    off: [0; 8],
                    base: (lcg(&mut s) % 180) as u32,
                };
                for t in 0..8 {
                    g.idx[t] = (lcg(&mut s) % 9) as u32;
                    g.idx[t + 8] = g.idx[t] + 1;
                    g.off[t] = lcg(&mut s) % w as u64;
                }
                g
            })
            .collect();
        for stride in [1usize, 5] {
            let n = 8 * groups.len() * stride;
            let (mut a, mut b) = (vec![0i16; n], vec![0i16; n]);
            pack_groups(&r, &groups, w, pb, &mut a, stride);
            pack_groups_scalar(&r, &groups, w, pb, &mut b, stride);
            assert_eq!(a, b, "w={w} pb={pb} stride={stride}");
        }
    }
}

/// `pack_groups`'s signature.
#[cfg(target_arch = "x86_64")]
type Groups = unsafe fn(&[u32], &[PackGroup], u32, u32, &mut [i16], usize);
/// The signature of `pack_columns`' chunk step.
#[cfg(target_arch = "x86_64")]
type Columns8 = unsafe fn(&[u32], usize, u32, u32, &[(u32, u32)], &mut [i16], RowStride);

/// One SIMD width's packing kernels.
#[cfg(target_arch = "x86_64")]
struct Width {
    name: &'static str,
    groups: Groups,
    columns8: Columns8,
}

/// The kernels of `k` against the scalar twins.
///
/// # Safety
/// The CPU has the features `k`'s kernels are compiled for.
#[cfg(target_arch = "x86_64")]
unsafe fn width_matches_scalar(k: &Width) {
    let name = k.name;
    let mut s = 13;
    for (w, pb) in [(28u32, 15u32), (31, 16), (32, 16), (9, 9), (20, 3), (1, 1)] {
        let mask = ((1u64 << w) - 1) as u32;
        // pack_groups: random groups over 200 values, as in
        // pack_groups_matches_scalar, plus offsets up to w − 1
        let r: Vec<u32> = (0..200).map(|_| (lcg(&mut s) as u32) & mask).collect();
        for ng in [0usize, 1, 3, 20] {
            let groups: Vec<PackGroup> = (0..ng)
                .map(|_| {
                    let mut g = PackGroup {
                        idx: [0; 16],
                        off: [0; 8],
                        base: (lcg(&mut s) % 180) as u32,
                    };
                    for t in 0..8 {
                        g.idx[t] = (lcg(&mut s) % 15) as u32;
                        g.idx[t + 8] = g.idx[t] + 1;
                        g.off[t] = lcg(&mut s) % w as u64;
                    }
                    g.off[0] = w as u64 - 1;
                    g
                })
                .collect();
            for stride in [1usize, 5] {
                let len = (8 * ng * stride).max(1);
                let (mut a, mut b) = (vec![0i16; len], vec![0i16; len]);
                // SAFETY: the caller's features; r holds base + 16
                // values, indices < 16, offsets < w, out long enough.
                unsafe { (k.groups)(&r, &groups, w, pb, &mut a, stride) };
                pack_groups_scalar(&r, &groups, w, pb, &mut b, stride);
                assert_eq!(a, b, "{name} groups w={w} pb={pb} ng={ng} stride={stride}");
            }
        }
        // pack_columns' chunk step on interleaved values
        if w == 32 {
            continue; // pack_columns takes w < 32
        }
        for (n, groups) in [(1usize, 1usize), (5, 4), (64, 2), (300, 1), (300, 4)] {
            let len = 8 * (n + 1);
            let r: Vec<u32> = (0..groups * len)
                .map(|_| (lcg(&mut s) as u32) & mask)
                .collect();
            let starts: Vec<(u32, u32)> = (0..(n * w as usize).div_ceil(pb as usize))
                .map(|k| {
                    let bit = k * pb as usize;
                    ((bit / w as usize) as u32, (bit % w as usize) as u32)
                })
                .filter(|&(i, _)| (i as usize) < n)
                .collect();
            let quad = RowStride { row: 32, quad: 128 };
            let width = 8 * groups;
            for stride in [RowStride::plain(width), RowStride::plain(width + 5), quad] {
                let out_len = stride.at(starts.len());
                let (mut a, mut b) = (vec![0i16; out_len], vec![0i16; out_len]);
                // SAFETY: the caller's features; every window
                // i + 1 ≤ n of every group is inside r, every store
                // inside out, off < w.
                unsafe { (k.columns8)(&r, len, w, pb, &starts, &mut a, stride) };
                pack_columns_chunks(&r, len, w, pb, &starts, &mut b, stride);
                let what = format!("w={w} pb={pb} n={n} groups={groups} {stride:?}");
                assert_eq!(a, b, "{name} columns8 {what}");
            }
        }
    }
}

#[test]
fn simd_pack_kernels_match_scalar() {
    #[cfg(target_arch = "x86_64")]
    {
        let what = "simd_pack_kernels_match_scalar";
        if has_avx2(what) {
            let k = Width {
                name: "avx2",
                groups: simd::groups256,
                columns8: simd::columns8_256,
            };
            // SAFETY: AVX2 detected.
            unsafe { width_matches_scalar(&k) };
        }
        if has_avx512(what) {
            let k = Width {
                name: "avx512",
                groups: simd::groups512,
                columns8: simd::columns8_512,
            };
            // SAFETY: AVX-512F detected.
            unsafe { width_matches_scalar(&k) };
        }
    }
}
