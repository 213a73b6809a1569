use super::*;
use crate::kernel::test_util::{kernels, lcg};

#[test]
fn doublepir_matches_wide_arithmetic() {
    use crate::digits::DigitMatrix;
    let mut s = 9;
    // (rows, ℓ2, extreme): rows not a multiple of 4, ℓ2 not a multiple
    // of 32 and past one or several 1024-column blocks (ragged last
    // block); `extreme` uses the largest digits and residues.
    for (n_rows, ell2, extreme) in [
        (1usize, 1usize, false),
        (3, 301, false),
        (5, 2000, false),
        (4, 2000, true),
        (9, 1024, false),
        (6, 545, true),
        (2, 3100, false),
        // more quads than one run of a batch (DP_RUN_QUADS), ragged
        (4 * DP_RUN_QUADS + 9, 70, false),
    ] {
        let rows: Vec<i16> = (0..n_rows * ell2)
            .map(|_| {
                if extreme {
                    -16384
                } else {
                    (lcg(&mut s) % 32768) as i16 - 16384
                }
            })
            .collect();
        let m = DigitMatrix::from_row_major(n_rows, ell2, &rows);
        let residue = |s: &mut u64, p: u32| {
            if extreme {
                p - 1
            } else {
                (lcg(s) % p as u64) as u32
            }
        };
        let mut c2s: Vec<Vec<u32>> = Vec::new();
        for _ in 0..3 {
            let mut c2: Vec<u32> = (0..ell2)
                .map(|_| residue(&mut s, crate::arith::P0))
                .collect();
            c2.extend((0..ell2).map(|_| residue(&mut s, crate::arith::P1)));
            c2s.push(c2);
        }
        let refs: Vec<&[u32]> = c2s.iter().map(|c| c.as_slice()).collect();
        for k in kernels("doublepir_matches_wide_arithmetic") {
            // one query, and a batch of three
            for nq in [1, 3] {
                let mut out = vec![vec![[0u32; 2]; n_rows]; nq];
                doublepir_with(k, &m, &refs[..nq], &mut out);
                for (q, o) in out.iter().enumerate() {
                    for r in 0..n_rows {
                        for (h, p) in [crate::arith::P0, crate::arith::P1].iter().enumerate() {
                            let want: i128 = (0..ell2)
                                .map(|j| rows[r * ell2 + j] as i128 * c2s[q][h * ell2 + j] as i128)
                                .sum();
                            assert_eq!(
                                o[r][h] as i128,
                                want.rem_euclid(*p as i128),
                                "{k:?} {n_rows}x{ell2} query {q} row {r}"
                            );
                        }
                    }
                }
            }
        }
    }
}
