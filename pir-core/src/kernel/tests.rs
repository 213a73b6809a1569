use super::*;

fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s >> 16
}

/// Runs `f` if this CPU has AVX2; otherwise notes the skip.
fn with_avx2(name: &str, f: impl FnOnce()) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            f();
            return;
        }
    }
    let _ = f;
    eprintln!("{name}: skipped, no AVX2 on this machine");
}

#[test]
fn ntt_avx2_matches_scalar() {
    with_avx2("ntt_avx2_matches_scalar", || {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::arith::{Modulus, P0, P1};
            use crate::ntt::NttTable;
            let mut s = 21;
            for n in [32usize, 64, 128, 256, 1024, 2048, 4096] {
                for p in [P0, P1] {
                    let tab = NttTable::new(Modulus::new(p), n);
                    let r = |s: &mut u64, bound: u32| -> Vec<u32> {
                        (0..n).map(|_| (lcg(s) % bound as u64) as u32).collect()
                    };
                    for _ in 0..3 {
                        // forward inputs anywhere in [0, 4p) exercise the lazy ranges
                        let a = r(&mut s, 4 * p);
                        let (mut f, mut g) = (a.clone(), a.clone());
                        // SAFETY: AVX2 was detected; a.len() = n ≥ 32.
                        unsafe { ntt_avx2::forward(&tab, &mut f) };
                        tab.forward_scalar(&mut g);
                        assert_eq!(f, g, "forward n={n} p={p}");
                        // inverse of the transform, and of arbitrary slots in [0, p)
                        for b in [f, r(&mut s, p)] {
                            let (mut fi, mut gi) = (b.clone(), b.clone());
                            // SAFETY: as above.
                            unsafe { ntt_avx2::inverse(&tab, &mut fi) };
                            tab.inverse_scalar(&mut gi);
                            assert_eq!(fi, gi, "inverse n={n} p={p}");
                        }
                        let mut rt = a.clone();
                        // SAFETY: as above.
                        unsafe {
                            ntt_avx2::forward(&tab, &mut rt);
                            ntt_avx2::inverse(&tab, &mut rt);
                        }
                        assert_eq!(rt, a.iter().map(|&x| x % p).collect::<Vec<_>>());
                    }
                }
            }
        }
    });
}

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
            for k in Kernel::available() {
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
        for k in Kernel::available() {
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
    for k in Kernel::available() {
        let mut got = [0u32; 8];
        block_with(k, &tile, q.rows(0, rows), &[], &mut got);
        assert_eq!(got, want, "extremes via {k:?}");
    }
}

#[test]
fn kernels_agree_at_every_prefetch_distance() {
    use crate::db::Database;
    use crate::params::DbShape;
    use std::sync::atomic::Ordering::Relaxed;
    let mut s = 5;
    let (ell1, ell2) = (2048usize, 40usize);
    let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
    let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
    let c1: Vec<u32> = (0..ell1).map(|_| lcg(&mut s) as u32).collect();
    let mut want = vec![0u32; ell2];
    simplepir_scalar(&cm, ell1, &c1, &mut want);
    let split = [SplitQuery::new(&c1)];
    let view = View::of(&db);
    for &d in &PREFETCH_CANDIDATES {
        // Other tests may run meanwhile: the distance only changes
        // speed, never results, so sharing the global is harmless.
        PF_DIST.store(d, Relaxed);
        for k in Kernel::available() {
            let mut got = vec![vec![0u32; ell2]];
            answer_with(k, &view, &split, &mut got);
            assert_eq!(got[0], want, "distance {d} via {k:?}");
        }
    }
    PF_DIST.store(PREFETCH_DEFAULT, Relaxed);
}

#[test]
fn prefetch_measurement_reports_every_candidate() {
    use crate::db::Database;
    use crate::params::DbShape;
    let shape = DbShape {
        ell1: 4096,
        ell2: 64,
    };
    let db = Database::zeros(shape, 8);
    let view = View::of(&db);
    assert!(view.panels() > 1);
    let t = measure_prefetch(Kernel::selected(), &view, 2);
    assert_eq!(t.span_bytes, 2 * view.panel * view.tiled_cols);
    assert_eq!(
        t.candidates.iter().map(|c| c.0).collect::<Vec<_>>(),
        PREFETCH_CANDIDATES
    );
    assert!(t.candidates.iter().all(|c| c.1 > 0.0));
    let fastest = t.candidates.iter().map(|c| c.1).fold(0.0, f64::max);
    let chosen = t.candidates.iter().find(|c| c.0 == t.chosen).unwrap();
    let none = t.candidates[0].1;
    if t.chosen == 0 {
        // none, unless a distance beat it by more than the margin
        assert!(fastest <= none * (1.0 + PREFETCH_MARGIN) + 1e-9);
    } else {
        assert_eq!(chosen.1, fastest);
        assert!(chosen.1 > none);
    }
    // too small to measure on: no tuning, nothing cached
    assert_eq!(
        tune_prefetch(&db).filter(|t| !t.forced && t.span_bytes < MIN_TUNE_BYTES),
        None
    );
    PF_DIST.store(PREFETCH_DEFAULT, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn montgomery_keyswitch_matches_naive() {
    let mut s = 3;
    for p in [crate::arith::P0, crate::arith::P1] {
        let m = Mont::new(p);
        assert_eq!(m.p.wrapping_mul(m.pinv_neg), u32::MAX); // p·(−p^{-1}) = −1
        for n in [1usize, 15, 16, 33, 2048] {
            let t = 3;
            let stride = n + 5;
            let w: Vec<u32> = (0..t * stride)
                .map(|_| (lcg(&mut s) % p as u64) as u32)
                .collect();
            let g: Vec<u32> = (0..t * stride)
                .map(|_| (lcg(&mut s) % p as u64) as u32)
                .collect();
            let wm: Vec<u32> = w
                .iter()
                .map(|&x| (x as u64 * m.r_mod_p as u64 % p as u64) as u32)
                .collect();
            let init: Vec<u32> = (0..n).map(|_| (lcg(&mut s) % p as u64) as u32).collect();
            let want: Vec<u32> = (0..n)
                .map(|i| {
                    let mut a = init[i] as u128;
                    for k in 0..t {
                        a += w[k * stride + i] as u128 * g[k * stride + i] as u128;
                    }
                    (a % p as u128) as u32
                })
                .collect();
            let mut fast = init.clone();
            keyswitch_acc(&m, &wm, &g, t, stride, n, &mut fast);
            let mut slow = init.clone();
            keyswitch_acc_scalar(&m, &wm, &g, t, stride, 0, n, &mut slow);
            assert_eq!(fast, want, "p={p} n={n}");
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
            if avx2() {
                got.fill(0);
                // SAFETY: avx2 detected; lengths as crt_gadget_digits asserts.
                unsafe { digits_simd::digits256(&crt, &res, log_z, t, &mut got) };
                assert_eq!(got, want, "avx2 log_z={log_z} t={t} n={n}");
            }
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
                if avx2() {
                    got.fill(7);
                    // SAFETY: AVX2 detected; src.len() = got.len() = n ≥ 32.
                    unsafe { ntt_avx2::forward_reversed_i16(&t, &src, &mut got) };
                    assert_eq!(got, want, "avx2 {what}");
                }
                if avx512() {
                    got.fill(7);
                    // SAFETY: AVX-512F/BW detected; lengths as above.
                    unsafe { ntt_avx512::forward_reversed_i16(&t, &src, &mut got) };
                    assert_eq!(got, want, "avx512 {what}");
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
        if avx2() {
            a.fill(0);
            // SAFETY: avx2 detected; sp is a permutation of 0..n.
            unsafe { digits_simd::permute256(&src, &sp.perm, sp.within8, &mut a) };
            assert_eq!(a, b);
        }
    }
}

#[test]
fn keyswitch_avx2_kernels_match_scalar() {
    with_avx2("keyswitch_avx2_kernels_match_scalar", || {
        #[cfg(target_arch = "x86_64")]
        {
            let mut s = 31;
            for p in [crate::arith::P0, crate::arith::P1] {
                let m = Mont::new(p);
                for n in [1usize, 7, 8, 9, 15, 16, 33, 1000, 2048] {
                    let r = |s: &mut u64, len: usize| -> Vec<u32> {
                        (0..len).map(|_| (lcg(s) % p as u64) as u32).collect()
                    };
                    // keyswitch_acc: t rows of stride n + 5 (w in Montgomery form)
                    for t in 1..=3 {
                        let stride = n + 5;
                        let (w, g) = (r(&mut s, t * stride), r(&mut s, t * stride));
                        let init = r(&mut s, n);
                        let (mut a, mut b) = (init.clone(), init.clone());
                        // SAFETY: AVX2 detected; rows and out have the lengths required.
                        unsafe { avx2_ks::keyswitch_acc(&m, &w, &g, t, stride, n, &mut a) };
                        keyswitch_acc_scalar(&m, &w, &g, t, stride, 0, n, &mut b);
                        assert_eq!(a, b, "keyswitch p={p} n={n} t={t}");
                    }
                    // plus_minus
                    let (e, o, mono) = (r(&mut s, n), r(&mut s, n), r(&mut s, n));
                    let (mut p1, mut m1, mut p2, mut m2) =
                        (vec![0; n], vec![0; n], vec![0; n], vec![0; n]);
                    // SAFETY: AVX2 detected; all slices have n words.
                    unsafe { avx2_ks::plus_minus(&m, &e, &o, &mono, &mut p1, &mut m1) };
                    plus_minus_scalar(&m, &e, &o, &mono, &mut p2, &mut m2, 0, n);
                    assert_eq!((&p1, &m1), (&p2, &m2), "plus_minus p={p} n={n}");
                    // add_permuted with a random permutation
                    let mut perm: Vec<u32> = (0..n as u32).collect();
                    for i in (1..n).rev() {
                        perm.swap(i, (lcg(&mut s) % (i as u64 + 1)) as usize);
                    }
                    let (mut a, mut b) = (vec![0; n], vec![0; n]);
                    // SAFETY: AVX2 detected; perm is a permutation of 0..n
                    // (random: the gather path).
                    unsafe { avx2_ks::add_permuted(p, &p1, &m1, &perm, false, &mut a) };
                    add_permuted_scalar(p, &p1, &m1, &perm, &mut b, 0);
                    assert_eq!(a, b, "add_permuted p={p} n={n}");
                    // block-structured (reversal, 8 | n): the vpermd path
                    if n % 8 == 0 {
                        let rev: Vec<u32> = (0..n as u32).rev().collect();
                        assert!(SlotPerm::new(rev.clone()).within8);
                        // SAFETY: AVX2 detected; the reversal maps aligned
                        // blocks of 8 onto aligned blocks of 8, 8 | n.
                        unsafe { avx2_ks::add_permuted(p, &p1, &m1, &rev, true, &mut a) };
                        add_permuted_scalar(p, &p1, &m1, &rev, &mut b, 0);
                        assert_eq!(a, b, "add_permuted (blocks) p={p} n={n}");
                    }
                }
            }
        }
    });
}

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

#[test]
fn pack_avx2_kernels_match_scalar() {
    with_avx2("pack_avx2_kernels_match_scalar", || {
        #[cfg(target_arch = "x86_64")]
        {
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
                        // SAFETY: AVX2 detected; r holds base + 16 values,
                        // indices < 16, offsets < w, out long enough.
                        unsafe { pack_simd::groups256(&r, &groups, w, pb, &mut a, stride) };
                        pack_groups_scalar(&r, &groups, w, pb, &mut b, stride);
                        assert_eq!(a, b, "groups w={w} pb={pb} ng={ng} stride={stride}");
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
                        // SAFETY: AVX2 detected; every window i + 1 ≤ n of
                        // every group is inside r, every store inside out,
                        // off < w.
                        unsafe { pack_simd::columns8_256(&r, len, w, pb, &starts, &mut a, stride) };
                        pack_columns_chunks(&r, len, w, pb, &starts, &mut b, stride);
                        let what = format!("w={w} pb={pb} n={n} groups={groups} {stride:?}");
                        assert_eq!(a, b, "columns8 {what}");
                    }
                }
            }
        }
    });
}

#[test]
fn mul_acc_lazy_avx2_matches_scalar() {
    with_avx2("mul_acc_lazy_avx2_matches_scalar", || {
        #[cfg(target_arch = "x86_64")]
        {
            let mut s = 17;
            for n in [0usize, 1, 7, 8, 9, 31, 1024, 2048, 2053] {
                let r = |s: &mut u64, len: usize| -> Vec<u32> {
                    (0..len).map(|_| (lcg(s) % (1 << 28)) as u32).collect()
                };
                // a and b may be longer than acc
                let (a, b) = (r(&mut s, n + 3), r(&mut s, n));
                let init: Vec<u64> = (0..n).map(|_| lcg(&mut s) >> 2).collect();
                let (mut x, mut y) = (init.clone(), init.clone());
                let mut z = init.clone();
                for _ in 0..3 {
                    // SAFETY: AVX2 detected; a, b hold ≥ n words.
                    unsafe { rns_simd::mul_acc_lazy_avx2(&a, &b, &mut x) };
                    mul_acc_lazy_scalar(&a, &b, &mut y, 0);
                    if avx512() {
                        // SAFETY: AVX-512F detected; a, b hold ≥ n words.
                        unsafe { rns_simd::mul_acc_lazy_avx512(&a, &b, &mut z) };
                    }
                }
                assert_eq!(x, y, "n={n}");
                if avx512() {
                    assert_eq!(z, y, "avx512 n={n}");
                }
                for i in 0..n {
                    assert_eq!(y[i], init[i] + 3 * a[i] as u64 * b[i] as u64);
                }
            }
        }
    });
}

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
                if avx2() {
                    let mut x = init.clone();
                    // SAFETY: AVX2 detected; every run has ≥ n elements.
                    unsafe { runs_simd::runs256(&mut x, &terms, &g) };
                    assert_eq!(x, c, "avx2 n={n} terms={nt}");
                }
                if avx512() {
                    let mut x = init.clone();
                    // SAFETY: AVX-512F detected; every run has ≥ n elements.
                    unsafe { runs_simd::runs512(&mut x, &terms, &g) };
                    assert_eq!(x, c, "avx512 n={n} terms={nt}");
                }
            }
        }
    }
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
        for k in Kernel::available() {
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
            if avx2() {
                let mut v = vec![u32::MAX; n];
                // SAFETY: AVX2 detected; a, x hold (blocks − 1)·stride + n
                // words below 2^28; blocks ≤ SUM_BLOCKS_MAX.
                unsafe { rns_simd::mul_sum_blocks_mod_avx2(&a, &x, stride, blocks, p, &mut v) };
                assert_eq!(v, want, "avx2 {what}");
            }
            if avx512() {
                let mut v = vec![u32::MAX; n];
                // SAFETY: AVX-512F detected; bounds as above.
                unsafe { rns_simd::mul_sum_blocks_mod_avx512(&a, &x, stride, blocks, p, &mut v) };
                assert_eq!(v, want, "avx512 {what}");
            }
        }
    }
}
