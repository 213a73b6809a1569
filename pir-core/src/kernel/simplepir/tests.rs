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
        (32, 16),
        (33, 17),
        (64, 19),
        (96, 16),
        (100, 9),
        (1024, 13),
        (1024, 35),
        (4096, 64),
        (4160, 23),
        (130, 7),
        (2048, 19),
        // panels of 1056 rows, taken by a batch in slices of 352
        (1056, 17),
        // panels of 1536 rows, slices of 512
        (3072, 16),
        // four panels of 2048 rows: the prefetch ahead crosses panels and
        // runs past the end of the tiled region
        (8192, 33),
        // three tiles: a batch takes a pair and then a tile alone
        (2048, 50),
    ] {
        let cm: Vec<u8> = (0..ell1 * ell2).map(|_| lcg(&mut s) as u8).collect();
        let db = Database::from_column_major(DbShape { ell1, ell2 }, 8, cm.clone()).unwrap();
        let view = View::of(&db);
        for nq in [1, 2, 3, 4, 5, 6, 7, 11, 13, 16, 17, 23] {
            let qs: Vec<Vec<u32>> = (0..nq)
                .map(|_| (0..ell1).map(|_| lcg(&mut s) as u32).collect())
                .collect();
            let split: Vec<SplitQuery> = qs.iter().map(|q| SplitQuery::new(q)).collect();
            let mut out = vec![vec![0u32; ell2]; nq];
            let c1s: Vec<&[u32]> = qs.iter().map(Vec::as_slice).collect();
            simplepir(&db, &c1s, &mut out);
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

/// `q` queries over the quads of `data`, with the extremes of c1 on
/// every fifth row, random starting sums, and what the scalar twin
/// leaves in them: (c1, the split queries, the starting sums, the sums
/// wanted).
#[allow(clippy::type_complexity)]
fn group_case(
    s: &mut u64,
    q: usize,
    data: &[u8],
) -> (
    Vec<Vec<u32>>,
    Vec<SplitQuery>,
    Vec<[u32; 16]>,
    Vec<[u32; 16]>,
) {
    let rows = data.len() / 16;
    let c1: Vec<Vec<u32>> = (0..q)
        .map(|i| {
            (0..rows)
                .map(|r| match (i + r) % 5 {
                    0 => u32::MAX,
                    1 => 0x8000_8080,
                    _ => lcg(s) as u32,
                })
                .collect()
        })
        .collect();
    let split: Vec<SplitQuery> = c1.iter().map(|c| SplitQuery::new(c)).collect();
    let init: Vec<[u32; 16]> = (0..q)
        .map(|_| std::array::from_fn(|_| lcg(s) as u32))
        .collect();
    let mut want = init.clone();
    for (sq, w) in split.iter().zip(want.iter_mut()) {
        group_scalar(data, sq.rows(0, rows), w);
    }
    (c1, split, init, want)
}

/// Every slice kernel, for every group size it takes, against its scalar
/// twin: extreme records and query words, slices of 8 to 128 quads, and
/// prefetch spans shorter than, as long as and longer than the slice.
#[test]
fn slice_kernels_match_scalar_twin() {
    let mut s = 5;
    for quads in [8usize, 16, 128] {
        let rows = 4 * quads;
        let mut data: Vec<u8> = (0..64 * quads).map(|_| lcg(&mut s) as u8).collect();
        // the extremes of both operands
        data[..64].fill(0x80);
        data[64..128].fill(0x7f);
        let ahead: Vec<u8> = (0..64 * 2 * quads + 17)
            .map(|_| lcg(&mut s) as u8)
            .collect();
        for k in kernels("slice_kernels_match_scalar_twin") {
            for q in 1..=group_max(k) {
                let (c1, split, init, want) = group_case(&mut s, q, &data);
                // the scalar twin against the plain definition
                for (i, c) in c1.iter().enumerate() {
                    for col in 0..16 {
                        let mut sum = init[i][col];
                        for (r, &cr) in c.iter().enumerate() {
                            let d = data[r / 4 * 64 + 4 * col + r % 4] as i8 as i32 as u32;
                            sum = sum.wrapping_add(cr.wrapping_mul(d));
                        }
                        assert_eq!(want[i][col], sum, "scalar twin, column {col}");
                    }
                }
                for a in [0, 64, 64 * quads, ahead.len()] {
                    let mut got = init.clone();
                    group_with(k, &data, &split, (0, rows), &ahead[..a], &mut got);
                    assert_eq!(got, want, "{k:?}, {q} queries, {quads} quads, ahead {a}");
                }
                // the two-tile kernel: this slice beside its reverse (the
                // extremes at the other end)
                if !pairs_for(k, 2) || q > PAIR_GROUP {
                    continue;
                }
                let other: Vec<u8> = data.iter().rev().copied().collect();
                let mut want2 = want.clone();
                let init2: Vec<[u32; 16]> = want.iter().map(|w| w.map(|x| !x)).collect();
                for ((sq, w), i) in split.iter().zip(want2.iter_mut()).zip(&init2) {
                    *w = *i;
                    group_scalar(&other, sq.rows(0, rows), w);
                }
                for (a, stage) in [0, 64, 128 * quads, ahead.len()]
                    .into_iter()
                    .flat_map(|a| [(a, false), (a, true)])
                {
                    let mut got: Vec<[[u32; 16]; 2]> =
                        init.iter().zip(&init2).map(|(x, y)| [*x, *y]).collect();
                    pair_with(
                        [&data, &other],
                        &split,
                        (0, rows),
                        &ahead[..a],
                        stage,
                        &mut got,
                    );
                    for (i, g) in got.iter().enumerate() {
                        assert_eq!(
                            g,
                            &[want[i], want2[i]],
                            "pairs, {q} queries, {quads} quads, ahead {a}, staged {stage}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn balanced_groups_cover_the_batch() {
    for max in 1..=6 {
        for nq in 0..=40 {
            let g: Vec<_> = balanced_groups(nq, max).collect();
            assert_eq!(g.len(), nq.div_ceil(max), "{nq} by {max}");
            assert_eq!(g.iter().map(|r| r.len()).sum::<usize>(), nq);
            assert!(g.windows(2).all(|w| w[0].end == w[1].start));
            let (lo, hi) = (
                g.iter().map(|r| r.len()).min().unwrap_or(0),
                g.iter().map(|r| r.len()).max().unwrap_or(0),
            );
            assert!(hi <= max && hi - lo <= 1, "{nq} by {max}: {g:?}");
        }
    }
    assert_eq!(
        balanced_groups(7, 3).collect::<Vec<_>>(),
        [0..3, 3..5, 5..7]
    );
}

#[test]
fn query_split_reconstructs_c1() {
    let mut s = 9;
    let c1: Vec<u32> = (0..100)
        .map(|i| match i % 4 {
            0 => u32::MAX,
            1 => 0x8000,
            _ => lcg(&mut s) as u32,
        })
        .collect();
    let q = SplitQuery::new(&c1);
    assert_eq!(q.lo.len(), 128);
    for (r, &c) in c1.iter().enumerate() {
        let lohi = (q.lo[r] as i32 as u32).wrapping_add((q.hi[r] as i32 as u32) << 16);
        assert_eq!(lohi, c, "lo/hi of row {r}");
        let (l, h) = (q.halves[r / 4 * 8 + r % 4], q.halves[r / 4 * 8 + 4 + r % 4]);
        assert_eq!((l, h), (q.lo[r], q.hi[r]), "halves of row {r}");
        let bytes: [u8; 4] = std::array::from_fn(|k| q.digits[r / 4 * 16 + 4 * k + r % 4]);
        assert_eq!(u32::from_le_bytes(bytes), c, "digits of row {r}");
    }
    assert!(q.digits[4 * 100..].iter().all(|&b| b == 0));
    assert!(q.lo[100..].iter().chain(&q.hi[100..]).all(|&v| v == 0));
    assert_eq!(q.halves.len(), 2 * 128);
    assert!(q.halves[2 * 100..].iter().all(|&v| v == 0));
    // the word kernel's form: per quad lo/hi of a_m = c[2m] and
    // b_m = c[2m + 1] − 2^8·c[2m], and the prefix sums of the even rows
    let c = |r: usize| c1.get(r).copied().unwrap_or(0);
    let (mut even, mut zero_even) = (0u32, true);
    for i in 0..128 / 4 {
        assert_eq!(q.even[i], even, "even rows before quad {i}");
        let w = &q.words[4 * i..4 * i + 4];
        for m in 0..2 {
            let half = |x: u32| (x >> (16 * m)) as u16 as i16 as i32 as u32;
            let a = half(w[0]).wrapping_add(half(w[1]) << 16);
            let b = half(w[2]).wrapping_add(half(w[3]) << 16);
            let (even_row, odd_row) = (c(4 * i + 2 * m), c(4 * i + 2 * m + 1));
            assert_eq!(a, even_row, "a_{m} of quad {i}");
            assert_eq!(b, odd_row.wrapping_sub(even_row << 8), "b_{m} of quad {i}");
            even = even.wrapping_add(even_row);
            zero_even &= even_row == 0;
        }
    }
    assert_eq!(q.even[128 / 4], even);
    assert!(!zero_even);
    assert_eq!(q.words(8, 100).1, q.even[25].wrapping_sub(q.even[2]) << 7);
    // the `vpmulld` kernel's form: per quad c_0 and c_x − 2^8·c_{x−1}, and
    // the prefix sums of all rows
    let mut all = 0u32;
    for i in 0..128 / 4 {
        assert_eq!(q.all[i], all, "rows before quad {i}");
        let w = &q.dwords[4 * i..4 * i + 4];
        // undo the differences: c_x = w_x + 2^8·c_{x−1}
        let mut prev = 0u32;
        for (x, &wx) in w.iter().enumerate() {
            let cx = wx.wrapping_add(prev << 8);
            assert_eq!(cx, c(4 * i + x), "dword {x} of quad {i}");
            prev = cx;
            all = all.wrapping_add(cx);
        }
    }
    assert_eq!(q.all[128 / 4], all);
    assert_eq!(q.dwords(8, 100).1, q.all[25].wrapping_sub(q.all[2]) << 7);
}

/// The form a split with the form switched `on` holds: that of a full
/// split, or nothing.
fn built<T: Clone>(on: bool, full: &[T]) -> Vec<T> {
    if on {
        full.to_vec()
    } else {
        Vec::new()
    }
}

/// A pass builds only the forms its kernel reads, each equal to the same
/// form of a full split.
#[test]
fn a_pass_splits_only_the_forms_it_reads() {
    use Avx2Batch::{Mulld, Words};
    let none = Forms {
        halves: false,
        words: false,
        dwords: false,
        digits: false,
    };
    for big in [Words, Mulld] {
        assert_eq!(Forms::for_batch(Kernel::Scalar, big, 4), none);
        assert_eq!(Forms::for_batch(Kernel::Avx512Bw, big, 4), none);
    }
    let vnni = Forms {
        digits: true,
        ..none
    };
    assert_eq!(Forms::for_batch(Kernel::Avx512Vnni, Mulld, 1), vnni);
    let half_quad = Forms {
        halves: true,
        ..none
    };
    let word = Forms {
        words: true,
        ..none
    };
    let dword = Forms {
        dwords: true,
        ..none
    };
    let words_and_halves = Forms {
        words: true,
        ..half_quad
    };
    let dwords_and_halves = Forms {
        dwords: true,
        ..half_quad
    };
    let avx2 = |big, nq| Forms::for_batch(Kernel::Avx2, big, nq);
    for nq in [1, 2, 3, 5, 6, 8] {
        assert_eq!(avx2(Words, nq), half_quad, "{nq}");
    }
    for nq in [7, 16, 64] {
        assert_eq!(avx2(Words, nq), words_and_halves, "{nq}");
    }
    // a batch of 4 is one group of 4: the word form alone
    assert_eq!(avx2(Words, 4), word);
    // groups of at most 5: 6 is 3 + 3, 11 is 4 + 4 + 3
    for nq in [1, 2, 3, 6] {
        assert_eq!(avx2(Mulld, nq), half_quad, "{nq}");
    }
    for nq in [4, 5, 8, 9, 10, 16, 64] {
        assert_eq!(avx2(Mulld, nq), dword, "{nq}");
    }
    for nq in [7, 11] {
        assert_eq!(avx2(Mulld, nq), dwords_and_halves, "{nq}");
    }
    let mut s = 11;
    let c1: Vec<u32> = (0..133).map(|_| lcg(&mut s) as u32).collect();
    let all = SplitQuery::new(&c1);
    for forms in [
        none,
        vnni,
        half_quad,
        word,
        dword,
        words_and_halves,
        dwords_and_halves,
        Forms::ALL,
    ] {
        let q = SplitQuery::with_forms(&c1, forms);
        assert_eq!((&q.lo, &q.hi), (&all.lo, &all.hi));
        assert_eq!(q.words, built(forms.words, &all.words));
        assert_eq!(q.even, built(forms.words, &all.even));
        assert_eq!(q.dwords, built(forms.dwords, &all.dwords));
        assert_eq!(q.all, built(forms.dwords, &all.all));
        assert_eq!(q.halves, built(forms.halves, &all.halves));
        assert_eq!(q.digits, built(forms.digits, &all.digits));
    }
}

/// AVX2 batches with the word kernel: groups of at most 3, a last two
/// groups of 2 merged into one group of 4; with the `vpmulld` kernel
/// balanced groups of at most 5; other kernels balanced groups.
#[test]
fn groups_cover_the_batch() {
    use Avx2Batch::{Mulld, Words};
    for (k, big) in [
        (Kernel::Scalar, Words),
        (Kernel::Avx2, Words),
        (Kernel::Avx2, Mulld),
        (Kernel::Avx512Vnni, Mulld),
    ] {
        for nq in 0..=40 {
            let g = groups_with(k, big, nq);
            assert_eq!(g.iter().map(|r| r.len()).sum::<usize>(), nq);
            assert!(g.first().is_none_or(|r| r.start == 0));
            assert!(g.windows(2).all(|w| w[0].end == w[1].start));
            assert!(g.iter().all(|r| !r.is_empty()));
            match (k, big) {
                (Kernel::Avx2, Words) => {
                    let twos = g.iter().filter(|r| r.len() == 2).count();
                    let fours = g.iter().filter(|r| r.len() == 4).count();
                    assert!(g.iter().all(|r| r.len() <= 4), "{nq}: {g:?}");
                    assert!(twos + 2 * fours <= 2, "{nq}: {g:?}");
                    assert!(fours == 0 || g.last().is_some_and(|r| r.len() == 4));
                }
                (Kernel::Avx2, Mulld) => {
                    let want: Vec<_> = balanced_groups(nq, 5).collect();
                    assert_eq!(g, want, "{nq}");
                }
                _ => assert!(g.iter().all(|r| r.len() <= group_max(k))),
            }
        }
    }
    assert_eq!(groups_with(Kernel::Avx2, Words, 4), vec![0..4usize]);
    assert_eq!(groups_with(Kernel::Avx2, Words, 8), [0..3, 3..6, 6..8]);
    assert_eq!(
        groups_with(Kernel::Avx2, Words, 16),
        [0..3, 3..6, 6..9, 9..12, 12..16]
    );
    assert_eq!(groups_with(Kernel::Avx2, Mulld, 4), vec![0..4usize]);
    assert_eq!(groups_with(Kernel::Avx2, Mulld, 7), [0..4, 4..7]);
    assert_eq!(
        groups_with(Kernel::Avx2, Mulld, 16),
        [0..4, 4..8, 8..12, 12..16]
    );
}

/// Both AVX2 batch kernels ([`Avx2Batch`]), whichever this core selects,
/// for every group size they take, against the scalar twin: extreme
/// records and coefficients, slices of 8 to 128 quads, prefetch spans
/// shorter than, as long as and longer than the slice.
#[cfg(target_arch = "x86_64")]
#[test]
fn both_avx2_batch_kernels_match_scalar_twin() {
    if !crate::kernel::avx2() {
        eprintln!("both_avx2_batch_kernels_match_scalar_twin: no AVX2 here, skipped");
        return;
    }
    let mut s = 21;
    for quads in [8usize, 16, 128] {
        let rows = 4 * quads;
        let mut data: Vec<u8> = (0..64 * quads).map(|_| lcg(&mut s) as u8).collect();
        data[..64].fill(0x80);
        data[64..128].fill(0x7f);
        data[128..192].fill(0xff);
        let ahead: Vec<u8> = (0..64 * 2 * quads + 17)
            .map(|_| lcg(&mut s) as u8)
            .collect();
        for (big, most) in [(Avx2Batch::Words, 4), (Avx2Batch::Mulld, 5)] {
            for q in 1..=most {
                let (_, split, init, want) = group_case(&mut s, q, &data);
                for a in [0, 64, 64 * quads, ahead.len()] {
                    let mut got = init.clone();
                    avx2_group(big, &data, &split, (0, rows), &ahead[..a], &mut got);
                    assert_eq!(got, want, "{big:?}, {q} queries, {quads} quads, ahead {a}");
                }
                // a slice from the middle of the query (the biases of
                // rows r0..r1 come from the prefix sums)
                if quads >= 16 {
                    let (r0, r1) = (32, rows);
                    let part = &data[16 * r0..16 * r1];
                    let mut want = init.clone();
                    for (sq, w) in split.iter().zip(want.iter_mut()) {
                        group_scalar(part, sq.rows(r0, r1), w);
                    }
                    let mut got = init.clone();
                    avx2_group(big, part, &split, (r0, r1), &[], &mut got);
                    assert_eq!(got, want, "{big:?}, {q} queries, rows {r0}..{r1}");
                }
            }
        }
    }
}

#[test]
fn cursor_visits_every_line_in_order() {
    for (bytes, iters) in [
        (0usize, 10usize),
        (64, 1),
        (65, 2),
        (640, 10),
        (64 * 7, 100),
        (64 * 43, 128),
        (64 * 86, 128),
        (64 * 128, 128),
        (64 * 128, 512),
        (64, 0),
    ] {
        let data = vec![0u8; bytes];
        let mut c = Cursor::new(&data, iters);
        let lines = bytes.div_ceil(64);
        if lines == 0 {
            assert_eq!(c.rate, 0, "nothing to prefetch");
            continue;
        }
        let seen: Vec<usize> = (0..iters.max(1)).map(|_| c.line()).collect();
        // in order, from the first line, no line skipped, none past the end
        assert_eq!(seen[0], 0, "{bytes} B over {iters}");
        assert!(seen.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
        assert_eq!(*seen.last().unwrap(), lines - 1, "{bytes} B over {iters}");
    }
    // more lines than iterations: in order, spread, never past the end
    let data = vec![0u8; 64 * 100];
    let mut c = Cursor::new(&data, 7);
    let seen: Vec<usize> = (0..7).map(|_| c.line()).collect();
    assert!(seen.windows(2).all(|w| w[1] > w[0]) && seen[6] < 100);
}

#[test]
fn spread_issues_every_line_once_in_order() {
    for (bytes, iters) in [
        (0usize, 10usize),
        (64, 1),
        (65, 1),
        (640, 10),
        (64 * 7, 100),
        (64 * 100, 7),
        (64 * 33, 32),
        (100, 0),
    ] {
        let mut sp = Spread::new(bytes, iters);
        let mut issued = Vec::new();
        let mut most = 0;
        let lines = bytes.div_ceil(64);
        let n = iters.max(1);
        for i in 1..=n {
            let due: Vec<usize> = sp.due().collect();
            most = most.max(due.len());
            issued.extend(due);
            // evenly spread: after i of n iterations, i·lines/n rounded
            // down or up have gone out
            assert!(
                (i * lines / n..=(i * lines).div_ceil(n)).contains(&issued.len()),
                "{bytes} B over {iters}: {} lines after {i} iterations",
                issued.len()
            );
        }
        assert_eq!(
            issued,
            (0..lines).collect::<Vec<_>>(),
            "{bytes} B over {iters}"
        );
        // no burst larger than needed
        assert!(
            most <= lines.div_ceil(iters.max(1)),
            "{bytes} B over {iters}"
        );
        assert!(sp.due().is_empty());
    }
}
