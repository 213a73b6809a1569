use super::*;
use crate::kernel::test_util::lcg;
#[cfg(target_arch = "x86_64")]
use crate::kernel::test_util::{has_avx2, has_avx512};

/// A SIMD transform pair against the scalar twins: forward inputs anywhere
/// in [0, 4p) (the lazy ranges), the inverse of the transform and of
/// arbitrary slots in [0, p), and the round trip.
///
/// # Safety
/// The CPU has the features `fwd` and `inv` are compiled for.
#[cfg(target_arch = "x86_64")]
unsafe fn transforms_match_scalar(
    width: &str,
    fwd: unsafe fn(&NttTable, &mut [u32]),
    inv: unsafe fn(&NttTable, &mut [u32]),
) {
    use crate::arith::{Modulus, P0, P1};
    let mut s = 21;
    for n in [32usize, 64, 128, 256, 1024, 2048, 4096] {
        for p in [P0, P1] {
            let tab = NttTable::new(Modulus::new(p), n);
            let r = |s: &mut u64, bound: u32| -> Vec<u32> {
                (0..n).map(|_| (lcg(s) % bound as u64) as u32).collect()
            };
            for _ in 0..3 {
                let a = r(&mut s, 4 * p);
                let (mut f, mut g) = (a.clone(), a.clone());
                // SAFETY: the caller's features; a.len() = n ≥ 32.
                unsafe { fwd(&tab, &mut f) };
                tab.forward_scalar(&mut g);
                assert_eq!(f, g, "{width} forward n={n} p={p}");
                for b in [f, r(&mut s, p)] {
                    let (mut fi, mut gi) = (b.clone(), b.clone());
                    // SAFETY: as above.
                    unsafe { inv(&tab, &mut fi) };
                    tab.inverse_scalar(&mut gi);
                    assert_eq!(fi, gi, "{width} inverse n={n} p={p}");
                }
                let mut rt = a.clone();
                // SAFETY: as above.
                unsafe {
                    fwd(&tab, &mut rt);
                    inv(&tab, &mut rt);
                }
                assert_eq!(rt, a.iter().map(|&x| x % p).collect::<Vec<_>>());
            }
        }
    }
}

#[test]
fn simd_transforms_match_scalar() {
    #[cfg(target_arch = "x86_64")]
    {
        let what = "simd_transforms_match_scalar";
        if has_avx2(what) {
            // SAFETY: AVX2 detected.
            unsafe { transforms_match_scalar("avx2", avx2::forward, avx2::inverse) };
        }
        if has_avx512(what) {
            // SAFETY: AVX-512F/BW detected.
            unsafe { transforms_match_scalar("avx512", avx512::forward, avx512::inverse) };
        }
    }
}

#[test]
fn ntt_forward_reversed_i16_matches_naive() {
    use crate::arith::{Modulus, P0, P1};
    use crate::ntt::NttTable;
    let mut s = 79;
    for (len, n) in [
        (0usize, 32usize),
        (1, 16),
        (16, 16),
        (31, 32),
        (32, 32),
        (64, 64),
        (100, 128),
        (1024, 1024),
        (2048, 2048),
        (2045, 2048),
    ] {
        let src: Vec<i16> = (0..len)
            .map(|i| match i % 5 {
                0 => i16::MIN,
                1 => i16::MAX,
                2 => -1,
                _ => lcg(&mut s) as i16,
            })
            .collect();
        for p in [P0, P1] {
            let t = NttTable::new(Modulus::new(p), n);
            // naive: the reversed, front-padded residues, then the scalar
            // transform
            let mut want: Vec<u32> = (0..n)
                .map(|m| {
                    let pad = n - len;
                    let v = if m < pad {
                        0
                    } else {
                        src[len - 1 - (m - pad)] as i64
                    };
                    v.rem_euclid(p as i64) as u32
                })
                .collect();
            t.forward_scalar(&mut want);
            let what = format!("len={len} n={n} p={p}");
            let mut got = vec![7u32; n];
            ntt_forward_reversed_i16(&t, &src, &mut got);
            assert_eq!(got, want, "dispatched {what}");
            got.fill(7);
            ntt_forward_reversed_i16_scalar(&t, &src, &mut got);
            assert_eq!(got, want, "scalar {what}");
            #[cfg(target_arch = "x86_64")]
            if len == n && n >= 32 {
                if has_avx2("ntt_forward_reversed_i16_matches_naive") {
                    got.fill(7);
                    // SAFETY: AVX2 detected; src.len() = got.len() = n ≥ 32.
                    unsafe { avx2::forward_reversed_i16(&t, &src, &mut got) };
                    assert_eq!(got, want, "avx2 {what}");
                }
                if has_avx512("ntt_forward_reversed_i16_matches_naive") {
                    got.fill(7);
                    // SAFETY: AVX-512F/BW detected; lengths as above.
                    unsafe { avx512::forward_reversed_i16(&t, &src, &mut got) };
                    assert_eq!(got, want, "avx512 {what}");
                }
            }
        }
    }
}
