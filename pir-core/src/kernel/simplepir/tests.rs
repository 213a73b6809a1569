use super::*;
use crate::kernel::test_util::{kernels, lcg};

#[test]
fn simd_kernel_matches_scalar_reference() {
    use crate::db::Database;
    use crate::params::DbShape;
    let mut s = 1;
    for (ell1, ell2) in [
        (1usize, 1usize),
        (16, 4),
        (17, 5),
        (31, 9),
        (32, 8),
        (33, 17),
        (64, 19),
        (100, 9),
        (1024, 13),
        (4096, 64),
        (4160, 23),
        (130, 7),
        (2048, 19),
        (1056, 9),
        (3072, 8),
        // more than BATCH_GROUPS tile groups: a batch takes turns and
        // prefetches the next run (across panels in the second shape)
        (64, BATCH_RUN_BYTES / 64 + 100),
        (1024, BATCH_RUN_BYTES / 1024 * 8 + 100),
    ] {
        let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
        let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
        let view = View::of(&db);
        for nq in [1, 2, 3, 7, 13] {
            let qs: Vec<Vec<u32>> = (0..nq)
                .map(|_| (0..ell1).map(|_| lcg(&mut s) as u32).collect())
                .collect();
            let split: Vec<SplitQuery> = qs.iter().map(|q| SplitQuery::new(q)).collect();
            let mut out = vec![vec![0u32; ell2]; nq];
            simplepir(&db, &split, &mut out);
            for (q, o) in qs.iter().zip(&out) {
                let mut want = vec![0u32; ell2];
                simplepir_scalar(&cm, ell1, q, &mut want);
                assert_eq!(o, &want, "{ell1}x{ell2} via {}", simplepir_impl());
            }
            for k in kernels("simd_kernel_matches_scalar_reference") {
                let mut twin = vec![vec![7u32; ell2]; nq];
                answer_with(k, &view, &split, &mut twin);
                assert_eq!(twin, out, "{ell1}x{ell2}, {nq} queries via {k:?}");
            }
            // the wide batch path with its scalar twins, and with the SIMD
            // kernels where the CPU has them
            for simd in [false, true] {
                let mut wide = vec![vec![7u32; ell2]; nq];
                for o in wide.iter_mut() {
                    o[..view.tiled_cols].fill(0);
                }
                panels_wide(&view, 0, view.panels(), &split, &mut wide, simd);
                for (w, o) in wide.iter().zip(&out) {
                    assert_eq!(
                        w[..view.tiled_cols],
                        o[..view.tiled_cols],
                        "{ell1}x{ell2}, {nq} queries, wide simd={simd}"
                    );
                }
            }
        }
    }
}

#[test]
fn tile_kernels_match_scalar_twin() {
    let mut s = 11;
    for rows in [32usize, 64, 352, 1024] {
        let tile: Vec<u8> = (0..8 * rows).map(|_| lcg(&mut s) as u8).collect();
        let mut c1: Vec<u32> = (0..rows).map(|_| lcg(&mut s) as u32).collect();
        // extreme entries: every byte limb at 0 and 255, both halves ±2^15
        c1[0] = u32::MAX;
        c1[1] = 0x8000_8000;
        c1[2] = 0x7fff_7fff;
        let q = SplitQuery::new(&c1);
        let view = q.rows(0, rows);
        let start: [u32; 8] = std::array::from_fn(|_| lcg(&mut s) as u32);
        let mut want = start;
        block_scalar(&tile, view.lo, view.hi, &mut want);
        // naive: Σ c·d added to the start values
        for (c, &w) in want.iter().enumerate() {
            let mut acc = start[c];
            for (r, &q) in c1.iter().enumerate() {
                let d = tile[r / 32 * 256 + c * 32 + r % 32] as i8 as i32 as u32;
                acc = acc.wrapping_add(q.wrapping_mul(d));
            }
            assert_eq!(w, acc, "rows {rows} column {c}");
        }
        for k in kernels("tile_kernels_match_scalar_twin") {
            let mut got = start;
            block_with(k, &tile, view, &tile[..tile.len().min(300)], &mut got);
            assert_eq!(got, want, "rows {rows} via {k:?}");
        }
    }
    // records at the extremes (−128, 127) against the extreme entries
    let rows = 64;
    let tile: Vec<u8> = (0..8 * rows)
        .map(|i| if i % 3 == 0 { 0x80 } else { 0x7f })
        .collect();
    let c1: Vec<u32> = (0..rows as u32)
        .map(|i| if i % 2 == 0 { u32::MAX } else { 0xff00_ff00 })
        .collect();
    let q = SplitQuery::new(&c1);
    let mut want = [0u32; 8];
    block_scalar(&tile, q.rows(0, rows).lo, q.rows(0, rows).hi, &mut want);
    for k in kernels("tile_kernels_match_scalar_twin") {
        let mut got = [0u32; 8];
        block_with(k, &tile, q.rows(0, rows), &[], &mut got);
        assert_eq!(got, want, "extremes via {k:?}");
    }
}

