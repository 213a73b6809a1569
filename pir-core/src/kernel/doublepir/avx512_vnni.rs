use std::arch::x86_64::*;

/// Most 32-column steps before the 32-bit accumulators could overflow:
/// one `vpdpwssd` adds two products |x·l| ≤ 2^14·(2^10 − 1) per lane
/// (x: signed digit |x| ≤ 2^14; limbs < 2^10), i.e. < 2^25, so 60 steps
/// stay below 2^31 (60 · 2 · 2^14 · 1023 ≈ 2^30.9). A block has at most
/// BLOCK_COLS / 32 = 32 steps, so a quad never needs an intermediate
/// flush.
pub(super) const FLUSH: usize = 60;
const _: () = assert!(crate::digits::BLOCK_COLS / 32 <= FLUSH);

/// Sum of the 16 i32 lanes of `v` as 8 i64 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn widen(v: __m512i) -> __m512i {
    let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
    let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v));
    _mm512_add_epi64(lo, hi)
}

/// DoublePIR on one quad with `vpdpwssd`: `limbs` = (P0: bits 0–9,
/// 10–19, 20–27; P1: same) of the block's c2 residues (< 2^28),
/// interleaved per chunk, so Σ x·c2 = Σ x·l0 + 2^10·Σ x·l1 + 2^20·Σ x·l2
/// per prime. Each step loads the six limb vectors once for the four
/// rows: 24 accumulators + 6 limbs + 1 digit vector = 31 zmm registers.
///
/// # Safety
/// avx512f, avx512bw and avx512vnni must be available; `quad` holds
/// 4·w digits in chunk order and `limbs` 6·w entries, w a multiple of
/// 32 and at most 32·FLUSH.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn quad_limbs(quad: &[i16], limbs: &[i16], acc: &mut [[i64; 2]; 4]) {
    let chunks = quad.len() / 128;
    assert!(
        quad.len() == chunks * 128 && limbs.len() == chunks * 192 && chunks <= FLUSH,
        "quad shape"
    );
    if chunks == 0 {
        return;
    }
    // The loop is written in assembly: with 24 accumulators (four rows
    // × six limbs) + 6 limbs + 1 digit vector = 31 of the 32 zmm
    // registers, LLVM's allocator spills accumulators to the stack on
    // every step (even with named variables, and even for two rows),
    // and the pass ran at half speed.
    let z = _mm512_setzero_si512();
    let (mut a00, mut a01, mut a02, mut a03, mut a04, mut a05) = (z, z, z, z, z, z);
    let (mut a10, mut a11, mut a12, mut a13, mut a14, mut a15) = (z, z, z, z, z, z);
    let (mut a20, mut a21, mut a22, mut a23, mut a24, mut a25) = (z, z, z, z, z, z);
    let (mut a30, mut a31, mut a32, mut a33, mut a34, mut a35) = (z, z, z, z, z, z);
    // SAFETY: the loop runs `chunks` ≥ 1 times; iteration c reads the
    // 384 bytes at limbs + 384c (limb t of chunk c at 64t) and the 256
    // bytes at quad + 256c (row i at 64i), all inside the slices
    // (asserted above). It writes only its register operands, touches
    // no stack and leaves the flags clobbered (declared by default).
    unsafe {
        std::arch::asm!(
            "2:",
            "vmovdqu64 zmm0, [{lp}]",
            "vmovdqu64 zmm1, [{lp} + 64]",
            "vmovdqu64 zmm2, [{lp} + 128]",
            "vmovdqu64 zmm3, [{lp} + 192]",
            "vmovdqu64 zmm4, [{lp} + 256]",
            "vmovdqu64 zmm5, [{lp} + 320]",
            "vmovdqu64 zmm6, [{xp}]",
            "vpdpwssd zmm7, zmm6, zmm0",
            "vpdpwssd zmm8, zmm6, zmm1",
            "vpdpwssd zmm9, zmm6, zmm2",
            "vpdpwssd zmm10, zmm6, zmm3",
            "vpdpwssd zmm11, zmm6, zmm4",
            "vpdpwssd zmm12, zmm6, zmm5",
            "vmovdqu64 zmm6, [{xp} + 64]",
            "vpdpwssd zmm13, zmm6, zmm0",
            "vpdpwssd zmm14, zmm6, zmm1",
            "vpdpwssd zmm15, zmm6, zmm2",
            "vpdpwssd zmm16, zmm6, zmm3",
            "vpdpwssd zmm17, zmm6, zmm4",
            "vpdpwssd zmm18, zmm6, zmm5",
            "vmovdqu64 zmm6, [{xp} + 128]",
            "vpdpwssd zmm19, zmm6, zmm0",
            "vpdpwssd zmm20, zmm6, zmm1",
            "vpdpwssd zmm21, zmm6, zmm2",
            "vpdpwssd zmm22, zmm6, zmm3",
            "vpdpwssd zmm23, zmm6, zmm4",
            "vpdpwssd zmm24, zmm6, zmm5",
            "vmovdqu64 zmm6, [{xp} + 192]",
            "vpdpwssd zmm25, zmm6, zmm0",
            "vpdpwssd zmm26, zmm6, zmm1",
            "vpdpwssd zmm27, zmm6, zmm2",
            "vpdpwssd zmm28, zmm6, zmm3",
            "vpdpwssd zmm29, zmm6, zmm4",
            "vpdpwssd zmm30, zmm6, zmm5",
            "add {lp}, 384",
            "add {xp}, 256",
            "dec {n}",
            "jnz 2b",
            lp = inout(reg) limbs.as_ptr() => _,
            xp = inout(reg) quad.as_ptr() => _,
            n = inout(reg) chunks => _,
            out("zmm0") _,
            out("zmm1") _,
            out("zmm2") _,
            out("zmm3") _,
            out("zmm4") _,
            out("zmm5") _,
            out("zmm6") _,
            inout("zmm7") a00,
            inout("zmm8") a01,
            inout("zmm9") a02,
            inout("zmm10") a03,
            inout("zmm11") a04,
            inout("zmm12") a05,
            inout("zmm13") a10,
            inout("zmm14") a11,
            inout("zmm15") a12,
            inout("zmm16") a13,
            inout("zmm17") a14,
            inout("zmm18") a15,
            inout("zmm19") a20,
            inout("zmm20") a21,
            inout("zmm21") a22,
            inout("zmm22") a23,
            inout("zmm23") a24,
            inout("zmm24") a25,
            inout("zmm25") a30,
            inout("zmm26") a31,
            inout("zmm27") a32,
            inout("zmm28") a33,
            inout("zmm29") a34,
            inout("zmm30") a35,
            options(nostack, readonly),
        );
    }
    let a = [
        [a00, a01, a02, a03, a04, a05],
        [a10, a11, a12, a13, a14, a15],
        [a20, a21, a22, a23, a24, a25],
        [a30, a31, a32, a33, a34, a35],
    ];
    // x[2i + h]: row i, prime h, limbs combined in 8 i64 lanes.
    let x: [__m512i; 8] = std::array::from_fn(|k| {
        let (ai, h) = (&a[k / 2], k % 2);
        _mm512_add_epi64(
            widen(ai[3 * h]),
            _mm512_add_epi64(
                _mm512_slli_epi64::<10>(widen(ai[3 * h + 1])),
                _mm512_slli_epi64::<20>(widen(ai[3 * h + 2])),
            ),
        )
    });
    // Transposed reduction of the eight vectors to their eight lane
    // sums, in the order of `acc` (row-major [row][prime]): fewer
    // shuffles than eight horizontal sums, which share the vector pipes
    // with the next quad's `vpdpwssd`s. 128-bit lane j of p[m] holds
    // [x[2m], x[2m + 1]] summed over lanes 2j, 2j + 1; each
    // shuffle-and-add level then adds 128-bit lanes in pairs.
    let p: [__m512i; 4] = std::array::from_fn(|m| {
        let (e, o) = (x[2 * m], x[2 * m + 1]);
        _mm512_add_epi64(_mm512_unpacklo_epi64(e, o), _mm512_unpackhi_epi64(e, o))
    });
    let pairs = |a: __m512i, b: __m512i| {
        _mm512_add_epi64(
            _mm512_shuffle_i64x2::<0b10_00_10_00>(a, b),
            _mm512_shuffle_i64x2::<0b11_01_11_01>(a, b),
        )
    };
    let sums = pairs(pairs(p[0], p[1]), pairs(p[2], p[3]));
    let flat = acc.as_mut_ptr() as *mut __m512i;
    // SAFETY: `acc` is 4 × 2 i64, exactly one 512-bit vector.
    unsafe { _mm512_storeu_si512(flat, _mm512_add_epi64(_mm512_loadu_si512(flat), sums)) };
}
