use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

#[test]
fn mul_acc_lazy_matches_scalar() {
    let what = "mul_acc_lazy_matches_scalar";
    let mut s = 17;
    for n in [0usize, 1, 7, 8, 9, 31, 1024, 2048, 2053] {
        let r = |s: &mut u64, len: usize| -> Vec<u32> {
            (0..len).map(|_| (lcg(s) % (1 << 28)) as u32).collect()
        };
        // a and b may be longer than acc
        let (a, b) = (r(&mut s, n + 3), r(&mut s, n));
        let init: Vec<u64> = (0..n).map(|_| lcg(&mut s) >> 2).collect();
        let mut want = init.clone();
        for _ in 0..3 {
            mul_acc_lazy_scalar(&a, &b, &mut want, 0);
        }
        for i in 0..n {
            assert_eq!(want[i], init[i] + 3 * a[i] as u64 * b[i] as u64);
        }
        let mut got = init.clone();
        for _ in 0..3 {
            mul_acc_lazy(&a, &b, &mut got);
        }
        assert_eq!(got, want, "dispatched n={n}");
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx2(what) {
                let mut x = init.clone();
                for _ in 0..3 {
                    // SAFETY: AVX2 detected; a, b hold ≥ n words.
                    unsafe { simd::mul_acc_lazy_avx2(&a, &b, &mut x) };
                }
                assert_eq!(x, want, "avx2 n={n}");
            }
            if has_avx512(what) {
                let mut z = init.clone();
                for _ in 0..3 {
                    // SAFETY: AVX-512F detected; a, b hold ≥ n words.
                    unsafe { simd::mul_acc_lazy_avx512(&a, &b, &mut z) };
                }
                assert_eq!(z, want, "avx512 n={n}");
            }
        }
    }
}

#[test]
fn mul_sum_blocks_mod_matches_naive() {
    use crate::arith::{P0, P1};
    let mut s = 23;
    for (n, stride, blocks, p) in [
        (0usize, 8usize, 3usize, P0),
        (1, 1, 4, P1),
        (7, 9, 2, P0),
        (64, 64, 16, P1),
        (2048, 4096, 16, P0),
        (100, 130, 5, P1),
        (33, 40, 0, P0),
        (80, 80, 257, P1),
        (48, 48, 600, 1 << 28),
        (40, 41, 3, 97),
    ] {
        let len = blocks.saturating_sub(1) * stride + n;
        // inputs up to 2^28 − 1 (the contract), the extremes included
        let r = |s: &mut u64| -> Vec<u32> {
            (0..len)
                .map(|i| match i % 7 {
                    0 => (1 << 28) - 1,
                    _ => (lcg(s) % (1 << 28)) as u32,
                })
                .collect()
        };
        let (a, x) = (r(&mut s), r(&mut s));
        let want: Vec<u32> = (0..n)
            .map(|l| {
                let sum: u128 = (0..blocks)
                    .map(|b| a[b * stride + l] as u128 * x[b * stride + l] as u128)
                    .sum();
                (sum % p as u128) as u32
            })
            .collect();
        let what = format!("n={n} stride={stride} blocks={blocks} p={p}");
        let mut got = vec![u32::MAX; n];
        mul_sum_blocks_mod(&a, &x, stride, blocks, p, &mut got);
        assert_eq!(got, want, "dispatched {what}");
        if blocks > SUM_BLOCKS_MAX {
            continue; // the variants below take one run of blocks
        }
        let mut sc = vec![u32::MAX; n];
        mul_sum_blocks_mod_scalar(&a, &x, stride, blocks, p, &mut sc, 0);
        assert_eq!(sc, want, "scalar {what}");
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx2("mul_sum_blocks_mod_matches_naive") {
                let mut v = vec![u32::MAX; n];
                // SAFETY: AVX2 detected; a, x hold (blocks − 1)·stride + n
                // words below 2^28; blocks ≤ SUM_BLOCKS_MAX.
                unsafe { simd::mul_sum_blocks_mod_avx2(&a, &x, stride, blocks, p, &mut v) };
                assert_eq!(v, want, "avx2 {what}");
            }
            if has_avx512("mul_sum_blocks_mod_matches_naive") {
                let mut v = vec![u32::MAX; n];
                // SAFETY: AVX-512F detected; bounds as above.
                unsafe { simd::mul_sum_blocks_mod_avx512(&a, &x, stride, blocks, p, &mut v) };
                assert_eq!(v, want, "avx512 {what}");
            }
        }
    }
}
