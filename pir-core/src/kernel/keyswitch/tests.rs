use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

#[test]
fn montgomery_keyswitch_matches_naive() {
    let mut s = 3;
    for p in [crate::arith::P0, crate::arith::P1] {
        let m = Mont::new(p);
        // p·(−p^{-1}) = −1
        assert_eq!(m.p.wrapping_mul(m.pinv_neg), u32::MAX);
        // random rows (t = 3, as packing uses), and the largest residues
        // in every slot at t = 4, the most products one REDC takes here
        for (n, extreme) in [1usize, 15, 16, 33, 2048]
            .into_iter()
            .flat_map(|n| [(n, false), (n, true)])
        {
            let t = if extreme { 4 } else { 3 };
            let stride = n + 5;
            let r = |s: &mut u64| -> u32 {
                if extreme {
                    p - 1
                } else {
                    (lcg(s) % p as u64) as u32
                }
            };
            // the keys as the kernels take them (Montgomery form, w·R)
            let wm: Vec<u32> = (0..t * stride).map(|_| r(&mut s)).collect();
            let g: Vec<u32> = (0..t * stride).map(|_| r(&mut s)).collect();
            let init: Vec<u32> = (0..n).map(|_| r(&mut s)).collect();
            let r_inv = m.pinv_inv_r() as u128;
            let want: Vec<u32> = (0..n)
                .map(|i| {
                    let mut a = init[i] as u128;
                    for k in 0..t {
                        let w = wm[k * stride + i] as u128 * r_inv % p as u128;
                        a += w * g[k * stride + i] as u128;
                    }
                    (a % p as u128) as u32
                })
                .collect();
            let mut fast = init.clone();
            keyswitch_acc(&m, &wm, &g, t, stride, n, &mut fast);
            let mut slow = init.clone();
            keyswitch_acc_scalar(&m, &wm, &g, t, stride, 0, n, &mut slow);
            assert_eq!(fast, want, "p={p} n={n} extreme={extreme}");
            assert_eq!(slow, want);
        }
    }
}

