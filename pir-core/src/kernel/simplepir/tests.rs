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
        for nq in [1, 2, 3] {
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
