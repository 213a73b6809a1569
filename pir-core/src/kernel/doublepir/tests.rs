use super::*;
use crate::arith::{P0, P1};
use crate::kernel::test_util::{kernels, lcg};

/// The limbs add back up to c2 centred mod Q2, each within the bound the
/// kernels' overflow argument uses.
#[test]
fn limbs_recompose_c2_within_bounds() {
    let crt = Crt::new();
    let mut s = 5;
    let mut top_seen = 0;
    let edges = [0, 1, Q2 / 2 - 1, Q2 / 2, Q2 / 2 + 1, Q2 - 1];
    for c in edges
        .into_iter()
        .chain((0..100_000).map(|_| lcg(&mut s) % Q2))
    {
        let l = limbs_of(&crt, (c % P0 as u64) as u32, (c % P1 as u64) as u32);
        let back: i64 = l
            .iter()
            .enumerate()
            .map(|(t, &v)| (v as i64) << (LIMB_BITS * t as u32))
            .sum();
        assert_eq!(back, crate::arith::centre(c, Q2), "c = {c}");
        for &v in &l[..DP_LIMBS - 1] {
            assert!((-1024..1024).contains(&v), "c = {c}: low limb {v}");
        }
        let top = l[DP_LIMBS - 1].unsigned_abs() as u64;
        assert!(top <= TOP_LIMB_MAX, "c = {c}: top limb {top}");
        top_seen = top_seen.max(top);
    }
    // ±Q2/2 reach the bound
    assert_eq!(top_seen, TOP_LIMB_MAX);
}

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
        // c2 mod Q2; `extreme`: the largest top limbs (±Q2/2) in every
        // column (queries 0 and 1: with the digits at −2^14 each 32-bit
        // lane of a full block reaches 64 · 2^14 · 1904 ≈ 2^30.9 in the
        // `vpdpwssd` kernel, 16 chunks' worth in the AVX2 one), and a mix
        // with the largest residues (query 2)
        let edges = [Q2 / 2 + 1, Q2 / 2, Q2 - 1, Q2 / 2 - 1, P0 as u64 - 1];
        let mut c2s: Vec<Vec<u32>> = Vec::new();
        for q in 0..3 {
            let c: Vec<u64> = (0..ell2)
                .map(|j| {
                    if extreme {
                        edges[if q < 2 { q } else { j % edges.len() }]
                    } else {
                        lcg(&mut s) % Q2
                    }
                })
                .collect();
            let mut c2: Vec<u32> = c.iter().map(|&x| (x % P0 as u64) as u32).collect();
            c2.extend(c.iter().map(|&x| (x % P1 as u64) as u32));
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