#[test]
fn node_combination_kernels_match_scalar() {
    let mut s = 8;
    for p in [crate::arith::P0, crate::arith::P1] {
        let m = Mont::new(p);
        for n in [5usize, 16, 2048] {
            let r = |s: &mut u64| {
                (0..n)
                    .map(|_| (lcg(s) % p as u64) as u32)
                    .collect::<Vec<u32>>()
            };
            let (e, o, mono) = (r(&mut s), r(&mut s), r(&mut s));
            let (mut p1, mut m1, mut p2, mut m2) = (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
            plus_minus(&m, &e, &o, &mono, &mut p1, &mut m1);
            plus_minus_scalar(&m, &e, &o, &mono, &mut p2, &mut m2, 0, n);
            assert_eq!((&p1, &m1), (&p2, &m2));
            for i in 0..n {
                let xo = (o[i] as u64 * mono[i] as u64 % p as u64 * Mont::new(p).pinv_inv_r()
                    % p as u64) as u32;
                assert_eq!(p1[i] as u64, (e[i] as u64 + xo as u64) % p as u64);
            }
            // reversal: block-structured when 16 | n (vpermd path)
            let perm: Vec<u32> = (0..n as u32).rev().collect();
            let sp = SlotPerm::new(perm.clone());
            assert_eq!(sp.within16, n % 16 == 0);
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            add_permuted(p, &p1, &m1, &sp, &mut a);
            add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
            assert_eq!(a, b);
            assert_eq!(a[0] as u64, (p1[0] as u64 + m1[n - 1] as u64) % p as u64);
            // a random permutation: not block-structured (gather path)
            let mut perm: Vec<u32> = (0..n as u32).collect();
            for i in (1..n).rev() {
                perm.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
            }
            let sp = SlotPerm::new(perm.clone());
            assert!(n <= 16 || !sp.within16);
            add_permuted(p, &p1, &m1, &sp, &mut a);
            add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
            assert_eq!(a, b, "random permutation n={n}");
        }
        // the automorphisms of every packing level (block-structured)
        let ctx = crate::rns::Context::new(crate::params::TABLE1);
        let n = ctx.params.d2;
        let r = |s: &mut u64| {
            (0..n)
                .map(|_| (lcg(s) % p as u64) as u32)
                .collect::<Vec<u32>>()
        };
        for lc in &ctx.levels {
            assert!(lc.perm.within16 && lc.perm.within8);
            let (plus, minus) = (r(&mut s), r(&mut s));
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            add_permuted(p, &plus, &minus, &lc.perm, &mut a);
            add_permuted_scalar(p, &plus, &minus, &lc.perm.perm, &mut b, 0);
            assert_eq!(a, b);
        }
    }
}

/// `keyswitch_acc`'s signature.
#[cfg(target_arch = "x86_64")]
type KeyswitchAcc = unsafe fn(&Mont, &[u32], &[u32], usize, usize, usize, &mut [u32]);
/// `plus_minus`'s signature.
#[cfg(target_arch = "x86_64")]
type PlusMinus = unsafe fn(&Mont, &[u32], &[u32], &[u32], &mut [u32], &mut [u32]);
/// `add_permuted`'s signature (permutation as indices, block flag).
#[cfg(target_arch = "x86_64")]
type AddPermuted = unsafe fn(u32, &[u32], &[u32], &[u32], bool, &mut [u32]);

/// One SIMD width's key-switching kernels.
#[cfg(target_arch = "x86_64")]
struct Width {
    name: &'static str,
    /// u32 lanes: the block size of the `vpermd` path of `add_permuted`.
    lanes: usize,
    keyswitch_acc: KeyswitchAcc,
    plus_minus: PlusMinus,
    add_permuted: AddPermuted,
}

/// The kernels of `k` against the scalar twins.
///
/// # Safety
/// The CPU has the features `k`'s kernels are compiled for.
#[cfg(target_arch = "x86_64")]
unsafe fn width_matches_scalar(k: &Width) {
    let name = k.name;
    let mut s = 31;
    for p in [crate::arith::P0, crate::arith::P1] {
        let m = Mont::new(p);
        for n in [1usize, 7, 8, 9, 15, 16, 17, 32, 33, 1000, 2048] {
            let r = |s: &mut u64, len: usize| -> Vec<u32> {
                (0..len).map(|_| (lcg(s) % p as u64) as u32).collect()
            };
            // keyswitch_acc: t rows of stride n + 5 (w in Montgomery form)
            for t in 1..=4 {
                let stride = n + 5;
                let (w, g) = (r(&mut s, t * stride), r(&mut s, t * stride));
                let init = r(&mut s, n);
                let (mut a, mut b) = (init.clone(), init.clone());
                // SAFETY: the caller's features; rows and out have the
                // lengths required, t ≤ 4.
                unsafe { (k.keyswitch_acc)(&m, &w, &g, t, stride, n, &mut a) };
                keyswitch_acc_scalar(&m, &w, &g, t, stride, 0, n, &mut b);
                assert_eq!(a, b, "{name} keyswitch p={p} n={n} t={t}");
            }
            // plus_minus
            let (e, o, mono) = (r(&mut s, n), r(&mut s, n), r(&mut s, n));
            let (mut p1, mut m1, mut p2, mut m2) = (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
            // SAFETY: the caller's features; all slices have n words.
            unsafe { (k.plus_minus)(&m, &e, &o, &mono, &mut p1, &mut m1) };
            plus_minus_scalar(&m, &e, &o, &mono, &mut p2, &mut m2, 0, n);
            assert_eq!((&p1, &m1), (&p2, &m2), "{name} plus_minus p={p} n={n}");
            // add_permuted with a random permutation
            let mut perm: Vec<u32> = (0..n as u32).collect();
            for i in (1..n).rev() {
                perm.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
            }
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            // SAFETY: the caller's features; perm is a permutation of 0..n
            // (random: the gather path).
            unsafe { (k.add_permuted)(p, &p1, &m1, &perm, false, &mut a) };
            add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
            assert_eq!(a, b, "{name} add_permuted p={p} n={n}");
            // block-structured (reversal, lanes | n): the vpermd path
            if n % k.lanes == 0 {
                let rev: Vec<u32> = (0..n as u32).rev().collect();
                let sp = SlotPerm::new(rev.clone());
                assert!(if k.lanes == 8 {
                    sp.within8
                } else {
                    sp.within16
                });
                // SAFETY: the caller's features; the reversal maps aligned
                // blocks of `lanes` onto aligned blocks, lanes | n.
                unsafe { (k.add_permuted)(p, &p1, &m1, &rev, true, &mut a) };
                add_permuted_scalar(p, &p1, &m1, &rev, &mut b, 0);
                assert_eq!(a, b, "{name} add_permuted (blocks) p={p} n={n}");
            }
        }
    }
}

#[test]
fn simd_keyswitch_kernels_match_scalar() {
    #[cfg(target_arch = "x86_64")]
    {
        let what = "simd_keyswitch_kernels_match_scalar";
        if has_avx2(what) {
            let k = Width {
                name: "avx2",
                lanes: 8,
                keyswitch_acc: avx2::keyswitch_acc,
                plus_minus: avx2::plus_minus,
                add_permuted: avx2::add_permuted,
            };
            // SAFETY: AVX2 detected.
            unsafe { width_matches_scalar(&k) };
        }
        if has_avx512(what) {
            let k = Width {
                name: "avx512",
                lanes: 16,
                keyswitch_acc: avx512::keyswitch_acc,
                plus_minus: avx512::plus_minus,
                add_permuted: avx512::add_permuted,
            };
            // SAFETY: AVX-512F/BW detected.
            unsafe { width_matches_scalar(&k) };
        }
    }
}