#[test]
fn pair_kernels_match_scalar_twin() {
    let mut s = 23;
    for rows in [32usize, 64, 352, 1024, 2048] {
        let tile: Vec<u8> = (0..8 * rows).map(|_| lcg(&mut s) as u8).collect();
        let mut c1: [Vec<u32>; 2] =
            std::array::from_fn(|_| (0..rows).map(|_| lcg(&mut s) as u32).collect());
        // extreme entries in both queries: every limb at 0 and 255, ±2^15
        c1[0][0] = u32::MAX;
        c1[1][1] = u32::MAX;
        c1[0][2] = 0x8000_8000;
        c1[1][3] = 0x7fff_7fff;
        let q = c1.clone().map(|c| SplitQuery::new(&c));
        let rq = [q[0].rows(0, rows), q[1].rows(0, rows)];
        let start: [[u32; 8]; 2] =
            std::array::from_fn(|_| std::array::from_fn(|_| lcg(&mut s) as u32));
        let mut want = start;
        for (w, r) in want.iter_mut().zip(&rq) {
            block_scalar(&tile, r.lo, r.hi, w);
        }
        for k in kernels("pair_kernels_match_scalar_twin") {
            let mut got = start;
            let [a, b] = &mut got;
            block_with2(k, &tile, rq, &tile[..tile.len().min(700)], [a, b]);
            assert_eq!(got, want, "rows {rows} via {k:?}");
        }
    }
}

/// The tile kernels from L1 against the measured multiply ceiling (run
/// with `cargo test --release -p pir-core --lib -- --ignored
/// tile_kernel_compute_rate --nocapture`): u8 × u32 multiply-accumulates
/// per second of one and two queries over a 2048-row tile held in cache.
#[test]
#[ignore = "timing; run in release by hand"]
fn tile_kernel_compute_rate() {
    let mut s = 3;
    let rows = 2048;
    let tile: Vec<u8> = (0..8 * rows).map(|_| lcg(&mut s) as u8).collect();
    let q: [SplitQuery; 2] = std::array::from_fn(|_| {
        SplitQuery::new(&(0..rows).map(|_| lcg(&mut s) as u32).collect::<Vec<_>>())
    });
    let rq = [q[0].rows(0, rows), q[1].rows(0, rows)];
    for k in kernels("tile_kernel_compute_rate") {
        let Some(peak) = super::peak::mac_peak_of(k) else {
            continue;
        };
        let reps = 2000;
        let mut o = [[0u32; 8]; 2];
        let mut best1 = f64::INFINITY;
        let mut best2 = f64::INFINITY;
        for _ in 0..5 {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                block_with(k, &tile, rq[0], &[], &mut o[0]);
                block_with(k, &tile, rq[1], &[], &mut o[1]);
            }
            best1 = best1.min(t.elapsed().as_secs_f64());
            let t = std::time::Instant::now();
            for _ in 0..reps {
                let [a, b] = &mut o;
                block_with2(k, &tile, rq, &[], [a, b]);
            }
            best2 = best2.min(t.elapsed().as_secs_f64());
        }
        // a batch of 16 over a run of 8 tiles held in L2, in pairs, as
        // `panels_with` takes it
        let run: Vec<u8> = (0..8 * tile.len()).map(|_| lcg(&mut s) as u8).collect();
        let (mut best_run, mut best_single) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            let t = std::time::Instant::now();
            for _ in 0..reps / 64 {
                for _pair in 0..8 {
                    for tl in run.chunks(tile.len()) {
                        let [a, b] = &mut o;
                        block_with2(k, tl, rq, &[], [a, b]);
                    }
                }
            }
            best_run = best_run.min(t.elapsed().as_secs_f64());
            let t = std::time::Instant::now();
            for _ in 0..reps / 64 {
                for _q in 0..16 {
                    for tl in run.chunks(tile.len()) {
                        block_with(k, tl, rq[0], &[], &mut o[0]);
                    }
                }
            }
            best_single = best_single.min(t.elapsed().as_secs_f64());
        }
        // the wide batch kernel: groups of 1..=WIDE_GROUP queries over a
        // 512-row transposed slice in L1 (`panels_wide`)
        if k == Kernel::Avx512Vnni {
            let scratch: Vec<u8> = (0..64 * 128).map(|_| lcg(&mut s) as u8).collect();
            let digits: Vec<Vec<u8>> = (0..WIDE_GROUP)
                .map(|_| (0..16 * 128).map(|_| lcg(&mut s) as u8).collect())
                .collect();
            let quads: Vec<&[u8]> = digits.iter().map(|d| &d[..]).collect();
            let mut sums = [[0u32; 16]; WIDE_GROUP];
            for g in 1..=WIDE_GROUP {
                let mut best = f64::INFINITY;
                for _ in 0..5 {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        wide_group(
                            true,
                            &scratch,
                            &quads[..g],
                            &[0; WIDE_GROUP][..g],
                            [&[], &[]],
                            &mut sums[..g],
                        );
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                std::hint::black_box(&sums);
                eprintln!(
                    "{k:?}: wide group of {g} in L1: {:.2} of peak",
                    (reps * g * scratch.len()) as f64 / best / peak.macs_per_second
                );
            }
        }
        std::hint::black_box(&o);
        let macs = (2 * reps * tile.len()) as f64;
        eprintln!(
            "{k:?}: batch of 16 over a 128 KiB run in L2: {:.2} of peak in pairs, {:.2} one query at a time",
            (reps / 64 * 16 * run.len()) as f64 / best_run / peak.macs_per_second,
            (reps / 64 * 16 * run.len()) as f64 / best_single / peak.macs_per_second
        );
        eprintln!(
            "{k:?}: peak {:.1} G/s ({}); one query at a time {:.1} G/s ({:.2} of peak), pairs {:.1} G/s ({:.2})",
            peak.macs_per_second / 1e9,
            peak.instruction,
            macs / best1 / 1e9,
            macs / best1 / peak.macs_per_second,
            macs / best2 / 1e9,
            macs / best2 / peak.macs_per_second,
        );
    }
}

