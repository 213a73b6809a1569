use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

#[test]
fn crt_gadget_digits_match_scalar() {
    use crate::arith::{small_residue, Crt, MODS, Q2};
    let crt = Crt::new();
    let mut s = 77;
    for (log_z, t) in [(19u32, 3usize), (27, 3), (14, 4), (10, 6)] {
        let (z, half) = (1u64 << log_z, 1u64 << (log_z - 1));
        let edges = [
            0,
            1,
            half - 1,
            half,
            z - 1,
            z,
            Q2 / 2 - 1,
            Q2 / 2,
            Q2 / 2 + 1,
            Q2 - half,
            Q2 - half - 1,
            Q2 - 1,
        ];
        for n in [1usize, 5, 8, 13, 64, 2048] {
            let xs: Vec<u64> = (0..n)
                .map(|i| edges.get(i).copied().unwrap_or_else(|| lcg(&mut s) % Q2))
                .collect();
            let mut res = vec![0u32; 2 * n];
            for (i, &x) in xs.iter().enumerate() {
                (res[i], res[n + i]) = Crt::split(x);
            }
            let mut want = vec![0u32; t * 2 * n];
            crt_gadget_digits_scalar(&crt, &res, log_z, t, &mut want, 0);
            // the scalar twin: digits in range that recombine to x
            for (i, &x) in xs.iter().enumerate() {
                let mut sum = 0i128;
                for k in (0..t).rev() {
                    let r = want[k * 2 * n + i];
                    let p = MODS[0].p;
                    let d = if r > p / 2 {
                        r as i64 - p as i64
                    } else {
                        r as i64
                    };
                    assert_eq!(want[k * 2 * n + n + i], small_residue(&MODS[1], d));
                    if k + 1 < t {
                        assert!(-(half as i64) <= d && d < half as i64);
                    }
                    sum = sum * z as i128 + d as i128;
                }
                assert_eq!(sum.rem_euclid(Q2 as i128) as u64, x);
            }
            let mut got = vec![0u32; t * 2 * n];
            crt_gadget_digits(&crt, &res, log_z, t, &mut got);
            assert_eq!(got, want, "dispatched log_z={log_z} t={t} n={n}");
            #[cfg(target_arch = "x86_64")]
            {
                if has_avx2("crt_gadget_digits_match_scalar") {
                    got.fill(0);
                    // SAFETY: avx2 detected; lengths as crt_gadget_digits asserts.
                    unsafe { simd::digits256(&crt, &res, log_z, t, &mut got) };
                    assert_eq!(got, want, "avx2 log_z={log_z} t={t} n={n}");
                }
                if has_avx512("crt_gadget_digits_match_scalar") {
                    got.fill(0);
                    // SAFETY: avx512f detected; lengths as crt_gadget_digits asserts.
                    unsafe { simd::digits512(&crt, &res, log_z, t, &mut got) };
                    assert_eq!(got, want, "avx512 log_z={log_z} t={t} n={n}");
                }
            }
        }
    }
}

#[test]
fn permute_matches_scalar() {
    let mut s = 78;
    let ctx = crate::rns::Context::new(crate::params::TABLE1);
    let n = ctx.params.d2;
    let src: Vec<u32> = (0..n).map(|_| lcg(&mut s) as u32).collect();
    let mut perms: Vec<SlotPerm> = ctx.levels.iter().map(|lc| lc.perm.clone()).collect();
    // and one that is not block-structured (gathers)
    let mut random: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        random.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
    }
    perms.push(SlotPerm::new(random));
    for sp in &perms {
        let (mut a, mut b) = (vec![0; n], vec![0; n]);
        permute(&src, sp, &mut a);
        permute_scalar(&src, &sp.perm, &mut b, 0);
        assert_eq!(a, b);
        assert!((0..n).all(|i| a[i] == src[sp[i] as usize]));
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx2("permute_matches_scalar") {
                a.fill(0);
                // SAFETY: avx2 detected; sp is a permutation of 0..n.
                unsafe { simd::permute256(&src, &sp.perm, sp.within8, &mut a) };
                assert_eq!(a, b, "avx2");
            }
            if has_avx512("permute_matches_scalar") {
                a.fill(0);
                // SAFETY: avx512f detected; sp is a permutation of 0..n.
                unsafe { simd::permute512(&src, &sp.perm, sp.within16, &mut a) };
                assert_eq!(a, b, "avx512");
            }
        }
    }
}
