use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

#[test]
fn add_scaled_runs_matches_scalar() {
    let mut s = 4;
    for n in [0usize, 7, 8, 17, 40, 145, 1023, 1024] {
        let g: Vec<u32> = (0..3 * n + 5).map(|_| lcg(&mut s) as u32).collect();
        let init: Vec<u32> = (0..n).map(|_| lcg(&mut s) as u32).collect();
        for nt in [0usize, 1, 2, 33] {
            let terms: Vec<(u32, usize)> = (0..nt)
                .map(|_| (lcg(&mut s) as u32, (lcg(&mut s) as usize) % (2 * n + 6)))
                .collect();
            let (mut a, mut b) = (init.clone(), init.clone());
            add_scaled_runs(&mut a, &terms, &g);
            add_scaled_runs_scalar(&mut b, &terms, &g, 0);
            assert_eq!(a, b, "n={n} terms={nt}");
            // and the naive sum, term by term
            let mut c = init.clone();
            for &(d, o) in &terms {
                for (k, x) in c.iter_mut().enumerate() {
                    *x = x.wrapping_add(d.wrapping_mul(g[o + k]));
                }
            }
            assert_eq!(a, c);
            // every SIMD variant this machine has, whatever is selected
            #[cfg(target_arch = "x86_64")]
            {
                if has_avx2("add_scaled_runs_matches_scalar") {
                    let mut x = init.clone();
                    // SAFETY: AVX2 detected; every run has ≥ n elements.
                    unsafe { simd::runs256(&mut x, &terms, &g) };
                    assert_eq!(x, c, "avx2 n={n} terms={nt}");
                }
                if has_avx512("add_scaled_runs_matches_scalar") {
                    let mut x = init.clone();
                    // SAFETY: AVX-512F detected; every run has ≥ n elements.
                    unsafe { simd::runs512(&mut x, &terms, &g) };
                    assert_eq!(x, c, "avx512 n={n} terms={nt}");
                }
            }
        }
    }
}