#[test]
fn wide_kernels_match_scalar_twins() {
    let mut s = 31;
    // the digits: c1 at every limb extreme, and random
    let mut c1: Vec<u32> = (0..512).map(|_| lcg(&mut s) as u32).collect();
    for (i, c) in [
        u32::MAX,
        0,
        0x8080_8080,
        0x7f7f_7f7f,
        0x7fff_ffff,
        0x8000_0000,
        0x0000_0080,
        0xff80_7f01,
    ]
    .into_iter()
    .enumerate()
    {
        c1[i] = c;
    }
    let q = SplitQuery::new(&c1);
    for (r, &c) in c1.iter().enumerate() {
        let digits: [i64; 4] =
            std::array::from_fn(|k| i64::from(q.quads[r / 4 * 16 + 4 * k + r % 4] as i8));
        let back = (0..4).map(|k| digits[k] << (8 * k)).sum::<i64>() as u32;
        assert_eq!(back, c, "digits of c1[{r}] = {c:#x}");
    }
    for extremes in [false, true] {
        let mut tiles = [[0u8; 256]; 2];
        for (i, b) in tiles.iter_mut().flatten().enumerate() {
            *b = if extremes {
                [0x80, 0x7f, 0xff, 0x00][i % 4]
            } else {
                lcg(&mut s) as u8
            };
        }
        for pair in [true, false] {
            let b = pair.then_some(&tiles[1]);
            let mut want = [0u8; 512];
            transpose_scalar(&tiles[0], b.unwrap_or(&[0; 256]), &mut want);
            let mut got = [0u8; 512];
            wide_transpose(true, &tiles[0], b, &mut got);
            assert_eq!(got, want, "transpose, pair {pair}");
        }
        // a slice of 32 rows: 8 transposed vectors, and up to 5 queries
        let mut scratch = [0u8; 512];
        transpose_scalar(&tiles[0], &tiles[1], &mut scratch);
        let qs: Vec<SplitQuery> = (0..WIDE_GROUP)
            .map(|i| SplitQuery::new(&c1[32 * i..32 * i + 32]))
            .collect();
        for n in 1..=WIDE_GROUP {
            let quads: Vec<&[u8]> = qs[..n].iter().map(|q| &q.quads[..128]).collect();
            let corr: Vec<u32> = qs[..n]
                .iter()
                .map(|q| q.csum[1].wrapping_mul(128))
                .collect();
            let start: Vec<[u32; 16]> = (0..n)
                .map(|_| std::array::from_fn(|_| lcg(&mut s) as u32))
                .collect();
            let mut want = start.clone();
            group_scalar(&scratch, &quads, &corr, &mut want);
            // naive: start + Σ_r c1[r]·d[r] with the records signed
            for (qi, w) in want.iter().enumerate() {
                for (j, &w) in w.iter().enumerate() {
                    let tile = &tiles[j / 8];
                    let mut acc = start[qi][j];
                    for r in 0..32 {
                        let d = tile[32 * (j % 8) + r] as i8 as i32 as u32;
                        acc = acc.wrapping_add(c1[32 * qi + r].wrapping_mul(d));
                    }
                    assert_eq!(w, acc, "scalar twin, query {qi} column {j}");
                }
            }
            let mut got = start.clone();
            wide_group(true, &scratch, &quads, &corr, [&tiles[0], &[]], &mut got);
            assert_eq!(got, want, "group of {n}, extremes {extremes}");
        }
    }
}
